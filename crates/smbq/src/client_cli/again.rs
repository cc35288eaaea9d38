//! Going on after a broken connection: a new connection to the same server, logged on as the
//! same user and naming the old session (so the server keeps that session's durable opens),
//! retried while the network comes back, for `--reconnect-for` (a minute by default).

use std::time::{Duration, Instant};

use smbq_client::{Error, File, OpenOptions, Tree};

use super::connect::Connector;
use super::exit::CliError;
use super::url::SmbUrl;
use super::watchdog;

/// Errors after which a new connection may pick the transfer up.
pub fn connection_lost(e: &Error) -> bool {
    matches!(e, Error::Disconnected(_) | Error::Io(_) | Error::Timeout(_))
}

/// What a transfer needs to connect again: the connector (credentials, transports, ports),
/// the URL, and the share as it is now connected.
pub struct Again<'a, 'c> {
    pub conn: &'a tokio::sync::Mutex<&'c mut Connector>,
    pub url: &'a SmbUrl,
    tree: std::sync::Mutex<Tree>,
}

impl<'a, 'c> Again<'a, 'c> {
    pub fn new(
        conn: &'a tokio::sync::Mutex<&'c mut Connector>,
        url: &'a SmbUrl,
        tree: Tree,
    ) -> Self {
        Self {
            conn,
            url,
            tree: std::sync::Mutex::new(tree),
        }
    }

    /// Says the connection broke `at` bytes into the transfer: a warning, shown even with
    /// `--quiet` (as the other warnings are), since the transfer took a detour.
    pub fn report_lost(at: u64, e: &Error) {
        eprintln!("smbq: warning: connection lost at {at} bytes ({e}); reconnecting to go on");
    }

    /// The share on the connection in use.
    pub fn tree(&self) -> Tree {
        self.tree.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Connects again (retrying with backoff for up to `limit`, at most `--reconnect-for`) and
    /// returns the share on the new connection, which [`tree`](Self::tree) returns from now
    /// on.
    pub async fn reconnect(&self, limit: Duration) -> Result<Tree, CliError> {
        let previous = self.tree().session().id();
        let most = self.conn.lock().await.reconnect_for();
        let give_up = Instant::now() + limit.min(most);
        let mut wait = Duration::from_millis(250);
        loop {
            watchdog::touch();
            match self.conn.lock().await.reconnect(self.url, previous).await {
                Ok(tree) => {
                    *self.tree.lock().unwrap_or_else(|p| p.into_inner()) = tree.clone();
                    tracing::info!("reconnected; the transfer goes on");
                    return Ok(tree);
                }
                Err(e) if Instant::now() + wait >= give_up => return Err(e),
                Err(_) => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(4));
                }
            }
        }
    }

    /// A download's file opened again by name on a new connection (reads can simply be
    /// repeated, no durable handle is needed).
    pub async fn reopen_for_read(&self, path: &str) -> Result<File, CliError> {
        let tree = self.reconnect(Duration::MAX).await?;
        Ok(tree.open(path, &OpenOptions::read()).await?)
    }
}
