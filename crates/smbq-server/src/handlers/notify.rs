//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19): validates the request, then waits in crate::notify until
//! a matching change the watcher may see (crate::notify::visible), the open's close
//! (STATUS_NOTIFY_CLEANUP), the watched directory's deletion (STATUS_DELETE_PENDING) or
//! CANCEL. The connection loop turns a wait longer than its interim delay into an async
//! operation, so CANCEL can reach it.

use std::time::Duration;

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::change_notify::{ChangeNotifyRequest, ChangeNotifyResponse, encode_notify_entries};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;
use crate::notify::{Change, Outcome, Start, WatchSpec, visible};

/// How long buffered changes wait for an earlier request of the same client to arrive.
const SETTLE: Duration = Duration::from_millis(10);

/// The watch a valid request asks for (MS-SMB2 3.3.5.19).
fn watch_spec(ctx: &Ctx<'_>) -> Result<WatchSpec, NtStatus> {
    let req = ChangeNotifyRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?;
    if !open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // The watch buffers up to this many bytes while no request waits (crate::notify), so
    // MaxTransactSize also bounds the memory one watched open holds.
    if req.output_buffer_length > ctx.conn.max_transact_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // MS-SMB2 3.3.5.19 / MS-FSA 2.1.5.11: watching needs FILE_LIST_DIRECTORY.
    if !open.has(mask::FILE_LIST_DIRECTORY) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(WatchSpec {
        share: open.tree.share.cfg.name.to_lowercase(),
        dir: open.path(),
        filter: req.completion_filter,
        tree: req.watch_tree(),
        buffer: req.output_buffer_length,
        seq: ctx.req.header.message_id,
    })
}

/// Registers a valid request with the hub from the connection's loop, as it arrives
/// (crate::dispatch::before_task): changes made after the client sent it are its own, however
/// late its task starts. An invalid one is left to its task to answer.
pub(crate) fn register_early(ctx: &Ctx<'_>) {
    if let (Ok(spec), Ok(open)) = (watch_spec(ctx), ctx.open()) {
        ctx.srv.notify().request_early(open.volatile(), &spec);
    }
}

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let spec = watch_spec(ctx)?;
    loop {
        let changes = match wait(ctx, &spec).await? {
            Outcome::Changes(c) => c,
            o => return respond(o, spec.buffer),
        };
        let changes = visible_to_watcher(ctx, changes).await?;
        // Nothing the watcher may see: the request waits on, as if nothing had happened.
        if !changes.is_empty() {
            return respond(Outcome::Changes(changes), spec.buffer);
        }
    }
}

/// One wait of the request in the hub: until changes, the open's close, the directory's
/// deletion or CANCEL.
async fn wait(ctx: &Ctx<'_>, spec: &WatchSpec) -> Result<Outcome, NtStatus> {
    let hub = ctx.srv.notify();
    let id = ctx.open()?.volatile();
    let Start {
        id: waiter,
        mut rx,
        ready,
    } = hub
        .take_early(id, spec.seq)
        .unwrap_or_else(|| hub.request(id, spec));
    if ready {
        // Requests are separate tasks: one sent just before this may not have reached the hub
        // yet, and the buffered changes are its to return (smbtorture smb2.notify.double).
        tokio::time::sleep(SETTLE).await;
        hub.flush(id);
    }
    // A close that ran before the watch existed would leave it behind.
    let open = ctx.open()?;
    if open.is_closed() {
        hub.closed(id);
    }
    // So would a delete-on-close set (and its DELETE_PENDING sent) by another open before
    // this request reached the hub: MS-FSA 2.1.5.10 fails a notify on a directory that is
    // delete-pending (smbtorture smb2.notify.rmdir3 with the request still queued).
    if let Some(f) = open.file()
        && ctx.srv.open_state().delete_pending(f.key)
    {
        hub.delete_pending(&spec.share, &spec.dir);
    }
    tokio::select! {
        o = &mut rx => Ok(o.unwrap_or(Outcome::Cleanup)),
        () = ctx.cancel.cancelled() => {
            if hub.forget(id, waiter) {
                return Err(NtStatus::CANCELLED);
            }
            // Completed at the same moment: deliver rather than lose the changes.
            rx.try_recv().map_err(|_| NtStatus::CANCELLED)
        }
    }
}

/// The changes whose names the watcher may learn (crate::notify::visible): those below a
/// subdirectory are checked on a blocking thread, as the watcher's Unix user on per-user
/// shares, against each directory on the way down.
async fn visible_to_watcher(ctx: &Ctx<'_>, changes: Vec<Change>) -> Result<Vec<Change>, NtStatus> {
    if !visible::needs_check(&changes) {
        return Ok(changes);
    }
    let open = ctx.open()?;
    let share = &open.tree.share;
    let vfs = share.vfs.clone().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let abe = share.cfg.access_based_enumeration;
    let watched = open.path();
    let token = ctx.token();
    blocking(move || {
        Ok(visible::retain_listable(changes, |dir| {
            visible::may_list(vfs.as_ref(), &watched, dir, &token, abe)
        }))
    })
    .await
}

fn respond(o: Outcome, buffer: u32) -> Result<Response, NtStatus> {
    match o {
        Outcome::Changes(changes) => {
            let mut w = smbq_wire::Writer::new();
            let n =
                encode_notify_entries(changes.iter().map(|c| (c.action, c.name.as_str())), &mut w);
            if n > buffer as usize {
                return Err(NtStatus::NOTIFY_ENUM_DIR);
            }
            let list = w.into_vec();
            Ok(Response::ok(body(|w| {
                ChangeNotifyResponse { output: &list }.encode(w)
            })))
        }
        Outcome::EnumDir => Err(NtStatus::NOTIFY_ENUM_DIR),
        Outcome::Cleanup => Err(NtStatus::NOTIFY_CLEANUP),
        Outcome::DeletePending => Err(NtStatus::DELETE_PENDING),
    }
}
