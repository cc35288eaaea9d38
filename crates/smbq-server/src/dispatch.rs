//! What each command needs resolved before its handler runs, and the resolution itself
//! (MS-SMB2 3.3.5.2.9 session, 3.3.5.2.11 tree connect and encryption, 3.3.5.2.x file ids).

use std::sync::Arc;

use smbq_proto::observe::{Handled, Observer};
use smbq_proto::{ConnView, Request, Response, SessionView};
use smbq_wire::ioctl::CtlCode;
use smbq_wire::{Command, FileId, HEADER_LEN, NtStatus, Reader};
use tokio_util::sync::CancellationToken;

use crate::Server;
use crate::config::EncryptPolicy;
use crate::handlers::{self, Ctx};
use crate::tables::{Open, SessionState, Tree, channel_seq};

/// Where a command's FileId sits, and whether it must name an open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FileNeed {
    None,
    /// The FileId at this offset of the body must resolve.
    Required(usize),
    /// Resolve when it is not all-ones (IOCTLs such as VALIDATE_NEGOTIATE carry no file).
    Optional(usize),
}

#[derive(Clone, Copy, Debug)]
struct Needs {
    tree: bool,
    file: FileNeed,
}

/// The declarative table (every command here also needs a session). FileId offsets are from
/// the start of the body, per the request layouts of MS-SMB2 2.2.
fn needs(cmd: Command) -> Option<Needs> {
    use FileNeed::*;
    let n = |tree, file| Some(Needs { tree, file });
    match cmd {
        Command::TREE_CONNECT => n(false, None),
        Command::TREE_DISCONNECT => n(true, None),
        Command::CREATE => n(true, None),
        Command::CLOSE => n(true, Required(8)),
        Command::FLUSH => n(true, Required(8)),
        Command::READ => n(true, Required(16)),
        Command::WRITE => n(true, Required(16)),
        Command::LOCK => n(true, Required(8)),
        Command::IOCTL => n(true, Optional(8)),
        Command::QUERY_DIRECTORY => n(true, Required(8)),
        Command::CHANGE_NOTIFY => n(true, Required(8)),
        Command::QUERY_INFO => n(true, Required(24)),
        Command::SET_INFO => n(true, Required(16)),
        // Oplock and lease acknowledgments differ in layout; the handler tells them apart.
        Command::OPLOCK_BREAK => n(true, None),
        _ => Option::None,
    }
}

/// What the connection's loop saw of a request as it arrived ([`before_task`]).
#[derive(Default)]
pub struct Arrival {
    /// The open the request named, live when it arrived. A CLOSE sent after the request may
    /// run before its task starts; the request still works on the open it was sent for, as
    /// on Windows, where requests reach the file in the order they arrive (smbtorture
    /// smb2.compound_find.compound_find_close got FILE_CLOSED for a QUERY_DIRECTORY sent just
    /// before the CLOSE of its handle).
    open: Option<Arc<Open>>,
}

pub(crate) async fn dispatch(
    srv: &Server,
    conn: &ConnView,
    req: &Request,
    cancel: CancellationToken,
    arrival: Arrival,
) -> Response {
    match resolve(srv, conn, req).or_else(|e| arrived_open(srv, conn, req, arrival, e)) {
        Ok(ctx) => {
            let ctx = Ctx { cancel, ..ctx };
            let _counted = match channel_sequence(conn, req, ctx.open.as_ref()) {
                Ok(c) => c,
                Err(status) => {
                    abandon_early_notify(srv, &ctx);
                    return Response::error(status);
                }
            };
            if let Some(open) = &ctx.open {
                // The client has the CREATE's answer: no replay of it can come any more
                // (crate::durable::replay; smbtorture smb2.replay.replay6).
                if let Some(r) = open.replay.lock().take() {
                    srv.durable_store().replayable.remove(
                        r.client_guid,
                        r.create_guid,
                        open.volatile(),
                    );
                }
            }
            let started = std::time::Instant::now();
            let who = match unix_identity(srv, &ctx) {
                Ok(w) => w,
                Err(status) => {
                    abandon_early_notify(srv, &ctx);
                    return Response::error(status);
                }
            };
            let run = crate::unix_identity::CURRENT.scope(who, handlers::run(&ctx));
            let mut r = match run.await {
                Ok(r) => r,
                Err(status) => Response::error(status),
            };
            abandon_early_notify(srv, &ctx);
            if let Some(o) = srv.observer() {
                observe(o.as_ref(), &ctx, &r, started.elapsed());
            }
            srv.denials.denied(&ctx, r.status);
            // MS-SMB2 3.3.5.2.7.2: a related request that follows works on this request's
            // open, not only on one a CREATE made (a FLUSH then a related CLOSE: smbtorture
            // smb2.compound_async.flush_close).
            if r.file_id.is_none() {
                r.file_id = ctx.open.as_ref().map(|o| o.file_id);
            }
            // A compress_data share: every large response is offered to compression (the
            // engine compresses what is long enough and pays: listings, queries, IOCTLs).
            if ctx.tree.as_ref().is_some_and(|t| t.share.cfg.compress_data) {
                r.compress = true;
            }
            r
        }
        Err(NtStatus::FILE_CLOSED) if notify_overtaken(srv, req) => {
            // A CHANGE_NOTIFY sent before the CLOSE of its handle but started after it: the
            // answer it would have had waiting (MS-SMB2 3.3.5.10: STATUS_NOTIFY_CLEANUP), not
            // FILE_CLOSED for a handle that was open when it was sent (smbtorture
            // smb2.notify.dir under load).
            Response::error(NtStatus::NOTIFY_CLEANUP)
        }
        Err(status) => Response::error(status),
    }
}

