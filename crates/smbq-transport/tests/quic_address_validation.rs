//! Address validation on the QUIC listener (security issue 10, item 4): Initials whose sender
//! never proves it receives at its source address must not use up that address's connections,
//! or anyone able to spoof a victim's address could lock the victim out.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use quinn::crypto::rustls::QuicClientConfig as QuinnRustls;
use smbq_transport::rustls::{self, RootCertStore};
use smbq_transport::{
    ALPN, CertStore, ClientAuth, Connection, QuicConnectError, QuicListener, QuicSettings,
};
use tokio::net::UdpSocket;
use tokio::sync::Notify;

/// The listener's application close code for a client refused after its handshake.
const CLOSE_REFUSED: u32 = 3;

const NAME: &str = "files.test";
/// More than the default per-IP limit (64) and than `retry_above` (256).
const FLOOD: usize = 300;
/// What "immediately" means for a real client after the flood.
const PROMPT: Duration = Duration::from_secs(2);

fn listener_with(settings: QuicSettings) -> (QuicListener, Cert) {
    let cert = server_cert(NAME);
    let store = CertStore::new(vec![cert.entry(&[NAME])]).unwrap();
    (listen(store, ClientAuth::Off, settings), cert)
}

fn proto_client_config(cert: &Cert) -> quinn::ClientConfig {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(cert.der.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN.to_vec()];
    quinn::ClientConfig::new(Arc::new(QuinnRustls::try_from(cfg).unwrap()))
}

