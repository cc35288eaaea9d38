//! Direct-TCP framing (MS-SMB2 2.1): each message is preceded by 0x00 and a 24-bit big-endian
//! length. The same framing is used on the QUIC stream. The deframer never allocates more than
//! the current limit, and the limit is small until a session is authenticated.
//!
//! Copies: bytes read straight into [`Deframer::buffer_mut`] (TCP) are never copied; frames
//! are split off that buffer. Chunks given to [`Deframer::push_bytes`] (QUIC) are kept as they
//! are, and every frame lying whole inside one is handed out as a slice of it; only a frame
//! that spans chunks is copied, once, into the buffer.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::Violation;

/// Largest length a Direct-TCP header can express.
pub const MAX_FRAME: u32 = 0x00FF_FFFF;

/// Accumulates stream bytes and yields whole frames (the SMB message without its 4-byte header).
///
/// The bytes not yet handed out are, in stream order, those in `buf` and then those in
/// `chunk`. After `next_frame` returns `Ok(None)`, `chunk` is empty.
#[derive(Debug, Default)]
pub struct Deframer {
    buf: BytesMut,
    /// The unread rest of the last `push_bytes` chunk, still in the sender's allocation.
    chunk: Bytes,
}

/// Messages above this size, signed and alone in their frame, are verified in place.
const IN_PLACE_VERIFY_ABOVE: usize = 4096;

/// The one rule, for server and client alike, for checking a large signed message without
/// copying it (MS-SMB2 3.1.5.1: the MAC runs over the message with its Signature zeroed): a
/// signed message over 4 KiB, alone in its frame (no NextCommand, not related), whose frame
/// owns its buffer, is verified where it lies (the Signature zeroed while the MAC runs, then
/// put back). `key_of` gives the signing key of the header's SessionId, if there is one;
/// `verify` checks the message with it. The verdict is `None` when the rule does not apply:
/// then the caller verifies as for any message (through a copy).
pub fn verify_large_in_place<K>(
    frame: Bytes,
    key_of: impl FnOnce(u64) -> Option<K>,
    verify: impl FnOnce(&K, &mut BytesMut) -> bool,
) -> (Bytes, Option<bool>) {
    // Most frames are small: they skip the header decode (on_messages decodes it anyway).
    if frame.len() <= IN_PLACE_VERIFY_ABOVE {
        return (frame, None);
    }
    let Ok(h) = smbq_wire::Header::decode(&frame) else {
        return (frame, None);
    };
    if !h.is_signed() || h.next_command != 0 || h.is_related() {
        return (frame, None);
    }
    let Some(key) = key_of(h.session_id) else {
        return (frame, None);
    };
    match frame.try_into_mut() {
        Ok(mut buf) => {
            let ok = verify(&key, &mut buf);
            (buf.freeze(), Some(ok))
        }
        Err(shared) => (shared, None),
    }
}

/// Checks a frame header against the limit and returns the frame's total size (header
/// included). A bad length is refused from the 4-byte header alone, before anything is
/// buffered for it.
fn frame_total(header: &[u8], limit: u32) -> Result<usize, Violation> {
    let &[zero, a, b, c] = header else {
        return Err(Violation::BadFrameHeader);
    };
    if zero != 0 {
        return Err(Violation::BadFrameHeader);
    }
    let len = u32::from_be_bytes([0, a, b, c]);
    if len == 0 {
        return Err(Violation::EmptyFrame);
    }
    if len > limit {
        return Err(Violation::FrameTooLarge { len, limit });
    }
    Ok(4 + len as usize)
}

/// Frames at least this long (header included) that were assembled in the buffer come out
/// owning their allocation alone.
const UNIQUE_FROM: usize = 64 * 1024;

