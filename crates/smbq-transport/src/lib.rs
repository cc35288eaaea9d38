//! Listeners that yield connections as a pair of byte-stream halves. TCP carries one stream per
//! connection; QUIC (a later transport) carries the client's first bidirectional stream the
//! same way, so the engine above sees no difference.
#![forbid(unsafe_code)]

pub mod tcp;

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
