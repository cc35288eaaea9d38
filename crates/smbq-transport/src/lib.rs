//! Listeners and connectors that yield connections as a pair of chunk-stream halves. TCP
//! carries one stream per connection; QUIC carries the client's first bidirectional stream the
//! same way (MS-SMB2 2.1), so the engine above sees no difference.
//!
//! The QUIC part is split so a second stack can join quinn: `quic`, `tls`, `client_tls`,
//! `certs` and `client_auth` hold what does not depend on the stack; `quinn/` holds the quinn
//! listener and client; `msquic/` the MsQuic ones (feature `msquic`, its raw-pointer parts in
//! the smbq-msquic-ffi crate); `stack` is the seam both implement.
#![forbid(unsafe_code)]

pub mod tcp;

mod certs;
mod chunk_io;
mod client_auth;
mod client_tls;
mod more_streams;
#[cfg(feature = "msquic")]
mod msquic;
mod quic;
pub mod quic_lb;
mod quinn;
mod stack;
mod tls;

pub use crate::certs::{CertEntry, CertStore, fingerprint, fingerprint_hex};
pub use crate::chunk_io::{ChunkRead, ChunkWrite, IoFuture};
pub use crate::client_auth::{ClientAuth, ClientPolicy};
pub use crate::client_tls::{QuicClientConfig, QuicConnectError, ServerTrust};
pub use crate::more_streams::{
    BULK_BYTES, BULK_LINGER, DataPriority, DataStream, PRIORITY_BULK, PRIORITY_CONTROL,
    PRIORITY_SMALL, StreamGate, StreamOpener,
};
pub use crate::quic::{
    ALPN, CLOSE_EXTRA_STREAM, CLOSE_NO_STREAM, CLOSE_NORMAL, Congestion, MAX_DATA_STREAMS,
    MAX_MTU_UPPER_BOUND, MIN_MTU, QuicListenerStats, QuicSettings, UdpBuffers,
};
pub use crate::quinn::{QuicClient, QuicListener};
pub use crate::stack::{QuicAcceptor, QuicConnector, QuicStack};
pub use crate::tcp::connect_tcp;
pub use crate::tls::{TlsError, TlsSettings, crypto_provider, server_config};
/// The rustls this crate builds on, so callers name the same `CertificateDer`, `KeyLog`, ...
pub use rustls;
pub use smbq_tcpinfo::TcpPath;

use std::net::SocketAddr;

/// Which transport a connection came in on; QUIC enables transport-level security.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Tcp,
    Quic,
}

/// One connection, split into halves so reading and writing run independently.
/// For QUIC the halves own the QUIC connection: dropping both closes it with code 0, after
/// the written bytes were acknowledged (bounded wait).
pub struct Connection {
    pub reader: Box<dyn ChunkRead>,
    pub writer: Box<dyn ChunkWrite>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub kind: TransportKind,
    /// Server side of a QUIC connection that may carry data streams (docs/multistream.md);
    /// None on TCP, on MsQuic, and with `[quic] max_streams = 0`.
    pub gate: Option<Box<dyn StreamGate>>,
    /// Client side: opens data streams on the same QUIC connection.
    pub opener: Option<std::sync::Arc<dyn StreamOpener>>,
    /// The QUIC path's figures for `smbq status` and the metrics; None on TCP (the kernel
    /// keeps those) and on MsQuic.
    pub path: Option<std::sync::Arc<dyn PathStats>>,
    /// Server side of QUIC under `client_auth`: the certificate the client was admitted
    /// with, for the connection's audit line.
    pub client_cert: Option<ClientCert>,
}

/// A client certificate as the audit line names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCert {
    /// SHA-256 of the DER leaf.
    pub fingerprint: [u8; 32],
    pub subject: String,
    pub issuer: String,
    /// DNS subject alternative names.
    pub names: Vec<String>,
}

/// What a QUIC connection's path looks like now.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PathSample {
    pub rtt: std::time::Duration,
    pub cwnd_bytes: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
}

/// Samples a live connection's path (cheap: a lock and a copy).
pub trait PathStats: Send + Sync {
    fn sample(&self) -> PathSample;
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("peer", &self.peer)
            .field("local", &self.local)
            .field("kind", &self.kind)
            .finish()
    }
}
