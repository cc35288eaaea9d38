//! The MsQuic client: one registration and configuration from which SMB connections are
//! opened, each with the one bidirectional stream SMB uses (MS-SMB2 2.1). The server's
//! certificate is judged by smbq's own anchor (`ClientTls::verify_leaf`), as on quinn.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use smbq_msquic_ffi::msquic::ConnectionEvent;
use smbq_msquic_ffi::{ClientConfig, OwnedStream};
use tokio::sync::oneshot;

use super::stream::{Closer, StreamShared, split};
use super::{CLIENT_HANDSHAKE_TIMEOUT, Reg, alpn, settings, status_error, unsupported};
use crate::client_tls::{ClientTls, QuicClientConfig, QuicConnectError, VerifyFailure};
use crate::{Connection, TransportKind};

/// An MsQuic client endpoint. Connections it opened keep working after it is dropped.
pub struct MsQuicClient {
    // Field order: the configuration closes before the registration.
    config: ClientConfig,
    reg: Arc<Reg>,
    tls: Arc<ClientTls>,
}

impl std::fmt::Debug for MsQuicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsQuicClient").finish_non_exhaustive()
    }
}

/// How a handshake ended, reported once from the connection's callback.
type Outcome = Result<(), QuicConnectError>;

impl MsQuicClient {
    /// Loads the trust anchors and opens the configuration. `bind` must be a wildcard address
    /// (MsQuic picks the socket per connection). Must run inside a tokio runtime.
    pub fn new(cfg: QuicClientConfig, bind: SocketAddr) -> io::Result<Self> {
        if cfg.client_cert.is_some() {
            return Err(unsupported("a client certificate"));
        }
        if cfg.keylog.is_some() {
            tracing::warn!("MsQuic: TLS key logging is not available; no keys are logged");
        }
        if !bind.ip().is_unspecified() || bind.port() != 0 {
            tracing::debug!(%bind, "MsQuic client: the bind address is left to MsQuic");
        }
        let settings = settings(&cfg.settings, false)?;
        let tls = Arc::new(ClientTls::new(cfg)?);
        let reg = Reg::open("smbq-client")?;
        let config = ClientConfig::new(&reg, &alpn(), &settings)
            .map_err(|s| status_error("client configuration", s))?;
        Ok(Self { config, reg, tls })
    }

    /// Handshakes with `addr`, checking its certificate against `server_name` (also the SNI),
    /// and opens the SMB stream; the server sees it with the first bytes written.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        server_name: &str,
    ) -> Result<Connection, QuicConnectError> {
        let shared = Arc::new(StreamShared::default());
        let failure: Arc<Mutex<Option<VerifyFailure>>> = Arc::default();
        let (tx, rx) = oneshot::channel::<Outcome>();
        let mut tx = Some(tx);
        let mut report = move |o: Outcome| {
            if let Some(tx) = tx.take() {
                let _ = tx.send(o);
            }
        };
        let events = shared.clone();
        let tls = self.tls.clone();
        let name = server_name.to_owned();
        let verify_failure = failure.clone();
        let conn = smbq_msquic_ffi::connect(
            &self.reg,
            &self.config,
            addr,
            server_name,
            move |_, event| {
                match event {
                    ConnectionEvent::Connected { .. } => report(Ok(())),
                    ConnectionEvent::ShutdownInitiatedByPeer { error_code } => {
                        report(Err(QuicConnectError::Refused(format!(
                            "closed with code {error_code}"
                        ))));
                    }
                    ConnectionEvent::ShutdownInitiatedByTransport { status, error_code } => {
                        report(Err(transport_error(status, error_code)));
                    }
                    ConnectionEvent::ShutdownComplete { .. } => {
                        report(Err(QuicConnectError::Other("connection closed".into())));
                        events.connection_closed();
                    }
                    _ => {}
                }
                Ok(())
            },
            move |der| {
                tls.verify_leaf(der, &name).map_err(|f| {
                    *verify_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
                })
            },
        )
        .map_err(|s| QuicConnectError::Other(format!("MsQuic connect: {s:?}")))?;
        let closer = |conn| Closer {
            conn: Some(conn),
            stream: None,
            shared: shared.clone(),
            reg: self.reg.clone(),
            written: Default::default(),
            rt: tokio::runtime::Handle::current(),
            on_close: None,
        };
        let outcome = match tokio::time::timeout(CLIENT_HANDSHAKE_TIMEOUT, rx).await {
            Ok(Ok(o)) => o,
            Ok(Err(_)) => Err(QuicConnectError::Other("connection closed".into())),
            Err(_) => Err(QuicConnectError::Timeout),
        };
        if let Err(e) = outcome {
            // The Closer shuts the connection down and releases it off this thread.
            drop(closer(conn));
            let verdict = failure.lock().unwrap_or_else(|p| p.into_inner()).take();
            return Err(verdict.map_or(e, VerifyFailure::into_error));
        }
        let stream = match OwnedStream::open(&conn, shared.handler()) {
            Ok(s) => s,
            Err(s) => {
                drop(closer(conn));
                return Err(QuicConnectError::Other(format!("MsQuic stream: {s:?}")));
            }
        };
        let mut c = closer(conn);
        c.stream = Some(Arc::new(stream));
        let (reader, writer) = split(c);
        tracing::debug!(peer = %addr, server_name, "SMB over QUIC connected (msquic)");
        Ok(Connection {
            reader: Box::new(reader),
            writer: Box::new(writer),
            peer: addr,
            local: SocketAddr::new(
                if addr.is_ipv4() {
                    std::net::Ipv4Addr::UNSPECIFIED.into()
                } else {
                    std::net::Ipv6Addr::UNSPECIFIED.into()
                },
                0,
            ),
            kind: TransportKind::Quic,
            gate: None,
            opener: None,
            path: None,
            client_cert: None,
        })
    }

    /// MsQuic owns its sockets; moving connections to a socket of the caller's is not offered.
    pub fn rebind(&self, _socket: std::net::UdpSocket) -> io::Result<()> {
        Err(unsupported("moving a client to another UDP socket"))
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Err(unsupported("a client endpoint address"))
    }
}

/// A transport-initiated shutdown during the handshake: a TLS alert from the server (QUIC
/// CRYPTO_ERROR 0x100 + alert, RFC 9001 4.8), an idle timeout, or another failure.
fn transport_error(status: smbq_msquic_ffi::msquic::Status, code: u64) -> QuicConnectError {
    if (0x100..0x200).contains(&code) {
        let alert = rustls::AlertDescription::from((code & 0xff) as u8);
        return QuicConnectError::Refused(format!("TLS alert {alert:?}"));
    }
    let text = format!("{status:?}");
    if text.contains("TIMEOUT") || text.contains("UNREACHABLE") {
        return QuicConnectError::Timeout;
    }
    QuicConnectError::Other(format!("MsQuic: {text} (code {code})"))
}
