//! The deeper match finder LZ77+Huffman uses: hash chains and one-step lazy matching.
//!
//! A hash of the next 4 bytes indexes `head`, the last position that hashed there; `prev`,
//! indexed by position modulo its size, links each position to the previous one with the
//! same hash. Up to `depth` candidates within the window are checked, nearest first, and the
//! search stops early at a match of `nice` bytes. Before a match is taken, the position after
//! it is searched too; if that gives a longer match, a literal is written and the later match
//! becomes the candidate (lazy matching, as in deflate). Every position a match covers is
//! linked into the chains, so later searches see the whole 64 KiB window.
//!
//! The tables only suggest candidates: each is checked against the input itself (distance,
//! window floor, bytes), so stale or wrapped entries cost time, never correctness. Runs of
//! misses are skipped over with a growing step, as in [`crate::matcher::Matcher`], so
//! incompressible input stays cheap.

use crate::matcher::{MIN_MATCH, Token, Window, common_len, read4};

/// How hard the search tries.
pub(crate) struct Effort {
    /// Candidates checked per position.
    pub depth: usize,
    /// A match this long ends the search.
    pub nice: usize,
    /// Matches this long are taken without a lazy look at the next position.
    pub lazy: usize,
    /// When the match in hand is this long, the lazy look checks only a quarter of `depth`.
    pub good: usize,
}

/// Hash chains over the input, kept across calls so a later block can match into an earlier
/// one.
pub(crate) struct ChainMatcher {
    head: Vec<u32>,
    prev: Vec<u32>,
    shift: u32,
    effort: Effort,
}

impl ChainMatcher {
    /// Tables sized for `input_len` bytes and a window of `max_dist`: `head` 2^10 to 2^16
    /// entries, `prev` the next power of two above the smaller of the two.
    pub(crate) fn new(input_len: usize, max_dist: usize, effort: Effort) -> Self {
        let bits = (usize::BITS - input_len.leading_zeros()).clamp(10, 16);
        let prev_len = input_len
            .min(max_dist)
            .saturating_add(1)
            .next_power_of_two();
        ChainMatcher {
            head: vec![0; 1 << bits],
            prev: vec![0; prev_len],
            shift: 32 - bits,
            effort,
        }
    }

    /// Links `pos` into its hash chain (nothing within 3 bytes of the input's end).
    fn insert(&mut self, input: &[u8], pos: usize) {
        let Some(word) = read4(input, pos) else {
            return;
        };
        let h = (word.wrapping_mul(0x9E37_79B1) >> self.shift) as usize;
        let mask = self.prev.len() - 1;
        if let Some(slot) = self.head.get_mut(h) {
            let old = std::mem::replace(slot, pos as u32);
            if let Some(p) = self.prev.get_mut(pos & mask) {
                *p = old;
            }
        }
    }

    /// The best match at `pos` (< `end`) as (length, distance), after linking `pos` into its
    /// chain: the longest of up to `depth` candidates, the nearest on a tie. Each position is searched (and so linked) at most once.
    fn search(
        &mut self,
        input: &[u8],
        pos: usize,
        end: usize,
        window: &Window,
        depth: usize,
    ) -> Option<(usize, usize)> {
        if pos >= end {
            return None;
        }
        let word = read4(input, pos)?;
        let h = (word.wrapping_mul(0x9E37_79B1) >> self.shift) as usize;
        let mut cand = *self.head.get(h)?;
        self.insert(input, pos);
        let limit = end - pos;
        if limit < 4 {
            return None;
        }
        let mask = self.prev.len() - 1;
        let mut best: Option<(usize, usize)> = None;
        let mut best_len = MIN_MATCH - 1;
        let mut last_dist = 0;
        for _ in 0..depth {
            // Distances only grow along a chain; a smaller one means a stale entry.
            let dist = (pos as u32).wrapping_sub(cand) as usize;
            if dist <= last_dist || dist > window.max_dist || pos - dist < window.floor {
                break;
            }
            last_dist = dist;
            let c = pos - dist;
            if input.get(c + best_len) == input.get(pos + best_len) && read4(input, c) == Some(word)
            {
                let len = common_len(input, c, pos, limit);
                if len > best_len {
                    best = Some((len, dist));
                    best_len = len;
                    if len >= self.effort.nice || len == limit {
                        break;
                    }
                }
            }
            cand = *self.prev.get(c & mask)?;
        }
        best
    }

