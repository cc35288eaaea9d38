//! OPLOCK_BREAK acknowledgment (MS-SMB2 3.3.5.22): the client answers a break notification;
//! the new level is recorded and the CREATEs waiting for it go on (crate::oplock).

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::oplock_break::{OplockBreak, OplockBreakAck};

use super::{Ctx, bad, body};

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let ack = match OplockBreakAck::decode(&ctx.req.msg).map_err(bad)? {
        OplockBreakAck::Oplock(o) => o,
        // 3.3.5.22.2: no lease is ever granted, so none can be found.
        OplockBreakAck::Lease(_) => return Err(NtStatus::OBJECT_NAME_NOT_FOUND),
    };
    // 3.3.5.22.1: the open is looked up in the session's table; a stale or foreign id is
    // FILE_CLOSED.
    let id = ctx.req.resolve_file_id(ack.file_id);
    let open = ctx
        .srv
        .lookup_open(id.volatile)
        .filter(|o| {
            o.file_id.persistent == id.persistent && o.session_id == ctx.view.id && !o.is_closed()
        })
        .ok_or(NtStatus::FILE_CLOSED)?;
    // A pipe or other non-file open never holds an oplock.
    let key = open.file().ok_or(NtStatus::INVALID_OPLOCK_PROTOCOL)?.key;
    let level = ctx
        .srv
        .oplock_acknowledge(key, open.volatile(), ack.oplock_level)?;
    let resp = OplockBreak {
        oplock_level: level.to_wire(),
        file_id: open.file_id,
    };
    Ok(Response::ok(body(|w| resp.encode(w))))
}
