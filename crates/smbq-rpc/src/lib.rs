//! DCE/RPC over SMB named pipes (C706 chapter 12, MS-RPCE) with NDR20 marshalling and the
//! srvsvc interface (MS-SRVS), enough for `smbclient -L`, `rpcclient` and Windows Explorer to
//! list shares. No IO: the SMB server routes a pipe's WRITE / READ / FSCTL_PIPE_TRANSCEIVE bytes
//! into a [`PipeEndpoint`].
#![forbid(unsafe_code)]

pub mod client;
pub mod ndr;
pub mod pdu;
pub mod pipe;
pub mod srvsvc;

pub use pipe::PipeEndpoint;
pub use srvsvc::{ShareInfo, ShareKind, ShareSource};

use thiserror::Error;

/// Why a pipe operation failed. Every variant leaves the endpoint closed except
/// [`RpcError::PipeBusy`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RpcError {
    /// The bytes written cannot be framed as DCE/RPC PDUs.
    #[error("malformed PDU: {0}")]
    Malformed(#[from] pdu::PduError),
    /// An earlier protocol error ended the association.
    #[error("the RPC association was closed after a protocol error")]
    Closed,
    /// FSCTL_PIPE_TRANSCEIVE while unread output is queued (STATUS_PIPE_BUSY).
    #[error("the pipe holds unread data")]
    PipeBusy,
    /// The client kept writing without reading.
    #[error("too much unread output")]
    OutputFull,
}
