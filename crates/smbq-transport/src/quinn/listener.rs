//! The quinn listener: address validation, per-IP limits, and the single client-initiated
//! bidirectional stream handed up as a [`crate::Connection`] (MS-SMB2 2.1 and product note
//! <2>; smb-over-quic.md 1.2).
//!
//! A UDP source address proves nothing until its owner shows it receives there: by echoing a
//! Retry token, or by completing the handshake (RFC 9000 8.1). Only proven addresses are
//! counted against `max_connections_per_ip`; otherwise anyone able to forge a victim's
//! address could fill the victim's slots with Initials that never continue. Handshakes from
//! unproven addresses hold no slot and are few: past a small number per address, or once
//! `retry_above` handshakes are in progress, an unproven client gets a Retry, which costs the
//! server no state and a real client one round trip.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ::quinn::crypto::rustls::QuicServerConfig;
use ::quinn::{Endpoint, Incoming, ServerConfig, TransportConfig, VarInt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::multi;
use super::stream::{Gone, data_stream, split};
use super::{Role, endpoint_config, invalid, transport_config, udp_socket};
use crate::quic::{
    CLOSE_EXTRA_STREAM, CLOSE_NO_STREAM, CLOSE_NORMAL, CLOSE_REFUSED, MIN_MTU, QuicListenerStats,
    QuicSettings, UdpBuffers,
};
use crate::tls::{TlsError, TlsSettings, server_config};
use crate::{Connection, TransportKind};

/// Handshakes not done by then are dropped (Samba's server uses 5 s; smb-over-quic.md 5).
/// Bounds how long an unanswered Initial keeps state, well below the 60 s idle timeout.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Handshakes from one unproven address allowed at once before its further clients must
/// answer a Retry first. Enough for a few clients behind one NAT starting together without
/// the extra round trip; small, so one forged address cannot take much of `retry_above`.
const UNPROVEN_PER_IP: usize = 8;
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
    per_ip: Mutex<HashMap<IpAddr, PerIp>>,
    handshaking: AtomicUsize,
    retries: AtomicU64,
    refused: AtomicU64,
    handshake_failures: AtomicU64,
    extra_streams: AtomicU64,
}

/// What one IP address holds. Entries exist only while a count is non-zero, so the map is
/// bounded by the connections and handshakes themselves.
#[derive(Default)]
struct PerIp {
    /// Connections (handshaking or established) from a proven address: the per-IP limit.
    proven: usize,
    /// Handshakes from an address not yet proven; they take no slot.
    unproven: usize,
}

impl PerIp {
    fn is_empty(&self) -> bool {
        self.proven == 0 && self.unproven == 0
    }
}

/// A proven connection's place in the per-IP count, given back on drop.
struct IpSlot {
    shared: Arc<Shared>,
    ip: IpAddr,
}

/// An unproven handshake's place in its address's count, given back on drop.
struct Unproven {
    shared: Arc<Shared>,
    ip: IpAddr,
}

impl Shared {
    fn per_ip(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, PerIp>> {
        self.per_ip.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A slot for a connection from a proven address, if the address is under its limit.
    fn claim(self: &Arc<Self>, ip: IpAddr) -> Option<IpSlot> {
        let mut map = self.per_ip();
        let entry = map.entry(ip).or_default();
        if entry.proven >= self.settings.max_connections_per_ip {
            if entry.is_empty() {
                map.remove(&ip);
            }
            return None;
        }
        entry.proven += 1;
        Some(IpSlot {
            shared: self.clone(),
            ip,
        })
    }

    /// Room for one more handshake from an unproven address; None means "Retry it first".
    /// The address's proven connections count too: a client that would only be refused at
    /// the end of its handshake proves its address first and is then refused cheaply.
    fn start_unproven(self: &Arc<Self>, ip: IpAddr) -> Option<Unproven> {
        let mut map = self.per_ip();
        let entry = map.entry(ip).or_default();
        if entry.unproven >= UNPROVEN_PER_IP
            || entry.proven + entry.unproven >= self.settings.max_connections_per_ip
        {
            if entry.is_empty() {
                map.remove(&ip);
            }
            return None;
        }
        entry.unproven += 1;
        Some(Unproven {
            shared: self.clone(),
            ip,
        })
    }

    fn release(&self, ip: IpAddr, count: impl FnOnce(&mut PerIp) -> &mut usize) {
        let mut map = self.per_ip();
        if let Some(entry) = map.get_mut(&ip) {
            let n = count(entry);
            *n = n.saturating_sub(1);
            if entry.is_empty() {
                map.remove(&ip);
            }
        }
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        self.shared.release(self.ip, |e| &mut e.proven);
    }
}

impl Drop for Unproven {
    fn drop(&mut self) {
        self.shared.release(self.ip, |e| &mut e.unproven);
    }
}

/// Where a handshake stands in its address's count.
enum Place {
    Proven(IpSlot),
    Unproven(Unproven),
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
    /// The configuration `set_tls` derives from: it keeps the Retry token key, so a client
    /// holding a token issued before a reload is not refused with INVALID_TOKEN after it.
    server_config: ServerConfig,
    ready: tokio::sync::Mutex<mpsc::Receiver<io::Result<Connection>>>,
    shared: Arc<Shared>,
    accept_task: JoinHandle<()>,
    udp_buffers: UdpBuffers,
}

impl std::fmt::Debug for QuicListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicListener")
            .field("local", &self.endpoint.local_addr().ok())
            .finish()
    }
}