    /// Parses `input[start..end]` into tokens passed to `emit`, in order, like
    /// [`crate::matcher::Matcher::parse`]: matches end at or before `end`, start at or after
    /// `window.floor` and reach at most `window.max_dist` back.
    pub(crate) fn parse(
        &mut self,
        input: &[u8],
        start: usize,
        end: usize,
        window: &Window,
        mut emit: impl FnMut(Token),
    ) {
        let end = end.min(input.len());
        let mut pos = start;
        let mut misses = 0usize;
        let depth = self.effort.depth;
        let mut cur = self.search(input, pos, end, window, depth);
        while pos < end {
            let Some((len, dist)) = cur else {
                // After 32 misses in a row, step over 2 bytes, then 3, ... up to 16; the
                // bytes stepped over are not linked.
                let step = (1 + (misses >> 5)).min(16).min(end - pos);
                for &b in input.get(pos..pos + step).unwrap_or_default() {
                    emit(Token::Literal(b));
                }
                pos += step;
                misses += 1;
                cur = self.search(input, pos, end, window, depth);
                continue;
            };
            misses = 0;
            let mut linked = pos + 1;
            if len < self.effort.lazy && pos + 1 < end {
                let lazy_depth = if len >= self.effort.good {
                    depth / 4
                } else {
                    depth
                };
                let next = self.search(input, pos + 1, end, window, lazy_depth);
                linked = pos + 2;
                if next.is_some_and(|(l, _)| l > len) {
                    emit(Token::Literal(input.get(pos).copied().unwrap_or(0)));
                    pos += 1;
                    cur = next;
                    continue;
                }
            }
            emit(Token::Match { len, dist });
            for p in linked..pos + len {
                self.insert(input, p);
            }
            pos += len;
            cur = self.search(input, pos, end, window, depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{random, text};

    /// Replays tokens into bytes, checking each match against the window.
    fn replay(tokens: &[Token], window: &Window) -> Vec<u8> {
        let mut out: Vec<u8> = Vec::new();
        for t in tokens {
            match *t {
                Token::Literal(b) => out.push(b),
                Token::Match { len, dist } => {
                    assert!(len >= MIN_MATCH && dist >= 1 && dist <= window.max_dist);
                    let from = out.len() - dist;
                    assert!(from >= window.floor);
                    for i in 0..len {
                        out.push(out[from + i]);
                    }
                }
            }
        }
        out
    }

    fn parse_all(data: &[u8], block: usize, window: &Window) -> Vec<Token> {
        let effort = Effort {
            depth: 16,
            nice: 32,
            lazy: 16,
            good: 8,
        };
        let mut m = ChainMatcher::new(data.len(), window.max_dist, effort);
        let mut tokens = Vec::new();
        let mut start = 0;
        while start < data.len() {
            let end = data.len().min(start + block);
            m.parse(data, start, end, window, |t| tokens.push(t));
            start = end;
        }
        tokens
    }

    #[test]
    fn tokens_rebuild_the_input() {
        let window = Window {
            floor: 0,
            max_dist: 1000,
        };
        let mut mixed = text(30_000);
        mixed.extend(random(10_000, 7));
        mixed.extend(vec![0u8; 5000]);
        mixed.extend(text(3000));
        for data in [text(20_000), random(20_000, 1), mixed, b"abcab".to_vec()] {
            for block in [777, 4096, 1 << 16] {
                assert_eq!(replay(&parse_all(&data, block, &window), &window), data);
            }
        }
    }

    /// At the second "abcd" a greedy parse takes 4 bytes (distance 13) and then "efgh"; the
    /// lazy look writes 'a' as a literal and takes "bcdefgh" (7 bytes, distance 9).
    #[test]
    fn lazy_match_wins() {
        let window = Window {
            floor: 0,
            max_dist: 1 << 16,
        };
        let data = b"xabcd_bcdefgh_abcdefgh";
        let tokens = parse_all(data, data.len(), &window);
        assert_eq!(replay(&tokens, &window), data);
        assert_eq!(tokens.len(), 15 + 1);
        assert_eq!(tokens.last(), Some(&Token::Match { len: 7, dist: 9 }));
    }
}
