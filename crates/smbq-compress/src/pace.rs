//! Whether compressing pays on this link (issue 36: faster on slow links, never slower on
//! fast ones). Compressing and sending overlap, so a compressed transfer moves
//! min(compression speed, ratio x link rate) bytes per second against the link rate
//! uncompressed: it pays exactly when this end compresses faster than the link drains. The
//! sender measures both and asks before each message; while compressing loses, one message
//! in [`PROBE_EVERY`] is compressed anyway, so a change of data (or of link) is noticed.
//! Sans IO: the caller measures the times.

use std::time::Duration;

/// While compressing loses, one message in this many is still compressed, to keep the
/// compression speed current.
pub const PROBE_EVERY: u32 = 64;
/// Messages shorter than this are not measured (the fixed costs would dominate).
pub const MEASURED_MIN: usize = 64 * 1024;
/// Weight of a new measurement in the running averages.
const WEIGHT: f64 = 0.25;

/// A connection's link rate and compression speed, as running averages.
#[derive(Clone, Debug, Default)]
pub struct Pace {
    /// Bytes per second the link drains while the sender is busy (wire bytes).
    link: Option<f64>,
    /// Bytes of input per second this end compresses (sampling and give-ups included).
    speed: Option<f64>,
    skipped: u32,
}

fn mix(old: Option<f64>, new: f64) -> f64 {
    old.map_or(new, |o| o + WEIGHT * (new - o))
}

impl Pace {
    /// The link rate the sender measured, bytes per second (None: not known yet).
    pub fn set_link_rate(&mut self, bytes_per_s: Option<u64>) {
        self.link = bytes_per_s.map(|b| b as f64);
    }

    /// Whether to try compressing the next message. Yes until both rates are known, and
    /// while compressing is faster than the link; otherwise one message in
    /// [`PROBE_EVERY`].
    pub fn should_try(&mut self) -> bool {
        match (self.link, self.speed) {
            (Some(link), Some(speed)) if speed < link => {
                self.skipped += 1;
                if self.skipped >= PROBE_EVERY {
                    self.skipped = 0;
                    return true;
                }
                false
            }
            _ => true,
        }
    }

    /// Trying to compress `input` bytes took `elapsed`.
    pub fn compressed(&mut self, input: usize, elapsed: Duration) {
        if input < MEASURED_MIN {
            return;
        }
        let secs = elapsed.as_secs_f64().max(1e-6);
        self.speed = Some(mix(self.speed, input as f64 / secs));
    }

    /// Bytes per second this end compresses at, once measured.
    pub fn speed(&self) -> Option<f64> {
        self.speed
    }
}

/// The link rate as a sender's writer measures it: `bytes` written in `elapsed` by one
/// write (of at least [`MEASURED_MIN`] bytes: a write into an empty socket buffer measures
/// memory, not the link, and is fast, which is right: the link then keeps up).
#[derive(Clone, Debug, Default)]
pub struct LinkRate {
    rate: Option<f64>,
}

impl LinkRate {
    pub fn wrote(&mut self, bytes: usize, elapsed: Duration) {
        if bytes < MEASURED_MIN {
            return;
        }
        let secs = elapsed.as_secs_f64().max(1e-6);
        self.rate = Some(mix(self.rate, bytes as f64 / secs));
    }

    /// Bytes per second, once measured.
    pub fn get(&self) -> Option<u64> {
        self.rate.map(|r| r as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn compresses_until_both_rates_are_known() {
        let mut p = Pace::default();
        assert!(p.should_try());
        p.set_link_rate(Some(1_000_000_000));
        assert!(p.should_try());
        p.compressed(1 << 20, 10 * MS); // 100 MB/s
        assert!(
            !p.should_try(),
            "a 1 GB/s link outruns 100 MB/s of compression"
        );
    }

    #[test]
    fn a_slow_link_is_compressed_for() {
        let mut p = Pace::default();
        p.set_link_rate(Some(12_000_000)); // 100 Mbit/s
        p.compressed(1 << 20, 10 * MS);
        assert!((0..1000).all(|_| p.should_try()));
    }

    #[test]
    fn while_losing_one_in_probe_every_is_still_tried() {
        let mut p = Pace::default();
        p.set_link_rate(Some(2_000_000_000));
        p.compressed(1 << 20, 10 * MS);
        let tried = (0..PROBE_EVERY * 10).filter(|_| p.should_try()).count();
        assert_eq!(tried, 10);
        // The data became cheap to compress (zeros): faster than the link, every one again.
        for _ in 0..20 {
            p.compressed(8 << 20, MS);
        }
        assert!((0..100).all(|_| p.should_try()));
    }

    #[test]
    fn small_messages_and_writes_are_not_measured() {
        let mut p = Pace::default();
        p.compressed(1000, Duration::from_secs(1));
        assert_eq!(p.speed(), None);
        let mut l = LinkRate::default();
        l.wrote(1000, Duration::from_secs(1));
        assert_eq!(l.get(), None);
        l.wrote(1 << 20, Duration::from_secs(1));
        assert_eq!(l.get(), Some(1 << 20));
        l.wrote(1 << 20, Duration::from_secs(2));
        assert_eq!(l.get(), Some(917_504)); // (3/4) 1 MiB/s + (1/4) 0.5 MiB/s
    }
}
