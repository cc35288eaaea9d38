//! Durable handles in CREATE: the request contexts DHnQ / DH2Q grant one (MS-SMB2 3.3.5.9.6,
//! 3.3.5.9.10), the reconnect contexts DHnC / DH2C give a parked open back to its client on a
//! new connection (3.3.5.9.7, 3.3.5.9.12). The store of disconnected opens is
//! `crate::durable`.

use std::sync::Arc;
use std::time::Duration;

use smbq_proto::Response;
use smbq_wire::create::{CreateAction, CreateRequest, CreateResponse, OplockLevel};
use smbq_wire::create_context::{
    self as cc, CreateContextTag, Dh2cRequest, Dh2qRequest, Dh2qResponse, Lease, contexts_to_bytes,
};
use smbq_wire::{Dialect, FileId, NtStatus};

use super::contexts;
use crate::durable::replay::Running;
use crate::durable::{DurableGrant, FirstAnswer, Parked};
use crate::errors::map_io_error;
use crate::file_state::lease::{Granted, LeaseKey};
use crate::handlers::{Ctx, body};
use crate::open_state::Queries as _;
use crate::path::parse_name;
use crate::share::ShareKind;
use crate::tables::{Open, Tree};
use crate::{Server, dos, meta};

/// A durable handle request (DHnQ or DH2Q).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DurableAsk {
    V1,
    V2 {
        timeout_ms: u32,
        create_guid: [u8; 16],
        /// SMB2_DHANDLE_FLAG_PERSISTENT.
        persistent: bool,
    },
}

/// A reconnect request (DHnC or DH2C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Reconnect {
    file_id: FileId,
    /// `Some` for DH2C.
    create_guid: Option<[u8; 16]>,
    /// DH2C's SMB2_DHANDLE_FLAG_PERSISTENT; `None` for a replayed CREATE, whose DH2Q flag
    /// asked for persistence and does not say what the open became.
    persistent: Option<bool>,
}

/// What the CREATE asks of durability, read before anything else is validated: a reconnect
/// ignores every other field of the request (smbtorture smb2.durable-open.reopen2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Durability {
    pub ask: Option<DurableAsk>,
    pub reconnect: Option<Reconnect>,
}

