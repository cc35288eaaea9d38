//! Typed events for the metrics (issue 17): the engine reports every response it sends, the
//! server every request a handler ran. The binary turns them into Prometheus series; below it
//! nothing knows about Prometheus. Calls are on the request path, so an observer must be cheap
//! and never block (atomic counters, no IO).

use std::sync::Arc;
use std::time::Duration;

use smbq_wire::{Command, NtStatus};

use crate::transport::Transport;

/// One request a handler ran, as the server saw it.
#[derive(Clone, Copy, Debug)]
pub struct Handled<'a> {
    pub command: Command,
    pub status: NtStatus,
    /// From the handler's start to its answer (queueing before it not included).
    pub elapsed: Duration,
    /// The share of the request's tree, if it has one.
    pub share: Option<&'a str>,
    pub transport: Transport,
    /// File data a READ returned or a WRITE wrote.
    pub read_bytes: u64,
    pub written_bytes: u64,
}

pub trait Observer: Send + Sync + std::fmt::Debug {
    /// A final response left the engine (interim responses are not counted) granting
    /// `credits`.
    fn response(&self, _command: Command, _status: NtStatus, _credits: u16) {}
    fn handled(&self, _h: &Handled<'_>) {}
    /// A logon failed (wrong password, unknown user without guest).
    fn logon_failed(&self) {}
    /// A QUIC connection ended with this smoothed round-trip time (its last word on the path;
    /// live connections are sampled by the binary).
    fn quic_ended(&self, _rtt: Duration) {}
    /// A compressed message was received (`sent` false) or sent: its size on the wire and
    /// uncompressed, and the algorithm that did most of the work.
    fn compression(&self, _c: &CompressionEvent) {}
}

/// One compressed message, for the metrics.
#[derive(Clone, Copy, Debug)]
pub struct CompressionEvent {
    pub sent: bool,
    pub algorithm: Option<smbq_compress::Algorithm>,
    pub wire_bytes: u64,
    pub plain_bytes: u64,
}

/// Observes nothing (the default).
#[derive(Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// A shared observer; `EngineConfig` and the server hold one each.
pub type SharedObserver = Arc<dyn Observer>;

pub fn none() -> SharedObserver {
    Arc::new(NoObserver)
}
