//! SMB over QUIC in the binary: the `[quic]` configuration turned into the transport's
//! settings, the accept loop, and certificate reloads (SIGHUP or a changed file).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use smbq_server::conn::{Runtime, Shutdown, spawn_connection};
use smbq_transport::{CertEntry, CertStore, ClientAuth, ClientPolicy, QuicAcceptor, QuicSettings};
use tokio::signal::unix::Signal;
use tracing::{error, info, warn};

use crate::cert::{self, SelfSignedSpec};
use crate::file_stamp::{Stamp, stamp};
use crate::keylog::KeyLogFile;
use crate::quic_config::{CertSource, ClientAuthMode, QuicConfig};

/// How often the certificate files are checked for changes.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);

/// Transport tuning from `[quic]`; unset keys keep the transport's defaults.
pub fn settings(q: &QuicConfig) -> QuicSettings {
    let d = QuicSettings::default();
    QuicSettings {
        stream_receive_window: q.stream_receive_window.unwrap_or(d.stream_receive_window),
        receive_window: q.receive_window.unwrap_or(d.receive_window),
        send_window: q.send_window.unwrap_or(d.send_window),
        idle_timeout: q
            .idle_timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(d.idle_timeout),
        keep_alive: q
            .keep_alive_secs
            .map(Duration::from_secs)
            .unwrap_or(d.keep_alive),
        mtu_upper_bound: q.mtu_upper_bound.unwrap_or(d.mtu_upper_bound),
        socket_buffer: q.socket_buffer.unwrap_or(d.socket_buffer),
        max_connections_per_ip: q.max_connections_per_ip.unwrap_or(d.max_connections_per_ip),
        retry_above: q.retry_above.unwrap_or(d.retry_above),
        accept_transport_security: q.transport_security.unwrap_or(d.accept_transport_security),
        // validate() has refused unknown names before the listener is built.
        congestion: q
            .congestion
            .as_deref()
            .and_then(|c| c.parse().ok())
            .unwrap_or(d.congestion),
        io_thread: q.io_thread.unwrap_or(d.io_thread),
        max_streams: q.max_streams.unwrap_or(d.max_streams),
        stack: q
            .stack
            .as_deref()
            .and_then(|c| c.parse().ok())
            .unwrap_or(d.stack),
        // The server's comes from its state directory (serve.rs).
        reset_key: None,
        // validate() has refused a bad one before the listener is built.
        quic_lb: q.quic_lb().ok().flatten(),
    }
}

/// Client certificate access control from `[quic]`.
pub fn client_auth(q: &QuicConfig) -> Result<ClientAuth, String> {
    match q.client_auth {
        ClientAuthMode::Off => Ok(ClientAuth::Off),
        ClientAuthMode::Required => {
            let mut trusted_cas = Vec::new();
            for f in &q.trusted_ca_files {
                trusted_cas.extend(cert::load_certs(f).map_err(|e| e.to_string())?);
            }
            Ok(ClientAuth::Required(ClientPolicy {
                allow_fingerprints: q.allow_fingerprints()?,
                deny_fingerprints: q.deny_fingerprints()?,
                trusted_cas,
                allow_issuers: q.allow_issuers.clone(),
                deny_issuers: q.deny_issuers.clone(),
                allow_names: q.allow_names.clone(),
                deny_names: q.deny_names.clone(),
            }))
        }
    }
}

/// The key-log writer when `keylog` or `SSLKEYLOGFILE` asks for one, with a warning, since
/// anyone who can read that file can decrypt the captured traffic.
pub fn keylog(q: &QuicConfig) -> Result<Option<Arc<dyn rustls::KeyLog>>, String> {
    let Some(path) = q.keylog_path(std::env::var_os("SSLKEYLOGFILE")) else {
        return Ok(None);
    };
    let k = KeyLogFile::open(&path).map_err(|e| format!("key log {}: {e}", path.display()))?;
    eprintln!(
        "smbq: WARNING: writing TLS secrets to {} (anyone with this file can decrypt SMB over QUIC captures)",
        path.display()
    );
    Ok(Some(Arc::new(k)))
}

