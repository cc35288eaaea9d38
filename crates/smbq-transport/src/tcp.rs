//! SMB over TCP (Direct TCP, MS-SMB2 2.1).

use std::io;
use std::net::SocketAddr;

use tokio::net::{TcpListener as TokioListener, TcpSocket};

use crate::{Connection, TransportKind};

pub struct TcpListener {
    inner: TokioListener,
}

impl TcpListener {
    /// Binds with SO_REUSEADDR and a large backlog.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        sock.set_reuseaddr(true)?;
        sock.bind(addr)?;
        Ok(Self {
            inner: sock.listen(1024)?,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    pub async fn accept(&self) -> io::Result<Connection> {
        let (stream, peer) = self.inner.accept().await?;
        // SMB is request/response: Nagle would hold small responses back.
        stream.set_nodelay(true)?;
        let local = stream.local_addr()?;
        let (r, w) = stream.into_split();
        Ok(Connection {
            reader: Box::pin(r),
            writer: Box::pin(w),
            peer,
            local,
            kind: TransportKind::Tcp,
        })
    }
}
