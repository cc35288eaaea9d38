//! EAs at CREATE (MS-SMB2 2.2.13.2.1 SMB2_CREATE_EA_BUFFER "ExtA"; MS-FSA 2.1.5.1): the
//! request's EAs go on a file this CREATE created, overwrote or superseded (overwrite and
//! supersede replace the old ones), and an open with FILE_NO_EA_KNOWLEDGE is refused on a
//! file one of whose EAs is marked FILE_NEED_EA.

use smbq_wire::NtStatus;
use smbq_wire::create::CreateAction;

use super::Done;
use crate::ea::{self, Ea};

/// MS-SMB2 2.2.13 CreateOptions FILE_NO_EA_KNOWLEDGE.
pub(super) const NO_EA_KNOWLEDGE: u32 = 0x0000_0200;

/// Blocking: applies `eas` to the newly opened file and checks FILE_NEED_EA.
pub(super) fn after_open(done: &Done, eas: Option<&[Ea]>, options: u32) -> Result<(), NtStatus> {
    let Some(f) = done.open.file() else {
        return Ok(());
    };
    let fresh = matches!(
        done.action,
        CreateAction::CREATED | CreateAction::OVERWRITTEN | CreateAction::SUPERSEDED
    );
    if let Some(eas) = eas.filter(|_| fresh) {
        if done.action != CreateAction::CREATED {
            ea::remove_all(f.file.as_ref()).map_err(|e| crate::errors::map_io_error(&e))?;
        }
        ea::apply(f.file.as_ref(), eas)?;
    }
    if options & NO_EA_KNOWLEDGE != 0 && ea::any_needed(f.file.as_ref()) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}
