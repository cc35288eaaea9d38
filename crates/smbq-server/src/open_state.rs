//! The one door to per-file open state: share modes and delete-pending, byte-range locks,
//! oplocks and leases (MS-FSA 2.1.5.1.2, MS-SMB2 3.3.5.9.8, 3.3.5.14, 3.3.5.22).
//!
//! Handlers and the durable lifecycle say what happened to a file through the verbs of
//! [`OpenState`]; each verb decides against everything recorded about the file at once and
//! returns its [`Effects`]: the breaks to send to a session, whether the request must wait for
//! their acknowledgments (a [`WaitToken`], never an in-process primitive the caller must
//! know), and the disconnected durable opens that can no longer answer and must be purged.
//! [`crate::effects`] carries them out after the verb, so an implementation decides and never
//! sends, parks or reports anything itself.
//!
//! Questions about one file alone are one verb, [`OpenState::query`]: the implementation
//! lends its record of the file as a [`FileView`], where each answer is written once, and
//! [`Queries`] asks the typed questions through it. The door keeps as methods of its own only
//! the questions another server's opens can change the answer to.
//!
//! Implementations: [`crate::file_state::FileStates`] over the [`Sharded`] layout (64 parts,
//! each one lock and one wake signal; the server's) and over the [`OneTable`] layout (every
//! file in one table under one lock with one wake signal, the shape of a store that keeps all
//! files' state in one place, as a cluster store will). The per-file rules are written once
//! (file_state's parts); both run the table-driven tests of `file_state::door_tests`, which go
//! through this trait only, and the crate's whole test suite runs on either
//! (`SMBQ_TEST_OPEN_STATE=one-table`, run by scripts/test.sh).
//!
//! [`Sharded`]: crate::file_state::Sharded
//! [`OneTable`]: crate::file_state::OneTable

use std::sync::atomic::Ordering;
use std::time::Instant;

use smbq_vfs::{RelPath, Timespec};
use smbq_wire::NtStatus;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::file_state::lease::{Granted, LeaseAsk, LeaseBreakNotice, LeaseKey};
use crate::file_state::oplock::{BreakNotice, Level, Owner};
use crate::file_state::{FileKey, FileView, Held, LastClose, NewOpen, OpenRequest, WaitEnds};

/// What a verb decided must happen beyond its own answer.
#[must_use = "effects are carried out by Server::apply (crate::effects)"]
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Oplock breaks (MS-SMB2 2.2.23.1), each to its holder's session.
    pub oplock_breaks: Vec<BreakNotice>,
    /// Lease breaks (MS-SMB2 2.2.23.2), each to its lease's session.
    pub lease_breaks: Vec<LeaseBreakNotice>,
    /// The request waits for acknowledgments of breaks on this file, then asks again.
    pub wait: Option<WaitToken>,
    /// Opens whose break is under way and that must go if they are disconnected durable
    /// opens: they will never acknowledge (smbtorture smb2.durable-open.oplock, as Windows).
    pub purge: Vec<u64>,
    /// Opens whose state here changed (locks, caching, the file's path or delete-pending):
    /// the persistent ones' records are written again before the response that tells the
    /// client (crate::persist, MS-SMB2 3.3.5.9.10).
    pub recorded: Vec<u64>,
    /// Files whose written data must reach stable storage before the caller goes on: another
    /// server (a cluster node, smbq-cluster) takes the file over and reads it through its own
    /// mount of the file system, which sees only what this one flushed.
    pub flush: Vec<FileKey>,
}

impl Effects {
    /// No break, no wait, no purge, nothing to record.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Adds what `other` decided to this. At most one of them may carry a wait.
    pub fn merge(&mut self, other: Effects) {
        debug_assert!(self.wait.is_none() || other.wait.is_none());
        self.oplock_breaks.extend(other.oplock_breaks);
        self.lease_breaks.extend(other.lease_breaks);
        self.wait = self.wait.take().or(other.wait);
        self.purge.extend(other.purge);
        self.recorded.extend(other.recorded);
        self.flush.extend(other.flush);
    }

