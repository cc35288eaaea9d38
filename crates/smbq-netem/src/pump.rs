//! Moves packets of one direction: a tokio task reads the sending side's TUN device and decides
//! each packet's fate; a thread of its own (the delay line) hands it to the far side's device
//! at its delivery instant.
//!
//! The delay line is a plain thread because tokio's timer has a 1 ms tick and rounds every
//! deadline up to it: a 5 ms one-way delay would come out 5-6 ms, 10-20% long. A thread
//! sleeping with nanosleep(2) wakes within about 0.1 ms of its deadline (numbers below).

use std::fs::File;
use std::io::{self, Write};
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use tun_rs::AsyncDevice;

use crate::shaper::{Shaper, Verdict};
use crate::stats::Counters;

/// Packets waiting in the delay line at most: with the rate limit the router buffer bounds
/// them long before this; without one it caps memory (16 Ki x 1500 B is 24 MiB).
const DELAY_LINE_PACKETS: usize = 16 * 1024;

/// Largest packet a TUN read can return: an IPv4 or IPv6 packet's 16-bit length.
const MAX_PACKET: usize = 65_535;

/// How often an idle delay line checks whether the link is stopping.
const IDLE_POLL: Duration = Duration::from_millis(50);

struct Packet {
    deliver_at: Instant,
    bytes: Vec<u8>,
}

/// The running halves of one direction.
#[derive(Debug)]
pub(crate) struct Direction {
    pub(crate) reader: tokio::task::JoinHandle<()>,
    pub(crate) delay_line: std::thread::JoinHandle<()>,
}

/// Starts one direction: packets read from `from` go through `shaper` and come out on `to`;
/// while `down` is set every packet is dropped (a cut link).
pub(crate) fn start(
    name: &str,
    from: AsyncDevice,
    to: File,
    shaper: Shaper,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
    down: Arc<AtomicBool>,
) -> io::Result<Direction> {
    let (tx, rx) = sync_channel(DELAY_LINE_PACKETS);
    let delay_line = std::thread::Builder::new()
        .name(format!("netem-{name}"))
        .spawn({
            let counters = counters.clone();
            move || delay_line(rx, to, &counters, &stop)
        })?;
    let reader = tokio::spawn(read_loop(from, shaper, tx, counters, down));
    Ok(Direction { reader, delay_line })
}

async fn read_loop(
    from: AsyncDevice,
    mut shaper: Shaper,
    tx: SyncSender<Packet>,
    counters: Arc<Counters>,
    down: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; MAX_PACKET];
    loop {
        let len = match from.recv(&mut buf).await {
            Ok(len) => len,
            Err(e) => {
                // The device goes away only when the link is torn down.
                tracing::debug!(error = %e, "TUN read failed; direction stops");
                return;
            }
        };
        let now = Instant::now();
        counters.seen(len);
        let Some(packet) = buf.get(..len) else {
            continue;
        };
        if down.load(Ordering::Relaxed) {
            counters.lost();
            continue;
        }
        match shaper.decide(now, len) {
            Verdict::Deliver(deliver_at) => {
                let bytes = packet.to_vec();
                match tx.try_send(Packet { deliver_at, bytes }) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => counters.queue_full(),
                    Err(TrySendError::Disconnected(_)) => return,
                }
            }
            Verdict::DropLoss => counters.lost(),
            Verdict::DropQueue => counters.queue_full(),
            Verdict::DropMtu => counters.too_big(),
        }
    }
}

fn delay_line(rx: Receiver<Packet>, mut to: File, counters: &Counters, stop: &AtomicBool) {
    // The default 50 us timer slack lets the kernel defer each wake-up to batch timers; one
    // nanosecond asks for the deadline itself. Measured on the 2-core CI machine, overshoot of
    // a 2.5 ms sleep (median): tokio::time::sleep_until 676 us (1204 us for 5 ms), nanosleep
    // 118 us with the default slack, 91 us with this.
    if let Err(e) = rustix::thread::set_current_timer_slack(NonZeroU64::new(1)) {
        tracing::debug!(error = %e, "could not lower the timer slack");
    }
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let packet = match rx.recv_timeout(IDLE_POLL) {
            Ok(packet) => packet,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let wait = packet.deliver_at.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        match write(&mut to, &packet.bytes) {
            Ok(()) => counters.forwarded(packet.bytes.len()),
            Err(e) => {
                tracing::debug!(error = %e, "TUN write failed");
                counters.write_failed();
            }
        }
    }
}

/// Writes one packet. The descriptor is shared with the async reader, which made it
/// non-blocking; a TUN write queues into the stack and practically never reports
/// `WouldBlock`, but if it does, retry briefly rather than lose the packet.
fn write(to: &mut File, bytes: &[u8]) -> io::Result<()> {
    for _ in 0..100 {
        // One write(2) on a TUN descriptor injects exactly one packet.
        match to.write(bytes) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_micros(20));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::ErrorKind::WouldBlock.into())
}
