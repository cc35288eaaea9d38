//! `smbq cert show|export|create`: the server certificate as clients need it (fingerprint to
//! pin, PEM or DER to trust).

use std::net::IpAddr;
use std::path::PathBuf;

use crate::cert::{self, CertPaths, SelfSignedSpec};
use crate::config::FileConfig;
use crate::quic_config::CertSource;

#[derive(clap::Subcommand)]
pub enum CertCmd {
    /// Print "sha256:<64 hex>" of the server certificate (generating it if missing).
    Show {
        #[command(flatten)]
        src: SourceArgs,
        /// Print every configured certificate as "sha256:HEX NAMES..." (one per line).
        #[arg(long)]
        all: bool,
    },
    /// Write the server certificate (never the key) as PEM (the chain) and/or DER (the leaf).
    Export {
        /// PEM output file.
        #[arg(long, required_unless_present = "der")]
        pem: Option<PathBuf>,
        /// DER output file (the Rust smb crate reads DER root certificates).
        #[arg(long)]
        der: Option<PathBuf>,
        #[command(flatten)]
        src: SourceArgs,
    },
    /// Generate the self-signed certificate in the state directory.
    Create {
        /// State directory (default ./.smbq).
        #[arg(long)]
        state_dir: Option<PathBuf>,
        /// TOML configuration (for state_dir, server_name and listen).
        #[arg(long)]
        config: Option<PathBuf>,
        /// More DNS names or IP addresses for the certificate.
        #[arg(long = "name", value_name = "DNS")]
        names: Vec<String>,
        /// The address the server listens on (added as an IP SAN when specific).
        #[arg(long)]
        listen: Option<IpAddr>,
        /// Replace an existing certificate.
        #[arg(long)]
        force: bool,
    },
}

/// Which certificate: `--cert`, else the configuration's first, else the generated one.
#[derive(clap::Args)]
pub struct SourceArgs {
    /// State directory (default ./.smbq).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// TOML configuration whose [quic] certs are used.
    #[arg(long)]
    config: Option<PathBuf>,
    /// A PEM certificate file to use instead.
    #[arg(long)]
    cert: Option<PathBuf>,
}

pub fn host_name() -> String {
    std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "smbq".into())
}

/// Names of a generated certificate: CN = the host name; the configured server name as an
/// extra SAN when it differs (clients connect by either).
pub fn self_signed_spec(
    file: &FileConfig,
    listen: Option<IpAddr>,
    mut extra: Vec<String>,
) -> SelfSignedSpec {
    let host = host_name();
    if let Some(n) = &file.server_name
        && !n.eq_ignore_ascii_case(&host)
        && n.is_ascii()
        && !n.contains(char::is_whitespace)
    {
        extra.insert(0, n.clone());
    }
    SelfSignedSpec {
        host,
        extra_names: extra,
        listen: listen.or(file.listen),
    }
}

fn load_file(config: &Option<PathBuf>) -> Result<FileConfig, String> {
    match config {
        Some(p) => FileConfig::load(p),
        None => Ok(FileConfig::default()),
    }
}

fn state_dir(flag: &Option<PathBuf>, file: &FileConfig) -> PathBuf {
    flag.clone()
        .or(file.state_dir.clone())
        .unwrap_or_else(crate::serve::default_state_dir)
}

/// The certificate chains the server would serve, in order, each with its source. The
/// generated certificate is created if missing.
/// A certificate chain in DER, leaf first.
type Chain = Vec<Vec<u8>>;

