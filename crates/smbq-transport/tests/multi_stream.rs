//! The quinn listener's gate for smbq's multi-stream extension (docs/multistream.md 4): no
//! data stream before the SMB layer grants them, at most the granted number at once after,
//! streams replaced without limit over time, and a flood of opens that leaves other
//! connections alone. smbq's own `QuicClient` and its opener on one side, the listener's
//! `Connection` and gate on the other.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use smbq_transport::{Connection, DataStream, QuicSettings, StreamGate};

/// A listener granting up to `max_streams`, a connected client, and both ends' handles.
async fn connected(
    max_streams: u16,
) -> (
    smbq_transport::QuicListener,
    Connection,
    Connection,
    smbq_transport::QuicClient,
) {
    let cert = server_cert("files.test");
    let store = smbq_transport::CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(
        store,
        smbq_transport::ClientAuth::Off,
        QuicSettings {
            max_streams,
            ..test_settings()
        },
    );
    let addr = listener.local_addr().unwrap();
    let client = client_for(addr, client_cfg(trusting(&[&cert])));
    let mut conn = within(client.connect(addr, "files.test")).await.unwrap();
    // The server sees the control stream once it carries bytes.
    conn.writer
        .write_chunks(&mut [Bytes::from_static(b"hello")])
        .await
        .unwrap();
    let mut server = within(listener.accept()).await.unwrap().unwrap();
    assert_eq!(read_n(server.reader.as_mut(), 5).await, b"hello");
    (listener, conn, server, client)
}

/// Echoes one data stream until its end, then finishes it; returns the bytes echoed.
fn echo_stream(s: DataStream) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(echo(Connection {
        reader: s.reader,
        writer: s.writer,
        peer: "127.0.0.1:1".parse().unwrap(),
        local: "127.0.0.1:1".parse().unwrap(),
        kind: smbq_transport::TransportKind::Quic,
        gate: None,
        opener: None,
        path: None,
        client_cert: None,
    }))
}

/// One round trip on a client data stream, then its end in both directions.
async fn round_trip_and_finish(mut s: DataStream, payload: &[u8]) {
    s.writer
        .write_chunks(&mut [Bytes::copy_from_slice(payload)])
        .await
        .unwrap();
    assert_eq!(
        within(read_n(s.reader.as_mut(), payload.len())).await,
        payload
    );
    s.writer.shutdown().await.unwrap();
    assert_eq!(
        within(read_to_end(s.reader.as_mut())).await,
        Some(Vec::new())
    );
}

