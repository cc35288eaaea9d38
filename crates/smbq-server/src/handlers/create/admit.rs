//! Step 3 of a CREATE, admission: whether the user may open the object and with what access
//! (the share's MaximalAccess, the rules of MS-FSA 2.1.5.1.2.1, the stored descriptor through
//! secure.rs, the mask arithmetic in rights.rs), then `FileStates::admit`: oplock and lease
//! breaks, share modes (MS-FSA 2.1.5.1.2). Admission changes no file; it may send breaks
//! (the CREATE then waits, open.rs) and registers the open's share mode.

use smbq_vfs::{FileKind, RelPath, Stat, VfsFile};
use smbq_wire::NtStatus;

use super::Stop;
use super::intent::CreateIntent;
use super::open::Opener;
use super::rights::{self, Rights};
use super::secure;
use crate::access::{attr, mask, opts};
use crate::errors::map_io_error;
use crate::file_state::oplock::Admission;
use crate::file_state::{FileKey, NewOpen, OpenRequest};
use crate::handlers::Ctx;
use crate::tables::Tree;
use crate::{Server, dos, kernel_rights};

/// MS-SMB2 3.3.5.9: the share and the session admit one more open; its id is reserved
/// (`Server::reserve_open_id`), to be cancelled if the CREATE fails before installing it.
pub(super) fn reserve(ctx: &Ctx<'_>, srv: &Server, tree: &Tree) -> Result<u64, NtStatus> {
    // MS-SMB2 3.3.5.9: Share.FileSecurity grants this user nothing on the share.
    if tree.maximal_access == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if ctx.session.open_count() >= ctx.srv.limits().max_opens_per_session {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    srv.reserve_open_id()
        .ok_or(NtStatus::INSUFFICIENT_RESOURCES)
}

/// MS-FSA 2.1.5.1.2.1: what an open of the existing object `st` may get before its stored
/// security descriptor is read: the kind it must be, the truncation rules, the share's
/// MaximalAccess and the READONLY attribute.
pub(super) fn existing_rights(
    o: &Opener<'_>,
    path: &RelPath,
    st: &Stat,
    truncate: bool,
    read_only: bool,
) -> Result<Rights, NtStatus> {
    let p = o.intent;
    let is_dir = st.kind == FileKind::Dir;
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
    if read_only && truncate {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let mut maximal = rights::maximal(o.tree.maximal_access, read_only);
    // Per-user identities (crate::unix_identity): DELETE is exercised at close, long after
    // this, so the kernel's verdict on removing the file is asked now, as the user.
    if crate::unix_identity::active()
        && maximal & mask::DELETE != 0
        && !path.is_root()
        && !o.vfs.may_unlink(path).map_err(|e| map_io_error(&e))?
    {
        maximal &= !mask::DELETE;
    }
    if truncate {
        rights::check_truncate(p.disposition, maximal, o.tree.read_only())?;
    }
    let granted = rights::grant(p.desired, maximal)?;
    check_delete_on_close(p, granted, read_only, path)?;
    Ok(Rights {
        granted,
        maximal,
        read_only_withheld: rights::withheld(o.tree.maximal_access, read_only),
    })
}

/// MS-FSA 2.1.5.1.2.1: an existing file's stored security descriptor narrows what the open
/// may get (the tree and READONLY bounds in `maximal` still hold), and so does the kernel
/// for a per-user identity (crate::kernel_rights: changes smbq makes as root). Returns the
/// new granted access and maximal access; bits the POSIX open already refused stay refused.
pub(super) fn apply_stored_sd(
    o: &Opener<'_>,
    path: &RelPath,
    (file, object): (&dyn VfsFile, kernel_rights::Object),
    rights: Rights,
    read_only: bool,
) -> Result<Rights, NtStatus> {
    let p = o.intent;
    let Rights {
        granted,
        maximal,
        read_only_withheld,
    } = rights;
    // What READONLY withholds is narrowed like the rest, for the MaxAc it is reported in.
    let all = maximal | read_only_withheld;
    let all = secure::existing_maximal(o.vfs, path, file, &p.token, all, o.tree.maximal_access);
    let all = kernel_rights::narrow(file, object, all).map_err(|e| map_io_error(&e))?;
    let (narrowed, withheld) = (all & !read_only_withheld, all & read_only_withheld);
    if narrowed == maximal && withheld == read_only_withheld {
        return Ok(rights);
    }
    let refused = rights::grant(p.desired, maximal)? & !granted;
    let granted = rights::grant(rights::lenient_execute(p.desired), narrowed)? & !refused;
    check_delete_on_close(p, granted, read_only, path)?;
    Ok(Rights {
        granted,
        maximal: narrowed,
        read_only_withheld: withheld,
    })
}

/// MS-FSA 2.1.5.1.2: overwriting or superseding a file whose stored attributes include HIDDEN
/// or SYSTEM must ask for them again, else STATUS_ACCESS_DENIED (smb2.dosmode). Only stored
/// attributes count: the HIDDEN a dot-name shows is not the file's own.
pub(super) fn check_overwrite_attributes(
    file: &dyn VfsFile,
    requested: u32,
) -> Result<(), NtStatus> {
    let stored = dos::DosInfo::read(file).attributes.unwrap_or(0);
    for bit in [attr::HIDDEN, attr::SYSTEM] {
        if stored & bit != 0 && requested & bit == 0 {
            return Err(NtStatus::ACCESS_DENIED);
        }
    }
    Ok(())
}

/// MS-SMB2 3.3.5.9: DELETE_ON_CLOSE needs DELETE access; MS-FSA 2.1.5.1.2.1: not on a
/// read-only file (CANNOT_DELETE; a POSIX open may, crate::posix::may_delete_read_only), nor
/// on the share root.
pub(super) fn check_delete_on_close(
    p: &CreateIntent,
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
    let posix = p.contexts.posix_mode.is_some();
    let read_only = read_only && !crate::posix::may_delete_read_only(posix, granted);
    if read_only || path.is_root() {
        return Err(NtStatus::CANNOT_DELETE);
    }
    Ok(())
}

/// The share-mode entry of this open on the object at `path`.
pub(super) fn share_entry<'p>(
    o: &Opener<'_>,
    path: &'p RelPath,
    is_dir: bool,
    rights: Rights,
    truncate: bool,
) -> NewOpen<'p> {
    NewOpen {
        open_id: o.id,
        checked: checked_access(o.intent, rights.granted, truncate),
        access: rights.granted,
        share_access: o.intent.share_access,
        path,
        is_dir,
        posix: o.intent.contexts.posix_mode.is_some(),
        restoring: false,
    }
}

