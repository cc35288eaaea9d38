//! SMB2/3 cryptography (MS-SMB2 3.1.4): message signing (HMAC-SHA256, AES-CMAC, AES-GMAC),
//! SP800-108 key derivation, the SHA-512 preauth integrity hash, and AES-CCM/GCM encryption
//! of transform-header payloads, in place. No IO.
//!
//! Keys live in types that zeroize themselves on drop; nothing here logs or prints a key
//! (`Debug` impls redact them).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::indexing_slicing))]

mod algorithm;
mod error;
mod gmac;
mod kdf;
mod keys;
mod preauth;
mod seal;
mod signing;

pub use algorithm::{Cipher, SigningAlgorithm};
pub use error::CryptoError;
pub use kdf::{kdf, kdf_into};
pub use keys::{CipherKey, Role, SessionKeys, derive_keys, derive_signing_key};
pub use preauth::PreauthHash;
pub use seal::{
    Sealer, TRANSFORM_AAD, TRANSFORM_HEADER_LEN, TRANSFORM_NONCE, TRANSFORM_SIGNATURE,
    decrypt_in_place, encrypt_in_place,
};
pub use signing::{HEADER_LEN, SIGNATURE, Signer, gmac_nonce_of, sign, verify};

/// Dialect revision numbers (MS-SMB2 2.2.3), as used to pick the key derivation.
pub const DIALECT_2_0_2: u16 = 0x0202;
pub const DIALECT_2_1: u16 = 0x0210;
pub const DIALECT_3_0: u16 = 0x0300;
pub const DIALECT_3_0_2: u16 = 0x0302;
pub const DIALECT_3_1_1: u16 = 0x0311;
