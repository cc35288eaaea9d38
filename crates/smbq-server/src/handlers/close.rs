//! CLOSE (MS-SMB2 3.3.5.10): releases the open (locks, share mode, delete-on-close) and
//! optionally reports the file's final attributes.

use std::sync::atomic::Ordering;

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::close::{CloseRequest, CloseResponse, POSTQUERY_ATTRIB};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;
use crate::meta;

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = CloseRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?.clone();
    let srv = ctx.srv.self_arc();
    let post = req.flags & POSTQUERY_ATTRIB != 0;
    // Delete-on-close is only ever set on an open holding DELETE (MS-SMB2 3.3.5.9, MS-FSA
    // 2.1.5.15.3); checked again here, where the delete happens, so a flag set by mistake
    // cannot remove a file the open may not delete or one on a read-only share.
    // Requests sent before this CLOSE may still be starting (each runs as its own task):
    // they learn it closed after them (dispatch.rs).
    ctx.session
        .note_closing(open.volatile(), ctx.req.header.message_id);
    if crate::security::require(&open, mask::DELETE).is_err() {
        open.delete_on_close.store(false, Ordering::Release);
    }
    let (st, name) = blocking(move || {
        // Stat before closing: a delete-on-close file is gone afterwards.
        let st = if post {
            open.file().and_then(|f| f.file.stat().ok())
        } else {
            None
        };
        let name = open
            .path()
            .file_name()
            .map(str::to_owned)
            .unwrap_or_default();
        srv.close_open_by_id(open.volatile())
            .ok_or(NtStatus::FILE_CLOSED)?;
        Ok((st, name))
    })
    .await?;
    let resp = match st {
        Some(st) => CloseResponse {
            flags: POSTQUERY_ATTRIB,
            creation_time: meta::creation_time(&st),
            last_access_time: meta::ft(st.atime),
            last_write_time: meta::ft(st.mtime),
            change_time: meta::ft(st.ctime),
            allocation_size: meta::allocation_size(&st),
            end_of_file: meta::end_of_file(&st),
            file_attributes: meta::attributes(&st, &name),
        },
        None => CloseResponse::default(),
    };
    Ok(Response::ok(body(|w| resp.encode(w))))
}
