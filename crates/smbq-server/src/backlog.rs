//! Back-pressure for one connection (issue 10, item 2): what its requests may still produce
//! (each counted at its CreditCharge times 64 KiB, MS-SMB2 3.3.5.2.5) plus the response bytes
//! waiting to be sent. Past the budget the connection loop stops taking frames from the
//! client, requests run only while their charge fits the budget (a semaphore, so a compound
//! or a burst of credits hoarded earlier cannot overshoot it), and responses grant no more
//! credits while unsent bytes fill half the budget. A client that never reads its responses
//! therefore cannot make the server hold more than about twice the budget.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// What one credit pays for (MS-SMB2 3.3.5.2.5: CreditCharge is the payload size in 64 KiB
/// units, request or response, whichever is larger).
pub const CREDIT_BYTES: usize = 64 * 1024;

/// Bytes handed to the writer task and not yet written, shared with it, and the rate at
/// which the writer gets them out (for compression's pace, smbq_compress::pace).
#[derive(Clone, Default)]
pub struct Queued {
    bytes: Arc<AtomicUsize>,
    drained: Arc<Notify>,
    link: Arc<parking_lot::Mutex<smbq_compress::LinkRate>>,
}

impl Queued {
    pub fn add(&self, frame: &[Bytes]) -> usize {
        let n = frame.iter().map(Bytes::len).sum();
        self.bytes.fetch_add(n, Ordering::Relaxed);
        n
    }

    /// The writer wrote `n` bytes (or gave up on them).
    pub fn written(&self, n: usize) {
        let _ = self
            .bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(n))
            });
        self.drained.notify_one();
    }

    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// One write of `n` bytes took `elapsed` (measured by the writer).
    pub fn took(&self, n: usize, elapsed: std::time::Duration) {
        self.link.lock().wrote(n, elapsed);
    }

    /// The kernel's view of the path after a write (TCP_INFO), when the transport has one.
    pub fn path(&self, sample: Option<smbq_transport::TcpPath>) {
        if let Some(s) = sample {
            self.link.lock().tcp(
                s.delivery_rate,
                s.app_limited,
                s.cwnd_bytes(),
                std::time::Duration::from_micros(u64::from(s.rtt_us)),
            );
        }
    }

    /// Bytes per second the writers get out, once measured.
    pub fn link_rate(&self) -> Option<u64> {
        self.link.lock().get()
    }

    /// Resolves after the next `written` (or at once if one happened since the last wait).
    pub async fn drained(&self) {
        self.drained.notified().await;
    }
}

pub struct Backlog {
    budget: usize,
    max_running: usize,
    /// Credits a response still grants while the queue is full and nothing else runs, so a
    /// client that spent its credits on the requests just answered can send the largest
    /// request again (the only way SMB has to give credits is in a response).
    floor: u32,
    /// Running requests hold their charge here, in credits.
    permits: Arc<Semaphore>,
    pub queued: Queued,
    /// Credits charged by each running request, by MessageId.
    running: HashMap<u64, u16>,
    running_credits: usize,
}

impl Backlog {
    /// `largest` is the largest request or response payload (max read/write).
    pub fn new(budget: usize, max_running: usize, largest: usize) -> Self {
        let budget = budget.max(CREDIT_BYTES).max(largest);
        Self {
            budget,
            max_running: max_running.max(1),
            floor: u32::try_from(largest.div_ceil(CREDIT_BYTES).max(1)).unwrap_or(u32::MAX),
            permits: Arc::new(Semaphore::new(budget / CREDIT_BYTES)),
            queued: Queued::default(),
            running: HashMap::new(),
            running_credits: 0,
        }
    }

    /// Counts the chain's requests as running and returns what its task must hold while it
    /// runs.
    pub fn start_chain(&mut self, charges: impl IntoIterator<Item = (u64, u16)>) -> ChainBudget {
        let mut credits = 0u32;
        for (mid, charge) in charges {
            self.started(mid, charge);
            credits += u32::from(charge.max(1));
        }
        ChainBudget {
            permits: self.permits.clone(),
            // A chain larger than the whole budget runs alone rather than never.
            credits: credits.min(u32::try_from(self.budget / CREDIT_BYTES).unwrap_or(u32::MAX)),
        }
    }

