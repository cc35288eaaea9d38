//! The model against a simulated path: a bottleneck of fixed rate behind a drop-tail buffer,
//! a base round trip, random loss after the queue. The sender always has data, paces by the
//! window as quinn does (1.25 x window per smoothed RTT) and learns of a loss when a later
//! packet is acknowledged.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::*;

const MTU: u16 = 1200;

struct Path {
    rate: f64,
    rtt: Duration,
    loss: f64,
    queue_bytes: f64,
}

#[derive(Default)]
struct Run {
    /// (time since start, bytes delivered) at every acknowledgment batch.
    delivered: Vec<(Duration, u64)>,
    /// (time since start, RTT) of every acknowledged packet.
    rtts: Vec<(Duration, Duration)>,
}

impl Run {
    /// Bytes per second delivered in [from, to).
    fn rate(&self, from: Duration, to: Duration) -> f64 {
        let at = |t: Duration| {
            self.delivered
                .iter()
                .take_while(|(d, _)| *d <= t)
                .last()
                .map_or(0, |x| x.1)
        };
        (at(to) - at(from)) as f64 / (to - from).as_secs_f64()
    }

    /// Largest RTT of the packets acknowledged in [from, to).
    fn max_rtt(&self, from: Duration, to: Duration) -> Duration {
        self.rtts
            .iter()
            .filter(|(t, _)| (from..to).contains(t))
            .map(|x| x.1)
            .max()
            .unwrap_or_default()
    }
}

/// xorshift: the same loss pattern every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs `model` over `path` (changed to `after` at `change`) for `secs` seconds from `t0`.
fn simulate_from(
    t0: Instant,
    model: &mut Model,
    path: &Path,
    after: Option<(Duration, Path)>,
    secs: f64,
) -> Run {
    let end = t0 + Duration::from_secs_f64(secs);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut now = t0;
    let mut link_free = t0;
    let mut in_flight = 0u64;
    let mut next_send = t0;
    let mut srtt = path.rtt;
    // (ack time, send time, size, seq) of packets that got through; seqs of lost ones.
    let mut acks: BinaryHeap<Reverse<(Instant, Instant, u64, u64)>> = BinaryHeap::new();
    let mut lost: VecDeque<(u64, Instant, u64)> = VecDeque::new();
    let mut seq = 0u64;
    let mut delivered = 0u64;
    let mut run = Run::default();
    let size = u64::from(MTU);
    while now < end {
        let p = match &after {
            Some((at, p)) if now >= t0 + *at => p,
            _ => path,
        };
        let next_ack = acks.peek().map(|Reverse(a)| a.0);
        let can_send = in_flight + size <= model.window();
        let send_at = if can_send {
            Some(next_send.max(now))
        } else {
            None
        };
        now = match (send_at, next_ack) {
            (Some(s), Some(a)) => s.min(a),
            (Some(s), None) => s,
            (None, Some(a)) => a,
            (None, None) if lost.is_empty() => break,
            (None, None) => {
                // Everything in flight was lost: the probe timeout finds it.
                while let Some((_, _, b)) = lost.pop_front() {
                    in_flight -= b;
                }
                now + srtt * 2
            }
        };
        if send_at == Some(now) && next_ack != Some(now) {
            model.on_sent(now, size);
            seq += 1;
            in_flight += size;
            let backlog = link_free.saturating_duration_since(now).as_secs_f64() * p.rate;
            let gap = size as f64 / (1.25 * model.window() as f64 / srtt.as_secs_f64());
            next_send = now + Duration::from_secs_f64(gap);
            if backlog + size as f64 > p.queue_bytes {
                lost.push_back((seq, now, size));
                continue;
            }
            let depart = link_free.max(now) + Duration::from_secs_f64(size as f64 / p.rate);
            link_free = depart;
            if rng.next() < p.loss {
                lost.push_back((seq, now, size));
            } else {
                acks.push(Reverse((depart + p.rtt, now, size, seq)));
            }
            continue;
        }
        // Every acknowledgment due now, as one batch.
        while acks.peek().is_some_and(|Reverse(a)| a.0 == now) {
            let Some(Reverse((_, sent, bytes, s))) = acks.pop() else {
                break;
            };
            in_flight -= bytes;
            delivered += bytes;
            let rtt = now - sent;
            run.rtts.push((now - t0, rtt));
            srtt = (srtt * 7 + rtt) / 8;
            model.on_ack(now, sent, bytes, false);
            while lost.front().is_some_and(|l| l.0 < s) {
                let Some((_, _, b)) = lost.pop_front() else {
                    break;
                };
                in_flight -= b;
            }
        }
        model.on_end_acks(now, in_flight, false);
        run.delivered.push((now - t0, delivered));
    }
    run
}

