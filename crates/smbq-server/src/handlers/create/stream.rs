//! CREATE of a named stream, `file:stream[:$DATA]` (MS-FSA 2.1.5.1 with a stream name;
//! storage in `crate::streams`). The base file is created when missing and the disposition
//! creates; each stream is its own share-mode, oplock and lock unit (its `FileKey::stream`).

use parking_lot::Mutex;
use smbq_vfs::{CreateMode, FileKind, OpenOptions, RelPath, Stat, VfsFile};
use smbq_wire::NtStatus;
use smbq_wire::create::CreateAction;

use super::disposition::{Plan, may_create, plan};
use super::open::{Attempt, Opener, final_err, key_of};
use super::rights::{self, Rights};
use super::{Done, Stop, admit};
use crate::access::{mask, opts};
use crate::errors::map_io_error;
use crate::path::Resolved;
use crate::streams::{self, StreamFile, StreamRef};
use crate::tables::OpenKind;
use crate::tables::open::{DirCursor, FileOpen};
use crate::{dos, kernel_rights, meta};

/// The file a stream belongs to.
struct Base {
    stat: Stat,
    /// This CREATE made the file for the stream (it is removed again if the stream fails).
    created: bool,
}

/// Opens (or creates) stream `sname` of the file `found` names.
pub(super) fn open(o: &Opener<'_>, found: &Resolved, sname: &str) -> Attempt {
    // A stream is never a directory, whatever exists (smbtorture smb2.streams.dir).
    if o.intent.options & opts::DIRECTORY_FILE != 0 {
        return Attempt::failed(NtStatus::NOT_A_DIRECTORY);
    }
    if let Err(e) = streams::xattr_name(sname) {
        return Attempt::failed(e);
    }
    let base = match &found.stat {
        Some(st) => Base {
            stat: st.clone(),
            created: false,
        },
        None => match create_base(o, found) {
            NewBase::Made(stat) => Base {
                stat,
                created: true,
            },
            NewBase::Failed(e) => return Attempt::failed(e),
            NewBase::Retry => return Attempt::Retry,
        },
    };
    let r = open_on(o, found, sname, &base);
    if r.is_err() && base.created {
        let _ = o.vfs.unlink(&found.path);
    }
    r.into()
}

/// How making the missing file of a stream ended.
enum NewBase {
    Made(Stat),
    Failed(NtStatus),
    /// Someone created it first: look again.
    Retry,
}

