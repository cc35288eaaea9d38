//! Protocol violations: conditions after which the connection is dropped (as Windows does),
//! as opposed to errors answered with an NTSTATUS.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    #[error("frame header does not start with 0x00")]
    BadFrameHeader,
    #[error("zero-length frame")]
    EmptyFrame,
    #[error("frame of {len} bytes exceeds the limit of {limit}")]
    FrameTooLarge { len: u32, limit: u32 },
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("request before NEGOTIATE")]
    NotNegotiated,
    #[error("second NEGOTIATE on a negotiated connection")]
    Renegotiate,
    #[error("no common dialect")]
    NoCommonDialect,
    #[error("message id {0} outside the credit window")]
    BadMessageId(u64),
    #[error("compound chain too long")]
    CompoundTooLong,
    #[error("decryption failed")]
    DecryptFailed,
    #[error("unsupported protocol id")]
    BadProtocol,
    #[error("response received where a request was expected")]
    UnexpectedResponse,
    #[error("validate negotiate mismatch")]
    ValidateNegotiateMismatch,
}
