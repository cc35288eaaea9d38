//! Windows views of POSIX metadata: file attributes and FILETIMEs from a [`Stat`]
//! (MS-FSCC 2.6 attributes, 2.1.1 FILETIME).

use smbq_vfs::{FileKind, Stat, Timespec};
use smbq_wire::filetime;

use crate::access::attr;

pub fn ft(t: Timespec) -> u64 {
    filetime::from_unix(t.sec, t.nsec)
}

/// CreationTime: the birth time where the filesystem keeps one, else the older of mtime and
/// ctime (never later than LastWriteTime, which Windows clients assume).
pub fn creation_time(st: &Stat) -> u64 {
    match st.btime {
        Some(b) => ft(b),
        None => ft(st.mtime.min(st.ctime)),
    }
}

/// Attributes derived from the mode and name: DIRECTORY for directories, ARCHIVE for files,
/// READONLY for files without any write permission bit, HIDDEN for dot-names (Samba's
/// "hide dot files").
pub fn attributes(st: &Stat, name: &str) -> u32 {
    let mut a = match st.kind {
        FileKind::Dir => attr::DIRECTORY,
        _ => attr::ARCHIVE,
    };
    if st.kind != FileKind::Dir && st.mode & 0o222 == 0 {
        a |= attr::READONLY;
    }
    if name.starts_with('.') && name != "." && name != ".." {
        a |= attr::HIDDEN;
    }
    a
}

pub fn is_read_only(st: &Stat) -> bool {
    st.kind != FileKind::Dir && st.mode & 0o222 == 0
}

/// AllocationSize as Windows reports it: the size rounded up to 4 KiB clusters, or more
/// while a client's preallocation (`requested`, MS-FSA Stream.AllocationSize, kept by
/// `crate::file_state::FileStates` until the last close as NTFS trims it then) is larger.
///
/// `st_blocks` is not used: ext4 counts a file's external xattr block (DOS attributes, EAs,
/// named streams, security descriptors) there, which would make an empty file with EAs
/// report a cluster (smbtorture smb2.setinfo); sparse files report their full size.
pub fn allocation_with(st: &Stat, requested: Option<u64>) -> u64 {
    if st.kind == FileKind::Dir {
        return 0;
    }
    let rounded = round_cluster(st.size);
    rounded.max(requested.map_or(0, round_cluster))
}

pub fn allocation_size(st: &Stat) -> u64 {
    allocation_with(st, None)
}

pub fn round_cluster(v: u64) -> u64 {
    v.div_ceil(4096).saturating_mul(4096)
}

pub fn end_of_file(st: &Stat) -> u64 {
    if st.kind == FileKind::Dir { 0 } else { st.size }
}
