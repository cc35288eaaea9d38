//! `Vfs::open` for the POSIX backend: creation modes, directory rules, and the checks made
//! on the opened object before any of its data is touched.

use super::file::PosixFile;
use super::stat::fstatx;
use super::{Share, openat2_confined};
use crate::error::{VfsError, errno};
use crate::types::MODE_MASK;
use crate::{CreateMode, FileKind, OpenOptions, Opened, RelPath, Stat};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

/// How often create-or-open retries when the file vanishes or appears between attempts.
const CREATE_RACE_RETRIES: usize = 8;

pub(super) fn open(share: &Arc<Share>, path: &RelPath, opts: &OpenOptions) -> io::Result<Opened> {
    let (fd, created) = if opts.directory == Some(true) {
        open_dir(share, path, opts)?
    } else {
        open_file(share, path, opts)?
    };
    let st = fstatx(&fd)?;
    check(share, &st, opts)?;
    if opts.create.truncates() && !created {
        // Only now, after the hard-link check: O_TRUNC would have cut a linked file first.
        rustix::fs::ftruncate(&fd, 0).map_err(errno)?;
    }
    let file = PosixFile::new(fd, st.kind, path.clone(), Arc::clone(share));
    Ok(Opened {
        file: Box::new(file),
        created,
    })
}

fn is(e: &io::Error, no: Errno) -> bool {
    e.raw_os_error() == Some(no.raw_os_error())
}

fn create_mode(opts: &OpenOptions) -> Mode {
    Mode::from_raw_mode(opts.mode & MODE_MASK)
}

fn open_file(share: &Share, path: &RelPath, opts: &OpenOptions) -> io::Result<(OwnedFd, bool)> {
    // Truncation needs a writable fd even when the caller asked for less.
    let write = opts.write || opts.create.truncates();
    let access = match (opts.read, write) {
        (true, true) => OFlags::RDWR,
        (false, true) => OFlags::WRONLY,
        _ => OFlags::RDONLY,
    };
    // NONBLOCK: opening a FIFO must not hang a blocking-pool thread (it is refused later).
    let flags = access | OFlags::NOCTTY | OFlags::NONBLOCK;
    let create_excl = || {
        share.resolve(
            path,
            flags | OFlags::CREATE | OFlags::EXCL,
            create_mode(opts),
        )
    };
    match opts.create {
        CreateMode::OpenExisting | CreateMode::Truncate => {
            Ok((open_existing(share, path, flags, opts)?, false))
        }
        CreateMode::CreateNew => Ok((create_excl()?, true)),
        CreateMode::OpenOrCreate | CreateMode::CreateOrTruncate => {
            // O_CREAT alone cannot say whether it created, so try exclusive first.
            let mut tries = 0;
            loop {
                match create_excl() {
                    Ok(fd) => return Ok((fd, true)),
                    Err(e) if is(&e, Errno::EXIST) => {}
                    Err(e) => return Err(e),
                }
                match open_existing(share, path, flags, opts) {
                    Ok(fd) => return Ok((fd, false)),
                    Err(e) if is(&e, Errno::NOENT) && tries < CREATE_RACE_RETRIES => tries += 1,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

fn open_existing(
    share: &Share,
    path: &RelPath,
    flags: OFlags,
    opts: &OpenOptions,
) -> io::Result<OwnedFd> {
    match share.resolve(path, flags, Mode::empty()) {
        // Write access asked on what turns out to be a directory (attribute writes).
        Err(e) if is(&e, Errno::ISDIR) && opts.directory.is_none() && !opts.create.truncates() => {
            share.resolve(
                path,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOCTTY,
                Mode::empty(),
            )
        }
        Err(e)
            if is(&e, Errno::ACCESS) && !opts.read && !opts.write && !opts.create.truncates() =>
        {
            attribute_only(share, path, OFlags::empty())
        }
        r => r,
    }
}

/// No data access was asked for and read access is denied: an `O_PATH` fd still allows stat.
fn attribute_only(share: &Share, path: &RelPath, extra: OFlags) -> io::Result<OwnedFd> {
    share.resolve(path, OFlags::PATH | extra, Mode::empty())
}

fn open_dir(share: &Share, path: &RelPath, opts: &OpenOptions) -> io::Result<(OwnedFd, bool)> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOCTTY;
    let existing = || match share.resolve(path, flags, Mode::empty()) {
        Err(e) if is(&e, Errno::ACCESS) && !opts.read && !opts.write => {
            attribute_only(share, path, OFlags::DIRECTORY)
        }
        r => r,
    };
    match opts.create {
        CreateMode::OpenExisting => Ok((existing()?, false)),
        CreateMode::Truncate | CreateMode::CreateOrTruncate => Err(errno(Errno::INVAL)),
        CreateMode::CreateNew => Ok((mkdir(share, path, opts)?, true)),
        CreateMode::OpenOrCreate => match mkdir(share, path, opts) {
            Ok(fd) => Ok((fd, true)),
            Err(e) if is(&e, Errno::EXIST) => Ok((existing()?, false)),
            Err(e) => Err(e),
        },
    }
}

fn mkdir(share: &Share, path: &RelPath, opts: &OpenOptions) -> io::Result<OwnedFd> {
    if path.is_root() {
        return Err(errno(Errno::EXIST));
    }
    let (parent, name) = share.parent_of(path)?;
    rustix::fs::mkdirat(&parent, name, create_mode(opts)).map_err(errno)?;
    // NO_SYMLINKS: if the new directory was swapped for a symlink meanwhile, fail.
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    openat2_confined(
        parent.as_fd(),
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOCTTY,
        Mode::empty(),
        resolve,
    )
}

fn check(share: &Share, st: &Stat, opts: &OpenOptions) -> io::Result<()> {
    match st.kind {
        FileKind::Dir if opts.directory == Some(false) => Err(errno(Errno::ISDIR)),
        FileKind::Dir => Ok(()),
        _ if opts.directory == Some(true) => Err(errno(Errno::NOTDIR)),
        FileKind::File if share.opts.refuse_hardlinks && st.nlink > 1 => {
            Err(VfsError::HardLink.into())
        }
        FileKind::File => Ok(()),
        FileKind::Symlink | FileKind::Other => Err(VfsError::SpecialFile.into()),
    }
}
