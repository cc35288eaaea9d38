//! smbq's BBR: a model-based congestion window after BBR v1 (draft-cardwell-iccrg-bbr-
//! congestion-control-00), written for quinn's `Controller` interface.
//!
//! Why not quinn's own BBR (`bbr-pure`): measured through the link emulator at 20 ms RTT and
//! 2 % loss (2026-11-27), every bulk transfer began with 250-400 ms at 1-20 MB/s before
//! climbing to 250-300 MB/s, and now and then (2 of about 110 one-stream downloads of 100
//! files) a download stayed at ~13 MB/s for five seconds. Its ProbeRTT timer starts out expired (no ProbeRTT has happened yet), so the first
//! acknowledgment that is not application-limited, the first of any bulk transfer, drops the
//! window to 0.75 x the bandwidth measured during the logon exchanges; and at 2 % loss its
//! STARTUP ends in the first round that is in loss recovery, wherever the estimate stands.
//!
//! What this model does instead:
//! - The bandwidth is the largest delivery rate (bytes acknowledged between a packet's sending
//!   and its acknowledgment, over the longer of the sending and acknowledging spans, as Linux
//!   samples it) of the last [`BW_ROUNDS`] round trips that produced a sample; rounds that were
//!   application-limited or idle do not age it, so an SMB client pausing between bulk transfers
//!   starts the next one at the rate it had. Samples taken while the sender had nothing to send
//!   count only when they raise the estimate.
//! - The minimum RTT is the smallest sample of the last 10 s. When it expires under load,
//!   ProbeRTT holds the window at half a bandwidth-delay product for 200 ms and a round trip,
//!   so that the queue drains and the next sample shows the path's RTT (a path whose RTT grew
//!   is then sized by it, instead of by a minimum it no longer has).
//! - STARTUP doubles the window every round trip until the bandwidth has grown less than 25 %
//!   in three rounds; DRAIN holds the window at one BDP until the queue that built is gone;
//!   PROBE_BW then cycles the window over 1.25 / 0.75 / 1 x 2 BDP, one phase per minimum RTT.
//!   quinn paces by the window, so the gains act on it.
//! - Random loss is not congestion to this model (as in BBR v1): the window follows the
//!   measured delivery rate, which loss already lowers when a queue overflows. Persistent
//!   congestion (RFC 9002 7.6) sets the window to its minimum and starts over in STARTUP.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::quinn::congestion::{Controller, ControllerFactory};
use quinn_proto::RttEstimator;

/// Round trips the bandwidth filter remembers (BBR v1's BtlBwFilterLen).
pub(super) const BW_ROUNDS: usize = 10;
/// STARTUP's gain: 2/ln(2), the smallest that doubles delivery every round trip.
const HIGH_GAIN: f64 = 2.885;
/// The window over the bandwidth-delay product in PROBE_BW.
const CWND_GAIN: f64 = 2.0;
/// PROBE_BW's phases, one minimum RTT each.
const PHASES: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// STARTUP ends after this many round trips without 25 % more bandwidth.
const FULL_BW_ROUNDS: u32 = 3;
/// Packets the window never goes under (RFC 9002 7.2: kMinimumWindow is 2, BBR keeps 4).
const MIN_PACKETS: u64 = 4;
/// The first window: what quinn's own BBR starts with (200 x 1200 bytes), so that changing the
/// controller does not change a connection's first round trip.
const INITIAL_WINDOW: u64 = 200 * 1200;
/// Sent-packet marks kept for rate samples at most; a mark older than every packet in flight
/// is dropped as acknowledgments pass it, so this bounds only a pathological backlog.
const MAX_MARKS: usize = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Startup,
    Drain,
    ProbeBw {
        phase: usize,
        since: Instant,
    },
    /// `done`: when the window reached its ProbeRTT size, plus [`PROBE_RTT_TIME`], and the
    /// round then current (the probe lasts at least one round trip too).
    ProbeRtt {
        done: Option<(Instant, u64)>,
    },
}

