//! NDR20, the transfer syntax `8a885d04-1ceb-11c9-9fe8-08002b104860` v2 (C706 chapter 14), in the
//! little-endian data representation only.
//!
//! Alignment is relative to the start of the stub (C706 14.2.2), which is why both the reader and
//! the writer work on a buffer that holds nothing but the stub. Pointers are 4-byte referent ids
//! (C706 14.3.10); embedded referents are written by the caller after the enclosing construct's
//! scalars, in the order NDR defers them.

use smbq_wire::cursor::{Reader, Writer, utf16le_decode, utf16le_encode};
use smbq_wire::error::DecodeError;
use thiserror::Error;

/// Largest conformant array count accepted from a peer (C706 14.3.3.2 gives no bound; every
/// allocation sized from the wire needs one).
pub const MAX_ARRAY_COUNT: u32 = 65_536;

/// Largest conformant varying string (in UTF-16 code units, terminator included) accepted from a
/// peer. Server names and share names are far shorter; MS-SRVS limits share names to 80 chars.
pub const MAX_STRING_UNITS: u32 = 32_768;

/// The first referent id MIDL and Samba hand out; later ids step by 4.
const FIRST_REFERENT: u32 = 0x0002_0000;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NdrError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("array count {count} over the limit of {limit}")]
    TooMany { count: u32, limit: u32 },
    #[error("bad conformant varying string: {0}")]
    BadString(&'static str),
    #[error("union discriminant {got} differs from switch value {expected}")]
    SwitchMismatch { expected: u32, got: u32 },
    #[error("invalid stub: {0}")]
    Invalid(&'static str),
}

/// Bounds-checked NDR20 reader over one request stub.
#[derive(Debug, Clone)]
pub struct NdrReader<'a> {
    r: Reader<'a>,
}

impl<'a> NdrReader<'a> {
    pub fn new(stub: &'a [u8]) -> Self {
        Self {
            r: Reader::new(stub),
        }
    }

    pub fn pos(&self) -> usize {
        self.r.pos()
    }

    pub fn remaining(&self) -> usize {
        self.r.remaining()
    }

    /// Skips padding up to the next multiple of `n` (a power of two) from the stub start.
    /// C706 14.2.2: padding octets have no defined value, so they are not checked.
    pub fn align(&mut self, n: usize) -> Result<(), NdrError> {
        let rem = self.r.pos() % n;
        if rem != 0 {
            self.r.skip(n - rem)?;
        }
        Ok(())
    }

    pub fn u16(&mut self) -> Result<u16, NdrError> {
        self.align(2)?;
        Ok(self.r.u16()?)
    }

    pub fn u32(&mut self) -> Result<u32, NdrError> {
        self.align(4)?;
        Ok(self.r.u32()?)
    }

    /// A unique or full pointer's referent id (C706 14.3.10): `false` for NULL.
    pub fn pointer(&mut self) -> Result<bool, NdrError> {
        Ok(self.u32()? != 0)
    }

    /// A conformant count checked against [`MAX_ARRAY_COUNT`] and against the bytes left, so a
    /// caller may size an allocation from it (each element takes at least `min_elem_size`).
    pub fn array_count(&mut self, min_elem_size: usize) -> Result<u32, NdrError> {
        let count = self.u32()?;
        if count > MAX_ARRAY_COUNT {
            return Err(NdrError::TooMany {
                count,
                limit: MAX_ARRAY_COUNT,
            });
        }
        let need = (count as usize).saturating_mul(min_elem_size);
        if need > self.r.remaining() {
            return Err(DecodeError::Truncated {
                need,
                have: self.r.remaining(),
            }
            .into());
        }
        Ok(count)
    }

    /// A `[string] wchar_t*` referent: conformant varying array of UTF-16LE code units
    /// (C706 14.3.3.4: max_count, offset, actual_count, then the units). The value stops at the
    /// first NUL; a string without a terminator is taken as it stands.
    pub fn wstring(&mut self) -> Result<String, NdrError> {
        let max = self.u32()?;
        let offset = self.u32()?;
        let actual = self.u32()?;
        if max > MAX_STRING_UNITS {
            return Err(NdrError::TooMany {
                count: max,
                limit: MAX_STRING_UNITS,
            });
        }
        if offset != 0 {
            // A [string] is always transmitted from its first element.
            return Err(NdrError::BadString("non-zero offset"));
        }
        if actual > max {
            return Err(NdrError::BadString("actual_count exceeds max_count"));
        }
        let bytes = self.r.bytes(actual as usize * 2)?;
        let s = utf16le_decode(bytes).map_err(|_| NdrError::BadString("invalid UTF-16"))?;
        Ok(match s.find('\0') {
            Some(end) => s.get(..end).unwrap_or_default().to_owned(),
            None => s,
        })
    }