#[tokio::test]
async fn no_data_stream_before_the_grant_and_at_most_the_granted_number_after() {
    let (_listener, mut conn, mut server, _client) = connected(8).await;
    let opener = conn
        .opener
        .clone()
        .expect("a quinn client can open streams");
    let mut gate = server.gate.take().expect("max_streams > 0 gives a gate");
    assert_eq!(gate.limit(), 8);

    // Before the grant the QUIC limit is one stream: the open waits.
    let early = tokio::spawn({
        let o = opener.clone();
        async move { o.open().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !early.is_finished(),
        "a data stream opened before the grant"
    );

    gate.grant(2);
    let first = within(early).await.unwrap().unwrap();
    let second = within(opener.open()).await.unwrap();
    // Two granted, two open: a third waits.
    let third = tokio::spawn({
        let o = opener.clone();
        async move { o.open().await }
    });

    let mut first = first;
    first
        .writer
        .write_chunks(&mut [Bytes::from_static(b"one")])
        .await
        .unwrap();
    let mut second = second;
    second
        .writer
        .write_chunks(&mut [Bytes::from_static(b"two")])
        .await
        .unwrap();
    let a = within(gate.accept()).await.unwrap();
    let b = within(gate.accept()).await.unwrap();
    let (ea, eb) = (echo_stream(a), echo_stream(b));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!third.is_finished(), "more data streams than granted");

    // The control stream still works beside them.
    conn.writer
        .write_chunks(&mut [Bytes::from_static(b"ctl")])
        .await
        .unwrap();
    assert_eq!(within(read_n(server.reader.as_mut(), 3)).await, b"ctl");

    // Ending one stream in both directions frees its place.
    assert_eq!(within(read_n(first.reader.as_mut(), 3)).await, b"one");
    first.writer.shutdown().await.unwrap();
    assert_eq!(
        within(read_to_end(first.reader.as_mut())).await,
        Some(Vec::new())
    );
    assert_eq!(within(ea).await.unwrap(), 3);
    let third = within(third).await.unwrap().unwrap();
    let (echoed, ()) = tokio::join!(
        echo_after_accept(&mut gate),
        round_trip_and_finish(third, b"three")
    );
    assert_eq!(echoed, 5);

    assert_eq!(within(read_n(second.reader.as_mut(), 3)).await, b"two");
    second.writer.shutdown().await.unwrap();
    assert_eq!(within(eb).await.unwrap(), 3);
}

/// A gate fed in the background: accepts the next stream and echoes it.
async fn echo_after_accept(gate: &mut Box<dyn StreamGate>) -> usize {
    let s = within(gate.accept()).await.unwrap();
    echo_stream(s).await.unwrap()
}

/// Streams can be replaced without end, one at a time, and the connection stays bounded by
/// the grant: 1000 opened, used and closed in turn with one granted.
#[tokio::test]
async fn a_thousand_streams_in_turn_are_served_one_at_a_time() {
    let (_listener, conn, mut server, _client) = connected(1).await;
    let opener = conn.opener.clone().unwrap();
    let mut gate = server.gate.take().unwrap();
    gate.grant(1);
    let served = tokio::spawn(async move {
        let mut n = 0;
        while let Some(s) = gate.accept().await {
            echo_stream(s).await.unwrap();
            n += 1;
        }
        n
    });
    for i in 0..1000u32 {
        let s = within(opener.open()).await.unwrap();
        round_trip_and_finish(s, &i.to_le_bytes()).await;
    }
    // The control stream is untouched by all of it.
    let mut conn = conn;
    conn.writer
        .write_chunks(&mut [Bytes::from_static(b"still here")])
        .await
        .unwrap();
    assert_eq!(
        within(read_n(server.reader.as_mut(), 10)).await,
        b"still here"
    );
    drop((conn, server));
    assert_eq!(within(served).await.unwrap(), 1000);
}

/// 1000 opens at once against a grant of 4: four streams exist, the rest wait at the
/// client (QUIC's limit), and another client's connection is served meanwhile.
#[tokio::test]
async fn a_flood_of_opens_gets_only_the_granted_streams() {
    let (listener, conn, mut server, client) = connected(4).await;
    let opener = conn.opener.clone().unwrap();
    let mut gate = server.gate.take().unwrap();
    gate.grant(4);
    let mut opens = Vec::new();
    for _ in 0..1000 {
        let o = opener.clone();
        opens.push(tokio::spawn(async move {
            let mut s = o.open().await?;
            s.writer
                .write_chunks(&mut [Bytes::from_static(b"x")])
                .await?;
            // Held open: the stream keeps its place.
            std::future::pending::<()>().await;
            Ok::<_, std::io::Error>(s)
        }));
    }
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(within(gate.accept()).await.unwrap());
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(500), gate.accept())
            .await
            .is_err(),
        "a fifth stream reached the server"
    );
    // Another connection is served as usual.
    let addr = listener.local_addr().unwrap();
    let mut other = within(client.connect(addr, "files.test")).await.unwrap();
    let echoed = accept_and_echo(listener.accept());
    let payload = pattern(10_000, 9);
    let (echoed, ()) = tokio::join!(echoed, echo_round_trip(&mut other, &payload));
    drop(other);
    assert_eq!(within(echoed).await.unwrap(), payload.len());
    for o in opens {
        o.abort();
    }
    drop((held, conn, server));
}

#[tokio::test]
async fn max_streams_zero_gives_no_gate_and_tcp_no_opener() {
    let (_listener, conn, server, _client) = connected(0).await;
    assert!(server.gate.is_none());
    assert!(conn.opener.is_some());
    let tcp = smbq_transport::tcp::TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = tcp.local_addr().unwrap();
    let (c, s) = tokio::join!(smbq_transport::connect_tcp(addr), tcp.accept());
    assert!(c.unwrap().opener.is_none());
    assert!(s.unwrap().gate.is_none());
}
