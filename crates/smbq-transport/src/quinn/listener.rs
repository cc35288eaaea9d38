//! The quinn listener: per-IP limits, Retry under load, and the single client-initiated
//! bidirectional stream handed up as a [`crate::Connection`] (MS-SMB2 2.1 and product note
//! <2>; smb-over-quic.md 1.2).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::quinn::crypto::rustls::QuicServerConfig;
use ::quinn::{Endpoint, Incoming, ServerConfig, TokioRuntime, TransportConfig, VarInt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::stream::{Gone, split};
use super::{Role, endpoint_config, invalid, transport_config, udp_socket};
use crate::quic::{
    CLOSE_EXTRA_STREAM, CLOSE_NO_STREAM, CLOSE_NORMAL, MIN_MTU, QuicListenerStats, QuicSettings,
};
use crate::tls::{TlsError, TlsSettings, server_config};
use crate::{Connection, TransportKind};

/// Handshakes not done by then are dropped (Samba's server uses 5 s; smb-over-quic.md 5).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that completed the handshake opens its stream with its first SMB message.
const FIRST_STREAM_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on waiting for peers to acknowledge CONNECTION_CLOSE at shutdown.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);
/// Ready connections queued for `accept`.
const ACCEPT_QUEUE: usize = 64;
const SHUTDOWN_REASON: &[u8] = b"server shutting down";

struct Shared {
    local: SocketAddr,
    settings: QuicSettings,
    transport: Arc<TransportConfig>,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
    handshaking: AtomicUsize,
    retries: AtomicU64,
    refused: AtomicU64,
    handshake_failures: AtomicU64,
    extra_streams: AtomicU64,
}

