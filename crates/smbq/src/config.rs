//! The TOML configuration file, turned into typed values for the layers below. Command-line
//! flags override it. Every field has a documented default so an empty file is valid.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use smbq_proto::Limits;
use smbq_server::{EncryptPolicy, ShareConfig};

pub use crate::quic_config::QuicConfig;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Name shown to clients (NTLM target info, share listings). Default: the host name.
    pub server_name: Option<String>,
    pub listen: Option<IpAddr>,
    pub tcp_port: Option<u16>,
    pub quic_port: Option<u16>,
    pub state_dir: Option<PathBuf>,
    pub users: Option<PathBuf>,
    /// "required" | "desired" | "off"
    pub encrypt: Option<String>,
    /// Map unknown users to guest sessions (off by default).
    #[serde(default)]
    pub guest_ok: bool,
    /// Accept anonymous (null session) logons; they reach IPC$ and guest shares only.
    pub anonymous_ok: Option<bool>,
    /// Require SMB signing on every non-guest session.
    #[serde(default)]
    pub require_signing: bool,
    pub refuse_hardlinks: Option<bool>,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default, rename = "share")]
    pub shares: BTreeMap<String, ShareFile>,
    #[serde(default)]
    pub quic: QuicConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub preauth_frame: Option<u32>,
    pub max_read: Option<u32>,
    pub max_write: Option<u32>,
    pub max_transact: Option<u32>,
    pub max_credits: Option<u16>,
    pub max_compound: Option<usize>,
    pub max_in_flight: Option<usize>,
    pub max_sessions_per_connection: Option<usize>,
    pub max_opens_per_session: Option<usize>,
    pub max_connections: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShareFile {
    pub path: PathBuf,
    #[serde(default)]
    pub comment: String,
    #[serde(default)]
    pub read_only: bool,
    pub allowed_users: Option<Vec<String>>,
    /// Users who may connect but open nothing (MaximalAccess 0).
    #[serde(default)]
    pub no_access_users: Vec<String>,
    #[serde(default)]
    pub encrypt: bool,
    #[serde(default)]
    pub guest_ok: bool,
}

impl FileConfig {
    /// Reads the file; relative paths in `[quic]` are taken relative to the file's directory.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut cfg: Self =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if let Some(dir) = path.parent() {
            cfg.quic.resolve_paths(dir);
        }
        Ok(cfg)
    }

    /// The QUIC port: `[quic] port`, else the top-level `quic_port`.
    pub fn quic_port(&self) -> Option<u16> {
        self.quic.port.or(self.quic_port)
    }

    pub fn limits(&self) -> Limits {
        let d = Limits::default();
        let l = &self.limits;
        let max_write = l
            .max_write
            .unwrap_or(d.max_write)
            .clamp(65536, 8 * 1024 * 1024);
        Limits {
            preauth_frame: l
                .preauth_frame
                .unwrap_or(d.preauth_frame)
                .clamp(4096, 1024 * 1024),
            max_read: l
                .max_read
                .unwrap_or(d.max_read)
                .clamp(65536, 8 * 1024 * 1024),
            frame: max_write + 64 * 1024,
            max_write,
            max_transact: l
                .max_transact
                .unwrap_or(d.max_transact)
                .clamp(65536, 8 * 1024 * 1024),
            max_credits: l.max_credits.unwrap_or(d.max_credits).max(16),
            max_compound: l.max_compound.unwrap_or(d.max_compound).max(1),
            max_in_flight: l.max_in_flight.unwrap_or(d.max_in_flight).max(1),
            max_sessions_per_connection: l
                .max_sessions_per_connection
                .unwrap_or(d.max_sessions_per_connection)
                .max(1),
            max_opens_per_session: l
                .max_opens_per_session
                .unwrap_or(d.max_opens_per_session)
                .max(1),
            max_connections: l.max_connections.unwrap_or(d.max_connections).max(1),
            ..d
        }
    }

    pub fn shares(&self) -> Vec<ShareConfig> {
        self.shares
            .iter()
            .map(|(name, s)| ShareConfig {
                name: name.clone(),
                path: s.path.clone(),
                comment: s.comment.clone(),
                read_only: s.read_only,
                allowed_users: s.allowed_users.clone(),
                no_access_users: s.no_access_users.clone(),
                encrypt: s.encrypt,
                guest_ok: s.guest_ok,
            })
            .collect()
    }
}

pub fn parse_encrypt(s: &str) -> Result<EncryptPolicy, String> {
    match s {
        "required" => Ok(EncryptPolicy::Required),
        "desired" => Ok(EncryptPolicy::Desired),
        "off" => Ok(EncryptPolicy::Off),
        other => Err(format!(
            "--encrypt: expected required|desired|off, got {other:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_config() {
        let c: FileConfig = toml::from_str(
            r#"
            server_name = "FILES"
            tcp_port = 4450
            encrypt = "required"
            [limits]
            max_read = 1048576
            [share.docs]
            path = "/srv/docs"
            read_only = true
            allowed_users = ["alice"]
            encrypt = true
            "#,
        )
        .unwrap();
        assert_eq!(c.tcp_port, Some(4450));
        let shares = c.shares();
        assert_eq!(shares.len(), 1);
        assert!(shares[0].read_only && shares[0].encrypt);
        assert_eq!(c.limits().max_read, 1048576);
        assert!(
            toml::from_str::<FileConfig>("bogus = 1").is_err(),
            "unknown keys are errors"
        );
    }
}
