//! SP800-108 key derivation in counter mode with HMAC-SHA256 as the PRF (MS-SMB2 3.1.4.2).
//!
//! K(i) = HMAC-SHA256(Ki, [i]_32be || Label || 0x00 || Context || [L]_32be), i = 1, 2, ...
//! and the key is the leftmost L bits of K(1) || K(2) || ... (r = 32, big-endian counters).
//! The single 0x00 separator is added here; SMB's labels and contexts already end with
//! their own NUL, which the caller includes (e.g. `b"SMBSigningKey\0"`).

use hmac::{Hmac, Mac};
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

/// Fills `out` with the first `out.len() * 8` bits of the KDF output (L = that many bits).
pub fn kdf_into(ki: &[u8], label: &[u8], context: &[u8], out: &mut [u8]) {
    let l_bits = u32::try_from(out.len().saturating_mul(8)).unwrap_or(u32::MAX);
    fill(ki, label, context, l_bits, out);
}

/// The KDF output for `l_bits` bits (SMB uses 128 and 256). A length that is not a whole
/// number of bytes keeps only the leftmost `l_bits` bits, the rest of the last byte zero.
pub fn kdf(ki: &[u8], label: &[u8], context: &[u8], l_bits: u32) -> Zeroizing<Vec<u8>> {
    let bytes = usize::try_from(l_bits.div_ceil(8)).unwrap_or(usize::MAX);
    let mut out = Zeroizing::new(vec![0u8; bytes]);
    fill(ki, label, context, l_bits, &mut out);
    let spare = (bytes * 8) as u64 - u64::from(l_bits);
    if let Some(last) = out.last_mut() {
        *last &= 0xffu8 << spare;
    }
    out
}

fn fill(ki: &[u8], label: &[u8], context: &[u8], l_bits: u32, out: &mut [u8]) {
    // HMAC takes keys of any length (long ones are hashed), so this cannot fail.
    let Ok(keyed) = <Hmac<Sha256> as Mac>::new_from_slice(ki) else {
        unreachable!("HMAC accepts keys of any length")
    };
    for (i, chunk) in (1u32..).zip(out.chunks_mut(32)) {
        let mut mac = keyed.clone();
        mac.update(&i.to_be_bytes());
        mac.update(label);
        mac.update(&[0]);
        mac.update(context);
        mac.update(&l_bits.to_be_bytes());
        let mut block: [u8; 32] = mac.finalize().into_bytes().into();
        for (o, b) in chunk.iter_mut().zip(block.iter()) {
            *o = *b;
        }
        block.zeroize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The construction written out by hand for one block, against an independent HMAC
    /// computation, so a wrong separator, counter width or L encoding shows.
    #[test]
    fn one_block_layout() {
        let ki = [0x11u8; 16];
        let mut msg = vec![0, 0, 0, 1];
        msg.extend_from_slice(b"SMB2AESCMAC\0");
        msg.push(0);
        msg.extend_from_slice(b"SmbSign\0");
        msg.extend_from_slice(&128u32.to_be_bytes());
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&ki).unwrap();
        mac.update(&msg);
        let want = mac.finalize().into_bytes();
        let got = kdf(&ki, b"SMB2AESCMAC\0", b"SmbSign\0", 128);
        assert_eq!(got.as_slice(), &want[..16]);
    }

    /// L is part of the PRF input, so a 256-bit key is not the 128-bit key extended.
    #[test]
    fn length_is_bound_into_output() {
        let k128 = kdf(b"k", b"L\0", b"C\0", 128);
        let k256 = kdf(b"k", b"L\0", b"C\0", 256);
        assert_eq!(k256.len(), 32);
        assert_ne!(&k256[..16], k128.as_slice());
        let mut buf = [0u8; 32];
        kdf_into(b"k", b"L\0", b"C\0", &mut buf);
        assert_eq!(&buf[..], k256.as_slice());
    }

    /// Outputs longer than one HMAC block use counter 2 for the second block.
    #[test]
    fn multi_block_uses_next_counter() {
        let long = kdf(b"k", b"L\0", b"C\0", 512);
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(b"k").unwrap();
        mac.update(&2u32.to_be_bytes());
        mac.update(b"L\0\0C\0");
        mac.update(&512u32.to_be_bytes());
        assert_eq!(&long[32..], mac.finalize().into_bytes().as_slice());
    }

    #[test]
    fn partial_byte_is_masked() {
        let k = kdf(b"k", b"L\0", b"C\0", 12);
        assert_eq!(k.len(), 2);
        assert_eq!(k[1] & 0x0f, 0);
    }
}
