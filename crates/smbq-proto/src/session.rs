//! Per-connection session state (MS-SMB2 3.3.1.8): authentication in progress, then keys.

use std::sync::Arc;

use smbq_auth::{Acceptor, Identity};
use smbq_crypto::{PreauthHash, Sealer, Signer};

pub(crate) enum SessionState {
    /// SESSION_SETUP legs still to come.
    InProgress {
        acceptor: Box<Acceptor>,
        preauth: PreauthHash,
    },
    Valid,
}

pub(crate) struct Session {
    pub id: u64,
    pub state: SessionState,
    /// A re-authentication in progress on a valid session (keys stay as they are).
    pub reauth: Option<(Box<Acceptor>, PreauthHash)>,
    pub identity: Option<Arc<Identity>>,
    pub signer: Option<Signer>,
    /// Seals server-to-client messages.
    pub encryptor: Option<Sealer>,
    /// Opens client-to-server messages.
    pub decryptor: Option<Sealer>,
    pub signing_required: bool,
    pub encrypt_data: bool,
    /// Counter half of the AEAD nonce; never repeats for a key.
    pub nonce_counter: u64,
}

impl Session {
    pub fn new(id: u64, acceptor: Acceptor, preauth: PreauthHash) -> Self {
        Self {
            id,
            state: SessionState::InProgress {
                acceptor: Box::new(acceptor),
                preauth,
            },
            reauth: None,
            identity: None,
            signer: None,
            encryptor: None,
            decryptor: None,
            signing_required: false,
            encrypt_data: false,
            nonce_counter: 0,
        }
    }

    pub fn is_valid(&self) -> bool {
        matches!(self.state, SessionState::Valid)
    }
}