/// Reads every certificate source. With `generate`, a missing state-directory certificate is
/// created (first start); a reload never generates, so a deleted file is an error, not a
/// silently new fingerprint.
pub fn load_entries(
    sources: &[CertSource],
    state_dir: &Path,
    spec: &SelfSignedSpec,
    generate: bool,
) -> Result<Vec<CertEntry>, String> {
    let mut out = Vec::with_capacity(sources.len());
    for s in sources {
        let loaded = if s.generated && generate {
            let (loaded, created) =
                cert::ensure_self_signed(state_dir, spec).map_err(|e| e.to_string())?;
            if created {
                eprintln!(
                    "smbq: generated a self-signed certificate {} (key {})",
                    s.paths.cert.display(),
                    s.paths.key.display()
                );
            }
            loaded
        } else {
            cert::load(&s.paths).map_err(|e| e.to_string())?
        };
        out.push(CertEntry {
            names: s.names.clone(),
            chain: loaded.chain,
            key: loaded.key,
        });
    }
    Ok(out)
}

/// The fingerprint lines printed at start and after a reload.
pub fn print_fingerprints(store: &CertStore, reloaded: bool) {
    for fp in store.fingerprints() {
        let fp = cert::format_fingerprint(&fp);
        if reloaded {
            eprintln!("smbq: certificate reloaded {fp}");
            info!(fingerprint = %fp, "certificate reloaded");
        } else {
            eprintln!("smbq: certificate {fp}");
        }
    }
}

/// Hands every QUIC connection to the same per-connection machinery as TCP.
pub async fn serve_quic(listener: Arc<dyn QuicAcceptor>, rt: Arc<Runtime>, shutdown: Shutdown) {
    loop {
        let next = tokio::select! {
            c = listener.accept() => c,
            _ = shutdown.cancelled() => break,
        };
        match next {
            None => break,
            Some(Ok(conn)) => spawn_connection(conn, rt.clone(), shutdown.clone()),
            // One client's failed handshake says nothing about the next one.
            Some(Err(e)) => warn!(error = %e, "QUIC connection failed before SMB"),
        }
    }
}

fn stamps(sources: &[CertSource]) -> Vec<(Stamp, Stamp)> {
    sources
        .iter()
        .map(|s| (stamp(&s.paths.cert), stamp(&s.paths.key)))
        .collect()
}

/// Re-reads the certificates on SIGHUP and when a file changes; a failed reload keeps the
/// certificates in use and logs why.
pub async fn watch_certs(
    store: Arc<CertStore>,
    sources: Vec<CertSource>,
    state_dir: std::path::PathBuf,
    spec: SelfSignedSpec,
    mut hup: Option<Signal>,
    shutdown: Shutdown,
) {
    let mut seen = stamps(&sources);
    let mut tick = tokio::time::interval(RELOAD_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            _ = shutdown.cancelled() => return,
            Some(()) = async {
                match hup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            } => "SIGHUP",
            _ = tick.tick() => {
                if stamps(&sources) == seen {
                    continue;
                }
                "certificate file changed"
            }
        };
        // The stamps read now are the baseline, so the poll does not reload the same files
        // again (after a SIGHUP too), and a broken file is reported once, not every poll.
        seen = stamps(&sources);
        match load_entries(&sources, &state_dir, &spec, false)
            .and_then(|e| store.replace(e).map_err(|e| e.to_string()))
        {
            Ok(()) => {
                info!(reason = why, "certificates reloaded");
                print_fingerprints(&store, true);
            }
            Err(e) => {
                error!(reason = why, error = %e, "certificate reload failed; keeping the current certificates");
                eprintln!(
                    "smbq: certificate reload failed ({e}); keeping the current certificates"
                );
            }
        }
    }
}