    /// Only `opens` to record again, when `changed`.
    pub fn recording(changed: bool, opens: Vec<u64>) -> Self {
        Effects {
            recorded: if changed { opens } else { Vec::new() },
            ..Effects::default()
        }
    }
}

/// A request waiting for the breaks on one file ([`OpenState::break_wait`]).
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitToken {
    pub(crate) key: FileKey,
}

/// Where a wait for breaks stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakWait {
    /// Nothing left to wait for: the request looks at the file again.
    Done,
    /// A break is still awaited; it times out at this instant.
    Until(Instant),
    /// The holder closed and its close is deleting the file: wait until the name is free.
    Deleting,
}

/// A byte-range lock request on one range of one stream (MS-SMB2 3.3.5.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOp {
    Lock {
        exclusive: bool,
    },
    /// A waiting lock request trying again: no breaks, its first attempt sent them.
    Retry {
        exclusive: bool,
    },
    Unlock,
}

/// A client's acknowledgment of a break (MS-SMB2 3.3.5.22).
#[derive(Clone, Copy, Debug)]
pub enum Ack<'a> {
    /// Open `open_id` of `key` acknowledges an oplock break to `level` (the wire value).
    Oplock {
        key: FileKey,
        open_id: u64,
        level: u8,
    },
    /// The client of `lease` acknowledges a lease break to `state`.
    Lease { lease: &'a LeaseKey, state: u32 },
}

/// What an acknowledgment left: the oplock's level or the lease's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acked {
    Oplock(Level),
    Lease(u32),
}

/// A break that could not be sent: its holder's session has no live channel.
#[derive(Clone, Copy, Debug)]
pub enum Undelivered<'a> {
    /// It completes at once, as if acknowledged.
    Oplock { key: FileKey, open_id: u64 },
    /// It completes at once, as if acknowledged. Nothing happens when the break it names is
    /// over (a grant or a release moved the lease between the decision and the send, and a
    /// later break may be under way), or when a reconnect moved the lease from the session
    /// it went to (the reconnect sends the break itself).
    Lease(&'a LeaseBreakNotice),
    /// It is kept for a persistent open's client, who hears it on reclaim
    /// (crate::durable::persistent); the same checks as for `Lease`.
    LeaseWithheld(&'a LeaseBreakNotice),
    /// Every break awaiting open `open_id` of `key` completes at once, as if it had
    /// acknowledged what they asked (a parked resilient open, which cannot hear them).
    Open { key: FileKey, open_id: u64 },
}

/// What a persistent open held before a restart, to hold again ([`OpenState::restore`]).
#[derive(Clone, Copy, Debug)]
pub struct Restored<'a> {
    /// Its oplock, when it had no lease.
    pub oplock: (Level, Owner),
    /// Its lease: key, state and V2 epoch.
    pub lease: Option<(LeaseKey, u32, Option<u16>)>,
    pub is_dir: bool,
    /// Its byte-range locks: offset, length, exclusive.
    pub locks: &'a [(u64, u64, bool)],
}

/// Where a rename moved a file or an open ([`OpenState::renamed`]).
#[derive(Clone, Debug)]
pub enum Moved {
    /// The file's new share-relative path.
    Path(RelPath),
    /// The open now addresses stream `0` (the unnamed one) or this named stream's id.
    Stream(u64),
    /// A directory above the file moved from `from` to `to` (a POSIX rename of a directory
    /// with POSIX opens below it).
    Under { from: RelPath, to: RelPath },
}

