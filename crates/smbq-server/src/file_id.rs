//! The 64-bit file id clients see: FileInternalInformation.IndexNumber (MS-FSCC 2.4.27, also
//! in FileAllInformation), FileId in the Id* directory classes (MS-FSCC 2.4.22 and its
//! siblings), FileIdInformation (2.4.26), the QFid create context (MS-SMB2 2.2.14.2.9) and
//! the object id of FSCTL_GET_OBJECT_ID. MS-FSA 2.1.1.3 (File.FileId64) makes it unique on
//! the volume, and NTFS never hands the id of a deleted file to a new one (the sequence
//! number in its file reference). Clients rely on that: a changed id is how they see that a
//! name now refers to another file (pike's queryondiskid `test_qfid_same_file_seq_delete`).
//!
//! The inode number cannot be that id, because ext4 and XFS give a deleted file's inode to
//! the next file created. The inode generation (FS_IOC_GETVERSION) would tell the two apart,
//! but that ioctl needs `unsafe` (rustix wraps only other ioctls safely) and does not exist
//! on every filesystem; statx has no generation field.
//!
//! So the id is made here and kept with the file:
//! - A file or directory this server creates is stamped with a new id from [`FileIds`],
//!   written in the same `user.smbq.dos` xattr as its DOS attributes (crate::dos), together
//!   with its inode number. Every open and QUERY_INFO reads that xattr anyway, so reporting
//!   the id there costs no extra syscall; creating a file costs one xattr write (none more
//!   when it gets DOS attributes), and a listing one `lgetxattr` for each entry that has the
//!   xattr (it lists every entry's xattr names already). A separate xattr would have cost
//!   a read per open or per QUERY_INFO instead.
//! - [`reported`] answers the stamp when it belongs to this inode, and the inode number
//!   otherwise: files made outside the server (or on a filesystem without user xattrs) keep
//!   the inode, as before, and a copy of the xattr on another inode (`cp -a`, a restore)
//!   does not give a second file the same id.
//! - Stamps have bit 62 set and inode numbers (far below 2^62 on every Linux filesystem)
//!   do not, so the two kinds never collide. The stamp moves with the inode: it is the same
//!   across opens, renames, server restarts, in QUERY_INFO and in listings, and a named
//!   stream reports its file's id (smbtorture smb2.fileid.fileid). Hard links (refused by
//!   default) share their inode's id.
//!
//! New ids come from the wall clock in nanoseconds, forced upwards within the process (one
//! sequence for all shares, so no two creations here ever get the same one) and kept above a
//! floor stored on each share root (`user.smbq.fileid`, moved one minute ahead at a time),
//! so a clock set back (a board without a real-time clock, booting before NTP) cannot hand
//! out an id again after a restart. The clock, rather than a plain counter, is the base so
//! that losing the floor (a share root without xattrs, a restored root) still leaves new ids
//! above all earlier ones while the clock has not gone back, and a second server on the same
//! tree repeats one only by creating in the very same nanosecond. Ids stay below 2^62 until
//! the year 2116.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use smbq_vfs::{OpenOptions, RelPath, Stat, Vfs};

use crate::dos::{DosInfo, IdStamp};

/// Marks a stamped id, keeping it apart from the inode numbers reported for other files.
pub const STAMPED: u64 = 1 << 62;

/// The share root's xattr holding the floor (`user.` is added by the VFS).
const FLOOR_XATTR: &str = "smbq.fileid";

/// How far ahead of the newest id the stored floor is moved: one root xattr write per
/// minute of creating files, at most.
const RESERVE: u64 = 60_000_000_000;

/// The newest stamp handed out by this process, for all shares.
static LAST: AtomicU64 = AtomicU64::new(0);

/// The id a client sees for the file whose metadata is `st` and whose `user.smbq.dos` xattr
/// reads as `dos`: its stamp when it was given to this very inode, else the inode number.
pub fn reported(st: &Stat, dos: &DosInfo) -> u64 {
    match dos.file_id {
        Some(IdStamp { ino, id }) if ino == st.ino && id & STAMPED != 0 => id,
        _ => st.ino,
    }
}

/// Hands out the ids of one share's new files.
#[derive(Debug, Default)]
pub struct FileIds {
    /// `None` until the share root's floor has been read.
    floor: Mutex<Option<Floor>>,
}

#[derive(Debug, Clone, Copy)]
struct Floor {
    /// The floor found at the first use: earlier runs handed out only ids below it.
    found: u64,
    /// The floor stored now: this run has handed out only ids below it.
    stored: u64,
}

