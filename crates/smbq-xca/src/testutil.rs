//! Data generators and checks shared by the codecs' unit tests.

use crate::Error;

/// A codec's two functions.
pub(crate) type Compress = fn(&[u8], &mut Vec<u8>);
pub(crate) type Decompress = fn(&[u8], &mut Vec<u8>, usize) -> Result<(), Error>;

/// xorshift64: enough randomness for incompressible test data, no dependency.
pub(crate) fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// English-like text: words drawn at random from a small vocabulary.
pub(crate) fn text(len: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the ",
        "server ",
        "share ",
        "compress ",
        "of ",
        "and ",
        "SMB ",
        "request ",
        "file ",
        "a ",
        "negotiate ",
        "session ",
        "tree ",
        "connect ",
        "read ",
        "write ",
        "to ",
        "in ",
        "Windows ",
        "client ",
        "chunk ",
        "window ",
        "match ",
        "literal.\n",
        "byte, ",
        "block ",
    ];
    let mut out = Vec::with_capacity(len + 16);
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize].as_bytes());
    }
    out.truncate(len);
    out
}

/// Text, zeros, random and a run, one after another.
pub(crate) fn mixed(len: usize) -> Vec<u8> {
    let q = len / 4;
    let mut v = text(q);
    v.extend(std::iter::repeat_n(0u8, q));
    v.extend(random(q, 7));
    v.extend(std::iter::repeat_n(b'x', len - 3 * q));
    v
}

/// Compresses `data`, checks it decompresses to itself (after a prefix already in `out`, to
/// show matches cannot reach into it), and returns the compressed bytes.
pub(crate) fn round_trip(c: Compress, d: Decompress, data: &[u8]) -> Vec<u8> {
    let mut z = Vec::new();
    c(data, &mut z);
    let mut out = b"prefix".to_vec();
    d(&z, &mut out, data.len()).unwrap_or_else(|e| panic!("len {}: {e}", data.len()));
    assert!(
        out[6..] == *data,
        "round trip of {} bytes differs",
        data.len()
    );
    z
}

/// The sizes, data kinds and edge cases every codec must round-trip.
pub(crate) fn round_trip_suite(c: Compress, d: Decompress, sizes: &[usize]) {
    for data in [
        Vec::new(),
        vec![42],
        b"abc".to_vec(),
        text(100_000),
        random(100_000, 1),
        mixed(200_000),
        vec![0; 1 << 20],
    ] {
        round_trip(c, d, &data);
    }
    for &n in sizes {
        round_trip(c, d, &text(n));
        round_trip(c, d, &random(n, n as u64));
        round_trip(c, d, &vec![7; n]);
    }
    // Every short length, so every tail and flag-word boundary is crossed.
    let t = text(300);
    for n in 0..t.len() {
        round_trip(c, d, &t[..n]);
    }
}

/// Decoder checks every codec must pass on the compressed form of `data`: each strict prefix,
/// and the right stream with a wrong length, fail with an error rather than a panic.
pub(crate) fn hostile_suite(c: Compress, d: Decompress, data: &[u8]) {
    let mut z = Vec::new();
    c(data, &mut z);
    // Every prefix of a short stream; about 500 spread over a long one.
    for cut in (0..z.len()).step_by((z.len() / 500).max(1)) {
        let mut out = Vec::new();
        assert!(d(&z[..cut], &mut out, data.len()).is_err(), "prefix {cut}");
        assert!(out.len() <= data.len());
    }
    let mut out = Vec::new();
    assert!(
        d(&z, &mut out, data.len() - 1).is_err(),
        "expected_len too small"
    );
    assert!(out.len() < data.len());
    let mut out = Vec::new();
    assert!(
        d(&z, &mut out, data.len() + 1).is_err(),
        "expected_len too large"
    );
    // A tiny stream claiming a huge length: an error, and output no larger than it holds.
    let mut out = Vec::new();
    assert!(d(&z, &mut out, 64 << 20).is_err(), "bomb");
    assert!(
        out.len() < 1 << 20,
        "the bomb's output stays near the stream's real size"
    );
    // Random garbage never panics, and never writes past expected_len.
    for seed in 0..200 {
        let g = crate::testutil::random(seed as usize * 7 % 600, seed);
        let mut out = Vec::new();
        let _ = d(&g, &mut out, 5000);
        assert!(out.len() <= 5000);
    }
}
