//! MS-XCA's algorithms (plain LZ77, LZ77+Huffman, LZNT1), from smbq-xca. Each payload is a
//! stream of its own: a match never reaches into what earlier payloads produced.

use crate::algorithm::{Algorithm, Corrupt};

pub(crate) const AVAILABLE: bool = true;

pub(crate) fn compress(a: Algorithm, input: &[u8], out: &mut Vec<u8>) {
    match a {
        Algorithm::Lz77 => smbq_xca::lz77::compress(input, out),
        Algorithm::Lz77Huffman => smbq_xca::lz77_huffman::compress(input, out),
        Algorithm::Lznt1 => smbq_xca::lznt1::compress(input, out),
        Algorithm::Lz4 | Algorithm::PatternV1 => {}
    }
}

pub(crate) fn decompress(
    a: Algorithm,
    input: &[u8],
    out: &mut Vec<u8>,
    len: usize,
) -> Result<(), Corrupt> {
    let r = match a {
        Algorithm::Lz77 => smbq_xca::lz77::decompress(input, out, len),
        Algorithm::Lz77Huffman => smbq_xca::lz77_huffman::decompress(input, out, len),
        Algorithm::Lznt1 => smbq_xca::lznt1::decompress(input, out, len),
        Algorithm::Lz4 | Algorithm::PatternV1 => return Err(Corrupt),
    };
    r.map_err(|_| Corrupt)
}
