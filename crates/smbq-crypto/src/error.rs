//! The one error type of this crate.

/// Why a cryptographic operation was refused or failed.
///
/// Deliberately coarse for failures on received data: callers must not learn (or log) more
/// than "did not authenticate".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CryptoError {
    #[error("key is {got} bytes, expected {expected}")]
    KeyLength { expected: usize, got: usize },
    #[error("nonce is {got} bytes, expected {expected}")]
    NonceLength { expected: usize, got: usize },
    #[error("message of {0} bytes is shorter than the 64-byte SMB2 header")]
    MessageTooShort(usize),
    #[error("payload too large for the cipher")]
    PayloadTooLarge,
    #[error("authentication failed")]
    AuthenticationFailed,
    #[error("dialect {0:#06x} has no SMB2 key derivation")]
    UnsupportedDialect(u16),
    #[error("dialect 3.1.1 key derivation needs the preauth integrity hash")]
    MissingPreauthHash,
}
