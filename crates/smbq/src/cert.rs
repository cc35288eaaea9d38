//! Server certificates for SMB over QUIC: loading PEM files, generating and keeping a
//! self-signed certificate in the state directory, and SHA-256 fingerprints that clients pin.
//!
//! Certificate requirements follow Microsoft's SMB over QUIC guidance (digital-signature key
//! usage, serverAuth EKU, ECDSA P-256 or better, SHA-256 signature, a CN, a DNS SAN per name the
//! clients use); see shared/reference/smb-over-quic.md §3.2.

use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};

/// PEM files are small; a bigger one is a wrong path, not a certificate.
const MAX_PEM_BYTES: u64 = 1024 * 1024;
/// How long a generated certificate is valid. Clients pin it by fingerprint, so a long life
/// saves re-pinning; `smbq cert create --force` replaces it at any time.
const SELF_SIGNED_DAYS: i64 = 5 * 365;

pub const CERT_FILE: &str = "cert.pem";
pub const KEY_FILE: &str = "key.pem";

#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: larger than {MAX_PEM_BYTES} bytes; not a PEM file")]
    TooLarge { path: PathBuf },
    #[error("{path}: no CERTIFICATE section found")]
    NoCertificate { path: PathBuf },
    #[error("{path}: no private key (PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY) found")]
    NoKey { path: PathBuf },
    #[error("{path}: bad PEM: {reason}")]
    Pem { path: PathBuf, reason: String },
    #[error("generating a certificate: {0}")]
    Generate(String),
    #[error("{0:?}: not a fingerprint (expected sha256:<64 hex digits>)")]
    Fingerprint(String),
}

