//! The local admin socket (issue 17): `smbq status` talks to the running server through a Unix
//! domain socket in the state directory, mode 0600, and the server also checks each peer's
//! credentials (its owner or root). No network listener. One JSON request line, one JSON
//! reply line, then the server closes.

pub mod listener;
pub mod status_cmd;
mod table;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The socket's name in the state directory.
pub const SOCKET_NAME: &str = "admin.sock";

/// Longest request line the server reads.
pub const MAX_REQUEST: usize = 4096;

pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join(SOCKET_NAME)
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    Status,
    KillSession { id: u64 },
    CloseFile { id: u64 },
    Reload,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    Status(Box<smbq_server::status::Snapshot>),
    Done { message: String },
    Error { message: String },
}
