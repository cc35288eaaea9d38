//! Client errors, with NTSTATUS names and meanings a person can act on.

use smbq_proto::client::ClientError;
pub use smbq_proto::client::{AuthError, ProtocolError};
use smbq_wire::NtStatus;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server refused an operation.
    #[error("{op}: {} ({})", status_name(*.status), describe(*.status))]
    Status { op: &'static str, status: NtStatus },
    /// The connection ended (the reason is what the transport or the server said).
    #[error("connection lost: {0}")]
    Disconnected(String),
    /// The server sent something wrong, or the connection cannot do what was asked.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// A DCE/RPC exchange over a named pipe failed (`op` is the interface and step): the
    /// RPC layer lives above smbq-proto, so its error lives here.
    #[error("protocol error: {op}: {source}")]
    Rpc {
        op: &'static str,
        source: smbq_rpc::client::RpcClientError,
    },
    #[error("integrity check failed: {0}")]
    Integrity(&'static str),
    #[error("authentication failed: {0}")]
    Auth(#[from] AuthError),
    /// No Kerberos AP-REQ could be made (no ticket, KDC unreachable, no Kerberos library):
    /// nothing was sent, so another way to log on is safe to try.
    #[error("Kerberos: {0}")]
    NoKerberos(String),
    /// The transport's I/O failed (the connection's socket or stream).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A local file or stream the caller gave a transfer failed (`what` says which side); the
    /// connection is fine.
    #[error("{what}: {source}")]
    Local {
        what: &'static str,
        source: std::io::Error,
    },
    /// A task of a parallel transfer (`what`: read, write, copy) panicked or was cancelled.
    #[error("{what} task failed: {source}")]
    Task {
        what: &'static str,
        source: tokio::task::JoinError,
    },
    #[error("timed out: {0}")]
    Timeout(&'static str),
}

impl Error {
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Self::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl From<ClientError> for Error {
    fn from(e: ClientError) -> Self {
        match e {
            ClientError::Status { op, status } => Self::Status { op, status },
            ClientError::Protocol(p) => Self::Protocol(p),
            ClientError::Integrity(m) => Self::Integrity(m),
            ClientError::Auth(a) => Self::Auth(a),
        }
    }
}

impl From<smbq_wire::DecodeError> for Error {
    fn from(e: smbq_wire::DecodeError) -> Self {
        Self::Protocol(ProtocolError::Malformed(e))
    }
}

/// `NT_STATUS_LOGON_FAILURE`-style name (as smbclient prints), or hex for unknown codes.
pub fn status_name(s: NtStatus) -> String {
    let dbg = format!("{s:?}");
    if dbg.starts_with("NtStatus(") || dbg.starts_with("0x") {
        format!("NT_STATUS 0x{:08X}", s.0)
    } else {
        format!("NT_STATUS_{dbg}")
    }
}

/// What a status means for the person at the keyboard (MS-ERREF 2.3.1 wording, shortened).
pub fn describe(s: NtStatus) -> &'static str {
    match s {
        NtStatus::LOGON_FAILURE => "unknown user name or bad password",
        NtStatus::WRONG_PASSWORD => "the password is wrong",
        NtStatus::ACCOUNT_DISABLED => "the account is disabled",
        NtStatus::PASSWORD_EXPIRED => "the password has expired",
        NtStatus::ACCESS_DENIED => "access denied",
        NtStatus::BAD_NETWORK_NAME => "no such share on the server",
        NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::NO_SUCH_FILE => "no such file or directory",
        NtStatus::OBJECT_PATH_NOT_FOUND => "a directory in the path does not exist",
        NtStatus::OBJECT_NAME_COLLISION => "the name already exists",
        NtStatus::OBJECT_NAME_INVALID => "the name is not valid",
        NtStatus::FILE_IS_A_DIRECTORY => "it is a directory",
        NtStatus::NOT_A_DIRECTORY => "it is not a directory",
        NtStatus::DIRECTORY_NOT_EMPTY => "the directory is not empty",
        NtStatus::SHARING_VIOLATION => "the file is in use by another open",
        NtStatus::DELETE_PENDING => "the file is being deleted",
        NtStatus::DISK_FULL => "the disk is full",
        NtStatus::NOT_SUPPORTED => "the server does not support this",
        NtStatus::INVALID_PARAMETER => "the server rejected a parameter",
        NtStatus::NETWORK_NAME_DELETED => "the share or session was closed by the server",
        NtStatus::USER_SESSION_DELETED => "the session was closed by the server",
        NtStatus::INSUFFICIENT_RESOURCES => "the server is out of resources",
        NtStatus::CANCELLED => "the request was cancelled",
        NtStatus::END_OF_FILE => "end of file",
        _ => "see MS-ERREF",
    }
}
