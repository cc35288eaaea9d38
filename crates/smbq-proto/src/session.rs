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
    /// This connection is being bound to a session established elsewhere (MS-SMB2 3.3.5.5.2,
    /// SMB2_SESSION_FLAG_BINDING): SESSION_SETUP legs to come, checked with the session's
    /// signing key; nothing else may use the session here yet.
    Binding(Exchange),
}

pub(crate) struct Session {
    pub id: u64,
    /// The session's entry in the server-wide table: ended there, it is gone here too.
    pub record: Arc<crate::sessions::SessionRecord>,
    pub state: SessionState,
    pub identity: Option<Arc<Identity>>,
    pub signer: Option<Signer>,
    /// Seals server-to-client messages.
    pub encryptor: Option<Arc<crate::transform::TransformSealer>>,
    /// Opens client-to-server messages.
    pub decryptor: Option<Sealer>,
    pub signing_required: bool,
    pub encrypt_data: bool,
    /// The keys came from an anonymous logon, which anyone can derive: they verify and open
    /// what the client sends, but do not make the session one that can encrypt, and a
    /// re-authentication (which keeps them) may not make it anyone else's.
    pub public_keys: bool,
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
        let exchange = Exchange {
            acceptor: Box::new(acceptor),
            preauth,
        };
        Self::starting(record, SessionState::InProgress(exchange))
    }

    /// A session with no keys yet, in `state`.
    fn starting(record: Arc<crate::sessions::SessionRecord>, state: SessionState) -> Self {
        Self {
            id: record.id(),
            record,
            state,
            identity: None,
            signer: None,
            encryptor: None,
            decryptor: None,
            signing_required: false,
            encrypt_data: false,
            public_keys: false,
            expires_at: None,
        }
    }

    /// A channel being bound to `record`'s session: it checks the binding legs with the
    /// session's signing key and shares its sealing keys (MS-SMB2 3.3.5.5.2).
    pub fn binding(
        record: Arc<crate::sessions::SessionRecord>,
        est: &crate::sessions::Established,
        acceptor: Acceptor,
        preauth: PreauthHash,
    ) -> Self {
        let exchange = Exchange {
            acceptor: Box::new(acceptor),
            preauth,
        };
        Self {
            signer: Some(est.signer.clone()),
            encryptor: est.encryptor.clone(),
            decryptor: est.decryptor.clone(),
            signing_required: est.signing_required,
            encrypt_data: est.encrypt_data,
            ..Self::starting(record, SessionState::Binding(exchange))
        }
    }

    /// Authenticated and not ended (in the server-wide table): new requests may use it.
    pub fn is_valid(&self) -> bool {
        matches!(self.state, SessionState::Valid { .. }) && !self.record.has_ended()
    }

    /// A channel bound to a session established elsewhere, its binding not finished.
    pub fn is_binding(&self) -> bool {
        matches!(self.state, SessionState::Binding(_))
    }

    /// The exchange in progress, if any.
    pub fn exchange(&mut self) -> Option<&mut Exchange> {
        match &mut self.state {
            SessionState::InProgress(x) | SessionState::Binding(x) => Some(x),
            SessionState::Valid { reauth } => reauth.as_mut(),
        }
    }

    /// The exchange a SESSION_SETUP continues; on a valid session without one, a
    /// re-authentication starts with `start()`.
    pub fn exchange_or(&mut self, start: impl FnOnce() -> Exchange) -> &mut Exchange {
        match &mut self.state {
            SessionState::InProgress(x) | SessionState::Binding(x) => x,
            SessionState::Valid { reauth } => reauth.get_or_insert_with(start),
        }
    }
}
