//! Sealing SMB2 messages into TRANSFORM_HEADER frames (MS-SMB2 2.2.41, 3.1.4.3): one path
//! for the server engine and the client, so both build headers and nonces the same way.
//!
//! Nonces are a per-key counter behind a random 4-byte prefix: unique for the key's life
//! without relying on the birthday bound of random 11/12-byte nonces. AES-CCM takes 11 bytes
//! (7 counter bytes, so 2^56 messages per key), AES-GCM 12 (the whole counter).

use std::sync::atomic::{AtomicU64, Ordering};

use smbq_crypto::{Cipher, Sealer};
use smbq_wire::transform::{TRANSFORM_HEADER_LEN, TransformHeader};

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    #[error("no room for the transform header")]
    NoRoom,
    #[error("message too large to seal")]
    TooLarge,
    #[error("encryption failed")]
    Crypto,
}

/// A session's sealing key with its nonce sequence. Shared by every task sending on the
/// session (the counter is atomic).
pub struct TransformSealer {
    sealer: Sealer,
    nonce_prefix: [u8; 4],
    counter: AtomicU64,
}

impl std::fmt::Debug for TransformSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransformSealer")
            .field("cipher", &self.sealer.cipher())
            .finish()
    }
}

impl TransformSealer {
    pub fn new(sealer: Sealer, nonce_prefix: [u8; 4]) -> Self {
        Self {
            sealer,
            nonce_prefix,
            counter: AtomicU64::new(1),
        }
    }

    pub fn cipher(&self) -> Cipher {
        self.sealer.cipher()
    }

    fn next_nonce(&self) -> [u8; 16] {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut nonce = [0u8; 16];
        let (prefix, rest) = nonce.split_at_mut(4);
        prefix.copy_from_slice(&self.nonce_prefix);
        if let Some(c) = rest.get_mut(..8) {
            c.copy_from_slice(&n.to_le_bytes());
        }
        // The bytes past the cipher's nonce length must be zero (MS-SMB2 2.2.41).
        for b in nonce.iter_mut().skip(self.sealer.cipher().nonce_len()) {
            *b = 0;
        }
        nonce
    }

    /// Seals `frame` in place for `session_id`: its first [`TRANSFORM_HEADER_LEN`] bytes are
    /// room for the transform header (filled here), the rest is the message or compound,
    /// encrypted where it lies.
    pub fn seal_reserved(&self, session_id: u64, frame: &mut [u8]) -> Result<(), SealError> {
        let (head, payload) = frame
            .split_at_mut_checked(TRANSFORM_HEADER_LEN)
            .ok_or(SealError::NoRoom)?;
        let th = TransformHeader {
            signature: [0; 16],
            nonce: self.next_nonce(),
            original_message_size: u32::try_from(payload.len()).map_err(|_| SealError::TooLarge)?,
            flags: 1,
            session_id,
        };
        let mut hdr = th.to_bytes();
        self.sealer
            .seal_transform(&mut hdr, payload)
            .map_err(|_| SealError::Crypto)?;
        head.copy_from_slice(&hdr);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn nonces_never_repeat_and_fit_the_cipher() {
        for cipher in [Cipher::Aes128Ccm, Cipher::Aes256Gcm] {
            let s = TransformSealer::new(
                Sealer::new(cipher, &[7; 32][..cipher.key_len()]).unwrap(),
                [1, 2, 3, 4],
            );
            let a = s.next_nonce();
            let b = s.next_nonce();
            assert_ne!(a, b);
            assert_eq!(&a[..4], &[1, 2, 3, 4]);
            assert!(
                a[cipher.nonce_len()..].iter().all(|&x| x == 0),
                "{cipher:?}"
            );
        }
    }

    #[test]
    fn sealed_frame_opens_with_the_same_key() {
        let key = [9u8; 16];
        let s = TransformSealer::new(Sealer::new(Cipher::Aes128Gcm, &key).unwrap(), [0; 4]);
        let msg = b"\xfeSMB and the rest of a message".to_vec();
        let mut frame = vec![0u8; TRANSFORM_HEADER_LEN];
        frame.extend_from_slice(&msg);
        s.seal_reserved(0x1122, &mut frame).unwrap();
        let th = TransformHeader::decode(&frame).unwrap();
        assert_eq!(
            (th.session_id, th.original_message_size),
            (0x1122, msg.len() as u32)
        );
        assert_ne!(&frame[TRANSFORM_HEADER_LEN..], &msg[..]);
        let (hdr, payload) = frame.split_at_mut(TRANSFORM_HEADER_LEN);
        let opener = Sealer::new(Cipher::Aes128Gcm, &key).unwrap();
        opener
            .open_transform(&hdr.try_into().unwrap(), payload)
            .unwrap();
        assert_eq!(payload, &msg[..]);
        assert_eq!(s.seal_reserved(1, &mut [0u8; 10]), Err(SealError::NoRoom));
    }
}
