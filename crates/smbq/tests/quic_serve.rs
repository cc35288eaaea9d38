//! The real binary serving SMB over QUIC: ready line, certificate fingerprint printed, shown,
//! exported and actually served (checked with a quinn client), reload on SIGHUP and on file
//! change, SNI selection from `[quic] certs`, the key log, client-certificate access control,
//! and a clean exit on SIGTERM/SIGINT.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};

const BIN: &str = env!("CARGO_BIN_EXE_smbq");

fn sha256_hex(der: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(der)))
}

fn free_udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().port()
}

fn smbq(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "smbq {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

struct Server {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    /// Every stderr line read so far, for failure messages.
    seen: Vec<String>,
}

fn lines_of(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Server {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .args(args)
            .env("SMBQ_PASSWORD", "test-password")
            .env_remove("SSLKEYLOGFILE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let out = lines_of(child.stdout.take().unwrap());
        let err = lines_of(child.stderr.take().unwrap());
        Server {
            child,
            out,
            err,
            seen: Vec::new(),
        }
    }

    fn ready_line(&mut self) -> String {
        match self.out.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => l,
            Err(e) => {
                let _ = self.child.kill();
                let rest: Vec<String> = self.err.try_iter().collect();
                panic!("no ready line ({e}); stderr: {rest:#?}");
            }
        }
    }

    /// The next stderr line satisfying `pred`, within `within`.
    fn wait_err(&mut self, within: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.err.recv_timeout(left) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if pred(&l) {
                        return l;
                    }
                }
                Err(_) => panic!("expected stderr line not seen; got: {:#?}", self.seen),
            }
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    }

    fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "server did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn quic_addr(ready: &str) -> SocketAddr {
    let q = ready
        .split(' ')
        .find_map(|p| p.strip_prefix("quic="))
        .unwrap_or_else(|| panic!("no quic= in {ready:?}"));
    q.parse().unwrap()
}

/// Accepts any server certificate (the test compares fingerprints instead) but still checks
/// the handshake signature, so the server must hold the certificate's key.
#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Handshakes with ALPN `smb` and the given SNI; returns the served leaf's fingerprint.
fn served_fingerprint(
    addr: SocketAddr,
    sni: &str,
    client_cert: Option<&Path>,
) -> Result<String, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider)));
        let mut tls = match client_cert {
            None => builder.with_no_client_auth(),
            Some(dir) => {
                let chain = vec![CertificateDer::from_pem_file(dir.join("cert.pem")).unwrap()];
                let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
        };
        tls.alpn_protocols = vec![b"smb".to_vec()];
        let qtls = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
        let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(qtls)));
        let conn = tokio::time::timeout(
            Duration::from_secs(10),
            ep.connect(addr, sni).map_err(|e| e.to_string())?,
        )
        .await
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e| e.to_string())?;
        // With TLS 1.3 the server judges the client certificate after the client's handshake
        // completes, so a refusal arrives as a close shortly after; an accepted client is
        // left alone (the server waits seconds for its first stream).
        if client_cert.is_some()
            && let Ok(reason) =
                tokio::time::timeout(Duration::from_millis(700), conn.closed()).await
        {
            return Err(reason.to_string());
        }
        let certs = conn
            .peer_identity()
            .unwrap()
            .downcast::<Vec<CertificateDer<'static>>>()
            .unwrap();
        conn.close(0u32.into(), b"test done");
        let _ = tokio::time::timeout(Duration::from_secs(2), ep.wait_idle()).await;
        Ok(sha256_hex(&certs[0]))
    })
}

fn fp_of_line(line: &str) -> String {
    line.rsplit(' ').next().unwrap().to_string()
}

