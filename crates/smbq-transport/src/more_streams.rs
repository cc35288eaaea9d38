//! Further streams of one QUIC connection, for smbq's multi-stream extension
//! (docs/multistream.md). The server's side is a gate: no stream beyond the first is allowed
//! until the SMB layer grants them (section 4.2, after the first session), and then at most the
//! granted number at once. The client's side opens them.

use std::future::Future;
use std::io;
use std::pin::Pin;

use crate::chunk_io::{ChunkRead, ChunkWrite};

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One data stream's halves, framed like the control stream.
pub struct DataStream {
    pub reader: Box<dyn ChunkRead>,
    pub writer: Box<dyn ChunkWrite>,
}

impl std::fmt::Debug for DataStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DataStream")
    }
}

/// The server's hold on a connection's further streams.
pub trait StreamGate: Send {
    /// The most data streams this connection may be granted (`[quic] max_streams`, > 0).
    fn limit(&self) -> u16;
    /// Lets the peer hold `streams` data streams besides the control stream, from now on
    /// (QUIC MAX_STREAMS). Once: later calls change nothing.
    fn grant(&mut self, streams: u16);
    /// The next data stream the peer opened after the grant; None once the connection is gone.
    fn accept(&mut self) -> BoxFuture<'_, Option<DataStream>>;
}

/// The client's way to open data streams on its connection.
pub trait StreamOpener: Send + Sync {
    /// Opens a data stream; waits while the server's stream limit is reached.
    fn open(&self) -> BoxFuture<'_, io::Result<DataStream>>;
}

/// Sending priorities on a connection with data streams (docs/multistream.md 9): the control
/// stream (breaks, CANCEL, SESSION_SETUP) first, then streams sending small messages
/// (metadata), then streams moving bulk data.
pub const PRIORITY_CONTROL: i32 = 1;
pub const PRIORITY_SMALL: i32 = 0;
pub const PRIORITY_BULK: i32 = -1;
/// A write batch above this many bytes is bulk (a READ response or WRITE request with data).
pub const BULK_BYTES: usize = 64 * 1024;

/// The priority a data stream sends a batch of `bytes` at.
pub fn priority_for(bytes: usize) -> i32 {
    if bytes > BULK_BYTES {
        PRIORITY_BULK
    } else {
        PRIORITY_SMALL
    }
}
