//! Reused buffers for the data path (issue 11): a READ's data and a sealed frame are up to
//! 8 MiB each, and allocating them fresh per request made the kernel fault in and zero new
//! pages for every one (`clear_page_erms` and page faults were ~45% of the server's CPU on an
//! encrypted 1 GiB read; jemalloc purges allocations of 8 MiB and more at once). Buffers come
//! back here when the last `Bytes` referring to them is dropped, up to a bounded number of
//! bytes, and buffers unused for a while are freed by [`trim_idle`].
//!
//! A reused buffer holds a previous user's bytes. The API never exposes them: [`take`] gives
//! an empty buffer to append to, and [`PoolBuf::fill`] hands a slice to a reader and keeps only
//! the bytes it reports as written.
//!
//! A pooled buffer keeps the bytes it was once filled with (its `Vec` length is how far it
//! was ever initialized; what it holds now is `len`), so a reused buffer is not zeroed again
//! before each read: zeroing 1 MiB per READ was 1.5 % of the server's CPU on an S1 read over
//! QUIC (issue 40).
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;

/// Buffers smaller than this are cheap to allocate and are not kept.
pub const MIN_POOLED: usize = 64 * 1024;
/// At most this many bytes of idle buffers are kept.
pub const MAX_POOLED_BYTES: usize = 64 * 1024 * 1024;
/// Buffers unused this long are freed by [`trim_idle`].
pub const IDLE: Duration = Duration::from_secs(10);

struct Idle {
    buf: Vec<u8>,
    since: Instant,
}

struct Pool {
    idle: Vec<Idle>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    idle: Vec::new(),
    bytes: 0,
});

/// A buffer from the pool; becomes `Bytes` with [`freeze`](Self::freeze). Its bytes are
/// `buf[..len]`; `buf[len..]` is stale content of an earlier user, never exposed.
pub struct PoolBuf {
    buf: Vec<u8>,
    len: usize,
}

/// An empty buffer with room for at least `capacity` bytes: a reused one if one of a fitting
/// size is idle (not more than twice as large, so small requests do not pin big buffers).
pub fn take(capacity: usize) -> PoolBuf {
    if capacity >= MIN_POOLED {
        let mut p = POOL.lock();
        let found = p
            .idle
            .iter()
            .rposition(|i| i.buf.capacity() >= capacity && i.buf.capacity() / 2 <= capacity);
        if let Some(at) = found {
            let buf = p.idle.swap_remove(at).buf;
            p.bytes -= buf.capacity();
            return PoolBuf { buf, len: 0 };
        }
    }
    PoolBuf {
        buf: Vec::with_capacity(capacity),
        len: 0,
    }
}

/// Frees idle buffers older than [`IDLE`] (call it now and then, e.g. every few seconds).
pub fn trim_idle() {
    let mut p = POOL.lock();
    let before = p.idle.len();
    p.idle.retain(|i| i.since.elapsed() < IDLE);
    if p.idle.len() != before {
        p.bytes = p.idle.iter().map(|i| i.buf.capacity()).sum();
    }
}

/// Bytes of idle buffers held now.
pub fn pooled_bytes() -> usize {
    POOL.lock().bytes
}

impl PoolBuf {
    pub fn extend_from_slice(&mut self, b: &[u8]) {
        // Overwrites what the buffer already initialized, appends the rest.
        let start = self.len;
        let over = self.buf.len().saturating_sub(start).min(b.len());
        let (head, tail) = b.split_at(over);
        if let Some(dst) = self.buf.get_mut(start..start + over) {
            dst.copy_from_slice(head);
        }
        self.buf.extend_from_slice(tail);
        self.len = start + b.len();
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.buf.get_mut(..self.len).unwrap_or_default()
    }

