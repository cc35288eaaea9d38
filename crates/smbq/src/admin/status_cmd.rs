//! `smbq status`: what the running server holds, as tables or JSON, and the administrator's
//! `--kill-session` / `--close-file`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use smbq_server::status::{Snapshot, access_letters};

use super::table::render;
use super::{Reply, Request};

/// Largest reply read (a server with the most opens allowed still fits).
const MAX_REPLY: u64 = 256 << 20;

#[derive(clap::Args, Clone, Debug)]
pub struct StatusArgs {
    /// The server's state directory (its admin socket is `admin.sock` there); default
    /// `./.smbq`, else `/var/lib/smbq` (the Debian package's) when only that has a socket.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// The admin socket itself, instead of the state directory's.
    #[arg(long, conflicts_with = "state_dir")]
    pub socket: Option<PathBuf>,
    /// Print the whole snapshot as JSON (for scripts).
    #[arg(long)]
    pub json: bool,
    /// End session ID (its opens are closed; its client may log on again).
    #[arg(long, value_name = "ID", conflicts_with_all = ["close_file", "json"])]
    pub kill_session: Option<u64>,
    /// Close open ID (the number in the OPEN FILES table).
    #[arg(long, value_name = "ID", conflicts_with = "json")]
    pub close_file: Option<u64>,
    /// Make the server re-read its configuration (as SIGHUP does) and say what changed.
    #[arg(long, conflicts_with_all = ["json", "kill_session", "close_file"])]
    pub reload: bool,
}

pub fn run(args: StatusArgs) -> Result<(), String> {
    let path = match (&args.socket, &args.state_dir) {
        (Some(s), _) => s.clone(),
        (None, Some(d)) => super::socket_path(d),
        (None, None) => default_socket(),
    };
    let req = match (args.kill_session, args.close_file) {
        _ if args.reload => Request::Reload,
        (Some(id), _) => Request::KillSession { id },
        (None, Some(id)) => Request::CloseFile { id },
        (None, None) => Request::Status,
    };
    match ask(&path, &req)? {
        Reply::Status(s) if args.json => {
            let text = serde_json::to_string_pretty(&s).map_err(|e| e.to_string())?;
            println!("{text}");
        }
        Reply::Status(s) => print!("{}", tables(&s)),
        Reply::Done { message } => eprintln!("smbq: {message}"),
        Reply::Error { message } => return Err(message),
    }
    Ok(())
}

/// `./.smbq` (what `smbq serve` uses by default) when a server answers there, else the Debian
/// package's `/var/lib/smbq`.
fn default_socket() -> PathBuf {
    let local = super::socket_path(&crate::serve::default_state_dir());
    let packaged = super::socket_path(std::path::Path::new(PACKAGED_STATE_DIR));
    if !local.exists() && packaged.exists() {
        packaged
    } else {
        local
    }
}

/// Where the Debian package's server keeps its state (packaging/smbq.toml).
const PACKAGED_STATE_DIR: &str = "/var/lib/smbq";

fn ask(path: &std::path::Path, req: &Request) -> Result<Reply, String> {
    let mut stream = UnixStream::connect(path).map_err(|e| {
        format!(
            "{}: {e} (is `smbq serve` running with this state directory? --state-dir DIR)",
            path.display()
        )
    })?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut line = serde_json::to_vec(req).map_err(|e| e.to_string())?;
    line.push(b'\n');
    // A server that refuses this client answers without reading the request, so a failed
    // write still leaves its answer to read.
    let sent = stream.write_all(&line);
    let mut text = String::new();
    let read = BufReader::new(stream.take(MAX_REPLY)).read_line(&mut text);
    match (sent, read) {
        (_, Ok(n)) if n > 0 => serde_json::from_str(&text)
            .map_err(|e| format!("{}: unreadable reply: {e}", path.display())),
        (Err(e), _) | (_, Err(e)) => Err(format!("{}: {e}", path.display())),
        (Ok(()), Ok(_)) => Err(format!(
            "{}: the server closed without answering",
            path.display()
        )),
    }
}

