//! SET_INFO (MS-SMB2 3.3.5.21, MS-FSA 2.1.5.15): basic times and attributes, rename,
//! disposition (delete pending), end of file, allocation, position, mode, and security
//! descriptors (stored per file, crate::security).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use smbq_proto::Response;
use smbq_vfs::{FileKind, RelPath};
use smbq_wire::filetime::SetTime;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::file_info::{
    AllocationInfo, BasicInfo, DispositionInfo, DispositionInfoEx, EndOfFileInfo, LinkInfo,
    ModeInfo, PositionInfo, RenameInfo, RenameInfoEx, disposition_ex as dx, mode,
};
use smbq_wire::query_info::InfoType;
use smbq_wire::security::{SecurityDescriptor, Sid, info as sinfo};
use smbq_wire::set_info::{SetInfoRequest, SetInfoResponse};
use smbq_wire::{DecodeError, NtStatus};

use super::{Ctx, bad, blocking, body};
use crate::access::{attr, mask};
use crate::dos::DosInfo;
use crate::errors::map_io_error;
use crate::file_state::oplock::{Admission, MAX_BREAK_ROUNDS};
use crate::open_state::{Below, Changes as _, Fact, Moved, Queries as _};
use crate::path::{Stream, lookup, parse_name, parse_smb_name};
use crate::security::{Token, require};
use crate::tables::Open;
use crate::tables::open::FileOpen;
use crate::{Server, meta};

/// A buffer shorter than the class is INFO_LENGTH_MISMATCH (3.3.5.21.1); other decode errors
/// are INVALID_PARAMETER.
fn short(e: DecodeError) -> NtStatus {
    match e {
        DecodeError::Truncated { .. } => NtStatus::INFO_LENGTH_MISMATCH,
        _ => NtStatus::INVALID_PARAMETER,
    }
}

fn io(e: std::io::Error) -> NtStatus {
    map_io_error(&e)
}

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = SetInfoRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?.clone();
    let ok = || Ok(Response::ok(body(|w| SetInfoResponse.encode(w))));
    match req.info_type {
        InfoType::FILE => {}
        InfoType::SECURITY => {
            let token = ctx.token();
            let (addl, buf) = (req.additional_information, req.buffer.to_vec());
            let watched = open.clone();
            blocking(move || set_security(&open, &token, addl, &buf)).await?;
            ctx.srv.notify_security(&watched); // CHANGE_NOTIFY (crate::notify)
            return ok();
        }
        InfoType::FILESYSTEM | InfoType::QUOTA => return Err(NtStatus::NOT_SUPPORTED),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    }
    if open.pipe().is_some() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let class = FileInfoClass(req.file_info_class);
    if breaks_handles(class, req.buffer) {
        wait_for_handle_breaks(ctx, &open).await?;
        if matches!(class, FileInfoClass::RENAME | FileInfoClass::RENAME_EX)
            && deletable_source(&open).is_some()
        {
            super::rename_breaks::wait(ctx, &open, class, req.buffer).await?;
        }
    }
    let buf = req.buffer.to_vec();
    let srv = ctx.srv.self_arc();
    let token = ctx.token();
    let (watched, before) = (open.clone(), open.path());
    blocking(move || set_file(&srv, &open, &token, class, &buf)).await?;
    // CHANGE_NOTIFY (crate::notify): what this class changed, named as watchers see it.
    ctx.srv
        .notify_set_info(&watched, class, req.buffer, &before);
    ok()
}

/// MS-FSA 2.1.4.12: a rename, and marking a file delete-pending, break the handle caching
/// of other lease keys first (smbtorture smb2.lease.rename_wait; 4.25's smb2.lease.unlink
/// for a delete-on-close set with FileDispositionInformation).
fn breaks_handles(class: FileInfoClass, buf: &[u8]) -> bool {
    match class {
        FileInfoClass::RENAME | FileInfoClass::RENAME_EX => true,
        FileInfoClass::DISPOSITION => DispositionInfo::decode(buf).is_ok_and(|d| d.delete_pending),
        FileInfoClass::DISPOSITION_EX => {
            DispositionInfoEx::decode(buf).is_ok_and(|d| d.flags & dx::FILE_DISPOSITION_DELETE != 0)
        }
        _ => false,
    }
}

/// The file a rename or delete through `open` concerns: only one that may happen breaks
/// anything, and both need DELETE.
fn deletable_source(open: &Open) -> Option<&FileOpen> {
    open.file().filter(|_| open.granted & mask::DELETE != 0)
}

/// Starts the handle breaks of a rename or a delete from the connection's loop, before the
/// request's task runs (crate::dispatch::before_task); the task then waits for them.
pub(crate) fn start_handle_breaks(ctx: &Ctx<'_>) {
    let Ok(req) = SetInfoRequest::decode(&ctx.req.msg) else {
        return;
    };
    let class = FileInfoClass(req.file_info_class);
    if req.info_type != InfoType::FILE || !breaks_handles(class, req.buffer) {
        return;
    }
    if let Some(open) = ctx.open.as_ref().filter(|o| o.pipe().is_none())
        && let Some(f) = deletable_source(open)
    {
        // Waiting is the task's part (wait_for_handle_breaks).
        let _ = ctx.srv.lease_handles_before_rename(f.key, open.volatile());
    }
}

