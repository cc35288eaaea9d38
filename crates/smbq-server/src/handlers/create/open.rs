//! Step 4 of a CREATE, the open: the file-system side of the disposition (MS-FSA 2.1.5.1):
//! an existing object opened, overwritten or superseded, a new one created with its security
//! descriptor, DOS attributes and file id, or a named stream (stream.rs); a pipe on IPC$.
//! The blocking part runs resolution (resolve.rs) and admission (admit.rs) in the order the
//! object store needs them: an existing object is opened, admitted, then truncated; a new one
//! is created (its parent's descriptor asked first), then admitted, and removed again if it
//! is refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use parking_lot::Mutex;
use smbq_vfs::{CreateMode, FileKind, OpenOptions, RelPath, Stat, Vfs, VfsFile};
use smbq_wire::create::{CreateAction, CreateDisposition};
use smbq_wire::fscc::attributes::IO_REPARSE_TAG_SYMLINK;
use smbq_wire::{FileId, NtStatus};

use super::disposition::Plan;
use super::intent::CreateIntent;
use super::resolve::{self, Target};
use super::rights::{self, Rights};
use super::{Done, Refused, Stop, admit, secure, stream};
use crate::Server;
use crate::access::{attr, mask, opts};
use crate::errors::{IoContext, map_io_error, map_io_error_in};
use crate::file_state::FileKey;
use crate::file_state::oplock::MAX_BREAK_ROUNDS;
use crate::handlers::{Ctx, blocking};
use crate::open_state::Queries as _;
use crate::pipe::PipeOpen;
use crate::share::ShareKind;
use crate::tables::open::{DirCursor, FileOpen};
use crate::tables::{Open, OpenKind, Tree};
use crate::{dos, kernel_rights, meta};

/// Steps 2 to 4: opens the pipe, or resolves, admits and opens the disk object on the
/// blocking pool ([`disk`]). A disk open that must wait for oplock breaks (crate::oplock)
/// waits for the acknowledgments or closes and runs again, at most [`MAX_BREAK_ROUNDS`]
/// times. On failure the reserved `id` is given back.
pub(super) async fn run(
    ctx: &Ctx<'_>,
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    intent: &Arc<CreateIntent>,
    id: u64,
) -> Result<Done, Refused> {
    let r = pipe_or_disk(ctx, srv, tree, intent, id).await;
    if r.is_err() {
        srv.cancel_reservation(id);
    }
    r
}

async fn pipe_or_disk(
    ctx: &Ctx<'_>,
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    intent: &Arc<CreateIntent>,
    id: u64,
) -> Result<Done, Refused> {
    if tree.share.kind == ShareKind::Pipe {
        return Ok(open_pipe(ctx, tree, intent, id)?);
    }
    let mut rounds = 0;
    loop {
        let (srv2, tree2, intent2) = (srv.clone(), tree.clone(), intent.clone());
        let session_id = ctx.session.id;
        let r = blocking(move || Ok(disk(&srv2, &tree2, session_id, &intent2, id))).await;
        match r.unwrap_or_else(|e| Err(Stop::Failed(e))) {
            Ok(done) => return Ok(done),
            Err(Stop::Failed(e)) => return Err(e.into()),
            Err(Stop::Symlink(data)) => return Err(Refused::Symlink(data)),
            Err(Stop::MustWait(pending)) if rounds < MAX_BREAK_ROUNDS => {
                rounds += 1;
                srv.oplock_wait(pending, &ctx.cancel).await?;
            }
            Err(Stop::MustWait(_)) => return Err(NtStatus::SHARING_VIOLATION.into()),
        }
    }
}

/// One disk CREATE's fixed inputs, shared by every step of the blocking part.
pub(super) struct Opener<'a> {
    pub(super) srv: &'a Arc<Server>,
    pub(super) tree: &'a Arc<Tree>,
    pub(super) vfs: &'a dyn Vfs,
    pub(super) session_id: u64,
    /// The reserved open id (`Server::reserve_open_id`).
    pub(super) id: u64,
    pub(super) intent: &'a CreateIntent,
}

