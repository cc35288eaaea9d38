//! SMB over QUIC on quinn: the listener, per-IP limits, Retry under load, and the single
//! client-initiated bidirectional stream handed up as a [`crate::Connection`]
//! (MS-SMB2 2.1 and product note <2>; smb-over-quic.md 1.2).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ::quinn::crypto::rustls::QuicServerConfig;
use ::quinn::{
    Endpoint, EndpointConfig, IdleTimeout, Incoming, MtuDiscoveryConfig, RecvStream, SendStream,
    ServerConfig, TokioRuntime, TransportConfig, VarInt,
};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::quic::{CLOSE_EXTRA_STREAM, CLOSE_NO_STREAM, CLOSE_NORMAL, MIN_MTU, QuicSettings};
use crate::tls::{TlsError, TlsSettings, server_config};
use crate::{Connection, TransportKind};

/// Handshakes not done by then are dropped (Samba's server uses 5 s; smb-over-quic.md 5).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that completed the handshake opens its stream with its first SMB message.
const FIRST_STREAM_TIMEOUT: Duration = Duration::from_secs(10);
/// After the SMB side finished the stream, how long its last bytes may take to be acknowledged
/// before the connection is closed anyway.
const LINGER: Duration = Duration::from_secs(5);
/// Bound on waiting for peers to acknowledge CONNECTION_CLOSE at shutdown.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(3);
/// Ready connections queued for `accept`.
const ACCEPT_QUEUE: usize = 64;
const SHUTDOWN_REASON: &[u8] = b"server shutting down";

/// Counters for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QuicListenerStats {
    pub handshakes_in_progress: usize,
    /// Retry packets sent for address validation.
    pub retries: u64,
    /// Connection attempts refused by the per-IP limit.
    pub refused: u64,
    /// Handshakes that failed (TLS refusals included) or timed out.
    pub handshake_failures: u64,
    /// Connections closed because the peer opened a second stream.
    pub extra_streams: u64,
}

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

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e.to_string())
}

fn varint(v: u64) -> VarInt {
    VarInt::from_u64(v).unwrap_or(VarInt::MAX)
}

