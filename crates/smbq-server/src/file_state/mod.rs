//! Per-file state, one owner: [`FileStates`] keeps one [`FileEntry`] per file (all its
//! streams) holding everything opens share about it: the opens with their share modes and
//! delete-pending ([`share_mode`]), byte-range locks ([`byte_range`]), oplock holders
//! ([`oplock`]), leases ([`lease`]) and a client-set ChangeTime. Which file each lease key
//! is on is kept beside the shards (MS-SMB2 3.3.1.4 LeaseTable), so an acknowledgment finds
//! its file and a key cannot be used for two files.
//!
//! The parts are pure and return what must happen (admitted or a conflict, breaks to send, a
//! wait); this module only finds the entry, under one lock per shard, so every decision about
//! a file sees all of its state at once, and a closing open is taken out of all of it in one
//! step ([`FileStates::release`]). Callers reach it through the [`crate::open_state`] door
//! ([`door`]); sending breaks to their sessions is [`crate::effects`]' job.
//!
//! Entries exist while something is in them and go when the last part empties. Waiters
//! (blocked byte-range locks, CREATEs waiting for oplock acknowledgments) sleep on their
//! shard's [`Notify`], which fires whenever something in the shard is released.

pub mod byte_range;
mod dir_lease;
mod door;
/// The door's table-driven tests, also for implementations outside this crate
/// (`door_tests::run_all`; feature `door-tables`).
#[cfg(any(test, feature = "door-tables"))]
pub mod door_tests;
mod key;
pub mod lease;
pub mod oplock;
pub mod share_mode;
mod view;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use crate::open_state::Below;
use parking_lot::Mutex;
use smbq_vfs::{RelPath, Timespec};
use smbq_wire::NtStatus;
use smbq_wire::create_context::lease_state;
use tokio::sync::Notify;

pub use byte_range::WaitEnds;
pub use key::FileKey;
pub use share_mode::{LastClose, NewOpen};
pub use view::{FileView, Held};

use byte_range::{Range, RangeLocks};
use lease::{Contention, Granted, LeaseAsk, LeaseBreakNotice, LeaseKey, Leases, Opener};
use oplock::{BreakNotice, Holders, Level, OpenCheck, OpenIntent, Owner};
use share_mode::ShareModes;

/// A CREATE about to admit an open, as the oplock and lease checks see it.
#[derive(Clone, Copy, Debug)]
pub struct OpenRequest<'a> {
    /// The access checked against the other opens.
    pub granted: u32,
    pub share_access: u32,
    /// SUPERSEDE, OVERWRITE or OVERWRITE_IF of the existing file.
    pub overwrite: bool,
    /// FILE_DELETE_ON_CLOSE.
    pub deletes: bool,
    pub lease: Option<&'a LeaseAsk>,
}

/// Shards of the table: opens of different files rarely wait on each other's lock.
const SHARDS: usize = 64;

/// Client-set ChangeTimes are tiny, but a client could set times on millions of files; past
/// about this many they are forgotten (ChangeTime then falls back to the real ctime).
const MAX_CHANGE_TIMES: usize = 1 << 16;

/// What opens share about one file.
#[derive(Debug, Default)]
struct FileEntry {
    /// `None` while the file has no opens (only locks or a ChangeTime can outlive them
    /// briefly, e.g. during a CREATE that is being undone).
    opens: Option<ShareModes>,
    locks: RangeLocks,
    oplocks: Holders,
    leases: Leases,
    /// A client-set ChangeTime, valid while the inode's ctime is the one recorded (crate::dos).
    change_time: Option<(Timespec, u64)>,
}

impl FileEntry {
    /// The opens with an oplock or lease break awaiting their acknowledgment.
    fn breaking_opens(&self) -> Vec<u64> {
        self.oplocks
            .breaking()
            .chain(self.leases.breaking_opens())
            .collect()
    }

    /// The ids of the file's opens (any stream).
    fn open_ids(&self) -> Vec<u64> {
        self.opens
            .as_ref()
            .map(|m| m.open_ids().collect())
            .unwrap_or_default()
    }