fn chains(src: &SourceArgs) -> Result<Vec<(CertSource, Chain)>, String> {
    let file = load_file(&src.config)?;
    let dir = state_dir(&src.state_dir, &file);
    // Only the certificate is needed here, so `--cert` alone (without --key) is enough.
    let flag = src.cert.clone().map(|c| (c.clone(), c));
    let mut out = Vec::new();
    for s in file.quic.cert_sources(flag, &dir) {
        let chain = if s.generated {
            let (loaded, created) =
                cert::ensure_self_signed(&dir, &self_signed_spec(&file, None, Vec::new()))
                    .map_err(|e| e.to_string())?;
            if created {
                eprintln!(
                    "smbq: generated a self-signed certificate in {}",
                    s.paths.cert.display()
                );
            }
            loaded.chain
        } else {
            cert::load_certs(&s.paths.cert).map_err(|e| e.to_string())?
        };
        out.push((s, chain.into_iter().map(|c| c.to_vec()).collect()));
    }
    Ok(out)
}

pub fn run(cmd: CertCmd) -> Result<(), String> {
    match cmd {
        CertCmd::Show { src, all } => {
            let list = chains(&src)?;
            for (s, chain) in list.iter().take(if all { usize::MAX } else { 1 }) {
                let leaf = chain.first().ok_or("empty certificate chain")?;
                let fp = cert::format_fingerprint(&cert::fingerprint(leaf));
                if all {
                    println!("{fp} {}", s.names.join(" "));
                } else {
                    println!("{fp}");
                }
            }
        }
        CertCmd::Export { pem, der, src } => {
            let list = chains(&src)?;
            let (_, chain) = list.first().ok_or("no certificate")?;
            let leaf = chain.first().ok_or("empty certificate chain")?;
            if let Some(p) = pem {
                let text: String = chain.iter().map(|c| pem_encode(c)).collect();
                cert::write_atomic(&p, text.as_bytes(), 0o644).map_err(|e| e.to_string())?;
            }
            if let Some(p) = der {
                cert::write_atomic(&p, leaf, 0o644).map_err(|e| e.to_string())?;
            }
            eprintln!(
                "smbq: exported {}",
                cert::format_fingerprint(&cert::fingerprint(leaf))
            );
        }
        CertCmd::Create {
            state_dir: dir_flag,
            config,
            names,
            listen,
            force,
        } => {
            let file = load_file(&config)?;
            let dir = state_dir(&dir_flag, &file);
            let paths = CertPaths::in_state_dir(&dir);
            if !force && (paths.cert.exists() || paths.key.exists()) {
                return Err(format!(
                    "{} exists; use --force to replace it (clients that pinned it must re-pin)",
                    paths.cert.display()
                ));
            }
            let g = cert::create(&paths, &self_signed_spec(&file, listen, names))
                .map_err(|e| e.to_string())?;
            println!("{}", cert::format_fingerprint(&cert::fingerprint(&g.der)));
            eprintln!(
                "smbq: wrote {} and {}",
                paths.cert.display(),
                paths.key.display()
            );
        }
    }
    Ok(())
}

/// RFC 7468 textual encoding of one certificate.
fn pem_encode(der: &[u8]) -> String {
    pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    #[test]
    fn pem_encoding_round_trips_through_the_pem_parser() {
        for len in [1usize, 2, 3, 47, 48, 49, 500] {
            let der: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let text = pem_encode(&der);
            let back = CertificateDer::from_pem_slice(text.as_bytes()).unwrap();
            assert_eq!(back.as_ref(), der.as_slice(), "len {len}");
            assert!(text.starts_with("-----BEGIN CERTIFICATE-----\n"));
            assert!(text.lines().all(|l| l.len() <= 64));
        }
    }

    #[test]
    fn generated_cert_pem_matches_rcgen_pem() {
        let g = cert::generate(&SelfSignedSpec {
            host: "h".into(),
            extra_names: vec![],
            listen: None,
        })
        .unwrap();
        // rcgen uses CRLF or LF depending on platform; compare the decoded bodies.
        let ours = CertificateDer::from_pem_slice(pem_encode(&g.der).as_bytes()).unwrap();
        let theirs = CertificateDer::from_pem_slice(g.cert_pem.as_bytes()).unwrap();
        assert_eq!(ours, theirs);
    }
}