/// Reads the durable contexts of `req` (v2 ones only on SMB 3.x). Combinations MS-SMB2 forbids
/// are STATUS_INVALID_PARAMETER: DH2Q beside DHnQ or DHnC (3.3.5.9.10), DH2C beside any other
/// durable context (3.3.5.9.12). A DHnQ beside a DHnC is ignored (3.3.5.9.7).
pub(super) fn scan(req: &CreateRequest<'_>, dialect: Dialect) -> Result<Durability, NtStatus> {
    let bad = |_| NtStatus::INVALID_PARAMETER;
    let list = req.parse_contexts().map_err(bad)?;
    let find = |tag: CreateContextTag<'_>| list.iter().find(|c| c.tag() == tag).map(|c| c.data);
    let v2 = dialect.is_smb3();
    let dhnq = find(CreateContextTag::DHNQ);
    let dhnc = find(CreateContextTag::DHNC);
    let dh2q = find(CreateContextTag::DH2Q).filter(|_| v2);
    let dh2c = find(CreateContextTag::DH2C).filter(|_| v2);
    if (dh2q.is_some() && (dhnq.is_some() || dhnc.is_some()))
        || (dh2c.is_some() && (dhnq.is_some() || dhnc.is_some() || dh2q.is_some()))
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut out = Durability::default();
    if let Some(d) = dh2c {
        let r = Dh2cRequest::decode(d).map_err(bad)?;
        out.reconnect = Some(Reconnect {
            file_id: r.file_id,
            create_guid: Some(r.create_guid),
            persistent: Some(r.flags & cc::DH2_FLAG_PERSISTENT != 0),
        });
    } else if let Some(d) = dhnc {
        out.reconnect = Some(Reconnect {
            file_id: cc::decode_dhnc(d).map_err(bad)?,
            create_guid: None,
            persistent: Some(false),
        });
    } else if let Some(d) = dh2q {
        let r = Dh2qRequest::decode(d).map_err(bad)?;
        // DH2_FLAG_PERSISTENT asks for a persistent handle, granted on a continuously
        // available share only (`grant`).
        out.ask = Some(DurableAsk::V2 {
            timeout_ms: r.timeout,
            create_guid: r.create_guid,
            persistent: r.flags & cc::DH2_FLAG_PERSISTENT != 0,
        });
    } else if let Some(d) = dhnq {
        if d.len() != cc::DHNQ_REQUEST_LEN {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        out.ask = Some(DurableAsk::V1);
    }
    Ok(out)
}

/// MS-SMB2 3.3.5.9.10 (crate::durable::replay): a CREATE whose first sending is still
/// running (waiting for a break) is answered FILE_NOT_AVAILABLE, before it can open or
/// break anything; the guard is held until this one answers, so a replay finds it running or
/// finished.
pub(super) fn start_running(
    ctx: &Ctx<'_>,
    ask: Option<DurableAsk>,
) -> Result<Option<Running>, NtStatus> {
    match replay_guid(ask) {
        Some(g) => Ok(Some(
            ctx.srv
                .durable_store()
                .creating
                .start(ctx.conn.client_guid, g)
                .ok_or(NtStatus::FILE_NOT_AVAILABLE)?,
        )),
        None => Ok(None),
    }
}

/// The CreateGuid of a durable v2 request, under which its answer is kept for replays.
pub(super) fn replay_guid(ask: Option<DurableAsk>) -> Option<[u8; 16]> {
    match ask {
        Some(DurableAsk::V2 { create_guid, .. }) => Some(create_guid),
        _ => None,
    }
}

/// MS-SMB2 3.3.5.9.6 / 3.3.5.9.10: the open is made durable when it got a BATCH oplock or a
/// lease caching handles (a client that may lose a handle without being told must not think
/// it has one); the response context to add, if it was. A durable v2 request with
/// SMB2_DHANDLE_FLAG_PERSISTENT on a continuously available tree is granted a persistent
/// handle whatever its caching, on a directory too (Open.IsPersistent; Windows Server, and
/// smbtorture smb2.durable-v2-open.persistent-open-oplock's table for CA shares, grant it
/// beside any oplock, where Samba refuses it beside one).
pub(super) fn grant(
    ctx: &Ctx<'_>,
    ask: DurableAsk,
    open: &Open,
    oplock: OplockLevel,
    lease: Option<&Granted>,
) -> Option<(CreateContextTag<'static>, Vec<u8>)> {
    // Beyond the store's bounds a persistent handle is not promised (the open may still be
    // durable). A named stream's open is not kept in the store, so it is never promised one.
    let persistent = matches!(
        ask,
        DurableAsk::V2 {
            persistent: true,
            ..
        }
    ) && open.tree.ca
        && open.file().is_some_and(|f| f.stream.is_none())
        && ctx.srv.persistent_room_for(&ctx.view.identity.user);
    let file = open.file()?;
    if file.is_dir && !persistent {
        return None;
    }
    let handles = oplock == OplockLevel::BATCH
        || lease.is_some_and(|g| g.state & cc::lease_state::HANDLE_CACHING != 0);
    let who = &ctx.view.identity;
    if !(handles || persistent) || who.is_guest || who.is_anonymous {
        return None;
    }
    let limits = ctx.srv.limits();
    let default = Duration::from_secs(limits.durable_timeout_secs);
    let max_ms = limits.max_durable_timeout_secs.saturating_mul(1000);
    let (create_guid, timeout, reply) = match ask {
        DurableAsk::V1 => (
            None,
            default,
            (CreateContextTag::DHNQ, vec![0; cc::DHNQ_RESPONSE_LEN]),
        ),
        DurableAsk::V2 {
            timeout_ms,
            create_guid,
            ..
        } => {
            let ms = if timeout_ms == 0 {
                u64::try_from(default.as_millis()).unwrap_or(max_ms)
            } else {
                u64::from(timeout_ms).min(max_ms)
            };
            let r = Dh2qResponse {
                timeout: u32::try_from(ms).unwrap_or(u32::MAX),
                flags: if persistent {
                    cc::DH2_FLAG_PERSISTENT
                } else {
                    0
                },
            };
            (
                Some(create_guid),
                Duration::from_millis(ms),
                (CreateContextTag::DH2Q, r.to_bytes()),
            )
        }
    };
    *open.durable.lock() = Some(DurableGrant {
        create_guid,
        client_guid: ctx.conn.client_guid,
        user: who.user.clone(),
        timeout,
        resilient: false,
        persistent,
    });
    // A persistent handle is promised only once its record is on stable storage
    // (crate::persist); without it the open is not durable at all.
    if persistent && !ctx.srv.persist(open) {
        *open.durable.lock() = None;
        return None;
    }
    Some(reply)
}

/// MS-SMB2 3.3.5.9.7 / 3.3.5.9.12: gives the parked open named by the reconnect context back
/// to its client on this session and tree, with its share mode, locks, oplock or lease as they
/// are now. Not parked (never durable, still connected, timed out, purged), another client's
/// CreateGuid, another share, or a lease that does not match: OBJECT_NAME_NOT_FOUND; another
/// user: ACCESS_DENIED.
pub(super) async fn reconnect(
    ctx: &Ctx<'_>,
    tree: &Arc<Tree>,
    req: &CreateRequest<'_>,
    rc: Reconnect,
) -> Result<Response, NtStatus> {
    let (open, key) = reclaim(ctx, tree, req, rc).await?;
    let r = respond(ctx, &open, key, contexts::lease_of(req).as_ref());
    resend_break(ctx.srv, key, open.volatile());
    r
}

/// A persistent open keeps a break begun while its client was away (crate::durable::
/// persistent): the client hears it once it has its open back (its epoch moves only now, so
/// the answer showed the lease as the client left it).
fn resend_break(srv: &Server, key: crate::file_state::FileKey, id: u64) {
    srv.apply(srv.open_state().unheard_breaks(key, id));
}

/// A replayed durable v2 CREATE whose open was parked (its connection went before the client
/// saw the answer) takes the open back as a reconnect would, and is answered as the first
/// sending was (Samba's replay_reconnect; smbtorture smb2.replay.durable-reconnect-replay1/3,
/// replay-twice-durable). `None` when the open is gone meanwhile: the CREATE runs anew.
pub(super) async fn replay_reclaim(
    ctx: &Ctx<'_>,
    tree: &Arc<Tree>,
    req: &CreateRequest<'_>,
    file_id: FileId,
    create_guid: [u8; 16],
) -> Result<Option<Response>, NtStatus> {
    let rc = Reconnect {
        file_id,
        create_guid: Some(create_guid),
        persistent: None,
    };
    let (open, key) = match reclaim(ctx, tree, req, rc).await {
        Ok(reclaimed) => reclaimed,
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) => return Ok(None),
        Err(e) => return Err(e),
    };
    let first = open.replay.lock().as_ref().map(|r| r.first.clone());
    let r = match first {
        Some(first) => answer_replay(ctx, req, &open, &first),
        None => Response::error(NtStatus::INTERNAL_ERROR),
    };
    resend_break(ctx.srv, key, open.volatile());
    Ok(Some(r))
}