impl Deframer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes (copied).
    pub fn push(&mut self, data: &[u8]) {
        self.spill();
        self.buf.extend_from_slice(data);
    }

    /// Appends a received chunk without copying it. Frames lying whole inside the chunk come
    /// out of `next_frame` as slices of it (they keep its allocation alive while held); a
    /// frame spanning chunks is copied into the buffer. Take the frames with `next_frame`
    /// before the next push: a chunk still holding unread bytes is copied then.
    pub fn push_bytes(&mut self, chunk: Bytes) {
        self.spill();
        self.chunk = chunk;
    }

    /// Room to read into directly (avoids a copy on TCP): the caller reads into this buffer.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        self.spill();
        &mut self.buf
    }

    pub fn buffered(&self) -> usize {
        self.buf.len() + self.chunk.len()
    }

    /// Moves the unread chunk bytes behind the buffered ones, keeping stream order.
    fn spill(&mut self) {
        if !self.chunk.is_empty() {
            self.buf.extend_from_slice(&self.chunk);
            self.chunk = Bytes::new();
        }
    }

    /// Moves up to `n` bytes from the front of the chunk to the end of the buffer.
    fn top_up(&mut self, n: usize) {
        let part = self.chunk.split_to(n.min(self.chunk.len()));
        self.buf.extend_from_slice(&part);
    }

    /// The next whole frame, if one is buffered. `limit` is the largest frame acceptable in the
    /// connection's current state; a larger announced length is a protocol violation, detected
    /// from the 4-byte header alone, before anything is buffered for it.
    pub fn next_frame(&mut self, limit: u32) -> Result<Option<Bytes>, Violation> {
        if self.buf.is_empty() {
            return self.next_in_chunk(limit);
        }
        // A frame began in the buffer: complete it from the chunk.
        if self.buf.len() < 4 {
            self.top_up(4 - self.buf.len());
        }
        let Some(header) = self.buf.get(..4) else {
            return Ok(None);
        };
        let total = frame_total(header, limit)?;
        if self.buf.len() < total {
            self.top_up(total - self.buf.len());
        }
        if self.buf.len() < total {
            // Reserve once for the whole frame so large WRITEs arrive without reallocation.
            self.buf.reserve(total - self.buf.len());
            return Ok(None);
        }
        if total >= UNIQUE_FROM {
            // Hand a large frame out as the sole owner of its allocation, so an encrypted one
            // is decrypted in place (`Bytes::try_into_mut`) instead of copied: the bytes of
            // the next frame read along with it (at most one read's worth) move to a new
            // buffer instead.
            let tail = BytesMut::from(self.buf.get(total..).unwrap_or_default());
            self.buf.truncate(total);
            let mut frame = std::mem::replace(&mut self.buf, tail);
            frame.advance(4);
            return Ok(Some(frame.freeze()));
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(total - 4).freeze()))
    }

    /// `next_frame` when nothing is buffered: the stream continues in the chunk.
    fn next_in_chunk(&mut self, limit: u32) -> Result<Option<Bytes>, Violation> {
        let Some(header) = self.chunk.get(..4) else {
            self.spill();
            return Ok(None);
        };
        let total = frame_total(header, limit)?;
        if self.chunk.len() >= total {
            self.chunk.advance(4);
            return Ok(Some(self.chunk.split_to(total - 4)));
        }
        // The frame goes on in later chunks: its head moves to the buffer, sized for all of it.
        self.buf.reserve(total);
        self.spill();
        Ok(None)
    }
}

