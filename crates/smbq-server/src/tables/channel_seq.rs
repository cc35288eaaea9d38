//! Open.ChannelSequence (MS-SMB2 3.3.5.2.10): a client that moves an open to another channel
//! (after a failover, or replaying on a new connection) raises the ChannelSequence it sends
//! in the header's Status field; requests from before that (a stale channel's WRITE arriving
//! late) must not modify the file any more. The open counts the requests it is running under
//! the current sequence (Open.OutstandingRequestCount) and under earlier ones
//! (Open.OutstandingPreRequestCount); a replayed request goes on only when no earlier one is
//! still running. As Samba's smb2_server.c implements it (smbtorture smb2.replay.
//! channel-sequence); pure, so the rules are tested alone.

/// Per-open channel sequence state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelSeq {
    /// Open.ChannelSequence.
    seq: u16,
    /// Counts advances of `seq`: a request counted under an older generation is a "pre" one.
    generation: u64,
    outstanding: u32,
    pre: u32,
}

/// A modifying request from a channel sequence the open has moved past.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stale;

/// A request counted against an open; give it back with [`ChannelSeq::leave`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted(u64);

impl ChannelSeq {
    /// A request with ChannelSequence `csn` arrives for the open. `Ok(Some)`: counted, go on;
    /// `Ok(None)`: a stale sequence on a command that does not modify the file, go on
    /// uncounted; `Err`: a stale (or, for a replay, overtaken) modifying request, which fails
    /// with STATUS_FILE_NOT_AVAILABLE.
    pub fn enter(
        &mut self,
        csn: u16,
        replay: bool,
        modifies: bool,
    ) -> Result<Option<Counted>, Stale> {
        let ahead = csn.wrapping_sub(self.seq);
        let clear = !replay || self.pre == 0;
        if ahead == 0 && clear {
            self.outstanding += 1;
            return Ok(Some(Counted(self.generation)));
        }
        if ahead != 0 && ahead <= 0x7FFF && clear {
            self.pre += self.outstanding;
            self.outstanding = 1;
            self.seq = csn;
            self.generation += 1;
            return Ok(Some(Counted(self.generation)));
        }
        if modifies { Err(Stale) } else { Ok(None) }
    }

    /// A counted request finished.
    pub fn leave(&mut self, c: Counted) {
        if c.0 == self.generation {
            self.outstanding = self.outstanding.saturating_sub(1);
        } else {
            self.pre = self.pre.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// smbtorture smb2.replay.channel-sequence's table, one request at a time, for a
    /// modifying command (WRITE, SET_INFO, IOCTL); with and without the replay flag alike.
    #[test]
    fn the_smbtorture_table() {
        let rows: [(u16, bool); 16] = [
            (0, true),
            (0x8000, false),
            (0x8001, false),
            (0xC000, false),
            (0xFFFF, false),
            (0x7FFF, true),
            (0x7FFE, false),
            (0, false),
            (0x4000, false),
            (0x8000, true),
            (0xFFFF, true),
            (0, true),
            (1, true),
            (0, false),
            (1, true),
            (0xFFFF, false),
        ];
        for replay in [false, true] {
            let mut s = ChannelSeq::default();
            for (i, (csn, ok)) in rows.iter().enumerate() {
                let r = s.enter(*csn, replay, true);
                assert_eq!(r.is_ok(), *ok, "row {i}: csn {csn:#x}");
                if let Ok(Some(c)) = r {
                    s.leave(c);
                }
            }
            assert_eq!((s.outstanding, s.pre), (0, 0));
        }
    }

    #[test]
    fn stale_reads_go_on_uncounted_and_replays_wait_for_earlier_requests() {
        let mut s = ChannelSeq::default();
        let first = s.enter(0, false, true).unwrap().unwrap();
        // The client moves on to sequence 1 while the first request still runs.
        let second = s.enter(1, false, true).unwrap().unwrap();
        assert_eq!(
            s.enter(0, false, false),
            Ok(None),
            "a stale READ is not refused"
        );
        assert!(s.enter(0, false, true).is_err(), "a stale WRITE is");
        assert!(
            s.enter(1, true, true).is_err(),
            "a replay while a request of the old sequence runs"
        );
        s.leave(first);
        assert!(s.enter(1, true, true).unwrap().is_some());
        s.leave(second);
    }
}
