//! What this server records about one file, read under the file's lock: the door's one
//! `query` ([`crate::open_state::OpenState::query`]). Each answer is written once, here, and
//! the typed questions callers ask ([`crate::open_state::Queries`]) are built on it, so an
//! implementation of the door answers them all by lending its entry for a moment.
//!
//! Only this server's own record is read: a cluster node answers the questions that depend on
//! other servers (share-mode checks, delete-pending, locks against I/O, opens below a
//! directory) through the door's own methods.

use smbq_vfs::{RelPath, Timespec};
use smbq_wire::NtStatus;

use super::lease::{Granted, LeaseKey};
use super::oplock::Level;
use super::share_mode::ShareModes;
use super::{FileEntry, FileKey};

/// An open's caching grant and locks, for `smbq status` and the persistent store.
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

/// One file's record as this server holds it, borrowed while its lock is held. `key` names
/// the stream the questions are about; a file without a record answers as one without opens.
#[derive(Clone, Copy)]
pub struct FileView<'a> {
    key: FileKey,
    entry: Option<&'a FileEntry>,
}

impl<'a> FileView<'a> {
    pub(super) fn new(key: FileKey, entry: Option<&'a FileEntry>) -> Self {
        FileView { key, entry }
    }

    /// A file this server records nothing about.
    pub fn unrecorded(key: FileKey) -> Self {
        FileView { key, entry: None }
    }

    fn opens(&self) -> Option<&'a ShareModes> {
        self.entry.and_then(|e| e.opens.as_ref())
    }

    /// Whether the file, or the named stream the key addresses, is delete-pending here.
    pub fn delete_pending(&self) -> bool {
        self.opens().is_some_and(|m| m.delete_pending(self.key))
    }

    /// MS-FSA 2.1.5.1.2's share-mode check of an open with `access` and `share_access`
    /// against this server's opens, without admitting it.
    pub fn check(&self, access: u32, share_access: u32) -> Result<(), NtStatus> {
        self.opens()
            .map_or(Ok(()), |m| m.check(self.key, access, share_access))
    }

    /// Opens of the stream the key addresses.
    pub fn open_count(&self) -> usize {
        self.opens().map_or(0, |m| m.open_count(self.key))
    }

    /// Opens of the file, any stream.
    pub fn open_count_any(&self) -> usize {
        self.opens().map_or(0, ShareModes::open_count_any)
    }

    /// Whether a named stream of the file is open (MS-FSA 2.1.5.15.11: no rename then).
    pub fn has_stream_opens(&self) -> bool {
        self.opens().is_some_and(ShareModes::has_stream_opens)
    }

    /// Whether every open of the file but `open_id` shares delete (rename and delete need it).
    pub fn others_share_delete(&self, open_id: u64) -> bool {
        self.opens()
            .is_none_or(|m| m.others_share_delete(self.key, open_id))
    }

    /// The AllocationSize asked for the unnamed stream while the file is open (MS-FSA
    /// 2.1.5.15.1).
    pub fn allocation(&self) -> Option<u64> {
        if self.key.stream != 0 {
            return None;
        }
        self.opens().and_then(ShareModes::allocation)
    }

    /// The file's current path (after renames), while it is open.
    pub fn path(&self) -> Option<RelPath> {
        self.opens().map(|m| m.path().clone())
    }

    /// The ids of the file's opens (any stream).
    pub fn open_ids(&self) -> Vec<u64> {
        self.entry.map(FileEntry::open_ids).unwrap_or_default()
    }

    /// The byte-range locks held on the file.
    pub fn lock_count(&self) -> usize {
        self.entry.map_or(0, |e| e.locks.count())
    }

    /// What open `open_id` holds: its oplock level and its lease, if any.
    pub fn caching_of(&self, open_id: u64) -> (Level, Option<(LeaseKey, Granted)>) {
        self.entry.map_or((Level::None, None), |e| {
            (e.oplocks.level(open_id), e.leases.granted_of(open_id))
        })
    }

    /// The opens with an oplock or lease break awaiting their acknowledgment.
    pub fn breaking_opens(&self) -> Vec<u64> {
        self.entry
            .map(FileEntry::breaking_opens)
            .unwrap_or_default()
    }

    /// What open `open_id` holds, for `smbq status` and the persistent store.
    pub fn held_by(&self, open_id: u64) -> Held {
        self.entry.map_or_else(Held::default, |e| Held {
            oplock: Some(e.oplocks.level(open_id)).filter(|l| *l != Level::None),
            lease: e
                .leases
                .granted_of(open_id)
                .map(|(_, g)| (g.state, g.breaking)),
            locks: e.locks.of_owner(open_id, self.key.stream),
        })
    }

    /// The client-set ChangeTime (MS-FSA 2.1.5.15.2), if the inode's ctime is still `ctime`.
    pub fn change_time(&self, ctime: Timespec) -> Option<u64> {
        match self.entry.and_then(|e| e.change_time) {
            Some((c, v)) if c == ctime => Some(v),
            _ => None,
        }
    }
}