fn quic_crypto(tls: &TlsSettings) -> Result<Arc<QuicServerConfig>, TlsError> {
    let crypto = QuicServerConfig::try_from(server_config(tls)?)
        .map_err(|e| TlsError::Quic(e.to_string()))?;
    Ok(Arc::new(crypto))
}

fn quinn_server_config(tls: &TlsSettings, shared: &Shared) -> Result<ServerConfig, TlsError> {
    let mut config = ServerConfig::with_crypto(quic_crypto(tls)?);
    config.transport_config(shared.transport.clone());
    // NAT rebinding and client migration keep the SMB connection (smb-over-quic.md 5).
    config.migration(true);
    Ok(config)
}

impl QuicListener {
    /// Binds the UDP socket and starts accepting. Must run inside a tokio runtime.
    pub fn bind(addr: SocketAddr, tls: TlsSettings, settings: QuicSettings) -> io::Result<Self> {
        let (socket, udp_buffers) = udp_socket(addr, settings.socket_buffer)?;
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
            Some(server.clone()),
            socket,
            super::quinn_runtime(&shared.settings, "smbq-quic")?,
        )?;
        tracing::info!(
            local = ?endpoint.local_addr().ok(),
            mtu_upper_bound = mtu,
            min_mtu = MIN_MTU,
            congestion = shared.settings.congestion.name(),
            rcvbuf = udp_buffers.rcvbuf,
            sndbuf = udp_buffers.sndbuf,
            "SMB over QUIC listening"
        );
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        let accept_task = tokio::spawn(accept_loop(endpoint.clone(), shared.clone(), tx));
        Ok(Self {
            endpoint,
            server_config: server,
            ready: tokio::sync::Mutex::new(rx),
            shared,
            accept_task,
            udp_buffers,
        })
    }

    /// The socket buffers the kernel granted; the caller decides how loudly to report a cap.
    pub fn udp_buffers(&self) -> UdpBuffers {
        self.udp_buffers
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
        let mut config = self.server_config.clone();
        config.crypto = quic_crypto(&tls)?;
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
    let ip = peer.ip().to_canonical();
    let place = if incoming.remote_address_validated() {
        // The Initial carries a token we issued to this address, so the address is the
        // sender's own: the per-IP limit applies, and the refusal goes to the one who asked.
        let Some(slot) = shared.claim(ip) else {
            shared.refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, limit = shared.settings.max_connections_per_ip, "QUIC connection refused: per-IP limit");
            incoming.refuse();
            return;
        };
        Place::Proven(slot)
    } else {
        // Never refused for its address's sake: the address may be forged. Past the bounds a
        // Retry answers instead, which a real client completes and a forger cannot.
        let room = (shared.handshaking.load(Ordering::Relaxed) < shared.settings.retry_above)
            .then(|| shared.start_unproven(ip))
            .flatten();
        let Some(unproven) = room else {
            retry(incoming, shared);
            return;
        };
        Place::Unproven(unproven)
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
        let slot = match place {
            Place::Proven(slot) => slot,
            // The peer finished the handshake, so it receives at its address.
            Place::Unproven(unproven) => {
                let slot = shared.claim(ip);
                drop(unproven);
                let Some(slot) = slot else {
                    // Proven clients from this address filled its slots meanwhile.
                    shared.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%peer, limit = shared.settings.max_connections_per_ip, "QUIC connection refused after its handshake: per-IP limit");
                    conn.close(VarInt::from_u32(CLOSE_REFUSED), b"per-IP connection limit");
                    return;
                };
                slot
            }
        };
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
        let (gate, feed) = match shared.settings.max_streams {
            0 => (None, None),
            n => {
                let (gate, feed) = multi::gate(n.min(crate::quic::MAX_DATA_STREAMS));
                (
                    Some(Box::new(gate) as Box<dyn crate::StreamGate>),
                    Some(feed),
                )
            }
        };
        let connection = Connection {
            reader: Box::new(reader),
            writer: Box::new(writer),
            peer: conn.remote_address(),
            local,
            kind: TransportKind::Quic,
            gate,
            opener: None,
            path: Some(std::sync::Arc::new(super::QuinnPath(conn.clone()))),
            client_cert: conn
                .peer_identity()
                .and_then(|id| {
                    id.downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
                        .ok()
                })
                .and_then(|chain| {
                    chain
                        .first()
                        .map(|leaf| crate::client_auth::client_cert(leaf))
                }),
        };
        tracing::debug!(%peer, "SMB over QUIC connection ready");
        tokio::spawn(watch(conn, gone, slot, shared, feed));
        let _ = tx.send(Ok(connection)).await;
    });
}

