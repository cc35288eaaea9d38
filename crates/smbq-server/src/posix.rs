//! The SMB3 POSIX extensions (POSIX-SMB2 / POSIX-FSCC; smbq_wire::posix for the bytes): what a
//! POSIX open reports about a file and its file system. Which requests may use them is
//! decided once per CREATE: the connection negotiated them (smbq_proto `ConnView::posix`),
//! the share offers them (`ShareConfig::posix_extensions`) and the CREATE carries the POSIX
//! create context; such an open is `Open::posix`.
//!
//! Owners and groups are the Unix ids as S-1-22-1-uid and S-1-22-2-gid, the SIDs every other
//! descriptor of this server names them by (crate::security).

use smbq_vfs::{FsStat, Stat};
use smbq_wire::fscc::attributes::IO_REPARSE_TAG_SYMLINK;
use smbq_wire::posix::{FsPosixInfo, PERMISSION_BITS, PosixInfo, PosixStat, file_type, wire_mode};
use smbq_wire::security::{SecurityDescriptor, Sid, info as sinfo};

use crate::{dos, meta};

/// The create context's answer, and the tail of FILE_POSIX_INFORMATION, for a file whose
/// reparse point (crate::reparse) has `reparse_tag` (0: none). A symlink a client set as a
/// reparse point is reported as a symlink (type 2), as Samba reports it; on disk it is a
/// regular file that is never followed.
pub fn stat(st: &Stat, reparse_tag: u32) -> PosixStat {
    let mut mode = wire_mode(st.mode);
    if reparse_tag == IO_REPARSE_TAG_SYMLINK {
        mode = (mode & PERMISSION_BITS) | (file_type::SYMLINK << 12);
    }
    // An id of all ones is no one's ((uid_t)-1, as for the share root's ".."): the NULL SID,
    // as Samba answers.
    let id = |id: u32, sid: fn(u32) -> Sid| {
        if id == u32::MAX {
            Sid::nobody()
        } else {
            sid(id)
        }
    };
    PosixStat {
        nlink: u32::try_from(st.nlink).unwrap_or(u32::MAX),
        reparse_tag,
        mode,
        owner: id(st.uid, Sid::unix_user),
        group: id(st.gid, Sid::unix_group),
    }
}

/// What the share root's ".." entry reports: the share root's own facts but no owner, group,
/// inode or device, since the directory above the share is not the share's to describe (as
/// Samba answers; smb3unix test_share_root_null_sids_fid).
pub fn share_parent(root: &Stat) -> Stat {
    Stat {
        ino: 0,
        dev: 0,
        uid: u32::MAX,
        gid: u32::MAX,
        ..root.clone()
    }
}

/// FILE_POSIX_INFORMATION: the times and attributes every other class reports (`view`), the
/// allocation the server reports, and the inode and device as the kernel has them.
pub fn info(st: &Stat, view: &dos::View, allocation: u64) -> PosixInfo {
    PosixInfo {
        creation_time: view.creation,
        last_access_time: view.last_access,
        last_write_time: view.last_write,
        change_time: view.change,
        end_of_file: meta::end_of_file(st),
        allocation_size: allocation,
        file_attributes: view.attributes,
        inode: st.ino,
        // The device number is 32 bits on the wire (Samba sends st_dev truncated, too).
        device: st.dev as u32,
        stat: stat(st, view.reparse_tag),
    }
}

/// FILE_FS_POSIX_INFORMATION: statvfs's numbers.
pub fn fs_info(fs: &FsStat) -> FsPosixInfo {
    FsPosixInfo {
        optimal_transfer_size: u32::try_from(fs.io_size).unwrap_or(u32::MAX),
        block_size: u32::try_from(fs.block_size).unwrap_or(u32::MAX),
        total_blocks: fs.total_blocks,
        free_blocks: fs.free_blocks,
        user_free_blocks: fs.avail_blocks,
        total_file_nodes: fs.total_files,
        free_file_nodes: fs.free_files,
        fs_identifier: fs.fs_id,
    }
}

/// The mode a chmod through SET_INFO asks for: on a POSIX open, a DACL of exactly one ACE
/// whose trustee is S-1-5-88-3-`mode` (the NFS mode SID; how Samba's client and Linux's cifs
/// client send chmod, Samba check_smb2_posix_chmod_ace), of which the rwx bits are taken.
/// `None` for any other descriptor, which is then set as on any open.
pub fn chmod_of(addl: u32, sd: &SecurityDescriptor) -> Option<u32> {
    if addl & sinfo::DACL_SECURITY_INFORMATION == 0 {
        return None;
    }
    let [ace] = sd.dacl.as_ref()?.aces.as_slice() else {
        return None;
    };
    match ace.sid.sub_authorities.as_slice() {
        [88, 3, mode] if ace.sid.authority_value() == 5 => Some(mode & 0o777),
        _ => None,
    }
}

/// How an object the server never opens is reported in a POSIX listing (POSIX-FSCC; Samba
/// smb3_file_posix_information_init): a symlink it does not follow (dangling, or leading out
/// of the share) with IO_REPARSE_TAG_SYMLINK, a FIFO, socket or device with
/// IO_REPARSE_TAG_NFS; its type is in the mode. `None` for what can be opened.
pub fn special(st: &Stat) -> Option<u32> {
    match st.kind {
        smbq_vfs::FileKind::Symlink => Some(IO_REPARSE_TAG_SYMLINK),
        smbq_vfs::FileKind::Other => Some(smbq_wire::fscc::attributes::IO_REPARSE_TAG_NFS),
        _ => None,
    }
}

/// The owner and group a chown through SET_INFO asks for, on a POSIX open: OWNER and/or GROUP
/// information only, naming S-1-22-1-uid and S-1-22-2-gid (the SIDs this server gives Unix
/// ids). `None` for anything else, which is set as on any open.
pub fn chown_of(addl: u32, sd: &SecurityDescriptor) -> Option<(Option<u32>, Option<u32>)> {
    let wanted = sinfo::OWNER_SECURITY_INFORMATION | sinfo::GROUP_SECURITY_INFORMATION;
    if addl & wanted == 0 || addl & !wanted != 0 {
        return None;
    }
    let uid = match sd.owner.as_ref() {
        Some(o) if addl & sinfo::OWNER_SECURITY_INFORMATION != 0 => Some(o.as_unix_user()?),
        _ => None,
    };
    let gid = match sd.group.as_ref() {
        Some(g) if addl & sinfo::GROUP_SECURITY_INFORMATION != 0 => Some(g.as_unix_group()?),
        _ => None,
    };
    (uid.is_some() || gid.is_some()).then_some((uid, gid))
}

/// The permission bits a POSIX CREATE may give a new file or directory: rwx and the sticky
/// bit; never setuid or setgid (smbq_vfs drops them as well).
pub const CREATE_MODE_BITS: u32 = 0o1777;

/// The set-group-ID bit, which a new directory may inherit from its parent (never from a
/// client).
pub const SETGID: u32 = 0o2000;

/// Whether a READONLY file may be made delete-pending through this open: never through a
/// Windows open (MS-FSA 2.1.5.1.2.1, 2.1.5.15.3: CANNOT_DELETE); through a POSIX open that
/// may change the file's attributes, yes, as unlink(2) ignores the DOS attribute (Samba's
/// can_set_delete_on_close, smb3unix test_delete_read_only_attr).
pub fn may_delete_read_only(posix: bool, granted: u32) -> bool {
    posix && granted & crate::access::mask::FILE_WRITE_ATTRIBUTES != 0
}