impl Opener<'_> {
    pub(super) fn new_open(&self, kind: OpenKind, path: RelPath, granted: u32) -> Arc<Open> {
        self.intent
            .new_open(self.id, self.session_id, self.tree, kind, path, granted)
    }
}

impl CreateIntent {
    /// The open this CREATE produces, once admitted.
    fn new_open(
        &self,
        id: u64,
        session_id: u64,
        tree: &Arc<Tree>,
        kind: OpenKind,
        path: RelPath,
        granted: u32,
    ) -> Arc<Open> {
        Arc::new(Open {
            file_id: file_id_for(id),
            session_id,
            tree: tree.clone(),
            kind,
            path: Mutex::new(path),
            granted,
            share_access: self.share_access,
            create_options: self.options,
            delete_on_close: AtomicBool::new(self.options & opts::DELETE_ON_CLOSE != 0),
            position: AtomicU64::new(0),
            mode: AtomicU32::new(self.options & smbq_wire::fscc::file_info::mode::SETTABLE),
            closed: AtomicBool::new(false),
            ea_index: AtomicU32::new(0),
            durable: Mutex::new(None),
            replay: Mutex::new(None),
            channel: Mutex::new(Default::default()),
            lock_seq: Mutex::new(Default::default()),
            parent_lease: self.lease.as_ref().and_then(|l| l.parent),
            modified: AtomicBool::new(false),
            sticky_write: AtomicBool::new(false),
            persisting: Default::default(),
            record_behind: AtomicBool::new(false),
            posix: self.contexts.posix_mode.is_some(),
        })
    }
}

fn file_id_for(id: u64) -> FileId {
    FileId {
        persistent: id,
        volatile: id,
    }
}

/// MS-SMB2 3.3.5.9: on IPC$ the name is a pipe name.
fn open_pipe(
    ctx: &Ctx<'_>,
    tree: &Arc<Tree>,
    intent: &CreateIntent,
    id: u64,
) -> Result<Done, NtStatus> {
    // Windows' RestrictNamedpipeAccessViaQuic: RPC over named pipes (srvsvc, and the
    // coercion routes through others) is not offered to the internet over UDP 443.
    if ctx.conn.transport == smbq_proto::engine::Transport::Quic
        && ctx.srv.config().restrict_named_pipes_quic
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let name = intent.name.rsplit('\\').next().unwrap_or_default();
    let io = (ctx.srv.pipe_factory())(name, ctx.srv.config(), &ctx.view.identity)
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    let granted = rights::grant(intent.desired, tree.maximal_access)?;
    let kind = OpenKind::Pipe(PipeOpen {
        name: name.to_owned(),
        io: Mutex::new(io),
    });
    let path = RelPath::root();
    let open = intent.new_open(id, ctx.view.id, tree, kind, path, granted);
    Ok(Done {
        open,
        action: CreateAction::OPENED,
        stat: None,
        view: None,
        maximal: tree.maximal_access,
    })
}

pub(super) fn key_of(st: &Stat) -> FileKey {
    FileKey::of(st)
}

/// How one look at the name ended (one pass of [`open_disk`]'s loop).
pub(super) enum Attempt {
    Done(Done),
    Stopped(Stop),
    /// The name appeared or vanished between our look and our open: look again.
    Retry,
}

impl Attempt {
    pub(super) fn failed(status: NtStatus) -> Self {
        Attempt::Stopped(Stop::Failed(status))
    }
}

impl From<Result<Done, Stop>> for Attempt {
    fn from(r: Result<Done, Stop>) -> Self {
        match r {
            Ok(d) => Attempt::Done(d),
            Err(s) => Attempt::Stopped(s),
        }
    }
}

