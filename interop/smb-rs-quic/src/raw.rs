//! Raw quinn probes: what a hostile or misconfigured peer sends, and what the server did about it.
//!
//! Output is one `key=value` per line on stdout; `outcome=` says what happened to the probe:
//! `response` (a frame came back), `connection-closed` (with `close_kind`/`close_code`/
//! `close_reason`), `stream-reset`/`stream-stopped` (with `code`), `stream-finished`,
//! `handshake-failed`, `timeout`. The exit status is 0 whenever the probe ran, whatever the server
//! did; non-zero only for local errors (bad files, bad flags).

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use quinn::{ConnectionError, ReadError, ReadExactError, RecvStream, SendStream, WriteError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::insecure::AcceptAnyServerCert;
use crate::negotiate;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Action {
    /// Handshake only, then watch whether the server closes the connection.
    Handshake,
    /// One framed SMB2 NEGOTIATE (3.1.1) on the first stream; print the dialect and contexts.
    Negotiate,
    /// A frame header announcing 0 bytes.
    ZeroFrame,
    /// A frame header announcing 0xFFFFFF bytes (far over any pre-auth limit), then a little data.
    OversizedFrame,
    /// Bytes that are not an SMB frame at all.
    Garbage,
    /// NEGOTIATE on the first stream, then a second bidirectional stream with another NEGOTIATE.
    SecondStream,
}

#[derive(clap::Args)]
pub struct RawArgs {
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    #[arg(long)]
    port: u16,
    /// TLS server name (SNI).
    #[arg(long, default_value = "localhost")]
    server_name: String,
    /// Root certificate (DER or PEM) the server's certificate must chain to.
    #[arg(long, required_unless_present = "insecure")]
    ca: Option<PathBuf>,
    /// Accept any server certificate (handshake signatures are still verified).
    #[arg(long)]
    insecure: bool,
    /// Client certificate chain (PEM), offered when the server asks for one.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// Client private key (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    #[arg(long, default_value = "smb")]
    alpn: String,
    #[arg(long, value_enum)]
    action: Action,
    /// Add SMB2_TRANSPORT_CAPABILITIES(ACCEPT_TRANSPORT_LEVEL_SECURITY) to the NEGOTIATE.
    #[arg(long)]
    transport_caps: bool,
    /// Seconds to wait for the handshake and for each answer.
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    /// Milliseconds to keep watching the connection after the probe, to see whether it closes.
    #[arg(long, default_value_t = 500)]
    linger_ms: u64,
}

fn out(key: &str, value: impl std::fmt::Display) {
    println!("{key}={value}");
}

fn read_file(p: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn certs(p: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read_file(p)?;
    if bytes.starts_with(b"-----BEGIN") {
        CertificateDer::pem_slice_iter(&bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("{}: {e}", p.display()))
    } else {
        Ok(vec![CertificateDer::from(bytes)])
    }
}

fn client_config(a: &RawArgs) -> Result<quinn::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("tls: {e}"))?;
    let builder = if a.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(provider)))
    } else {
        let ca = a.ca.as_ref().ok_or("--ca or --insecure is required")?;
        let mut roots = rustls::RootCertStore::empty();
        for c in certs(ca)? {
            roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
        }
        builder.with_root_certificates(roots)
    };
    let mut tls = match (&a.cert, &a.key) {
        (Some(cert), Some(key)) => {
            let chain = certs(cert)?;
            let key = PrivateKeyDer::from_pem_slice(&read_file(key)?)
                .map_err(|e| format!("{}: {e}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("client certificate: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![a.alpn.as_bytes().to_vec()];
    if std::env::var_os("SSLKEYLOGFILE").is_some() {
        tls.key_log = Arc::new(rustls::KeyLogFile::new());
    }
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(tls))
        .map_err(|e| format!("quic tls: {e}"))?;
    Ok(quinn::ClientConfig::new(Arc::new(quic)))
}

fn report_connection_error(e: &ConnectionError) {
    report_connection_error_as("close_", e)
}

fn report_connection_error_as(prefix: &str, e: &ConnectionError) {
    let out = |k: &str, v: &dyn std::fmt::Display| out(&format!("{prefix}{k}"), v);
    match e {
        ConnectionError::ApplicationClosed(c) => {
            out("kind", &"application");
            out("code", &format!("{:#x}", u64::from(c.error_code)));
            out("reason", &String::from_utf8_lossy(&c.reason));
        }
        ConnectionError::ConnectionClosed(c) => {
            out("kind", &"transport");
            out("code", &format!("{:#x}", u64::from(c.error_code)));
            out("reason", &String::from_utf8_lossy(&c.reason));
        }
        ConnectionError::TimedOut => out("kind", &"idle-timeout"),
        ConnectionError::Reset => out("kind", &"stateless-reset"),
        ConnectionError::LocallyClosed => out("kind", &"local"),
        other => {
            out("kind", &"other");
            out("reason", other);
        }
    }
}

/// What came back on a stream.
enum Seen {
    Frame(Vec<u8>),
    Finished,
    Reset(u64),
    Lost(ConnectionError),
    Timeout,
    Other(String),
}

fn read_error(e: ReadError) -> Seen {
    match e {
        ReadError::Reset(code) => Seen::Reset(code.into_inner()),
        ReadError::ConnectionLost(c) => Seen::Lost(c),
        other => Seen::Other(other.to_string()),
    }
}

fn exact_error(e: ReadExactError) -> Seen {
    match e {
        ReadExactError::FinishedEarly(_) => Seen::Finished,
        ReadExactError::ReadError(e) => read_error(e),
    }
}

/// One Direct-TCP-framed message (MS-SMB2 2.1), or whatever ended the stream instead.
async fn read_frame(recv: &mut RecvStream, limit: Duration) -> Seen {
    let work = async {
        let mut hdr = [0u8; 4];
        if let Err(e) = recv.read_exact(&mut hdr).await {
            return exact_error(e);
        }
        // The top byte is zero for SMB2; a peer announcing more than 24 bits is reported raw.
        let len = u32::from_be_bytes(hdr) as usize;
        if len > 0x00ff_ffff {
            return Seen::Other(format!("frame header {len:#x} over 24 bits"));
        }
        let mut body = vec![0u8; len];
        match recv.read_exact(&mut body).await {
            Ok(()) => Seen::Frame(body),
            Err(e) => exact_error(e),
        }
    };
    tokio::time::timeout(limit, work)
        .await
        .unwrap_or(Seen::Timeout)
}

/// Prints `{prefix}outcome=...` and its details; returns the frame if one came back.
fn report(prefix: &str, seen: Seen) -> Option<Vec<u8>> {
    let key = |k: &str| format!("{prefix}{k}");
    match seen {
        Seen::Frame(f) => {
            out(&key("outcome"), "response");
            out(&key("response_len"), f.len());
            return Some(f);
        }
        Seen::Finished => out(&key("outcome"), "stream-finished"),
        Seen::Reset(code) => {
            out(&key("outcome"), "stream-reset");
            out(&key("code"), code);
        }
        Seen::Lost(e) => {
            out(&key("outcome"), "connection-closed");
            report_connection_error(&e);
        }
        Seen::Timeout => out(&key("outcome"), "timeout"),
        Seen::Other(s) => {
            out(&key("outcome"), "error");
            out(&key("detail"), s);
        }
    }
    None
}

fn write_outcome(prefix: &str, e: WriteError) {
    match e {
        WriteError::Stopped(code) => {
            out(&format!("{prefix}outcome"), "stream-stopped");
            out(&format!("{prefix}code"), code.into_inner());
        }
        WriteError::ConnectionLost(c) => {
            out(&format!("{prefix}outcome"), "connection-closed");
            report_connection_error(&c);
        }
        other => {
            out(&format!("{prefix}outcome"), "error");
            out(&format!("{prefix}detail"), other);
        }
    }
}

fn print_negotiate(prefix: &str, frame: &[u8]) {
    out(&format!("{prefix}response_hex"), negotiate::hex(frame));
    match negotiate::parse_response(frame) {
        Ok(r) => {
            out(&format!("{prefix}status"), format!("{:#010x}", r.status));
            out(&format!("{prefix}dialect"), format!("{:#06x}", r.dialect));
            let kinds: Vec<String> = r
                .contexts
                .iter()
                .map(|(k, _)| format!("{k:#06x}"))
                .collect();
            out(&format!("{prefix}contexts"), kinds.join(","));
            let caps = r
                .contexts
                .iter()
                .find(|(k, _)| *k == negotiate::TRANSPORT_CAPABILITIES);
            match caps {
                Some((_, data)) => out(&format!("{prefix}transport_caps"), negotiate::hex(data)),
                None => out(&format!("{prefix}transport_caps"), "absent"),
            }
        }
        Err(e) => out(&format!("{prefix}parse_error"), e),
    }
}

fn negotiate_frame(transport_caps: bool) -> Vec<u8> {
    // Fixed values: the probe has no use for uniqueness, and the server must not care.
    negotiate::frame(&negotiate::request(transport_caps, [0x5a; 16], [0xa5; 32]))
}

/// Sends `bytes` on the stream and reports what came back; returns the reply frame, if any.
async fn send_and_watch(
    prefix: &str,
    send: &mut SendStream,
    recv: &mut RecvStream,
    bytes: &[u8],
    limit: Duration,
) -> Option<Vec<u8>> {
    if let Err(e) = send.write_all(bytes).await {
        write_outcome(prefix, e);
        return None;
    }
    report(prefix, read_frame(recv, limit).await)
}

async fn open_stream(
    conn: &quinn::Connection,
    limit: Duration,
) -> Result<(SendStream, RecvStream), ()> {
    match tokio::time::timeout(limit, conn.open_bi()).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => {
            out("outcome", "connection-closed");
            report_connection_error(&e);
            Err(())
        }
        Err(_) => {
            out("outcome", "timeout");
            out("detail", "open_bi blocked");
            Err(())
        }
    }
}

pub async fn run(a: &RawArgs) -> Result<(), String> {
    let limit = Duration::from_secs(a.timeout);
    let bind: SocketAddr = match a.host {
        IpAddr::V4(_) => "0.0.0.0:0",
        IpAddr::V6(_) => "[::]:0",
    }
    .parse()
    .map_err(|e| format!("bind address: {e}"))?;
    let mut endpoint = quinn::Endpoint::client(bind).map_err(|e| format!("udp socket: {e}"))?;
    endpoint.set_default_client_config(client_config(a)?);
    let connecting = endpoint
        .connect(SocketAddr::new(a.host, a.port), &a.server_name)
        .map_err(|e| format!("connect: {e}"))?;
    let conn = match tokio::time::timeout(limit, connecting).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            out("handshake", "failed");
            out("outcome", "handshake-failed");
            report_connection_error(&e);
            return Ok(());
        }
        Err(_) => {
            out("handshake", "timeout");
            out("outcome", "handshake-failed");
            out("close_kind", "handshake-timeout");
            return Ok(());
        }
    };
    out("handshake", "ok");

    // Streams are opened lazily on the wire: the server learns of one with its first bytes.
    // The probe hands back the streams it opened, so they stay open (no FIN from us) while the
    // connection is watched: whatever closes it is the server's doing.
    let probe = async {
        let mut held = Vec::new();
        match a.action {
            Action::Handshake => {}
            Action::Negotiate => {
                let Ok((mut s, mut r)) = open_stream(&conn, limit).await else {
                    return held;
                };
                let frame = negotiate_frame(a.transport_caps);
                if let Some(f) = send_and_watch("", &mut s, &mut r, &frame, limit).await {
                    print_negotiate("", &f);
                }
                held.push((s, r));
            }
            Action::ZeroFrame | Action::OversizedFrame | Action::Garbage => {
                let Ok((mut s, mut r)) = open_stream(&conn, limit).await else {
                    return held;
                };
                let bytes: Vec<u8> = match a.action {
                    Action::ZeroFrame => vec![0, 0, 0, 0],
                    Action::OversizedFrame => {
                        let mut b = vec![0x00, 0xff, 0xff, 0xff];
                        b.extend_from_slice(b"\xfeSMB");
                        b.extend_from_slice(&[0x41; 60]);
                        b
                    }
                    _ => b"\x81garbage that is not SMB at all\r\n".to_vec(),
                };
                send_and_watch("", &mut s, &mut r, &bytes, limit).await;
                held.push((s, r));
            }
            Action::SecondStream => {
                let Ok((mut s1, mut r1)) = open_stream(&conn, limit).await else {
                    return held;
                };
                let frame = negotiate_frame(a.transport_caps);
                if let Some(f) = send_and_watch("first_", &mut s1, &mut r1, &frame, limit).await {
                    print_negotiate("first_", &f);
                }
                held.push((s1, r1));
                // The stream limit shows at once as a blocked open; no need to wait long.
                let open_wait = limit.min(Duration::from_secs(3));
                match tokio::time::timeout(open_wait, conn.open_bi()).await {
                    Ok(Ok((mut s2, mut r2))) => {
                        send_and_watch("second_", &mut s2, &mut r2, &frame, limit).await;
                        held.push((s2, r2));
                    }
                    Ok(Err(e)) => {
                        out("second_outcome", "connection-closed");
                        report_connection_error(&e);
                    }
                    Err(_) => out("second_outcome", "blocked"),
                }
            }
        }
        held
    };
    let held = probe.await;

    match tokio::time::timeout(Duration::from_millis(a.linger_ms), conn.closed()).await {
        Ok(e) => {
            out("connection", "closed");
            report_connection_error_as("conn_close_", &e);
        }
        Err(_) => out("connection", "open"),
    }
    drop(held);
    conn.close(0u32.into(), b"probe done");
    let _ = tokio::time::timeout(Duration::from_millis(500), endpoint.wait_idle()).await;
    Ok(())
}
