//! Open.LockSequenceArray (MS-SMB2 3.3.5.14): a client that resends a LOCK after a broken
//! connection (it never saw the answer) names it with the same LockSequence; the server must
//! not lock or unlock twice. LockSequenceIndex 1..64 names an entry, LockSequenceNumber (4
//! bits) the request; the entry is checked before anything else and recorded only when the
//! whole request succeeded. Verified for durable and resilient opens (MS-SMB2 3.3.5.14; as
//! Samba does, smbtorture smb2.lock.replay_smb3_specification_durable), never on 2.0.2. Pure.

use smbq_wire::Dialect;

/// One entry per LockSequenceIndex 1..=64; `None` is Valid FALSE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockSequences([Option<u8>; 64]);

impl Default for LockSequences {
    fn default() -> Self {
        Self([None; 64])
    }
}

/// The entry a LOCK names and the number it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    entry: usize,
    number: u8,
}

/// What a LOCK is, once its sequence was checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The same request was done already: answer success, do nothing.
    Replay,
    Proceed,
}

/// The slot LOCK's `lock_sequence` names, when this request is verified at all: not on
/// 2.0.2, only for an open that survives a broken connection (`kept`: durable or resilient),
/// and only for index 1..=64 (0 and larger indexes are never checked or recorded).
pub fn slot(lock_sequence: u32, dialect: Dialect, kept: bool) -> Option<Slot> {
    if dialect == Dialect::SMB2_0_2 || !kept {
        return None;
    }
    let index = usize::try_from(lock_sequence >> 4).ok()?;
    let entry = index.checked_sub(1).filter(|e| *e < 64)?;
    Some(Slot {
        entry,
        number: (lock_sequence & 0xF) as u8,
    })
}

impl LockSequences {
    /// Before the LOCK runs: a replay when the entry is valid with the same number; otherwise
    /// the entry is made invalid and the request runs.
    pub fn check(&mut self, s: Slot) -> Check {
        let Some(e) = self.0.get_mut(s.entry) else {
            return Check::Proceed;
        };
        if *e == Some(s.number) {
            return Check::Replay;
        }
        *e = None;
        Check::Proceed
    }

    /// The LOCK succeeded in full.
    pub fn record(&mut self, s: Slot) {
        if let Some(e) = self.0.get_mut(s.entry) {
            *e = Some(s.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Dialect = Dialect::SMB3_1_1;

    #[test]
    fn which_requests_are_verified() {
        assert_eq!(slot(0x011, D, false), None, "a plain open");
        assert_eq!(slot(0x011, Dialect::SMB2_0_2, true), None);
        assert_eq!(slot(0x001, D, true), None, "index 0");
        assert_eq!(slot(0x411, D, true), None, "index 65");
        assert_eq!(
            slot(0x403, D, true),
            Some(Slot {
                entry: 63,
                number: 3
            })
        );
        assert!(slot(0x011, Dialect::SMB2_1, true).is_some());
    }

    /// smbtorture smb2.lock.replay_smb3_specification_durable, the sequence-numbered part: a
    /// "lock" here is a range held or not, on one handle, FAIL_IMMEDIATELY.
    #[test]
    fn the_smbtorture_sequence() {
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum Op {
            Lock,
            Unlock,
        }
        #[derive(Clone, Copy, PartialEq, Debug)]
        enum Got {
            Ok,
            NotGranted,
            NotLocked,
        }
        use Got::*;
        use Op::*;
        let rows: &[(u32, Op, Got)] = &[
            (0x011, Lock, Ok),
            (0x011, Lock, Ok),
            (0x011, Unlock, Ok),
            (0x011, Lock, Ok),
            (0x011, Unlock, Ok),
            (0x011, Unlock, Ok),
            (0x012, Lock, NotGranted),
            (0x012, Lock, NotGranted),
            (0x021, Lock, NotGranted),
            (0x021, Lock, NotGranted),
            (0x411, Lock, NotGranted),
            (0x411, Lock, NotGranted),
            (0x411, Unlock, Ok),
            (0x411, Unlock, NotLocked),
            (0x411, Lock, Ok),
            (0x401, Lock, NotGranted),
            (0x401, Lock, NotGranted),
            (0x402, Unlock, Ok),
            (0x402, Unlock, Ok),
            (0x402, Lock, Ok),
            (0x403, Unlock, NotLocked),
        ];
        let mut seq = LockSequences::default();
        // The range is locked when the table starts (taken under 0x011 and held).
        let mut locked = false;
        for (i, &(ls, op, want)) in rows.iter().enumerate() {
            let s = slot(ls, D, true);
            if let Some(s) = s
                && seq.check(s) == Check::Replay
            {
                assert_eq!(want, Ok, "row {i}: a replay answers success");
                continue;
            }
            let got = match (op, locked) {
                (Lock, false) => {
                    locked = true;
                    Ok
                }
                (Lock, true) => NotGranted,
                (Unlock, true) => {
                    locked = false;
                    Ok
                }
                (Unlock, false) => NotLocked,
            };
            assert_eq!(got, want, "row {i}: {ls:#x} {op:?}");
            if got == Ok
                && let Some(s) = s
            {
                seq.record(s);
            }
        }
    }
}
