//! The server's log (issue 17): stderr, as text or one JSON object per line
//! (`--log-format json`, `[log] format`), at the level `SMBQ_LOG` or `[log] level` sets (an
//! `EnvFilter` directive: `info`, `smbq_server=debug`, ...). A reload applies a changed
//! `[log] level` without a restart (unless `SMBQ_LOG` set it). Audit lines (logons, tree
//! connects, access denials, administrator actions) carry the target `smbq::audit`.

use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

pub fn parse_format(s: &str) -> Result<Format, String> {
    match s {
        "text" => Ok(Format::Text),
        "json" => Ok(Format::Json),
        _ => Err(format!("log format {s:?}: expected text or json")),
    }
}

pub fn parse_level(s: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(s).map_err(|e| format!("log level {s:?}: {e}"))
}

static LEVEL: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The level `SMBQ_LOG` sets (empty counts as unset), which a reload leaves alone.
fn env_level() -> Option<EnvFilter> {
    std::env::var("SMBQ_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(v).ok())
}

/// Installs the global subscriber; `level` is `[log] level` (checked by the caller).
pub fn init(format: Format, level: Option<&str>) {
    let filter = env_level()
        .or_else(|| level.and_then(|l| parse_level(l).ok()))
        .unwrap_or_else(|| EnvFilter::new("info"));
    let (filter, handle) = reload::Layer::new(filter);
    // Colour codes only for a terminal: logs written to files stay greppable.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let output = match format {
        Format::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .boxed(),
        Format::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    if tracing_subscriber::registry()
        .with(filter)
        .with(output)
        .try_init()
        .is_ok()
    {
        let _ = LEVEL.set(handle);
    }
}

/// Whether `SMBQ_LOG` sets the level (a reload then leaves it).
pub fn level_from_env() -> bool {
    env_level().is_some()
}

/// Applies a reloaded `[log] level`; `Ok(false)` when `SMBQ_LOG` rules instead.
pub fn set_level(level: Option<&str>) -> Result<bool, String> {
    if env_level().is_some() {
        return Ok(false);
    }
    let filter = parse_level(level.unwrap_or("info"))?;
    match LEVEL.get() {
        Some(h) => h.reload(filter).map(|()| true).map_err(|e| e.to_string()),
        None => Ok(false),
    }
}
