//! SMB2 TRANSFORM_HEADER for encrypted messages (MS-SMB2 2.2.41), and recognising the first
//! bytes of whatever arrives in a transport frame.

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::header::{PROTOCOL_ID, SMB1_PROTOCOL_ID};

/// 0xFD 'S' 'M' 'B' (MS-SMB2 2.2.41).
pub const TRANSFORM_PROTOCOL_ID: [u8; 4] = [0xFD, b'S', b'M', b'B'];
/// 0xFC 'S' 'M' 'B': SMB2_COMPRESSION_TRANSFORM_HEADER (MS-SMB2 2.2.42, `crate::compression`).
/// Before compression is negotiated such a message is a protocol violation.
pub const COMPRESSION_PROTOCOL_ID: [u8; 4] = [0xFC, b'S', b'M', b'B'];
/// The transform header is 52 bytes; the encrypted SMB2 message follows it.
pub const TRANSFORM_HEADER_LEN: usize = 52;
/// Bytes of the header authenticated as AEAD associated data: Nonce through SessionId
/// (MS-SMB2 3.1.4.3: everything after the Signature).
pub const AAD_RANGE: core::ops::Range<usize> = 20..52;
/// Bytes holding the Signature (the AEAD tag).
pub const SIGNATURE_RANGE: core::ops::Range<usize> = 4..20;

/// Flags / EncryptionAlgorithm values (MS-SMB2 2.2.41): 3.1.1 calls it Flags with
/// ENCRYPTED = 1; 3.0/3.0.2 call it EncryptionAlgorithm with AES-128-CCM = 1. Same wire value.
pub mod flags {
    pub const ENCRYPTED: u16 = 0x0001;
}

/// The associated data of a transform header (bytes 20..52).
pub fn aad(header_bytes: &[u8; TRANSFORM_HEADER_LEN]) -> &[u8] {
    header_bytes.get(AAD_RANGE).unwrap_or_default()
}

/// What a transport frame holds, judged by its first four bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolKind {
    /// 0xFE 'SMB': a plain SMB2 message (possibly a compound).
    Smb2,
    /// 0xFD 'SMB': an encrypted SMB2 message.
    Transform,
    /// 0xFC 'SMB': a compressed SMB2 message.
    Compression,
    /// 0xFF 'SMB': SMB1, only acceptable as the first NEGOTIATE.
    Smb1,
}

/// Classifies a frame; None for anything else (a protocol violation).
pub fn classify(frame: &[u8]) -> Option<ProtocolKind> {
    let id: [u8; 4] = frame.get(..4)?.try_into().ok()?;
    match id {
        PROTOCOL_ID => Some(ProtocolKind::Smb2),
        TRANSFORM_PROTOCOL_ID => Some(ProtocolKind::Transform),
        COMPRESSION_PROTOCOL_ID => Some(ProtocolKind::Compression),
        SMB1_PROTOCOL_ID => Some(ProtocolKind::Smb1),
        _ => None,
    }
}

/// SMB2 TRANSFORM_HEADER (MS-SMB2 2.2.41).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TransformHeader {
    /// The AEAD tag over AAD and ciphertext.
    pub signature: [u8; 16],
    /// AES-CCM uses the first 11 bytes, AES-GCM the first 12; the rest MUST be zero.
    pub nonce: [u8; 16],
    /// Length of the SMB2 message before encryption (the ciphertext is as long).
    pub original_message_size: u32,
    pub flags: u16,
    pub session_id: u64,
}

impl TransformHeader {
    /// Decodes the first 52 bytes of `msg`.
    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != TRANSFORM_PROTOCOL_ID {
            return Err(DecodeError::BadProtocolId);
        }
        let signature = r.array()?;
        let nonce = r.array()?;
        let original_message_size = r.u32()?;
        let _reserved = r.u16()?;
        let flags = r.u16()?;
        let session_id = r.u64()?;
        Ok(Self {
            signature,
            nonce,
            original_message_size,
            flags,
            session_id,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&TRANSFORM_PROTOCOL_ID)
            .bytes(&self.signature)
            .bytes(&self.nonce)
            .u32(self.original_message_size)
            .u16(0)
            .u16(self.flags)
            .u64(self.session_id);
    }

