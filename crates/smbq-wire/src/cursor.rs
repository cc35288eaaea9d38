//! Bounds-checked reading of untrusted bytes, and the little-endian writer used by encoders.
//!
//! Every read either returns the value or a [`DecodeError`]; nothing here panics or indexes
//! out of bounds. Offsets found on the wire are turned into sub-slices in exactly one checked
//! call ([`Reader::slice_at`]) so offset + length arithmetic can never wrap.

use core::ops::Range;

use crate::error::DecodeError;

/// A cursor over a borrowed byte slice. Decoders return data borrowed from the input.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// A reader over a whole message positioned after the 64-byte header, past the StructureSize
    /// that opens every SMB2 message body (MS-SMB2 2.2), which must be `structure_size`.
    pub fn body(msg: &'a [u8], structure_size: u16) -> Result<Self, DecodeError> {
        let mut r = Self::at(msg, crate::header::HEADER_LEN)?;
        r.structure_size(structure_size)?;
        Ok(r)
    }

    /// A reader positioned at `pos` of `buf` (for bodies that start after the 64-byte header).
    pub fn at(buf: &'a [u8], pos: usize) -> Result<Self, DecodeError> {
        if pos > buf.len() {
            return Err(DecodeError::Truncated {
                need: pos,
                have: buf.len(),
            });
        }
        Ok(Self { buf, pos })
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The whole underlying buffer (offsets on the wire are relative to its start).
    pub fn whole(&self) -> &'a [u8] {
        self.buf
    }

    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::Truncated {
            need: usize::MAX,
            have: self.buf.len(),
        })?;
        let s = self.buf.get(self.pos..end).ok_or(DecodeError::Truncated {
            need: end,
            have: self.buf.len(),
        })?;
        self.pos = end;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let s = self.bytes(N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub fn u16_be(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    pub fn u32_be(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    pub fn guid(&mut self) -> Result<[u8; 16], DecodeError> {
        self.array()
    }

    /// Checks the StructureSize field that opens every SMB2 body.
    pub fn structure_size(&mut self, expected: u16) -> Result<(), DecodeError> {
        let got = self.u16()?;
        if got != expected {
            return Err(DecodeError::StructureSize { expected, got });
        }
        Ok(())
    }

    /// Moves to an absolute position (used after reading a fixed part when a buffer follows).
    pub fn seek(&mut self, pos: usize) -> Result<(), DecodeError> {
        if pos > self.buf.len() {
            return Err(DecodeError::Truncated {
                need: pos,
                have: self.buf.len(),
            });
        }
        self.pos = pos;
        Ok(())
    }

    /// A message's variable buffer: empty when `len` is 0 whatever the offset, otherwise inside
    /// the message and not overlapping the fixed part, which ends at the reader's position.
    pub fn variable_buffer(&self, offset: usize, len: usize) -> Result<&'a [u8], DecodeError> {
        let range = self.variable_range(offset, len)?;
        Ok(self.buf.get(range).unwrap_or_default())
    }

    /// Where [`Self::variable_buffer`] lies in the whole buffer, checked the same way, for
    /// callers that slice a shared buffer themselves; `0..0` when `len` is 0.
    pub fn variable_range(&self, offset: usize, len: usize) -> Result<Range<usize>, DecodeError> {
        if len == 0 {
            return Ok(0..0);
        }
        if offset < self.pos {
            return Err(DecodeError::BadOffset {
                offset,
                len,
                total: self.buf.len(),
            });
        }
        let s = self.slice_at(offset, len)?;
        Ok(offset..offset + s.len())
    }

    /// `len` bytes at absolute `offset` of the whole buffer, checked once. A zero length gives an
    /// empty slice whatever the offset (clients send offset 0 with length 0).
    pub fn slice_at(&self, offset: usize, len: usize) -> Result<&'a [u8], DecodeError> {
        slice_at(self.buf, offset, len)
    }
}

/// A u32 length or offset from the wire as a `usize`; saturates where `usize` is narrower, so
/// the bounds check that follows fails instead of wrapping.
pub(crate) fn to_usize(v: u32) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Zero bytes that bring `n` to a multiple of 8.
pub(crate) fn pad8(n: usize) -> usize {
    (8 - n % 8) % 8
}

