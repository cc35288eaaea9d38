//! The client side of SMB over QUIC, independent of the QUIC stack: how the server is trusted,
//! the TLS 1.3 client configuration (ALPN `smb`, MS-SMB2 1.9), and the errors a connect
//! reports. The verifier records why it refused a server, so a failed handshake says
//! "untrusted" or "pin mismatch" rather than only a TLS alert number.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, DigitallySignedStruct, Error, OtherError, RootCertStore, SignatureScheme,
};

use crate::certs::{fingerprint, fingerprint_hex};
use crate::quic::{ALPN, QuicSettings};
use crate::tls::crypto_provider;

/// How a client decides the server is the one it meant.
#[derive(Clone, Debug)]
pub enum ServerTrust {
    /// The operating system's roots (rustls-native-certs), names checked against the server
    /// name, as Windows clients do (smb-over-quic.md 3.2).
    SystemRoots,
    /// These roots only (for example a private CA, or a self-signed server certificate).
    CaCerts(Vec<CertificateDer<'static>>),
    /// SHA-256 of the end-entity certificate's DER: that certificate is the server's identity,
    /// whatever its issuer, names or dates. Handshake signatures are still verified, so only
    /// the holder of its key passes.
    Pin([u8; 32]),
    /// Any certificate (tests, first contact to read a fingerprint). Handshake signatures are
    /// still verified, which proves nothing about who the server is.
    Insecure,
}

/// Everything a QUIC client needs. `settings` tunes the client as the server is tuned.
pub struct QuicClientConfig {
    pub trust: ServerTrust,
    /// Certificate chain (leaf first) and key, sent when the server asks (client access
    /// control, MS-SMB2 3.3.5.1).
    pub client_cert: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    pub settings: QuicSettings,
    /// NSS key-log sink for decrypting captures; None in production.
    pub keylog: Option<Arc<dyn rustls::KeyLog>>,
}

impl QuicClientConfig {
    /// Default settings, no client certificate, no key log.
    pub fn new(trust: ServerTrust) -> Self {
        Self {
            trust,
            client_cert: None,
            settings: QuicSettings::default(),
            keylog: None,
        }
    }
}

impl std::fmt::Debug for QuicClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("QuicClientConfig")
            .field("trust", &self.trust)
            .field(
                "client_cert_chain_len",
                &self.client_cert.as_ref().map(|(c, _)| c.len()),
            )
            .field("settings", &self.settings)
            .field("keylog", &self.keylog.is_some())
            .finish()
    }
}

/// Why a QUIC connect failed, in the terms a user acts on.
#[derive(thiserror::Error, Debug)]
pub enum QuicConnectError {
    #[error("QUIC connect: {0}")]
    Io(#[from] io::Error),
    /// Nothing answered within the handshake timeout (no server, or UDP filtered).
    #[error("no answer from the server (QUIC handshake timed out)")]
    Timeout,
    #[error("server certificate not trusted: {0}")]
    CertificateUntrusted(String),
    /// Lower-case hex SHA-256 fingerprints.
    #[error("server certificate SHA-256 {got} is not the pinned {expected}")]
    PinMismatch { expected: String, got: String },
    /// The server ended the handshake or the connection: a TLS alert (for example
    /// certificate_required or access_denied when it wants a client certificate it does not
    /// get or admit), a per-IP refusal, or an application close.
    #[error("refused by the server: {0}")]
    Refused(String),
    #[error("QUIC connect: {0}")]
    Other(String),
}

/// What the verifier refused, kept for the error the connect reports.
#[derive(Clone, Debug)]
pub(crate) enum VerifyFailure {
    Pin { expected: [u8; 32], got: [u8; 32] },
    Untrusted(String),
}

impl VerifyFailure {
    pub(crate) fn into_error(self) -> QuicConnectError {
        match self {
            Self::Pin { expected, got } => QuicConnectError::PinMismatch {
                expected: fingerprint_hex(&expected),
                got: fingerprint_hex(&got),
            },
            Self::Untrusted(why) => QuicConnectError::CertificateUntrusted(why),
        }
    }
}

/// What the client's one verifier and one certificate resolver saw, time-stamped, so that a
/// handshake reads only what happened after it began. Both are shared by every handshake of a
/// [`ClientTls`]: rustls resumes a session only under the same verifier and resolver objects
/// (`Tls13ClientSessionValue::compatible_config`), so per-handshake ones would rule out TLS
/// resumption and cost every connection a full certificate check.
#[derive(Debug, Default)]
pub(crate) struct Observations {
    failure: Mutex<Option<(Instant, VerifyFailure)>>,
    asked: Mutex<Option<Instant>>,
}

impl Observations {
    fn record(&self, f: VerifyFailure) {
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some((Instant::now(), f));
    }

