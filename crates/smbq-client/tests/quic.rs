//! SMB over QUIC with smbq's client against the in-process server: file operations with
//! transport-level security, and a NAT rebinding in the middle of a big transfer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use smbq_client::transfer::{TransferOptions, download, upload};
use smbq_client::{Client, ClientConfig, OpenOptions};
use smbq_server::config::EncryptPolicy;
use smbq_transport::{QuicClient, QuicClientConfig, QuicConnectError, ServerTrust, TransportKind};

fn quic_client(trust: ServerTrust) -> QuicClient {
    QuicClient::new(QuicClientConfig::new(trust), "127.0.0.1:0".parse().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_operations_over_quic_with_transport_security() {
    let srv = start_with(EncryptPolicy::Required, true).await;
    let qc = quic_client(ServerTrust::Pin(srv.pin));
    let conn = qc.connect(srv.quic.unwrap(), "localhost").await.unwrap();
    assert_eq!(conn.kind, TransportKind::Quic);
    let client = Client::connect(
        conn,
        ClientConfig {
            transport_security: true,
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    assert!(client.negotiated().transport_security);
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    // The server requires encryption on TCP, yet under TLS 1.3 it is skipped (MS-SMB2 3.3.5.2.5.3).
    assert!(!session.encrypts());
    assert!(session.signs());
    let tree = session.tree_connect("share").await.unwrap();
    tree.mkdir("q").await.unwrap();
    let data = pattern(5 << 20, 4);
    put(&tree, "q/f.bin", &data).await;
    assert_eq!(
        std::fs::read(srv.share_path().join("q/f.bin")).unwrap(),
        data
    );
    assert_eq!(get(&tree, "q/f.bin").await, data);
    let list = tree.list("q").await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].meta.size, data.len() as u64);
    tree.remove("q/f.bin").await.unwrap();
    tree.rmdir("q").await.unwrap();
}

async fn quic_session(srv: &TestServer) -> smbq_client::Session {
    let qc = quic_client(ServerTrust::Pin(srv.pin));
    let conn = qc.connect(srv.quic.unwrap(), "localhost").await.unwrap();
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    client.login(USER, "", PASSWORD).await.unwrap()
}

/// Windows' RestrictNamedpipeAccessViaQuic (default on there and here): no named pipe, so
/// no srvsvc share listing, over QUIC; over TCP, or with `[quic] restrict_named_pipes =
/// false`, the listing works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_pipes_are_refused_over_quic_unless_allowed() {
    let srv = start_with(EncryptPolicy::Off, true).await;
    let e = quic_session(&srv).await.shares().await.err().unwrap();
    assert!(e.to_string().contains("ACCESS_DENIED"), "{e}");
    let (_c, tcp, _t) = login(&srv, ClientConfig::default()).await;
    assert!(
        tcp.shares()
            .await
            .unwrap()
            .iter()
            .any(|s| s.name == "share")
    );

    let open =
        start_server_tuned(EncryptPolicy::Off, |c| c.restrict_named_pipes_quic = false).await;
    let listed = quic_session(&open).await.shares().await.unwrap();
    assert!(listed.iter().any(|s| s.name == "share"));
}

/// `[quic] ntlm = false`: NTLM is refused on QUIC connections and still accepted over TCP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ntlm_can_be_refused_over_quic_only() {
    let srv = start_tuned(EncryptPolicy::Off, |e| e.ntlm_quic = false).await;
    let qc = quic_client(ServerTrust::Pin(srv.pin));
    let conn = qc.connect(srv.quic.unwrap(), "localhost").await.unwrap();
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    assert!(client.login(USER, "", PASSWORD).await.is_err());
    let (_c, tcp, _t) = login(&srv, ClientConfig::default()).await;
    assert!(tcp.signs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_pin_is_refused_before_smb() {
    let srv = start_with(EncryptPolicy::Off, true).await;
    let qc = quic_client(ServerTrust::Pin([0xAB; 32]));
    let e = qc
        .connect(srv.quic.unwrap(), "localhost")
        .await
        .err()
        .unwrap();
    assert!(matches!(e, QuicConnectError::PinMismatch { .. }), "{e}");
}

/// MS-SMB2 has no notion of the client's address; QUIC migration must carry the SMB
/// connection, session and open across a new client port (RFC 9000 9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebinding_mid_transfer_keeps_the_session() {
    const SIZE: usize = 256 << 20;
    let srv = start_with(EncryptPolicy::Off, true).await;
    let qc = std::sync::Arc::new(quic_client(ServerTrust::Pin(srv.pin)));
    let conn = qc.connect(srv.quic.unwrap(), "localhost").await.unwrap();
    let client = Client::connect(
        conn,
        ClientConfig {
            transport_security: true,
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    let session_id = session.id();
    let tree = session.tree_connect("share").await.unwrap();
    let data = Bytes::from(pattern(SIZE, 8));

    // Upload, rebinding once a quarter is written.
    let first_port = qc.local_addr().unwrap().port();
    let f = tree
        .open("m.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    let mut at = 0usize;
    let mut rebound = false;
    let src = data.clone();
    let qc2 = qc.clone();
    upload(
        &f,
        0,
        TransferOptions::default(),
        |max| {
            let end = (at + max).min(SIZE);
            let b = src.slice(at..end);
            at = end;
            Ok(b)
        },
        |done| {
            if !rebound && done > (SIZE / 4) as u64 {
                rebound = true;
                let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                qc2.rebind(s).unwrap();
            }
        },
    )
    .await
    .unwrap();
    assert!(rebound);
    let second_port = qc.local_addr().unwrap().port();
    assert_ne!(first_port, second_port, "the client socket did not change");
    f.close().await.unwrap();
    assert!(std::fs::read(srv.share_path().join("m.bin")).unwrap() == data[..]);

    // Download, rebinding again half way.
    let f = tree.open("m.bin", &OpenOptions::read()).await.unwrap();
    let mut got = Vec::with_capacity(SIZE);
    let mut rebound = false;
    download(&f, 0, SIZE as u64, TransferOptions::default(), |b| {
        got.extend_from_slice(b);
        if !rebound && got.len() > SIZE / 2 {
            rebound = true;
            qc.rebind(std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
                .unwrap();
        }
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(got.len(), SIZE);
    assert!(rebound);
    assert_ne!(qc.local_addr().unwrap().port(), second_port);
    assert!(got == data[..], "downloaded bytes differ");
    f.close().await.unwrap();
    // Same SMB session throughout: it still answers, under its original id.
    assert_eq!(session.id(), session_id);
    tokio::time::timeout(Duration::from_secs(10), tree.stat("m.bin"))
        .await
        .unwrap()
        .unwrap();
    assert!(client.closed_reason().is_none());
}
