//! Leases (MS-SMB2 3.3.1.4 Lease, 3.3.5.9.8 and 3.3.5.9.11 grant, 3.3.4.7 break notification,
//! 3.3.5.22.2 acknowledgment; MS-FSA 2.1.5.17 granular oplocks) as a synchronous state machine
//! of one file's leases, with time passed in, next to [`super::oplock::Holders`].
//!
//! The rules are the ones Windows shows through smbtorture smb2.lease (request, upgrade,
//! upgrade2, break, nobreakself): a lease is R, RH, RW or RWH (H or W without R is not
//! granted); one lease per client and lease key, shared by that client's opens of the stream;
//! another key's open takes W from every other lease (breaking RW to R, RWH to RH, and waiting
//! for the acknowledgment) and is itself granted what it asked for without W; the same key
//! asking again only upgrades, to a superset of what it holds.
//!
//! Not wired into CREATE yet (issue 13): [`super::FileStates`] will keep one [`Leases`] per
//! file and `super::delivery` send the notices to the lease owner's session.

use std::time::Instant;

use smbq_wire::NtStatus;
use smbq_wire::create_context::lease_state::{HANDLE_CACHING, READ_CACHING, WRITE_CACHING};

use super::oplock::BREAK_TIMEOUT;

/// A lease's identity: the client (MS-SMB2 3.3.1.4 Lease.LeaseTable is per ClientGuid) and the
/// key it chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeaseKey {
    pub client_guid: [u8; 16],
    pub key: [u8; 16],
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

/// A lease break notification to deliver (MS-SMB2 2.2.23.2) to the lease owner's session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseBreakNotice {
    pub key: LeaseKey,
    pub session_id: u64,
    pub current: u32,
    pub new: u32,
    /// The lease's epoch after the break (V2 leases carry it, MS-SMB2 3.3.4.7).
    pub epoch: u16,
    /// SMB2_NOTIFY_BREAK_LEASE_FLAG_ACK_REQUIRED: breaking from a state that caches writes or
    /// handles, which the client must flush or close first.
    pub ack_required: bool,
}

/// What a new open with a lease was granted, and what it set off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaseOpen {
    /// The state granted to the open's lease.
    pub granted: u32,
    /// The lease's epoch (V2), after the grant.
    pub epoch: u16,
    pub notices: Vec<LeaseBreakNotice>,
    /// A break needing an acknowledgment is under way: the open waits, then asks again.
    pub wait: bool,
}

#[derive(Clone, Debug)]
struct Lease {
    key: LeaseKey,
    /// `FileKey::stream`: leases are per stream (smbtorture smb2.lease.request).
    stream: u64,
    session_id: u64,
    state: u32,
    /// Lease.Breaking: the state broken to and when the wait for the acknowledgment ends.
    breaking: Option<(u32, Instant)>,
    /// Lease.Epoch (MS-SMB2 3.3.1.4), counted on every change of state.
    epoch: u16,
    /// Lease.LeaseOpens, by open id.
    opens: Vec<u64>,
}

