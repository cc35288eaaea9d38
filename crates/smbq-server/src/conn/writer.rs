//! The writer task: sends queued frames in order, batching what queued up meanwhile into one
//! `write_chunks` (writev on TCP, one send on QUIC), and counts what left for the backlog.

use bytes::Bytes;
use smbq_transport::ChunkWrite;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::backlog::Queued;

/// Segments gathered into one write when responses queue up (writev takes up to 1024).
const WRITE_BATCH: usize = 256;

/// Which stream a writer serves, for its sending priority (docs/multistream.md 9).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Control,
    Data,
}

/// `gone` is cancelled when a write fails: the unsent bytes then never drain, and a loop
/// waiting for them must end the connection instead.
pub(super) fn spawn(
    mut writer: Box<dyn ChunkWrite>,
    mut out_rx: mpsc::UnboundedReceiver<Vec<Bytes>>,
    queued: Queued,
    gone: CancellationToken,
    role: Role,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if role == Role::Control {
            writer.set_priority(smbq_transport::PRIORITY_CONTROL);
        }
        let mut batch: Vec<Bytes> = Vec::new();
        let mut priority = smbq_transport::DataPriority::default();
        while let Some(frame) = out_rx.recv().await {
            batch.clear();
            batch.extend(frame);
            // Responses finished meanwhile go out in the same writev / QUIC send.
            while batch.len() < WRITE_BATCH {
                match out_rx.try_recv() {
                    Ok(more) => batch.extend(more),
                    Err(_) => break,
                }
            }
            let bytes = batch.iter().map(Bytes::len).sum();
            if role == Role::Data
                && let Some(p) = priority.for_batch(bytes, std::time::Instant::now())
            {
                // Metadata answers overtake READ data on the connection's other streams.
                writer.set_priority(p);
            }
            let started = std::time::Instant::now();
            let r = writer.write_chunks(&mut batch).await;
            queued.took(bytes, started.elapsed());
            // The kernel's view costs a system call: asked only after the writes the pace
            // measures (small answers, 4 KiB random I/O, would pay it for nothing), and
            // until the link is known (NEGOTIATE's answer gives the window and the RTT, so
            // the first READs know the link).
            if bytes >= smbq_compress::pace::MEASURED_MIN || queued.link_rate().is_none() {
                queued.path(writer.tcp_path());
            }
            queued.written(bytes);
            if r.is_err() {
                gone.cancel();
                return;
            }
        }
        let _ = writer.shutdown().await;
    })
}