fn or_dash(v: Option<&String>) -> String {
    v.cloned().unwrap_or_else(|| "-".into())
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = UNITS[0];
    for u in UNITS.iter().skip(1) {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if unit == "B" {
        format!("{n} B")
    } else {
        format!("{v:.1} {unit}")
    }
}

fn age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// The snapshot as the sections an administrator reads, like smbstatus's.
pub fn tables(s: &Snapshot) -> String {
    let mut out = format!(
        "smbq {} (pid {}), up {}\n",
        s.server.version,
        s.server.pid,
        age(s.server.uptime_secs)
    );
    connections_section(&mut out, s);
    sessions_section(&mut out, s);
    trees_section(&mut out, s);
    opens_section(&mut out, s);
    locks_section(&mut out, s);
    notifies_section(&mut out, s);
    out
}

/// One titled section: its row count, then the table when there are rows.
fn section(out: &mut String, title: &str, headers: &[&str], rows: Vec<Vec<String>>) {
    out.push_str(&format!("\n{title} ({})\n", rows.len()));
    if !rows.is_empty() {
        out.push_str(&render(headers, &rows));
    }
}

/// CONNECTIONS: one row per connection, with its QUIC path where there is one.
fn connections_section(out: &mut String, s: &Snapshot) {
    let rows = s
        .connections
        .iter()
        .map(|c| {
            let quic = c.quic.as_ref().map_or("-".into(), |q| {
                format!(
                    "rtt {:.1} ms, cwnd {}, lost {}/{}",
                    q.rtt_ms,
                    bytes(q.cwnd_bytes),
                    q.lost_packets,
                    q.sent_packets
                )
            });
            vec![
                c.id.to_string(),
                c.peer.clone(),
                c.transport.clone(),
                or_dash(c.dialect.as_ref()),
                or_dash(c.signing.as_ref()),
                or_dash(c.cipher.as_ref()),
                bytes(c.bytes_in),
                bytes(c.bytes_out),
                age(c.age_secs),
                quic,
            ]
        })
        .collect();
    let h = [
        "ID",
        "PEER",
        "TRANSPORT",
        "DIALECT",
        "SIGNING",
        "CIPHER",
        "IN",
        "OUT",
        "AGE",
        "QUIC PATH",
    ];
    section(out, "CONNECTIONS", &h, rows);
}

/// SESSIONS: user, kind and the connections each session is bound to.
fn sessions_section(out: &mut String, s: &Snapshot) {
    let rows = s
        .sessions
        .iter()
        .map(|x| {
            let kind = match (x.anonymous, x.guest) {
                (true, _) => "anonymous",
                (_, true) => "guest",
                _ => "user",
            };
            let user = if x.domain.is_empty() {
                x.user.clone()
            } else {
                format!("{}\\{}", x.domain, x.user)
            };
            let conns: Vec<String> = x.connections.iter().map(u64::to_string).collect();
            vec![
                format!("{:#x}", x.id),
                user,
                kind.into(),
                if x.encrypted { "yes" } else { "no" }.into(),
                or_dash(x.signing.as_ref()),
                conns.join(","),
                age(x.age_secs),
            ]
        })
        .collect();
    let h = [
        "SESSION",
        "USER",
        "KIND",
        "ENCRYPTED",
        "SIGNING",
        "CONNECTIONS",
        "AGE",
    ];
    section(out, "SESSIONS", &h, rows);
}

/// TREE CONNECTS: share and mode of each tree connect.
fn trees_section(out: &mut String, s: &Snapshot) {
    let rows = s
        .trees
        .iter()
        .map(|t| {
            vec![
                format!("{:#x}", t.session_id),
                t.tree_id.to_string(),
                t.share.clone(),
                if t.read_only {
                    "read-only"
                } else {
                    "read-write"
                }
                .into(),
                if t.encrypt { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    let h = ["SESSION", "TREE", "SHARE", "MODE", "ENCRYPT"];
    section(out, "TREE CONNECTS", &h, rows);
}

/// OPEN FILES: access, sharing, caching and durability of each open.
fn opens_section(out: &mut String, s: &Snapshot) {
    let rows = s
        .opens
        .iter()
        .map(|o| {
            vec![
                o.id.to_string(),
                if o.session_id == 0 {
                    "-".into()
                } else {
                    format!("{:#x}", o.session_id)
                },
                o.user.clone(),
                o.share.clone(),
                o.path.clone(),
                format!("{} {:#x}", access_letters(o.access), o.access),
                if o.share_mode.is_empty() {
                    "none".into()
                } else {
                    o.share_mode.clone()
                },
                o.oplock
                    .as_ref()
                    .map(|l| format!("oplock {l}"))
                    .or_else(|| o.lease.as_ref().map(|l| format!("lease {l}")))
                    .unwrap_or_else(|| "-".into()),
                or_dash(o.durable.as_ref()),
            ]
        })
        .collect();
    let h = [
        "ID", "SESSION", "USER", "SHARE", "PATH", "ACCESS", "SHARING", "CACHING", "DURABLE",
    ];
    section(out, "OPEN FILES", &h, rows);
}

/// BYTE-RANGE LOCKS: one row per lock held.
fn locks_section(out: &mut String, s: &Snapshot) {
    let rows = s
        .locks
        .iter()
        .map(|l| {
            vec![
                l.open_id.to_string(),
                l.share.clone(),
                l.path.clone(),
                if l.exclusive { "exclusive" } else { "shared" }.into(),
                l.offset.to_string(),
                l.length.to_string(),
            ]
        })
        .collect();
    let h = ["OPEN", "SHARE", "PATH", "TYPE", "OFFSET", "LENGTH"];
    section(out, "BYTE-RANGE LOCKS", &h, rows);
}

/// CHANGE NOTIFICATIONS: one row per open watching a directory.
fn notifies_section(out: &mut String, s: &Snapshot) {
    let rows = s
        .notifies
        .iter()
        .map(|n| {
            vec![
                n.open_id.to_string(),
                n.share.clone(),
                if n.path.is_empty() {
                    "\\".into()
                } else {
                    n.path.clone()
                },
                format!("{:#x}", n.filter),
                if n.recursive { "yes" } else { "no" }.into(),
                n.waiting.to_string(),
            ]
        })
        .collect();
    let h = ["OPEN", "SHARE", "DIRECTORY", "FILTER", "SUBTREE", "WAITING"];
    section(out, "CHANGE NOTIFICATIONS", &h, rows);
}
