//! Byte-range locks (MS-FSA 2.1.5.8 lock, 2.1.5.9 unlock, 2.1.4.10 conflict check) of one
//! file, owned by opens. Pure: [`super::FileStates`] keeps one [`RangeLocks`] per file and
//! wakes blocked lock requests when a lock goes away.

use smbq_wire::NtStatus;
use tokio_util::sync::CancellationToken;

/// MS-ERREF: STATUS_INVALID_LOCK_RANGE (not among smbq-wire's named constants).
pub const STATUS_INVALID_LOCK_RANGE: NtStatus = NtStatus(0xC000_01A1);

/// Locks one open may hold on its file, all streams together; the next gets
/// STATUS_INSUFFICIENT_RESOURCES, as Windows answers when its lock pool is spent. The table
/// is otherwise as large as clients make it: with this, it is bounded by the open limits
/// (`[limits] max_opens_per_session` and the connection limits) times this. Applications
/// hold a few locks per handle; smbtorture's lock tests take at most a few hundred.
pub const MAX_LOCKS_PER_OPEN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lock {
    /// `FileKey::stream` of the stream locked: locks of different streams never meet.
    stream: u64,
    offset: u64,
    length: u64,
    exclusive: bool,
    /// The owning open (its volatile FileId).
    owner: u64,
}

/// The range a lock or an IO covers, as (first byte, last byte) in a wider type so that a
/// zero-length range at offset 0 and ranges ending at `u64::MAX` need no special overflow care.
fn span(offset: u64, length: u64) -> (i128, i128) {
    (
        i128::from(offset),
        i128::from(offset) + i128::from(length) - 1,
    )
}

/// MS-FSA 2.1.4.10: the {0,0} range overlaps nothing; otherwise inclusive ranges intersect
/// (which makes a zero-length range at N overlap a range covering both N-1 and N).
fn overlaps(a_off: u64, a_len: u64, b_off: u64, b_len: u64) -> bool {
    if (a_off == 0 && a_len == 0) || (b_off == 0 && b_len == 0) {
        return false;
    }
    let (a0, a1) = span(a_off, a_len);
    let (b0, b1) = span(b_off, b_len);
    a0 <= b1 && a1 >= b0
}

/// What an access to a range intends, for the conflict check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    SharedLock,
    ExclusiveLock,
}

/// A range of one stream as a lock request or an IO names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub stream: u64,
    pub offset: u64,
    pub length: u64,
}

/// Whether `access` by `owner` on `r` conflicts with existing lock `l`.
///
/// - Exclusive locks of other opens block everything.
/// - Shared locks block writes from anyone (MS-SMB2 3.3.5.14.2: a shared lock "disallows
///   writes to the region") and exclusive locks from anyone.
/// - An open's own exclusive lock blocks its further exclusive locks, but not its own IO or
///   its shared locks (Windows and Samba stack a shared lock inside one's own exclusive one).
fn conflicts(l: &Lock, owner: u64, access: Access, r: Range) -> bool {
    if l.stream != r.stream || !overlaps(l.offset, l.length, r.offset, r.length) {
        return false;
    }
    let mine = l.owner == owner;
    match (l.exclusive, access) {
        (true, _) if !mine => true,
        (true, Access::ExclusiveLock) => true,
        (true, _) => false,
        (false, Access::Read | Access::SharedLock) => false,
        (false, Access::Write | Access::ExclusiveLock) => true,
    }
}

/// Whether a lock request of `(offset, length)` conflicts with a lock another owner holds on
/// the same stream, `held` = (offset, length, exclusive): the rule of [`conflicts`] for an
/// owner that is never the holder (a cluster node's check of other nodes' locks,
/// smbq-cluster).
pub fn lock_conflict(held: (u64, u64, bool), offset: u64, length: u64, exclusive: bool) -> bool {
    let access = if exclusive {
        Access::ExclusiveLock
    } else {
        Access::SharedLock
    };
    another_owners(held, access, offset, length)
}

/// MS-FSA 2.1.4.10: whether a READ (`write` false) or WRITE of `(offset, length)` conflicts
/// with a lock another owner holds on the same stream, `held` = (offset, length, exclusive)
/// (a cluster node's view of other nodes' locks, smbq-cluster).
pub fn io_conflict(held: (u64, u64, bool), offset: u64, length: u64, write: bool) -> bool {
    let access = if write { Access::Write } else { Access::Read };
    another_owners(held, access, offset, length)
}

/// [`conflicts`] of `access` to `(offset, length)` with `held` (offset, length, exclusive),
/// a lock of another owner on the same stream.
fn another_owners(held: (u64, u64, bool), access: Access, offset: u64, length: u64) -> bool {
    let l = Lock {
        stream: 0,
        offset: held.0,
        length: held.1,
        exclusive: held.2,
        owner: 0,
    };
    let r = Range {
        stream: 0,
        offset,
        length,
    };
    conflicts(&l, 1, access, r)
}

/// Validates a range: MS-FSA 2.1.5.8, the last byte may not pass `u64::MAX`.
pub fn check_range(offset: u64, length: u64) -> Result<(), NtStatus> {
    if length != 0 && offset.checked_add(length - 1).is_none() {
        return Err(STATUS_INVALID_LOCK_RANGE);
    }
    Ok(())
}

