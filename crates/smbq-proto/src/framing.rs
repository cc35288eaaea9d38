//! Direct-TCP framing (MS-SMB2 2.1): each message is preceded by 0x00 and a 24-bit big-endian
//! length. The same framing is used on the QUIC stream. The deframer never allocates more than
//! the current limit, and the limit is small until a session is authenticated.

use bytes::{Buf, Bytes, BytesMut};

use crate::error::Violation;

/// Largest length a Direct-TCP header can express.
pub const MAX_FRAME: u32 = 0x00FF_FFFF;

/// Accumulates stream bytes and yields whole frames (the SMB message without its 4-byte header).
#[derive(Debug, Default)]
pub struct Deframer {
    buf: BytesMut,
}

impl Deframer {
    pub fn new() -> Self {
        Self {
            buf: BytesMut::new(),
        }
    }

    /// Appends received bytes.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Room to read into directly (avoids a copy on TCP): the caller reads into this buffer.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole frame, if one is buffered. `limit` is the largest frame acceptable in the
    /// connection's current state; a larger announced length is a protocol violation, detected
    /// from the 4-byte header alone, before anything is buffered for it.
    pub fn next_frame(&mut self, limit: u32) -> Result<Option<Bytes>, Violation> {
        let Some(&[zero, a, b, c]) = self.buf.get(..4) else {
            return Ok(None);
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
        let total = 4 + len as usize;
        if self.buf.len() < total {
            // Reserve once for the whole frame so large WRITEs arrive without reallocation.
            self.buf.reserve(total - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(4);
        Ok(Some(self.buf.split_to(len as usize).freeze()))
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

    #[test]
    fn header_encodes_big_endian_24_bit() {
        assert_eq!(frame_header(0x012345), [0, 0x01, 0x23, 0x45]);
    }
}
