//! Byte-range locks (MS-FSA 2.1.5.8 lock, 2.1.5.9 unlock, 2.1.4.10 conflict check), kept per
//! file and owned by opens. Blocking lock requests wait on a [`Notify`] that fires whenever
//! any lock goes away, until they get their lock or are cancelled.

use std::collections::HashMap;

use parking_lot::Mutex;
use smbq_wire::NtStatus;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// MS-ERREF: STATUS_INVALID_LOCK_RANGE (not among smbq-wire's named constants).
pub const STATUS_INVALID_LOCK_RANGE: NtStatus = NtStatus(0xC000_01A1);

/// Identity of a stream across opens: device, inode and which data stream of it. Share
/// modes, oplocks and byte-range locks are per stream (MS-FSA 2.1.1: an Open is of a Stream), so a named
/// stream (`crate::streams::stream_id`) is a key of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    /// 0 for the unnamed data stream (and directories).
    pub stream: u64,
}

impl FileKey {
    /// The key of the file (its unnamed stream) whose metadata is `st`.
    pub fn of(st: &smbq_vfs::Stat) -> FileKey {
        FileKey {
            dev: st.dev,
            ino: st.ino,
            stream: 0,
        }
    }

    /// The file itself (its unnamed stream), whatever stream `self` names.
    pub fn base(self) -> FileKey {
        FileKey { stream: 0, ..self }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Lock {
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

/// Whether `access` by `owner` on the range conflicts with existing lock `l`.
///
/// - Exclusive locks of other opens block everything.
/// - Shared locks block writes from anyone (MS-SMB2 3.3.5.14.2: a shared lock "disallows
///   writes to the region") and exclusive locks from anyone.
/// - An open's own exclusive lock blocks its further exclusive locks, but not its own IO or
///   its shared locks (Windows and Samba stack a shared lock inside one's own exclusive one).
fn conflicts(l: &Lock, owner: u64, access: Access, offset: u64, length: u64) -> bool {
    if !overlaps(l.offset, l.length, offset, length) {
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

#[derive(Default)]
pub struct ByteLocks {
    files: Mutex<HashMap<FileKey, Vec<Lock>>>,
    released: Notify,
}

impl ByteLocks {
    pub fn new() -> Self {
        Self::default()
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
        check_range(offset, length)?;
        let access = if exclusive {
            Access::ExclusiveLock
        } else {
            Access::SharedLock
        };
        let mut files = self.files.lock();
        let list = files.entry(key).or_default();
        if list
            .iter()
            .any(|l| conflicts(l, owner, access, offset, length))
        {
            if list.is_empty() {
                files.remove(&key);
            }
            return Err(NtStatus::LOCK_NOT_GRANTED);
        }
        list.push(Lock {
            offset,
            length,
            exclusive,
            owner,
        });
        Ok(())
    }

    /// Waits until the lock is granted or `ends` says the request is over.
    pub async fn lock_wait(
        &self,
        key: FileKey,
        owner: u64,
        offset: u64,
        length: u64,
        exclusive: bool,
        ends: WaitEnds<'_>,
    ) -> Result<(), NtStatus> {
        let WaitEnds { cancel, closed } = ends;
        loop {
            // MS-SMB2 3.3.5.14.2 / Windows: a pending lock whose open is closed completes with
            // RANGE_NOT_LOCKED (smbtorture lock.cancel, "cancel by close").
            if closed.load(std::sync::atomic::Ordering::Acquire) {
                return Err(NtStatus::RANGE_NOT_LOCKED);
            }
            // Registered before the attempt, so a release between the attempt and the wait
            // still wakes us.
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            match self.try_lock(key, owner, offset, length, exclusive) {
                Err(NtStatus::LOCK_NOT_GRANTED) => {}
                other => return other,
            }
            tokio::select! {
                _ = &mut released => {}
                _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
            }
        }
    }

    /// MS-FSA 2.1.5.9: removes the lock of this owner with exactly this range (an exclusive
    /// one in preference), else RANGE_NOT_LOCKED.
    pub fn unlock(
        &self,
        key: FileKey,
        owner: u64,
        offset: u64,
        length: u64,
    ) -> Result<(), NtStatus> {
        check_range(offset, length)?;
        let mut files = self.files.lock();
        let Some(list) = files.get_mut(&key) else {
            return Err(NtStatus::RANGE_NOT_LOCKED);
        };
        let same = |l: &Lock| l.owner == owner && l.offset == offset && l.length == length;
        let idx = list
            .iter()
            .position(|l| same(l) && l.exclusive)
            .or_else(|| list.iter().position(same))
            .ok_or(NtStatus::RANGE_NOT_LOCKED)?;
        list.remove(idx);
        if list.is_empty() {
            files.remove(&key);
        }
        drop(files);
        self.released.notify_waiters();
        Ok(())
    }

    /// Drops every lock of `owner` on `key` (the open is closing).
    pub fn release_owner(&self, key: FileKey, owner: u64) {
        let mut files = self.files.lock();
        if let Some(list) = files.get_mut(&key) {
            list.retain(|l| l.owner != owner);
            if list.is_empty() {
                files.remove(&key);
            }
        }
        drop(files);
        // Always wake: even without locks of its own, the closing owner may have a request
        // waiting in `lock_wait`, which must now complete.
        self.released.notify_waiters();
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
        if length == 0 {
            return Ok(());
        }
        let access = if write { Access::Write } else { Access::Read };
        let files = self.files.lock();
        match files.get(&key) {
            Some(list)
                if list
                    .iter()
                    .any(|l| conflicts(l, owner, access, offset, length)) =>
            {
                Err(NtStatus::FILE_LOCK_CONFLICT)
            }
            _ => Ok(()),
        }
    }

    #[cfg(test)]
    fn count(&self, key: FileKey) -> usize {
        self.files.lock().get(&key).map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    const K: FileKey = FileKey {
        dev: 1,
        ino: 2,
        stream: 0,
    };
    const A: u64 = 1;
    const B: u64 = 2;

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
        let m = ByteLocks::new();
        for (i, (op, want)) in table.iter().enumerate() {
            let got = match *op {
                Lock(o, off, len, ex) => m.try_lock(K, o, off, len, ex),
                Unlock(o, off, len) => m.unlock(K, o, off, len),
                Io(o, off, len, w) => m.check_io(K, o, off, len, w),
                Close(o) => {
                    m.release_owner(K, o);
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
        let m = ByteLocks::new();
        m.try_lock(K, A, 0, 10, true).unwrap();
        m.try_lock(K, B, 20, 10, true).unwrap();
        m.release_owner(K, A);
        assert_eq!(m.count(K), 1);
        run(&[(Close(A), OK), (Lock(B, 0, 1, true), OK)]);
    }

    #[tokio::test]
    async fn blocking_lock_waits_for_release_or_cancel() {
        let m = std::sync::Arc::new(ByteLocks::new());
        m.try_lock(K, A, 0, 10, true).unwrap();
        let cancel = CancellationToken::new();
        let m2 = m.clone();
        let c2 = cancel.clone();
        let waiter = tokio::spawn(async move {
            let closed = AtomicBool::new(false);
            let ends = WaitEnds {
                cancel: &c2,
                closed: &closed,
            };
            m2.lock_wait(K, B, 0, 10, true, ends).await
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        m.unlock(K, A, 0, 10).unwrap();
        assert_eq!(waiter.await.unwrap(), Ok(()));

        let m3 = m.clone();
        let c3 = cancel.clone();
        let waiter = tokio::spawn(async move {
            let closed = AtomicBool::new(false);
            let ends = WaitEnds {
                cancel: &c3,
                closed: &closed,
            };
            m3.lock_wait(K, A, 5, 1, false, ends).await
        });
        tokio::task::yield_now().await;
        cancel.cancel();
        assert_eq!(waiter.await.unwrap(), Err(NtStatus::CANCELLED));
    }

    #[tokio::test]
    async fn closing_the_waiting_open_ends_its_lock_request() {
        let m = std::sync::Arc::new(ByteLocks::new());
        m.try_lock(K, A, 0, 10, true).unwrap();
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let (m2, c2) = (m.clone(), closed.clone());
        let waiter = tokio::spawn(async move {
            let ends = WaitEnds {
                cancel: &CancellationToken::new(),
                closed: &c2,
            };
            m2.lock_wait(K, B, 0, 10, true, ends).await
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        // B closes (it holds no locks): its pending request completes, A's lock stays.
        closed.store(true, std::sync::atomic::Ordering::Release);
        m.release_owner(K, B);
        assert_eq!(waiter.await.unwrap(), Err(NtStatus::RANGE_NOT_LOCKED));
        assert_eq!(m.count(K), 1);
    }
}
