//! `[quic] io_thread`: quinn's drivers on a thread of their own, named after the thread that
//! made the endpoint, carrying a transfer both ways, and gone once the endpoint and its
//! connections are (no thread left behind per client).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use smbq_transport::{QuicSettings, TransportKind};

/// Threads of this process whose name is `name`.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == name)
        .count()
}

// The name is short so that "<test thread>-q" fits the kernel's 15-byte thread names.
#[tokio::test(flavor = "current_thread")]
async fn quinn_io() {
    let me = std::thread::current().name().unwrap().to_string();
    let io_name = format!("{me}-q");
    assert!(io_name.len() <= 15, "{io_name}");
    assert_eq!(threads_named(&io_name), 0);
    let settings = QuicSettings {
        io_thread: true,
        ..test_settings()
    };
    let cert = server_cert("files.test");
    let store = smbq_transport::CertStore::new(vec![cert.entry(&["files.test"])]).unwrap();
    let listener = listen(store, smbq_transport::ClientAuth::Off, settings.clone());
    let addr = listener.local_addr().unwrap();
    let mut cfg = client_cfg(trusting(&[&cert]));
    cfg.settings = settings;
    let client = client_for(addr, cfg);
    // A thread takes its name once it runs, which may be after `spawn` returned.
    wait_for(
        &io_name,
        2,
        "one I/O thread for the listener, one for the client",
    )
    .await;

    let mut conn = within(client.connect(addr, "files.test")).await.unwrap();
    assert_eq!(conn.kind, TransportKind::Quic);
    let payload = pattern(3 << 20, 7);
    let server = accept_and_echo(listener.accept());
    let echoed = echo_round_trip(&mut conn, &payload);
    let (server, ()) = tokio::join!(server, echoed);
    drop(conn);
    assert_eq!(within(server).await.unwrap(), payload.len());

    drop(client);
    drop(listener);
    wait_for(&io_name, 0, "QUIC I/O threads outlived their endpoints").await;
}

async fn wait_for(name: &str, want: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let n = threads_named(name);
        if n == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: {n} threads named {name}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