    pub fn started(&mut self, message_id: u64, credit_charge: u16) {
        let charge = credit_charge.max(1);
        if let Some(old) = self.running.insert(message_id, charge) {
            self.running_credits -= usize::from(old);
        }
        self.running_credits += usize::from(charge);
    }

    pub fn finished(&mut self, message_id: u64) {
        if let Some(c) = self.running.remove(&message_id) {
            self.running_credits -= usize::from(c);
        }
    }

    /// Whether the loop must stop taking frames until responses drain or requests finish.
    pub fn full(&self) -> bool {
        self.queued.bytes() + self.running_credits * CREDIT_BYTES >= self.budget
            || self.running.len() >= self.max_running
    }

    /// The most credits the client may hold unused (`u32::MAX`: only max_credits applies).
    /// While unsent responses fill half the budget, responses replenish nothing, apart from
    /// the `floor` when nothing else is running (else a client whose credits all went into
    /// the requests just answered would wait forever for a response that never comes).
    pub fn credit_ceiling(&self) -> u32 {
        if self.queued.bytes() < self.budget / 2 {
            u32::MAX
        } else if self.running.is_empty() {
            self.floor
        } else {
            0
        }
    }
}

/// The share of the budget a chain holds while its handlers run.
pub struct ChainBudget {
    permits: Arc<Semaphore>,
    credits: u32,
}

impl ChainBudget {
    /// Waits until the chain's charge fits. `None` only if the semaphore was closed, which
    /// this module never does.
    pub async fn acquire(self) -> Option<OwnedSemaphorePermit> {
        self.permits.acquire_many_owned(self.credits).await.ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const MIB: usize = 1024 * 1024;

    #[test]
    fn running_requests_and_queued_bytes_fill_the_budget() {
        let mut b = Backlog::new(64 * MIB, 512, 8 * MIB);
        assert_eq!(b.credit_ceiling(), u32::MAX);
        for mid in 0..7 {
            b.started(mid * 128, 128);
        }
        assert!(!b.full());
        b.started(7 * 128, 128);
        assert!(b.full(), "eight 8 MiB READs fill 64 MiB");
        b.finished(0);
        assert!(!b.full());
        let frame = [Bytes::from(vec![0u8; 40 * MIB])];
        let n = b.queued.add(&frame);
        assert!(b.full(), "7 running + 40 MiB unsent");
        assert_eq!(
            b.credit_ceiling(),
            0,
            "no credits while half the budget is unsent"
        );
        for mid in 1..7 {
            b.finished(mid * 128);
        }
        assert!(!b.full());
        assert_eq!(b.credit_ceiling(), 0, "one still running");
        b.finished(7 * 128);
        assert_eq!(
            b.credit_ceiling(),
            128,
            "the last answer lets one more 8 MiB request in"
        );
        b.queued.written(n);
        assert_eq!(b.credit_ceiling(), u32::MAX);
        b.finished(12345);
        assert_eq!(b.credit_ceiling(), u32::MAX, "unknown ids change nothing");
    }

    #[tokio::test]
    async fn chains_run_only_while_their_charge_fits() {
        let mut b = Backlog::new(32 * MIB, 512, 8 * MIB);
        let first = b
            .start_chain([(0, 128), (128, 128), (256, 128)])
            .acquire()
            .await;
        assert!(first.is_some());
        let second = b.start_chain([(384, 128), (512, 128)]);
        let waiting = tokio::spawn(second.acquire());
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "5 x 8 MiB do not fit in 32 MiB");
        drop(first);
        assert!(waiting.await.unwrap().is_some());
        let huge = b.start_chain((0..64).map(|i| (1000 + i * 128, 128)));
        assert!(
            huge.acquire().await.is_some(),
            "a chain over budget runs alone"
        );
    }

    #[test]
    fn too_many_small_requests_also_fill_it() {
        let mut b = Backlog::new(64 * MIB, 3, 8 * MIB);
        b.started(1, 0);
        b.started(2, 1);
        assert!(!b.full());
        b.started(3, 1);
        assert!(b.full());
    }
}