/// The blocking part of a disk CREATE: resolve (resolve.rs), then admit and open what the
/// name names: an existing object, a new one, or a named stream (stream.rs).
fn disk(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session_id: u64,
    intent: &CreateIntent,
    id: u64,
) -> Result<Done, Stop> {
    let vfs = tree.share.vfs.clone().ok_or(NtStatus::INTERNAL_ERROR)?;
    let o = Opener {
        srv,
        tree,
        vfs: vfs.as_ref(),
        session_id,
        id,
        intent,
    };
    let name = resolve::name(intent)?;
    // Two tries: a name that appears or vanishes between our look and our open is looked at
    // again once.
    for _ in 0..2 {
        let attempt = match resolve::target(o.vfs, intent, &name)? {
            Target::Stream { found, sname } => stream::open(&o, &found, sname),
            Target::Existing { path, st, plan } => open_existing(&o, &path, &st, plan),
            Target::New { path } => create_new(&o, &path),
        };
        match attempt {
            Attempt::Done(d) => return Ok(d),
            Attempt::Stopped(s) => return Err(s),
            Attempt::Retry => continue,
        }
    }
    Err(Stop::Failed(NtStatus::SHARING_VIOLATION))
}

/// Opens the existing object `st` at `path` as `plan` (an [`Plan::OpenExisting`]) says.
fn open_existing(o: &Opener<'_>, path: &RelPath, st: &Stat, plan: Plan) -> Attempt {
    match open_existing_steps(o, path, st, plan) {
        // It vanished since we looked.
        Err(Stop::Failed(NtStatus::OBJECT_NAME_NOT_FOUND)) => Attempt::Retry,
        other => other.into(),
    }
}

fn open_existing_steps(
    o: &Opener<'_>,
    path: &RelPath,
    st: &Stat,
    plan: Plan,
) -> Result<Done, Stop> {
    let truncate = plan.truncates();
    let read_only = meta::is_read_only(st);
    let rights = admit::existing_rights(o, path, st, truncate, read_only)?;
    let (file, rights) = open_existing_file(o, path, st.kind == FileKind::Dir, truncate, rights)?;
    let st = file.stat().map_err(|e| map_io_error(&e))?;
    let object = if st.kind == FileKind::Dir {
        kernel_rights::Object::Dir
    } else {
        kernel_rights::Object::File
    };
    let rights = admit::apply_stored_sd(o, path, (file.as_ref(), object), rights, read_only)?;
    if truncate {
        // The stored DACL may grant less than the share does.
        rights::check_truncate(o.intent.disposition, rights.maximal, o.tree.read_only())?;
        admit::check_overwrite_attributes(file.as_ref(), o.intent.attributes)?;
    }
    let opened = Opened {
        path: path.clone(),
        file,
        st,
    };
    finish(o, opened, rights, plan)
}

/// Opens the existing object for reading, and for writing when the open may write or
/// truncates. MAXIMUM_ALLOWED settles for what POSIX permissions give: the write rights the
/// file system refuses are taken out of the grant.
fn open_existing_file(
    o: &Opener<'_>,
    path: &RelPath,
    is_dir: bool,
    truncate: bool,
    mut rights: Rights,
) -> Result<(Box<dyn VfsFile>, Rights), NtStatus> {
    let write_bits = mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA;
    let wants_write = !is_dir && (truncate || rights.granted & write_bits != 0);
    let opts = OpenOptions {
        read: true,
        write: wants_write,
        create: CreateMode::OpenExisting,
        directory: Some(is_dir),
        mode: 0,
    };
    let file = match o.vfs.open(path, &opts) {
        Ok(o) => o.file,
        Err(e)
            if wants_write
                && !truncate
                && o.intent.desired & mask::MAXIMUM_ALLOWED != 0
                && map_io_error(&e) == NtStatus::ACCESS_DENIED =>
        {
            rights.granted &= !write_bits;
            let read_only = OpenOptions {
                write: false,
                ..opts
            };
            o.vfs
                .open(path, &read_only)
                .map_err(|e| final_err(&e))?
                .file
        }
        Err(e) => return Err(final_err(&e)),
    };
    Ok((file, rights))
}

/// Creates the object at `path` as the disposition allows.
fn create_new(o: &Opener<'_>, path: &RelPath) -> Attempt {
    match create_new_steps(o, path) {
        // Someone created it first: OPEN_IF and friends now open the existing one.
        Err(Stop::Failed(NtStatus::OBJECT_NAME_COLLISION))
            if o.intent.disposition != CreateDisposition::CREATE =>
        {
            Attempt::Retry
        }
        other => other.into(),
    }
}

