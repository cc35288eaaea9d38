//! What a client offers and insists on.

use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_wire::Dialect;

/// When the client encrypts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncryptionPolicy {
    /// Encrypt when the server asks (session or share ENCRYPT_DATA), as Windows does.
    Auto,
    /// Encrypt every message after SESSION_SETUP; fail when no cipher is negotiated.
    Required,
}

#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Dialects offered, any order (the server picks).
    pub dialects: Vec<Dialect>,
    /// Ciphers offered, most preferred first (MS-SMB2 2.2.3.1.2).
    pub ciphers: Vec<Cipher>,
    /// Signing algorithms offered, most preferred first (MS-SMB2 2.2.3.1.7).
    pub signing: Vec<SigningAlgorithm>,
    pub encryption: EncryptionPolicy,
    /// Sign every request of an authenticated session and demand signed responses (the
    /// Windows 11 24H2 default), rather than only when the server requires it.
    pub signing_required: bool,
    /// Offer SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (MS-SMB2 2.2.3.1.5): only over QUIC.
    pub transport_security: bool,
    /// Data streams to ask for with smbq's multi-stream extension (docs/multistream.md); 0
    /// offers none. Only offered over QUIC, where the transport can open them.
    pub data_streams: u16,
    /// Start with an SMB1 multi-protocol NEGOTIATE as the Windows client does (MS-SMB2 3.2.4.2.1).
    pub smb1_first: bool,
    /// Ask for multichannel (SMB2_GLOBAL_CAP_MULTI_CHANNEL): set by a caller that will bind
    /// the session to more connections. A server may then prefer AES-CMAC to AES-GMAC, whose
    /// nonces would repeat across bindings (docs/security.md), so a client that binds nothing
    /// does not ask.
    pub multichannel: bool,
    pub client_guid: [u8; 16],
    /// Credits asked for in each request.
    pub credit_request: u16,
    /// Upper bound on one READ or WRITE, whatever the server allows.
    pub max_io: u32,
    /// Largest response frame accepted (a server cannot make the client allocate more).
    pub max_frame: u32,
    /// Workstation name sent in NTLM AUTHENTICATE.
    pub workstation: String,
    /// Compression algorithms offered (3.1.1, chained), in order of preference; empty: none.
    /// When the server takes some, WRITEs are compressed and READs ask for compressed data.
    pub compression: Vec<smbq_compress::Algorithm>,
    /// WRITE data shorter than this is never compressed.
    pub compress_min_size: usize,
    /// Compress only while it is faster than the link (smbq_compress::pace); false
    /// compresses whatever the link.
    pub compress_adaptive: bool,
    /// Offer the SMB3 POSIX extensions (3.1.1; smbq_wire::posix): a server that takes them
    /// answers POSIX opens with modes, owners and links.
    pub posix: bool,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            dialects: vec![Dialect::SMB3_1_1],
            ciphers: vec![
                Cipher::Aes128Gcm,
                Cipher::Aes256Gcm,
                Cipher::Aes128Ccm,
                Cipher::Aes256Ccm,
            ],
            signing: vec![
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::HmacSha256,
            ],
            encryption: EncryptionPolicy::Auto,
            signing_required: true,
            transport_security: false,
            data_streams: 4,
            smb1_first: false,
            multichannel: false,
            client_guid: [0; 16],
            credit_request: 512,
            max_io: 8 << 20,
            max_frame: (8 << 20) + (64 << 10),
            workstation: "SMBQ".into(),
            compression: Vec::new(),
            compress_min_size: 4096,
            compress_adaptive: true,
            posix: true,
        }
    }
}

impl ClientConfig {
    /// Every dialect smbq speaks, newest first.
    pub fn all_dialects() -> Vec<Dialect> {
        vec![
            Dialect::SMB3_1_1,
            Dialect::SMB3_0_2,
            Dialect::SMB3_0,
            Dialect::SMB2_1,
            Dialect::SMB2_0_2,
        ]
    }
}