/// MS-FSA 2.1.5.1.2: breaks the oplocks this open conflicts with before it is admitted or
/// truncates (not for an object this CREATE made, which nobody else can hold), then checks
/// share modes and registers it (crate::share_mode).
pub(super) fn admit(
    o: &Opener<'_>,
    key: FileKey,
    new: &NewOpen<'_>,
    truncate: bool,
    made_here: bool,
) -> Result<(), Stop> {
    // MS-SMB2 3.3.5.9.8: a lease key in use for another file (or stream) is refused
    // (smbtorture smb2.lease.request).
    if let Some(ask) = &o.intent.lease
        && o.srv.open_state().lease_elsewhere(&ask.key, key)
    {
        return Err(Stop::Failed(NtStatus::INVALID_PARAMETER));
    }
    if !made_here {
        // MS-SMB2 3.3.5.9: a disconnected persistent open keeps the file for its client.
        use crate::durable::persistent;
        let parked = o.srv.durable_store();
        if persistent::keeps_file_at(new.path.is_root())
            && persistent::refuses(parked, o.srv.open_state(), key, new.checked)
        {
            return Err(Stop::Failed(NtStatus::FILE_NOT_AVAILABLE));
        }
        let open = OpenRequest {
            granted: new.checked,
            share_access: new.share_access,
            overwrite: truncate,
            deletes: o.intent.options & opts::DELETE_ON_CLOSE != 0,
            lease: o.intent.lease.as_ref(),
        };
        match o.srv.oplock_before_open(key, &open) {
            Admission::Granted => {}
            Admission::Conflict(e) => return Err(Stop::Failed(e)),
            Admission::MustWait(pending) => return Err(Stop::MustWait(pending)),
        }
    }
    o.srv.open_state().admit(key, new)?;
    Ok(())
}

/// The access the share-mode check sees: a truncating open also writes (and a supersede
/// deletes), so an open that denies write sharing keeps its data, while the handle itself is
/// granted only what it asked for (MS-FSA 2.1.5.1.2.2 with the rights of
/// [`rights::truncate_needs`]).
fn checked_access(p: &CreateIntent, granted: u32, truncate: bool) -> u32 {
    if truncate {
        granted | rights::truncate_needs(p.disposition)
    } else {
        granted
    }
}
