//! Code shared by the fuzz targets (`fuzz_targets/`) and the seed generator
//! (`examples/gen_seeds.rs`): building valid SMB2 messages, driving the server engine through a
//! real NEGOTIATE and SESSION_SETUP, and the round-trip checks several targets run.
//!
//! Panics here are the point: a failed assertion is a bug in the code under test.
#![forbid(unsafe_code)]

pub mod auth;
pub mod driver;
pub mod fscc;
pub mod rpc;
pub mod smb2;
pub mod xca;

/// Splits `data` into chunks, each prefixed by a little-endian u16 length (so the fuzzer
/// chooses where tokens, writes or stream pushes begin); a length past the end takes the rest.
pub fn chunks(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let (n, tail) = match rest {
            [a, b, tail @ ..] => (usize::from(u16::from_le_bytes([*a, *b])), tail),
            _ => (0, &[][..]),
        };
        let (chunk, next) = tail.split_at(n.min(tail.len()));
        out.push(chunk);
        rest = next;
    }
    out
}

/// The inverse of [`chunks`], for seeds. Parts must be shorter than 64 KiB.
pub fn join_chunks(parts: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        let n = u16::try_from(p.len()).expect("seed chunk under 64 KiB");
        out.extend_from_slice(&n.to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}
