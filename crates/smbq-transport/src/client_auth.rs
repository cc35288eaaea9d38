//! Client certificate access control, after Windows Server's SMB over QUIC "client access
//! control" (MS-SMB2 3.3.1.17, 3.3.1.18, 3.3.5.1): deny entries win (by SHA-256, by the
//! leaf's issuer name, by its subject alternative names), then an allowed leaf SHA-256, or a
//! chain to a trusted CA, narrowed to the allowed issuers and names when any are listed,
//! admits the client. A name is only worth the signature over it, so names admit only
//! chains that verified. Refusals end the TLS handshake, so they never reach SMB NEGOTIATE.

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
    /// When not empty, a verified chain is admitted only if its leaf's issuer is one of
    /// these distinguished names (`CN=Contoso CA, O=Contoso`; Windows' ISSUER identifier),
    /// or a name in `allow_names` matches.
    pub allow_issuers: Vec<String>,
    /// Refused if the leaf's issuer is one of these names.
    pub deny_issuers: Vec<String>,
    /// When not empty, a verified chain is admitted only if one of its leaf's DNS subject
    /// alternative names matches (`*.domain` matches one label), or its issuer is allowed.
    pub allow_names: Vec<String>,
    /// Refused if one of the leaf's DNS subject alternative names matches.
    pub deny_names: Vec<String>,
}

impl ClientPolicy {
    fn by_name(&self) -> bool {
        !(self.allow_issuers.is_empty()
            && self.deny_issuers.is_empty()
            && self.allow_names.is_empty()
            && self.deny_names.is_empty())
    }
}

/// What the name rules look at in a leaf: its issuer's distinguished name and its DNS
/// subject alternative names. None when the certificate does not parse.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LeafNames {
    pub subject: String,
    pub issuer: String,
    pub dns: Vec<String>,
}

impl LeafNames {
    pub(crate) fn of(der: &[u8]) -> Option<Self> {
        let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
        let dns = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .map(|san| {
                san.value
                    .general_names
                    .iter()
                    .filter_map(|n| match n {
                        x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Self {
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            dns,
        })
    }
}

/// The audit view of a leaf certificate (its names empty when it does not parse).
pub(crate) fn client_cert(der: &[u8]) -> crate::ClientCert {
    let n = LeafNames::of(der);
    crate::ClientCert {
        fingerprint: fingerprint(der),
        subject: n.as_ref().map(|n| n.subject.clone()).unwrap_or_default(),
        issuer: n.as_ref().map(|n| n.issuer.clone()).unwrap_or_default(),
        names: n.map(|n| n.dns).unwrap_or_default(),
    }
}

/// A distinguished name compared without case and without the spaces around its separators
/// (`CN=Contoso CA,O=Contoso` is `cn=contoso ca, o=contoso`). Escaped separators inside a
/// value are not special-cased.
fn dn_key(dn: &str) -> String {
    dn.split([',', '+'])
        .map(|rdn| {
            rdn.split_once('=').map_or_else(
                || rdn.trim().to_lowercase(),
                |(k, v)| format!("{}={}", k.trim().to_lowercase(), v.trim().to_lowercase()),
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn issuer_listed(list: &[String], issuer: &str) -> bool {
    let key = dn_key(issuer);
    list.iter().any(|l| dn_key(l) == key)
}

/// A DNS name against a listed one: equal without case and a trailing dot, or `*.domain`
/// matching exactly one label in front of `domain`.
fn dns_matches(pattern: &str, name: &str) -> bool {
    let p = crate::certs::normalize(pattern.trim());
    let n = crate::certs::normalize(name);
    match p.strip_prefix("*.") {
        Some(domain) => n
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest == domain),
        None => p == n,
    }
}

fn name_listed(list: &[String], dns: &[String]) -> bool {
    list.iter().any(|p| dns.iter().any(|n| dns_matches(p, n)))
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
        let p = &self.policy;
        let names = if p.by_name() {
            let Some(n) = LeafNames::of(end_entity) else {
                tracing::warn!(fingerprint = %fingerprint_hex(&leaf), "client certificate refused: unparsable, and names are checked");
                return Err(access_denied());
            };
            if issuer_listed(&p.deny_issuers, &n.issuer) || name_listed(&p.deny_names, &n.dns) {
                tracing::warn!(fingerprint = %fingerprint_hex(&leaf), issuer = %n.issuer, names = ?n.dns, "client certificate refused: issuer or name denied");
                return Err(access_denied());
            }
            Some(n)
        } else {
            None
        };
        if self.policy.allow_fingerprints.contains(&leaf) {
            tracing::debug!(fingerprint = %fingerprint_hex(&leaf), "client certificate allowed by fingerprint");
            return Ok(ClientCertVerified::assertion());
        }
        let Some(chain) = &self.chain else {
            tracing::warn!(fingerprint = %fingerprint_hex(&leaf), "client certificate refused: not allowed");
            return Err(access_denied());
        };
        let verified = chain
            .verify_client_cert(end_entity, intermediates, now)
            .inspect_err(|e| {
                tracing::warn!(fingerprint = %fingerprint_hex(&leaf), error = %e, "client certificate refused: chain");
            })?;
        let narrowed = !p.allow_issuers.is_empty() || !p.allow_names.is_empty();
        if let Some(n) = names.filter(|_| narrowed)
            && !issuer_listed(&p.allow_issuers, &n.issuer)
            && !name_listed(&p.allow_names, &n.dns)
        {
            tracing::warn!(fingerprint = %fingerprint_hex(&leaf), issuer = %n.issuer, names = ?n.dns, "client certificate refused: issuer and names not allowed");
            return Err(access_denied());
        }
        tracing::debug!(fingerprint = %fingerprint_hex(&leaf), "client certificate verified to a trusted CA");
        Ok(verified)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn issuer_names_compare_without_case_or_spaces_around_separators() {
        let listed = ["CN=Contoso Issuing CA, O=Contoso".to_string()];
        assert!(issuer_listed(&listed, "cn=contoso issuing ca,o=CONTOSO"));
        assert!(issuer_listed(
            &listed,
            "CN = Contoso Issuing CA ,O= Contoso"
        ));
        assert!(!issuer_listed(&listed, "CN=Contoso Issuing CA"));
        assert!(!issuer_listed(&listed, "CN=Contoso Issuing CA2, O=Contoso"));
        assert!(!issuer_listed(&[], "CN=Contoso Issuing CA, O=Contoso"));
    }

    #[test]
    fn a_wildcard_name_matches_one_label() {
        assert!(dns_matches("*.clients.test", "bob.clients.test"));
        assert!(dns_matches("*.Clients.Test.", "BOB.clients.test"));
        assert!(!dns_matches("*.clients.test", "a.b.clients.test"));
        assert!(!dns_matches("*.clients.test", "clients.test"));
        assert!(!dns_matches("*.clients.test", ".clients.test"));
        assert!(dns_matches("bob.clients.test", "bob.clients.test."));
        assert!(!dns_matches("bob.clients.test", "bob.clients.test.evil"));
    }

    #[test]
    fn leaf_names_come_from_the_certificate() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut p = rcgen::CertificateParams::new(vec!["bob.clients.test".into()]).unwrap();
        p.distinguished_name.push(rcgen::DnType::CommonName, "bob");
        let cert = p.self_signed(&key).unwrap();
        let n = LeafNames::of(cert.der()).unwrap();
        assert_eq!(n.dns, vec!["bob.clients.test".to_string()]);
        assert_eq!(dn_key(&n.issuer), "cn=bob");
        assert_eq!(LeafNames::of(b"not a certificate"), None);
    }
}
