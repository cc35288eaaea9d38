//! The greedy match finder the three compressors share.
//!
//! A hash of the next 4 bytes indexes a table holding the last position that hashed there;
//! that single candidate is checked and, if it matches for at least [`MIN_MATCH`] bytes within
//! the format's window, the match is taken whole (greedy, no lazy evaluation). After a run of
//! misses the scan steps over more than one byte at a time, so incompressible input costs
//! little more than a copy. This favours speed over ratio, as MS-XCA itself does (1.3).

/// The shortest match any of the three formats can encode (MS-XCA 2.1.4.1, 2.3, 2.5).
pub(crate) const MIN_MATCH: usize = 3;

/// One step of an LZ77 parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    Literal(u8),
    /// Copy `len` bytes from `dist` bytes back; `len >= MIN_MATCH`, `dist >= 1`.
    Match {
        len: usize,
        dist: usize,
    },
}

/// Where and how far matches may reach in one call of [`Matcher::parse`].
pub(crate) struct Window {
    /// No match source may start before this position (LZNT1: the chunk start).
    pub floor: usize,
    /// The format's largest distance.
    pub max_dist: usize,
}

/// The hash table, kept across calls so a later block can match into an earlier one.
pub(crate) struct Matcher {
    table: Vec<u32>,
    shift: u32,
}

/// Reads 4 bytes little-endian at `pos`, or `None` within 3 bytes of the end.
pub(crate) fn read4(input: &[u8], pos: usize) -> Option<u32> {
    crate::read_u32(input, pos)
}

/// Reads 8 bytes little-endian at `pos`, or `None` within 7 bytes of the end.
fn read8(input: &[u8], pos: usize) -> Option<u64> {
    let bytes: [u8; 8] = input.get(pos..pos.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// How many bytes from `a` and `b` (with `a < b`) agree, up to `limit`.
pub(crate) fn common_len(input: &[u8], a: usize, b: usize, limit: usize) -> usize {
    let mut n = 0;
    while n + 8 <= limit {
        match (read8(input, a + n), read8(input, b + n)) {
            (Some(x), Some(y)) if x == y => n += 8,
            (Some(x), Some(y)) => return n + ((x ^ y).trailing_zeros() / 8) as usize,
            _ => break,
        }
    }
    while n < limit {
        match (input.get(a + n), input.get(b + n)) {
            (Some(x), Some(y)) if x == y => n += 1,
            _ => break,
        }
    }
    n
}

impl Matcher {
    /// A table sized for `input_len` bytes: 2^10 to 2^15 entries.
    pub(crate) fn new(input_len: usize) -> Self {
        let bits = (usize::BITS - input_len.leading_zeros()).clamp(10, 15);
        Matcher {
            table: vec![0; 1 << bits],
            shift: 32 - bits,
        }
    }

    fn slot(&mut self, word: u32) -> Option<&mut u32> {
        let h = word.wrapping_mul(0x9E37_79B1) >> self.shift;
        self.table.get_mut(h as usize)
    }

    /// Parses `input[start..end]` into tokens passed to `emit`, in order. Matches end at or
    /// before `end`, start at or after `window.floor`, reach at most `window.max_dist` back
    /// and are at most `max_len(position)` long. Bytes before `start` (and after `end`) are
    /// only history (lookahead for hashing), never emitted.
    pub(crate) fn parse(
        &mut self,
        input: &[u8],
        start: usize,
        end: usize,
        window: &Window,
        max_len: impl Fn(usize) -> usize,
        mut emit: impl FnMut(Token),
    ) {
        let end = end.min(input.len());
        let mut pos = start;
        let mut misses = 0usize;
        while pos < end {
            if let Some((len, dist)) = self.find(input, pos, end, window, &max_len) {
                emit(Token::Match { len, dist });
                pos += len;
                misses = 0;
                continue;
            }
            // After 32 misses in a row, step over 2 bytes, then 3, ... up to 16.
            let step = (1 + (misses >> 5)).min(16).min(end - pos);
            for &b in input.get(pos..pos + step).unwrap_or_default() {
                emit(Token::Literal(b));
            }
            pos += step;
            misses += 1;
        }
    }

    /// The match at `pos`, if the hash table's candidate gives one, as (length, distance);
    /// records `pos` in the table either way.
    fn find(
        &mut self,
        input: &[u8],
        pos: usize,
        end: usize,
        window: &Window,
        max_len: &impl Fn(usize) -> usize,
    ) -> Option<(usize, usize)> {
        if end - pos < 4 {
            return None;
        }
        let word = read4(input, pos)?;
        let slot = self.slot(word)?;
        let cand = *slot as usize;
        *slot = pos as u32;
        let dist = pos.checked_sub(cand)?;
        if dist == 0 || dist > window.max_dist || cand < window.floor {
            return None;
        }
        if read4(input, cand)? != word {
            return None;
        }
        let limit = max_len(pos).min(end - pos);
        let len = common_len(input, cand, pos, limit);
        (len >= MIN_MATCH).then_some((len, dist))
    }
}
