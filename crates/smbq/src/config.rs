//! The TOML configuration file, turned into typed values for the layers below. Command-line
//! flags override it. Every field has a documented default so an empty file is valid.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use smbq_proto::Limits;
use smbq_server::{EncryptPolicy, LogonPolicy, ShareConfig};

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
    /// Share listings show a session only the shares it may connect to (default true).
    pub access_based_share_enum: Option<bool>,
    /// Require SMB signing on every non-guest session.
    #[serde(default)]
    pub require_signing: bool,
    pub refuse_hardlinks: Option<bool>,
    /// The SMB3 POSIX extensions for Linux clients (crate smbq_server::posix), on every share
    /// that does not say otherwise (default true, as in Samba since 4.23; docs/posix.md).
    pub posix_extensions: Option<bool>,
    /// Grant leases on directories to SMB 3.x clients that ask (default true).
    pub directory_leases: Option<bool>,
    /// Multichannel over TCP: SMB2_GLOBAL_CAP_MULTI_CHANNEL and session binding
    /// (default true; `[quic] multichannel` for QUIC, default false).
    pub multichannel: Option<bool>,
    /// Advertise the interfaces as RSS-capable to multichannel clients (default false), so
    /// Windows opens up to four channels per interface instead of one.
    pub rss_capable: Option<bool>,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default, rename = "share")]
    pub shares: BTreeMap<String, ShareFile>,
    #[serde(default)]
    pub quic: QuicConfig,
    #[serde(default)]
    pub logon: LogonConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub log: LogConfig,
    #[serde(default)]
    pub kerberos: crate::kerberos::KerberosConfig,
    #[serde(default)]
    pub kdc_proxy: crate::kdc_proxy::KdcProxyConfig,
    #[serde(default)]
    pub compression: CompressionConfig,
    /// Scale-out (crate::cluster, docs/cluster.md).
    #[serde(default)]
    pub cluster: crate::cluster::ClusterFile,
    /// "per-user": file system work runs as each account's Unix user (needs root);
    /// "off" (default): as the server's own user. A share may set its own.
    pub unix_identity: Option<String>,
    /// The Unix user guest and anonymous sessions act as on per-user shares (default
    /// "nobody").
    pub guest_unix_user: Option<String>,
}

/// `[compression]` (docs/configuration.md): SMB 3.1.1 compression, negotiated with clients
/// that offer it. Responses are compressed only when the client asks (a READ's
/// REQUEST_COMPRESSED flag) or the share has `compress_data`, and only when it pays.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompressionConfig {
    /// Default true.
    pub enabled: Option<bool>,
    /// In the server's order of preference: "lz4", "pattern_v1", "lz77", "lz77_huffman",
    /// "lznt1". Default: all of them, in that order.
    pub algorithms: Option<Vec<String>>,
    /// Responses shorter than this many bytes are never compressed (default 4096).
    pub min_size: Option<usize>,
    /// Compress only while compressing is faster than the connection's link (default true);
    /// false compresses whenever it shrinks the data (a metered link).
    pub adaptive: Option<bool>,
}

impl CompressionConfig {
    /// The algorithms to offer (empty: off), or what is wrong with the list.
    pub fn algorithms(&self) -> Result<Vec<smbq_compress::Algorithm>, String> {
        use smbq_compress::Algorithm;
        if self.enabled == Some(false) {
            return Ok(Vec::new());
        }
        let Some(names) = &self.algorithms else {
            return Ok(Algorithm::ALL
                .into_iter()
                .filter(|a| a.available())
                .collect());
        };
        let mut out = Vec::new();
        for n in names {
            let a = Algorithm::from_name(n).ok_or_else(|| {
                format!(
                    "[compression] algorithms: unknown {n:?} (expected lz4, pattern_v1, lz77, \
                     lz77_huffman or lznt1)"
                )
            })?;
            if !a.available() {
                return Err(format!("[compression] algorithms: {n:?} is not built in"));
            }
            if !out.contains(&a) {
                out.push(a);
            }
        }
        Ok(out)
    }
}

