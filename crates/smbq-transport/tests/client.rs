//! The client side: `QuicClient` trust modes and errors, chunk IO both ways over TCP and QUIC,
//! migration to a new socket mid-transfer, and the stack seam.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::*;
use smbq_transport::tcp::TcpListener;
use smbq_transport::{
    CertStore, ClientAuth, Connection, QuicConnectError, QuicListener, QuicSettings, QuicStack,
    ServerTrust, TlsSettings, TransportKind, connect_tcp, fingerprint, fingerprint_hex,
};

/// A listener whose certificate for `files.test` a private CA issued.
fn ca_listener() -> (QuicListener, Ca, Cert) {
    let ca = Ca::new("smbq test CA");
    let leaf = ca.issue_server("files.test");
    let store = CertStore::new(vec![leaf.entry(&["files.test"])]).unwrap();
    (listen(store, ClientAuth::Off, test_settings()), ca, leaf)
}

async fn connect_with(
    listener: &QuicListener,
    name: &str,
    trust: ServerTrust,
) -> Result<Connection, QuicConnectError> {
    let addr = listener.local_addr().unwrap();
    within(client_for(addr, client_cfg(trust)).connect(addr, name)).await
}

/// Round trip through the listener's echo on a connection the client made.
async fn echo_through(listener: &QuicListener, mut conn: Connection, len: usize) {
    let payload = pattern(len, len as u32);
    let server = accept_and_echo(listener.accept());
    let (echoed, ()) = tokio::join!(server, echo_round_trip(&mut conn, &payload));
    drop(conn);
    assert_eq!(within(echoed).await.unwrap(), len);
}

