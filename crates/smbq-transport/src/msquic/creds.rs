//! The server's certificates as MsQuic configurations, one per certificate entry, picked by
//! SNI as `CertStore` picks for rustls. MsQuic's quictls loads a certificate and key only from
//! files (or a PKCS#12 blob), so each pair is written as PEM into a private directory (mode
//! 0700, files 0600) for the moment of loading and removed right after.

use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use smbq_msquic_ffi::msquic::{
    CertificateFile, Configuration, Credential, CredentialConfig, CredentialFlags, Registration,
    Settings,
};

use super::{alpn, status_error};
use crate::certs::{CertStore, PemPair, Resolved};

/// The configurations of one certificate set; rebuilt when the store's set is replaced.
pub(super) struct ServerConfigs {
    store: Arc<CertStore>,
    settings: Settings,
    built: Mutex<(Arc<Resolved>, Vec<Arc<Configuration>>)>,
}

impl ServerConfigs {
    pub(super) fn new(
        reg: &Registration,
        store: Arc<CertStore>,
        settings: Settings,
    ) -> io::Result<Self> {
        let set = store.current();
        let built = build(reg, &set, &settings)?;
        Ok(Self {
            store,
            settings,
            built: Mutex::new((set, built)),
        })
    }

    /// The configuration for a connection that named `sni` (empty: none). A certificate set
    /// replaced since the last handshake is loaded first; if that fails, the old one serves.
    pub(super) fn for_sni(&self, reg: &Registration, sni: &str) -> Option<Arc<Configuration>> {
        let current = self.store.current();
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        if !Arc::ptr_eq(&built.0, &current) {
            match build(reg, &current, &self.settings) {
                Ok(configs) => *built = (current, configs),
                Err(e) => {
                    tracing::error!(error = %e, "MsQuic: new certificates not loaded; the old ones serve")
                }
            }
        }
        let sni = (!sni.is_empty()).then_some(sni);
        let idx = built.0.index_of(sni);
        built.1.get(idx).or_else(|| built.1.first()).cloned()
    }
}

fn build(
    reg: &Registration,
    set: &Resolved,
    settings: &Settings,
) -> io::Result<Vec<Arc<Configuration>>> {
    set.pem
        .iter()
        .map(|pair| load(reg, pair, settings).map(Arc::new))
        .collect()
}

fn load(reg: &Registration, pair: &PemPair, settings: &Settings) -> io::Result<Configuration> {
    let config = Configuration::open(reg, &alpn(), Some(settings))
        .map_err(|s| status_error("configuration", s))?;
    let dir = tempfile::Builder::new().prefix("smbq-msquic-").tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    let cert = dir.path().join("chain.pem");
    let key = dir.path().join("key.pem");
    write_private(&cert, pair.chain.as_bytes())?;
    write_private(&key, pair.key.as_bytes())?;
    let cred = CredentialConfig::new()
        .set_credential_flags(CredentialFlags::NONE)
        .set_credential(Credential::CertificateFile(CertificateFile::new(
            key.display().to_string(),
            cert.display().to_string(),
        )));
    let loaded = config.load_credential(&cred);
    // The directory and both files go now, whatever the outcome.
    drop(dir);
    loaded.map_err(|s| status_error("loading the server certificate", s))?;
    Ok(config)
}

fn write_private(path: &std::path::Path, data: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}
