//! CREATE (MS-SMB2 3.3.5.9): validation, then a named pipe open on IPC$ or a file/directory
//! open on a disk share, with share modes (crate::share_mode) and the create dispositions.

mod contexts;
mod disposition;
mod eas;
pub(crate) mod grant;
mod secure;
mod stream;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use parking_lot::Mutex;
use smbq_proto::Response;
use smbq_vfs::{CreateMode, FileKind, OpenOptions, RelPath, Stat, Vfs, VfsFile};
use smbq_wire::create::{
    CreateAction, CreateDisposition, CreateRequest, CreateResponse, ImpersonationLevel, OplockLevel,
};
use smbq_wire::{FileId, NtStatus};

use super::{Ctx, bad, blocking, body};
use crate::Server;
use crate::access::{attr, mask, opts, share as share_bits};
use crate::byte_lock::FileKey;
use crate::errors::{IoContext, map_io_error, map_io_error_in};
use crate::path::{Stream, parse_smb_name, resolve};
use crate::pipe::PipeOpen;
use crate::share::ShareKind;
use crate::tables::open::{DirCursor, FileOpen};
use crate::tables::{Open, OpenKind, SessionState, Tree};
use crate::{dos, meta, oplock};
use disposition::{Plan, plan};

/// The validated request fields a disk or pipe open works from.
#[derive(Clone, Debug)]
struct Params {
    name: String,
    desired: u32,
    share_access: u32,
    disposition: CreateDisposition,
    options: u32,
    attributes: u32,
    /// Set by `handle` before a disk open (crate::security).
    token: Option<Arc<crate::security::Token>>,
    /// The SecD create context's descriptor, applied if the object is created.
    creator_sd: Option<smbq_wire::security::SecurityDescriptor>,
}

fn validate(req: &CreateRequest<'_>) -> Result<Params, NtStatus> {
    if req.impersonation_level.0 > ImpersonationLevel::DELEGATE.0 {
        return Err(NtStatus::BAD_IMPERSONATION_LEVEL);
    }
    let o = req.create_options;
    if o & opts::RESERVE_OPFILTER != 0 || o & opts::OPEN_BY_FILE_ID != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if o & 0xFF00_0000 != 0 || (o & opts::DIRECTORY_FILE != 0 && o & opts::NON_DIRECTORY_FILE != 0)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.create_disposition.0 > CreateDisposition::OVERWRITE_IF.0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // MS-FSA 2.1.5.1: a directory can only be opened or created, never overwritten.
    if o & opts::DIRECTORY_FILE != 0
        && !matches!(
            req.create_disposition,
            CreateDisposition::OPEN | CreateDisposition::CREATE | CreateDisposition::OPEN_IF
        )
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if req.share_access & !share_bits::ALL != 0 || req.file_attributes & !attr::VALID_SET != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    grant::check_desired(req.desired_access)?;
    let name = req
        .name_string()
        .map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    Ok(Params {
        name,
        desired: req.desired_access,
        share_access: req.share_access,
        disposition: req.create_disposition,
        options: o,
        attributes: req.file_attributes,
        token: None,
        creator_sd: None,
    })
}