    pub fn to_bytes(&self) -> [u8; TRANSFORM_HEADER_LEN] {
        let mut w = Writer::with_capacity(TRANSFORM_HEADER_LEN);
        self.encode(&mut w);
        let mut out = [0u8; TRANSFORM_HEADER_LEN];
        if let Some(src) = w.as_slice().get(..TRANSFORM_HEADER_LEN) {
            out.copy_from_slice(src);
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Transform header of the encrypted WRITE in the Microsoft Open Specifications blog post
    /// "Encryption in SMB 3.0: A protocol perspective" (2012-10-05), via pike's test vectors.
    const BLOG_300: &str = concat!(
        "FD534D4281A286535415445DAE393921E44FA42E66E69A111892584FB5ED524A",
        "744DA3EE87000000000001001100001400E40800",
    );
    /// Transform header from "SMB 3.1.1 Encryption in Windows 10" (2015-09-09), via pike.
    const BLOG_311: &str = concat!(
        "FD534D42BD73D97D2BC9001BCAFAC0FDFF5FEEBCC7D6822D269CAF48904C664C0000000087000000",
        "000001002500000000100000",
    );

    #[test]
    fn blog_headers_decode_and_re_encode() {
        let b = hex::decode(BLOG_300).unwrap();
        let h = TransformHeader::decode(&b).unwrap();
        assert_eq!(h.original_message_size, 0x87);
        assert_eq!(h.flags, flags::ENCRYPTED);
        assert_eq!(h.session_id, 0x0008_E400_1400_0011);
        assert_eq!(h.nonce[..4], [0x66, 0xE6, 0x9A, 0x11]);
        assert_eq!(h.signature[..4], [0x81, 0xA2, 0x86, 0x53]);
        assert_eq!(&h.to_bytes()[..], &b[..]);

        let b = hex::decode(BLOG_311).unwrap();
        let h = TransformHeader::decode(&b).unwrap();
        assert_eq!(h.original_message_size, 0x87);
        assert_eq!(h.session_id, 0x1000_0000_0025);
        // AES-128-GCM: 12-byte nonce, the last four zero.
        assert_eq!(h.nonce[12..], [0, 0, 0, 0]);
        assert_eq!(&h.to_bytes()[..], &b[..]);
        let arr: [u8; 52] = b.clone().try_into().unwrap();
        assert_eq!(aad(&arr), &b[20..]);
        assert_eq!(aad(&arr).len(), 32);
        assert_eq!(&aad(&arr)[..12], &h.nonce[..12]);
    }

    #[test]
    fn rejects_wrong_id_and_short() {
        let b = hex::decode(BLOG_311).unwrap();
        assert!(TransformHeader::decode(&b[..51]).is_err());
        let mut c = b.clone();
        c[0] = 0xFE;
        assert_eq!(TransformHeader::decode(&c), Err(DecodeError::BadProtocolId));
    }

    #[test]
    fn classifies_frames() {
        assert_eq!(
            classify(&[0xFE, b'S', b'M', b'B', 0]),
            Some(ProtocolKind::Smb2)
        );
        assert_eq!(
            classify(&[0xFD, b'S', b'M', b'B']),
            Some(ProtocolKind::Transform)
        );
        assert_eq!(
            classify(&[0xFC, b'S', b'M', b'B']),
            Some(ProtocolKind::Compression)
        );
        assert_eq!(
            classify(&[0xFF, b'S', b'M', b'B']),
            Some(ProtocolKind::Smb1)
        );
        assert_eq!(classify(&[0xFE, b'S', b'M']), None);
        assert_eq!(classify(b"GET /"), None);
    }
}
