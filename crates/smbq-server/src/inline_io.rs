//! Small writes run on the async worker that handles the request instead of hopping to
//! tokio's blocking pool and back.
//!
//! Why: a 4 KiB `pwrite` into the page cache takes a few microseconds, while the hop costs
//! two thread wake-ups and context switches. Measured with `smbq bench fio` on the 2-core
//! machine (S2/S3, 4 KiB random writes over encrypted TCP): the hop was about a third of the
//! server's CPU, and writing in place raised S3 from ~127 to ~189 MB/s at lower CPU.
//! Reads already do this through `RWF_NOWAIT` (handlers/read.rs); buffered writes cannot,
//! since ext4 and tmpfs refuse `RWF_NOWAIT` for them.
//!
//! Why it cannot stall the server: a buffered write may still block (journal commit, dirty
//! page throttling, a slow network file system). So
//! - only one write at a time runs inline, and only on a runtime with at least two workers:
//!   another worker always keeps serving the other connections;
//! - a write that took longer than [`SLOW`] sends every write to the blocking pool for
//!   [`BACKOFF`], so storage that blocks costs at most one stalled worker per backoff period.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Largest write done inline: copying more into the page cache holds a worker for tens of
/// microseconds, about what the hop costs (the same bound as the cached READ).
pub(crate) const INLINE_WRITE_MAX: usize = 64 * 1024;

/// An inline write slower than this means the storage can block.
const SLOW: Duration = Duration::from_millis(2);

/// How long writes go to the blocking pool after a slow one.
const BACKOFF: Duration = Duration::from_secs(2);

/// The process-wide gate: one inline write at a time, and the breaker.
pub(crate) struct InlineGate {
    busy: AtomicBool,
    /// Nanoseconds after `epoch` until which writes take the blocking pool; 0: never tripped.
    tripped_until: AtomicU64,
    epoch: Instant,
    /// Writes done inline so far.
    passes: AtomicU64,
    slow: Duration,
    backoff: Duration,
}

/// Held while one inline write runs; reports its duration to the breaker when dropped.
pub(crate) struct InlinePass<'a> {
    gate: &'a InlineGate,
    started: Instant,
}

impl InlineGate {
    fn new(slow: Duration, backoff: Duration) -> Self {
        Self {
            busy: AtomicBool::new(false),
            tripped_until: AtomicU64::new(0),
            epoch: Instant::now(),
            passes: AtomicU64::new(0),
            slow,
            backoff,
        }
    }

    /// The server's gate.
    pub(crate) fn get() -> &'static InlineGate {
        static GATE: OnceLock<InlineGate> = OnceLock::new();
        GATE.get_or_init(|| InlineGate::new(SLOW, BACKOFF))
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// A pass to write `len` bytes inline, when that is allowed now: small enough, on a
    /// multi-worker runtime, nobody else writing inline, the breaker not tripped.
    pub(crate) fn try_pass(&self, len: usize) -> Option<InlinePass<'_>> {
        if len > INLINE_WRITE_MAX || !multi_worker_runtime() {
            return None;
        }
        self.try_pass_at(Instant::now())
    }

    fn try_pass_at(&self, now: Instant) -> Option<InlinePass<'_>> {
        if self.nanos(now) < self.tripped_until.load(Ordering::Relaxed) {
            return None;
        }
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        self.passes.fetch_add(1, Ordering::Relaxed);
        Some(InlinePass {
            gate: self,
            started: now,
        })
    }

    /// How many writes ran inline.
    pub(crate) fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }

    fn finish(&self, started: Instant, ended: Instant) {
        if ended.saturating_duration_since(started) > self.slow {
            let until = self.nanos(ended.checked_add(self.backoff).unwrap_or(ended));
            self.tripped_until.fetch_max(until, Ordering::Relaxed);
            tracing::debug!(
                took_us = ended.saturating_duration_since(started).as_micros(),
                "a small write blocked: writes go to the blocking pool for a while"
            );
        }
        self.busy.store(false, Ordering::Release);
    }
}

impl Drop for InlinePass<'_> {
    fn drop(&mut self) {
        self.gate.finish(self.started, Instant::now());
    }
}

/// Whether the current runtime has another worker to keep serving while this one writes.
fn multi_worker_runtime() -> bool {
    tokio::runtime::Handle::try_current().is_ok_and(|h| {
        h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
            && h.metrics().num_workers() >= 2
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn one_inline_write_at_a_time() {
        let g = InlineGate::new(SLOW, BACKOFF);
        let now = Instant::now();
        let first = g.try_pass_at(now).unwrap();
        assert!(
            g.try_pass_at(now).is_none(),
            "a second writer waits its turn elsewhere"
        );
        drop(first);
        assert!(g.try_pass_at(Instant::now()).is_some());
    }

    #[test]
    fn a_slow_write_sends_writes_to_the_pool_for_the_backoff() {
        let g = InlineGate::new(Duration::from_millis(2), Duration::from_secs(2));
        let t0 = Instant::now();
        // Fast: no trip.
        g.finish(t0, t0 + Duration::from_micros(50));
        assert!(g.try_pass_at(t0 + Duration::from_millis(1)).is_some());
        // Slow: tripped from its end for the backoff.
        let end = t0 + Duration::from_millis(10);
        g.finish(t0, end);
        assert!(g.try_pass_at(end + Duration::from_secs(1)).is_none());
        assert!(g.try_pass_at(end + Duration::from_millis(2100)).is_some());
    }

    #[test]
    fn large_writes_and_single_worker_runtimes_never_go_inline() {
        let g = InlineGate::new(SLOW, BACKOFF);
        // No runtime at all.
        assert!(g.try_pass(4096).is_none());
        let single = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        single.block_on(async { assert!(g.try_pass(4096).is_none()) });
        let one = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        one.block_on(async { assert!(g.try_pass(4096).is_none()) });
        let two = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        two.block_on(async {
            assert!(g.try_pass(INLINE_WRITE_MAX + 1).is_none());
            assert!(g.try_pass(4096).is_some());
        });
    }
}
