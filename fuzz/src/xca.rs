//! The check the three MS-XCA targets (`xca_lz77`, `xca_lz77_huffman`, `xca_lznt1`) share.

/// A codec's `compress` and `decompress` (smbq_xca::{lz77, lz77_huffman, lznt1}).
pub type Compress = fn(&[u8], &mut Vec<u8>);
pub type Decompress = fn(&[u8], &mut Vec<u8>, usize) -> Result<(), smbq_xca::Error>;

/// The largest expected length a target asks for, so one input costs at most 1 MiB.
pub const MAX_EXPECTED: usize = 1 << 20;

/// Input: a little-endian u32 expected length (capped at [`MAX_EXPECTED`]), then a stream.
/// Decompressing the stream must not panic, must append exactly the expected length on
/// success, and must never append more. Then the whole input must round-trip through
/// `compress` and `decompress`.
pub fn check(data: &[u8], compress: Compress, decompress: Decompress) {
    if let [a, b, c, d, stream @ ..] = data {
        let expected = (u32::from_le_bytes([*a, *b, *c, *d]) as usize).min(MAX_EXPECTED);
        let mut out = b"prefix".to_vec();
        let res = decompress(stream, &mut out, expected);
        assert!(
            out.starts_with(b"prefix"),
            "decoder changed bytes before its output"
        );
        assert!(out.len() - 6 <= expected, "decoder wrote past expected_len");
        if res.is_ok() {
            assert_eq!(out.len() - 6, expected, "Ok with the wrong length");
        }
    }
    let mut z = Vec::new();
    compress(data, &mut z);
    let mut out = Vec::new();
    if let Err(e) = decompress(&z, &mut out, data.len()) {
        panic!("round trip of {} bytes failed: {e}", data.len());
    }
    assert!(out == data, "round trip differs");
}
