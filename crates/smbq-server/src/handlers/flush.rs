//! FLUSH (MS-SMB2 3.3.5.11).

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::flush::{FlushRequest, FlushResponse};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    FlushRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?.clone();
    if open.pipe().is_some() {
        return Ok(Response::ok(body(|w| FlushResponse.encode(w))));
    }
    // 3.3.5.11: flushing needs write access to the file.
    if !open.has(mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    blocking(move || {
        let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
        f.file.fsync().map_err(|e| crate::errors::map_io_error(&e))
    })
    .await?;
    Ok(Response::ok(body(|w| FlushResponse.encode(w))))
}
