//! Encryption of SMB2 messages under the transform header (MS-SMB2 2.2.41, 3.1.4.3,
//! 3.2.5.1.1.1 / 3.3.5.2.1.1): AES-CCM or AES-GCM with a 16-byte tag, in place.
//!
//! Transform header layout: ProtocolId 0..4, Signature (the AEAD tag) 4..20, Nonce 20..36,
//! OriginalMessageSize 36..40, Reserved 40..42, Flags/EncryptionAlgorithm 42..44,
//! SessionId 44..52. The AAD is the 32 bytes from Nonce to the end of the header; the AEAD
//! nonce is the first 11 (CCM) or 12 (GCM) bytes of the Nonce field.

use core::ops::Range;

use std::sync::Arc;

use aes::{Aes128, Aes256};
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{AeadInPlace, KeyInit};
use aws_lc_rs::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ccm::Ccm;
use ccm::consts::{U11, U16};

use crate::algorithm::Cipher;
use crate::error::CryptoError;

/// Length of the SMB2 TRANSFORM_HEADER (MS-SMB2 2.2.41).
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// The Signature field of the transform header: the AEAD tag.
pub const TRANSFORM_SIGNATURE: Range<usize> = 4..20;
/// The Nonce field of the transform header.
pub const TRANSFORM_NONCE: Range<usize> = 20..36;
/// The additional authenticated data: Nonce through SessionId.
pub const TRANSFORM_AAD: Range<usize> = 20..52;

type Aes128Ccm = Ccm<Aes128, U16, U11>;
type Aes256Ccm = Ccm<Aes256, U16, U11>;

/// An initialised cipher for one key: build once per session direction, reuse for every
/// message. CCM key schedules are zeroized on drop (the `zeroize` feature of `aes`); GCM keys
/// live in AWS-LC's AEAD context, which AWS-LC cleans up when the key is dropped.
///
/// Nonce uniqueness is the caller's job: a (key, nonce) pair must never seal twice, which
/// for GCM would expose the authentication key.
#[derive(Clone)]
pub struct Sealer {
    inner: Inner,
}

// Boxed so a Sealer is pointer-sized wherever sessions keep one, whatever the variant.
#[derive(Clone)]
enum Inner {
    Aes128Ccm(Box<Aes128Ccm>),
    Aes256Ccm(Box<Aes256Ccm>),
    /// AES-128-GCM or AES-256-GCM (which one: `Gcm::aes256`).
    Gcm(Arc<Gcm>),
}

struct Gcm {
    key: LessSafeKey,
    aes256: bool,
}

impl Gcm {
    fn new(cipher: Cipher, key: &[u8]) -> Result<Self, CryptoError> {
        let alg = if cipher.is_aes256() {
            &AES_256_GCM
        } else {
            &AES_128_GCM
        };
        let key = UnboundKey::new(alg, key).map_err(|_| CryptoError::KeyLength {
            expected: cipher.key_len(),
            got: key.len(),
        })?;
        Ok(Self {
            key: LessSafeKey::new(key),
            aes256: cipher.is_aes256(),
        })
    }
}

fn gcm_nonce(nonce: &[u8]) -> Result<Nonce, CryptoError> {
    Nonce::try_assume_unique_for_key(nonce).map_err(|_| CryptoError::NonceLength {
        expected: 12,
        got: nonce.len(),
    })
}

impl core::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sealer")
            .field("cipher", &self.cipher())
            .finish_non_exhaustive()
    }
}

impl Sealer {
    pub fn new(cipher: Cipher, key: &[u8]) -> Result<Self, CryptoError> {
        if key.len() != cipher.key_len() {
            return Err(CryptoError::KeyLength {
                expected: cipher.key_len(),
                got: key.len(),
            });
        }
        // Lengths checked above, so `from_slice` cannot panic.
        let inner = match cipher {
            Cipher::Aes128Ccm => {
                Inner::Aes128Ccm(Box::new(Aes128Ccm::new(GenericArray::from_slice(key))))
            }
            Cipher::Aes256Ccm => {
                Inner::Aes256Ccm(Box::new(Aes256Ccm::new(GenericArray::from_slice(key))))
            }
            Cipher::Aes128Gcm | Cipher::Aes256Gcm => Inner::Gcm(Arc::new(Gcm::new(cipher, key)?)),
        };
        Ok(Self { inner })
    }