/// MS-FSA 2.1.5.15.11 and 2.1.4.12: before a rename or a delete, other keys' leases give up
/// handle caching and the request waits for their acknowledgments (smbtorture
/// smb2.lease.rename_wait), at most [`MAX_BREAK_ROUNDS`] rounds.
async fn wait_for_handle_breaks(ctx: &Ctx<'_>, open: &Open) -> Result<(), NtStatus> {
    let Some(f) = deletable_source(open) else {
        return Ok(());
    };
    for _ in 0..MAX_BREAK_ROUNDS {
        match ctx.srv.lease_handles_before_rename(f.key, open.volatile()) {
            Admission::MustWait(pending) => ctx.srv.oplock_wait(pending, &ctx.cancel).await?,
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// MS-SMB2 3.3.5.21.3, MS-FSA 2.1.5.16: the selected parts of the buffer replace those of the
/// file's descriptor (stored, or the one its POSIX metadata gives), which is then stored.
fn set_security(
    open: &Open,
    token: &crate::security::Token,
    addl: u32,
    buf: &[u8],
) -> Result<(), NtStatus> {
    use crate::security::{self, store};
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    security::require(open, security::set_needs(addl))?;
    // Nothing `merge` applies was selected (AdditionalInformation 0, or only a label): answer
    // success without storing, as Windows does (Samba: "just like W2K3"). Storing here would let
    // an open holding no right at all pin the file's POSIX-derived descriptor as a stored one.
    let applied = sinfo::OWNER_SECURITY_INFORMATION
        | sinfo::GROUP_SECURITY_INFORMATION
        | sinfo::DACL_SECURITY_INFORMATION;
    if addl & applied == 0 {
        return Ok(());
    }
    let mut new = SecurityDescriptor::decode(buf).map_err(|_| NtStatus::INVALID_SECURITY_DESCR)?;
    if !new.is_encodable() {
        return Err(NtStatus::INVALID_SECURITY_DESCR);
    }
    // A POSIX client's chmod (crate::posix): the mode is set, as the session's user on a
    // per-user share (the kernel decides), and a stored descriptor that would hide it goes.
    if open.posix
        && let Some(mode) = crate::posix::chmod_of(addl, &new)
    {
        f.file.set_mode(mode).map_err(io)?;
        f.file.remove_xattr(store::XATTR).map_err(io)?;
        return Ok(());
    }
    // A POSIX client's chown: as the session's Unix user on a per-user share, so the kernel
    // decides (only root gives a file away; a user may pick one of its groups). Where every
    // session acts as the server itself nobody's kernel rights are known, so only what
    // changes nothing is accepted.
    if open.posix
        && let Some((uid, gid)) = crate::posix::chown_of(addl, &new)
    {
        let st = f.file.stat().map_err(io)?;
        let same = uid.is_none_or(|u| u == st.uid) && gid.is_none_or(|g| g == st.gid);
        if smbq_vfs::privilege::thread_user().is_none() && !same {
            return Err(NtStatus::ACCESS_DENIED);
        }
        f.file.set_owner(uid, gid).map_err(io)?;
        f.file.remove_xattr(store::XATTR).map_err(io)?;
        return Ok(());
    }
    // Stored as Windows stores it: the generic rights of ACEs that apply to this object mapped
    // to the file rights they stand for (MS-DTYP 2.5.3.4, GENERIC_MAPPING); an inherit-only
    // ACE keeps them for the children it is passed to (smbtorture smb2.acls.GENERIC).
    for acl in [new.dacl.as_mut(), new.sacl.as_mut()].into_iter().flatten() {
        for ace in &mut acl.aces {
            if ace.flags & smbq_wire::security::ace_flags::INHERIT_ONLY_ACE == 0 {
                ace.mask = crate::access::map_generic(ace.mask);
            }
        }
    }
    let st = f.file.stat().map_err(io)?;
    let current = store::effective(f.file.as_ref(), &st);
    if addl & sinfo::OWNER_SECURITY_INFORMATION != 0 {
        let owner = new.owner.as_ref().ok_or(security::INVALID_OWNER)?;
        let unix = Sid::unix_user(st.uid);
        if Some(owner) != current.owner.as_ref() && !security::may_assign_owner(token, owner, &unix)
        {
            return Err(security::INVALID_OWNER);
        }
    }
    let canonicalize = open.tree.share.cfg.acl_flag_inherited_canonicalization;
    let merged = security::merge(&current, &new, addl, canonicalize)?;
    if merged == current && store::read(f.file.as_ref()).is_some() {
        return Ok(());
    }
    store::write(f.file.as_ref(), &merged).map_err(io)
}

/// Over 80 lines: one arm per FileInformationClass (MS-SMB2 3.3.5.21.1), each a decode and a
/// call; splitting the match would only scatter the table.
fn set_file(
    srv: &Arc<Server>,
    open: &Arc<Open>,
    token: &Token,
    class: FileInfoClass,
    buf: &[u8],
) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    match class {
        FileInfoClass::BASIC => {
            let b = BasicInfo::decode(buf).map_err(short)?;
            // MS-SMB2 3.3.5.21.1 / MS-FSA 2.1.5.15.2: times and attributes.
            require(open, mask::FILE_WRITE_ATTRIBUTES)?;
            set_basic(srv, open, &b)
        }
        FileInfoClass::RENAME => {
            let r = RenameInfo::decode(buf).map_err(short)?;
            rename(
                srv,
                open,
                token,
                &r.file_name,
                r.replace_if_exists,
                r.root_directory,
            )
        }
        FileInfoClass::RENAME_EX => {
            let r = RenameInfoEx::decode(buf).map_err(short)?;
            rename(
                srv,
                open,
                token,
                &r.file_name,
                r.replace_if_exists(),
                r.root_directory,
            )
        }
        FileInfoClass::DISPOSITION => {
            let d = DispositionInfo::decode(buf).map_err(short)?;
            set_disposition(srv, open, d.delete_pending, false, false)
        }
        FileInfoClass::DISPOSITION_EX => {
            let d = DispositionInfoEx::decode(buf).map_err(short)?;
            let delete = d.flags & dx::FILE_DISPOSITION_DELETE != 0;
            let on_close = d.flags & dx::FILE_DISPOSITION_ON_CLOSE != 0;
            let ignore_ro = d.flags & dx::FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE != 0;
            set_disposition(srv, open, delete, on_close, ignore_ro)
        }
        FileInfoClass::END_OF_FILE => {
            let e = EndOfFileInfo::decode(buf).map_err(short)?;
            set_end_of_file(srv, open, e.end_of_file)
        }
        FileInfoClass::ALLOCATION => {
            let a = AllocationInfo::decode(buf).map_err(short)?;
            set_allocation(srv, open, a.allocation_size)
        }
        FileInfoClass::POSITION => {
            let p = PositionInfo::decode(buf).map_err(short)?;
            open.position
                .store(p.current_byte_offset, Ordering::Relaxed);
            Ok(())
        }
        FileInfoClass::MODE => {
            let m = ModeInfo::decode(buf).map_err(short)?;
            if m.mode & !mode::SETTABLE != 0 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            open.mode.store(m.mode, Ordering::Relaxed);
            Ok(())
        }
        FileInfoClass::FULL_EA => {
            // MS-SMB2 3.3.5.21.1: FileFullEaInformation needs FILE_WRITE_EA.
            require(open, mask::FILE_WRITE_EA)?;
            let eas = crate::ea::parse_set(buf)?;
            crate::ea::apply(f.file.as_ref(), &eas)
        }
        FileInfoClass::LINK => {
            let l = LinkInfo::decode(buf).map_err(short)?;
            link(srv, open, token, &l)
        }
        _ => Err(NtStatus::INVALID_INFO_CLASS),
    }
}

/// The checks a size change (end of file or allocation) makes before touching the file: the
/// open may write data (MS-SMB2 3.3.5.21.1: FILE_WRITE_DATA, whichever way the size moves, as an
/// allocation below EOF truncates), it is a file, the size fits an i64; then level II oplocks
/// break (MS-FSA 2.1.5.14.1/2.1.5.14.4; smbtorture batch11/batch12).
fn size_change<'a>(srv: &Server, open: &'a Open, size: u64) -> Result<&'a FileOpen, NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    require(open, mask::FILE_WRITE_DATA)?;
    if f.is_dir || size > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    srv.apply(
        srv.open_state()
            .on_set_size(f.key, open.volatile(), Instant::now()),
    );
    Ok(f)
}

