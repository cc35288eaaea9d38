//! The negotiable algorithm identifiers: signing (MS-SMB2 2.2.3.1.7) and encryption
//! ciphers (MS-SMB2 2.2.3.1.2).

/// A message signing algorithm. Wire ids per MS-SMB2 2.2.3.1.7 (SMB2_SIGNING_CAPABILITIES).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SigningAlgorithm {
    /// HMAC-SHA256 truncated to 16 bytes; the only algorithm of dialects 2.0.2 and 2.1.
    HmacSha256,
    /// AES-128-CMAC (RFC 4493); dialects 3.0 and 3.0.2, and 3.1.1 unless negotiated otherwise.
    AesCmac,
    /// AES-128-GMAC (RFC 4543); 3.1.1 only, when negotiated.
    AesGmac,
}

impl SigningAlgorithm {
    pub fn from_wire_id(id: u16) -> Option<Self> {
        match id {
            0x0000 => Some(Self::HmacSha256),
            0x0001 => Some(Self::AesCmac),
            0x0002 => Some(Self::AesGmac),
            _ => None,
        }
    }

    pub fn wire_id(self) -> u16 {
        match self {
            Self::HmacSha256 => 0x0000,
            Self::AesCmac => 0x0001,
            Self::AesGmac => 0x0002,
        }
    }

    /// The algorithm a dialect uses when SMB2_SIGNING_CAPABILITIES was not negotiated
    /// (MS-SMB2 3.1.4.1): HMAC-SHA256 before 3.0, AES-CMAC from 3.0 on.
    pub fn default_for_dialect(dialect: u16) -> Self {
        if dialect >= crate::DIALECT_3_0 {
            Self::AesCmac
        } else {
            Self::HmacSha256
        }
    }
}

/// An encryption cipher. Wire ids per MS-SMB2 2.2.3.1.2 (SMB2_ENCRYPTION_CAPABILITIES).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cipher {
    Aes128Ccm,
    Aes128Gcm,
    Aes256Ccm,
    Aes256Gcm,
}

impl Cipher {
    pub fn from_wire_id(id: u16) -> Option<Self> {
        match id {
            0x0001 => Some(Self::Aes128Ccm),
            0x0002 => Some(Self::Aes128Gcm),
            0x0003 => Some(Self::Aes256Ccm),
            0x0004 => Some(Self::Aes256Gcm),
            _ => None,
        }
    }

    pub fn wire_id(self) -> u16 {
        match self {
            Self::Aes128Ccm => 0x0001,
            Self::Aes128Gcm => 0x0002,
            Self::Aes256Ccm => 0x0003,
            Self::Aes256Gcm => 0x0004,
        }
    }

    /// Key length in bytes (16 or 32).
    pub fn key_len(self) -> usize {
        match self {
            Self::Aes128Ccm | Self::Aes128Gcm => 16,
            Self::Aes256Ccm | Self::Aes256Gcm => 32,
        }
    }

    /// How many leading bytes of the 16-byte transform-header Nonce field the cipher uses
    /// (MS-SMB2 2.2.41): 11 for CCM, 12 for GCM.
    pub fn nonce_len(self) -> usize {
        match self {
            Self::Aes128Ccm | Self::Aes256Ccm => 11,
            Self::Aes128Gcm | Self::Aes256Gcm => 12,
        }
    }

    pub fn is_aes256(self) -> bool {
        self.key_len() == 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_ids_round_trip_and_match_spec() {
        for (id, c) in [
            (1, Cipher::Aes128Ccm),
            (2, Cipher::Aes128Gcm),
            (3, Cipher::Aes256Ccm),
            (4, Cipher::Aes256Gcm),
        ] {
            assert_eq!(Cipher::from_wire_id(id), Some(c));
            assert_eq!(c.wire_id(), id);
        }
        assert_eq!(Cipher::from_wire_id(0), None);
        assert_eq!(Cipher::from_wire_id(5), None);
        for (id, a) in [
            (0, SigningAlgorithm::HmacSha256),
            (1, SigningAlgorithm::AesCmac),
            (2, SigningAlgorithm::AesGmac),
        ] {
            assert_eq!(SigningAlgorithm::from_wire_id(id), Some(a));
            assert_eq!(a.wire_id(), id);
        }
        assert_eq!(SigningAlgorithm::from_wire_id(3), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(Cipher::Aes128Ccm.nonce_len(), 11);
        assert_eq!(Cipher::Aes256Ccm.nonce_len(), 11);
        assert_eq!(Cipher::Aes128Gcm.nonce_len(), 12);
        assert_eq!(Cipher::Aes256Gcm.nonce_len(), 12);
        assert_eq!(Cipher::Aes128Gcm.key_len(), 16);
        assert_eq!(Cipher::Aes256Ccm.key_len(), 32);
    }

    #[test]
    fn default_signing_by_dialect() {
        assert_eq!(
            SigningAlgorithm::default_for_dialect(0x0210),
            SigningAlgorithm::HmacSha256
        );
        assert_eq!(
            SigningAlgorithm::default_for_dialect(0x0300),
            SigningAlgorithm::AesCmac
        );
        assert_eq!(
            SigningAlgorithm::default_for_dialect(0x0311),
            SigningAlgorithm::AesCmac
        );
    }
}
