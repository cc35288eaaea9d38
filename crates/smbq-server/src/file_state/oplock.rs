//! Oplocks (MS-SMB2 3.3.1.10 Open.OplockLevel/OplockState, 3.3.4.6 break notification,
//! 3.3.5.9.8 grant, 3.3.5.22.1 acknowledgment; MS-FSA 2.1.5.17/2.1.5.18 break rules).
//!
//! [`Holders`] is the synchronous state machine of one file's oplocks (time is passed in, so
//! it is tested without a clock); [`super::FileStates`] keeps one per file, and
//! `crate::effects` sends the notifications to the owning session and lets a CREATE wait for
//! the acknowledgments.

use std::time::{Duration, Instant};

use smbq_wire::oplock_break::oplock_level;
use smbq_wire::{FileId, NtStatus};

use super::FileKey;
use crate::access::mask;
use crate::open_state::WaitToken;

/// How long a CREATE waits for a break acknowledgment before treating the holder as broken to
/// none (MS-SMB2 3.3.2.1 Oplock Break Acknowledgment Timer; Windows and smbtorture's
/// `torture:oplocktimeout` use 35 s).
pub const BREAK_TIMEOUT: Duration = Duration::from_secs(35);

/// A CREATE waits for at most this many rounds of breaks before giving up.
pub(crate) const MAX_BREAK_ROUNDS: usize = 8;

/// What the oplock check before a CREATE admits an open decided
/// (`OpenState::contend`, MS-FSA 2.1.5.1.2).
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Nothing to wait for (no holders, or only breaks that need no acknowledgment): the
    /// CREATE goes on to the share-mode check.
    Granted,
    /// The open fails with this status before anything is broken (DELETE_PENDING,
    /// smbtorture smb2.oplock.doc).
    Conflict(NtStatus),
    /// Breaks needing an acknowledgment are under way on the file: the CREATE waits for them
    /// (a `WaitToken`, crate::effects) and then looks at the file again.
    MustWait(WaitToken),
}

/// Rights that make an open more than a "stat open" (which neither breaks oplocks nor, when the
/// file has other opens, gets one): everything but attributes and SYNCHRONIZE (smbtorture
/// smb2.oplock.statopen1 lists the same split).
const STAT_RIGHTS: u32 =
    mask::FILE_READ_ATTRIBUTES | mask::FILE_WRITE_ATTRIBUTES | mask::SYNCHRONIZE;

/// An oplock level (MS-SMB2 2.2.13 RequestedOplockLevel without LEASE), ordered by strength.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    II,
    Exclusive,
    Batch,
}

impl Level {
    /// The wire value; `None` for LEASE and unknown values.
    pub fn from_wire(v: u8) -> Option<Level> {
        match v {
            oplock_level::NONE => Some(Level::None),
            oplock_level::II => Some(Level::II),
            oplock_level::EXCLUSIVE => Some(Level::Exclusive),
            oplock_level::BATCH => Some(Level::Batch),
            _ => None,
        }
    }

    pub fn to_wire(self) -> u8 {
        match self {
            Level::None => oplock_level::NONE,
            Level::II => oplock_level::II,
            Level::Exclusive => oplock_level::EXCLUSIVE,
            Level::Batch => oplock_level::BATCH,
        }
    }
}

/// Whether an open with `granted` access is a stat open.
pub fn is_stat_open(granted: u32) -> bool {
    granted & !STAT_RIGHTS == 0
}

/// What a new open on an existing file does, for the break decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenIntent {
    pub stat_only: bool,
    /// SUPERSEDE, OVERWRITE or OVERWRITE_IF of the existing file.
    pub overwrite: bool,
    /// The share-mode check (MS-FSA 2.1.5.1.2.1) fails against an existing open.
    pub share_conflict: bool,
    /// The open will delete the file (FILE_DELETE_ON_CLOSE): other keys' leases lose handle
    /// caching (smbtorture smb2.lease.unlink). Oplocks do not look at it.
    pub deletes: bool,
}

/// The break a new open forces on an open holding `held` (MS-FSA 2.1.5.1.2 and 2.1.4.12,
/// as observed by smbtorture smb2.oplock):
/// - a sharing conflict breaks only BATCH (its holder may close the handle and so end the
///   conflict); EXCLUSIVE and II stay and the open fails;
/// - a stat open breaks nothing unless it overwrites;
/// - EXCLUSIVE/BATCH break to II, or to none when the file is overwritten;
/// - II breaks to none only when the file is overwritten.
pub fn break_on_open(held: Level, intent: OpenIntent) -> Option<Level> {
    let target = if intent.overwrite {
        Level::None
    } else {
        Level::II
    };
    let touches = !intent.stat_only || intent.overwrite;
    match held {
        Level::None => None,
        Level::II => (intent.overwrite && !intent.share_conflict).then_some(Level::None),
        Level::Exclusive => (touches && !intent.share_conflict).then_some(target),
        Level::Batch => (touches || intent.share_conflict).then_some(target),
    }
}

