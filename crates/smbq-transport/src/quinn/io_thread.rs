//! quinn's own work on one thread of its own: the endpoint driver (UDP receive, routing
//! packets to connections) and every connection's driver (decryption, ACKs, congestion
//! control, packet building, encryption, GSO sends).
//!
//! Why: on tokio's work-stealing runtime the endpoint driver, the connection driver and the
//! task reading the stream wake each other for every batch of packets, and each wake can
//! move a task to another worker (a futex wake, a cache miss, a task switch). Measured on
//! this 2-core machine with quinn's own `perf` tool: a receiver on a 2-worker runtime moved
//! 620 MB/s, on a 1-worker runtime 1150 MB/s. Here quinn's tasks share one thread and hand
//! the SMB side whole batches of stream data, one cross-thread wake per batch.
//!
//! Off by default (`[quic] io_thread`): in `smbq bench` on that machine, where client and
//! server share two cores, it raised raw QUIC ~10% but lowered SMB over QUIC S1 read by
//! 10-25% (the I/O thread and the SMB worker then compete with the client's for the cores).

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use ::quinn::{AsyncTimer, AsyncUdpSocket, Runtime, TokioRuntime};
use tokio::sync::oneshot;

/// A current-thread tokio runtime on a dedicated thread, as quinn's [`Runtime`]. The thread
/// ends when the last user is gone: the endpoint and every connection hold this (quinn keeps
/// its runtime in each), so it lives exactly as long as something QUIC does.
pub(crate) struct IoThread {
    handle: tokio::runtime::Handle,
    /// Dropped with the last reference; the thread's runtime then shuts down.
    _stop: oneshot::Sender<()>,
}

impl fmt::Debug for IoThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoThread").finish_non_exhaustive()
    }
}

impl IoThread {
    /// Starts the thread, named after the thread creating the endpoint with `-q` appended
    /// (`smbq` -> `smbq-q`), so per-thread CPU accounting by name prefix still attributes it
    /// to its owner; `fallback` when the creator has no name.
    pub(crate) fn start(fallback: &str) -> io::Result<Arc<Self>> {
        let name = std::thread::current()
            .name()
            .map_or_else(|| fallback.to_string(), |n| format!("{n}-q"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new().name(name).spawn(move || {
            let _ = rt.block_on(stopped);
            // Tasks still there (a driver of a connection being torn down) are dropped.
            rt.shutdown_background();
        })?;
        Ok(Arc::new(Self {
            handle,
            _stop: stop,
        }))
    }
}

impl Runtime for IoThread {
    fn new_timer(&self, i: Instant) -> Pin<Box<dyn AsyncTimer>> {
        let _in = self.handle.enter();
        TokioRuntime.new_timer(i)
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        self.handle.spawn(future);
    }

    fn wrap_udp_socket(&self, t: std::net::UdpSocket) -> io::Result<Arc<dyn AsyncUdpSocket>> {
        // Registered with this thread's reactor, so readiness wakes the driver here.
        let _in = self.handle.enter();
        TokioRuntime.wrap_udp_socket(t)
    }

    fn now(&self) -> Instant {
        TokioRuntime.now()
    }
}
