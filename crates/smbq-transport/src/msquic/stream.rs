//! The SMB stream's halves on MsQuic. MsQuic delivers received bytes in callbacks on its own
//! threads; they are copied into `Bytes` there (MsQuic lends its buffers only for the call)
//! and queued for the reader. Once the queue holds `RECV_PAUSE` bytes the callback answers
//! PENDING, which stops deliveries and, with them, the flow-control credit the peer gets,
//! until the reader has taken the queue below `RECV_RESUME`. Sends hand MsQuic the response
//! chunks themselves (no copy) and are bounded by `SEND_IN_FLIGHT` bytes not yet completed.
//!
//! The halves share one [`Closer`]: when both are dropped it finishes the stream, lets its
//! last bytes be acknowledged (bounded), closes the connection with code 0 and releases the
//! handles off the async threads (closing a MsQuic handle waits for its callbacks).

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use smbq_msquic_ffi::OwnedStream;
use smbq_msquic_ffi::msquic::{
    Connection, ConnectionShutdownFlags, Status, StatusCode, StreamEvent, StreamRef,
    StreamShutdownFlags,
};
use tokio::sync::{Notify, oneshot};

use super::Reg;
use crate::chunk_io::{ChunkRead, ChunkWrite, IoFuture};
use crate::quic::CLOSE_NORMAL;

/// Received bytes queued for the reader at which deliveries pause.
const RECV_PAUSE: usize = 8 << 20;
/// Queued bytes below which paused deliveries resume.
const RECV_RESUME: usize = 2 << 20;
/// Bytes handed to MsQuic whose send has not completed, per stream. Above it a write waits
/// for the oldest send; with MsQuic's send buffering a send completes once buffered.
const SEND_IN_FLIGHT: usize = 16 << 20;
/// How long the last bytes may take to be acknowledged before the connection closes anyway.
const LINGER: Duration = Duration::from_secs(5);
/// Bound on waiting for MsQuic to report a connection's shutdown complete.
const CLOSE_WAIT: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Recv {
    queue: VecDeque<Bytes>,
    queued: usize,
    /// A delivery answered PENDING: its length, to be completed once the queue drains.
    paused: Option<u64>,
    fin: bool,
    failed: Option<io::ErrorKind>,
}

/// What the stream's callback and the halves share.
#[derive(Default)]
pub(super) struct StreamShared {
    recv: Mutex<Recv>,
    readable: Notify,
    /// The send side was finished and everything on it acknowledged, or the stream is gone.
    send_ended: AtomicBool,
    send_ended_notify: Notify,
    /// The connection's SHUTDOWN_COMPLETE was seen.
    conn_closed: AtomicBool,
    conn_closed_notify: Notify,
}

impl StreamShared {
    fn recv(&self) -> std::sync::MutexGuard<'_, Recv> {
        self.recv.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fail(&self, kind: io::ErrorKind) {
        {
            let mut r = self.recv();
            if !r.fin && r.failed.is_none() {
                r.failed = Some(kind);
            }
        }
        self.readable.notify_one();
    }

    fn end_send(&self) {
        self.send_ended.store(true, Ordering::Release);
        self.send_ended_notify.notify_waiters();
    }

    /// Called from the connection's callback at SHUTDOWN_COMPLETE.
    pub(super) fn connection_closed(&self) {
        self.fail(io::ErrorKind::ConnectionAborted);
        self.end_send();
        self.conn_closed.store(true, Ordering::Release);
        self.conn_closed_notify.notify_waiters();
    }

    /// The stream's event handler (runs on MsQuic's threads, must not block or panic).
    pub(super) fn handler(
        self: &Arc<Self>,
    ) -> impl FnMut(StreamRef, StreamEvent) -> Result<(), Status> + Send + 'static {
        let shared = self.clone();
        move |_stream, event| shared.on_event(event)
    }

    fn on_event(&self, event: StreamEvent<'_>) -> Result<(), Status> {
        match event {
            StreamEvent::Receive {
                total_buffer_length,
                buffers,
                ..
            } => {
                let total = *total_buffer_length;
                let mut data = BytesMut::with_capacity(usize::try_from(total).unwrap_or(0));
                for b in buffers {
                    data.extend_from_slice(b.as_bytes());
                }
                let pause = {
                    let mut r = self.recv();
                    if !data.is_empty() {
                        r.queued += data.len();
                        r.queue.push_back(data.freeze());
                    }
                    let pause = r.queued >= RECV_PAUSE;
                    if pause {
                        r.paused = Some(total);
                    }
                    pause
                };
                self.readable.notify_one();
                if pause {
                    return Err(Status::new(StatusCode::QUIC_STATUS_PENDING));
                }
            }
            StreamEvent::PeerSendShutdown => {
                self.recv().fin = true;
                self.readable.notify_one();
            }
            StreamEvent::PeerSendAborted { .. } => self.fail(io::ErrorKind::ConnectionReset),
            StreamEvent::SendShutdownComplete { .. } => self.end_send(),
            StreamEvent::ShutdownComplete { .. } => {
                self.fail(io::ErrorKind::ConnectionAborted);
                self.end_send();
            }
            _ => {}
        }
        Ok(())
    }
}