    /// A write, lock or size change on `key` through open `writer` (MS-FSA 2.1.4.12): every
    /// level II oplock breaks to none, and every other key's lease caching reads.
    fn break_for_write(
        &mut self,
        key: FileKey,
        writer: u64,
        now: Instant,
    ) -> (Vec<BreakNotice>, Vec<LeaseBreakNotice>) {
        if self.oplocks.is_empty() && self.leases.is_empty() {
            return Default::default();
        }
        (
            self.oplocks.break_level2(key),
            self.leases.break_for_write(key.stream, writer, now),
        )
    }

    fn is_idle(&self) -> bool {
        // A file its last close is deleting stays until `FileStates::deleted`.
        self.opens.as_ref().is_none_or(ShareModes::is_idle)
            && self.locks.is_empty()
            && self.oplocks.is_empty()
            && self.leases.is_empty()
            && self.change_time.is_none()
    }
}

#[derive(Debug, Default)]
pub struct Files {
    map: HashMap<FileKey, FileEntry>,
    /// Entries holding a ChangeTime, for the cap.
    change_times: usize,
}

impl Files {
    /// Runs `f` on `base`'s entry (made empty when absent) and drops the entry if `f` left it
    /// idle.
    fn update<R>(&mut self, base: FileKey, f: impl FnOnce(&mut FileEntry) -> R) -> R {
        let e = self.map.entry(base).or_default();
        let had_time = e.change_time.is_some();
        let r = f(e);
        let has_time = e.change_time.is_some();
        let idle = e.is_idle();
        if idle {
            self.map.remove(&base);
        }
        match (had_time, has_time) {
            (false, true) => self.change_times += 1,
            (true, false) => self.change_times -= 1,
            _ => {}
        }
        r
    }
}

/// The oplock and lease breaks a write or lock forces.
type Breaks = (Vec<BreakNotice>, Vec<LeaseBreakNotice>);

#[derive(Debug, Default)]
pub struct Shard {
    files: Mutex<Files>,
    /// Something in the shard was released (a lock, an open, an oplock break ended).
    changed: Notify,
}

/// How a [`FileStates`] lays out its table: each part is one lock and one wake signal.
pub trait Layout: Send + Sync + std::fmt::Debug + Default + 'static {
    /// Client-set ChangeTimes kept per part (see [`MAX_CHANGE_TIMES`]).
    const CHANGE_TIMES_PER_PART: usize;

    /// The part holding `key`'s file.
    fn part(&self, key: FileKey) -> &Shard;

    /// Every part.
    fn parts(&self) -> &[Shard];
}

/// The server's layout: [`SHARDS`] parts, so opens of different files rarely wait on each
/// other's lock, and a release wakes only the waiters of its part.
#[derive(Debug)]
pub struct Sharded {
    shards: Box<[Shard]>,
}

impl Default for Sharded {
    fn default() -> Self {
        Sharded {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
        }
    }
}

impl Layout for Sharded {
    const CHANGE_TIMES_PER_PART: usize = MAX_CHANGE_TIMES / SHARDS;

    fn part(&self, key: FileKey) -> &Shard {
        // Inode numbers are dense, so the low bits spread files well enough.
        let h = key.ino ^ key.dev.rotate_left(32);
        let i = usize::try_from(h % SHARDS as u64).unwrap_or(0);
        match self.shards.get(i) {
            Some(s) => s,
            None => unreachable!("Sharded::default makes SHARDS shards and i < SHARDS"),
        }
    }

    fn parts(&self) -> &[Shard] {
        &self.shards
    }
}

/// The second implementation of [`crate::open_state::OpenState`]: every file in one table
/// under one lock, and one wake signal for all waiters, the shape of a store that keeps every
/// file's state in one place (a cluster store). It shares the per-file rules with
/// [`Sharded`]; the same table-driven tests run on both (`door_tests`), and the crate's whole
/// suite with `SMBQ_TEST_OPEN_STATE=one-table`.
#[derive(Debug, Default)]
pub struct OneTable {
    table: [Shard; 1],
}

impl Layout for OneTable {
    const CHANGE_TIMES_PER_PART: usize = MAX_CHANGE_TIMES;

    fn part(&self, _key: FileKey) -> &Shard {
        let [only] = &self.table;
        only
    }

    fn parts(&self) -> &[Shard] {
        &self.table
    }
}

