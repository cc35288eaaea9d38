//! The access an open is granted (MS-SMB2 3.3.5.9, MS-FSA 2.1.5.1.2.1): generic rights mapped,
//! MAXIMUM_ALLOWED expanded, everything bounded by the tree's MaximalAccess and the file's
//! read-only attribute.

use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition;

use crate::access::{map_generic, mask};

/// Rights a READONLY file never grants (MS-FSA 2.1.5.1.2.1: FILE_WRITE_DATA, FILE_APPEND_DATA,
/// which is FILE_ADD_SUBDIRECTORY, and FILE_DELETE_CHILD); it may still be opened for DELETE
/// or attributes.
const READONLY_DENIED: u32 =
    mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA | mask::FILE_DELETE_CHILD;

/// What an open is granted, and the most it could have been.
#[derive(Clone, Copy, Debug)]
pub struct Rights {
    pub granted: u32,
    /// The most the open may be granted.
    pub maximal: u32,
    /// What the READONLY attribute alone keeps out of `maximal` (see [`Rights::reported`]).
    pub read_only_withheld: u32,
}

impl Rights {
    /// The MaximalAccess a MxAc response reports (MS-SMB2 2.2.14.2.5): the access the share
    /// and the security descriptor give, READONLY or not. Windows reports the full access of
    /// a read-only file there and refuses the writes at open (smbtorture 4.25
    /// smb2.maximum_allowed.read_only_file, which Samba's commit 878e7975de1 says passes
    /// against Windows).
    pub fn reported(&self) -> u32 {
        self.maximal | self.read_only_withheld
    }
}

/// What READONLY alone withholds from an open bounded by `tree_max`.
pub fn withheld(tree_max: u32, file_read_only: bool) -> u32 {
    if file_read_only {
        tree_max & READONLY_DENIED
    } else {
        0
    }
}

/// The most this file may be opened with.
pub fn maximal(tree_max: u32, file_read_only: bool) -> u32 {
    if file_read_only {
        tree_max & !READONLY_DENIED
    } else {
        tree_max
    }
}

/// With MAXIMUM_ALLOWED, GENERIC_EXECUTE is satisfied without FILE_EXECUTE (which it maps
/// to): smbtorture's smb2.maximum_allowed, written against Windows, expects a file whose DACL
/// grants only FILE_GENERIC_READ to open for MAXIMUM_ALLOWED | GENERIC_EXECUTE, while an
/// explicit FILE_EXECUTE is refused. Only what is requested changes; nothing more is granted.
pub fn lenient_execute(desired: u32) -> u32 {
    if desired & mask::MAXIMUM_ALLOWED != 0
        && desired & mask::GENERIC_EXECUTE != 0
        && desired & mask::FILE_EXECUTE == 0
    {
        (desired & !mask::GENERIC_EXECUTE) | (mask::FILE_GENERIC_EXECUTE & !mask::FILE_EXECUTE)
    } else {
        desired
    }
}

/// Rights an overwrite or supersede needs whether or not the client asked for them. MS-SMB2
/// 3.3.5.9 hands the disposition to the object store, and Windows' file systems add the right
/// the destruction needs to the access they check (MS-FSA 2.1.5.1.2.1 and the IFS notes on
/// FILE_SUPERSEDE/FILE_OVERWRITE in IRP_MJ_CREATE): FILE_WRITE_DATA for an overwrite, DELETE
/// for a supersede. A supersede also throws the data away, so it needs FILE_WRITE_DATA too, as
/// in Samba (the stricter of the two reference servers). Without this a read-only open could
/// empty any file it may read.
pub fn truncate_needs(disposition: CreateDisposition) -> u32 {
    match disposition {
        CreateDisposition::SUPERSEDE => mask::FILE_WRITE_DATA | mask::DELETE,
        CreateDisposition::OVERWRITE | CreateDisposition::OVERWRITE_IF => mask::FILE_WRITE_DATA,
        _ => 0,
    }
}

