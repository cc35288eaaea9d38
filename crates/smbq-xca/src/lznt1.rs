//! LZNT1 (MS-XCA 2.5; MS-SMB2 algorithm id 1), the NTFS compression format.
//!
//! The input is cut into 4 KiB chunks, compressed independently: no match reaches into an
//! earlier chunk. Each chunk starts with a 16-bit little-endian header: bits 0-11 hold the
//! chunk's size (header included) minus 3, bits 12-14 the signature 3, and bit 15 says
//! whether the chunk is compressed. An uncompressed chunk is the raw bytes. A compressed one
//! is groups of a flag byte and eight items, bit 0 first: 0 is a literal byte, 1 a 16-bit
//! word holding distance - 1 in its high bits and length - 3 in its low bits. How many bits
//! go to the distance depends on how far into the chunk the item is: 4 at first, growing to
//! 12 as the position passes 16, 32, ... 2048, so distances never reach before the chunk.
//! A header of 0 ends the stream early (an optional terminator).

use crate::matcher::{Matcher, Token, Window};
use crate::{Error, copy_match, read_u16};

/// Uncompressed bytes per chunk.
const CHUNK_LEN: usize = 4096;
/// Header bits: compressed flag, and the signature 3 in bits 12-14.
const COMPRESSED: u16 = 0x8000;
const SIGNATURE: u16 = 0x3000;
const SIGNATURE_MASK: u16 = 0x7000;

/// Bits of a match word given to the distance at `u` bytes into the chunk (MS-XCA 2.5.1.1):
/// the least M >= 4 with 2^M >= u.
fn distance_bits(u: usize) -> u32 {
    let mut bits = 4;
    while (1usize << bits) < u && bits < 12 {
        bits += 1;
    }
    bits
}

/// The longest match at `u` bytes into the chunk: the length field's width, plus 3.
fn max_len(u: usize) -> usize {
    (1usize << (16 - distance_bits(u))) - 1 + 3
}

/// Appends the LZNT1 encoding of `input` to `out` (MS-XCA 2.5). A chunk that does not
/// shrink is stored uncompressed. No terminator is written: the caller knows the length.
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    let mut matcher = Matcher::new(input.len().min(CHUNK_LEN));
    let mut start = 0;
    while start < input.len() {
        let end = input.len().min(start + CHUNK_LEN);
        let header_pos = out.len();
        out.extend_from_slice(&[0, 0]);
        let window = Window {
            floor: start,
            max_dist: CHUNK_LEN,
        };
        let mut items = Items {
            flag_pos: 0,
            count: 8,
            u: 0,
        };
        matcher.parse(
            input,
            start,
            end,
            &window,
            |pos| max_len(pos - start),
            |t| items.push(out, t),
        );
        let raw = input.get(start..end).unwrap_or_default();
        let payload = out.len() - header_pos - 2;
        let header = if payload < raw.len() {
            COMPRESSED | SIGNATURE | (payload + 2 - 3) as u16
        } else {
            out.truncate(header_pos + 2);
            out.extend_from_slice(raw);
            SIGNATURE | (raw.len() + 2 - 3) as u16
        };
        if let Some(h) = out.get_mut(header_pos..header_pos + 2) {
            h.copy_from_slice(&header.to_le_bytes());
        }
        start = end;
    }
}

/// The flag byte being filled, how many items it covers so far, and how many bytes of the
/// chunk the items so far stand for.
struct Items {
    flag_pos: usize,
    count: u32,
    u: usize,
}

impl Items {
    /// Writes one item, reserving a new flag byte before every eighth (MS-XCA 2.5.1.1). A
    /// match word splits its 16 bits by [`distance_bits`] at the match's position;
    /// [`Matcher::parse`] was given that position's limits, so distance and length fit.
    fn push(&mut self, out: &mut Vec<u8>, t: Token) {
        if self.count == 8 {
            self.flag_pos = out.len();
            out.push(0);
            self.count = 0;
        }
        match t {
            Token::Literal(b) => {
                out.push(b);
                self.u += 1;
            }
            Token::Match { len, dist } => {
                if let Some(f) = out.get_mut(self.flag_pos) {
                    *f |= 1 << self.count;
                }
                let bits = distance_bits(self.u);
                let word = ((dist - 1) << (16 - bits)) | (len - 3);
                out.extend_from_slice(&(word as u16).to_le_bytes());
                self.u += len;
            }
        }
        self.count += 1;
    }
}

/// Decodes an LZNT1 stream (MS-XCA 2.5.2) into exactly `expected_len` bytes appended to
/// `out`. The stream ends with the input or at a zero header; only zero bytes may follow
/// that terminator.
pub fn decompress(input: &[u8], out: &mut Vec<u8>, expected_len: usize) -> Result<(), Error> {
    out.reserve_exact(expected_len);
    let target = out.len().checked_add(expected_len).ok_or(Error::TooLong)?;
    let mut pos = 0;
    while pos < input.len() {
        let header = read_u16(input, pos).ok_or(Error::Truncated)?;
        if header == 0 {
            let rest = input.get(pos..).unwrap_or_default();
            if rest.iter().any(|&b| b != 0) {
                return Err(Error::TrailingData);
            }
            break;
        }
        if header & SIGNATURE_MASK != SIGNATURE {
            return Err(Error::BadChunkHeader);
        }
        let size = usize::from(header & 0x0FFF) + 1;
        let body = input
            .get(pos + 2..pos + 2 + size)
            .ok_or(Error::BadChunkHeader)?;
        if header & COMPRESSED != 0 {
            decode_chunk(body, out, target)?;
        } else {
            if body.len() > CHUNK_LEN {
                return Err(Error::BadChunkHeader);
            }
            if body.len() > target - out.len() {
                return Err(Error::TooLong);
            }
            out.extend_from_slice(body);
        }
        pos += 2 + size;
    }
    if out.len() == target {
        Ok(())
    } else {
        Err(Error::SizeMismatch)
    }
}

