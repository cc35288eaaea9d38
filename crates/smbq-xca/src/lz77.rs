//! Plain LZ77 (MS-XCA 2.3 compression, 2.4 decompression; MS-SMB2 algorithm id 2).
//!
//! The stream is byte oriented: a little-endian 32-bit flags word, read from its most
//! significant bit down, says for each of the next 32 items whether it is a literal byte (0)
//! or a match (1). A match is a 16-bit word: distance - 1 in the high 13 bits (so distances
//! 1..=8192) and length - 3 in the low 3. Length 7 in those bits escapes to a half byte (4
//! bits, two matches share one byte: the first uses its low nibble, the next its high
//! nibble), 15 there to a byte, 255 there to a 16-bit length (and 0 there to a 32-bit one).
//! Unused flag bits at the end are ones.

use crate::matcher::{Matcher, Token, Window};
use crate::{Error, copy_match, read_u16, read_u32};

/// The largest distance a match word can hold (13 bits + 1, MS-XCA 2.3.4).
const MAX_DIST: usize = 1 << 13;

/// Appends the plain LZ77 encoding of `input` to `out` (MS-XCA 2.3).
pub fn compress(input: &[u8], out: &mut Vec<u8>) {
    let mut writer = Writer::new(out);
    let mut matcher = Matcher::new(input.len());
    let window = Window {
        floor: 0,
        max_dist: MAX_DIST,
    };
    // The longest length the 32-bit escape holds.
    let max_len = |_| (u32::MAX as usize).saturating_add(3);
    matcher.parse(input, 0, input.len(), &window, max_len, |t| {
        writer.token(out, t)
    });
    writer.finish(out);
}

/// The encoder's state: the flags word being filled, where it goes, and the byte whose high
/// nibble the next 7-escaped match will use.
struct Writer {
    flags: u32,
    count: u32,
    flags_pos: usize,
    nibble_pos: Option<usize>,
}

fn put_u32(out: &mut [u8], pos: usize, v: u32) {
    if let Some(dst) = out.get_mut(pos..pos + 4) {
        dst.copy_from_slice(&v.to_le_bytes());
    }
}

impl Writer {
    fn new(out: &mut Vec<u8>) -> Self {
        let flags_pos = out.len();
        out.extend_from_slice(&[0; 4]);
        Writer {
            flags: 0,
            count: 0,
            flags_pos,
            nibble_pos: None,
        }
    }

    /// Writes one item, then, once 32 flags are known, writes them and reserves the next
    /// flags word after the 32nd item's bytes (MS-XCA 2.3.4).
    fn token(&mut self, out: &mut Vec<u8>, t: Token) {
        match t {
            Token::Literal(b) => {
                self.flags <<= 1;
                out.push(b);
            }
            Token::Match { len, dist } => {
                self.flags = (self.flags << 1) | 1;
                self.write_match(out, len, dist);
            }
        }
        self.count += 1;
        if self.count == 32 {
            put_u32(out, self.flags_pos, self.flags);
            self.flags_pos = out.len();
            out.extend_from_slice(&[0; 4]);
            self.flags = 0;
            self.count = 0;
        }
    }

    /// The match word and its length escapes, mirroring the decoder in MS-XCA 2.4.4.
    fn write_match(&mut self, out: &mut Vec<u8>, len: usize, dist: usize) {
        let l = len - 3;
        let word = (((dist - 1) as u16) << 3) | l.min(7) as u16;
        out.extend_from_slice(&word.to_le_bytes());
        if l < 7 {
            return;
        }
        let l = l - 7;
        let nibble = l.min(15) as u8;
        match self.nibble_pos.take() {
            Some(p) => {
                if let Some(b) = out.get_mut(p) {
                    *b |= nibble << 4;
                }
            }
            None => {
                self.nibble_pos = Some(out.len());
                out.push(nibble);
            }
        }
        if l < 15 {
            return;
        }
        let l = l - 15;
        out.push(l.min(255) as u8);
        if l < 255 {
            return;
        }
        // The 16-bit (or 32-bit) escape holds the whole length - 3.
        let total = len - 3;
        match u16::try_from(total) {
            Ok(v) => out.extend_from_slice(&v.to_le_bytes()),
            Err(_) => {
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&(total as u32).to_le_bytes());
            }
        }
    }

    /// Writes the last flags word with its unused bits set (MS-XCA 3.1: "any extra flag bits
    /// are ones"). A stream whose items filled the last word exactly ends in 0xFFFFFFFF.
    fn finish(self, out: &mut [u8]) {
        let pad = 32 - self.count;
        let flags = if pad == 32 {
            u32::MAX
        } else {
            (self.flags << pad) | ((1u32 << pad) - 1)
        };
        put_u32(out, self.flags_pos, flags);
    }
}