/// The level a new, admitted open gets (MS-SMB2 3.3.5.9.8 via MS-FSA 2.1.5.18): what it asked
/// for when it is the file's only open; otherwise II for a data open, none for a stat open or
/// while another open still holds EXCLUSIVE/BATCH.
pub fn grant(requested: Level, stat_only: bool, others: usize, other_exclusive: bool) -> Level {
    if requested == Level::None {
        Level::None
    } else if others == 0 {
        requested
    } else if stat_only || other_exclusive {
        Level::None
    } else {
        Level::II
    }
}

/// An oplock break notification to deliver (MS-SMB2 2.2.23.1) to the session owning the open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakNotice {
    pub key: FileKey,
    pub open_id: u64,
    pub session_id: u64,
    pub file_id: FileId,
    pub level: Level,
    /// The holder must acknowledge (it held EXCLUSIVE or BATCH; MS-SMB2 2.2.24.1).
    pub ack_required: bool,
}

/// Where a granted oplock's notifications go: its session (on whichever of the session's
/// channels is alive when the break happens), not the connection that made the open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub session_id: u64,
    pub file_id: FileId,
}

#[derive(Clone, Copy, Debug)]
struct Holder {
    /// `FileKey::stream` of the stream the open is of: oplocks are per stream.
    stream: u64,
    open_id: u64,
    owner: Owner,
    level: Level,
    /// Open.OplockState Breaking: the level broken to and when the wait ends.
    breaking: Option<(Level, Instant)>,
}

impl Holder {
    fn notice(&self, base: FileKey, level: Level) -> BreakNotice {
        BreakNotice {
            key: FileKey {
                stream: self.stream,
                ..base
            },
            open_id: self.open_id,
            session_id: self.owner.session_id,
            file_id: self.owner.file_id,
            level,
            ack_required: self.level > Level::II,
        }
    }
}

/// What a new open must do before it may be admitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenCheck {
    pub notices: Vec<BreakNotice>,
    /// A break needing an acknowledgment is under way: wait, then check again.
    pub wait: bool,
}

/// The oplocks held on one file (all its streams), by open. Opens without an oplock are not
/// kept.
#[derive(Debug, Default)]
pub(crate) struct Holders {
    holders: Vec<Holder>,
}