/// Decodes one compressed chunk's flag groups (MS-XCA 2.5.2).
fn decode_chunk(body: &[u8], out: &mut Vec<u8>, target: usize) -> Result<(), Error> {
    let chunk_start = out.len();
    let mut p = 0;
    while let Some(&flags) = body.get(p) {
        p += 1;
        for bit in 0..8 {
            let Some(&b) = body.get(p) else { break };
            let u = out.len() - chunk_start;
            if flags & (1 << bit) == 0 {
                if out.len() == target {
                    return Err(Error::TooLong);
                }
                if u == CHUNK_LEN {
                    return Err(Error::BadChunkHeader);
                }
                out.push(b);
                p += 1;
                continue;
            }
            let word = usize::from(read_u16(body, p).ok_or(Error::Truncated)?);
            p += 2;
            let bits = distance_bits(u);
            let dist = (word >> (16 - bits)) + 1;
            let len = (word & ((1 << (16 - bits)) - 1)) + 3;
            if len > target - out.len() {
                return Err(Error::TooLong);
            }
            if len > CHUNK_LEN - u {
                return Err(Error::BadChunkHeader);
            }
            copy_match(out, chunk_start, dist, len)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{hostile_suite, round_trip, round_trip_suite, text};

    /// MS-XCA 3.3: 142 bytes (with the final NUL) in one 59-byte compressed chunk.
    const SPEC_PLAIN: &[u8] = b"F# F# G A A G F# E D D E F# F# E E F# F# G A A G F# E D D E F# E D D E E F# D E F# G F# D E F# G F# E D E A F# F# G A A G F# E D D E F# E D D\0";
    const SPEC_COMPRESSED: [u8; 59] = [
        0x38, 0xb0, 0x88, 0x46, 0x23, 0x20, 0x00, 0x20, 0x47, 0x20, 0x41, 0x00, 0x10, 0xa2, 0x47,
        0x01, 0xa0, 0x45, 0x20, 0x44, 0x00, 0x08, 0x45, 0x01, 0x50, 0x79, 0x00, 0xc0, 0x45, 0x20,
        0x05, 0x24, 0x13, 0x88, 0x05, 0xb4, 0x02, 0x4a, 0x44, 0xef, 0x03, 0x58, 0x02, 0x8c, 0x09,
        0x16, 0x01, 0x48, 0x45, 0x00, 0xbe, 0x00, 0x9e, 0x00, 0x04, 0x01, 0x18, 0x90, 0x00,
    ];

    /// The spec's chunk decodes. Our greedy encoder's output differs from Windows' (which
    /// finds other matches) but round-trips.
    #[test]
    fn spec_example() {
        assert_eq!(SPEC_PLAIN.len(), 142);
        let mut out = Vec::new();
        decompress(&SPEC_COMPRESSED, &mut out, SPEC_PLAIN.len()).unwrap();
        assert_eq!(out, SPEC_PLAIN);
        let ours = round_trip(compress, decompress, SPEC_PLAIN);
        assert!(ours.len() < SPEC_PLAIN.len());
    }

    #[test]
    fn distance_split() {
        // MS-XCA 3.3: at 3 bytes in, 4 distance bits and 12 length bits.
        assert_eq!(distance_bits(3), 4);
        assert_eq!(distance_bits(16), 4);
        assert_eq!(distance_bits(17), 5);
        assert_eq!(distance_bits(2048), 11);
        assert_eq!(distance_bits(2049), 12);
        assert_eq!(distance_bits(4095), 12);
        assert_eq!(max_len(1), 4098);
        assert_eq!(max_len(4000), 18);
    }

    #[test]
    fn round_trips() {
        round_trip_suite(compress, decompress, &[4095, 4096, 4097, 8191, 8192, 8193]);
    }

    #[test]
    fn hostile() {
        hostile_suite(compress, decompress, &text(5000));
    }

    #[test]
    fn terminator() {
        let mut z = Vec::new();
        compress(&text(5000), &mut z);
        z.extend([0, 0, 0, 0]);
        decompress(&z, &mut Vec::new(), 5000).unwrap();
        z.push(1);
        assert_eq!(
            decompress(&z, &mut Vec::new(), 5000),
            Err(Error::TrailingData)
        );
    }

    #[test]
    fn bad_headers() {
        // Signature 2 instead of 3.
        assert_eq!(
            decompress(&[0x02, 0x20, b'a', b'b', b'c'], &mut Vec::new(), 3),
            Err(Error::BadChunkHeader)
        );
        // Claims more bytes than there are.
        assert_eq!(
            decompress(&[0x10, 0x30, b'a'], &mut Vec::new(), 1),
            Err(Error::BadChunkHeader)
        );
    }

    #[test]
    fn match_before_chunk_start() {
        // A compressed chunk whose first item is a match: nothing in this chunk to copy.
        let z = [0x02, 0xb0, 0x01, 0x00, 0x00];
        let mut out = b"earlier chunk".to_vec();
        assert_eq!(decompress(&z, &mut out, 3), Err(Error::BadDistance));
        // A second chunk cannot reach into the first.
        let mut z = vec![0x02, 0x30, b'a', b'b', b'c'];
        z.extend([0x03, 0xb0, 0x02, b'x', 0x00, 0x30]); // 'x', then distance 4 at u = 1
        assert_eq!(decompress(&z, &mut Vec::new(), 7), Err(Error::BadDistance));
    }
}
