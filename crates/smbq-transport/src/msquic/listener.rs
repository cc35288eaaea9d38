//! The MsQuic listener: ALPN `smb`, certificates by SNI, the per-IP limit once a handshake has
//! completed, and the client's single bidirectional stream handed up as a
//! [`crate::Connection`] (MS-SMB2 2.1 and product note <2>).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use smbq_msquic_ffi::msquic::{
    Addr, Connection as MsConnection, ConnectionEvent, ConnectionRef, ConnectionShutdownFlags,
    Listener, ListenerEvent,
};
use smbq_msquic_ffi::{OwnedStream, adopt_new_connection};
use tokio::sync::mpsc;

use super::creds::ServerConfigs;
use super::stream::{Closer, StreamShared, split};
use super::{Reg, alpn, status_error, unsupported};
use crate::client_auth::ClientAuth;
use crate::quic::{
    CLOSE_EXTRA_STREAM, CLOSE_NO_STREAM, CLOSE_REFUSED, QuicListenerStats, QuicSettings, UdpBuffers,
};
use crate::tls::{TlsError, TlsSettings};
use crate::{Connection, TransportKind};

/// A client that completed the handshake opens its stream with its first SMB message.
const FIRST_STREAM_TIMEOUT: Duration = Duration::from_secs(10);
/// Ready connections queued for `accept`.
const ACCEPT_QUEUE: usize = 64;
/// Bound on waiting for clients to hear the close at shutdown.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);

#[derive(Default)]
struct Counters {
    handshaking: AtomicUsize,
    refused: AtomicU64,
    handshake_failures: AtomicU64,
    extra_streams: AtomicU64,
}

/// Field order: the configurations close before the registration they belong to.
struct Shared {
    configs: ServerConfigs,
    reg: Arc<Reg>,
    settings: QuicSettings,
    /// The address asked for: what a connection's addresses fall back to if MsQuic gives none.
    bind: SocketAddr,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    counters: Counters,
    ready: mpsc::Sender<io::Result<Connection>>,
    rt: tokio::runtime::Handle,
}

/// A connection's place in its address's count, given back when dropped.
struct IpSlot {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut map = self.shared.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

impl Shared {
    fn claim(self: &Arc<Self>, ip: IpAddr) -> Option<IpSlot> {
        let mut map = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(ip).or_default();
        if *n >= self.settings.max_connections_per_ip {
            return None;
        }
        *n += 1;
        Some(IpSlot {
            shared: self.clone(),
            ip,
        })
    }
}

/// SMB over QUIC listener on MsQuic.
pub struct MsQuicListener {
    // Field order: the listener closes before the registration.
    listener: Listener,
    local: SocketAddr,
    shared: Arc<Shared>,
    ready: tokio::sync::Mutex<mpsc::Receiver<io::Result<Connection>>>,
}

impl std::fmt::Debug for MsQuicListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsQuicListener")
            .field("local", &self.local)
            .finish()
    }
}

