//! The client against the real smbq server (in-process, PosixVfs on a temp dir) over loopback
//! TCP: every operation, each dialect, cipher and signing algorithm, many requests in flight,
//! cancellation, and the SMB1 first message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::*;
use smbq_client::{Client, ClientConfig, EncryptionPolicy, Error, OpenOptions};
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_server::config::EncryptPolicy;
use smbq_wire::{Dialect, NtStatus};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_operations_round_trip() {
    let srv = start(EncryptPolicy::Off).await;
    let (client, session, tree) = login(&srv, ClientConfig::default()).await;
    assert_eq!(client.negotiated().dialect, Dialect::SMB3_1_1);
    assert!(session.signs(), "3.1.1 client signs by default");

    let data = pattern(9 << 20, 3);
    tree.mkdir("dir").await.unwrap();
    put(&tree, "dir/big.bin", &data).await;
    assert_eq!(
        std::fs::read(srv.share_path().join("dir/big.bin")).unwrap(),
        data
    );
    assert_eq!(get(&tree, "dir\\big.bin").await, data);

    let st = tree.stat("dir/big.bin").await.unwrap();
    assert_eq!(st.size, data.len() as u64);
    assert!(!st.is_dir());
    assert!(tree.stat("dir").await.unwrap().is_dir());

    let names: Vec<String> = tree
        .list("dir")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec!["big.bin".to_string()]);

    tree.rename("dir/big.bin", "dir/moved.bin", false)
        .await
        .unwrap();
    assert!(srv.share_path().join("dir/moved.bin").exists());
    assert!(!tree.exists("dir/big.bin").await.unwrap());

    let e = tree.rmdir("dir").await.unwrap_err();
    assert_eq!(e.status(), Some(NtStatus::DIRECTORY_NOT_EMPTY));
    tree.remove("dir/moved.bin").await.unwrap();
    tree.rmdir("dir").await.unwrap();
    assert!(!srv.share_path().join("dir").exists());

    let e = tree.stat("nope").await.unwrap_err();
    assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND));
    let e = session.tree_connect("nosuchshare").await.err().unwrap();
    assert_eq!(e.status(), Some(NtStatus::BAD_NETWORK_NAME));

    let shares = session.shares().await.unwrap();
    let share = shares
        .iter()
        .find(|s| s.name == "share")
        .expect("share listed");
    assert_eq!(share.comment, "test share");
    assert!(shares.iter().any(|s| s.name == "IPC$"));

    session.logoff().await.unwrap();
    let t = std::time::Instant::now();
    client.close(Duration::from_secs(10)).await;
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "close waited for the timeout"
    );
    assert!(client.closed_reason().is_some());
}

/// LOCK through `File::lock`: a lock taken on one open refuses an overlapping one on another
/// (MS-SMB2 3.3.5.14, STATUS_LOCK_NOT_GRANTED with FAIL_IMMEDIATELY) and is released by its
/// unlock; a shared lock lets another shared one in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_conflict_between_opens_until_unlocked() {
    use smbq_wire::lock::{LockElement, lock_flags as lf};
    let srv = start(EncryptPolicy::Off).await;
    let (_client, _session, tree) = login(&srv, ClientConfig::default()).await;
    put(&tree, "l.bin", &pattern(4096, 1)).await;
    let both = OpenOptions {
        share: 7,
        ..OpenOptions::create_keep()
    };
    let a = tree.open("l.bin", &both).await.unwrap();
    let b = tree.open("l.bin", &both).await.unwrap();
    let el = |offset, flags| LockElement {
        offset,
        length: 10,
        flags,
    };
    let excl = lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY;
    a.lock(&[el(0, excl)]).await.unwrap();
    let e = b.lock(&[el(5, excl)]).await.err().unwrap();
    assert_eq!(e.status(), Some(NtStatus::LOCK_NOT_GRANTED));
    b.lock(&[el(10, excl)]).await.unwrap(); // no overlap
    a.lock(&[el(0, lf::UNLOCK)]).await.unwrap();
    b.lock(&[el(0, excl)]).await.unwrap(); // a's range is free again
    b.lock(&[el(0, lf::UNLOCK), el(10, lf::UNLOCK)])
        .await
        .unwrap();
    let shared = lf::SHARED | lf::FAIL_IMMEDIATELY;
    a.lock(&[el(100, shared)]).await.unwrap();
    b.lock(&[el(100, shared)]).await.unwrap();
    a.close().await.unwrap();
    b.close().await.unwrap();
}

