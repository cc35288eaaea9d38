//! smbq's multi-stream extension end to end (docs/multistream.md): smbq's client against the
//! in-process server over QUIC. Negotiated on and off both ways, files moved over several data
//! streams at once, a lease break delivered on the control stream while a data stream is busy,
//! and misbehaving data streams (garbage, a control-only request, half a frame) that end only
//! their own connection or nothing at all.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use smbq_client::{CacheLimits, Client, ClientConfig, Tree};
use smbq_server::config::EncryptPolicy;
use smbq_transport::{
    Connection, QuicClient, QuicClientConfig, QuicSettings, ServerTrust, StreamOpener,
};

fn quic_settings(max_streams: u16) -> QuicSettings {
    QuicSettings {
        max_streams,
        ..QuicSettings::default()
    }
}

async fn quic_conn(srv: &TestServer) -> Connection {
    let qc = QuicClient::new(
        QuicClientConfig::new(ServerTrust::Pin(srv.pin)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    qc.connect(srv.quic.unwrap(), "localhost").await.unwrap()
}

/// A logged-on client asking for `streams` data streams, with the opener of its connection
/// kept aside (for tests that open raw streams beside the client's own).
async fn quic_tree(
    srv: &TestServer,
    streams: u16,
) -> (Client, Tree, Option<Arc<dyn StreamOpener>>) {
    let conn = quic_conn(srv).await;
    let opener = conn.opener.clone();
    let client = Client::connect(
        conn,
        ClientConfig {
            transport_security: true,
            data_streams: streams,
            ..ClientConfig::default()
        },
    )
    .await
    .unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    let tree = session.tree_connect("share").await.unwrap();
    (client, tree, opener)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_move_over_several_data_streams_at_once() {
    let srv = start_quic_with(EncryptPolicy::Off, Some(quic_settings(8))).await;
    let (client, tree, _) = quic_tree(&srv, 4).await;
    assert_eq!(client.negotiated().data_streams, 4);
    let files: Vec<(String, Vec<u8>)> = (0..6u8)
        .map(|i| {
            (
                format!("f{i}.bin"),
                pattern((1 << 20) + usize::from(i) * 4099, i),
            )
        })
        .collect();
    let puts: Vec<_> = files
        .iter()
        .map(|(name, data)| {
            let (tree, name, data) = (tree.clone(), name.clone(), data.clone());
            tokio::spawn(async move { put(&tree, &name, &data).await })
        })
        .collect();
    for p in puts {
        p.await.unwrap();
    }
    let gets: Vec<_> = files
        .iter()
        .map(|(name, _)| {
            let (tree, name) = (tree.clone(), name.clone());
            tokio::spawn(async move { get(&tree, &name).await })
        })
        .collect();
    let mut got = Vec::new();
    for g in gets {
        got.push(g.await.unwrap());
    }
    for ((name, data), got) in files.iter().zip(got) {
        assert!(got == *data, "{name} came back different");
        assert_eq!(std::fs::read(srv.share_path().join(name)).unwrap(), *data);
    }
    let streams = client.data_streams().await;
    assert!(
        (2..=4).contains(&streams),
        "six files over four granted streams opened {streams}"
    );
    let list = tree.list("").await.unwrap();
    assert_eq!(list.len(), files.len());
}

/// Old server (max_streams 0), client without the offer, and TCP: one stream, all working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_extension_on_either_side_one_stream_serves() {
    let data = pattern(300_000, 3);
    let old = start_quic_with(EncryptPolicy::Off, Some(quic_settings(0))).await;
    let (client, tree, _) = quic_tree(&old, 4).await;
    assert_eq!(client.negotiated().data_streams, 0);
    put(&tree, "a.bin", &data).await;
    assert_eq!(get(&tree, "a.bin").await, data);
    assert_eq!(client.data_streams().await, 0);

    let new = start_quic_with(EncryptPolicy::Off, Some(quic_settings(8))).await;
    let (client, tree, _) = quic_tree(&new, 0).await;
    assert_eq!(client.negotiated().data_streams, 0);
    put(&tree, "b.bin", &data).await;
    assert_eq!(get(&tree, "b.bin").await, data);
    assert_eq!(client.data_streams().await, 0);

    let (client, _session, tree) = login(
        &new,
        ClientConfig {
            data_streams: 4,
            ..ClientConfig::default()
        },
    )
    .await;
    assert_eq!(client.negotiated().data_streams, 0, "never over TCP");
    put(&tree, "c.bin", &data).await;
    assert_eq!(get(&tree, "c.bin").await, data);
}

/// A lease break goes on the control stream (docs/multistream.md 5.4) and its acknowledgment
/// follows, while the same connection's data stream carries a large read: the second
/// client's write is not held for the break timeout, and the first client's next read sees
/// the new bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_break_arrives_while_a_data_stream_is_busy() {
    let srv = start_quic_with(EncryptPolicy::Off, Some(quic_settings(8))).await;
    let big = pattern(64 << 20, 5);
    std::fs::write(srv.share_path().join("big.bin"), &big).unwrap();
    std::fs::write(srv.share_path().join("notes.txt"), b"old notes").unwrap();
    let (client, tree, _) = quic_tree(&srv, 4).await;
    let cached = tree.cached(CacheLimits::default());
    assert_eq!(
        cached.read_all("notes.txt", 1 << 20).await.unwrap(),
        b"old notes"
    );
    assert!(cached.is_cached("notes.txt"));

    let reader = {
        let tree = tree.clone();
        tokio::spawn(async move {
            for _ in 0..5 {
                get(&tree, "big.bin").await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (_other, _s, writer) = login(&srv, ClientConfig::default()).await;
    let started = Instant::now();
    put(&writer, "notes.txt", b"new notes, longer").await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the write waited {:?} for the break",
        started.elapsed()
    );
    // The break (no acknowledgment is awaited for R) reaches the cache on the control stream.
    let deadline = Instant::now() + Duration::from_secs(10);
    while cached.is_cached("notes.txt") {
        assert!(Instant::now() < deadline, "the lease break never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        !reader.is_finished(),
        "the bulk read ended before the break: not a busy stream"
    );
    assert_eq!(
        cached.read_all("notes.txt", 1 << 20).await.unwrap(),
        b"new notes, longer"
    );
    reader.await.unwrap();
    assert!(client.data_streams().await >= 1);
    assert!(client.closed_reason().is_none());
}

/// Raw bytes on a data stream opened beside the client's own: `wire` on it ends the client's
/// whole connection (docs/multistream.md 8), never another one.
async fn bad_data_stream_ends_only_its_connection(wire: Vec<u8>) {
    let srv = start_quic_with(EncryptPolicy::Off, Some(quic_settings(8))).await;
    let (client, tree, opener) = quic_tree(&srv, 4).await;
    let (bystander, _s, other_tree) = login(&srv, ClientConfig::default()).await;
    put(&tree, "x.bin", b"before").await;
    // The client opened at most two of its four streams (TREE_CONNECT, one file).
    let mut raw = opener.unwrap().open().await.unwrap();
    raw.writer
        .write_chunks(&mut [Bytes::from(wire)])
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while client.closed_reason().is_none() {
        assert!(
            Instant::now() < deadline,
            "the connection survived the violation"
        );
        let _ = tree.stat("x.bin").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(tree.stat("x.bin").await.is_err());
    put(&other_tree, "y.bin", b"after").await;
    assert_eq!(get(&other_tree, "y.bin").await, b"after");
    assert!(bystander.closed_reason().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_a_data_stream_ends_its_connection_only() {
    // A frame header announcing 8 bytes of something that is not SMB2.
    bad_data_stream_ends_only_its_connection(vec![0, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_frame_on_a_data_stream_ends_its_connection_only() {
    bad_data_stream_ends_only_its_connection(vec![0, 0xFF, 0xFF, 0xFF, 0xFE]).await;
}

/// Half a frame, then silence: that stream waits, the connection's other streams go on, and
/// the stalled stream holds no more than the frame's announced size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_a_frame_then_silence_stalls_only_that_stream() {
    let srv = start_quic_with(EncryptPolicy::Off, Some(quic_settings(8))).await;
    let (client, tree, opener) = quic_tree(&srv, 4).await;
    let mut raw = opener.unwrap().open().await.unwrap();
    let mut half = vec![0, 0, 0x10, 0];
    half.extend_from_slice(&[0xFE, b'S', b'M', b'B']);
    half.resize(2000, 0);
    raw.writer
        .write_chunks(&mut [Bytes::from(half)])
        .await
        .unwrap();
    let data = pattern(2 << 20, 8);
    put(&tree, "z.bin", &data).await;
    assert_eq!(get(&tree, "z.bin").await, data);
    assert!(client.closed_reason().is_none());
    drop(raw);
}
