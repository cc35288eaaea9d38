//! SPNEGO (RFC 4178 / MS-SPNG) and NTLMv2 (MS-NLMP) as sans-IO state machines: an [`Acceptor`]
//! for the server and an [`Initiator`] for the client, each producing an identity and the
//! 16-byte session key SMB derives its signing and encryption keys from.
//!
//! Nothing here does IO or reads a clock: the current time is passed in as a FILETIME and
//! randomness is drawn from a caller-supplied `rand::RngCore` (or given directly in tests).
//!
//! Error mapping for SMB2 SESSION_SETUP (MS-SMB2 3.3.5.5.3): [`AuthError::nt_status`] gives
//! `STATUS_LOGON_FAILURE` for authentication failures and `STATUS_INVALID_PARAMETER` for
//! malformed or out-of-sequence tokens.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

mod acceptor;
mod der;
mod initiator;
mod kerberos;
pub mod kkdcp;
mod ntlm_crypto;
mod ntlm_msg;
mod spnego;

use smbq_wire::{DecodeError, NtStatus};
use thiserror::Error;

pub use acceptor::{AcceptStep, Acceptor, AcceptorConfig, Mechanism};
pub use initiator::{Credentials, Initiator};
pub use kerberos::{Kerberos, KerberosCompletion, KerberosInitiator, KerberosLogon};
pub use ntlm_crypto::nt_hash;
pub use spnego::spnego_init_token;
pub use zeroize::Zeroizing;

/// Largest security token accepted from the wire. Real NTLM/SPNEGO tokens are well under 4 KiB.
pub const MAX_TOKEN_LEN: usize = 64 * 1024;

/// Account lookup for the acceptor. Implementors match `user` case-insensitively (NTLMv2 itself
/// upper-cases the user name, MS-NLMP 3.3.2). The file-backed store lives in the binary.
pub trait Accounts: Send + Sync {
    /// The NT hash (MD4 of the UTF-16LE password, see [`nt_hash`]) of `user`, if it exists.
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]>;
}

impl<F> Accounts for F
where
    F: Fn(&str) -> Option<[u8; 16]> + Send + Sync,
{
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self(user)
    }
}

/// Who authenticated. For a guest mapping (`is_guest`), `user`/`domain` are what the client
/// claimed, not a verified account; for an anonymous logon both are empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub domain: String,
    pub is_guest: bool,
    pub is_anonymous: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthError {
    /// Bad password, unknown user without guest mapping, NTLMv1/LM response, or a failed MIC.
    #[error("logon failure for user {user:?}")]
    LogonFailure { user: String },
    /// Malformed SPNEGO/NTLMSSP framing.
    #[error("invalid security token: {0}")]
    InvalidToken(&'static str),
    /// A token larger than [`MAX_TOKEN_LEN`].
    #[error("security token of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// The peer offered no mechanism we accept (NTLMSSP, and Kerberos when configured).
    #[error("no common authentication mechanism")]
    NoCommonMechanism,
    /// The SPNEGO mechListMIC was missing where required or did not verify (RFC 4178 section 5).
    #[error("SPNEGO mechListMIC missing or invalid")]
    MechListMic,
    /// The peer answered negState reject.
    #[error("the peer rejected the authentication")]
    Rejected,
    /// A Kerberos AP-REQ was refused (bad or expired ticket, wrong service, replay, clock
    /// skew, a principal with no account); `status` is what Windows answers for that cause.
    #[error("Kerberos logon refused for {principal:?}: {reason}")]
    Kerberos {
        principal: String,
        status: NtStatus,
        reason: String,
    },
    /// The client offered NTLM where only Kerberos is accepted (`ntlm = false`).
    #[error("NTLM is turned off on this server; log on with Kerberos")]
    NtlmBlocked,
    /// `step` called after the exchange finished or failed.
    #[error("authentication step out of sequence")]
    OutOfSequence,
}

impl AuthError {
    /// The NTSTATUS an SMB2 server returns for this error in SESSION_SETUP.
    pub fn nt_status(&self) -> NtStatus {
        match self {
            Self::LogonFailure { .. } | Self::MechListMic | Self::Rejected => {
                NtStatus::LOGON_FAILURE
            }
            Self::Kerberos { status, .. } => *status,
            // Windows' answer when NTLM is restricted (MS-ERREF 2.3.1).
            Self::NtlmBlocked => NtStatus::NTLM_BLOCKED,
            Self::InvalidToken(_)
            | Self::TooLarge(_)
            | Self::NoCommonMechanism
            | Self::OutOfSequence => NtStatus::INVALID_PARAMETER,
        }
    }
}

impl From<DecodeError> for AuthError {
    fn from(_: DecodeError) -> Self {
        Self::InvalidToken("NTLMSSP: truncated message or field out of range")
    }
}