/// Runs on the connection's loop, before the request's task is spawned: what a client sees
/// happen before the answers to requests it sent later. A task can start late on a busy
/// machine (its worker thread preempted), so this is done here, in arrival order:
/// - a rename's or a delete's handle breaks (MS-FSA 2.1.5.15.11, 2.1.4.12). Windows and
///   Samba send them before they answer anything sent after the SET_INFO, and smbtorture
///   smb2.lease.rename_wait acknowledges the break it picked up while a later CREATE was
///   answered; a late task sent it after four such answers. The task asks again and finds
///   the breaks under way, so nothing is sent twice.
/// - a CHANGE_NOTIFY's place in its watch (crate::notify): changes made after it was sent are
///   its own (smbtorture smb2.notify.mask-change got two where one was due when the request
///   reached the watch after both). Its task takes the registration, or withdraws it when it
///   fails before waiting (`dispatch`).
/// - the open a request names, held for it ([`Arrival`]).
pub(crate) fn before_task(srv: &Server, conn: &ConnView, req: &Request) -> Arrival {
    let command = req.command();
    let names_file = needs(command).is_some_and(|n| n.file != FileNeed::None);
    if !names_file || command == Command::CLOSE {
        return Arrival::default();
    }
    let Ok(ctx) = resolve(srv, conn, req) else {
        return Arrival::default();
    };
    match command {
        Command::SET_INFO => handlers::start_handle_breaks(&ctx),
        Command::CHANGE_NOTIFY => handlers::register_notify_early(&ctx),
        _ => {}
    }
    Arrival { open: ctx.open }
}

/// A request whose open a CLOSE sent after it has closed since it arrived: resolved again
/// with the open it arrived for ([`Arrival`]).
fn arrived_open<'a>(
    srv: &'a Server,
    conn: &'a ConnView,
    req: &'a Request,
    arrival: Arrival,
    status: NtStatus,
) -> Result<Ctx<'a>, NtStatus> {
    let Some(open) = arrival.open.filter(|_| status == NtStatus::FILE_CLOSED) else {
        return Err(status);
    };
    let closed_after = srv
        .session_state(open.session_id)
        .is_some_and(|s| s.closed_after(open.volatile(), req.header.message_id));
    if !closed_after {
        return Err(status);
    }
    let mut ctx = resolve_without_file(srv, conn, req)?;
    ctx.open = Some(open);
    Ok(ctx)
}

/// A CHANGE_NOTIFY registered by `before_task` whose handler did not take the registration
/// withdraws it.
fn abandon_early_notify(srv: &Server, ctx: &Ctx<'_>) {
    if ctx.req.command() == Command::CHANGE_NOTIFY
        && let Some(open) = &ctx.open
    {
        srv.notify()
            .abandon_early(open.volatile(), ctx.req.header.message_id);
    }
}

/// The Unix user the request's file system work runs as, on a per-user share.
fn unix_identity(
    srv: &Server,
    ctx: &Ctx<'_>,
) -> Result<Option<Arc<crate::unix_identity::UnixIdentity>>, NtStatus> {
    let id = &ctx.view.identity;
    crate::unix_identity::for_request(
        srv.unix_identity(),
        &ctx.session.unix,
        ctx.tree.as_ref().map(|t| t.share.name()),
        &id.user,
        id.is_guest || id.is_anonymous,
    )
}

