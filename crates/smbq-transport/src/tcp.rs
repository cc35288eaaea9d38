//! SMB over TCP (Direct TCP, MS-SMB2 2.1): the listener, the client connect, and the chunk
//! halves of a TCP stream.

use std::io::{self, IoSlice};
use std::net::SocketAddr;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener as TokioListener, TcpSocket, TcpStream};

use crate::chunk_io::{ChunkRead, ChunkWrite, IoFuture, MIN_READ_ROOM, consume};
use crate::{Connection, TransportKind};

/// What `read_chunk` allocates when its buffer runs low. Chunks handed out share this
/// allocation until the last of them is dropped.
const READ_BUFFER: usize = 256 * 1024;
/// Slices per `writev`; a response is a handful of segments, a batch of responses more.
const MAX_IOV: usize = 64;

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
        connection(stream, peer)
    }
}

/// Connects to an SMB server over TCP.
pub async fn connect_tcp(addr: SocketAddr) -> io::Result<Connection> {
    let stream = TcpStream::connect(addr).await?;
    let peer = stream.peer_addr()?;
    connection(stream, peer)
}

fn connection(stream: TcpStream, peer: SocketAddr) -> io::Result<Connection> {
    // SMB is request/response: Nagle would hold small messages back.
    stream.set_nodelay(true)?;
    let local = stream.local_addr()?;
    let (r, w) = stream.into_split();
    Ok(Connection {
        reader: Box::new(TcpReader {
            inner: r,
            buf: BytesMut::new(),
        }),
        writer: Box::new(TcpWriter { inner: w }),
        peer,
        local,
        kind: TransportKind::Tcp,
        gate: None,
        opener: None,
        path: None,
        client_cert: None,
    })
}

struct TcpReader {
    inner: OwnedReadHalf,
    /// Spare room reads land in; each chunk is split off it.
    buf: BytesMut,
}

impl ChunkRead for TcpReader {
    fn read_chunk(&mut self) -> IoFuture<'_, Option<Bytes>> {
        Box::pin(async move {
            if self.buf.capacity() - self.buf.len() < MIN_READ_ROOM {
                self.buf.reserve(READ_BUFFER);
            }
            let n = self.inner.read_buf(&mut self.buf).await?;
            Ok((n > 0).then(|| self.buf.split().freeze()))
        })
    }

    fn read_into<'a>(&'a mut self, buf: &'a mut BytesMut) -> IoFuture<'a, usize> {
        Box::pin(async move {
            if buf.capacity() == buf.len() {
                buf.reserve(MIN_READ_ROOM);
            }
            self.inner.read_buf(buf).await
        })
    }
}

struct TcpWriter {
    inner: OwnedWriteHalf,
}

impl ChunkWrite for TcpWriter {
    fn write_chunks<'a>(&'a mut self, chunks: &'a mut [Bytes]) -> IoFuture<'a, ()> {
        Box::pin(async move {
            let mut rest = consume(chunks, 0);
            while !rest.is_empty() {
                let n = {
                    let mut iov = [IoSlice::new(&[]); MAX_IOV];
                    let mut used = 0;
                    for (slot, chunk) in iov.iter_mut().zip(rest.iter()) {
                        *slot = IoSlice::new(chunk);
                        used += 1;
                    }
                    let iov = iov.get(..used).unwrap_or_default();
                    self.inner.write_vectored(iov).await?
                };
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                rest = consume(rest, n);
            }
            Ok(())
        })
    }

    fn shutdown(&mut self) -> IoFuture<'_, ()> {
        Box::pin(async move { self.inner.shutdown().await })
    }

    fn tcp_path(&self) -> Option<smbq_tcpinfo::TcpPath> {
        let stream: &TcpStream = self.inner.as_ref();
        smbq_tcpinfo::sample(stream)
    }
}
