//! What one open holds on its file, read for `smbq status` (crate::status): its oplock or
//! lease and its byte-range locks. Read-only; one shard lock per call.

use super::{FileKey, FileStates};
use crate::file_state::oplock::Level;

/// An open's caching grant and locks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// The oplock level (MS-SMB2 2.2.13), when it has one rather than a lease.
    pub oplock: Option<Level>,
    /// The lease state (SMB2_LEASE_READ/HANDLE/WRITE_CACHING bits) and whether a break of it
    /// is under way.
    pub lease: Option<(u32, bool)>,
    /// (offset, length, exclusive) of each byte-range lock it holds.
    pub locks: Vec<(u64, u64, bool)>,
}

impl<L: super::Layout> FileStates<L> {
    /// What open `open_id` of `key` holds now.
    pub fn held_by(&self, key: FileKey, open_id: u64) -> Held {
        self.read(key, |e| Held {
            oplock: Some(e.oplocks.level(open_id)).filter(|l| *l != Level::None),
            lease: e
                .leases
                .granted_of(open_id)
                .map(|(_, g)| (g.state, g.breaking)),
            locks: e.locks.of_owner(open_id, key.stream),
        })
        .unwrap_or_default()
    }
}