/// What ends a blocking lock request other than its grant: CANCEL (STATUS_CANCELLED) or the
/// close of the waiting open (STATUS_RANGE_NOT_LOCKED).
#[derive(Clone, Copy)]
pub struct WaitEnds<'a> {
    pub cancel: &'a CancellationToken,
    /// The waiting open's `closed` flag (crate::tables::Open).
    pub closed: &'a std::sync::atomic::AtomicBool,
}

/// The byte-range locks held on one file, all its streams.
#[derive(Debug, Default)]
pub(crate) struct RangeLocks {
    locks: Vec<Lock>,
}

impl RangeLocks {
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// Takes a lock now or fails with LOCK_NOT_GRANTED.
    pub fn try_lock(&mut self, owner: u64, r: Range, exclusive: bool) -> Result<(), NtStatus> {
        check_range(r.offset, r.length)?;
        let access = if exclusive {
            Access::ExclusiveLock
        } else {
            Access::SharedLock
        };
        if self.locks.iter().any(|l| conflicts(l, owner, access, r)) {
            return Err(NtStatus::LOCK_NOT_GRANTED);
        }
        if self.locks.iter().filter(|l| l.owner == owner).count() >= MAX_LOCKS_PER_OPEN {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        self.locks.push(Lock {
            stream: r.stream,
            offset: r.offset,
            length: r.length,
            exclusive,
            owner,
        });
        Ok(())
    }

    /// MS-FSA 2.1.5.9: removes the lock of this owner with exactly this range (an exclusive
    /// one in preference), else RANGE_NOT_LOCKED.
    pub fn unlock(&mut self, owner: u64, r: Range) -> Result<(), NtStatus> {
        check_range(r.offset, r.length)?;
        let same = |l: &Lock| {
            l.owner == owner && l.stream == r.stream && l.offset == r.offset && l.length == r.length
        };
        let idx = self
            .locks
            .iter()
            .position(|l| same(l) && l.exclusive)
            .or_else(|| self.locks.iter().position(same))
            .ok_or(NtStatus::RANGE_NOT_LOCKED)?;
        self.locks.remove(idx);
        Ok(())
    }

    /// Drops every lock of `owner` (the open is closing).
    pub fn release_owner(&mut self, owner: u64) {
        self.locks.retain(|l| l.owner != owner);
    }

    /// MS-FSA 2.1.4.10 for READ/WRITE: FILE_LOCK_CONFLICT when another open's lock forbids it.
    pub fn check_io(&self, owner: u64, r: Range, write: bool) -> Result<(), NtStatus> {
        if r.length == 0 {
            return Ok(());
        }
        let access = if write { Access::Write } else { Access::Read };
        if self.locks.iter().any(|l| conflicts(l, owner, access, r)) {
            return Err(NtStatus::FILE_LOCK_CONFLICT);
        }
        Ok(())
    }

    /// The locks held, on every stream of the file.
    pub fn count(&self) -> usize {
        self.locks.len()
    }

    /// Whether a lock on `stream` starts inside its first `size` bytes (MS-FSA 2.1.5.18: what
    /// keeps shared oplocks and leases from being granted; Samba's file_has_brlocks).
    pub fn any_below(&self, stream: u64, size: u64) -> bool {
        self.locks
            .iter()
            .any(|l| l.stream == stream && l.offset < size)
    }

    /// `owner`'s locks on `stream` as (offset, length, exclusive), in the order taken.
    pub fn of_owner(&self, owner: u64, stream: u64) -> Vec<(u64, u64, bool)> {
        self.locks
            .iter()
            .filter(|l| l.owner == owner && l.stream == stream)
            .map(|l| (l.offset, l.length, l.exclusive))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FileKey, FileStates};
    use super::*;
    use crate::open_state::Queries as _;

    const K: FileKey = FileKey {
        dev: 1,
        ino: 2,
        stream: 0,
    };
    const A: u64 = 1;
    const B: u64 = 2;

    #[test]
    fn another_owners_lock_conflicts_as_in_the_table() {
        // Another node's locks (smbq-cluster) meet a request by the rule of the table.
        let shared = (10, 10, false);
        let exclusive = (10, 10, true);
        assert!(!lock_conflict(shared, 15, 1, false), "shared locks stack");
        assert!(lock_conflict(shared, 15, 1, true));
        assert!(lock_conflict(exclusive, 19, 5, false));
        assert!(
            !lock_conflict(exclusive, 20, 5, true),
            "ranges that do not overlap"
        );
        assert!(
            !lock_conflict(exclusive, 0, 0, true),
            "the (0, 0) range overlaps nothing"
        );
    }

    #[derive(Clone, Copy)]
    enum Op {
        Lock(u64, u64, u64, bool),
        Unlock(u64, u64, u64),
        Io(u64, u64, u64, bool),
        Close(u64),
    }
    use Op::*;

    /// Each row: an operation and the status it must produce, applied in order.
    fn run(table: &[(Op, NtStatus)]) {
        let m = FileStates::new();
        for (i, (op, want)) in table.iter().enumerate() {
            let got = match *op {
                Lock(o, off, len, ex) => m.try_lock(K, o, off, len, ex),
                Unlock(o, off, len) => m.unlock(K, o, off, len),
                Io(o, off, len, w) => m.check_io(K, o, off, len, w),
                Close(o) => {
                    m.release(K, o, false, None);
                    Ok(())
                }
            };
            let got = got.err().unwrap_or(NtStatus::SUCCESS);
            assert_eq!(got, *want, "row {i}");
        }
    }

    const OK: NtStatus = NtStatus::SUCCESS;
    const NG: NtStatus = NtStatus::LOCK_NOT_GRANTED;
    const LC: NtStatus = NtStatus::FILE_LOCK_CONFLICT;
    const RNL: NtStatus = NtStatus::RANGE_NOT_LOCKED;

    #[test]
    fn exclusive_blocks_others_not_owner_io() {
        run(&[
            (Lock(A, 100, 10, true), OK),
            (Lock(B, 105, 1, false), NG),
            (Lock(B, 109, 10, true), NG),
            (Lock(B, 110, 10, true), OK),
            (Io(B, 100, 1, false), LC),
            (Io(B, 90, 20, true), LC),
            (Io(B, 90, 10, true), OK),
            (Io(A, 100, 10, true), OK),
            (Io(A, 100, 10, false), OK),
            // Same open, overlapping exclusive: refused; shared inside own exclusive: granted.
            (Lock(A, 100, 10, true), NG),
            (Lock(A, 100, 10, false), OK),
        ]);
    }

    #[test]
    fn shared_allows_reads_and_shared_blocks_writes() {
        run(&[
            (Lock(A, 0, 10, false), OK),
            (Lock(B, 0, 10, false), OK),
            (Lock(B, 5, 1, true), NG),
            (Io(B, 0, 10, false), OK),
            (Io(B, 0, 10, true), LC),
            // Writing under one's own shared lock is refused too.
            (Io(A, 0, 1, true), LC),
        ]);
    }

    #[test]
    fn unlock_must_match_exactly() {
        run(&[
            (Lock(A, 10, 10, true), OK),
            (Unlock(A, 10, 5), RNL),
            (Unlock(A, 11, 10), RNL),
            (Unlock(B, 10, 10), RNL),
            (Unlock(A, 10, 10), OK),
            (Unlock(A, 10, 10), RNL),
            (Lock(B, 10, 10, true), OK),
        ]);
    }

    #[test]
    fn zero_length_locks() {
        run(&[
            // {0,0} never conflicts.
            (Lock(A, 0, 0, true), OK),
            (Lock(B, 0, 0, true), OK),
            (Lock(B, 0, 5, true), OK),
            (Lock(A, 5, 10, true), OK),
            // Zero length at 10 lies inside A's [5,15): it needs bytes 9 and 10 locked.
            (Lock(B, 10, 0, true), NG),
            // At the start or just past the end of a range it overlaps nothing.
            (Lock(B, 5, 0, true), OK),
            (Lock(B, 15, 0, true), OK),
            (Unlock(B, 15, 0), OK),
            (Unlock(B, 15, 0), RNL),
        ]);
    }

    #[test]
    fn range_overflow_is_invalid() {
        run(&[
            (Lock(A, u64::MAX, 2, true), STATUS_INVALID_LOCK_RANGE),
            (Lock(A, u64::MAX, 1, true), OK),
            (Lock(A, u64::MAX, 0, true), OK),
            (Lock(B, 2, u64::MAX, true), STATUS_INVALID_LOCK_RANGE),
            // Ends at u64::MAX - 1: clear of A's last byte.
            (Lock(B, 0, u64::MAX, true), OK),
            (Lock(B, 1, u64::MAX, true), NG),
            (Unlock(A, u64::MAX, 2), STATUS_INVALID_LOCK_RANGE),
        ]);
    }

    #[test]
    fn close_releases_owner_locks_only() {
        let m = FileStates::new();
        m.try_lock(K, A, 0, 10, true).unwrap();
        m.try_lock(K, B, 20, 10, true).unwrap();
        m.release(K, A, false, None);
        assert_eq!(m.lock_count(K), 1);
        run(&[(Close(A), OK), (Lock(B, 0, 1, true), OK)]);
    }

    #[test]
    fn one_open_holds_at_most_max_locks() {
        let m = FileStates::new();
        for i in 0..MAX_LOCKS_PER_OPEN as u64 {
            m.try_lock(K, A, i * 2, 1, false).unwrap();
        }
        let next = (MAX_LOCKS_PER_OPEN as u64) * 2;
        assert_eq!(
            m.try_lock(K, A, next, 1, false),
            Err(NtStatus::INSUFFICIENT_RESOURCES)
        );
        // Another open of the file has its own allowance, and an unlock frees one.
        m.try_lock(K, B, next, 1, false).unwrap();
        m.unlock(K, A, 0, 1).unwrap();
        m.try_lock(K, A, next + 2, 1, false).unwrap();
    }
}
