//! Counters of what the link did, per direction.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of one direction's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Packets handed to the far side.
    pub packets_forwarded: u64,
    /// IP bytes handed to the far side.
    pub bytes_forwarded: u64,
    /// Packets dropped by the random loss.
    pub dropped_loss: u64,
    /// Packets dropped because the router buffer (or the delay line) was full.
    pub dropped_queue: u64,
    /// Packets dropped for exceeding the MTU.
    pub dropped_mtu: u64,
    /// Packets the far side's device refused.
    pub write_errors: u64,
    /// Largest packet read from the sending side, forwarded or not.
    pub largest_packet: u64,
}

impl DirectionStats {
    /// Every packet the direction read from its sending side.
    pub fn packets_seen(&self) -> u64 {
        self.packets_forwarded
            + self.dropped_loss
            + self.dropped_queue
            + self.dropped_mtu
            + self.write_errors
    }
}

/// A snapshot of both directions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Namespace A to namespace B.
    pub a_to_b: DirectionStats,
    /// Namespace B to namespace A.
    pub b_to_a: DirectionStats,
}

/// Live counters, shared by a direction's reader task and delay-line thread. Relaxed ordering:
/// each counter is independent and a snapshot need not be consistent across them.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    packets_forwarded: AtomicU64,
    bytes_forwarded: AtomicU64,
    dropped_loss: AtomicU64,
    dropped_queue: AtomicU64,
    dropped_mtu: AtomicU64,
    write_errors: AtomicU64,
    largest_packet: AtomicU64,
}

impl Counters {
    pub(crate) fn seen(&self, len: usize) {
        self.largest_packet.fetch_max(len as u64, Ordering::Relaxed);
    }
    pub(crate) fn forwarded(&self, len: usize) {
        self.packets_forwarded.fetch_add(1, Ordering::Relaxed);
        self.bytes_forwarded
            .fetch_add(len as u64, Ordering::Relaxed);
    }
    pub(crate) fn lost(&self) {
        self.dropped_loss.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn queue_full(&self) {
        self.dropped_queue.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn too_big(&self) {
        self.dropped_mtu.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn write_failed(&self) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> DirectionStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        DirectionStats {
            packets_forwarded: get(&self.packets_forwarded),
            bytes_forwarded: get(&self.bytes_forwarded),
            dropped_loss: get(&self.dropped_loss),
            dropped_queue: get(&self.dropped_queue),
            dropped_mtu: get(&self.dropped_mtu),
            write_errors: get(&self.write_errors),
            largest_packet: get(&self.largest_packet),
        }
    }
}
