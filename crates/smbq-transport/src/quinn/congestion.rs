//! BBR with a LAN floor: smbq's BBR model (`quinn/bbr.rs`), except that on a path whose minimum
//! round trip is below [`LAN_RTT`] the window is never smaller than Cubic's, fed the same events.
//!
//! Why: BBR sizes its window from the measured bandwidth times the minimum RTT, and on
//! loopback or a LAN (tens of microseconds) it ramps up slowly and stays low: in the sweep
//! scenario on loopback, 1 MB copies ran at 77-83 MB/s with BBR against 257-537 with Cubic,
//! 10 MB at 89-129 against 538-553 (2026-11-25). Cubic alone collapses under random loss on
//! long paths, which is why BBR is the default (docs/quic.md, `[quic] congestion`). Taking the
//! larger of the two windows only where the round trip is LAN-short keeps both: with random loss
//! Cubic's window shrinks and BBR's carries on; without loss Cubic's grows as it does alone;
//! above the threshold it is BBR, unchanged.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::quinn::congestion::{Controller, ControllerFactory, ControllerMetrics, CubicConfig};
use quinn_proto::RttEstimator;

/// Minimum round trips below this count as a LAN (or loopback): a metro or internet path is
/// well above it, an Ethernet or Wi-Fi LAN below.
pub(super) const LAN_RTT: Duration = Duration::from_millis(2);

/// Builds [`BbrLanFloor`] controllers.
#[derive(Debug, Default)]
pub(super) struct BbrLanFloorConfig {
    bbr: Arc<super::bbr::BbrConfig>,
    cubic: Arc<CubicConfig>,
}

impl ControllerFactory for BbrLanFloorConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(BbrLanFloor {
            bbr: self.bbr.clone().build(now, current_mtu),
            cubic: self.cubic.clone().build(now, current_mtu),
            min_rtt: None,
        })
    }
}

pub(super) struct BbrLanFloor {
    bbr: Box<dyn Controller>,
    cubic: Box<dyn Controller>,
    /// The path's minimum RTT, once an acknowledgment measured one.
    min_rtt: Option<Duration>,
}

impl BbrLanFloor {
    fn on_lan(&self) -> bool {
        self.min_rtt.is_some_and(|r| r < LAN_RTT)
    }
}

impl Controller for BbrLanFloor {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.bbr.on_sent(now, bytes, last_packet_number);
        self.cubic.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.min_rtt = Some(rtt.min());
        self.bbr.on_ack(now, sent, bytes, app_limited, rtt);
        self.cubic.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.bbr
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
        self.cubic
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.bbr
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
        self.cubic
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.bbr.on_mtu_update(new_mtu);
        self.cubic.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        let bbr = self.bbr.window();
        if self.on_lan() {
            bbr.max(self.cubic.window())
        } else {
            bbr
        }
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.bbr.metrics();
        m.congestion_window = self.window();
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Self {
            bbr: self.bbr.clone_box(),
            cubic: self.cubic.clone_box(),
            min_rtt: self.min_rtt,
        })
    }

    fn initial_window(&self) -> u64 {
        self.bbr.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A controller with a fixed window that counts the events it is given.
    #[derive(Clone)]
    struct Fixed(u64, Arc<AtomicUsize>);

    impl Controller for Fixed {
        fn on_sent(&mut self, _: Instant, _: u64, _: u64) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        fn on_end_acks(&mut self, _: Instant, _: u64, _: bool, _: Option<u64>) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        fn on_congestion_event(&mut self, _: Instant, _: Instant, _: bool, _: u64) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        fn on_mtu_update(&mut self, _: u16) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
        fn window(&self) -> u64 {
            self.0
        }
        fn clone_box(&self) -> Box<dyn Controller> {
            Box::new(self.clone())
        }
        fn initial_window(&self) -> u64 {
            self.0
        }
        fn into_any(self: Box<Self>) -> Box<dyn Any> {
            self
        }
    }

    fn floor(
        bbr: u64,
        cubic: u64,
        min_rtt: Option<Duration>,
    ) -> (BbrLanFloor, [Arc<AtomicUsize>; 2]) {
        let counts = [Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0))];
        let c = BbrLanFloor {
            bbr: Box::new(Fixed(bbr, counts[0].clone())),
            cubic: Box::new(Fixed(cubic, counts[1].clone())),
            min_rtt,
        };
        (c, counts)
    }

    #[test]
    fn cubic_floors_bbr_only_on_a_lan_short_path() {
        // No RTT measured yet: BBR's window, as plain BBR.
        assert_eq!(floor(10_000, 90_000, None).0.window(), 10_000);
        // Loopback / LAN: the larger of the two, whichever it is.
        let lan = Some(Duration::from_micros(60));
        assert_eq!(floor(10_000, 90_000, lan).0.window(), 90_000);
        assert_eq!(floor(50_000, 20_000, lan).0.window(), 50_000);
        // At and above the threshold: BBR alone, even when Cubic's window is larger.
        assert_eq!(floor(10_000, 90_000, Some(LAN_RTT)).0.window(), 10_000);
        assert_eq!(
            floor(10_000, 90_000, Some(Duration::from_millis(20)))
                .0
                .window(),
            10_000
        );
        let (c, _) = floor(10_000, 90_000, lan);
        assert_eq!(c.metrics().congestion_window, 90_000);
        assert_eq!(c.clone_box().window(), 90_000);
    }

    #[test]
    fn both_controllers_see_every_event() {
        let (mut c, counts) = floor(1, 2, None);
        let now = Instant::now();
        c.on_sent(now, 1200, 1);
        c.on_end_acks(now, 0, false, Some(1));
        c.on_congestion_event(now, now, false, 1200);
        c.on_mtu_update(1452);
        for n in &counts {
            assert_eq!(n.load(Ordering::Relaxed), 4);
        }
    }

    /// smbq's model starts where quinn's BBR did, so the first round trip is unchanged.
    #[test]
    fn factory_starts_at_bbr_initial_window() {
        let c = Arc::new(BbrLanFloorConfig::default()).build(Instant::now(), 1200);
        let bbr = Arc::new(::quinn::congestion::BbrConfig::default()).build(Instant::now(), 1200);
        assert_eq!(c.window(), bbr.window());
        assert_eq!(c.initial_window(), bbr.initial_window());
    }
}