/// A buffer length for a u16 field; encoders are given buffers that fit.
pub(crate) fn len16(n: usize) -> u16 {
    u16::try_from(n).unwrap_or(u16::MAX)
}

/// A buffer length for a u32 field; encoders are given buffers that fit.
pub(crate) fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// `len` bytes at `offset` of `buf`; never wraps, never panics.
pub fn slice_at(buf: &[u8], offset: usize, len: usize) -> Result<&[u8], DecodeError> {
    if len == 0 {
        return Ok(&[]);
    }
    let end = offset.checked_add(len).ok_or(DecodeError::BadOffset {
        offset,
        len,
        total: buf.len(),
    })?;
    buf.get(offset..end).ok_or(DecodeError::BadOffset {
        offset,
        len,
        total: buf.len(),
    })
}

/// Little-endian writer over a `Vec<u8>`. Encoding never fails.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self { buf: Vec::new() }
    }
    pub fn with_capacity(n: usize) -> Self {
        Self {
            buf: Vec::with_capacity(n),
        }
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u16_be(&mut self, v: u16) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn u32_be(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
    /// Writes a variable Buffer field: its bytes, or when it is empty the one zero byte that an
    /// odd StructureSize counts (MS-SMB2 2.2: StructureSize includes one byte of Buffer).
    pub fn buffer(&mut self, b: &[u8]) -> &mut Self {
        if b.is_empty() {
            self.u8(0)
        } else {
            self.bytes(b)
        }
    }
    pub fn zeros(&mut self, n: usize) -> &mut Self {
        self.buf.resize(self.buf.len() + n, 0);
        self
    }
    /// Pads with zeros until the length is a multiple of `align`.
    pub fn align(&mut self, align: usize) -> &mut Self {
        let rem = self.buf.len() % align;
        if rem != 0 {
            self.zeros(align - rem);
        }
        self
    }
    /// Pads with zeros until the length counted from `base` (a body's or a list's start) is a
    /// multiple of `align`, so data encoded after other data still aligns per entry.
    pub fn align_from(&mut self, base: usize, align: usize) -> &mut Self {
        let rem = (self.buf.len() - base) % align;
        if rem != 0 {
            self.zeros(align - rem);
        }
        self
    }
    /// Overwrites a previously reserved little-endian u16 at `pos`.
    pub fn patch_u16(&mut self, pos: usize, v: u16) {
        if let Some(s) = self.buf.get_mut(pos..pos + 2) {
            s.copy_from_slice(&v.to_le_bytes());
        }
    }
    pub fn patch_u32(&mut self, pos: usize, v: u32) {
        if let Some(s) = self.buf.get_mut(pos..pos + 4) {
            s.copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// UTF-16LE helpers: SMB names on the wire are UTF-16LE without terminator.
pub fn utf16le_encode(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

/// Decodes UTF-16LE; an odd length or an unpaired surrogate is an error (never lossy: a lossy
/// name could address a different file than the client meant).
pub fn utf16le_decode(b: &[u8]) -> Result<String, DecodeError> {
    if !b.len().is_multiple_of(2) {
        return Err(DecodeError::BadString);
    }
    let units = b.chunks_exact(2).map(|c| {
        let mut u = [0u8; 2];
        u.copy_from_slice(c);
        u16::from_le_bytes(u)
    });
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .map_err(|_| DecodeError::BadString)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_bounds_checked() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert_eq!(r.u16().unwrap(), 0x0201);
        assert!(r.u16().is_err());
        assert_eq!(r.u8().unwrap(), 3);
        assert!(r.u8().is_err());
    }

    #[test]
    fn slice_at_rejects_wrap_and_overrun() {
        let b = [0u8; 8];
        assert!(slice_at(&b, usize::MAX, 2).is_err());
        assert!(slice_at(&b, 7, 2).is_err());
        assert_eq!(slice_at(&b, 6, 2).unwrap().len(), 2);
        assert_eq!(slice_at(&b, 999, 0).unwrap().len(), 0);
    }

    #[test]
    fn utf16_round_trip_and_rejects_lone_surrogate() {
        let e = utf16le_encode("a\u{e9}\u{1F600}");
        assert_eq!(utf16le_decode(&e).unwrap(), "a\u{e9}\u{1F600}");
        assert!(utf16le_decode(&[0x00, 0xd8]).is_err());
        assert!(utf16le_decode(&[0x61]).is_err());
    }
}
