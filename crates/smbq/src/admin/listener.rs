//! The server's end of the admin socket.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use super::{MAX_REQUEST, Reply, Request};

/// Admin clients served at once; more wait (the socket's backlog holds them).
const MAX_CLIENTS: usize = 4;
/// A client that does not send its request line within this is dropped.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the socket at `path`: made under a temporary name, restricted to mode 0600, then
/// renamed into place, so it is never reachable with looser permissions. A socket left by a
/// server that is gone is replaced; one a live server answers on is left alone (an error).
pub fn bind(path: &Path) -> Result<UnixListener, String> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{}: another smbq server answers on this admin socket (same state directory?)",
                path.display()
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let tmp = PathBuf::from(format!("{}.{}", path.display(), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let done = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", path.display()));
    }
    Ok(listener)
}

/// Whether the peer may use the socket: the server's own user or root. The file's mode
/// already keeps others out; this holds even if someone loosens it.
fn allowed(uid: u32) -> bool {
    uid == 0 || uid == rustix::process::geteuid().as_raw()
}

/// Serves admin requests until `shutdown`, then removes the socket.
pub async fn serve(
    listener: UnixListener,
    path: PathBuf,
    server: Arc<smbq_server::Server>,
    reloader: Arc<crate::reload::Reloader>,
    shutdown: smbq_server::conn::Shutdown,
) {
    crate::accept_loop::serve(listener, MAX_CLIENTS, shutdown, |stream, _| {
        let (server, reloader) = (server.clone(), reloader.clone());
        async move { handle(stream, &server, &reloader).await }
    })
    .await;
    let _ = std::fs::remove_file(&path);
}

async fn handle(
    stream: UnixStream,
    server: &Arc<smbq_server::Server>,
    reloader: &Arc<crate::reload::Reloader>,
) {
    let (uid, pid) = match stream.peer_cred() {
        Ok(c) => (c.uid(), c.pid()),
        Err(_) => return,
    };
    if !allowed(uid) {
        tracing::warn!(uid, ?pid, "admin socket: refused a client of another user");
        let _ = reply(
            stream,
            &Reply::Error {
                message:
                    "permission denied: only the server's user or root may use the admin socket"
                        .into(),
            },
        )
        .await;
        return;
    }
    let mut line = String::new();
    let mut reader = BufReader::new(stream);
    let read = {
        let mut limited = (&mut reader).take(MAX_REQUEST as u64);
        tokio::time::timeout(REQUEST_TIMEOUT, limited.read_line(&mut line)).await
    };
    let stream = reader.into_inner();
    let answer = match read {
        Ok(Ok(n)) if n > 0 && line.ends_with('\n') => {
            match serde_json::from_str::<Request>(&line) {
                Ok(req) => run(req, server, reloader, uid, pid).await,
                Err(e) => Reply::Error {
                    message: format!("bad request: {e}"),
                },
            }
        }
        _ => Reply::Error {
            message: format!("expected one JSON request line of at most {MAX_REQUEST} bytes"),
        },
    };
    let _ = reply(stream, &answer).await;
}

async fn run(
    req: Request,
    server: &Arc<smbq_server::Server>,
    reloader: &Arc<crate::reload::Reloader>,
    uid: u32,
    pid: Option<i32>,
) -> Reply {
    match req {
        Request::Reload => {
            let r = reloader.clone();
            let why = format!("admin socket (uid {uid})");
            match tokio::task::spawn_blocking(move || r.reload(&why)).await {
                Ok(Ok(message)) => Reply::Done { message },
                Ok(Err(message)) => Reply::Error {
                    message: format!("reload failed, the old configuration stays: {message}"),
                },
                Err(e) => Reply::Error {
                    message: e.to_string(),
                },
            }
        }
        Request::Status => Reply::Status(Box::new(server.status())),
        Request::KillSession { id } => {
            let (done, missing) = (
                format!("session {id} ended"),
                format!("no live session {id}"),
            );
            act(
                server,
                "admin: kill session",
                id,
                (uid, pid),
                (done, missing),
                |s, id| s.kill_session(id),
            )
            .await
        }
        Request::CloseFile { id } => {
            let (done, missing) = (format!("open {id} closed"), format!("no open {id}"));
            act(
                server,
                "admin: close file",
                id,
                (uid, pid),
                (done, missing),
                |s, id| s.close_file(id),
            )
            .await
        }
    }
}

/// Runs an administrator's action on the blocking pool (closing files may delete them),
/// leaves its audit line, and answers `done` or `missing`.
async fn act(
    server: &Arc<smbq_server::Server>,
    what: &'static str,
    id: u64,
    (uid, pid): (u32, Option<i32>),
    (done, missing): (String, String),
    action: fn(&smbq_server::Server, u64) -> bool,
) -> Reply {
    let s = server.clone();
    let ok = tokio::task::spawn_blocking(move || action(&s, id))
        .await
        .unwrap_or(false);
    tracing::info!(target: smbq_server::AUDIT, id, uid, ?pid, ok, "{what}");
    if ok {
        Reply::Done { message: done }
    } else {
        Reply::Error { message: missing }
    }
}

async fn reply(mut stream: UnixStream, r: &Reply) -> std::io::Result<()> {
    let mut text = serde_json::to_vec(r).map_err(std::io::Error::other)?;
    text.push(b'\n');
    stream.write_all(&text).await?;
    stream.shutdown().await
}