/// The 4-byte header for a frame of `len` bytes.
pub fn frame_header(len: usize) -> [u8; 4] {
    let l = (len as u32).min(MAX_FRAME).to_be_bytes();
    [0, l[1], l[2], l[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of `len` bytes whose header has `flags` and `next_command`, owning its buffer.
    fn message(len: usize, flags: u32, next_command: u32) -> Bytes {
        let h = smbq_wire::Header {
            command: smbq_wire::Command::WRITE,
            flags,
            next_command,
            session_id: 9,
            ..Default::default()
        };
        let mut b = h.to_bytes().to_vec();
        b.resize(len, 0x5A);
        Bytes::from(b)
    }

    /// Runs the rule with a key for session 9 only; the verifier says whether it was called
    /// on the whole message, and leaves the bytes as they were.
    fn verdict(frame: Bytes) -> Option<bool> {
        let len = frame.len();
        verify_large_in_place(
            frame,
            |sid| (sid == 9).then_some(()),
            |(), buf| buf.len() == len,
        )
        .1
    }

    #[test]
    fn only_large_signed_single_owned_messages_are_verified_in_place() {
        use smbq_wire::header::flags::{RELATED_OPERATIONS, SIGNED};
        assert_eq!(verdict(message(4097, SIGNED, 0)), Some(true));
        assert_eq!(
            verdict(message(4096, SIGNED, 0)),
            None,
            "4 KiB or less: through a copy"
        );
        assert_eq!(verdict(message(8192, 0, 0)), None, "unsigned");
        assert_eq!(
            verdict(message(8192, SIGNED, 4096)),
            None,
            "first of a compound"
        );
        assert_eq!(
            verdict(message(8192, SIGNED | RELATED_OPERATIONS, 0)),
            None,
            "related"
        );
        let shared = message(8192, SIGNED, 0);
        let _other_owner = shared.clone();
        assert_eq!(verdict(shared), None, "a buffer shared with another owner");
        let mut unknown = message(8192, SIGNED, 0).to_vec();
        unknown[40] = 1; // SessionId's low byte: no key for it
        assert_eq!(verdict(Bytes::from(unknown)), None);
    }

    #[test]
    fn splits_frames_across_pushes() {
        let mut d = Deframer::new();
        d.push(&[0, 0, 0, 3, b'a']);
        assert_eq!(d.next_frame(100).unwrap(), None);
        d.push(&[b'b', b'c', 0, 0, 0, 1, b'z']);
        assert_eq!(&d.next_frame(100).unwrap().unwrap()[..], b"abc");
        assert_eq!(&d.next_frame(100).unwrap().unwrap()[..], b"z");
        assert_eq!(d.next_frame(100).unwrap(), None);
    }

    #[test]
    fn refuses_oversized_zero_and_bad_header_before_buffering() {
        let mut d = Deframer::new();
        d.push(&[0, 0x10, 0, 0]);
        assert!(matches!(
            d.next_frame(1024),
            Err(Violation::FrameTooLarge { .. })
        ));
        let mut d = Deframer::new();
        d.push(&[0, 0, 0, 0]);
        assert_eq!(d.next_frame(1024), Err(Violation::EmptyFrame));
        let mut d = Deframer::new();
        d.push(&[0x81, 0, 0, 1, 0]);
        assert_eq!(d.next_frame(1024), Err(Violation::BadFrameHeader));
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut v = frame_header(payload.len()).to_vec();
        v.extend_from_slice(payload);
        v
    }

    /// Pushes `chunks` one by one, taking every frame after each push.
    fn drain_chunks(d: &mut Deframer, chunks: &[&[u8]], limit: u32) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for c in chunks {
            d.push_bytes(Bytes::copy_from_slice(c));
            while let Some(f) = d.next_frame(limit).unwrap() {
                out.push(f.to_vec());
            }
        }
        out
    }

    fn lies_within(inner: &Bytes, outer: &Bytes) -> bool {
        let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
        i >= o && i + inner.len() <= o + outer.len()
    }

    #[test]
    fn whole_frames_in_a_chunk_are_slices_of_it() {
        let mut stream = frame(b"first");
        stream.extend(frame(b"second!"));
        let chunk = Bytes::from(stream);
        let mut d = Deframer::new();
        d.push_bytes(chunk.clone());
        let a = d.next_frame(100).unwrap().unwrap();
        let b = d.next_frame(100).unwrap().unwrap();
        assert_eq!((&a[..], &b[..]), (&b"first"[..], &b"second!"[..]));
        assert!(lies_within(&a, &chunk) && lies_within(&b, &chunk));
        assert_eq!(d.next_frame(100).unwrap(), None);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn only_the_frame_spanning_chunks_is_copied() {
        let (f1, f2, f3) = (frame(b"one"), frame(b"two-spans"), frame(b"three"));
        let cut = f2.len() / 2;
        let c1 = Bytes::from([&f1[..], &f2[..cut]].concat());
        let c2 = Bytes::from([&f2[cut..], &f3[..]].concat());
        let mut d = Deframer::new();
        d.push_bytes(c1.clone());
        let one = d.next_frame(100).unwrap().unwrap();
        assert!(lies_within(&one, &c1));
        assert_eq!(d.next_frame(100).unwrap(), None);
        assert_eq!(d.buffered(), cut);
        d.push_bytes(c2.clone());
        let two = d.next_frame(100).unwrap().unwrap();
        assert_eq!(&two[..], b"two-spans");
        assert!(!lies_within(&two, &c1) && !lies_within(&two, &c2));
        let three = d.next_frame(100).unwrap().unwrap();
        assert_eq!(&three[..], b"three");
        assert!(lies_within(&three, &c2));
        assert_eq!(d.next_frame(100).unwrap(), None);
    }

    #[test]
    fn frames_split_at_every_byte_boundary() {
        let payloads: [&[u8]; 4] = [b"a", b"hello world", &[7u8; 40], b"xy"];
        let stream: Vec<u8> = payloads.iter().flat_map(|p| frame(p)).collect();
        let want: Vec<Vec<u8>> = payloads.iter().map(|p| p.to_vec()).collect();
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                let (a, rest) = stream.split_at(i);
                let (b, c) = rest.split_at(j - i);
                let mut d = Deframer::new();
                assert_eq!(drain_chunks(&mut d, &[a, b, c], 64), want, "cuts {i} {j}");
                assert_eq!(d.buffered(), 0);
            }
        }
    }

    #[test]
    fn chunks_and_copied_pushes_mix_in_order() {
        let stream: Vec<u8> = [frame(b"abc"), frame(b"defgh"), frame(b"ij")].concat();
        for i in 0..=stream.len() {
            let (a, b) = stream.split_at(i);
            // Two chunks pushed without draining in between, then bytes by copy.
            let mut d = Deframer::new();
            d.push_bytes(Bytes::copy_from_slice(a));
            d.push_bytes(Bytes::copy_from_slice(b));
            d.push(&frame(b"k"));
            let mut got = Vec::new();
            while let Some(f) = d.next_frame(64).unwrap() {
                got.push(f.to_vec());
            }
            assert_eq!(got, [&b"abc"[..], b"defgh", b"ij", b"k"], "cut {i}");
            // buffer_mut keeps the order too.
            let mut d = Deframer::new();
            d.push_bytes(Bytes::copy_from_slice(a));
            d.buffer_mut().extend_from_slice(b);
            let mut got = Vec::new();
            while let Some(f) = d.next_frame(64).unwrap() {
                got.push(f.to_vec());
            }
            assert_eq!(got, [&b"abc"[..], b"defgh", b"ij"], "cut {i}");
        }
    }

    #[test]
    fn chunk_violations_match_copied_ones_and_come_from_the_header() {
        let cases: [(&[u8], Violation); 3] = [
            (
                &[0, 0x10, 0, 0],
                Violation::FrameTooLarge {
                    len: 0x100000,
                    limit: 1024,
                },
            ),
            (&[0, 0, 0, 0], Violation::EmptyFrame),
            (&[0x81, 0, 0, 1, 0], Violation::BadFrameHeader),
        ];
        for (bytes, want) in cases {
            let mut d = Deframer::new();
            d.push_bytes(Bytes::copy_from_slice(bytes));
            assert_eq!(d.next_frame(1024), Err(want.clone()));
            // The same header arriving after a partial one in the buffer.
            let mut d = Deframer::new();
            d.push_bytes(Bytes::copy_from_slice(&bytes[..1]));
            assert_eq!(d.next_frame(1024), Ok(None));
            d.push_bytes(Bytes::copy_from_slice(&bytes[1..]));
            assert_eq!(d.next_frame(1024), Err(want));
        }
        // A frame within the limit but spanning chunks reserves for itself, not beyond.
        let mut d = Deframer::new();
        d.push_bytes(Bytes::from_static(&[0, 0, 4, 0, 1, 2]));
        assert_eq!(d.next_frame(1024), Ok(None));
        assert!(d.buffer_mut().capacity() >= 1028);
        assert_eq!(
            d.next_frame(1023),
            Err(Violation::FrameTooLarge {
                len: 1024,
                limit: 1023
            })
        );
    }

    #[test]
    fn header_encodes_big_endian_24_bit() {
        assert_eq!(frame_header(0x012345), [0, 0x01, 0x23, 0x45]);
    }

    #[test]
    fn large_buffered_frames_own_their_allocation_and_keep_what_follows() {
        let big = vec![7u8; UNIQUE_FROM + 100];
        let small = vec![9u8; 10];
        let mut stream = frame(&big);
        stream.extend(frame(&small));
        let mut d = Deframer::new();
        // Split so the big frame spans chunks and its last chunk carries the small frame.
        let cut = 1000;
        d.push_bytes(Bytes::copy_from_slice(&stream[..cut]));
        assert!(d.next_frame(u32::MAX).unwrap().is_none());
        d.push_bytes(Bytes::copy_from_slice(&stream[cut..]));
        let f = d.next_frame(u32::MAX).unwrap().unwrap();
        assert_eq!(f.len(), big.len());
        let f = f
            .try_into_mut()
            .expect("a large buffered frame is uniquely owned");
        assert!(f.iter().all(|&b| b == 7));
        assert_eq!(&d.next_frame(u32::MAX).unwrap().unwrap()[..], &small[..]);
        assert!(d.next_frame(u32::MAX).unwrap().is_none());
        // The same through the read-into-buffer path (TCP), with bytes of the next frame
        // read along.
        let mut d = Deframer::new();
        d.buffer_mut().extend_from_slice(&stream[..cut]);
        assert!(d.next_frame(u32::MAX).unwrap().is_none());
        d.buffer_mut().extend_from_slice(&stream[cut..]);
        let f = d.next_frame(u32::MAX).unwrap().unwrap();
        assert!(f.try_into_mut().is_ok());
        assert_eq!(&d.next_frame(u32::MAX).unwrap().unwrap()[..], &small[..]);
    }
}
