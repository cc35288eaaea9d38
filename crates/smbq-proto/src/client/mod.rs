//! The client role of an SMB2/3 connection, sans-IO: what a client must compute and check
//! (negotiate offer and answer, SESSION_SETUP legs with the preauth hash, key derivation,
//! signing, sealing, opening and splitting responses). The async client in `smbq-client`
//! owns the sockets, message ids and credits; everything here is deterministic given its input.

mod config;
mod incoming;
mod negotiate;
mod session;
mod setup;

pub use config::{ClientConfig, EncryptionPolicy};
pub use incoming::{Incoming, split_compound};
pub use negotiate::{
    Negotiated, negotiate_request, parse_negotiate_response, smb1_negotiate_request,
};
pub use session::SessionCrypto;
pub use setup::{SessionSetup, SetupStep};

use smbq_wire::NtStatus;

/// Why a client-side step failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status.
    #[error("{op}: server returned {status:?}")]
    Status { op: &'static str, status: NtStatus },
    /// The server sent something the protocol does not allow.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A signature or an AEAD tag did not verify.
    #[error("integrity check failed: {0}")]
    Integrity(&'static str),
    /// Authentication failed on the client's side (bad challenge, unsupported mechanism).
    #[error("authentication: {0}")]
    Auth(String),
}

impl ClientError {
    pub(crate) fn protocol(msg: impl Into<String>) -> Self {
        Self::Protocol(msg.into())
    }
}

impl From<smbq_wire::DecodeError> for ClientError {
    fn from(e: smbq_wire::DecodeError) -> Self {
        Self::Protocol(format!("malformed response: {e}"))
    }
}
