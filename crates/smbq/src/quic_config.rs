//! The `[quic]` table of the configuration file and its checks. Turning it into the
//! transport's settings happens in `quic_setup`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cert::{self, CertPaths};

/// The transport's ceiling: a 9000-byte jumbo frame's payload.
pub const MTU_MAX: u16 = smbq_transport::MAX_MTU_UPPER_BOUND;
/// QUIC's minimum datagram size (RFC 9000 §14).
pub const MTU_MIN: u16 = smbq_transport::MIN_MTU;
/// Flow-control windows above this only waste memory per connection.
const WINDOW_MAX: u64 = 1 << 30;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuicConfig {
    /// UDP port (default 443; 0 = QUIC off). Also accepted as top-level `quic_port`.
    pub port: Option<u16>,
    /// Certificates chosen by SNI; the first is also the default for unmatched names.
    #[serde(default)]
    pub certs: Vec<CertFile>,
    /// Client certificate access control.
    #[serde(default)]
    pub client_auth: ClientAuthMode,
    /// Client certificates allowed by SHA-256 (`sha256:HEX`).
    #[serde(default)]
    pub allow_fingerprints: Vec<String>,
    /// Client certificates refused by SHA-256; deny always wins.
    #[serde(default)]
    pub deny_fingerprints: Vec<String>,
    /// PEM files of CAs whose client certificates are accepted.
    #[serde(default)]
    pub trusted_ca_files: Vec<PathBuf>,
    /// Client certificates (verified to a trusted CA) admitted only when issued by one of
    /// these, by the issuer's distinguished name (`CN=Contoso Issuing CA, O=Contoso`), as
    /// Windows' `Grant-SmbClientAccessToServer -IdentifierType ISSUER`.
    #[serde(default)]
    pub allow_issuers: Vec<String>,
    /// Client certificates refused when issued by one of these names; deny always wins.
    #[serde(default)]
    pub deny_issuers: Vec<String>,
    /// Client certificates (verified to a trusted CA) admitted only when one of their
    /// subject alternative names (DNS names; `*.domain` matches one label) is listed.
    #[serde(default)]
    pub allow_names: Vec<String>,
    /// Client certificates refused when a subject alternative name is listed.
    #[serde(default)]
    pub deny_names: Vec<String>,
    /// NTLM over QUIC (default true). false: Kerberos only on QUIC connections (through the
    /// KDC proxy), so NTLM relay and coercion cannot come in over UDP 443; needs a keytab.
    pub ntlm: Option<bool>,
    /// Refuse named pipes (IPC$ opens: srvsvc, lsarpc, ...) on QUIC connections, as
    /// Windows' RestrictNamedpipeAccessViaQuic (default true there and here).
    pub restrict_named_pipes: Option<bool>,
    /// Honour SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (skip SMB encryption inside TLS 1.3).
    pub transport_security: Option<bool>,
    /// Multichannel (session binding) on QUIC connections; default false, as Windows binds
    /// no QUIC channels.
    pub multichannel: Option<bool>,
    pub stream_receive_window: Option<u64>,
    pub receive_window: Option<u64>,
    pub send_window: Option<u64>,
    pub idle_timeout_secs: Option<u64>,
    /// Seconds between server PINGs; 0 = none.
    pub keep_alive_secs: Option<u64>,
    pub mtu_upper_bound: Option<u16>,
    pub socket_buffer: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    /// Handshakes in progress above which clients must validate their address (Retry).
    pub retry_above: Option<usize>,
    /// Congestion controller: "bbr" (default), "cubic", "newreno" or "bbr-pure".
    pub congestion: Option<String>,
    /// quinn's drivers on a thread of their own (true), or on the shared worker threads.
    pub io_thread: Option<bool>,
    /// QUIC implementation: "quinn" (default) or "msquic" (in builds with the msquic feature).
    pub stack: Option<String>,
    /// Data streams granted per connection to clients of smbq's multi-stream extension
    /// (docs/multistream.md), 0..=64; 0 = off. Default 8.
    pub max_streams: Option<u16>,
    /// Append TLS secrets (NSS key-log format) to this file; `SSLKEYLOGFILE` does the same.
    pub keylog: Option<PathBuf>,
    /// TLS 1.3 session tickets, so clients connecting again resume (quinn stack, never under
    /// client_auth). Default false: Windows Server sends none, and Samba 4.25's client drops
    /// the connection on the first one (docs/interop.md).
    pub session_tickets: Option<bool>,
    /// This node's server id in the connection ids it issues, for a QUIC-LB load balancer in
    /// front of cluster nodes (hex, 1 to 11 bytes; quinn only; docs/cluster.md). Off by
    /// default.
    pub lb_server_id: Option<String>,
    /// The QUIC-LB config rotation those ids carry, 0..=6 (default 0).
    pub lb_config_rotation: Option<u8>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CertFile {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Server names (SNI) this certificate answers for; empty = any name.
    #[serde(default)]
    pub names: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuthMode {
    #[default]
    Off,
    Required,
}

/// Where one served certificate comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertSource {
    pub paths: CertPaths,
    pub names: Vec<String>,
    /// Generated in the state directory (created on first start).
    pub generated: bool,
}

fn abs(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

impl QuicConfig {
    pub fn resolve_paths(&mut self, base: &Path) {
        for c in &mut self.certs {
            c.cert = abs(base, &c.cert);
            c.key = abs(base, &c.key);
        }
        for ca in &mut self.trusted_ca_files {
            *ca = abs(base, ca);
        }
        if let Some(k) = &mut self.keylog {
            *k = abs(base, k);
        }
    }

    /// The certificates to serve: the configured ones with `--cert/--key` replacing the first,
    /// or the state directory's generated one when none is configured.
    pub fn cert_sources(
        &self,
        flag: Option<(PathBuf, PathBuf)>,
        state_dir: &Path,
    ) -> Vec<CertSource> {
        let mut out: Vec<CertSource> = self
            .certs
            .iter()
            .map(|c| CertSource {
                paths: CertPaths {
                    cert: c.cert.clone(),
                    key: c.key.clone(),
                },
                names: c.names.clone(),
                generated: false,
            })
            .collect();
        if let Some((cert, key)) = flag {
            let paths = CertPaths { cert, key };
            match out.first_mut() {
                Some(first) => first.paths = paths,
                None => out.push(CertSource {
                    paths,
                    names: Vec::new(),
                    generated: false,
                }),
            }
        }
        if out.is_empty() {
            out.push(CertSource {
                paths: CertPaths::in_state_dir(state_dir),
                names: Vec::new(),
                generated: true,
            });
        }
        out
    }

    pub fn allow_fingerprints(&self) -> Result<Vec<[u8; 32]>, String> {
        parse_fps("allow_fingerprints", &self.allow_fingerprints)
    }

    pub fn deny_fingerprints(&self) -> Result<Vec<[u8; 32]>, String> {
        parse_fps("deny_fingerprints", &self.deny_fingerprints)
    }

    /// The key-log file: `keylog` from the configuration, else `$SSLKEYLOGFILE`.
    pub fn keylog_path(&self, env: Option<std::ffi::OsString>) -> Option<PathBuf> {
        self.keylog
            .clone()
            .or_else(|| env.filter(|v| !v.is_empty()).map(PathBuf::from))
    }

    /// Range checks that do not need the transport's types.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_limits()?;
        self.validate_stack()?;
        if self.max_connections_per_ip == Some(0) {
            return Err("[quic] max_connections_per_ip must be at least 1".into());
        }
        if self
            .certs
            .iter()
            .any(|c| c.names.iter().any(|n| n.trim().is_empty()))
        {
            return Err("[quic] certs: empty name in names".into());
        }
        self.allow_fingerprints()?;
        self.deny_fingerprints()?;
        let by_name = !self.allow_issuers.is_empty() || !self.allow_names.is_empty();
        if by_name && self.trusted_ca_files.is_empty() {
            return Err(
                "[quic] allow_issuers and allow_names need trusted_ca_files: a name is only \
                 worth what the CA that signed it vouches for"
                    .into(),
            );
        }
        if [
            &self.allow_issuers,
            &self.deny_issuers,
            &self.allow_names,
            &self.deny_names,
        ]
        .iter()
        .any(|l| l.iter().any(|n| n.trim().is_empty()))
        {
            return Err("[quic] empty name in allow/deny_issuers or allow/deny_names".into());
        }
        if self.client_auth == ClientAuthMode::Required
            && self.allow_fingerprints.is_empty()
            && self.trusted_ca_files.is_empty()
        {
            return Err(
                "[quic] client_auth = \"required\" needs allow_fingerprints or trusted_ca_files"
                    .into(),
            );
        }
        Ok(())
    }

    /// The sizes, counts and times, each within what the transport accepts.
    fn validate_limits(&self) -> Result<(), String> {
        if let Some(m) = self.mtu_upper_bound
            && !(MTU_MIN..=MTU_MAX).contains(&m)
        {
            return Err(format!(
                "[quic] mtu_upper_bound = {m}: must be {MTU_MIN}..={MTU_MAX}"
            ));
        }
        for (name, v) in [
            ("stream_receive_window", self.stream_receive_window),
            ("receive_window", self.receive_window),
            ("send_window", self.send_window),
        ] {
            if let Some(v) = v
                && !(64 * 1024..=WINDOW_MAX).contains(&v)
            {
                return Err(format!(
                    "[quic] {name} = {v}: must be 65536..={WINDOW_MAX} bytes"
                ));
            }
        }
        if let Some(n) = self.max_streams
            && n > smbq_transport::MAX_DATA_STREAMS
        {
            return Err(format!(
                "[quic] max_streams = {n}: must be 0..={}",
                smbq_transport::MAX_DATA_STREAMS
            ));
        }
        if self.idle_timeout_secs == Some(0) {
            return Err("[quic] idle_timeout_secs must be at least 1".into());
        }
        if let (Some(idle), Some(ka)) = (self.idle_timeout_secs, self.keep_alive_secs)
            && ka != 0
            && ka >= idle
        {
            return Err(format!(
                "[quic] keep_alive_secs = {ka} must be below idle_timeout_secs = {idle}"
            ));
        }
        Ok(())
    }

    /// `lb_server_id` and `lb_config_rotation`, as the transport takes them.
    pub fn quic_lb(&self) -> Result<Option<smbq_transport::quic_lb::QuicLb>, String> {
        let Some(id) = &self.lb_server_id else {
            if self.lb_config_rotation.is_some() {
                return Err("[quic] lb_config_rotation needs lb_server_id".into());
            }
            return Ok(None);
        };
        let bytes = hex::decode(id).map_err(|e| format!("[quic] lb_server_id {id:?}: {e}"))?;
        let cr = self.lb_config_rotation.unwrap_or(0);
        smbq_transport::quic_lb::QuicLb::new(cr, bytes)
            .map(Some)
            .map_err(|e| format!("[quic] {e}"))
    }

    /// The congestion controller and QUIC stack named, and what the stack cannot do.
    fn validate_stack(&self) -> Result<(), String> {
        if self.quic_lb()?.is_some()
            && self
                .stack
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("msquic"))
        {
            return Err("[quic] lb_server_id is not supported with stack = \"msquic\"".into());
        }
        if let Some(c) = &self.congestion {
            c.parse::<smbq_transport::Congestion>()
                .map_err(|e| format!("[quic] congestion: {e}"))?;
        }
        if let Some(name) = &self.stack {
            let stack = name
                .parse::<smbq_transport::QuicStack>()
                .map_err(|e| format!("[quic] stack: {e}"))?;
            if !stack.available() {
                return Err(format!(
                    "[quic] stack = \"{stack}\": this smbq was built without it (cargo build --release -p smbq --features {stack}; needs cmake and libnuma-dev)"
                ));
            }
            if stack == smbq_transport::QuicStack::MsQuic {
                if self.client_auth == ClientAuthMode::Required {
                    return Err("[quic] client_auth = \"required\" is not supported with stack = \"msquic\"".into());
                }
                if self
                    .congestion
                    .as_deref()
                    .is_some_and(|c| c.eq_ignore_ascii_case("newreno"))
                {
                    return Err("[quic] congestion = \"newreno\" is not available with stack = \"msquic\" (cubic, bbr)".into());
                }
            }
        }
        Ok(())
    }
}