#[tokio::test]
async fn trust_modes_accept_the_right_server_only() {
    let (listener, ca, leaf) = ca_listener();
    let leaf_fp = fingerprint(&leaf.der);

    let ok = connect_with(
        &listener,
        "files.test",
        ServerTrust::CaCerts(vec![ca.der()]),
    )
    .await;
    echo_through(&listener, ok.unwrap(), 10_000).await;
    let ok = connect_with(&listener, "files.test", ServerTrust::Pin(leaf_fp)).await;
    echo_through(&listener, ok.unwrap(), 10_000).await;
    // A pin is the identity: the name asked does not matter.
    let ok = connect_with(&listener, "anything.else", ServerTrust::Pin(leaf_fp)).await;
    echo_through(&listener, ok.unwrap(), 10).await;
    let ok = connect_with(&listener, "files.test", ServerTrust::Insecure).await;
    echo_through(&listener, ok.unwrap(), 10_000).await;
    assert_eq!(listener.stats().handshake_failures, 0);

    let wrong = [0x5au8; 32];
    match connect_with(&listener, "files.test", ServerTrust::Pin(wrong)).await {
        Err(QuicConnectError::PinMismatch { expected, got }) => {
            assert_eq!(expected, fingerprint_hex(&wrong));
            assert_eq!(got, fingerprint_hex(&leaf_fp));
        }
        other => panic!("unexpected {other:?}"),
    }
    let other_ca = Ca::new("someone else's CA");
    match connect_with(
        &listener,
        "files.test",
        ServerTrust::CaCerts(vec![other_ca.der()]),
    )
    .await
    {
        Err(QuicConnectError::CertificateUntrusted(why)) => {
            assert!(why.contains("UnknownIssuer"), "{why}")
        }
        other => panic!("unexpected {other:?}"),
    }
    match connect_with(
        &listener,
        "other.test",
        ServerTrust::CaCerts(vec![ca.der()]),
    )
    .await
    {
        Err(QuicConnectError::CertificateUntrusted(why)) => {
            assert!(why.contains("not valid for name"), "{why}")
        }
        other => panic!("unexpected {other:?}"),
    }
    // The server hears of each refusal as a failed handshake.
    within(async {
        while listener.stats().handshake_failures < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn system_roots_do_not_trust_a_private_ca() {
    let (listener, _ca, _leaf) = ca_listener();
    let addr = listener.local_addr().unwrap();
    let cfg = client_cfg(ServerTrust::SystemRoots);
    match smbq_transport::QuicClient::new(cfg, loopback_for(addr)) {
        Ok(client) => match within(client.connect(addr, "files.test")).await {
            Err(QuicConnectError::CertificateUntrusted(why)) => {
                assert!(why.contains("UnknownIssuer"), "{why}")
            }
            other => panic!("unexpected {other:?}"),
        },
        // A machine without a CA bundle says so instead of trusting nothing silently.
        Err(e) => assert!(e.to_string().contains("no system root"), "{e}"),
    }
}

#[tokio::test]
async fn no_answer_is_a_timeout() {
    // A UDP socket that never answers stands in for a dead or filtered server.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut cfg = client_cfg(ServerTrust::Insecure);
    cfg.settings.idle_timeout = Duration::from_millis(300);
    let client = client_for(addr, cfg);
    let started = std::time::Instant::now();
    match within(client.connect(addr, "files.test")).await {
        Err(QuicConnectError::Timeout) => {}
        other => panic!("unexpected {other:?}"),
    }
    // quinn stretches an idle timeout to 3 PTOs (RFC 9000 10.1), 3 s before any RTT sample:
    // well before the 10 s handshake bound.
    assert!(started.elapsed() < Duration::from_secs(8));
}

/// Both directions through the echo, then each side's end of stream reaches the other.
async fn chunk_round_trips(mut client: Connection, server: Connection) {
    let echoed = tokio::spawn(echo(server));
    let payload = pattern(3 << 20, 7);
    echo_round_trip(&mut client, &payload).await;
    // read_into appends to what the buffer holds, as the server's TCP path relies on.
    let tail = pattern(100_000, 8);
    let mut chunks = chunks_of(&tail);
    client.writer.write_chunks(&mut chunks).await.unwrap();
    client.writer.shutdown().await.unwrap();
    let mut buf = BytesMut::from(&b"kept"[..]);
    loop {
        let n = within(client.reader.read_into(&mut buf)).await.unwrap();
        if n == 0 {
            break;
        }
    }
    assert_eq!(&buf[..4], b"kept");
    assert!(buf[4..] == tail[..]);
    assert_eq!(within(echoed).await.unwrap(), payload.len() + tail.len());
    assert_eq!(client.reader.read_chunk().await.unwrap(), None);
}

#[tokio::test]
async fn tcp_chunks_round_trip() {
    let listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(connect_tcp(addr), listener.accept());
    let (client, server) = (client.unwrap(), server.unwrap());
    assert_eq!(client.kind, TransportKind::Tcp);
    assert_eq!(client.peer, addr);
    assert_eq!(server.peer, client.local);
    chunk_round_trips(client, server).await;
}

#[tokio::test]
async fn quic_chunks_round_trip() {
    let (listener, cert) = listen_as("files.test");
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(trusting(&[&cert])));
    let mut conn = within(client.connect(addr, "files.test")).await.unwrap();
    assert_eq!((conn.kind, conn.peer), (TransportKind::Quic, addr));
    assert_eq!(conn.local, client.local_addr().unwrap());
    // The server learns of the stream from its first bytes.
    conn.writer
        .write_chunks(&mut [Bytes::from_static(b"go")])
        .await
        .unwrap();
    let mut server = within(listener.accept()).await.unwrap().unwrap();
    assert_eq!(server.peer, conn.local);
    assert_eq!(read_n(server.reader.as_mut(), 2).await, b"go");
    chunk_round_trips(conn, server).await;
}

#[tokio::test]
async fn dropping_the_client_halves_ends_the_stream_and_connection() {
    let (listener, cert) = listen_as("files.test");
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(trusting(&[&cert])));
    let mut conn = within(client.connect(addr, "files.test")).await.unwrap();
    let last = Bytes::from(pattern(300_000, 3));
    conn.writer.write_chunks(&mut [last.clone()]).await.unwrap();
    drop(conn);
    // Every byte written before the drop arrives, then a clean end of stream.
    let mut server = within(listener.accept()).await.unwrap().unwrap();
    assert_eq!(
        within(read_to_end(server.reader.as_mut())).await.unwrap(),
        last
    );
}

#[tokio::test]
async fn connections_outlive_the_client_endpoint_handle() {
    let (listener, cert) = listen_as("files.test");
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(trusting(&[&cert])));
    let conn = within(client.connect(addr, "files.test")).await.unwrap();
    drop(client);
    echo_through(&listener, conn, 500_000).await;
}