/// `[log]` (crate::logging).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// "text" (default) or "json".
    pub format: Option<String>,
    /// An `EnvFilter` directive such as "info" or "smbq_server=debug"; SMBQ_LOG overrides it.
    /// A reload applies a change.
    pub level: Option<String>,
}

/// `[metrics]`: the Prometheus endpoint (crate::metrics), off unless `listen` is set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Address of the HTTP endpoint serving `/metrics`, e.g. "127.0.0.1:9445".
    pub listen: Option<std::net::SocketAddr>,
}

/// `[logon]`: throttling and logging of failed logons (smbq_server::logon_guard).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogonConfig {
    /// Failures per source address and per account answered without delay.
    pub failures_before_delay: Option<u32>,
    /// Delay of the first delayed LOGON_FAILURE answer; doubles with each further failure.
    pub failure_delay_ms: Option<u64>,
    /// Longest delay; 0 turns throttling off.
    pub failure_delay_max_ms: Option<u64>,
    /// Failures are forgotten after this long without one.
    pub window_secs: Option<u64>,
    /// Delayed failure answers one address may have waiting before all its logon answers wait.
    pub max_pending_per_source: Option<u32>,
    /// Failed logons logged one by one per minute; the rest go into a summary.
    pub log_per_minute: Option<u32>,
    /// The summary is logged once no logon has failed for this long.
    pub summary_after_secs: Option<u64>,
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
    pub max_connections_per_ip: Option<usize>,
    pub reserved_connections: Option<usize>,
    pub max_pending_bytes: Option<usize>,
    pub unauthenticated_timeout_secs: Option<u64>,
    pub max_durable_opens: Option<usize>,
    pub max_durable_opens_per_user: Option<usize>,
    pub durable_timeout_secs: Option<u64>,
    pub max_durable_timeout_secs: Option<u64>,
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
    /// SET_INFO keeps a DACL's auto-inherited flag only with "auto-inherit required", as
    /// Windows does (Samba's `acl flag inherited canonicalization`; default true).
    pub acl_flag_inherited_canonicalization: Option<bool>,
    /// Listings leave out what the session may not read (default false).
    #[serde(default)]
    pub access_based_enumeration: bool,
    /// "per-user" or "off": overrides the server's `unix_identity` for this share.
    pub unix_identity: Option<String>,
    /// Compress READ responses whether or not the client asked, and tell clients to compress
    /// their WRITEs (SMB2_SHAREFLAG_COMPRESS_DATA; default false).
    #[serde(default)]
    pub compress_data: bool,
    /// Continuously available (SMB2_SHARE_CAP_CONTINUOUS_AVAILABILITY): opens that ask get
    /// persistent handles, and writes are write-through (default false).
    #[serde(default)]
    pub continuous_availability: bool,
    /// Overrides the server's `posix_extensions` for this share.
    pub posix_extensions: Option<bool>,
}