pub(crate) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = CreateRequest::decode(&ctx.req.msg).map_err(bad)?;
    let mut p = validate(&req)?;
    let wanted = contexts::parse(&req)?;
    if let Some(sd) = &wanted.sec_desc {
        secure::check_creator_sd(sd)?;
    }
    p.creator_sd = wanted.sec_desc.clone();
    p.token = Some(ctx.token());
    let tree = ctx.tree()?.clone();
    // MS-SMB2 3.3.5.9: Share.FileSecurity grants this user nothing on the share.
    if tree.maximal_access == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if ctx.session.open_count() >= ctx.srv.config().limits.max_opens_per_session {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let srv = ctx.srv.self_arc();
    let id = srv
        .reserve_open_id()
        .ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
    let result = match tree.share.kind {
        ShareKind::Pipe => open_pipe(ctx, &tree, &p, id),
        ShareKind::Disk => {
            let mut rounds = 0;
            loop {
                let (srv2, tree2, session, p2) =
                    (srv.clone(), tree.clone(), ctx.session.clone(), p.clone());
                let alloc = wanted.allocation_size;
                let r = blocking(move || open_disk(&srv2, &tree2, &session, &p2, id, alloc)).await;
                // Conflicting oplocks are being broken (crate::oplock): wait for the
                // acknowledgments or closes, then look at the file again.
                match r {
                    Err(oplock::BREAK_PENDING) if rounds < oplock::MAX_BREAK_ROUNDS => {
                        rounds += 1;
                        if let Err(e) = srv.oplock_wait(id, &ctx.cancel).await {
                            break Err(e);
                        }
                    }
                    Err(oplock::BREAK_PENDING) => {
                        srv.oplock_forget_wait(id);
                        break Err(NtStatus::SHARING_VIOLATION);
                    }
                    r => break r,
                }
            }
        }
    };
    let done = match result {
        Ok(d) => d,
        Err(e) => {
            srv.cancel_reservation(id);
            return Err(e);
        }
    };
    let done = match (
        wanted.eas.is_some() || p.options & eas::NO_EA_KNOWLEDGE != 0,
        tree.share.kind,
    ) {
        (true, ShareKind::Disk) => {
            // Installed first, so a failure below releases it the normal way.
            srv.install_open(done.open.clone());
            let (eas, options) = (wanted.eas.clone(), p.options);
            let r =
                blocking(move || eas::after_open(&done, eas.as_deref(), options).map(|()| done))
                    .await;
            match r {
                Ok(d) => d,
                Err(e) => {
                    let srv2 = srv.clone();
                    blocking(move || {
                        srv2.close_open_by_id(id);
                        Ok(())
                    })
                    .await?;
                    return Err(e);
                }
            }
        }
        _ => done,
    };
    let open = done.open.clone();
    if !ctx.session.add_open(id) {
        srv.install_open(open);
        let srv2 = srv.clone();
        blocking(move || {
            srv2.close_open_by_id(id);
            Ok(())
        })
        .await?;
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    srv.install_open(open.clone());
    srv.notify_created(&open, done.action); // CHANGE_NOTIFY (crate::notify)
    if let (Some(a), Some(f), CreateAction::CREATED) =
        (wanted.allocation_size, open.file(), done.action)
    {
        // MS-SMB2 2.2.13.2.6: the preallocation shows as AllocationSize (crate::meta).
        srv.files().set_allocation(f.key, a);
    }
    // MS-SMB2 3.3.5.9.8: granted once admitted, so concurrent opens see each other.
    let overwrote = matches!(
        done.action,
        CreateAction::OVERWRITTEN | CreateAction::SUPERSEDED
    );
    let oplock_level = srv.oplock_grant(&open, req.requested_oplock_level, overwrote, ctx.conn.id);

    let (disk_id, volume) = match &done.view {
        Some(v) => (v.file_id, u64::from(tree.share.serial)),
        None => (0, 0),
    };
    let ctx_bytes = contexts::respond(&wanted, done.maximal, disk_id, volume);
    let resp = match (&done.stat, &done.view) {
        (Some(st), Some(v)) => CreateResponse {
            oplock_level,
            flags: 0,
            create_action: done.action,
            creation_time: v.creation,
            last_access_time: v.last_access,
            last_write_time: v.last_write,
            change_time: v.change,
            allocation_size: meta::allocation_with(
                st,
                open.file().and_then(|f| srv.files().allocation(f.key)),
            ),
            end_of_file: meta::end_of_file(st),
            file_attributes: v.attributes,
            file_id: open.file_id,
            contexts: &ctx_bytes,
        },
        _ => CreateResponse {
            oplock_level: OplockLevel::NONE,
            create_action: done.action,
            file_attributes: attr::NORMAL,
            file_id: open.file_id,
            contexts: &ctx_bytes,
            ..Default::default()
        },
    };
    let mut r = Response::ok(body(|w| resp.encode(w)));
    r.file_id = Some(open.file_id);
    Ok(r)
}

struct Done {
    open: Arc<Open>,
    action: CreateAction,
    /// `None` for pipes.
    stat: Option<Stat>,
    view: Option<dos::View>,
    maximal: u32,
}

fn file_id_for(id: u64) -> FileId {
    FileId {
        persistent: id,
        volatile: id,
    }
}

fn new_open(
    id: u64,
    session_id: u64,
    tree: &Arc<Tree>,
    kind: OpenKind,
    path: RelPath,
    granted: u32,
    p: &Params,
) -> Arc<Open> {
    Arc::new(Open {
        file_id: file_id_for(id),
        session_id,
        tree: tree.clone(),
        kind,
        path: Mutex::new(path),
        granted,
        share_access: p.share_access,
        create_options: p.options,
        delete_on_close: AtomicBool::new(p.options & opts::DELETE_ON_CLOSE != 0),
        position: AtomicU64::new(0),
        mode: AtomicU32::new(p.options & smbq_wire::fscc::file_info::mode::SETTABLE),
        closed: AtomicBool::new(false),
        ea_index: AtomicU32::new(0),
    })
}

/// MS-SMB2 3.3.5.9: on IPC$ the name is a pipe name.
fn open_pipe(ctx: &Ctx<'_>, tree: &Arc<Tree>, p: &Params, id: u64) -> Result<Done, NtStatus> {
    let name = p.name.rsplit('\\').next().unwrap_or_default();
    let io = (ctx.srv.pipe_factory())(name, ctx.srv.config(), &ctx.view.identity)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let granted = grant::grant(p.desired, tree.maximal_access)?;
    let kind = OpenKind::Pipe(PipeOpen {
        name: name.to_owned(),
        io: Mutex::new(io),
    });
    let path = RelPath::root();
    let open = new_open(id, ctx.view.id, tree, kind, path, granted, p);
    Ok(Done {
        open,
        action: CreateAction::OPENED,
        stat: None,
        view: None,
        maximal: tree.maximal_access,
    })
}

fn key_of(st: &Stat) -> FileKey {
    FileKey::of(st)
}

/// The blocking part of a disk CREATE.
fn open_disk(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session: &Arc<SessionState>,
    p: &Params,
    id: u64,
    alloc: Option<u64>,
) -> Result<Done, NtStatus> {
    let vfs = tree.share.vfs.clone().ok_or(NtStatus::INTERNAL_ERROR)?;
    let name = parse_smb_name(&p.name)?;
    // Two tries: a name that appears or vanishes between our look and our open is looked at
    // again once.
    for _ in 0..2 {
        let found = resolve(vfs.as_ref(), &name)?;
        if let Stream::Named(sname) = &name.stream {
            match stream::open(srv, tree, session, vfs.as_ref(), p, id, &found, sname) {
                Err(Retry) => continue,
                Ok(r) => return r,
            }
        }
        // MS-FSCC 2.1.4: a directory has no unnamed data stream (smb2.streams.dir).
        if name.default_data && found.stat.as_ref().is_some_and(|s| s.kind == FileKind::Dir) {
            return Err(if p.options & opts::DIRECTORY_FILE != 0 {
                NtStatus::NOT_A_DIRECTORY
            } else {
                NtStatus::FILE_IS_A_DIRECTORY
            });
        }
        let step = match plan(p.disposition, found.stat.is_some())? {
            Plan::OpenExisting { truncate, action } => {
                let st = found.stat.as_ref().ok_or(NtStatus::INTERNAL_ERROR)?;
                open_existing(
                    srv,
                    tree,
                    session,
                    vfs.as_ref(),
                    p,
                    id,
                    &found.path,
                    st,
                    truncate,
                    action,
                )
            }
            Plan::Create => create_new(srv, tree, session, vfs.as_ref(), p, id, &found.path, alloc),
        };
        match step {
            Err(Retry) => continue,
            Ok(r) => return r,
        }
    }
    Err(NtStatus::SHARING_VIOLATION)
}

/// Marker: the name changed under us, look again.
struct Retry;

#[allow(clippy::too_many_arguments)]
fn open_existing(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session: &Arc<SessionState>,
    vfs: &dyn Vfs,
    p: &Params,
    id: u64,
    path: &RelPath,
    st: &Stat,
    truncate: bool,
    action: CreateAction,
) -> Result<Result<Done, NtStatus>, Retry> {
    let is_dir = st.kind == FileKind::Dir;
    let r = (|| {
        if st.kind == FileKind::Other {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if is_dir && p.options & opts::NON_DIRECTORY_FILE != 0 {
            return Err(NtStatus::FILE_IS_A_DIRECTORY);
        }
        if !is_dir && p.options & opts::DIRECTORY_FILE != 0 {
            return Err(NtStatus::NOT_A_DIRECTORY);
        }
        if is_dir && truncate {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let read_only = meta::is_read_only(st);
        if read_only && truncate {
            return Err(NtStatus::ACCESS_DENIED);
        }
        let maximal = grant::maximal(tree.maximal_access, read_only);
        if truncate {
            grant::check_truncate(p.disposition, maximal, tree.read_only())?;
        }
        let mut granted = grant::grant(p.desired, maximal)?;
        check_delete_on_close(p, granted, read_only, path)?;
        let wants_write = !is_dir
            && (truncate || granted & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) != 0);
        let opts = OpenOptions {
            read: true,
            write: wants_write,
            create: CreateMode::OpenExisting,
            directory: Some(is_dir),
            mode: 0,
        };
        let file = match vfs.open(path, &opts) {
            Ok(o) => o.file,
            // MAXIMUM_ALLOWED settles for what POSIX permissions give.
            Err(e)
                if wants_write
                    && !truncate
                    && p.desired & mask::MAXIMUM_ALLOWED != 0
                    && map_io_error(&e) == NtStatus::ACCESS_DENIED =>
            {
                granted &= !(mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA);
                vfs.open(
                    path,
                    &OpenOptions {
                        write: false,
                        ..opts
                    },
                )
                .map_err(|e| final_err(&e))?
                .file
            }
            Err(e) => return Err(final_err(&e)),
        };
        let st = file.stat().map_err(|e| map_io_error(&e))?;
        let (granted, maximal) = apply_stored_sd(
            vfs,
            path,
            file.as_ref(),
            p,
            tree,
            granted,
            maximal,
            read_only,
        )?;
        if truncate {
            // The stored DACL may grant less than the share does.
            grant::check_truncate(p.disposition, maximal, tree.read_only())?;
            check_overwrite_attributes(file.as_ref(), p.attributes)?;
        }
        finish(
            srv,
            tree,
            session,
            p,
            id,
            path.clone(),
            file,
            st,
            granted,
            maximal,
            action,
            truncate,
            None,
        )
    })();
    match r {
        Err(NtStatus::OBJECT_NAME_NOT_FOUND) => Err(Retry),
        other => Ok(other),
    }
}

#[allow(clippy::too_many_arguments)]
fn create_new(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session: &Arc<SessionState>,
    vfs: &dyn Vfs,
    p: &Params,
    id: u64,
    path: &RelPath,
    alloc: Option<u64>,
) -> Result<Result<Done, NtStatus>, Retry> {
    let r = (|| {
        if tree.read_only() {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if path.is_root() {
            return Err(NtStatus::OBJECT_NAME_COLLISION);
        }
        let is_dir = p.options & opts::DIRECTORY_FILE != 0;
        let maximal = tree.maximal_access;
        let granted = grant::grant(p.desired, maximal)?;
        check_delete_on_close(p, granted, false, path)?;
        let token = p.token.as_ref().ok_or(NtStatus::INTERNAL_ERROR)?;
        let parent_sd = secure::parent_sd(vfs, path);
        secure::check_parent_allows_create(parent_sd.as_ref(), token, is_dir)?;
        let opts = OpenOptions {
            read: true,
            write: !is_dir,
            create: CreateMode::CreateNew,
            directory: Some(is_dir),
            mode: if is_dir { 0o755 } else { 0o644 },
        };
        let file = vfs.open(path, &opts).map_err(|e| create_err(&e))?.file;
        // The descriptor goes on before the file is usable; a file that cannot get the one it
        // must have is removed again rather than left with the POSIX view.
        let secured = file.stat().map_err(|e| map_io_error(&e)).and_then(|st| {
            secure::apply_new(
                file.as_ref(),
                &st,
                p.creator_sd.as_ref(),
                parent_sd.as_ref(),
                is_dir,
                token,
            )
            .map(|()| st.ino)
        });
        let ino = match secured {
            Ok(ino) => ino,
            Err(e) => {
                drop(file);
                let _ = if is_dir {
                    vfs.rmdir(path)
                } else {
                    vfs.unlink(path)
                };
                return Err(e);
            }
        };
        // MS-FSA 2.1.5.1.1: a new file gets the requested attributes plus ARCHIVE, and a
        // FileId64 no other file on the volume has had (crate::file_id).
        let dos = dos::DosInfo {
            attributes: (p.attributes & attr::STORED & !attr::ARCHIVE != 0)
                .then_some((p.attributes | attr::ARCHIVE) & attr::STORED),
            creation: None,
            file_id: Some(dos::IdStamp {
                ino,
                id: tree.share.file_ids.next(vfs),
            }),
        };
        // Best effort: without xattrs the file keeps the default attributes and reports its
        // inode number as its id. Before the mode below, which would forbid a user xattr write
        // to a server not running as root.
        let _ = dos.write(file.as_ref());
        if p.attributes & attr::READONLY != 0 && !is_dir {
            // The creating handle keeps its write access, as on Windows.
            let _ = file.set_mode(0o444);
        }
        if let Some(a) = alloc {
            let _ = file.allocate(a);
        }
        let st = file.stat().map_err(|e| map_io_error(&e))?;
        finish(
            srv,
            tree,
            session,
            p,
            id,
            path.clone(),
            file,
            st,
            granted,
            maximal,
            CreateAction::CREATED,
            false,
            Some(vfs),
        )
    })();
    match r {
        // Someone created it first: OPEN_IF and friends now open the existing one.
        Err(NtStatus::OBJECT_NAME_COLLISION) if p.disposition != CreateDisposition::CREATE => {
            Err(Retry)
        }
        other => Ok(other),
    }
}

/// MS-FSA 2.1.5.1.2.1: an existing file's stored security descriptor narrows what the open
/// may get (the tree and READONLY bounds in `maximal` still hold). Returns the new granted
/// access and maximal access; bits the POSIX open already refused stay refused.
#[allow(clippy::too_many_arguments)]
fn apply_stored_sd(
    vfs: &dyn Vfs,
    path: &RelPath,
    file: &dyn VfsFile,
    p: &Params,
    tree: &Tree,
    granted: u32,
    maximal: u32,
    read_only: bool,
) -> Result<(u32, u32), NtStatus> {
    let token = p.token.as_ref().ok_or(NtStatus::INTERNAL_ERROR)?;
    let narrowed = secure::existing_maximal(vfs, path, file, token, maximal, tree.maximal_access);
    if narrowed == maximal {
        return Ok((granted, maximal));
    }
    let refused = grant::grant(p.desired, maximal)? & !granted;
    let granted = grant::grant(grant::lenient_execute(p.desired), narrowed)? & !refused;
    check_delete_on_close(p, granted, read_only, path)?;
    Ok((granted, narrowed))
}

/// MS-FSA 2.1.5.1.2: overwriting or superseding a file whose stored attributes include HIDDEN
/// or SYSTEM must ask for them again, else STATUS_ACCESS_DENIED (smb2.dosmode). Only stored
/// attributes count: the HIDDEN a dot-name shows is not the file's own.
fn check_overwrite_attributes(file: &dyn VfsFile, requested: u32) -> Result<(), NtStatus> {
    let stored = dos::DosInfo::read(file).attributes.unwrap_or(0);
    for bit in [attr::HIDDEN, attr::SYSTEM] {
        if stored & bit != 0 && requested & bit == 0 {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    Ok(())
}

/// MS-SMB2 3.3.5.9: DELETE_ON_CLOSE needs DELETE access; MS-FSA 2.1.5.1.2.1: not on a
/// read-only file (CANNOT_DELETE), nor on the share root.
fn check_delete_on_close(
    p: &Params,
    granted: u32,
    read_only: bool,
    path: &RelPath,
) -> Result<(), NtStatus> {
    if p.options & opts::DELETE_ON_CLOSE == 0 {
        return Ok(());
    }
    if granted & mask::DELETE == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if read_only || path.is_root() {
        return Err(NtStatus::CANNOT_DELETE);
    }
    Ok(())
}

/// Registers the open with the share-mode table and builds it. `created_in` is set for a new
/// object, which is removed again if admission fails.
#[allow(clippy::too_many_arguments)]
fn finish(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session: &Arc<SessionState>,
    p: &Params,
    id: u64,
    path: RelPath,
    file: Box<dyn VfsFile>,
    mut st: Stat,
    granted: u32,
    maximal: u32,
    action: CreateAction,
    truncate: bool,
    created_in: Option<&dyn Vfs>,
) -> Result<Done, NtStatus> {
    let key = key_of(&st);
    let is_dir = st.kind == FileKind::Dir;
    let checked = checked_access(p, granted, truncate);
    if created_in.is_none() {
        // MS-FSA 2.1.5.1.2: oplocks this open conflicts with are broken before it is admitted
        // or truncates; BREAK_PENDING sends `handle` to wait and run again.
        srv.oplock_before_open(key, id, checked, p.share_access, truncate)?;
    }
    if let Err(e) =
        srv.files()
            .admit_checking(key, id, checked, granted, p.share_access, &path, is_dir)
    {
        if let Some(vfs) = created_in {
            let _ = if is_dir {
                vfs.rmdir(&path)
            } else {
                vfs.unlink(&path)
            };
        }
        return Err(e);
    }
    if truncate {
        // MS-FSA 2.1.5.1.2.1: overwrite and supersede drop the named streams too.
        let r = file
            .set_len(0)
            .and_then(|()| crate::streams::remove_all(file.as_ref()))
            .and_then(|()| file.stat());
        match r {
            Ok(s) => st = s,
            Err(e) => {
                srv.files().remove(key, id, false);
                return Err(map_io_error(&e));
            }
        }
    }
    let name = path.file_name().unwrap_or_default().to_owned();
    let view = dos::view(srv, file.as_ref(), key, &st, &name);
    let kind = OpenKind::File(FileOpen {
        file,
        key,
        is_dir,
        dir: Mutex::new(DirCursor::default()),
        stream: None,
    });
    let open = new_open(id, session.id, tree, kind, path, granted, p);
    Ok(Done {
        open,
        action,
        stat: Some(st),
        view: Some(view),
        maximal,
    })
}

/// The access the share-mode check sees: a truncating open also writes (and a supersede
/// deletes), so an open that denies write sharing keeps its data, while the handle itself is
/// granted only what it asked for (MS-FSA 2.1.5.1.2.2 with the rights of
/// [`grant::truncate_needs`]).
fn checked_access(p: &Params, granted: u32, truncate: bool) -> u32 {
    if truncate {
        granted | grant::truncate_needs(p.disposition)
    } else {
        granted
    }
}

fn final_err(e: &std::io::Error) -> NtStatus {
    map_io_error_in(e, IoContext::Final)
}

fn create_err(e: &std::io::Error) -> NtStatus {
    match e.raw_os_error() {
        // The parent vanished or is not a directory.
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => NtStatus::OBJECT_PATH_NOT_FOUND,
        _ => map_io_error(e),
    }
}