    fn note_asked(&self) {
        *self.asked.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }
}

/// One handshake's view of the [`Observations`]. Two handshakes at once (the client races a
/// server's addresses) may see each other's verdict; both concern the same server.
#[derive(Clone, Debug)]
pub(crate) struct Handshake {
    seen: Arc<Observations>,
    started: Instant,
}

impl Handshake {
    /// The verifier's refusal during this handshake, if any.
    pub(crate) fn failure(&self) -> Option<VerifyFailure> {
        let slot = self.seen.failure.lock().unwrap_or_else(|p| p.into_inner());
        slot.as_ref()
            .filter(|(at, _)| *at >= self.started)
            .map(|(_, f)| f.clone())
    }

    /// Whether the server sent a CertificateRequest (RFC 8446 4.3.2) during this handshake:
    /// only then can it still refuse the client after the client's handshake is done (its
    /// verdict on the certificate, or on its absence, comes after the client Finished).
    pub(crate) fn cert_asked(&self) -> bool {
        self.seen
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|at| at >= self.started)
    }
}

#[derive(Clone, Debug)]
enum Anchor {
    WebPki(Arc<WebPkiServerVerifier>),
    Pin([u8; 32]),
    Insecure,
}

#[derive(Debug, thiserror::Error)]
#[error("server certificate is not the pinned one")]
struct NotPinned;

/// The client TLS configuration, built once per client; each handshake gets a copy with its
/// own recording verifier.
pub(crate) struct ClientTls {
    /// One configuration for every handshake, so sessions resume (see [`Observations`]).
    config: Arc<rustls::ClientConfig>,
    seen: Arc<Observations>,
    #[cfg(feature = "msquic")]
    anchor: Anchor,
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

fn system_roots() -> io::Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::warn!(error = %e, "loading system root certificates");
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        tracing::debug!(ignored, "unparsable system root certificates skipped");
    }
    if added == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no system root certificates found (install ca-certificates, or trust a CA file or a pinned fingerprint)",
        ));
    }
    Ok(roots)
}

impl ClientTls {
    /// TLS 1.3 only, the server's cipher order (aws-lc-rs), ALPN exactly `smb`, no early data.
    pub(crate) fn new(cfg: QuicClientConfig) -> io::Result<Self> {
        let provider = Arc::new(crypto_provider());
        let anchor = match cfg.trust {
            ServerTrust::SystemRoots => Anchor::WebPki(webpki(system_roots()?, &provider)?),
            ServerTrust::CaCerts(cas) => {
                let mut roots = RootCertStore::empty();
                for ca in cas {
                    roots.add(ca).map_err(invalid)?;
                }
                Anchor::WebPki(webpki(roots, &provider)?)
            }
            ServerTrust::Pin(fp) => Anchor::Pin(fp),
            ServerTrust::Insecure => Anchor::Insecure,
        };
        let seen = Arc::new(Observations::default());
        let verifier = Arc::new(RecordingVerifier {
            anchor: anchor.clone(),
            provider: provider.clone(),
            seen: seen.clone(),
        });
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(invalid)?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut base = match cfg.client_cert {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(invalid)?,
            None => builder.with_no_client_auth(),
        };
        base.alpn_protocols = vec![ALPN.to_vec()];
        base.enable_early_data = false;
        if let Some(keylog) = cfg.keylog {
            base.key_log = keylog;
        }
        base.client_auth_cert_resolver = Arc::new(AskRecorder {
            inner: base.client_auth_cert_resolver.clone(),
            seen: seen.clone(),
        });
        Ok(Self {
            config: Arc::new(base),
            seen,
            #[cfg(feature = "msquic")]
            anchor,
        })
    }

