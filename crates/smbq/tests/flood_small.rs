//! Issue 12, against the real binary: a flood of SMALL requests from a client that never reads
//! its responses must not make the server allocate without bound either.
//!
//! The server runs with `[limits] max_in_flight` = 64 and `max_pending_bytes` = 8 MiB (and
//! 1 MiB READs and WRITEs, so the budget is not raised to two of the largest). A hostile client
//! on a raw TCP socket logs in (NTLMv2, signed requests), opens a file and then sends up to
//! [`TOTAL`] QUERY_INFO FileAllInformation requests (CreditCharge 1, CreditRequest 64), each
//! MessageId one past the last as if every credit asked for had been granted, flat out and
//! never reading a byte after the CREATE response. Each request runs as a task on the server
//! and its response is about 200 bytes, so it takes tens of thousands of them to fill the
//! budget: the per-request bookkeeping, not the payload, is what must stay bounded.
//!
//! What must be shown:
//! 1. the server's RSS growth stays under twice the budget plus 64 MiB of slack;
//! 2. the server stops reading the connection: the client's writes (100 ms write timeout) stop
//!    making progress for [`STALL`] long before [`TOTAL`] requests went out (or the server
//!    drops the connection); the server's receive queue in /proc/net/tcp then stays full and
//!    unchanged, and the requests it did read (written, less what both kernels still hold)
//!    have responses of at most twice the budget plus what sits in the socket buffers. How
//!    many requests could be *written* says little by itself: some 5 MB of them fit in the two
//!    kernels' buffers on loopback;
//! 3. a normal client on a new connection can still list the share and read a file while the
//!    hostile connection is still open and stuck;
//! 4. the server exits 0 on SIGTERM, with the hostile connection still open.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::raw::{MIB, Raw, RssPeak, Server, Wrote, client_tree, runtime};
use smbq_client::OpenOptions;
use smbq_wire::fscc::access;
use smbq_wire::{FileId, Header, NtStatus};

const PASSWORD: &str = "flood-small-test-password";
/// `[limits] max_pending_bytes` for the server under test.
const BUDGET: u64 = 8 * MIB;
/// `[limits] max_in_flight` for the server under test.
const MAX_IN_FLIGHT: usize = 64;
/// `[limits] max_read` and `max_write`: small, so the budget is not raised to two of them.
const MAX_IO: u64 = MIB;
/// Allowed RSS growth: unsent responses plus running requests are bounded by about twice the
/// budget; the slack covers allocator overhead, thread stacks and the blocking pool.
const BOUND: u64 = 2 * BUDGET + 64 * MIB;
/// Requests the hostile client tries to send. Far more than the server may take: about
/// 10 MB of them fit in the two kernels' socket buffers alone on a loopback connection (the
/// server's receive buffer grows while it reads fast), and the server takes some 50,000 of
/// them before about 8 MiB of ~250-byte responses wait unsent.
const TOTAL: u64 = 300_000;
/// Writes that make no progress for this long mean the server stopped reading.
const STALL: Duration = Duration::from_secs(3);
/// The flood gives up after this long whatever happens (the test has failed by then).
const FLOOD_MAX: Duration = Duration::from_secs(15);
/// The flood stops early once the server grew by this much (the test has failed by then;
/// this only keeps a regression from eating the machine).
const RSS_ABORT: u64 = 2048 * MIB;
const SMALL: &str = "small.txt";
const SMALL_TEXT: &[u8] = b"the server still answers after the small-request flood\n";
/// The file the hostile client queries; a long name makes each FileAllInformation larger.
const TARGET: &str = "target-of-the-query-info-flood.bin";

/// The server under test: [`TARGET`] and [`SMALL`] shared, with the limits above.
fn start_server() -> Server {
    Server::start(
        PASSWORD,
        &format!(
            "[limits]\nmax_pending_bytes = {BUDGET}\nmax_in_flight = {MAX_IN_FLIGHT}\n\
             max_read = {MAX_IO}\nmax_write = {MAX_IO}\n"
        ),
        &[(TARGET, &[7u8; 4096][..]), (SMALL, SMALL_TEXT)],
    )
}