fn create_new_steps(o: &Opener<'_>, path: &RelPath) -> Result<Done, Stop> {
    if o.tree.read_only() {
        return Err(NtStatus::ACCESS_DENIED.into());
    }
    if path.is_root() {
        return Err(NtStatus::OBJECT_NAME_COLLISION.into());
    }
    let is_dir = o.intent.options & opts::DIRECTORY_FILE != 0;
    let maximal = o.tree.maximal_access;
    let granted = rights::grant(o.intent.desired, maximal)?;
    // MS-FSA 2.1.5.1.1: a new object asked to be READONLY cannot be deleted on close
    // (CANNOT_DELETE, and nothing is created; smb2.delete-on-close-perms.READONLY).
    let read_only = o.intent.attributes & attr::READONLY != 0;
    admit::check_delete_on_close(o.intent, granted, read_only, path)?;
    let (file, ino) = make_object(o, path, is_dir)?;
    stamp_new(o, file.as_ref(), ino, is_dir);
    if let Err(e) = posix_mode(o, file.as_ref()) {
        drop(file);
        remove_new(o.vfs, path, is_dir);
        return Err(e.into());
    }
    let st = file.stat().map_err(|e| map_io_error(&e))?;
    let opened = Opened {
        path: path.clone(),
        file,
        st,
    };
    let rights = Rights {
        granted,
        maximal,
        read_only_withheld: 0,
    };
    finish(o, opened, rights, Plan::Create)
}

/// Creates the file or directory with the security descriptor it must have (MS-DTYP
/// 2.5.3.4), after asking the parent's descriptor whether it may. Returns the file and its
/// inode number.
pub(super) fn make_object(
    o: &Opener<'_>,
    path: &RelPath,
    is_dir: bool,
) -> Result<(Box<dyn VfsFile>, u64), NtStatus> {
    let token = &o.intent.token;
    let parent_sd = secure::parent_sd(o.vfs, path);
    secure::check_parent_allows_create(parent_sd.as_ref(), token, is_dir)?;
    let opts = OpenOptions {
        read: true,
        write: !is_dir,
        create: CreateMode::CreateNew,
        directory: Some(is_dir),
        // A POSIX create starts with no more than it asked for but what the server's own
        // xattr writes need (owner rw, and x on a directory); posix_mode sets it exactly
        // once they are done.
        mode: match o.intent.contexts.posix_mode {
            Some(m) if is_dir => (m & crate::posix::CREATE_MODE_BITS) | 0o700,
            Some(m) => (m & crate::posix::CREATE_MODE_BITS) | 0o600,
            None if is_dir => 0o755,
            None => 0o644,
        },
    };
    let file = o.vfs.open(path, &opts).map_err(|e| create_err(&e))?.file;
    // The descriptor goes on before the file is usable; a file that cannot get the one it
    // must have is removed again rather than left with the POSIX view.
    let secured = file.stat().map_err(|e| map_io_error(&e)).and_then(|st| {
        secure::apply_new(
            file.as_ref(),
            &st,
            o.intent.contexts.sec_desc.as_ref(),
            parent_sd.as_ref(),
            is_dir,
            token,
        )
        .map(|()| st.ino)
    });
    match secured {
        Ok(ino) => Ok((file, ino)),
        Err(e) => {
            drop(file);
            remove_new(o.vfs, path, is_dir);
            Err(e)
        }
    }
}

/// A POSIX create's mode is the mode, whatever the server's umask (POSIX-SMB2; Samba
/// check_posix_create_context): the client applied its own. Set last, after the server's own
/// xattr writes, which a mode without owner write would forbid a non-root server. (A
/// directory's setgid bit inherited from its parent is not kept: the server never sets
/// setuid or setgid, smbq_vfs's MODE_MASK.)
fn posix_mode(o: &Opener<'_>, file: &dyn VfsFile) -> Result<(), NtStatus> {
    let Some(mode) = o.intent.contexts.posix_mode else {
        return Ok(());
    };
    // A new directory below a set-group-ID one keeps the bit the kernel gave it, as `mkdir`
    // there would (smbq_vfs never adds one).
    let is_dir = o.intent.options & opts::DIRECTORY_FILE != 0;
    let inherited = if is_dir {
        file.stat().map_or(0, |st| st.mode & crate::posix::SETGID)
    } else {
        0
    };
    file.set_mode((mode & crate::posix::CREATE_MODE_BITS) | inherited)
        .map_err(|e| map_io_error(&e))
}

