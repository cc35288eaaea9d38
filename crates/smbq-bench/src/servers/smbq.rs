//! `smbq serve` as a child process: the real binary, as users run it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use smbq_transport::QuicSettings;

use super::log_tail;
use crate::net::Net;
use crate::sys;

/// How long `smbq serve` may take to print its ready line (it may generate a certificate).
const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct SmbqServer {
    child: Child,
    pub tcp: Option<SocketAddr>,
    pub quic: Option<SocketAddr>,
    /// SHA-256 of the server certificate (what `smbq cert show` prints).
    pub pin: [u8; 32],
    pub cert_chain: Vec<CertificateDer<'static>>,
    key_path: PathBuf,
    pub encrypt: bool,
    /// The QUIC settings it runs (congestion controller, MTU bound); the bench's clients of
    /// it use the same.
    pub quic_settings: QuicSettings,
    /// Where its Prometheus endpoint listens (`--metrics-listen`), when asked for.
    pub metrics: Option<SocketAddr>,
    log: PathBuf,
}

pub struct SmbqOptions<'a> {
    pub bin: &'a Path,
    pub share: &'a Path,
    /// Directory for the state dir and the log (made if missing).
    pub work: &'a Path,
    pub encrypt: bool,
    pub tcp_port: u16,
    pub quic_port: u16,
    pub user: &'a str,
    pub password: &'a str,
    /// QUIC congestion controller and MTU-discovery bound, given to the server as
    /// `[quic] congestion` and `mtu_upper_bound`.
    pub quic_settings: QuicSettings,
    /// Serve Prometheus metrics on this port of the server's address (0: none).
    pub metrics_port: u16,
    /// More of the configuration file (TOML tables after `[quic]`, such as a share).
    pub extra_config: &'a str,
}

fn parse_ready(line: &str, part: &str) -> Option<SocketAddr> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(part))
        .and_then(|a| a.parse().ok())
}

impl SmbqServer {
    pub fn start(net: &Net, o: &SmbqOptions<'_>) -> Result<Self, String> {
        std::fs::create_dir_all(o.work).map_err(|e| format!("{}: {e}", o.work.display()))?;
        let state = o.work.join("state");
        let log = o.work.join("server.log");
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let config = o.work.join("smbq.toml");
        let metrics =
            (o.metrics_port != 0).then(|| SocketAddr::new(net.server_ip(), o.metrics_port));
        std::fs::write(
            &config,
            format!(
                "[quic]\ncongestion = \"{}\"\nmtu_upper_bound = {}\nstack = \"{}\"\n{}",
                o.quic_settings.congestion.name(),
                o.quic_settings.mtu_upper_bound,
                o.quic_settings.stack,
                o.extra_config
            ),
        )
        .map_err(|e| format!("{}: {e}", config.display()))?;
        let mut cmd = net.command_b(&o.bin.to_string_lossy());
        cmd.arg("serve")
            .arg(o.share)
            .args(["--listen", &net.server_ip().to_string()])
            .args(["--tcp-port", &o.tcp_port.to_string()])
            .args(["--quic-port", &o.quic_port.to_string()])
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .args(["--encrypt", if o.encrypt { "required" } else { "off" }])
            .args(metrics.map(|a| format!("--metrics-listen={a}")))
            .env("SMBQ_USER", o.user)
            .env("SMBQ_PASSWORD", o.password)
            .env(
                "SMBQ_LOG",
                std::env::var("SMBQ_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {}: {e}", o.bin.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, rx) = mpsc::channel();
        // The reader keeps draining stdout after the ready line so the server never blocks.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.starts_with("smbq: listening")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(line);
                }
            }
        });
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                sys::stop_child(&mut child, Duration::from_secs(2), false);
                return Err(format!(
                    "smbq serve printed no ready line:\n{}",
                    log_tail(&log, 20)
                ));
            }
        };
        let cert_path = state.join("cert.pem");
        let key_path = state.join("key.pem");
        // Without QUIC the server makes no certificate.
        let cert = if o.quic_port == 0 {
            Ok((Vec::new(), [0; 32]))
        } else {
            CertificateDer::pem_file_iter(&cert_path)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("{}: {e}", cert_path.display()))
                .and_then(|chain| {
                    let leaf = chain.first().ok_or("empty certificate file")?;
                    let pin = smbq_transport::fingerprint(leaf);
                    Ok((chain, pin))
                })
        };
        let (cert_chain, pin) = match cert {
            Ok(c) => c,
            Err(e) => {
                sys::stop_child(&mut child, Duration::from_secs(5), false);
                return Err(e);
            }
        };
        Ok(Self {
            tcp: parse_ready(&line, "tcp="),
            quic: parse_ready(&line, "quic="),
            pin,
            cert_chain,
            key_path,
            encrypt: o.encrypt,
            quic_settings: o.quic_settings.clone(),
            metrics,
            child,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The certificate's key, for the in-process raw QUIC server (same identity and cipher).
    pub fn key(&self) -> Result<PrivateKeyDer<'static>, String> {
        PrivateKeyDer::from_pem_file(&self.key_path).map_err(|e| e.to_string())
    }

    /// The Prometheus text of its `/metrics` (started with a metrics port), fetched from the
    /// server's side of the network.
    pub fn scrape_metrics(&self, net: &Net) -> Result<String, String> {
        let addr = self.metrics.ok_or("the server has no metrics endpoint")?;
        let fetch = async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("metrics {addr}: {e}"))?;
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: smbq\r\nConnection: close\r\n\r\n")
                .await
                .map_err(|e| format!("metrics {addr}: {e}"))?;
            let mut body = Vec::new();
            s.read_to_end(&mut body)
                .await
                .map_err(|e| format!("metrics {addr}: {e}"))?;
            let text = String::from_utf8_lossy(&body).into_owned();
            match text.split_once("\r\n\r\n") {
                Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
                _ => Err(format!(
                    "metrics {addr}: {}",
                    text.lines().next().unwrap_or("no answer")
                )),
            }
        };
        let limited = async move {
            tokio::time::timeout(Duration::from_secs(10), fetch)
                .await
                .map_err(|_| format!("metrics {addr}: no answer in 10 s"))?
        };
        net.server_rt
            .block_on(net.spawn_server(limited))
            .map_err(|e| format!("metrics task: {e}"))?
    }

    pub fn cpu(&self) -> f64 {
        sys::tree_cpu(self.pid())
    }

    pub fn rss_kib(&self) -> (u64, u64) {
        sys::tree_rss_kib(self.pid())
    }

    /// SIGTERM (graceful) and wait; reports a panic or a bad exit as an error.
    pub fn stop(mut self) -> Result<(), String> {
        sys::stop_child(&mut self.child, Duration::from_secs(10), false);
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if log.contains("panicked") {
            return Err(format!("smbq serve panicked:\n{}", log_tail(&self.log, 30)));
        }
        Ok(())
    }
}

impl Drop for SmbqServer {
    /// A server left running by an error path is stopped too (after `stop` this is a no-op).
    fn drop(&mut self) {
        sys::stop_child(&mut self.child, Duration::from_secs(5), false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_line_gives_both_addresses() {
        let l = "smbq: listening tcp=127.0.0.1:4450 quic=127.0.0.1:4451";
        assert_eq!(
            parse_ready(l, "tcp="),
            Some("127.0.0.1:4450".parse().unwrap())
        );
        assert_eq!(
            parse_ready(l, "quic="),
            Some("127.0.0.1:4451".parse().unwrap())
        );
        assert_eq!(
            parse_ready("smbq: listening tcp=10.77.0.2:1", "quic="),
            None
        );
    }
}
