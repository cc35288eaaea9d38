//! Server certificates selected by SNI (MS-SMB2 3.3.5.1: the certificate is looked up by the
//! server name QUIC is connected to), replaceable at runtime so renewals need no restart.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};

use crate::tls::{TlsError, crypto_provider};

/// SHA-256 of a DER certificate: the thumbprint used in access lists and logs.
pub fn fingerprint(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// Lower-case hex of a fingerprint, for logs and error messages.
pub fn fingerprint_hex(fp: &[u8; 32]) -> String {
    use std::fmt::Write;
    fp.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// One certificate: the DNS names it serves (matched against SNI; `*.domain` matches one
/// label), its chain (leaf first) and its key, already parsed.
pub struct CertEntry {
    pub names: Vec<String>,
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for CertEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of logs.
        f.debug_struct("CertEntry")
            .field("names", &self.names)
            .field("chain_len", &self.chain.len())
            .finish()
    }
}

/// The parsed, immutable set a handshake resolves against; swapped whole by `replace`.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// Entry order, the first being the default.
    keys: Vec<Arc<CertifiedKey>>,
    /// The same entries as PEM (chain, key), for a QUIC stack that loads its own TLS.
    #[cfg(feature = "msquic")]
    pub(crate) pem: Vec<PemPair>,
    /// Lower-case name (exact or `*.domain`) -> index into `keys`; first entry naming it wins.
    by_name: HashMap<String, usize>,
}

/// SNI-selected certificates: exact name, then `*.parent`, then the first entry as default.
#[derive(Debug)]
pub struct CertStore {
    current: RwLock<Arc<Resolved>>,
}

impl CertStore {
    pub fn new(entries: Vec<CertEntry>) -> Result<Arc<Self>, TlsError> {
        let resolved = resolve_entries(entries, &crypto_provider())?;
        Ok(Arc::new(Self {
            current: RwLock::new(Arc::new(resolved)),
        }))
    }

    /// Installs a new set for handshakes that start from now on; on error the old set stays.
    pub fn replace(&self, entries: Vec<CertEntry>) -> Result<(), TlsError> {
        let resolved = Arc::new(resolve_entries(entries, &crypto_provider())?);
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = resolved;
        Ok(())
    }

    /// SHA-256 of each entry's leaf, in entry order.
    pub fn fingerprints(&self) -> Vec<[u8; 32]> {
        self.snapshot()
            .keys
            .iter()
            .filter_map(|k| k.cert.first().map(|c| fingerprint(c)))
            .collect()
    }

    fn snapshot(&self) -> Arc<Resolved> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The certificate for an SNI value (None when the client sent none, e.g. it dialled an IP).
    pub(crate) fn lookup(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let set = self.snapshot();
        set.keys.get(set.index_of(sni)).cloned()
    }

    /// The current set (swapped whole by `replace`, so an `Arc::ptr_eq` tells a reload).
    #[cfg(feature = "msquic")]
    pub(crate) fn current(&self) -> Arc<Resolved> {
        self.snapshot()
    }
}

impl Resolved {
    /// Entry for an SNI value: exact name, then `*.parent`, then the first entry.
    pub(crate) fn index_of(&self, sni: Option<&str>) -> usize {
        sni.map(normalize)
            .and_then(|name| {
                self.by_name.get(&name).copied().or_else(|| {
                    let (_, parent) = name.split_once('.')?;
                    self.by_name.get(&format!("*.{parent}")).copied()
                })
            })
            .unwrap_or(0)
    }
}

/// One entry as PEM text: the chain (leaf first) and its key, zeroed when dropped.
#[cfg(feature = "msquic")]
pub(crate) struct PemPair {
    pub(crate) chain: String,
    pub(crate) key: zeroize::Zeroizing<String>,
}

#[cfg(feature = "msquic")]
impl std::fmt::Debug for PemPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PemPair").finish_non_exhaustive()
    }
}