/// Sends `n` genuine client Initials, each opening a new connection, from a UDP socket on
/// 127.0.0.1 that never reads: what a spoofer sees of the handshake is exactly nothing. The
/// socket is returned so its port stays taken (and silent) for the rest of the test.
async fn flood_initials(server: SocketAddr, cert: &Cert, n: usize) -> UdpSocket {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut endpoint = quinn_proto::Endpoint::new(
        Arc::new(quinn::EndpointConfig::default()),
        None,
        false,
        None,
    );
    let config = proto_client_config(cert);
    let mut buf = Vec::new();
    for i in 0..n {
        let now = Instant::now();
        let (_, mut conn) = endpoint.connect(now, config.clone(), server, NAME).unwrap();
        buf.clear();
        let t = conn.poll_transmit(now, 1, &mut buf).unwrap();
        assert_eq!(t.segment_size, None);
        assert!(t.size >= 1200, "an Initial is padded to 1200 bytes");
        sock.send_to(&buf[..t.size], server).await.unwrap();
        // Paced so the server's receive buffer (which the kernel may cap) loses none.
        if i % 16 == 15 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    sock
}

/// Waits until the listener has taken every flooded Initial off its socket.
async fn flood_processed(listener: &QuicListener, n: usize) {
    let counted = |l: &QuicListener| {
        let s = l.stats();
        s.retries as usize
            + s.refused as usize
            + s.handshakes_in_progress
            + s.handshake_failures as usize
    };
    let start = Instant::now();
    while counted(listener) < n {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "listener saw only {} of {n} Initials: {:?}",
            counted(listener),
            listener.stats()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Connects a real client from 127.0.0.1 and echoes a few bytes through the listener.
async fn connect_and_echo(listener: &QuicListener, cert: &Cert) -> Connection {
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(trusting(&[cert])));
    let mut conn = match within(client.connect(addr, NAME)).await {
        Ok(c) => c,
        Err(e) => panic!("real client not admitted: {e:?}; {:?}", listener.stats()),
    };
    let server = accept_and_echo(listener.accept());
    let (_echo, ()) = tokio::join!(server, echo_round_trip(&mut conn, b"validated"));
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_initials_do_not_lock_out_their_source_address() {
    let (listener, cert) = listener_with(test_settings());
    let addr = listener.local_addr().unwrap();
    let _spoofer = flood_initials(addr, &cert, FLOOD).await;
    flood_processed(&listener, FLOOD).await;

    let start = Instant::now();
    let conn = tokio::time::timeout(PROMPT, connect_and_echo(&listener, &cert))
        .await
        .unwrap_or_else(|_| panic!("no connection within {PROMPT:?}: {:?}", listener.stats()));
    let took = start.elapsed();
    let stats = listener.stats();
    eprintln!("real client connected and echoed in {took:?} after the flood; {stats:?}");
    assert_eq!(stats.refused, 0, "{stats:?}");
    // Nearly the whole flood was answered statelessly rather than given a handshake.
    assert!(stats.retries as usize >= FLOOD - 16, "{stats:?}");
    drop(conn);

    // The few handshakes the flood did start hold nothing for long.
    let start = Instant::now();
    while listener.stats().handshakes_in_progress > 0 {
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "unanswered handshakes still in progress: {:?}",
            listener.stats()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "unanswered handshakes dropped {:?} after the flood",
        start.elapsed() + took
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validated_connections_from_one_address_are_still_capped() {
    const CAP: usize = 4;
    // 256: addresses are validated by the completed handshake (or by Retry once the address
    // is at its limit); 0: every client proves its address with a Retry token first.
    for retry_above in [256, 0] {
        let (listener, cert) = listener_with(QuicSettings {
            max_connections_per_ip: CAP,
            retry_above,
            ..test_settings()
        });
        let addr = listener.local_addr().unwrap();
        let _spoofer = flood_initials(addr, &cert, FLOOD).await;
        flood_processed(&listener, FLOOD).await;

        let mut held = Vec::new();
        for _ in 0..CAP {
            held.push(connect_and_echo(&listener, &cert).await);
        }
        let client = client_for(addr, client_cfg(trusting(&[&cert])));
        match within(client.connect(addr, NAME)).await {
            Err(QuicConnectError::Refused(why)) => assert!(why.contains("refused"), "{why}"),
            Err(other) => panic!("retry_above {retry_above}: unexpected {other:?}"),
            Ok(_) => panic!("retry_above {retry_above}: connection {} admitted", CAP + 1),
        }
        assert_eq!(listener.stats().refused, 1, "retry_above {retry_above}");

        // A closed connection gives its slot back.
        drop(held.pop());
        let start = Instant::now();
        loop {
            if let Ok(mut c) = client.connect(addr, NAME).await {
                let server = accept_and_echo(listener.accept());
                let (_, ()) = tokio::join!(server, echo_round_trip(&mut c, b"again"));
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "retry_above {retry_above}: slot not released"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A UDP relay on 127.0.0.1 that passes the client's first flight, then holds everything the
/// client sends once the server has answered, until `release`: a client that is slow to
/// finish its handshake. Returns the relay's address, whether it is holding, and the release.
async fn stalling_relay(server: SocketAddr) -> (SocketAddr, Arc<AtomicBool>, Arc<Notify>) {
    let front = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let back = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    back.connect(server).await.unwrap();
    let addr = front.local_addr().unwrap();
    let holding = Arc::new(AtomicBool::new(false));
    let release = Arc::new(Notify::new());
    let (hold, rel) = (holding.clone(), release.clone());
    tokio::spawn(async move {
        let (mut up, mut down) = (vec![0u8; 65_536], vec![0u8; 65_536]);
        let mut client = None;
        let mut held = Vec::new();
        let mut released = false;
        loop {
            tokio::select! {
                r = front.recv_from(&mut up) => {
                    let (n, from) = r.unwrap();
                    client = Some(from);
                    if hold.load(Ordering::SeqCst) && !released {
                        held.push(up[..n].to_vec());
                    } else {
                        back.send(&up[..n]).await.unwrap();
                    }
                }
                r = back.recv(&mut down) => {
                    let n = r.unwrap();
                    hold.store(true, Ordering::SeqCst);
                    if let Some(c) = client {
                        front.send_to(&down[..n], c).await.unwrap();
                    }
                }
                () = rel.notified(), if !released => {
                    released = true;
                    for d in held.drain(..) {
                        back.send(&d).await.unwrap();
                    }
                }
            }
        }
    });
    (addr, holding, release)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_that_proves_its_address_too_late_is_refused_at_the_limit() {
    let (listener, cert) = listener_with(QuicSettings {
        max_connections_per_ip: 2,
        ..test_settings()
    });
    let addr = listener.local_addr().unwrap();
    let (relay, holding, release) = stalling_relay(addr).await;

    // A starts first, through the relay (also 127.0.0.1), and is held mid-handshake: an
    // unproven handshake, which takes no slot.
    let a_ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let a = tokio::spawn(
        a_ep.connect_with(proto_client_config(&cert), relay, NAME)
            .unwrap(),
    );
    let start = Instant::now();
    while !holding.load(Ordering::SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "server never answered A"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(listener.stats().handshakes_in_progress, 1);

    // Two real clients take both slots meanwhile (the second through a Retry, since A's
    // handshake and the first's connection together reach the limit).
    let _b = connect_and_echo(&listener, &cert).await;
    let _c = connect_and_echo(&listener, &cert).await;
    assert_eq!(listener.stats().retries, 1);

    // A's handshake completes, proving its address, but the address is full now.
    release.notify_one();
    let a = within(a).await.unwrap().unwrap();
    match within(a.closed()).await {
        quinn::ConnectionError::ApplicationClosed(c) => {
            assert_eq!(c.error_code.into_inner(), u64::from(CLOSE_REFUSED))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(listener.stats().refused, 1);
}
