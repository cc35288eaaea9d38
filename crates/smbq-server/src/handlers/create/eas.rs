//! EAs at CREATE (MS-SMB2 2.2.13.2.1 SMB2_CREATE_EA_BUFFER "ExtA"; MS-FSA 2.1.5.1): the
//! request's EAs go on a file this CREATE created, overwrote or superseded (overwrite and
//! supersede replace the old ones), and an open with FILE_NO_EA_KNOWLEDGE is refused on a
//! file one of whose EAs is marked FILE_NEED_EA.

use std::sync::Arc;

use smbq_wire::NtStatus;
use smbq_wire::create::CreateAction;

use super::intent::CreateIntent;
use super::{Done, grant};
use crate::Server;
use crate::ea::{self, Ea};
use crate::handlers::blocking;
use crate::share::ShareKind;
use crate::tables::Tree;

/// MS-SMB2 2.2.13 CreateOptions FILE_NO_EA_KNOWLEDGE.
const NO_EA_KNOWLEDGE: u32 = 0x0000_0200;

/// MS-SMB2 2.2.13.2.1: the request's EAs go on a disk file this CREATE created or overwrote,
/// and FILE_NO_EA_KNOWLEDGE is checked ([`after_open`]). The open is installed first, so a failure
/// releases it the normal way.
pub(super) async fn apply(
    srv: &Arc<Server>,
    tree: &Tree,
    intent: &Arc<CreateIntent>,
    id: u64,
    done: Done,
) -> Result<Done, NtStatus> {
    let wanted = intent.contexts.eas.is_some() || intent.options & NO_EA_KNOWLEDGE != 0;
    if !wanted || tree.share.kind != ShareKind::Disk {
        return Ok(done);
    }
    srv.install_open(done.open.clone());
    let intent = intent.clone();
    let r = blocking(move || {
        after_open(&done, intent.contexts.eas.as_deref(), intent.options).map(|()| done)
    })
    .await;
    match r {
        Ok(d) => Ok(d),
        Err(e) => Err(grant::close_installed(srv, id, e).await),
    }
}

/// Blocking: applies `eas` to the newly opened file and checks FILE_NEED_EA.
fn after_open(done: &Done, eas: Option<&[Ea]>, options: u32) -> Result<(), NtStatus> {
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
