//! Issue 12, against the real binary: a client that floods requests without reading until the
//! server stops reading it, then disconnects, must not keep its session, opens and share modes
//! alive. The server's backlog is full then, so it takes no more frames from the stream (the
//! end of the stream waits behind them) and its unsent responses never drain; the connection
//! must still end when the client is gone.
//!
//! What must be shown: while the hostile connection holds `TARGET` open (share read only), a
//! normal client cannot open it for writing (SHARING_VIOLATION); seconds after the hostile
//! client closes its socket, it can.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::{Duration, Instant};

use common::raw::{MIB, Raw, Server, Wrote, client_tree, runtime};
use smbq_client::OpenOptions;
use smbq_wire::NtStatus;
use smbq_wire::fscc::access;

const PASSWORD: &str = "flood-then-leave-test-password";
const TARGET: &str = "held-by-the-flooding-client.bin";
/// Writes that make no progress for this long mean the server stopped reading.
const STALL: Duration = Duration::from_secs(2);

#[test]
fn a_client_that_leaves_a_full_backlog_releases_its_opens() {
    let srv = Server::start(
        PASSWORD,
        &format!(
            "[limits]\nmax_pending_bytes = {}\nmax_in_flight = 64\nmax_read = {MIB}\n\
             max_write = {MIB}\n",
            MIB
        ),
        &[(TARGET, &[1u8; 4096][..])],
    );
    let mut raw = Raw::login(srv.addr, PASSWORD);
    let (file_id, _) = raw.open(
        TARGET,
        access::FILE_READ_DATA | access::FILE_READ_ATTRIBUTES | access::SYNCHRONIZE,
    );

    // Flood until the server stops reading (its backlog is full).
    raw.s
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let start = Instant::now();
    let mut progress = Instant::now();
    let mut pending: Vec<u8> = Vec::new();
    let mut written = 0;
    let mut stalled = false;
    while start.elapsed() < Duration::from_secs(20) {
        if written == pending.len() {
            pending = Raw::frame(&raw.query_all(file_id));
            written = 0;
        }
        match raw.write_some(&pending[written..]) {
            Wrote::Bytes(n) => {
                written += n;
                progress = Instant::now();
            }
            Wrote::TimedOut if progress.elapsed() >= STALL => {
                stalled = true;
                break;
            }
            Wrote::TimedOut | Wrote::Interrupted => {}
            Wrote::Failed(why) => panic!("the server dropped the flood: {why}"),
        }
    }
    assert!(stalled, "the server never stopped reading the flood");

    let rt = runtime();
    let write_open = OpenOptions {
        access: access::FILE_WRITE_DATA | access::SYNCHRONIZE,
        ..OpenOptions::read()
    };
    rt.block_on(async {
        let tree = client_tree(srv.addr, PASSWORD).await;
        let held = tree.open(TARGET, &write_open).await;
        assert_eq!(
            held.err().and_then(|e| e.status()),
            Some(NtStatus::SHARING_VIOLATION),
            "the flooding client's open still holds the file"
        );

        // The client leaves; responses and requests are still queued on both sides.
        drop(raw);
        let left = Instant::now();
        loop {
            match tree.open(TARGET, &write_open).await {
                Ok(_) => break,
                Err(e) if left.elapsed() < Duration::from_secs(10) => {
                    assert_eq!(e.status(), Some(NtStatus::SHARING_VIOLATION), "{e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("10 s after the client left, its open still holds: {e}"),
            }
        }
        eprintln!("released {:?} after the client left", left.elapsed());
    });
    srv.stop();
}
