//! Table-driven tests of the [`OpenState`] door, run on both implementations ([`Sharded`],
//! the server's, and [`OneTable`]). Each table is a sequence of verbs and what each must
//! answer; the tables go through the trait only (`&dyn OpenState`), so a third
//! implementation runs them as they are ([`run_all`]: smbq-cluster's `tests/door.rs` runs them
//! on a cluster node over a real etcd). The expectations are MS-FSA's and smbtorture's, cited
//! per table.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)] // test code, run by tests only

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use smbq_vfs::RelPath;
use smbq_wire::create_context::lease_state::{HANDLE_CACHING, READ_CACHING, WRITE_CACHING};
use smbq_wire::{FileId, NtStatus};

use super::lease::{LeaseAsk, LeaseBreakNotice, LeaseKey};
use super::oplock::{Level, Owner, is_stat_open};
use super::{FileKey, FileStates, NewOpen, OneTable, OpenRequest, Sharded};
use crate::access::{mask, share};
use crate::open_state::{
    Ack, Acked, Below, BreakWait, Changes as _, LockOp, Moved, OpenState, Queries as _, Undelivered,
};

const K: FileKey = FileKey {
    dev: 3,
    ino: 40,
    stream: 0,
};
const RW: u32 = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA;
const STAT: u32 = mask::FILE_READ_ATTRIBUTES;
const RWH: u32 = READ_CACHING | WRITE_CACHING | HANDLE_CACHING;
const RH: u32 = READ_CACHING | HANDLE_CACHING;
const SESSION: u64 = 9;

/// One verb of a table. Opens are numbered by the table; lease keys are `[n; 16]` of one
/// client.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Admit open `id` with `access` and `share` to stream `stream` of K.
    Admit {
        id: u64,
        access: u32,
        share: u32,
        stream: u64,
    },
    /// A CREATE with `access` (asking for lease `lease`) contends for stream `stream`.
    Contend {
        access: u32,
        share: u32,
        lease: Option<u8>,
        stream: u64,
    },
    Oplock {
        id: u64,
        level: Level,
        stream: u64,
    },
    Lease {
        id: u64,
        lease: u8,
        requested: u32,
    },
    Lock {
        id: u64,
        at: u64,
        len: u64,
        exclusive: bool,
    },
    /// A waiting lock request trying again.
    Retry {
        id: u64,
        at: u64,
        len: u64,
        exclusive: bool,
    },
    Unlock {
        id: u64,
        at: u64,
        len: u64,
    },
    CheckIo {
        id: u64,
        at: u64,
        len: u64,
        write: bool,
    },
    Write {
        id: u64,
    },
    Rename {
        id: u64,
    },
    AckOplock {
        id: u64,
        level: Level,
    },
    AckLease {
        lease: u8,
        state: u32,
    },
    LeaseUndelivered {
        lease: u8,
    },
    /// SET_INFO FileDispositionInformation on K.
    DeletePending {
        pending: bool,
    },
    Release {
        id: u64,
        delete_on_close: bool,
    },
    Deleted,
    /// Where a wait for K's breaks stands, `after` from the table's start.
    Wait {
        after: Duration,
    },
}

/// What a step answered.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Out {
    Ok,
    Err(NtStatus),
    Level(Level),
    State(u32),
    Fx(Fx),
    /// A refusal with effects (a lock request refused still breaks).
    ErrFx(NtStatus, Fx),
    /// An oplock acknowledgment: the level left, the opens to record again.
    AckedOplock(Level, Vec<u64>),
    /// A lease acknowledgment: the state left and its effects.
    AckedLease(u32, Fx),
    Wait(WaitKind),
    /// A release: whether it was the last open, and whether the close must delete the file.
    Closed {
        last: bool,
        delete: bool,
    },
}

/// A verb's [`Effects`](crate::open_state::Effects) as a table writes them: oplock breaks
/// (open, new level), lease breaks (key, new state), whether to wait, the opens whose records
/// the persistent store writes again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Fx {
    oplocks: Vec<(u64, Level)>,
    leases: Vec<(u8, u32)>,
    wait: bool,
    purge: Vec<u64>,
    recorded: Vec<u64>,
}

/// Breaks, and whether the request waits for them.
fn breaks(oplocks: Vec<(u64, Level)>, leases: Vec<(u8, u32)>, wait: bool) -> Out {
    // A CREATE that waits purges the opens it waits for if they are parked durable opens.
    let purge = if wait {
        oplocks.iter().map(|(id, _)| *id).collect()
    } else {
        Vec::new()
    };
    Out::Fx(Fx {
        oplocks,
        leases,
        wait,
        purge,
        recorded: Vec::new(),
    })
}