fn parse_fps(key: &str, list: &[String]) -> Result<Vec<[u8; 32]>, String> {
    list.iter()
        .map(|s| cert::parse_fingerprint(s).map_err(|e| format!("[quic] {key}: {e}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FileConfig;

    const FP: &str = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn parses_the_quic_table() {
        let c: FileConfig = toml::from_str(&format!(
            r#"
            [quic]
            port = 8443
            certs = [
              {{ cert = "a.pem", key = "a.key", names = ["files.example.com"] }},
              {{ cert = "/etc/b.pem", key = "/etc/b.key" }},
            ]
            client_auth = "required"
            allow_fingerprints = ["{FP}"]
            deny_fingerprints = []
            trusted_ca_files = ["ca.pem"]
            transport_security = false
            stream_receive_window = 8388608
            receive_window = 16777216
            send_window = 16777216
            idle_timeout_secs = 120
            keep_alive_secs = 15
            mtu_upper_bound = 6500
            max_connections_per_ip = 8
            congestion = "Cubic"
            keylog = "keys.log"
            "#
        ))
        .unwrap();
        let q = &c.quic;
        assert_eq!(c.quic_port(), Some(8443));
        assert_eq!(q.client_auth, ClientAuthMode::Required);
        assert_eq!(q.transport_security, Some(false));
        assert_eq!(q.mtu_upper_bound, Some(6500));
        assert_eq!(q.idle_timeout_secs, Some(120));
        assert_eq!(q.allow_fingerprints().unwrap().len(), 1);
        q.validate().unwrap();
        assert_eq!(q.certs[1].names, Vec::<String>::new());
        let s = crate::quic_setup::settings(q);
        assert_eq!(s.congestion, smbq_transport::Congestion::Cubic);
        assert_eq!(s.mtu_upper_bound, 6500);
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("smbq.toml");
        std::fs::write(
            &p,
            "quic_port = 9443\n[quic]\ncerts = [{ cert = \"c.pem\", key = \"/abs/k.pem\" }]\nkeylog = \"k.log\"\ntrusted_ca_files = [\"ca.pem\"]\n",
        )
        .unwrap();
        let c = FileConfig::load(&p).unwrap();
        assert_eq!(c.quic_port(), Some(9443));
        assert_eq!(c.quic.certs[0].cert, dir.path().join("c.pem"));
        assert_eq!(c.quic.certs[0].key, PathBuf::from("/abs/k.pem"));
        assert_eq!(c.quic.keylog, Some(dir.path().join("k.log")));
        assert_eq!(c.quic.trusted_ca_files, vec![dir.path().join("ca.pem")]);
    }

    #[test]
    fn rejects_bad_values() {
        let bad = [
            "[quic]\nmtu_upper_bound = 8953",
            "[quic]\nmtu_upper_bound = 1000",
            "[quic]\nstream_receive_window = 1",
            "[quic]\nidle_timeout_secs = 0",
            "[quic]\nidle_timeout_secs = 10\nkeep_alive_secs = 10",
            "[quic]\nmax_connections_per_ip = 0",
            "[quic]\ncongestion = \"vegas\"",
            "[quic]\nclient_auth = \"required\"",
            "[quic]\nallow_fingerprints = [\"sha256:1234\"]",
            "[quic]\ncerts = [{ cert = \"a\", key = \"b\", names = [\"\"] }]",
            "[quic]\nlb_server_id = \"zz\"",
            "[quic]\nlb_server_id = \"\"",
            "[quic]\nlb_server_id = \"000102030405060708090a0b\"",
            "[quic]\nlb_server_id = \"01\"\nlb_config_rotation = 7",
            "[quic]\nlb_config_rotation = 1",
            "[quic]\nlb_server_id = \"01\"\nstack = \"msquic\"",
        ];
        for text in bad {
            let c: FileConfig = toml::from_str(text).unwrap();
            assert!(c.quic.validate().is_err(), "accepted: {text}");
        }
        for text in [
            "[quic]\nclient_auth = \"optional\"",
            "[quic]\nbogus = 1",
            "[quic]\ncerts = [{ cert = \"a\" }]",
        ] {
            assert!(
                toml::from_str::<FileConfig>(text).is_err(),
                "parsed: {text}"
            );
        }
        let ok: FileConfig =
            toml::from_str("[quic]\nkeep_alive_secs = 0\nidle_timeout_secs = 5").unwrap();
        ok.quic.validate().unwrap();
        let lb: FileConfig =
            toml::from_str("[quic]\nlb_server_id = \"0a01\"\nlb_config_rotation = 6").unwrap();
        lb.quic.validate().unwrap();
        let want = smbq_transport::quic_lb::QuicLb::new(6, vec![0x0a, 0x01]).unwrap();
        assert_eq!(crate::quic_setup::settings(&lb.quic).quic_lb, Some(want));
    }

    #[test]
    fn cert_flags_replace_the_first_configured_cert() {
        let state = Path::new("/state");
        let none = QuicConfig::default();
        let gen_src = none.cert_sources(None, state);
        assert_eq!(gen_src.len(), 1);
        assert!(gen_src[0].generated);
        assert_eq!(gen_src[0].paths, CertPaths::in_state_dir(state));

        let flag = Some((PathBuf::from("/f/c.pem"), PathBuf::from("/f/k.pem")));
        let from_flag = none.cert_sources(flag.clone(), state);
        assert_eq!(from_flag.len(), 1);
        assert!(!from_flag[0].generated);
        assert_eq!(from_flag[0].paths.cert, PathBuf::from("/f/c.pem"));

        let c: FileConfig = toml::from_str(
            "[quic]\ncerts = [{ cert = \"/a\", key = \"/ak\", names = [\"a.example\"] }, { cert = \"/b\", key = \"/bk\" }]",
        )
        .unwrap();
        let s = c.quic.cert_sources(flag, state);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].paths.key, PathBuf::from("/f/k.pem"));
        assert_eq!(s[0].names, vec!["a.example".to_string()]);
        assert_eq!(s[1].paths.cert, PathBuf::from("/b"));
    }

    #[test]
    fn keylog_config_beats_the_environment() {
        let mut q = QuicConfig::default();
        assert_eq!(q.keylog_path(None), None);
        assert_eq!(q.keylog_path(Some("".into())), None);
        assert_eq!(
            q.keylog_path(Some("/tmp/env.log".into())),
            Some(PathBuf::from("/tmp/env.log"))
        );
        q.keylog = Some("/tmp/cfg.log".into());
        assert_eq!(
            q.keylog_path(Some("/tmp/env.log".into())),
            Some(PathBuf::from("/tmp/cfg.log"))
        );
    }
}
