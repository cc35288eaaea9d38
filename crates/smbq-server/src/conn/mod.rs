//! The per-connection tasks: one reader per transport stream, each with its own deframer
//! (`reader`); a loop that owns the engine and applies what it decides (`event_loop`); request
//! tasks that run handlers, many in flight as credits allow (`exec`); and one writer per
//! stream that sends frames in order (`writer`).

mod event_loop;
mod exec;
mod reader;
mod writer;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use smbq_auth::Accounts;
use smbq_proto::EngineConfig;
use smbq_transport::{Connection, TransportKind};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::Server;
use crate::admission::{Admission, AdmissionLimits};
use crate::logon_guard::LogonGuard;

/// Stops the listeners and connections on shutdown.
#[derive(Clone, Default)]
pub struct Shutdown(CancellationToken);

impl Shutdown {
    pub fn new() -> Self {
        Self(CancellationToken::new())
    }
    pub fn cancel(&self) {
        self.0.cancel();
    }
    pub async fn cancelled(&self) {
        self.0.cancelled().await;
    }
}

/// Everything shared by all connections.
pub struct Runtime {
    server: Arc<Server>,
    /// Replaced by a reload of `[limits]` (`set_limits`); a connection keeps the one it
    /// started with.
    engine: parking_lot::RwLock<Arc<EngineConfig>>,
    accounts: Arc<dyn Accounts>,
    next_conn_id: AtomicU64,
    next_session_id: AtomicU64,
    /// The connection table (global, per-address and reserved slots).
    admission: Arc<Admission>,
    /// Failed-logon throttle and log.
    logon: Arc<LogonGuard>,
    /// The audit line of each QUIC connection (its client certificate), rate-limited.
    quic_audit: crate::audit::AuditWindow,
}

/// QUIC connections audited one by one per audit window; past that they are counted.
const QUIC_AUDITS_PER_WINDOW: u32 = 200;

impl Runtime {
    pub fn new(
        server: Arc<Server>,
        engine: Arc<EngineConfig>,
        accounts: Arc<dyn Accounts>,
    ) -> Arc<Self> {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1);
        let logon = LogonGuard::new(server.config().logon.clone());
        let prefix = u64::from(server.config().node_tag);
        let admission = Admission::new(admission_limits(&engine.limits));
        Arc::new(Self {
            server,
            engine: parking_lot::RwLock::new(engine),
            accounts,
            next_conn_id: AtomicU64::new(1),
            // Session ids differ across restarts so a client never reuses a stale one by accident;
            // one server's stay below 2^32 because some clients (smbtorture session-id) keep
            // 32 bits. A cluster node's carry its tag above those 32 bits (unique across nodes
            // matters more there; Windows' own session ids use all 64 bits).
            next_session_id: AtomicU64::new((prefix << 32) | ((seed & 0x7FFF) << 16) | 1),
            admission,
            logon,
            quic_audit: crate::audit::AuditWindow::new("quic_connect", QUIC_AUDITS_PER_WINDOW),
        })
    }
}

fn admission_limits(l: &smbq_proto::Limits) -> AdmissionLimits {
    AdmissionLimits {
        total: l.max_connections,
        per_address: l.max_connections_per_ip,
        reserved: l.reserved_connections,
        per_address_in_reserve: smbq_proto::Limits::RESERVE_PER_IP,
    }
}

impl Runtime {
    /// The engine configuration new connections start with.
    pub fn engine_config(&self) -> Arc<EngineConfig> {
        self.engine.read().clone()
    }

    /// Limits from a reload: new connections get them (frame and IO sizes, credits, requests
    /// in flight, memory budget, sessions per connection, the unauthenticated deadline) and
    /// the connection table applies them to later admissions. Open connections keep theirs.
    /// The server's own limits (opens and trees per session, durable opens) follow too:
    /// `Server::set_limits`.
    pub fn set_limits(&self, limits: smbq_proto::Limits) {
        self.server.set_limits(limits.clone());
        let mut engine = self.engine.write();
        let mut cfg = EngineConfig::clone(&engine);
        self.admission.set_limits(admission_limits(&limits));
        cfg.limits = limits;
        *engine = Arc::new(cfg);
    }
}

/// Accepts TCP connections until shutdown.
pub async fn serve_tcp(
    listener: smbq_transport::tcp::TcpListener,
    rt: Arc<Runtime>,
    shutdown: Shutdown,
) {
    loop {
        let conn = tokio::select! {
            c = listener.accept() => c,
            _ = shutdown.cancelled() => break,
        };
        match conn {
            Ok(conn) => spawn_connection(conn, rt.clone(), shutdown.clone()),
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Runs one accepted connection in its own task.
pub fn spawn_connection(conn: Connection, rt: Arc<Runtime>, shutdown: Shutdown) {
    // Dropping a refused connection closes it (TCP FIN; QUIC close).
    let Ok(slot) = rt.admission.admit(conn.peer.ip()) else {
        return;
    };
    let id = rt.next_conn_id.fetch_add(1, Ordering::Relaxed);
    let transport = match conn.kind {
        TransportKind::Tcp => "tcp",
        TransportKind::Quic => "quic",
    };
    if conn.kind == TransportKind::Quic && rt.quic_audit.admit(std::time::Instant::now()) {
        audit_quic(&conn);
    }
    let span = info_span!("conn", id, peer = %conn.peer, transport);
    tokio::spawn(
        async move {
            debug!("connected");
            let result = event_loop::run_connection(id, conn, rt.clone(), shutdown).await;
            drop(slot);
            match result {
                Ok(()) => {}
                Err(reason) => info!(%reason, "disconnected"),
            }
        }
        .instrument(span),
    );
}

/// One audit line per QUIC connection, naming the client certificate it was admitted with
/// (Windows logs event 30832 for client certificate access).
fn audit_quic(conn: &Connection) {
    match &conn.client_cert {
        Some(c) => info!(
            target: crate::AUDIT,
            event = "quic_connect",
            peer = %conn.peer,
            client_cert = %smbq_transport::fingerprint_hex(&c.fingerprint),
            subject = %c.subject,
            issuer = %c.issuer,
            names = ?c.names,
            "QUIC connection admitted with a client certificate"
        ),
        None => info!(
            target: crate::AUDIT,
            event = "quic_connect",
            peer = %conn.peer,
            client_cert = "none",
            "QUIC connection admitted without a client certificate"
        ),
    }
}

/// Why a connection ended, other than by the client closing it or the server shutting down.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("{0}")]
    Io(std::io::Error),
    /// The client broke a rule that costs it the connection, as Windows does.
    #[error("{0}")]
    Violation(smbq_proto::Violation),
    /// MS-SMB2 3.3.5.15.12.
    #[error("validate negotiate failed")]
    ValidateNegotiate,
    /// No session by the unauthenticated deadline (`Limits::unauthenticated_idle_secs`).
    #[error("no session before the unauthenticated deadline")]
    Unauthenticated,
}