/// A new object's DOS attributes, file id, READONLY mode and preallocation, each best effort.
fn stamp_new(o: &Opener<'_>, file: &dyn VfsFile, ino: u64, is_dir: bool) {
    // SPARSE_FILE is reported, never set by a CREATE: only FSCTL_SET_SPARSE makes a file
    // sparse (Windows and Samba; smbtorture smb2.ioctl.sparse_file_attr).
    let attributes = o.intent.attributes & !attr::SPARSE_FILE;
    // MS-FSA 2.1.5.1.1: a new file gets the requested attributes plus ARCHIVE, and a
    // FileId64 no other file on the volume has had (crate::file_id).
    let dos = dos::DosInfo {
        attributes: (attributes & attr::STORED & !attr::ARCHIVE != 0)
            .then_some((attributes | attr::ARCHIVE) & attr::STORED),
        creation: None,
        file_id: Some(dos::IdStamp {
            ino,
            id: o.tree.share.file_ids.next(o.vfs),
        }),
        reparse_tag: None,
    };
    // Best effort: without xattrs the file keeps the default attributes and reports its
    // inode number as its id. Before the mode below, which would forbid a user xattr write
    // to a server not running as root.
    let _ = dos.write(file);
    if attributes & attr::READONLY != 0 && !is_dir {
        // The creating handle keeps its write access, as on Windows.
        let _ = file.set_mode(0o444);
    }
    if let Some(a) = o.intent.contexts.allocation_size {
        let _ = file.allocate(a);
    }
}

/// MS-FSA 2.1.5.1.2.1: an overwritten or superseded file takes the attributes the CREATE asks
/// for, plus ARCHIVE, in place of its own (HIDDEN and SYSTEM were checked to be asked for
/// again, check_overwrite_attributes); SPARSE_FILE stays as FSCTL_SET_SPARSE left it. A
/// READONLY asked for is the mode, as at creation: the overwriting handle keeps its write
/// access (smbtorture smb2.openattr).
fn stamp_overwritten(o: &Opener<'_>, file: &dyn VfsFile, st: &Stat) {
    let requested = o.intent.attributes;
    let mut dos = dos::DosInfo::read(file);
    let sparse = dos.attributes.unwrap_or(0) & attr::SPARSE_FILE;
    let attributes = ((requested | attr::ARCHIVE) & attr::STORED & !attr::SPARSE_FILE) | sparse;
    if dos.attributes.is_some() || attributes != attr::ARCHIVE {
        dos.attributes = Some(attributes);
        // Best effort, as at creation: without xattrs the POSIX-derived attributes show.
        let _ = dos.write(file);
    }
    if requested & attr::READONLY != 0
        && let Err(e) = file.set_mode(st.mode & 0o7777 & !0o222)
    {
        // A per-user identity that does not own the file may not chmod it (crate::unix_identity).
        tracing::debug!(error = %e, "READONLY of an overwritten file not set");
    }
}

/// Removes an object this CREATE made and could not finish; best effort, as the CREATE fails
/// either way.
fn remove_new(vfs: &dyn Vfs, path: &RelPath, is_dir: bool) {
    let _ = if is_dir {
        vfs.rmdir(path)
    } else {
        vfs.unlink(path)
    };
}

/// A file or directory opened by the blocking part, not yet admitted.
struct Opened {
    path: RelPath,
    file: Box<dyn VfsFile>,
    st: Stat,
}

