//! Per-connection session state (MS-SMB2 3.3.1.8): authentication in progress, then keys.

use std::sync::Arc;

use smbq_auth::{Acceptor, Identity};
use smbq_crypto::{PreauthHash, Sealer, Signer};

/// One SESSION_SETUP exchange: the NTLM acceptor and the preauth hash its messages feed
/// (MS-SMB2 3.3.5.5, 3.1.1 only).
pub(crate) struct Exchange {
    pub acceptor: Box<Acceptor>,
    pub preauth: PreauthHash,
}

pub(crate) enum SessionState {
    /// The first authentication: SESSION_SETUP legs still to come, no keys yet.
    InProgress(Exchange),
    /// Authenticated, keys set. `reauth` is a re-authentication in progress (MS-SMB2
    /// 3.3.5.5.2), which leaves the keys as they are.
    Valid { reauth: Option<Exchange> },
}

pub(crate) struct Session {
    pub id: u64,
    /// The session's entry in the server-wide table: ended there, it is gone here too.
    pub record: Arc<crate::sessions::SessionRecord>,
    pub state: SessionState,
    pub identity: Option<Arc<Identity>>,
    pub signer: Option<Signer>,
    /// Seals server-to-client messages.
    pub encryptor: Option<crate::transform::TransformSealer>,
    /// Opens client-to-server messages.
    pub decryptor: Option<Sealer>,
    pub signing_required: bool,
    pub encrypt_data: bool,
    /// MS-SMB2 3.3.1.8 Session.ExpirationTime: when the Kerberos ticket it was set up with
    /// ends; `None` for NTLM. Past it, requests get STATUS_NETWORK_SESSION_EXPIRED until
    /// the client re-authenticates (3.3.5.2.9).
    pub expires_at: Option<std::time::Instant>,
}

impl Session {
    pub fn new(
        record: Arc<crate::sessions::SessionRecord>,
        acceptor: Acceptor,
        preauth: PreauthHash,
    ) -> Self {
        Self {
            id: record.id(),
            record,
            state: SessionState::InProgress(Exchange {
                acceptor: Box::new(acceptor),
                preauth,
            }),
            identity: None,
            signer: None,
            encryptor: None,
            decryptor: None,
            signing_required: false,
            encrypt_data: false,
            expires_at: None,
        }
    }

    /// Authenticated and not ended (in the server-wide table): new requests may use it.
    pub fn is_valid(&self) -> bool {
        matches!(self.state, SessionState::Valid { .. }) && !self.record.has_ended()
    }

    /// The exchange in progress, if any.
    pub fn exchange(&mut self) -> Option<&mut Exchange> {
        match &mut self.state {
            SessionState::InProgress(x) => Some(x),
            SessionState::Valid { reauth } => reauth.as_mut(),
        }
    }

    /// The exchange a SESSION_SETUP continues; on a valid session without one, a
    /// re-authentication starts with `start()`.
    pub fn exchange_or(&mut self, start: impl FnOnce() -> Exchange) -> &mut Exchange {
        match &mut self.state {
            SessionState::InProgress(x) => x,
            SessionState::Valid { reauth } => reauth.get_or_insert_with(start),
        }
    }
}