/// MS-FSA 2.1.5.1.1: creating a stream of a missing file creates the file.
fn create_base(o: &Opener<'_>, found: &Resolved) -> NewBase {
    if !may_create(o.intent.disposition) {
        return NewBase::Failed(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    if o.tree.read_only() {
        return NewBase::Failed(NtStatus::ACCESS_DENIED);
    }
    // The same rules as any new file: the parent's descriptor must allow it (FILE_ADD_FILE)
    // and the file gets the descriptor it inherits (MS-DTYP 2.5.3.4).
    let file = match super::open::make_object(o, &found.path, false) {
        Ok((file, _)) => file,
        Err(NtStatus::OBJECT_NAME_COLLISION) => return NewBase::Retry,
        Err(status) => return NewBase::Failed(status),
    };
    let st = match file.stat() {
        Ok(st) => st,
        Err(e) => return NewBase::Failed(map_io_error(&e)),
    };
    // A new file: its id, as in super::open::stamp_new (crate::file_id).
    let dos = dos::DosInfo {
        file_id: Some(dos::IdStamp {
            ino: st.ino,
            id: o.tree.share.file_ids.next(o.vfs),
        }),
        ..Default::default()
    };
    let _ = dos.write(file.as_ref());
    NewBase::Made(st)
}

/// The stream once found or created in its base file.
struct Placed {
    /// The base file, opened; the stream's data lives in its xattrs.
    file: Box<dyn VfsFile>,
    /// The stream's name as stored (an existing stream keeps its own spelling).
    stored: String,
    plan: Plan,
}

fn open_on(o: &Opener<'_>, found: &Resolved, sname: &str, base: &Base) -> Result<Done, Stop> {
    if base.stat.kind == FileKind::Other {
        return Err(NtStatus::ACCESS_DENIED.into());
    }
    let path = &found.path;
    let read_only = meta::is_read_only(&base.stat);
    let is_dir = base.stat.kind == FileKind::Dir;
    let (file, rights) = open_base(o, path, is_dir, read_only)?;
    let existing = streams::find(file.as_ref(), sname).map_err(|e| map_io_error(&e))?;
    let (stored, plan) = match plan(o.intent.disposition, existing.is_some())? {
        open @ Plan::OpenExisting { truncate, .. } => {
            if truncate {
                rights::check_truncate(o.intent.disposition, rights.maximal, o.tree.read_only())?;
            }
            (existing.ok_or(NtStatus::INTERNAL_ERROR)?, open)
        }
        Plan::Create => {
            // A new stream changes its base file or directory, whatever access the open asks
            // for: only where the user may write it (crate::kernel_rights).
            let may_change =
                kernel_rights::may_change(file.as_ref()).map_err(|e| map_io_error(&e))?;
            if o.tree.read_only() || !may_change {
                return Err(NtStatus::ACCESS_DENIED.into());
            }
            streams::create(file.as_ref(), sname).map_err(|e| stream_err(&e))?;
            (sname.to_owned(), Plan::Create)
        }
    };
    let placed = Placed { file, stored, plan };
    admit(o, path, placed, rights, base)
}

/// Opens the base file the stream belongs to and works out the open's rights on it.
fn open_base(
    o: &Opener<'_>,
    path: &RelPath,
    is_dir: bool,
    read_only: bool,
) -> Result<(Box<dyn VfsFile>, Rights), NtStatus> {
    let maximal = rights::maximal(o.tree.maximal_access, read_only);
    let mut granted = rights::grant(o.intent.desired, maximal)?;
    admit::check_delete_on_close(o.intent, granted, read_only, path)?;
    // Stream data lives in xattrs, which a read-only descriptor can change; the base is
    // opened for writing only so a rename onto `::$DATA` can move the data there.
    let write_bits = mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA;
    let wants_write = !is_dir && granted & write_bits != 0;
    let opts = OpenOptions {
        read: true,
        write: wants_write,
        create: CreateMode::OpenExisting,
        directory: Some(is_dir),
        mode: 0,
    };
    let file = match o.vfs.open(path, &opts) {
        Ok(opened) => opened.file,
        // Per-user identities (crate::unix_identity): the xattrs are written with the
        // server's uid, so the kernel's verdict on the user writing the base file is the
        // stream's too. MAXIMUM_ALLOWED settles for reading, as for the file itself.
        Err(e)
            if wants_write
                && crate::unix_identity::active()
                && map_io_error(&e) == NtStatus::ACCESS_DENIED =>
        {
            if o.intent.desired & mask::MAXIMUM_ALLOWED == 0 {
                return Err(NtStatus::ACCESS_DENIED);
            }
            granted &= !write_bits;
            let read = OpenOptions {
                write: false,
                ..opts
            };
            o.vfs.open(path, &read).map_err(|e| final_err(&e))?.file
        }
        Err(_) if wants_write => {
            let read = OpenOptions {
                write: false,
                ..opts
            };
            o.vfs.open(path, &read).map_err(|e| final_err(&e))?.file
        }
        Err(e) => return Err(final_err(&e)),
    };
    // A stream's data, its deletion and its base's metadata are written as root; the kernel
    // says what the user may change (crate::kernel_rights).
    let rights = admit::apply_stored_sd(
        o,
        path,
        (file.as_ref(), kernel_rights::Object::Stream),
        Rights {
            granted,
            maximal,
            read_only_withheld: rights::withheld(o.tree.maximal_access, read_only),
        },
        read_only,
    )?;
    Ok((file, rights))
}

/// Admits the open of the placed stream (oplocks, share modes; each stream is its own unit)
/// and builds it. A stream this CREATE made is removed again if admission fails.
fn admit(
    o: &Opener<'_>,
    path: &RelPath,
    placed: Placed,
    rights: Rights,
    base: &Base,
) -> Result<Done, Stop> {
    let Placed { file, stored, plan } = placed;
    let truncate = plan.truncates();
    let created = plan == Plan::Create;
    let key = crate::file_state::FileKey {
        stream: streams::stream_id(&stored),
        ..key_of(&base.stat)
    };
    let new = admit::share_entry(o, path, base.stat.kind == FileKind::Dir, rights, truncate);
    // A new stream, or a stream of a new file, is held by no other open.
    if let Err(stop) = admit::admit(o, key, &new, truncate, created || base.created) {
        if created {
            let _ = file.remove_xattr(&format!("{}{stored}", streams::PREFIX));
        }
        return Err(stop);
    }
    let name_ref = StreamRef::new(stored);
    let built = StreamFile::new(file, name_ref.clone()).and_then(|f| {
        truncate
            .then(|| f.set_len(0))
            .transpose()
            .and_then(|_| f.stat())
            .map(|st| (f, st))
    });
    let (file, st) = match built {
        Ok(b) => b,
        Err(e) => {
            o.srv.open_state().release(key, o.id, false, None);
            return Err(map_io_error(&e).into());
        }
    };
    let leaf = path.file_name().unwrap_or_default().to_owned();
    let view = dos::view(o.srv, &file, key, &st, &leaf);
    let kind = OpenKind::File(FileOpen {
        file: Box::new(file),
        key,
        is_dir: false,
        dir: Mutex::new(DirCursor::default()),
        stream: Some(name_ref),
    });
    let open = o.new_open(kind, path.clone(), rights.granted);
    let action = if base.created {
        CreateAction::CREATED
    } else {
        plan.action()
    };
    Ok(Done {
        open,
        action,
        stat: Some(st),
        view: Some(view),
        maximal: rights.reported(),
    })
}

/// A stream the filesystem cannot hold (no user xattrs, or no room) is reported as such.
fn stream_err(e: &std::io::Error) -> NtStatus {
    if e.kind() == std::io::ErrorKind::Unsupported {
        return NtStatus::NOT_SUPPORTED;
    }
    map_io_error(e)
}