/// MS-FSA 2.1.5.15.4 FileEndOfFileInformation.
fn set_end_of_file(srv: &Arc<Server>, open: &Arc<Open>, end_of_file: u64) -> Result<(), NtStatus> {
    let f = size_change(srv, open, end_of_file)?;
    let held = crate::write_time::held(open, f);
    let r = f.file.set_len(end_of_file).map_err(io);
    // Even to the same size, the file counts as modified (MS-FSA 2.1.4.17; Windows Server
    // 2022, smbtorture 4.25 smb2.timestamps.delayed-write-vs-seteof).
    crate::write_time::after(open, f, held, r.is_ok());
    r?;
    // A size change is a data change: on stable storage first where writes are
    // (crate::stable).
    crate::stable::flush_data(srv, open).map_err(io)
}

/// MS-FSA 2.1.5.15.1 FileAllocationInformation: below end of file it truncates the file.
fn set_allocation(srv: &Arc<Server>, open: &Arc<Open>, allocation: u64) -> Result<(), NtStatus> {
    let f = size_change(srv, open, allocation)?;
    let st = f.file.stat().map_err(io)?;
    let size = st.size;
    // Only a truncation modifies the file (MS-FSA 2.1.5.15.1, 2.1.4.17): a larger allocation
    // leaves LastWriteTime where it was, whatever fallocate does to the mtime (smbtorture 4.25
    // smb2.timestamps.modern_write_time_update-2; ChangeTime moves). A write through another
    // handle between the stat and the put-back loses its time update (write_time.rs).
    let held = if allocation < size {
        crate::write_time::held(open, f)
    } else {
        Some(st.mtime)
    };
    let r = if allocation < size {
        f.file.set_len(allocation).map_err(io)
    } else {
        f.file.allocate(allocation).map_err(io)
    };
    crate::write_time::after(open, f, held, allocation < size && r.is_ok());
    r?;
    crate::stable::flush_data(srv, open).map_err(io)?;
    srv.open_state()
        .remember(f.key, Fact::Allocation(allocation));
    Ok(())
}