    pub fn cipher(&self) -> Cipher {
        match &self.inner {
            Inner::Aes128Ccm(_) => Cipher::Aes128Ccm,
            Inner::Aes256Ccm(_) => Cipher::Aes256Ccm,
            Inner::Gcm(g) if g.aes256 => Cipher::Aes256Gcm,
            Inner::Gcm(_) => Cipher::Aes128Gcm,
        }
    }

    /// `nonce` may be the whole 16-byte Nonce field or just its first `nonce_len()` bytes.
    fn nonce<'n>(&self, nonce: &'n [u8]) -> Result<&'n [u8], CryptoError> {
        let n = self.cipher().nonce_len();
        match nonce.len() {
            16 => nonce.get(..n).ok_or(CryptoError::NonceLength {
                expected: n,
                got: 16,
            }),
            len if len == n => Ok(nonce),
            got => Err(CryptoError::NonceLength { expected: n, got }),
        }
    }

    /// Encrypts `buf` in place and returns the tag (the transform header's Signature).
    pub fn seal_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Result<[u8; 16], CryptoError> {
        let nonce = self.nonce(nonce)?;
        let tag = match &self.inner {
            Inner::Aes128Ccm(c) => {
                c.encrypt_in_place_detached(GenericArray::from_slice(nonce), aad, buf)
            }
            Inner::Aes256Ccm(c) => {
                c.encrypt_in_place_detached(GenericArray::from_slice(nonce), aad, buf)
            }
            Inner::Gcm(g) => {
                let tag = g
                    .key
                    .seal_in_place_separate_tag(gcm_nonce(nonce)?, Aad::from(aad), buf)
                    .map_err(|_| CryptoError::PayloadTooLarge)?;
                let mut out = [0u8; 16];
                out.copy_from_slice(tag.as_ref());
                return Ok(out);
            }
        }
        // The only failure of encryption is a payload beyond the mode's limit
        // (CCM with an 11-byte nonce: 2^32 - 1 bytes; GCM: 2^36 bytes).
        .map_err(|_| CryptoError::PayloadTooLarge)?;
        Ok(tag.into())
    }

    /// Authenticates and decrypts `buf` in place. On failure `buf` holds no plaintext (it is
    /// wiped) and must be discarded.
    pub fn open_in_place(
        &self,
        nonce: &[u8],
        aad: &[u8],
        buf: &mut [u8],
        tag: &[u8; 16],
    ) -> Result<(), CryptoError> {
        let nonce = self.nonce(nonce)?;
        let tag_ga = GenericArray::from_slice(tag);
        match &self.inner {
            Inner::Aes128Ccm(c) => {
                c.decrypt_in_place_detached(GenericArray::from_slice(nonce), aad, buf, tag_ga)
            }
            Inner::Aes256Ccm(c) => {
                c.decrypt_in_place_detached(GenericArray::from_slice(nonce), aad, buf, tag_ga)
            }
            Inner::Gcm(g) => {
                let r =
                    g.key
                        .open_in_place_separate_tag(gcm_nonce(nonce)?, Aad::from(aad), tag, buf);
                if r.is_err() {
                    // AWS-LC may have written part of the plaintext before the tag check.
                    buf.fill(0);
                    return Err(CryptoError::AuthenticationFailed);
                }
                return Ok(());
            }
        }
        .map_err(|_| CryptoError::AuthenticationFailed)
    }

    /// Seals `payload` (the SMB2 message(s) that follow) under a filled-in transform header:
    /// the nonce and AAD are read from `header`, the tag is written to its Signature field.
    pub fn seal_transform(
        &self,
        header: &mut [u8; TRANSFORM_HEADER_LEN],
        payload: &mut [u8],
    ) -> Result<(), CryptoError> {
        let tag = {
            let (nonce, aad) = nonce_and_aad(header);
            self.seal_in_place(nonce, aad, payload)?
        };
        header[TRANSFORM_SIGNATURE].copy_from_slice(&tag);
        Ok(())
    }

    /// Opens `payload` against a received transform header (its Signature is the tag).
    pub fn open_transform(
        &self,
        header: &[u8; TRANSFORM_HEADER_LEN],
        payload: &mut [u8],
    ) -> Result<(), CryptoError> {
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&header[TRANSFORM_SIGNATURE]);
        let (nonce, aad) = nonce_and_aad(header);
        self.open_in_place(nonce, aad, payload, &tag)
    }
}

fn nonce_and_aad(header: &[u8; TRANSFORM_HEADER_LEN]) -> (&[u8], &[u8]) {
    (&header[TRANSFORM_NONCE], &header[TRANSFORM_AAD])
}