/// Replaces a file the way deploy tools do: a new file renamed over the old one.
fn replace_file(from: &Path, to: &Path) {
    let tmp = to.with_extension("new");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

#[test]
fn serves_quic_with_generated_cert_reloads_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let share = dir.path().join("share");
    let st = state.to_str().unwrap();
    let port = free_udp_port();
    let tcp_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut srv = Server::start(
        &[
            share.to_str().unwrap(),
            "--tcp-port",
            &tcp_port.to_string(),
            "--quic-port",
            &port.to_string(),
            "--listen",
            "127.0.0.1",
            "--state-dir",
            st,
        ],
        &[],
    );
    let ready = srv.ready_line();
    assert_eq!(
        ready,
        format!("smbq: listening tcp=127.0.0.1:{tcp_port} quic=127.0.0.1:{port}")
    );
    let addr = quic_addr(&ready);

    let line = srv.wait_err(Duration::from_secs(5), |l| {
        l.starts_with("smbq: certificate sha256:")
    });
    let fp0 = fp_of_line(&line);
    assert_eq!(fp0.len(), 7 + 64);
    assert_eq!(smbq(&["cert", "show", "--state-dir", st]), fp0);

    // Exports carry the same certificate, and no key.
    let pem = dir.path().join("server.pem");
    let der = dir.path().join("server.der");
    smbq(&[
        "cert",
        "export",
        "--pem",
        pem.to_str().unwrap(),
        "--der",
        der.to_str().unwrap(),
        "--state-dir",
        st,
    ]);
    let der_bytes = std::fs::read(&der).unwrap();
    assert_eq!(sha256_hex(&der_bytes), fp0);
    let pem_text = std::fs::read(&pem).unwrap();
    assert_eq!(
        CertificateDer::from_pem_slice(&pem_text).unwrap().as_ref(),
        der_bytes.as_slice()
    );
    assert!(PrivateKeyDer::from_pem_slice(&pem_text).is_err());

    assert_eq!(served_fingerprint(addr, "localhost", None).unwrap(), fp0);

    // SIGHUP after the files were replaced serves the new certificate.
    let other = dir.path().join("other");
    let fp1 = smbq(&["cert", "create", "--state-dir", other.to_str().unwrap()]);
    assert_ne!(fp1, fp0);
    replace_file(&other.join("key.pem"), &state.join("key.pem"));
    replace_file(&other.join("cert.pem"), &state.join("cert.pem"));
    srv.signal("-HUP");
    srv.wait_err(Duration::from_secs(10), |l| {
        l == format!("smbq: certificate reloaded {fp1}")
    });
    assert_eq!(served_fingerprint(addr, "localhost", None).unwrap(), fp1);

    // A broken file is reported and the current certificate stays.
    std::fs::write(state.join("cert.pem"), "not a certificate\n").unwrap();
    srv.wait_err(Duration::from_secs(10), |l| {
        l.starts_with("smbq: certificate reload failed")
    });
    assert_eq!(served_fingerprint(addr, "localhost", None).unwrap(), fp1);

    // Without a signal, the 2 s poll notices a regenerated certificate.
    let fp2 = smbq(&["cert", "create", "--force", "--state-dir", st]);
    srv.wait_err(Duration::from_secs(10), |l| {
        l == format!("smbq: certificate reloaded {fp2}")
    });
    assert_eq!(served_fingerprint(addr, "localhost", None).unwrap(), fp2);
    assert_eq!(smbq(&["cert", "show", "--state-dir", st]), fp2);

    srv.signal("-TERM");
    let status = srv.wait_exit(Duration::from_secs(15));
    assert_eq!(status.code(), Some(0));
}

