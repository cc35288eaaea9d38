//! SMB 3.1.1 compression between smbq's client and server (issue 36): every algorithm both
//! build round-trips WRITE and READ data over TCP (signed, and sealed) and QUIC, the server's
//! observer sees the compressed messages both ways, and data that does not compress goes out
//! as it is.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use parking_lot::Mutex;
use smbq_client::{Client, ClientConfig, EncryptionPolicy};
use smbq_compress::Algorithm;
use smbq_proto::observe::{CompressionEvent, Observer};
use smbq_server::EncryptPolicy;
use smbq_transport::{QuicClient, QuicClientConfig, ServerTrust};

#[derive(Debug, Default)]
struct Seen {
    sent: AtomicU64,
    received: AtomicU64,
    sent_plain: AtomicU64,
    sent_wire: AtomicU64,
    algorithms: Mutex<Vec<Algorithm>>,
}

impl Observer for Seen {
    fn compression(&self, c: &CompressionEvent) {
        if c.sent {
            self.sent.fetch_add(1, Ordering::Relaxed);
            self.sent_plain.fetch_add(c.plain_bytes, Ordering::Relaxed);
            self.sent_wire.fetch_add(c.wire_bytes, Ordering::Relaxed);
            if let Some(a) = c.algorithm {
                let mut v = self.algorithms.lock();
                if !v.contains(&a) {
                    v.push(a);
                }
            }
        } else {
            self.received.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn server(encrypt: EncryptPolicy, algs: &[Algorithm]) -> (TestServer, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let o = seen.clone();
    let algs = algs.to_vec();
    let srv = start_tuned(encrypt, move |e| {
        e.observer = o;
        e.compression = algs;
        // Loopback is faster than compressing: these tests want it done anyway.
        e.compress_adaptive = false;
    })
    .await;
    (srv, seen)
}

fn text(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        out.extend_from_slice(
            format!("line {i}: the quick brown fox jumps over the lazy dog\n").as_bytes(),
        );
        i += 1;
    }
    out.truncate(n);
    out
}

fn config(algs: &[Algorithm]) -> ClientConfig {
    ClientConfig {
        compression: algs.to_vec(),
        compress_adaptive: false,
        ..ClientConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_algorithm_round_trips_over_tcp() {
    for a in Algorithm::ALL
        .into_iter()
        .filter(|a| a.available() && a.is_general())
    {
        let (srv, seen) = server(EncryptPolicy::Off, &Algorithm::ALL).await;
        // The client offers this algorithm (and Pattern_V1): the server settles on it.
        let (client, _s, tree) = login(&srv, config(&[a, Algorithm::PatternV1])).await;
        // Both, in the server's order of preference (Pattern_V1 before MS-XCA's).
        let settled = client.negotiated().compression.algorithms().to_vec();
        assert_eq!(settled.len(), 2);
        assert!(settled.contains(&a) && settled.contains(&Algorithm::PatternV1));
        let data = text(3 << 20);
        put(&tree, "t.txt", &data).await;
        assert_eq!(
            std::fs::read(srv.share_path().join("t.txt")).unwrap(),
            data,
            "{a}"
        );
        assert_eq!(get(&tree, "t.txt").await, data, "{a}");
        let (sent, received) = (
            seen.sent.load(Ordering::Relaxed),
            seen.received.load(Ordering::Relaxed),
        );
        assert!(received >= 3, "{a}: {received} compressed WRITEs");
        assert!(sent >= 3, "{a}: {sent} compressed READ responses");
        assert_eq!(*seen.algorithms.lock(), vec![a]);
        let ratio = seen.sent_plain.load(Ordering::Relaxed) as f64
            / seen.sent_wire.load(Ordering::Relaxed) as f64;
        assert!(ratio > 3.0, "{a}: ratio {ratio}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_then_sealed_and_over_quic() {
    // Encryption required: each message compressed, then encrypted (MS-SMB2 3.1.4.4 before
    // 3.1.4.3), and decrypted, then decompressed.
    let (srv, seen) = server(
        EncryptPolicy::Required,
        &[Algorithm::Lz4, Algorithm::PatternV1],
    )
    .await;
    let cfg = ClientConfig {
        encryption: EncryptionPolicy::Required,
        ..config(&[Algorithm::Lz4, Algorithm::PatternV1])
    };
    let (_c, session, tree) = login(&srv, cfg).await;
    assert!(session.encrypts());
    let data = text(2 << 20);
    put(&tree, "sealed.txt", &data).await;
    assert_eq!(get(&tree, "sealed.txt").await, data);
    assert!(seen.sent.load(Ordering::Relaxed) > 0 && seen.received.load(Ordering::Relaxed) > 0);

    let before = seen.sent.load(Ordering::Relaxed);
    let qc = QuicClient::new(
        QuicClientConfig::new(ServerTrust::Pin(srv.pin)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let conn = qc.connect(srv.quic.unwrap(), "localhost").await.unwrap();
    let client = Client::connect(
        conn,
        ClientConfig {
            transport_security: true,
            ..config(&[Algorithm::Lz4, Algorithm::PatternV1])
        },
    )
    .await
    .unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    let tree = session.tree_connect("share").await.unwrap();
    let mut zeros_then_text = vec![0u8; 1 << 20];
    zeros_then_text.extend(text(1 << 20));
    put(&tree, "q.bin", &zeros_then_text).await;
    assert_eq!(get(&tree, "q.bin").await, zeros_then_text);
    assert!(seen.sent.load(Ordering::Relaxed) > before);
    // The first 1 MiB READ is all zeros: one Pattern_V1 payload says it.
    assert!(seen.algorithms.lock().contains(&Algorithm::PatternV1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_that_does_not_compress_goes_out_as_it_is() {
    let (srv, seen) = server(EncryptPolicy::Off, &[Algorithm::Lz4, Algorithm::PatternV1]).await;
    let (_c, _s, tree) = login(&srv, config(&[Algorithm::Lz4, Algorithm::PatternV1])).await;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let random: Vec<u8> = (0..(2 << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    put(&tree, "r.bin", &random).await;
    assert_eq!(get(&tree, "r.bin").await, random);
    assert_eq!(seen.sent.load(Ordering::Relaxed), 0);
    assert_eq!(seen.received.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_compressed_unless_both_ends_offer_it() {
    // The server has compression off: the client's offer gets no answer.
    let (srv, seen) = server(EncryptPolicy::Off, &[]).await;
    let (client, _s, tree) = login(&srv, config(&[Algorithm::Lz4])).await;
    assert!(!client.negotiated().compression.is_on());
    let data = text(1 << 20);
    put(&tree, "a.txt", &data).await;
    assert_eq!(get(&tree, "a.txt").await, data);
    // The client offers nothing: the server compresses nothing.
    let (srv2, seen2) = server(EncryptPolicy::Off, &Algorithm::ALL).await;
    let (client, _s, tree) = login(&srv2, ClientConfig::default()).await;
    assert!(!client.negotiated().compression.is_on());
    put(&tree, "b.txt", &data).await;
    assert_eq!(get(&tree, "b.txt").await, data);
    for s in [seen, seen2] {
        assert_eq!(
            s.sent.load(Ordering::Relaxed) + s.received.load(Ordering::Relaxed),
            0
        );
    }
}