/// The reclaiming half of [`reconnect`]: the parked open, installed on this session and tree.
async fn reclaim(
    ctx: &Ctx<'_>,
    tree: &Arc<Tree>,
    req: &CreateRequest<'_>,
    rc: Reconnect,
) -> Result<(Arc<Open>, crate::file_state::FileKey), NtStatus> {
    if tree.share.kind != ShareKind::Disk {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    let srv = ctx.srv;
    // The lease the reconnect names, read leniently: nothing else of the request counts
    // (not even RequestedOplockLevel, smbtorture smb2.durable-open.reopen1a-lease).
    let asked = contexts::lease_of(req);
    let asked_key = asked.map(|l| LeaseKey {
        client_guid: ctx.conn.client_guid,
        key: l.key,
    });
    let user = &ctx.view.identity.user;
    let not_found = NtStatus::OBJECT_NAME_NOT_FOUND;
    claim_elsewhere(ctx, tree, req, rc).await?;
    let accept = |p: &Parked| reclaimable(srv, tree, req, rc, asked_key, user, p);
    let mut parked = srv
        .durable_store()
        .take_if(rc.file_id.persistent, not_found, accept);
    // The client's old connection may have closed a moment ago, its teardown (which parks
    // the open) not run yet: a client reconnects at once (smbtorture durable-open.reopen2-
    // lease under load). While the open is still installed and durable, look again for a
    // short while; an open whose connection is really alive stays NOT_FOUND, as before.
    let mut waited = Duration::ZERO;
    while matches!(parked, Err(s) if s == not_found)
        && waited < PARKING_WAIT
        && live_durable(srv, rc.file_id)
    {
        tokio::time::sleep(PARKING_POLL).await;
        waited += PARKING_POLL;
        let accept = |p: &Parked| reclaimable(srv, tree, req, rc, asked_key, user, p);
        parked = srv
            .durable_store()
            .take_if(rc.file_id.persistent, not_found, accept);
    }
    let parked = parked?;
    let id = parked.open.volatile();
    let mut open = take_alone(parked.open).await.map_err(|still_used| {
        // A request of the lost connection never let go of it: treat it as gone.
        srv.close_parked_now(&still_used);
        not_found
    })?;
    open.session_id = ctx.session.id;
    open.tree = tree.clone();
    if let Some(g) = open.durable.get_mut() {
        g.client_guid = ctx.conn.client_guid;
    }
    if let Some(r) = open.replay.get_mut() {
        // Replays are looked up by the new client's GUID from now on.
        let index = &srv.durable_store().replayable;
        index.remove(r.client_guid, r.create_guid, id);
        r.client_guid = ctx.conn.client_guid;
        index.insert(r.client_guid, r.create_guid, open.file_id);
    }
    let open = Arc::new(open);
    let key = open.file().map(|f| f.key).ok_or(NtStatus::INTERNAL_ERROR)?;
    // A persistent open takes its lease back with the epoch its reconnect carries.
    let persistent = open.durable.lock().as_ref().is_some_and(|g| g.persistent);
    let epoch = asked.and_then(|l| l.v2).filter(|_| persistent);
    let away = |p| srv.durable_store().is_parked(p);
    let state = srv.open_state();
    state.reclaim(key, (id, ctx.session.id), epoch.map(|v| v.epoch), &away);
    srv.install_open(open.clone());
    if !ctx.session.add_open(id) {
        srv.close_open_by_id(id);
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    srv.persist(&open); // its new ClientGuid and lease epoch (crate::persist)
    tracing::info!(
        open = id,
        session = ctx.session.id,
        "durable open reclaimed"
    );
    Ok((open, key))
}

/// How long a reconnect waits for a durable open still installed to be parked, and how
/// often it looks.
const PARKING_WAIT: Duration = Duration::from_secs(1);
const PARKING_POLL: Duration = Duration::from_millis(10);

/// A durable open this server does not hold may be another cluster node's: handed over from
/// there if it is parked there, taken over here from a node that died (a persistent one),
/// or held there (FILE_NOT_AVAILABLE for a persistent one: the client tries again).
/// crate::persist.
async fn claim_elsewhere(
    ctx: &Ctx<'_>,
    tree: &Tree,
    req: &CreateRequest<'_>,
    rc: Reconnect,
) -> Result<(), NtStatus> {
    let srv = ctx.srv;
    if !srv.shares_records()
        || srv.durable_store().is_parked(rc.file_id.persistent)
        || live_durable(srv, rc.file_id)
    {
        return Ok(());
    }
    let file = file_named(tree, req).await;
    let who = crate::durable::store::Claimant {
        user: &ctx.view.identity.user,
        create_guid: rc.create_guid,
    };
    srv.claim_parked(rc.file_id.persistent, file, who)
}

/// The file a reconnect names (its path, as CREATE finds it), if it is there: where a
/// cluster node asks for the open (smbq-cluster's crate::ca).
async fn file_named(tree: &Tree, req: &CreateRequest<'_>) -> Option<crate::file_state::FileKey> {
    let vfs = tree.share.vfs.clone()?;
    let name = parse_name(&req.name_string().ok()?, false).ok()?;
    let stat = tokio::task::spawn_blocking(move || {
        crate::path::lookup(vfs.as_ref(), &name, false).ok()?.stat
    })
    .await
    .ok()??;
    Some(crate::file_state::FileKey::of(&stat))
}

/// Whether `id` names an open still installed (its connection not torn down) that will be
/// parked when it is.
fn live_durable(srv: &Server, id: FileId) -> bool {
    srv.lookup_open(id.volatile)
        .is_some_and(|o| o.file_id.persistent == id.persistent && o.durable.lock().is_some())
}

/// Whether the parked open `p` is the one the reconnect names, on this share, for this user
/// and with this lease (the statuses as `reconnect` says).
fn reclaimable(
    srv: &Server,
    tree: &Tree,
    req: &CreateRequest<'_>,
    rc: Reconnect,
    asked_key: Option<LeaseKey>,
    user: &str,
    p: &Parked,
) -> Result<(), NtStatus> {
    let not_found = NtStatus::OBJECT_NAME_NOT_FOUND;
    let g = &p.grant;
    // DH2C names the open by CreateGuid, a v1 open's being zero (smbtorture
    // durable-open.reopen2-lease); DHnC reclaims v1 and v2 opens alike (durable-v2-open.
    // reopen2b). The ClientGuid is not compared: Windows lets an oplock holder come back
    // under another one (durable-v2-open.reopen1a), and a lease is tied to its client by
    // the lease key anyway.
    let same_guid = rc
        .create_guid
        .is_none_or(|a| a == g.create_guid.unwrap_or([0; 16]));
    let key = p.open.file().map(|f| f.key).ok_or(not_found)?;
    let (_, held) = srv.open_state().caching_of(key, p.open.volatile());
    let lease_matches = match (held, asked_key) {
        (Some((k, _)), Some(a)) => k == a,
        (None, None) => true,
        _ => false,
    };
    // A resilient open is reclaimed by DHnC only (MS-SMB2 3.3.5.9.7; DH2C is for
    // durable v2 opens, 3.3.5.9.12).
    let v2_for_resilient = g.resilient && rc.create_guid.is_some();
    if p.open.file_id.persistent != rc.file_id.persistent
        || v2_for_resilient
        || !same_guid
        || !lease_matches
        || p.open.tree.share.cfg.name != tree.share.cfg.name
    {
        return Err(not_found);
    }
    if !g.user.eq_ignore_ascii_case(user) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // MS-SMB2 3.3.5.9.12: a persistent open is reclaimed only by a DH2C that says so
    // (OBJECT_NAME_NOT_FOUND otherwise); a DH2C saying so for a durable-only open is
    // INVALID_PARAMETER (as Samba answers).
    match (g.persistent, rc.persistent) {
        (true, Some(false)) => return Err(not_found),
        (false, Some(true)) => return Err(NtStatus::INVALID_PARAMETER),
        _ => {}
    }
    // With a lease the name must be the open's (unlike with an oplock, where it is
    // ignored): INVALID_PARAMETER otherwise (smbtorture durable-open.reopen2-lease).
    if held.is_some() && !names_the_open(req, &p.open) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

/// The open itself once no request of its lost connection holds it any more (they end
/// within moments: their connection is gone); the open back after two seconds otherwise.
async fn take_alone(mut open: Arc<Open>) -> Result<Open, Arc<Open>> {
    for _ in 0..100 {
        match Arc::try_unwrap(open) {
            Ok(o) => return Ok(o),
            Err(still) => open = still,
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Arc::try_unwrap(open)
}

/// Whether the CREATE's name is the path of `open`: case-insensitively, as names are looked
/// up, for a Windows open; byte for byte, with POSIX name rules (`/`, `:` and the rest are
/// name characters), for a POSIX open (crate::posix).
fn names_the_open(req: &CreateRequest<'_>, open: &Open) -> bool {
    let Ok(name) = req.name_string() else {
        return false;
    };
    let Ok(parsed) = parse_name(&name, open.posix) else {
        return false;
    };
    let path = open.path();
    let mut mine = path.components();
    let same = |m: &str, c: &str| {
        if open.posix {
            m == c
        } else {
            m.eq_ignore_ascii_case(c)
        }
    };
    parsed
        .components
        .iter()
        .all(|c| mine.next().is_some_and(|m| same(m, c)))
        && mine.next().is_none()
}

/// The CREATE response of a reconnect: the open as it is now (MS-SMB2 3.3.5.9.7: FILE_OPENED,
/// the oplock or lease it holds). Windows sends no durable context back (smbtorture
/// durable-open.reopen1a-lease, durable-v2-open.reopen1a).
fn respond(
    ctx: &Ctx<'_>,
    open: &Open,
    key: crate::file_state::FileKey,
    asked: Option<&Lease>,
) -> Result<Response, NtStatus> {
    let f = open.file().ok_or(NtStatus::INTERNAL_ERROR)?;
    let st = f.file.stat().map_err(|e| map_io_error(&e))?;
    let path = open.path();
    let view = dos::view(
        ctx.srv,
        f.file.as_ref(),
        key,
        &st,
        path.file_name().unwrap_or_default(),
    );
    let (level, lease) = ctx.srv.open_state().caching_of(key, open.volatile());
    let mut extra: Vec<(CreateContextTag<'static>, Vec<u8>)> = Vec::new();
    let oplock_level = match (lease, asked) {
        (Some((_, g)), Some(a)) => {
            extra.push((CreateContextTag::RQLS, contexts::lease_response(a, &g)));
            OplockLevel::LEASE
        }
        _ => OplockLevel(level.to_wire()),
    };
    let list: Vec<cc::CreateContext<'_>> = extra
        .iter()
        .map(|(t, d)| cc::CreateContext::new(*t, d))
        .collect();
    let ctx_bytes = contexts_to_bytes(&list);
    let resp = CreateResponse {
        oplock_level,
        flags: 0,
        create_action: CreateAction::OPENED,
        creation_time: view.creation,
        last_access_time: view.last_access,
        last_write_time: view.last_write,
        change_time: view.change,
        allocation_size: meta::allocation_with(&st, ctx.srv.open_state().allocation(key)),
        end_of_file: meta::end_of_file(&st),
        file_attributes: view.attributes,
        file_id: open.file_id,
        contexts: &ctx_bytes,
    };
    let mut r = Response::ok(body(|w| resp.encode(w)));
    r.file_id = Some(open.file_id);
    Ok(r)
}

/// What a durable v2 CREATE naming a CreateGuid already answered gets ([`replay`]).
pub(super) enum Replayed {
    /// The first answer again, or an error.
    Answer(Response),
    /// The open is parked (its connection went): a replay takes it back ([`replay_reclaim`]).
    Reclaim(FileId, [u8; 16]),
}

/// MS-SMB2 3.3.5.9.10: a durable v2 CREATE sent again with SMB2_FLAGS_REPLAY_OPERATION (the
/// client never saw the answer) gets the open its first sending made, answered as it was then,
/// and nothing is opened twice. The open is looked up server-wide, by ClientGuid and
/// CreateGuid (crate::durable::replay::ReplayIndex): one of another session is
/// STATUS_DUPLICATE_OBJECTID (MS-SMB2 3.3.5.9.10; smbtorture smb2.replay.
/// durable-reconnect-replay2), a parked one is taken back. A replay asking for a weaker
/// oplock is answered with that level (and, below BATCH, without the durable context), while
/// the open keeps what it has (smbtorture smb2.replay.replay-dhv2-oplock2). The same
/// CreateGuid without the replay flag, while that answer may still be replayed (the client
/// has not used the handle yet), is STATUS_DUPLICATE_OBJECTID. `None` when this is neither.
pub(super) fn replay(
    ctx: &Ctx<'_>,
    req: &CreateRequest<'_>,
    ask: Option<DurableAsk>,
) -> Option<Replayed> {
    let replaying = ctx.req.header.flags & smbq_wire::header::flags::REPLAY_OPERATION != 0;
    let Some(DurableAsk::V2 {
        create_guid,
        persistent,
        ..
    }) = ask
    else {
        return None;
    };
    let client_guid = ctx.conn.client_guid;
    let Some(id) = ctx
        .srv
        .durable_store()
        .replayable
        .get(client_guid, create_guid)
    else {
        // A replayed persistent CREATE whose answer can no longer be replayed (its client
        // used the handle since) is STATUS_FILE_NOT_AVAILABLE, not a second open (smbtorture
        // smb2.persistent-open.replay-multi, written against Windows; Samba answers so too).
        let ca = ctx.tree().is_ok_and(|t| t.ca);
        return (replaying && persistent && ca)
            .then(|| Replayed::Answer(Response::error(NtStatus::FILE_NOT_AVAILABLE)));
    };
    let Some(open) = ctx.srv.lookup_open(id.volatile).filter(|o| o.file_id == id) else {
        let parked = ctx.srv.durable_store().is_parked(id.persistent);
        return (replaying && parked).then_some(Replayed::Reclaim(id, create_guid));
    };
    let first = open
        .replay
        .lock()
        .as_ref()
        .filter(|r| r.create_guid == create_guid && r.client_guid == client_guid)
        .map(|r| r.first.clone())?;
    if !replaying || open.session_id != ctx.session.id {
        // The same CreateGuid again without the replay flag, while the first open's answer
        // may still be replayed: not a second open (as Windows and Samba answer, smbtorture
        // smb2.replay.replay6); nor is a replay from another session.
        return Some(Replayed::Answer(Response::error(
            NtStatus::DUPLICATE_OBJECTID,
        )));
    }
    Some(Replayed::Answer(answer_replay(ctx, req, &open, &first)))
}

/// The answer to a replay of the CREATE that made `open`, first answered with `first`.
fn answer_replay(
    ctx: &Ctx<'_>,
    req: &CreateRequest<'_>,
    open: &Open,
    first: &FirstAnswer,
) -> Response {
    let asked = req.requested_oplock_level;
    let (oplock, contexts) = replayed_oplock(first, asked);
    // A lease is answered as it is now (smbtorture smb2.replay.replay-dhv2-lease1: upgraded
    // by another open of the same key since).
    let current = open
        .file()
        .and_then(|f| ctx.srv.open_state().caching_of(f.key, open.volatile()).1);
    // A replay asking for a lease the open does not hold (it has an oplock, or another key's
    // lease) is not this CREATE again: STATUS_ACCESS_DENIED, as Windows answers
    // (smbtorture replay-dhv2-oplock-lease, replay-dhv2-lease3).
    if let Some(asked) = contexts::lease_of(req).filter(|_| asked == OplockLevel::LEASE) {
        let same = current
            .as_ref()
            .is_some_and(|(k, _)| k.key == asked.key && k.client_guid == ctx.conn.client_guid);
        if !same {
            return Response::error(NtStatus::ACCESS_DENIED);
        }
    }
    let contexts: Vec<(CreateContextTag<'static>, Vec<u8>)> = contexts
        .into_iter()
        .map(|(t, d)| {
            match (
                t == CreateContextTag::RQLS,
                &current,
                contexts::lease_of(req),
            ) {
                (true, Some((_, g)), Some(asked)) => (t, contexts::lease_response(&asked, g)),
                _ => (t, d),
            }
        })
        .collect();
    replayed_answer(open, first, oplock, &contexts)
}

/// The oplock level and contexts a replay is answered with: the first answer's, or the weaker
/// level asked for now (without the durable context below BATCH).
fn replayed_oplock(
    first: &FirstAnswer,
    asked: OplockLevel,
) -> (OplockLevel, Vec<(CreateContextTag<'static>, Vec<u8>)>) {
    let weaker = asked != OplockLevel::LEASE
        && first.oplock != OplockLevel::LEASE.0
        && asked.0 < first.oplock;
    if weaker {
        let keep = asked == OplockLevel::BATCH;
        let ctxs = first
            .contexts
            .iter()
            .filter(|(t, _)| keep || *t != CreateContextTag::DH2Q)
            .cloned()
            .collect();
        (asked, ctxs)
    } else {
        (OplockLevel(first.oplock), first.contexts.clone())
    }
}

/// The CREATE response of a replay: the first answer's times, sizes and action, on the open
/// it made.
fn replayed_answer(
    open: &Open,
    first: &FirstAnswer,
    oplock: OplockLevel,
    contexts: &[(CreateContextTag<'static>, Vec<u8>)],
) -> Response {
    let list: Vec<cc::CreateContext<'_>> = contexts
        .iter()
        .map(|(t, d)| cc::CreateContext::new(*t, d))
        .collect();
    let ctx_bytes = if list.is_empty() {
        Vec::new()
    } else {
        contexts_to_bytes(&list)
    };
    let [creation, access, write, change] = first.times;
    let resp = CreateResponse {
        oplock_level: oplock,
        flags: 0,
        create_action: CreateAction(first.action),
        creation_time: creation,
        last_access_time: access,
        last_write_time: write,
        change_time: change,
        allocation_size: first.allocation,
        end_of_file: first.end_of_file,
        file_attributes: first.attributes,
        file_id: open.file_id,
        contexts: &ctx_bytes,
    };
    tracing::debug!(
        open = open.volatile(),
        "replayed CREATE answered from its open"
    );
    let mut r = Response::ok(body(|w| resp.encode(w)));
    r.file_id = Some(open.file_id);
    r
}
