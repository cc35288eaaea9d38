//! CLOSE (MS-SMB2 3.3.5.10): releases the open (locks, share mode, delete-on-close) and
//! optionally reports the file's final attributes.

use std::sync::atomic::Ordering;

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::close::{CloseRequest, CloseResponse, POSTQUERY_ATTRIB};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;
use crate::open_state::Queries as _;
use crate::{dos, meta};

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
    let resp = blocking(move || {
        // Stat before closing: a delete-on-close file is gone afterwards.
        let post = match open.file() {
            Some(f) if post => f.file.stat().ok().map(|st| {
                let name = open
                    .path()
                    .file_name()
                    .map(str::to_owned)
                    .unwrap_or_default();
                let v = dos::view(&srv, f.file.as_ref(), f.key, &st, &name);
                CloseResponse {
                    flags: POSTQUERY_ATTRIB,
                    creation_time: v.creation,
                    last_access_time: v.last_access,
                    last_write_time: v.last_write,
                    change_time: v.change,
                    allocation_size: meta::allocation_with(&st, srv.open_state().allocation(f.key)),
                    end_of_file: meta::end_of_file(&st),
                    file_attributes: v.attributes,
                }
            }),
            _ => None,
        };
        let breaks = srv
            .close_open_answering_first(open.volatile())
            .ok_or(NtStatus::FILE_CLOSED)?;
        Ok((post.unwrap_or_default(), breaks))
    })
    .await?;
    let (resp, breaks) = resp;
    ctx.srv.after_answer(breaks);
    Ok(Response::ok(body(|w| resp.encode(w))))
}