/// quic-stacks.md 7.2: large windows (SMB READ/WRITE up to 8 MiB on one stream), exactly one
/// peer bidirectional stream and no unidirectional ones, server PINGs, no datagrams.
fn transport_config(s: &QuicSettings) -> io::Result<TransportConfig> {
    let mut tc = TransportConfig::default();
    let mut mtu = MtuDiscoveryConfig::default();
    mtu.upper_bound(s.effective_mtu_upper_bound());
    tc.stream_receive_window(varint(s.stream_receive_window))
        .receive_window(varint(s.receive_window))
        .send_window(s.send_window)
        .max_concurrent_bidi_streams(VarInt::from_u32(1))
        .max_concurrent_uni_streams(VarInt::from_u32(0))
        .max_idle_timeout(Some(
            IdleTimeout::try_from(s.idle_timeout).map_err(invalid)?,
        ))
        .keep_alive_interval((!s.keep_alive.is_zero()).then_some(s.keep_alive))
        .datagram_receive_buffer_size(None)
        .mtu_discovery_config(Some(mtu));
    Ok(tc)
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

/// A UDP socket with large buffers: quinn stalls and drops on bursts when SO_RCVBUF is the
/// Linux default of 208 KiB (quic-stacks.md 7.2, quinn #2262).
fn udp_socket(addr: SocketAddr, want: usize) -> io::Result<std::net::UdpSocket> {
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if let Err(e) = sock.set_recv_buffer_size(want) {
        tracing::warn!(error = %e, want, "could not set SO_RCVBUF");
    }
    if let Err(e) = sock.set_send_buffer_size(want) {
        tracing::warn!(error = %e, want, "could not set SO_SNDBUF");
    }
    let rcv = sock.recv_buffer_size().unwrap_or(0);
    let snd = sock.send_buffer_size().unwrap_or(0);
    if rcv < want || snd < want {
        tracing::warn!(
            want,
            rcvbuf = rcv,
            sndbuf = snd,
            "kernel capped the UDP socket buffers; raise net.core.rmem_max and net.core.wmem_max"
        );
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

impl QuicListener {
    /// Binds the UDP socket and starts accepting. Must run inside a tokio runtime.
    pub fn bind(addr: SocketAddr, tls: TlsSettings, settings: QuicSettings) -> io::Result<Self> {
        let socket = udp_socket(addr, settings.socket_buffer)?;
        let shared = Arc::new(Shared {
            local: socket.local_addr()?,
            transport: Arc::new(transport_config(&settings)?),
            settings,
            per_ip: Mutex::new(HashMap::new()),
            handshaking: AtomicUsize::new(0),
            retries: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            handshake_failures: AtomicU64::new(0),
            extra_streams: AtomicU64::new(0),
        });
        let server = quinn_server_config(&tls, &shared).map_err(invalid)?;
        let mut endpoint_config = EndpointConfig::default();
        // Lets the peer send datagrams as large as our own MTU discovery may reach.
        let mtu = shared.settings.effective_mtu_upper_bound();
        endpoint_config
            .max_udp_payload_size(mtu.max(1472))
            .map_err(invalid)?;
        let endpoint = Endpoint::new(
            endpoint_config,
            Some(server),
            socket,
            Arc::new(TokioRuntime),
        )?;
        tracing::info!(
            local = ?endpoint.local_addr().ok(),
            mtu_upper_bound = mtu,
            min_mtu = MIN_MTU,
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
        let (reader_alive, reader_gone) = oneshot::channel();
        let (writer_handoff, writer_gone) = oneshot::channel();
        let connection = Connection {
            reader: Box::pin(QuicReader {
                inner: recv,
                _alive: reader_alive,
            }),
            writer: Box::pin(QuicWriter {
                inner: Some(send),
                handoff: Some(writer_handoff),
            }),
            peer: conn.remote_address(),
            local,
            kind: TransportKind::Quic,
        };
        tracing::debug!(%peer, "SMB over QUIC connection ready");
        tokio::spawn(watch(conn, reader_gone, writer_gone, slot, shared));
        let _ = tx.send(Ok(connection)).await;
    });
}

/// Owns the QUIC connection beside the SMB stream: refuses any further stream (MS-SMB2
/// product note <2>) and closes with code 0 once the SMB side has dropped both halves.
async fn watch(
    conn: ::quinn::Connection,
    reader_gone: oneshot::Receiver<()>,
    writer_gone: oneshot::Receiver<SendStream>,
    _slot: IpSlot,
    shared: Arc<Shared>,
) {
    let ended = async {
        let send = writer_gone.await.ok();
        let _ = reader_gone.await;
        if let Some(mut send) = send {
            let _ = send.finish();
            let _ = tokio::time::timeout(LINGER, send.stopped()).await;
        }
    };
    let extra = |shared: &Shared| {
        shared.extra_streams.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(peer = %conn.remote_address(), "QUIC peer opened a second stream; closing");
        conn.close(
            VarInt::from_u32(CLOSE_EXTRA_STREAM),
            b"one stream per SMB connection",
        );
    };
    tokio::select! {
        () = ended => conn.close(VarInt::from_u32(CLOSE_NORMAL), b""),
        r = conn.accept_bi() => if r.is_ok() { extra(&shared) },
        r = conn.accept_uni() => if r.is_ok() { extra(&shared) },
    }
    // The per-IP slot is held until the connection is really gone.
    let _ = conn.closed().await;
}

/// The SMB read half: quinn's stream itself (no extra buffering); while it lives the
/// connection stays open.
struct QuicReader {
    inner: RecvStream,
    _alive: oneshot::Sender<()>,
}

impl AsyncRead for QuicReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        AsyncRead::poll_read(Pin::new(&mut self.get_mut().inner), cx, buf)
    }
}

/// The SMB write half. On drop the stream goes back to the watcher, which finishes it and
/// lets its last bytes be acknowledged before closing the connection.
struct QuicWriter {
    inner: Option<SendStream>,
    handoff: Option<oneshot::Sender<SendStream>>,
}

impl QuicWriter {
    fn stream(&mut self) -> io::Result<&mut SendStream> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))
    }
}

impl AsyncWrite for QuicWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut().stream() {
            Ok(s) => AsyncWrite::poll_write(Pin::new(s), cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream() {
            Ok(s) => AsyncWrite::poll_flush(Pin::new(s), cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().stream() {
            Ok(s) => AsyncWrite::poll_shutdown(Pin::new(s), cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl Drop for QuicWriter {
    fn drop(&mut self) {
        if let (Some(stream), Some(tx)) = (self.inner.take(), self.handoff.take()) {
            // If the watcher is gone the connection is closed already; dropping is right.
            let _ = tx.send(stream);
        }
    }
}