/// Every open file's shared state (see the module docs).
#[derive(Debug)]
pub struct FileStates<L: Layout = Sharded> {
    layout: L,
    /// The file (and stream) each live lease is on. Taken after a shard's lock, never
    /// before; entries go with their lease's last open, so it is bounded by the open limits.
    lease_files: Mutex<HashMap<LeaseKey, FileKey>>,
    /// The directories with a lease (crate::file_state::dir_lease), so a change in a
    /// directory without one costs nothing. Taken after a shard's lock, never before; an
    /// entry goes with its directory's last lease.
    dir_leased: Mutex<HashSet<FileKey>>,
}

impl<L: Layout> Default for FileStates<L> {
    fn default() -> Self {
        FileStates {
            layout: L::default(),
            lease_files: Mutex::new(HashMap::new()),
            dir_leased: Mutex::new(HashSet::new()),
        }
    }
}

impl FileStates {
    pub fn new() -> Self {
        Self::default()
    }
}

impl<L: Layout> FileStates<L> {
    fn shard(&self, key: FileKey) -> &Shard {
        self.layout.part(key)
    }

    /// Reads `key`'s entry, if the file has one.
    fn read<R>(&self, key: FileKey, f: impl FnOnce(&FileEntry) -> R) -> Option<R> {
        self.shard(key).files.lock().map.get(&key.base()).map(f)
    }

