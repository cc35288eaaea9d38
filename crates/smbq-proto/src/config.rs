//! Engine configuration: policy the binary decides, passed down as typed values.

use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_wire::Dialect;

use crate::Limits;

#[derive(Clone, Debug)]
pub struct EngineConfig {
    pub limits: Limits,
    pub server_guid: [u8; 16],
    /// NetBIOS-style name for NTLM target info.
    pub server_name: String,
    /// Dialects the server will select, any order.
    pub dialects: Vec<Dialect>,
    /// Sign every non-guest session (SecurityMode SIGNING_REQUIRED).
    pub require_signing: bool,
    /// Every session must be encrypted; clients without SMB3 encryption are refused.
    pub encrypt_required: bool,
    /// Encrypt sessions whose client can.
    pub encrypt_desired: bool,
    /// Ciphers we accept; the client's order picks among them.
    pub ciphers: Vec<Cipher>,
    /// Signing algorithms we accept (3.1.1 SIGNING_CAPABILITIES); the client's order picks.
    pub signing: Vec<SigningAlgorithm>,
    /// Unknown users become guest sessions.
    pub guest_ok: bool,
    /// Anonymous (null session) logons are accepted; they reach IPC$ and guest shares only.
    pub anonymous_ok: bool,
    /// Over QUIC, honour SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (MS-SMB2 3.3.5.4).
    pub accept_transport_security: bool,
    /// Grant leases on directories (SMB2_GLOBAL_CAP_DIRECTORY_LEASING, 3.x clients that ask).
    pub directory_leases: bool,
    /// Some share is continuously available: SMB2_GLOBAL_CAP_PERSISTENT_HANDLES for 3.x
    /// clients (MS-SMB2 3.3.5.4).
    pub persistent_handles: bool,
    /// Told of every response sent (crate::observe), for the metrics.
    pub observer: crate::observe::SharedObserver,
    /// Kerberos in SPNEGO (MS-SPNG), when a keytab is configured.
    pub kerberos: Option<std::sync::Arc<dyn smbq_auth::Kerberos>>,
    /// Accept NTLMSSP; false leaves Kerberos as the only way in.
    pub ntlm: bool,
    /// Accept NTLMSSP on QUIC connections too (`[quic] ntlm`): false leaves Kerberos (through
    /// the KDC proxy) as the only way in over UDP 443, where NTLM relay and coercion would
    /// otherwise reach the internet.
    pub ntlm_quic: bool,
    /// Offer multichannel (SMB2_GLOBAL_CAP_MULTI_CHANNEL) and accept session binding
    /// (MS-SMB2 3.3.5.5.2) on TCP connections.
    pub multichannel_tcp: bool,
    /// The same on QUIC connections (Windows binds no QUIC channels; off by default).
    pub multichannel_quic: bool,
    /// Compression algorithms offered in NEGOTIATE, in the server's order of preference
    /// (MS-SMB2 3.3.5.4); empty: compression is off and the context is not answered.
    pub compression: Vec<smbq_compress::Algorithm>,
    /// Responses shorter than this are never compressed.
    pub compress_min_size: usize,
    /// Compress only while it is faster than the link (smbq_compress::pace); false
    /// compresses whatever the link (a metered link, where bytes cost more than time).
    pub compress_adaptive: bool,
    /// Answer the SMB3 POSIX extensions' negotiate context (smbq_wire::posix) when a 3.1.1
    /// client offers it.
    pub posix_extensions: bool,
}

impl EngineConfig {
    pub fn new(limits: Limits, server_guid: [u8; 16], server_name: &str) -> Self {
        Self {
            limits,
            server_guid,
            server_name: server_name.to_string(),
            dialects: vec![
                Dialect::SMB2_0_2,
                Dialect::SMB2_1,
                Dialect::SMB3_0,
                Dialect::SMB3_0_2,
                Dialect::SMB3_1_1,
            ],
            require_signing: false,
            encrypt_required: false,
            encrypt_desired: false,
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
            guest_ok: false,
            anonymous_ok: true,
            accept_transport_security: true,
            directory_leases: true,
            persistent_handles: false,
            observer: crate::observe::none(),
            kerberos: None,
            ntlm: true,
            ntlm_quic: true,
            multichannel_tcp: true,
            multichannel_quic: false,
            compression: smbq_compress::Algorithm::ALL
                .into_iter()
                .filter(|a| a.available())
                .collect(),
            compress_min_size: 4096,
            compress_adaptive: true,
            posix_extensions: false,
        }
    }

    pub fn require_signing(mut self, on: bool) -> Self {
        self.require_signing = on;
        self
    }

    pub fn encrypt(mut self, required: bool, desired: bool) -> Self {
        self.encrypt_required = required;
        self.encrypt_desired = desired;
        self
    }

    pub fn anonymous_ok(mut self, on: bool) -> Self {
        self.anonymous_ok = on;
        self
    }

    pub fn guest_ok(mut self, on: bool) -> Self {
        self.guest_ok = on;
        self
    }
}
