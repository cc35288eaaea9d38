//! The quinn client: one endpoint (one UDP socket) from which SMB connections are opened, each
//! carrying the one bidirectional stream SMB uses (MS-SMB2 2.1).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ::quinn::{ConnectionError, Endpoint, TransportConfig, VarInt};
use socket2::SockRef;
use tokio::time::Instant;

use super::stream::split;
use super::{Role, endpoint_config, transport_config, tune_socket, udp_socket};
use crate::client_tls::{ClientTls, Handshake, QuicClientConfig, QuicConnectError};
use crate::quic::{CLOSE_NORMAL, UdpBuffers};
use crate::{Connection, TransportKind};

/// A server that has not completed the handshake by then is taken as not answering (the same
/// bound the listener gives handshakes; smb-rs uses 10 s too).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest pause between looks for the server's HANDSHAKE_DONE.
const CONFIRM_POLL_MAX: Duration = Duration::from_millis(20);

/// One quinn client endpoint. Connections it opened keep working after it is dropped.
pub struct QuicClient {
    endpoint: Endpoint,
    tls: ClientTls,
    /// Built once: every connection shares one rustls configuration, which is what lets a
    /// reconnect resume its TLS session instead of checking the certificate again.
    config: ::quinn::ClientConfig,
    socket_buffer: usize,
}

impl std::fmt::Debug for QuicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicClient")
            .field("local", &self.endpoint.local_addr().ok())
            .finish()
    }
}

impl QuicClient {
    /// Binds the UDP socket (`0.0.0.0:0` or `[::]:0` for any) with the settings' buffers and
    /// loads the trust anchors. Must run inside a tokio runtime.
    pub fn new(cfg: QuicClientConfig, bind: SocketAddr) -> io::Result<Self> {
        let settings = cfg.settings.clone();
        let transport: Arc<TransportConfig> = Arc::new(transport_config(&settings, Role::Client)?);
        let tls = ClientTls::new(cfg)?;
        let (rustls_config, _) = tls.for_handshake();
        let crypto = ::quinn::crypto::rustls::QuicClientConfig::try_from(rustls_config)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut config = ::quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport);
        let (socket, buffers) = udp_socket(bind, settings.socket_buffer)?;
        warn_if_capped(buffers);
        let endpoint = Endpoint::new(
            endpoint_config(&settings)?,
            None,
            socket,
            super::quinn_runtime(&settings, "smbq-quic-client")?,
        )?;
        Ok(Self {
            endpoint,
            tls,
            config,
            socket_buffer: settings.socket_buffer,
        })
    }

    /// Handshakes with `addr`, checking its certificate against `server_name` (also sent as
    /// SNI unless it is an IP address), waits for the server to confirm the handshake, and
    /// opens the SMB stream. The server sees the stream once the first bytes are written.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        server_name: &str,
    ) -> Result<Connection, QuicConnectError> {
        let (_, handshake) = self.tls.for_handshake();
        let connecting = self
            .endpoint
            .connect_with(self.config.clone(), addr, server_name)
            .map_err(|e| QuicConnectError::Other(e.to_string()))?;
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        let conn = match tokio::time::timeout_at(deadline, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(connect_error(e, &handshake)),
            Err(_) => return Err(QuicConnectError::Timeout),
        };
        // Without a CertificateRequest the server has nothing left to judge: its Finished,
        // which the client has verified, already accepted the handshake.
        if handshake.cert_asked() {
            confirmed(&conn, deadline, &handshake).await?;
        }
        let (send, recv) = conn
            .open_bi()
            .await
            .map_err(|e| connect_error(e, &handshake))?;
        let local = self.endpoint.local_addr()?;
        let local = conn
            .local_ip()
            .map_or(local, |ip| SocketAddr::new(ip, local.port()));
        let peer = conn.remote_address();
        let (reader, writer, gone) = split(send, recv);
        let opener: Arc<dyn crate::StreamOpener> =
            Arc::new(super::multi::QuinnOpener(conn.clone()));
        let path: Arc<dyn crate::PathStats> = Arc::new(super::QuinnPath(conn.clone()));
        tokio::spawn(async move {
            tokio::select! {
                streams = gone.ended() => {
                    conn.close(VarInt::from_u32(CLOSE_NORMAL), b"");
                    drop(streams);
                }
                _ = conn.closed() => {}
            }
        });
        tracing::debug!(%peer, server_name, "SMB over QUIC connected");
        Ok(Connection {
            reader: Box::new(reader),
            writer: Box::new(writer),
            peer,
            local,
            kind: TransportKind::Quic,
            gate: None,
            opener: Some(opener),
            path: Some(path),
            client_cert: None,
        })
    }

    /// Moves the endpoint, and every connection on it, to a new UDP socket (NAT rebinding,
    /// migration; RFC 9000 9). The socket gets the same buffers as the first one. The server
    /// validates the new path and answers there; the old socket is dropped once it does.
    pub fn rebind(&self, socket: std::net::UdpSocket) -> io::Result<()> {
        warn_if_capped(tune_socket(SockRef::from(&socket), self.socket_buffer)?);
        self.endpoint.rebind(socket)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }
}

