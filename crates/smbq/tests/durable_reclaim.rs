//! Issue 13, against the real binary with smbq's own client: a durable v2 open survives its
//! TCP connection being cut (a proxy between client and server drops both sockets mid-upload);
//! the client logs on again naming its old session, reclaims the open by its CreateGuid and
//! finishes the upload on the same handle; the server logs the reclaim and the file is whole.
//! And a durable open's RWH lease does not make other clients wait: the client
//! acknowledges the break at once.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::raw::{Server, USER, runtime};
use smbq_client::{Client, ClientConfig, OpenOptions};
use std::sync::{Arc, Mutex};

use smbq_wire::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

const PASSWORD: &str = "durable-reclaim-test-password";

/// A TCP proxy to `target` for one connection; sending on the returned channel drops both
/// sides at once, as a cut link followed by resets would.
async fn cuttable_proxy(target: SocketAddr) -> (SocketAddr, oneshot::Sender<()>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (cut, cut_rx) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let (mut a, _) = l.accept().await.unwrap();
        let mut b = TcpStream::connect(target).await.unwrap();
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut a, &mut b) => {}
            _ = cut_rx => {}
        }
    });
    (addr, cut)
}

/// The (command, flags) of each SMB2 message a client sends through it.
type Seen = Arc<Mutex<Vec<(u16, u32)>>>;

/// A TCP proxy to `target` for one connection that notes the command and header flags of
/// every message the client sends (frames are NetBIOS-length-prefixed; compounds followed by
/// NextCommand; anything else, such as a sealed frame, is forwarded unread).
async fn recording_proxy(target: SocketAddr) -> (SocketAddr, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let noted = seen.clone();
    tokio::spawn(async move {
        let (a, _) = l.accept().await.unwrap();
        let b = TcpStream::connect(target).await.unwrap();
        let (mut ar, mut aw) = a.into_split();
        let (mut br, mut bw) = b.into_split();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut br, &mut aw).await;
        });
        loop {
            let mut len = [0u8; 4];
            if ar.read_exact(&mut len).await.is_err() {
                return;
            }
            let n = u32::from_be_bytes(len) as usize;
            let mut msg = vec![0u8; n];
            if ar.read_exact(&mut msg).await.is_err() {
                return;
            }
            let mut at = 0;
            while msg.len() >= at + 24 && msg[at..at + 4] == *b"\xfeSMB" {
                let command = u16::from_le_bytes([msg[at + 12], msg[at + 13]]);
                let flags = u32::from_le_bytes(msg[at + 16..at + 20].try_into().unwrap());
                noted.lock().unwrap().push((command, flags));
                let next = u32::from_le_bytes(msg[at + 20..at + 24].try_into().unwrap());
                if next == 0 {
                    break;
                }
                at += next as usize;
            }
            if bw.write_all(&len).await.is_err() || bw.write_all(&msg).await.is_err() {
                return;
            }
        }
    });
    (addr, seen)
}

async fn connect(addr: SocketAddr, guid: [u8; 16]) -> Client {
    let conn = smbq_transport::connect_tcp(addr).await.unwrap();
    let cfg = ClientConfig {
        client_guid: guid,
        ..ClientConfig::default()
    };
    Client::connect(conn, cfg).await.unwrap()
}

/// A new client with ClientGuid `guid`, logged on and connected to the share.
async fn share(addr: SocketAddr, guid: [u8; 16]) -> smbq_client::Tree {
    let client = connect(addr, guid).await;
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    session.tree_connect("share").await.unwrap()
}

fn piece(i: u64) -> Bytes {
    Bytes::from(vec![(i % 251) as u8; 64 * 1024])
}

#[test]
fn an_upload_survives_a_cut_connection_by_reclaiming_its_durable_open() {
    let srv = Server::start(PASSWORD, "", &[]);
    runtime().block_on(async {
        let guid = [0x5a; 16];
        let (via, cut) = cuttable_proxy(srv.addr).await;
        let client = connect(via, guid).await;
        let session = client.login(USER, "", PASSWORD).await.unwrap();
        let tree = session.tree_connect("share").await.unwrap();
        let (file, handle) = tree
            .open_durable("big.bin", &OpenOptions::create_truncate())
            .await
            .unwrap();
        let handle = handle.expect("a durable handle under an RWH lease");
        assert!(
            handle.lease_key.is_some(),
            "the durable open holds no lease"
        );
        assert!(handle.timeout_ms >= 1000);
        for i in 0..8 {
            file.write_at(i * 64 * 1024, piece(i)).await.unwrap();
        }

        cut.send(()).unwrap();
        let old_session = session.id();
        // The client notices: its next request fails.
        let mut failed = false;
        for _ in 0..50 {
            if file.write_at(8 * 64 * 1024, piece(8)).await.is_err() {
                failed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(failed, "the cut connection kept working");
        drop(file);

        // Back on a new connection: the same user, naming the old session.
        let (via2, seen) = recording_proxy(srv.addr).await;
        let client2 = connect(via2, guid).await;
        let session2 = client2
            .login_replacing(USER, "", PASSWORD, old_session)
            .await
            .unwrap();
        let tree2 = session2.tree_connect("share").await.unwrap();
        let file = tree2.reclaim(&handle).await.unwrap();
        // The WRITE of piece 8 went out on the cut connection unanswered: sent again, it is
        // flagged as a replay; the ones after it are not.
        file.replay_writes_below(9 * 64 * 1024);
        for i in 8..16 {
            file.write_at(i * 64 * 1024, piece(i)).await.unwrap();
        }
        file.close().await.unwrap();
        let writes: Vec<u32> = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(c, _)| *c == Command::WRITE.0)
            .map(|(_, f)| *f & smbq_wire::header::flags::REPLAY_OPERATION)
            .collect();
        assert_eq!(writes.len(), 8, "{writes:?}");
        assert_ne!(writes[0], 0, "the resent WRITE is flagged as a replay");
        assert!(writes[1..].iter().all(|f| *f == 0), "{writes:?}");
    });
    let want: Vec<u8> = (0..16).flat_map(|i| piece(i).to_vec()).collect();
    let got = std::fs::read(srv.share_path("big.bin")).unwrap();
    assert!(got == want, "the file is whole ({} bytes)", got.len());
    let log = srv.stderr_lines().join("\n");
    assert!(log.contains("durable open kept for its client"), "{log}");
    assert!(log.contains("durable open reclaimed"), "{log}");
    srv.stop();
}

/// The client holds its lease only for durability: another client's open, which breaks the
/// lease's write caching, must not wait the 35 s break timeout, because the holder
/// acknowledges at once.
#[test]
fn a_durable_open_does_not_hold_up_other_clients() {
    let srv = Server::start(PASSWORD, "", &[("shared.txt", b"hello")]);
    runtime().block_on(async {
        let ta = share(srv.addr, [1; 16]).await;
        let (fa, handle) = ta
            .open_durable("shared.txt", &OpenOptions::read())
            .await
            .unwrap();
        assert!(handle.is_some_and(|h| h.lease_key.is_some()));
        let tb = share(srv.addr, [2; 16]).await;
        let start = Instant::now();
        let fb = tb.open("shared.txt", &OpenOptions::read()).await.unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the second open waited {:?} for the break",
            start.elapsed()
        );
        assert_eq!(&fa.read_at(0, 5).await.unwrap()[..], b"hello");
        fb.close().await.unwrap();
        fa.close().await.unwrap();
    });
    srv.stop();
}
