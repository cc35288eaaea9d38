//! Whether, and with which algorithm, compressing pays on this link (issue 36: faster on
//! slow links, never slower on fast ones). Compressing and sending overlap, so a message
//! compressed with algorithm A moves at min(A's speed, A's ratio x link rate) against the
//! link rate uncompressed. The sender measures the link (the kernel's or the congestion
//! controller's view, else how long its writes take) and each algorithm's speed and ratio
//! (each compression is timed), and before each message picks the algorithm that moves the
//! most, or none when none beats the link. An algorithm not measured yet is tried once;
//! while none pays, one message in [`PROBE_EVERY`] is tried anyway (the algorithms in
//! turn), so a change of data (zeros compress at gigabytes per second) or of link is
//! noticed. Those tries run on a [`TRIAL`]-byte sample of the message, not the whole of
//! it: on loopback a 1 MiB message goes out in half a millisecond and LZ77+Huffman takes
//! 13 ms to compress it, so whole-message tries of every algorithm and the probes cost the
//! committed bench's text 32 % of its speed over TCP. No IO: the caller measures the link;
//! the compressions this module runs itself (the samples) it times with the clock.

use std::time::{Duration, Instant};

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
/// How much of a message an algorithm not measured yet, or a probe, is tried on: four
/// pieces of a quarter of this, from across the message (one piece could be all zeros or
/// all noise in a disk image). Messages under twice this are compressed whole instead.
pub const TRIAL: usize = MEASURED_MIN;
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

/// What [`Pace::choose`] decided for a message it did not send as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Compress the message with this algorithm.
    Compress(Algorithm),
    /// Measure this algorithm on a sample first ([`TRIAL`]), then ask again.
    Trial(Algorithm),
}

fn index(a: Algorithm) -> usize {
    Algorithm::ALL.iter().position(|x| *x == a).unwrap_or(0)
}

impl Pace {
    /// The link rate the sender measured, bytes per second (None: not known yet).
    pub fn set_link_rate(&mut self, bytes_per_s: Option<u64>) {
        self.link = bytes_per_s.map(|b| b as f64);
    }

    /// What to do with the next message, among `candidates` (general algorithms, in order
    /// of preference), or None to send it as it is. The first candidate while the link is
    /// unknown; a trial of an unmeasured candidate; else the one that moves the most, if
    /// that beats the link, or now and then a trial (a probe).
    pub fn choose(&mut self, candidates: &[Algorithm]) -> Option<Choice> {
        let Some(link) = self.link else {
            // Unknown link: the first candidate, unless it found the data incompressible.
            let first = candidates.first().copied()?;
            if self.measured[index(first)]
                .ratio
                .is_some_and(|r| r < SHRINKS)
            {
                // Only the first candidate's ratio can turn compression on again here.
                return self.probe(&candidates[..1]);
            }
            self.interval = PROBE_EVERY;
            return Some(Choice::Compress(first));
        };
        if let Some(a) = candidates
            .iter()
            .find(|a| self.measured[index(**a)].speed.is_none())
        {
            return Some(Choice::Trial(*a));
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
            return Some(Choice::Compress(best));
        }
        self.probe(candidates)
    }

