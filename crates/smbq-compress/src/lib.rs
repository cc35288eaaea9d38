//! SMB 3.1.1 compression, sans IO: which algorithms a connection uses (MS-SMB2 3.3.5.4,
//! 3.2.5.2), compressing an outgoing message (3.1.4.4) and decompressing an incoming one
//! (3.1.5.3), chained and unchained, with LZ4, Pattern_V1 and MS-XCA's LZ77, LZ77+Huffman and
//! LZNT1. The server's engine and smbq's client both use it; neither has a copy of its rules.
#![forbid(unsafe_code)]

mod algorithm;
pub mod pace;
mod transform;
mod xca;

pub use algorithm::Algorithm;
pub use pace::{LinkRate, Pace};
pub use transform::{Compressed, Compression, DecompressError, MIN_RUN};
