//! `smbq_compress` (MS-SMB2 2.2.42, 3.1.5.3): an incoming compressed message, chained or not,
//! through every decompressor, under a 1 MiB limit; then the same bytes compressed and
//! decompressed again. Never a panic, never more than the limit, and what is compressed comes
//! back as it was.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_compress::{Algorithm, Compression};
use smbq_wire::negotiate::compression_flags;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let all: Vec<_> = Algorithm::ALL.iter().map(|a| a.wire()).collect();
    for flags in [compression_flags::CHAINED, compression_flags::NONE] {
        let c = Compression::settle(&Algorithm::ALL, &all, flags);
        if let Ok(out) = c.decompress(data, LIMIT) {
            assert!(out.len() <= LIMIT, "decompressed past the limit");
            assert_eq!(out[..4], [0xFE, b'S', b'M', b'B']);
        }
    }
    // Round trip: the first bytes as the uncompressed prefix (an SMB2 header), the rest as
    // data, with each general algorithm leading.
    let mut prefix = vec![0xFE, b'S', b'M', b'B'];
    let split = data.len().min(60);
    prefix.extend_from_slice(&data[..split]);
    let body = &data[split..];
    for lead in Algorithm::ALL.into_iter().filter(|a| a.available() && a.is_general()) {
        let mut order = vec![lead, Algorithm::PatternV1];
        let rest: Vec<_> = Algorithm::ALL
            .into_iter()
            .filter(|a| !order.contains(a))
            .collect();
        order.extend(rest);
        for flags in [compression_flags::CHAINED, compression_flags::NONE] {
            let c = Compression::settle(&order, &all, flags);
            if let Some(m) = c.compress(&prefix, body) {
                let back = c.decompress(&m.message, LIMIT + 64).expect("own output decompresses");
                assert_eq!(back[..prefix.len()], prefix[..]);
                assert_eq!(back[prefix.len()..], body[..]);
            }
        }
    }
});
