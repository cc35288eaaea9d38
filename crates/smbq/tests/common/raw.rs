//! What the hostile-client tests share (`backpressure`, `flood_small`): `smbq serve` on a
//! loopback TCP port with a config file, its RSS, fds and stderr; a client speaking SMB2 on a
//! bare socket (NEGOTIATE, NTLMv2 SESSION_SETUP, signed requests, TREE_CONNECT, CREATE) that
//! keeps its own MessageIds and credits; the server's RSS peak while a flood runs; and a
//! normal client for checking the server still serves.
#![allow(clippy::indexing_slicing)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command as Proc, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::RngCore;
use smbq_auth::Credentials;
use smbq_client::{Client, ClientConfig};
use smbq_crypto::PreauthHash;
use smbq_proto::client::{
    SessionCrypto, SessionSetup, SetupStep, negotiate_request, parse_negotiate_response,
};
use smbq_wire::create::{
    CreateDisposition, CreateRequest, CreateResponse, ImpersonationLevel, OplockLevel,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::{FileInfoClass, access};
use smbq_wire::query_info::{InfoType, QueryInfoRequest};
use smbq_wire::tree_connect::TreeConnectRequest;
use smbq_wire::{Command, FileId, Header, NtStatus, Writer};

use super::BIN;

pub const USER: &str = "alice";
pub const MIB: u64 = 1 << 20;

/// `smbq serve` on a free loopback TCP port (QUIC off), its stderr collected line by line.
pub struct Server {
    child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Serves a share holding `files` (name, content) as [`USER`] with `password`, with
    /// `config` as its config file; returns once the server said it is listening.
    pub fn start(password: &str, config: &str, files: &[(&str, &[u8])]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path().join("share");
        let state = dir.path().join("state");
        std::fs::create_dir_all(&share).unwrap();
        for (name, content) in files {
            std::fs::write(share.join(name), content).unwrap();
        }
        let cfg = dir.path().join("smbq.toml");
        std::fs::write(&cfg, config).unwrap();
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
            .env("SMBQ_PASSWORD", password)
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

    /// Where `name` is in the served share.
    #[allow(dead_code)]
    pub fn share_path(&self, name: &str) -> std::path::PathBuf {
        self._dir.path().join("share").join(name)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in bytes (VmRSS).
    pub fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().strip_suffix("kB"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmRSS in {status}"));
        kib * 1024
    }

    /// Open file descriptors of the server.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .count()
    }

    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// SIGTERM, then a clean exit without a panic.
    pub fn stop(mut self) {
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

/// The largest RSS of a server seen while a flood runs, above the baseline taken before it.
pub struct RssPeak {
    baseline: u64,
    /// Growth past which [`RssPeak::sample`] sets the flood's stop flag.
    abort: u64,
    start: Instant,
    pub max: u64,
    /// When (since [`RssPeak::new`]) `max` was seen.
    pub at: Duration,
}

impl RssPeak {
    /// Starts the clock; `max` starts at `baseline`.
    pub fn new(baseline: u64, abort: u64) -> Self {
        RssPeak {
            baseline,
            abort,
            start: Instant::now(),
            max: baseline,
            at: Duration::ZERO,
        }
    }

    /// One RSS sample of `srv`; sets `stop` once the server grew by more than the abort
    /// threshold (the test has failed by then; this only keeps a regression from eating the
    /// machine).
    pub fn sample(&mut self, srv: &Server, stop: &AtomicBool) {
        let rss = srv.rss();
        if rss > self.max {
            self.max = rss;
            self.at = self.start.elapsed();
        }
        if rss.saturating_sub(self.baseline) > self.abort {
            stop.store(true, Ordering::Relaxed);
        }
    }

    pub fn growth(&self) -> u64 {
        self.max.saturating_sub(self.baseline)
    }

    /// Prints the peak against the server's `max_pending_bytes` (`budget`) and the `bound`.
    pub fn report(&self, budget: u64, bound: u64) {
        eprintln!(
            "server RSS: baseline {} MiB, max {} MiB at {:?}; max growth {} MiB \
             (max_pending_bytes {} MiB, bound {} MiB)",
            self.baseline / MIB,
            self.max / MIB,
            self.at,
            self.growth() / MIB,
            budget / MIB,
            bound / MIB
        );
    }

    pub fn assert_under(&self, bound: u64) {
        assert!(
            self.growth() < bound,
            "a client that does not read its responses grew the server by {} MiB (bound {} MiB)",
            self.growth() / MIB,
            bound / MIB
        );
    }
}

fn now_filetime() -> u64 {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    (d.as_secs() + 11_644_473_600) * 10_000_000 + u64::from(d.subsec_nanos() / 100)
}

/// A client that speaks SMB2 on a bare socket and keeps its own MessageIds.
pub struct Raw {
    pub s: TcpStream,
    pub next_mid: u64,
    /// Credits granted by the responses read so far, less those charged.
    pub credits: i64,
    pub session_id: u64,
    pub tree_id: u32,
    pub crypto: Option<SessionCrypto>,
    /// The server's largest READ, from its NEGOTIATE response.
    pub max_read: u32,
}

/// Credits the hostile client asks for while logging in: as many as the server will give.
const GREEDY: u16 = 8192;

/// What one write of a flood did.
pub enum Wrote {
    /// The kernel took this many bytes (at least one).
    Bytes(usize),
    /// The write timed out: nobody reads the socket.
    TimedOut,
    /// Interrupted by a signal; nothing written.
    Interrupted,
    /// The connection failed (the server dropped it), and why.
    Failed(String),
}

impl Raw {
    pub fn header(&mut self, command: Command, charge: u16, ask: u16) -> Header {
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
    pub fn signed(&self, header: &Header, body: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        header.encode(&mut w);
        w.bytes(body);
        let mut m = w.into_vec();
        self.crypto.as_ref().unwrap().sign(&mut m).unwrap();
        m
    }

    pub fn frame(msg: &[u8]) -> Vec<u8> {
        let mut f = u32::try_from(msg.len()).unwrap().to_be_bytes().to_vec();
        f.extend_from_slice(msg);
        f
    }

    pub fn recv(&mut self) -> Vec<u8> {
        let mut len = [0u8; 4];
        self.s.read_exact(&mut len).unwrap();
        let n = (u32::from_be_bytes(len) & 0x00FF_FFFF) as usize;
        let mut msg = vec![0u8; n];
        self.s.read_exact(&mut msg).unwrap();
        msg
    }

    /// Sends one message and returns its final response (interim ones are skipped).
    pub fn call(&mut self, msg: &[u8]) -> Vec<u8> {
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

    /// One write of the rest of a flood's frame, for a socket with a write timeout.
    pub fn write_some(&mut self, buf: &[u8]) -> Wrote {
        match self.s.write(buf) {
            Ok(0) => Wrote::Failed("write returned 0".into()),
            Ok(n) => Wrote::Bytes(n),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                Wrote::TimedOut
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => Wrote::Interrupted,
            Err(e) => Wrote::Failed(e.to_string()),
        }
    }

    /// NEGOTIATE 3.1.1, SESSION_SETUP with NTLMv2 as [`USER`] with `password`, asking for as
    /// many credits as the server gives, and TREE_CONNECT to `share`.
    pub fn login(addr: SocketAddr, password: &str) -> Self {
        Self::login_with_caps(addr, password, 0)
    }

    /// [`Self::login`] offering capabilities smbq's client does not (such as
    /// SMB2_GLOBAL_CAP_DIRECTORY_LEASING) in its NEGOTIATE as well.
    pub fn login_with_caps(addr: SocketAddr, password: &str, caps: u32) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_nodelay(true).unwrap();
        let mut raw = Raw {
            s,
            next_mid: 0,
            credits: 1,
            session_id: 0,
            tree_id: 0,
            crypto: None,
            max_read: 0,
        };
        let cfg = ClientConfig::default();
        let mut salt = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut salt);
        let h = raw.header(Command::NEGOTIATE, 0, GREEDY);
        let mut sent = negotiate_request(&cfg, &h, &salt);
        // NEGOTIATE (MS-SMB2 2.2.3): Capabilities at body offset 8.
        let at = smbq_wire::HEADER_LEN + 8;
        let offered = u32::from_le_bytes(sent[at..at + 4].try_into().unwrap()) | caps;
        sent[at..at + 4].copy_from_slice(&offered.to_le_bytes());
        let resp = raw.call(&sent);
        let neg = parse_negotiate_response(&cfg, &resp).unwrap();
        let mut preauth = PreauthHash::new();
        preauth.update(&sent);
        preauth.update(&resp);
        raw.max_read = neg.max_read;

        let mut setup = SessionSetup::new(
            Credentials::with_password(USER, "", password, "HOSTILE"),
            neg,
            &preauth,
            cfg.signing_required,
            &mut rand::thread_rng(),
            now_filetime(),
        );
        let mut token = setup.first_token();
        let crypto = loop {
            let h = raw.header(Command::SESSION_SETUP, 1, GREEDY);
            let m = setup.request(&h, &token).unwrap();
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
        raw
    }

    /// One signed QUERY_INFO FileAllInformation of `file_id`: CreditCharge 1, CreditRequest 64
    /// (what the flood tests send without reading the answers).
    pub fn query_all(&mut self, file_id: FileId) -> Vec<u8> {
        let mut w = Writer::new();
        QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: FileInfoClass::ALL.0,
            output_buffer_length: 4096,
            file_id,
            ..Default::default()
        }
        .encode(&mut w);
        let h = self.header(Command::QUERY_INFO, 1, 64);
        self.signed(&h, &w.into_vec())
    }

    /// CREATE (open, shared for reading) of the existing file `name` with `desired_access`.
    /// Returns the FileId and the file's size.
    pub fn open(&mut self, name: &str, desired_access: u32) -> (FileId, u64) {
        let name = utf16le_encode(name);
        let mut w = Writer::new();
        CreateRequest {
            requested_oplock_level: OplockLevel::NONE,
            impersonation_level: ImpersonationLevel::IMPERSONATION,
            desired_access,
            share_access: access::FILE_SHARE_READ,
            create_disposition: CreateDisposition::OPEN,
            name: &name,
            ..Default::default()
        }
        .encode(&mut w);
        let h = self.header(Command::CREATE, 1, GREEDY);
        let m = self.signed(&h, &w.into_vec());
        let resp = self.call(&m);
        assert_eq!(Header::decode(&resp).unwrap().status, NtStatus::SUCCESS);
        let c = CreateResponse::decode(&resp).unwrap();
        (c.file_id, c.end_of_file)
    }
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// A normal client logged in as [`USER`] with `password`, connected to `share`.
pub async fn client_tree(addr: SocketAddr, password: &str) -> smbq_client::Tree {
    let conn = smbq_transport::connect_tcp(addr).await.unwrap();
    let client = Client::connect(conn, ClientConfig::default())
        .await
        .unwrap();
    let session = client.login(USER, "", password).await.unwrap();
    session.tree_connect("share").await.unwrap()
}
