//! Compounded requests against the real server: each compounded operation leaves the client
//! as exactly one frame (one round trip), signed and sealed alike, gives the same results as
//! the uncompounded path, and reports a failed CREATE's status for the whole compound.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use common::*;
use smbq_client::transfer::{TransferOptions, download};
use smbq_client::{Client, ClientConfig, OpenOptions, Tree};
use smbq_server::config::EncryptPolicy;
use smbq_transport::{ChunkWrite, IoFuture};
use smbq_wire::NtStatus;

/// Counts the SMB frames (4-byte length prefix, MS-SMB2 2.1) the client writes.
struct FrameCounter {
    inner: Box<dyn ChunkWrite>,
    frames: Arc<AtomicUsize>,
    /// Bytes of the current frame's body still to come.
    body_left: usize,
    prefix: Vec<u8>,
}

impl FrameCounter {
    fn count(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if self.body_left > 0 {
                let n = self.body_left.min(b.len());
                self.body_left -= n;
                b = &b[n..];
                continue;
            }
            let n = (4 - self.prefix.len()).min(b.len());
            self.prefix.extend_from_slice(&b[..n]);
            b = &b[n..];
            if self.prefix.len() == 4 {
                self.body_left =
                    u32::from_be_bytes(self.prefix[..4].try_into().unwrap()) as usize & 0x00FF_FFFF;
                self.prefix.clear();
                self.frames.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

impl ChunkWrite for FrameCounter {
    fn write_chunks<'a>(&'a mut self, chunks: &'a mut [Bytes]) -> IoFuture<'a, ()> {
        for c in chunks.iter() {
            let c = c.clone();
            self.count(&c);
        }
        self.inner.write_chunks(chunks)
    }

    fn shutdown(&mut self) -> IoFuture<'_, ()> {
        self.inner.shutdown()
    }
}

async fn counted_login(srv: &TestServer) -> (Client, Tree, Arc<AtomicUsize>) {
    let mut conn = smbq_transport::connect_tcp(srv.addr).await.unwrap();
    let frames = Arc::new(AtomicUsize::new(0));
    conn.writer = Box::new(FrameCounter {
        inner: conn.writer,
        frames: frames.clone(),
        body_left: 0,
        prefix: Vec::new(),
    });
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    let tree = session.tree_connect("share").await.unwrap();
    (client, tree, frames)
}

/// Frames sent while `f` ran.
async fn frames_of<T>(frames: &AtomicUsize, f: impl std::future::Future<Output = T>) -> (T, usize) {
    let before = frames.load(Ordering::SeqCst);
    let out = f.await;
    (out, frames.load(Ordering::SeqCst) - before)
}

async fn one_round_trip_each(encrypt: EncryptPolicy) {
    let srv = start(encrypt).await;
    let (_client, tree, frames) = counted_login(&srv).await;
    let share = srv.share_path();

    let small = pattern(3000, 1);
    let (meta, n) = frames_of(
        &frames,
        tree.write_small("small.bin", &OpenOptions::create_truncate(), &small),
    )
    .await;
    assert_eq!(n, 1, "CREATE+WRITE+CLOSE is one frame");
    assert!(!meta.unwrap().is_dir());
    assert_eq!(std::fs::read(share.join("small.bin")).unwrap(), small);

    let (got, n) = frames_of(
        &frames,
        tree.read_small("small.bin", &OpenOptions::read(), 64 * 1024),
    )
    .await;
    assert_eq!(n, 1, "CREATE+READ+CLOSE is one frame");
    let (meta, data) = got.unwrap().expect("fits");
    assert_eq!(meta.size, small.len() as u64);
    assert_eq!(&data[..], &small[..]);
    // Larger than asked for: the caller learns it has to read it the long way.
    let (got, _) = frames_of(
        &frames,
        tree.read_small("small.bin", &OpenOptions::read(), 1000),
    )
    .await;
    assert!(got.unwrap().is_none());

    // An empty file reads as empty, not as END_OF_FILE.
    tree.write_small("empty", &OpenOptions::create_truncate(), &[])
        .await
        .unwrap();
    let (meta, data) = tree
        .read_small("empty", &OpenOptions::read(), 4096)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((meta.size, data.len()), (0, 0));

    // CREATE+READ, then the rest: the first chunk is not asked for twice.
    let big = pattern(3 << 20, 2);
    put(&tree, "big.bin", &big).await;
    let ((file, first), n) = frames_of(&frames, async {
        tree.open_and_read("big.bin", &OpenOptions::read(), 1 << 20)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(n, 1, "CREATE+READ is one frame");
    assert_eq!(&first.unwrap()[..], &big[..1 << 20]);
    let mut out = Vec::new();
    let (done, n) = frames_of(
        &frames,
        download(
            &file,
            0,
            big.len() as u64,
            TransferOptions {
                chunk: 1 << 20,
                depth: 1,
            },
            |b| {
                out.extend_from_slice(b);
                Ok(())
            },
        ),
    )
    .await;
    assert_eq!(done.unwrap(), big.len() as u64);
    assert_eq!(out, big);
    assert_eq!(
        n, 2,
        "two more READs of 1 MiB: the first came with the open"
    );
    file.close().await.unwrap();

    let (st, n) = frames_of(&frames, tree.stat("small.bin")).await;
    assert_eq!(n, 1, "stat is CREATE+CLOSE in one frame");
    assert_eq!(st.unwrap().size, small.len() as u64);

    let (r, n) = frames_of(&frames, tree.mkdir("d")).await;
    r.unwrap();
    assert_eq!(n, 1);
    for i in 0..5 {
        tree.write_small(&format!("d/f{i}"), &OpenOptions::create_truncate(), b"x")
            .await
            .unwrap();
    }
    let (list, n) = frames_of(&frames, tree.list("d")).await;
    let mut names: Vec<String> = list.unwrap().into_iter().map(|e| e.name).collect();
    names.sort();
    assert_eq!(names, ["f0", "f1", "f2", "f3", "f4"]);
    assert_eq!(
        n, 1,
        "CREATE+QUERY_DIRECTORY+QUERY_DIRECTORY (no more)+CLOSE in one frame"
    );
    // More entries than two answers hold: listed again on a kept handle, every entry once.
    std::fs::create_dir(share.join("big")).unwrap();
    let long = "n".repeat(100);
    for i in 0..1200 {
        std::fs::write(share.join(format!("big/{long}{i:04}")), b"").unwrap();
    }
    let (list, n) = frames_of(&frames, tree.list("big")).await;
    let mut names: Vec<String> = list.unwrap().into_iter().map(|e| e.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 1200);
    assert!(
        n >= 3,
        "{n} frames: the compound, then the open listing and its CLOSE"
    );

    let (r, n) = frames_of(&frames, tree.rename("small.bin", "moved.bin", false)).await;
    r.unwrap();
    assert_eq!(n, 1, "rename is CREATE+SET_INFO+CLOSE in one frame");
    assert!(share.join("moved.bin").exists() && !share.join("small.bin").exists());
    let (r, n) = frames_of(&frames, tree.remove("moved.bin")).await;
    r.unwrap();
    assert_eq!(n, 1);
    assert!(!share.join("moved.bin").exists());

    // A failed CREATE fails the compound with its own status (MS-SMB2 3.3.5.2.7.2).
    let (r, n) = frames_of(&frames, tree.stat("nope")).await;
    assert_eq!(n, 1);
    assert_eq!(
        r.unwrap_err().status(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let e = tree
        .read_small("nope", &OpenOptions::read(), 100)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(NtStatus::OBJECT_NAME_NOT_FOUND));
    let e = tree.rmdir("d").await.unwrap_err();
    assert_eq!(e.status(), Some(NtStatus::DIRECTORY_NOT_EMPTY));
    assert!(share.join("d").is_dir());
    // A READ on a directory fails, the open it went with does not.
    let (dir, read) = tree
        .open_and_read("d", &OpenOptions::read(), 100)
        .await
        .unwrap();
    assert!(dir.metadata().is_dir());
    assert!(read.is_err());
    dir.close().await.unwrap();
    // Every compound closed what it opened: the directory can go.
    for i in 0..5 {
        tree.remove(&format!("d/f{i}")).await.unwrap();
    }
    tree.rmdir("d").await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compounds_are_one_round_trip_signed() {
    one_round_trip_each(EncryptPolicy::Off).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compounds_are_one_round_trip_sealed() {
    one_round_trip_each(EncryptPolicy::Required).await;
}
