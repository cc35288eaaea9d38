//! The quinn side of the multi-stream extension (docs/multistream.md 4): the server's gate,
//! fed by the listener's watcher, and the client's opener.

use std::io;

use ::quinn::VarInt;
use tokio::sync::{mpsc, oneshot};

use super::stream::data_stream;
use crate::more_streams::{BoxFuture, DataStream, StreamGate, StreamOpener};

/// The SMB layer's end of the gate.
pub(super) struct QuinnGate {
    limit: u16,
    grant: Option<oneshot::Sender<u16>>,
    streams: mpsc::Receiver<DataStream>,
}

/// The watcher's end: learns of the grant, hands accepted streams over.
pub(super) struct GateFeed {
    pub(super) grant: oneshot::Receiver<u16>,
    pub(super) streams: mpsc::Sender<DataStream>,
}

/// A gate for a connection that may be granted `limit` data streams (> 0).
pub(super) fn gate(limit: u16) -> (QuinnGate, GateFeed) {
    let (grant_tx, grant_rx) = oneshot::channel();
    // At most `limit` data streams exist at once (the QUIC limit), so the queue never holds
    // more than that; the feed uses try_send and drops a stream it cannot queue.
    let (tx, rx) = mpsc::channel(usize::from(limit.max(1)));
    (
        QuinnGate {
            limit,
            grant: Some(grant_tx),
            streams: rx,
        },
        GateFeed {
            grant: grant_rx,
            streams: tx,
        },
    )
}

impl StreamGate for QuinnGate {
    fn limit(&self) -> u16 {
        self.limit
    }

    fn grant(&mut self, streams: u16) {
        if let Some(tx) = self.grant.take() {
            let _ = tx.send(streams.min(self.limit));
        }
    }

    fn accept(&mut self) -> BoxFuture<'_, Option<DataStream>> {
        Box::pin(self.streams.recv())
    }
}

/// Raises the peer's bidirectional stream limit to the control stream plus `streams`.
pub(super) fn allow(conn: &::quinn::Connection, streams: u16) {
    conn.set_max_concurrent_bi_streams(VarInt::from_u32(1 + u32::from(streams)));
}

/// The client's opener: further bidirectional streams on its connection.
pub(super) struct QuinnOpener(pub(super) ::quinn::Connection);

impl StreamOpener for QuinnOpener {
    fn open(&self) -> BoxFuture<'_, io::Result<DataStream>> {
        Box::pin(async move {
            let (send, recv) = self.0.open_bi().await?;
            Ok(data_stream(send, recv))
        })
    }
}