impl MsQuicListener {
    /// Starts listening. Must run inside a tokio runtime.
    pub fn bind(addr: SocketAddr, tls: TlsSettings, settings: QuicSettings) -> io::Result<Self> {
        if !matches!(tls.client_auth, ClientAuth::Off) {
            return Err(unsupported("client certificate authentication"));
        }
        if tls.keylog.is_some() {
            tracing::warn!("MsQuic: TLS key logging is not available; no keys are logged");
        }
        let reg = Reg::open("smbq")?;
        if let Some(key) = &settings.reset_key {
            smbq_msquic_ffi::set_stateless_reset_key(key)
                .map_err(|s| super::status_error("stateless reset key", s))?;
        }
        let configs =
            ServerConfigs::new(&reg, tls.certs.clone(), super::settings(&settings, true)?)?;
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        let shared = Arc::new(Shared {
            configs,
            reg,
            bind: addr,
            settings,
            per_ip: Mutex::default(),
            counters: Counters::default(),
            ready: tx,
            rt: tokio::runtime::Handle::current(),
        });
        let handler_shared = shared.clone();
        let listener = Listener::open(&shared.reg, move |_, event| {
            on_listener_event(&handler_shared, event);
            Ok(())
        })
        .map_err(|s| status_error("listener", s))?;
        listener
            .start(&alpn(), Some(&Addr::from(addr)))
            .map_err(|s| status_error(&format!("listening on {addr}"), s))?;
        let local = listener
            .get_local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .unwrap_or(addr);
        tracing::info!(
            %local,
            stack = "msquic",
            mtu_upper_bound = shared.settings.effective_mtu_upper_bound(),
            congestion = shared.settings.congestion.name(),
            "SMB over QUIC listening"
        );
        Ok(Self {
            listener,
            local,
            shared,
            ready: tokio::sync::Mutex::new(rx),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    pub async fn accept(&self) -> Option<io::Result<Connection>> {
        self.ready.lock().await.recv().await
    }

    /// Certificates reload through `CertStore::replace` and are picked up at the next
    /// handshake; the rest of the TLS settings (client policy, key log) are fixed on MsQuic.
    pub fn set_tls(&self, tls: TlsSettings) -> Result<(), TlsError> {
        if !matches!(tls.client_auth, ClientAuth::Off) {
            return Err(TlsError::Quic(
                "client certificate authentication is not supported with [quic] stack = \"msquic\""
                    .into(),
            ));
        }
        Ok(())
    }

    pub fn stats(&self) -> QuicListenerStats {
        let c = &self.shared.counters;
        QuicListenerStats {
            handshakes_in_progress: c.handshaking.load(Ordering::Relaxed),
            retries: 0,
            refused: c.refused.load(Ordering::Relaxed),
            handshake_failures: c.handshake_failures.load(Ordering::Relaxed),
            extra_streams: c.extra_streams.load(Ordering::Relaxed),
        }
    }

    /// MsQuic owns the socket; the requested size is not applied, so nothing is reported.
    pub fn udp_buffers(&self) -> UdpBuffers {
        UdpBuffers {
            want: 0,
            rcvbuf: 0,
            sndbuf: 0,
        }
    }

    /// Stops accepting and closes every connection with code 0 (RegistrationShutdown), then
    /// gives the close a moment to reach the clients.
    pub async fn shutdown(&self) {
        self.listener.stop();
        self.shared.reg.shutdown();
        tokio::time::sleep(Duration::from_millis(50).min(SHUTDOWN_WAIT)).await;
    }
}

/// NEW_CONNECTION: the handle is adopted whatever happens next, so it is always closed by
/// this code (at SHUTDOWN_COMPLETE) and never by MsQuic; a connection that cannot be served is
/// shut down rather than refused through the callback's status.
fn on_listener_event(shared: &Arc<Shared>, event: ListenerEvent<'_>) {
    let Some((conn, info)) = adopt_new_connection(event) else {
        return;
    };
    let config = shared.configs.for_sni(&shared.reg, &info.server_name);
    shared.counters.handshaking.fetch_add(1, Ordering::Relaxed);
    let state = Arc::new(ConnState {
        shared: shared.clone(),
        conn: Mutex::new(None),
        slot: Mutex::new(None),
        stream: Arc::new(StreamShared::default()),
        handshaking: std::sync::atomic::AtomicBool::new(true),
        streams: AtomicUsize::new(0),
        peer: info.remote.unwrap_or(shared.bind),
        local: info.local.unwrap_or(shared.bind),
    });
    let handler_state = state.clone();
    conn.set_callback_handler(move |c, ev| {
        handler_state.on_event(&c, ev);
        Ok(())
    });
    let configured = match config {
        Some(config) => conn.set_configuration(&config).is_ok(),
        None => false,
    };
    if !configured {
        tracing::error!(peer = %state.peer, "MsQuic: no usable server configuration");
        conn.shutdown(ConnectionShutdownFlags::NONE, u64::from(CLOSE_REFUSED));
    }
    *state.conn.lock().unwrap_or_else(|p| p.into_inner()) = Some(conn);
}

/// One connection until its stream is handed up (then the [`Closer`] owns the handle).
struct ConnState {
    shared: Arc<Shared>,
    conn: Mutex<Option<MsConnection>>,
    slot: Mutex<Option<IpSlot>>,
    stream: Arc<StreamShared>,
    handshaking: std::sync::atomic::AtomicBool,
    streams: AtomicUsize,
    peer: SocketAddr,
    local: SocketAddr,
}

impl ConnState {
    fn end_handshake(&self, failed: bool) {
        if self.handshaking.swap(false, Ordering::AcqRel) {
            self.shared
                .counters
                .handshaking
                .fetch_sub(1, Ordering::Relaxed);
            if failed {
                self.shared
                    .counters
                    .handshake_failures
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn on_event(self: &Arc<Self>, c: &ConnectionRef, event: ConnectionEvent<'_>) {
        match event {
            ConnectionEvent::Connected { .. } => {
                self.end_handshake(false);
                let ip = self.peer.ip().to_canonical();
                let Some(slot) = self.shared.claim(ip) else {
                    self.shared.counters.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(peer = %self.peer, limit = self.shared.settings.max_connections_per_ip, "QUIC connection refused after its handshake: per-IP limit");
                    c.shutdown(ConnectionShutdownFlags::NONE, u64::from(CLOSE_REFUSED));
                    return;
                };
                *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(slot);
                let state = self.clone();
                self.shared.rt.spawn(async move {
                    tokio::time::sleep(FIRST_STREAM_TIMEOUT).await;
                    if let Some(conn) = state
                        .conn
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .as_ref()
                    {
                        tracing::info!(peer = %state.peer, "QUIC client opened no stream");
                        conn.shutdown(ConnectionShutdownFlags::NONE, u64::from(CLOSE_NO_STREAM));
                    }
                });
            }
            ev @ ConnectionEvent::PeerStreamStarted { .. } => {
                let first = self.streams.fetch_add(1, Ordering::AcqRel) == 0;
                let Ok(stream) = OwnedStream::adopt(ev, self.stream.handler()) else {
                    return;
                };
                if !first {
                    self.shared
                        .counters
                        .extra_streams
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(peer = %self.peer, "QUIC peer opened a second stream; closing");
                    c.shutdown(ConnectionShutdownFlags::NONE, u64::from(CLOSE_EXTRA_STREAM));
                    // Closed off this thread: closing waits for the stream's callbacks.
                    self.shared.rt.spawn_blocking(move || drop(stream));
                    return;
                }
                self.hand_up(stream);
            }
            ConnectionEvent::ShutdownComplete {
                handshake_completed,
                ..
            } => {
                self.end_handshake(!handshake_completed);
                self.stream.connection_closed();
                let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner()).take();
                let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                // Never handed up: the handle is closed here, off MsQuic's thread.
                self.shared.rt.spawn_blocking(move || {
                    drop(conn);
                    drop(slot);
                });
            }
            _ => {}
        }
    }

    fn hand_up(&self, stream: OwnedStream) {
        // No slot: the connection was refused after its handshake (its close is under way),
        // so its stream must not reach `accept`. The stream is closed off MsQuic's thread.
        let Some(slot) = self.slot.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            self.shared.rt.spawn_blocking(move || drop(stream));
            return;
        };
        let Some(conn) = self.conn.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            self.shared.rt.spawn_blocking(move || drop(stream));
            return;
        };
        let (reader, writer) = split(Closer {
            conn: Some(conn),
            stream: Some(Arc::new(stream)),
            shared: self.stream.clone(),
            reg: self.shared.reg.clone(),
            written: Default::default(),
            rt: self.shared.rt.clone(),
            on_close: Some(Box::new(slot)),
        });
        let connection = Connection {
            reader: Box::new(reader),
            writer: Box::new(writer),
            peer: self.peer,
            local: self.local,
            kind: TransportKind::Quic,
            // Data streams are not offered on MsQuic yet (docs/multistream.md 12).
            gate: None,
            opener: None,
            path: None,
            client_cert: None,
        };
        tracing::debug!(peer = %self.peer, "SMB over QUIC connection ready (msquic)");
        if let Err(e) = self.shared.ready.try_send(Ok(connection)) {
            tracing::warn!(peer = %self.peer, "QUIC accept queue full; connection dropped");
            drop(e);
        }
    }
}