use crate::write_time::to_timespec as to_ts;

/// MS-FSA 2.1.5.15.2: 0 keeps a time; -1/-2 freeze and unfreeze LastWriteTime for this handle
/// (crate::write_time) and keep the other times. Access and write times go to the inode;
/// CreationTime and the DOS attributes to the `crate::dos` xattr; ChangeTime is remembered in
/// memory until the inode changes again.
fn set_basic(srv: &Server, open: &Open, b: &BasicInfo) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    let classify = |v| SetTime::from_wire(v).ok_or(NtStatus::INVALID_PARAMETER);
    let pick = |t: SetTime| match t {
        SetTime::Set(v) => Some(to_ts(v)),
        _ => None,
    };
    let (c, a, m, ch) = (
        classify(b.creation_time)?,
        classify(b.last_access_time)?,
        classify(b.last_write_time)?,
        classify(b.change_time)?,
    );
    let attrs = b.file_attributes;
    // Refused before anything changes: a directory attribute on a file, and TEMPORARY on a
    // directory (MS-FSA 2.1.5.14.2; smb2.create.dosattr_tmp_dir).
    if attrs != 0
        && ((!f.is_dir && attrs & attr::DIRECTORY != 0)
            || (f.is_dir && attrs & attr::TEMPORARY != 0))
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // MS-FSA 2.1.5.15.2 (Open.UserSetChangeTime): once a client has set ChangeTime, the
    // changes made here do not move it again.
    let kept = srv
        .open_state()
        .change_time(f.key, f.file.stat().map_err(io)?.ctime);
    let (atime, mtime) = (pick(a), pick(m));
    if atime.is_some() || mtime.is_some() {
        f.file.set_times(atime, mtime).map_err(io)?;
    }
    crate::write_time::set_by_client(open, m);
    let mut dos = DosInfo::read(f.file.as_ref());
    let before = dos;
    if let SetTime::Set(v) = c {
        dos.creation = Some(v);
    }
    if attrs != 0 {
        set_attributes(f, attrs, &mut dos)?;
    }
    if dos != before {
        match dos.write(f.file.as_ref()) {
            // A filesystem without user xattrs keeps POSIX-derived values, as before.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {}
            r => r.map_err(io)?,
        }
    }
    // Last, so the ctime recorded is the one every change above left behind.
    let change = match ch {
        SetTime::Set(v) => Some(v),
        _ => kept,
    };
    if let Some(v) = change {
        let st = f.file.stat().map_err(io)?;
        let fact = Fact::ChangeTime {
            ctime: st.ctime,
            value: v,
        };
        srv.open_state().remember(f.key, fact);
    }
    Ok(())
}

/// Nonzero FileAttributes of FileBasicInformation: the stored ones into `dos`, READONLY of a
/// file as its mode.
fn set_attributes(f: &FileOpen, attrs: u32, dos: &mut DosInfo) -> Result<(), NtStatus> {
    // A directory keeps READONLY as a stored attribute (smb2.winattr); a file's is the mode.
    let keep = if f.is_dir {
        attr::STORED | attr::READONLY
    } else {
        attr::STORED
    };
    // SPARSE_FILE stays as FSCTL_SET_SPARSE left it (MS-FSCC 2.6: not settable here).
    let sparse = dos.attributes.unwrap_or(0) & attr::SPARSE_FILE;
    dos.attributes = Some((attrs & keep & !attr::SPARSE_FILE) | sparse);
    if !f.is_dir {
        let st = f.file.stat().map_err(io)?;
        let perm = st.mode & 0o7777;
        let want = if attrs & attr::READONLY != 0 {
            perm & !0o222
        } else if meta::is_read_only(&st) {
            perm | 0o200
        } else {
            perm
        };
        if want != perm {
            f.file.set_mode(want).map_err(io)?;
        }
    }
    Ok(())
}

