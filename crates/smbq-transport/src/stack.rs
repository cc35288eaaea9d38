//! The seam for a second QUIC stack. quinn is the only implementation today; s2n-quic is
//! meant to join behind these traits for A/B throughput runs (quic-stacks.md 7.1). Everything
//! a stack must not decide on its own (TLS configuration, certificates, client policy, ALPN,
//! tuning values) comes from the stack-independent modules, so both stacks serve the same.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use crate::Connection;
use crate::client_tls::{QuicClientConfig, QuicConnectError};
use crate::quic::{QuicListenerStats, QuicSettings, UdpBuffers};
use crate::quinn::{QuicClient, QuicListener};
use crate::tls::{TlsError, TlsSettings};

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A QUIC listener as the server uses it.
pub trait QuicAcceptor: Send + Sync {
    /// Next SMB connection (the client's first bidirectional stream); None once closed.
    fn accept(&self) -> BoxFuture<'_, Option<io::Result<Connection>>>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
    /// New TLS settings for handshakes that start from now on.
    fn set_tls(&self, tls: TlsSettings) -> Result<(), TlsError>;
    fn stats(&self) -> QuicListenerStats;
    /// The UDP socket buffers the kernel granted.
    fn udp_buffers(&self) -> UdpBuffers;
    /// Closes every connection with code 0 and waits (bounded) for the peers to hear it.
    fn shutdown(&self) -> BoxFuture<'_, ()>;
}

/// A QUIC client endpoint as the SMB client uses it.
pub trait QuicConnector: Send + Sync {
    fn connect<'a>(
        &'a self,
        addr: SocketAddr,
        server_name: &'a str,
    ) -> BoxFuture<'a, Result<Connection, QuicConnectError>>;
    /// Moves the endpoint to a new UDP socket (NAT rebinding, migration).
    fn rebind(&self, socket: std::net::UdpSocket) -> io::Result<()>;
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// Which QUIC implementation to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuicStack {
    #[default]
    Quinn,
}

impl QuicStack {
    /// Binds a listener on this stack. Must run inside a tokio runtime.
    pub fn listen(
        self,
        addr: SocketAddr,
        tls: TlsSettings,
        settings: QuicSettings,
    ) -> io::Result<Arc<dyn QuicAcceptor>> {
        match self {
            Self::Quinn => Ok(Arc::new(QuicListener::bind(addr, tls, settings)?)),
        }
    }

    /// A client endpoint on this stack. Must run inside a tokio runtime.
    pub fn client(
        self,
        cfg: QuicClientConfig,
        bind: SocketAddr,
    ) -> io::Result<Arc<dyn QuicConnector>> {
        match self {
            Self::Quinn => Ok(Arc::new(QuicClient::new(cfg, bind)?)),
        }
    }
}

impl QuicAcceptor for QuicListener {
    fn accept(&self) -> BoxFuture<'_, Option<io::Result<Connection>>> {
        Box::pin(QuicListener::accept(self))
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        QuicListener::local_addr(self)
    }
    fn set_tls(&self, tls: TlsSettings) -> Result<(), TlsError> {
        QuicListener::set_tls(self, tls)
    }
    fn stats(&self) -> QuicListenerStats {
        QuicListener::stats(self)
    }
    fn udp_buffers(&self) -> UdpBuffers {
        QuicListener::udp_buffers(self)
    }
    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(QuicListener::shutdown(self))
    }
}

impl QuicConnector for QuicClient {
    fn connect<'a>(
        &'a self,
        addr: SocketAddr,
        server_name: &'a str,
    ) -> BoxFuture<'a, Result<Connection, QuicConnectError>> {
        Box::pin(QuicClient::connect(self, addr, server_name))
    }
    fn rebind(&self, socket: std::net::UdpSocket) -> io::Result<()> {
        QuicClient::rebind(self, socket)
    }
    fn local_addr(&self) -> io::Result<SocketAddr> {
        QuicClient::local_addr(self)
    }
}
