//! Altered messages are refused both ways. A response altered on the way (MS-SMB2 3.2.5.1.3):
//! one bit flipped inside a signed READ response, large (verified in place, the frame owning
//! its buffer) or small (verified through a copy), fails the READ with an integrity error,
//! never returns the altered data. A request altered on the way (MS-SMB2 3.3.5.2.4): a bit
//! flipped inside a signed WRITE, large or small, is answered ACCESS_DENIED and nothing of it
//! reaches the file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{Bytes, BytesMut};
use common::*;
use smbq_client::{Client, ClientConfig, Error, OpenOptions, Tree};
use smbq_server::config::EncryptPolicy;
use smbq_transport::{ChunkRead, ChunkWrite, IoFuture};
use smbq_wire::NtStatus;

/// Passes the stream through, flipping the lowest bit of the byte `flip_at` bytes after
/// it was armed (`usize::MAX`: disarmed).
struct Flipper {
    inner: Box<dyn ChunkRead>,
    flip_at: Arc<AtomicUsize>,
}

impl ChunkRead for Flipper {
    fn read_chunk(&mut self) -> IoFuture<'_, Option<Bytes>> {
        Box::pin(async move {
            let Some(chunk) = self.inner.read_chunk().await? else {
                return Ok(None);
            };
            let at = self.flip_at.load(Ordering::SeqCst);
            if at == usize::MAX {
                return Ok(Some(chunk));
            }
            if at >= chunk.len() {
                self.flip_at.store(at - chunk.len(), Ordering::SeqCst);
                return Ok(Some(chunk));
            }
            self.flip_at.store(usize::MAX, Ordering::SeqCst);
            let mut c = BytesMut::from(&chunk[..]);
            c[at] ^= 1;
            Ok(Some(c.freeze()))
        })
    }
}

/// The same on the sending side: flips a bit of the bytes written `flip_at` after arming.
struct WriteFlipper {
    inner: Box<dyn ChunkWrite>,
    flip_at: Arc<AtomicUsize>,
}

impl ChunkWrite for WriteFlipper {
    fn write_chunks<'a>(&'a mut self, chunks: &'a mut [Bytes]) -> IoFuture<'a, ()> {
        for c in chunks.iter_mut() {
            let at = self.flip_at.load(Ordering::SeqCst);
            if at == usize::MAX {
                break;
            }
            if at >= c.len() {
                self.flip_at.store(at - c.len(), Ordering::SeqCst);
                continue;
            }
            self.flip_at.store(usize::MAX, Ordering::SeqCst);
            let mut m = BytesMut::from(&c[..]);
            m[at] ^= 1;
            *c = m.freeze();
        }
        self.inner.write_chunks(chunks)
    }

    fn shutdown(&mut self) -> IoFuture<'_, ()> {
        self.inner.shutdown()
    }
}

async fn login_with_flipper(srv: &TestServer) -> (Client, Tree, Arc<AtomicUsize>) {
    let (client, tree, read_flip, _) = login_with_flippers(srv).await;
    (client, tree, read_flip)
}

async fn login_with_flippers(
    srv: &TestServer,
) -> (Client, Tree, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let mut conn = smbq_transport::connect_tcp(srv.addr).await.unwrap();
    let flip_at = Arc::new(AtomicUsize::new(usize::MAX));
    let write_flip = Arc::new(AtomicUsize::new(usize::MAX));
    conn.reader = Box::new(Flipper {
        inner: conn.reader,
        flip_at: flip_at.clone(),
    });
    conn.writer = Box::new(WriteFlipper {
        inner: conn.writer,
        flip_at: write_flip.clone(),
    });
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    assert!(session.signs());
    let tree = session.tree_connect("share").await.unwrap();
    (client, tree, flip_at, write_flip)
}

async fn flipped_read_fails(len: usize, flip: usize) {
    let srv = start(EncryptPolicy::Off).await;
    let data = pattern(len, 5);
    std::fs::write(srv.share_path().join("f.bin"), &data).unwrap();
    let (_client, tree, flip_at) = login_with_flipper(&srv).await;
    let f = tree.open("f.bin", &OpenOptions::read()).await.unwrap();
    // Untouched, the READ verifies and returns the file.
    assert_eq!(&f.read_at(0, len as u32).await.unwrap()[..], &data[..]);
    // One bit flipped inside the next response's data.
    flip_at.store(flip, Ordering::SeqCst);
    match f.read_at(0, len as u32).await {
        Err(Error::Integrity(_)) => {}
        other => panic!(
            "altered {len}-byte response accepted: {:?}",
            other.map(|b| b.len())
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_signed_response_altered_is_refused() {
    flipped_read_fails(1 << 20, 300_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_signed_response_altered_is_refused() {
    flipped_read_fails(2000, 1500).await;
}

async fn flipped_write_is_refused(len: usize, flip: usize) {
    let srv = start(EncryptPolicy::Off).await;
    let (_client, tree, _, write_flip) = login_with_flippers(&srv).await;
    let f = tree
        .open("w.bin", &OpenOptions::create_truncate())
        .await
        .unwrap();
    let data = Bytes::from(pattern(len, 9));
    assert_eq!(f.write_at(0, data.clone()).await.unwrap() as usize, len);
    let other = Bytes::from(pattern(len, 11));
    write_flip.store(flip, Ordering::SeqCst);
    let e = f.write_at(0, other).await.unwrap_err();
    assert_eq!(e.status(), Some(NtStatus::ACCESS_DENIED), "{e}");
    f.close().await.unwrap();
    assert_eq!(std::fs::read(srv.share_path().join("w.bin")).unwrap(), data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_signed_request_altered_is_refused() {
    // Frame header (4) + SMB2 header (64) + WRITE body (48): the flip lands in the data.
    flipped_write_is_refused(1 << 20, 200_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_signed_request_altered_is_refused() {
    flipped_write_is_refused(2000, 1000).await;
}
