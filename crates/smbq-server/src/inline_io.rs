//! Small writes run on the async worker that handles the request instead of hopping to
//! tokio's blocking pool and back.
//!
//! Why: a 4 KiB `pwrite` into the page cache takes a few microseconds, while the hop costs
//! two thread wake-ups and context switches. Measured with `smbq bench fio` on the 2-core
//! machine (S2/S3, 4 KiB random writes over encrypted TCP): the hop was about a third of the
//! server's CPU, and writing in place raised S3 from ~127 to ~185 MB/s at lower CPU.
//! Reads already do this through `RWF_NOWAIT` (handlers/read.rs); buffered writes cannot,
//! since ext4 and tmpfs refuse `RWF_NOWAIT` for them.
//!
//! Why it cannot stall the server: a buffered write may still block (journal commit, dirty
//! page throttling, the inode lock another write holds, a network file system). So
//! - only files on local disk or memory file systems qualify (`VfsFile::local_storage`): a
//!   network or FUSE mount inside a share can hang a write without bound;
//! - no write goes inline while a write to the same file runs on the blocking pool: that one
//!   holds the inode lock, and dirty-page throttling may pause it there for up to 200 ms, a
//!   wait a client could otherwise impose on a worker at will;
//! - only one write at a time runs inline, and only on a runtime with at least two workers:
//!   another worker always keeps serving the other connections;
//! - a write that took longer than [`SLOW`] sends every write to the blocking pool for
//!   [`BACKOFF`], so storage that blocks costs at most one stalled worker per backoff period
//!   (a throttled inline write itself pauses at most ~200 ms: under a tenth of one worker).

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::file_state::FileKey;

/// Largest write done inline: copying more into the page cache holds a worker for tens of
/// microseconds, about what the hop costs (the same bound as the cached READ).
pub(crate) const INLINE_WRITE_MAX: usize = 64 * 1024;

/// An inline write slower than this means the storage can block.
const SLOW: Duration = Duration::from_millis(2);

/// How long writes go to the blocking pool after a slow one.
const BACKOFF: Duration = Duration::from_secs(2);

/// Slots of the per-file count of writes on the blocking pool (a file maps to one slot by
/// hash; two files sharing a slot only send each other's small writes to the pool).
const POOL_SLOTS: usize = 64;

/// The process-wide gate: one inline write at a time, and the breaker.
pub(crate) struct InlineGate {
    busy: AtomicBool,
    /// Writes running on the blocking pool, per slot of their file.
    pool_writes: [AtomicU32; POOL_SLOTS],
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
            pool_writes: std::array::from_fn(|_| AtomicU32::new(0)),
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

    fn slot(&self, key: FileKey) -> &AtomicU32 {
        let h = BuildHasherDefault::<DefaultHasher>::default().hash_one(key);
        let [first, ..] = &self.pool_writes;
        self.pool_writes
            .get(usize::try_from(h % POOL_SLOTS as u64).unwrap_or(0))
            .unwrap_or(first)
    }

    /// A pass to write `len` bytes to `key` inline, when that is allowed now: small enough, a
    /// local file system, no write to the file on the pool, on a multi-worker runtime, nobody
    /// else writing inline, the breaker not tripped.
    pub(crate) fn try_pass(
        &self,
        len: usize,
        key: FileKey,
        local_storage: bool,
    ) -> Option<InlinePass<'_>> {
        if len > INLINE_WRITE_MAX || !local_storage || !multi_worker_runtime() {
            return None;
        }
        if self.slot(key).load(Ordering::Acquire) != 0 {
            return None;
        }
        self.try_pass_at(Instant::now())
    }

    fn tripped(&self, now: Instant) -> bool {
        self.nanos(now) < self.tripped_until.load(Ordering::Relaxed)
    }

    fn try_pass_at(&self, now: Instant) -> Option<InlinePass<'_>> {
        if self.tripped(now) {
            return None;
        }
        self.busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // The write that held the pass until just now may have tripped the breaker after the
        // check above.
        if self.tripped(now) {
            self.busy.store(false, Ordering::Release);
            return None;
        }
        self.passes.fetch_add(1, Ordering::Relaxed);
        Some(InlinePass {
            gate: self,
            started: now,
        })
    }

    /// Marks a write to `key` running on the blocking pool until the guard is dropped.
    pub(crate) fn pool_write(&self, key: FileKey) -> PoolWrite<'_> {
        let slot = self.slot(key);
        slot.fetch_add(1, Ordering::AcqRel);
        PoolWrite { slot }
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

/// A write on the blocking pool, counted against its file's slot while it lives.
pub(crate) struct PoolWrite<'a> {
    slot: &'a AtomicU32,
}

impl Drop for PoolWrite<'_> {
    fn drop(&mut self) {
        self.slot.fetch_sub(1, Ordering::AcqRel);
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

    fn key(ino: u64) -> FileKey {
        FileKey {
            dev: 1,
            ino,
            stream: 0,
        }
    }

    #[test]
    fn large_writes_remote_files_and_single_worker_runtimes_never_go_inline() {
        let g = InlineGate::new(SLOW, BACKOFF);
        // No runtime at all.
        assert!(g.try_pass(4096, key(1), true).is_none());
        let single = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        single.block_on(async { assert!(g.try_pass(4096, key(1), true).is_none()) });
        let one = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        one.block_on(async { assert!(g.try_pass(4096, key(1), true).is_none()) });
        let two = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        two.block_on(async {
            assert!(g.try_pass(INLINE_WRITE_MAX + 1, key(1), true).is_none());
            assert!(
                g.try_pass(4096, key(1), false).is_none(),
                "not local storage"
            );
            assert!(g.try_pass(4096, key(1), true).is_some());
        });
    }

    #[test]
    fn a_write_to_the_file_on_the_pool_keeps_its_small_writes_off_the_worker() {
        let g = InlineGate::new(SLOW, BACKOFF);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        rt.block_on(async {
            let on_pool = g.pool_write(key(7));
            assert!(g.try_pass(4096, key(7), true).is_none());
            let nested = g.pool_write(key(7));
            drop(on_pool);
            assert!(g.try_pass(4096, key(7), true).is_none(), "one still runs");
            drop(nested);
            assert!(g.try_pass(4096, key(7), true).is_some());
            // Another file is not held back (unless it shares the slot).
            let other = (8..200)
                .map(key)
                .find(|k| !std::ptr::eq(g.slot(*k), g.slot(key(7))))
                .unwrap();
            let _on_pool = g.pool_write(key(7));
            assert!(g.try_pass(4096, other, true).is_some());
        });
    }
}