/// A hostile client logged in and holding `name` open for reading; returns the FileId.
fn login_and_open(srv: &Server, name: &str) -> (Raw, FileId) {
    let mut raw = Raw::login(srv.addr, PASSWORD);
    let (file_id, _) = raw.open(
        name,
        access::FILE_READ_DATA
            | access::FILE_READ_ATTRIBUTES
            | access::READ_CONTROL
            | access::SYNCHRONIZE,
    );
    (raw, file_id)
}

/// What the flooding thread saw.
#[derive(Debug, Default)]
struct FloodStats {
    /// Requests the kernel took in full.
    requests_written: u64,
    bytes_written: u64,
    /// Write calls that timed out because nobody read the socket.
    timeouts: u64,
    /// When the last request went out whole.
    last_write: Duration,
    /// Writes made no progress for [`STALL`]: the server stopped reading.
    stalled: bool,
    /// When and why writing failed (the server dropped the connection).
    ended: Option<(Duration, String)>,
}

/// Sends QUERY_INFO requests flat out until [`TOTAL`] went out, the writes stall for
/// [`STALL`], the connection fails, [`FLOOD_MAX`] passed or `stop` is set; never reads.
/// Returns the socket (still open) with what it saw.
fn flood(mut raw: Raw, file_id: FileId, stop: &AtomicBool) -> (Raw, FloodStats) {
    eprintln!(
        "flood: holding {} credits; up to {TOTAL} QUERY_INFO FileAllInformation requests, \
         CreditCharge 1, CreditRequest 64",
        raw.credits
    );
    raw.s
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut st = FloodStats::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut written = 0usize;
    let start = Instant::now();
    let mut progress = start;
    while !stop.load(Ordering::Relaxed) && start.elapsed() < FLOOD_MAX {
        if written == pending.len() {
            if st.requests_written == TOTAL {
                break;
            }
            pending = Raw::frame(&raw.query_all(file_id));
            written = 0;
        }
        match raw.write_some(&pending[written..]) {
            Wrote::Bytes(n) => {
                written += n;
                st.bytes_written += n as u64;
                progress = Instant::now();
                if written == pending.len() {
                    st.requests_written += 1;
                    st.last_write = start.elapsed();
                }
            }
            Wrote::TimedOut => {
                st.timeouts += 1;
                if progress.elapsed() >= STALL {
                    st.stalled = true;
                    break;
                }
            }
            Wrote::Interrupted => {}
            Wrote::Failed(why) => {
                st.ended = Some((start.elapsed(), why));
                break;
            }
        }
    }
    (raw, st)
}

/// The kernel's send and receive queues (bytes not yet acknowledged or sent; bytes not yet read
/// by the application) of the loopback TCP socket `local` -> `remote`, from /proc/net/tcp.
fn tcp_queues(local: SocketAddr, remote: SocketAddr) -> Option<(u64, u64)> {
    let hex = |a: SocketAddr| {
        let SocketAddr::V4(a) = a else {
            panic!("not IPv4: {a}")
        };
        format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(a.ip().octets()),
            a.port()
        )
    };
    let (l, r) = (hex(local), hex(remote));
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 4 && f[1] == l && f[2] == r {
            let (tx, rx) = f[4].split_once(':').unwrap();
            return Some((
                u64::from_str_radix(tx, 16).unwrap(),
                u64::from_str_radix(rx, 16).unwrap(),
            ));
        }
    }
    None
}

/// Where the flood's bytes are, once the writes stalled.
#[derive(Debug)]
struct Queues {
    /// Requests the client's kernel has not handed over yet.
    client_tx: u64,
    /// Requests that reached the server's socket and were not read by the server.
    server_rx: u64,
    /// Responses written by the server and not read by the client (it reads nothing).
    server_tx: u64,
    client_rx: u64,
}

fn queues(client: SocketAddr, server: SocketAddr) -> Queues {
    let (client_tx, client_rx) = tcp_queues(client, server).expect("client socket");
    let (server_tx, server_rx) = tcp_queues(server, client).expect("server socket");
    Queues {
        client_tx,
        server_rx,
        server_tx,
        client_rx,
    }
}

