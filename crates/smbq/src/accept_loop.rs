//! The accept loop of smbq's side listeners (the admin socket, `/metrics`, the KDC proxy):
//! at most `slots` connections handled at once (the others wait in the listen backlog), a
//! failed accept retried after a pause instead of spinning, until shutdown.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

/// A listener the loop can take connections from.
pub trait Listen {
    type Stream: Send + 'static;
    type Addr: Send + 'static;
    fn accept_one(
        &self,
    ) -> impl Future<Output = std::io::Result<(Self::Stream, Self::Addr)>> + Send;
}

impl Listen for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    type Addr = std::net::SocketAddr;
    fn accept_one(
        &self,
    ) -> impl Future<Output = std::io::Result<(Self::Stream, Self::Addr)>> + Send {
        self.accept()
    }
}

impl Listen for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    type Addr = tokio::net::unix::SocketAddr;
    fn accept_one(
        &self,
    ) -> impl Future<Output = std::io::Result<(Self::Stream, Self::Addr)>> + Send {
        self.accept()
    }
}

/// Runs `handle` on its own task for each connection until `shutdown`.
pub async fn serve<L, F, Fut>(
    listener: L,
    slots: usize,
    shutdown: smbq_server::conn::Shutdown,
    mut handle: F,
) where
    L: Listen + Send + Sync,
    F: FnMut(L::Stream, L::Addr) -> Fut + Send,
    Fut: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(slots));
    loop {
        let accepted = tokio::select! {
            a = listener.accept_one() => a,
            () = shutdown.cancelled() => return,
        };
        let Ok((stream, addr)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let work = handle(stream, addr);
        tokio::spawn(async move {
            work.await;
            drop(slot);
        });
    }
}
