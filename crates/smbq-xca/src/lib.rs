//! MS-XCA codecs for SMB3 compression: plain LZ77, LZ77+Huffman and LZNT1, sans IO.
//!
//! MS-SMB2 2.2.42 names them by CompressionAlgorithm id: LZNT1 = 1 ([`lznt1`]),
//! LZ77 = 2 ([`lz77`]), LZ77+Huffman = 3 ([`lz77_huffman`]). Each module has the same two
//! functions:
//!
//! - `compress(input, out)` appends a compressed stream to `out`. It always succeeds; the
//!   caller compares lengths to decide whether compressing paid off.
//! - `decompress(input, out, expected_len)` appends exactly `expected_len` bytes to `out` or
//!   returns an [`Error`]. It reserves at most `expected_len` bytes, never writes more, never
//!   panics, and runs in time linear in `input.len() + expected_len`, so a hostile stream
//!   (a decompression bomb) costs no more than the caller agreed to.
#![forbid(unsafe_code)]

mod chain;
mod error;
mod huffman;
mod matcher;
#[cfg(test)]
mod testutil;

pub mod lz77;
pub mod lz77_huffman;
pub mod lznt1;

pub use error::Error;

/// Reads a little-endian u16 at `pos`, or `None` past the end.
fn read_u16(input: &[u8], pos: usize) -> Option<u16> {
    match input.get(pos..pos.checked_add(2)?)? {
        [a, b] => Some(u16::from_le_bytes([*a, *b])),
        _ => None,
    }
}

/// Reads a little-endian u32 at `pos`, or `None` past the end.
fn read_u32(input: &[u8], pos: usize) -> Option<u32> {
    match input.get(pos..pos.checked_add(4)?)? {
        [a, b, c, d] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

/// Appends `len` bytes copied from `dist` bytes back in `out`, never reaching before `floor`
/// (the start of this stream's output). The caller has checked `len` against its budget.
/// Overlapping copies (distance < length) repeat the pattern, as LZ77 requires.
fn copy_match(out: &mut Vec<u8>, floor: usize, dist: usize, len: usize) -> Result<(), Error> {
    let end = out.len();
    let start = end.checked_sub(dist).ok_or(Error::BadDistance)?;
    if dist == 0 || start < floor {
        return Err(Error::BadDistance);
    }
    if dist >= len {
        out.extend_from_within(start..start + len);
    } else {
        // Overlapping: the output from `start` on is periodic with period `dist`, and stays
        // so while whole multiples of `dist` are copied from `start`; each round doubles it.
        let mut left = len;
        while left > 0 {
            let n = left.min(out.len() - start);
            out.extend_from_within(start..start + n);
            left -= n;
        }
    }
    Ok(())
}
