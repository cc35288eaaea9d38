//! The per-packet decision of one direction: drop it (and why) or when to deliver it.
//!
//! Pure logic over caller-supplied instants, so it is tested without a clock or a device.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::settings::LinkSettings;

/// What happens to one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Hand the packet to the far side at this instant.
    Deliver(Instant),
    /// Larger than the MTU: a router would not forward it.
    DropMtu,
    /// The router buffer in front of the bottleneck is full (drop-tail).
    DropQueue,
    /// Lost on the wire.
    DropLoss,
}

/// One direction's state: the loss RNG and the instant the bottleneck is busy until.
pub(crate) struct Shaper {
    mtu: usize,
    delay: Duration,
    loss: f64,
    rate_bps: Option<u64>,
    queue_bytes: usize,
    rng: StdRng,
    busy_until: Option<Instant>,
}

impl Shaper {
    /// `salt` keeps the two directions' loss draws independent when they share a seed: with
    /// identical streams, packet n would be lost in both directions at once.
    pub(crate) fn new(settings: &LinkSettings, salt: u64) -> Self {
        Self {
            mtu: usize::from(settings.mtu),
            delay: settings.delay,
            loss: settings.loss,
            rate_bps: settings.rate_bps,
            queue_bytes: settings.effective_queue_bytes(),
            rng: StdRng::seed_from_u64(settings.seed ^ salt),
            busy_until: None,
        }
    }

    /// Decides the fate of a packet of `len` bytes that arrived at `now`. Calls must come in
    /// arrival order; delivery instants then never decrease, so the delay line is a FIFO and
    /// the link never reorders.
    pub(crate) fn decide(&mut self, now: Instant, len: usize) -> Verdict {
        if len > self.mtu {
            return Verdict::DropMtu;
        }
        let departs = match self.rate_bps {
            None => now,
            Some(rate) => {
                // The bottleneck is a virtual queue: the bytes still waiting are the time the
                // link stays busy times its rate, so no per-packet queue bookkeeping is needed.
                let start = self.busy_until.map_or(now, |busy| busy.max(now));
                let backlog = bytes_in(start.saturating_duration_since(now), rate);
                if backlog.saturating_add(len) > self.queue_bytes {
                    return Verdict::DropQueue;
                }
                let finish = start + serialization(len, rate);
                self.busy_until = Some(finish);
                finish
            }
        };
        // Loss is drawn after the queue, like corruption on the wire: a lost packet has used
        // its share of the bottleneck, as it would on a real lossy hop.
        if self.loss > 0.0 && self.rng.gen_bool(self.loss) {
            return Verdict::DropLoss;
        }
        Verdict::Deliver(departs + self.delay)
    }
}

/// Time to clock `len` bytes onto a link of `rate` bit/s.
fn serialization(len: usize, rate: u64) -> Duration {
    let bits = u128::try_from(len).unwrap_or(u128::MAX).saturating_mul(8);
    let nanos = bits.saturating_mul(1_000_000_000) / u128::from(rate.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// Bytes a link of `rate` bit/s sends in `busy`.
fn bytes_in(busy: Duration, rate: u64) -> usize {
    let bytes = busy.as_nanos().saturating_mul(u128::from(rate)) / 8 / 1_000_000_000;
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> LinkSettings {
        LinkSettings::default()
    }

    #[test]
    fn plain_delay_is_added_to_arrival() {
        let s = LinkSettings {
            delay: Duration::from_millis(7),
            ..settings()
        };
        let mut sh = Shaper::new(&s, 0);
        let t0 = Instant::now();
        assert_eq!(
            sh.decide(t0, 100),
            Verdict::Deliver(t0 + Duration::from_millis(7))
        );
    }

    #[test]
    fn oversized_packets_are_dropped_and_mtu_sized_pass() {
        let mut sh = Shaper::new(&settings(), 0);
        let t0 = Instant::now();
        assert_eq!(sh.decide(t0, 1501), Verdict::DropMtu);
        assert_eq!(sh.decide(t0, 1500), Verdict::Deliver(t0));
    }

    #[test]
    fn rate_limit_serializes_back_to_back_packets() {
        // 1500 bytes at 12 Mbit/s take exactly 1 ms.
        let s = LinkSettings {
            rate_bps: Some(12_000_000),
            queue_bytes: 1_000_000,
            ..settings()
        };
        let mut sh = Shaper::new(&s, 0);
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        assert_eq!(sh.decide(t0, 1500), Verdict::Deliver(t0 + ms));
        assert_eq!(sh.decide(t0, 1500), Verdict::Deliver(t0 + 2 * ms));
        // Arriving after the link went idle starts a fresh serialization.
        let later = t0 + 10 * ms;
        assert_eq!(sh.decide(later, 1500), Verdict::Deliver(later + ms));
    }

    #[test]
    fn full_queue_drops_tail_and_drains_with_time() {
        let s = LinkSettings {
            rate_bps: Some(12_000_000),
            queue_bytes: 3000,
            ..settings()
        };
        let mut sh = Shaper::new(&s, 0);
        let t0 = Instant::now();
        assert!(matches!(sh.decide(t0, 1500), Verdict::Deliver(_)));
        assert!(matches!(sh.decide(t0, 1500), Verdict::Deliver(_)));
        assert_eq!(sh.decide(t0, 1500), Verdict::DropQueue);
        // After 1 ms one packet has left, so one more fits.
        let t1 = t0 + Duration::from_millis(1);
        assert!(matches!(sh.decide(t1, 1500), Verdict::Deliver(_)));
        assert_eq!(sh.decide(t1, 1500), Verdict::DropQueue);
    }

    #[test]
    fn loss_rate_follows_setting_and_seed_repeats() {
        let s = LinkSettings {
            loss: 0.1,
            seed: 42,
            ..settings()
        };
        let t0 = Instant::now();
        let run = |salt| {
            let mut sh = Shaper::new(&s, salt);
            (0..100_000)
                .map(|_| sh.decide(t0, 100) == Verdict::DropLoss)
                .collect::<Vec<_>>()
        };
        let a = run(1);
        let lost = a.iter().filter(|l| **l).count();
        // sd of the count is sqrt(1e5 * 0.1 * 0.9) = 95; allow 5 sd.
        assert!((9_525..=10_475).contains(&lost), "{lost}");
        assert_eq!(a, run(1), "same seed and salt repeat the draws");
        assert_ne!(
            a,
            run(2),
            "a different salt gives the other direction its own draws"
        );
    }

    #[test]
    fn delivery_order_is_preserved() {
        let s = LinkSettings {
            rate_bps: Some(1_000_000),
            delay: Duration::from_millis(3),
            queue_bytes: 100_000,
            ..settings()
        };
        let mut sh = Shaper::new(&s, 0);
        let t0 = Instant::now();
        let mut last = t0;
        for (i, len) in [40usize, 1500, 60, 900, 1500, 28].into_iter().enumerate() {
            let now = t0 + Duration::from_micros(100 * i as u64);
            let Verdict::Deliver(at) = sh.decide(now, len) else {
                panic!("dropped")
            };
            assert!(at >= last);
            last = at;
        }
    }
}