/// A connection's place in the per-IP count, given back on drop.
struct IpSlot {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Shared {
    fn claim(self: &Arc<Self>, ip: IpAddr) -> Option<IpSlot> {
        let mut map = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(ip).or_insert(0);
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

/// Counts one handshake in progress while alive.
struct Handshaking(Arc<Shared>);

impl Handshaking {
    fn start(shared: &Arc<Shared>) -> Self {
        shared.handshaking.fetch_add(1, Ordering::Relaxed);
        Self(shared.clone())
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        self.0.handshaking.fetch_sub(1, Ordering::Relaxed);
    }
}

/// SMB over QUIC listener on one UDP socket.
pub struct QuicListener {
    endpoint: Endpoint,
    ready: tokio::sync::Mutex<mpsc::Receiver<io::Result<Connection>>>,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
}

impl std::fmt::Debug for QuicListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicListener")
            .field("local", &self.endpoint.local_addr().ok())
            .finish()
    }
}

fn quinn_server_config(tls: &TlsSettings, shared: &Shared) -> Result<ServerConfig, TlsError> {
    let crypto = QuicServerConfig::try_from(server_config(tls)?)
        .map_err(|e| TlsError::Quic(e.to_string()))?;
    let mut config = ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(shared.transport.clone());
    // NAT rebinding and client migration keep the SMB connection (smb-over-quic.md 5).
    config.migration(true);
    Ok(config)
}

impl QuicListener {
    /// Binds the UDP socket and starts accepting. Must run inside a tokio runtime.
    pub fn bind(addr: SocketAddr, tls: TlsSettings, settings: QuicSettings) -> io::Result<Self> {
        let socket = udp_socket(addr, settings.socket_buffer)?;
        let shared = Arc::new(Shared {
            local: socket.local_addr()?,
            transport: Arc::new(transport_config(&settings, Role::Server)?),
            settings,
            per_ip: Mutex::new(HashMap::new()),
            handshaking: AtomicUsize::new(0),
            retries: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            handshake_failures: AtomicU64::new(0),
            extra_streams: AtomicU64::new(0),
        });
        let server = quinn_server_config(&tls, &shared).map_err(invalid)?;
        let mtu = shared.settings.effective_mtu_upper_bound();
        let endpoint = Endpoint::new(
            endpoint_config(&shared.settings)?,
            Some(server),
            socket,
            Arc::new(TokioRuntime),
        )?;
        tracing::info!(
            local = ?endpoint.local_addr().ok(),
            mtu_upper_bound = mtu,
            min_mtu = MIN_MTU,
            congestion = shared.settings.congestion.name(),
            "SMB over QUIC listening"
        );
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        let accept_task = tokio::spawn(accept_loop(endpoint.clone(), shared.clone(), tx));
        Ok(Self {
            endpoint,
            ready: tokio::sync::Mutex::new(rx),
            shared,
            accept_task,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// Next SMB connection: the client's first bidirectional stream. None once the endpoint
    /// is closed. Handshakes run concurrently; a slow client does not hold up others.
    pub async fn accept(&self) -> Option<io::Result<Connection>> {
        self.ready.lock().await.recv().await
    }

    /// Applies new TLS settings (client policy, key log, certificate store) to handshakes
    /// that start from now on. Certificates alone reload through `CertStore::replace`.
    pub fn set_tls(&self, tls: TlsSettings) -> Result<(), TlsError> {
        let config = quinn_server_config(&tls, &self.shared)?;
        self.endpoint.set_server_config(Some(config));
        Ok(())
    }

    pub fn stats(&self) -> QuicListenerStats {
        let s = &self.shared;
        QuicListenerStats {
            handshakes_in_progress: s.handshaking.load(Ordering::Relaxed),
            retries: s.retries.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
            handshake_failures: s.handshake_failures.load(Ordering::Relaxed),
            extra_streams: s.extra_streams.load(Ordering::Relaxed),
        }
    }

    /// CONNECTION_CLOSE with application code 0 to every client, then waits (bounded) for
    /// the endpoint to go idle. `accept` returns None afterwards.
    pub async fn shutdown(&self) {
        self.endpoint
            .close(VarInt::from_u32(CLOSE_NORMAL), SHUTDOWN_REASON);
        if tokio::time::timeout(SHUTDOWN_WAIT, self.endpoint.wait_idle())
            .await
            .is_err()
        {
            tracing::debug!("QUIC shutdown: peers did not all acknowledge the close in time");
        }
    }
}

impl Drop for QuicListener {
    /// Stops accepting (new clients are refused) but, as with TCP, leaves established
    /// connections running.
    fn drop(&mut self) {
        self.endpoint.set_server_config(None);
        self.accept_task.abort();
    }
}

async fn accept_loop(
    endpoint: Endpoint,
    shared: Arc<Shared>,
    tx: mpsc::Sender<io::Result<Connection>>,
) {
    while let Some(incoming) = endpoint.accept().await {
        admit(incoming, &shared, &tx);
    }
    tracing::debug!("QUIC endpoint closed; accept loop done");
}

fn admit(incoming: Incoming, shared: &Arc<Shared>, tx: &mpsc::Sender<io::Result<Connection>>) {
    let peer = incoming.remote_address();
    // Under load, make unvalidated sources prove their address first, so a spoofed flood
    // costs a Retry packet rather than a handshake (RFC 9000 8.1).
    if shared.handshaking.load(Ordering::Relaxed) >= shared.settings.retry_above
        && !incoming.remote_address_validated()
        && incoming.may_retry()
    {
        shared.retries.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%peer, "QUIC Retry for address validation");
        if let Err(e) = incoming.retry() {
            // Only if may_retry lied; the Incoming comes back and is dropped (ignored).
            drop(e.into_incoming());
        }
        return;
    }
    let Some(slot) = shared.claim(peer.ip().to_canonical()) else {
        shared.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%peer, limit = shared.settings.max_connections_per_ip, "QUIC connection refused: per-IP limit");
        incoming.refuse();
        return;
    };
    let connecting = match incoming.accept() {
        Ok(c) => c,
        Err(e) => {
            // A ClientHello in the first Initial is processed here (ALPN refusals land here).
            shared.handshake_failures.fetch_add(1, Ordering::Relaxed);
            tracing::info!(%peer, error = %e, "QUIC handshake failed");
            return;
        }
    };
    let hs = Handshaking::start(shared);
    let shared = shared.clone();
    let tx = tx.clone();
    tokio::spawn(async move {
        let conn = match tokio::time::timeout(HANDSHAKE_TIMEOUT, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => {
                shared.handshake_failures.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%peer, error = %e, "QUIC handshake failed");
                return;
            }
            Err(_) => {
                shared.handshake_failures.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%peer, "QUIC handshake timed out");
                return;
            }
        };
        drop(hs);
        let (send, recv) = match tokio::time::timeout(FIRST_STREAM_TIMEOUT, conn.accept_bi()).await
        {
            Ok(Ok(streams)) => streams,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "QUIC connection ended before its stream");
                return;
            }
            Err(_) => {
                tracing::info!(%peer, "QUIC client opened no stream");
                conn.close(VarInt::from_u32(CLOSE_NO_STREAM), b"no stream opened");
                return;
            }
        };
        // With a wildcard bind the packet's destination IP is the meaningful local address.
        let local = conn
            .local_ip()
            .map_or(shared.local, |ip| SocketAddr::new(ip, shared.local.port()));
        let (reader, writer, gone) = split(send, recv);
        let connection = Connection {
            reader: Box::new(reader),
            writer: Box::new(writer),
            peer: conn.remote_address(),
            local,
            kind: TransportKind::Quic,
        };
        tracing::debug!(%peer, "SMB over QUIC connection ready");
        tokio::spawn(watch(conn, gone, slot, shared));
        let _ = tx.send(Ok(connection)).await;
    });
}

/// Owns the QUIC connection beside the SMB stream: refuses any further stream (MS-SMB2
/// product note <2>) and closes with code 0 once the SMB side has dropped both halves.
async fn watch(conn: ::quinn::Connection, gone: Gone, _slot: IpSlot, shared: Arc<Shared>) {
    let extra = |shared: &Shared| {
        shared.extra_streams.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(peer = %conn.remote_address(), "QUIC peer opened a second stream; closing");
        conn.close(
            VarInt::from_u32(CLOSE_EXTRA_STREAM),
            b"one stream per SMB connection",
        );
    };
    tokio::select! {
        streams = gone.ended() => {
            conn.close(VarInt::from_u32(CLOSE_NORMAL), b"");
            drop(streams);
        }
        r = conn.accept_bi() => if r.is_ok() { extra(&shared) },
        r = conn.accept_uni() => if r.is_ok() { extra(&shared) },
    }
    // The per-IP slot is held until the connection is really gone.
    let _ = conn.closed().await;
}
