//! The servers a run starts as child processes on side B: `smbq serve`, Samba's smbd and
//! OpenSSH's sshd, each with private configuration in the run's scratch directory.

pub mod samba;
pub mod smbq;
pub mod sshd;

use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::net::Net;

/// Hands out listening ports. On loopback a port is free when the kernel gives it for port 0
/// (both TCP and UDP, since smbq listens on both with one number each); inside the emulated
/// link's namespace nothing else listens, so fixed ports do.
pub struct Ports {
    next: u16,
}

impl Ports {
    pub fn new() -> Self {
        Self { next: 44_500 }
    }

    pub fn take(&mut self, net: &Net) -> u16 {
        if net.is_emulated() {
            self.next += 1;
            return self.next;
        }
        for _ in 0..50 {
            let Ok(tcp) = std::net::TcpListener::bind("127.0.0.1:0") else {
                continue;
            };
            let Ok(addr) = tcp.local_addr() else {
                continue;
            };
            if std::net::UdpSocket::bind(("127.0.0.1", addr.port())).is_ok() {
                return addr.port();
            }
        }
        self.next += 1;
        self.next
    }
}

impl Default for Ports {
    fn default() -> Self {
        Self::new()
    }
}

/// Waits until `addr` accepts a TCP connection from side A, or the child exits, or `timeout`.
pub fn wait_tcp(
    net: &Net,
    addr: SocketAddr,
    child: &mut Child,
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status} before listening on {addr}"));
        }
        let ok = net
            .on_client(async move {
                tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
                    .await
                    .is_ok_and(|r| r.is_ok())
            })
            .unwrap_or(false);
        if ok {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("not listening on {addr} after {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The last lines of a log file, for error messages.
pub fn log_tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all.get(all.len().saturating_sub(lines)..)
        .unwrap_or_default()
        .join("\n")
}
