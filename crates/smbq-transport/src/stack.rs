//! The seam between smbq and its QUIC stacks: quinn (the default) and MsQuic (feature
//! `msquic`, `[quic] stack = "msquic"`; issue 11 item 7). Everything a stack must not decide
//! on its own (certificates, client policy, ALPN, tuning values) comes from the
//! stack-independent modules, so both stacks serve the same.

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
    /// quinn 0.11 with rustls on AWS-LC, driven by the caller's tokio runtime.
    #[default]
    Quinn,
    /// Microsoft's MsQuic (with quictls), on its own worker threads: the stack of Windows'
    /// SMB over QUIC and of the Fusion prototype. Only in builds with the `msquic` feature.
    MsQuic,
}

impl QuicStack {
    pub const ALL: [QuicStack; 2] = [QuicStack::Quinn, QuicStack::MsQuic];

    pub fn name(self) -> &'static str {
        match self {
            Self::Quinn => "quinn",
            Self::MsQuic => "msquic",
        }
    }

    /// Whether this build has the stack.
    pub fn available(self) -> bool {
        match self {
            Self::Quinn => true,
            Self::MsQuic => cfg!(feature = "msquic"),
        }
    }
}

impl std::fmt::Display for QuicStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for QuicStack {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown QUIC stack {s:?} (quinn, msquic)"))
    }
}

#[cfg(not(feature = "msquic"))]
fn no_msquic() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "this build has no MsQuic stack (built without the msquic feature)",
    )
}

impl QuicStack {
    /// Starts the stack's own threads now, from the calling thread: MsQuic's worker threads
    /// inherit its name, which lets a caller (the bench) tell their CPU time apart. quinn runs
    /// on the caller's runtime and has none.
    pub fn start_threads(self) -> io::Result<()> {
        match self {
            Self::Quinn => Ok(()),
            #[cfg(feature = "msquic")]
            Self::MsQuic => crate::msquic::start_threads(),
            #[cfg(not(feature = "msquic"))]
            Self::MsQuic => Err(no_msquic()),
        }
    }

    /// Waits (at most `timeout`) for the stack's closing work to finish before the process
    /// exits: MsQuic closes registrations on threads of their own (`msquic::Reg`).
    pub fn wait_for_closes(self, timeout: std::time::Duration) {
        match self {
            Self::Quinn => {}
            #[cfg(feature = "msquic")]
            Self::MsQuic => crate::msquic::wait_for_closes(timeout),
            #[cfg(not(feature = "msquic"))]
            Self::MsQuic => {
                let _ = timeout;
            }
        }
    }

    /// Binds a listener on this stack. Must run inside a tokio runtime.
    pub fn listen(
        self,
        addr: SocketAddr,
        tls: TlsSettings,
        settings: QuicSettings,
    ) -> io::Result<Arc<dyn QuicAcceptor>> {
        match self {
            Self::Quinn => Ok(Arc::new(QuicListener::bind(addr, tls, settings)?)),
            #[cfg(feature = "msquic")]
            Self::MsQuic => Ok(Arc::new(crate::msquic::MsQuicListener::bind(
                addr, tls, settings,
            )?)),
            #[cfg(not(feature = "msquic"))]
            Self::MsQuic => Err(no_msquic()),
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
            #[cfg(feature = "msquic")]
            Self::MsQuic => Ok(Arc::new(crate::msquic::MsQuicClient::new(cfg, bind)?)),
            #[cfg(not(feature = "msquic"))]
            Self::MsQuic => Err(no_msquic()),
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

#[cfg(feature = "msquic")]
mod msquic_impls {
    use super::*;
    use crate::msquic::{MsQuicClient, MsQuicListener};

    impl QuicAcceptor for MsQuicListener {
        fn accept(&self) -> BoxFuture<'_, Option<io::Result<Connection>>> {
            Box::pin(MsQuicListener::accept(self))
        }
        fn local_addr(&self) -> io::Result<SocketAddr> {
            MsQuicListener::local_addr(self)
        }
        fn set_tls(&self, tls: TlsSettings) -> Result<(), TlsError> {
            MsQuicListener::set_tls(self, tls)
        }
        fn stats(&self) -> QuicListenerStats {
            MsQuicListener::stats(self)
        }
        fn udp_buffers(&self) -> UdpBuffers {
            MsQuicListener::udp_buffers(self)
        }
        fn shutdown(&self) -> BoxFuture<'_, ()> {
            Box::pin(MsQuicListener::shutdown(self))
        }
    }

    impl QuicConnector for MsQuicClient {
        fn connect<'a>(
            &'a self,
            addr: SocketAddr,
            server_name: &'a str,
        ) -> BoxFuture<'a, Result<Connection, QuicConnectError>> {
            Box::pin(MsQuicClient::connect(self, addr, server_name))
        }
        fn rebind(&self, socket: std::net::UdpSocket) -> io::Result<()> {
            MsQuicClient::rebind(self, socket)
        }
        fn local_addr(&self) -> io::Result<SocketAddr> {
            MsQuicClient::local_addr(self)
        }
    }
}
