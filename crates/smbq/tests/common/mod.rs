//! What the binary-level tests share: free loopback ports and `smbq serve` started with its
//! stdout and stderr read line by line on threads (so the server never blocks on a full pipe).
//! [`raw`]: a server with a config file and a raw SMB2 client, for the hostile-client tests.
#![allow(dead_code, clippy::unwrap_used)]

pub mod raw;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};

pub const BIN: &str = env!("CARGO_BIN_EXE_smbq");

/// A child killed and reaped when this goes out of scope, so a failing test leaves no
/// server (or client) running behind it.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `smbq serve ARGS` inside network namespace `ns` (the link emulator's), with the test user
/// and `password`; returns once it listens, with the server (killed when dropped) and a
/// thread that yields its stderr lines when it has exited.
pub fn serve_in_namespace(
    ns: &str,
    args: &[&std::ffi::OsStr],
    password: &str,
) -> (Reaped, std::thread::JoinHandle<Vec<String>>) {
    let mut server = Reaped(
        smbq_netem::command_in(ns, BIN)
            .arg("serve")
            .args(args)
            .env("SMBQ_USER", raw::USER)
            .env("SMBQ_PASSWORD", password)
            .env_remove("SMBQ_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = lines_of(server.0.stdout.take().unwrap());
    let err = server.0.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        BufReader::new(err)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let ready = out
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap();
    assert!(ready.starts_with("smbq: listening"), "{ready}");
    (server, log)
}

pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn free_udp_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The lines `r` produces, as they come. The pipe is drained to its end even when nobody
/// listens any more, so the server never writes into a closed pipe.
pub fn lines_of(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    rx
}

/// `smbq serve` with `args`, as configured by `setup` (environment), stdin closed; returns the
/// child and its stdout and stderr lines.
pub fn spawn_serve(
    args: &[&std::ffi::OsStr],
    setup: impl FnOnce(&mut Command),
) -> (Child, Receiver<String>, Receiver<String>) {
    let mut cmd = Command::new(BIN);
    cmd.arg("serve")
        .args(args)
        .env_remove("SSLKEYLOGFILE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    setup(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    (child, out, err)
}
