//! Leases (MS-SMB2 3.3.1.4 Lease, 3.3.5.9.8 and 3.3.5.9.11 grant, 3.3.4.7 break notification,
//! 3.3.5.22.2 acknowledgment; MS-FSA 2.1.5.17 granular oplocks) as a synchronous state machine
//! of one file's leases, with time passed in, next to [`super::oplock::Holders`].
//!
//! The rules are the ones Windows shows through smbtorture smb2.lease (request, upgrade,
//! upgrade2, break, oplock, multibreak, nobreakself, and breaking's overwrite case): a lease is
//! R, RH, RW or RWH (H or W without R is not granted); one lease per client and lease key,
//! shared by that client's opens of the stream; any other open (another key's, or one without
//! a lease) takes W from every lease (RW to R, RWH to RH) and waits for the acknowledgment,
//! since the holder may have writes to flush; an overwrite takes everything (acknowledged when
//! W or H went, waited for only when W did); a sharing conflict takes H too, so the holder can
//! close its handles. A lease open is granted what it asked for without W when the stream has
//! other opens, and only R while an oplock is held there; the same key asking again only
//! upgrades, to a superset of what it holds.
//!
//! [`super::FileStates`] keeps one [`Leases`] per file; `crate::effects` sends the notices to
//! the lease owner's session and answers acknowledgments.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use smbq_wire::NtStatus;
use smbq_wire::create_context::lease_state::{HANDLE_CACHING, READ_CACHING, WRITE_CACHING};

use super::oplock::{BREAK_TIMEOUT, OpenIntent};
use crate::access::mask;

/// A lease's identity: the client (MS-SMB2 3.3.1.4 Lease.LeaseTable is per ClientGuid) and the
/// key it chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    pub client_guid: [u8; 16],
    pub key: [u8; 16],
}

/// A CREATE's lease request (MS-SMB2 2.2.13.2.8 / 2.2.13.2.10), as the grant needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseAsk {
    pub key: LeaseKey,
    pub requested: u32,
    /// The epoch of a V2 request; `None` for V1.
    pub v2_epoch: Option<u16>,
    /// The V2 ParentLeaseKey (with SMB2_LEASE_FLAG_PARENT_LEASE_KEY_SET): the client's lease
    /// on the parent directory, which changes made through this open do not break.
    pub parent: Option<LeaseKey>,
}

/// Whether an open with `access` is a stat open for leases: it breaks no lease. Leases count
/// READ_CONTROL in too (smbtorture smb2.lease.statopen4, as Windows and Samba's
/// is_lease_stat_open do); for granting W, READ_CONTROL counts as more (ShareModes::data_opens).
pub fn is_stat_open(access: u32) -> bool {
    const BITS: u32 = mask::SYNCHRONIZE
        | mask::FILE_READ_ATTRIBUTES
        | mask::FILE_WRITE_ATTRIBUTES
        | mask::READ_CONTROL;
    access & BITS != 0 && access & !BITS == 0
}

const RWH: u32 = READ_CACHING | WRITE_CACHING | HANDLE_CACHING;

/// What may be granted of `requested` (smbtorture smb2.lease.request): R, RH, RW or RWH; H or
/// W without R gives nothing, unknown bits are dropped.
pub fn grantable(requested: u32) -> u32 {
    if requested & READ_CACHING == 0 {
        0
    } else {
        requested & RWH
    }
}

/// The break a new open forces on a lease it does not share (MS-FSA 2.1.5.1.2, as smbtorture
/// smb2.lease shows it); `None` when the lease keeps its state: a sharing conflict takes H
/// only, so the holder can close its handles (break_twice: RWH to RW), even for an overwrite,
/// which the failing open never does (smbtorture smb2.lease.sharing_violation; Samba's
/// delay_for_oplock); an overwrite takes everything; any other data open takes W, and an open
/// that will delete the file takes H too (unlink).
pub fn break_on_open(held: u32, intent: OpenIntent) -> Option<u32> {
    if intent.stat_only && !intent.overwrite {
        return None;
    }
    let to = if intent.share_conflict {
        held & !HANDLE_CACHING
    } else if intent.overwrite {
        0
    } else if intent.deletes {
        held & !(WRITE_CACHING | HANDLE_CACHING)
    } else {
        held & !WRITE_CACHING
    };
    (to != held).then_some(to)
}

/// A new open, as the lease rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Opener {
    /// The lease it asks for; `None` for an open without one.
    pub key: Option<LeaseKey>,
    pub stream: u64,
    pub open_id: u64,
    pub session_id: u64,
    pub requested: u32,
    /// A V2 lease request (MS-SMB2 2.2.13.2.10) and the epoch it carries; a V1 lease reports
    /// epoch 0 everywhere.
    pub v2: Option<u16>,
    pub intent: OpenIntent,
    /// The stream has data opens (not stat opens, smbtorture smb2.lease.statopen*) of other
    /// keys or without a lease: they exclude W.
    pub other_opens: bool,
    /// An oplock is held on the stream (leases beside it get R only).
    pub oplock_held: bool,
    /// Byte-range locks lie within the stream's data: a shared lease (R, RH) is not granted
    /// (MS-FSA 2.1.5.18: a shared oplock needs no locks in the file; smbtorture
    /// smb2.lease.lease-epoch, which passes against Windows Server 2025).
    pub byte_range_locked: bool,
}

/// A lease break notification to deliver (MS-SMB2 2.2.23.2) to the lease owner's session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBreakNotice {
    pub key: LeaseKey,
    pub stream: u64,
    pub session_id: u64,
    pub current: u32,
    pub new: u32,
    /// The lease's epoch after the break (V2 leases carry it, MS-SMB2 3.3.4.7; 0 for V1).
    pub epoch: u16,
    /// SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED: breaking from a state that caches writes or
    /// handles, which the client must flush or close first.
    pub ack_required: bool,
    /// The break this notice speaks for. A failure to deliver it says nothing about a later
    /// break of the same lease, started after a grant or a release moved the lease between
    /// the decision and the send ([`Leases::undeliverable`]).
    pub break_id: u64,
}

impl LeaseBreakNotice {
    /// Where this notice was sent, for the report that it could not be delivered.
    pub fn sent(&self) -> Sent {
        Sent {
            session: self.session_id,
            break_id: self.break_id,
        }
    }
}

/// A break notice that could not reach its session ([`LeaseBreakNotice::sent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    pub session: u64,
    pub break_id: u64,
}

/// Names each break once, across every file's leases ([`LeaseBreakNotice::break_id`]).
static NEXT_BREAK: AtomicU64 = AtomicU64::new(1);

/// What the breaks a new open forces came to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contention {
    pub notices: Vec<LeaseBreakNotice>,
    /// A break needing an acknowledgment is under way: the open waits, then asks again.
    pub wait: bool,
    /// Opens whose lease a timed-out break changed ([`Leases::take_expired`]).
    pub recorded: Vec<u64>,
}

/// What an admitted open's lease is (MS-SMB2 2.2.14.2.10 / 2.2.14.2.11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Granted {
    pub state: u32,
    /// Lease.Epoch (0 for V1 leases).
    pub epoch: u16,
    /// SMB2_LEASE_FLAG_BREAK_IN_PROGRESS: the lease is being broken (the state is the one
    /// held before the break).
    pub breaking: bool,
    /// The lease is a V2 lease: the response uses the V2 layout whatever the request's
    /// (smbtorture smb2.lease.v2_epoch2/3).
    pub v2: bool,
}