#[tokio::test]
async fn transfer_survives_rebinding_to_a_new_socket() {
    const TOTAL: usize = 64 << 20;
    const BLOCK: usize = 1 << 20;
    let (listener, cert) = listen_as("files.test");
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(trusting(&[&cert])));
    let first_local = client.local_addr().unwrap();
    let Connection {
        mut reader,
        mut writer,
        ..
    } = within(client.connect(addr, "files.test")).await.unwrap();
    let blocks: Vec<Bytes> = (0..TOTAL / BLOCK)
        .map(|i| Bytes::from(pattern(BLOCK, i as u32)))
        .collect();
    let upload = {
        let blocks = blocks.clone();
        tokio::spawn(async move {
            for b in blocks {
                writer.write_chunks(&mut [b]).await.unwrap();
            }
            writer.shutdown().await.unwrap();
            writer
        })
    };
    let server = tokio::spawn(echo(within(listener.accept()).await.unwrap().unwrap()));

    let mut got = BytesMut::with_capacity(TOTAL);
    let mut rebound = None;
    let started = std::time::Instant::now();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(10), reader.read_chunk())
        .await
        .expect("transfer stalled")
        .unwrap()
    {
        got.extend_from_slice(&chunk);
        if rebound.is_none() && got.len() >= TOTAL / 4 {
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let new_local = socket.local_addr().unwrap();
            client.rebind(socket).unwrap();
            rebound = Some(new_local);
        }
    }
    let elapsed = started.elapsed();
    let new_local = rebound.unwrap();
    assert_eq!(client.local_addr().unwrap(), new_local);
    assert_ne!(new_local, first_local);
    assert_eq!(got.len(), TOTAL);
    assert!(
        got.chunks(BLOCK).zip(&blocks).all(|(a, b)| a == &b[..]),
        "bytes differ"
    );
    assert_eq!(within(server).await.unwrap(), TOTAL);
    drop(within(upload).await.unwrap());
    // Once packets arrive on the new socket quinn drops the old one: its port is free again,
    // which shows the server answered on the new path (it validated the migration).
    let mut old_freed = false;
    for _ in 0..50 {
        if std::net::UdpSocket::bind(first_local).is_ok() {
            old_freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(old_freed, "the old socket is still in use");
    eprintln!("64 MiB echoed across a rebind in {elapsed:?}");
}

#[tokio::test]
async fn the_stack_seam_serves_and_connects() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let tls = TlsSettings {
        certs: store,
        client_auth: ClientAuth::Off,
        keylog: None,
        session_tickets: false,
    };
    let bind: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let acceptor = QuicStack::default()
        .listen(
            bind,
            tls,
            QuicSettings {
                socket_buffer: 1 << 20,
                ..QuicSettings::default()
            },
        )
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let connector = QuicStack::Quinn
        .client(client_cfg(trusting(&[&cert])), bind)
        .unwrap();
    let mut conn = within(connector.connect(addr, "files.test")).await.unwrap();
    let server = accept_and_echo(acceptor.accept());
    let (echoed, ()) = tokio::join!(server, echo_round_trip(&mut conn, b"through the seam"));
    drop(conn);
    assert_eq!(within(echoed).await.unwrap(), 16);
    within(acceptor.shutdown()).await;
    assert!(within(acceptor.accept()).await.is_none());
}

