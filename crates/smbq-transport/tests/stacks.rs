//! quinn and MsQuic against each other and themselves through the stack seam: every pairing
//! moves bytes both ways intact, both stacks judge the server's certificate by smbq's anchor,
//! and MsQuic's server picks certificates by SNI and picks up a replaced set.
#![cfg(feature = "msquic")]
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::*;
use smbq_transport::{
    CertStore, ClientAuth, QuicAcceptor, QuicConnectError, QuicSettings, QuicStack, ServerTrust,
    TlsSettings, fingerprint,
};

const BIND: &str = "127.0.0.1:0";

fn tls_for(store: Arc<CertStore>) -> TlsSettings {
    TlsSettings {
        certs: store,
        client_auth: ClientAuth::Off,
        keylog: None,
        session_tickets: false,
    }
}

fn serve(stack: QuicStack, store: Arc<CertStore>) -> Arc<dyn QuicAcceptor> {
    stack
        .listen(BIND.parse().unwrap(), tls_for(store), test_settings())
        .unwrap()
}

async fn round_trip(server: QuicStack, client: QuicStack, len: usize) {
    let cert = server_cert("files.test");
    let acceptor = serve(
        server,
        CertStore::new(vec![cert.entry(&["files.test"])]).unwrap(),
    );
    let addr = acceptor.local_addr().unwrap();
    assert_ne!(addr.port(), 0, "{server}: bound port unknown");
    let connector = client
        .client(client_cfg(trusting(&[&cert])), BIND.parse().unwrap())
        .unwrap();
    let mut conn = within(connector.connect(addr, "files.test"))
        .await
        .unwrap_or_else(|e| panic!("{client} -> {server}: {e}"));
    let echoed = accept_and_echo(acceptor.accept());
    let payload = pattern(len, len as u32);
    let (echoed, ()) = tokio::join!(echoed, echo_round_trip(&mut conn, &payload));
    // The client ends its side; the echo ends the stream after the last byte.
    within(conn.writer.shutdown()).await.unwrap();
    assert_eq!(
        within(read_to_end(conn.reader.as_mut())).await,
        Some(vec![])
    );
    assert_eq!(within(echoed).await.unwrap(), len);
    drop(conn);
    within(acceptor.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pairing_echoes_small_and_large_transfers() {
    for server in QuicStack::ALL {
        for client in QuicStack::ALL {
            round_trip(server, client, 5).await;
            // Larger than every window and queue bound (pauses and resumes receiving).
            round_trip(server, client, 40 << 20).await;
            eprintln!("{client} -> {server}: ok");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msquic_client_refuses_a_certificate_it_does_not_trust() {
    let cert = server_cert("files.test");
    let other = server_cert("files.test");
    for server in QuicStack::ALL {
        let acceptor = serve(
            server,
            CertStore::new(vec![cert.entry(&["files.test"])]).unwrap(),
        );
        let addr = acceptor.local_addr().unwrap();
        let client = |trust| {
            QuicStack::MsQuic
                .client(client_cfg(trust), BIND.parse().unwrap())
                .unwrap()
        };
        let pinned_other = ServerTrust::Pin(fingerprint(&other.der));
        match within(client(pinned_other).connect(addr, "files.test")).await {
            Err(QuicConnectError::PinMismatch { got, .. }) => {
                assert_eq!(
                    got,
                    smbq_transport::fingerprint_hex(&fingerprint(&cert.der))
                );
            }
            other => panic!("{server}: pinned other cert: {other:?}"),
        }
        match within(client(trusting(&[&other])).connect(addr, "files.test")).await {
            Err(QuicConnectError::CertificateUntrusted(_)) => {}
            other => panic!("{server}: untrusted CA: {other:?}"),
        }
        // The right certificate under another name is refused too.
        match within(client(trusting(&[&cert])).connect(addr, "wrong.test")).await {
            Err(QuicConnectError::CertificateUntrusted(_)) => {}
            other => panic!("{server}: wrong name: {other:?}"),
        }
        let pinned = ServerTrust::Pin(fingerprint(&cert.der));
        within(client(pinned).connect(addr, "files.test"))
            .await
            .unwrap();
        within(acceptor.shutdown()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msquic_server_picks_certificates_by_sni_and_after_a_reload() {
    let a = server_cert("a.test");
    let b = server_cert("b.test");
    let store = CertStore::new(vec![a.entry(&["a.test"]), b.entry(&["*.b.test"])]).unwrap();
    let acceptor = serve(QuicStack::MsQuic, store.clone());
    let addr = acceptor.local_addr().unwrap();
    let pinned = |c: &Cert| {
        QuicStack::Quinn
            .client(
                client_cfg(ServerTrust::Pin(fingerprint(&c.der))),
                BIND.parse().unwrap(),
            )
            .unwrap()
    };
    within(pinned(&a).connect(addr, "a.test")).await.unwrap();
    within(pinned(&b).connect(addr, "files.b.test"))
        .await
        .unwrap();
    // No match: the first entry serves.
    within(pinned(&a).connect(addr, "c.test")).await.unwrap();
    let renewed = server_cert("a.test");
    store.replace(vec![renewed.entry(&["a.test"])]).unwrap();
    assert!(matches!(
        within(pinned(&a).connect(addr, "a.test")).await,
        Err(QuicConnectError::PinMismatch { .. })
    ));
    within(pinned(&renewed).connect(addr, "a.test"))
        .await
        .unwrap();
    within(acceptor.shutdown()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msquic_refuses_what_it_does_not_offer() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let ca = Ca::new("ca.test");
    let tls = TlsSettings {
        client_auth: ClientAuth::Required(smbq_transport::ClientPolicy {
            trusted_cas: vec![ca.der()],
            ..Default::default()
        }),
        ..tls_for(store)
    };
    let err = QuicStack::MsQuic
        .listen(BIND.parse().unwrap(), tls, QuicSettings::default())
        .err()
        .expect("client auth refused");
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    let mut cfg = client_cfg(trusting(&[&cert]));
    cfg.client_cert = Some(ca.issue_client("me.test").chain_and_key(&[]));
    let err = QuicStack::MsQuic
        .client(cfg, BIND.parse().unwrap())
        .err()
        .expect("client cert refused");
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    let bind: SocketAddr = BIND.parse().unwrap();
    let newreno = QuicSettings {
        congestion: smbq_transport::Congestion::NewReno,
        ..QuicSettings::default()
    };
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    assert!(
        QuicStack::MsQuic
            .listen(bind, tls_for(store), newreno)
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msquic_server_counts_connections_per_address_after_the_handshake() {
    let cert = server_cert("files.test");
    let store = CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let settings = QuicSettings {
        max_connections_per_ip: 2,
        ..test_settings()
    };
    let acceptor = QuicStack::MsQuic
        .listen(BIND.parse().unwrap(), tls_for(store), settings)
        .unwrap();
    let addr = acceptor.local_addr().unwrap();
    let client = QuicStack::Quinn
        .client(client_cfg(trusting(&[&cert])), BIND.parse().unwrap())
        .unwrap();
    // Two connections that wrote their first bytes hold both slots of 127.0.0.1.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut conn = within(client.connect(addr, "files.test")).await.unwrap();
        within(
            conn.writer
                .write_chunks(&mut [bytes::Bytes::from_static(b"hi")]),
        )
        .await
        .unwrap();
        let mut server_side = within(acceptor.accept()).await.unwrap().unwrap();
        assert_eq!(read_n(server_side.reader.as_mut(), 2).await, b"hi");
        held.push((conn, server_side));
    }
    // The third completes its handshake, then is closed: it may see the close while opening
    // its stream or on its first read, and its stream never reaches accept.
    match within(client.connect(addr, "files.test")).await {
        Err(QuicConnectError::Refused(_)) => {}
        Err(e) => panic!("third connection: {e}"),
        Ok(mut third) => {
            let _ = third
                .writer
                .write_chunks(&mut [bytes::Bytes::from_static(b"hi")])
                .await;
            assert_eq!(within(read_to_end(third.reader.as_mut())).await, None);
        }
    }
    assert_eq!(acceptor.stats().refused, 1);
    // A slot given back admits the next one.
    drop(held.pop());
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let mut fourth = within(client.connect(addr, "files.test")).await.unwrap();
    within(
        fourth
            .writer
            .write_chunks(&mut [bytes::Bytes::from_static(b"ok")]),
    )
    .await
    .unwrap();
    let mut server_side = within(acceptor.accept()).await.unwrap().unwrap();
    assert_eq!(read_n(server_side.reader.as_mut(), 2).await, b"ok");
    within(acceptor.shutdown()).await;
}
