//! `smbq_xca::lz77_huffman` (MS-XCA 2.1/2.2 LZ77+Huffman): the first 4 bytes are an expected length (capped at
//! 1 MiB), the rest a stream to decompress; then the whole input round-trips through
//! compress and decompress (`smbq_fuzz::xca::check`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_xca::lz77_huffman::{compress, decompress};

fuzz_target!(|data: &[u8]| smbq_fuzz::xca::check(data, compress, decompress));
