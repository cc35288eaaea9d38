//! `smbq_xca::lz77` (MS-XCA 2.3/2.4 plain LZ77): the first 4 bytes are an expected length (capped at
//! 1 MiB), the rest a stream to decompress; then the whole input round-trips through
//! compress and decompress (`smbq_fuzz::xca::check`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_xca::lz77::{compress, decompress};

fuzz_target!(|data: &[u8]| smbq_fuzz::xca::check(data, compress, decompress));
