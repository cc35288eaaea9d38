//! CHANGE_NOTIFY (MS-SMB2 3.3.5.19). No change notification subsystem yet: a request waits
//! until it is cancelled (CANCEL, close, logoff), which is what a client sees from a server
//! whose watched directory never changes.

use smbq_proto::Response;
use smbq_wire::NtStatus;

use super::Ctx;

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let open = ctx.open()?;
    if !open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    ctx.cancel.cancelled().await;
    Err(NtStatus::CANCELLED)
}
