//! A client session's keys: signing outgoing messages, sealing and opening transforms
//! (MS-SMB2 3.2.4.1.1, 3.2.4.1.8, 3.2.5.1.1, 3.2.5.1.3).

use std::sync::Arc;

use smbq_crypto::{Sealer, Signer, SigningAlgorithm};
use smbq_wire::header::{FLAGS_OFFSET, flags};
use smbq_wire::transform::TRANSFORM_HEADER_LEN;

use super::{ClientError, ProtocolError};
use crate::nonces::NonceLedger;
use crate::transform::{SealError, TransformSealer};

/// Keys of one established session. Shared by every task issuing requests on it.
pub struct SessionCrypto {
    pub session_id: u64,
    signer: Option<Signer>,
    /// Shared by the session's channels: one nonce sequence for the one key.
    encryptor: Option<Arc<TransformSealer>>,
    decryptor: Option<Sealer>,
    /// The nonces this key signed or accepted on binding connections (crate::nonces).
    nonces: NonceLedger,
}

impl std::fmt::Debug for SessionCrypto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCrypto")
            .field("session_id", &self.session_id)
            .field("signing", &self.signer.is_some())
            .field("sealing", &self.encryptor.is_some())
            .finish()
    }
}

impl SessionCrypto {
    pub fn new(
        session_id: u64,
        signer: Option<Signer>,
        encryptor: Option<Sealer>,
        decryptor: Option<Sealer>,
        nonce_prefix: [u8; 4],
    ) -> Self {
        let algorithm = signer
            .as_ref()
            .map_or(SigningAlgorithm::HmacSha256, Signer::algorithm);
        Self {
            session_id,
            signer,
            encryptor: encryptor.map(|e| Arc::new(TransformSealer::new(e, nonce_prefix))),
            decryptor,
            nonces: NonceLedger::new(algorithm),
        }
    }

    /// The keys of a channel bound to this session on another connection (MS-SMB2
    /// 3.2.5.3.1): its own signing key, the session's sealing keys.
    /// A channel's key signs on its own connection only: no binding goes through it.
    pub fn channel(&self, signer: Signer) -> Self {
        let nonces = NonceLedger::new(signer.algorithm());
        nonces.first_channel_from(0);
        Self {
            session_id: self.session_id,
            signer: Some(signer),
            encryptor: self.encryptor.clone(),
            decryptor: self.decryptor.clone(),
            nonces,
        }
    }

    /// The nonces this session's key has signed under outside its first connection.
    pub fn nonces(&self) -> &NonceLedger {
        &self.nonces
    }

    pub fn can_sign(&self) -> bool {
        self.signer.is_some()
    }

    pub fn can_seal(&self) -> bool {
        self.encryptor.is_some()
    }

    /// Sets SIGNED and writes the signature of one message (padding included, as sent).
    pub fn sign(&self, msg: &mut [u8]) -> Result<(), ClientError> {
        let signer = self
            .signer
            .as_ref()
            .ok_or(ClientError::Integrity("no signing key"))?;
        let f = msg
            .get_mut(FLAGS_OFFSET..FLAGS_OFFSET + 4)
            .ok_or(ClientError::Integrity("message shorter than a header"))?;
        let cur: [u8; 4] = (&*f)
            .try_into()
            .map_err(|_| ClientError::Integrity("message shorter than a header"))?;
        let v = u32::from_le_bytes(cur) | flags::SIGNED;
        f.copy_from_slice(&v.to_le_bytes());
        signer
            .sign(msg)
            .map_err(|_| ClientError::Integrity("signing failed"))
    }

    /// Whether a signed response verifies with this session's key.
    pub fn verify(&self, msg: &[u8]) -> bool {
        self.signer.as_ref().is_some_and(|s| s.verify(msg))
    }

    /// [`verify`](Self::verify) for a message the caller owns: no copy of a large message
    /// (its Signature field is zeroed while the MAC runs, then put back).
    pub fn verify_in_place(&self, msg: &mut [u8]) -> bool {
        self.signer.as_ref().is_some_and(|s| s.verify_in_place(msg))
    }

    /// Seals in place a frame whose first TRANSFORM_HEADER_LEN bytes are room for the
    /// transform header and the rest the message (or compound): no copy of the message.
    pub fn seal_reserved(&self, mut frame: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        let enc = self
            .encryptor
            .as_ref()
            .ok_or(ClientError::Integrity("no encryption key"))?;
        enc.seal_reserved(self.session_id, &mut frame)
            .map_err(|e| match e {
                SealError::TooLarge => ProtocolError::TooLarge("message too large to seal").into(),
                SealError::NoRoom => ClientError::Integrity("no room for the transform header"),
                SealError::Crypto => ClientError::Integrity("encryption failed"),
            })?;
        Ok(frame)
    }

    /// Opens a transform message (header + ciphertext) in place and returns the plaintext
    /// range. The header's size and session were checked by the caller.
    pub fn open(&self, msg: &mut [u8]) -> Result<(), ClientError> {
        let dec = self
            .decryptor
            .as_ref()
            .ok_or(ClientError::Integrity("encrypted response without a key"))?;
        let (hdr, payload) = msg
            .split_at_mut_checked(TRANSFORM_HEADER_LEN)
            .ok_or(ClientError::Integrity("short transform"))?;
        let hdr: &[u8; TRANSFORM_HEADER_LEN] = (&*hdr)
            .try_into()
            .map_err(|_| ClientError::Integrity("short transform"))?;
        dec.open_transform(hdr, payload)
            .map_err(|_| ClientError::Integrity("response does not decrypt"))
    }
}