#[test]
fn non_reading_small_request_flood_is_bounded() {
    let t0 = Instant::now();
    let srv = start_server();
    let (mut raw, file_id) = login_and_open(&srv, TARGET);
    // One QUERY_INFO answered normally: the sizes the flood's accounting needs.
    let probe = raw.query_all(file_id);
    let request_len = Raw::frame(&probe).len() as u64;
    let resp = raw.call(&probe);
    assert_eq!(Header::decode(&resp).unwrap().status, NtStatus::SUCCESS);
    let response_len = resp.len() as u64 + 4;
    // Let the server settle after the logon before taking the baseline.
    std::thread::sleep(Duration::from_millis(300));
    let baseline = srv.rss();

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let attacker = std::thread::spawn(move || flood(raw, file_id, &flag));
    let mut peak = RssPeak::new(baseline, RSS_ABORT);
    while !attacker.is_finished() {
        peak.sample(&srv, &stop);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (held, stats) = attacker.join().unwrap();
    // The hostile connection stays open (and unread); the server holds what it holds.
    for _ in 0..5 {
        peak.sample(&srv, &stop);
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "flood: {} requests of {request_len} bytes written ({} KiB, {} timed-out writes, last \
         whole request at {:?}), stalled: {}, ended: {:?}",
        stats.requests_written,
        stats.bytes_written / 1024,
        stats.timeouts,
        stats.last_write,
        stats.stalled,
        stats.ended
    );
    peak.report(BUDGET, BOUND);
    for l in srv
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("disconnected") || l.contains("credit"))
    {
        eprintln!("server: {l}");
    }
    peak.assert_under(BOUND);
    assert!(
        stats.stalled || stats.ended.is_some(),
        "all {TOTAL} requests went out: the server kept reading {stats:?}"
    );
    if stats.stalled {
        // Where the written bytes are: what neither kernel holds, the server has read.
        let client_addr = held.s.local_addr().unwrap();
        let q1 = queues(client_addr, srv.addr);
        std::thread::sleep(Duration::from_secs(1));
        let q2 = queues(client_addr, srv.addr);
        let read_by_server = stats.bytes_written - q1.client_tx - q1.server_rx;
        let taken = read_by_server / request_len;
        let in_kernels = q1.server_tx + q1.client_rx;
        eprintln!(
            "kernel queues after the stall: {q1:?}; 1 s later: {q2:?}\n\
             the server read {taken} requests ({} KiB); their {response_len}-byte responses \
             come to {} KiB, of which {} KiB sit in the kernels' socket buffers",
            read_by_server / 1024,
            taken * response_len / 1024,
            in_kernels / 1024
        );
        assert!(
            q1.server_rx > 0 && q2.server_rx == q1.server_rx,
            "the server did not stop reading the connection: {q1:?} then {q2:?}"
        );
        // Without back-pressure it would take all it is sent; with it, it answers until
        // about the budget waits unsent behind what the kernels hold (twice, for slack).
        assert!(
            taken * response_len <= 2 * BUDGET + in_kernels,
            "the server took {taken} requests from a client that reads nothing: {} KiB of \
             responses against a {} KiB budget",
            taken * response_len / 1024,
            BUDGET / 1024
        );
    } else {
        assert!(stats.requests_written < TOTAL);
    }

    // A fresh client is served while the hostile connection is still open and stuck.
    let addr = srv.addr;
    runtime().block_on(async move {
        tokio::time::timeout(Duration::from_secs(30), async {
            let tree = client_tree(addr, PASSWORD).await;
            let mut names: Vec<String> = tree
                .list("")
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            names.sort();
            assert_eq!(names, [SMALL, TARGET]);
            let f = tree.open(SMALL, &OpenOptions::read()).await.unwrap();
            assert_eq!(&f.read_at(0, 4096).await.unwrap()[..], SMALL_TEXT);
            f.close().await.unwrap();
        })
        .await
        .expect("a fresh client was not served after the flood");
    });
    // SIGTERM with the hostile connection still open and unread.
    srv.stop();
    drop(held);
    eprintln!("small-request flood test took {:?}", t0.elapsed());
}