#[cfg(feature = "msquic")]
fn pem_pair(chain: &[CertificateDer<'_>], key: &PrivateKeyDer<'_>) -> PemPair {
    let chain = chain
        .iter()
        .map(|c| pem::encode(&pem::Pem::new("CERTIFICATE", c.as_ref())))
        .collect::<String>();
    let tag = match key {
        PrivateKeyDer::Pkcs1(_) => "RSA PRIVATE KEY",
        PrivateKeyDer::Sec1(_) => "EC PRIVATE KEY",
        _ => "PRIVATE KEY",
    };
    let der = zeroize::Zeroizing::new(key.secret_der().to_vec());
    PemPair {
        chain,
        key: zeroize::Zeroizing::new(pem::encode(&pem::Pem::new(tag, der.as_slice()))),
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.lookup(client_hello.server_name())
    }
}

/// A DNS name as compared: without case and without a trailing dot.
pub(crate) fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn resolve_entries(
    entries: Vec<CertEntry>,
    provider: &CryptoProvider,
) -> Result<Resolved, TlsError> {
    if entries.is_empty() {
        return Err(TlsError::NoCertificates);
    }
    let mut keys = Vec::with_capacity(entries.len());
    #[cfg(feature = "msquic")]
    let mut pem = Vec::with_capacity(entries.len());
    let mut by_name = HashMap::new();
    for (idx, entry) in entries.into_iter().enumerate() {
        let label = entry.names.first().cloned().unwrap_or_default();
        if entry.chain.is_empty() {
            return Err(TlsError::EmptyChain(label));
        }
        #[cfg(feature = "msquic")]
        pem.push(pem_pair(&entry.chain, &entry.key));
        // Parses the key and checks it belongs to the leaf, so a mismatch fails at load
        // time instead of in every handshake.
        let key = CertifiedKey::from_der(entry.chain, entry.key, provider)
            .map_err(|e| TlsError::BadKey(label, e))?;
        for name in &entry.names {
            by_name.entry(normalize(name)).or_insert(idx);
        }
        keys.push(Arc::new(key));
    }
    Ok(Resolved {
        keys,
        #[cfg(feature = "msquic")]
        pem,
        by_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::PrivatePkcs8KeyDer;

    fn entry(names: &[&str]) -> CertEntry {
        let ck = rcgen::generate_simple_self_signed(
            names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        CertEntry {
            names: names.iter().map(|s| s.to_string()).collect(),
            chain: vec![ck.cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der())),
        }
    }

    fn leaf(store: &CertStore, sni: Option<&str>) -> [u8; 32] {
        fingerprint(&store.lookup(sni).unwrap().cert[0])
    }

    #[test]
    fn sni_exact_then_wildcard_then_default() {
        let store = CertStore::new(vec![
            entry(&["default.test"]),
            entry(&["files.example.com"]),
            entry(&["*.example.com"]),
        ])
        .unwrap();
        let fps = store.fingerprints();
        assert_eq!(fps.len(), 3);
        assert_eq!(leaf(&store, Some("files.example.com")), fps[1]);
        assert_eq!(leaf(&store, Some("FILES.Example.com.")), fps[1]);
        assert_eq!(leaf(&store, Some("other.example.com")), fps[2]);
        // A wildcard covers one label only.
        assert_eq!(leaf(&store, Some("a.b.example.com")), fps[0]);
        assert_eq!(leaf(&store, Some("example.com")), fps[0]);
        assert_eq!(leaf(&store, None), fps[0]);
    }

    #[test]
    fn replace_swaps_and_keeps_old_set_on_error() {
        let store = CertStore::new(vec![entry(&["a.test"])]).unwrap();
        let old = store.fingerprints();
        assert!(matches!(
            store.replace(vec![]),
            Err(TlsError::NoCertificates)
        ));
        assert_eq!(store.fingerprints(), old);
        store.replace(vec![entry(&["a.test"])]).unwrap();
        assert_ne!(store.fingerprints(), old);
    }

    #[test]
    fn rejects_mismatched_key_and_empty_chain() {
        let a = entry(&["a.test"]);
        let b = entry(&["b.test"]);
        let mixed = CertEntry {
            names: a.names,
            chain: a.chain,
            key: b.key,
        };
        assert!(matches!(
            CertStore::new(vec![mixed]),
            Err(TlsError::BadKey(..))
        ));
        let c = entry(&["c.test"]);
        let empty = CertEntry {
            names: c.names,
            chain: vec![],
            key: c.key,
        };
        assert!(matches!(
            CertStore::new(vec![empty]),
            Err(TlsError::EmptyChain(_))
        ));
    }

    #[test]
    fn fingerprint_is_sha256() {
        // FIPS 180-2 appendix B.1 test vector: SHA-256("abc").
        assert_eq!(
            fingerprint_hex(&fingerprint(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