/// The leases held on one file (all its streams).
#[derive(Debug, Default)]
pub struct Leases {
    leases: Vec<Lease>,
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
            .map(|l| (l.state, l.epoch))
    }

    /// A new open of `stream` asking for `requested` under `key` (MS-SMB2 3.3.5.9.8,
    /// 3.3.5.9.11); `open` is (open id, owning session id). Other keys' leases lose W (with an
    /// acknowledgment to wait for); the open's lease is made or upgraded. With `wait` set the
    /// open must not be admitted yet: the caller waits for the acknowledgments and asks again
    /// (nothing was granted).
    pub fn on_open(
        &mut self,
        key: LeaseKey,
        stream: u64,
        open: (u64, u64),
        requested: u32,
        now: Instant,
    ) -> LeaseOpen {
        let (open_id, session_id) = open;
        self.expire(now);
        let mut out = LeaseOpen::default();
        for l in self
            .leases
            .iter_mut()
            .filter(|l| l.stream == stream && l.key != key)
        {
            if let Some((to, _)) = l.breaking {
                out.wait |= to & WRITE_CACHING != 0;
                continue;
            }
            if l.state & WRITE_CACHING == 0 {
                continue;
            }
            let to = l.state & !WRITE_CACHING;
            l.epoch = l.epoch.wrapping_add(1);
            out.notices.push(LeaseBreakNotice {
                key: l.key,
                session_id: l.session_id,
                current: l.state,
                new: to,
                epoch: l.epoch,
                ack_required: true,
            });
            l.breaking = Some((to, now + BREAK_TIMEOUT));
            out.wait = true;
        }
        if out.wait {
            return out;
        }
        let shared = self
            .leases
            .iter()
            .any(|l| l.stream == stream && l.key != key);
        let mut want = grantable(requested);
        if shared {
            // MS-FSA 2.1.5.17.2: write caching only for the only key on the stream.
            want &= !WRITE_CACHING;
        }
        match self.find(&key, stream) {
            Some(l) => {
                // smbtorture smb2.lease.upgrade2: only a superset of what is held upgrades.
                if want & l.state == l.state && want != l.state {
                    l.state = want;
                    l.epoch = l.epoch.wrapping_add(1);
                }
                if !l.opens.contains(&open_id) {
                    l.opens.push(open_id);
                }
                out.granted = l.state;
                out.epoch = l.epoch;
            }
            None => {
                self.leases.push(Lease {
                    key,
                    stream,
                    session_id,
                    state: want,
                    breaking: None,
                    epoch: u16::from(want != 0),
                    opens: vec![open_id],
                });
                out.granted = want;
                out.epoch = u16::from(want != 0);
            }
        }
        out
    }

    /// A LEASE_BREAK acknowledgment (MS-SMB2 3.3.5.22.2): the state now held, or the error to
    /// answer with: no lease, STATUS_OBJECT_NAME_NOT_FOUND; no break under way,
    /// STATUS_UNSUCCESSFUL; a state beyond the one broken to, STATUS_REQUEST_NOT_ACCEPTED
    /// (the break then completes to the state broken to).
    pub fn acknowledge(&mut self, key: &LeaseKey, acked: u32) -> Result<u32, NtStatus> {
        let l = self
            .leases
            .iter_mut()
            .find(|l| l.key == *key)
            .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
        let (to, _) = l.breaking.ok_or(NtStatus::UNSUCCESSFUL)?;
        l.breaking = None;
        if acked & !to != 0 {
            l.state = to;
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        l.state = acked;
        Ok(acked)
    }

    /// Breaks whose wait is over complete to the state broken to (MS-SMB2 3.3.2.5 Lease Break
    /// Acknowledgment Timer).
    pub fn expire(&mut self, now: Instant) {
        for l in &mut self.leases {
            if let Some((to, t)) = l.breaking
                && t <= now
            {
                l.breaking = None;
                l.state = to;
            }
        }
    }

    /// The earliest deadline of a break on `stream` still awaiting its acknowledgment.
    pub fn pending_until(&self, stream: u64) -> Option<Instant> {
        self.leases
            .iter()
            .filter(|l| l.stream == stream)
            .filter_map(|l| l.breaking.map(|(_, t)| t))
            .min()
    }

    /// The open is closed; a lease whose last open closed goes with it (MS-SMB2 3.3.5.10).
    pub fn release(&mut self, open_id: u64) {
        for l in &mut self.leases {
            l.opens.retain(|o| *o != open_id);
        }
        self.leases.retain(|l| !l.opens.is_empty());
    }
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
            let o = l.on_open(key(1), 0, (1, 9), ls(asked), Instant::now());
            assert_eq!(o.granted, ls(got), "asked {asked}");
            assert!(o.notices.is_empty() && !o.wait);
        }
    }

    /// smbtorture smb2.lease.upgrade2's table: (held, asked again with the same key, result).
    #[test]
    fn upgrade_table() {
        let t = ["", "R", "RH", "RW", "RHW"];
        let expect = |held: &str, asked: &str| -> &'static str {
            // Written out as smbtorture lists it.
            match (held, asked) {
                ("", a) => ["", "R", "RH", "RW", "RHW"][t.iter().position(|x| *x == a).unwrap()],
                ("R", "") | ("R", "R") => "R",
                ("R", "RH") => "RH",
                ("R", "RW") => "RW",
                ("R", "RHW") => "RHW",
                ("RH", "RHW") => "RHW",
                ("RH", _) => "RH",
                ("RW", "RHW") => "RHW",
                ("RW", _) => "RW",
                ("RHW", _) => "RHW",
                _ => unreachable!(),
            }
        };
        for held in t {
            for asked in t {
                let mut l = Leases::default();
                let now = Instant::now();
                let first = l.on_open(key(1), 0, (1, 9), ls(held), now);
                assert_eq!(first.granted, ls(held));
                let second = l.on_open(key(1), 0, (2, 9), ls(asked), now);
                assert_eq!(
                    second.granted,
                    ls(expect(held, asked)),
                    "{held} then {asked}"
                );
                assert!(
                    second.notices.is_empty(),
                    "a key never breaks itself (nobreakself)"
                );
            }
        }
    }

    /// smbtorture smb2.lease.break's table: (held by key 1, asked by key 2, key 1 broken to,
    /// key 2 granted), with key 1 acknowledging as smbtorture's handler does.
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
            l.on_open(key(1), 0, (1, 9), ls(held), now);
            let mut o = l.on_open(key(2), 0, (2, 8), ls(asked), now);
            if held != broken_to {
                assert!(o.wait, "{case}: waits for the acknowledgment");
                let [n] = &o.notices[..] else {
                    panic!("{case}: one break, got {:?}", o.notices)
                };
                assert_eq!((n.current, n.new), (ls(held), ls(broken_to)), "{case}");
                assert_eq!(n.key, key(1));
                assert_eq!(n.session_id, 9, "to the holder's session");
                assert!(n.ack_required);
                assert_eq!(l.acknowledge(&key(1), n.new), Ok(n.new));
                o = l.on_open(key(2), 0, (2, 8), ls(asked), now);
            }
            assert!(o.notices.is_empty() && !o.wait, "{case}");
            assert_eq!(o.granted, ls(granted), "{case}: granted");
            assert_eq!(l.state(&key(1), 0).unwrap().0, ls(broken_to), "{case}");
        }
    }

    #[test]
    fn acknowledgment_rules_and_timeout() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(key(1), 0, (1, 9), ls("RHW"), now);
        assert_eq!(
            l.acknowledge(&key(1), ls("RH")),
            Err(NtStatus::UNSUCCESSFUL),
            "no break under way"
        );
        assert_eq!(
            l.acknowledge(&key(7), 0),
            Err(NtStatus::OBJECT_NAME_NOT_FOUND)
        );
        let o = l.on_open(key(2), 0, (2, 8), ls("R"), now);
        assert!(o.wait);
        assert_eq!(o.notices[0].epoch, 2, "the break moves the epoch");
        assert_eq!(l.pending_until(0), Some(now + BREAK_TIMEOUT));
        assert_eq!(
            l.acknowledge(&key(1), ls("RHW")),
            Err(NtStatus::REQUEST_NOT_ACCEPTED),
            "more than the state broken to"
        );
        assert_eq!(l.state(&key(1), 0).unwrap().0, ls("RH"));

        // A holder that never answers: the break completes at its deadline.
        let mut l = Leases::default();
        l.on_open(key(1), 0, (1, 9), ls("RW"), now);
        assert!(l.on_open(key(2), 0, (2, 8), ls("R"), now).wait);
        let later = now + BREAK_TIMEOUT;
        let o = l.on_open(key(2), 0, (2, 8), ls("R"), later);
        assert!(!o.wait);
        assert_eq!(o.granted, ls("R"));
        assert_eq!(l.state(&key(1), 0).unwrap().0, ls("R"));
    }

    #[test]
    fn streams_are_leased_apart_and_leases_end_with_their_last_open() {
        let now = Instant::now();
        let mut l = Leases::default();
        l.on_open(key(1), 0, (1, 9), ls("RHW"), now);
        let s = l.on_open(key(2), 5, (2, 9), ls("RHW"), now);
        assert_eq!(s.granted, ls("RHW"), "another stream is another object");
        assert!(s.notices.is_empty());
        l.on_open(key(1), 0, (3, 9), ls("RHW"), now);
        l.release(1);
        assert!(l.state(&key(1), 0).is_some(), "open 3 still holds it");
        l.release(3);
        assert!(l.state(&key(1), 0).is_none());
        l.release(2);
        assert!(l.is_empty());
    }
}
