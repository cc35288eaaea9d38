//! The data streams of smbq's multi-stream extension (docs/multistream.md): the loop's
//! record of them, and what it does when one opens, ends, or owes nothing more.

use std::collections::HashSet;

use bytes::Bytes;
use smbq_proto::engine::StreamId;
use smbq_transport::{DataStream, StreamGate};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::super::reader::{self, Inbound};
use super::super::{ConnError, writer};
use super::ConnLoop;

/// The connection's data streams besides the control stream.
pub(super) struct DataStreams {
    /// Granted data streams to open the gate with, once the first session is valid.
    pub(super) to_grant: Option<u16>,
    pub(super) granted: bool,
    pub(super) next_id: u64,
    /// Streams whose client direction ended: their writer goes once nothing is owed on them.
    pub(super) closing: HashSet<StreamId>,
    pub(super) readers: Vec<tokio::task::JoinHandle<()>>,
    /// Where new readers send their frames (the control reader's channel).
    pub(super) inbound: mpsc::Sender<Inbound>,
    /// Cancelled when sending on a data stream fails.
    pub(super) failed: CancellationToken,
}

impl DataStreams {
    /// None granted yet; readers of future data streams send to `inbound`.
    pub(super) fn new(inbound: mpsc::Sender<Inbound>) -> Self {
        Self {
            to_grant: None,
            granted: false,
            next_id: 1,
            closing: HashSet::new(),
            readers: Vec::new(),
            inbound,
            failed: CancellationToken::new(),
        }
    }
}

pub(super) async fn accept_stream(gate: &mut Option<Box<dyn StreamGate>>) -> Option<DataStream> {
    match gate {
        Some(g) => g.accept().await,
        None => std::future::pending().await,
    }
}

impl ConnLoop {
    /// A data stream the client opened after the grant: its own reader and writer, feeding
    /// the one engine (docs/multistream.md 6).
    pub(super) fn add_stream(&mut self, s: DataStream) {
        let ds = &mut self.streams;
        let id = StreamId(ds.next_id);
        ds.next_id += 1;
        ds.readers.retain(|r| !r.is_finished());
        let (tx, rx) = mpsc::unbounded_channel::<Vec<Bytes>>();
        // The writer's task ends when its sender is dropped (`retire_streams`, or the end of
        // the connection); a failed write ends the connection.
        drop(writer::spawn(
            s.writer,
            rx,
            self.backlog.queued.clone(),
            ds.failed.clone(),
            writer::Role::Data,
        ));
        ds.readers.push(reader::spawn(
            id,
            s.reader,
            true,
            self.frame_limit.clone(),
            ds.inbound.clone(),
            CancellationToken::new(),
        ));
        self.writers.insert(id, tx);
        tracing::debug!(stream = id.0, "data stream opened");
    }

    /// The client's direction of a data stream ended (docs/multistream.md 7): at FIN nothing
    /// more comes; after a reset its requests are cancelled. Either way the responses it is
    /// owed still go out on it, then it is finished. A broken frame ends the connection.
    pub(super) fn data_stream_ended(
        &mut self,
        stream: StreamId,
        r: Result<(), ConnError>,
    ) -> Result<(), ConnError> {
        match r {
            Ok(()) => {}
            Err(ConnError::Io(e)) => {
                tracing::debug!(stream = stream.0, error = %e, "data stream reset");
                self.engine.cancel_stream(stream);
            }
            Err(e) => return Err(e),
        }
        self.streams.closing.insert(stream);
        self.drain();
        Ok(())
    }

    /// Finishes the data streams that ended and owe nothing more.
    pub(super) fn retire_streams(&mut self) {
        if self.streams.closing.is_empty() {
            return;
        }
        let done: Vec<StreamId> = self
            .streams
            .closing
            .iter()
            .copied()
            .filter(|s| !self.engine.stream_busy(*s))
            .collect();
        for s in done {
            self.streams.closing.remove(&s);
            self.writers.remove(&s);
            tracing::debug!(stream = s.0, "data stream finished");
        }
    }
}
