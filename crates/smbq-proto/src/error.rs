//! Protocol violations: conditions after which the connection is dropped (as Windows does),
//! as opposed to errors answered with an NTSTATUS.

use smbq_wire::DecodeError;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Violation {
    #[error("frame header does not start with 0x00")]
    BadFrameHeader,
    #[error("zero-length frame")]
    EmptyFrame,
    #[error("frame of {len} bytes exceeds the limit of {limit}")]
    FrameTooLarge { len: u32, limit: u32 },
    /// A structure that does not decode; `what` names it, `error` says where it failed.
    #[error("malformed {what}: {error}")]
    Malformed {
        what: &'static str,
        #[source]
        error: DecodeError,
    },
    /// A compound chain whose NextCommand offsets do not describe whole, aligned messages
    /// inside the frame (MS-SMB2 3.3.5.2.7).
    #[error("malformed compound: {0}")]
    BadCompound(&'static str),
    /// SMB3 key derivation failed (MS-SMB2 3.3.5.5.3): no session can be set up.
    #[error("key derivation failed: {0}")]
    KeyDerivation(String),
    /// A state the engine should never reach (signing failed, a session vanished mid-setup):
    /// the connection is dropped rather than answered with wrong keys or signatures.
    #[error("internal error: {0}")]
    Internal(&'static str),
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
    /// A compressed message refused (MS-SMB2 3.3.5.2.1.2: every such case disconnects).
    #[error("{0}")]
    Compression(smbq_compress::DecompressError),
    #[error("unsupported protocol id")]
    BadProtocol,
    #[error("response received where a request was expected")]
    UnexpectedResponse,
    #[error("validate negotiate mismatch")]
    ValidateNegotiateMismatch,
    /// A frame on a QUIC data stream of a connection that was granted none
    /// (docs/multistream.md 8).
    #[error("data stream without a multi-stream grant")]
    DataStreamNotGranted,
    /// A control-only request on a data stream (docs/multistream.md 5.1).
    #[error("{0:?} on a data stream (control stream only)")]
    ControlOnly(smbq_wire::Command),
}
