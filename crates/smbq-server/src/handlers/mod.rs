//! One file per command. Each handler receives a [`Ctx`] whose session, tree and open were
//! resolved by the dispatch table, and returns a response or an NTSTATUS.

mod close;
mod compression;
mod copychunk;
pub(crate) mod create;
mod dup_extents;
mod flush;
mod interfaces;
mod ioctl;
mod lock;
mod notify;
mod oplock_break;
mod query_directory;
mod query_info;
mod read;
mod rename_breaks;
mod set_info;
mod snapshots;
mod sparse;
mod tree_connect;
mod write;

use std::sync::Arc;

use smbq_proto::{ConnView, Request, Response, SessionView};
use smbq_wire::{Command, DecodeError, NtStatus};
use tokio_util::sync::CancellationToken;

pub(crate) use notify::register_early as register_notify_early;
pub(crate) use set_info::start_handle_breaks;

use crate::Server;
use crate::tables::{Open, SessionState, Tree};

pub(crate) struct Ctx<'a> {
    pub srv: &'a Server,
    pub conn: &'a ConnView,
    pub req: &'a Request,
    pub view: &'a SessionView,
    pub session: Arc<SessionState>,
    pub tree: Option<Arc<Tree>>,
    pub open: Option<Arc<Open>>,
    pub cancel: CancellationToken,
}

impl Ctx<'_> {
    /// The resolved tree; the dispatch table guarantees it for commands that need one.
    pub fn tree(&self) -> Result<&Arc<Tree>, NtStatus> {
        self.tree.as_ref().ok_or(NtStatus::NETWORK_NAME_DELETED)
    }

    pub fn open(&self) -> Result<&Arc<Open>, NtStatus> {
        self.open.as_ref().ok_or(NtStatus::FILE_CLOSED)
    }

    /// The session's security token (crate::security).
    pub fn token(&self) -> Arc<crate::security::Token> {
        self.session.token(
            &self.view.identity,
            &self.srv.config().server_guid,
            crate::unix_identity::CURRENT
                .try_with(|c| c.clone())
                .ok()
                .flatten()
                .as_deref(),
        )
    }
}

pub(crate) async fn run(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    match ctx.req.command() {
        Command::TREE_CONNECT => tree_connect::connect(ctx),
        Command::TREE_DISCONNECT => tree_connect::disconnect(ctx).await,
        Command::CREATE => create::handle(ctx).await,
        Command::CLOSE => close::handle(ctx).await,
        Command::FLUSH => flush::handle(ctx).await,
        Command::READ => read::handle(ctx).await,
        Command::WRITE => write::handle(ctx).await,
        Command::LOCK => lock::handle(ctx).await,
        Command::IOCTL => ioctl::handle(ctx).await,
        Command::QUERY_DIRECTORY => query_directory::handle(ctx).await,
        Command::CHANGE_NOTIFY => notify::handle(ctx).await,
        Command::QUERY_INFO => query_info::handle(ctx).await,
        Command::SET_INFO => set_info::handle(ctx).await,
        Command::OPLOCK_BREAK => oplock_break::handle(ctx).await,
        _ => Err(NtStatus::NOT_SUPPORTED),
    }
}

/// A malformed body is STATUS_INVALID_PARAMETER (MS-SMB2 3.3.5.2.x "the server MUST fail").
pub(crate) fn bad(_e: DecodeError) -> NtStatus {
    NtStatus::INVALID_PARAMETER
}

/// Runs blocking filesystem work on tokio's blocking pool, as the request's Unix user when
/// the share is per-user (crate::unix_identity).
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, NtStatus>
where
    F: FnOnce() -> Result<T, NtStatus> + Send + 'static,
    T: Send + 'static,
{
    let who = crate::unix_identity::CURRENT
        .try_with(|c| c.clone())
        .ok()
        .flatten();
    let f = move || crate::unix_identity::run_as(who.as_deref(), f);
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(_) => Err(NtStatus::INTERNAL_ERROR),
    }
}

/// Runs `f` on this worker, as the request's Unix user when the share is per-user: only for
/// work known to be short (crate::inline_io).
pub(crate) fn inline<T>(f: impl FnOnce() -> Result<T, NtStatus>) -> Result<T, NtStatus> {
    let who = crate::unix_identity::CURRENT
        .try_with(|c| c.clone())
        .ok()
        .flatten();
    // A panic answers INTERNAL_ERROR, as one on the blocking pool does, instead of
    // unwinding the request's task and leaving the client without a response.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::unix_identity::run_as(who.as_deref(), f)
    }))
    .unwrap_or(Err(NtStatus::INTERNAL_ERROR))
}

/// Encodes a body with `f` into a fresh buffer.
pub(crate) fn body(f: impl FnOnce(&mut smbq_wire::Writer)) -> Vec<u8> {
    let mut w = smbq_wire::Writer::new();
    f(&mut w);
    w.into_vec()
}
