//! The SMB stream's two halves on quinn, and the signal that both are gone. The halves own the
//! QUIC connection between them: whoever holds the connection handle (the listener's watcher,
//! the client's closer task) closes it with code 0 once [`Gone::ended`] resolves.

use std::io;
use std::time::Duration;

use ::quinn::{RecvStream, SendStream};
use bytes::Bytes;
use tokio::sync::oneshot;

use crate::chunk_io::{ChunkRead, ChunkWrite, IoFuture};

/// After the SMB side finished the stream, how long its last bytes may take to be acknowledged
/// before the connection is closed anyway.
const LINGER: Duration = Duration::from_secs(5);
/// Chunks taken from quinn per lock of its connection state; handed out one by one.
const CHUNK_BATCH: usize = 32;

/// Splits a bidirectional stream into its halves and the signal of their end.
pub(super) fn split(send: SendStream, recv: RecvStream) -> (QuicReader, QuicWriter, Gone) {
    let (reader_handoff, reader_gone) = oneshot::channel();
    let (writer_handoff, writer_gone) = oneshot::channel();
    (
        QuicReader {
            inner: Some(recv),
            batch: vec![Bytes::new(); CHUNK_BATCH],
            next: 0,
            filled: 0,
            handoff: Some(reader_handoff),
        },
        QuicWriter {
            inner: Some(send),
            written: false,
            handoff: Some(writer_handoff),
        },
        Gone {
            reader: reader_gone,
            writer: writer_gone,
        },
    )
}

/// A data stream's halves (docs/multistream.md). They do not own the connection: dropped, the
/// send side is finished (quinn finishes a dropped stream) and the receive side stopped.
pub(super) fn data_stream(send: SendStream, recv: RecvStream) -> crate::DataStream {
    crate::DataStream {
        reader: Box::new(QuicReader {
            inner: Some(recv),
            batch: vec![Bytes::new(); CHUNK_BATCH],
            next: 0,
            filled: 0,
            handoff: None,
        }),
        writer: Box::new(QuicWriter {
            inner: Some(send),
            written: false,
            handoff: None,
        }),
    }
}

/// Resolves through [`Gone::ended`] when the SMB side has dropped both halves.
pub(super) struct Gone {
    reader: oneshot::Receiver<RecvStream>,
    /// The send stream, and whether anything was written or shut down on it.
    writer: oneshot::Receiver<(SendStream, bool)>,
}

/// The streams of a connection whose SMB side has finished, to be dropped only after the
/// connection is closed: dropped before, quinn would finish the send side and send
/// STOP_SENDING for the receive side, and a stream that never carried a byte would reach the
/// peer as a new, empty one.
pub(super) type Streams = (Option<SendStream>, Option<RecvStream>);

impl Gone {
    /// Waits for both halves to be dropped. If anything was written, finishes the send side
    /// and lets its last bytes be acknowledged (bounded), so closing the connection afterwards
    /// loses nothing.
    pub(super) async fn ended(self) -> Streams {
        let handed = self.writer.await.ok();
        let recv = self.reader.await.ok();
        let send = match handed {
            Some((mut send, true)) => {
                let _ = send.finish();
                let _ = tokio::time::timeout(LINGER, send.stopped()).await;
                Some(send)
            }
            Some((send, false)) => Some(send),
            None => None,
        };
        (send, recv)
    }
}

/// The SMB read half: quinn's receive stream, whose chunks are slices of the packets quinn
/// decrypted in place. While it lives the connection stays open.
pub(super) struct QuicReader {
    inner: Option<RecvStream>,
    /// Chunks read but not handed out yet: `batch[next..filled]`.
    batch: Vec<Bytes>,
    next: usize,
    filled: usize,
    handoff: Option<oneshot::Sender<RecvStream>>,
}

impl ChunkRead for QuicReader {
    fn read_chunk(&mut self) -> IoFuture<'_, Option<Bytes>> {
        Box::pin(async move {
            if self.next >= self.filled {
                // Ordered reads: every chunk follows the previous one in the stream. Cancel
                // safe (quinn), and nothing is taken before it resolves.
                let Some(inner) = self.inner.as_mut() else {
                    return Err(io::ErrorKind::NotConnected.into());
                };
                match inner
                    .read_chunks(&mut self.batch)
                    .await
                    .map_err(read_error)?
                {
                    Some(n) => {
                        self.filled = n;
                        self.next = 0;
                    }
                    None => return Ok(None),
                }
            }
            let chunk = self.batch.get_mut(self.next).map(std::mem::take);
            self.next += 1;
            Ok(chunk)
        })
    }
}

/// quinn's own conversion says only "connection lost"; the reason (idle timeout, closed by the
/// peer with its code, reset) is what a user or a log needs.
fn read_error(e: ::quinn::ReadError) -> io::Error {
    let kind = io::Error::from(e.clone()).kind();
    match e {
        ::quinn::ReadError::ConnectionLost(c) => {
            io::Error::new(kind, format!("connection lost: {c}"))
        }
        other => io::Error::new(kind, other.to_string()),
    }
}

impl Drop for QuicReader {
    fn drop(&mut self) {
        if let (Some(stream), Some(tx)) = (self.inner.take(), self.handoff.take()) {
            // If the receiver is gone the connection is closed already; dropping is right.
            let _ = tx.send(stream);
        }
    }
}

/// The SMB write half. On drop the stream goes back through [`Gone`], whose holder finishes
/// it and lets its last bytes be acknowledged before closing the connection.
pub(super) struct QuicWriter {
    inner: Option<SendStream>,
    written: bool,
    handoff: Option<oneshot::Sender<(SendStream, bool)>>,
}

impl QuicWriter {
    fn stream(&mut self) -> io::Result<&mut SendStream> {
        self.written = true;
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

impl ChunkWrite for QuicWriter {
    fn write_chunks<'a>(&'a mut self, chunks: &'a mut [Bytes]) -> IoFuture<'a, ()> {
        Box::pin(async move {
            self.stream()?.write_all_chunks(chunks).await?;
            Ok(())
        })
    }

    fn shutdown(&mut self) -> IoFuture<'_, ()> {
        Box::pin(async move {
            // An error means the stream was finished or reset already: it has ended either way.
            let _ = self.stream()?.finish();
            Ok(())
        })
    }

    fn set_priority(&mut self, priority: i32) {
        if let Some(s) = &self.inner {
            // A closed stream has nothing left to schedule.
            let _ = s.set_priority(priority);
        }
    }
}

impl Drop for QuicWriter {
    fn drop(&mut self) {
        if let (Some(stream), Some(tx)) = (self.inner.take(), self.handoff.take()) {
            // If the receiver is gone the connection is closed already; dropping is right.
            let _ = tx.send((stream, self.written));
        }
    }
}
