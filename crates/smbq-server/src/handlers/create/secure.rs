//! The security-descriptor side of CREATE: access to an existing file with a stored
//! descriptor (MS-FSA 2.1.5.1.2.1), the parent's say over new children, and the descriptor a
//! new file or directory starts with (MS-DTYP 2.5.3.4).

use smbq_vfs::{OpenOptions, RelPath, Stat, Vfs, VfsFile};
use smbq_wire::NtStatus;
use smbq_wire::security::{SecurityDescriptor, Sid};

use crate::access::mask;
use crate::errors::map_io_error;
use crate::security::{self, Token, check, inherit, store};

/// The stored descriptor of `path`'s parent directory, if it has one.
pub fn parent_sd(vfs: &dyn Vfs, path: &RelPath) -> Option<SecurityDescriptor> {
    let parent = path.parent()?;
    let opts = OpenOptions {
        directory: Some(true),
        ..Default::default()
    };
    let dir = vfs.open(&parent, &opts).ok()?.file;
    store::read(dir.as_ref())
}

/// What the parent directory grants `token` (a parent without a stored descriptor grants what
/// the share grants), for the rights a child gets through it.
fn parent_access(vfs: &dyn Vfs, path: &RelPath, token: &Token, tree_max: u32) -> u32 {
    match parent_sd(vfs, path) {
        Some(sd) => check::maximal_access(&sd, token),
        None => tree_max,
    }
}

/// The most an open of an existing file may get once its stored descriptor is applied:
/// `maximal` (share and READONLY bounds) narrowed to what the DACL grants, plus DELETE and
/// FILE_READ_ATTRIBUTES where the parent passes them on. Without a stored descriptor,
/// `maximal` unchanged.
pub fn existing_maximal(
    vfs: &dyn Vfs,
    path: &RelPath,
    file: &dyn VfsFile,
    token: &Token,
    maximal: u32,
    tree_max: u32,
) -> u32 {
    let Some(sd) = store::read(file) else {
        return maximal;
    };
    let mut allowed = check::maximal_access(&sd, token);
    // MS-FSA 2.1.5.1.2.1 (access to an existing file): DELETE through the parent's
    // FILE_DELETE_CHILD, and FILE_READ_ATTRIBUTES through its FILE_LIST_DIRECTORY (whoever
    // can list a directory sees its entries' attributes; smbtorture smb2.acls.GENERIC).
    let through_parent = mask::DELETE | mask::FILE_READ_ATTRIBUTES;
    if allowed & through_parent != through_parent {
        let parent = parent_access(vfs, path, token, tree_max);
        if parent & mask::FILE_DELETE_CHILD != 0 {
            allowed |= mask::DELETE;
        }
        if parent & mask::FILE_LIST_DIRECTORY != 0 {
            allowed |= mask::FILE_READ_ATTRIBUTES;
        }
    }
    maximal & allowed
}

/// May `token` add a file (or a subdirectory) to the directory holding `path`? Only a parent
/// with a stored descriptor can say no.
pub fn check_parent_allows_create(
    parent: Option<&SecurityDescriptor>,
    token: &Token,
    is_dir: bool,
) -> Result<(), NtStatus> {
    let Some(sd) = parent else {
        return Ok(());
    };
    let need = if is_dir {
        mask::FILE_ADD_SUBDIRECTORY
    } else {
        mask::FILE_ADD_FILE
    };
    if check::maximal_access(sd, token) & need == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// Validates a SecD create context's descriptor before anything is created: no SACL (no
/// session holds SeSecurityPrivilege), encodable.
pub fn check_creator_sd(sd: &SecurityDescriptor) -> Result<(), NtStatus> {
    if sd.sacl.is_some() {
        return Err(NtStatus::PRIVILEGE_NOT_HELD);
    }
    if !sd.is_encodable() {
        return Err(NtStatus::INVALID_SECURITY_DESCR);
    }
    Ok(())
}

/// Gives a just-created object its descriptor: the creator's (owner checked against the token
/// and the file's Unix owner), or what the parent passes on. When neither applies no
/// descriptor is stored, so the file keeps its POSIX view, and its creator is recorded as its
/// owner (crate::security::store).
pub fn apply_new(
    file: &dyn VfsFile,
    st: &Stat,
    creator: Option<&SecurityDescriptor>,
    parent: Option<&SecurityDescriptor>,
    is_dir: bool,
    token: &Token,
) -> Result<(), NtStatus> {
    if let Some(owner) = creator.and_then(|c| c.owner.as_ref())
        && !security::may_assign_owner(token, owner, &Sid::unix_user(st.uid))
    {
        return Err(security::INVALID_OWNER);
    }
    match inherit::new_object_sd(creator, parent, is_dir, token) {
        Some(sd) => store::write(file, &sd).map_err(|e| map_io_error(&e)),
        // Best effort, like the DOS attributes: without user xattrs the POSIX owner shows.
        None => {
            if let Err(e) = store::write_creator(file, st, &token.user) {
                tracing::debug!(error = %e, "creator not recorded");
            }
            Ok(())
        }
    }
}
