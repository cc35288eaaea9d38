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
    // 3.3.5.11: FILE_WRITE_DATA or FILE_APPEND_DATA; for a directory the same bits are
    // FILE_ADD_FILE and FILE_ADD_SUBDIRECTORY, which Samba accepts there.
    crate::security::require_any(&open, mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA)?;
    blocking(move || {
        let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
        f.file
            .fsync()
            .map_err(|e| crate::errors::map_io_error(&e))?;
        // No LastWriteTime update: the writes made it (MS-FSA 2.1.4.17, crate::write_time;
        // smbtorture 4.25 smb2.timestamps.delayed-write-vs-flush).
        Ok(())
    })
    .await?;
    Ok(Response::ok(body(|w| FlushResponse.encode(w))))
}