    /// A conformant byte array (`[size_is(n)] unsigned char*` referent): max_count, then bytes.
    pub fn conformant_bytes(&mut self) -> Result<&'a [u8], NdrError> {
        let count = self.array_count(1)?;
        Ok(self.r.bytes(count as usize)?)
    }
}

/// NDR20 writer for one response stub. Encoding never fails.
#[derive(Debug)]
pub struct NdrWriter {
    w: Writer,
    next_referent: u32,
}

impl Default for NdrWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl NdrWriter {
    pub fn new() -> Self {
        Self {
            w: Writer::new(),
            next_referent: FIRST_REFERENT,
        }
    }

    pub fn len(&self) -> usize {
        self.w.len()
    }

    pub fn is_empty(&self) -> bool {
        self.w.is_empty()
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.w.into_vec()
    }

    pub fn as_slice(&self) -> &[u8] {
        self.w.as_slice()
    }

    pub fn align(&mut self, n: usize) -> &mut Self {
        self.w.align(n);
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.w.align(4).u32(v);
        self
    }

    /// A unique pointer: a fresh non-zero referent id when `present`, else NULL (0).
    pub fn pointer(&mut self, present: bool) -> &mut Self {
        if present {
            let id = self.next_referent;
            self.next_referent = self.next_referent.wrapping_add(4);
            self.u32(id)
        } else {
            self.u32(0)
        }
    }

    /// A `[string] wchar_t*` referent with its NUL terminator counted (C706 14.3.3.4).
    pub fn wstring(&mut self, s: &str) -> &mut Self {
        let mut units = utf16le_encode(s);
        units.extend_from_slice(&[0, 0]);
        // Strings come from local configuration; anything longer than u32 units cannot exist.
        let n = u32::try_from(units.len() / 2).unwrap_or(u32::MAX);
        self.u32(n).u32(0).u32(n);
        self.w.bytes(&units);
        self
    }

    /// A conformant byte array referent: max_count, then the bytes.
    pub fn conformant_bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
        self.w.bytes(b);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wstring_layout_and_round_trip() {
        let mut w = NdrWriter::new();
        w.u32(7).wstring("ab").u32(9);
        let b = w.into_vec();
        // 4 (u32) + 12 (max, offset, actual) + 6 ("ab\0") + 2 (pad) + 4 (u32)
        assert_eq!(b.len(), 28);
        assert_eq!(&b[4..16], &[3, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&b[16..22], &[b'a', 0, b'b', 0, 0, 0]);
        let mut r = NdrReader::new(&b);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.wstring().unwrap(), "ab");
        assert_eq!(r.u32().unwrap(), 9);
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn referents_are_distinct_and_null_is_zero() {
        let mut w = NdrWriter::new();
        w.pointer(true).pointer(false).pointer(true);
        let b = w.into_vec();
        assert_eq!(&b[0..4], &0x0002_0000u32.to_le_bytes());
        assert_eq!(&b[4..8], &[0, 0, 0, 0]);
        assert_eq!(&b[8..12], &0x0002_0004u32.to_le_bytes());
    }

    #[test]
    fn hostile_strings_are_rejected() {
        // actual > max
        let b = [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0x61, 0, 0, 0];
        assert!(NdrReader::new(&b).wstring().is_err());
        // offset != 0
        let b = [2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0x61, 0];
        assert!(NdrReader::new(&b).wstring().is_err());
        // huge max
        let b = [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 0, 0, 0, 0x61, 0];
        assert!(matches!(
            NdrReader::new(&b).wstring(),
            Err(NdrError::TooMany { .. })
        ));
        // claims more units than present
        let b = [9, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0x61, 0];
        assert!(NdrReader::new(&b).wstring().is_err());
        // lone surrogate
        let b = [1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0xd8];
        assert!(NdrReader::new(&b).wstring().is_err());
    }

    #[test]
    fn array_count_is_capped_and_checked_against_remaining() {
        let b = 0x0010_0000u32.to_le_bytes();
        assert!(matches!(
            NdrReader::new(&b).array_count(1),
            Err(NdrError::TooMany { .. })
        ));
        let b = [3, 0, 0, 0, 1, 2];
        assert!(NdrReader::new(&b).array_count(1).is_err());
        let b = [2, 0, 0, 0, 1, 2];
        assert_eq!(NdrReader::new(&b).conformant_bytes().unwrap(), &[1, 2]);
    }

    #[test]
    fn alignment_is_relative_to_stub_start() {
        let b = [0xAA, 0, 0, 0, 5, 0, 0, 0];
        let mut r = NdrReader::new(&b);
        r.align(2).unwrap();
        assert_eq!(r.pos(), 0);
        assert_eq!(r.u16().unwrap(), 0xAA);
        assert_eq!(r.u32().unwrap(), 5);
    }
}