/// The whole connect-and-login sequence is `Send`, so it can run in a spawned task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_runs_in_a_spawned_task() {
    let srv = start(EncryptPolicy::Off).await;
    let addr = srv.addr;
    let tree = tokio::spawn(async move {
        let conn = smbq_transport::connect_tcp(addr).await.unwrap();
        let client = Client::connect(conn, ClientConfig::default())
            .await
            .unwrap();
        let session = client.login(USER, "", PASSWORD).await.unwrap();
        session.tree_connect("share").await.unwrap()
    })
    .await
    .unwrap();
    assert!(tree.list("").await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_logon_failure() {
    let srv = start(EncryptPolicy::Off).await;
    let conn = smbq_transport::connect_tcp(srv.addr).await.unwrap();
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    let e = client.login(USER, "", "wrong").await.err().unwrap();
    assert_eq!(e.status(), Some(NtStatus::LOGON_FAILURE));
    assert!(e.to_string().contains("NT_STATUS_LOGON_FAILURE"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cipher_and_signing_algorithm() {
    let srv = start(EncryptPolicy::Required).await;
    for cipher in [
        Cipher::Aes128Ccm,
        Cipher::Aes128Gcm,
        Cipher::Aes256Ccm,
        Cipher::Aes256Gcm,
    ] {
        let cfg = ClientConfig {
            ciphers: vec![cipher],
            ..ClientConfig::default()
        };
        let (client, session, tree) = login(&srv, cfg).await;
        assert_eq!(client.negotiated().cipher, Some(cipher));
        assert!(session.encrypts(), "server requires encryption");
        let data = pattern(3 << 20, cipher as u8);
        put(&tree, "c.bin", &data).await;
        assert_eq!(get(&tree, "c.bin").await, data);
    }
    let srv = start(EncryptPolicy::Off).await;
    for alg in [
        SigningAlgorithm::HmacSha256,
        SigningAlgorithm::AesCmac,
        SigningAlgorithm::AesGmac,
    ] {
        let cfg = ClientConfig {
            signing: vec![alg],
            ..ClientConfig::default()
        };
        let (client, session, tree) = login(&srv, cfg).await;
        assert_eq!(client.negotiated().signing, alg);
        assert!(session.signs() && !session.encrypts());
        let data = pattern(2 << 20, 9);
        put(&tree, "s.bin", &data).await;
        assert_eq!(get(&tree, "s.bin").await, data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dialect_and_client_required_encryption() {
    let srv = start(EncryptPolicy::Off).await;
    for d in ClientConfig::all_dialects() {
        let smb3 = d.is_smb3();
        let cfg = ClientConfig {
            dialects: vec![d],
            encryption: if smb3 {
                EncryptionPolicy::Required
            } else {
                EncryptionPolicy::Auto
            },
            ..ClientConfig::default()
        };
        let (client, session, tree) = login(&srv, cfg).await;
        assert_eq!(client.negotiated().dialect, d);
        assert_eq!(session.encrypts(), smb3, "{d:?}");
        let data = pattern(300_000, 1);
        put(&tree, "d.bin", &data).await;
        assert_eq!(get(&tree, "d.bin").await, data, "{d:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smb1_first_message_upgrades_to_311() {
    let srv = start(EncryptPolicy::Off).await;
    let cfg = ClientConfig {
        smb1_first: true,
        ..ClientConfig::default()
    };
    let (client, _session, tree) = login(&srv, cfg).await;
    assert_eq!(client.negotiated().dialect, Dialect::SMB3_1_1);
    put(&tree, "x", b"hello").await;
    assert_eq!(get(&tree, "x").await, b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_in_flight_and_cancelled_ones_return_credits() {
    let srv = start(EncryptPolicy::Off).await;
    let (_client, _session, tree) = login(&srv, ClientConfig::default()).await;
    let data = pattern(4 << 20, 5);
    put(&tree, "r.bin", &data).await;
    let f = tree.open("r.bin", &OpenOptions::read()).await.unwrap();

    // 256 concurrent 16 KiB reads on one connection, each checked against its offset.
    let mut set = tokio::task::JoinSet::new();
    for i in 0..256u64 {
        let f = f.clone();
        set.spawn(async move { (i, f.read_at(i * 16384, 16384).await.unwrap()) });
    }
    while let Some(r) = set.join_next().await {
        let (i, b) = r.unwrap();
        let at = (i * 16384) as usize;
        assert_eq!(&b[..], &data[at..at + 16384]);
    }

    // Abandon 64 one-MiB reads right after they are sent; then the window must still allow
    // as much as before (credits of cancelled requests come back with their responses).
    for _ in 0..4 {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..16u64 {
            let f = f.clone();
            set.spawn(async move { f.read_at(i << 18, 1 << 20).await });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
        set.abort_all();
        while set.join_next().await.is_some() {}
    }
    let all = tokio::time::timeout(Duration::from_secs(30), async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..64u64 {
            let f = f.clone();
            set.spawn(async move { f.read_at(i << 16, 1 << 16).await.map(|b| b.len()) });
        }
        let mut n = 0;
        while let Some(r) = set.join_next().await {
            n += r.unwrap().unwrap();
        }
        n
    })
    .await
    .expect("credits were not recovered after cancellation");
    assert_eq!(all, 64 << 16);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_gone_fails_pending_requests_cleanly() {
    let srv = start(EncryptPolicy::Off).await;
    let (client, _session, tree) = login(&srv, ClientConfig::default()).await;
    let data = pattern(1 << 20, 2);
    put(&tree, "g.bin", &data).await;
    srv.shutdown.cancel();
    let r = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match tree.stat("g.bin").await {
                Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => break e,
            }
        }
    })
    .await
    .expect("requests kept succeeding after shutdown");
    assert!(matches!(r, Error::Disconnected(_)), "{r}");
    assert!(client.closed_reason().is_some());
}