/// Asks an unproven client to echo a token first (RFC 9000 8.1.2). Stateless on our side, and
/// the Retry is smaller than the Initial it answers, so a forged flood gains no amplification.
fn retry(incoming: Incoming, shared: &Shared) {
    shared.retries.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(peer = %incoming.remote_address(), "QUIC Retry for address validation");
    if let Err(e) = incoming.retry() {
        // Only for an Initial that already answered a Retry, which is validated and does not
        // come here. Ignored rather than refused: the address is unproven.
        e.into_incoming().ignore();
    }
}

/// Owns the QUIC connection beside the SMB stream and closes it with code 0 once the SMB side
/// has dropped both halves. Until the SMB layer grants data streams (docs/multistream.md 4),
/// a further stream breaks MS-SMB2 product note <2> and closes the connection; quinn's own
/// stream limit (1) already keeps a well-behaved peer from opening one. After the grant,
/// further bidirectional streams go to the gate.
async fn watch(
    conn: ::quinn::Connection,
    gone: Gone,
    _slot: IpSlot,
    shared: Arc<Shared>,
    feed: Option<multi::GateFeed>,
) {
    let extra = |shared: &Shared| {
        shared.extra_streams.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(peer = %conn.remote_address(), "QUIC peer opened a stream it was not granted; closing");
        conn.close(
            VarInt::from_u32(CLOSE_EXTRA_STREAM),
            b"one stream per SMB connection",
        );
    };
    let (mut grant, streams) = match feed {
        Some(f) => (Some(f.grant), Some(f.streams)),
        None => (None, None),
    };
    let mut granted = false;
    let ended = gone.ended();
    tokio::pin!(ended);
    loop {
        tokio::select! {
            streams = &mut ended => {
                conn.close(VarInt::from_u32(CLOSE_NORMAL), b"");
                drop(streams);
                break;
            }
            n = async { grant.as_mut()?.await.ok() }, if grant.is_some() && !granted => {
                grant = None;
                if let Some(n) = n.filter(|n| *n > 0) {
                    granted = true;
                    multi::allow(&conn, n);
                    tracing::debug!(peer = %conn.remote_address(), streams = n, "QUIC data streams granted");
                }
            }
            r = conn.accept_bi() => match r {
                Ok((send, recv)) if granted => {
                    if let Some(tx) = &streams {
                        // Bounded by the QUIC limit; a stream the SMB side cannot take is
                        // dropped (finished and stopped), never queued without bound.
                        let _ = tx.try_send(data_stream(send, recv));
                    }
                }
                Ok(_) => {
                    extra(&shared);
                    break;
                }
                Err(_) => break,
            },
            r = conn.accept_uni() => {
                if r.is_ok() {
                    extra(&shared);
                }
                break;
            }
        }
    }
    // The per-IP slot is held until the connection is really gone.
    let _ = conn.closed().await;
}
