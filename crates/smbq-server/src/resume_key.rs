//! Resume keys (MS-SMB2 3.3.5.15.5): the 24 opaque bytes FSCTL_SRV_REQUEST_RESUME_KEY returns
//! for an open, which FSCTL_SRV_COPYCHUNK later names as its source.
//!
//! A key is the open's volatile id followed by a 16-byte HMAC-SHA256 tag over both of its ids,
//! under a secret drawn when the server starts. The server finds the open from the id and
//! believes the key only if the tag matches, so no table of keys is kept (nothing to bound or
//! clean up), a key dies with its open (a reused slot has another id), and a client cannot
//! forge one for an open it was not given.

use rand::RngCore;
use smbq_crypto::{Signer, SigningAlgorithm};
use smbq_wire::FileId;
use smbq_wire::copychunk::RESUME_KEY_LEN;

/// What tags are computed over: a domain label, then the two ids. The tag goes where an SMB2
/// header's signature would (bytes 48..64), which the signer treats as zero.
const LABEL: &[u8; 16] = b"smbq resume key\0";

pub struct ResumeKeys {
    signer: Signer,
}

impl ResumeKeys {
    pub fn new() -> Self {
        let mut secret = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut secret);
        Self::with_secret(&secret)
    }

    fn with_secret(secret: &[u8]) -> Self {
        // HMAC accepts any key length; this cannot fail.
        let signer = Signer::new(SigningAlgorithm::HmacSha256, secret)
            .unwrap_or_else(|_| unreachable!("HMAC-SHA256 takes any key"));
        Self { signer }
    }

    fn tag(&self, id: FileId) -> [u8; 16] {
        let mut msg = [0u8; 64];
        let parts = LABEL
            .iter()
            .copied()
            .chain(id.persistent.to_le_bytes())
            .chain(id.volatile.to_le_bytes());
        for (d, s) in msg.iter_mut().zip(parts) {
            *d = s;
        }
        // 64 bytes is the signer's minimum message; it never fails on it.
        self.signer.signature(&msg).unwrap_or([0; 16])
    }

    pub fn key_for(&self, id: FileId) -> [u8; RESUME_KEY_LEN] {
        let mut key = [0u8; RESUME_KEY_LEN];
        let parts = id.volatile.to_le_bytes().into_iter().chain(self.tag(id));
        for (d, s) in key.iter_mut().zip(parts) {
            *d = s;
        }
        key
    }

    /// Whether `key` was made for the open `id` (found through
    /// [`volatile_of`](Self::volatile_of)).
    pub fn verify(&self, key: &[u8; RESUME_KEY_LEN], id: FileId) -> bool {
        let want = self.key_for(id);
        // Constant time is not needed for secrecy here (a wrong guess only learns "not found"),
        // but costs nothing.
        want.iter().zip(key).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }

    pub fn volatile_of(key: &[u8; RESUME_KEY_LEN]) -> u64 {
        let mut v = [0u8; 8];
        for (d, s) in v.iter_mut().zip(key) {
            *d = *s;
        }
        u64::from_le_bytes(v)
    }
}

impl Default for ResumeKeys {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const ID: FileId = FileId {
        persistent: 0x1122,
        volatile: 0x3344_5566,
    };

    #[test]
    fn a_key_names_its_open_and_only_it() {
        let k = ResumeKeys::with_secret(b"test secret");
        let key = k.key_for(ID);
        assert_eq!(ResumeKeys::volatile_of(&key), ID.volatile);
        assert!(k.verify(&key, ID));
        let other = FileId {
            persistent: ID.persistent + 1,
            ..ID
        };
        assert!(!k.verify(&key, other), "another open in the same slot");
        let mut forged = key;
        if let Some(b) = forged.last_mut() {
            *b ^= 1;
        }
        assert!(!k.verify(&forged, ID));
        assert!(!k.verify(b"deadbeefdeadbeefdeadbeef", ID));
    }

    #[test]
    fn keys_differ_between_servers() {
        let a = ResumeKeys::with_secret(b"one");
        let b = ResumeKeys::with_secret(b"two");
        assert_ne!(a.key_for(ID), b.key_for(ID));
        assert!(!b.verify(&a.key_for(ID), ID));
        assert_ne!(ResumeKeys::new().key_for(ID), ResumeKeys::new().key_for(ID));
    }
}
