//! What one direction of the emulated link does to the packets crossing it.

use std::io;
use std::time::Duration;

/// Ethernet's MTU, the default: the benchmark models a path through ordinary routers.
pub const DEFAULT_MTU: u16 = 1500;

/// Smallest MTU accepted: RFC 791 requires every IPv4 host to handle 68-octet datagrams, and
/// Linux refuses a lower MTU on an interface carrying IPv4.
pub const MIN_MTU: u16 = 68;

/// Settings of one direction of the link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSettings {
    /// Largest IP packet the direction carries; the sending side's interface gets this MTU, so
    /// its kernel fragments or refuses (DF) larger packets the way it would on a real link.
    pub mtu: u16,
    /// One-way propagation delay added to every forwarded packet.
    pub delay: Duration,
    /// Probability in `0.0..=1.0` that a packet is lost, drawn independently per packet.
    pub loss: f64,
    /// Bottleneck rate in bits per second (IP packet bytes, as a router counts them); `None`
    /// forwards as fast as the emulator can.
    pub rate_bps: Option<u64>,
    /// Router buffer in front of the rate limit, in bytes; a packet that would make the backlog
    /// exceed it is dropped (drop-tail). 0 selects [`LinkSettings::effective_queue_bytes`]'s
    /// default of one bandwidth-delay product. Ignored without a rate limit.
    pub queue_bytes: usize,
    /// Seed of the loss decisions, so a run can be repeated packet for packet.
    pub seed: u64,
}

impl Default for LinkSettings {
    fn default() -> Self {
        Self {
            mtu: DEFAULT_MTU,
            delay: Duration::ZERO,
            loss: 0.0,
            rate_bps: None,
            queue_bytes: 0,
            seed: 0x5eed,
        }
    }
}

impl LinkSettings {
    /// The router buffer actually used: `queue_bytes`, or when that is 0 one bandwidth-delay
    /// product (rate x round trip, taking the round trip as twice this direction's delay),
    /// the classic rule of thumb for sizing a bottleneck buffer so one TCP flow keeps the link
    /// busy. At least 16 full packets, so a link with no delay still absorbs a burst.
    pub fn effective_queue_bytes(&self) -> usize {
        if self.queue_bytes != 0 {
            return self.queue_bytes;
        }
        let floor = 16 * usize::from(self.mtu);
        let Some(rate) = self.rate_bps else {
            return floor;
        };
        let rtt = self.delay.saturating_mul(2);
        let bdp = u128::from(rate) * rtt.as_nanos() / 8 / 1_000_000_000;
        usize::try_from(bdp).unwrap_or(usize::MAX).max(floor)
    }

    pub(crate) fn validate(&self) -> io::Result<()> {
        let bad = |what: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, what.to_owned()));
        if self.mtu < MIN_MTU {
            return bad("mtu below 68, the IPv4 minimum");
        }
        if !(0.0..=1.0).contains(&self.loss) {
            return bad("loss must be a probability in 0..=1");
        }
        if self.rate_bps == Some(0) {
            return bad("rate_bps must be positive (None for no limit)");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_defaults_to_bdp_with_a_floor() {
        let s = LinkSettings {
            rate_bps: Some(20_000_000),
            delay: Duration::from_millis(10),
            ..LinkSettings::default()
        };
        // 20 Mbit/s x 20 ms = 400 kbit = 50 000 bytes.
        assert_eq!(s.effective_queue_bytes(), 50_000);
        let tiny = LinkSettings {
            delay: Duration::ZERO,
            ..s.clone()
        };
        assert_eq!(tiny.effective_queue_bytes(), 16 * 1500);
        let explicit = LinkSettings {
            queue_bytes: 3000,
            ..s
        };
        assert_eq!(explicit.effective_queue_bytes(), 3000);
    }

    #[test]
    fn validation_rejects_nonsense() {
        assert!(LinkSettings::default().validate().is_ok());
        for bad in [
            LinkSettings {
                loss: 1.5,
                ..LinkSettings::default()
            },
            LinkSettings {
                loss: f64::NAN,
                ..LinkSettings::default()
            },
            LinkSettings {
                mtu: 60,
                ..LinkSettings::default()
            },
            LinkSettings {
                rate_bps: Some(0),
                ..LinkSettings::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