/// The decoder's position in the input.
struct Reader<'a> {
    input: &'a [u8],
    pos: usize,
    flags: u32,
    count: u32,
    nibble_pos: Option<usize>,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, Error> {
        let b = *self.input.get(self.pos).ok_or(Error::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    fn u16(&mut self) -> Result<u16, Error> {
        let v = read_u16(self.input, self.pos).ok_or(Error::Truncated)?;
        self.pos += 2;
        Ok(v)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        let v = read_u32(self.input, self.pos).ok_or(Error::Truncated)?;
        self.pos += 4;
        Ok(v)
    }

    /// The length of a match whose word's low 3 bits were 7 (MS-XCA 2.4.4): the shared half
    /// byte, then the byte, 16-bit and 32-bit escapes.
    fn long_length(&mut self) -> Result<usize, Error> {
        let mut len = match self.nibble_pos.take() {
            Some(p) => usize::from(*self.input.get(p).ok_or(Error::Truncated)? >> 4),
            None => {
                self.nibble_pos = Some(self.pos);
                usize::from(self.byte()? & 15)
            }
        };
        if len == 15 {
            len = usize::from(self.byte()?);
            if len == 255 {
                len = usize::from(self.u16()?);
                if len == 0 {
                    len = self.u32()? as usize;
                }
                len = len.checked_sub(15 + 7).ok_or(Error::BadLength)?;
            }
            len += 15;
        }
        Ok(len + 7 + 3)
    }
}

/// Decodes a plain LZ77 stream (MS-XCA 2.4.4) into exactly `expected_len` bytes appended
/// to `out`.
///
/// The stream ends when `expected_len` bytes are out; what may follow is nothing, or the
/// flags word an encoder reserves after a full one (MS-XCA 2.3.4). A match reaching before
/// the start of this stream's output, or past `expected_len`, is an error.
pub fn decompress(input: &[u8], out: &mut Vec<u8>, expected_len: usize) -> Result<(), Error> {
    out.reserve_exact(expected_len);
    let floor = out.len();
    let target = floor.checked_add(expected_len).ok_or(Error::TooLong)?;
    let mut r = Reader {
        input,
        pos: 0,
        flags: 0,
        count: 0,
        nibble_pos: None,
    };
    while out.len() < target {
        if r.count == 0 {
            r.flags = r.u32()?;
            r.count = 32;
        }
        r.count -= 1;
        if r.flags & (1 << r.count) == 0 {
            out.push(r.byte()?);
            continue;
        }
        let word = usize::from(r.u16()?);
        let dist = (word >> 3) + 1;
        let len = match word & 7 {
            7 => r.long_length()?,
            l => l + 3,
        };
        if len > target - out.len() {
            return Err(Error::TooLong);
        }
        copy_match(out, floor, dist, len)?;
    }
    let rest = input.len() - r.pos.min(input.len());
    if rest == 0 || (r.count == 0 && rest == 4) {
        Ok(())
    } else {
        Err(Error::TrailingData)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{hostile_suite, round_trip, round_trip_suite, text};

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    /// MS-XCA 3.1: the alphabet as 26 literals; our encoder writes the same bytes.
    #[test]
    fn spec_example_alphabet() {
        let z = hex(
            "3f 00 00 00 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 73 74 75 76 77 78 79 7a",
        );
        let plain = b"abcdefghijklmnopqrstuvwxyz";
        let mut out = Vec::new();
        decompress(&z, &mut out, plain.len()).unwrap();
        assert_eq!(out, plain);
        assert_eq!(round_trip(compress, decompress, plain), z);
    }

    /// MS-XCA 3.1: "abc" x 100 is abc + one match (distance 3, length 297) using the half
    /// byte, byte and 16-bit length escapes; our encoder writes the same 13 bytes.
    #[test]
    fn spec_example_abc300() {
        let z = hex("ff ff ff 1f 61 62 63 17 00 0f ff 26 01");
        let plain = b"abc".repeat(100);
        let mut out = Vec::new();
        decompress(&z, &mut out, 300).unwrap();
        assert_eq!(out, plain);
        assert_eq!(round_trip(compress, decompress, &plain), z);
    }

    #[test]
    fn round_trips() {
        round_trip_suite(
            compress,
            decompress,
            &[8191, 8192, 8193, 65535, 65536, 65537],
        );
    }

    /// Two 7-escaped matches share one half-byte; the 32-bit escape for > 64 KiB.
    #[test]
    fn shared_nibble_and_long_escapes() {
        let mut data = text(1000);
        data.extend(vec![1u8; 40]);
        data.extend(text(500));
        data.extend(vec![2u8; 100_000]);
        round_trip(compress, decompress, &data);
    }

    #[test]
    fn hostile() {
        hostile_suite(compress, decompress, &text(5000));
    }

    #[test]
    fn match_before_start() {
        // First item a match of distance 1: nothing to copy from.
        let mut out = b"not ours".to_vec();
        let z = [0, 0, 0, 0x80, 0, 0];
        assert_eq!(decompress(&z, &mut out, 3), Err(Error::BadDistance));
    }

    #[test]
    fn length_escape_below_minimum() {
        // 'a', then a match whose 16-bit length escape (5) is below 15 + 7.
        let z = [0, 0, 0, 0x40, b'a', 7, 0, 0x0f, 0xff, 5, 0];
        assert_eq!(decompress(&z, &mut Vec::new(), 100), Err(Error::BadLength));
    }

    #[test]
    fn trailing_data() {
        let mut z = Vec::new();
        compress(b"hello", &mut z);
        z.push(0);
        assert_eq!(decompress(&z, &mut Vec::new(), 5), Err(Error::TrailingData));
    }

    /// A 13-byte stream that decodes to 64 MiB of 'a' is refused for any shorter length,
    /// having written no more than that length.
    #[test]
    fn bomb() {
        let z = [
            0xff, 0xff, 0xff, 0x7f, b'a', 7, 0, 0x0f, 0xff, 0, 0, 0xfc, 0xff, 0xff, 0x03,
        ];
        let mut out = Vec::new();
        decompress(&z, &mut out, 64 << 20).unwrap();
        assert_eq!(out.len(), 64 << 20);
        let mut out = Vec::new();
        assert_eq!(decompress(&z, &mut out, 1 << 20), Err(Error::TooLong));
        assert!(out.len() <= 1 << 20);
    }
}