    /// Lends `key`'s record to `f`, under the file's lock (the door's `query`).
    pub(crate) fn view<R>(&self, key: FileKey, f: impl FnOnce(FileView<'_>) -> R) -> R {
        let files = self.shard(key).files.lock();
        f(FileView::new(key, files.map.get(&key.base())))
    }

    /// Changes `key`'s entry (see [`Files::update`]).
    fn update<R>(&self, key: FileKey, f: impl FnOnce(&mut FileEntry) -> R) -> R {
        self.shard(key).files.lock().update(key.base(), f)
    }

    /// Changes the share-mode part of an entry that has opens; nothing otherwise.
    fn update_opens(&self, key: FileKey, f: impl FnOnce(&mut ShareModes)) {
        let mut files = self.shard(key).files.lock();
        if let Some(m) = files
            .map
            .get_mut(&key.base())
            .and_then(|e| e.opens.as_mut())
        {
            f(m);
        }
    }

    // ---- opens and share modes (share_mode.rs) ----

    /// Checks share modes and delete-pending, then registers the open.
    #[cfg(test)]
    pub fn admit(
        &self,
        key: FileKey,
        open_id: u64,
        access: u32,
        share_access: u32,
        path: &RelPath,
        is_dir: bool,
    ) -> Result<(), NtStatus> {
        let new = NewOpen {
            open_id,
            checked: access,
            access,
            share_access,
            path,
            is_dir,
            posix: false,
            restoring: false,
        };
        self.admit_checking(key, &new)
    }

    /// Checks `new.checked` against the file's opens and delete-pending, then registers the
    /// open with `new.access`; atomic with respect to other admissions of the same file.
    pub fn admit_checking(&self, key: FileKey, new: &NewOpen<'_>) -> Result<(), NtStatus> {
        self.update(key, |e| {
            e.opens
                .get_or_insert_with(|| ShareModes::new(new.path, new.is_dir))
                .admit(key, new)
        })
    }

    /// Takes open `open_id` of `key` out of everything it holds on the file: its share mode,
    /// its byte-range locks and its oplock, in one step; wakes whoever waits on the file.
    /// `delete_on_close` marks the file (or stream) delete-pending first (MS-FSA 2.1.5.4: an
    /// open's DeleteOnClose becomes the file's at cleanup). Says what the close must do.
    /// `parent`: the closing open's parent lease key (crate::file_state::dir_lease).
    pub fn release(
        &self,
        key: FileKey,
        open_id: u64,
        delete_on_close: bool,
        parent: Option<[u8; 16]>,
    ) -> Option<LastClose> {
        let shard = self.shard(key);
        let mut files = shard.files.lock();
        let last = files.update(key.base(), |e| {
            e.locks.release_owner(open_id);
            e.oplocks.release(open_id);
            let ended = e.leases.release(open_id);
            if !ended.is_empty() {
                let mut index = self.lease_files.lock();
                for k in &ended {
                    index.remove(k);
                }
                if e.leases.is_empty() {
                    self.dir_leased.lock().remove(&key.base());
                }
            }
            let last = e
                .opens
                .as_mut()
                .and_then(|m| m.remove(key, open_id, delete_on_close, parent));
            // A file its last close deletes stays delete-pending until `deleted`.
            let deleting = last.as_ref().is_some_and(|l| l.delete);
            if !deleting && e.opens.as_ref().is_some_and(ShareModes::is_empty) {
                e.opens = None;
            }
            last
        });
        drop(files);
        if last.as_ref().is_some_and(|l| l.delete) {
            return last;
        }
        // Always wake: even without locks of its own, the closing open may have a lock
        // request waiting, which must now complete; CREATEs waiting for its break go on.
        shard.changed.notify_waiters();
        last
    }

    /// The file whose last close [`release`](Self::release) said to delete is gone from the
    /// file system (or its unlink failed): it stops being delete-pending and what waited for
    /// it goes on. Until then a new open of it is STATUS_DELETE_PENDING (MS-FSA 2.1.5.1.2),
    /// and a CREATE that waited for its break runs again only once the name is free, so it
    /// never opens the file the close is about to unlink (smbtorture
    /// smb2.durable-open.delete_on_close1 opened it, size 1, under load).
    /// Whether the file's last close is deleting it (between `release` and `deleted`).
    pub fn deleting(&self, key: FileKey) -> bool {
        self.read(key, |e| {
            e.opens
                .as_ref()
                .is_some_and(|m| m.is_empty() && !m.is_idle())
        })
        .unwrap_or(false)
    }

    pub fn deleted(&self, key: FileKey) {
        let shard = self.shard(key);
        shard.files.lock().update(key.base(), |e| {
            if e.opens.as_ref().is_some_and(ShareModes::is_empty) {
                e.opens = None;
            }
        });
        shard.changed.notify_waiters();
    }

    /// Marks the file (or, for a named stream's key, that stream) delete-pending.
    /// `parent`: the parent lease key of the open setting it (crate::file_state::dir_lease).
    /// The door's `on_disposition`, for tests of the parts.
    #[cfg(test)]
    pub fn set_delete_pending(&self, key: FileKey, pending: bool, parent: Option<[u8; 16]>) {
        self.update_opens(key, |m| m.mark_delete(key.stream, pending, parent));
    }

    /// Records an AllocationInformation / AllocationSize request for the file's data.
    pub fn set_allocation(&self, key: FileKey, size: u64) {
        if key.stream == 0 {
            self.update_opens(key, |m| m.set_allocation(size));
        }
    }

    /// After a stream rename, open `open_id` addresses stream `to` of the file (the door's
    /// `renamed`, for tests of the parts).
    #[cfg(test)]
    pub fn move_open(&self, key: FileKey, open_id: u64, to: u64) {
        self.update_opens(key, |m| m.move_open(open_id, to));
    }

    /// Whether any open file other than `except` lies strictly below `dir` (Windows refuses
    /// to rename a directory while files inside it are open). Visits every shard.
    pub fn any_open_below(&self, dir: &RelPath, except: FileKey) -> bool {
        self.layout.parts().iter().any(|s| {
            s.files.lock().map.iter().any(|(k, e)| {
                *k != except.base()
                    && e.opens
                        .as_ref()
                        .is_some_and(|m| m.path() != dir && m.path().starts_with(dir))
            })
        })
    }

    /// The files strictly below `dir` (but `except`) that are open, with their opens, if every
    /// open of them is of the kind `which` names; `None` when one is not (a directory rename
    /// is refused at once then). Paths are relative to each file's share, so the caller keeps
    /// the files of its own share. Visits every shard.
    pub fn opens_below(
        &self,
        dir: &RelPath,
        except: FileKey,
        which: Below,
    ) -> Option<Vec<(FileKey, Vec<u64>)>> {
        let mut below = Vec::new();
        for s in self.layout.parts() {
            let files = s.files.lock();
            for (k, e) in &files.map {
                let Some(m) = e.opens.as_ref() else { continue };
                if *k == except.base() || m.path() == dir || !m.path().starts_with(dir) {
                    continue;
                }
                let accepted = |id| match which {
                    Below::HandleLeased => e
                        .leases
                        .granted_of(id)
                        .is_some_and(|(_, g)| g.state & lease_state::HANDLE_CACHING != 0),
                    Below::Posix => m.is_posix(id),
                };
                if !m.open_ids().all(accepted) {
                    return None;
                }
                below.push((*k, m.open_ids().collect()));
            }
        }
        Some(below)
    }

    // ---- byte-range locks (byte_range.rs) ----

    fn range(key: FileKey, offset: u64, length: u64) -> Range {
        Range {
            stream: key.stream,
            offset,
            length,
        }
    }

    /// Takes a lock now or fails with LOCK_NOT_GRANTED.
    pub fn try_lock(
        &self,
        key: FileKey,
        owner: u64,
        offset: u64,
        length: u64,
        exclusive: bool,
    ) -> Result<(), NtStatus> {
        let r = Self::range(key, offset, length);
        self.update(key, |e| e.locks.try_lock(owner, r, exclusive))
    }

    /// MS-FSA 2.1.5.9: removes the lock of this owner with exactly this range, else
    /// RANGE_NOT_LOCKED; wakes blocked lock requests.
    pub fn unlock(
        &self,
        key: FileKey,
        owner: u64,
        offset: u64,
        length: u64,
    ) -> Result<(), NtStatus> {
        let r = Self::range(key, offset, length);
        let shard = self.shard(key);
        shard
            .files
            .lock()
            .update(key.base(), |e| e.locks.unlock(owner, r))?;
        shard.changed.notify_waiters();
        Ok(())
    }

    /// MS-FSA 2.1.4.10 for READ/WRITE: FILE_LOCK_CONFLICT when another open's lock forbids it.
    pub fn check_io(
        &self,
        key: FileKey,
        owner: u64,
        offset: u64,
        length: u64,
        write: bool,
    ) -> Result<(), NtStatus> {
        let r = Self::range(key, offset, length);
        self.read(key, |e| e.locks.check_io(owner, r, write))
            .unwrap_or(Ok(()))
    }

    /// A persistent open restored after a restart (crate::persist) holds its lease (key,
    /// state, V2 epoch) or its oplock again; false when the lease key is another file's.
    pub(crate) fn restore_caching(
        &self,
        key: FileKey,
        open_id: u64,
        oplock: (Level, oplock::Owner),
        (lease, is_dir): (Option<(LeaseKey, u32, Option<u16>)>, bool),
    ) -> bool {
        self.update(key, |e| {
            match lease {
                Some((k, state, epoch)) => {
                    {
                        let mut index = self.lease_files.lock();
                        match index.get(&k) {
                            Some(other) if *other != key => return false,
                            Some(_) => {}
                            None => {
                                index.insert(k, key);
                            }
                        }
                    }
                    e.leases.restore(k, key.stream, open_id, state, epoch);
                    if is_dir {
                        self.dir_leased.lock().insert(key.base());
                    }
                }
                None => e.oplocks.insert(key, open_id, oplock.0, oplock.1),
            }
            true
        })
    }

    // ---- oplocks (oplock.rs) and leases (lease.rs); sending and waiting live in
    // crate::effects ----

    /// MS-FSA 2.1.5.1.2 for a CREATE about to open `key` with `granted` and `share_access`
    /// (asking for the lease `ask`, if any): the oplock and lease breaks it forces and whether
    /// it must wait, or the status it fails with before anything is broken (DELETE_PENDING,
    /// smbtorture smb2.oplock.doc).
    fn oplock_check(
        &self,
        key: FileKey,
        open: &OpenRequest<'_>,
        now: Instant,
    ) -> Result<(OpenCheck, Contention, Vec<u64>), NtStatus> {
        self.update(key, |e| {
            if e.oplocks.is_empty() && e.leases.is_empty() {
                return Ok(Default::default());
            }
            let share_conflict = match e
                .opens
                .as_ref()
                .map(|m| m.check(key, open.granted, open.share_access))
            {
                None | Some(Ok(())) => false,
                Some(Err(NtStatus::SHARING_VIOLATION)) => true,
                Some(Err(other)) => return Err(other),
            };
            let intent = OpenIntent {
                stat_only: oplock::is_stat_open(open.granted),
                overwrite: open.overwrite,
                share_conflict,
                deletes: open.deletes,
            };
            let oplocks = e.oplocks.on_open(key, intent, now);
            let opener = Opener {
                key: open.lease.map(|a| a.key),
                stream: key.stream,
                open_id: 0,
                session_id: 0,
                requested: 0,
                v2: None,
                intent: OpenIntent {
                    stat_only: lease::is_stat_open(open.granted),
                    ..intent
                },
                other_opens: false,
                oplock_held: false,
                byte_range_locked: false,
            };
            let leases = e.leases.contend(&opener, now);
            // In the same step: the opens a wait would be for (purged if parked).
            let breaking = if oplocks.wait || leases.wait {
                e.breaking_opens()
            } else {
                Vec::new()
            };
            Ok((oplocks, leases, breaking))
        })
    }

    /// Whether lease key `lease` is in use on a file or stream other than `key` (MS-SMB2
    /// 3.3.5.9.8: such a CREATE fails with STATUS_INVALID_PARAMETER).
    pub fn lease_elsewhere(&self, lease: &LeaseKey, key: FileKey) -> bool {
        self.lease_files
            .lock()
            .get(lease)
            .is_some_and(|k| *k != key)
    }

    /// Records the level an admitted open gets (MS-SMB2 3.3.5.9.8), decided against the
    /// file's other opens, oplocks and leases in the same step: none beside a lease caching
    /// handles (smbtorture smb2.lease.oplock).
    fn oplock_grant(
        &self,
        key: FileKey,
        open_id: u64,
        requested: Level,
        stat_only: bool,
        owner: Owner,
    ) -> Level {
        self.update(key, |e| {
            if e.leases.caches_handles(key.stream) {
                return Level::None;
            }
            let others = e
                .opens
                .as_ref()
                .map_or(0, |m| m.open_count(key))
                .saturating_sub(1);
            let level = oplock::grant(
                requested,
                stat_only,
                others,
                e.oplocks.other_exclusive(key, open_id),
            );
            e.oplocks.insert(key, open_id, level, owner);
            level
        })
    }

    /// Makes or upgrades the lease of an admitted open (MS-SMB2 3.3.5.9.8, 3.3.5.9.11);
    /// `None` when the key went to another file meanwhile (no lease is granted then).
    /// `size`: the stream's size after the open (an overwrite has truncated it).
    fn lease_grant(
        &self,
        key: FileKey,
        open_id: u64,
        session_id: u64,
        ask: &LeaseAsk,
        (dir, size): (bool, u64),
    ) -> Option<Granted> {
        self.update(key, |e| {
            {
                let mut index = self.lease_files.lock();
                match index.get(&ask.key) {
                    Some(k) if *k != key => return None,
                    Some(_) => {}
                    None => {
                        index.insert(ask.key, key);
                    }
                }
            }
            let mine = e.leases.opens_of(&ask.key, key.stream);
            let other_opens = e.opens.as_ref().is_some_and(|m| {
                m.data_opens(key)
                    .any(|id| id != open_id && !mine.contains(&id))
            });
            let opener = Opener {
                key: Some(ask.key),
                stream: key.stream,
                open_id,
                session_id,
                requested: ask.requested,
                v2: ask.v2_epoch,
                intent: OpenIntent {
                    stat_only: false,
                    overwrite: false,
                    share_conflict: false,
                    deletes: false,
                },
                other_opens,
                oplock_held: e.oplocks.held_on(key.stream),
                byte_range_locked: e.locks.any_below(key.stream, size),
            };
            let g = e.leases.grant(&opener);
            if dir {
                self.dir_leased.lock().insert(key.base());
            }
            Some(g)
        })
    }

    /// A write, lock or size change on `key` through open `writer`: every level II oplock
    /// breaks to none, and every other key's lease caching reads.
    fn break_for_write(&self, key: FileKey, writer: u64, now: Instant) -> (Breaks, Vec<u64>) {
        self.update(key, |e| {
            let breaks = e.break_for_write(key, writer, now);
            (breaks, e.leases.take_expired())
        })
    }

    /// A lock request through `owner`: the breaks it forces (as a write's) and, in the same
    /// step, the lock now or LOCK_NOT_GRANTED (`breaks`: false for a waiting request's retry),
    /// and the opens a timed-out break changed (`Leases::take_expired`).
    fn lock_breaking(
        &self,
        key: FileKey,
        owner: u64,
        (offset, length, exclusive): (u64, u64, bool),
        breaks: Option<Instant>,
    ) -> (Result<(), NtStatus>, Breaks, Vec<u64>) {
        let r = Self::range(key, offset, length);
        self.update(key, |e| {
            let breaks = match breaks {
                Some(now) => e.break_for_write(key, owner, now),
                None => Default::default(),
            };
            let lock = e.locks.try_lock(owner, r, exclusive);
            (lock, breaks, e.leases.take_expired())
        })
    }

    /// Runs `f` on the share modes of a file that has opens, and says which opens it has
    /// (the ones whose records a persistent store writes again), in one step.
    fn update_opens_listing(&self, key: FileKey, f: impl FnOnce(&mut ShareModes)) -> Vec<u64> {
        let mut files = self.shard(key).files.lock();
        match files.map.get_mut(&key.base()) {
            Some(e) => {
                if let Some(m) = e.opens.as_mut() {
                    f(m);
                }
                e.open_ids()
            }
            None => Vec::new(),
        }
    }

    /// A rename of `key`'s file through open `by`: other keys' handle caching breaks.
    fn lease_break_handles(&self, key: FileKey, by: u64, now: Instant) -> Contention {
        self.update(key, |e| e.leases.break_handles(by, now))
    }

    /// Runs `f` on the leases of the file `lease` is on, then wakes the file's waiters.
    fn on_lease<R>(&self, lease: &LeaseKey, f: impl FnOnce(&mut Leases, u64) -> R) -> Option<R> {
        let key = *self.lease_files.lock().get(lease)?;
        let shard = self.shard(key);
        let r = shard
            .files
            .lock()
            .update(key.base(), |e| f(&mut e.leases, key.stream));
        shard.changed.notify_waiters();
        Some(r)
    }

    #[cfg(test)]
    fn lease_acknowledge(
        &self,
        lease: &LeaseKey,
        acked: u32,
        now: Instant,
    ) -> Result<(u32, Option<LeaseBreakNotice>), NtStatus> {
        self.lease_acknowledge_listing(lease, acked, now)
            .map(|(state, next, _)| (state, next))
    }

    /// [`Self::lease_acknowledge`] and, in the same step, the lease's opens (the ones whose
    /// records a persistent store writes again).
    fn lease_acknowledge_listing(
        &self,
        lease: &LeaseKey,
        acked: u32,
        now: Instant,
    ) -> Result<(u32, Option<LeaseBreakNotice>, Vec<u64>), NtStatus> {
        self.on_lease(lease, |l, stream| {
            let (state, next) = l.acknowledge(lease, acked, now)?;
            Ok((state, next, l.opens_of(lease, stream)))
        })
        .unwrap_or(Err(NtStatus::OBJECT_NAME_NOT_FOUND))
    }

    /// A persistent open of `key` reclaimed alone takes its lease back (lease.rs,
    /// `Leases::reacquire`), the reconnect carrying `asked_epoch`.
    pub(crate) fn reacquire_lease(&self, key: FileKey, open_id: u64, asked_epoch: u16) {
        self.update(key, |e| {
            let locked = e.locks.count() > 0;
            e.leases.reacquire(open_id, asked_epoch, locked);
        });
    }

    /// The opens of the lease `open_id` holds on `key`, itself included.
    pub(crate) fn lease_partners(&self, key: FileKey, open_id: u64) -> Vec<u64> {
        self.read(key, |e| {
            e.leases
                .key_of_open(open_id)
                .map(|k| e.leases.opens_of(&k, key.stream))
                .unwrap_or_default()
        })
        .unwrap_or_default()
    }

    /// The break of `lease` on `key` awaiting its acknowledgment, as a notice to send again.
    pub(crate) fn break_in_progress(
        &self,
        key: FileKey,
        lease: &LeaseKey,
    ) -> Option<lease::LeaseBreakNotice> {
        self.update(key, |e| e.leases.break_in_progress(lease, key.stream))
    }

    /// The oplock break of `open_id` on `key` awaiting its acknowledgment, as a notice to send
    /// again.
    pub(crate) fn oplock_break_in_progress(
        &self,
        key: FileKey,
        open_id: u64,
    ) -> Option<oplock::BreakNotice> {
        self.read(key, |e| e.oplocks.break_in_progress(key.base(), open_id))
            .flatten()
    }

    /// The break of `lease` is kept for its away client (`Leases::withhold`).
    pub(crate) fn lease_withheld(&self, n: &LeaseBreakNotice) {
        self.on_lease(&n.key, |l, stream| l.withhold(&n.key, stream, n.sent()));
    }

    /// The breaks awaiting open `open_id`'s acknowledgment complete now, as if it had
    /// acknowledged what they asked (a parked resilient open, which cannot hear them).
    pub(crate) fn complete_breaks(&self, key: FileKey, open_id: u64) {
        let shard = self.shard(key);
        shard.files.lock().update(key.base(), |e| {
            e.oplocks.undeliverable(open_id);
            if let Some(lease) = e.leases.key_of_open(open_id) {
                e.leases.undeliverable(&lease, key.stream, None);
            }
        });
        shard.changed.notify_waiters();
    }

    /// A durable open of `key` reconnected on session `session_id`: its oplock and lease
    /// breaks go there from now on.
    pub(crate) fn rebind(&self, key: FileKey, open_id: u64, session_id: u64) {
        self.update(key, |e| {
            e.oplocks.rebind(open_id, session_id);
            e.leases.rebind(open_id, session_id);
        });
    }

    /// The opens sharing lease `lease`.
    pub(crate) fn lease_opens(&self, lease: &LeaseKey) -> Vec<u64> {
        self.on_lease(lease, |l, stream| l.opens_of(lease, stream))
            .unwrap_or_default()
    }

    fn lease_undeliverable(&self, n: &LeaseBreakNotice) {
        self.on_lease(&n.key, |l, stream| {
            l.undeliverable(&n.key, stream, Some(n.sent()))
        });
    }

    fn oplock_acknowledge(&self, key: FileKey, open_id: u64, acked: u8) -> Result<Level, NtStatus> {
        let shard = self.shard(key);
        let r = shard
            .files
            .lock()
            .update(key.base(), |e| e.oplocks.acknowledge(open_id, acked));
        shard.changed.notify_waiters();
        r
    }

    fn oplock_undeliverable(&self, key: FileKey, open_id: u64) {
        let shard = self.shard(key);
        shard
            .files
            .lock()
            .update(key.base(), |e| e.oplocks.undeliverable(open_id));
        shard.changed.notify_waiters();
    }

    /// Completes timed-out breaks of `key`; the earliest deadline of those still pending,
    /// oplock or lease.
    fn oplock_pending_until(&self, key: FileKey, now: Instant) -> Option<Instant> {
        self.update(key, |e| {
            e.oplocks.expire(now);
            e.leases.expire(now);
            let o = e.oplocks.pending_until(key);
            let l = e.leases.pending_until(key.stream);
            o.into_iter().chain(l).min()
        })
    }

    /// The lease state of `lease` on `key`, for tests.
    #[cfg(test)]
    fn lease_state(&self, lease: &LeaseKey, key: FileKey) -> Option<(u32, u16)> {
        self.read(key, |e| e.leases.state(lease, key.stream))
            .flatten()
    }

    // ---- client-set ChangeTime (crate::dos) ----

    /// Records that `key`'s file, whose ctime is now `ctime`, should report `change` (times
    /// belong to the file, whichever of its streams the client went through).
    pub fn set_change_time(&self, key: FileKey, ctime: Timespec, change: u64) {
        let mut files = self.shard(key).files.lock();
        let base = key.base();
        let known = files
            .map
            .get(&base)
            .is_some_and(|e| e.change_time.is_some());
        if !known && files.change_times >= L::CHANGE_TIMES_PER_PART {
            let full: Vec<FileKey> = files
                .map
                .iter()
                .filter(|(_, e)| e.change_time.is_some())
                .map(|(k, _)| *k)
                .collect();
            for k in full {
                files.update(k, |e| e.change_time = None);
            }
        }
        files.update(base, |e| e.change_time = Some((ctime, change)));
    }

    #[cfg(test)]
    fn entries(&self) -> usize {
        self.layout
            .parts()
            .iter()
            .map(|s| s.files.lock().map.len())
            .sum()
    }
}

#[cfg(test)]
mod tests;
