//! The compression algorithms SMB 3.1.1 names (MS-SMB2 2.2.3.1.3) and their codecs: LZ4
//! (lz4_flex's block format), Pattern_V1 (handled by the chained transform, it has no codec),
//! and MS-XCA's plain LZ77, LZ77+Huffman and LZNT1 (smbq-xca).

use smbq_wire::negotiate::CompressionAlgorithm;

/// One compression algorithm (never NONE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Lznt1,
    Lz77,
    Lz77Huffman,
    PatternV1,
    Lz4,
}

/// The codec could not decode the payload to exactly the size it claimed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

impl Algorithm {
    /// Every algorithm, in smbq's default order of preference: LZ4 first (the cheapest per
    /// byte, so it never slows a fast link much), Pattern_V1 (chained only), then MS-XCA's.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Lz4,
        Algorithm::PatternV1,
        Algorithm::Lz77,
        Algorithm::Lz77Huffman,
        Algorithm::Lznt1,
    ];

    pub fn wire(self) -> CompressionAlgorithm {
        match self {
            Self::Lznt1 => CompressionAlgorithm::LZNT1,
            Self::Lz77 => CompressionAlgorithm::LZ77,
            Self::Lz77Huffman => CompressionAlgorithm::LZ77_HUFFMAN,
            Self::PatternV1 => CompressionAlgorithm::PATTERN_V1,
            Self::Lz4 => CompressionAlgorithm::LZ4,
        }
    }

    pub fn from_wire(id: CompressionAlgorithm) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.wire() == id)
    }

    /// The name used in the configuration, the CLI and the metrics.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lznt1 => "lznt1",
            Self::Lz77 => "lz77",
            Self::Lz77Huffman => "lz77_huffman",
            Self::PatternV1 => "pattern_v1",
            Self::Lz4 => "lz4",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        let n = name.trim().to_ascii_lowercase().replace(['-', '+'], "_");
        Self::ALL.into_iter().find(|a| a.name() == n)
    }

    /// Whether this algorithm compresses a segment of arbitrary data (Pattern_V1 does not: it
    /// only describes a run of one byte).
    pub fn is_general(self) -> bool {
        self != Self::PatternV1
    }

    /// Whether smbq has a codec for it (Pattern_V1 counts: the transform handles it).
    pub fn available(self) -> bool {
        match self {
            Self::Lz4 | Self::PatternV1 => true,
            Self::Lz77 | Self::Lz77Huffman | Self::Lznt1 => crate::xca::AVAILABLE,
        }
    }

    /// Appends `input` compressed to `out`. Pattern_V1 is not a general codec: nothing is
    /// appended for it.
    pub(crate) fn compress(self, input: &[u8], out: &mut Vec<u8>) {
        match self {
            Self::Lz4 => {
                let start = out.len();
                out.resize(
                    start + lz4_flex::block::get_maximum_output_size(input.len()),
                    0,
                );
                let n = out
                    .get_mut(start..)
                    .and_then(|dst| lz4_flex::block::compress_into(input, dst).ok())
                    .unwrap_or(0);
                out.truncate(start + n);
            }
            Self::PatternV1 => {}
            Self::Lz77 | Self::Lz77Huffman | Self::Lznt1 => crate::xca::compress(self, input, out),
        }
    }

    /// Appends exactly `len` decompressed bytes to `out`, or fails; never more than `len`,
    /// whatever the input says (the caller checked `len` against its limit).
    pub(crate) fn decompress(
        self,
        input: &[u8],
        out: &mut Vec<u8>,
        len: usize,
    ) -> Result<(), Corrupt> {
        match self {
            Self::Lz4 => {
                let start = out.len();
                out.resize(start + len, 0);
                let dst = out.get_mut(start..).ok_or(Corrupt)?;
                match lz4_flex::block::decompress_into(input, dst) {
                    Ok(n) if n == len => Ok(()),
                    _ => Err(Corrupt),
                }
            }
            Self::PatternV1 => Err(Corrupt),
            Self::Lz77 | Self::Lz77Huffman | Self::Lznt1 => {
                crate::xca::decompress(self, input, out, len)
            }
        }
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_wire_ids_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
            assert_eq!(Algorithm::from_wire(a.wire()), Some(a));
        }
        assert_eq!(
            Algorithm::from_name("LZ77+Huffman"),
            Some(Algorithm::Lz77Huffman)
        );
        assert_eq!(Algorithm::from_wire(CompressionAlgorithm::NONE), None);
        assert_eq!(Algorithm::from_name("zstd"), None);
    }

    #[test]
    fn lz4_round_trips_and_refuses_a_wrong_size() {
        let input: Vec<u8> = b"the quick brown fox "
            .iter()
            .copied()
            .cycle()
            .take(10_000)
            .collect();
        let mut c = Vec::new();
        Algorithm::Lz4.compress(&input, &mut c);
        assert!(c.len() < input.len() / 10);
        let mut d = vec![1, 2];
        Algorithm::Lz4.decompress(&c, &mut d, input.len()).unwrap();
        assert_eq!(&d[2..], &input[..]);
        let mut short = Vec::new();
        assert!(
            Algorithm::Lz4
                .decompress(&c, &mut short, input.len() - 1)
                .is_err()
        );
        let mut long = Vec::new();
        assert!(
            Algorithm::Lz4
                .decompress(&c, &mut long, input.len() + 1)
                .is_err()
        );
        assert!(long.len() <= input.len() + 1);
    }
}