/// `unix_identity = "per-user" | "off"`.
pub fn per_user(value: Option<&str>, what: &str) -> Result<Option<bool>, String> {
    match value {
        None => Ok(None),
        Some("per-user") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(v) => Err(format!(
            "{what} unix_identity = {v:?}: expected \"per-user\" or \"off\""
        )),
    }
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
            max_connections_per_ip: l
                .max_connections_per_ip
                .unwrap_or(d.max_connections_per_ip)
                .max(1),
            reserved_connections: l.reserved_connections.unwrap_or(d.reserved_connections),
            // Never below one READ or WRITE of the largest size, or nothing large could run.
            max_pending_bytes: l
                .max_pending_bytes
                .unwrap_or(d.max_pending_bytes)
                .max(2 * max_write.max(l.max_read.unwrap_or(d.max_read)) as usize),
            unauthenticated_idle_secs: l
                .unauthenticated_timeout_secs
                .unwrap_or(d.unauthenticated_idle_secs)
                .clamp(1, 3600),
            max_durable_opens: l.max_durable_opens.unwrap_or(d.max_durable_opens),
            max_durable_opens_per_user: l
                .max_durable_opens_per_user
                .unwrap_or(d.max_durable_opens_per_user),
            durable_timeout_secs: l
                .durable_timeout_secs
                .unwrap_or(d.durable_timeout_secs)
                .clamp(1, 3600),
            max_durable_timeout_secs: l
                .max_durable_timeout_secs
                .unwrap_or(d.max_durable_timeout_secs)
                .clamp(1, 3600),
            ..d
        }
    }

    pub fn logon(&self) -> LogonPolicy {
        let d = LogonPolicy::default();
        let l = &self.logon;
        // A client gives up on SESSION_SETUP after some tens of seconds (the Windows client's
        // request expiration is 60 s), and a longer delay would only look like a dead server.
        let max_delay = l
            .failure_delay_max_ms
            .map_or(d.max_delay, Duration::from_millis)
            .min(Duration::from_secs(30));
        LogonPolicy {
            failures_before_delay: l.failures_before_delay.unwrap_or(d.failures_before_delay),
            first_delay: l
                .failure_delay_ms
                .map_or(d.first_delay, Duration::from_millis)
                .min(max_delay),
            max_delay,
            window: l
                .window_secs
                .map_or(d.window, Duration::from_secs)
                .clamp(Duration::from_secs(1), Duration::from_secs(86_400)),
            max_pending_per_source: l
                .max_pending_per_source
                .unwrap_or(d.max_pending_per_source)
                .max(1),
            log_per_minute: l.log_per_minute.unwrap_or(d.log_per_minute),
            summary_after: l
                .summary_after_secs
                .map_or(d.summary_after, Duration::from_secs)
                .clamp(Duration::from_secs(1), Duration::from_secs(3600)),
        }
    }

    /// `posix_extensions`, for shares that do not set their own.
    pub fn posix_extensions(&self) -> bool {
        self.posix_extensions.unwrap_or(true)
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
                acl_flag_inherited_canonicalization: s
                    .acl_flag_inherited_canonicalization
                    .unwrap_or(true),
                access_based_enumeration: s.access_based_enumeration,
                compress_data: s.compress_data,
                continuous_availability: s.continuous_availability,
                posix_extensions: s.posix_extensions.unwrap_or(self.posix_extensions()),
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

    #[test]
    fn posix_extensions_default_on_and_a_share_may_differ() {
        let c: FileConfig = toml::from_str(
            r#"
            [share.a]
            path = "/srv/a"
            [share.b]
            path = "/srv/b"
            posix_extensions = false
            "#,
        )
        .unwrap();
        let on: Vec<bool> = c.shares().iter().map(|s| s.posix_extensions).collect();
        assert_eq!(on, [true, false]);
        let c: FileConfig = toml::from_str(
            r#"
            posix_extensions = false
            [share.a]
            path = "/srv/a"
            [share.b]
            path = "/srv/b"
            posix_extensions = true
            "#,
        )
        .unwrap();
        let on: Vec<bool> = c.shares().iter().map(|s| s.posix_extensions).collect();
        assert_eq!(on, [false, true]);
    }

    #[test]
    fn access_based_share_enum_is_optional() {
        assert_eq!(FileConfig::default().access_based_share_enum, None);
        let c: FileConfig = toml::from_str("access_based_share_enum = false").unwrap();
        assert_eq!(c.access_based_share_enum, Some(false));
    }

    #[test]
    fn logon_settings_default_and_clamp() {
        let c = FileConfig::default();
        assert_eq!(c.logon(), LogonPolicy::default());
        let c: FileConfig = toml::from_str(
            r#"
            [logon]
            failures_before_delay = 2
            failure_delay_ms = 90000
            failure_delay_max_ms = 600000
            window_secs = 0
            max_pending_per_source = 0
            "#,
        )
        .unwrap();
        let p = c.logon();
        assert_eq!(p.failures_before_delay, 2);
        assert_eq!(p.max_delay, Duration::from_secs(30));
        assert_eq!(p.first_delay, p.max_delay, "never above the maximum");
        assert_eq!(p.window, Duration::from_secs(1));
        assert_eq!(p.max_pending_per_source, 1);
        let off: FileConfig = toml::from_str("[logon]\nfailure_delay_max_ms = 0").unwrap();
        assert!(off.logon().max_delay.is_zero());
        assert!(toml::from_str::<FileConfig>("[logon]\ndelay = 1").is_err());
    }
}
