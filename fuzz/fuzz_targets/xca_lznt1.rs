//! `smbq_xca::lznt1` (MS-XCA 2.5 LZNT1): the first 4 bytes are an expected length (capped at
//! 1 MiB), the rest a stream to decompress; then the whole input round-trips through
//! compress and decompress (`smbq_fuzz::xca::check`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_xca::lznt1::{compress, decompress};

fuzz_target!(|data: &[u8]| smbq_fuzz::xca::check(data, compress, decompress));