#[test]
fn config_certs_by_sni_with_key_log_and_client_auth() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| -> PathBuf { dir.path().join(n) };
    let fp_a = smbq(&[
        "cert",
        "create",
        "--state-dir",
        d("a").to_str().unwrap(),
        "--name",
        "a.test",
    ]);
    let fp_b = smbq(&[
        "cert",
        "create",
        "--state-dir",
        d("b").to_str().unwrap(),
        "--name",
        "b.test",
    ]);
    // A client identity: any key pair with a certificate works, the policy pins it.
    let fp_client = smbq(&[
        "cert",
        "create",
        "--state-dir",
        d("client").to_str().unwrap(),
    ]);
    let fp_stranger = smbq(&[
        "cert",
        "create",
        "--state-dir",
        d("stranger").to_str().unwrap(),
    ]);
    assert_ne!(fp_client, fp_stranger);
    let port = free_udp_port();
    let cfg = d("smbq.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
listen = "127.0.0.1"
tcp_port = 0
state_dir = "{state}"
[quic]
port = {port}
certs = [
  {{ cert = "a/cert.pem", key = "a/key.pem", names = ["a.test"] }},
  {{ cert = "b/cert.pem", key = "b/key.pem", names = ["b.test"] }},
]
client_auth = "required"
allow_fingerprints = ["{fp_client}"]
mtu_upper_bound = 1400
idle_timeout_secs = 30
keep_alive_secs = 5
"#,
            state = d("state").display()
        ),
    )
    .unwrap();
    let keys = d("keys.log");
    let mut srv = Server::start(
        &[
            d("share").to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[("SSLKEYLOGFILE", keys.to_str().unwrap())],
    );
    let ready = srv.ready_line();
    assert_eq!(ready, format!("smbq: listening quic=127.0.0.1:{port}"));
    let addr = quic_addr(&ready);
    srv.wait_err(Duration::from_secs(5), |l| {
        l.starts_with("smbq: WARNING: writing TLS secrets to")
    });
    let first = srv.wait_err(Duration::from_secs(5), |l| {
        l.starts_with("smbq: certificate ")
    });
    let second = srv.wait_err(Duration::from_secs(5), |l| {
        l.starts_with("smbq: certificate ")
    });
    assert_eq!(fp_of_line(&first), fp_a);
    assert_eq!(fp_of_line(&second), fp_b);

    let client = Some(d("client"));
    let client = client.as_deref();
    assert_eq!(served_fingerprint(addr, "a.test", client).unwrap(), fp_a);
    assert_eq!(served_fingerprint(addr, "b.test", client).unwrap(), fp_b);
    // An unknown name gets the first (default) certificate.
    assert_eq!(served_fingerprint(addr, "c.test", client).unwrap(), fp_a);
    // Clients without an allowed certificate are refused.
    let refused = served_fingerprint(addr, "a.test", Some(&d("stranger"))).unwrap_err();
    // TLS alert access_denied (49), as Windows' client access control sends (MS-SMB2 3.3.5.1).
    assert!(refused.contains("error 49"), "{refused}");

    // The key log holds NSS lines for the TLS 1.3 secrets and is private.
    let log = std::fs::read_to_string(&keys).unwrap();
    for label in [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET ",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET ",
        "CLIENT_TRAFFIC_SECRET_0 ",
        "SERVER_TRAFFIC_SECRET_0 ",
    ] {
        assert!(log.lines().any(|l| l.starts_with(label)), "{label} missing");
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&keys).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // `cert show` reads the same configuration.
    assert_eq!(
        smbq(&["cert", "show", "--config", cfg.to_str().unwrap()]),
        fp_a
    );
    assert_eq!(
        smbq(&["cert", "show", "--all", "--config", cfg.to_str().unwrap()]),
        format!("{fp_a} a.test\n{fp_b} b.test")
    );

    srv.signal("-INT");
    assert_eq!(srv.wait_exit(Duration::from_secs(15)).code(), Some(0));
}

#[test]
fn refuses_to_start_without_a_listener_or_on_a_busy_quic_port() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("state");
    let share = dir.path().join("share");
    let out = Command::new(BIN)
        .args([
            "serve",
            share.to_str().unwrap(),
            "--tcp-port",
            "0",
            "--quic-port",
            "0",
        ])
        .arg("--state-dir")
        .arg(&st)
        .env("SMBQ_PASSWORD", "x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to listen on"));

    let busy = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port().to_string();
    let out = Command::new(BIN)
        .args([
            "serve",
            share.to_str().unwrap(),
            "--tcp-port",
            "0",
            "--quic-port",
            &port,
        ])
        .args(["--listen", "127.0.0.1"])
        .arg("--state-dir")
        .arg(&st)
        .env("SMBQ_PASSWORD", "x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("listening on quic"), "{err}");
    assert!(out.stdout.is_empty(), "no ready line on failure");
}