/// What happened to a file ([`OpenState::on_change`]); [`Changes`] says each one by name.
#[derive(Clone, Debug)]
pub enum Change<'a> {
    /// A WRITE through open `by` (MS-FSA 2.1.4.12): every level II oplock breaks to none,
    /// and every other key's lease caching reads.
    Write { by: u64 },
    /// An end-of-file or allocation change through open `by`: the same breaks as a write.
    SetSize { by: u64 },
    /// A rename of the file through open `by` is about to be made: other keys' handle
    /// caching breaks, and the rename waits for the acknowledgments.
    Rename { by: u64 },
    /// A rename through open `open_id` succeeded on disk (MS-FSA 2.1.5.15.11): the file is at
    /// `to` now, or the open addresses another stream of it.
    Renamed { open_id: u64, to: Moved },
    /// SET_INFO FileDispositionInformation (MS-FSA 2.1.5.15.3): the file, or the named stream
    /// the key addresses, becomes delete-pending or stops being so. `parent`: the setting
    /// open's parent lease key (crate::file_state::dir_lease).
    Disposition {
        pending: bool,
        parent: Option<[u8; 16]>,
    },
    /// Something in the directory changed through smbq: its leases break, all but `except`
    /// (crate::file_state::dir_lease). Nobody waits for these breaks.
    InDirectory { except: Option<&'a LeaseKey> },
    /// A fact about the file that lives while it is open (see [`Fact`]).
    Fact(Fact),
    /// The file a release said to delete is gone (or its unlink failed): it stops being
    /// delete-pending and what waited for the name goes on.
    Deleted,
}

/// A per-file fact the door keeps ([`Change::Fact`]).
#[derive(Clone, Copy, Debug)]
pub enum Fact {
    /// AllocationSize asked for the unnamed stream while the file is open (MS-FSA
    /// 2.1.5.15.1).
    Allocation(u64),
    /// A client-set ChangeTime, valid while the inode's ctime is `ctime` (MS-FSA 2.1.5.15.2,
    /// crate::dos); bounded, oldest forgotten first.
    ChangeTime { ctime: Timespec, value: u64 },
}

/// The door (see the module docs). `now` is passed in so that tests decide time.
pub trait OpenState: Send + Sync {
    /// Before a CREATE admits an open to the existing file `key` (MS-FSA 2.1.5.1.2): the
    /// oplock and lease breaks it forces and whether it must wait, or the status it fails
    /// with before anything is broken (DELETE_PENDING, smbtorture smb2.oplock.doc).
    fn contend(
        &self,
        key: FileKey,
        intent: &OpenRequest<'_>,
        now: Instant,
    ) -> Result<Effects, NtStatus>;

