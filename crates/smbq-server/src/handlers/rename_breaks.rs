//! What a rename breaks before it runs, besides the source's own leases (set_info.rs,
//! `wait_for_handle_breaks`), as MS-FSA 2.1.4.12 has Windows check oplocks on a rename:
//!
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

use smbq_vfs::FileKind;
use smbq_wire::NtStatus;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::file_info::{RenameInfo, RenameInfoEx};

use super::{Ctx, blocking};
use crate::file_state::FileKey;
use crate::file_state::oplock::{Admission, MAX_BREAK_ROUNDS};
use crate::path::{Stream, parse_smb_name, resolve};
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
    let by = open.volatile();
    let (o, b) = (open.clone(), buf.to_vec());
    if let Some(target) = blocking(move || Ok(replaced_file(&o, class, &b))).await? {
        for _ in 0..MAX_BREAK_ROUNDS {
            match ctx.srv.lease_handles_before_rename(target, by) {
                Admission::MustWait(p) => ctx.srv.oplock_wait(p, &ctx.cancel).await?,
                _ => break,
            }
        }
    }
    if !f.is_dir {
        return Ok(());
    }
    // The files below, as they are now: one opened after this scan is not broken, and the
    // rename's own check refuses it.
    let Some(below) = ctx.srv.files().handle_leased_below(&open.path(), f.key) else {
        return Ok(());
    };
    for key in below {
        if let Admission::MustWait(p) = ctx.srv.lease_handles_before_rename(key, by) {
            ctx.srv.oplock_wait(p, &ctx.cancel).await?;
        }
        if ctx.srv.files().open_count_any(key) > 0 {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    Ok(())
}

/// The file a rename would replace: replace-if-exists asked, the target exists, is not a
/// directory and is another file than the source. Blocking (it resolves the name).
fn replaced_file(open: &Open, class: FileInfoClass, buf: &[u8]) -> Option<FileKey> {
    let (name, replace, root_dir) = match class {
        FileInfoClass::RENAME => RenameInfo::decode(buf)
            .ok()
            .map(|r| (r.file_name, r.replace_if_exists, r.root_directory))?,
        FileInfoClass::RENAME_EX => RenameInfoEx::decode(buf)
            .ok()
            .map(|r| (r.file_name.clone(), r.replace_if_exists(), r.root_directory))?,
        _ => return None,
    };
    let f = open.file()?;
    if !replace || root_dir != 0 || f.stream.is_some() {
        return None;
    }
    let target = name.strip_prefix('\\').unwrap_or(&name);
    if target.starts_with(':') {
        return None;
    }
    let smb_name = parse_smb_name(target).ok()?;
    if smb_name.stream != Stream::Default || smb_name.is_root() {
        return None;
    }
    let vfs = open.tree.share.vfs.as_ref()?;
    let st = resolve(vfs.as_ref(), &smb_name).ok()?.stat?;
    let key = FileKey::of(&st);
    (st.kind != FileKind::Dir && key != f.key.base()).then_some(key)
}
