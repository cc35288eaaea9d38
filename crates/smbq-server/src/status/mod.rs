//! What `smbq status` shows (issue 17): the live connections, sessions, tree connects, open
//! files, byte-range locks and pending change notifications, read from the tables that own
//! them (docs/ARCHITECTURE.md "Who owns which state") into one serializable [`Snapshot`], and
//! the two things an administrator may do to them (`admin.rs`). Nothing here changes state
//! except those two.

mod admin;
mod conn_info;
mod gauges;

pub use conn_info::{ConnInfo, Protection};
pub(crate) use gauges::EndedQuic;
pub use gauges::Gauges;

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::Server;
use crate::access::mask;
use crate::file_state::oplock::Level;
use crate::open_state::Queries as _;
use crate::tables::Open;

/// What a session was established with, kept in its `SessionState`.
#[derive(Clone, Debug)]
pub struct SessionShown {
    pub protection: Protection,
    /// Session.EncryptData: the server requires its requests encrypted.
    pub encrypt_required: bool,
    pub started: SystemTime,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    pub server: ServerStatus,
    pub connections: Vec<ConnStatus>,
    pub sessions: Vec<SessionStatus>,
    pub trees: Vec<TreeStatus>,
    pub opens: Vec<OpenStatus>,
    pub locks: Vec<LockStatus>,
    pub notifies: Vec<NotifyStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerStatus {
    pub version: String,
    pub pid: u32,
    pub started_unix: u64,
    pub uptime_secs: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ConnStatus {
    pub id: u64,
    pub peer: String,
    pub transport: String,
    /// None until a session is established on it.
    pub dialect: Option<String>,
    pub signing: Option<String>,
    pub cipher: Option<String>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub age_secs: u64,
    /// QUIC on quinn only.
    pub quic: Option<QuicStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct QuicStatus {
    pub rtt_ms: f64,
    pub cwnd_bytes: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SessionStatus {
    pub id: u64,
    pub user: String,
    pub domain: String,
    pub guest: bool,
    pub anonymous: bool,
    /// The server requires its requests encrypted (Session.EncryptData), or, over QUIC, the
    /// transport encrypts everything.
    pub encrypted: bool,
    pub dialect: Option<String>,
    pub signing: Option<String>,
    pub cipher: Option<String>,
    /// The connections it is established on (MS-SMB2 Session.ChannelList).
    pub connections: Vec<u64>,
    pub age_secs: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct TreeStatus {
    pub session_id: u64,
    pub tree_id: u32,
    pub share: String,
    pub read_only: bool,
    pub encrypt: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OpenStatus {
    /// The open's volatile FileId, which `--close-file` takes.
    pub id: u64,
    /// 0 for a durable open waiting for its client to reconnect.
    pub session_id: u64,
    pub user: String,
    pub share: String,
    /// Share-relative, with `\` as Windows shows it.
    pub path: String,
    /// "file", "directory" or "pipe".
    pub kind: String,
    /// Open.GrantedAccess.
    pub access: u32,
    /// `R`, `W`, `D` for FILE_SHARE_READ/WRITE/DELETE.
    pub share_mode: String,
    /// "II", "exclusive" or "batch".
    pub oplock: Option<String>,
    /// Letters of the lease state (`R`, `H`, `W`), with " breaking" while a break is on.
    pub lease: Option<String>,
    /// "durable", "durable-v2", "resilient", or "disconnected (N s left)".
    pub durable: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct LockStatus {
    pub open_id: u64,
    pub session_id: u64,
    pub share: String,
    pub path: String,
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NotifyStatus {
    pub open_id: u64,
    pub session_id: u64,
    pub share: String,
    pub path: String,
    /// CompletionFilter (MS-SMB2 2.2.35).
    pub filter: u32,
    pub recursive: bool,
    /// CHANGE_NOTIFY requests waiting on it now.
    pub waiting: usize,
}

fn secs_since(t: SystemTime) -> u64 {
    SystemTime::now()
        .duration_since(t)
        .map_or(0, |d| d.as_secs())
}

/// `R`, `W`, `D` for the FILE_SHARE_* bits.
pub fn share_letters(share_access: u32) -> String {
    [(1, 'R'), (2, 'W'), (4, 'D')]
        .iter()
        .filter(|(bit, _)| share_access & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

fn lease_letters(state: u32) -> String {
    [(1, 'R'), (2, 'H'), (4, 'W')]
        .iter()
        .filter(|(bit, _)| state & bit != 0)
        .map(|(_, c)| *c)
        .collect()
}

fn windows_path(open: &Open) -> String {
    let p = open.path().to_string();
    let mut shown = p.replace('/', "\\");
    if let Some(s) = open
        .file()
        .and_then(|f| f.stream.as_ref())
        .and_then(|s| s.name())
    {
        shown.push(':');
        shown.push_str(&s);
    }
    shown
}

impl Server {
    /// When the server started, seconds since the Unix epoch.
    pub fn status_started_unix(&self) -> u64 {
        self.started
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// Everything `smbq status` shows, read now. Each table is read under its own lock, one
    /// after another, so an open that comes or goes meanwhile may show in one list and not
    /// another; no lock is held across tables.
    pub fn status(&self) -> Snapshot {
        let mut snap = Snapshot {
            server: ServerStatus {
                version: env!("CARGO_PKG_VERSION").to_owned(),
                pid: std::process::id(),
                started_unix: self
                    .started
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                uptime_secs: secs_since(self.started),
            },
            ..Snapshot::default()
        };
        snap.connections = self.connection_statuses();
        let users = self.session_statuses(&mut snap);
        self.open_statuses(&mut snap, &users);
        snap
    }

    fn connection_statuses(&self) -> Vec<ConnStatus> {
        let infos: Vec<Arc<ConnInfo>> = self.conn_infos.read().values().cloned().collect();
        let mut out: Vec<ConnStatus> = infos
            .iter()
            .map(|c| {
                let p = c.protection();
                ConnStatus {
                    id: c.id,
                    peer: c.peer.to_string(),
                    transport: c.transport.to_owned(),
                    dialect: p.as_ref().map(|p| p.dialect.clone()),
                    signing: p.as_ref().and_then(|p| p.signing.clone()),
                    cipher: p.as_ref().and_then(|p| p.cipher.clone()),
                    bytes_in: c.bytes_in.load(std::sync::atomic::Ordering::Relaxed),
                    bytes_out: c.bytes_out.load(std::sync::atomic::Ordering::Relaxed),
                    age_secs: secs_since(c.started),
                    quic: c.path().map(|s| QuicStatus {
                        rtt_ms: s.rtt.as_secs_f64() * 1000.0,
                        cwnd_bytes: s.cwnd_bytes,
                        sent_packets: s.sent_packets,
                        lost_packets: s.lost_packets,
                    }),
                }
            })
            .collect();
        out.sort_by_key(|c| c.id);
        out
    }

    /// Fills sessions and trees; returns each session's user name by id.
    fn session_statuses(&self, snap: &mut Snapshot) -> std::collections::HashMap<u64, String> {
        let mut users = std::collections::HashMap::new();
        for rec in self.sessions.live() {
            // Sessions still authenticating have no owner yet and nothing to show.
            let (Some(who), Some(st)) = (rec.owner(), rec.ext::<crate::tables::SessionState>())
            else {
                continue;
            };
            let shown = st.shown.lock().clone();
            let channels = rec.channels();
            let transport_encrypts = channels.iter().any(|c| {
                self.conn_infos
                    .read()
                    .get(c)
                    .is_some_and(|i| i.transport == "quic")
            });
            let p = shown.as_ref().map(|s| &s.protection);
            snap.sessions.push(SessionStatus {
                id: rec.id(),
                user: who.user.clone(),
                domain: who.domain.clone(),
                guest: who.is_guest,
                anonymous: who.is_anonymous,
                encrypted: shown.as_ref().is_some_and(|s| s.encrypt_required) || transport_encrypts,
                dialect: p.map(|p| p.dialect.clone()),
                signing: p.and_then(|p| p.signing.clone()),
                cipher: p.and_then(|p| p.cipher.clone()),
                connections: channels,
                age_secs: shown.as_ref().map_or(0, |s| secs_since(s.started)),
            });
            users.insert(rec.id(), who.user.clone());
            for t in st.trees() {
                snap.trees.push(TreeStatus {
                    session_id: t.session_id,
                    tree_id: t.id,
                    share: t.share.name().to_owned(),
                    read_only: t.read_only(),
                    encrypt: t.encrypt,
                });
            }
        }
        snap.sessions.sort_by_key(|s| s.id);
        snap.trees.sort_by_key(|t| (t.session_id, t.tree_id));
        users
    }

    fn open_statuses(&self, snap: &mut Snapshot, users: &std::collections::HashMap<u64, String>) {
        let live: Vec<Arc<Open>> = self
            .opens
            .read()
            .iter()
            .filter_map(|(_, o)| o.clone())
            .collect();
        let watches: std::collections::HashMap<u64, (usize, u32, bool)> = self
            .notify
            .watches()
            .into_iter()
            .map(|(id, n, f, r)| (id, (n, f, r)))
            .collect();
        for o in live.iter().filter(|o| !o.is_closed()) {
            let user = users.get(&o.session_id).cloned().unwrap_or_default();
            let mut s = self.open_status(o, user);
            s.session_id = o.session_id;
            if let Some(f) = o.file() {
                let held = self.open_state().held_by(f.key, o.volatile());
                s.oplock = held.oplock.map(|l| {
                    match l {
                        Level::II => "II",
                        Level::Exclusive => "exclusive",
                        Level::Batch => "batch",
                        Level::None => "none",
                    }
                    .to_owned()
                });
                s.lease = held.lease.map(|(state, breaking)| {
                    let l = lease_letters(state);
                    if breaking { format!("{l} breaking") } else { l }
                });
                for (offset, length, exclusive) in held.locks {
                    snap.locks.push(LockStatus {
                        open_id: o.volatile(),
                        session_id: o.session_id,
                        share: s.share.clone(),
                        path: s.path.clone(),
                        offset,
                        length,
                        exclusive,
                    });
                }
            }
            if let Some(&(waiting, filter, recursive)) = watches.get(&o.volatile()) {
                snap.notifies.push(NotifyStatus {
                    open_id: o.volatile(),
                    session_id: o.session_id,
                    share: s.share.clone(),
                    path: s.path.clone(),
                    filter,
                    recursive,
                    waiting,
                });
            }
            snap.opens.push(s);
        }
        let now = Instant::now();
        for (o, user, left) in self.durable_store().parked(now) {
            let mut s = self.open_status(&o, user);
            let kind = s.durable.take().unwrap_or_default();
            s.durable = Some(format!("{kind}, disconnected ({} s left)", left.as_secs()));
            snap.opens.push(s);
        }
        snap.opens.sort_by_key(|o| (o.session_id, o.id));
        snap.locks.sort_by_key(|l| (l.open_id, l.offset));
        snap.notifies.sort_by_key(|n| n.open_id);
    }

    fn open_status(&self, o: &Open, user: String) -> OpenStatus {
        let kind = match (o.pipe(), o.is_dir()) {
            (Some(_), _) => "pipe",
            (None, true) => "directory",
            (None, false) => "file",
        };
        let durable = o.durable.lock().as_ref().map(|g| {
            if g.persistent {
                "persistent"
            } else if g.resilient {
                "resilient"
            } else if g.create_guid.is_some() {
                "durable-v2"
            } else {
                "durable"
            }
            .to_owned()
        });
        OpenStatus {
            id: o.volatile(),
            session_id: 0,
            user,
            share: o.tree.share.name().to_owned(),
            path: windows_path(o),
            kind: kind.to_owned(),
            access: o.granted,
            share_mode: share_letters(o.share_access),
            oplock: None,
            lease: None,
            durable,
        }
    }
}

/// Letters for the access an open was granted: `R` read data, `W` write or append data,
/// `D` delete, `A` attributes or other metadata only (a stat open).
pub fn access_letters(access: u32) -> String {
    let mut s = String::new();
    if access & (mask::FILE_READ_DATA | mask::FILE_EXECUTE) != 0 {
        s.push('R');
    }
    if access & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) != 0 {
        s.push('W');
    }
    if access & mask::DELETE != 0 {
        s.push('D');
    }
    if s.is_empty() {
        s.push('A');
    }
    s
}