/// What a new open with a lease was granted, and what it set off
/// ([`Leases::on_open`]: contention and grant in one step).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseOpen {
    pub granted: u32,
    pub epoch: u16,
    pub notices: Vec<LeaseBreakNotice>,
    pub wait: bool,
}

#[derive(Clone, Debug)]
struct Lease {
    key: LeaseKey,
    /// `FileKey::stream`: leases are per stream (smbtorture smb2.lease.request).
    stream: u64,
    /// Where its breaks go: the session of its latest open still open (MS-SMB2 3.3.4.7 sends a
    /// break to a connection of an open in Lease.LeaseOpens; smbtorture smb2.lease.v2_complex1).
    session_id: u64,
    state: u32,
    /// Lease.Breaking (MS-SMB2 3.3.1.4): a break awaiting its acknowledgment.
    breaking: Option<Breaking>,
    /// Lease.Epoch (MS-SMB2 3.3.1.4), counted on every change of state; `None` for V1.
    epoch: Option<u16>,
    /// Lease.LeaseOpens, in the order they joined.
    opens: Vec<Holder>,
}

/// An open of a lease and the session it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Holder {
    open: u64,
    session: u64,
}

/// A break under way.
#[derive(Clone, Copy, Debug)]
struct Breaking {
    /// Lease.BreakToLeaseState: the state the notification named; an acknowledgment may not
    /// go beyond it.
    to: u32,
    /// What the opens waiting on the lease need it broken to; lower than `to` when an open
    /// arrived during the break. Reached in further breaks after the acknowledgment, one
    /// step at a time as Windows does (smbtorture smb2.lease.breaking3).
    required: u32,
    /// When the wait for the acknowledgment ends (MS-SMB2 3.3.2.5).
    deadline: Instant,
    /// Kept for a client that is away (a parked persistent open, crate::durable::
    /// persistent): not sent yet, so the epoch has not moved; it moves when it is sent.
    withheld: bool,
    /// The session a reconnect moved the lease from while this break was under way
    /// ([`Leases::rebind`]). The reconnect sends the break to its own session
    /// ([`Leases::break_in_progress`]), so a failure to reach this one comes too late to
    /// say anything: acting on it would complete, or withhold and lower the epoch of, a
    /// break the client has heard.
    moved_from: Option<u64>,
    /// [`LeaseBreakNotice::break_id`] of the notices of this break.
    id: u64,
}

impl Breaking {
    /// Whether a notice that could not be delivered still speaks for this break: it was
    /// this break's notice, and not to the session a reconnect moved the lease from
    /// (`None`: not about one notice, as for a parked resilient open).
    fn undelivered_to(&self, sent: Option<Sent>) -> bool {
        sent.is_none_or(|s| s.break_id == self.id && self.moved_from != Some(s.session))
    }
}

impl Lease {
    fn epoch(&self) -> u16 {
        self.epoch.unwrap_or(0)
    }

    fn has(&self, open_id: u64) -> bool {
        self.opens.iter().any(|h| h.open == open_id)
    }

    fn bump(&mut self) {
        if let Some(e) = &mut self.epoch {
            *e = e.wrapping_add(1);
        }
    }

    /// Starts breaking the lease to `to`; the notice to send. A break from a state caching
    /// writes or handles waits for the acknowledgment until `deadline`; one from R alone
    /// completes at once.
    fn start_break(&mut self, to: u32, deadline: Instant) -> LeaseBreakNotice {
        self.bump();
        self.step_break(to, deadline)
    }

    /// A break that goes on from an acknowledged one keeps its epoch (smbtorture
    /// smb2.lease.v2_breaking3).
    fn step_break(&mut self, to: u32, deadline: Instant) -> LeaseBreakNotice {
        let ack_required = self.state & (WRITE_CACHING | HANDLE_CACHING) != 0;
        let id = NEXT_BREAK.fetch_add(1, Ordering::Relaxed);
        let notice = LeaseBreakNotice {
            key: self.key,
            stream: self.stream,
            session_id: self.session_id,
            current: self.state,
            new: to,
            epoch: self.epoch(),
            ack_required,
            break_id: id,
        };
        if ack_required {
            self.breaking = Some(Breaking {
                to,
                required: to,
                deadline,
                withheld: false,
                moved_from: None,
                id,
            });
        } else {
            self.state = to;
        }
        notice
    }
}

/// The leases held on one file (all its streams).
#[derive(Debug, Default)]
pub struct Leases {
    leases: Vec<Lease>,
    /// Opens whose lease a timed-out break changed since the door last asked
    /// ([`Leases::take_expired`]): their persistent records hold the state before it, and
    /// are written again (crate::open_state::Effects::recorded). One entry per open.
    expired: Vec<u64>,
}

impl Leases {
    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    fn find(&mut self, key: &LeaseKey, stream: u64) -> Option<&mut Lease> {
        self.leases
            .iter_mut()
            .find(|l| l.key == *key && l.stream == stream)
    }

    /// The state and epoch of `key`'s lease on `stream`, if it has one.
    pub fn state(&self, key: &LeaseKey, stream: u64) -> Option<(u32, u16)> {
        self.leases
            .iter()
            .find(|l| l.key == *key && l.stream == stream)
            .map(|l| (l.state, l.epoch()))
    }

    /// The opens of `key`'s lease on `stream`.
    pub fn opens_of(&self, key: &LeaseKey, stream: u64) -> Vec<u64> {
        self.leases
            .iter()
            .find(|l| l.key == *key && l.stream == stream)
            .map_or_else(Vec::new, |l| l.opens.iter().map(|h| h.open).collect())
    }

    /// The lease `open_id` holds as its client would see it in a CREATE response.
    pub fn granted_of(&self, open_id: u64) -> Option<(LeaseKey, Granted)> {
        self.leases.iter().find(|l| l.has(open_id)).map(|l| {
            (
                l.key,
                Granted {
                    state: l.state,
                    epoch: l.epoch(),
                    breaking: l.breaking.is_some(),
                    v2: l.epoch.is_some(),
                },
            )
        })
    }