/// Tells the metrics what a handler did; the data counts come from the response itself
/// (READ's data, WRITE's Count, MS-SMB2 2.2.20 / 2.2.22).
fn observe(o: &dyn Observer, ctx: &Ctx<'_>, r: &Response, elapsed: std::time::Duration) {
    let command = ctx.req.command();
    let ok = r.status == NtStatus::SUCCESS;
    let read_bytes = match (command, ok) {
        (Command::READ, true) => {
            r.data
                .as_ref()
                .map_or(r.body.len().saturating_sub(16), |d| d.len()) as u64
        }
        _ => 0,
    };
    let written_bytes = match (command, ok) {
        (Command::WRITE, true) => r
            .body
            .get(4..8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, |b| u64::from(u32::from_le_bytes(b))),
        _ => 0,
    };
    o.handled(&Handled {
        command,
        status: r.status,
        elapsed,
        share: ctx.tree.as_ref().map(|t| t.share.name()),
        transport: ctx.conn.transport,
        read_bytes,
        written_bytes,
    });
}

fn notify_overtaken(srv: &Server, req: &Request) -> bool {
    if req.command() != Command::CHANGE_NOTIFY {
        return false;
    }
    let (Some(view), Ok(id)) = (req.session.as_ref(), read_file_id(req, 8)) else {
        return false;
    };
    let id = req.resolve_file_id(id);
    srv.session_state(view.id)
        .is_some_and(|s| s.closed_after(id.volatile, req.header.message_id))
}

/// MS-SMB2 3.3.5.2.10 (crate::tables::channel_seq): on SMB 3.x a request naming an open is
/// counted under its ChannelSequence (the low 16 bits of the header's Status); a WRITE,
/// SET_INFO or IOCTL from a channel sequence the open has moved past is refused with
/// STATUS_FILE_NOT_AVAILABLE. The count is given back when the returned guard drops.
fn channel_sequence(
    conn: &ConnView,
    req: &Request,
    open: Option<&Arc<Open>>,
) -> Result<Option<Counted>, NtStatus> {
    let Some(open) = open.filter(|_| conn.dialect.is_smb3()) else {
        return Ok(None);
    };
    let csn = req.header.status.0 as u16;
    let replay = req.header.flags & smbq_wire::header::flags::REPLAY_OPERATION != 0;
    let modifies = matches!(
        req.command(),
        Command::WRITE | Command::SET_INFO | Command::IOCTL
    );
    match open.channel.lock().enter(csn, replay, modifies) {
        Ok(Some(c)) => Ok(Some(Counted {
            open: open.clone(),
            c,
        })),
        Ok(None) => Ok(None),
        Err(channel_seq::Stale) => Err(NtStatus::FILE_NOT_AVAILABLE),
    }
}

/// A request counted against its open's channel sequence, until it is answered.
struct Counted {
    open: Arc<Open>,
    c: channel_seq::Counted,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.open.channel.lock().leave(self.c);
    }
}

fn resolve<'a>(srv: &'a Server, conn: &'a ConnView, req: &'a Request) -> Result<Ctx<'a>, NtStatus> {
    let mut ctx = resolve_without_file(srv, conn, req)?;
    let needs = needs(req.command()).ok_or(NtStatus::NOT_SUPPORTED)?;
    let (view, tree) = (ctx.view, ctx.tree.as_ref());
    ctx.open = match needs.file {
        FileNeed::None => None,
        FileNeed::Required(at) => Some(resolve_open(srv, req, at, view.id, tree)?),
        FileNeed::Optional(at) => {
            let id = req.resolve_file_id(read_file_id(req, at)?);
            if id == FileId::RELATED {
                None
            } else if ioctl_code(req) == Some(CtlCode::QUERY_NETWORK_INTERFACE_INFO) {
                // MS-SMB2 3.3.5.15.11: this FSCTL names no file; a FileId other than
                // all-ones is INVALID_PARAMETER, not FILE_CLOSED (smbtorture
                // smb2.ioctl.bug14788.NETWORK_INTERFACE).
                return Err(NtStatus::INVALID_PARAMETER);
            } else {
                Some(lookup(srv, id, view.id, tree)?)
            }
        }
    };
    Ok(ctx)
}