/// A CREATE waiting for lease `n`'s break to `to`; lease `n`'s open (numbered `n` in these
/// tables) is purged if it is a parked durable open.
fn lease_wait(n: u8, to: u32) -> Out {
    Out::Fx(Fx {
        leases: vec![(n, to)],
        wait: true,
        purge: vec![u64::from(n)],
        ..Fx::default()
    })
}

/// Opens `ids` to record again, as a file-wide change says.
fn recorded_all(ids: &[u64]) -> Out {
    Out::Fx(Fx {
        recorded: ids.to_vec(),
        ..Fx::default()
    })
}

/// Errors keep their effects when they have some.
fn outcome(r: Result<(), NtStatus>, fx: crate::open_state::Effects) -> Out {
    match (r, fx_of(fx)) {
        (Ok(()), fx) => Out::Fx(fx),
        (Err(s), fx) if fx == Fx::default() => E(s),
        (Err(s), fx) => Out::ErrFx(s, fx),
    }
}

/// A lease acknowledgment leaving `state`, whose lease's `opens` are recorded again.
fn acked_lease(state: u32, opens: &[u64]) -> Out {
    let fx = Fx {
        recorded: opens.to_vec(),
        ..Fx::default()
    };
    Out::AckedLease(state, fx)
}

/// Only open `id`'s record to write again (a lock taken or dropped).
fn recorded(id: u64) -> Out {
    Out::Fx(Fx {
        recorded: vec![id],
        ..Fx::default()
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WaitKind {
    Done,
    Pending,
    Deleting,
}

use Out::{Closed, Err as E, Ok as Fine};
use Step::*;

fn lease_key(n: u8) -> LeaseKey {
    LeaseKey {
        client_guid: [7; 16],
        key: [n; 16],
    }
}

fn ask(n: u8, requested: u32) -> LeaseAsk {
    LeaseAsk {
        key: lease_key(n),
        requested,
        v2_epoch: None,
        parent: None,
    }
}

fn on(stream: u64) -> FileKey {
    FileKey { stream, ..K }
}

std::thread_local! {
    /// The latest lease break notice each table's step returned, by lease, for a later
    /// `LeaseUndelivered` step to report as failed (cleared for each implementation).
    static SENT: RefCell<HashMap<u8, LeaseBreakNotice>> = RefCell::default();
}

fn fx_of(fx: crate::open_state::Effects) -> Fx {
    SENT.with(|sent| {
        let mut sent = sent.borrow_mut();
        for n in &fx.lease_breaks {
            sent.insert(n.key.key[0], *n);
        }
    });
    Fx {
        oplocks: fx
            .oplock_breaks
            .iter()
            .map(|n| (n.open_id, n.level))
            .collect(),
        leases: fx
            .lease_breaks
            .iter()
            .map(|n| (n.key.key[0], n.new))
            .collect(),
        wait: fx.wait.is_some(),
        purge: fx.purge,
        recorded: fx.recorded,
    }
}

fn effects(fx: crate::open_state::Effects) -> Out {
    Out::Fx(fx_of(fx))
}

fn status(r: Result<(), NtStatus>) -> Out {
    r.map_or_else(E, |()| Fine)
}

/// Runs one step on `t` (`start`: the table's clock).
///
/// Over 80 lines: one short arm per [`Step`], the one place that maps a table's steps to the
/// door's verbs; split, it would be read in pieces.
fn run(t: &dyn OpenState, step: Step, start: Instant) -> Out {
    let path = RelPath::parse("f").unwrap_or_else(|_| unreachable!());
    let now = start;
    match step {
        Admit {
            id,
            access,
            share,
            stream,
        } => status(t.admit(
            on(stream),
            &NewOpen {
                open_id: id,
                checked: access,
                access,
                share_access: share,
                path: &path,
                is_dir: false,
                posix: false,
                restoring: false,
            },
        )),
        Contend {
            access,
            share,
            lease,
            stream,
        } => {
            let a = lease.map(|n| ask(n, RWH));
            let req = OpenRequest {
                granted: access,
                share_access: share,
                overwrite: false,
                deletes: false,
                lease: a.as_ref(),
            };
            t.contend(on(stream), &req, now).map_or_else(E, effects)
        }
        Oplock { id, level, stream } => {
            let owner = Owner {
                session_id: SESSION,
                file_id: FileId {
                    persistent: id,
                    volatile: id,
                },
            };
            Out::Level(t.grant_oplock(on(stream), id, level, false, owner))
        }
        Lease {
            id,
            lease,
            requested,
        } => match t.grant_lease(K, (id, SESSION), &ask(lease, requested), (false, 0)) {
            Some(g) => Out::State(g.state),
            None => E(NtStatus::INVALID_PARAMETER),
        },
        Lock {
            id,
            at,
            len,
            exclusive,
        } => {
            let (r, fx) = t.on_lock(K, id, (at, len), LockOp::Lock { exclusive }, now);
            outcome(r, fx)
        }
        Retry {
            id,
            at,
            len,
            exclusive,
        } => {
            let (r, fx) = t.on_lock(K, id, (at, len), LockOp::Retry { exclusive }, now);
            outcome(r, fx)
        }
        Unlock { id, at, len } => {
            let (r, fx) = t.on_lock(K, id, (at, len), LockOp::Unlock, now);
            outcome(r, fx)
        }
        CheckIo { id, at, len, write } => status(t.check_io(K, id, (at, len), write)),
        Write { id } => effects(t.on_write(K, id, now)),
        Rename { id } => effects(t.on_rename(K, id, now)),
        AckOplock { id, level } => {
            let ack = Ack::Oplock {
                key: K,
                open_id: id,
                level: level.to_wire(),
            };
            match t.acknowledge(ack, now) {
                Ok((Acked::Oplock(l), fx)) => {
                    let fx = fx_of(fx);
                    assert_eq!(
                        Fx {
                            recorded: vec![],
                            ..fx.clone()
                        },
                        Fx::default()
                    );
                    Out::AckedOplock(l, fx.recorded)
                }
                Ok(other) => panic!("an oplock ack answered {other:?}"),
                Err(s) => E(s),
            }
        }
        AckLease { lease, state } => {
            let key = lease_key(lease);
            match t.acknowledge(Ack::Lease { lease: &key, state }, now) {
                Ok((Acked::Lease(s), fx)) => Out::AckedLease(s, fx_of(fx)),
                Ok(other) => panic!("a lease ack answered {other:?}"),
                Err(s) => E(s),
            }
        }
        LeaseUndelivered { lease } => {
            let notice = SENT.with(|sent| sent.borrow().get(&lease).copied());
            let notice = notice.unwrap_or_else(|| panic!("no break of lease {lease} was sent"));
            assert_eq!(notice.session_id, SESSION);
            t.undeliverable(Undelivered::Lease(&notice));
            Fine
        }
        DeletePending { pending } => effects(t.on_disposition(K, pending, None)),
        Release {
            id,
            delete_on_close,
        } => match t.release(K, id, delete_on_close, None) {
            Some(l) => Closed {
                last: true,
                delete: l.delete,
            },
            None => Closed {
                last: false,
                delete: false,
            },
        },
        Deleted => {
            t.deleted(K);
            Fine
        }
        Wait { after } => {
            let token = crate::open_state::WaitToken { key: K };
            Out::Wait(match t.break_wait(token, start + after) {
                BreakWait::Done => WaitKind::Done,
                BreakWait::Until(_) => WaitKind::Pending,
                BreakWait::Deleting => WaitKind::Deleting,
            })
        }
    }
}

/// Runs `table` on a fresh instance of each implementation.
fn check(name: &str, table: &[(Step, Out)]) {
    for (which, t) in implementations() {
        SENT.with(|sent| sent.borrow_mut().clear());
        let start = Instant::now();
        for (i, (step, want)) in table.iter().enumerate() {
            let got = run(&*t, *step, start);
            assert_eq!(&got, want, "{name}, {which}, step {i}: {step:?}");
        }
    }
}

fn oplock(id: u64, level: Level, stream: u64) -> Step {
    Oplock { id, level, stream }
}

fn lock(id: u64, (at, len): (u64, u64), exclusive: bool) -> Step {
    Lock {
        id,
        at,
        len,
        exclusive,
    }
}

fn release(id: u64, delete_on_close: bool) -> Step {
    Release {
        id,
        delete_on_close,
    }
}

fn admit(id: u64, access: u32) -> Step {
    Admit {
        id,
        access,
        share: share::ALL,
        stream: 0,
    }
}

fn contend(access: u32, lease: Option<u8>) -> Step {
    Contend {
        access,
        share: share::ALL,
        lease,
        stream: 0,
    }
}

const NOTHING: Out = Out::Fx(Fx {
    oplocks: Vec::new(),
    leases: Vec::new(),
    wait: false,
    purge: Vec::new(),
    recorded: Vec::new(),
});
const NOW: Duration = Duration::ZERO;

/// MS-FSA 2.1.5.1.2 / smbtorture smb2.oplock.batch1: a data open of a file held with a batch
/// oplock breaks it to level II and waits; the acknowledgment ends the wait; the next write
/// breaks level II to none without a wait.
fn batch_oplock_breaks_to_level2_then_a_write_breaks_it() {
    check(
        "batch",
        &[
            (admit(1, RW), Fine),
            (oplock(1, Level::Batch, 0), Out::Level(Level::Batch)),
            (
                contend(RW, None),
                breaks(vec![(1, Level::II)], vec![], true),
            ),
            (Wait { after: NOW }, Out::Wait(WaitKind::Pending)),
            (
                AckOplock {
                    id: 1,
                    level: Level::II,
                },
                Out::AckedOplock(Level::II, vec![1]),
            ),
            (Wait { after: NOW }, Out::Wait(WaitKind::Done)),
            (admit(2, RW), Fine),
            (
                Write { id: 2 },
                breaks(vec![(1, Level::None)], vec![], false),
            ),
            (Write { id: 2 }, NOTHING),
        ],
    );
}

/// smbtorture smb2.oplock.statopen1: a stat open breaks nothing.
fn a_stat_open_breaks_nothing() {
    assert!(is_stat_open(STAT));
    check(
        "stat",
        &[
            (admit(1, RW), Fine),
            (oplock(1, Level::Batch, 0), Out::Level(Level::Batch)),
            (contend(STAT, None), NOTHING),
        ],
    );
}

/// A break nobody acknowledges times out (BREAK_TIMEOUT, 35 s) and the wait ends.
fn an_unanswered_break_times_out() {
    check(
        "timeout",
        &[
            (admit(1, RW), Fine),
            (oplock(1, Level::Exclusive, 0), Out::Level(Level::Exclusive)),
            (
                contend(RW, None),
                breaks(vec![(1, Level::II)], vec![], true),
            ),
            (
                Wait {
                    after: Duration::from_secs(1),
                },
                Out::Wait(WaitKind::Pending),
            ),
            (
                Wait {
                    after: Duration::from_secs(36),
                },
                Out::Wait(WaitKind::Done),
            ),
        ],
    );
}

/// MS-FSA 2.1.5.1.2.1: share modes; a conflict fails the admission, not the contention
/// (which reports it only through the oplock intent).
fn share_modes_refuse_what_the_holder_does_not_share() {
    check(
        "share",
        &[
            (
                Admit {
                    id: 1,
                    access: RW,
                    share: share::READ,
                    stream: 0,
                },
                Fine,
            ),
            (admit(2, mask::FILE_READ_DATA), Fine),
            (admit(3, RW), E(NtStatus::SHARING_VIOLATION)),
            (
                Admit {
                    id: 3,
                    access: mask::FILE_READ_DATA,
                    share: share::READ,
                    stream: 0,
                },
                E(NtStatus::SHARING_VIOLATION),
            ),
            (
                release(1, false),
                Closed {
                    last: false,
                    delete: false,
                },
            ),
            (admit(3, RW), Fine),
        ],
    );
}

/// MS-FSA 2.1.5.7, 2.1.5.9, 2.1.4.10 (smbtorture smb2.lock): conflicts, exact unlocks, I/O
/// against other owners' locks, and a close that frees its owner's locks only.
fn byte_range_locks_conflict_and_go_with_their_owner() {
    check(
        "locks",
        &[
            (admit(1, RW), Fine),
            (admit(2, RW), Fine),
            (lock(1, (0, 10), true), recorded(1)),
            (lock(2, (5, 1), false), E(NtStatus::LOCK_NOT_GRANTED)),
            (lock(2, (10, 5), false), recorded(2)),
            (
                CheckIo {
                    id: 2,
                    at: 9,
                    len: 2,
                    write: false,
                },
                E(NtStatus::FILE_LOCK_CONFLICT),
            ),
            (
                CheckIo {
                    id: 1,
                    at: 0,
                    len: 10,
                    write: true,
                },
                Fine,
            ),
            (
                CheckIo {
                    id: 1,
                    at: 10,
                    len: 1,
                    write: false,
                },
                Fine,
            ),
            (
                CheckIo {
                    id: 1,
                    at: 10,
                    len: 1,
                    write: true,
                },
                E(NtStatus::FILE_LOCK_CONFLICT),
            ),
            (
                Unlock {
                    id: 1,
                    at: 0,
                    len: 5,
                },
                E(NtStatus::RANGE_NOT_LOCKED),
            ),
            (
                Unlock {
                    id: 2,
                    at: 0,
                    len: 10,
                },
                E(NtStatus::RANGE_NOT_LOCKED),
            ),
            (
                release(1, false),
                Closed {
                    last: false,
                    delete: false,
                },
            ),
            (lock(2, (0, 10), true), recorded(2)),
            (
                Unlock {
                    id: 2,
                    at: 10,
                    len: 5,
                },
                recorded(2),
            ),
        ],
    );
}

/// smbtorture smb2.oplock.brl1 / MS-FSA 2.1.5.7: a lock request breaks level II oplocks,
/// whether or not it is granted, once.
fn a_lock_request_breaks_level2_granted_or_not() {
    check(
        "brl",
        &[
            (admit(1, RW), Fine),
            (admit(2, RW), Fine),
            (oplock(1, Level::II, 0), Out::Level(Level::II)),
            (
                lock(2, (0, 1), true),
                Out::Fx(Fx {
                    oplocks: vec![(1, Level::None)],
                    recorded: vec![2],
                    ..Fx::default()
                }),
            ),
            // A waiting request's retries break nothing more.
            (
                Retry {
                    id: 2,
                    at: 5,
                    len: 1,
                    exclusive: true,
                },
                recorded(2),
            ),
        ],
    );
    check(
        "brl refused",
        &[
            (admit(1, RW), Fine),
            (admit(2, RW), Fine),
            (oplock(1, Level::II, 0), Out::Level(Level::II)),
            // MS-FSA 2.1.5.7: the break comes before the range is looked at.
            (
                lock(2, (u64::MAX, 2), true),
                Out::ErrFx(
                    super::byte_range::STATUS_INVALID_LOCK_RANGE,
                    Fx {
                        oplocks: vec![(1, Level::None)],
                        ..Fx::default()
                    },
                ),
            ),
        ],
    );
}

/// MS-SMB2 3.3.5.9.8 and smbtorture smb2.lease.breaking1: a second key's data open breaks
/// the first lease's W and waits; the acknowledgment lets it in with R H; its write breaks
/// the first key to none and spares itself; a close ends a lease with its last open.
fn leases_break_for_other_keys_and_end_with_their_opens() {
    check(
        "leases",
        &[
            (admit(1, RW), Fine),
            (
                Lease {
                    id: 1,
                    lease: 1,
                    requested: RWH,
                },
                Out::State(RWH),
            ),
            (contend(RW, Some(1)), NOTHING),
            (contend(RW, Some(2)), lease_wait(1, RH)),
            (Wait { after: NOW }, Out::Wait(WaitKind::Pending)),
            (
                AckLease {
                    lease: 2,
                    state: READ_CACHING,
                },
                E(NtStatus::OBJECT_NAME_NOT_FOUND),
            ),
            (
                AckLease {
                    lease: 1,
                    state: RH,
                },
                acked_lease(RH, &[1]),
            ),
            (
                AckLease {
                    lease: 1,
                    state: READ_CACHING,
                },
                E(NtStatus::UNSUCCESSFUL),
            ),
            (Wait { after: NOW }, Out::Wait(WaitKind::Done)),
            (admit(2, RW), Fine),
            (
                Lease {
                    id: 2,
                    lease: 2,
                    requested: RWH,
                },
                Out::State(RH),
            ),
            // A write never waits for the breaks it starts.
            (Write { id: 2 }, breaks(vec![], vec![(1, 0)], false)),
            (
                release(1, false),
                Closed {
                    last: false,
                    delete: false,
                },
            ),
            (
                AckLease { lease: 1, state: 0 },
                E(NtStatus::OBJECT_NAME_NOT_FOUND),
            ),
            (
                release(2, false),
                Closed {
                    last: true,
                    delete: false,
                },
            ),
        ],
    );
}

/// A lease break that cannot be delivered completes at once (the CREATE does not wait 35 s).
fn an_undeliverable_lease_break_completes() {
    check(
        "undelivered",
        &[
            (admit(1, RW), Fine),
            (
                Lease {
                    id: 1,
                    lease: 1,
                    requested: RWH,
                },
                Out::State(RWH),
            ),
            (contend(RW, Some(2)), lease_wait(1, RH)),
            (LeaseUndelivered { lease: 1 }, Fine),
            (Wait { after: NOW }, Out::Wait(WaitKind::Done)),
        ],
    );
}

/// smbtorture smb2.lease.rename: a rename breaks other keys' handle caching and waits.
fn a_rename_breaks_other_keys_handle_caching() {
    check(
        "rename",
        &[
            (admit(1, RW), Fine),
            (
                Lease {
                    id: 1,
                    lease: 1,
                    requested: RH,
                },
                Out::State(RH),
            ),
            (admit(2, mask::DELETE), Fine),
            (
                Rename { id: 2 },
                breaks(vec![], vec![(1, READ_CACHING)], true),
            ),
            (
                AckLease {
                    lease: 1,
                    state: READ_CACHING,
                },
                acked_lease(READ_CACHING, &[1]),
            ),
            (Wait { after: NOW }, Out::Wait(WaitKind::Done)),
        ],
    );
}

/// MS-FSA 2.1.5.4 and smbtorture smb2.oplock.doc: the last close of a delete-on-close open
/// deletes the file; until the unlink is done the name is DELETE_PENDING and a waiter is told
/// the file is being deleted.
fn a_deleting_last_close_holds_the_name_until_deleted() {
    check(
        "delete",
        &[
            (admit(1, RW | mask::DELETE), Fine),
            (oplock(1, Level::Batch, 0), Out::Level(Level::Batch)),
            (
                release(1, true),
                Closed {
                    last: true,
                    delete: true,
                },
            ),
            (admit(2, RW), E(NtStatus::DELETE_PENDING)),
            (Wait { after: NOW }, Out::Wait(WaitKind::Deleting)),
            (Deleted, Fine),
            (Wait { after: NOW }, Out::Wait(WaitKind::Done)),
            (admit(2, RW), Fine),
        ],
    );
}

/// Streams of one file keep their own oplocks: an open of the file breaks no stream's.
fn streams_keep_their_own_oplocks() {
    check(
        "streams",
        &[
            (
                Admit {
                    id: 1,
                    access: RW,
                    share: share::ALL,
                    stream: 11,
                },
                Fine,
            ),
            (oplock(1, Level::Batch, 11), Out::Level(Level::Batch)),
            (contend(RW, None), NOTHING),
            (
                Contend {
                    access: RW,
                    share: share::ALL,
                    lease: None,
                    stream: 11,
                },
                breaks(vec![(1, Level::II)], vec![], true),
            ),
        ],
    );
}

/// smbtorture smb2.oplock.doc: a delete-pending file fails an open before anything breaks;
/// clearing the flag lets the next one contend as usual.
fn delete_pending_fails_before_any_break() {
    check(
        "doc",
        &[
            (admit(1, RW | mask::DELETE), Fine),
            (oplock(1, Level::Batch, 0), Out::Level(Level::Batch)),
            (DeletePending { pending: true }, recorded_all(&[1])),
            (contend(RW, None), E(NtStatus::DELETE_PENDING)),
            (Wait { after: NOW }, Out::Wait(WaitKind::Done)),
            (admit(2, RW), E(NtStatus::DELETE_PENDING)),
            (DeletePending { pending: false }, recorded_all(&[1])),
            (
                contend(RW, None),
                breaks(vec![(1, Level::II)], vec![], true),
            ),
        ],
    );
}

/// Both implementations, fresh.
/// A maker of fresh instances of an implementation, with its name for failures.
pub type Maker = (&'static str, Rc<dyn Fn() -> Arc<dyn OpenState>>);

thread_local! {
    /// The implementation [`run_all`] runs the tests on; `None`: this crate's two layouts.
    static OTHER: RefCell<Option<Maker>> = const { RefCell::new(None) };
}

/// Every test of the door, by name: each runs its table (or its steps) on a fresh instance of
/// each implementation [`implementations`] gives.
const ALL: &[(&str, fn())] = &[
    (
        "batch_oplock_breaks_to_level2_then_a_write_breaks_it",
        batch_oplock_breaks_to_level2_then_a_write_breaks_it,
    ),
    ("a_stat_open_breaks_nothing", a_stat_open_breaks_nothing),
    (
        "an_unanswered_break_times_out",
        an_unanswered_break_times_out,
    ),
    (
        "share_modes_refuse_what_the_holder_does_not_share",
        share_modes_refuse_what_the_holder_does_not_share,
    ),
    (
        "byte_range_locks_conflict_and_go_with_their_owner",
        byte_range_locks_conflict_and_go_with_their_owner,
    ),
    (
        "a_lock_request_breaks_level2_granted_or_not",
        a_lock_request_breaks_level2_granted_or_not,
    ),
    (
        "leases_break_for_other_keys_and_end_with_their_opens",
        leases_break_for_other_keys_and_end_with_their_opens,
    ),
    (
        "an_undeliverable_lease_break_completes",
        an_undeliverable_lease_break_completes,
    ),
    (
        "a_rename_breaks_other_keys_handle_caching",
        a_rename_breaks_other_keys_handle_caching,
    ),
    (
        "a_deleting_last_close_holds_the_name_until_deleted",
        a_deleting_last_close_holds_the_name_until_deleted,
    ),
    (
        "streams_keep_their_own_oplocks",
        streams_keep_their_own_oplocks,
    ),
    (
        "delete_pending_fails_before_any_break",
        delete_pending_fails_before_any_break,
    ),
    ("two_files_stay_apart", two_files_stay_apart),
    (
        "posix_opens_below_move_with_their_directory",
        posix_opens_below_move_with_their_directory,
    ),
];

/// How many tests [`run_all`] runs, each on fresh instances (one per table).
pub const COUNT: usize = ALL.len();

/// Runs every test of the door on instances `make` gives (a fresh one per test), for an
/// implementation outside this crate (smbq-cluster's, over a real etcd). Panics, naming the
/// test, `which` and the step, on the first answer that is not the table's.
pub fn run_all(which: &'static str, make: Rc<dyn Fn() -> Arc<dyn OpenState>>) {
    OTHER.with(|o| *o.borrow_mut() = Some((which, make)));
    let _reset = Reset;
    for (_, test) in ALL {
        test();
    }
}

/// Puts [`OTHER`] back, also when a test panics.
struct Reset;

impl Drop for Reset {
    fn drop(&mut self) {
        OTHER.with(|o| *o.borrow_mut() = None);
    }
}

/// The tests' own run: every test on both layouts.
#[test]
fn every_door_test_on_both_layouts() {
    for (name, test) in ALL {
        eprintln!("door test {name}");
        test();
    }
}

/// Fresh instances to run a test on: [`run_all`]'s implementation, else both layouts.
fn implementations() -> Vec<(&'static str, Arc<dyn OpenState>)> {
    match OTHER.with(|o| o.borrow().clone()) {
        Some((which, make)) => vec![(which, make())],
        None => both().into(),
    }
}

fn both() -> [(&'static str, std::sync::Arc<dyn OpenState>); 2] {
    [
        (
            "sharded",
            std::sync::Arc::new(FileStates::<Sharded>::default()),
        ),
        (
            "one table",
            std::sync::Arc::new(FileStates::<OneTable>::default()),
        ),
    ]
}

fn admit_at(t: &dyn OpenState, key: FileKey, id: u64, path: &str) {
    admit_kind(t, key, id, path, false);
}

fn admit_kind(t: &dyn OpenState, key: FileKey, id: u64, path: &str, posix: bool) {
    let path = RelPath::parse(path).unwrap_or_else(|_| unreachable!());
    let new = NewOpen {
        open_id: id,
        checked: RW,
        access: RW,
        share_access: share::ALL,
        path: &path,
        is_dir: false,
        posix,
        restoring: false,
    };
    assert_eq!(t.admit(key, &new), Ok(()));
}

/// Two files: what is held on one never answers for the other, and the questions that look
/// at every file (a directory rename's) find the right one, in both layouts.
fn two_files_stay_apart() {
    let other = FileKey { ino: 41, ..K };
    let now = Instant::now();
    for (which, t) in implementations() {
        admit_at(&*t, K, 1, "d/f");
        admit_at(&*t, other, 2, "g");
        let g = t.grant_lease(K, (1, SESSION), &ask(1, RH), (false, 0));
        assert_eq!(g.map(|g| g.state), Some(RH), "{which}");
        assert!(t.lease_elsewhere(&lease_key(1), other), "{which}");
        assert!(!t.lease_elsewhere(&lease_key(1), K), "{which}");
        assert_eq!(
            t.grant_lease(other, (2, SESSION), &ask(1, RH), (false, 0)),
            None,
            "{which}: a key names one file"
        );
        let d = RelPath::parse("d").unwrap_or_else(|_| unreachable!());
        assert!(t.any_open_below(&d, other), "{which}");
        assert!(!t.any_open_below(&d, K), "{which}");
        let below = t.opens_below(&d, other, Below::HandleLeased);
        assert_eq!(below, Some(vec![(K, vec![1])]), "{which}");
        assert_eq!(t.opens_below(&d, other, Below::Posix), None, "{which}");
        let (r, _) = t.on_lock(K, 1, (0, 10), LockOp::Lock { exclusive: true }, now);
        assert_eq!(r, Ok(()), "{which}");
        assert_eq!(t.check_io(other, 2, (0, 10), true), Ok(()), "{which}");
        assert_eq!((t.lock_count(K), t.lock_count(other)), (1, 0), "{which}");
        assert_eq!(t.open_ids(other), vec![2], "{which}");
        assert!(t.release(other, 2, false, None).is_some(), "{which}");
        assert_eq!(
            t.lock_count(K),
            1,
            "{which}: the other file's close frees nothing here"
        );
    }
}

/// A blocked lock request waits until the holder unlocks, and CANCEL or the close of the
/// waiting open ends it, through the door's `lock_wait`, in both layouts.
#[tokio::test]
async fn a_blocked_lock_waits_for_the_holder_in_both_layouts() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio_util::sync::CancellationToken;

    use crate::file_state::WaitEnds;
    use crate::open_state::lock_wait;

    let noop = |_| {};
    for (which, t) in implementations() {
        let now = Instant::now();
        let (r, _) = t.on_lock(K, 1, (0, 10), LockOp::Lock { exclusive: true }, now);
        assert_eq!(r, Ok(()), "{which}");
        let cancel = CancellationToken::new();
        let (t2, c2) = (t.clone(), cancel.clone());
        let waiter = tokio::spawn(async move {
            let closed = AtomicBool::new(false);
            let ends = Some(WaitEnds {
                cancel: &c2,
                closed: &closed,
            });
            lock_wait(&*t2, (K, 2), (0, 10), true, ends, &noop).await
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "{which}");
        let (r, _) = t.on_lock(K, 1, (0, 10), LockOp::Unlock, now);
        assert_eq!(r, Ok(()), "{which}");
        assert_eq!(waiter.await.ok(), Some(Ok(())), "{which}");

        // Open 2 holds it now; open 3 waits and is cancelled.
        let (t3, c3) = (t.clone(), cancel.clone());
        let waiter = tokio::spawn(async move {
            let closed = AtomicBool::new(false);
            let ends = Some(WaitEnds {
                cancel: &c3,
                closed: &closed,
            });
            lock_wait(&*t3, (K, 3), (5, 1), false, ends, &noop).await
        });
        tokio::task::yield_now().await;
        cancel.cancel();
        let cancelled = waiter.await.ok();
        assert_eq!(cancelled, Some(Err(NtStatus::CANCELLED)), "{which}");

        // Open 4 waits and is closed: RANGE_NOT_LOCKED, and open 2's lock stays.
        let closed = std::sync::Arc::new(AtomicBool::new(false));
        let (t4, closed4) = (t.clone(), closed.clone());
        let waiter = tokio::spawn(async move {
            let ends = Some(WaitEnds {
                cancel: &CancellationToken::new(),
                closed: &closed4,
            });
            lock_wait(&*t4, (K, 4), (0, 10), true, ends, &noop).await
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "{which}");
        closed.store(true, Ordering::Release);
        let _ = t.release(K, 4, false, None);
        let ended = waiter.await.ok();
        assert_eq!(ended, Some(Err(NtStatus::RANGE_NOT_LOCKED)), "{which}");
        assert_eq!(t.lock_count(K), 1, "{which}");
    }
}

/// A POSIX rename of a directory (crate::handlers::set_info) moves the POSIX opens below it:
/// they are found only while every open of the file is a POSIX one, and the file's path,
/// which its last close unlinks, follows the directory.
fn posix_opens_below_move_with_their_directory() {
    let other = FileKey { ino: 41, ..K };
    let p = |s: &str| RelPath::parse(s).unwrap_or_else(|_| unreachable!());
    for (which, t) in implementations() {
        admit_kind(&*t, K, 1, "d/s/f", true);
        admit_kind(&*t, other, 2, "d2/g", true);
        let below = t.opens_below(&p("d"), other, Below::Posix);
        assert_eq!(below, Some(vec![(K, vec![1])]), "{which}");
        admit_kind(&*t, K, 3, "d/s/f", false);
        assert_eq!(t.opens_below(&p("d"), other, Below::Posix), None, "{which}");
        assert!(t.release(K, 3, false, None).is_none(), "{which}");
        let moved = Moved::Under {
            from: p("d"),
            to: p("e/x"),
        };
        let _ = t.renamed(K, 0, moved);
        // Files outside the directory stay where they are.
        let _ = t.renamed(
            other,
            0,
            Moved::Under {
                from: p("d"),
                to: p("e/x"),
            },
        );
        let last = t
            .release(K, 1, true, None)
            .unwrap_or_else(|| unreachable!());
        assert_eq!((last.path, last.delete), (p("e/x/s/f"), true), "{which}");
        t.deleted(K);
        let last = t
            .release(other, 2, false, None)
            .unwrap_or_else(|| unreachable!());
        assert_eq!(last.path, p("d2/g"), "{which}");
    }
}