/// MS-FSA 2.1.5.15.3 FileDispositionInformation (and the Ex form).
fn set_disposition(
    srv: &Server,
    open: &Open,
    delete: bool,
    on_close: bool,
    ignore_ro: bool,
) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    // MS-FSA 2.1.5.15.3: DELETE, for clearing the flag too.
    require(open, mask::DELETE)?;
    if delete {
        let path = open.path();
        if path.is_root() {
            return Err(NtStatus::CANNOT_DELETE);
        }
        let st = f.file.stat().map_err(io)?;
        let posix_may = crate::posix::may_delete_read_only(open.posix, open.granted);
        if !ignore_ro && !posix_may && meta::is_read_only(&st) {
            return Err(NtStatus::CANNOT_DELETE);
        }
        if st.kind == FileKind::Dir && !f.file.read_dir().map_err(io)?.is_empty() {
            return Err(NtStatus::DIRECTORY_NOT_EMPTY);
        }
    }
    if on_close {
        open.delete_on_close.store(delete, Ordering::Release);
        // The open's own flag is in its record (crate::persist).
        srv.persist(open);
    } else {
        // The file's delete-pending is in every persistent open's record (the effects).
        let parent = open.parent_lease.map(|k| k.key);
        srv.apply(srv.open_state().on_disposition(f.key, delete, parent));
    }
    Ok(())
}

/// MS-FSA 2.1.5.15.12 FileRenameInformation. The target is relative to the share root.
fn rename(
    srv: &Server,
    open: &Open,
    token: &Token,
    target: &str,
    replace: bool,
    root_dir: u64,
) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    // MS-SMB2 3.3.5.21.1 / MS-FSA 2.1.5.15.12: DELETE on the source (a stream rename too).
    require(open, mask::DELETE)?;
    // SMB2 renames name the target from the share root; RootDirectory must be 0 (MS-SMB2
    // 2.2.39 / MS-FSCC FILE_RENAME_INFORMATION_TYPE_2).
    if root_dir != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let vfs = open
        .tree
        .share
        .vfs
        .as_ref()
        .ok_or(NtStatus::INVALID_PARAMETER)?;
    let target = target.strip_prefix('\\').unwrap_or(target);
    // MS-FSA 2.1.5.15.11: a name that starts with ':' renames a stream within the file.
    if target.starts_with(':') {
        return rename_stream(srv, open, target, replace);
    }
    let name = parse_name(target, open.posix)?;
    if f.stream.is_some() {
        // A named stream cannot be moved to another name of the file system; Windows answers
        // a `file:stream` target this way (smbtorture smb2.streams.rename2).
        return Err(NtStatus::SHARING_VIOLATION);
    }
    if name.stream != Stream::Default {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if name.is_root() {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let (from, moving) = movable_source(srv, vfs.as_ref(), open, f)?;
    let found = lookup(vfs.as_ref(), &name, open.posix)?;
    let rw = crate::access::share::READ | crate::access::share::WRITE;
    check_target_directory(srv, vfs.as_ref(), &found.path, f.is_dir, rw)?;
    let mut to = found.path;
    if let Some(st) = &found.stat {
        let same = st.dev == f.key.dev && st.ino == f.key.ino;
        if same {
            // A case-only rename: keep the case the client asked for.
            to = name.rel_path()?;
        } else {
            if !replace {
                return Err(NtStatus::OBJECT_NAME_COLLISION);
            }
            check_replaceable(srv, vfs.as_ref(), open, token, &to, st)?;
        }
    }
    check_target_parent_allows_add(vfs.as_ref(), open, token, &to, f.is_dir)?;
    if to == from {
        return Ok(());
    }
    // Every open below gets its new path, or nothing moves (a path over PATH_MAX).
    let moving = rebased(moving, &from, &to)?;
    vfs.rename(&from, &to, replace).map_err(io)?;
    crate::stable::flush_rename(open, vfs.as_ref(), &from, &to); // CA shares
    follow_rename(srv, open, f.key, (&from, &to), moving);
    Ok(())
}

/// After a rename on disk: every open of the file on this share names it by its new path (a
/// later rename, link or delete-on-close through them acts on this file, not on what takes
/// the old name), so do the POSIX opens below a directory a POSIX open renamed
/// ([`movable_source`]), and so does the open state, whose path a delete-on-close unlinks and
/// persistent opens' records keep (the effects, crate::persist).
fn follow_rename(
    srv: &Server,
    open: &Open,
    key: crate::file_state::FileKey,
    (from, to): (&RelPath, &RelPath),
    moving: Rebased,
) {
    *open.path.lock() = to.clone();
    let share = &open.tree.share;
    for id in srv.open_state().open_ids(key) {
        if let Some(o) = srv
            .lookup_open(id)
            .filter(|o| Arc::ptr_eq(&o.tree.share, share))
        {
            let mut path = o.path.lock();
            if *path == *from {
                *path = to.clone();
            }
        }
    }
    for (below, opens) in moving {
        for (o, path) in opens {
            *o.path.lock() = path;
        }
        let under = Moved::Under {
            from: from.clone(),
            to: to.clone(),
        };
        let fx = srv.open_state().renamed(below, 0, under);
        srv.apply(fx);
    }
    let fx = srv
        .open_state()
        .renamed(key, open.volatile(), Moved::Path(to.clone()));
    srv.apply(fx);
}

/// MS-FSA 2.1.5.15.6 FileLinkInformation: a new name for the file `open` addresses, relative
/// to the share root. The share must offer hard links (`refuse_hardlinks = false`: a share
/// that refuses to serve files with several links makes none). The new name needs what a
/// new file there needs (FILE_ADD_FILE on its directory, a writable share), nothing of the
/// open itself, as on Windows; on per-user shares the kernel decides as the user
/// (`fs.protected_hardlinks`).
fn link(srv: &Server, open: &Open, token: &Token, l: &LinkInfo) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    let vfs = open
        .tree
        .share
        .vfs
        .as_ref()
        .ok_or(NtStatus::INVALID_PARAMETER)?;
    if f.stream.as_ref().is_some_and(|s| s.name().is_some()) || l.root_directory != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if f.is_dir {
        return Err(NtStatus::FILE_IS_A_DIRECTORY);
    }
    if !vfs.hard_links() {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if srv.open_state().delete_pending(f.key) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    still_named(vfs.as_ref(), open, f)?;
    let target = l.file_name.strip_prefix('\\').unwrap_or(&l.file_name);
    let name = parse_name(target, open.posix)?;
    if name.stream != Stream::Default || name.is_root() {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if f.file.stat().map_err(io)?.nlink >= MAX_LINKS {
        return Err(NtStatus::TOO_MANY_LINKS);
    }
    let found = lookup(vfs.as_ref(), &name, open.posix)?;
    // The destination directory is opened for FILE_ADD_FILE sharing everything (MS-FSA).
    let all =
        crate::access::share::READ | crate::access::share::WRITE | crate::access::share::DELETE;
    check_target_directory(srv, vfs.as_ref(), &found.path, false, all)?;
    let to = found.path;
    if let Some(st) = &found.stat {
        if !l.replace_if_exists {
            return Err(NtStatus::OBJECT_NAME_COLLISION);
        }
        if st.dev == f.key.dev && st.ino == f.key.ino {
            return Ok(()); // already a name of this file
        }
        check_replaceable(srv, vfs.as_ref(), open, token, &to, st)?;
    }
    check_target_parent_allows_add(vfs.as_ref(), open, token, &to, false)?;
    // The source is named by the open's path, checked above; the VFS links only if that
    // path still names this file when it links, and a replaced `to` stays as it was when it
    // does not (ESTALE: another file took the name meanwhile).
    let source = (f.key.dev, f.key.ino);
    vfs.link(&open.path(), source, &to, l.replace_if_exists)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ESTALE) => NtStatus::ACCESS_DENIED,
            _ => io(e),
        })?;
    crate::stable::flush_rename(open, vfs.as_ref(), &to, &to); // CA shares: the new entry
    Ok(())
}

