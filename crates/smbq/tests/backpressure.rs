//! Issue 10, item 2, against the real binary: one logged-in client must not be able to make the
//! server allocate without bound by sending large READs and never reading the responses.
//!
//! The server runs with `[limits] max_pending_bytes` = 32 MiB. A hostile client on a raw TCP
//! socket logs in (NTLMv2, signed requests), opens a 64 MiB file and floods 8 MiB READs
//! (CreditCharge 128, CreditRequest 256), advancing its MessageId as if every credit it asked
//! for had been granted, and never reads a byte after the CREATE response. The server's RSS is
//! sampled meanwhile: its growth must stay under twice the budget plus 64 MiB of slack. After
//! the flood the server must still serve a normal client and stop cleanly on SIGTERM.
//!
//! A second test checks that the credit ceiling does not starve a client that reads normally:
//! the whole 64 MiB file through pipelined 8 MiB READs, byte for byte.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command as Proc, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;
use smbq_auth::Credentials;
use smbq_client::transfer::{TransferOptions, download};
use smbq_client::{Client, ClientConfig, OpenOptions};
use smbq_crypto::PreauthHash;
use smbq_proto::client::{
    SessionCrypto, SessionSetup, SetupStep, negotiate_request, parse_negotiate_response,
};
use smbq_wire::create::{
    CreateDisposition, CreateRequest, CreateResponse, ImpersonationLevel, OplockLevel,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::access;
use smbq_wire::read::ReadRequest;
use smbq_wire::tree_connect::TreeConnectRequest;
use smbq_wire::{Command, FileId, Header, NtStatus, Writer};

const BIN: &str = env!("CARGO_BIN_EXE_smbq");
const USER: &str = "alice";
const PASSWORD: &str = "backpressure-test-password";
const MIB: u64 = 1 << 20;
/// `[limits] max_pending_bytes` for the server under test.
const BUDGET: u64 = 32 * MIB;
/// Allowed RSS growth: unsent responses plus running READs are bounded by about twice the
/// budget; the slack covers allocator overhead, thread stacks and the blocking pool.
const BOUND: u64 = 2 * BUDGET + 64 * MIB;
const BIG: &str = "big.bin";
const BIG_SIZE: usize = 64 << 20;
const SMALL: &str = "small.txt";
const SMALL_TEXT: &[u8] = b"the server still answers after the flood\n";
const FLOOD: Duration = Duration::from_secs(8);
/// The attacker sends one READ per PACE. It cannot know when the server grants credits (it
/// never reads), and a READ whose MessageId the server has not granted yet ends the
/// connection, so an attacker flooding flat out is cut off after the credits it holds. This
/// pace is what made the attack work on the server that granted every CreditRequest: each
/// 8 MiB READ response granted 256 credits (two more READs), so any server completing 50
/// READs a second stayed ahead of the MessageIds, with the credits held at the start as a
/// reserve, while the responses piled up unsent (400 MB/s in the report).
const PACE: Duration = Duration::from_millis(10);
/// The flood stops early once the server grew by this much (the test has failed by then;
/// this only keeps a regression from eating the machine).
const RSS_ABORT: u64 = 2048 * MIB;

/// Two servers flooding and streaming at once on a small machine would measure each other.
static SERIAL: Mutex<()> = Mutex::new(());

/// The content of [`BIG`]: every 8-byte word holds its own offset, so misplaced data shows.
fn big_content() -> Vec<u8> {
    let mut v = Vec::with_capacity(BIG_SIZE);
    for off in (0..BIG_SIZE as u64).step_by(8) {
        v.extend_from_slice(&off.to_le_bytes());
    }
    v
}

struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path().join("share");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&share).unwrap();
        std::fs::write(share.join(BIG), big_content()).unwrap();
        std::fs::write(share.join(SMALL), SMALL_TEXT).unwrap();
        let cfg = dir.path().join("smbq.toml");
        std::fs::write(&cfg, format!("[limits]\nmax_pending_bytes = {BUDGET}\n")).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Proc::new(BIN)
            .arg("serve")
            .arg(&share)
            .arg("--config")
            .arg(&cfg)
            .args(["--listen", "127.0.0.1", "--quic-port", "0"])
            .args(["--tcp-port", &port.to_string()])
            .arg("--state-dir")
            .arg(&state)
            .env("SMBQ_USER", USER)
            .env("SMBQ_PASSWORD", PASSWORD)
            .env_remove("SMBQ_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = stderr.clone();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        let (tx, rx) = channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let Ok(ready) = rx.recv_timeout(Duration::from_secs(30)) else {
            let _ = child.kill();
            panic!("no ready line; stderr: {:#?}", stderr.lock().unwrap());
        };
        assert_eq!(ready, format!("smbq: listening tcp=127.0.0.1:{port}"));
        Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            stderr,
            _dir: dir,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in bytes (VmRSS).
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in {status}"));
        kib * 1024
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, then a clean exit without a panic.
    fn stop(mut self) {
        let ok = Proc::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -TERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < deadline, "server did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        // Let the stderr thread take the last lines.
        std::thread::sleep(Duration::from_millis(100));
        let lines = self.stderr_lines();
        assert_eq!(status.code(), Some(0), "exit status; stderr: {lines:#?}");
        assert!(
            !lines.iter().any(|l| l.contains("panicked")),
            "server panicked: {lines:#?}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_filetime() -> u64 {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (d.as_secs() + 11_644_473_600) * 10_000_000 + u64::from(d.subsec_nanos() / 100)
}

/// A client that speaks SMB2 on a bare socket and keeps its own MessageIds.
struct Raw {
    s: TcpStream,
    next_mid: u64,
    /// Credits granted by the responses read so far, less those charged.
    credits: i64,
    session_id: u64,
    tree_id: u32,
    crypto: Option<SessionCrypto>,
}

/// Credits the hostile client asks for while logging in: as many as the server will give.
const GREEDY: u16 = 8192;

impl Raw {
    fn header(&mut self, command: Command, charge: u16, ask: u16) -> Header {
        let mid = self.next_mid;
        self.next_mid += u64::from(charge.max(1));
        self.credits -= i64::from(charge.max(1));
        Header {
            credit_charge: charge,
            command,
            credits: ask,
            message_id: mid,
            session_id: self.session_id,
            tree_id: self.tree_id,
            ..Default::default()
        }
    }

    /// Header + body, signed with the session's key.
    fn signed(&self, header: &Header, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        header.encode(&mut w);
        w.bytes(body);
        let mut m = w.into_vec();
        self.crypto.as_ref().unwrap().sign(&mut m).unwrap();
        m
    }

    fn frame(msg: &[u8]) -> Vec<u8> {
        let mut f = u32::try_from(msg.len()).unwrap().to_be_bytes().to_vec();
        f.extend_from_slice(msg);
        f
    }

    fn recv(&mut self) -> Vec<u8> {
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len).unwrap();
        let n = (u32::from_be_bytes(len) & 0x00FF_FFFF) as usize;
        let mut msg = vec![0u8; n];
        self.s.read_exact(&mut msg).unwrap();
        msg
    }

    /// Sends one message and returns its final response (interim ones are skipped).
    fn call(&mut self, msg: &[u8]) -> Vec<u8> {
        let mid = Header::decode(msg).unwrap().message_id;
        self.s.write_all(&Self::frame(msg)).unwrap();
        loop {
            let r = self.recv();
            let h = Header::decode(&r).unwrap();
            self.credits += i64::from(h.credits);
            assert_eq!(h.message_id, mid, "unexpected response {h:?}");
            if !(h.is_async() && h.status == NtStatus::PENDING) {
                return r;
            }
        }
    }

    /// NEGOTIATE 3.1.1, SESSION_SETUP with NTLMv2, TREE_CONNECT, and a read-only CREATE of
    /// `name`. Returns the FileId, the file's size and the server's largest READ.
    fn login_and_open(addr: SocketAddr, name: &str) -> (Self, FileId, u64, u32) {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        let mut raw = Raw {
            s,
            next_mid: 0,
            credits: 1,
            session_id: 0,
            tree_id: 0,
            crypto: None,
        };
        let cfg = ClientConfig::default();
        let mut salt = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut salt);
        let h = raw.header(Command::NEGOTIATE, 0, GREEDY);
        let sent = negotiate_request(&cfg, &h, &salt);
        let resp = raw.call(&sent);
        let neg = parse_negotiate_response(&cfg, &resp).unwrap();
        let mut preauth = PreauthHash::new();
        preauth.update(&sent);
        preauth.update(&resp);
        let max_read = neg.max_read;

        let mut setup = SessionSetup::new(
            Credentials::with_password(USER, "", PASSWORD, "HOSTILE"),
            neg,
            &preauth,
            cfg.signing_required,
            &mut rand::thread_rng(),
            now_filetime(),
        );
        let mut token = setup.first_token();
        let crypto = loop {
            let h = raw.header(Command::SESSION_SETUP, 1, GREEDY);
            let m = setup.request(&h, &token);
            setup.sent(&m);
            let resp = raw.call(&m);
            match setup.on_response(&resp).unwrap() {
                SetupStep::Continue {
                    session_id,
                    token: next,
                } => {
                    raw.session_id = session_id;
                    token = next;
                }
                SetupStep::Done { crypto, .. } => break crypto,
            }
        };
        assert!(crypto.can_sign());
        raw.session_id = crypto.session_id;
        raw.crypto = Some(crypto);

        let path = utf16le_encode(&format!("\\\\{}\\share", addr.ip()));
        let mut w = Writer::new();
        TreeConnectRequest {
            flags: 0,
            path_utf16: &path,
            contexts: Vec::new(),
        }
        .encode(&mut w);
        let h = raw.header(Command::TREE_CONNECT, 1, GREEDY);
        let m = raw.signed(&h, &w.into_vec());
        let resp = raw.call(&m);
        let rh = Header::decode(&resp).unwrap();
        assert_eq!(rh.status, NtStatus::SUCCESS, "TREE_CONNECT");
        raw.tree_id = rh.tree_id;

        let name = utf16le_encode(name);
        let mut w = Writer::new();
        CreateRequest {
            requested_oplock_level: OplockLevel::NONE,
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            desired_access: access::FILE_READ_DATA
                | access::FILE_READ_ATTRIBUTES
                | access::SYNCHRONIZE,
            share_access: access::FILE_SHARE_READ,
            create_disposition: CreateDisposition::OPEN,
            name: &name,
            ..Default::default()
        }
        .encode(&mut w);
        let h = raw.header(Command::CREATE, 1, GREEDY);
        let m = raw.signed(&h, &w.into_vec());
        let resp = raw.call(&m);
        assert_eq!(Header::decode(&resp).unwrap().status, NtStatus::SUCCESS);
        let c = CreateResponse::decode(&resp).unwrap();
        (raw, c.file_id, c.end_of_file, max_read)
    }
}