/// How long the minimum RTT stays valid without a new sample at or below it (BBR v1).
const MIN_RTT_LIFETIME: Duration = Duration::from_secs(10);
/// How long ProbeRTT holds the window down once it got there.
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// ProbeRTT's window over the bandwidth-delay product (BBR v2/v3; v1 used 4 packets).
const PROBE_RTT_GAIN: f64 = 0.5;

/// The connection's delivery state when a packet left, shared by every packet sent until the
/// next acknowledgment changes it (the draft's per-packet P.delivered, P.delivered_time and
/// P.first_sent_time).
#[derive(Clone, Copy, Debug)]
struct Mark {
    /// When the first packet with this state left.
    sent: Instant,
    delivered: u64,
    delivered_at: Instant,
    /// When the packet most recently acknowledged at that point had left.
    first_sent: Instant,
}

/// The model, fed each acknowledgment's RTT sample directly (quinn's `RttEstimator` cannot be
/// built outside quinn, so tests drive this).
#[derive(Clone, Debug)]
pub(super) struct Model {
    mtu: u64,
    cwnd: u64,
    /// The window before ProbeRTT, restored after it.
    prior_cwnd: u64,
    mode: Mode,
    /// The smallest RTT sample of the last [`MIN_RTT_LIFETIME`], and when it was taken.
    min_rtt: Option<(Duration, Instant)>,
    /// The minimum RTT was just replaced because it had expired: time for ProbeRTT.
    min_rtt_expired: bool,
    delivered: u64,
    delivered_at: Instant,
    /// When the packet acknowledged last had left.
    last_acked_sent: Instant,
    /// Bytes in flight as of the last acknowledgments, plus what was sent since.
    in_flight: u64,
    marks: VecDeque<Mark>,
    /// Round trips counted; a round ends when a packet sent after it began is acknowledged.
    round: u64,
    next_round_delivered: u64,
    round_started: bool,
    /// Largest counted sample of the current round, and of each of the last rounds that had
    /// one (rounds with none, app-limited or idle, do not age the filter).
    round_max: u64,
    past: VecDeque<u64>,
    full_bw: u64,
    full_bw_rounds: u32,
    filled_pipe: bool,
    acked: u64,
}

impl Model {
    pub(super) fn new(now: Instant, mtu: u16) -> Self {
        Model {
            mtu: u64::from(mtu),
            cwnd: INITIAL_WINDOW,
            prior_cwnd: INITIAL_WINDOW,
            mode: Mode::Startup,
            min_rtt: None,
            min_rtt_expired: false,
            delivered: 0,
            delivered_at: now,
            last_acked_sent: now,
            in_flight: 0,
            marks: VecDeque::new(),
            round: 0,
            next_round_delivered: 0,
            round_started: false,
            round_max: 0,
            past: VecDeque::with_capacity(BW_ROUNDS),
            full_bw: 0,
            full_bw_rounds: 0,
            filled_pipe: false,
            acked: 0,
        }
    }

    fn min_window(&self) -> u64 {
        MIN_PACKETS * self.mtu
    }

    /// Bytes per second: the largest sample of the last [`BW_ROUNDS`] rounds that had one.
    pub(super) fn bandwidth(&self) -> u64 {
        self.past.iter().copied().fold(self.round_max, u64::max)
    }

    fn bdp(&self, gain: f64) -> Option<u64> {
        let (bw, (rtt, _)) = (self.bandwidth(), self.min_rtt?);
        (bw > 0).then_some((bw as f64 * rtt.as_secs_f64() * gain) as u64)
    }

    pub(super) fn window(&self) -> u64 {
        self.cwnd
    }

    #[cfg(test)]
    pub(super) fn in_startup(&self) -> bool {
        self.mode == Mode::Startup
    }

    #[cfg(test)]
    pub(super) fn in_probe_rtt(&self) -> bool {
        matches!(self.mode, Mode::ProbeRtt { .. })
    }