fn simulate(model: &mut Model, path: &Path, after: Option<(Duration, Path)>, secs: f64) -> Run {
    simulate_from(Instant::now(), model, path, after, secs)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

/// A path with `bdps` bandwidth-delay products of buffer (the link emulator defaults to one).
fn path_with(rate_mb: f64, rtt_ms: u64, loss: f64, bdps: f64) -> Path {
    let rate = rate_mb * 1e6;
    Path {
        rate,
        rtt: ms(rtt_ms),
        loss,
        queue_bytes: bdps * rate * ms(rtt_ms).as_secs_f64(),
    }
}

fn path(rate_mb: f64, rtt_ms: u64, loss: f64) -> Path {
    path_with(rate_mb, rtt_ms, loss, 1.0)
}

#[test]
fn fills_the_path_within_a_few_round_trips_and_bounds_the_queue() {
    // A deep buffer (4 BDP), so that only the window bounds the queue.
    let p = path_with(100.0, 20, 0.0, 4.0);
    let mut m = Model::new(Instant::now(), MTU);
    let run = simulate(&mut m, &p, None, 2.0);
    // From 240 KB to a 2 MB bandwidth-delay product: three doublings, then the plateau.
    let early = run.rate(ms(150), ms(250));
    assert!(
        early > 0.8 * p.rate,
        "{:.1} MB/s at 150-250 ms",
        early / 1e6
    );
    let steady = run.rate(ms(500), ms(2000));
    assert!(steady > 0.95 * p.rate, "{:.1} MB/s", steady / 1e6);
    assert!(!m.in_startup());
    // In PROBE_BW the window is at most 2.5 BDP: at most 1.5 BDP (30 ms) waits in the buffer.
    let rtt = run.max_rtt(ms(1000), ms(2000));
    assert!(rtt <= ms(51), "{rtt:?}");
    let bw = m.bandwidth() as f64;
    assert!((0.9 * p.rate..1.1 * p.rate).contains(&bw), "{bw}");
}

#[test]
fn random_loss_does_not_hold_it_back() {
    let p = path(100.0, 20, 0.02);
    let mut m = Model::new(Instant::now(), MTU);
    let run = simulate(&mut m, &p, None, 2.0);
    let early = run.rate(ms(150), ms(300));
    assert!(
        early > 0.7 * p.rate,
        "{:.1} MB/s at 150-300 ms",
        early / 1e6
    );
    let steady = run.rate(ms(500), ms(2000));
    assert!(
        steady > 0.9 * p.rate,
        "{:.1} MB/s at 2 % loss",
        steady / 1e6
    );
}

#[test]
fn follows_a_path_that_gets_slower() {
    let fast = path(100.0, 20, 0.0);
    let slow = path(20.0, 20, 0.0);
    let mut m = Model::new(Instant::now(), MTU);
    let run = simulate(&mut m, &fast, Some((ms(1000), slow)), 3.0);
    // Ten rounds later the old samples are gone and the window fits the new rate.
    let late = run.rate(ms(2000), ms(3000));
    assert!((15e6..21e6).contains(&late), "{:.1} MB/s", late / 1e6);
    let bw = m.bandwidth() as f64;
    assert!(bw < 25e6, "still believes {:.1} MB/s", bw / 1e6);
}

#[test]
fn app_limited_samples_only_raise_the_estimate() {
    let t0 = Instant::now();
    let mut m = Model::new(t0, MTU);
    // 1 MB acknowledged 40 ms after it left: 25 MB/s.
    m.on_sent(t0, 1_000_000);
    m.on_ack(t0 + ms(40), t0, 1_000_000, false);
    m.on_end_acks(t0 + ms(40), 0, false);
    let bw = m.bandwidth();
    assert!((24_000_000..26_000_000).contains(&bw), "{bw}");
    // A trickle while the sender had nothing to send does not lower it.
    m.on_sent(t0 + ms(50), 1200);
    m.on_ack(t0 + ms(90), t0 + ms(50), 1200, true);
    m.on_end_acks(t0 + ms(90), 0, true);
    assert_eq!(m.bandwidth(), bw);
}

#[test]
fn pauses_between_transfers_keep_the_estimate() {
    let p = path(100.0, 20, 0.0);
    let t0 = Instant::now();
    let mut m = Model::new(t0, MTU);
    simulate_from(t0, &mut m, &p, None, 1.0);
    let bw = m.bandwidth();
    assert!(bw as f64 > 0.9 * p.rate);
    // A minute of small request/response exchanges, one every 2 s, application-limited.
    let mut t = t0 + Duration::from_secs(2);
    for _ in 0..30 {
        m.on_sent(t, 1200);
        m.on_ack(t + ms(20), t, 1200, true);
        m.on_end_acks(t + ms(20), 0, true);
        t += Duration::from_secs(2);
    }
    assert_eq!(
        m.bandwidth(),
        bw,
        "idle and app-limited rounds aged the filter"
    );
    // The next transfer starts at the rate the path had.
    let run = simulate_from(t, &mut m, &p, None, 0.5);
    let first = run.rate(ms(20), ms(100));
    assert!(
        first > 0.8 * p.rate,
        "{:.1} MB/s right after the pause",
        first / 1e6
    );
}

#[test]
fn a_longer_round_trip_is_found_and_used() {
    // 10 MB/s keeps the simulation short; the RTT goes from 20 to 80 ms after 1 s.
    let near = path_with(10.0, 20, 0.0, 4.0);
    let far = path_with(10.0, 80, 0.0, 4.0);
    let t0 = Instant::now();
    let mut m = Model::new(t0, MTU);
    let run = simulate_from(t0, &mut m, &near, Some((ms(1000), far)), 16.0);
    // The 20 ms minimum expires 10 s after it was last seen; ProbeRTT then measures 80 ms.
    let rtt = m.min_rtt().unwrap_or_default();
    assert!((ms(79)..ms(90)).contains(&rtt), "{rtt:?}");
    assert!(!m.in_probe_rtt());
    let late = run.rate(ms(13_000), ms(16_000));
    assert!(
        late > 0.9 * 10e6,
        "{:.2} MB/s on the longer path",
        late / 1e6
    );
}

#[test]
fn probe_rtt_comes_every_ten_seconds_and_costs_little() {
    let p = path_with(10.0, 20, 0.0, 4.0);
    let t0 = Instant::now();
    let mut m = Model::new(t0, MTU);
    let run = simulate_from(t0, &mut m, &p, None, 22.0);
    // Two ProbeRTTs (near 10 s and 20 s) take ~0.45 s at half a BDP: under 5 % overall.
    let rate = run.rate(ms(1000), ms(22_000));
    assert!(rate > 0.95 * p.rate, "{:.2} MB/s", rate / 1e6);
    // And the queue stays bounded by the window (2.5 BDP at most: 30 ms queued).
    let rtt = run.max_rtt(ms(2000), ms(22_000));
    assert!(rtt <= ms(52), "{rtt:?}");
}

#[test]
fn persistent_congestion_restarts_from_the_minimum_window() {
    let p = path(100.0, 20, 0.0);
    let t0 = Instant::now();
    let mut m = Model::new(t0, MTU);
    simulate_from(t0, &mut m, &p, None, 1.0);
    assert!(m.window() > 1_000_000);
    m.on_persistent_congestion();
    assert_eq!(m.window(), 4 * u64::from(MTU));
    assert!(m.in_startup());
    assert_eq!(m.bandwidth(), 0);
    // The path's buffer has drained meanwhile (the probe timeouts that made it persistent).
    let run = simulate_from(t0 + Duration::from_secs(2), &mut m, &p, None, 1.0);
    assert!(run.rate(ms(500), ms(1000)) > 0.9 * p.rate);
}

#[test]
fn marks_stay_bounded() {
    let t0 = Instant::now();
    let mut m = Model::new(t0, MTU);
    // One mark per delivery state: sends without acknowledgments in between share one.
    for i in 0..1000 {
        m.on_sent(t0 + Duration::from_micros(i), 1200);
    }
    assert_eq!(m.marks.len(), 1);
    // Interleaved with acknowledgments of packets the model never saw sent (a peer acking
    // at random), marks are still capped.
    for i in 0..(MAX_MARKS as u64 + 100) {
        let t = t0 + Duration::from_micros(2000 + 2 * i);
        m.on_sent(t, 1200);
        m.on_ack(t + Duration::from_micros(1), t0, 1, true);
    }
    assert!(m.marks.len() <= MAX_MARKS);
}
