//! smbq-client: an async SMB 2/3 client over TCP and QUIC, built on the client side of
//! smbq-proto. Many requests run at once on one connection, bounded by the credits the server
//! grants; large READ/WRITE use multi-credit requests up to the negotiated maximum; dropping a
//! request's future sends CANCEL.
//!
//! ```text
//! Client::connect(transport, config) -> login(user, domain, password) -> Session
//! Session::tree_connect("share") -> Tree -> open / stat / list / mkdir / rmdir / remove / rename
//! File: read_at / write_at / flush / set_len / close;  transfer::{download, upload}
//! Tree::open_durable / reclaim (durable v2 under an RWH lease);  Tree::cached -> CachedTree
//! (stats and reads served from RH leases)
//! ```
#![forbid(unsafe_code)]

mod cache;
mod client;
mod compound;
mod conn;
mod durable;
mod error;
mod file;
mod lanes;
mod lease;
mod posix;
mod server_copy;
mod session;
mod shares;
pub mod transfer;
mod tree;

pub use cache::{CacheLimits, CachedTree};
pub use client::Client;
pub use durable::DurableHandle;
pub use error::{AuthError, Error, ProtocolError, describe, status_name};
pub use file::File;
pub use posix::PosixEntry;
pub use server_copy::server_copy;
pub use session::Session;
pub use smbq_proto::client::{ClientConfig, EncryptionPolicy, Negotiated};
pub use smbq_rpc::client::{RpcClientError, ShareInfo1};
pub use smbq_wire::lock::{LockElement, lock_flags};
pub use tree::{OpenOptions, Tree, smb_path};

use smbq_wire::fscc::attributes::FILE_ATTRIBUTE_DIRECTORY;

/// What the server reports about a file (FILETIMEs as sent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Metadata {
    pub size: u64,
    pub allocation: u64,
    pub attributes: u32,
    pub created: u64,
    pub accessed: u64,
    pub modified: u64,
    pub changed: u64,
}

impl Metadata {
    pub fn is_dir(&self) -> bool {
        self.attributes & FILE_ATTRIBUTE_DIRECTORY != 0
    }
}

/// One directory entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub meta: Metadata,
}
