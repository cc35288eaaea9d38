//! The parts of a file's state together: one release takes an open out of all of them,
//! streams stay apart, entries go when empty, the ChangeTime cache is bounded.

use std::time::Instant;

use smbq_vfs::{RelPath, Timespec};
use smbq_wire::{FileId, NtStatus};

use super::oplock::{Level, Owner};
use super::{FileKey, FileStates, MAX_CHANGE_TIMES_PER_SHARD};
use crate::access::{mask, share};

const K: FileKey = FileKey {
    dev: 3,
    ino: 40,
    stream: 0,
};
const RW: u32 = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA;

fn p() -> RelPath {
    RelPath::parse("f").unwrap()
}

fn owner(id: u64) -> Owner {
    Owner {
        session_id: 9,
        file_id: FileId {
            persistent: id,
            volatile: id,
        },
    }
}

#[test]
fn release_takes_an_open_out_of_everything_at_once() {
    let t = FileStates::new();
    t.admit(K, 1, RW, share::ALL, &p(), false).unwrap();
    assert_eq!(
        t.oplock_grant(K, 1, Level::Batch, false, owner(1)),
        Level::Batch
    );
    t.try_lock(K, 1, 0, 10, true).unwrap();
    t.admit(K, 2, RW, share::ALL, &p(), false).unwrap();
    assert_eq!(
        t.try_lock(K, 2, 5, 1, true),
        Err(NtStatus::LOCK_NOT_GRANTED)
    );

    assert_eq!(t.release(K, 1, false), None, "open 2 remains");
    assert_eq!(t.lock_count(K), 0);
    assert_eq!(t.open_count(K), 1);
    // No holder left: a data open breaks nothing and need not wait.
    let c = t
        .oplock_check(K, RW, share::ALL, false, Instant::now())
        .unwrap();
    assert!(c.notices.is_empty() && !c.wait);
    t.try_lock(K, 2, 5, 1, true).unwrap();

    let last = t.release(K, 2, false).unwrap();
    assert!(!last.delete);
    assert_eq!(t.entries(), 0, "an idle file leaves no entry");
}

#[test]
fn streams_of_one_file_keep_their_own_locks_and_oplocks() {
    let s = FileKey { stream: 11, ..K };
    let t = FileStates::new();
    t.admit(s, 1, RW, share::ALL, &p(), false).unwrap();
    assert_eq!(
        t.oplock_grant(s, 1, Level::Batch, false, owner(1)),
        Level::Batch
    );
    t.try_lock(s, 1, 0, 10, true).unwrap();
    // The unnamed stream: same bytes, another unit.
    t.admit(K, 2, RW, share::ALL, &p(), false).unwrap();
    t.try_lock(K, 2, 0, 10, true).unwrap();
    assert_eq!(
        t.check_io(s, 2, 0, 1, false),
        Err(NtStatus::FILE_LOCK_CONFLICT)
    );
    assert_eq!(
        t.check_io(K, 1, 0, 1, false),
        Err(NtStatus::FILE_LOCK_CONFLICT)
    );
    let c = t
        .oplock_check(K, RW, share::ALL, false, Instant::now())
        .unwrap();
    assert!(
        c.notices.is_empty(),
        "an open of the file breaks no stream's oplock"
    );
    let c = t
        .oplock_check(s, RW, share::ALL, false, Instant::now())
        .unwrap();
    assert_eq!(c.notices.len(), 1);
    assert_eq!(c.notices[0].key, s);
    assert!(c.wait);
    // The holder's release ends the wait.
    t.release(s, 1, false);
    assert_eq!(t.oplock_pending_until(s, Instant::now()), None);
}

/// smbtorture smb2.oplock.doc: a delete-pending file fails the open before anything breaks.
#[test]
fn delete_pending_fails_before_any_break() {
    let t = FileStates::new();
    t.admit(K, 1, RW | mask::DELETE, share::ALL, &p(), false)
        .unwrap();
    t.oplock_grant(K, 1, Level::Batch, false, owner(1));
    t.set_delete_pending(K, true);
    assert_eq!(
        t.oplock_check(K, RW, share::ALL, false, Instant::now()),
        Err(NtStatus::DELETE_PENDING)
    );
    assert_eq!(t.oplock_pending_until(K, Instant::now()), None);
}

#[test]
fn grant_sees_the_other_opens_of_the_same_stream() {
    let t = FileStates::new();
    t.admit(K, 1, RW, share::ALL, &p(), false).unwrap();
    t.admit(K, 2, RW, share::ALL, &p(), false).unwrap();
    assert_eq!(
        t.oplock_grant(K, 2, Level::Batch, false, owner(2)),
        Level::II
    );
    // A stream's first open is alone on its stream.
    let s = FileKey { stream: 5, ..K };
    t.admit(s, 3, RW, share::ALL, &p(), false).unwrap();
    assert_eq!(
        t.oplock_grant(s, 3, Level::Batch, false, owner(3)),
        Level::Batch
    );
}

#[test]
fn change_times_are_bounded_per_shard() {
    let t = FileStates::new();
    // Same shard: inode numbers 64 apart, device 0.
    let key = |i: u64| FileKey {
        dev: 0,
        ino: i * 64,
        stream: 0,
    };
    let c = Timespec::new(1, 0);
    let n = MAX_CHANGE_TIMES_PER_SHARD as u64 + 10;
    for i in 0..n {
        t.set_change_time(key(i), c, i);
    }
    assert!(t.entries() <= MAX_CHANGE_TIMES_PER_SHARD, "{}", t.entries());
    assert_eq!(
        t.change_time(key(n - 1), c),
        Some(n - 1),
        "the newest is kept"
    );
    // An open file's entry keeps its opens when its time is forgotten.
    t.admit(key(n), 1, RW, share::ALL, &p(), false).unwrap();
    t.set_change_time(key(n), c, 7);
    for i in 0..n {
        t.set_change_time(key(n + 1 + i), c, i);
    }
    assert_eq!(t.open_count(key(n)), 1);
}
