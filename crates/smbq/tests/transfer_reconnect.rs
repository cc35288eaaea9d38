//! Issue 13: `smbq put` and `smbq get` of a large file survive their TCP connection being cut
//! mid-transfer. A proxy between the CLI and the server drops both sockets once 20 MiB went
//! through; the CLI connects again, naming its old session, and goes on from what was
//! confirmed instead of starting over: an upload reclaims its durable open (the server logs
//! the reclaim), a download opens the file again. The file arrives whole either way.
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
/// `CUT_AFTER` bytes went from the client to the server (`down`: from the server to the
/// client). Counts the connections.
fn proxy(target: SocketAddr, down: bool) -> (SocketAddr, Arc<AtomicUsize>) {
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
                    let (ar, aw) = a.into_split();
                    let (br, bw) = b.into_split();
                    let (cut_up, cut_down) = (first && !down, first && down);
                    // Whichever direction ends first ends both: the cut drops all four halves.
                    tokio::select! {
                        () = pump(ar, bw, cut_up) => {}
                        () = pump(br, aw, cut_down) => {}
                    }
                });
            }
        });
    });
    (rx.recv().unwrap(), conns)
}

/// Copies `from` to `to` until either ends, or until `CUT_AFTER` bytes when `cut`.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut sent = 0usize;
    loop {
        let n = from.read(&mut buf).await.unwrap_or(0);
        if n == 0 || to.write_all(&buf[..n]).await.is_err() {
            return;
        }
        sent += n;
        if cut && sent >= CUT_AFTER {
            return;
        }
    }
}

fn pattern() -> Vec<u8> {
    (0..32u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// `smbq ARGS...` against `via`, as `USER`, in `dir`; returns (success, stderr).
fn cli(dir: &std::path::Path, via: SocketAddr, args: &[&str]) -> (bool, String) {
    let out = Proc::new(BIN)
        .args(args)
        .args([
            "--transport",
            "tcp",
            "--tcp-port",
            &via.port().to_string(),
            "-q",
        ])
        .env("SMBQ_PASSWORD", PASSWORD)
        .env("HOME", dir)
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .env_remove("SMBQ_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Where the CLI said the connection broke.
fn lost_at(stderr: &str) -> u64 {
    stderr
        .split("connection lost at ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no reconnect seen: {stderr}"))
}

#[test]
fn get_goes_on_after_the_connection_is_cut() {
    let data = pattern();
    let srv = Server::start(PASSWORD, "", &[("big.bin", &data)]);
    let (via, conns) = proxy(srv.addr, true);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("copy.bin");
    let url = format!("smb://{USER}@127.0.0.1/share/big.bin");
    let (ok, stderr) = cli(dir.path(), via, &["get", &url, local.to_str().unwrap()]);
    assert!(ok, "get failed: {stderr}");
    assert!(lost_at(&stderr) >= 8 << 20, "{stderr}");
    assert!(conns.load(Ordering::SeqCst) >= 2);
    let got = std::fs::read(&local).unwrap();
    assert!(
        got == data,
        "the downloaded file differs ({} bytes)",
        got.len()
    );
    srv.stop();
}

#[test]
fn put_goes_on_after_the_connection_is_cut() {
    let srv = Server::start(PASSWORD, "", &[]);
    let (via, conns) = proxy(srv.addr, false);
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("big.bin");
    let data = pattern();
    std::fs::write(&local, &data).unwrap();
    let url = format!("smb://{USER}@127.0.0.1/share/big.bin");
    let (ok, stderr) = cli(dir.path(), via, &["put", local.to_str().unwrap(), &url]);
    assert!(ok, "put failed: {stderr}");
    assert!(
        stderr.contains("reconnecting"),
        "no reconnect seen: {stderr}"
    );
    // It went on from what was confirmed, not from the start.
    let at = lost_at(&stderr);
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