impl FileIds {
    /// A new id for a file of the share served by `vfs`, above every id handed out before,
    /// by this process or (through the share root's floor) an earlier one.
    pub fn next(&self, vfs: &dyn Vfs) -> u64 {
        let mut guard = self.floor.lock();
        let floor = guard.get_or_insert_with(|| {
            let found = read_floor(vfs);
            Floor {
                found,
                stored: found,
            }
        });
        let stamp = bump(now_ns(), floor.found);
        if stamp >= floor.stored {
            // Stored before the id is handed out, so a crash cannot lose it. Best effort:
            // where it cannot be stored, the clock alone keeps ids apart.
            floor.stored = stamp.saturating_add(RESERVE);
            write_floor(vfs, floor.stored);
        }
        STAMPED | (stamp & (STAMPED - 1))
    }
}

/// The next stamp: after the last one, not before `now`, not below `floor`.
fn bump(now: u64, floor: u64) -> u64 {
    let mut prev = LAST.load(Ordering::Relaxed);
    loop {
        let next = now.max(floor).max(prev.saturating_add(1));
        match LAST.compare_exchange_weak(prev, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(p) => prev = p,
        }
    }
}

fn now_ns() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn root(vfs: &dyn Vfs) -> Option<Box<dyn smbq_vfs::VfsFile>> {
    let opts = OpenOptions {
        directory: Some(true),
        ..Default::default()
    };
    vfs.open(&RelPath::root(), &opts).ok().map(|o| o.file)
}

/// The stored floor; 0 when there is none (or it is unreadable).
fn read_floor(vfs: &dyn Vfs) -> u64 {
    root(vfs)
        .and_then(|r| r.get_xattr(FLOOR_XATTR).ok().flatten())
        .and_then(|v| <[u8; 8]>::try_from(v.as_slice()).ok())
        .map_or(0, u64::from_le_bytes)
}

fn write_floor(vfs: &dyn Vfs, floor: u64) {
    if let Some(r) = root(vfs) {
        let _ = r.set_xattr(FLOOR_XATTR, &floor.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_vfs::{FileKind, MemVfs, Timespec};

    fn stat(ino: u64) -> Stat {
        Stat {
            kind: FileKind::File,
            size: 0,
            alloc_size: 0,
            nlink: 1,
            ino,
            dev: 1,
            mode: 0o100644,
            uid: 0,
            gid: 0,
            atime: Timespec::new(1, 0),
            mtime: Timespec::new(1, 0),
            ctime: Timespec::new(1, 0),
            btime: None,
        }
    }

    fn dos(stamp: Option<IdStamp>) -> DosInfo {
        DosInfo {
            file_id: stamp,
            ..Default::default()
        }
    }

    #[test]
    fn a_stamp_counts_only_on_its_own_inode() {
        let id = STAMPED | 99;
        assert_eq!(reported(&stat(7), &dos(None)), 7);
        assert_eq!(reported(&stat(7), &dos(Some(IdStamp { ino: 7, id }))), id);
        // The xattr copied onto another inode: that file is not the stamped one.
        assert_eq!(reported(&stat(8), &dos(Some(IdStamp { ino: 7, id }))), 8);
        // A value without the mark is not one of ours; it could equal an inode number.
        let bare = Some(IdStamp { ino: 7, id: 99 });
        assert_eq!(reported(&stat(7), &dos(bare)), 7);
    }

    #[test]
    fn ids_increase_and_respect_the_stored_floor() {
        let vfs = MemVfs::new();
        let ids = FileIds::default();
        let a = ids.next(&vfs);
        let b = ids.next(&vfs);
        assert!(a & STAMPED != 0 && b > a, "{a:#x} {b:#x}");
        let floor = read_floor(&vfs);
        assert!(
            floor > b & (STAMPED - 1),
            "the floor is ahead of what was handed out"
        );

        // A restart (a new allocator on the same share) starts above the stored floor, even
        // with a clock set back by a day.
        let restarted = FileIds::default().next(&vfs);
        assert!(
            restarted & (STAMPED - 1) >= floor,
            "{restarted:#x} {floor:#x}"
        );
        let day = 86_400_000_000_000;
        assert!(bump(now_ns().saturating_sub(day), floor) >= floor);

        // Another share (its own floor) and the same process: never the same id again.
        let other = MemVfs::new();
        let c = FileIds::default().next(&other);
        assert!(c > restarted, "{c:#x} {restarted:#x}");
    }
}
