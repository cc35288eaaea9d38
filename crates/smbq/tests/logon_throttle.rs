//! The real binary throttling failed logons (`[logon]`): wrong passwords slow down per source
//! and per account and still get LOGON_FAILURE; the right password is answered promptly, from
//! the throttled address and from another; a source cannot escape the delay by opening more
//! connections; and the summary of unlogged failures comes once they stop, on its own line.
//!
//! A second source address is 127.0.0.2, reached through a small forwarder bound to it.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Child;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use smbq_client::{Client, ClientConfig};
use smbq_wire::NtStatus;

const PASSWORD: &str = "test-password";

/// The `[logon]` settings under test and the delays they imply.
const CONFIG: &str = r#"
[logon]
failures_before_delay = 3
failure_delay_ms = 100
failure_delay_max_ms = 400
window_secs = 600
max_pending_per_source = 2
log_per_minute = 5
summary_after_secs = 2
"#;
const FIRST: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_millis(400);

/// The delay the policy owes the `n`th failure of a counter (1-based).
fn owed(n: u32) -> Duration {
    match n {
        0..=3 => Duration::ZERO,
        n => FIRST.saturating_mul(1 << (n - 4).min(10)).min(MAX),
    }
}

struct Server {
    child: Child,
    err: Receiver<String>,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("smbq.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let port = common::free_tcp_port();
    let (share, state, port_s) = (
        dir.path().join("share"),
        dir.path().join("state"),
        port.to_string(),
    );
    let args: Vec<&std::ffi::OsStr> = vec![
        share.as_os_str(),
        "--config".as_ref(),
        config.as_os_str(),
        "--state-dir".as_ref(),
        state.as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1".as_ref(),
        "--quic-port".as_ref(),
        "0".as_ref(),
        "--tcp-port".as_ref(),
        port_s.as_ref(),
    ];
    let (child, out, err) = common::spawn_serve(&args, |c| {
        c.env("SMBQ_PASSWORD", PASSWORD)
            .env_remove("SMBQ_USER")
            .env_remove("SMBQ_LOG");
    });
    let ready = out.recv_timeout(Duration::from_secs(30));
    assert!(
        ready.as_deref().is_ok_and(|l| l.contains("tcp=")),
        "no ready line: {ready:?}; stderr: {:#?}",
        err.try_iter().collect::<Vec<_>>()
    );
    Server {
        child,
        err,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        _dir: dir,
    }
}

/// A local address whose connections reach `server` from `source`.
async fn forwarder(source: IpAddr, server: SocketAddr) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind(SocketAddr::new(source, 0)).unwrap();
            let mut outbound = sock.connect(server).await.unwrap();
            tokio::spawn(async move {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    addr
}

async fn connect(addr: SocketAddr) -> Client {
    let conn = smbq_transport::tcp::connect_tcp(addr).await.unwrap();
    Client::connect(conn, ClientConfig::default())
        .await
        .unwrap()
}

/// One logon; returns its status and how long the answer took.
async fn logon(client: &Client, user: &str, password: &str) -> (NtStatus, Duration) {
    let t = Instant::now();
    let status = match client.login(user, "", password).await {
        Ok(_) => NtStatus::SUCCESS,
        Err(e) => e.status().unwrap_or_else(|| panic!("{user}: {e}")),
    };
    (status, t.elapsed())
}

/// A wrong password on a fresh connection: asserts LOGON_FAILURE, returns the time taken.
async fn wrong(addr: SocketAddr, user: &str) -> Duration {
    let (status, took) = logon(&connect(addr).await, user, "wrong").await;
    assert_eq!(status, NtStatus::LOGON_FAILURE, "{user} from {addr}");
    took
}

/// The right password on a fresh connection: asserts success, returns the time taken.
async fn right(addr: SocketAddr) -> Duration {
    let (status, took) = logon(&connect(addr).await, "smbq", PASSWORD).await;
    assert_eq!(status, NtStatus::SUCCESS, "from {addr}");
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_logons_slow_down_and_the_right_password_does_not() {
    let srv = start();
    let here = srv.addr;
    let elsewhere = forwarder(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), srv.addr).await;

    // 20 wrong passwords for "admin" from 127.0.0.1, one after the other on one connection.
    let client = connect(here).await;
    let mut took = Vec::new();
    for _ in 0..20 {
        let (status, t) = logon(&client, "admin", "guess").await;
        assert_eq!(status, NtStatus::LOGON_FAILURE);
        took.push(t);
    }
    let total: Duration = took.iter().sum();
    let owed_total: Duration = (1..=20).map(owed).sum();
    eprintln!("20 failures: {total:?} (owed {owed_total:?}); each: {took:?}");
    assert_eq!(owed_total, Duration::from_millis(6300));
    assert!(total >= owed_total, "{total:?} < {owed_total:?}");
    for (i, t) in took.iter().enumerate() {
        let n = i as u32 + 1;
        assert!(*t >= owed(n), "failure {n} took {t:?}, owed {:?}", owed(n));
    }
    // The free failures were answered at once: the delay is the throttle's, not the server's.
    assert!(took[..3].iter().all(|t| *t < FIRST), "{took:?}");

    // The right password for another account from the throttled address: at once.
    let t = right(here).await;
    eprintln!("right password from the throttled address: {t:?}");
    assert!(t < Duration::from_secs(1), "{t:?}");
    // That success did not clear the address (its failures were for "admin"): a wrong password
    // for any account from it still waits the full delay.
    let t = wrong(here, "smbq").await;
    assert!(t >= MAX, "{t:?}");

    // From 127.0.0.2: "admin" is throttled as an account, a fresh account is not, and the
    // right password is answered at once.
    let t = wrong(elsewhere, "admin").await;
    assert!(t >= MAX, "admin from elsewhere: {t:?}");
    let t = wrong(elsewhere, "carol").await;
    assert!(t < MAX, "fresh account from a fresh address: {t:?}");
    let t = right(elsewhere).await;
    assert!(t < Duration::from_secs(1), "{t:?}");

    // More connections do not buy more guesses: with 2 slots per address, 6 concurrent
    // failures from 127.0.0.1 are answered 2 at a time, and meanwhile even the right password
    // from that address waits for a slot (else a quick answer would give the outcome away),
    // while from 127.0.0.2 it does not.
    let clients: Vec<Client> = futures_join(6, || connect(here)).await;
    let start = Instant::now();
    let guesses: Vec<_> = clients
        .into_iter()
        .map(|c| {
            tokio::spawn(async move {
                let (status, _) = logon(&c, "admin", "guess").await;
                assert_eq!(status, NtStatus::LOGON_FAILURE);
                start.elapsed()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (held, other) = tokio::join!(right(here), right(elsewhere));
    let mut done = Vec::new();
    for g in guesses {
        done.push(g.await.unwrap());
    }
    let wall = start.elapsed();
    eprintln!(
        "6 concurrent failures: {wall:?} ({done:?}); right password from there {held:?}, \
         from elsewhere {other:?}"
    );
    assert!(wall >= MAX * 3, "{wall:?}: not answered two at a time");
    assert!(held >= MAX - Duration::from_millis(150), "{held:?}");
    assert!(other < MAX, "{other:?}");

    // Only 5 failures a minute get their own line; the rest are summed up once failures stop
    // (2 s here), by the server rather than under some connection's span.
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut seen = Vec::new();
    let summary = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match srv.err.recv_timeout(left) {
            Ok(l) if l.contains("logon failures stopped") => break l,
            Ok(l) => seen.push(l),
            Err(_) => panic!("no summary line; stderr: {seen:#?}"),
        }
    };
    eprintln!("{summary}");
    let single = seen.iter().filter(|l| l.contains("logon failure ")).count();
    assert_eq!(single, 5, "{seen:#?}");
    assert!(!summary.contains("conn{"), "{summary}");
    assert!(summary.contains("failures=29"), "{summary}");
    assert!(summary.contains("unlogged=24"), "{summary}");
    assert!(
        summary.contains("127.0.0.1=27") && summary.contains("127.0.0.2=2"),
        "{summary}"
    );
    assert!(
        summary.contains(r#""admin"=27"#) && summary.contains(r#""smbq"=1"#),
        "{summary}"
    );
}

/// `n` results of `f`, awaited together.
async fn futures_join<F, Fut, T>(n: usize, f: F) -> Vec<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = (0..n).map(|_| tokio::spawn(f())).collect();
    let mut out = Vec::with_capacity(n);
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