    /// Checks `new.checked` against the file's opens and delete-pending, then registers the
    /// open with `new.access`; atomic with respect to other admissions of the same file.
    fn admit(&self, key: FileKey, new: &NewOpen<'_>) -> Result<(), NtStatus>;

    /// The oplock an admitted open gets (MS-SMB2 3.3.5.9.8), decided against the file's other
    /// opens, oplocks and leases in the same step.
    fn grant_oplock(
        &self,
        key: FileKey,
        open_id: u64,
        requested: Level,
        stat_only: bool,
        owner: Owner,
    ) -> Level;

    /// Makes or upgrades an admitted open's lease (MS-SMB2 3.3.5.9.8, 3.3.5.9.11); `None`
    /// when the key is on another file. `size`: the stream's size after the open.
    fn grant_lease(
        &self,
        key: FileKey,
        open: (u64, u64),
        ask: &LeaseAsk,
        dir_and_size: (bool, u64),
    ) -> Option<Granted>;

    /// Something an open did to `key`'s file, or the server learnt of it ([`Change`]): the
    /// breaks it forces, a wait for them, the opens whose records change.
    fn on_change(&self, key: FileKey, change: Change<'_>, now: Instant) -> Effects;

    /// Whether another server has `key` open (a cluster node, smbq-cluster): a change to its
    /// data is then flushed before it is answered, so that server reads it through its own
    /// mount (crate::stable). Asked after the change: a change made before the other server
    /// opened the file is flushed by that opening ([`Effects::flush`]).
    fn shared_elsewhere(&self, _key: FileKey) -> bool {
        false
    }

    /// A byte-range lock or unlock by `owner` of `(offset, length)` (MS-FSA 2.1.5.7 and
    /// 2.1.5.9): LOCK_NOT_GRANTED on a conflict, RANGE_NOT_LOCKED for an unlock of a range
    /// not locked so. A lock request breaks level II oplocks as a write does, granted or not
    /// (MS-FSA 2.1.5.7 checks for the break before the conflict; smbtorture brl1).
    fn on_lock(
        &self,
        key: FileKey,
        owner: u64,
        range: (u64, u64),
        op: LockOp,
        now: Instant,
    ) -> (Result<(), NtStatus>, Effects);

    /// A break acknowledgment; wakes the requests waiting on the file.
    fn acknowledge(&self, ack: Ack<'_>, now: Instant) -> Result<(Acked, Effects), NtStatus>;

    /// A break could not be delivered (see [`Undelivered`]); wakes the waiting requests.
    fn undeliverable(&self, what: Undelivered<'_>);

    /// Takes open `open_id` of `key` out of everything it holds on the file, in one step, and
    /// wakes whoever waits on the file. `delete_on_close` marks the file (or stream)
    /// delete-pending first (MS-FSA 2.1.5.4). Says what the close must do.
    fn release(
        &self,
        key: FileKey,
        open_id: u64,
        delete_on_close: bool,
        parent: Option<[u8; 16]>,
    ) -> Option<LastClose>;

    /// A durable open of `key` reconnected on session `session_id` (MS-SMB2 3.3.5.9.7): its
    /// breaks go there from now on. With `lease_epoch` (a persistent open's reconnect), when
    /// every other open of its lease is `away`, it takes its lease back with that epoch
    /// (`Leases::reacquire`).
    fn reclaim(
        &self,
        key: FileKey,
        open: (u64, u64),
        lease_epoch: Option<u16>,
        away: &dyn Fn(u64) -> bool,
    );

    /// The break of open `open_id`'s lease or oplock still awaiting an acknowledgment, to send
    /// again: a persistent open reclaimed after a break began while its client was away
    /// hears it on its new session (crate::durable::persistent).
    fn unheard_breaks(&self, key: FileKey, open_id: u64) -> Effects;

    /// A persistent open admitted again after a restart (crate::persist) holds its lease or
    /// oplock and its locks again, without breaking anything; what it can no longer hold is
    /// said, and the caller releases it.
    fn restore(&self, key: FileKey, open_id: u64, held: Restored<'_>) -> Result<(), String>;

    /// Completes timed-out breaks on the file a wait is for and says where the wait stands.
    fn break_wait(&self, token: WaitToken, now: Instant) -> BreakWait;

    /// Fires whenever something on `key`'s file is released, acknowledged or completed (and
    /// maybe on other files too): a waiter registers before looking again.
    fn changed(&self, key: FileKey) -> &Notify;

    // ---- queries ----

    /// Lends this server's record of `key`'s file to `look`, once, for a moment (under the
    /// file's lock): every question about the file alone is answered from it, written once
    /// in [`FileView`] and asked through [`Queries`]. The questions below are the ones another
    /// server's opens can change the answer to (a cluster node asks its peers' view too).
    fn query(&self, key: FileKey, look: &mut dyn FnMut(FileView<'_>));

    /// MS-FSA 2.1.4.10 for READ/WRITE: FILE_LOCK_CONFLICT when another open's lock forbids it.
    fn check_io(
        &self,
        key: FileKey,
        owner: u64,
        range: (u64, u64),
        write: bool,
    ) -> Result<(), NtStatus>;

    /// Whether the file, or the named stream `key` addresses, is delete-pending.
    fn delete_pending(&self, key: FileKey) -> bool;

    /// The opens sharing lease `lease`.
    fn lease_opens(&self, lease: &LeaseKey) -> Vec<u64>;

    /// The share-mode check of an open with `access` and `share_access` without admitting it
    /// (before a destructive step such as a rename over the file).
    fn check(&self, key: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus>;

    /// Whether any open file but `except` lies strictly below `dir` (Windows refuses to
    /// rename a directory then). Looks at every file.
    fn any_open_below(&self, dir: &RelPath, except: FileKey) -> bool;

    /// Whether lease key `lease` is in use on a file or stream other than `key` (MS-SMB2
    /// 3.3.5.9.8: STATUS_INVALID_PARAMETER).
    fn lease_elsewhere(&self, lease: &LeaseKey, key: FileKey) -> bool;

    /// Whether any directory holds a lease: when none does, a change costs no lookup.
    fn any_dir_leases(&self) -> bool;

    /// The files strictly below `dir` (but `except`) that are open, with their opens, if
    /// every open of them is of the kind `which` names; `None` when one is not. Paths are
    /// relative to each file's share, so the caller keeps the files of its own share. Looks
    /// at every file.
    fn opens_below(
        &self,
        dir: &RelPath,
        except: FileKey,
        which: Below,
    ) -> Option<Vec<(FileKey, Vec<u64>)>>;
}

/// Each [`Change`] by name, as the handlers say it.
pub trait Changes: OpenState {
    /// [`Change::Write`].
    fn on_write(&self, key: FileKey, by: u64, now: Instant) -> Effects {
        self.on_change(key, Change::Write { by }, now)
    }

    /// [`Change::SetSize`].
    fn on_set_size(&self, key: FileKey, by: u64, now: Instant) -> Effects {
        self.on_change(key, Change::SetSize { by }, now)
    }

    /// [`Change::Rename`].
    fn on_rename(&self, key: FileKey, by: u64, now: Instant) -> Effects {
        self.on_change(key, Change::Rename { by }, now)
    }

    /// [`Change::Renamed`].
    fn renamed(&self, key: FileKey, open_id: u64, to: Moved) -> Effects {
        self.on_change(key, Change::Renamed { open_id, to }, Instant::now())
    }

    /// [`Change::Disposition`].
    fn on_disposition(&self, key: FileKey, pending: bool, parent: Option<[u8; 16]>) -> Effects {
        let change = Change::Disposition { pending, parent };
        self.on_change(key, change, Instant::now())
    }

    /// [`Change::InDirectory`] of `dir`.
    fn on_child_change(&self, dir: FileKey, except: Option<&LeaseKey>, now: Instant) -> Effects {
        self.on_change(dir, Change::InDirectory { except }, now)
    }

    /// [`Change::Fact`]: nothing breaks.
    fn remember(&self, key: FileKey, fact: Fact) {
        let fx = self.on_change(key, Change::Fact(fact), Instant::now());
        debug_assert!(fx.is_empty());
    }

    /// [`Change::Deleted`]: nothing breaks.
    fn deleted(&self, key: FileKey) {
        let fx = self.on_change(key, Change::Deleted, Instant::now());
        debug_assert!(fx.is_empty());
    }
}

impl<T: OpenState + ?Sized> Changes for T {}

/// The questions about one file that this server's own record answers, each one
/// [`OpenState::query`] ([`FileView`] says what each means). Every implementation of the door
/// has them.
pub trait Queries: OpenState {
    /// Asks `question` of `key`'s record (an implementation that does not lend one answers as
    /// for a file without opens).
    fn ask<R>(&self, key: FileKey, question: impl Fn(FileView<'_>) -> R) -> R {
        let mut answer = None;
        self.query(key, &mut |view| answer = Some(question(view)));
        answer.unwrap_or_else(|| question(FileView::unrecorded(key)))
    }

    /// Opens of the file, any stream.
    fn open_count_any(&self, key: FileKey) -> usize {
        self.ask(key, |v| v.open_count_any())
    }

    /// Opens of the stream `key` addresses.
    fn open_count(&self, key: FileKey) -> usize {
        self.ask(key, |v| v.open_count())
    }

    /// What open `open_id` of `key` holds: its oplock level and its lease, if any.
    fn caching_of(&self, key: FileKey, open_id: u64) -> (Level, Option<(LeaseKey, Granted)>) {
        self.ask(key, |v| v.caching_of(open_id))
    }

    /// The opens of `key`'s file with a break awaiting their acknowledgment.
    fn breaking_opens(&self, key: FileKey) -> Vec<u64> {
        self.ask(key, |v| v.breaking_opens())
    }

    /// The file's current path (after renames), while it is open.
    fn path(&self, key: FileKey) -> Option<RelPath> {
        self.ask(key, |v| v.path())
    }

    /// Whether a named stream of the file is open (MS-FSA 2.1.5.15.11: no rename then).
    fn has_stream_opens(&self, key: FileKey) -> bool {
        self.ask(key, |v| v.has_stream_opens())
    }

    /// Whether every open of `key` but `open_id` shares delete (rename and delete need it).
    fn others_share_delete(&self, key: FileKey, open_id: u64) -> bool {
        self.ask(key, |v| v.others_share_delete(open_id))
    }

    /// The [`Fact::Allocation`] recorded for `key`, while it is open.
    fn allocation(&self, key: FileKey) -> Option<u64> {
        self.ask(key, |v| v.allocation())
    }

    /// The [`Fact::ChangeTime`] of `key` if the inode's ctime is still `ctime`.
    fn change_time(&self, key: FileKey, ctime: Timespec) -> Option<u64> {
        self.ask(key, |v| v.change_time(ctime))
    }

    /// The byte-range locks held on `key`'s file.
    fn lock_count(&self, key: FileKey) -> usize {
        self.ask(key, |v| v.lock_count())
    }

    /// The ids of the opens of `key`'s file (any stream).
    fn open_ids(&self, key: FileKey) -> Vec<u64> {
        self.ask(key, |v| v.open_ids())
    }

    /// What open `open_id` of `key` holds, for `smbq status` and the persistent store.
    fn held_by(&self, key: FileKey, open_id: u64) -> Held {
        self.ask(key, |v| v.held_by(open_id))
    }
}

impl<T: OpenState + ?Sized> Queries for T {}

/// Which opens below a directory [`OpenState::opens_below`] accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Below {
    /// Opens holding a lease that caches handles: a directory rename breaks them first
    /// (crate::handlers::rename_breaks).
    HandleLeased,
    /// POSIX opens (crate::posix): a POSIX open's directory rename moves them along, as
    /// Samba's have_file_open_below ignores them for a POSIX open.
    Posix,
}

/// Locks `range` of `key` for `owner` through `state`: at once or LOCK_NOT_GRANTED without
/// `ends`, else waiting until it is granted or `ends` says the request is over. Each attempt's
/// effects go to `apply` (breaks only from the first: MS-FSA 2.1.5.7 breaks once per request).
/// The same for every implementation: it needs only the verbs.
pub async fn lock_wait(
    state: &dyn OpenState,
    (key, owner): (FileKey, u64),
    range: (u64, u64),
    exclusive: bool,
    ends: Option<WaitEnds<'_>>,
    apply: &(dyn Fn(Effects) + Sync),
) -> Result<(), NtStatus> {
    let changed = state.changed(key);
    let mut first = true;
    loop {
        // MS-SMB2 3.3.5.14.2 / Windows: a pending lock whose open is closed completes with
        // RANGE_NOT_LOCKED (smbtorture lock.cancel, "cancel by close").
        if ends.is_some_and(|e| e.closed.load(Ordering::Acquire)) {
            return Err(NtStatus::RANGE_NOT_LOCKED);
        }
        // Registered before the attempt, so a release between the attempt and the wait
        // still wakes us.
        let released = changed.notified();
        tokio::pin!(released);
        released.as_mut().enable();
        let op = if first {
            LockOp::Lock { exclusive }
        } else {
            LockOp::Retry { exclusive }
        };
        first = false;
        let (r, fx) = state.on_lock(key, owner, range, op, Instant::now());
        apply(fx);
        let (Err(NtStatus::LOCK_NOT_GRANTED), Some(ends)) = (r, ends) else {
            return r;
        };
        tokio::select! {
            _ = &mut released => {}
            _ = ends.cancel.cancelled() => return Err(NtStatus::CANCELLED),
        }
    }
}

/// Waits until the breaks `token` stands for are acknowledged, their holders closed, or their
/// time ([`BREAK_TIMEOUT`](crate::file_state::oplock::BREAK_TIMEOUT)) passed.
pub async fn break_wait(
    state: &dyn OpenState,
    token: WaitToken,
    cancel: &CancellationToken,
) -> Result<(), NtStatus> {
    let changed = state.changed(token.key);
    loop {
        let notified = changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let until = match state.break_wait(token, Instant::now()) {
            BreakWait::Done => return Ok(()),
            BreakWait::Until(until) => Some(until),
            // A holder that closed and is deleting the file: the CREATE runs again once the
            // name is free (`OpenState::deleted` wakes it).
            BreakWait::Deleting => None,
        };
        let timeout = async {
            match until {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut notified => {}
            _ = timeout => {}
            _ = cancel.cancelled() => return Err(NtStatus::CANCELLED),
        }
    }
}