/// Issue 11 item 6: with `session_tickets` on, a client connecting again resumes its TLS
/// session (the server's ticket), skipping the certificate and its signature. Shown by what
/// only resumption explains: once the server's certificate is replaced, the client that pinned
/// the old one still gets in on its session, while a new client pinning the old certificate is
/// refused. By default, and always under client authentication, the server issues no
/// tickets, so every reconnect is a full handshake.
#[tokio::test]
async fn a_client_resumes_its_tls_session_only_where_tickets_are_on() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen_with_tickets(store.clone(), test_settings());
    let addr = listener.local_addr().unwrap();
    let pinned = ServerTrust::Pin(fingerprint(&cert.der));
    let client = client_for(addr, client_cfg(pinned.clone()));
    // The first connection carries data both ways, so the server's tickets have arrived.
    let first = within(client.connect(addr, "files.test")).await.unwrap();
    echo_through(&listener, first, 1000).await;
    store
        .replace(vec![server_cert("files.test").entry(&["files.test"])])
        .unwrap();
    let again = within(client.connect(addr, "files.test")).await;
    assert!(again.is_ok(), "not resumed: {:?}", again.err());
    echo_through(&listener, again.unwrap(), 1000).await;
    assert!(matches!(
        within(client_for(addr, client_cfg(pinned)).connect(addr, "files.test")).await,
        Err(QuicConnectError::PinMismatch { .. })
    ));

    // The default (issue 34): no tickets, no post-handshake CRYPTO data at all, so a
    // reconnect is a full handshake and meets the new certificate.
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(store.clone(), ClientAuth::Off, test_settings());
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(ServerTrust::Pin(fingerprint(&cert.der))));
    assert!(reconnect_meets_new_certificate(&listener, &store, &client, addr).await);

    // Client authentication: no tickets, so a reconnect is a full handshake.
    let ca = Ca::new("client CA");
    let me = ca.issue_client("me.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let policy = smbq_transport::ClientPolicy {
        trusted_cas: vec![ca.der()],
        ..Default::default()
    };
    let listener = listen(store.clone(), ClientAuth::Required(policy), test_settings());
    let addr = listener.local_addr().unwrap();
    let mut cfg = client_cfg(ServerTrust::Pin(fingerprint(&cert.der)));
    cfg.client_cert = Some(me.chain_and_key(&[]));
    let client = client_for(addr, cfg);
    assert!(reconnect_meets_new_certificate(&listener, &store, &client, addr).await);
}

/// Connects once and moves data, replaces the server's certificate, and connects again:
/// true when the second handshake was a full one (the pinned old certificate is refused),
/// false when it resumed on the first connection's ticket.
async fn reconnect_meets_new_certificate(
    listener: &QuicListener,
    store: &std::sync::Arc<CertStore>,
    client: &smbq_transport::QuicClient,
    addr: SocketAddr,
) -> bool {
    let first = within(client.connect(addr, "files.test")).await.unwrap();
    echo_through(listener, first, 1000).await;
    store
        .replace(vec![server_cert("files.test").entry(&["files.test"])])
        .unwrap();
    matches!(
        within(client.connect(addr, "files.test")).await,
        Err(QuicConnectError::PinMismatch { .. })
    )
}

/// A quinn server that is not smbq: it echoes 4 bytes on the client's stream and hands its
/// side of the connection back, so a test can read the frames the client sent.
fn raw_server(cert: &Cert) -> (quinn::Endpoint, SocketAddr) {
    let provider =
        std::sync::Arc::new(smbq_transport::rustls::crypto::aws_lc_rs::default_provider());
    let mut tls = smbq_transport::rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&smbq_transport::rustls::version::TLS13])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der.clone()], cert.key_der())
        .unwrap();
    tls.alpn_protocols = vec![smbq_transport::ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let config = quinn::ServerConfig::with_crypto(std::sync::Arc::new(crypto));
    let ep = quinn::Endpoint::server(config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = ep.local_addr().unwrap();
    (ep, addr)
}

/// The client asks its server (QUIC ACK-frequency extension) to acknowledge within a few
/// milliseconds instead of the default 25, so that a lost request is found by a shorter probe
/// timeout (quinn/mod.rs, `CLIENT_MAX_ACK_DELAY`); the server must have seen that request.
#[tokio::test]
async fn client_asks_the_server_to_acknowledge_promptly() {
    let cert = server_cert("files.test");
    let (server, addr) = raw_server(&cert);
    let accepted = tokio::spawn(async move {
        let conn = server.accept().await.unwrap().await.unwrap();
        let (mut send, mut recv) = conn.accept_bi().await.unwrap();
        let mut buf = [0u8; 4];
        recv.read_exact(&mut buf).await.unwrap();
        send.write_all(&buf).await.unwrap();
        (server, conn)
    });
    let trust = ServerTrust::Pin(fingerprint(&cert.der));
    let mut client = within(client_for(addr, client_cfg(trust)).connect(addr, "files.test"))
        .await
        .unwrap();
    echo_round_trip(&mut client, b"ping").await;
    let (_server, conn) = within(accepted).await.unwrap();
    // The frame goes out with the client's first 1-RTT packets; the echo took a round trip
    // after them, so it has arrived.
    assert!(
        conn.stats().frame_rx.ack_frequency >= 1,
        "no ACK_FREQUENCY frame from the client: {:?}",
        conn.stats().frame_rx
    );
}
