//! `[kdc_proxy]`: a Kerberos KDC proxy (MS-KKDCP) over HTTPS on TCP, with the certificate SMB
//! over QUIC uses, so a Windows client on the internet reaches the KDC through the file
//! server alone (UDP 443 for QUIC and TCP 443 for this do not collide).
//!
//! Only realms listed in `realms` are forwarded, each to its own KDCs, so the proxy is not
//! an open relay. Hostile clients are bounded: connections at once, requests per client
//! address per minute, body size, and time for each exchange and each KDC answer.

mod forward;
mod http;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

pub use http::{bind, serve};

/// `[kdc_proxy]`: off unless `enabled`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KdcProxyConfig {
    #[serde(default)]
    pub enabled: bool,
    /// Address and TCP port of the HTTPS listener (default: the server's listen address,
    /// port 443).
    pub listen: Option<SocketAddr>,
    /// The realms served and their KDCs (host:port, tried in order), e.g.
    /// { "EXAMPLE.COM" = ["kdc1.example.com:88", "kdc2.example.com:88"] }.
    #[serde(default)]
    pub realms: BTreeMap<String, Vec<String>>,
    /// Largest request or KDC answer, bytes (default 128 KiB; tickets with large PACs fit).
    pub max_message: Option<usize>,
    /// Seconds for a whole exchange, KDC answer included (default 10).
    pub timeout_secs: Option<u64>,
    /// Requests one client address may make per minute (default 60).
    pub per_client_per_minute: Option<u32>,
    /// Connections served at once (default 64); more wait in the listen backlog.
    pub max_connections: Option<usize>,
}

/// The checked settings the listener runs with.
#[derive(Clone, Debug)]
pub struct Settings {
    pub listen: SocketAddr,
    pub realms: BTreeMap<String, Vec<String>>,
    pub max_message: usize,
    pub timeout: Duration,
    pub per_client_per_minute: u32,
    pub max_connections: usize,
}

impl KdcProxyConfig {
    /// `None` when off; an error for a section that cannot work.
    pub fn settings(&self, listen: std::net::IpAddr) -> Result<Option<Settings>, String> {
        if !self.enabled {
            return Ok(None);
        }
        if self.realms.is_empty() {
            return Err("[kdc_proxy] needs `realms`: the realms it serves and their KDCs".into());
        }
        if let Some((realm, _)) = self.realms.iter().find(|(_, kdcs)| kdcs.is_empty()) {
            return Err(format!("[kdc_proxy] realm {realm} lists no KDC"));
        }
        Ok(Some(Settings {
            listen: self.listen.unwrap_or(SocketAddr::new(listen, 443)),
            realms: self.realms.clone(),
            max_message: self.max_message.unwrap_or(128 * 1024).clamp(1024, 1 << 20),
            timeout: Duration::from_secs(self.timeout_secs.unwrap_or(10).clamp(1, 120)),
            per_client_per_minute: self.per_client_per_minute.unwrap_or(60).max(1),
            max_connections: self.max_connections.unwrap_or(64).clamp(1, 4096),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> KdcProxyConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn off_by_default_and_checked_when_on() {
        let ip = std::net::IpAddr::from([127, 0, 0, 1]);
        assert!(cfg("").settings(ip).unwrap().is_none());
        assert!(cfg("enabled = true").settings(ip).is_err(), "no realms");
        assert!(
            cfg("enabled = true\n[realms]\nR = []")
                .settings(ip)
                .is_err()
        );
        let s = cfg("enabled = true\n[realms]\nR = [\"kdc:88\"]")
            .settings(ip)
            .unwrap()
            .unwrap();
        assert_eq!(s.listen, SocketAddr::new(ip, 443));
        assert_eq!(s.max_message, 128 * 1024);
    }
}