/// What the flooding thread saw.
#[derive(Debug, Default)]
struct FloodStats {
    reads_sent: u64,
    /// Frames accepted by the kernel in full.
    bytes_written: u64,
    /// Write calls that timed out because the server stopped reading.
    stalls: u64,
    /// When and why writing failed (the server dropped the connection).
    ended: Option<(Duration, String)>,
    /// When the last frame went out whole.
    last_write: Duration,
}

/// Sends one 8 MiB READ per [`PACE`] until `FLOOD` has passed or `stop` is set, never reading,
/// with MessageIds advanced by the charge as if every response granted the 256 credits asked.
fn flood(mut raw: Raw, file_id: FileId, size: u64, max_read: u32, stop: &AtomicBool) -> FloodStats {
    let len = max_read.min(8 << 20);
    let charge = u16::try_from(u64::from(len).div_ceil(64 * 1024)).unwrap();
    eprintln!(
        "flood: holding {} credits; one READ of {} MiB (CreditCharge {charge}) per {PACE:?}",
        raw.credits,
        u64::from(len) / MIB
    );
    raw.s
        .set_write_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let chunks = (size / u64::from(len)).max(1);
    let mut st = FloodStats::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut written = 0usize;
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) && start.elapsed() < FLOOD {
        if written == pending.len() {
            let allowed = 1 + (start.elapsed().as_micros() / PACE.as_micros()) as u64;
            if st.reads_sent >= allowed {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            let mut w = Writer::new();
            ReadRequest {
                length: len,
                offset: (st.reads_sent % chunks) * u64::from(len),
                file_id,
                ..Default::default()
            }
            .encode(&mut w);
            let h = raw.header(Command::READ, charge, 256);
            pending = Raw::frame(&raw.signed(&h, &w.into_vec()));
            written = 0;
            st.reads_sent += 1;
        }
        match raw.s.write(&pending[written..]) {
            Ok(0) => {
                st.ended = Some((start.elapsed(), "write returned 0".into()));
                break;
            }
            Ok(n) => {
                written += n;
                st.bytes_written += n as u64;
                if written == pending.len() {
                    st.last_write = start.elapsed();
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                st.stalls += 1;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                st.ended = Some((start.elapsed(), e.to_string()));
                break;
            }
        }
    }
    st
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

async fn client_tree(addr: SocketAddr) -> smbq_client::Tree {
    let conn = smbq_transport::connect_tcp(addr).await.unwrap();
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    let session = client.login(USER, "", PASSWORD).await.unwrap();
    session.tree_connect("share").await.unwrap()
}

#[test]
fn non_reading_read_flood_is_bounded_by_max_pending_bytes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let srv = Server::start();
    let (raw, file_id, size, max_read) = Raw::login_and_open(srv.addr, BIG);
    assert_eq!(size, BIG_SIZE as u64);
    // Let the server settle after the logon before taking the baseline.
    std::thread::sleep(Duration::from_millis(300));
    let baseline = srv.rss();

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let attacker = std::thread::spawn(move || flood(raw, file_id, size, max_read, &flag));
    let start = Instant::now();
    let mut max_rss = baseline;
    let mut at = Duration::ZERO;
    while !attacker.is_finished() {
        let rss = srv.rss();
        if rss > max_rss {
            max_rss = rss;
            at = start.elapsed();
        }
        if rss.saturating_sub(baseline) > RSS_ABORT {
            stop.store(true, Ordering::Relaxed);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let stats = attacker.join().unwrap();
    let growth = max_rss.saturating_sub(baseline);
    eprintln!(
        "flood: {} READs sent ({} KiB written, {} stalled writes, last whole frame at {:?}), \
         ended: {:?}",
        stats.reads_sent,
        stats.bytes_written / 1024,
        stats.stalls,
        stats.last_write,
        stats.ended
    );
    eprintln!(
        "server RSS: baseline {} MiB, max {} MiB at {at:?}; max growth {} MiB \
         (max_pending_bytes {} MiB, bound {} MiB)",
        baseline / MIB,
        max_rss / MIB,
        growth / MIB,
        BUDGET / MIB,
        BOUND / MIB
    );
    for l in srv
        .stderr_lines()
        .iter()
        .filter(|l| l.contains("disconnected"))
    {
        eprintln!("server: {l}");
    }
    assert!(
        growth < BOUND,
        "a client that does not read its responses grew the server by {} MiB (bound {} MiB)",
        growth / MIB,
        BOUND / MIB
    );

    // The attacker's connection is closed (dropped with its thread); the server still serves.
    let addr = srv.addr;
    runtime().block_on(async move {
        tokio::time::timeout(Duration::from_secs(30), async {
            let tree = client_tree(addr).await;
            let f = tree.open(SMALL, &OpenOptions::read()).await.unwrap();
            assert_eq!(&f.read_at(0, 4096).await.unwrap()[..], SMALL_TEXT);
            f.close().await.unwrap();
            let f = tree.open(BIG, &OpenOptions::read()).await.unwrap();
            let piece = f.read_at(8 << 20, 8 << 20).await.unwrap();
            assert_eq!(piece.len(), 8 << 20);
            assert_eq!(&piece[..8], &(8u64 << 20).to_le_bytes());
            f.close().await.unwrap();
        })
        .await
        .expect("a fresh client was not served after the flood");
    });
    srv.stop();
    eprintln!("flood test took {:?}", t0.elapsed());
}

#[test]
fn reading_client_streams_large_reads_under_the_credit_ceiling() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let srv = Server::start();
    let want = big_content();
    let addr = srv.addr;
    runtime().block_on(async move {
        let tree = client_tree(addr).await;
        let f = tree.open(BIG, &OpenOptions::read()).await.unwrap();
        assert_eq!(f.max_read(), 8 << 20);
        for round in 0..2 {
            let mut got: Vec<u8> = Vec::with_capacity(BIG_SIZE);
            let started = Instant::now();
            let n = tokio::time::timeout(
                Duration::from_secs(60),
                download(
                    &f,
                    0,
                    BIG_SIZE as u64,
                    TransferOptions {
                        chunk: 8 << 20,
                        depth: 8,
                    },
                    |b| {
                        got.extend_from_slice(b);
                        Ok(())
                    },
                ),
            )
            .await
            .expect("download stalled: the credit ceiling starved a reading client")
            .unwrap();
            let secs = started.elapsed().as_secs_f64();
            assert_eq!(n, BIG_SIZE as u64);
            assert!(got == want, "downloaded bytes differ");
            eprintln!(
                "round {round}: 64 MiB in 8 MiB READs (8 in flight) in {secs:.3} s, {:.0} MiB/s",
                64.0 / secs
            );
        }
        f.close().await.unwrap();
    });
    srv.stop();
    eprintln!("streaming test took {:?}", t0.elapsed());
}

/// Open file descriptors of a process.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// A connection the server dropped for a credit-window violation must release its socket
/// and its unsent responses even though the client still holds the socket open and never
/// reads: otherwise a client repeating "two 8 MiB READs, then a bad MessageId" on fresh
/// connections pins memory that no per-connection or per-address limit counts.
#[test]
fn dropped_non_reading_connections_release_their_responses() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const CONNS: usize = 6;
    let srv = Server::start();
    let base_fds = fd_count(srv.pid());
    let baseline = srv.rss();
    let mut held = Vec::new();
    for _ in 0..CONNS {
        let (mut raw, file_id, _, max_read) = Raw::login_and_open(srv.addr, BIG);
        let len = max_read.min(8 << 20);
        let charge = u16::try_from(u64::from(len).div_ceil(64 * 1024)).unwrap();
        let read = |raw: &mut Raw, offset: u64| {
            let mut w = Writer::new();
            ReadRequest {
                length: len,
                offset,
                file_id,
                ..Default::default()
            }
            .encode(&mut w);
            let h = raw.header(Command::READ, charge, 256);
            raw.s
                .write_all(&Raw::frame(&raw.signed(&h, &w.into_vec())))
                .unwrap();
        };
        // Two READs within the credits held: 16 MiB of responses, half the budget, so the
        // server keeps reading while its writer is stuck on the full socket.
        read(&mut raw, 0);
        read(&mut raw, u64::from(len));
        std::thread::sleep(Duration::from_millis(500));
        raw.next_mid += 1 << 20;
        read(&mut raw, 0);
        held.push(raw);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let violations = |srv: &Server| {
        srv.stderr_lines()
            .iter()
            .filter(|l| l.contains("outside the credit window"))
            .count()
    };
    while violations(&srv) < CONNS {
        assert!(
            Instant::now() < deadline,
            "not every bad MessageId ended its connection: {:#?}",
            srv.stderr_lines()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The server waits a moment for the writer, then must let go of the socket.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fd_count(srv.pid()) > base_fds && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let fds = fd_count(srv.pid());
    // Only reported: freed 8 MiB buffers partly stay in the allocator's arenas.
    let growth = srv.rss().saturating_sub(baseline);
    eprintln!(
        "{CONNS} dropped connections still open on the client side: server fds {base_fds} -> \
         {fds}, RSS growth {} MiB",
        growth / MIB
    );
    assert!(
        fds <= base_fds,
        "the server kept {} sockets of connections it had dropped",
        fds - base_fds
    );
    drop(held);
    srv.stop();
}
