//! What the server shows about each live connection (`smbq status`, the metrics): made by the
//! connection's loop when it starts, updated by it (bytes, what NEGOTIATE and the first session
//! settled), read by status reports. The loop owns the connection; this is a window on it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use parking_lot::Mutex;
use smbq_transport::PathStats;

/// The protection a connection's first session settled, as names for people and scripts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Protection {
    pub dialect: String,
    /// None for guest and anonymous sessions, which are not signed.
    pub signing: Option<String>,
    pub cipher: Option<String>,
}

pub struct ConnInfo {
    pub id: u64,
    pub peer: SocketAddr,
    pub transport: &'static str,
    pub started: SystemTime,
    /// SMB2 bytes each way, framing included (on QUIC without QUIC's own overhead).
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    protection: Mutex<Option<Protection>>,
    path: Option<Arc<dyn PathStats>>,
}

impl std::fmt::Debug for ConnInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnInfo")
            .field("id", &self.id)
            .field("peer", &self.peer)
            .field("transport", &self.transport)
            .finish_non_exhaustive()
    }
}

impl Protection {
    pub fn of(
        dialect: smbq_wire::Dialect,
        signing: Option<smbq_crypto::SigningAlgorithm>,
        cipher: Option<smbq_crypto::Cipher>,
    ) -> Self {
        use smbq_crypto::{Cipher, SigningAlgorithm as S};
        let (major, minor, patch) = (dialect.0 >> 8, (dialect.0 >> 4) & 0xF, dialect.0 & 0xF);
        let dialect = if patch == 0 {
            format!("{major}.{minor}")
        } else {
            format!("{major}.{minor}.{patch}")
        };
        let signing = signing.map(|s| {
            match s {
                S::HmacSha256 => "HMAC-SHA256",
                S::AesCmac => "AES-128-CMAC",
                S::AesGmac => "AES-128-GMAC",
            }
            .to_owned()
        });
        let cipher = cipher.map(|c| {
            match c {
                Cipher::Aes128Ccm => "AES-128-CCM",
                Cipher::Aes128Gcm => "AES-128-GCM",
                Cipher::Aes256Ccm => "AES-256-CCM",
                Cipher::Aes256Gcm => "AES-256-GCM",
            }
            .to_owned()
        });
        Self {
            dialect,
            signing,
            cipher,
        }
    }
}

impl ConnInfo {
    pub fn new(
        id: u64,
        peer: SocketAddr,
        transport: &'static str,
        path: Option<Arc<dyn PathStats>>,
    ) -> Self {
        Self {
            id,
            peer,
            transport,
            started: SystemTime::now(),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            protection: Mutex::new(None),
            path,
        }
    }

    pub fn add_in(&self, n: usize) {
        self.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn add_out(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Records what a session established on this connection uses; the first signed one
    /// wins (a later guest session does not hide it).
    pub fn set_protection(&self, p: Protection) {
        let mut cur = self.protection.lock();
        if cur.as_ref().is_none_or(|c| c.signing.is_none()) {
            *cur = Some(p);
        }
    }

    pub fn protection(&self) -> Option<Protection> {
        self.protection.lock().clone()
    }

    pub fn path(&self) -> Option<smbq_transport::PathSample> {
        self.path.as_ref().map(|p| p.sample())
    }
}
