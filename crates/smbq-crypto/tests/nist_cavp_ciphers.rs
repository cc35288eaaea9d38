//! NIST CAVP vectors for each SMB cipher at exactly SMB's parameters (11-byte CCM nonce,
//! 12-byte GCM nonce, 16-byte tag), run through `Sealer`.
//!
//! Sources: CCM records are the first of the CAVP CCM sets with Nlen=11, Tlen=16 (AES-128 and
//! AES-256), as packaged in the RustCrypto `ccm` 0.5 test data (`cavp_ccm_aes{128,256}_16_11`);
//! GCM records are from CAVP `gcmEncryptExtIV128.rsp` / `gcmEncryptExtIV256.rsp`, as carried
//! in the RustCrypto `aes-gcm` 0.10 tests.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use smbq_crypto::{Cipher, CryptoError, Sealer, decrypt_in_place};

fn h(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

struct V {
    cipher: Cipher,
    key: &'static str,
    nonce: &'static str,
    aad: &'static str,
    pt: &'static str,
    ct_tag: &'static str,
}

const VECTORS: [V; 4] = [
    V {
        cipher: Cipher::Aes128Ccm,
        key: "e6ab9e70a4fb51b01c2e262233e64c0d",
        nonce: "74e689eb5af9441dd690a6",
        aad: "42f6518ee0fbe42f28e13b4bb2eb60517b37c9744394d9143393a879c3e107c7",
        pt: "ba15916733550d7aa82b2f6b117cd3f54c83ddc16cd0288a",
        ct_tag: "dcc151443288f35d39ed8fae6f0ce1d1eb656f4f7fd65c0b16f322ce85d7c54e71ac560fd4da9651",
    },
    V {
        cipher: Cipher::Aes256Ccm,
        key: "97bc7482a87ba005475dfa3448f59d4b3f9c4c969d08b39b1b21ef965c0f5125",
        nonce: "0bcf78103ec52d6df28887",
        aad: "049c10f0cb37ae08eae2d0766563b7c5a8454f841c2061a4f71a0a2158ae6ce5",
        pt: "b99bf4dc781795fc4d3a8467b06e1665d4e543657f23129f",
        ct_tag: "0d3891fa0caac1f7ebe41b480920ffd34d4155064c24f3b17a483163dd8f228d1f20cd4f86cf38fd",
    },
    V {
        cipher: Cipher::Aes128Gcm,
        key: "c939cc13397c1d37de6ae0e1cb7c423c",
        nonce: "b3d8cc017cbb89b39e0f67e2",
        aad: "24825602bd12a984e0092d3e448eda5f",
        pt: "c3b3c41f113a31b73d9a5cd432103069",
        ct_tag: "93fe7d9e9bfd10348a5606e5cafa73540032a1dc85f1c9786925a2e71d8272dd",
    },
    V {
        cipher: Cipher::Aes256Gcm,
        key: "92e11dcdaa866f5ce790fd24501f92509aacf4cb8b1339d50c9c1240935dd08b",
        nonce: "ac93a1a6145299bde902f21a",
        aad: "1e0889016f67601c8ebea4943bc23ad6",
        pt: "2d71bcfa914e4ac045b2aa60955fad24",
        ct_tag: "8995ae2e6df3dbf96fac7b7137bae67feca5aa77d51d4a0a14d9c51e1da474ab",
    },
];

#[test]
fn seal_and_open_match_cavp() {
    for v in &VECTORS {
        let sealer = Sealer::new(v.cipher, &h(v.key)).unwrap();
        assert_eq!(sealer.cipher(), v.cipher);
        let ct_tag = h(v.ct_tag);
        let (ct, tag) = ct_tag.split_at(ct_tag.len() - 16);
        let tag: [u8; 16] = tag.try_into().unwrap();

        let mut buf = h(v.pt);
        let got_tag = sealer
            .seal_in_place(&h(v.nonce), &h(v.aad), &mut buf)
            .unwrap();
        assert_eq!(buf, ct, "{:?} ciphertext", v.cipher);
        assert_eq!(got_tag, tag, "{:?} tag", v.cipher);

        sealer
            .open_in_place(&h(v.nonce), &h(v.aad), &mut buf, &tag)
            .unwrap();
        assert_eq!(buf, h(v.pt));

        let mut bad = ct.to_vec();
        bad[0] ^= 0x80;
        assert_eq!(
            decrypt_in_place(v.cipher, &h(v.key), &h(v.nonce), &h(v.aad), &mut bad, &tag),
            Err(CryptoError::AuthenticationFailed)
        );
    }
}
