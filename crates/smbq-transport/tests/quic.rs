//! SMB over QUIC listener against a quinn client on loopback, with rcgen certificates.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ConnectionError, TransportErrorCode};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use smbq_transport::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use smbq_transport::rustls::{self, RootCertStore};
use smbq_transport::{
    ALPN, CLOSE_EXTRA_STREAM, CertEntry, CertStore, ClientAuth, ClientPolicy, Connection,
    QuicListener, QuicSettings, TlsSettings, TransportKind, fingerprint,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// TLS alert numbers (RFC 8446 6): QUIC carries them as CRYPTO_ERROR 0x100 + alert.
const ALERT_ACCESS_DENIED: u8 = 49;
const ALERT_UNKNOWN_CA: u8 = 48;
const ALERT_NO_APPLICATION_PROTOCOL: u8 = 120;
const ALERT_CERTIFICATE_REQUIRED: u8 = 116;

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("timed out")
}

struct Cert {
    der: CertificateDer<'static>,
    key: KeyPair,
}

impl Cert {
    fn key_der(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der()))
    }

    fn entry(&self, names: &[&str]) -> CertEntry {
        CertEntry {
            names: names.iter().map(|s| s.to_string()).collect(),
            chain: vec![self.der.clone()],
            key: self.key_der(),
        }
    }
}

fn self_signed(name: &str, eku: ExtendedKeyUsagePurpose) -> (Cert, rcgen::Certificate) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec![name.to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.extended_key_usages = vec![eku];
    let cert = p.self_signed(&key).unwrap();
    (
        Cert {
            der: cert.der().clone(),
            key,
        },
        cert,
    )
}

fn server_cert(name: &str) -> Cert {
    self_signed(name, ExtendedKeyUsagePurpose::ServerAuth).0
}

struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).unwrap();
        Self { cert, key }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    fn issue_client(&self, name: &str) -> Cert {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(vec![name.to_string()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, name);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Cert {
            der: cert.der().clone(),
            key,
        }
    }
}

fn test_settings() -> QuicSettings {
    QuicSettings {
        socket_buffer: 1 << 20,
        ..QuicSettings::default()
    }
}

fn listen(certs: Arc<CertStore>, client_auth: ClientAuth, settings: QuicSettings) -> QuicListener {
    listen_at("127.0.0.1:0", certs, client_auth, None, settings)
}

fn listen_at(
    addr: &str,
    certs: Arc<CertStore>,
    client_auth: ClientAuth,
    keylog: Option<Arc<dyn rustls::KeyLog>>,
    settings: QuicSettings,
) -> QuicListener {
    let tls = TlsSettings {
        certs,
        client_auth,
        keylog,
    };
    QuicListener::bind(addr.parse().unwrap(), tls, settings).unwrap()
}

struct ClientOpts<'a> {
    roots: Vec<CertificateDer<'static>>,
    client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
    alpn: Option<&'a [u8]>,
}

impl ClientOpts<'_> {
    fn trusting(roots: &[&Cert]) -> Self {
        Self {
            roots: roots.iter().map(|c| c.der.clone()).collect(),
            client: None,
            alpn: Some(ALPN),
        }
    }

    fn config(self) -> quinn::ClientConfig {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = RootCertStore::empty();
        for r in self.roots {
            roots.add(r).unwrap();
        }
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots);
        let mut cfg = match self.client {
            Some((chain, key)) => b.with_client_auth_cert(chain, key).unwrap(),
            None => b.with_no_client_auth(),
        };
        cfg.alpn_protocols = self.alpn.map(|a| vec![a.to_vec()]).unwrap_or_default();
        quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(cfg).unwrap()))
    }
}

fn client_endpoint(server: SocketAddr) -> quinn::Endpoint {
    let bind: SocketAddr = if server.is_ipv4() {
        "127.0.0.1:0".parse().unwrap()
    } else {
        "[::1]:0".parse().unwrap()
    };
    quinn::Endpoint::client(bind).unwrap()
}

