//! Further streams of one QUIC connection, for smbq's multi-stream extension
//! (docs/multistream.md). The server's side is a gate: no stream beyond the first is allowed
//! until the SMB layer grants them (section 4.2, after the first session), and then at most the
//! granted number at once. The client's side opens them.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::{Duration, Instant};

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

/// How long a data stream that sent bulk data keeps the bulk priority.
pub const BULK_LINGER: Duration = Duration::from_secs(1);

/// A data stream's sending priority, kept by the task that writes the stream.
///
/// A QUIC priority is the stream's, not a message's: it applies to everything the stream has
/// queued and not yet sent. Setting it from each batch alone (small: SMALL, else BULK) raised a
/// stream holding megabytes of READ data above the others whenever a small answer followed that
/// data, and lowered it again with the next READ: the streams in between were starved, and a
/// CREATE answered behind bulk data waited 300-600 ms (100 downloads over 8 streams at 2 % loss
/// and 20 ms RTT, 2026-11-27). So a stream that sent bulk data stays BULK until it has sent
/// none for [`BULK_LINGER`]; streams that only carry metadata stay SMALL and overtake it.
#[derive(Debug, Default)]
pub struct DataPriority {
    /// Set while the stream counts as moving bulk data.
    bulk_until: Option<Instant>,
    /// What the stream was last set to.
    current: Option<i32>,
}

impl DataPriority {
    /// The priority to send a batch of `bytes` at `now`, if it differs from the stream's
    /// current one (the caller then sets it on the stream).
    pub fn for_batch(&mut self, bytes: usize, now: Instant) -> Option<i32> {
        if bytes > BULK_BYTES {
            self.bulk_until = Some(now + BULK_LINGER);
        }
        let want = if self.bulk_until.is_some_and(|t| t > now) {
            PRIORITY_BULK
        } else {
            PRIORITY_SMALL
        };
        (self.current != Some(want)).then(|| {
            self.current = Some(want);
            want
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_moved_bulk_data_stays_bulk_for_a_while() {
        let t0 = Instant::now();
        let mut p = DataPriority::default();
        assert_eq!(p.for_batch(300, t0), Some(PRIORITY_SMALL));
        assert_eq!(p.for_batch(300, t0), None, "unchanged: not set again");
        assert_eq!(p.for_batch(BULK_BYTES + 1, t0), Some(PRIORITY_BULK));
        // A small answer behind the READ data does not lift the stream above the others.
        let soon = t0 + BULK_LINGER / 2;
        assert_eq!(p.for_batch(300, soon), None);
        assert_eq!(p.for_batch(BULK_BYTES, soon), None, "64 KiB is not bulk");
        // Once no bulk data went out for BULK_LINGER, small answers are SMALL again.
        assert_eq!(p.for_batch(300, t0 + BULK_LINGER), Some(PRIORITY_SMALL));
        // Fresh bulk data starts a new linger.
        let later = t0 + BULK_LINGER * 3;
        assert_eq!(p.for_batch(1 << 20, later), Some(PRIORITY_BULK));
        assert_eq!(p.for_batch(10, later + BULK_LINGER / 2), None);
    }
}
