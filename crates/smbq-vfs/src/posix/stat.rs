//! `statx` results turned into [`Stat`]. statx (not fstat) because it reports birth time.

use crate::error::errno;
use crate::{FileKind, Stat, Timespec};
use rustix::fs::{AtFlags, FileType, StatxFlags, StatxTimestamp};
use std::io;
use std::os::fd::AsFd;

const MASK: StatxFlags = StatxFlags::BASIC_STATS.union(StatxFlags::BTIME);

/// Stat of the object `fd` refers to (works on `O_PATH` fds).
pub(crate) fn fstatx(fd: impl AsFd) -> io::Result<Stat> {
    statx_at(fd, c"", AtFlags::EMPTY_PATH)
}

/// Stat of `name` in directory `dir`, without following a final symlink.
pub(crate) fn lstatx_in(dir: impl AsFd, name: &str) -> io::Result<Stat> {
    statx_at(dir, name, AtFlags::SYMLINK_NOFOLLOW)
}

fn statx_at<P: rustix::path::Arg>(dir: impl AsFd, path: P, flags: AtFlags) -> io::Result<Stat> {
    let x =
        rustix::fs::statx(dir, path, flags | AtFlags::STATX_SYNC_AS_STAT, MASK).map_err(errno)?;
    let mode = u32::from(x.stx_mode);
    let kind = match FileType::from_raw_mode(mode) {
        FileType::RegularFile => FileKind::File,
        FileType::Directory => FileKind::Dir,
        FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    };
    let has_btime = StatxFlags::from_bits_retain(x.stx_mask).contains(StatxFlags::BTIME);
    Ok(Stat {
        kind,
        size: x.stx_size,
        alloc_size: x.stx_blocks.saturating_mul(512),
        nlink: u64::from(x.stx_nlink),
        ino: x.stx_ino,
        dev: rustix::fs::makedev(x.stx_dev_major, x.stx_dev_minor),
        mode,
        uid: x.stx_uid,
        gid: x.stx_gid,
        atime: ts(x.stx_atime),
        mtime: ts(x.stx_mtime),
        ctime: ts(x.stx_ctime),
        btime: has_btime.then(|| ts(x.stx_btime)),
    })
}

fn ts(t: StatxTimestamp) -> Timespec {
    Timespec {
        sec: t.tv_sec,
        nsec: t.tv_nsec.min(999_999_999),
    }
}