/// TLS 1.3 lets the client finish its handshake before the server has judged the client's
/// certificate; the server's verdict is HANDSHAKE_DONE (RFC 9001 4.1.2) or a close. quinn
/// reports neither as an event, so its frame counters are watched until one shows, which
/// costs one round trip and makes a refused client certificate fail here, not on first read.
/// Only done when the server asked for a certificate.
async fn confirmed(
    conn: &::quinn::Connection,
    deadline: Instant,
    handshake: &Handshake,
) -> Result<(), QuicConnectError> {
    let mut pause = Duration::from_millis(1);
    loop {
        if conn.stats().frame_rx.handshake_done > 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(QuicConnectError::Timeout);
        }
        tokio::select! {
            e = conn.closed() => return Err(connect_error(e, handshake)),
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(CONFIRM_POLL_MAX);
    }
}

/// TLS alert carried in a QUIC CRYPTO_ERROR (RFC 9001 4.8: 0x100 + alert).
fn alert_of(code: ::quinn::TransportErrorCode) -> Option<rustls::AlertDescription> {
    let raw = u64::from(code);
    (0x100..0x200)
        .contains(&raw)
        .then(|| rustls::AlertDescription::from((raw & 0xff) as u8))
}

fn connect_error(e: ConnectionError, handshake: &Handshake) -> QuicConnectError {
    if let Some(f) = handshake.failure() {
        return f.into_error();
    }
    match e {
        ConnectionError::TimedOut => QuicConnectError::Timeout,
        ConnectionError::ConnectionClosed(c) => {
            let reason = String::from_utf8_lossy(&c.reason);
            QuicConnectError::Refused(match alert_of(c.error_code) {
                Some(alert) => format!("TLS alert {alert:?}"),
                None if reason.is_empty() => c.error_code.to_string(),
                None => format!("{}: {reason}", c.error_code),
            })
        }
        ConnectionError::ApplicationClosed(c) => QuicConnectError::Refused(format!(
            "closed with code {}: {}",
            c.error_code,
            String::from_utf8_lossy(&c.reason)
        )),
        ConnectionError::Reset => {
            QuicConnectError::Refused("the server reset the connection".into())
        }
        other => QuicConnectError::Other(other.to_string()),
    }
}

/// A client runs once per command and has no state directory to remember that it said so.
fn warn_if_capped(b: UdpBuffers) {
    if b.capped() {
        tracing::warn!(
            want = b.want,
            rcvbuf = b.rcvbuf,
            sndbuf = b.sndbuf,
            "kernel capped the UDP socket buffers; {}",
            b.sysctl_fix()
        );
    }
}