async fn connect(
    server: SocketAddr,
    name: &str,
    opts: ClientOpts<'_>,
) -> Result<(quinn::Endpoint, quinn::Connection), ConnectionError> {
    let ep = client_endpoint(server);
    let connecting = ep.connect_with(opts.config(), server, name).unwrap();
    let conn = within(connecting).await?;
    Ok((ep, conn))
}

/// The CRYPTO_ERROR or transport code a refused client ends up with, whether the refusal
/// came before or after the client's side of the handshake completed.
async fn refusal(server: SocketAddr, name: &str, opts: ClientOpts<'_>) -> TransportErrorCode {
    let err = match connect(server, name, opts).await {
        Err(e) => e,
        Ok((_ep, conn)) => within(conn.closed()).await,
    };
    match err {
        ConnectionError::ConnectionClosed(c) => c.error_code,
        other => panic!("unexpected {other:?}"),
    }
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    assert!(len < 1 << 24);
    let mut v = len.to_be_bytes().to_vec();
    v.extend_from_slice(payload);
    v
}

/// Server side: echoes 4-byte-framed messages until EOF, then drops the connection.
async fn echo(conn: Connection) {
    let Connection {
        mut reader,
        mut writer,
        ..
    } = conn;
    loop {
        let mut hdr = [0u8; 4];
        if reader.read_exact(&mut hdr).await.is_err() {
            break;
        }
        let len = u32::from_be_bytes(hdr) as usize;
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body).await.unwrap();
        writer.write_all(&frame(&body)).await.unwrap();
    }
    writer.shutdown().await.unwrap();
}

async fn serve_echo(listener: &QuicListener) -> Connection {
    within(listener.accept()).await.unwrap().unwrap()
}

/// Client side: one framed message out, one back, on the given stream.
async fn roundtrip(send: &mut quinn::SendStream, recv: &mut quinn::RecvStream, payload: &[u8]) {
    send.write_all(&frame(payload)).await.unwrap();
    let mut hdr = [0u8; 4];
    within(recv.read_exact(&mut hdr)).await.unwrap();
    assert_eq!(u32::from_be_bytes(hdr) as usize, payload.len());
    let mut body = vec![0u8; payload.len()];
    within(recv.read_exact(&mut body)).await.unwrap();
    assert_eq!(body, payload);
}

async fn assert_echo_works(listener: &QuicListener, conn: &quinn::Connection) {
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    // The server sees the stream only once it carries data.
    let payload: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let client = async { roundtrip(&mut send, &mut recv, &payload).await };
    let server = async {
        let c = serve_echo(listener).await;
        tokio::spawn(echo(c));
    };
    tokio::join!(client, server);
    send.finish().unwrap();
}

fn leaf_of(conn: &quinn::Connection) -> CertificateDer<'static> {
    let chain = conn
        .peer_identity()
        .unwrap()
        .downcast::<Vec<CertificateDer<'static>>>()
        .unwrap();
    chain[0].clone()
}

#[tokio::test]
async fn handshake_and_echo_then_code_zero_when_smb_side_ends() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(store, ClientAuth::Off, test_settings());
    let addr = listener.local_addr().unwrap();
    let (ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    assert_eq!(
        conn.handshake_data()
            .unwrap()
            .downcast::<quinn::crypto::rustls::HandshakeData>()
            .unwrap()
            .protocol
            .as_deref(),
        Some(ALPN)
    );

    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&frame(b"hello smb")).await.unwrap();
    let server_conn = serve_echo(&listener).await;
    assert_eq!(server_conn.kind, TransportKind::Quic);
    assert_eq!(server_conn.peer, ep.local_addr().unwrap());
    assert_eq!(server_conn.local, addr);
    let server_task = tokio::spawn(echo(server_conn));
    let mut hdr = [0u8; 4];
    within(recv.read_exact(&mut hdr)).await.unwrap();
    assert_eq!(hdr, [0, 0, 0, 9]);
    let mut body = [0u8; 9];
    within(recv.read_exact(&mut body)).await.unwrap();
    assert_eq!(&body, b"hello smb");
    roundtrip(&mut send, &mut recv, &[7u8; 200_000]).await;

    // Client FIN -> the echo loop ends and drops both halves -> code 0 after the last bytes.
    send.finish().unwrap();
    within(server_task).await.unwrap();
    assert_eq!(
        within(recv.read_to_end(16)).await.unwrap(),
        Vec::<u8>::new()
    );
    match within(conn.closed()).await {
        ConnectionError::ApplicationClosed(c) => assert_eq!(c.error_code.into_inner(), 0),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn ipv6_loopback_echo() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen_at("[::1]:0", store, ClientAuth::Off, None, test_settings());
    let addr = listener.local_addr().unwrap();
    assert!(addr.is_ipv6());
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    assert_echo_works(&listener, &conn).await;
}

