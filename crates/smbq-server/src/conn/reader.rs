//! One reader task per transport stream, each with its own deframer: it reads, cuts whole
//! frames out (rejecting an oversized length from the 4-byte header before buffering it) and
//! hands them to the connection loop tagged with their stream. The channel holds a few batches
//! at most, so a loop that stops taking frames (its backlog is full) stops the reading too,
//! and the client's sends back up into its own socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use smbq_proto::engine::StreamId;
use smbq_proto::framing::Deframer;
use smbq_transport::ChunkRead;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ConnError;

/// Batches waiting for the loop, per stream. A batch is what one read produced (at most one
/// read's bytes plus one frame that spanned reads), so this bounds a stream's queued input.
pub(super) const QUEUED_BATCHES: usize = 4;

/// What a reader tells the loop.
pub(super) enum Inbound {
    /// Whole frames, in order.
    Frames(StreamId, Vec<Bytes>),
    /// The stream ended: `Ok` at EOF, else why.
    Closed(StreamId, Result<(), ConnError>),
}

/// The largest frame the engine accepts now (small until a session is valid), kept current
/// by the loop after every frame.
pub(super) type FrameLimit = Arc<AtomicU32>;

/// `gone` is cancelled when the stream ends, besides the `Closed` sent after its frames: a loop
/// whose backlog is full reads no frames (so no `Closed` either) but must still learn that
/// the client left.
pub(super) fn spawn(
    stream: StreamId,
    mut reader: Box<dyn ChunkRead>,
    chunked: bool,
    limit: FrameLimit,
    tx: mpsc::Sender<Inbound>,
    gone: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _gone = gone.drop_guard();
        let mut deframer = Deframer::new();
        loop {
            let eof = match read_step(reader.as_mut(), &mut deframer, chunked).await {
                Ok(eof) => eof,
                Err(e) => {
                    let _ = tx
                        .send(Inbound::Closed(stream, Err(ConnError::Io(e))))
                        .await;
                    return;
                }
            };
            let mut frames = Vec::new();
            let cut = loop {
                match deframer.next_frame(limit.load(Ordering::Acquire)) {
                    Ok(Some(f)) => frames.push(f),
                    Ok(None) => break Ok(()),
                    Err(v) => break Err(ConnError::Violation(v)),
                }
            };
            if !frames.is_empty() && tx.send(Inbound::Frames(stream, frames)).await.is_err() {
                return;
            }
            if let Err(e) = cut {
                let _ = tx.send(Inbound::Closed(stream, Err(e))).await;
                return;
            }
            if eof {
                let _ = tx.send(Inbound::Closed(stream, Ok(()))).await;
                return;
            }
        }
    })
}

/// One read into the deframer; `Ok(true)` at EOF. TCP reads straight into the deframer's
/// buffer; QUIC hands over the chunks quinn decrypted in place, and the deframer slices whole
/// frames out of them. Either way a frame is copied only when it spans QUIC chunks.
async fn read_step(
    reader: &mut dyn ChunkRead,
    deframer: &mut Deframer,
    chunked: bool,
) -> std::io::Result<bool> {
    if chunked {
        return Ok(match reader.read_chunk().await? {
            Some(chunk) => {
                deframer.push_bytes(chunk);
                false
            }
            None => true,
        });
    }
    let buf = deframer.buffer_mut();
    if buf.capacity() - buf.len() < 64 * 1024 {
        buf.reserve(256 * 1024);
    }
    Ok(reader.read_into(buf).await? == 0)
}