impl Holders {
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty()
    }

    /// Records the oplock granted to a new open of `key`.
    pub fn insert(&mut self, key: FileKey, open_id: u64, level: Level, owner: Owner) {
        if level == Level::None {
            return;
        }
        self.holders.push(Holder {
            stream: key.stream,
            open_id,
            owner,
            level,
            breaking: None,
        });
    }

    pub fn level(&self, open_id: u64) -> Level {
        self.holder(open_id).map_or(Level::None, |h| h.level)
    }

    /// The opens whose oplock break awaits an acknowledgment.
    pub fn breaking(&self) -> impl Iterator<Item = u64> + '_ {
        self.holders
            .iter()
            .filter(|h| h.breaking.is_some())
            .map(|h| h.open_id)
    }

    /// A durable open reconnected on another session (MS-SMB2 3.3.5.9.7): its breaks go there.
    pub fn rebind(&mut self, open_id: u64, session_id: u64) {
        if let Some(h) = self.holder_mut(open_id) {
            h.owner.session_id = session_id;
        }
    }

    /// The notice of `open_id`'s break still awaiting its acknowledgment, to send it again (a
    /// persistent open reclaimed by a client that never heard it).
    pub fn break_in_progress(&self, base: FileKey, open_id: u64) -> Option<BreakNotice> {
        let h = self.holder(open_id)?;
        let (to, _) = h.breaking?;
        Some(h.notice(base, to))
    }

    #[cfg(test)]
    pub fn is_breaking(&self, open_id: u64) -> bool {
        self.holder(open_id).is_some_and(|h| h.breaking.is_some())
    }

    fn holder(&self, open_id: u64) -> Option<&Holder> {
        self.holders.iter().find(|h| h.open_id == open_id)
    }

    fn holder_mut(&mut self, open_id: u64) -> Option<&mut Holder> {
        self.holders.iter_mut().find(|h| h.open_id == open_id)
    }

    /// A new open on `key` (MS-FSA 2.1.5.1.2): starts the breaks it forces and says whether it
    /// must wait for acknowledgments, including breaks other opens started that it would
    /// have started too. II-to-none breaks need no acknowledgment (MS-SMB2 2.2.24.1).
    pub fn on_open(&mut self, key: FileKey, intent: OpenIntent, now: Instant) -> OpenCheck {
        self.expire(now);
        let mut out = OpenCheck::default();
        for h in self.holders.iter_mut().filter(|h| h.stream == key.stream) {
            if h.breaking.is_some() {
                out.wait |= break_on_open(h.level, intent).is_some();
                continue;
            }
            let Some(to) = break_on_open(h.level, intent) else {
                continue;
            };
            out.notices.push(h.notice(key, to));
            if h.level == Level::II {
                h.level = Level::None;
            } else {
                h.breaking = Some((to, now + BREAK_TIMEOUT));
                out.wait = true;
            }
        }
        self.prune();
        out
    }

    /// A write, lock or size change on `key`: every level II oplock, the writer's included,
    /// breaks to none without acknowledgment (MS-FSA 2.1.4.12.2; smbtorture batch1/brl1).
    pub fn break_level2(&mut self, key: FileKey) -> Vec<BreakNotice> {
        let mut out = Vec::new();
        for h in self
            .holders
            .iter_mut()
            .filter(|h| h.stream == key.stream && h.level == Level::II && h.breaking.is_none())
        {
            out.push(h.notice(key, Level::None));
            h.level = Level::None;
        }
        self.prune();
        out
    }

    /// The earliest deadline among breaks of `key` still awaiting acknowledgment.
    pub fn pending_until(&self, key: FileKey) -> Option<Instant> {
        self.holders
            .iter()
            .filter(|h| h.stream == key.stream)
            .filter_map(|h| h.breaking.map(|(_, t)| t))
            .min()
    }

    /// Whether an open of `key` other than `except` holds EXCLUSIVE or BATCH without a break
    /// under way.
    pub fn other_exclusive(&self, key: FileKey, except: u64) -> bool {
        self.holders.iter().any(|h| {
            h.stream == key.stream
                && h.open_id != except
                && h.level >= Level::Exclusive
                && h.breaking.is_none()
        })
    }

    /// Breaks whose wait is over complete to none (MS-SMB2 3.3.2.1: the client did not answer).
    pub fn expire(&mut self, now: Instant) {
        for h in self.holders.iter_mut() {
            if h.breaking.is_some_and(|(_, t)| t <= now) {
                h.breaking = None;
                h.level = Level::None;
            }
        }
        self.prune();
    }

    /// The notification could not be delivered (the session has no live channel): nobody will
    /// acknowledge, so the break completes at once.
    pub fn undeliverable(&mut self, open_id: u64) {
        if let Some(h) = self.holder_mut(open_id)
            && let Some((to, _)) = h.breaking.take()
        {
            h.level = to;
        }
        self.prune();
    }

    /// An OPLOCK_BREAK acknowledgment (MS-SMB2 3.3.5.22.1): the level now held, or the error
    /// to answer with. A level above the one broken to, or not NONE/II, ends the oplock.
    /// Acknowledging when no break awaits one is STATUS_INVALID_OPLOCK_PROTOCOL, as Windows
    /// and Samba answer (smbtorture smb2.oplock.levelii500) and as MS-FSA 2.1.5.17 says for an
    /// oplock not in a breaking state.
    pub fn acknowledge(&mut self, open_id: u64, acked: u8) -> Result<Level, NtStatus> {
        let h = self
            .holder_mut(open_id)
            .ok_or(NtStatus::INVALID_OPLOCK_PROTOCOL)?;
        let (to, _) = h.breaking.ok_or(NtStatus::INVALID_OPLOCK_PROTOCOL)?;
        h.breaking = None;
        let r = match Level::from_wire(acked) {
            Some(l) if l <= to => Ok(l),
            _ if acked == oplock_level::LEASE => Err(NtStatus::INVALID_PARAMETER),
            _ => Err(NtStatus::INVALID_OPLOCK_PROTOCOL),
        };
        h.level = *r.as_ref().unwrap_or(&Level::None);
        self.prune();
        r
    }

    /// Whether an oplock is held (or being broken) on `stream`.
    pub fn held_on(&self, stream: u64) -> bool {
        self.holders.iter().any(|h| h.stream == stream)
    }

    /// The open is closed: its oplock goes with it.
    pub fn release(&mut self, open_id: u64) {
        self.holders.retain(|h| h.open_id != open_id);
    }

    /// Drops holders left with no oplock and no break.
    fn prune(&mut self) {
        self.holders
            .retain(|h| h.level != Level::None || h.breaking.is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: FileKey = FileKey {
        dev: 1,
        ino: 2,
        stream: 0,
    };
    use Level::{Batch, Exclusive, II, None as No};

    fn owner(id: u64) -> Owner {
        Owner {
            session_id: 20,
            file_id: FileId {
                persistent: id,
                volatile: id,
            },
        }
    }

    fn intent(stat_only: bool, overwrite: bool, share_conflict: bool) -> OpenIntent {
        OpenIntent {
            stat_only,
            overwrite,
            share_conflict,
            deletes: false,
        }
    }

    /// Rows: (held, stat open, overwrite, share conflict, expected break), each traced to the
    /// smbtorture smb2.oplock case that shows it.
    #[test]
    fn break_table() {
        let rows = [
            (Batch, false, false, false, Some(II)),     // batch5/6
            (Batch, false, false, true, Some(II)),      // batch1/5: break, then SHARING_VIOLATION
            (Batch, true, false, false, None),          // batch8: attribute-only open
            (Batch, true, true, false, Some(No)),       // batch13/16: attribute-only overwrite
            (Exclusive, false, false, true, None),      // exclusive1: conflict, no break
            (Exclusive, false, false, false, Some(II)), // exclusive2
            (Exclusive, true, false, false, None),      // exclusive4
            (Exclusive, true, true, false, Some(No)),   // exclusive5
            (Exclusive, false, true, false, Some(No)),  // exclusive9 SUPERSEDE/OVERWRITE_IF
            (II, false, false, false, None),            // batch9: third open, no break
            (II, false, true, false, Some(No)),
            (II, false, true, true, None),
            (No, false, true, false, None),
        ];
        for (i, (held, s, o, c, want)) in rows.into_iter().enumerate() {
            assert_eq!(break_on_open(held, intent(s, o, c)), want, "row {i}");
        }
    }

    /// Rows: (requested, stat open, other opens, another holds EXCLUSIVE/BATCH, granted).
    #[test]
    fn grant_table() {
        let rows = [
            (Batch, false, 0, false, Batch), // session.reconnect1, batch1
            (Exclusive, false, 0, false, Exclusive),
            (II, false, 0, false, II),      // levelii500
            (Batch, true, 0, false, Batch), // batch9: attribute-only creator
            (Batch, false, 1, false, II),   // batch10
            (Batch, true, 1, false, No),    // batch8/9a
            (Batch, false, 1, true, No),
            (II, false, 2, false, II),
            (No, false, 0, false, No),
        ];
        for (i, (req, s, others, ex, want)) in rows.into_iter().enumerate() {
            assert_eq!(grant(req, s, others, ex), want, "row {i}");
        }
    }

    #[test]
    fn stat_open_rights() {
        assert!(is_stat_open(mask::FILE_READ_ATTRIBUTES | mask::SYNCHRONIZE));
        assert!(is_stat_open(mask::FILE_WRITE_ATTRIBUTES));
        for a in [
            mask::FILE_READ_DATA,
            mask::FILE_READ_EA,
            mask::DELETE,
            mask::READ_CONTROL,
            mask::WRITE_DAC,
        ] {
            assert!(!is_stat_open(a | mask::FILE_READ_ATTRIBUTES), "{a:#x}");
        }
    }

    #[test]
    fn wire_levels_round_trip() {
        for l in [No, II, Exclusive, Batch] {
            assert_eq!(Level::from_wire(l.to_wire()), Some(l));
        }
        assert_eq!(Level::from_wire(oplock_level::LEASE), None);
        assert_eq!(Level::from_wire(2), None);
    }

    #[test]
    fn batch_break_acked_to_level2() {
        let mut t = Holders::default();
        let now = Instant::now();
        t.insert(K, 1, Batch, owner(1));
        let c = t.on_open(K, intent(false, false, false), now);
        assert!(c.wait);
        assert_eq!(c.notices.len(), 1);
        assert_eq!(c.notices[0].level, II);
        assert_eq!(c.notices[0].session_id, 20);
        assert_eq!(c.notices[0].key, K);
        assert_eq!(c.notices[0].file_id.volatile, 1);
        assert_eq!(t.pending_until(K), Some(now + BREAK_TIMEOUT));
        // A second open meanwhile waits for the same break without a new notification.
        let c2 = t.on_open(K, intent(false, false, false), now);
        assert!(c2.wait && c2.notices.is_empty());
        assert_eq!(t.acknowledge(1, oplock_level::II), Ok(II));
        assert_eq!(t.pending_until(K), None);
        assert_eq!(t.level(1), II);
        // A second acknowledgment has nothing to acknowledge.
        assert_eq!(
            t.acknowledge(1, oplock_level::II),
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        );
    }

    #[test]
    fn acknowledgment_levels() {
        let now = Instant::now();
        // (broken to by overwrite?, acked, result, level after)
        let rows = [
            (false, oplock_level::NONE, Ok(No), No),
            (true, oplock_level::NONE, Ok(No), No),
            (
                true,
                oplock_level::II,
                Err(NtStatus::INVALID_OPLOCK_PROTOCOL),
                No,
            ),
            (
                false,
                oplock_level::BATCH,
                Err(NtStatus::INVALID_OPLOCK_PROTOCOL),
                No,
            ),
            (
                false,
                oplock_level::LEASE,
                Err(NtStatus::INVALID_PARAMETER),
                No,
            ),
        ];
        for (i, (ow, acked, want, after)) in rows.into_iter().enumerate() {
            let mut t = Holders::default();
            t.insert(K, 1, Exclusive, owner(1));
            let c = t.on_open(K, intent(false, ow, false), now);
            assert_eq!(c.notices[0].level, if ow { No } else { II }, "row {i}");
            assert_eq!(t.acknowledge(1, acked), want, "row {i}");
            assert_eq!(t.level(1), after, "row {i}");
            assert!(!t.is_breaking(1), "row {i}");
        }
    }

    #[test]
    fn unknown_open_ack_is_protocol_error() {
        let mut t = Holders::default();
        assert_eq!(
            t.acknowledge(5, oplock_level::NONE),
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        );
    }

    #[test]
    fn level2_breaks_on_write_without_ack() {
        let mut t = Holders::default();
        t.insert(K, 1, II, owner(1));
        t.insert(K, 2, II, owner(2));
        let n = t.break_level2(K);
        assert_eq!(n.len(), 2);
        assert!(n.iter().all(|b| b.level == No));
        assert_eq!(t.level(1), No);
        // levelii500: acknowledging a II->none break is a protocol error.
        assert_eq!(
            t.acknowledge(1, oplock_level::NONE),
            Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
        );
        assert!(t.break_level2(K).is_empty());
        // BATCH is untouched by writes (batch21).
        t.insert(K, 3, Batch, owner(3));
        assert!(t.break_level2(K).is_empty());
        assert_eq!(t.level(3), Batch);
    }

    #[test]
    fn overwrite_breaks_level2_at_once() {
        let mut t = Holders::default();
        t.insert(K, 1, II, owner(1));
        let c = t.on_open(K, intent(true, true, false), Instant::now());
        assert!(!c.wait);
        assert_eq!(c.notices.len(), 1);
        assert_eq!(t.level(1), No);
    }

    #[test]
    fn timeout_completes_to_none() {
        let mut t = Holders::default();
        let now = Instant::now();
        t.insert(K, 1, Batch, owner(1));
        assert!(t.on_open(K, intent(false, false, false), now).wait);
        t.expire(now + BREAK_TIMEOUT - Duration::from_millis(1));
        assert!(t.is_breaking(1));
        t.expire(now + BREAK_TIMEOUT);
        assert!(!t.is_breaking(1));
        assert_eq!(t.level(1), No);
        assert_eq!(t.pending_until(K), None);
    }

    #[test]
    fn close_and_undeliverable_end_the_wait() {
        let mut t = Holders::default();
        let now = Instant::now();
        t.insert(K, 1, Batch, owner(1));
        t.insert(K, 2, Exclusive, owner(2));
        assert!(t.other_exclusive(K, 1));
        assert!(t.on_open(K, intent(false, false, false), now).wait);
        assert!(
            !t.other_exclusive(K, 99),
            "breaking holders no longer count"
        );
        t.release(1);
        assert!(t.pending_until(K).is_some());
        t.undeliverable(2);
        assert_eq!(t.level(2), II);
        assert_eq!(t.pending_until(K), None);
        assert!(!t.is_empty());
        t.release(2);
        assert!(t.is_empty());
    }
}
