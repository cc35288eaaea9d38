//! Whether, and with which algorithm, compressing pays on this link (issue 36: faster on
//! slow links, never slower on fast ones). Compressing and sending overlap, so a message
//! compressed with algorithm A moves at min(A's speed, A's ratio x link rate) against the
//! link rate uncompressed. The sender measures the link (its writers time their writes) and
//! each algorithm's speed and ratio (each compression is timed), and before each message
//! picks the algorithm that moves the most, or none when none beats the link. An algorithm
//! not measured yet is tried once; while none pays, one message in [`PROBE_EVERY`] is
//! compressed anyway (the algorithms in turn), so a change of data (zeros compress at
//! gigabytes per second) or of link is noticed. Sans IO: the caller measures the times.

use std::time::Duration;

use crate::{Algorithm, Compressed, Compression};

/// While no algorithm pays, one message in this many is still compressed at first; each
/// probe that finds nothing worth it doubles the interval, up to [`PROBE_MAX`] (random data
/// on a fast link paid 2-5 % for probes every 64 messages).
pub const PROBE_EVERY: u32 = 64;
/// The longest interval between probes, in messages.
pub const PROBE_MAX: u32 = 1024;
/// Input over output below this is data that does not compress: what the transform keeps
/// must save 1/32 (smaller results are thrown away).
const SHRINKS: f64 = 1.0 + 1.0 / 32.0;
/// Messages and writes shorter than this are not measured (fixed costs would dominate).
pub const MEASURED_MIN: usize = 64 * 1024;
/// Weight of a new measurement in the running averages.
const WEIGHT: f64 = 0.25;

fn mix(old: Option<f64>, new: f64) -> f64 {
    old.map_or(new, |o| o + WEIGHT * (new - o))
}

/// Running averages for one algorithm.
#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    /// Input bytes per second (sampling and give-ups included).
    speed: Option<f64>,
    /// Input bytes over output bytes (1 when it gave up).
    ratio: Option<f64>,
}

/// A connection's link rate and what each algorithm does on its data.
#[derive(Clone, Debug, Default)]
pub struct Pace {
    /// Wire bytes per second the link drains while the sender is busy.
    link: Option<f64>,
    measured: [Measured; Algorithm::ALL.len()],
    skipped: u32,
    probes: usize,
    /// Messages between probes now (0: [`PROBE_EVERY`]).
    interval: u32,
}

fn index(a: Algorithm) -> usize {
    Algorithm::ALL.iter().position(|x| *x == a).unwrap_or(0)
}

impl Pace {
    /// The link rate the sender measured, bytes per second (None: not known yet).
    pub fn set_link_rate(&mut self, bytes_per_s: Option<u64>) {
        self.link = bytes_per_s.map(|b| b as f64);
    }

    /// The algorithm to compress the next message with, among `candidates` (general
    /// algorithms, in order of preference), or None to send it as it is. The first
    /// candidate while the link is unknown; an unmeasured candidate to measure it; else the
    /// one that moves the most, if that beats the link, or a probe.
    pub fn choose(&mut self, candidates: &[Algorithm]) -> Option<Algorithm> {
        let Some(link) = self.link else {
            // Unknown link: the first candidate, unless it found the data incompressible.
            let first = candidates.first().copied()?;
            if self.measured[index(first)]
                .ratio
                .is_some_and(|r| r < SHRINKS)
            {
                return self.probe(candidates);
            }
            self.interval = PROBE_EVERY;
            return Some(first);
        };
        if let Some(a) = candidates
            .iter()
            .find(|a| self.measured[index(**a)].speed.is_none())
        {
            return Some(*a);
        }
        let moves = |a: &Algorithm| {
            let m = self.measured[index(*a)];
            m.speed.unwrap_or(0.0).min(m.ratio.unwrap_or(1.0) * link)
        };
        let best = candidates
            .iter()
            .copied()
            .max_by(|a, b| moves(a).total_cmp(&moves(b)))?;
        if moves(&best) > link {
            self.skipped = 0;
            self.interval = PROBE_EVERY;
            return Some(best);
        }
        self.probe(candidates)
    }

    /// None, but every so many messages a candidate (in turn), the interval doubling after
    /// each probe until something pays again.
    fn probe(&mut self, candidates: &[Algorithm]) -> Option<Algorithm> {
        let every = if self.interval == 0 {
            PROBE_EVERY
        } else {
            self.interval
        };
        self.skipped += 1;
        if self.skipped < every {
            return None;
        }
        self.skipped = 0;
        self.interval = every.saturating_mul(2).min(PROBE_MAX);
        self.probes = self.probes.wrapping_add(1);
        candidates.get(self.probes % candidates.len()).copied()
    }

