//! Persistent handles (MS-SMB2 3.3.5.9.10, Open.IsPersistent) on continuously available
//! shares, while their client is away. A parked persistent open keeps the file for its
//! client: other opens are refused with STATUS_FILE_NOT_AVAILABLE unless its lease lets
//! them in (MS-SMB2 3.3.5.9), and a break it cannot hear is not a reason to drop it: the
//! break waits for its client to come back and acknowledge (`handlers/create/durable.rs`
//! sends it again on the reconnect), or for the break's timeout.

use crate::file_state::FileKey;
use crate::file_state::oplock::{Level, is_stat_open};
use crate::open_state::{OpenState, Queries as _};
use smbq_wire::create_context::lease_state::{HANDLE_CACHING, READ_CACHING, WRITE_CACHING};

use super::DurableStore;

impl DurableStore {
    /// The parked persistent opens of `key`'s file, on any of its streams, with the stream
    /// each is on: one keeps the whole file (Open.File in MS-SMB2 3.3.5.9), so a named stream
    /// is no way around it. One range of the ordered index (every CREATE of an existing file
    /// asks), not a walk of every parked open.
    pub fn persistent_on_file(&self, key: FileKey) -> Vec<(FileKey, u64)> {
        let streams = FileKey { stream: 0, ..key }..=FileKey {
            stream: u64::MAX,
            ..key
        };
        self.inner
            .lock()
            .persistent
            .range(streams)
            .flat_map(|(k, ids)| ids.iter().map(|id| (*k, *id)))
            .collect()
    }

    /// Whether `id` is a parked persistent open.
    pub fn is_persistent(&self, id: u64) -> bool {
        self.inner
            .lock()
            .by_id
            .get(&id)
            .is_some_and(|p| p.grant.persistent)
    }

    /// Whether one of `lease`'s opens (`opens`) is a parked persistent one: a break of the
    /// lease then waits for its client rather than completing at once.
    pub fn lease_waits_for_client(&self, opens: &[u64]) -> bool {
        opens.iter().any(|id| self.is_persistent(*id))
    }
}

/// Whether a disconnected persistent open of the file at a path (`root`: the share root)
/// keeps the file from other clients at all ([`refuses`], and a cluster node's holds). Not
/// on the share root: every client's way into a share is an open of its root, so one
/// client's parked open there (a DH2Q with the persistent flag and no lease is enough, from
/// any user) would answer every other client's listing of the share with
/// STATUS_FILE_NOT_AVAILABLE for up to `max_durable_timeout_secs`. There the parked open
/// keeps what a connected open keeps: its share mode, its locks, and a lease break withheld
/// for its client. The root cannot be deleted or renamed, so nothing its client caches is at
/// stake beyond what the share mode and the lease already answer for.
pub fn keeps_file_at(root: bool) -> bool {
    !root
}

/// MS-SMB2 3.3.5.9: a CREATE (not a reconnect) of a file that a disconnected persistent open
/// holds is STATUS_FILE_NOT_AVAILABLE, before share modes are checked (smbtorture
/// smb2.persistent-open.directory-disconnect: not SHARING_VIOLATION). Windows lets an open
/// in when the persistent open's lease caches handles (and writes, when the file has
/// byte-range locks): the lease is then broken as usual, its break waiting for the client
/// (smbtorture smb2.persistent-open-reconnect-contended's table, which Samba reproduces).
/// A stat open is never refused. A persistent open on any stream of the file counts, each
/// judged by its own stream's lease and locks. `granted`: the new open's access.
pub fn refuses(store: &DurableStore, files: &dyn OpenState, key: FileKey, granted: u32) -> bool {
    if is_stat_open(granted) {
        return false;
    }
    store.persistent_on_file(key).into_iter().any(|(on, id)| {
        let (oplock, lease) = files.caching_of(on, id);
        let held = match lease {
            Some((_, g)) => g.state,
            None => oplock_as_lease(oplock),
        };
        !lets_in(held, files.lock_count(on) > 0)
    })
}

/// The rule of [`refuses`] for one disconnected persistent open that caches `held` (lease
/// state bits) and, with `locked`, has byte-range locks on its stream: whether it lets
/// another open in. Also the rule of a cluster node for a persistent open of a node that
/// died (smbq-cluster's holds).
pub fn lets_in(held: u32, locked: bool) -> bool {
    let mut needed = HANDLE_CACHING;
    if locked {
        needed |= WRITE_CACHING;
    }
    held & needed == needed
}

/// What an oplock caches, in lease terms.
pub fn oplock_as_lease(level: Level) -> u32 {
    match level {
        Level::Batch => READ_CACHING | WRITE_CACHING | HANDLE_CACHING,
        Level::Exclusive => READ_CACHING | WRITE_CACHING,
        Level::II => READ_CACHING,
        Level::None => 0,
    }
}
