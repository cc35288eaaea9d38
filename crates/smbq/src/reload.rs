//! Reloading the configuration without a restart (issue 17), on SIGHUP and on
//! `smbq status --reload`: the config file is read again and its shares replace the running
//! ones (smbq_server::reload says what happens to tree connects), `[limits]` go to new
//! connections and sessions and to later durable grants (`Runtime::set_limits`) and `[log]
//! level` applies. The account file and the QUIC certificates have their own SIGHUP
//! reloaders. Settings that only a restart can change (addresses, ports, state directory,
//! QUIC settings, encryption policy) are named in the log when they changed. A file that does not parse, or shares that cannot be served,
//! change nothing: the old configuration stays and the error is reported.

use std::sync::Arc;

use crate::config::FileConfig;
use crate::serve::{ServeArgs, load_config, share_configs};

pub struct Reloader {
    args: ServeArgs,
    /// What the server started with, for the settings a reload cannot change.
    started: FileConfig,
    server: Arc<smbq_server::Server>,
    /// Where new connections' limits come from.
    runtime: Arc<smbq_server::conn::Runtime>,
    /// One reload at a time (SIGHUP and the admin socket may ask together).
    busy: std::sync::Mutex<()>,
    /// The `[log] level` in effect, as the last reload left it.
    level: std::sync::Mutex<Option<String>>,
}

impl Reloader {
    pub fn new(
        args: ServeArgs,
        started: FileConfig,
        server: Arc<smbq_server::Server>,
        runtime: Arc<smbq_server::conn::Runtime>,
    ) -> Self {
        let level = std::sync::Mutex::new(started.log.level.clone());
        Self {
            args,
            started,
            server,
            runtime,
            busy: std::sync::Mutex::new(()),
            level,
        }
    }

    /// Re-reads the configuration and applies what can be applied; the summary for the log
    /// and the administrator, or why nothing changed. Blocking.
    pub fn reload(&self, why: &str) -> Result<String, String> {
        let _one = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        // systemd shows the unit reloading meanwhile (a no-op without it).
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Reloading]);
        let result = self.apply();
        let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
        match result {
            Ok((summary, level)) => {
                // Logged before a new level applies, so a quieter level does not hide it.
                tracing::info!(target: smbq_server::AUDIT, trigger = why, "reload: {summary}");
                if let Some(level) = level {
                    if let Err(e) = crate::logging::set_level(level.as_deref()) {
                        tracing::error!("reload: log level: {e}");
                    }
                    *self.level.lock().unwrap_or_else(|e| e.into_inner()) = level;
                }
                Ok(summary)
            }
            Err(e) => {
                tracing::error!(
                    target: smbq_server::AUDIT,
                    trigger = why,
                    "reload failed, the old configuration stays: {e}"
                );
                Err(e)
            }
        }
    }

    /// Applies the shares; the summary and the `[log] level` to apply once it is logged.
    #[allow(clippy::type_complexity)]
    fn apply(&self) -> Result<(String, Option<Option<String>>), String> {
        let file = load_config(&self.args)?;
        let shares = share_configs(&self.args, &file)?;
        let changes = self
            .server
            .reload_shares(&shares)
            .map_err(|e| format!("shares: {e}"))?;
        let mut summary = if changes.is_empty() {
            "shares unchanged".to_owned()
        } else {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "-".to_owned()
                } else {
                    v.join(",")
                }
            };
            format!(
                "shares added {}, removed {}, changed {}",
                list(&changes.added),
                list(&changes.removed),
                list(&changes.changed)
            )
        };
        let limits = file.limits();
        if self.runtime.engine_config().limits != limits {
            self.runtime.set_limits(limits);
            summary.push_str("; new limits for new connections and sessions");
        }
        let current = self.level.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut level = None;
        if current != file.log.level {
            if crate::logging::level_from_env() {
                summary.push_str("; log level kept (SMBQ_LOG sets it)");
            } else {
                summary.push_str(&format!(
                    "; log level {}",
                    file.log.level.as_deref().unwrap_or("info")
                ));
                level = Some(file.log.level.clone());
            }
        }
        let restart = restart_needed(&self.started, &file);
        if !restart.is_empty() {
            summary.push_str(&format!(
                "; changed but applied only after a restart: {}",
                restart.join(", ")
            ));
        }
        Ok((summary, level))
    }
}

/// The settings a running server keeps until it restarts, where `new` differs.
fn restart_needed(old: &FileConfig, new: &FileConfig) -> Vec<&'static str> {
    fn differs<T: std::fmt::Debug>(a: &T, b: &T) -> bool {
        format!("{a:?}") != format!("{b:?}")
    }
    let mut v = Vec::new();
    let checks: [(&'static str, bool); 18] = [
        ("server_name", differs(&old.server_name, &new.server_name)),
        ("listen", differs(&old.listen, &new.listen)),
        ("tcp_port", differs(&old.tcp_port, &new.tcp_port)),
        ("quic_port", differs(&old.quic_port, &new.quic_port)),
        ("state_dir", differs(&old.state_dir, &new.state_dir)),
        ("users", differs(&old.users, &new.users)),
        ("encrypt", differs(&old.encrypt, &new.encrypt)),
        ("guest_ok", old.guest_ok != new.guest_ok),
        (
            "require_signing",
            old.require_signing != new.require_signing,
        ),
        ("multichannel", old.multichannel != new.multichannel),
        ("rss_capable", old.rss_capable != new.rss_capable),
        ("[quic]", differs(&old.quic, &new.quic)),
        ("[metrics]", differs(&old.metrics, &new.metrics)),
        ("[log] format", differs(&old.log.format, &new.log.format)),
        // A new keytab file's keys are read at each logon already (MIT re-reads FILE:
        // keytabs), so rotating keys needs neither.
        ("[kerberos]", differs(&old.kerberos, &new.kerberos)),
        ("[kdc_proxy]", old.kdc_proxy != new.kdc_proxy),
        (
            "unix_identity",
            differs(&old.unix_identity, &new.unix_identity) || share_modes(old) != share_modes(new),
        ),
        (
            "guest_unix_user",
            differs(&old.guest_unix_user, &new.guest_unix_user),
        ),
    ];
    for (name, changed) in checks {
        if changed {
            v.push(name);
        }
    }
    v
}

/// Each share's own `unix_identity`, which the server fixes at start.
fn share_modes(f: &FileConfig) -> Vec<(String, Option<String>)> {
    let modes = f
        .shares
        .iter()
        .map(|(n, s)| (n.to_lowercase(), s.unix_identity.clone()));
    modes.filter(|(_, m)| m.is_some()).collect()
}

/// Reloads on every SIGHUP until `shutdown`.
pub async fn on_sighup(
    reloader: Arc<Reloader>,
    hup: Option<tokio::signal::unix::Signal>,
    shutdown: smbq_server::conn::Shutdown,
) {
    crate::serve::each_sighup(hup, shutdown, || {
        let r = reloader.clone();
        async move {
            let _ = tokio::task::spawn_blocking(move || r.reload("SIGHUP")).await;
        }
    })
    .await;
}