    /// Compressing `input` bytes with `a` took `elapsed` and made `output` bytes (`input`
    /// when it gave up).
    pub fn compressed(&mut self, a: Algorithm, input: usize, output: usize, elapsed: Duration) {
        if input < MEASURED_MIN {
            return;
        }
        let m = &mut self.measured[index(a)];
        let secs = elapsed.as_secs_f64().max(1e-6);
        m.speed = Some(mix(m.speed, input as f64 / secs));
        m.ratio = Some(mix(m.ratio, input as f64 / output.max(1) as f64));
    }

    /// The algorithm to compress the next message of connection `c` with: as
    /// [`choose`](Self::choose) picks among its general algorithms when `adaptive`, else its
    /// first. Server and client both ask this; the lock a client holds around it is not
    /// held while compressing.
    pub fn pick(&mut self, c: &Compression, adaptive: bool) -> Option<Algorithm> {
        let candidates: Vec<Algorithm> = c.general_algorithms().collect();
        if adaptive {
            self.choose(&candidates)
        } else {
            candidates.first().copied()
        }
    }

    /// Records one compression of `data_len` bytes after a `prefix_len`-byte prefix with
    /// `a` ([`Compression::compress_with`]), which made `out` (None: it gave up) in
    /// `elapsed`.
    pub fn record(
        &mut self,
        a: Algorithm,
        prefix_len: usize,
        data_len: usize,
        out: Option<&Compressed>,
        elapsed: Duration,
    ) {
        let output = out.map_or(data_len, |c| c.message.len().saturating_sub(prefix_len));
        self.compressed(a, data_len, output, elapsed);
    }

    /// What `a` was measured at: input bytes per second and ratio.
    pub fn measured(&self, a: Algorithm) -> (Option<f64>, Option<f64>) {
        let m = self.measured[index(a)];
        (m.speed, m.ratio)
    }
}

/// The link rate as a sender's writer measures it: `bytes` written in `elapsed` by one
/// write of at least [`MEASURED_MIN`] bytes, once [`WARM_UP`] bytes have gone. Until the
/// socket's and the path's buffers are full, a write measures memory, not the link: a
/// 100 Mbit/s link takes megabytes at memory speed first. So the first bytes of a
/// connection are not measured (compressed, as while the link is unknown); later, a fast
/// write does mean the link keeps up.
///
/// The rate is bytes over seconds of writing, both decayed with the time written (a time
/// constant of [`LINK_TAU`]): a write that took 80 ms counts 80 times what a 1 ms one does,
/// so buffers taking megabytes at memory speed do not make a slow link look fast.
///
/// Where the kernel measures the path (TCP: TCP_INFO's delivery rate, [`LinkRate::path`]),
/// its rate is the link's whenever the sender was not application-limited: a buffer with
/// room makes writes fast for as long as it takes to fill, megabytes on a slow link, and
/// the committed bench's text at 100 Mbit/s went out uncompressed for 6 of 64 READs while
/// it did. Write times remain for an application-limited sender (the link waited for it:
/// at least as fast as what it delivered) and for transports without that view.
#[derive(Clone, Debug, Default)]
pub struct LinkRate {
    bytes: f64,
    secs: f64,
    seen: usize,
    /// The kernel's delivery rate over samples taken while the link was the limit.
    delivered: Option<f64>,
    /// Kernel samples in a row taken while the sender was application-limited.
    app_limited: u32,
}

/// Application-limited kernel samples in a row before the link counts as waiting for the
/// sender: one now and then is a gap between requests, not a fast link (a single one sent
/// five READs of the bench's text at 100 Mbit/s out uncompressed).
pub const APP_LIMITED_RUN: u32 = 4;

/// A QUIC path's rate from its congestion controller: the window over the smoothed RTT
/// (None before both are known). BBR keeps about two bandwidth-delay products in flight (and
/// Cubic up to as much behind a router buffer of one), so
/// this overstates the link by up to 2x: compression steps aside only where it would not
/// pay on a link twice as fast, which errs toward compressing on the slow links it is for.
pub fn window_rate(cwnd_bytes: u64, rtt: Duration) -> Option<u64> {
    let secs = rtt.as_secs_f64();
    (cwnd_bytes > 0 && secs > 0.0).then(|| (cwnd_bytes as f64 / secs) as u64)
}

