//! OPLOCK_BREAK acknowledgment (MS-SMB2 3.3.5.22): the client answers an oplock or lease
//! break notification; the new level or lease state is recorded and the CREATEs waiting for
//! it go on (crate::file_state).

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::oplock_break::{LeaseBreakAck, OplockBreak, OplockBreakAck};

use crate::file_state::lease::LeaseKey;

use super::{Ctx, bad, body};

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let ack = match OplockBreakAck::decode(&ctx.req.msg).map_err(bad)? {
        OplockBreakAck::Oplock(o) => o,
        OplockBreakAck::Lease(l) => return lease_ack(ctx, &l),
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

/// MS-SMB2 3.3.5.22.2: the lease is looked up by key among the leases of this client
/// (ClientGuid); no such lease is STATUS_OBJECT_NAME_NOT_FOUND, no break under way
/// STATUS_UNSUCCESSFUL, a state beyond the one broken to STATUS_REQUEST_NOT_ACCEPTED.
fn lease_ack(ctx: &Ctx<'_>, ack: &LeaseBreakAck) -> Result<Response, NtStatus> {
    let key = LeaseKey {
        client_guid: ctx.conn.client_guid,
        key: ack.lease_key,
    };
    let state = ctx.srv.lease_acknowledge(&key, ack.lease_state)?;
    let resp = LeaseBreakAck {
        flags: 0,
        lease_key: ack.lease_key,
        lease_state: state,
        lease_duration: 0,
    };
    Ok(Response::ok(body(|w| resp.encode(w))))
}
