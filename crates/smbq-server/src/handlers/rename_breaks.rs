//! What a rename breaks before it runs, besides the source's own leases (set_info.rs,
//! `wait_for_handle_breaks`), as MS-FSA 2.1.4.12 has Windows check oplocks on a rename:
//!
//! - The directory the target goes into: a rename opens it for FILE_ADD_FILE sharing read and
//!   write (check_target_directory in set_info.rs), and a sharing conflict with an open there
//!   (one holding DELETE) first breaks that directory's handle caching, as a CREATE's would,
//!   so its holder can close it (MS-FSA 2.1.5.1.2; smbtorture smb2.dirlease.rename_dst_parent,
//!   Samba's smbd_smb2_setinfo_rename_dst_parent_check).
//! - The file a replacing rename would replace: other keys' handle caching on it breaks and
//!   the rename waits for the acknowledgments; if the file is still open then, the rename
//!   fails with ACCESS_DENIED as before (smbtorture smb2.lease.v2_rename_target_overwrite,
//!   whose commit says it passes against Windows; Samba's smbd_smb2_setinfo_rename_dst_check).
//! - The files below a directory being renamed, when every open of them holds a lease that
//!   caches handles: one file at a time, its handle caching breaks and the rename waits; a
//!   client that acknowledges without closing the file ends the rename with ACCESS_DENIED at
//!   once, as Windows answers (Samba bug 15608; smbtorture smb2.lease.rename_dir_openfile).
//!   An open below without such a lease is refused at once, as before (`movable_source`).
//!
//! Only leases break here; oplocks on those files are left as they are.

use std::sync::Arc;

use smbq_vfs::{FileKind, RelPath};
use smbq_wire::NtStatus;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::file_info::{RenameInfo, RenameInfoEx};

use super::{Ctx, blocking};
use crate::access::{mask, share};
use crate::file_state::oplock::{Admission, MAX_BREAK_ROUNDS};
use crate::file_state::{FileKey, OpenRequest};
use crate::open_state::{Below, Queries as _};
use crate::path::{Stream, lookup, parse_name};
use crate::tables::Open;

/// Breaks what a rename through `open` (a RENAME or RENAME_EX `class` with buffer `buf`)
/// would disturb, and waits for it (see the module docs).
pub(super) async fn wait(
    ctx: &Ctx<'_>,
    open: &Arc<Open>,
    class: FileInfoClass,
    buf: &[u8],
) -> Result<(), NtStatus> {
    let Some(f) = open.file() else {
        return Ok(());
    };
    let Some(target) = Target::decode(class, buf) else {
        return Ok(());
    };
    let by = open.volatile();
    let dir_leases = ctx.srv.open_state().any_dir_leases();
    if target.replace || dir_leases {
        let (o, is_dir) = (open.clone(), f.is_dir);
        let (parent, replaced) = blocking(move || Ok(target.keys(&o))).await?;
        if let Some(dir) = parent.filter(|_| dir_leases) {
            let add = if is_dir {
                mask::FILE_ADD_SUBDIRECTORY
            } else {
                mask::FILE_ADD_FILE
            };
            let req = OpenRequest {
                granted: add | mask::SYNCHRONIZE,
                share_access: share::READ | share::WRITE,
                overwrite: false,
                deletes: false,
                lease: None,
            };
            for _ in 0..MAX_BREAK_ROUNDS {
                match ctx.srv.oplock_before_open(dir, &req) {
                    Admission::MustWait(p) => ctx.srv.oplock_wait(p, &ctx.cancel).await?,
                    _ => break,
                }
            }
        }
        if let Some(file) = replaced {
            for _ in 0..MAX_BREAK_ROUNDS {
                match ctx.srv.lease_handles_before_rename(file, by) {
                    Admission::MustWait(p) => ctx.srv.oplock_wait(p, &ctx.cancel).await?,
                    _ => break,
                }
            }
        }
    }
    break_below(ctx, open, f.is_dir, f.key).await
}

/// The files open below a directory being renamed: their handle leases are broken and waited
/// for (smbtorture smb2.lease.rename_dir_openfile); one that stays open refuses the rename at
/// once. A POSIX open's rename takes POSIX opens below along instead (crate::handlers::
/// set_info), with nothing to break.
async fn break_below(
    ctx: &Ctx<'_>,
    open: &Arc<Open>,
    is_dir: bool,
    key: FileKey,
) -> Result<(), NtStatus> {
    let dir = open.path();
    if !is_dir || dir.is_root() {
        return Ok(());
    }
    let state = ctx.srv.open_state();
    if open.posix && state.opens_below(&dir, key, Below::Posix).is_some() {
        return Ok(());
    }
    // The files below, as they are now: one opened after this scan is not broken, and the
    // rename's own check refuses it.
    let Some(below) = state.opens_below(&dir, key, Below::HandleLeased) else {
        return Ok(());
    };
    let (by, share) = (open.volatile(), &open.tree.share);
    for (file, opens) in below {
        // The same relative path in another share is another file.
        let here = opens
            .iter()
            .filter_map(|id| ctx.srv.lookup_open(*id))
            .any(|o| Arc::ptr_eq(&o.tree.share, share));
        if !here {
            continue;
        }
        if let Admission::MustWait(p) = ctx.srv.lease_handles_before_rename(file, by) {
            ctx.srv.oplock_wait(p, &ctx.cancel).await?;
        }
        if state.open_count_any(file) > 0 {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    Ok(())
}

/// A rename's target as its buffer names it.
struct Target {
    name: String,
    replace: bool,
}

impl Target {
    /// A rename to another name in the share (not of a stream, RootDirectory 0, as the rename
    /// itself checks).
    fn decode(class: FileInfoClass, buf: &[u8]) -> Option<Self> {
        let (name, replace, root_dir) = match class {
            FileInfoClass::RENAME => RenameInfo::decode(buf)
                .ok()
                .map(|r| (r.file_name, r.replace_if_exists, r.root_directory))?,
            FileInfoClass::RENAME_EX => RenameInfoEx::decode(buf)
                .ok()
                .map(|r| (r.file_name.clone(), r.replace_if_exists(), r.root_directory))?,
            _ => return None,
        };
        let name = name.strip_prefix('\\').unwrap_or(&name).to_owned();
        (root_dir == 0 && !name.starts_with(':')).then_some(Self { name, replace })
    }

    /// The directory the target goes into, and the file it would replace: replace-if-exists
    /// asked, the target exists, is not a directory and is another file than the source.
    /// Blocking (it resolves the name).
    fn keys(&self, open: &Open) -> (Option<FileKey>, Option<FileKey>) {
        let Some(f) = open.file().filter(|f| f.stream.is_none()) else {
            return (None, None);
        };
        let Some(vfs) = open.tree.share.vfs.as_ref() else {
            return (None, None);
        };
        let Some(found) = parse_name(&self.name, open.posix)
            .ok()
            .filter(|n| n.stream == Stream::Default && !n.is_root())
            .and_then(|n| lookup(vfs.as_ref(), &n, open.posix).ok())
        else {
            return (None, None);
        };
        let parent = found.path.parent().unwrap_or_else(RelPath::root);
        let parent = vfs.stat(&parent).ok().map(|st| FileKey::of(&st));
        let replaced = found
            .stat
            .filter(|st| self.replace && st.kind != FileKind::Dir)
            .map(|st| FileKey::of(&st))
            .filter(|k| *k != f.key.base());
        (parent, replaced)
    }
}