/// How long (seconds of writing) the link's measurements are remembered for.
pub const LINK_TAU: f64 = 2.0;

/// Bytes a connection writes before its link is measured.
pub const WARM_UP: usize = 4 << 20;

impl LinkRate {
    pub fn wrote(&mut self, bytes: usize, elapsed: Duration) {
        if self.seen < WARM_UP {
            self.seen += bytes;
            return;
        }
        if bytes < MEASURED_MIN {
            return;
        }
        let secs = elapsed.as_secs_f64().max(1e-6);
        let keep = (-secs / LINK_TAU).exp();
        self.bytes = self.bytes * keep + bytes as f64;
        self.secs = self.secs * keep + secs;
    }

    /// The kernel's latest view of the path: `delivery_rate` bytes per second, measured
    /// while the sender was `app_limited` or not.
    pub fn path(&mut self, delivery_rate: u64, app_limited: bool) {
        self.app_limited = if app_limited {
            self.app_limited.saturating_add(1)
        } else {
            0
        };
        if !app_limited && delivery_rate > 0 {
            self.delivered = Some(mix(self.delivered, delivery_rate as f64));
        }
    }

    /// Bytes per second, once measured: the kernel's delivery rate while the link is the
    /// limit; else what writes measured, and never less than what the link delivered.
    pub fn get(&self) -> Option<u64> {
        let written = (self.secs > 0.0).then(|| self.bytes / self.secs);
        let rate = match (self.delivered, written) {
            (Some(d), _) if self.app_limited < APP_LIMITED_RUN => Some(d),
            (Some(d), Some(w)) => Some(d.max(w)),
            (d, w) => w.or(d),
        };
        rate.map(|r| r as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Algorithm::{Lz4, Lz77Huffman};

    const MS: Duration = Duration::from_millis(1);
    const MB: usize = 1_000_000;

    /// Measured as in the committed bench: LZ4 350 MB/s at 2.4x, LZ77+Huffman 75 MB/s at
    /// 3.8x (on 1 MB messages).
    fn measured() -> Pace {
        let mut p = Pace::default();
        for _ in 0..8 {
            p.compressed(Lz4, 35 * MB / 10, 35 * MB / 24, 10 * MS);
            p.compressed(Lz77Huffman, 750_000, 750_000 * 10 / 38, 10 * MS);
        }
        p
    }

    #[test]
    fn the_first_candidate_until_the_link_is_known_then_each_is_measured() {
        let mut p = Pace::default();
        assert_eq!(p.choose(&[Lz4, Lz77Huffman]), Some(Lz4));
        p.set_link_rate(Some(12 * MB as u64));
        assert_eq!(p.choose(&[Lz4, Lz77Huffman]), Some(Lz4));
        p.compressed(Lz4, MB, MB / 2, 3 * MS);
        assert_eq!(
            p.choose(&[Lz4, Lz77Huffman]),
            Some(Lz77Huffman),
            "not measured yet"
        );
    }

    #[test]
    fn each_link_gets_the_algorithm_that_moves_the_most() {
        let both = [Lz4, Lz77Huffman];
        let mut p = measured();
        p.set_link_rate(Some(12 * MB as u64)); // 100 Mbit/s: the better ratio wins
        assert!((0..100).all(|_| p.choose(&both) == Some(Lz77Huffman)));
        p.set_link_rate(Some(120 * MB as u64)); // 1 Gbit/s: the faster one
        assert!((0..100).all(|_| p.choose(&both) == Some(Lz4)));
        p.set_link_rate(Some(1200 * MB as u64)); // faster than either: none, but probes
        let tried: Vec<u32> = (1..=PROBE_EVERY * 16)
            .filter(|_| p.choose(&both).is_some())
            .collect();
        // Each probe that changed nothing doubles the interval: 64, 128, 256, 512.
        assert_eq!(tried, vec![64, 192, 448, 960]);
    }

    #[test]
    fn data_that_does_not_compress_is_sent_as_it_is() {
        let mut p = Pace::default();
        p.set_link_rate(Some(12 * MB as u64));
        // Gave up at once (sampling): fast, but nothing saved.
        p.compressed(Lz4, MB, MB, MS / 10);
        assert_eq!(p.choose(&[Lz4]), None);
        // The data changed (zeros): a probe notices.
        let mut picked = 0;
        for _ in 0..PROBE_EVERY * 2 {
            if p.choose(&[Lz4]).is_some() {
                p.compressed(Lz4, MB, 1000, MS / 10);
                picked += 1;
            }
        }
        assert!(picked > PROBE_EVERY as usize, "{picked}");
    }

    /// With the link unknown (a QUIC stack without path figures) the first candidate is
    /// used, unless it found the data incompressible: then only probes.
    #[test]
    fn an_unknown_link_gets_no_compression_of_incompressible_data() {
        let mut p = Pace::default();
        assert_eq!(p.choose(&[Lz4]), Some(Lz4));
        p.compressed(Lz4, MB, MB, MS / 10); // gave up
        let tried = (0..PROBE_EVERY)
            .filter(|_| p.choose(&[Lz4]).is_some())
            .count();
        assert_eq!(tried, 1);
        p.compressed(Lz4, MB, MB / 100, MS / 10); // the data changed: it pays again
        p.compressed(Lz4, MB, MB / 100, MS / 10);
        assert_eq!(p.choose(&[Lz4]), Some(Lz4));
    }

    #[test]
    fn small_messages_and_writes_are_not_measured() {
        let mut p = Pace::default();
        p.compressed(Lz4, 1000, 10, Duration::from_secs(1));
        assert_eq!(p.measured(Lz4), (None, None));
        let mut l = LinkRate::default();
        // The first WARM_UP bytes are not measured, however slow or fast.
        for _ in 0..WARM_UP / (1 << 20) {
            l.wrote(1 << 20, Duration::from_micros(100));
        }
        assert_eq!(l.get(), None);
        l.wrote(1000, Duration::from_secs(1));
        assert_eq!(l.get(), None);
        l.wrote(1 << 20, Duration::from_secs(1));
        assert_eq!(l.get(), Some(1 << 20));
    }

    /// What the committed bench saw at 100 Mbit/s: after the warm-up the socket buffer
    /// still took compressed writes at memory speed for half a second. The kernel's
    /// delivery rate says what the link does meanwhile; once the sender is
    /// application-limited (the link waits for it), fast writes count again.
    #[test]
    fn the_kernels_delivery_rate_is_the_link_while_it_is_the_limit() {
        let mut l = LinkRate::default();
        l.wrote(WARM_UP, Duration::from_millis(1));
        for _ in 0..18 {
            l.wrote(280_000, Duration::from_micros(60)); // 4.7 GB/s into the buffer
            l.path(12_000_000, false);
        }
        let r = l.get().unwrap();
        assert!((11_000_000..13_000_000).contains(&r), "{r}");
        // One sample with the link idle is a gap between requests; several in a row mean
        // the link waits for the sender: then what writes measure, at least the rate
        // delivered.
        l.path(9_000_000, true);
        assert!(l.get().unwrap() < 13_000_000);
        for _ in 1..APP_LIMITED_RUN {
            l.path(9_000_000, true);
        }
        assert!(l.get().unwrap() > 1_000_000_000);
        let mut idle = LinkRate::default();
        idle.path(9_000_000, true);
        assert_eq!(idle.get(), None, "app-limited alone says nothing yet");
        idle.path(20_000_000, false);
        assert_eq!(idle.get(), Some(20_000_000));
    }

    #[test]
    fn a_quic_window_over_its_rtt_is_its_rate() {
        // 100 Mbit/s and 20 ms RTT under BBR: two BDPs (500 kB) in flight.
        assert_eq!(window_rate(500_000, 20 * MS), Some(25_000_000));
        assert_eq!(window_rate(500_000, Duration::ZERO), None);
        assert_eq!(window_rate(0, 20 * MS), None);
    }

    /// Buffers that take 8 MB at memory speed, then a 100 Mbit/s link: within a second of
    /// writing the rate is the link's order of magnitude (tens of MB/s, below any
    /// algorithm's speed), not the memory's.
    #[test]
    fn the_link_rate_is_weighted_by_time() {
        let mut l = LinkRate {
            seen: WARM_UP,
            ..LinkRate::default()
        };
        for _ in 0..8 {
            l.wrote(1_000_000, Duration::from_micros(300)); // 3.3 GB/s
        }
        for _ in 0..12 {
            l.wrote(1_000_000, Duration::from_millis(80)); // 12.5 MB/s
        }
        let r = l.get().unwrap();
        assert!(r < 25_000_000, "{r}");
        // And a fast link stays fast.
        let mut f = LinkRate {
            seen: WARM_UP,
            ..LinkRate::default()
        };
        for _ in 0..100 {
            f.wrote(1_000_000, Duration::from_micros(800));
        }
        assert!(f.get().unwrap() > 1_000_000_000);
    }
}