    #[cfg(test)]
    pub(super) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(|m| m.0)
    }

    pub(super) fn on_sent(&mut self, now: Instant, bytes: u64) {
        if self.in_flight == 0 {
            // Restarting from idle: the time nothing was in flight is not delivery time.
            self.delivered_at = now;
            self.last_acked_sent = now;
        }
        self.in_flight = self.in_flight.saturating_add(bytes);
        if self
            .marks
            .back()
            .is_some_and(|m| m.delivered == self.delivered)
        {
            return;
        }
        if self.marks.len() == MAX_MARKS {
            self.marks.pop_front();
        }
        self.marks.push_back(Mark {
            sent: now,
            delivered: self.delivered,
            delivered_at: self.delivered_at,
            first_sent: self.last_acked_sent,
        });
    }

    pub(super) fn on_ack(&mut self, now: Instant, sent: Instant, bytes: u64, app_limited: bool) {
        self.update_min_rtt(now, now.saturating_duration_since(sent));
        self.delivered += bytes;
        self.delivered_at = now;
        self.last_acked_sent = self.last_acked_sent.max(sent);
        self.acked += bytes;
        // The mark a packet left under is the last one made at or before its sending.
        while self.marks.get(1).is_some_and(|m| m.sent <= sent) {
            self.marks.pop_front();
        }
        let Some(mark) = self.marks.front().copied().filter(|m| m.sent <= sent) else {
            return;
        };
        if mark.delivered >= self.next_round_delivered {
            self.next_round_delivered = self.delivered;
            self.round += 1;
            self.round_started = true;
        }
        // The longer of the sending and the acknowledging spans, so that neither a burst of
        // sends nor a burst of ACKs makes the rate look higher than the path's (the draft's
        // rate sample, as Linux computes it); shorter than the minimum RTT is no sample.
        let send_span = sent.saturating_duration_since(mark.first_sent);
        let ack_span = now.saturating_duration_since(mark.delivered_at);
        let interval = send_span.max(ack_span);
        let Some((min_rtt, _)) = self.min_rtt else {
            return;
        };
        if interval < min_rtt || interval.is_zero() {
            return;
        }
        let rate = ((self.delivered - mark.delivered) as f64 / interval.as_secs_f64()) as u64;
        if !app_limited || rate > self.bandwidth() {
            self.round_max = self.round_max.max(rate);
        }
    }

    fn update_min_rtt(&mut self, now: Instant, sample: Duration) {
        let expired = self
            .min_rtt
            .is_some_and(|(_, at)| now.saturating_duration_since(at) > MIN_RTT_LIFETIME);
        if expired {
            self.min_rtt_expired = true;
        }
        if expired || self.min_rtt.is_none_or(|(min, _)| sample <= min) {
            self.min_rtt = Some((sample, now));
        }
    }

    pub(super) fn on_end_acks(&mut self, now: Instant, in_flight: u64, app_limited: bool) {
        self.in_flight = in_flight;
        if self.round_started {
            self.round_started = false;
            if self.round_max > 0 {
                if self.past.len() == BW_ROUNDS - 1 {
                    self.past.pop_front();
                }
                self.past.push_back(self.round_max);
                self.round_max = 0;
            }
            if !self.filled_pipe && !app_limited {
                self.check_full_pipe();
            }
        }
        if std::mem::take(&mut self.min_rtt_expired)
            && !app_limited
            && !matches!(self.mode, Mode::ProbeRtt { .. })
        {
            // An application-limited sender drains the queue by itself: the sample that
            // replaced the expired minimum is already a fair one.
            self.prior_cwnd = self.cwnd;
            self.mode = Mode::ProbeRtt { done: None };
        }
        self.advance_mode(now, in_flight);
        self.set_window();
        self.acked = 0;
    }

    fn check_full_pipe(&mut self) {
        let bw = self.bandwidth();
        if bw as f64 >= self.full_bw as f64 * 1.25 {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        if self.full_bw_rounds >= FULL_BW_ROUNDS {
            self.filled_pipe = true;
        }
    }

    fn probe_rtt_window(&self) -> u64 {
        self.bdp(PROBE_RTT_GAIN).unwrap_or(0).max(self.min_window())
    }

    fn advance_mode(&mut self, now: Instant, in_flight: u64) {
        match self.mode {
            Mode::Startup if self.filled_pipe => self.mode = Mode::Drain,
            Mode::Drain if self.bdp(1.0).is_none_or(|bdp| in_flight <= bdp) => {
                // Start after the probing phases, as BBR v1 does when leaving DRAIN.
                self.mode = Mode::ProbeBw {
                    phase: 2,
                    since: now,
                };
            }
            Mode::ProbeBw { phase, since } => {
                let Some((rtt, _)) = self.min_rtt else { return };
                let drained = phase == 1 && self.bdp(1.0).is_some_and(|bdp| in_flight <= bdp);
                if now.saturating_duration_since(since) > rtt || drained {
                    self.mode = Mode::ProbeBw {
                        phase: (phase + 1) % PHASES.len(),
                        since: now,
                    };
                }
            }
            Mode::ProbeRtt { done: None } if in_flight <= self.probe_rtt_window() => {
                self.mode = Mode::ProbeRtt {
                    done: Some((now + PROBE_RTT_TIME, self.round)),
                };
            }
            Mode::ProbeRtt {
                done: Some((at, round)),
            } if now >= at && self.round > round => {
                self.cwnd = self.cwnd.max(self.prior_cwnd);
                self.mode = if self.filled_pipe {
                    Mode::ProbeBw {
                        phase: 2,
                        since: now,
                    }
                } else {
                    Mode::Startup
                };
            }
            _ => {}
        }
    }

    fn set_window(&mut self) {
        let gain = match self.mode {
            Mode::Startup => HIGH_GAIN,
            // quinn paces by the window, so the queue STARTUP built drains only if the window
            // drops to the path's bandwidth-delay product.
            Mode::Drain => 1.0,
            Mode::ProbeBw { phase, .. } => CWND_GAIN * PHASES.get(phase).copied().unwrap_or(1.0),
            Mode::ProbeRtt { .. } => {
                self.cwnd = self.probe_rtt_window();
                return;
            }
        };
        let target = self.bdp(gain).unwrap_or(INITIAL_WINDOW);
        self.cwnd = if self.filled_pipe {
            self.cwnd.saturating_add(self.acked).min(target)
        } else if self.cwnd < target || self.delivered < INITIAL_WINDOW {
            // STARTUP: one more byte in flight for every byte delivered, doubling per round.
            self.cwnd.saturating_add(self.acked)
        } else {
            self.cwnd
        };
        self.cwnd = self.cwnd.max(self.min_window());
    }

    /// RFC 9002 7.6.2: the window falls to its minimum. The path may have changed, so the
    /// bandwidth it measured is forgotten and STARTUP finds it again.
    pub(super) fn on_persistent_congestion(&mut self) {
        self.cwnd = self.min_window();
        self.past.clear();
        self.round_max = 0;
        self.full_bw = 0;
        self.full_bw_rounds = 0;
        self.filled_pipe = false;
        self.mode = Mode::Startup;
    }

    pub(super) fn on_mtu_update(&mut self, mtu: u16) {
        self.mtu = u64::from(mtu);
        self.cwnd = self.cwnd.max(self.min_window());
    }
}

/// Builds [`Bbr`] controllers.
#[derive(Debug, Default)]
pub(super) struct BbrConfig;

impl ControllerFactory for BbrConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(Bbr(Model::new(now, current_mtu)))
    }
}

/// [`Model`] as a quinn congestion controller.
#[derive(Clone, Debug)]
pub(super) struct Bbr(Model);

impl Controller for Bbr {
    fn on_sent(&mut self, now: Instant, bytes: u64, _last_packet_number: u64) {
        self.0.on_sent(now, bytes);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.0.on_ack(now, sent, bytes, app_limited);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        _largest_packet_num_acked: Option<u64>,
    ) {
        self.0.on_end_acks(now, in_flight, app_limited);
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent: Instant,
        is_persistent_congestion: bool,
        _lost_bytes: u64,
    ) {
        if is_persistent_congestion {
            self.0.on_persistent_congestion();
        }
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.0.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        self.0.window()
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(self.clone())
    }

    fn initial_window(&self) -> u64 {
        INITIAL_WINDOW
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

#[cfg(test)]
#[path = "bbr_tests.rs"]
mod tests;
