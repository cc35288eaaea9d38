//! Issue 10 item 1 against the real binary: a client holding only read access cannot empty a
//! file with CREATE's OVERWRITE, OVERWRITE_IF or SUPERSEDE, on a read-only share or while
//! another client's open denies write sharing; the file's bytes stay as they were. (The
//! stored-DACL case is covered by the handler tests in smbq-server, truncate_tests.rs.)
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

use smbq_client::{Client, ClientConfig, OpenOptions, Tree};
use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition;
use smbq_wire::fscc::access;

const PASSWORD: &str = "truncate-test-password";
const DATA: &[u8] = b"bytes a reader must not be able to destroy";

struct Server {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for share in ["rw", "ro"] {
            std::fs::create_dir_all(dir.path().join(share)).unwrap();
            std::fs::write(dir.path().join(share).join("f.txt"), DATA).unwrap();
        }
        let cfg = dir.path().join("smbq.toml");
        std::fs::write(
            &cfg,
            format!(
                "[share.ro]\npath = \"{}\"\nread_only = true\n",
                dir.path().join("ro").display()
            ),
        )
        .unwrap();
        let port = common::free_tcp_port();
        let (rw, state, port_s) = (
            dir.path().join("rw"),
            dir.path().join("state"),
            port.to_string(),
        );
        let args: Vec<&std::ffi::OsStr> = vec![
            rw.as_os_str(),
            "--config".as_ref(),
            cfg.as_os_str(),
            "--listen".as_ref(),
            "127.0.0.1".as_ref(),
            "--quic-port".as_ref(),
            "0".as_ref(),
            "--tcp-port".as_ref(),
            port_s.as_ref(),
            "--state-dir".as_ref(),
            state.as_os_str(),
        ];
        let (child, rx, _err) = common::spawn_serve(&args, |c| {
            c.env("SMBQ_USER", "tester").env("SMBQ_PASSWORD", PASSWORD);
        });
        let ready = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        assert!(
            ready.starts_with("smbq: listening"),
            "server did not start: {ready}"
        );
        Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
        }
    }

    fn bytes(&self, share: &str) -> Vec<u8> {
        std::fs::read(self.dir.path().join(share).join("f.txt")).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn tree(addr: SocketAddr, share: &str) -> Tree {
    let conn = smbq_transport::connect_tcp(addr).await.unwrap();
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    let session = client.login("tester", "", PASSWORD).await.unwrap();
    session.tree_connect(share).await.unwrap()
}

fn reader(disposition: CreateDisposition, share: u32) -> OpenOptions {
    OpenOptions {
        access: access::FILE_READ_DATA | access::SYNCHRONIZE,
        disposition,
        options: 0,
        share,
        attributes: 0,
    }
}

const TRUNCATING: [CreateDisposition; 3] = [
    CreateDisposition::OVERWRITE,
    CreateDisposition::OVERWRITE_IF,
    CreateDisposition::SUPERSEDE,
];
const SHARE_ALL: u32 =
    access::FILE_SHARE_READ | access::FILE_SHARE_WRITE | access::FILE_SHARE_DELETE;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_share_refuses_truncating_opens() {
    let srv = Server::start();
    let t = tree(srv.addr, "ro").await;
    for d in TRUNCATING {
        let e = t.open("f.txt", &reader(d, SHARE_ALL)).await.err();
        assert_eq!(
            e.and_then(|e| e.status()),
            Some(NtStatus::ACCESS_DENIED),
            "{d:?}"
        );
        assert_eq!(srv.bytes("ro"), DATA, "{d:?} changed the file");
    }
    // The same client may still read it.
    let f = t.open("f.txt", &OpenOptions::read()).await.unwrap();
    assert_eq!(&f.read_at(0, 4096).await.unwrap()[..], DATA);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_denying_write_sharing_keeps_its_data() {
    let srv = Server::start();
    let holder = tree(srv.addr, "share").await;
    let held = holder
        .open(
            "f.txt",
            &reader(CreateDisposition::OPEN, access::FILE_SHARE_READ),
        )
        .await
        .unwrap();
    let other = tree(srv.addr, "share").await;
    for d in TRUNCATING {
        let e = other.open("f.txt", &reader(d, SHARE_ALL)).await.err();
        assert_eq!(
            e.and_then(|e| e.status()),
            Some(NtStatus::SHARING_VIOLATION),
            "{d:?}"
        );
        assert_eq!(srv.bytes("rw"), DATA, "{d:?} changed the file");
    }
    held.close().await.unwrap();
    // With the holder gone a writer may overwrite, which shows the refusal was the sharing.
    let w = other
        .open("f.txt", &OpenOptions::create_truncate())
        .await
        .unwrap();
    w.close().await.unwrap();
    assert!(srv.bytes("rw").is_empty());
}
