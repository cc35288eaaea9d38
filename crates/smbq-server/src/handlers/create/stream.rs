//! CREATE of a named stream, `file:stream[:$DATA]` (MS-FSA 2.1.5.1 with a stream name;
//! storage in `crate::streams`). The base file is created when missing and the disposition
//! creates; each stream is its own share-mode, oplock and lock unit (its `FileKey::stream`).

use std::sync::Arc;

use parking_lot::Mutex;
use smbq_vfs::{CreateMode, FileKind, OpenOptions, Stat, Vfs, VfsFile};
use smbq_wire::NtStatus;
use smbq_wire::create::CreateAction;

use super::disposition::{Plan, may_create, plan};
use super::{Done, Params, Retry, check_delete_on_close, final_err, grant, key_of, new_open};
use crate::Server;
use crate::access::{mask, opts};
use crate::errors::map_io_error;
use crate::path::Resolved;
use crate::streams::{self, StreamFile, StreamRef};
use crate::tables::open::{DirCursor, FileOpen};
use crate::tables::{OpenKind, SessionState, Tree};
use crate::{dos, meta};

/// Opens (or creates) stream `sname` of the file `found` names.
#[allow(clippy::too_many_arguments)]
pub(super) fn open(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session: &Arc<SessionState>,
    vfs: &dyn Vfs,
    p: &Params,
    id: u64,
    found: &Resolved,
    sname: &str,
) -> Result<Result<Done, NtStatus>, Retry> {
    // A stream is never a directory, whatever exists (smbtorture smb2.streams.dir).
    if p.options & opts::DIRECTORY_FILE != 0 {
        return Ok(Err(NtStatus::NOT_A_DIRECTORY));
    }
    if let Err(e) = streams::xattr_name(sname) {
        return Ok(Err(e));
    }
    let mut created_base = false;
    let base_stat = match &found.stat {
        Some(st) => st.clone(),
        None => {
            if !may_create(p.disposition) {
                return Ok(Err(NtStatus::OBJECT_NAME_NOT_FOUND));
            }
            if tree.read_only() {
                return Ok(Err(NtStatus::ACCESS_DENIED));
            }
            // MS-FSA 2.1.5.1.1: creating a stream of a missing file creates the file.
            let o = OpenOptions {
                read: true,
                write: false,
                create: CreateMode::CreateNew,
                directory: Some(false),
                mode: 0o644,
            };
            match vfs.open(&found.path, &o) {
                Ok(o) => {
                    created_base = true;
                    match o.file.stat() {
                        Ok(st) => {
                            // A new file: its id, as in super::create_new (crate::file_id).
                            let dos = crate::dos::DosInfo {
                                file_id: Some(crate::dos::IdStamp {
                                    ino: st.ino,
                                    id: tree.share.file_ids.next(vfs),
                                }),
                                ..Default::default()
                            };
                            let _ = dos.write(o.file.as_ref());
                            st
                        }
                        Err(e) => return Ok(Err(map_io_error(&e))),
                    }
                }
                // Someone created it first: look again.
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => return Err(Retry),
                Err(e) => return Ok(Err(super::create_err(&e))),
            }
        }
    };
    let r = open_on(
        srv,
        tree,
        session,
        vfs,
        p,
        id,
        found,
        sname,
        &base_stat,
        created_base,
    );
    if r.is_err() && created_base {
        let _ = vfs.unlink(&found.path);
    }
    Ok(r)
}

