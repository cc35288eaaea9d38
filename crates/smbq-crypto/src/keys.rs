//! Per-session key derivation (MS-SMB2 3.2.5.3.1 client, 3.3.5.5.3 server).
//!
//! | key | 3.0 / 3.0.2 label, context | 3.1.1 label (context = preauth hash) |
//! |---|---|---|
//! | signing | "SMB2AESCMAC\0", "SmbSign\0" | "SMBSigningKey\0" |
//! | application | "SMB2APP\0", "SmbRpc\0" | "SMBAppKey\0" |
//! | client-to-server cipher | "SMB2AESCCM\0", "ServerIn \0" | "SMBC2SCipherKey\0" |
//! | server-to-client cipher | "SMB2AESCCM\0", "ServerOut\0" | "SMBS2CCipherKey\0" |
//!
//! Dialects 2.0.2 and 2.1 derive nothing: the session key itself signs (HMAC-SHA256).

use zeroize::{Zeroize, ZeroizeOnDrop, Zeroizing};

use crate::algorithm::Cipher;
use crate::error::CryptoError;
use crate::kdf::kdf_into;
use crate::seal::Sealer;
use crate::{DIALECT_2_0_2, DIALECT_2_1, DIALECT_3_0, DIALECT_3_0_2, DIALECT_3_1_1};

/// Which end of the connection we are; decides which cipher key encrypts and which decrypts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Server,
    Client,
}

/// A 128- or 256-bit cipher key.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct CipherKey {
    bytes: [u8; 32],
    len: usize,
}

impl CipherKey {
    fn zeroed(len: usize) -> Self {
        Self {
            bytes: [0u8; 32],
            len: len.min(32),
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    fn as_mut_bytes(&mut self) -> &mut [u8] {
        self.bytes.get_mut(..self.len).unwrap_or_default()
    }
}

impl core::fmt::Debug for CipherKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "CipherKey({} bits, redacted)", self.len * 8)
    }
}

/// The keys of one session, named from this end's point of view. Zeroized on drop.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub struct SessionKeys {
    signing: [u8; 16],
    application: [u8; 16],
    encryption: Option<CipherKey>,
    decryption: Option<CipherKey>,
    #[zeroize(skip)]
    cipher: Option<Cipher>,
}

impl SessionKeys {
    /// Session.SigningKey (3.x) or Session.SessionKey (2.x).
    pub fn signing_key(&self) -> &[u8; 16] {
        &self.signing
    }

    /// Session.ApplicationKey (3.x); for 2.x, the session key, which is what 2.x hands to
    /// applications such as DCE/RPC over named pipes.
    pub fn application_key(&self) -> &[u8; 16] {
        &self.application
    }

    /// The key for what this end sends (server: S2C, client: C2S); `None` without a cipher.
    pub fn encryption_key(&self) -> Option<&[u8]> {
        self.encryption.as_ref().map(CipherKey::as_bytes)
    }

    /// The key for what this end receives (server: C2S, client: S2C).
    pub fn decryption_key(&self) -> Option<&[u8]> {
        self.decryption.as_ref().map(CipherKey::as_bytes)
    }

    pub fn cipher(&self) -> Option<Cipher> {
        self.cipher
    }

    /// A ready cipher instance for sealing what this end sends.
    pub fn encryptor(&self) -> Option<Sealer> {
        let key = self.encryption.as_ref()?;
        Sealer::new(self.cipher?, key.as_bytes()).ok()
    }

    /// A ready cipher instance for opening what this end receives.
    pub fn decryptor(&self) -> Option<Sealer> {
        let key = self.decryption.as_ref()?;
        Sealer::new(self.cipher?, key.as_bytes()).ok()
    }
}

impl core::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SessionKeys")
            .field("cipher", &self.cipher)
            .finish_non_exhaustive()
    }
}

/// MS-SMB2 3.3.1.8: Session.SessionKey is the first 16 bytes of the GSS key, right-padded
/// with zeros if shorter.
fn session_key_16(full: &[u8]) -> Zeroizing<[u8; 16]> {
    let mut k = Zeroizing::new([0u8; 16]);
    for (d, s) in k.iter_mut().zip(full.iter()) {
        *d = *s;
    }
    k
}

