//! Which transport won the race to each server last time, so the next command starts with
//! the right expectation: QUIC gets a longer head start where it worked, and TCP starts at
//! once where QUIC did not answer (QUIC is still tried alongside, and wins if it answers
//! first). Kept in `$XDG_CACHE_HOME/smbq/transports` (else `~/.cache/smbq/transports`), one
//! line per server: `HOST TCP_PORT QUIC_PORT quic|tcp UNIX_SECONDS`. The file is a hint: any
//! problem reading or writing it is ignored.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Winner {
    Quic,
    Tcp,
}

/// A working QUIC is trusted for a week; a missing one is tried normally again after an hour
/// (the server may have turned QUIC on).
const QUIC_TTL: u64 = 7 * 24 * 3600;
const TCP_TTL: u64 = 3600;
/// Servers remembered; the oldest are forgotten first.
const MAX_ENTRIES: usize = 256;
/// A file larger than this is not ours (or damaged) and is ignored.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// TCP's head start for a server never seen: long enough for a QUIC handshake across a
/// continent, short enough that a server without QUIC answers "at once".
pub const HEAD_START: Duration = Duration::from_millis(250);
/// Where QUIC worked last time it gets longer before TCP is tried.
pub const HEAD_START_KNOWN_QUIC: Duration = Duration::from_millis(500);

/// TCP's head start given what is remembered about the server.
pub fn head_start(last: Option<Winner>) -> Duration {
    match last {
        None => HEAD_START,
        Some(Winner::Quic) => HEAD_START_KNOWN_QUIC,
        Some(Winner::Tcp) => Duration::ZERO,
    }
}

pub struct Memory {
    path: Option<PathBuf>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn key(host: &str, tcp_port: u16, quic_port: u16) -> String {
    format!("{} {tcp_port} {quic_port}", host.to_ascii_lowercase())
}

struct Entry {
    key: String,
    winner: Winner,
    at: u64,
}

fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (h, t, q, w, at) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            let winner = match w {
                "quic" => Winner::Quic,
                "tcp" => Winner::Tcp,
                _ => return None,
            };
            Some(Entry {
                key: key(h, t.parse().ok()?, q.parse().ok()?),
                winner,
                at: at.parse().ok()?,
            })
        })
        .collect()
}

impl Memory {
    /// The user's cache file, if there is a place for one.
    pub fn open() -> Memory {
        let dir = std::env::var_os("XDG_CACHE_HOME")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME")
                    .filter(|d| !d.is_empty())
                    .map(|h| PathBuf::from(h).join(".cache"))
            });
        Memory {
            path: dir.map(|d| d.join("smbq").join("transports")),
        }
    }

    #[cfg(test)]
    fn at(path: PathBuf) -> Memory {
        Memory { path: Some(path) }
    }

    fn load(&self) -> Vec<Entry> {
        let Some(p) = &self.path else {
            return Vec::new();
        };
        match std::fs::metadata(p) {
            Ok(m) if m.len() <= MAX_FILE_BYTES => {}
            _ => return Vec::new(),
        }
        std::fs::read_to_string(p)
            .map(|t| parse(&t))
            .unwrap_or_default()
    }

    /// What won last time, unless that is too old to go by.
    pub fn recall(&self, host: &str, tcp_port: u16, quic_port: u16) -> Option<Winner> {
        let k = key(host, tcp_port, quic_port);
        let now = now();
        self.load()
            .into_iter()
            .rev()
            .find(|e| e.key == k)
            .filter(|e| {
                let ttl = match e.winner {
                    Winner::Quic => QUIC_TTL,
                    Winner::Tcp => TCP_TTL,
                };
                now.saturating_sub(e.at) < ttl && e.at <= now + 60
            })
            .map(|e| e.winner)
    }

    pub fn record(&self, host: &str, tcp_port: u16, quic_port: u16, winner: Winner) {
        let Some(p) = &self.path else {
            return;
        };
        let k = key(host, tcp_port, quic_port);
        let mut all: Vec<Entry> = self.load().into_iter().filter(|e| e.key != k).collect();
        all.push(Entry {
            key: k,
            winner,
            at: now(),
        });
        let skip = all.len().saturating_sub(MAX_ENTRIES);
        let text: String = all
            .iter()
            .skip(skip)
            .map(|e| {
                let w = match e.winner {
                    Winner::Quic => "quic",
                    Winner::Tcp => "tcp",
                };
                format!("{} {w} {}\n", e.key, e.at)
            })
            .collect();
        // Written whole and renamed into place, so concurrent commands never read half a file.
        let write = || -> std::io::Result<()> {
            let dir = p
                .parent()
                .ok_or_else(|| std::io::Error::other("no parent"))?;
            std::fs::create_dir_all(dir)?;
            let tmp = dir.join(format!(".transports.{}", std::process::id()));
            // 0600: the servers a user visits are nobody else's business.
            {
                use std::io::Write;
                use std::os::unix::fs::OpenOptionsExt;
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)?;
                f.write_all(text.as_bytes())?;
            }
            std::fs::rename(&tmp, p)
        };
        if let Err(e) = write() {
            tracing::debug!(error = %e, path = %p.display(), "transport memory not saved");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_per_server_and_ports() {
        let dir = tempfile::tempdir().unwrap();
        let m = Memory::at(dir.path().join("smbq").join("transports"));
        assert_eq!(m.recall("Srv", 445, 443), None);
        m.record("Srv", 445, 443, Winner::Tcp);
        m.record("other", 445, 443, Winner::Quic);
        assert_eq!(m.recall("srv", 445, 443), Some(Winner::Tcp));
        assert_eq!(m.recall("srv", 4450, 443), None);
        assert_eq!(m.recall("OTHER", 445, 443), Some(Winner::Quic));
        m.record("srv", 445, 443, Winner::Quic);
        assert_eq!(m.recall("srv", 445, 443), Some(Winner::Quic));
        assert_eq!(head_start(m.recall("srv", 445, 443)), HEAD_START_KNOWN_QUIC);
        assert_eq!(head_start(None), HEAD_START);
    }

    #[test]
    fn old_entries_expire_and_junk_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("transports");
        let old = now() - TCP_TTL - 10;
        let recent = now() - 10;
        std::fs::write(
            &p,
            format!("a 445 443 tcp {old}\nb 445 443 quic {old}\ngarbage\nc 445 x tcp 1\nd 1 2 tcp {recent}\n"),
        )
        .unwrap();
        let m = Memory::at(p);
        assert_eq!(m.recall("a", 445, 443), None);
        assert_eq!(m.recall("b", 445, 443), Some(Winner::Quic));
        assert_eq!(m.recall("d", 1, 2), Some(Winner::Tcp));
    }

    #[test]
    fn bounded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("transports");
        let m = Memory::at(p.clone());
        for i in 0..(MAX_ENTRIES + 10) {
            m.record(&format!("h{i}"), 445, 443, Winner::Tcp);
        }
        assert_eq!(
            std::fs::read_to_string(&p).unwrap().lines().count(),
            MAX_ENTRIES
        );
        assert_eq!(m.recall("h0", 445, 443), None);
        assert!(
            m.recall(&format!("h{}", MAX_ENTRIES + 9), 445, 443)
                .is_some()
        );
    }
}