#[tokio::test]
async fn alpn_other_or_missing_is_refused() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(store, ClientAuth::Off, test_settings());
    let addr = listener.local_addr().unwrap();
    for alpn in [Some(&b"h3"[..]), None] {
        let opts = ClientOpts {
            alpn,
            ..ClientOpts::trusting(&[&cert])
        };
        assert_eq!(
            refusal(addr, "files.test", opts).await,
            TransportErrorCode::crypto(ALERT_NO_APPLICATION_PROTOCOL),
            "alpn {alpn:?}"
        );
    }
    assert_eq!(listener.stats().handshake_failures, 2);
}

#[tokio::test]
async fn second_stream_is_blocked_then_closes_the_connection() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(store, ClientAuth::Off, test_settings());
    let addr = listener.local_addr().unwrap();
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&frame(b"first")).await.unwrap();
    let Connection {
        mut reader,
        mut writer,
        ..
    } = serve_echo(&listener).await;

    // max_concurrent_bidi_streams = 1: no credit for a second stream while the first lives.
    assert!(
        tokio::time::timeout(Duration::from_millis(300), conn.open_bi())
            .await
            .is_err()
    );

    // End stream 0 in both directions while the server keeps its halves: quinn then grants
    // credit for another stream, which the server must refuse on its own.
    send.finish().unwrap();
    let mut got = Vec::new();
    within(reader.read_to_end(&mut got)).await.unwrap();
    assert_eq!(got, frame(b"first"));
    writer.write_all(b"bye").await.unwrap();
    writer.shutdown().await.unwrap();
    assert_eq!(within(recv.read_to_end(16)).await.unwrap(), b"bye");

    let (mut send2, _recv2) = within(conn.open_bi()).await.unwrap();
    send2.write_all(&frame(b"second")).await.unwrap();
    match within(conn.closed()).await {
        ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code.into_inner(), u64::from(CLOSE_EXTRA_STREAM))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(listener.stats().extra_streams, 1);
    drop((reader, writer));
}

fn client_with(
    cert: &Cert,
    chain_extra: &[CertificateDer<'static>],
    server: &Cert,
) -> ClientOpts<'static> {
    let mut chain = vec![cert.der.clone()];
    chain.extend_from_slice(chain_extra);
    ClientOpts {
        client: Some((chain, cert.key_der())),
        ..ClientOpts::trusting(&[server])
    }
}

#[tokio::test]
async fn client_auth_fingerprints() {
    let server = server_cert("files.test");
    let (alice, _) = self_signed("alice", ExtendedKeyUsagePurpose::ClientAuth);
    let (mallory, _) = self_signed("mallory", ExtendedKeyUsagePurpose::ClientAuth);
    let (eve, _) = self_signed("eve", ExtendedKeyUsagePurpose::ClientAuth);
    let policy = ClientPolicy {
        allow_fingerprints: vec![fingerprint(&alice.der), fingerprint(&mallory.der)],
        deny_fingerprints: vec![fingerprint(&mallory.der)],
        trusted_cas: vec![],
    };
    let store = CertStore::new(vec![server.entry(&["files.test"])]).unwrap();
    let listener = listen(store, ClientAuth::Required(policy), test_settings());
    let addr = listener.local_addr().unwrap();

    // No certificate at all.
    assert_eq!(
        refusal(addr, "files.test", ClientOpts::trusting(&[&server])).await,
        TransportErrorCode::crypto(ALERT_CERTIFICATE_REQUIRED)
    );
    // Allowed and denied: deny wins.
    assert_eq!(
        refusal(addr, "files.test", client_with(&mallory, &[], &server)).await,
        TransportErrorCode::crypto(ALERT_ACCESS_DENIED)
    );
    // Neither allowed nor chained to a trusted CA.
    assert_eq!(
        refusal(addr, "files.test", client_with(&eve, &[], &server)).await,
        TransportErrorCode::crypto(ALERT_ACCESS_DENIED)
    );
    // Allowed fingerprint.
    let (_ep, conn) = connect(addr, "files.test", client_with(&alice, &[], &server))
        .await
        .unwrap();
    assert_echo_works(&listener, &conn).await;
    assert_eq!(listener.stats().handshake_failures, 3);
}