struct Labels<'a> {
    signing: (&'static [u8], &'a [u8]),
    application: (&'static [u8], &'a [u8]),
    c2s: (&'static [u8], &'a [u8]),
    s2c: (&'static [u8], &'a [u8]),
}

fn labels(dialect: u16, preauth_hash: Option<&[u8; 64]>) -> Result<Labels<'_>, CryptoError> {
    match dialect {
        DIALECT_3_0 | DIALECT_3_0_2 => Ok(Labels {
            signing: (b"SMB2AESCMAC\0", b"SmbSign\0"),
            application: (b"SMB2APP\0", b"SmbRpc\0"),
            c2s: (b"SMB2AESCCM\0", b"ServerIn \0"),
            s2c: (b"SMB2AESCCM\0", b"ServerOut\0"),
        }),
        DIALECT_3_1_1 => {
            let ctx: &[u8] = preauth_hash.ok_or(CryptoError::MissingPreauthHash)?;
            Ok(Labels {
                signing: (b"SMBSigningKey\0", ctx),
                application: (b"SMBAppKey\0", ctx),
                c2s: (b"SMBC2SCipherKey\0", ctx),
                s2c: (b"SMBS2CCipherKey\0", ctx),
            })
        }
        _ => Err(CryptoError::UnsupportedDialect(dialect)),
    }
}

/// The signing key alone: what a channel bound to an existing session gets
/// (MS-SMB2 3.3.5.5.3 Channel.SigningKey, derived with the binding exchange's preauth hash).
pub fn derive_signing_key(
    dialect: u16,
    session_key: &[u8],
    preauth_hash: Option<&[u8; 64]>,
) -> Result<Zeroizing<[u8; 16]>, CryptoError> {
    let sk = session_key_16(session_key);
    if dialect == DIALECT_2_0_2 || dialect == DIALECT_2_1 {
        return Ok(sk);
    }
    let l = labels(dialect, preauth_hash)?;
    let mut out = Zeroizing::new([0u8; 16]);
    kdf_into(sk.as_slice(), l.signing.0, l.signing.1, out.as_mut_slice());
    Ok(out)
}

