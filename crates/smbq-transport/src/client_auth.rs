//! Client certificate access control, after Windows Server's SMB over QUIC "client access
//! control" (MS-SMB2 3.3.1.17, 3.3.1.18, 3.3.5.1): deny entries win, then an allowed leaf
//! SHA-256 or a chain to a trusted CA admits the client. Refusals end the TLS handshake, so
//! they never reach SMB NEGOTIATE.

use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, Error, RootCertStore,
    SignatureScheme,
};

use crate::certs::{fingerprint, fingerprint_hex};
use crate::tls::TlsError;

/// Whether clients must present a certificate.
#[derive(Clone, Debug, Default)]
pub enum ClientAuth {
    /// No CertificateRequest is sent (smb-over-quic.md 3.3: Schannel may otherwise volunteer
    /// an unrelated certificate).
    #[default]
    Off,
    Required(ClientPolicy),
}

/// Who is admitted. Fingerprints are SHA-256 of DER certificates.
#[derive(Clone, Debug, Default)]
pub struct ClientPolicy {
    /// Leaves admitted without chain validation (pinned thumbprints).
    pub allow_fingerprints: Vec<[u8; 32]>,
    /// Refused if any certificate the client sends (leaf or intermediate) matches.
    pub deny_fingerprints: Vec<[u8; 32]>,
    /// Roots a client chain may verify to (webpki: validity, signatures, clientAuth EKU).
    pub trusted_cas: Vec<CertificateDer<'static>>,
}

/// rustls verifier applying a [`ClientPolicy`].
#[derive(Debug)]
pub(crate) struct PolicyVerifier {
    policy: ClientPolicy,
    /// Present when `trusted_cas` is non-empty.
    chain: Option<Arc<dyn ClientCertVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl PolicyVerifier {
    pub(crate) fn new(
        policy: ClientPolicy,
        provider: Arc<CryptoProvider>,
    ) -> Result<Arc<Self>, TlsError> {
        let chain = if policy.trusted_cas.is_empty() {
            None
        } else {
            let mut roots = RootCertStore::empty();
            for ca in &policy.trusted_cas {
                roots.add(ca.clone()).map_err(TlsError::BadCa)?;
            }
            Some(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()?,
            )
        };
        Ok(Arc::new(Self {
            policy,
            chain,
            provider,
        }))
    }
}

/// rustls sends access_denied (49) for this, the alert MS-SMB2 3.3.5.1 prescribes for a
/// client the access list refuses.
fn access_denied() -> Error {
    Error::InvalidCertificate(CertificateError::ApplicationVerificationFailure)
}

impl ClientCertVerifier for PolicyVerifier {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chain.as_ref().map_or(&[], |v| v.root_hint_subjects())
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        let leaf = fingerprint(end_entity);
        let denied = std::iter::once(leaf)
            .chain(intermediates.iter().map(|c| fingerprint(c)))
            .any(|fp| self.policy.deny_fingerprints.contains(&fp));
        if denied {
            tracing::warn!(fingerprint = %fingerprint_hex(&leaf), "client certificate refused: denied");
            return Err(access_denied());
        }
        if self.policy.allow_fingerprints.contains(&leaf) {
            tracing::debug!(fingerprint = %fingerprint_hex(&leaf), "client certificate allowed by fingerprint");
            return Ok(ClientCertVerified::assertion());
        }
        let Some(chain) = &self.chain else {
            tracing::warn!(fingerprint = %fingerprint_hex(&leaf), "client certificate refused: not allowed");
            return Err(access_denied());
        };
        chain
            .verify_client_cert(end_entity, intermediates, now)
            .inspect(|_| {
                tracing::debug!(fingerprint = %fingerprint_hex(&leaf), "client certificate verified to a trusted CA");
            })
            .inspect_err(|e| {
                tracing::warn!(fingerprint = %fingerprint_hex(&leaf), error = %e, "client certificate refused: chain");
            })
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

    /// Proves the client holds the key of the leaf, which is what makes a pinned
    /// fingerprint meaningful.
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