#[tokio::test]
async fn client_auth_trusted_ca() {
    let server = server_cert("files.test");
    let ca = Ca::new("smbq test CA");
    let other_ca = Ca::new("someone else's CA");
    let bob = ca.issue_client("bob");
    let stranger = other_ca.issue_client("stranger");
    let policy = ClientPolicy {
        allow_fingerprints: vec![],
        deny_fingerprints: vec![],
        trusted_cas: vec![ca.der()],
    };
    let store = CertStore::new(vec![server.entry(&["files.test"])]).unwrap();
    let listener = listen(store.clone(), ClientAuth::Required(policy), test_settings());
    let addr = listener.local_addr().unwrap();

    let (_ep, conn) = connect(addr, "files.test", client_with(&bob, &[], &server))
        .await
        .unwrap();
    assert_echo_works(&listener, &conn).await;
    assert_eq!(
        refusal(addr, "files.test", client_with(&stranger, &[], &server)).await,
        TransportErrorCode::crypto(ALERT_UNKNOWN_CA)
    );

    // A deny entry for the CA itself covers every leaf the client sends it with.
    let deny_ca = ClientPolicy {
        allow_fingerprints: vec![],
        deny_fingerprints: vec![fingerprint(&ca.der())],
        trusted_cas: vec![ca.der()],
    };
    let listener2 = listen(store, ClientAuth::Required(deny_ca), test_settings());
    let addr2 = listener2.local_addr().unwrap();
    assert_eq!(
        refusal(addr2, "files.test", client_with(&bob, &[ca.der()], &server)).await,
        TransportErrorCode::crypto(ALERT_ACCESS_DENIED)
    );
}

#[tokio::test]
async fn sni_selects_certificate_and_replace_applies_to_new_handshakes() {
    let a = server_cert("a.test");
    let b = server_cert("b.test");
    let store = CertStore::new(vec![a.entry(&["a.test"]), b.entry(&["b.test"])]).unwrap();
    let listener = listen(store.clone(), ClientAuth::Off, test_settings());
    let addr = listener.local_addr().unwrap();
    let trust = || ClientOpts::trusting(&[&a, &b]);

    let (_e1, c1) = connect(addr, "b.test", trust()).await.unwrap();
    assert_eq!(leaf_of(&c1), b.der);
    let (_e2, c2) = connect(addr, "a.test", trust()).await.unwrap();
    assert_eq!(leaf_of(&c2), a.der);

    let b2 = server_cert("b.test");
    store
        .replace(vec![a.entry(&["a.test"]), b2.entry(&["b.test"])])
        .unwrap();
    assert_eq!(store.fingerprints()[1], fingerprint(&b2.der));
    let (_e3, c3) = connect(addr, "b.test", ClientOpts::trusting(&[&b2]))
        .await
        .unwrap();
    assert_eq!(leaf_of(&c3), b2.der);
    // The connection made before the swap keeps working.
    assert_echo_works(&listener, &c1).await;
}

#[derive(Debug, Default)]
struct Labels(Mutex<Vec<(String, usize, usize)>>);

impl rustls::KeyLog for Labels {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push((label.to_string(), client_random.len(), secret.len()));
    }
}