/// Admits the opened object (oplocks, share modes) and builds the open. An object this
/// CREATE made (`Plan::Create`) is removed again if admission fails.
fn finish(o: &Opener<'_>, opened: Opened, rights: Rights, plan: Plan) -> Result<Done, Stop> {
    let Opened { path, file, mut st } = opened;
    let key = key_of(&st);
    let is_dir = st.kind == FileKind::Dir;
    let truncate = plan.truncates();
    let created = plan == Plan::Create;
    let mut dos = dos::DosInfo::read(file.as_ref());
    // A reparse point set by a client (crate::reparse) is data the server never acts on:
    // opening the file itself needs FILE_OPEN_REPARSE_POINT. Without it a symlink is
    // STOPPED_ON_SYMLINK with where it points, for the client to follow (MS-SMB2 3.3.5.9,
    // as Windows and Samba answer); another tag is refused as NTFS refuses a tag no filter
    // handles (MS-FSA 2.1.5.1).
    if !created && o.intent.options & opts::OPEN_REPARSE_POINT == 0 {
        match dos.reparse_tag {
            Some(IO_REPARSE_TAG_SYMLINK) => {
                return Err(match crate::reparse::symlink_error(file.as_ref()) {
                    Some(data) => Stop::Symlink(data),
                    None => NtStatus::IO_REPARSE_TAG_NOT_HANDLED.into(),
                });
            }
            Some(_) => return Err(NtStatus::IO_REPARSE_TAG_NOT_HANDLED.into()),
            None => {}
        }
    }
    let new = admit::share_entry(o, &path, is_dir, rights, truncate);
    if let Err(stop) = admit::admit(o, key, &new, truncate, created) {
        if created {
            remove_new(o.vfs, &path, is_dir);
        }
        return Err(stop);
    }
    if truncate {
        st = overwrite(o, key, file.as_ref())?;
        dos = dos::DosInfo::read(file.as_ref());
    }
    let name = path.file_name().unwrap_or_default().to_owned();
    let change = o.srv.open_state().change_time(key, st.ctime);
    let view = dos::View::new(&st, &name, &dos, change);
    let kind = OpenKind::File(FileOpen {
        file,
        key,
        is_dir,
        dir: Mutex::new(DirCursor::default()),
        stream: None,
    });
    let open = o.new_open(kind, path, rights.granted);
    // On a continuously available share a created name and a truncation are on stable
    // storage before the answer (crate::stable). The open exists by now: a failure is logged,
    // not undone.
    let flushed = if created {
        crate::stable::flush_entry(&open, o.vfs, &open.path())
    } else if truncate {
        crate::stable::flush_data(o.srv, &open)
    } else {
        Ok(())
    };
    if let Err(e) = flushed {
        tracing::error!(path = %open.path(), error = %e, "flush after create failed");
    }
    Ok(Done {
        open,
        action: plan.action(),
        stat: Some(st),
        view: Some(view),
        maximal: rights.reported(),
    })
}

/// Overwrites or supersedes the admitted file: its data and (MS-FSA 2.1.5.1.2.1) its named
/// streams go, it takes the attributes asked for, and the write shows in its times. Returns
/// its stat after; on failure its admission is released.
fn overwrite(o: &Opener<'_>, key: FileKey, file: &dyn VfsFile) -> Result<Stat, Stop> {
    // MS-FSA 2.1.5.1.2.1: overwrite and supersede drop the named streams too.
    let r = file
        .set_len(0)
        .and_then(|()| crate::streams::remove_all(file))
        .and_then(|()| file.stat());
    let mut st = match r {
        Ok(s) => s,
        Err(e) => {
            o.srv.open_state().release(key, o.id, false, None);
            return Err(map_io_error(&e).into());
        }
    };
    if key.stream == 0 {
        stamp_overwritten(o, file, &st);
        if let Ok(s) = file.stat() {
            st = s;
        }
    }
    Ok(st)
}

pub(super) fn final_err(e: &std::io::Error) -> NtStatus {
    map_io_error_in(e, IoContext::Final)
}

fn create_err(e: &std::io::Error) -> NtStatus {
    match e.raw_os_error() {
        // The parent vanished or is not a directory.
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => NtStatus::OBJECT_PATH_NOT_FOUND,
        _ => map_io_error(e),
    }
}
