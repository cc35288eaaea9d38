//! SMB over QUIC on MsQuic, the stack Windows' SMB over QUIC and the Tuxera Fusion prototype
//! run on (issue 11 item 7), behind the same seam as quinn (`crate::stack`). MsQuic brings its
//! own UDP I/O threads and its own TLS (quictls); what smbq decides (ALPN, certificates by
//! SNI, the client's trust anchor, the tuning values) comes from the stack-independent modules
//! as for quinn. The raw-pointer parts are in the `smbq-msquic-ffi` crate.
//!
//! What differs from quinn, on purpose or for now:
//! - Address validation is MsQuic's own (stateless Retry once handshakes use more than its
//!   memory share); the per-IP limit counts connections whose handshake completed.
//! - Client certificates and TLS key logs are not offered on this stack (refused at start).
//! - The UDP socket is MsQuic's: the requested buffer size is not applied, and a client
//!   cannot move its connections to another socket (`rebind`).
//! - `[quic] io_thread` does not apply: MsQuic always runs its own worker threads.

mod client;
mod creds;
mod listener;
mod stream;

pub use client::MsQuicClient;
pub use listener::MsQuicListener;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use smbq_msquic_ffi::msquic::{self, Registration, RegistrationConfig, Settings};

use crate::quic::{Congestion, QuicSettings};

/// Handshakes not done by then are dropped, as on quinn.
const SERVER_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
const CLIENT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn status_error(what: &str, s: msquic::Status) -> io::Error {
    io::Error::other(format!("MsQuic {what}: {s:?}"))
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what} is not supported with [quic] stack = \"msquic\""),
    )
}

/// One registration per listener or client endpoint; shutting it down closes all its
/// connections with code 0 (the listener's `shutdown`). Closing it waits until every
/// configuration, listener and connection opened under it is closed, so the close runs on a
/// thread of its own: run on an async worker it could wait for a connection whose closing
/// task needs that very worker.
pub(super) struct Reg(Option<Registration>);

impl Reg {
    fn open(name: &str) -> io::Result<Arc<Self>> {
        if let Err(status) = smbq_msquic_ffi::hold_library_open() {
            tracing::warn!(
                status = format!("{status:#x}"),
                "MsQuic: could not hold the library open"
            );
        }
        let reg = Registration::new(&RegistrationConfig::new().set_app_name(name.to_owned()))
            .map_err(|s| status_error("registration", s))?;
        Ok(Arc::new(Self(Some(reg))))
    }
}

impl std::ops::Deref for Reg {
    type Target = Registration;

    fn deref(&self) -> &Registration {
        // Only `drop` takes it out.
        self.0
            .as_ref()
            .unwrap_or_else(|| unreachable!("registration taken before drop"))
    }
}

/// Registrations being closed on their threads. A process that exits while one is closing
/// has the msquic crate's exit handler clear its API table under that thread, which then
/// panics (seen at `smbq serve` shutdown): `wait_for_closes` lets the exit wait for them.
static CLOSING: std::sync::Mutex<usize> = std::sync::Mutex::new(0);
static CLOSED: std::sync::Condvar = std::sync::Condvar::new();

fn closing() -> std::sync::MutexGuard<'static, usize> {
    CLOSING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits (at most `timeout`) until every registration dropped so far has closed.
pub(crate) fn wait_for_closes(timeout: Duration) {
    let guard = closing();
    let _ = CLOSED.wait_timeout_while(guard, timeout, |n| *n > 0);
}

impl Drop for Reg {
    fn drop(&mut self) {
        if let Some(reg) = self.0.take() {
            *closing() += 1;
            let closing_thread = std::thread::Builder::new()
                .name("smbq-msquic-close".into())
                .spawn(move || {
                    drop(reg);
                    let mut n = closing();
                    *n = n.saturating_sub(1);
                    CLOSED.notify_all();
                });
            if let Err(e) = closing_thread {
                let mut n = closing();
                *n = n.saturating_sub(1);
                tracing::warn!(error = %e, "MsQuic registration left open (no thread to close it)");
            }
        }
    }
}

/// MsQuic starts its worker threads with the first registration of the process.
pub(crate) fn start_threads() -> io::Result<()> {
    Reg::open("smbq").map(drop)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn window(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The same tuning as quinn's `transport_config` (quic-stacks.md 7.2) in MsQuic's terms.
/// MsQuic's MTU counts the IP and UDP headers: bound + 28 gives UDP payloads of exactly the
/// bound over IPv4 (the bench's loopback) and 20 bytes less over IPv6, never more.
fn settings(s: &QuicSettings, server: bool) -> io::Result<Settings> {
    let congestion = match s.congestion {
        Congestion::Cubic => {
            msquic::ffi::QUIC_CONGESTION_CONTROL_ALGORITHM_QUIC_CONGESTION_CONTROL_ALGORITHM_CUBIC
        }
        Congestion::Bbr | Congestion::BbrPure => {
            msquic::ffi::QUIC_CONGESTION_CONTROL_ALGORITHM_QUIC_CONGESTION_CONTROL_ALGORITHM_BBR
        }
        Congestion::NewReno => return Err(unsupported("congestion = \"newreno\"")),
    };
    let max_mtu = s.effective_mtu_upper_bound().saturating_add(28);
    let handshake = if server {
        SERVER_HANDSHAKE_TIMEOUT
    } else {
        CLIENT_HANDSHAKE_TIMEOUT
    };
    Ok(Settings::new()
        .set_IdleTimeoutMs(ms(s.idle_timeout))
        .set_KeepAliveIntervalMs(u32::try_from(ms(s.keep_alive)).unwrap_or(u32::MAX))
        .set_HandshakeIdleTimeoutMs(ms(handshake))
        // MS-SMB2 2.1, product note <2>: one client-initiated bidirectional stream.
        .set_PeerBidiStreamCount(u16::from(server))
        .set_PeerUnidiStreamCount(0)
        .set_StreamRecvWindowDefault(window(s.stream_receive_window))
        .set_ConnFlowControlWindow(window(s.receive_window))
        .set_MaximumMtu(max_mtu)
        .set_MinimumMtu(max_mtu.min(1248))
        .set_CongestionControlAlgorithm(congestion as u16)
        .set_ServerResumptionLevel(msquic::ServerResumptionLevel::NoResume))
}

/// The ALPN list, `smb` only (MS-SMB2 1.9).
fn alpn() -> [msquic::BufferRef; 1] {
    [msquic::BufferRef::from(crate::quic::ALPN)]
}