    /// Appends up to `n` bytes written by `read`, which gets a slice of `n` bytes (stale
    /// content) and returns how many it wrote; only those are kept. A count beyond the slice
    /// is treated as the whole slice.
    pub fn fill<E>(
        &mut self,
        n: usize,
        read: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let start = self.len;
        // Only bytes never initialized are zeroed; a reused buffer's are handed to the reader
        // as they are, to be overwritten.
        if self.buf.len() < start + n {
            self.buf.resize(start + n, 0);
        }
        let r = read(self.buf.get_mut(start..start + n).unwrap_or_default());
        let wrote = *r.as_ref().unwrap_or(&0);
        self.len = start + wrote.min(n);
        r.map(|w| w.min(n))
    }

    pub fn freeze(self) -> Bytes {
        let Self { mut buf, len } = self;
        if buf.capacity() < MIN_POOLED {
            buf.truncate(len);
            return Bytes::from(buf);
        }
        Bytes::from_owner(Returning { buf, len })
    }
}

/// Owns a buffer inside `Bytes` (whose bytes are `buf[..len]`) and gives it back to the pool
/// when dropped.
struct Returning {
    buf: Vec<u8>,
    len: usize,
}

impl AsRef<[u8]> for Returning {
    fn as_ref(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let cap = buf.capacity();
        let mut p = POOL.lock();
        if p.bytes + cap <= MAX_POOLED_BYTES {
            p.bytes += cap;
            p.idle.push(Idle {
                buf,
                since: Instant::now(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    // One test: the pool is process-wide, so parallel tests would see each other's buffers.
    #[test]
    fn buffers_are_reused_bounded_and_never_show_old_bytes() {
        let mut a = take(1 << 20);
        a.extend_from_slice(&[0xAA; 1 << 20]);
        let ptr = a.buf.as_ptr();
        let frozen = a.freeze();
        let copy = frozen.clone();
        drop(frozen);
        assert_eq!(pooled_bytes(), 0, "still referenced by a clone");
        drop(copy);
        assert!(pooled_bytes() >= 1 << 20);

        // Reused, and what a reader did not write is not kept.
        let mut b = take(1 << 20);
        assert_eq!(b.buf.as_ptr(), ptr, "the idle buffer is reused");
        assert!(b.is_empty());
        let n = b
            .fill(1 << 20, |s| {
                s[..10].copy_from_slice(b"0123456789");
                Ok::<_, ()>(10)
            })
            .unwrap();
        assert_eq!(n, 10);
        assert_eq!(&b.freeze()[..], b"0123456789");

        // A much larger buffer is not handed out for a small request.
        let small = take(MIN_POOLED);
        assert_ne!(small.buf.as_ptr(), ptr);
        drop(small);

        // Bounded: beyond MAX_POOLED_BYTES buffers are freed, not kept.
        let many: Vec<Bytes> = (0..(MAX_POOLED_BYTES / (8 << 20)) + 4)
            .map(|_| {
                let mut t = take(8 << 20);
                t.extend_from_slice(&[1]);
                t.freeze()
            })
            .collect();
        drop(many);
        assert!(pooled_bytes() <= MAX_POOLED_BYTES);

        // Errors keep nothing.
        let mut c = take(1 << 20);
        assert!(c.fill(100, |_| Err::<usize, _>("boom")).is_err());
        assert!(c.is_empty());

        // A reused buffer is not zeroed for the reader (it sees the last user's bytes), and
        // none of them get out: appends overwrite them, short fills keep only what was read.
        let mut d = take(1 << 20);
        d.extend_from_slice(&[0x55; 4096]);
        drop(d.freeze());
        let mut e = take(1 << 20);
        let stale = e
            .fill(8, |s| {
                let seen = s.to_vec();
                s[..2].copy_from_slice(b"ok");
                Ok::<_, ()>(if seen.iter().all(|&x| x == 0x55) {
                    2
                } else {
                    0
                })
            })
            .unwrap();
        assert_eq!(
            stale, 2,
            "the reader saw the buffer's old bytes, not zeroes"
        );
        e.extend_from_slice(b"+more");
        assert_eq!(e.len(), 7);
        assert_eq!(e.as_mut_slice(), b"ok+more");
        assert_eq!(&e.freeze()[..], b"ok+more");
    }
}