/// The session and tree of a request (MS-SMB2 3.3.5.2.9, 3.3.5.2.11), its open left out.
fn resolve_without_file<'a>(
    srv: &'a Server,
    conn: &'a ConnView,
    req: &'a Request,
) -> Result<Ctx<'a>, NtStatus> {
    let needs = needs(req.command()).ok_or(NtStatus::NOT_SUPPORTED)?;
    // 3.3.5.2.9: the engine found no valid session for this SessionId.
    let view: &SessionView = req.session.as_ref().ok_or(NtStatus::USER_SESSION_DELETED)?;
    // The session may have ended since the engine passed the request up (a reconnect
    // replaced it, MS-SMB2 3.3.5.5.3).
    let session: Arc<SessionState> = srv
        .session_state(view.id)
        .ok_or(NtStatus::USER_SESSION_DELETED)?;
    let tree: Option<Arc<Tree>> = if needs.tree {
        let t = session
            .tree(req.header.tree_id)
            .ok_or(NtStatus::NETWORK_NAME_DELETED)?;
        // A reload removed or changed its share (crate::reload).
        if t.share.is_retired() {
            return Err(NtStatus::NETWORK_NAME_DELETED);
        }
        check_encryption(srv, conn, req, &t)?;
        Some(t)
    } else {
        None
    };
    Ok(Ctx {
        srv,
        conn,
        req,
        view,
        session,
        tree,
        open: None,
        cancel: CancellationToken::new(),
    })
}

/// The CtlCode of an IOCTL request (MS-SMB2 2.2.31: 4 bytes after StructureSize and
/// Reserved).
fn ioctl_code(req: &Request) -> Option<CtlCode> {
    if req.command() != Command::IOCTL {
        return None;
    }
    let b = req.msg.get(HEADER_LEN + 4..HEADER_LEN + 8)?;
    Some(CtlCode(u32::from_le_bytes(b.try_into().ok()?)))
}

/// MS-SMB2 3.3.5.2.11: on a share that requires encryption, an unencrypted request is
/// refused. QUIC with transport security never encrypts at the SMB layer, so it is exempt;
/// nothing else is, whatever the session can do: a session set up over QUIC without a cipher
/// and bound to a TCP connection without one (issue 42) cannot encrypt at all, and must not
/// be answered in clear text on TCP for the share it connected over QUIC.
fn check_encryption(
    srv: &Server,
    conn: &ConnView,
    req: &Request,
    tree: &Tree,
) -> Result<(), NtStatus> {
    let required = tree.encrypt || srv.config().encrypt == EncryptPolicy::Required;
    if required && !req.encrypted && !conn.transport_security {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

fn read_file_id(req: &Request, at: usize) -> Result<FileId, NtStatus> {
    let mut r = Reader::at(&req.msg, HEADER_LEN + at).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    FileId::decode(&mut r).map_err(|_| NtStatus::INVALID_PARAMETER)
}

fn resolve_open(
    srv: &Server,
    req: &Request,
    at: usize,
    session_id: u64,
    tree: Option<&Arc<Tree>>,
) -> Result<Arc<Open>, NtStatus> {
    let id = req.resolve_file_id(read_file_id(req, at)?);
    lookup(srv, id, session_id, tree)
}

/// MS-SMB2 3.3.5.2.x: an id that names no open, names a closing one, or belongs to another
/// session or tree is FILE_CLOSED.
fn lookup(
    srv: &Server,
    id: FileId,
    session_id: u64,
    tree: Option<&Arc<Tree>>,
) -> Result<Arc<Open>, NtStatus> {
    let open = srv.lookup_open(id.volatile).ok_or(NtStatus::FILE_CLOSED)?;
    if open.file_id.persistent != id.persistent || open.session_id != session_id || open.is_closed()
    {
        return Err(NtStatus::FILE_CLOSED);
    }
    if let Some(t) = tree
        && t.id != open.tree.id
    {
        return Err(NtStatus::FILE_CLOSED);
    }
    Ok(open)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_command_declares_its_file_id() {
        for c in [
            Command::CLOSE,
            Command::READ,
            Command::WRITE,
            Command::QUERY_INFO,
            Command::SET_INFO,
        ] {
            assert!(
                matches!(needs(c).unwrap().file, FileNeed::Required(_)),
                "{c:?}"
            );
        }
        assert!(needs(Command::NEGOTIATE).is_none());
        assert!(!needs(Command::TREE_CONNECT).unwrap().tree);
    }
}