    /// The opens of leases whose break awaits an acknowledgment.
    pub fn breaking_opens(&self) -> impl Iterator<Item = u64> + '_ {
        self.leases
            .iter()
            .filter(|l| l.breaking.is_some())
            .flat_map(|l| l.opens.iter().map(|h| h.open))
    }

    /// A durable open reconnected on another session: its lease's breaks go there.
    pub fn rebind(&mut self, open_id: u64, session_id: u64) {
        for l in self.leases.iter_mut().filter(|l| l.has(open_id)) {
            if let Some(b) = &mut l.breaking
                && l.session_id != session_id
            {
                b.moved_from = Some(l.session_id);
            }
            l.session_id = session_id;
            for h in l.opens.iter_mut().filter(|h| h.open == open_id) {
                h.session = session_id;
            }
        }
    }

    /// The notice of `key`'s break on `stream` still awaiting its acknowledgment, to send it
    /// again (a persistent open reclaimed by a client that never heard it).
    /// A break withheld from its away client is sent now: its epoch moves.
    pub fn break_in_progress(&mut self, key: &LeaseKey, stream: u64) -> Option<LeaseBreakNotice> {
        let l = self.find(key, stream)?;
        let mut b = l.breaking?;
        if b.withheld {
            b.withheld = false;
            l.breaking = Some(b);
            l.bump();
        }
        Some(LeaseBreakNotice {
            key: l.key,
            stream: l.stream,
            session_id: l.session_id,
            current: l.state,
            new: b.to,
            epoch: l.epoch(),
            ack_required: true,
            break_id: b.id,
        })
    }

    /// The break of `key` on `stream` could not be sent: its client is away and will hear it
    /// when it reclaims its persistent open (crate::durable::persistent). Until then the
    /// lease keeps its epoch, which a reconnect reports (smbtorture smb2.persistent-open-
    /// reconnect-contended: the reconnect sees epoch 1, the break that follows 2).
    /// `sent`: the notice that could not be delivered.
    pub fn withhold(&mut self, key: &LeaseKey, stream: u64, sent: Sent) {
        if let Some(l) = self.find(key, stream)
            && let Some(b) = &mut l.breaking
            && !b.withheld
            && b.undelivered_to(Some(sent))
        {
            b.withheld = true;
            if let Some(e) = &mut l.epoch {
                *e = e.wrapping_sub(1);
            }
        }
    }

    /// A persistent open restored after a restart (crate::persist) holds `key`'s lease on
    /// `stream` again, in the state and epoch it had; its breaks go nowhere until its client
    /// reclaims it (session 0).
    pub fn restore(
        &mut self,
        key: LeaseKey,
        stream: u64,
        open_id: u64,
        state: u32,
        epoch: Option<u16>,
    ) {
        let holder = Holder {
            open: open_id,
            session: 0,
        };
        if let Some(l) = self.find(&key, stream) {
            l.opens.push(holder);
            // The opens of one lease were recorded at different times: an acknowledged break
            // rewrites them all, but an upgrade through a later open writes only that one.
            // The newest state wins: a higher epoch (V2), else the one caching more, since
            // only an upgrade leaves records apart.
            let newer = match (epoch, l.epoch) {
                (Some(e), Some(mine)) if e != mine => epoch_after(e, mine),
                _ => state & l.state == l.state && state != l.state,
            };
            if newer {
                l.state = state;
                l.epoch = epoch;
            }
            return;
        }
        self.leases.push(Lease {
            key,
            stream,
            session_id: 0,
            state,
            breaking: None,
            epoch,
            opens: vec![holder],
        });
    }

    /// A persistent open reclaimed while no other open of its lease is connected takes its
    /// lease back as Windows hands it (smbtorture smb2.persistent-open-reconnect-contended's
    /// tables; Samba's vfs_default_durable_reconnect_lease): a lease that does not cache
    /// writes on a file with byte-range locks is gone (others may have written meanwhile);
    /// one that does not cache handles was the client's to lose, so it takes the epoch the
    /// reconnect carries, one more for R alone (the client's R was re-acquired).
    pub fn reacquire(&mut self, open_id: u64, asked_epoch: u16, locked: bool) {
        let Some(l) = self.leases.iter_mut().find(|l| l.has(open_id)) else {
            return;
        };
        if l.breaking.is_some() {
            return;
        }
        if locked && l.state & WRITE_CACHING == 0 {
            l.state = 0;
        }
        if l.state & HANDLE_CACHING == 0
            && let Some(e) = &mut l.epoch
        {
            *e = if l.state == READ_CACHING {
                asked_epoch.wrapping_add(1)
            } else {
                asked_epoch
            };
        }
    }

    /// The lease open `open_id` holds, if any.
    pub fn key_of_open(&self, open_id: u64) -> Option<LeaseKey> {
        self.leases.iter().find(|l| l.has(open_id)).map(|l| l.key)
    }

    /// A contest and a grant in one step, as a CREATE without other opens sees it.
    pub fn on_open(&mut self, o: &Opener, now: Instant) -> LeaseOpen {
        let c = self.contend(o, now);
        let mut out = LeaseOpen {
            notices: c.notices,
            wait: c.wait,
            ..LeaseOpen::default()
        };
        if !out.wait && o.key.is_some() {
            let g = self.grant(o);
            out.granted = g.state;
            out.epoch = g.epoch;
        }
        out
    }

    /// A new open of `o.stream`, before it is admitted (MS-FSA 2.1.5.1.2): the breaks it
    /// forces on the other keys' leases. With `wait` set the open must not be admitted yet:
    /// the caller waits for the acknowledgments and asks again.
    pub fn contend(&mut self, o: &Opener, now: Instant) -> Contention {
        self.expire(now);
        let mut out = Contention::default();
        for l in self
            .leases
            .iter_mut()
            .filter(|l| l.stream == o.stream && Some(l.key) != o.key)
        {
            if let Some(b) = &mut l.breaking {
                // A break under way: what this open needs is added to what the break must
                // reach, and the open waits if it needs W (or, on a sharing conflict, H)
                // gone.
                let need = break_on_open(l.state, o.intent).unwrap_or(l.state);
                b.required &= need;
                let gone = l.state & !need;
                out.wait |= gone & WRITE_CACHING != 0
                    || (o.intent.share_conflict && gone & HANDLE_CACHING != 0);
                continue;
            }
            let Some(to) = break_on_open(l.state, o.intent) else {
                continue;
            };
            let gone = l.state & !to;
            out.notices.push(l.start_break(to, now + BREAK_TIMEOUT));
            out.wait |= gone & WRITE_CACHING != 0
                || (o.intent.share_conflict && gone & HANDLE_CACHING != 0);
        }
        out.recorded = self.take_expired();
        out
    }

    /// Makes or upgrades the admitted open's lease (MS-SMB2 3.3.5.9.8 / 3.3.5.9.11): what it
    /// asked for, without W beside other opens or leases, R only beside an oplock; the same key
    /// asking again only upgrades, to a superset of what it holds, and not while breaking.
    pub fn grant(&mut self, o: &Opener) -> Granted {
        let Some(key) = o.key else {
            return Granted::default();
        };
        let mut want = grantable(o.requested);
        let other_leases = self
            .leases
            .iter()
            .any(|l| l.stream == o.stream && l.key != key);
        if other_leases || o.other_opens {
            // MS-FSA 2.1.5.17.2: write caching only for the only key on the stream.
            want &= !WRITE_CACHING;
        }
        if o.oplock_held {
            // smbtorture smb2.lease.oplock: beside an oplock a lease caches reads only.
            want &= READ_CACHING;
        }
        if o.byte_range_locked && want & WRITE_CACHING == 0 {
            want = 0;
        }
        let full = want == grantable(o.requested);
        if let Some(l) = self.find(&key, o.stream) {
            // smbtorture smb2.lease.upgrade3: an upgrade happens whole or not at all (R asking
            // RHW beside another key stays R, it does not become RH).
            if full && want & l.state == l.state && want != l.state && l.breaking.is_none() {
                l.state = want;
                l.bump();
            }
            if !l.has(o.open_id) {
                l.opens.push(Holder {
                    open: o.open_id,
                    session: o.session_id,
                });
            }
            l.session_id = o.session_id;
            return Granted {
                state: l.state,
                epoch: l.epoch(),
                breaking: l.breaking.is_some(),
                v2: l.epoch.is_some(),
            };
        }
        let mut l = Lease {
            key,
            stream: o.stream,
            session_id: o.session_id,
            state: want,
            breaking: None,
            epoch: o.v2,
            opens: vec![Holder {
                open: o.open_id,
                session: o.session_id,
            }],
        };
        if want != 0 {
            l.bump();
        }
        let g = Granted {
            state: l.state,
            epoch: l.epoch(),
            breaking: false,
            v2: l.epoch.is_some(),
        };
        self.leases.push(l);
        g
    }

    /// Whether a lease on `stream` caches handles: an oplock asked for beside it gets none
    /// (smbtorture smb2.lease.oplock: RH and RWH holders leave an oplock request nothing; R and
    /// RW ones leave it level II).
    pub fn caches_handles(&self, stream: u64) -> bool {
        self.leases
            .iter()
            .any(|l| l.stream == stream && l.state & HANDLE_CACHING != 0)
    }

    /// A write, byte-range lock or size change on `stream` through `writer` (MS-FSA
    /// 2.1.4.12, as Samba's contend_level2_oplocks does it): every other key's lease caching
    /// reads breaks to none; the writer's own lease keeps its state. Nobody waits: an
    /// acknowledgment is asked for when H goes too.
    pub fn break_for_write(
        &mut self,
        stream: u64,
        writer: u64,
        now: Instant,
    ) -> Vec<LeaseBreakNotice> {
        self.expire(now);
        let own = self.key_of_open(writer);
        self.leases
            .iter_mut()
            .filter(|l| {
                l.stream == stream
                    && Some(l.key) != own
                    && l.breaking.is_none()
                    && l.state & READ_CACHING != 0
            })
            .map(|l| l.start_break(0, now + BREAK_TIMEOUT))
            .collect()
    }

    /// A rename of the file through open `by` (MS-FSA 2.1.5.15.11, as Windows does it in
    /// smbtorture smb2.lease.rename_wait and v2_rename): every other key's lease caching
    /// handles loses H, and the rename waits for the acknowledgments.
    pub fn break_handles(&mut self, by: u64, now: Instant) -> Contention {
        self.expire(now);
        let own = self.key_of_open(by);
        let mut out = Contention::default();
        for l in self
            .leases
            .iter_mut()
            .filter(|l| Some(l.key) != own && l.state & HANDLE_CACHING != 0)
        {
            out.wait = true;
            if let Some(b) = &mut l.breaking {
                b.required &= !HANDLE_CACHING;
                continue;
            }
            let to = l.state & !HANDLE_CACHING;
            out.notices.push(l.start_break(to, now + BREAK_TIMEOUT));
        }
        out.recorded = self.take_expired();
        out
    }

    /// Something in the directory these leases are on changed (a child created, deleted,
    /// renamed or modified): every lease caching reads or handles breaks to none, except the
    /// one whose key the change named as its parent lease key (its holder made the change;
    /// as Windows Server 2025 and Samba 4.22's contend_dirleases do). Nobody waits.
    pub fn break_for_child_change(
        &mut self,
        except: Option<&LeaseKey>,
        now: Instant,
    ) -> Vec<LeaseBreakNotice> {
        self.expire(now);
        let mut out = Vec::new();
        // The parent lease key is compared as the object store compares oplock keys, by its
        // 16 bytes alone (MS-FSA 2.1.4.12 ParentOplockKey; Samba's contend_dirleases does the
        // same): another client's open naming the key breaks nothing either (smbtorture
        // smb2.dirlease.seteof and the other setinfo tests, "second client").
        for l in self
            .leases
            .iter_mut()
            .filter(|l| except.is_none_or(|e| e.key != l.key.key))
        {
            if let Some(b) = &mut l.breaking {
                b.required = 0;
                continue;
            }
            if l.state & (READ_CACHING | HANDLE_CACHING) != 0 {
                out.push(l.start_break(0, now + BREAK_TIMEOUT));
            }
        }
        out
    }

    /// A LEASE_BREAK acknowledgment (MS-SMB2 3.3.5.22.2): the state now held and the further
    /// break to send when opens that came during the break need less (to R first when H or
    /// W is still held, as Windows does, smbtorture smb2.lease.breaking3), or the error to
    /// answer with: no lease, STATUS_OBJECT_NAME_NOT_FOUND; no break under way,
    /// STATUS_UNSUCCESSFUL; a state beyond the one broken to, STATUS_REQUEST_NOT_ACCEPTED
    /// (the break goes on, smbtorture smb2.lease.breaking2).
    pub fn acknowledge(
        &mut self,
        key: &LeaseKey,
        acked: u32,
        now: Instant,
    ) -> Result<(u32, Option<LeaseBreakNotice>), NtStatus> {
        let l = self
            .leases
            .iter_mut()
            .find(|l| l.key == *key)
            .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
        let b = l.breaking.ok_or(NtStatus::UNSUCCESSFUL)?;
        if acked & !b.to != 0 {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        l.breaking = None;
        l.state = acked;
        if acked & !b.required == 0 {
            return Ok((acked, None));
        }
        let mut next = b.required;
        if acked & (WRITE_CACHING | HANDLE_CACHING) != 0 {
            next |= READ_CACHING & acked;
        }
        let notice = l.step_break(next, now + BREAK_TIMEOUT);
        if let Some(nb) = &mut l.breaking {
            nb.required = b.required;
        }
        Ok((acked, Some(notice)))
    }

    /// The notice for `key`'s lease could not be delivered (no channel of its session is
    /// alive): nobody will acknowledge, so the break completes at once, to what the waiting
    /// opens need. `sent`: the notice that could not be delivered, if it was one; a notice
    /// of an earlier break of the lease, or to a session a reconnect left, changes nothing.
    pub fn undeliverable(&mut self, key: &LeaseKey, stream: u64, sent: Option<Sent>) {
        if let Some(l) = self.find(key, stream)
            && let Some(b) = l.breaking.filter(|b| b.undelivered_to(sent))
        {
            l.breaking = None;
            l.state = b.required;
        }
    }

    /// A break whose wait is over takes the whole lease (MS-SMB2 3.3.2.5 Lease Break
    /// Acknowledgment Timer; smbtorture smb2.lease.timeout: the holder is left with none).
    /// A break withheld from an away client moves the epoch now: the state the client will
    /// see on its return is not the one it left, and a V2 lease's epoch moves with every
    /// change of its state the server makes (MS-SMB2 3.3.4.7).
    /// The opens whose records the change leaves behind are kept for
    /// [`Leases::take_expired`]: whoever makes the change (a CREATE's contention, its wait,
    /// a write) need not be the door verb that reports it.
    pub fn expire(&mut self, now: Instant) {
        for l in &mut self.leases {
            let Some(b) = l.breaking.filter(|b| b.deadline <= now) else {
                continue;
            };
            l.breaking = None;
            l.state = 0;
            if b.withheld {
                l.bump();
            }
            for h in &l.opens {
                if !self.expired.contains(&h.open) {
                    self.expired.push(h.open);
                }
            }
        }
    }

    /// The opens whose lease [`Leases::expire`] changed since the last call.
    pub fn take_expired(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.expired)
    }

    /// The earliest deadline of a break on `stream` still awaiting its acknowledgment.
    pub fn pending_until(&self, stream: u64) -> Option<Instant> {
        self.leases
            .iter()
            .filter(|l| l.stream == stream)
            .filter_map(|l| l.breaking.map(|b| b.deadline))
            .min()
    }

    /// The open is closed; a lease whose last open closed goes with it (MS-SMB2 3.3.5.10).
    /// Returns the keys of the leases that ended.
    pub fn release(&mut self, open_id: u64) -> Vec<LeaseKey> {
        let mut ended = Vec::new();
        for l in &mut self.leases {
            l.opens.retain(|h| h.open != open_id);
            match l.opens.last() {
                // Breaks go on to the session of the latest open left.
                Some(h) => l.session_id = h.session,
                None => ended.push(l.key),
            }
        }
        self.leases.retain(|l| !l.opens.is_empty());
        self.expired.retain(|&o| o != open_id);
        ended
    }
}

