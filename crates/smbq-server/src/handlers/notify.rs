//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19): validates the request, then waits in crate::notify until
//! a matching change, the open's close (STATUS_NOTIFY_CLEANUP), the watched directory's
//! deletion (STATUS_DELETE_PENDING) or CANCEL. The connection loop turns a wait longer than
//! its interim delay into an async operation, so CANCEL can reach it.

use std::time::Duration;

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::change_notify::{ChangeNotifyRequest, ChangeNotifyResponse, encode_notify_entries};

use super::{Ctx, bad, body};
use crate::access::mask;
use crate::notify::{Outcome, Start, WatchSpec};

/// How long buffered changes wait for an earlier request of the same client to arrive.
const SETTLE: Duration = Duration::from_millis(10);

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
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
    let spec = WatchSpec {
        share: open.tree.share.cfg.name.to_lowercase(),
        dir: open.path(),
        filter: req.completion_filter,
        tree: req.watch_tree(),
        buffer: req.output_buffer_length,
        seq: ctx.req.header.message_id,
    };
    let hub = ctx.srv.notify();
    let id = open.volatile();
    let Start {
        id: waiter,
        mut rx,
        ready,
    } = hub.request(id, &spec);
    if ready {
        // Requests are separate tasks: one sent just before this may not have reached the hub
        // yet, and the buffered changes are its to return (smbtorture smb2.notify.double).
        tokio::time::sleep(SETTLE).await;
        hub.flush(id);
    }
    // A close that ran before the watch existed would leave it behind.
    if open.is_closed() {
        hub.closed(id);
    }
    let outcome = tokio::select! {
        o = &mut rx => o.unwrap_or(Outcome::Cleanup),
        () = ctx.cancel.cancelled() => {
            if hub.forget(id, waiter) {
                return Err(NtStatus::CANCELLED);
            }
            // Completed at the same moment: deliver rather than lose the changes.
            rx.try_recv().map_err(|_| NtStatus::CANCELLED)?
        }
    };
    respond(outcome, req.output_buffer_length)
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