/// A certificate chain (leaf first) and its private key, parsed from PEM.
#[derive(Debug)]
pub struct LoadedCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Where a certificate and its key live on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertPaths {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertPaths {
    pub fn in_state_dir(state_dir: &Path) -> Self {
        Self {
            cert: state_dir.join(CERT_FILE),
            key: state_dir.join(KEY_FILE),
        }
    }
}

fn read_capped(path: &Path) -> Result<Vec<u8>, CertError> {
    let io = |source| CertError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.len() > MAX_PEM_BYTES {
        return Err(CertError::TooLarge {
            path: path.to_path_buf(),
        });
    }
    std::fs::read(path).map_err(io)
}

fn pem_error(path: &Path, e: rustls_pki_types::pem::Error) -> CertError {
    CertError::Pem {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Every CERTIFICATE section of a PEM text, in file order (leaf first by convention).
pub fn parse_cert_chain(
    pem: &[u8],
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(chain)
}

/// The first private key of a PEM text (PKCS#8, SEC1 or PKCS#1).
pub fn parse_key(pem: &[u8], path: &Path) -> Result<PrivateKeyDer<'static>, CertError> {
    match PrivateKeyDer::from_pem_slice(pem) {
        Ok(k) => Ok(k),
        Err(rustls_pki_types::pem::Error::NoItemsFound) => Err(CertError::NoKey {
            path: path.to_path_buf(),
        }),
        Err(e) => Err(pem_error(path, e)),
    }
}

/// Reads a PEM chain and key. Whether the key matches the certificate is checked where the
/// TLS configuration is built (rustls compares the public keys).
pub fn load(paths: &CertPaths) -> Result<LoadedCert, CertError> {
    let chain = parse_cert_chain(&read_capped(&paths.cert)?, &paths.cert)?;
    let key = parse_key(&read_capped(&paths.key)?, &paths.key)?;
    Ok(LoadedCert { chain, key })
}

/// Reads every certificate of PEM files (trusted CAs for client certificates).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    parse_cert_chain(&read_capped(path)?, path)
}

/// SHA-256 of a DER certificate: what Windows calls the certificate hash and what clients pin.
pub fn fingerprint(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// `sha256:<64 lowercase hex digits>`, the form printed by `smbq cert show`.
pub fn format_fingerprint(fp: &[u8; 32]) -> String {
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in fp {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Accepts `sha256:HEX`, bare `HEX`, and colon-separated hex as printed by
/// `openssl x509 -fingerprint -sha256`; case-insensitive.
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], CertError> {
    let t = text.trim();
    let body = match t.get(..7) {
        Some(p) if p.eq_ignore_ascii_case("sha256:") => t.get(7..).unwrap_or_default(),
        _ => t,
    };
    let hex_digits: String = body.chars().filter(|c| *c != ':').collect();
    let bytes = hex::decode(&hex_digits).map_err(|_| CertError::Fingerprint(text.into()))?;
    <[u8; 32]>::try_from(bytes).map_err(|_| CertError::Fingerprint(text.into()))
}

/// Names a generated certificate covers.
#[derive(Clone, Debug)]
pub struct SelfSignedSpec {
    /// The CN and first DNS SAN.
    pub host: String,
    /// More DNS names or IP addresses (as text).
    pub extra_names: Vec<String>,
    /// The listening address; added as an IP SAN when it is a specific address.
    pub listen: Option<IpAddr>,
}

impl SelfSignedSpec {
    /// The SAN list in order, without duplicates: the host name, the extra names, `localhost`,
    /// 127.0.0.1, ::1, and the listening address when specific.
    pub fn san_list(&self) -> Vec<SanName> {
        let mut out: Vec<SanName> = Vec::new();
        let mut push = |n: SanName| {
            if !out.contains(&n) {
                out.push(n);
            }
        };
        for name in std::iter::once(&self.host).chain(self.extra_names.iter()) {
            let name = name.trim();
            if name.is_empty() {
                continue;
            }
            match name.parse::<IpAddr>() {
                Ok(ip) => push(SanName::Ip(ip)),
                Err(_) => push(SanName::Dns(name.to_ascii_lowercase())),
            }
        }
        push(SanName::Dns("localhost".into()));
        push(SanName::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        push(SanName::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST)));
        if let Some(ip) = self.listen
            && !ip.is_unspecified()
        {
            push(SanName::Ip(ip));
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SanName {
    Dns(String),
    Ip(IpAddr),
}

/// A freshly generated certificate and key, PEM-encoded.
pub struct Generated {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

/// ECDSA P-256 with SHA-256, CN = host, EKU serverAuth, key usage digitalSignature,
/// basicConstraints CA:FALSE, and the SANs of [`SelfSignedSpec::san_list`].
pub fn generate(spec: &SelfSignedSpec) -> Result<Generated, CertError> {
    let gen_err = |e: rcgen::Error| CertError::Generate(e.to_string());
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(gen_err)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    let cn = if spec.host.trim().is_empty() {
        "smbq"
    } else {
        spec.host.trim()
    };
    dn.push(DnType::CommonName, cn);
    params.distinguished_name = dn;
    params.subject_alt_names = spec
        .san_list()
        .into_iter()
        .map(|n| match n {
            SanName::Ip(ip) => Ok(SanType::IpAddress(ip)),
            SanName::Dns(d) => d.clone().try_into().map(SanType::DnsName).map_err(|_| {
                CertError::Generate(format!("{d:?} is not a valid DNS name (ASCII only)"))
            }),
        })
        .collect::<Result<_, _>>()?;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + time::Duration::days(SELF_SIGNED_DAYS);
    let mut serial: [u8; 16] = rand::random();
    // A positive, non-zero 127-bit serial (RFC 5280 4.1.2.2).
    serial[0] = (serial[0] & 0x7f) | 0x01;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    let cert = params.self_signed(&key).map_err(gen_err)?;
    Ok(Generated {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        der: cert.der().clone(),
    })
}

/// Writes `data` to `path` through a temporary file and a rename, so a watcher never reads
/// half a file.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), CertError> {
    let io = |source| CertError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = path.with_file_name(format!(".{file_name}.tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// Generates a certificate into `paths` (cert 0644, key 0600).
pub fn create(paths: &CertPaths, spec: &SelfSignedSpec) -> Result<Generated, CertError> {
    if let Some(dir) = paths.cert.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| CertError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let generated = generate(spec)?;
    // Key first: a reader that sees the new certificate then also finds its key.
    write_atomic(&paths.key, generated.key_pem.as_bytes(), 0o600)?;
    write_atomic(&paths.cert, generated.cert_pem.as_bytes(), 0o644)?;
    Ok(generated)
}

/// The state directory's generated certificate: loaded when both files exist, else generated.
/// Returns the certificate and whether it was generated now.
pub fn ensure_self_signed(
    state_dir: &Path,
    spec: &SelfSignedSpec,
) -> Result<(LoadedCert, bool), CertError> {
    let paths = CertPaths::in_state_dir(state_dir);
    if paths.cert.exists() && paths.key.exists() {
        return Ok((load(&paths)?, false));
    }
    create(&paths, spec)?;
    Ok((load(&paths)?, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;
    use x509_parser::prelude::{FromDer, X509Certificate};

    fn spec() -> SelfSignedSpec {
        SelfSignedSpec {
            host: "Files.Example.COM".into(),
            extra_names: vec!["alt.example.com".into(), "10.1.2.3".into()],
            listen: Some("192.0.2.7".parse().unwrap()),
        }
    }

    #[test]
    fn generated_cert_meets_the_smb_over_quic_requirements() {
        let g = generate(&spec()).unwrap();
        let (rest, x) = X509Certificate::from_der(g.der.as_ref()).unwrap();
        assert!(rest.is_empty());
        // CN = host name.
        let cn: Vec<_> = x
            .subject()
            .iter_common_name()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        assert_eq!(cn, vec!["Files.Example.COM"]);
        // ECDSA with SHA-256 (OID 1.2.840.10045.4.3.2) on a P-256 key (1.2.840.10045.3.1.7).
        assert_eq!(
            x.signature_algorithm.algorithm.to_id_string(),
            "1.2.840.10045.4.3.2"
        );
        let curve = x
            .public_key()
            .algorithm
            .parameters
            .as_ref()
            .unwrap()
            .as_oid()
            .unwrap();
        assert_eq!(curve.to_id_string(), "1.2.840.10045.3.1.7");
        // EKU serverAuth.
        let eku = x.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth);
        assert!(!eku.client_auth);
        // Key usage digitalSignature.
        let ku = x.key_usage().unwrap().unwrap().value;
        assert!(ku.digital_signature());
        assert!(!ku.key_cert_sign());
        // basicConstraints present with CA:FALSE.
        let bc = x.basic_constraints().unwrap().unwrap().value;
        assert!(!bc.ca);
        // SANs in the documented order.
        let sans: Vec<String> = x
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => format!("dns:{d}"),
                GeneralName::IPAddress(b) => {
                    let ip: IpAddr = match b.len() {
                        4 => <[u8; 4]>::try_from(*b).unwrap().into(),
                        16 => <[u8; 16]>::try_from(*b).unwrap().into(),
                        _ => panic!("bad ip len"),
                    };
                    format!("ip:{ip}")
                }
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            sans,
            vec![
                "dns:files.example.com",
                "dns:alt.example.com",
                "ip:10.1.2.3",
                "dns:localhost",
                "ip:127.0.0.1",
                "ip:::1",
                "ip:192.0.2.7",
            ]
        );
        // Valid now, for years.
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        assert!(x.validity().not_before.timestamp() < now);
        assert!(x.validity().not_after.timestamp() > now + 4 * 365 * 86400);
        // The key PEM parses back as a private key.
        parse_key(g.key_pem.as_bytes(), Path::new("k")).unwrap();
    }

    #[test]
    fn unspecified_listen_address_is_not_a_san() {
        let mut s = spec();
        s.listen = Some(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        s.extra_names.clear();
        s.host = "localhost".into();
        assert_eq!(
            s.san_list(),
            vec![
                SanName::Dns("localhost".into()),
                SanName::Ip("127.0.0.1".parse().unwrap()),
                SanName::Ip("::1".parse().unwrap()),
            ]
        );
    }

    #[test]
    fn non_ascii_name_is_rejected() {
        let mut s = spec();
        s.extra_names = vec!["dätei.example".into()];
        assert!(matches!(generate(&s), Err(CertError::Generate(_))));
    }

    #[test]
    fn ensure_generates_once_then_reuses_with_modes() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (a, generated) = ensure_self_signed(dir.path(), &spec()).unwrap();
        assert!(generated);
        let mode = |f: &str| {
            std::fs::metadata(dir.path().join(f))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        assert_eq!(mode(CERT_FILE), 0o644);
        assert_eq!(mode(KEY_FILE), 0o600);
        let (b, generated) = ensure_self_signed(dir.path(), &spec()).unwrap();
        assert!(!generated);
        assert_eq!(a.chain, b.chain);
        assert_eq!(a.chain.len(), 1);
        // No temporary files left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn pem_loading_errors_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let g = generate(&spec()).unwrap();
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        let paths = CertPaths {
            cert: cert.clone(),
            key: key.clone(),
        };
        // Missing file.
        assert!(matches!(load(&paths), Err(CertError::Io { path, .. }) if path == cert));
        // A key where the certificate should be.
        std::fs::write(&cert, &g.key_pem).unwrap();
        std::fs::write(&key, &g.key_pem).unwrap();
        assert!(matches!(load(&paths), Err(CertError::NoCertificate { .. })));
        // A certificate where the key should be.
        std::fs::write(&cert, &g.cert_pem).unwrap();
        std::fs::write(&key, &g.cert_pem).unwrap();
        assert!(matches!(load(&paths), Err(CertError::NoKey { path, .. }) if path == key));
        // Corrupt base64 inside a section.
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\n!!!notbase64!!!\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        assert!(matches!(load(&paths), Err(CertError::Pem { .. })));
        // A section that never ends.
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\nAAAA\n").unwrap();
        assert!(matches!(load(&paths), Err(CertError::Pem { .. })));
        // Oversized file.
        std::fs::write(&key, vec![b'A'; (MAX_PEM_BYTES + 1) as usize]).unwrap();
        assert!(matches!(load(&paths), Err(CertError::TooLarge { .. })));
        // Correct files, and a two-certificate chain keeps its order.
        std::fs::write(&key, &g.key_pem).unwrap();
        let other = generate(&spec()).unwrap();
        std::fs::write(&cert, format!("{}{}", g.cert_pem, other.cert_pem)).unwrap();
        let loaded = load(&paths).unwrap();
        assert_eq!(loaded.chain, vec![g.der.clone(), other.der.clone()]);
    }

    #[test]
    fn fingerprint_formats_and_parses() {
        // SHA-256("abc") from FIPS 180-2, Appendix B.1.
        let fp = fingerprint(b"abc");
        let s = format_fingerprint(&fp);
        assert_eq!(
            s,
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(parse_fingerprint(&s).unwrap(), fp);
        assert_eq!(parse_fingerprint(&s.to_uppercase()).unwrap(), fp);
        assert_eq!(
            parse_fingerprint(s.trim_start_matches("sha256:")).unwrap(),
            fp
        );
        let colons = fp
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":");
        assert_eq!(parse_fingerprint(&colons).unwrap(), fp);
        assert!(parse_fingerprint("sha256:abcd").is_err());
        assert!(parse_fingerprint(&format!("{s}00")).is_err());
        assert!(parse_fingerprint("sha256:zz").is_err());
    }
}