/// Derives all keys of a session once authentication has produced `session_key` (the full
/// key from GSS/NTLM).
///
/// - `preauth_hash`: required for 3.1.1 (the session's final preauth integrity hash).
/// - `cipher`: the connection's cipher, or `None` if the session will not encrypt; then no
///   cipher keys are derived. For 3.0/3.0.2 pass `Some(Cipher::Aes128Ccm)` when
///   SMB2_GLOBAL_CAP_ENCRYPTION was negotiated.
/// - For AES-256 ciphers the cipher keys are 256 bits, derived from the full session key
///   (Session.FullSessionKey, MS-SMB2 3.3.5.5.3) when it is longer than 16 bytes; signing and
///   application keys always derive from the 16-byte Session.SessionKey.
pub fn derive_keys(
    dialect: u16,
    role: Role,
    session_key: &[u8],
    preauth_hash: Option<&[u8; 64]>,
    cipher: Option<Cipher>,
) -> Result<SessionKeys, CryptoError> {
    let sk = session_key_16(session_key);
    if dialect == DIALECT_2_0_2 || dialect == DIALECT_2_1 {
        return Ok(SessionKeys {
            signing: *sk,
            application: *sk,
            encryption: None,
            decryption: None,
            cipher: None,
        });
    }
    let l = labels(dialect, preauth_hash)?;
    let mut keys = SessionKeys {
        signing: [0u8; 16],
        application: [0u8; 16],
        encryption: None,
        decryption: None,
        cipher,
    };
    kdf_into(sk.as_slice(), l.signing.0, l.signing.1, &mut keys.signing);
    kdf_into(
        sk.as_slice(),
        l.application.0,
        l.application.1,
        &mut keys.application,
    );

    if let Some(cipher) = cipher {
        let ki: &[u8] = if cipher.is_aes256() && session_key.len() > 16 {
            session_key
        } else {
            sk.as_slice()
        };
        let mut c2s = CipherKey::zeroed(cipher.key_len());
        let mut s2c = CipherKey::zeroed(cipher.key_len());
        kdf_into(ki, l.c2s.0, l.c2s.1, c2s.as_mut_bytes());
        kdf_into(ki, l.s2c.0, l.s2c.1, s2c.as_mut_bytes());
        let (enc, dec) = match role {
            Role::Server => (s2c, c2s),
            Role::Client => (c2s, s2c),
        };
        keys.encryption = Some(enc);
        keys.decryption = Some(dec);
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kdf::kdf;

    #[test]
    fn roles_mirror_each_other() {
        let hash = [9u8; 64];
        for cipher in [Cipher::Aes128Gcm, Cipher::Aes256Ccm] {
            let s = derive_keys(
                DIALECT_3_1_1,
                Role::Server,
                &[1; 16],
                Some(&hash),
                Some(cipher),
            )
            .unwrap();
            let c = derive_keys(
                DIALECT_3_1_1,
                Role::Client,
                &[1; 16],
                Some(&hash),
                Some(cipher),
            )
            .unwrap();
            assert_eq!(s.encryption_key(), c.decryption_key());
            assert_eq!(s.decryption_key(), c.encryption_key());
            assert_ne!(s.encryption_key(), s.decryption_key());
            assert_eq!(s.signing_key(), c.signing_key());
            assert_eq!(s.encryption_key().unwrap().len(), cipher.key_len());
            // The server sends with the S2C key.
            let s2c = kdf(
                &[1; 16],
                b"SMBS2CCipherKey\0",
                &hash,
                cipher.key_len() as u32 * 8,
            );
            assert_eq!(s.encryption_key().unwrap(), s2c.as_slice());
        }
    }

    #[test]
    fn aes256_uses_full_session_key_for_cipher_keys_only() {
        let full: Vec<u8> = (0u8..32).collect();
        let hash = [3u8; 64];
        let k = derive_keys(
            DIALECT_3_1_1,
            Role::Client,
            &full,
            Some(&hash),
            Some(Cipher::Aes256Gcm),
        )
        .unwrap();
        let want_c2s = kdf(&full, b"SMBC2SCipherKey\0", &hash, 256);
        assert_eq!(k.encryption_key().unwrap(), want_c2s.as_slice());
        let want_sign = kdf(&full[..16], b"SMBSigningKey\0", &hash, 128);
        assert_eq!(k.signing_key().as_slice(), want_sign.as_slice());
        // AES-128 ciphers use the truncated key.
        let k128 = derive_keys(
            DIALECT_3_1_1,
            Role::Client,
            &full,
            Some(&hash),
            Some(Cipher::Aes128Gcm),
        )
        .unwrap();
        let want128 = kdf(&full[..16], b"SMBC2SCipherKey\0", &hash, 128);
        assert_eq!(k128.encryption_key().unwrap(), want128.as_slice());
    }

    #[test]
    fn smb2_uses_session_key_directly_and_pads_short_keys() {
        let k = derive_keys(
            DIALECT_2_1,
            Role::Server,
            &[5; 8],
            None,
            Some(Cipher::Aes128Ccm),
        )
        .unwrap();
        assert_eq!(
            k.signing_key(),
            &[5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(k.encryption_key().is_none());
        assert!(k.encryptor().is_none());
    }

    #[test]
    fn errors() {
        assert_eq!(
            derive_keys(DIALECT_3_1_1, Role::Server, &[1; 16], None, None).err(),
            Some(CryptoError::MissingPreauthHash)
        );
        assert_eq!(
            derive_keys(0x02FF, Role::Server, &[1; 16], None, None).err(),
            Some(CryptoError::UnsupportedDialect(0x02FF))
        );
        let k = derive_keys(DIALECT_3_0, Role::Server, &[1; 16], None, None).unwrap();
        assert!(k.encryption_key().is_none());
    }

    #[test]
    fn channel_signing_key_matches_session_derivation() {
        let hash = [4u8; 64];
        let k = derive_keys(DIALECT_3_1_1, Role::Server, &[2; 16], Some(&hash), None).unwrap();
        let ch = derive_signing_key(DIALECT_3_1_1, &[2; 16], Some(&hash)).unwrap();
        assert_eq!(k.signing_key(), &*ch);
    }

    #[test]
    fn debug_does_not_print_keys() {
        let k = derive_keys(
            DIALECT_3_0,
            Role::Server,
            &[0xAB; 16],
            None,
            Some(Cipher::Aes128Ccm),
        )
        .unwrap();
        let s = format!("{k:?} {:?}", k.encryption);
        assert!(!s.to_lowercase().contains("ab, "), "{s}");
        assert!(!s.contains("171"), "{s}");
    }
}
