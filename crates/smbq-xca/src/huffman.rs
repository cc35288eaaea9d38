//! Canonical Huffman codes over the 512-symbol LZ77+Huffman alphabet (MS-XCA 2.1.4.2, 2.2.4).
//!
//! Codes are canonical: ordered by (length, symbol), each length's first code following the
//! previous length's last, as the decoder's table construction in MS-XCA 2.2.4 assumes.
//! Lengths are at most 15 bits and the code is complete (its Kraft sum is exactly 1), since
//! that decoder rejects any other table.

use crate::Error;

/// Symbols in the alphabet: 256 literals, 256 match symbols (MS-XCA 2.1.4.1).
pub(crate) const SYMBOLS: usize = 512;
/// The longest code (MS-XCA 2.1.4.2).
pub(crate) const MAX_BITS: u32 = 15;
/// Entries in the decoding table: one per 15-bit prefix.
pub(crate) const TABLE_LEN: usize = 1 << MAX_BITS;

/// Code lengths for `freqs`, at most 15 bits and forming a complete code. At least two
/// frequencies must be non-zero; unused symbols get length 0.
///
/// Lengths come from a Huffman tree (two-queue construction over the sorted leaves), clamped
/// to 15 bits with the Kraft sum then repaired, and handed out so that rarer symbols (and, on
/// a tie, lower symbol values) get the longer codes.
pub(crate) fn code_lengths(freqs: &[u32; SYMBOLS]) -> [u8; SYMBOLS] {
    let mut leaves: Vec<(u32, usize)> = (0..SYMBOLS)
        .filter_map(|s| freqs.get(s).filter(|&&f| f > 0).map(|&f| (f, s)))
        .collect();
    leaves.sort_unstable();
    let mut count = depth_counts(&leaves);
    limit_lengths(&mut count);
    let mut lengths = [0u8; SYMBOLS];
    let mut next = leaves.iter();
    for len in (1..=MAX_BITS as usize).rev() {
        for _ in 0..count.get(len).copied().unwrap_or(0) {
            if let Some(&(_, s)) = next.next() {
                if let Some(l) = lengths.get_mut(s) {
                    *l = len as u8;
                }
            }
        }
    }
    lengths
}

/// How many leaves sit at each depth of a Huffman tree over `leaves` (sorted by weight);
/// depths past 15 are counted at 15 for [`limit_lengths`] to repair. Index = depth.
fn depth_counts(leaves: &[(u32, usize)]) -> Vec<usize> {
    let n = leaves.len();
    let mut count = vec![0usize; MAX_BITS as usize + 1];
    if n < 2 {
        if let Some(c) = count.get_mut(1) {
            *c = n;
        }
        return count;
    }
    let mut weight: Vec<u64> = leaves.iter().map(|&(f, _)| u64::from(f)).collect();
    let mut parent = vec![0usize; 2 * n - 1];
    let (mut leaf, mut inner) = (0, n);
    for node in n..2 * n - 1 {
        let mut pick = || {
            let lw = if leaf < n { weight.get(leaf) } else { None };
            let iw = if inner < node {
                weight.get(inner)
            } else {
                None
            };
            let take_leaf = match (lw, iw) {
                (Some(l), Some(i)) => l <= i,
                (Some(_), None) => true,
                _ => false,
            };
            let i = if take_leaf { &mut leaf } else { &mut inner };
            *i += 1;
            *i - 1
        };
        let (a, b) = (pick(), pick());
        let w = weight.get(a).copied().unwrap_or(0) + weight.get(b).copied().unwrap_or(0);
        weight.push(w);
        for x in [a, b] {
            if let Some(p) = parent.get_mut(x) {
                *p = node;
            }
        }
    }
    let mut depth = vec![0usize; 2 * n - 1];
    for k in (0..2 * n - 2).rev() {
        let d = parent
            .get(k)
            .and_then(|&p| depth.get(p))
            .copied()
            .unwrap_or(0)
            + 1;
        if let Some(slot) = depth.get_mut(k) {
            *slot = d;
        }
        if k < n {
            if let Some(c) = count.get_mut(d.min(MAX_BITS as usize)) {
                *c += 1;
            }
        }
    }
    count
}

/// Makes the per-length `count` (index = length, 1..=15) a complete code: the Kraft sum,
/// in units of 2^-15, must be exactly 2^15. Too much (from clamping) is shed by lengthening
/// the longest codes below 15; too little is filled by shortening the longest codes.
fn limit_lengths(count: &mut [usize]) {
    let unit = |len: usize| 1usize << (MAX_BITS as usize - len);
    let full = TABLE_LEN;
    let mut kraft: usize = (1..=MAX_BITS as usize)
        .map(|l| count.get(l).copied().unwrap_or(0) * unit(l))
        .sum();
    while kraft > full {
        let Some(l) = (1..MAX_BITS as usize)
            .rev()
            .find(|&l| count.get(l) > Some(&0))
        else {
            break;
        };
        bump(count, l, l + 1);
        kraft -= unit(l + 1);
    }
    while kraft < full {
        let Some(l) = (2..=MAX_BITS as usize)
            .rev()
            .find(|&l| count.get(l) > Some(&0) && kraft + unit(l) <= full)
        else {
            break;
        };
        bump(count, l, l - 1);
        kraft += unit(l);
    }
}

/// Moves one code from length `from` to length `to`.
fn bump(count: &mut [usize], from: usize, to: usize) {
    if let Some(c) = count.get_mut(from) {
        *c -= 1;
    }
    if let Some(c) = count.get_mut(to) {
        *c += 1;
    }
}

/// Canonical codes for `lengths` (MS-XCA 2.1.4.2): within each length, codes ascend with
/// the symbol value, and each length starts where the previous one ended, doubled.
pub(crate) fn canonical_codes(lengths: &[u8; SYMBOLS]) -> [u16; SYMBOLS] {
    let mut codes = [0u16; SYMBOLS];
    let mut code: u32 = 0;
    for len in 1..=MAX_BITS as u8 {
        for (c, _) in codes.iter_mut().zip(lengths).filter(|(_, l)| **l == len) {
            *c = code as u16;
            code += 1;
        }
        code <<= 1;
    }
    codes
}

/// Fills `table` (15-bit prefix -> symbol) from `lengths`, as MS-XCA 2.2.4 builds its
/// decoding table: by length, then symbol, each symbol taking 2^(15 - length) entries. The
/// table must come out exactly full, else [`Error::BadHuffmanTable`].
pub(crate) fn decoding_table(lengths: &[u8; SYMBOLS], table: &mut Vec<u16>) -> Result<(), Error> {
    table.clear();
    for len in 1..=MAX_BITS as u8 {
        let n = 1usize << (MAX_BITS - u32::from(len));
        for (sym, _) in lengths.iter().enumerate().filter(|(_, l)| **l == len) {
            if table.len() + n > TABLE_LEN {
                return Err(Error::BadHuffmanTable);
            }
            table.resize(table.len() + n, sym as u16);
        }
    }
    if table.len() == TABLE_LEN {
        Ok(())
    } else {
        Err(Error::BadHuffmanTable)
    }
}
