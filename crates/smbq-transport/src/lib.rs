//! Listeners that yield connections as a pair of byte-stream halves. TCP carries one stream per
//! connection; QUIC carries the client's first bidirectional stream the same way (MS-SMB2 2.1),
//! so the engine above sees no difference.
//!
//! The QUIC part is split so a second stack can join quinn: `quic`, `tls`, `certs` and
//! `client_auth` hold what does not depend on the stack; `quinn` holds the quinn listener.
#![forbid(unsafe_code)]

pub mod tcp;

mod certs;
mod client_auth;
mod quic;
mod quinn;
mod tls;

pub use crate::certs::{CertEntry, CertStore, fingerprint, fingerprint_hex};
pub use crate::client_auth::{ClientAuth, ClientPolicy};
pub use crate::quic::{
    ALPN, CLOSE_EXTRA_STREAM, CLOSE_NO_STREAM, CLOSE_NORMAL, MAX_MTU_UPPER_BOUND, MIN_MTU,
    QuicSettings,
};
pub use crate::quinn::{QuicListener, QuicListenerStats};
pub use crate::tls::{TlsError, TlsSettings, crypto_provider, server_config};
/// The rustls this crate builds on, so callers name the same `CertificateDer`, `KeyLog`, ...
pub use rustls;

use std::net::SocketAddr;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};

/// Which transport a connection came in on; QUIC enables transport-level security.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportKind {
    Tcp,
    Quic,
}

/// One accepted connection, split into halves so reading and writing run independently.
/// For QUIC the halves own the QUIC connection: dropping both closes it with code 0, after
/// the written bytes were acknowledged (bounded wait).
pub struct Connection {
    pub reader: Pin<Box<dyn AsyncRead + Send>>,
    pub writer: Pin<Box<dyn AsyncWrite + Send>>,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub kind: TransportKind,
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
