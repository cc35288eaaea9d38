//! AES-128-GMAC (GCM with an empty plaintext, RFC 4543) over data given in pieces, so an
//! SMB2 message's Signature field can be read as zero without touching the caller's buffer.
//!
//! Built from AES and GHASH directly rather than through `aes-gcm`, because the AEAD API
//! takes the associated data as one contiguous slice, which would force copying the whole
//! message (up to a full WRITE) just to zero 16 bytes of it for verification.

use aes::Aes128;
use aes::cipher::{BlockEncrypt, KeyInit, generic_array::GenericArray};
use ghash::GHash;
use ghash::universal_hash::UniversalHash;
use zeroize::Zeroize;

/// A keyed GMAC instance: the AES key schedule plus GHASH keyed with H = AES_K(0^128).
#[derive(Clone)]
pub(crate) struct Gmac {
    cipher: Aes128,
    ghash: GHash,
}

impl Gmac {
    pub(crate) fn new(key: &[u8; 16]) -> Self {
        let cipher = Aes128::new(GenericArray::from_slice(key));
        let mut h = GenericArray::default();
        cipher.encrypt_block(&mut h);
        let ghash = <GHash as KeyInit>::new(&h);
        h.zeroize();
        Self { cipher, ghash }
    }

    /// The tag over the concatenation of `parts` as associated data, with no plaintext.
    ///
    /// Every part but the last must be a whole number of 16-byte blocks: GHASH zero-pads
    /// each call, which is only right at the very end of the data.
    pub(crate) fn tag(&self, nonce: &[u8; 12], parts: &[&[u8]]) -> [u8; 16] {
        let mut g = self.ghash.clone();
        let mut aad_len: u128 = 0;
        for part in parts {
            debug_assert!(aad_len & 15 == 0, "only the last part may end mid-block");
            g.update_padded(part);
            aad_len += part.len() as u128;
        }
        // Length block: len(A) and len(C) in bits, 64 bits each, big-endian; C is empty.
        let len_block = ((aad_len * 8) << 64).to_be_bytes();
        g.update_padded(&len_block);
        let s = g.finalize();

        let mut j0 = [0u8; 16];
        for (d, s) in j0.iter_mut().zip(nonce.iter()) {
            *d = *s;
        }
        j0[15] = 1;
        let mut ek = GenericArray::from(j0);
        self.cipher.encrypt_block(&mut ek);

        let mut tag = [0u8; 16];
        for ((t, e), s) in tag.iter_mut().zip(ek.iter()).zip(s.iter()) {
            *t = e ^ s;
        }
        ek.zeroize();
        tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aes_gcm::Aes128Gcm;
    use aes_gcm::aead::AeadInPlace;

    /// GMAC must equal AES-GCM with an empty plaintext and the same AAD; checked against the
    /// independent `aes-gcm` implementation over lengths that hit every padding case.
    #[test]
    fn matches_aes_gcm_with_empty_plaintext() {
        let key = [0x42u8; 16];
        let nonce = [7u8; 12];
        let gmac = Gmac::new(&key);
        let gcm = Aes128Gcm::new(GenericArray::from_slice(&key));
        for tail_len in [0usize, 1, 15, 16, 17, 100, 4096 + 3] {
            let head: [u8; 48] = core::array::from_fn(|i| i as u8);
            let tail: Vec<u8> = (0..tail_len).map(|i| (i * 7 + 3) as u8).collect();
            let mut aad = head.to_vec();
            aad.extend_from_slice(&[0u8; 16]);
            aad.extend_from_slice(&tail);
            let want = gcm
                .encrypt_in_place_detached(GenericArray::from_slice(&nonce), &aad, &mut [])
                .unwrap();
            let got = gmac.tag(&nonce, &[&head, &[0u8; 16], &tail]);
            assert_eq!(got, want.as_slice(), "tail {tail_len}");
        }
    }

    /// NIST CAVP gcmEncryptExtIV128.rsp, [Keylen=128, IVlen=96, PTlen=0, AADlen=128,
    /// Taglen=128] Count 0: a pure GMAC computation (as carried in the RustCrypto `aes-gcm`
    /// test data).
    #[test]
    fn nist_gcm_empty_plaintext_vector() {
        let key: [u8; 16] = hex::decode("77be63708971c4e240d1cb79e8d77feb")
            .unwrap()
            .try_into()
            .unwrap();
        let nonce: [u8; 12] = hex::decode("e0e00f19fed7ba0136a797f3")
            .unwrap()
            .try_into()
            .unwrap();
        let aad = hex::decode("7a43ec1d9c0a5a78a0b16533a6213cab").unwrap();
        let tag = Gmac::new(&key).tag(&nonce, &[&aad]);
        assert_eq!(hex::encode(tag), "209fcc8d3675ed938e9c7166709dd946");
    }
}
