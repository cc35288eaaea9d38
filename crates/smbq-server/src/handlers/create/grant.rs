//! Step 5 of a CREATE, the grant: the admitted open goes into the server's slab and the
//! session's table, then gets its oplock or lease (MS-SMB2 3.3.5.9.8; crate::file_state) and,
//! when asked and allowed, durability (3.3.5.9.6, 3.3.5.9.10; durable.rs).

use std::sync::Arc;

use smbq_proto::ConnView;
use smbq_wire::NtStatus;
use smbq_wire::create::{CreateAction, OplockLevel};
use smbq_wire::create_context::CreateContextTag;
use smbq_wire::negotiate::capabilities;

use super::durable::{self, DurableAsk};
use super::intent::CreateIntent;
use super::{Done, contexts};
use crate::Server;
use crate::handlers::{Ctx, blocking};
use crate::open_state::{Changes as _, Fact};
use crate::tables::Open;

/// What the open was granted besides its access: the oplock level the response carries and
/// the response contexts that answer for a lease and for durability.
pub(super) struct Granted {
    pub(super) oplock_level: OplockLevel,
    pub(super) extra: Vec<(CreateContextTag<'static>, Vec<u8>)>,
}

/// Installs the open `done` made under the reserved `id`, then grants it caching and
/// durability.
pub(super) async fn grant(
    ctx: &Ctx<'_>,
    srv: &Arc<Server>,
    intent: &CreateIntent,
    id: u64,
    done: &Done,
    ask: Option<DurableAsk>,
) -> Result<Granted, NtStatus> {
    let open = install(ctx, srv, intent, id, done).await?;
    let (oplock_level, extra) = caching(ctx, srv, &open, intent, done, ask);
    Ok(Granted {
        oplock_level,
        extra,
    })
}

/// Puts the open in the session's table and the server's slab, where other requests find it,
/// and tells CHANGE_NOTIFY (crate::notify). A session at its limit of opens fails the CREATE.
async fn install(
    ctx: &Ctx<'_>,
    srv: &Arc<Server>,
    intent: &CreateIntent,
    id: u64,
    done: &Done,
) -> Result<Arc<Open>, NtStatus> {
    let open = done.open.clone();
    if !ctx.session.add_open(id) {
        srv.install_open(open);
        return Err(close_installed(srv, id, NtStatus::INSUFFICIENT_RESOURCES).await);
    }
    srv.install_open(open.clone());
    srv.notify_created(&open, done.action); // CHANGE_NOTIFY (crate::notify)
    if let (Some(a), Some(f), CreateAction::CREATED) =
        (intent.contexts.allocation_size, open.file(), done.action)
    {
        // MS-SMB2 2.2.13.2.6: the preallocation shows as AllocationSize (crate::meta).
        srv.open_state().remember(f.key, Fact::Allocation(a));
    }
    Ok(open)
}

/// The oplock or lease the open gets, and the contexts that answer for it and for durability.
fn caching(
    ctx: &Ctx<'_>,
    srv: &Server,
    open: &Arc<Open>,
    intent: &CreateIntent,
    done: &Done,
    ask: Option<DurableAsk>,
) -> (OplockLevel, Vec<(CreateContextTag<'static>, Vec<u8>)>) {
    // MS-SMB2 3.3.5.9.8: granted once admitted, so concurrent opens see each other.
    let overwrote = matches!(
        done.action,
        CreateAction::OVERWRITTEN | CreateAction::SUPERSEDED
    );
    // The size after an overwrite, which has truncated the file.
    let size = done.stat.as_ref().map_or(0, |st| st.size);
    let (oplock_level, lease) = match &intent.lease {
        Some(ask) => match srv.lease_grant(open, ask, dir_leasing(ctx.conn), size) {
            Some(g) => (OplockLevel::LEASE, Some(g)),
            None => (OplockLevel::NONE, None),
        },
        None => (srv.oplock_grant(open, intent.oplock, overwrote), None),
    };
    let mut extra = Vec::new();
    if let (Some(g), Some(asked)) = (&lease, &intent.contexts.lease) {
        extra.push((CreateContextTag::RQLS, contexts::lease_response(asked, g)));
    }
    if let Some(ask) = ask
        && let Some(c) = durable::grant(ctx, ask, open, oplock_level, lease.as_ref())
    {
        extra.push(c);
    }
    (oplock_level, extra)
}

/// SMB2_GLOBAL_CAP_DIRECTORY_LEASING was negotiated (3.x, the client asked, the server
/// allows it): leases on directories are granted.
fn dir_leasing(conn: &ConnView) -> bool {
    conn.server_capabilities & capabilities::DIRECTORY_LEASING != 0
}

/// Fails a CREATE whose open is already installed: closes it as a CLOSE would
/// (`Server::close_open_by_id` releases its share mode, oplock and delete-on-close) and
/// returns `status`, or the error of the close itself.
pub(super) async fn close_installed(srv: &Arc<Server>, id: u64, status: NtStatus) -> NtStatus {
    let srv = srv.clone();
    let closed = blocking(move || {
        srv.close_open_by_id(id);
        Ok(())
    })
    .await;
    match closed {
        Ok(()) => status,
        Err(e) => e,
    }
}
