//! The one error type of every decoder in this crate.

use std::fmt;

/// Why a compressed stream was rejected.
///
/// Every decoder returns one of these instead of panicking, and stops at the first problem:
/// nothing it wrote before failing is meaningful.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The input ended before `expected_len` bytes had been produced.
    Truncated,
    /// A match refers to bytes before the start of the output (or, in LZNT1, before the
    /// start of its chunk).
    BadDistance,
    /// A match length escape encodes a length the format cannot produce (MS-XCA 2.2.4, 2.4.4).
    BadLength,
    /// The stream would produce more than `expected_len` bytes.
    TooLong,
    /// The stream ended (end-of-stream symbol, LZNT1 terminator) short of `expected_len`.
    SizeMismatch,
    /// Bytes follow the end of the stream that no encoder would leave there.
    TrailingData,
    /// An LZ77+Huffman block's 512 code lengths do not form a complete prefix code
    /// (MS-XCA 2.2.4).
    BadHuffmanTable,
    /// An LZNT1 chunk header has the wrong signature or claims more bytes than the input
    /// holds (MS-XCA 2.5).
    BadChunkHeader,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "compressed stream is truncated",
            Error::BadDistance => "match refers before the start of the output",
            Error::BadLength => "match length escape is invalid",
            Error::TooLong => "stream decodes to more than the expected length",
            Error::SizeMismatch => "stream ends short of the expected length",
            Error::TrailingData => "data follows the end of the compressed stream",
            Error::BadHuffmanTable => "Huffman code lengths do not form a complete code",
            Error::BadChunkHeader => "LZNT1 chunk header is invalid",
        })
    }
}

impl std::error::Error for Error {}