#[allow(clippy::too_many_arguments)]
fn open_on(
    srv: &Arc<Server>,
    tree: &Arc<Tree>,
    session: &Arc<SessionState>,
    vfs: &dyn Vfs,
    p: &Params,
    id: u64,
    found: &Resolved,
    sname: &str,
    base_stat: &Stat,
    created_base: bool,
) -> Result<Done, NtStatus> {
    if base_stat.kind == FileKind::Other {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let path = &found.path;
    let read_only = meta::is_read_only(base_stat);
    let maximal = grant::maximal(tree.maximal_access, read_only);
    let granted = grant::grant(p.desired, maximal)?;
    check_delete_on_close(p, granted, read_only, path)?;
    // Stream data lives in xattrs, which a read-only descriptor can change; the base is
    // opened for writing only so a rename onto `::$DATA` can move the data there.
    let is_dir = base_stat.kind == FileKind::Dir;
    let wants_write = !is_dir && granted & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) != 0;
    let o = OpenOptions {
        read: true,
        write: wants_write,
        create: CreateMode::OpenExisting,
        directory: Some(is_dir),
        mode: 0,
    };
    let base = match vfs.open(path, &o) {
        Ok(o) => o.file,
        Err(_) if wants_write => {
            vfs.open(path, &OpenOptions { write: false, ..o })
                .map_err(|e| final_err(&e))?
                .file
        }
        Err(e) => return Err(final_err(&e)),
    };
    let (granted, maximal) = super::apply_stored_sd(
        vfs,
        path,
        base.as_ref(),
        p,
        tree,
        granted,
        maximal,
        read_only,
    )?;
    let existing = streams::find(base.as_ref(), sname).map_err(|e| map_io_error(&e))?;
    let (stored, truncate, action, created) = match plan(p.disposition, existing.is_some())? {
        Plan::OpenExisting { truncate, action } => {
            if truncate {
                grant::check_truncate(p.disposition, maximal, tree.read_only())?;
            }
            let stored = existing.ok_or(NtStatus::INTERNAL_ERROR)?;
            (stored, truncate, action, false)
        }
        Plan::Create => {
            if tree.read_only() {
                return Err(NtStatus::ACCESS_DENIED);
            }
            streams::create(base.as_ref(), sname).map_err(|e| stream_err(&e))?;
            (sname.to_owned(), false, CreateAction::CREATED, true)
        }
    };
    let undo = |base: &dyn VfsFile| {
        if created {
            let _ = base.remove_xattr(&format!("{}{stored}", streams::PREFIX));
        }
    };
    let key = crate::byte_lock::FileKey {
        stream: streams::stream_id(&stored),
        ..key_of(base_stat)
    };
    let checked = super::checked_access(p, granted, truncate);
    if !created && !created_base {
        srv.oplock_before_open(key, id, checked, p.share_access, truncate)?;
    }
    if let Err(e) =
        srv.files()
            .admit_checking(key, id, checked, granted, p.share_access, path, is_dir)
    {
        undo(base.as_ref());
        return Err(e);
    }
    let name_ref = StreamRef::new(stored);
    let file = match StreamFile::new(base, name_ref.clone()) {
        Ok(f) => f,
        Err(e) => {
            srv.files().remove(key, id, false);
            return Err(map_io_error(&e));
        }
    };
    let st = match truncate
        .then(|| file.set_len(0))
        .transpose()
        .and_then(|_| file.stat())
    {
        Ok(st) => st,
        Err(e) => {
            srv.files().remove(key, id, false);
            return Err(map_io_error(&e));
        }
    };
    let leaf = path.file_name().unwrap_or_default().to_owned();
    let view = dos::view(srv, &file, key, &st, &leaf);
    let kind = OpenKind::File(FileOpen {
        file: Box::new(file),
        key,
        is_dir: false,
        dir: Mutex::new(DirCursor::default()),
        stream: Some(name_ref),
    });
    let open = new_open(id, session.id, tree, kind, path.clone(), granted, p);
    let action = if created_base {
        CreateAction::CREATED
    } else {
        action
    };
    Ok(Done {
        open,
        action,
        stat: Some(st),
        view: Some(view),
        maximal,
    })
}

/// A stream the filesystem cannot hold (no user xattrs, or no room) is reported as such.
fn stream_err(e: &std::io::Error) -> NtStatus {
    if e.kind() == std::io::ErrorKind::Unsupported {
        return NtStatus::NOT_SUPPORTED;
    }
    map_io_error(e)
}
