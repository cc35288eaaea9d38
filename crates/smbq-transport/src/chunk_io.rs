//! Byte-stream halves that move `Bytes` chunks instead of copying through caller buffers, so
//! data quinn has decrypted in place reaches the SMB engine without another copy, and
//! responses built as `Bytes` segments go out as they are (shared/ARCHITECTURE.md, "The data
//! path, with copies counted").

use std::future::Future;
use std::io;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};

/// The future every chunk operation returns (boxed so the halves can be trait objects).
pub type IoFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Room `read_into` makes when the caller's buffer has none, so a read never returns 0 for
/// lack of space (0 means end of stream).
pub(crate) const MIN_READ_ROOM: usize = 64 * 1024;

/// The receiving half of a connection's byte stream.
pub trait ChunkRead: Send {
    /// Next bytes of the stream, in order, without copying where the stack allows
    /// (quinn `RecvStream::read_chunk(usize::MAX, true)`); `Ok(None)` at a clean end of
    /// stream. Chunk boundaries say nothing about message boundaries.
    ///
    /// Cancel safe: a future dropped before it resolves has consumed nothing.
    fn read_chunk(&mut self) -> IoFuture<'_, Option<Bytes>>;

    /// Appends the next bytes of the stream to `buf` and returns how many; 0 at a clean end of
    /// stream. TCP reads straight into `buf`'s spare room (no copy: the cheapest way to fill
    /// a frame already started in a buffer); the default copies one `read_chunk`, which is
    /// what QUIC pays anyway for a frame spanning packets. Cancel safe like `read_chunk`.
    fn read_into<'a>(&'a mut self, buf: &'a mut BytesMut) -> IoFuture<'a, usize> {
        Box::pin(async move {
            Ok(match self.read_chunk().await? {
                Some(chunk) => {
                    buf.extend_from_slice(&chunk);
                    chunk.len()
                }
                None => 0,
            })
        })
    }
}

/// The sending half of a connection's byte stream.
pub trait ChunkWrite: Send {
    /// Writes every chunk, in order (quinn `SendStream::write_all_chunks` / a TCP
    /// `write_vectored` loop). Written chunks are left empty. Not cancel safe: a dropped
    /// future may have written part of the chunks.
    fn write_chunks<'a>(&'a mut self, chunks: &'a mut [Bytes]) -> IoFuture<'a, ()>;

    /// Ends the stream (QUIC FIN / TCP `shutdown(Write)`); bytes written before are still
    /// delivered.
    fn shutdown(&mut self) -> IoFuture<'_, ()>;

    /// Sending priority of this stream against the connection's others (higher first; QUIC
    /// only, local: nothing is signalled). A no-op where there is one stream.
    fn set_priority(&mut self, _priority: i32) {}

    /// What the kernel measured of the path under this stream (TCP only: TCP_INFO's
    /// delivery rate); None where the transport has no such view (QUIC).
    fn tcp_path(&self) -> Option<smbq_tcpinfo::TcpPath> {
        None
    }
}

/// Drops the first `n` written bytes from `chunks`, emptying whole chunks first; returns the
/// chunks not yet fully written.
pub(crate) fn consume(chunks: &mut [Bytes], mut n: usize) -> &mut [Bytes] {
    let mut done = 0;
    for chunk in chunks.iter_mut() {
        if n == 0 {
            break;
        }
        let take = n.min(chunk.len());
        let _ = chunk.split_to(take);
        n -= take;
        if chunk.is_empty() {
            done += 1;
        } else {
            break;
        }
    }
    // Also skips empty chunks the caller passed, so the loop never waits on nothing.
    while chunks.get(done).is_some_and(Bytes::is_empty) {
        done += 1;
    }
    chunks.split_at_mut(done).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consume_advances_across_chunks_and_skips_empties() {
        let mut c = [
            Bytes::from_static(b"abc"),
            Bytes::new(),
            Bytes::from_static(b"de"),
            Bytes::from_static(b"fgh"),
        ];
        let rest = consume(&mut c, 4);
        assert_eq!(rest.len(), 2);
        assert_eq!(&rest[0][..], b"e");
        assert_eq!(&rest[1][..], b"fgh");
        let rest = consume(rest, 4);
        assert!(rest.is_empty());
        assert!(c.iter().all(Bytes::is_empty));

        let mut lead = [Bytes::new(), Bytes::from_static(b"x")];
        assert_eq!(consume(&mut lead, 0).len(), 1);
    }
}