/// Whether V2 lease epoch `a` came after `b` (epochs wrap at 2^16: the nearer way round).
fn epoch_after(a: u16, b: u16) -> bool {
    a != b && a.wrapping_sub(b) < 0x8000
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// smbtorture's notation: "RHW" and the like.
    fn ls(s: &str) -> u32 {
        s.chars()
            .map(|c| match c {
                'R' => READ_CACHING,
                'H' => HANDLE_CACHING,
                'W' => WRITE_CACHING,
                _ => panic!("{c}"),
            })
            .fold(0, |a, b| a | b)
    }

    fn key(n: u8) -> LeaseKey {
        LeaseKey {
            client_guid: [1; 16],
            key: [n; 16],
        }
    }

    const PLAIN: OpenIntent = OpenIntent {
        stat_only: false,
        overwrite: false,
        share_conflict: false,
        deletes: false,
    };

    /// An open of stream 0 by session 9 asking for `state` under `k` (`None`: no lease);
    /// `others`: the stream has opens of other keys.
    /// An open without a lease whose share access conflicts with the holders' (H breaks).
    fn conflicting(open_id: u64) -> Opener {
        Opener {
            intent: OpenIntent {
                share_conflict: true,
                ..PLAIN
            },
            ..opener(None, open_id, "", true)
        }
    }

    fn opener(k: Option<u8>, open_id: u64, state: &str, others: bool) -> Opener {
        Opener {
            key: k.map(key),
            stream: 0,
            open_id,
            session_id: 9,
            requested: ls(state),
            v2: None,
            intent: PLAIN,
            other_opens: others,
            oplock_held: false,
            byte_range_locked: false,
        }
    }

    /// smbtorture smb2.lease.request's table: what a lone open is granted.
    #[test]
    fn request_table() {
        let rows = [
            ("", ""),
            ("R", "R"),
            ("H", ""),
            ("W", ""),
            ("RH", "RH"),
            ("RW", "RW"),
            ("HW", ""),
            ("RHW", "RHW"),
        ];
        for (asked, got) in rows {
            let mut l = Leases::default();
            let o = l.on_open(&opener(Some(1), 1, asked, false), Instant::now());
            assert_eq!(o.granted, ls(got), "asked {asked}");
            assert!(o.notices.is_empty() && !o.wait);
        }
    }

    /// smbtorture smb2.lease.upgrade2's table: (held, asked again with the same key, result).
    #[test]
    fn upgrade_table() {
        let rows = [
            ("", "", ""),
            ("", "R", "R"),
            ("", "RH", "RH"),
            ("", "RW", "RW"),
            ("", "RHW", "RHW"),
            ("R", "", "R"),
            ("R", "R", "R"),
            ("R", "RH", "RH"),
            ("R", "RW", "RW"),
            ("R", "RHW", "RHW"),
            ("RH", "", "RH"),
            ("RH", "R", "RH"),
            ("RH", "RH", "RH"),
            ("RH", "RW", "RH"),
            ("RH", "RHW", "RHW"),
            ("RW", "", "RW"),
            ("RW", "R", "RW"),
            ("RW", "RH", "RW"),
            ("RW", "RW", "RW"),
            ("RW", "RHW", "RHW"),
            ("RHW", "", "RHW"),
            ("RHW", "R", "RHW"),
            ("RHW", "RH", "RHW"),
            ("RHW", "RW", "RHW"),
            ("RHW", "RHW", "RHW"),
        ];
        for (held, asked, want) in rows {
            let mut l = Leases::default();
            let now = Instant::now();
            let first = l.on_open(&opener(Some(1), 1, held, false), now);
            assert_eq!(first.granted, ls(held));
            let second = l.on_open(&opener(Some(1), 2, asked, false), now);
            assert_eq!(second.granted, ls(want), "{held} then {asked}");
            assert!(
                second.notices.is_empty(),
                "a key never breaks itself (nobreakself)"
            );
        }
    }

    /// smbtorture smb2.lease.v2_complex1: a lease opened on session 9, then on session 10 and
    /// closed there, breaks to session 9, where its one open is left (MS-SMB2 3.3.4.7).
    #[test]
    fn a_break_goes_to_the_session_of_an_open_left() {
        let mut l = Leases::default();
        let now = Instant::now();
        l.on_open(&opener(Some(1), 1, "R", false), now);
        let mut on_10 = opener(Some(1), 2, "RHW", false);
        on_10.session_id = 10;
        assert_eq!(l.on_open(&on_10, now).granted, ls("RHW"));
        assert!(l.release(2).is_empty(), "the lease stays with open 1");
        let o = l.on_open(&opener(Some(2), 3, "R", true), now);
        let [n] = &o.notices[..] else {
            panic!("one break, got {:?}", o.notices)
        };
        assert_eq!(n.key, key(1));
        assert_eq!(n.session_id, 9, "to the session that still has an open");
    }

    /// smbtorture smb2.lease.break's table: (held by key 1, asked by key 2, key 1 broken to,
    /// key 2 granted), key 1 acknowledging as smbtorture's handler does.
    #[test]
    fn break_table() {
        let rows = [
            ("R", "R", "R", "R"),
            ("R", "RH", "R", "RH"),
            ("R", "RW", "R", "R"),
            ("R", "RHW", "R", "RH"),
            ("RH", "R", "RH", "R"),
            ("RH", "RH", "RH", "RH"),
            ("RH", "RW", "RH", "R"),
            ("RH", "RHW", "RH", "RH"),
            ("RW", "R", "R", "R"),
            ("RW", "RH", "R", "RH"),
            ("RW", "RW", "R", "R"),
            ("RW", "RHW", "R", "RH"),
            ("RHW", "R", "RH", "R"),
            ("RHW", "RH", "RH", "RH"),
            ("RHW", "RW", "RH", "R"),
            ("RHW", "RHW", "RH", "RH"),
        ];
        for (held, asked, broken_to, granted) in rows {
            let case = format!("{held} vs {asked}");
            let mut l = Leases::default();
            let now = Instant::now();
            l.on_open(&opener(Some(1), 1, held, false), now);
            let second = opener(Some(2), 2, asked, true);
            let mut o = l.on_open(&second, now);
            if held != broken_to {
                assert!(o.wait, "{case}: waits for the acknowledgment");
                let [n] = &o.notices[..] else {
                    panic!("{case}: one break, got {:?}", o.notices)
                };
                assert_eq!((n.current, n.new), (ls(held), ls(broken_to)), "{case}");
                assert_eq!(n.key, key(1));
                assert_eq!(n.session_id, 9, "to the holder's session");
                assert!(n.ack_required);
                assert_eq!(l.acknowledge(&key(1), n.new, now), Ok((n.new, None)));
                o = l.on_open(&second, now);
            }
            assert!(o.notices.is_empty() && !o.wait, "{case}");
            assert_eq!(o.granted, ls(granted), "{case}: granted");
            assert_eq!(l.state(&key(1), 0).unwrap().0, ls(broken_to), "{case}");
        }
    }

    /// smbtorture smb2.lease.oplock, the lease side: (held, broken to by an open asking for an
    /// oplock, whether that open's oplock may cache handles' worth: none beside H).
    #[test]
    fn oplock_opens_contend_leases() {
        let rows = [
            ("R", "R", false),
            ("RH", "RH", true),
            ("RW", "R", false),
            ("RHW", "RH", true),
        ];
        for (held, broken_to, blocks_oplock) in rows {
            let mut l = Leases::default();
            let now = Instant::now();
            l.on_open(&opener(Some(1), 1, held, false), now);
            let o = l.on_open(&opener(None, 2, "", true), now);
            if held == broken_to {
                assert!(o.notices.is_empty() && !o.wait, "{held}");
            } else {
                assert_eq!(o.notices[0].new, ls(broken_to), "{held}");
                assert!(o.wait, "{held}: writes to flush first");
                l.acknowledge(&key(1), ls(broken_to), now).unwrap();
            }
            assert_eq!(l.caches_handles(0), blocks_oplock, "{held}");
        }
        // The other way round: beside an oplock a lease gets R only, whatever it asks.
        for asked in ["R", "RH", "RW", "RHW"] {
            let mut l = Leases::default();
            let o = l.on_open(
                &Opener {
                    oplock_held: true,
                    ..opener(Some(1), 1, asked, true)
                },
                Instant::now(),
            );
            assert_eq!(o.granted, ls("R"), "{asked}");
        }
    }

    /// smbtorture smb2.lease.multibreak and breaking's overwrite case: an overwrite takes the
    /// whole lease; acknowledged when H or W went, waited for only when W did.
    #[test]
    fn overwrite_takes_everything() {
        let rows = [
            ("R", false, false),
            ("RH", true, false),
            ("RW", true, true),
            ("RHW", true, true),
        ];
        for (held, ack, wait) in rows {
            let mut l = Leases::default();
            let now = Instant::now();
            l.on_open(&opener(Some(1), 1, held, false), now);
            let over = Opener {
                intent: OpenIntent {
                    overwrite: true,
                    ..PLAIN
                },
                ..opener(None, 2, "", true)
            };
            let o = l.on_open(&over, now);
            let [n] = &o.notices[..] else {
                panic!("{held}: one break")
            };
            assert_eq!(
                (n.current, n.new, n.ack_required),
                (ls(held), 0, ack),
                "{held}"
            );
            assert_eq!(o.wait, wait, "{held}");
        }
    }

    /// smbtorture smb2.lease.lease-epoch: with byte-range locks in the file a shared lease is
    /// not granted, and a V2 lease's epoch stays as the client sent it; a lease that may
    /// cache writes (no other opens) still is.
    #[test]
    fn byte_range_locks_keep_shared_leases_from_being_granted() {
        let now = Instant::now();
        for (asked, others, got) in [("R", true, ""), ("RH", true, ""), ("RHW", false, "RHW")] {
            let mut l = Leases::default();
            let o = Opener {
                v2: Some(100),
                byte_range_locked: true,
                ..opener(Some(1), 1, asked, others)
            };
            let g = l.on_open(&o, now);
            assert_eq!(g.granted, ls(got), "{asked}");
            let want_epoch = if got.is_empty() { 100 } else { 101 };
            assert_eq!(g.epoch, want_epoch, "{asked}");
        }
    }

    /// smbtorture smb2.lease.sharing_violation: an overwrite that meets a sharing conflict
    /// fails, so it takes H only (RWH to RW), as any conflicting open does.
    #[test]
    fn an_overwrite_with_a_sharing_conflict_takes_handles_only() {
        assert_eq!(
            break_on_open(
                ls("RHW"),
                OpenIntent {
                    overwrite: true,
                    share_conflict: true,
                    ..PLAIN
                }
            ),
            Some(ls("RW"))
        );
        assert_eq!(
            break_on_open(
                ls("RW"),
                OpenIntent {
                    overwrite: true,
                    share_conflict: true,
                    ..PLAIN
                }
            ),
            None,
            "nothing more to take: the open fails its sharing check"
        );
    }

    #[test]
    fn stat_opens_break_nothing_and_conflicts_take_handles() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RHW", false), now);
        let stat = Opener {
            intent: OpenIntent {
                stat_only: true,
                ..PLAIN
            },
            ..opener(None, 2, "", true)
        };
        let o = l.on_open(&stat, now);
        assert!(o.notices.is_empty() && !o.wait, "statopen");
        let o = l.on_open(&conflicting(3), now);
        assert_eq!(o.notices[0].new, ls("RW"), "H goes so the holder can close");
        assert!(o.wait);
    }

    #[test]
    fn acknowledgment_rules_and_timeout() {
        let now = Instant::now();
        let mut l = Leases::default();
        // A V2 lease asking with epoch 5: the grant moves it to 6 (smbtorture v2_request).
        let v2 = Opener {
            v2: Some(5),
            ..opener(Some(1), 1, "RHW", false)
        };
        assert_eq!(l.on_open(&v2, now).epoch, 6);
        assert_eq!(
            l.acknowledge(&key(1), ls("RH"), now),
            Err(NtStatus::UNSUCCESSFUL),
            "no break under way"
        );
        assert_eq!(
            l.acknowledge(&key(7), 0, now),
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        );
        let o = l.on_open(&opener(Some(2), 2, "R", true), now);
        assert!(o.wait);
        assert_eq!(o.notices[0].epoch, 7, "the break moves the epoch");
        assert_eq!(l.pending_until(0), Some(now + BREAK_TIMEOUT));
        // smbtorture breaking2: states beyond the one broken to are refused and the break
        // goes on.
        for beyond in ["RHW", "RW", "W"] {
            assert_eq!(
                l.acknowledge(&key(1), ls(beyond), now),
                Err(NtStatus::REQUEST_NOT_ACCEPTED),
                "{beyond}"
            );
        }
        assert_eq!(l.state(&key(1), 0).unwrap().0, ls("RHW"), "still breaking");
        assert!(l.pending_until(0).is_some());
        assert_eq!(l.acknowledge(&key(1), ls("R"), now), Ok((ls("R"), None)));

        // A holder that never answers: at the deadline the break takes the whole lease.
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RW", false), now);
        assert!(l.on_open(&opener(Some(2), 2, "R", true), now).wait);
        let later = now + BREAK_TIMEOUT;
        let o = l.on_open(&opener(Some(2), 2, "R", true), later);
        assert!(!o.wait);
        assert_eq!(o.granted, ls("R"));
        assert_eq!(
            l.state(&key(1), 0).unwrap().0,
            0,
            "smbtorture lease.timeout"
        );
    }

    /// smbtorture smb2.lease.breaking3: opens arriving during a break add to what it must
    /// reach; after the acknowledgment the rest is broken in steps, to R while H or W is held,
    /// then to none without an acknowledgment.
    #[test]
    fn later_opens_deepen_a_break_in_steps() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RHW", false), now);
        let plain = l.on_open(&opener(None, 2, "", true), now);
        assert_eq!(plain.notices[0].new, ls("RH"));
        assert!(plain.wait);
        let over = Opener {
            intent: OpenIntent {
                overwrite: true,
                ..PLAIN
            },
            ..opener(None, 3, "", true)
        };
        let o = l.on_open(&over, now);
        assert!(o.notices.is_empty(), "no second notice during the break");
        assert!(o.wait);
        // The same key opening meanwhile sees the old state, flagged as breaking.
        let g = l.grant(&opener(Some(1), 4, "", false));
        assert_eq!((g.state, g.breaking), (ls("RHW"), true));

        let (state, next) = l.acknowledge(&key(1), ls("RH"), now).unwrap();
        assert_eq!(state, ls("RH"));
        let next = next.unwrap();
        assert_eq!(
            (next.current, next.new, next.ack_required),
            (ls("RH"), ls("R"), true)
        );
        let (_, last) = l.acknowledge(&key(1), ls("R"), now).unwrap();
        let last = last.unwrap();
        assert_eq!(
            (last.current, last.new, last.ack_required),
            (ls("R"), 0, false)
        );
        assert_eq!(l.pending_until(0), None, "nothing left to wait for");
        assert!(!l.on_open(&over, now).wait);
    }

    /// smbtorture smb2.lease.upgrade3: an upgrade the other opens do not allow in full does
    /// not happen at all.
    #[test]
    fn upgrades_are_whole_or_nothing() {
        let rows = [
            ("R", "R", "RW", "R"),
            ("R", "R", "RH", "RH"),
            ("R", "R", "RHW", "R"),
            ("RH", "R", "RHW", "RH"),
        ];
        for (held1, held2, asked, want) in rows {
            let now = Instant::now();
            let mut l = Leases::default();
            l.on_open(&opener(Some(1), 1, held1, false), now);
            l.on_open(&opener(Some(2), 2, held2, true), now);
            let o = l.on_open(&opener(Some(1), 3, asked, true), now);
            assert_eq!(o.granted, ls(want), "{held1}/{held2} then {asked}");
            assert!(o.notices.is_empty());
        }
    }

    #[test]
    fn streams_are_leased_apart_and_leases_end_with_their_last_open() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RHW", false), now);
        let s = l.on_open(
            &Opener {
                stream: 5,
                ..opener(Some(2), 2, "RHW", false)
            },
            now,
        );
        assert_eq!(s.granted, ls("RHW"), "another stream is another object");
        assert!(s.notices.is_empty());
        l.on_open(&opener(Some(1), 3, "RHW", false), now);
        l.release(1);
        assert!(l.state(&key(1), 0).is_some(), "open 3 still holds it");
        l.release(3);
        assert!(l.state(&key(1), 0).is_none());
        l.release(2);
        assert!(l.is_empty());
    }

    /// smbtorture smb2.lease.rename_wait / v2_rename: a rename takes H from the other keys
    /// and waits for them; the renamer's own lease keeps its state.
    #[test]
    fn renames_take_handle_caching_from_other_keys() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RH", false), now);
        l.on_open(&opener(Some(2), 2, "RH", true), now);
        let c = l.break_handles(1, now);
        assert!(c.wait);
        let [n] = &c.notices[..] else {
            panic!("one break: {:?}", c.notices)
        };
        assert_eq!((n.key, n.current, n.new), (key(2), ls("RH"), ls("R")));
        assert_eq!(l.state(&key(1), 0).unwrap().0, ls("RH"));
        assert!(
            l.break_handles(1, now).wait,
            "still waiting, no second notice"
        );
        l.acknowledge(&key(2), ls("R"), now).unwrap();
        let c = l.break_handles(1, now);
        assert!(!c.wait && c.notices.is_empty());
    }

    /// A parent lease key is matched by its 16 bytes: a change by another client (another
    /// ClientGuid) naming the directory's lease key breaks nothing (smbtorture
    /// smb2.dirlease.seteof, "second client, correct parent lease key").
    #[test]
    fn a_parent_lease_key_from_another_client_is_still_the_holders() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RH", false), now);
        let elsewhere = LeaseKey {
            client_guid: [7; 16],
            key: key(1).key,
        };
        assert!(l.break_for_child_change(Some(&elsewhere), now).is_empty());
        let other_key = LeaseKey {
            client_guid: [1; 16],
            key: [9; 16],
        };
        assert_eq!(l.break_for_child_change(Some(&other_key), now).len(), 1);
    }

    /// A change inside a leased directory (crate::file_state::dir_lease): every lease but the
    /// one named as the changer's parent breaks to none; a break under way is carried to
    /// none after its acknowledgment; a lease already at none hears nothing.
    #[test]
    fn child_changes_break_directory_leases_to_none() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RH", false), now);
        l.on_open(&opener(Some(2), 2, "RH", true), now);
        l.on_open(&opener(Some(3), 3, "R", true), now);
        let notices = l.break_for_child_change(Some(&key(2)), now);
        let got: Vec<_> = notices
            .iter()
            .map(|n| (n.key, n.current, n.new, n.ack_required))
            .collect();
        assert_eq!(
            got,
            [(key(1), ls("RH"), 0, true), (key(3), ls("R"), 0, false),]
        );
        assert_eq!(
            l.state(&key(2), 0).unwrap().0,
            ls("RH"),
            "the changer's own"
        );
        assert_eq!(l.state(&key(3), 0).unwrap().0, 0, "R alone goes at once");
        assert!(
            l.break_for_child_change(None, now)
                .iter()
                .all(|n| n.key == key(2)),
            "key 1 is already breaking and key 3 holds nothing"
        );
        // Key 1 acknowledges to none: done, nothing further.
        assert_eq!(l.acknowledge(&key(1), 0, now).unwrap(), (0, None));
        // Key 2 was breaking to none too: acknowledging R (beyond "none") is refused.
        assert_eq!(
            l.acknowledge(&key(2), ls("R"), now),
            Err(NtStatus::REQUEST_NOT_ACCEPTED)
        );
    }

    /// smbtorture smb2.lease.statopen4: for leases READ_CONTROL is a stat open too, and an
    /// open with no access at all is not one.
    #[test]
    fn lease_stat_opens() {
        assert!(is_stat_open(mask::READ_CONTROL));
        assert!(is_stat_open(mask::FILE_READ_ATTRIBUTES | mask::SYNCHRONIZE));
        assert!(!is_stat_open(0));
        assert!(!is_stat_open(mask::FILE_READ_EA));
        assert!(!is_stat_open(mask::READ_CONTROL | mask::FILE_READ_DATA));
    }

    /// smbtorture smb2.lease.v2_breaking3: the steps after an acknowledgment keep the epoch.
    #[test]
    fn step_breaks_keep_the_epoch() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(
            &Opener {
                v2: Some(0),
                ..opener(Some(1), 1, "RHW", false)
            },
            now,
        );
        let first = l.on_open(&opener(None, 2, "", true), now).notices[0];
        let over = Opener {
            intent: OpenIntent {
                overwrite: true,
                ..PLAIN
            },
            ..opener(None, 3, "", true)
        };
        l.on_open(&over, now);
        let (_, next) = l.acknowledge(&key(1), ls("RH"), now).unwrap();
        assert_eq!(next.unwrap().epoch, first.epoch);
    }

    /// A break withheld from a parked persistent open's client leaves the epoch where the
    /// client last saw it; sent on the reconnect, it moves it (smbtorture
    /// smb2.persistent-open-reconnect-contended: the reconnect answers epoch 1, the break 2).
    #[test]
    fn a_withheld_break_moves_the_epoch_when_sent() {
        let now = Instant::now();
        let mut l = Leases::default();
        let holder = Opener {
            v2: Some(0),
            ..opener(Some(1), 1, "RHW", false)
        };
        assert_eq!(l.on_open(&holder, now).epoch, 1);
        let o = l.on_open(&opener(Some(2), 2, "R", true), now);
        assert!(o.wait);
        assert_eq!(o.notices[0].epoch, 2);
        l.withhold(&key(1), 0, o.notices[0].sent());
        l.withhold(&key(1), 0, o.notices[0].sent());
        assert_eq!(
            l.state(&key(1), 0),
            Some((ls("RHW"), 1)),
            "as the client left it"
        );
        let n = l.break_in_progress(&key(1), 0).unwrap();
        assert_eq!((n.current, n.new, n.epoch), (ls("RHW"), ls("RH"), 2));
        assert!(n.ack_required);
        let again = l.break_in_progress(&key(1), 0).unwrap();
        assert_eq!(again.epoch, 2, "sent once moves it once");
        assert_eq!(l.acknowledge(&key(1), ls("RH"), now).unwrap().0, ls("RH"));
        assert_eq!(l.break_in_progress(&key(1), 0), None);
    }

    /// A withheld break that times out before its client returns takes the lease, and the
    /// epoch moves past the one the client last saw, so its return reads the new state as
    /// new. A break that was sent moved the epoch when it went, and moves it no further.
    #[test]
    fn a_withheld_break_that_times_out_moves_the_epoch_once() {
        let now = Instant::now();
        let holder = |id: u8| Opener {
            v2: Some(0),
            ..opener(Some(id), u64::from(id), "RHW", false)
        };
        let mut l = Leases::default();
        l.on_open(&holder(1), now);
        let o = l.on_open(&opener(Some(2), 2, "R", true), now);
        assert!(o.wait);
        l.withhold(&key(1), 0, o.notices[0].sent());
        assert_eq!(l.state(&key(1), 0), Some((ls("RHW"), 1)));
        l.expire(now + BREAK_TIMEOUT);
        assert_eq!(l.state(&key(1), 0), Some((0, 2)));
        l.expire(now + BREAK_TIMEOUT * 2);
        assert_eq!(l.state(&key(1), 0), Some((0, 2)), "once");

        let mut sent = Leases::default();
        sent.on_open(&holder(1), now);
        sent.on_open(&opener(Some(2), 2, "R", true), now);
        sent.expire(now + BREAK_TIMEOUT);
        assert_eq!(sent.state(&key(1), 0), Some((0, 2)), "moved when sent");
    }

    /// A reconnect that comes while a break's notice is failing to reach the client's old
    /// session: the reconnect sends the break (epoch 2) to its own session, and the old
    /// session's failure, arriving after it, neither withholds the break (which lowered the
    /// epoch below what the client was told) nor completes it; the client's acknowledgment
    /// does. A failure on the new session still counts.
    #[test]
    fn a_failure_to_reach_the_session_a_reconnect_left_is_stale() {
        let now = Instant::now();
        let mut l = Leases::default();
        let holder = Opener {
            v2: Some(0),
            ..opener(Some(1), 1, "RHW", false)
        };
        l.on_open(&holder, now);
        let o = l.on_open(&opener(Some(2), 2, "R", true), now);
        let first = o.notices[0];
        assert_eq!((first.session_id, first.epoch), (9, 2));
        l.rebind(1, 20);
        let heard = l.break_in_progress(&key(1), 0).unwrap();
        assert_eq!((heard.session_id, heard.epoch), (20, 2));

        l.withhold(&key(1), 0, first.sent());
        l.undeliverable(&key(1), 0, Some(first.sent()));
        assert_eq!(l.state(&key(1), 0), Some((ls("RHW"), 2)), "still breaking");
        assert_eq!(l.break_in_progress(&key(1), 0), Some(heard));
        assert_eq!(l.acknowledge(&key(1), ls("RH"), now).unwrap().0, ls("RH"));
        assert_eq!(l.state(&key(1), 0), Some((ls("RH"), 2)));

        // The next break goes to session 20; failing there, it completes.
        let o = l.on_open(&conflicting(3), now);
        assert_eq!((o.notices[0].session_id, o.notices[0].epoch), (20, 3));
        l.undeliverable(&key(1), 0, Some(o.notices[0].sent()));
        assert_eq!(l.state(&key(1), 0), Some((ls("R"), 3)));
    }

    /// A notice's failure is reported after its decision was made, outside the file's lock.
    /// Meanwhile the break can end (acknowledged, or its lease's last open released and the
    /// key granted again) and a later break of the same lease start. The failure names its
    /// own break: it completes or withholds that one, never the later one, whose own notice
    /// is on its way and whose waiters must wait for it.
    #[test]
    fn a_failed_notice_of_an_ended_break_leaves_a_later_break_alone() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(&opener(Some(1), 1, "RHW", false), now);
        let first = l.on_open(&opener(Some(2), 2, "R", true), now).notices[0];
        assert_eq!(l.acknowledge(&key(1), ls("RH"), now).unwrap().0, ls("RH"));
        let o = l.on_open(&conflicting(3), now);
        assert!(o.wait);
        let second = o.notices[0];
        assert_ne!(first.break_id, second.break_id);

        l.undeliverable(&key(1), 0, Some(first.sent()));
        l.withhold(&key(1), 0, first.sent());
        assert_eq!(
            l.state(&key(1), 0).map(|s| s.0),
            Some(ls("RH")),
            "still breaking"
        );
        assert_eq!(
            l.break_in_progress(&key(1), 0),
            Some(second),
            "not withheld"
        );

        l.undeliverable(&key(1), 0, Some(second.sent()));
        assert_eq!(
            l.state(&key(1), 0).map(|s| s.0),
            Some(ls("R")),
            "its own completes"
        );
        assert_eq!(l.break_in_progress(&key(1), 0), None);
    }

    /// How a persistent open reclaimed alone takes its lease back (Leases::reacquire), row by
    /// row of smbtorture's reconnect-contended table: (held, locked, asked epoch) -> (state,
    /// epoch).
    #[test]
    fn a_reclaimed_lease_takes_the_epoch_rules_of_windows() {
        let rows = [
            ("RHW", false, 128, "RHW", 1),
            ("RH", false, 128, "RH", 1),
            ("R", false, 128, "R", 129),
            ("RW", false, 128, "RW", 128),
            ("RH", true, 128, "", 128),
            ("RW", true, 128, "RW", 128),
            ("RHW", true, 128, "RHW", 1),
        ];
        for (held, locked, asked, state, epoch) in rows {
            let mut l = Leases::default();
            let o = Opener {
                v2: Some(0),
                ..opener(Some(1), 1, held, false)
            };
            l.on_open(&o, Instant::now());
            l.reacquire(1, asked, locked);
            assert_eq!(
                l.state(&key(1), 0),
                Some((ls(state), epoch)),
                "{held} locked={locked}"
            );
        }
    }

    #[test]
    fn a_lease_restored_from_several_records_takes_the_newest_state() {
        let k = LeaseKey {
            client_guid: [1; 16],
            key: [2; 16],
        };
        let (r, rh, rwh) = (READ_CACHING, READ_CACHING | HANDLE_CACHING, RWH);
        // V2: the higher epoch wins, in either order, across the wrap.
        for (a, b) in [
            ((r, 3), (rwh, 4)),
            ((rwh, 4), (r, 3)),
            ((r, u16::MAX), (rwh, 0)),
        ] {
            let mut l = Leases::default();
            l.restore(k, 0, 1, a.0, Some(a.1));
            l.restore(k, 0, 2, b.0, Some(b.1));
            let want = if epoch_after(b.1, a.1) { b } else { a };
            let got = l.find(&k, 0).map(|x| (x.state, x.epoch));
            assert_eq!(got, Some((want.0, Some(want.1))));
            assert_eq!(l.find(&k, 0).map(|x| x.opens.len()), Some(2));
        }
        // V1: the state caching more (only an upgrade leaves records apart).
        for (a, b) in [(rh, r), (r, rh)] {
            let mut l = Leases::default();
            l.restore(k, 0, 1, a, None);
            l.restore(k, 0, 2, b, None);
            assert_eq!(l.find(&k, 0).map(|x| x.state), Some(rh));
        }
    }
}