/// One-shot [`Sealer::seal_in_place`]; prefer a kept [`Sealer`] on hot paths.
pub fn encrypt_in_place(
    cipher: Cipher,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
) -> Result<[u8; 16], CryptoError> {
    Sealer::new(cipher, key)?.seal_in_place(nonce, aad, buf)
}

/// One-shot [`Sealer::open_in_place`].
pub fn decrypt_in_place(
    cipher: Cipher,
    key: &[u8],
    nonce: &[u8],
    aad: &[u8],
    buf: &mut [u8],
    tag: &[u8; 16],
) -> Result<(), CryptoError> {
    Sealer::new(cipher, key)?.open_in_place(nonce, aad, buf, tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Cipher; 4] = [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ];

    #[test]
    fn round_trip_and_tamper_every_cipher() {
        for cipher in ALL {
            let key = vec![0x5au8; cipher.key_len()];
            let s = Sealer::new(cipher, &key).unwrap();
            let nonce = [0x11u8; 16];
            let aad = [0x22u8; 32];
            let plain: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
            let mut buf = plain.clone();
            let tag = s.seal_in_place(&nonce, &aad, &mut buf).unwrap();
            assert_ne!(buf, plain, "{cipher:?} did not encrypt");

            let mut ok = buf.clone();
            s.open_in_place(&nonce, &aad, &mut ok, &tag).unwrap();
            assert_eq!(ok, plain);

            let mut flipped = buf.clone();
            flipped[500] ^= 0x01;
            assert_eq!(
                s.open_in_place(&nonce, &aad, &mut flipped, &tag),
                Err(CryptoError::AuthenticationFailed)
            );
            let mut bad_aad = aad;
            bad_aad[31] ^= 0x80;
            assert!(
                s.open_in_place(&nonce, &bad_aad, &mut buf.clone(), &tag)
                    .is_err()
            );
            let mut bad_tag = tag;
            bad_tag[0] ^= 1;
            assert!(
                s.open_in_place(&nonce, &aad, &mut buf.clone(), &bad_tag)
                    .is_err()
            );
            // A different nonce is a different keystream and tag.
            let mut other_nonce = nonce;
            other_nonce[0] ^= 1;
            assert!(
                s.open_in_place(&other_nonce, &aad, &mut buf.clone(), &tag)
                    .is_err()
            );
        }
    }

    #[test]
    fn nonce_field_or_prefix_are_equivalent() {
        for cipher in ALL {
            let s = Sealer::new(cipher, &vec![1u8; cipher.key_len()]).unwrap();
            let field = [0x33u8; 16];
            let mut a = *b"payload";
            let mut b = *b"payload";
            let ta = s.seal_in_place(&field, b"aad", &mut a).unwrap();
            let tb = s
                .seal_in_place(&field[..cipher.nonce_len()], b"aad", &mut b)
                .unwrap();
            assert_eq!((a, ta), (b, tb));
            assert_eq!(
                s.seal_in_place(&field[..10], b"aad", &mut a),
                Err(CryptoError::NonceLength {
                    expected: cipher.nonce_len(),
                    got: 10
                })
            );
        }
    }

    #[test]
    fn wrong_key_length_is_refused() {
        assert_eq!(
            Sealer::new(Cipher::Aes256Gcm, &[0u8; 16])
                .err()
                .map(|e| e.to_string()),
            Some("key is 16 bytes, expected 32".to_string())
        );
    }

    #[test]
    fn transform_helpers_use_header_fields() {
        let s = Sealer::new(Cipher::Aes128Gcm, &[7u8; 16]).unwrap();
        let mut header = [0u8; TRANSFORM_HEADER_LEN];
        header[..4].copy_from_slice(b"\xfdSMB");
        header[20..32].copy_from_slice(&[9u8; 12]);
        header[44..52].copy_from_slice(&0x1234u64.to_le_bytes());
        let mut payload = *b"an smb2 message goes here";
        s.seal_transform(&mut header, &mut payload).unwrap();
        let mut again = *b"an smb2 message goes here";
        let tag = s
            .seal_in_place(&header[20..32], &header[20..52], &mut again)
            .unwrap();
        assert_eq!(&header[4..20], &tag);
        assert_eq!(payload, again);
        s.open_transform(&header, &mut payload).unwrap();
        assert_eq!(&payload, b"an smb2 message goes here");
        // SessionId is authenticated.
        header[44] ^= 1;
        assert!(s.open_transform(&header, &mut again).is_err());
    }
}
