//! Issue 13: `smbq put` of a large file survives its TCP connection being cut mid-transfer.
//! A proxy between the CLI and the server drops both sockets once 20 MiB went through; the CLI
//! logs on again naming its old session, reclaims its durable open and finishes the upload
//! without starting over (the server logs the reclaim), and the file arrives whole.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::process::Command as Proc;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::raw::{Server, USER};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const BIN: &str = env!("CARGO_BIN_EXE_smbq");
const PASSWORD: &str = "put-reconnect-test-password";
const CUT_AFTER: usize = 20 << 20;

/// Forwards every connection to `target`; the first is cut (both sockets dropped) once
/// `CUT_AFTER` bytes went from the client to the server. Counts the connections.
fn proxy(target: SocketAddr) -> (SocketAddr, Arc<AtomicUsize>) {
    let conns = Arc::new(AtomicUsize::new(0));
    let seen = conns.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            loop {
                let Ok((a, _)) = l.accept().await else { return };
                let first = seen.fetch_add(1, Ordering::SeqCst) == 0;
                tokio::spawn(async move {
                    let b = TcpStream::connect(target).await.unwrap();
                    let (mut ar, mut aw) = a.into_split();
                    let (mut br, mut bw) = b.into_split();
                    let up = async {
                        let mut buf = vec![0u8; 64 * 1024];
                        let mut sent = 0usize;
                        loop {
                            let n = ar.read(&mut buf).await.unwrap_or(0);
                            if n == 0 || bw.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                            sent += n;
                            if first && sent >= CUT_AFTER {
                                return;
                            }
                        }
                    };
                    let down = tokio::io::copy(&mut br, &mut aw);
                    // Whichever ends first ends both: the cut drops all four halves.
                    tokio::select! {
                        () = up => {}
                        _ = down => {}
                    }
                });
            }
        });
    });
    (rx.recv().unwrap(), conns)
}

#[test]
fn put_goes_on_after_the_connection_is_cut() {
    let srv = Server::start(PASSWORD, "", &[]);
    let (via, conns) = proxy(srv.addr);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("big.bin");
    let data: Vec<u8> = (0..32u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&local, &data).unwrap();
    let out = Proc::new(BIN)
        .arg("put")
        .arg(&local)
        .arg(format!("smb://{USER}@127.0.0.1/share/big.bin"))
        .args([
            "--transport",
            "tcp",
            "--tcp-port",
            &via.port().to_string(),
            "-q",
        ])
        .env("SMBQ_PASSWORD", PASSWORD)
        .env("HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env_remove("SMBQ_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "put failed: {stderr}");
    assert!(
        stderr.contains("reconnecting"),
        "no reconnect seen: {stderr}"
    );
    // It went on from what was confirmed, not from the start.
    let at: u64 = stderr
        .split("connection lost at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(at >= 8 << 20, "resumed from {at}");
    assert!(conns.load(Ordering::SeqCst) >= 2);
    let got = std::fs::read(srv.share_path("big.bin")).unwrap();
    assert!(
        got == data,
        "the uploaded file differs ({} bytes)",
        got.len()
    );
    let log = srv.stderr_lines().join("\n");
    assert!(log.contains("durable open reclaimed"), "{log}");
    srv.stop();
}