/// MS-FSA 2.1.5.15.6: a file SHOULD have fewer than 1024 links to get another.
const MAX_LINKS: u64 = 1024;

/// Files below a directory being renamed, with their opens, which move with it.
type MovingBelow = Vec<(crate::file_state::FileKey, Vec<Arc<Open>>)>;

/// [`MovingBelow`] with each open's path after the rename.
type Rebased = Vec<(crate::file_state::FileKey, Vec<(Arc<Open>, RelPath)>)>;

/// The new path of every open below `from` once it is `to`; OBJECT_NAME_INVALID when one
/// would be longer than a path may be, before anything moves.
fn rebased(moving: MovingBelow, from: &RelPath, to: &RelPath) -> Result<Rebased, NtStatus> {
    moving
        .into_iter()
        .map(|(key, opens)| {
            let opens = opens
                .into_iter()
                .map(|o| {
                    let path = o.path().rebase(from, to);
                    path.map(|p| (o, p)).ok_or(NtStatus::OBJECT_NAME_INVALID)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((key, opens))
        })
        .collect()
}

/// The path of a source that may be renamed now: not the share root, none of its named
/// streams open, every other open sharing delete, and (a directory) nothing open below it
/// but, for a POSIX open, POSIX opens, which move with it ([`posix_opens_below`]).
fn movable_source(
    srv: &Server,
    vfs: &dyn smbq_vfs::Vfs,
    open: &Open,
    f: &FileOpen,
) -> Result<(RelPath, MovingBelow), NtStatus> {
    let from = open.path();
    if from.is_root() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // A file a POSIX delete already unlinked (crate::file_state::share_mode) has no name to
    // move; its old path may name another file by now.
    still_named(vfs, open, f)?;
    // MS-FSA 2.1.5.15.11: not while one of the file's named streams is open
    // (smbtorture smb2.streams.basefile-rename-with-open-stream).
    if srv.open_state().has_stream_opens(f.key) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Every other open of the source must share delete.
    if !srv.open_state().others_share_delete(f.key, open.volatile()) {
        return Err(NtStatus::SHARING_VIOLATION);
    }
    let moving = if f.is_dir && srv.open_state().any_open_below(&from, f.key) {
        posix_opens_below(srv, open, f, &from)?
    } else {
        Vec::new()
    };
    Ok((from, moving))
}

/// A directory with open files below it is renamed only by a POSIX open, and only when
/// every open below is a POSIX open of this share: Samba's have_file_open_below ignores POSIX
/// opens for a POSIX directory open, and a Linux client may rename a directory whose files
/// it has open. Anything else is ACCESS_DENIED, as Windows answers (MS-FSA 2.1.5.15.11,
/// smbtorture smb2.rename.rename_dir_openfile). A disconnected durable open below is not
/// found here, so it keeps the directory in place.
fn posix_opens_below(
    srv: &Server,
    open: &Open,
    f: &FileOpen,
    from: &RelPath,
) -> Result<MovingBelow, NtStatus> {
    if !open.posix {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let below = srv
        .open_state()
        .opens_below(from, f.key, Below::Posix)
        .ok_or(NtStatus::ACCESS_DENIED)?;
    let share = &open.tree.share;
    below
        .into_iter()
        .map(|(key, ids)| {
            let opens = ids
                .iter()
                .map(|id| {
                    srv.lookup_open(*id)
                        .filter(|o| Arc::ptr_eq(&o.tree.share, share))
                        .ok_or(NtStatus::ACCESS_DENIED)
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((key, opens))
        })
        .collect()
}

/// An open's path may no longer name its file: a POSIX delete unlinks a name while POSIX
/// opens carry on (crate::file_state::share_mode), a local process may move it, and another
/// file may take the name (with a second hard link the file keeps links, so the count tells
/// nothing). A rename or link from such an open would act on that other file (a replacing
/// link would put it over the target): OBJECT_NAME_NOT_FOUND.
fn still_named(vfs: &dyn smbq_vfs::Vfs, open: &Open, f: &FileOpen) -> Result<(), NtStatus> {
    match f.key.named_by(vfs, &open.path()) {
        Some(true) => Ok(()),
        _ => Err(NtStatus::OBJECT_NAME_NOT_FOUND),
    }
}

/// The stored descriptor of the directory that holds (or would hold) `path`.
fn parent_sd(vfs: &dyn smbq_vfs::Vfs, path: &smbq_vfs::RelPath) -> Option<SecurityDescriptor> {
    let parent = path.parent()?;
    let opts = smbq_vfs::OpenOptions {
        directory: Some(true),
        ..Default::default()
    };
    let dir = vfs.open(&parent, &opts).ok()?.file;
    crate::security::store::read(dir.as_ref())
}

/// What `token` may do in the directory holding `path`: its stored DACL decides, else the
/// share's MaximalAccess (the same rule CREATE applies to new children).
fn parent_access(
    vfs: &dyn smbq_vfs::Vfs,
    open: &Open,
    token: &Token,
    path: &smbq_vfs::RelPath,
) -> u32 {
    match parent_sd(vfs, path) {
        Some(sd) => crate::security::check::maximal_access(&sd, token),
        None => open.tree.maximal_access,
    }
}

/// A rename adds a name to the target directory, so the caller needs FILE_ADD_FILE there
/// (FILE_ADD_SUBDIRECTORY for a directory): Windows' I/O manager opens the target's parent for
/// that access before the file system sees the rename (MS-FSA 2.1.5.15.12 is handed the
/// already-opened target directory; Samba's check_parent_access_fsp does the same). DELETE
/// on the source says nothing about the place the file moves to.
fn check_target_parent_allows_add(
    vfs: &dyn smbq_vfs::Vfs,
    open: &Open,
    token: &Token,
    to: &smbq_vfs::RelPath,
    is_dir: bool,
) -> Result<(), NtStatus> {
    let add = if is_dir {
        mask::FILE_ADD_SUBDIRECTORY
    } else {
        mask::FILE_ADD_FILE
    };
    crate::security::refuse_on_read_only(open, add)?;
    if parent_access(vfs, open, token, to) & add == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// The file `st` at `to`, which a rename or a link asked to replace: never a directory or an
/// open file (ACCESS_DENIED, as NTFS answers), and one the caller could delete.
fn check_replaceable(
    srv: &Server,
    vfs: &dyn smbq_vfs::Vfs,
    open: &Open,
    token: &Token,
    to: &smbq_vfs::RelPath,
    st: &smbq_vfs::Stat,
) -> Result<(), NtStatus> {
    let key = crate::file_state::FileKey {
        dev: st.dev,
        ino: st.ino,
        stream: 0,
    };
    if st.kind == FileKind::Dir || srv.open_state().open_count_any(key) > 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    check_replace_allowed(vfs, open, token, to, st)
}

/// ReplaceIfExists destroys the file already at the target name, so it must be one the caller
/// could delete (MS-FSA 2.1.5.15.12 with 2.1.5.1.2.1's DELETE rule): DELETE from its own
/// stored DACL or FILE_DELETE_CHILD from its directory's, and not READONLY (NTFS refuses to
/// replace a read-only file with STATUS_ACCESS_DENIED, as it refuses to delete one).
fn check_replace_allowed(
    vfs: &dyn smbq_vfs::Vfs,
    open: &Open,
    token: &Token,
    to: &smbq_vfs::RelPath,
    st: &smbq_vfs::Stat,
) -> Result<(), NtStatus> {
    crate::security::refuse_on_read_only(open, mask::DELETE)?;
    // Only files get here (a directory target was refused), and a file's READONLY is its mode.
    if meta::is_read_only(st) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // A target whose descriptor cannot be read is not known to be deletable.
    let target = vfs
        .open(to, &smbq_vfs::OpenOptions::default())
        .map_err(io)?;
    let own = match crate::security::store::read(target.file.as_ref()) {
        Some(sd) => crate::security::check::maximal_access(&sd, token),
        None => open.tree.maximal_access,
    };
    if own & mask::DELETE == 0 && parent_access(vfs, open, token, to) & mask::FILE_DELETE_CHILD == 0
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// MS-FSA 2.1.5.15.11 (as NTFS does it): a rename opens the target's parent directory for
/// FILE_ADD_FILE (FILE_ADD_SUBDIRECTORY for a directory) sharing read and write (a link:
/// sharing everything, `share_access`), so an open
/// of that directory holding DELETE, or not sharing write, makes the rename a sharing
/// violation (smbtorture smb2.rename.share_delete_and_delete_access,
/// no_share_delete_but_delete_access, smb2.oplock.batch19/batch20/exclusive6).
fn check_target_directory(
    srv: &Server,
    vfs: &dyn smbq_vfs::Vfs,
    to: &smbq_vfs::RelPath,
    is_dir: bool,
    share_access: u32,
) -> Result<(), NtStatus> {
    let parent = to.parent().unwrap_or_else(smbq_vfs::RelPath::root);
    let Ok(st) = vfs.stat(&parent) else {
        // A missing parent fails the rename itself, with the right status.
        return Ok(());
    };
    let key = crate::file_state::FileKey {
        dev: st.dev,
        ino: st.ino,
        stream: 0,
    };
    let add = if is_dir {
        mask::FILE_ADD_SUBDIRECTORY
    } else {
        mask::FILE_ADD_FILE
    };
    srv.open_state()
        .check(key, add | mask::SYNCHRONIZE, share_access)
}

/// MS-FSA 2.1.5.15.11.1: renames the named stream `open` addresses to `target`
/// (`:name[:$DATA]`), or moves its data into the file's unnamed stream (`::$DATA`) when
/// that is empty.
fn rename_stream(srv: &Server, open: &Open, target: &str, replace: bool) -> Result<(), NtStatus> {
    use crate::streams;
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    // The syntax rules of stream names in CREATE apply; a bad one is INVALID_PARAMETER here.
    let parsed = parse_smb_name(&format!("x{target}")).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    // Renaming the unnamed stream (or a directory) to a named one is not supported by NTFS.
    let from = f
        .stream
        .as_ref()
        .and_then(|s| s.name())
        .ok_or(NtStatus::INVALID_PARAMETER)?;
    let sref = f.stream.as_ref().ok_or(NtStatus::INVALID_PARAMETER)?;
    match parsed.stream {
        Stream::Named(to) => {
            streams::xattr_name(&to).map_err(|_| NtStatus::INVALID_PARAMETER)?;
            let to_key = crate::file_state::FileKey {
                stream: streams::stream_id(&to),
                ..f.key
            };
            let case_only = smbq_vfs::simple_lowercase_eq(&from, &to);
            if !case_only && srv.open_state().open_count(to_key) > 0 {
                return Err(NtStatus::ACCESS_DENIED);
            }
            streams::rename(f.file.as_ref(), &from, &to, replace)?;
            sref.set(Some(to.clone()));
            let to = Moved::Stream(streams::stream_id(&to));
            srv.apply(srv.open_state().renamed(f.key, open.volatile(), to));
            Ok(())
        }
        Stream::Default => {
            let base_size = open
                .tree
                .share
                .vfs
                .as_ref()
                .ok_or(NtStatus::INVALID_PARAMETER)?
                .stat(&open.path())
                .map_err(io)?
                .size;
            if base_size != 0 {
                return Err(if replace {
                    NtStatus::INVALID_PARAMETER
                } else {
                    NtStatus::OBJECT_NAME_COLLISION
                });
            }
            let data = f
                .file
                .read_at(0, streams::MAX_STREAM_SIZE as usize)
                .map_err(io)?;
            // From here on the open addresses the file's data.
            sref.set(None);
            if let Err(e) = f.file.write_at(0, &[data]) {
                sref.set(Some(from));
                return Err(io(e));
            }
            // Moved in is written: on stable storage first where writes are (crate::stable).
            crate::stable::flush_data(srv, open).map_err(io)?;
            f.file
                .remove_xattr(&format!("{}{from}", streams::PREFIX))
                .map_err(io)?;
            srv.apply(
                srv.open_state()
                    .renamed(f.key, open.volatile(), Moved::Stream(0)),
            );
            Ok(())
        }
    }
}
