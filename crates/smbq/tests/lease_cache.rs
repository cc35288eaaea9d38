//! Issue 13: an RH lease saves round trips. The server runs in one network namespace, the
//! client library in another, joined by the project's link emulator at 20 ms round trip.
//! 100 stats and reads of one unchanged file through `CachedTree` send at most a few frames
//! (the counter is the client's own, checked against plain stats that send one each); then
//! a second client rewrites the file, the server breaks the first client's lease, and its
//! next read sees the new bytes.
//!
//! Needs root (CI runs as root), `/dev/net/tun` and iproute2, and does not skip.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smbq_client::{CacheLimits, Client, ClientConfig, OpenOptions, Tree};
use smbq_netem::{ADDR_B, Link, LinkSettings, in_namespace};

const PASSWORD: &str = "lease-cache-test-password";
const TCP_PORT: u16 = 47_446;
const FILE: &str = "notes.txt";

fn content(tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| tag.wrapping_add((i % 251) as u8))
        .collect()
}

async fn share(addr: SocketAddr, guid: u8) -> (Client, Tree) {
    let conn = smbq_transport::connect_tcp(addr).await.unwrap();
    let cfg = ClientConfig {
        client_guid: [guid; 16],
        ..ClientConfig::default()
    };
    let client = Client::connect(conn, cfg).await.unwrap();
    let session = client.login(common::raw::USER, "", PASSWORD).await.unwrap();
    let tree = session.tree_connect("share").await.unwrap();
    (client, tree)
}

#[test]
fn an_rh_lease_serves_repeated_stats_and_reads_and_a_change_breaks_it() {
    let pumps = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let one_way = LinkSettings {
        delay: Duration::from_millis(10),
        ..LinkSettings::default()
    };
    let link = pumps
        .block_on(Link::start(one_way.clone(), one_way))
        .expect("the link emulator (root, /dev/net/tun, iproute2)");

    let dir = tempfile::tempdir().unwrap();
    let share_dir = dir.path().join("share");
    std::fs::create_dir_all(&share_dir).unwrap();
    let first = content(1, 100 * 1024);
    std::fs::write(share_dir.join(FILE), &first).unwrap();
    let state = dir.path().join("state");
    let addr_b = ADDR_B.to_string();
    let tcp_port = TCP_PORT.to_string();
    let (server, server_log) = common::serve_in_namespace(
        link.ns_b(),
        &[
            share_dir.as_os_str(),
            "--listen".as_ref(),
            addr_b.as_ref(),
            "--tcp-port".as_ref(),
            tcp_port.as_ref(),
            "--quic-port".as_ref(),
            "0".as_ref(),
            "--state-dir".as_ref(),
            state.as_os_str(),
        ],
        PASSWORD,
    );

    // The client's sockets belong to namespace A: its runtime's threads start there.
    let rt = in_namespace(link.ns_a(), || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    })
    .unwrap();
    let addr = SocketAddr::from((ADDR_B, TCP_PORT));
    // Spawned, so it runs on those threads and not on this one (namespace of the test).
    let body = rt.spawn(async move {
        let (client, tree) = share(addr, 0x11).await;

        // Without the cache every stat is a round trip (one compound frame each).
        let before = client.frames_sent();
        for _ in 0..5 {
            assert_eq!(tree.stat(FILE).await.unwrap().size, first.len() as u64);
        }
        assert_eq!(client.frames_sent() - before, 5);

        let cached = tree.cached(CacheLimits::default());
        let before = client.frames_sent();
        let start = Instant::now();
        for i in 0..100 {
            if i % 2 == 0 {
                let m = cached.stat(FILE).await.unwrap();
                assert_eq!(m.size, first.len() as u64);
            } else {
                assert!(cached.read_all(FILE, 1 << 20).await.unwrap() == first);
            }
        }
        let frames = client.frames_sent() - before;
        let took = start.elapsed();
        eprintln!("100 cached stats and reads: {frames} frames, {took:?}");
        assert!(frames <= 3, "{frames} frames for 100 cached operations");
        // 100 round trips would take at least 2 s at this link's 20 ms.
        assert!(took < Duration::from_secs(1), "{took:?}");
        assert!(cached.is_cached(FILE));

        // Another client rewrites the file: the server breaks the lease (a write by another
        // key takes R), the cache lets go, and the next read asks again.
        let second = content(7, 60 * 1024);
        let (_other, writer) = share(addr, 0x22).await;
        let f = writer
            .open(FILE, &OpenOptions::create_truncate())
            .await
            .unwrap();
        f.write_at(0, Bytes::from(second.clone())).await.unwrap();
        f.close().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cached.is_cached(FILE) {
            assert!(Instant::now() < deadline, "the lease was never broken");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(cached.stat(FILE).await.unwrap().size, second.len() as u64);
        assert!(cached.read_all(FILE, 1 << 20).await.unwrap() == second);

        // And the new lease serves the new bytes from the cache again.
        let before = client.frames_sent();
        for _ in 0..20 {
            assert!(cached.read_all(FILE, 1 << 20).await.unwrap() == second);
        }
        assert_eq!(client.frames_sent() - before, 0);
        cached.close().await.unwrap();
    });
    rt.block_on(body).unwrap();

    drop(server);
    let log = server_log.join().unwrap().join("\n");
    assert!(!log.contains("panicked"), "{log}");
    drop(link);
}
