//! Which stream of a QUIC connection with smbq's data streams a request goes on
//! (docs/multistream.md 10): the control stream, or one of the granted data streams.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smbq_transport::StreamOpener;
use smbq_wire::Command;
use tokio::sync::mpsc;

/// Which stream a request goes on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Requests without an open (CREATE, TREE_CONNECT): the control stream, or a data stream
    /// round-robin when they move bulk data.
    #[default]
    Any,
    /// Every request naming this open (FileId.Persistent) on one data stream.
    Open(u64),
    /// The control stream.
    Control,
}

/// How long a stream that carried bulk data is avoided for new opens.
const BULK_MEMORY: Duration = Duration::from_secs(1);

/// Data streams and what opens them.
pub(crate) struct Lanes {
    pub(crate) opener: Option<Arc<dyn StreamOpener>>,
    /// One slot per granted stream, filled when a request first needs it.
    pub(crate) writers: Vec<Option<mpsc::UnboundedSender<Vec<Bytes>>>>,
    next: usize,
    /// Opening failed or timed out: everything stays on the control stream.
    pub(crate) off: bool,
    /// The stream each open's requests go on (FileId.Persistent -> index), chosen by its
    /// first request and dropped with its CLOSE; as many entries as the caller holds opens.
    opens: HashMap<u64, usize>,
    /// Until when each stream counts as carrying bulk data (a READ or WRITE of more than
    /// one credit, 64 KiB): new opens avoid it, so a small file does not share a stream with
    /// a large transfer.
    bulk_until: Vec<Option<Instant>>,
}

impl Lanes {
    pub(crate) fn new(opener: Option<Arc<dyn StreamOpener>>) -> Self {
        Self {
            opener,
            writers: Vec::new(),
            next: 0,
            off: false,
            opens: HashMap::new(),
            bulk_until: Vec::new(),
        }
    }

    /// The data stream (index) a request goes on, or None for the control stream, given
    /// `granted` data streams. Every request naming an open goes on the stream its first
    /// request got; an open's first request takes the next stream round-robin that has not
    /// carried bulk data lately, else the next one. A request without an open goes on the
    /// control stream unless it moves bulk data (a CREATE + WRITE + CLOSE upload): a stream
    /// delivers in order, so a CREATE answered on a data stream waits for whatever READ data
    /// the server queued there first (the last of 100 downloads over 8 streams at 2 % loss
    /// and 20 ms RTT was opened 300-800 ms late); the control stream carries no bulk data and
    /// may carry any request (docs/multistream.md 5.2). `bulk`: the request moves more than
    /// 64 KiB.
    pub(crate) fn choose(
        &mut self,
        lane: Lane,
        command: Command,
        bulk: bool,
        granted: usize,
        now: Instant,
    ) -> Option<usize> {
        if granted == 0 || lane == Lane::Control {
            return None;
        }
        if self.writers.len() != granted {
            self.writers.resize(granted, None);
            self.bulk_until.resize(granted, None);
        }
        let i = match lane {
            Lane::Open(persistent) => {
                let i = match self.opens.get(&persistent).copied() {
                    Some(i) => i,
                    // An open closed without other requests: its CREATE went on the control
                    // stream, and so does its CLOSE, rather than opening a data stream for it.
                    None if command == Command::CLOSE => return None,
                    None => {
                        let i = self.pick(granted, now);
                        self.opens.insert(persistent, i);
                        i
                    }
                };
                if command == Command::CLOSE {
                    self.opens.remove(&persistent);
                }
                i
            }
            _ if bulk => self.pick(granted, now),
            _ => return None,
        };
        if bulk && let Some(t) = self.bulk_until.get_mut(i) {
            *t = Some(now + BULK_MEMORY);
        }
        Some(i)
    }

    /// The next stream round-robin that has carried no bulk data lately, if any.
    fn pick_idle(&mut self, granted: usize, now: Instant) -> Option<usize> {
        for _ in 0..granted {
            self.next = self.next.wrapping_add(1);
            let i = self.next % granted;
            let busy = self
                .bulk_until
                .get(i)
                .copied()
                .flatten()
                .is_some_and(|t| t > now);
            if !busy {
                return Some(i);
            }
        }
        None
    }

    /// [`Lanes::pick_idle`], else the next stream round-robin.
    fn pick(&mut self, granted: usize, now: Instant) -> usize {
        self.pick_idle(granted, now).unwrap_or_else(|| {
            self.next = self.next.wrapping_add(1);
            self.next % granted.max(1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ: Command = Command::READ;

    #[test]
    fn an_open_keeps_its_stream_until_its_close() {
        let now = Instant::now();
        let mut l = Lanes::new(None);
        let a = l.choose(Lane::Open(7), READ, true, 4, now);
        let b = l.choose(Lane::Open(8), READ, true, 4, now);
        assert!(a.is_some() && b.is_some() && a != b, "{a:?} {b:?}");
        for _ in 0..5 {
            assert_eq!(l.choose(Lane::Open(7), READ, false, 4, now), a);
        }
        assert_eq!(l.choose(Lane::Open(7), Command::CLOSE, false, 4, now), a);
        assert!(!l.opens.contains_key(&7), "forgotten with its CLOSE");
        // An open with no request but its CLOSE: the control stream, and nothing remembered.
        assert_eq!(l.choose(Lane::Open(9), Command::CLOSE, false, 4, now), None);
        assert!(!l.opens.contains_key(&9));
        assert_eq!(l.choose(Lane::Control, READ, false, 4, now), None);
        assert_eq!(
            l.choose(Lane::Any, READ, false, 0, now),
            None,
            "no streams granted"
        );
    }

    #[test]
    fn new_opens_avoid_streams_moving_bulk_data() {
        let now = Instant::now();
        let mut l = Lanes::new(None);
        let bulk = l.choose(Lane::Open(1), READ, true, 3, now).unwrap();
        for open in 2..8 {
            let i = l.choose(Lane::Open(open), READ, false, 3, now).unwrap();
            assert_ne!(i, bulk, "a new open went on the stream moving bulk data");
        }
        // The memory fades: a second later the stream is a candidate again.
        let later = now + BULK_MEMORY;
        let picks: Vec<_> = (10..13)
            .map(|open| l.choose(Lane::Open(open), READ, false, 3, later))
            .collect();
        assert!(picks.contains(&Some(bulk)), "{picks:?}");
    }

    #[test]
    fn requests_without_an_open_take_the_control_stream_unless_bulk() {
        let now = Instant::now();
        let mut l = Lanes::new(None);
        assert_eq!(l.choose(Lane::Any, Command::CREATE, false, 3, now), None);
        assert_eq!(
            l.choose(Lane::Any, Command::TREE_CONNECT, false, 3, now),
            None
        );
        // An upload compound (CREATE + WRITE + CLOSE) never goes on the control stream.
        assert!(l.choose(Lane::Any, Command::CREATE, true, 3, now).is_some());
        for open in 0..3 {
            assert!(l.choose(Lane::Open(open), READ, true, 3, now).is_some());
        }
        // Every data stream busy: bulk shares one of them, still not the control stream.
        assert!(l.choose(Lane::Any, Command::CREATE, true, 3, now).is_some());
        // An open's requests stay on its own stream, busy or not.
        let own = l.choose(Lane::Open(0), READ, false, 3, now);
        assert_eq!(own, l.choose(Lane::Open(0), READ, true, 3, now));
        assert!(own.is_some());
    }
}