    /// None, but every so many messages a candidate (in turn), the interval doubling after
    /// each probe until something pays again.
    fn probe(&mut self, candidates: &[Algorithm]) -> Option<Choice> {
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
        candidates
            .get(self.probes % candidates.len())
            .map(|a| Choice::Trial(*a))
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

    /// The algorithm to compress `data`, the next message of connection `c`, with: as
    /// [`choose`](Self::choose) picks among its general algorithms when `adaptive`, else its
    /// first. The trials it asks for run here, on a sample of `data` (at most [`TRIAL`]
    /// bytes, under a millisecond with the slowest algorithm); the message itself is
    /// compressed by the caller (a client does that outside the lock it holds around this).
    pub fn pick(&mut self, c: &Compression, adaptive: bool, data: &[u8]) -> Option<Algorithm> {
        let candidates: Vec<Algorithm> = c.general_algorithms().collect();
        if !adaptive {
            return candidates.first().copied();
        }
        let mut sample = None;
        // Each trial measures an algorithm, so after one per candidate and a probe the
        // answer is Compress or None; the bound only makes that visible.
        for _ in 0..=candidates.len() {
            match self.choose(&candidates)? {
                Choice::Compress(a) => return Some(a),
                Choice::Trial(a) => {
                    // Made at the first trial only: most messages need none.
                    let Some(sample) = sample.get_or_insert_with(|| trial_sample(data)) else {
                        // Too small to sample: the message is the trial.
                        return Some(a);
                    };
                    let started = Instant::now();
                    let mut out = Vec::with_capacity(sample.len());
                    a.compress(sample, &mut out);
                    let output = if out.is_empty() {
                        sample.len()
                    } else {
                        out.len()
                    };
                    self.compressed(a, sample.len(), output, started.elapsed());
                }
            }
        }
        None
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

/// [`TRIAL`] bytes of `data` in four pieces from across it, or None when `data` is under
/// twice that.
fn trial_sample(data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 2 * TRIAL {
        return None;
    }
    let piece = TRIAL / 4;
    let mut sample = Vec::with_capacity(TRIAL);
    for i in 0..4 {
        let at = i * (data.len() / 4);
        sample.extend_from_slice(data.get(at..at + piece)?);
    }
    Some(sample)
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
    /// The congestion window over the RTT ([`window_rate`]), the latest.
    window: Option<f64>,
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

    /// One reading of the kernel's TCP_INFO: [`path`](Self::path) with its delivery rate,
    /// [`window`](Self::window) with its congestion window (bytes) over its RTT.
    pub fn tcp(&mut self, delivery_rate: u64, app_limited: bool, cwnd_bytes: u64, rtt: Duration) {
        self.path(delivery_rate, app_limited);
        self.window(window_rate(cwnd_bytes, rtt));
    }

    /// The congestion window over the RTT, from the kernel (TCP_INFO's `snd_cwnd` x
    /// `snd_mss` over `rtt`, [`window_rate`]): known from the handshake on, before any
    /// data has been delivered.
    pub fn window(&mut self, bytes_per_s: Option<u64>) {
        if let Some(w) = bytes_per_s {
            self.window = Some(w as f64);
        }
    }

    /// Bytes per second, once known: the kernel's delivery rate while the link is the
    /// limit; else what writes measured, and never less than what the link delivered; and
    /// until either is known, the congestion window over the RTT. The window makes the link
    /// known from the first write: without it a connection's first messages were compressed
    /// whatever the link (the first READs in flight, 6 % of the quick bench's text on
    /// loopback, at 0.8x of uncompressed). It is only the first guess: it can be twice
    /// what the path carries (as over QUIC), and as the rate of a link near an algorithm's
    /// speed it turned LZ4 off at 1 Gbit/s (text 1.28x instead of 1.45x).
    pub fn get(&self) -> Option<u64> {
        let written = (self.secs > 0.0).then(|| self.bytes / self.secs);
        let rate = match (self.delivered, written) {
            (Some(d), _) if self.app_limited < APP_LIMITED_RUN => Some(d),
            (Some(d), Some(w)) => Some(d.max(w)),
            (d, w) => w.or(d),
        };
        rate.or(self.window).map(|r| r as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Compression;
    use Algorithm::{Lz4, Lz77Huffman};
    use Choice::{Compress, Trial};

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
        assert_eq!(p.choose(&[Lz4, Lz77Huffman]), Some(Compress(Lz4)));
        p.set_link_rate(Some(12 * MB as u64));
        assert_eq!(p.choose(&[Lz4, Lz77Huffman]), Some(Trial(Lz4)));
        p.compressed(Lz4, MB, MB / 2, 3 * MS);
        assert_eq!(
            p.choose(&[Lz4, Lz77Huffman]),
            Some(Trial(Lz77Huffman)),
            "not measured yet"
        );
    }

    #[test]
    fn each_link_gets_the_algorithm_that_moves_the_most() {
        let both = [Lz4, Lz77Huffman];
        let mut p = measured();
        p.set_link_rate(Some(12 * MB as u64)); // 100 Mbit/s: the better ratio wins
        assert!((0..100).all(|_| p.choose(&both) == Some(Compress(Lz77Huffman))));
        p.set_link_rate(Some(120 * MB as u64)); // 1 Gbit/s: the faster one
        assert!((0..100).all(|_| p.choose(&both) == Some(Compress(Lz4))));
        p.set_link_rate(Some(1200 * MB as u64)); // faster than either: none, but probes
        let tried: Vec<u32> = (1..=PROBE_EVERY * 16)
            .filter(|_| p.choose(&both).is_some())
            .collect();
        // Each probe that changed nothing doubles the interval: 64, 128, 256, 512; each is a
        // trial on a sample, the candidates in turn.
        assert_eq!(tried, vec![64, 192, 448, 960]);
        let probes: Vec<Choice> = (0..PROBE_MAX * 2).filter_map(|_| p.choose(&both)).collect();
        assert_eq!(probes, vec![Trial(Lz77Huffman), Trial(Lz4)]);
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
            match p.choose(&[Lz4]) {
                Some(Trial(a)) => p.compressed(a, TRIAL, 10, MS / 100),
                Some(Compress(a)) => {
                    p.compressed(a, MB, 1000, MS / 10);
                    picked += 1;
                }
                None => {}
            }
        }
        assert!(picked > PROBE_EVERY as usize, "{picked}");
    }

    /// With the link unknown (a QUIC stack without path figures) the first candidate is
    /// used, unless it found the data incompressible: then only probes, of that candidate
    /// (only its ratio can turn compression on again).
    #[test]
    fn an_unknown_link_gets_no_compression_of_incompressible_data() {
        let mut p = Pace::default();
        assert_eq!(p.choose(&[Lz4]), Some(Compress(Lz4)));
        p.compressed(Lz4, MB, MB, MS / 10); // gave up
        let tried: Vec<Choice> = (0..PROBE_EVERY * 4)
            .filter_map(|_| p.choose(&[Lz4, Lz77Huffman]))
            .collect();
        assert_eq!(tried, vec![Trial(Lz4), Trial(Lz4)]);
        p.compressed(Lz4, MB, MB / 100, MS / 10); // the data changed: it pays again
        p.compressed(Lz4, MB, MB / 100, MS / 10);
        assert_eq!(p.choose(&[Lz4]), Some(Compress(Lz4)));
    }

    /// Source-like text, compressible about 3x, different in every KiB.
    fn text(len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut i = 0u64;
        while out.len() < len {
            i += 1;
            let line = format!(
                "    let value_{} = compute(&input[{}..], {});\n",
                i % 97,
                i,
                i * 7
            );
            out.extend_from_slice(line.as_bytes());
        }
        out.truncate(len);
        out
    }

    fn every_algorithm() -> Compression {
        use smbq_wire::negotiate::{CompressionAlgorithm as Id, compression_flags};
        let offered: Vec<Id> = Algorithm::ALL.iter().map(|a| a.wire()).collect();
        Compression::settle(&Algorithm::ALL, &offered, compression_flags::CHAINED)
    }

    /// On a link faster than any algorithm (loopback), every algorithm is measured on a
    /// sample of the first large message and none is used: the message goes as it is, and
    /// what each try cost is a sample's worth, not the message's.
    #[test]
    fn algorithms_are_tried_on_a_sample_and_a_fast_link_sends_as_it_is() {
        let c = every_algorithm();
        let data = text(1 << 20);
        let mut p = Pace::default();
        p.set_link_rate(Some(100_000 * MB as u64));
        assert_eq!(p.pick(&c, true, &data), None);
        for a in c.general_algorithms() {
            let (speed, ratio) = p.measured(a);
            assert!(speed.is_some(), "{a:?} measured");
            assert!(ratio.is_some_and(|r| r > 1.5), "{a:?}: {ratio:?}");
        }
        // Not adaptive: the first, whatever the link, and nothing tried.
        let mut fixed = Pace::default();
        fixed.set_link_rate(Some(100_000 * MB as u64));
        assert_eq!(fixed.pick(&c, false, &data), Some(Lz4));
        assert_eq!(fixed.measured(Lz4), (None, None));
        // A slow link: after the trials, the one that moves the most on it.
        let mut slow = Pace::default();
        slow.set_link_rate(Some(MB as u64));
        let a = slow.pick(&c, true, &data).unwrap();
        let moves = |a| {
            let (s, r) = slow.measured(a);
            s.unwrap().min(r.unwrap() * MB as f64)
        };
        assert!(c.general_algorithms().all(|b| moves(a) >= moves(b)));
        // A message too small to sample is the trial itself.
        let mut small = Pace::default();
        small.set_link_rate(Some(100_000 * MB as u64));
        assert_eq!(small.pick(&c, true, &data[..TRIAL]), Some(Lz4));
    }

    /// The sample takes four pieces from across the message: a disk image whose first
    /// half is zeros and second half noise is measured as half compressible, not as all
    /// zeros.
    #[test]
    fn the_sample_comes_from_across_the_message() {
        let mut data = vec![0u8; 1 << 20];
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for b in data.iter_mut().skip(1 << 19) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        let s = trial_sample(&data).unwrap();
        assert_eq!(s.len(), TRIAL);
        let zeros = s.iter().filter(|b| **b == 0).count();
        assert!((TRIAL * 4 / 10..TRIAL * 6 / 10).contains(&zeros), "{zeros}");
        assert_eq!(trial_sample(&data[..2 * TRIAL - 1]), None);
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
        assert_eq!(idle.get(), None, "app-limited alone says nothing");
        idle.path(20_000_000, false);
        assert_eq!(idle.get(), Some(20_000_000));
        // A sender the link waits for, with the window known (loopback): the window.
        let mut lo = LinkRate::default();
        lo.tcp(5_000_000, true, 10 * 65_483, Duration::from_micros(40));
        assert!(lo.get().unwrap() > 10_000_000_000);
    }

    #[test]
    fn a_quic_window_over_its_rtt_is_its_rate() {
        // 100 Mbit/s and 20 ms RTT under BBR: two BDPs (500 kB) in flight.
        assert_eq!(window_rate(500_000, 20 * MS), Some(25_000_000));
        assert_eq!(window_rate(500_000, Duration::ZERO), None);
        assert_eq!(window_rate(0, 20 * MS), None);
    }

    /// Before any data is delivered the window over the RTT is known from the handshake:
    /// loopback (64 KiB segments, tens of microseconds) is fast at once, a 100 Mbit/s
    /// path at 20 ms starts slow. A delivery rate while the link is the limit wins.
    #[test]
    fn the_tcp_window_makes_the_link_known_before_any_sample() {
        let mut lo = LinkRate::default();
        assert_eq!(lo.get(), None);
        lo.tcp(0, false, 10 * 65_483, Duration::from_micros(40));
        assert!(lo.get().unwrap() > 10_000_000_000);
        let mut wan = LinkRate::default();
        wan.window(window_rate(10 * 1448, 20 * MS));
        assert_eq!(wan.get(), Some(724_000));
        wan.window(window_rate(2 * 250_000, 20 * MS)); // two BDPs in flight later
        assert_eq!(wan.get(), Some(25_000_000));
        // Once the kernel has measured the link, that is the rate, not the window.
        wan.path(12_000_000, false);
        assert_eq!(wan.get(), Some(12_000_000));
        wan.window(None);
        assert_eq!(
            wan.get(),
            Some(12_000_000),
            "a missing reading changes nothing"
        );
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
