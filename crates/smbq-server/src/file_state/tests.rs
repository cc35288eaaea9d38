//! The parts of a file's state together: one release takes an open out of all of them,
//! streams stay apart, entries go when empty, the ChangeTime cache is bounded.

use std::time::Instant;

use smbq_vfs::{RelPath, Timespec};
use smbq_wire::{FileId, NtStatus};

use super::lease::{Contention, LeaseAsk, LeaseKey};
use super::oplock::{Level, OpenCheck, Owner};
use super::{FileKey, FileStates, Layout, OneTable, OpenRequest, Sharded};
use crate::access::{mask, share};
use crate::open_state::Queries as _;
use smbq_wire::create_context::lease_state::{HANDLE_CACHING, READ_CACHING, WRITE_CACHING};

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

/// The oplock and lease check of a plain read-write open of `key`, asking for `lease`.
fn check(
    t: &FileStates,
    key: FileKey,
    lease: Option<&LeaseAsk>,
) -> Result<(OpenCheck, Contention), NtStatus> {
    let open = OpenRequest {
        granted: RW,
        share_access: share::ALL,
        overwrite: false,
        deletes: false,
        lease,
    };
    t.oplock_check(key, &open, Instant::now())
        .map(|(o, l, _)| (o, l))
}

fn ask(n: u8) -> LeaseAsk {
    LeaseAsk {
        key: LeaseKey {
            client_guid: [7; 16],
            key: [n; 16],
        },
        requested: READ_CACHING | WRITE_CACHING | HANDLE_CACHING,
        v2_epoch: None,
        parent: None,
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

    assert_eq!(t.release(K, 1, false, None), None, "open 2 remains");
    assert_eq!(t.lock_count(K), 0);
    assert_eq!(t.open_count(K), 1);
    // No holder left: a data open breaks nothing and need not wait.
    let (c, _) = check(&t, K, None).unwrap();
    assert!(c.notices.is_empty() && !c.wait);
    t.try_lock(K, 2, 5, 1, true).unwrap();

    let last = t.release(K, 2, false, None).unwrap();
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
    let (c, _) = check(&t, K, None).unwrap();
    assert!(
        c.notices.is_empty(),
        "an open of the file breaks no stream's oplock"
    );
    let (c, _) = check(&t, s, None).unwrap();
    assert_eq!(c.notices.len(), 1);
    assert_eq!(c.notices[0].key, s);
    assert!(c.wait);
    // The holder's release ends the wait.
    t.release(s, 1, false, None);
    assert_eq!(t.oplock_pending_until(s, Instant::now()), None);
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

/// Client-set ChangeTimes are bounded per part of the table, in both layouts.
fn change_times_are_bounded<L: Layout>() {
    let t = FileStates::<L>::default();
    // Same shard: inode numbers 64 apart, device 0.
    let key = |i: u64| FileKey {
        dev: 0,
        ino: i * 64,
        stream: 0,
    };
    let c = Timespec::new(1, 0);
    let n = L::CHANGE_TIMES_PER_PART as u64 + 10;
    for i in 0..n {
        t.set_change_time(key(i), c, i);
    }
    assert!(t.entries() <= L::CHANGE_TIMES_PER_PART, "{}", t.entries());
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

#[test]
fn change_times_are_bounded_per_shard() {
    change_times_are_bounded::<Sharded>();
}

#[test]
fn change_times_are_bounded_in_one_table() {
    change_times_are_bounded::<OneTable>();
}

/// MS-SMB2 3.3.5.9.8: a lease key names one file (one stream); the index follows the lease
/// and empties with its last open, and an acknowledgment finds the lease through it.
#[test]
fn lease_keys_name_one_file_and_leave_with_their_last_open() {
    let t = FileStates::new();
    let other = FileKey { ino: 41, ..K };
    let a = ask(1);
    t.admit(K, 1, RW, share::ALL, &p(), false).unwrap();
    let g = t.lease_grant(K, 1, 9, &a, (false, 0)).unwrap();
    assert_eq!(g.state, a.requested, "alone on the file: everything");
    assert!(t.lease_elsewhere(&a.key, other));
    assert!(t.lease_elsewhere(&a.key, FileKey { stream: 3, ..K }));
    assert!(!t.lease_elsewhere(&a.key, K));
    assert_eq!(
        t.lease_grant(other, 5, 9, &a, (false, 0)),
        None,
        "another file: no lease"
    );

    // A second key's data open breaks the first lease's W and waits for the acknowledgment.
    let b = ask(2);
    let (_, c) = check(&t, K, Some(&b)).unwrap();
    assert!(c.wait);
    assert_eq!(c.notices[0].new, READ_CACHING | HANDLE_CACHING);
    assert!(t.oplock_pending_until(K, Instant::now()).is_some());
    assert_eq!(
        t.lease_acknowledge(&b.key, READ_CACHING, Instant::now()),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND),
        "key 2 has no lease yet"
    );
    t.lease_acknowledge(&a.key, READ_CACHING | HANDLE_CACHING, Instant::now())
        .unwrap();
    assert_eq!(
        t.lease_acknowledge(&a.key, READ_CACHING, Instant::now()),
        Err(NtStatus::UNSUCCESSFUL),
        "no break under way any more"
    );
    assert_eq!(t.oplock_pending_until(K, Instant::now()), None);
    t.admit(K, 2, RW, share::ALL, &p(), false).unwrap();
    let g = t.lease_grant(K, 2, 9, &b, (false, 0)).unwrap();
    assert_eq!(
        g.state,
        READ_CACHING | HANDLE_CACHING,
        "no W beside another key"
    );

    // A write through key 2's open breaks key 1 to none, not key 2 itself.
    let ((oplocks, leases), _) = t.break_for_write(K, 2, Instant::now());
    assert!(oplocks.is_empty());
    let [n] = &leases[..] else {
        panic!("one break: {leases:?}")
    };
    assert_eq!((n.key, n.new, n.ack_required), (a.key, 0, true));

    t.release(K, 1, false, None);
    assert!(
        !t.lease_elsewhere(&a.key, other),
        "key 1 ended with its open"
    );
    assert_eq!(
        t.lease_acknowledge(&a.key, 0, Instant::now()),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    assert!(t.lease_state(&b.key, K).is_some());
    t.release(K, 2, false, None);
    assert_eq!(t.entries(), 0);
    assert!(t.lease_files.lock().is_empty());
}

/// smbtorture smb2.lease.statopen2/3: stat opens do not take W from a lease.
#[test]
fn stat_opens_leave_write_caching() {
    let t = FileStates::new();
    t.admit(K, 1, mask::FILE_READ_ATTRIBUTES, share::ALL, &p(), false)
        .unwrap();
    t.admit(K, 2, RW, share::ALL, &p(), false).unwrap();
    let a = ask(1);
    assert_eq!(
        t.lease_grant(K, 2, 9, &a, (false, 0)).unwrap().state,
        a.requested
    );
    // An oplock open beside a lease caching handles gets none.
    t.admit(K, 3, RW, share::ALL, &p(), false).unwrap();
    assert_eq!(
        t.oplock_grant(K, 3, Level::Batch, false, owner(3)),
        Level::None
    );
}

/// The last close of a delete-pending file keeps it delete-pending until its unlink is done
/// (`deleted`): a new open meanwhile is DELETE_PENDING and nothing waiting wakes, so a CREATE
/// that waited for the closing open's break never opens the file about to be unlinked
/// (smbtorture smb2.durable-open.delete_on_close1 under load).
#[tokio::test]
async fn a_deleting_last_close_holds_the_name_until_deleted() {
    let t = FileStates::new();
    t.admit(K, 1, RW | mask::DELETE, share::ALL, &p(), false)
        .unwrap();
    t.oplock_grant(K, 1, Level::Batch, false, owner(1));
    let changed = &t.shard(K).changed;
    let woken = changed.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    let last = t.release(K, 1, true, None).expect("the last close");
    assert!(last.delete);
    assert!(t.deleting(K));
    assert_eq!(
        t.admit(K, 2, RW, share::ALL, &p(), false),
        Err(NtStatus::DELETE_PENDING)
    );
    assert!(
        futures_util_poll(woken.as_mut()).is_pending(),
        "nothing wakes before the unlink"
    );
    t.deleted(K);
    assert!(!t.deleting(K));
    assert!(futures_util_poll(woken.as_mut()).is_ready());
    t.admit(K, 2, RW, share::ALL, &p(), false).unwrap();
    // A close that deletes nothing wakes at once.
    let woken = changed.notified();
    tokio::pin!(woken);
    woken.as_mut().enable();
    assert!(t.release(K, 2, false, None).is_some_and(|l| !l.delete));
    assert!(futures_util_poll(woken.as_mut()).is_ready());
}

fn futures_util_poll<F: std::future::Future>(
    f: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let waker = std::task::Waker::noop();
    f.poll(&mut std::task::Context::from_waker(waker))
}

/// A break withheld from an away client that times out changes its lease (to none, with a
/// new epoch): the open's persistent record must follow. The wait that sees the timeout
/// reports nothing itself, so the CREATE's next look at the file (or a write, or a rename)
/// names the open to record, once.
#[test]
fn a_timed_out_break_names_the_open_to_record_again() {
    use crate::file_state::oplock::BREAK_TIMEOUT;
    use crate::open_state::{BreakWait, Change, LockOp, OpenState, WaitToken};

    let t = FileStates::new();
    let now = Instant::now();
    let later = now + BREAK_TIMEOUT;
    // Open `id` of K with lease `a`.
    let leased = |id: u64, a: &LeaseAsk| {
        t.admit(K, id, RW, share::ALL, &p(), false).unwrap();
        t.lease_grant(K, id, 9, a, (false, 0)).unwrap();
    };
    // Open 1's write at `at`: it must break another key's lease.
    let write_breaking = |at: Instant| {
        let fx = OpenState::on_change(&t, K, Change::Write { by: 1 }, at);
        assert!(
            !fx.lease_breaks.is_empty(),
            "a write by key 1's open breaks"
        );
    };
    let a = ask(1);
    leased(1, &a);
    let b = ask(2);
    let intent = OpenRequest {
        granted: RW,
        share_access: share::ALL,
        overwrite: false,
        deletes: false,
        lease: Some(&b),
    };
    let fx = OpenState::contend(&t, K, &intent, now).unwrap();
    assert!(fx.wait.is_some(), "key 1 must give up W first");
    assert!(fx.recorded.is_empty(), "nothing changed yet");
    t.lease_withheld(&fx.lease_breaks[0]);

    let token = WaitToken { key: K };
    assert_eq!(OpenState::break_wait(&t, token, later), BreakWait::Done);
    let fx = OpenState::contend(&t, K, &intent, later).unwrap();
    assert_eq!(fx.recorded, vec![1], "the holder's lease went to none");
    let fx = OpenState::contend(&t, K, &intent, later).unwrap();
    assert!(fx.recorded.is_empty(), "named once");

    // The same through a write: open 2's write breaks key 1's R, and the break times out.
    leased(2, &b);
    write_breaking(later);
    let fx = OpenState::on_change(&t, K, Change::Write { by: 1 }, later + BREAK_TIMEOUT);
    assert_eq!(fx.recorded, vec![2]);

    // And through a byte-range lock, which breaks like a write: the locker's own record,
    // then the open whose lease the timeout changed.
    let c = ask(3);
    let (t1, t2) = (later + BREAK_TIMEOUT, later + BREAK_TIMEOUT * 2);
    leased(3, &c);
    write_breaking(t1);
    let lock = LockOp::Lock { exclusive: false };
    let (r, fx) = OpenState::on_lock(&t, K, 1, (0, 1), lock, t2);
    assert!(r.is_ok());
    assert_eq!(fx.recorded, vec![1, 3]);
}