    /// The configuration every handshake uses, and this handshake's view of what its verifier
    /// and resolver see.
    pub(crate) fn for_handshake(&self) -> (Arc<rustls::ClientConfig>, Handshake) {
        (
            self.config.clone(),
            Handshake {
                seen: self.seen.clone(),
                started: Instant::now(),
            },
        )
    }

    /// Judges a server's leaf certificate for a stack that does its own TLS (MsQuic): the same
    /// anchor as the rustls path; the stack proves the server holds the certificate's key.
    /// Intermediates are not passed, so under a CA the server's leaf must be issued by a
    /// trusted certificate directly (pins and self-signed certificates are unaffected).
    #[cfg(feature = "msquic")]
    pub(crate) fn verify_leaf(&self, der: &[u8], server_name: &str) -> Result<(), VerifyFailure> {
        let leaf = CertificateDer::from(der.to_vec());
        match &self.anchor {
            Anchor::WebPki(v) => {
                let name = ServerName::try_from(server_name.to_owned())
                    .map_err(|e| VerifyFailure::Untrusted(e.to_string()))?;
                v.verify_server_cert(&leaf, &[], &name, &[], UnixTime::now())
                    .map(|_| ())
                    .map_err(|e| VerifyFailure::Untrusted(e.to_string()))
            }
            Anchor::Pin(expected) => {
                let got = fingerprint(&leaf);
                if got == *expected {
                    Ok(())
                } else {
                    Err(VerifyFailure::Pin {
                        expected: *expected,
                        got,
                    })
                }
            }
            Anchor::Insecure => {
                tracing::warn!(
                    fingerprint = %fingerprint_hex(&fingerprint(&leaf)),
                    "server certificate accepted without verification"
                );
                Ok(())
            }
        }
    }
}

/// Passes every question to the configured resolver, noting that it was asked.
#[derive(Debug)]
struct AskRecorder {
    inner: Arc<dyn ResolvesClientCert>,
    seen: Arc<Observations>,
}

impl ResolvesClientCert for AskRecorder {
    fn resolve(
        &self,
        root_hint_subjects: &[&[u8]],
        sigschemes: &[SignatureScheme],
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        self.seen.note_asked();
        self.inner.resolve(root_hint_subjects, sigschemes)
    }

    fn only_raw_public_keys(&self) -> bool {
        self.inner.only_raw_public_keys()
    }

    fn has_certs(&self) -> bool {
        self.inner.has_certs()
    }
}

fn webpki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> io::Result<Arc<WebPkiServerVerifier>> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(invalid)
}

#[derive(Debug)]
struct RecordingVerifier {
    anchor: Anchor,
    provider: Arc<CryptoProvider>,
    seen: Arc<Observations>,
}

impl RecordingVerifier {
    fn record(&self, f: VerifyFailure) {
        self.seen.record(f);
    }
}

impl ServerCertVerifier for RecordingVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match &self.anchor {
            Anchor::WebPki(v) => v
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
                .inspect_err(|e| self.record(VerifyFailure::Untrusted(e.to_string()))),
            Anchor::Pin(expected) => {
                let got = fingerprint(end_entity);
                if got == *expected {
                    Ok(ServerCertVerified::assertion())
                } else {
                    self.record(VerifyFailure::Pin {
                        expected: *expected,
                        got,
                    });
                    // certificate_unknown goes to the server (RFC 8446 6.2).
                    Err(Error::InvalidCertificate(CertificateError::Other(
                        OtherError(Arc::new(NotPinned)),
                    )))
                }
            }
            Anchor::Insecure => {
                tracing::warn!(
                    fingerprint = %fingerprint_hex(&fingerprint(end_entity)),
                    "server certificate accepted without verification"
                );
                Ok(ServerCertVerified::assertion())
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    /// Proves the server holds the key of the certificate it sent, which is what makes a
    /// pinned fingerprint mean something.
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
