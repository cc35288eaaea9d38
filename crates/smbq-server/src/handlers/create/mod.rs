//! CREATE (MS-SMB2 3.3.5.9): a named pipe open on IPC$, or a file, directory or stream open
//! on a disk share. [`handle`] reads as the sequence, each step in its own module:
//!
//! 1. intent (intent.rs): the request and its contexts validated once into a
//!    [`CreateIntent`], which every later step reads;
//! 2. resolve (resolve.rs): the name looked up beneath the share, and what the disposition
//!    makes of it (disposition.rs); nothing changes;
//! 3. admit (admit.rs): the share and the session admit an open, the user's access is
//!    checked (rights.rs, secure.rs) and `FileStates::admit` breaks oplocks and leases and
//!    checks share modes;
//! 4. open (open.rs, stream.rs, eas.rs): the file-system side of the disposition;
//! 5. grant (grant.rs): the open installed, its oplock or lease and durability granted;
//! 6. answer (answer.rs): the response and its contexts (contexts.rs).
//!
//! Steps 2 to 4 run together on the blocking pool ([`open::run`]), in the order the object
//! store needs, and end in an open ([`Done`]) or a [`Stop`]: a failure, or oplock breaks to
//! wait for before running them again. A durable reconnect or replay (durable.rs) is another
//! sequence, taken before the intent.

mod admit;
mod answer;
mod contexts;
mod disposition;
mod durable;
mod eas;
mod grant;
mod intent;
mod open;
mod resolve;
mod rights;
mod secure;
mod stream;

use std::sync::Arc;

use smbq_proto::Response;
use smbq_vfs::Stat;
use smbq_wire::NtStatus;
use smbq_wire::create::{CreateAction, CreateRequest};

use super::{Ctx, bad};
use crate::dos;
use crate::open_state::WaitToken;
use crate::tables::Open;
use intent::CreateIntent;

/// One CREATE, as the steps above.
pub(crate) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = CreateRequest::decode(&ctx.req.msg).map_err(bad)?;
    let durability = durable::scan(&req, ctx.conn.dialect)?;
    let tree = ctx.tree()?.clone();
    // A durable reconnect or replay: another sequence (durable.rs).
    if let Some(rc) = durability.reconnect {
        return durable::reconnect(ctx, &tree, &req, rc).await;
    }
    let _running = durable::start_running(ctx, durability.ask)?;
    match durable::replay(ctx, &req, durability.ask) {
        Some(durable::Replayed::Answer(r)) => return Ok(r),
        Some(durable::Replayed::Reclaim(id, guid)) => {
            if let Some(r) = durable::replay_reclaim(ctx, &tree, &req, id, guid).await? {
                return Ok(r);
            }
        }
        None => {}
    }
    // 1. intent
    let intent = Arc::new(CreateIntent::from_request(
        &req,
        ctx.token(),
        ctx.conn,
        tree.share.cfg.posix_extensions,
    )?);
    // 3. admit, on the share and the session first: the open gets its id.
    let srv = ctx.srv.self_arc();
    let id = admit::reserve(ctx, &srv, &tree)?;
    // 2. resolve, 3. admit, 4. open: on the blocking pool, waiting for breaks.
    let done = match open::run(ctx, &srv, &tree, &intent, id).await {
        Ok(done) => done,
        Err(Refused::Status(status)) => return Err(status),
        Err(Refused::Symlink(data)) => return Ok(answer::stopped_on_symlink(ctx, &data)),
    };
    let done = eas::apply(&srv, &tree, &intent, id, done).await?;
    // 5. grant
    let granted = grant::grant(ctx, &srv, &intent, id, &done, durability.ask).await?;
    // 6. answer
    let replay_guid = durable::replay_guid(durability.ask);
    Ok(answer::respond(
        ctx,
        &tree,
        &intent,
        &done,
        &granted,
        replay_guid,
    ))
}

/// What steps 2 to 4 made: the open, not yet installed, and what the answer reports of it.
struct Done {
    open: Arc<Open>,
    action: CreateAction,
    /// `None` for pipes.
    stat: Option<Stat>,
    view: Option<dos::View>,
    maximal: u32,
}

/// Why the blocking part of a disk CREATE produced no open.
enum Stop {
    /// The CREATE fails with this status.
    Failed(NtStatus),
    /// Conflicting oplocks are being broken: wait for them, then run the CREATE again.
    MustWait(WaitToken),
    /// The name is a symlink reparse point opened without FILE_OPEN_REPARSE_POINT: this
    /// Symbolic Link Error Response tells the client where it points (crate::reparse).
    Symlink(Vec<u8>),
}

impl From<NtStatus> for Stop {
    fn from(status: NtStatus) -> Self {
        Stop::Failed(status)
    }
}

/// Why a CREATE produced no open, as its answer says it.
enum Refused {
    Status(NtStatus),
    /// STATUS_STOPPED_ON_SYMLINK with this ErrorData (MS-SMB2 2.2.2.2.1).
    Symlink(Vec<u8>),
}

impl From<NtStatus> for Refused {
    fn from(status: NtStatus) -> Self {
        Refused::Status(status)
    }
}