/// Refuses a truncating open of an existing file unless `maximal` (the share's MaximalAccess,
/// the READONLY attribute and the stored DACL folded in) holds what [`truncate_needs`] says,
/// and always on a read-only share.
pub fn check_truncate(
    disposition: CreateDisposition,
    maximal: u32,
    share_read_only: bool,
) -> Result<(), NtStatus> {
    if share_read_only || truncate_needs(disposition) & !maximal != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// GrantedAccess for `desired`, or ACCESS_DENIED when it asks for more than `maximal`.
pub fn grant(desired: u32, maximal: u32) -> Result<u32, NtStatus> {
    let wanted = map_generic(desired & !mask::MAXIMUM_ALLOWED);
    if wanted & !maximal != 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if desired & mask::MAXIMUM_ALLOWED != 0 {
        Ok(wanted | maximal)
    } else {
        Ok(wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RO_SHARE: u32 = mask::FILE_GENERIC_READ | mask::FILE_GENERIC_EXECUTE;

    #[test]
    fn truncation_needs_write_data_and_supersede_delete_too() {
        let all = mask::FILE_ALL_ACCESS;
        let read = mask::FILE_GENERIC_READ;
        for d in [
            CreateDisposition::OVERWRITE,
            CreateDisposition::OVERWRITE_IF,
        ] {
            assert_eq!(check_truncate(d, all, false), Ok(()));
            assert_eq!(check_truncate(d, read, false), Err(NtStatus::ACCESS_DENIED));
            assert_eq!(check_truncate(d, all, true), Err(NtStatus::ACCESS_DENIED));
            assert_eq!(
                check_truncate(d, read | mask::FILE_WRITE_DATA, false),
                Ok(())
            );
        }
        let s = CreateDisposition::SUPERSEDE;
        assert_eq!(check_truncate(s, all, false), Ok(()));
        assert_eq!(
            check_truncate(s, read | mask::FILE_WRITE_DATA, false),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(
            check_truncate(s, read | mask::DELETE, false),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(truncate_needs(CreateDisposition::OPEN_IF), 0);
        assert_eq!(check_truncate(CreateDisposition::OPEN, read, false), Ok(()));
    }

    /// MS-FSA 2.1.5.1.2.1 with Windows' MxAc: a read-only file opened for MAXIMUM_ALLOWED
    /// gets no write, append or delete-child right, and MxAc still reports them.
    #[test]
    fn a_read_only_file_reports_full_access_and_grants_no_writes() {
        let all = mask::FILE_ALL_ACCESS;
        let r = Rights {
            granted: grant(mask::MAXIMUM_ALLOWED, maximal(all, true)).unwrap(),
            maximal: maximal(all, true),
            read_only_withheld: withheld(all, true),
        };
        assert_eq!(r.reported(), all);
        let writes = mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA | mask::FILE_DELETE_CHILD;
        assert_eq!(r.granted, all & !writes);
        assert_eq!(withheld(all, false), 0);
        assert_eq!(
            withheld(RO_SHARE, true),
            0,
            "a read-only share withholds them already"
        );
    }

    #[test]
    fn grants_follow_the_bounds() {
        let all = mask::FILE_ALL_ACCESS;
        assert_eq!(grant(mask::GENERIC_READ, all), Ok(mask::FILE_GENERIC_READ));
        assert_eq!(grant(mask::MAXIMUM_ALLOWED, all), Ok(all));
        assert_eq!(grant(mask::MAXIMUM_ALLOWED, RO_SHARE), Ok(RO_SHARE));
        assert_eq!(
            grant(mask::GENERIC_WRITE, RO_SHARE),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(grant(mask::DELETE, RO_SHARE), Err(NtStatus::ACCESS_DENIED));
        let ro_file = maximal(all, true);
        assert_eq!(
            grant(mask::FILE_WRITE_DATA, ro_file),
            Err(NtStatus::ACCESS_DENIED)
        );
        assert_eq!(
            grant(mask::DELETE | mask::FILE_WRITE_ATTRIBUTES, ro_file).map(|g| g & mask::DELETE),
            Ok(mask::DELETE)
        );
        let read_only_dacl = mask::FILE_GENERIC_READ;
        let ma_ge = mask::MAXIMUM_ALLOWED | mask::GENERIC_EXECUTE;
        assert_eq!(
            grant(lenient_execute(ma_ge), read_only_dacl),
            Ok(read_only_dacl)
        );
        assert_eq!(
            grant(lenient_execute(mask::GENERIC_EXECUTE), read_only_dacl),
            Err(NtStatus::ACCESS_DENIED),
            "without MAXIMUM_ALLOWED GENERIC_EXECUTE needs FILE_EXECUTE"
        );
        assert_eq!(
            grant(
                lenient_execute(mask::MAXIMUM_ALLOWED | mask::FILE_EXECUTE),
                read_only_dacl
            ),
            Err(NtStatus::ACCESS_DENIED)
        );
    }
}