#[tokio::test]
async fn keylog_receives_tls13_secrets() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let labels = Arc::new(Labels::default());
    let listener = listen_at(
        "127.0.0.1:0",
        store,
        ClientAuth::Off,
        Some(labels.clone()),
        test_settings(),
    );
    let addr = listener.local_addr().unwrap();
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    assert_echo_works(&listener, &conn).await;
    let got = labels.0.lock().unwrap().clone();
    for want in [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
    ] {
        let (_, random, secret) = got
            .iter()
            .find(|(l, ..)| l == want)
            .unwrap_or_else(|| panic!("{want} missing from {got:?}"));
        assert_eq!(*random, 32);
        // AES-128-GCM-SHA256, the server's first choice, has 32-byte secrets.
        assert_eq!(*secret, 32, "{want}");
    }
}

#[tokio::test]
async fn per_ip_limit_refuses_the_extra_connection_until_one_closes() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let settings = QuicSettings {
        max_connections_per_ip: 2,
        ..test_settings()
    };
    let listener = listen(store, ClientAuth::Off, settings);
    let addr = listener.local_addr().unwrap();
    let trust = || ClientOpts::trusting(&[&cert]);
    let (_e1, c1) = connect(addr, "files.test", trust()).await.unwrap();
    let (_e2, _c2) = connect(addr, "files.test", trust()).await.unwrap();
    assert_eq!(
        refusal(addr, "files.test", trust()).await,
        TransportErrorCode::CONNECTION_REFUSED
    );
    assert_eq!(listener.stats().refused, 1);

    c1.close(0u32.into(), b"done");
    let mut admitted = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok((_e, c)) = connect(addr, "files.test", trust()).await {
            assert_echo_works(&listener, &c).await;
            admitted = true;
            break;
        }
    }
    assert!(admitted, "slot not released after a client closed");
}

#[tokio::test]
async fn retry_under_load_still_connects() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    // 0: every unvalidated client must answer a Retry first.
    let settings = QuicSettings {
        retry_above: 0,
        ..test_settings()
    };
    let listener = listen(store, ClientAuth::Off, settings);
    let addr = listener.local_addr().unwrap();
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    assert_echo_works(&listener, &conn).await;
    assert_eq!(listener.stats().retries, 1);
}

#[tokio::test]
async fn shutdown_closes_clients_with_code_zero() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(store, ClientAuth::Off, test_settings());
    let addr = listener.local_addr().unwrap();
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    send.write_all(&frame(b"hi")).await.unwrap();
    let held = serve_echo(&listener).await;

    within(listener.shutdown()).await;
    match within(conn.closed()).await {
        ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code.into_inner(), 0);
            assert_eq!(&c.reason[..], b"server shutting down");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(within(listener.accept()).await.is_none());
    drop(held);
}

#[tokio::test]
async fn server_sends_keep_alive_pings() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let settings = QuicSettings {
        keep_alive: Duration::from_millis(100),
        mtu_upper_bound: 1200,
        ..test_settings()
    };
    let listener = listen(store, ClientAuth::Off, settings);
    let addr = listener.local_addr().unwrap();
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    // The quinn client sends no keep-alives of its own, and MTU probes (which also carry
    // PING) are off at an upper bound of 1200 and over by now anyway: count PINGs over time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = conn.stats().frame_rx.ping;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let after = conn.stats().frame_rx.ping;
    assert!(after >= before + 4, "{before} -> {after}");
}

#[tokio::test]
async fn idle_timeout_from_settings_applies() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let settings = QuicSettings {
        idle_timeout: Duration::from_millis(300),
        keep_alive: Duration::ZERO,
        ..test_settings()
    };
    let listener = listen(store, ClientAuth::Off, settings);
    let addr = listener.local_addr().unwrap();
    let (_ep, conn) = connect(addr, "files.test", ClientOpts::trusting(&[&cert]))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    // The effective idle timeout is the smaller of the two peers' (RFC 9000 10.1).
    assert!(matches!(
        within(conn.closed()).await,
        ConnectionError::TimedOut
    ));
    assert!(started.elapsed() < Duration::from_secs(5));
}