/// Owns the connection and its stream between the two halves; see the module comment.
pub(super) struct Closer {
    pub(super) conn: Option<Connection>,
    pub(super) stream: Option<Arc<OwnedStream>>,
    pub(super) shared: Arc<StreamShared>,
    /// Keeps the registration open while the connection lives (closing it waits for them).
    pub(super) reg: Arc<Reg>,
    pub(super) written: AtomicBool,
    pub(super) rt: tokio::runtime::Handle,
    /// Dropped when the connection is gone (the listener's per-IP slot).
    pub(super) on_close: Option<Box<dyn Send + Sync>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        let conn = self.conn.take();
        let stream = self.stream.take();
        let shared = self.shared.clone();
        let reg = self.reg.clone();
        let written = self.written.load(Ordering::Acquire);
        let on_close = self.on_close.take();
        self.rt.spawn(async move {
            if let (Some(stream), true) = (&stream, written)
                && stream.shutdown(StreamShutdownFlags::GRACEFUL, 0).is_ok()
            {
                let ended = shared.send_ended_notify.notified();
                if !shared.send_ended.load(Ordering::Acquire) {
                    let _ = tokio::time::timeout(LINGER, ended).await;
                }
            }
            if let Some(conn) = &conn {
                let closed = shared.conn_closed_notify.notified();
                conn.shutdown(ConnectionShutdownFlags::NONE, u64::from(CLOSE_NORMAL));
                if !shared.conn_closed.load(Ordering::Acquire) {
                    let _ = tokio::time::timeout(CLOSE_WAIT, closed).await;
                }
            }
            let _ = tokio::task::spawn_blocking(move || {
                drop(stream);
                drop(conn);
                drop(on_close);
                drop(reg);
            })
            .await;
        });
    }
}

/// Splits the stream into the SMB halves.
pub(super) fn split(closer: Closer) -> (MsReader, MsWriter) {
    let closer = Arc::new(closer);
    (
        MsReader {
            closer: closer.clone(),
        },
        MsWriter {
            closer,
            in_flight: VecDeque::new(),
            in_flight_bytes: 0,
        },
    )
}

pub(super) struct MsReader {
    closer: Arc<Closer>,
}

impl MsReader {
    /// Takes the next queued chunk, resuming paused deliveries once the queue is low.
    fn take(&self) -> Option<io::Result<Option<Bytes>>> {
        let (item, resume) = {
            let mut r = self.closer.shared.recv();
            if let Some(chunk) = r.queue.pop_front() {
                r.queued -= chunk.len();
                let resume = (r.queued < RECV_RESUME).then(|| r.paused.take()).flatten();
                (Some(Ok(Some(chunk))), resume)
            } else if let Some(kind) = r.failed {
                (Some(Err(io::Error::from(kind))), None)
            } else if r.fin {
                (Some(Ok(None)), None)
            } else {
                (None, None)
            }
        };
        if let (Some(n), Some(stream)) = (resume, &self.closer.stream) {
            stream.receive_complete(n);
        }
        item
    }
}

impl ChunkRead for MsReader {
    fn read_chunk(&mut self) -> IoFuture<'_, Option<Bytes>> {
        Box::pin(async move {
            loop {
                // One reader: a wake-up between the look and the wait is kept as a permit.
                if let Some(item) = self.take() {
                    return item;
                }
                self.closer.shared.readable.notified().await;
            }
        })
    }
}

pub(super) struct MsWriter {
    closer: Arc<Closer>,
    /// Sends not yet completed, oldest first, with their sizes.
    in_flight: VecDeque<(oneshot::Receiver<bool>, usize)>,
    in_flight_bytes: usize,
}

impl MsWriter {
    fn stream(&self) -> io::Result<&Arc<OwnedStream>> {
        self.closer.written.store(true, Ordering::Release);
        self.closer
            .stream
            .as_ref()
            .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))
    }

    /// Waits for the oldest send; a cancelled one means the stream is gone.
    async fn settle_oldest(&mut self) -> io::Result<()> {
        if let Some((done, len)) = self.in_flight.pop_front() {
            self.in_flight_bytes -= len;
            if done.await.unwrap_or(true) {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
        Ok(())
    }
}

impl ChunkWrite for MsWriter {
    fn write_chunks<'a>(&'a mut self, chunks: &'a mut [Bytes]) -> IoFuture<'a, ()> {
        Box::pin(async move {
            let batch: Vec<Bytes> = chunks
                .iter_mut()
                .map(std::mem::take)
                .filter(|c| !c.is_empty())
                .collect();
            let len: usize = batch.iter().map(Bytes::len).sum();
            if len == 0 {
                return Ok(());
            }
            while self.in_flight_bytes > 0 && self.in_flight_bytes + len > SEND_IN_FLIGHT {
                self.settle_oldest().await?;
            }
            let done = self
                .stream()?
                .send(batch, false)
                .map_err(|s| io::Error::new(io::ErrorKind::BrokenPipe, format!("{s:?}")))?;
            self.in_flight.push_back((done, len));
            self.in_flight_bytes += len;
            Ok(())
        })
    }

    fn shutdown(&mut self) -> IoFuture<'_, ()> {
        Box::pin(async move {
            while !self.in_flight.is_empty() {
                self.settle_oldest().await?;
            }
            // An error means the stream was finished or reset already: it has ended either way.
            let _ = self.stream()?.shutdown(StreamShutdownFlags::GRACEFUL, 0);
            Ok(())
        })
    }
}
