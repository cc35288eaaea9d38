//! The TLS 1.3 server configuration SMB over QUIC uses, independent of the QUIC stack
//! (MS-SMB2 1.9 ALPN; smb-over-quic.md 3.1 ciphers).

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::crypto::aws_lc_rs::{self, cipher_suite};

use crate::certs::CertStore;
use crate::client_auth::{ClientAuth, PolicyVerifier};
use crate::quic::ALPN;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("no server certificate configured")]
    NoCertificates,
    #[error("certificate entry {0:?} has an empty chain")]
    EmptyChain(String),
    #[error("certificate entry {0:?}: unusable key: {1}")]
    BadKey(String, rustls::Error),
    #[error("trusted client CA rejected: {0}")]
    BadCa(rustls::Error),
    #[error("client certificate verifier: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("QUIC TLS configuration: {0}")]
    Quic(String),
}

/// What a QUIC listener needs for TLS. Certificates reload through `certs.replace`.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    pub certs: Arc<CertStore>,
    pub client_auth: ClientAuth,
    /// NSS key-log sink for decrypting captures; None in production.
    pub keylog: Option<Arc<dyn rustls::KeyLog>>,
    /// Send TLS 1.3 session tickets after the handshake, so a client connecting again may
    /// resume (never under client authentication). Off unless configured: Windows Server
    /// sends none over SMB over QUIC (MsQuic issues a resumption ticket only when the
    /// application asks), and Samba 4.25's client frees its GnuTLS session once the handshake
    /// is done, so the first post-handshake CRYPTO frame, a ticket, kills its connection
    /// (docs/interop.md).
    pub session_tickets: bool,
}

/// aws-lc-rs with TLS 1.3 suites in the order the server prefers: AES-128-GCM (fastest with
/// AES-NI), AES-256-GCM (both are what Windows' MsQuic offers), then ChaCha20-Poly1305.
pub fn crypto_provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
        ],
        ..aws_lc_rs::default_provider()
    }
}

/// TLS 1.3 only, ALPN exactly `smb` (a QUIC client offering none or another gets
/// no_application_protocol, RFC 9001 8.1), certificates by SNI, optional client auth.
/// No early data: SMB gains nothing from 0-RTT and would take on replay risk.
pub fn server_config(tls: &TlsSettings) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(crypto_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let (builder, resume) = match &tls.client_auth {
        ClientAuth::Off => (builder.with_no_client_auth(), tls.session_tickets),
        ClientAuth::Required(policy) => (
            builder.with_client_cert_verifier(PolicyVerifier::new(policy.clone(), provider)?),
            false,
        ),
    };
    let mut config = builder.with_cert_resolver(tls.certs.clone());
    if resume {
        // TLS 1.3 resumption: a client connecting again skips the certificate and its
        // signature (issue 11 item 6: ephemeral connections). Stateless tickets, sealed
        // under keys that rotate every 6 hours, so the server keeps nothing per client.
        config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()?;
    } else {
        // No tickets unless configured (TlsSettings::session_tickets), and never under client
        // authentication: a resumed session would skip the client-certificate policy, so a
        // certificate denied since (a reload of deny_fingerprints) could still come back in.
        config.send_tls13_tickets = 0;
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    }
    config.alpn_protocols = vec![ALPN.to_vec()];
    // The server's suite order wins, so AES-128-GCM is used whenever the client offers it.
    config.ignore_client_order = true;
    config.max_early_data_size = 0;
    if let Some(keylog) = &tls.keylog {
        config.key_log = keylog.clone();
    }
    Ok(config)
}
