//! The POSIX backend. Confinement is the point: the share root is opened once, and every
//! lookup goes through `openat2(root, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`, so
//! symlinks are followed only while they stay below the root. Operations on a final
//! component (mkdir, rename, unlink) first resolve the parent that way and then act on one
//! name relative to that directory fd, never on a multi-component path.

mod file;
mod open;
mod stat;

use crate::error::{VfsError, errno};
use crate::{FsStat, OpenOptions, Opened, RelPath, Stat, Vfs, case};
use file::list_names;
use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags, ResolveFlags};
use rustix::io::Errno;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PosixOptions {
    /// Refuse to open non-directories with more than one hard link: anyone who can write
    /// the share could link in a file from elsewhere on the same filesystem.
    pub refuse_hardlinks: bool,
}

impl Default for PosixOptions {
    fn default() -> Self {
        Self {
            refuse_hardlinks: true,
        }
    }
}

/// State shared by the VFS and its open files.
pub(crate) struct Share {
    root: OwnedFd,
    opts: PosixOptions,
    /// Whether the file system clones ranges (FICLONE works), probed once.
    clones: std::sync::OnceLock<bool>,
}

/// A share rooted at a directory of the host filesystem.
pub struct PosixVfs {
    share: Arc<Share>,
}

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
/// openat2 reports EAGAIN when a concurrent rename makes a BENEATH walk unverifiable.
const EAGAIN_RETRIES: usize = 16;

/// Whether files under `root` can share extents: two unnamed temporary files there
/// (O_TMPFILE, never visible, gone when closed), one cloned from the other with FICLONE. A file
/// system that cannot (ext4, an XFS made without reflink, tmpfs) refuses the clone.
fn probe_clones(root: BorrowedFd<'_>) -> bool {
    let open = || {
        rustix::fs::openat(
            root,
            ".",
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
    };
    let (Ok(a), Ok(b)) = (open(), open()) else {
        return false;
    };
    rustix::io::write(&a, &[0u8; 4096]).is_ok() && rustix::fs::ioctl_ficlone(&b, &a).is_ok()
}

impl PosixVfs {
    /// Opens `root` as the share root. Fails when the kernel lacks `openat2` (Linux < 5.6):
    /// there is no safe way to confine lookups without it.
    pub fn new(root: &Path, opts: PosixOptions) -> io::Result<Self> {
        let root = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match rustix::fs::openat2(
            &root,
            ".",
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        ) {
            Ok(_) => {}
            Err(Errno::NOSYS) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "openat2 is unavailable (Linux >= 5.6 needed to confine a share)",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Self {
            share: Arc::new(Share {
                root,
                opts,
                clones: std::sync::OnceLock::new(),
            }),
        })
    }
}

impl Share {
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Opens `path` (relative to the root) with `openat2`, confined below the root.
    pub(crate) fn resolve(&self, path: &RelPath, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        openat2_confined(self.root(), path.as_os_arg(), flags, mode, RESOLVE)
    }

    /// The directory holding `path`'s last component, and that component.
    fn parent_of<'p>(&self, path: &'p RelPath) -> io::Result<(OwnedFd, &'p str)> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(VfsError::ShareRoot.into());
        };
        let fd = self.resolve(
            &parent,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok((fd, name))
    }
}

/// `openat2` with EAGAIN retried and EXDEV (an escape) turned into [`VfsError::Escape`].
pub(crate) fn openat2_confined(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    mode: Mode,
    resolve: ResolveFlags,
) -> io::Result<OwnedFd> {
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(dir, path, flags | OFlags::CLOEXEC, mode, resolve) {
            Ok(fd) => return Ok(fd),
            Err(Errno::AGAIN | Errno::INTR) if tries < EAGAIN_RETRIES => tries += 1,
            Err(Errno::XDEV) => return Err(VfsError::Escape.into()),
            Err(e) => return Err(errno(e)),
        }
    }
}

impl Vfs for PosixVfs {
    fn open(&self, path: &RelPath, opts: &OpenOptions) -> io::Result<Opened> {
        open::open(&self.share, path, opts)
    }

    fn stat(&self, path: &RelPath) -> io::Result<Stat> {
        let fd = self.share.resolve(path, OFlags::PATH, Mode::empty())?;
        stat::fstatx(&fd)
    }

    fn rename(&self, from: &RelPath, to: &RelPath, replace: bool) -> io::Result<()> {
        let (from_dir, from_name) = self.share.parent_of(from)?;
        let (to_dir, to_name) = self.share.parent_of(to)?;
        let flags = if replace {
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        match rustix::fs::renameat_with(&from_dir, from_name, &to_dir, to_name, flags) {
            Ok(()) => Ok(()),
            // Filesystems without RENAME_NOREPLACE (some network and FUSE ones) say EINVAL.
            // Check-then-rename is racy, but only against other writers inside the share.
            Err(Errno::INVAL) if !replace => {
                match rustix::fs::statx(
                    &to_dir,
                    to_name,
                    AtFlags::SYMLINK_NOFOLLOW,
                    rustix::fs::StatxFlags::TYPE,
                ) {
                    Ok(_) => Err(errno(Errno::EXIST)),
                    Err(Errno::NOENT) => {
                        rustix::fs::renameat(&from_dir, from_name, &to_dir, to_name).map_err(errno)
                    }
                    Err(e) => Err(errno(e)),
                }
            }
            Err(e) => Err(errno(e)),
        }
    }

    /// `linkat` between directories resolved beneath the root, never following a symlink at
    /// `from`. A replacing link is made under a temporary name beside `to` and renamed over
    /// it, so `to` names either the old file or the new link at every moment.
    fn link(
        &self,
        from: &RelPath,
        source: (u64, u64),
        to: &RelPath,
        replace: bool,
    ) -> io::Result<()> {
        // With refuse_hardlinks the share serves no file with several links, so it offers none.
        if self.share.opts.refuse_hardlinks {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let (from_dir, from_name) = self.share.parent_of(from)?;
        let (to_dir, to_name) = self.share.parent_of(to)?;
        // Links `name` to whatever `from` names now, then keeps it only if that is `source`:
        // `from` is a path, and the file the caller holds open may have left it meanwhile.
        let link = |name: &str| -> io::Result<()> {
            rustix::fs::linkat(&from_dir, from_name, &to_dir, name, AtFlags::empty())
                .map_err(errno)?;
            let st = rustix::fs::statat(&to_dir, name, AtFlags::SYMLINK_NOFOLLOW);
            if st.is_ok_and(|st| (st.st_dev, st.st_ino) == source) {
                return Ok(());
            }
            let _ = rustix::fs::unlinkat(&to_dir, name, AtFlags::empty());
            Err(errno(Errno::STALE))
        };
        if !replace {
            return link(to_name);
        }
        // Replacing: linked under a temporary name first, so that a wrong source never takes
        // the place of an existing `to`.
        let tmp = temp_name();
        link(&tmp)?;
        let r = rustix::fs::renameat(&to_dir, &tmp, &to_dir, to_name);
        // rename(2) between two links of one file does nothing; the temporary name goes
        // either way.
        match rustix::fs::unlinkat(&to_dir, &tmp, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(errno(e)),
        }
        r.map_err(errno)
    }

    fn hard_links(&self) -> bool {
        !self.share.opts.refuse_hardlinks
    }

    fn unlink(&self, path: &RelPath) -> io::Result<()> {
        let (dir, name) = self.share.parent_of(path)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::empty()).map_err(errno)
    }

    fn rmdir(&self, path: &RelPath) -> io::Result<()> {
        let (dir, name) = self.share.parent_of(path)?;
        rustix::fs::unlinkat(&dir, name, AtFlags::REMOVEDIR).map_err(errno)
    }

    fn may_unlink(&self, path: &RelPath) -> io::Result<bool> {
        use rustix::fs::{Access, Mode};
        let (dir, name) = self.share.parent_of(path)?;
        // AT_EACCESS: the effective ids, which a per-user request switched its thread to.
        let w = Access::WRITE_OK | Access::EXEC_OK;
        match rustix::fs::accessat(&dir, ".", w, AtFlags::EACCESS) {
            Ok(()) => {}
            Err(rustix::io::Errno::ACCESS | rustix::io::Errno::PERM) => return Ok(false),
            Err(e) => return Err(errno(e)),
        }
        let dir_st = rustix::fs::fstat(&dir).map_err(errno)?;
        if Mode::from_raw_mode(dir_st.st_mode).contains(Mode::SVTX) {
            // The sticky bit: only the file's or the directory's owner may remove it.
            let me = rustix::process::geteuid().as_raw();
            let file_st =
                rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(errno)?;
            return Ok(me == 0 || me == file_st.st_uid || me == dir_st.st_uid);
        }
        Ok(true)
    }

    fn statfs(&self) -> io::Result<FsStat> {
        let s = rustix::fs::fstatvfs(self.share.root()).map_err(errno)?;
        Ok(FsStat {
            block_size: if s.f_frsize != 0 {
                s.f_frsize
            } else {
                s.f_bsize
            },
            total_blocks: s.f_blocks,
            free_blocks: s.f_bfree,
            avail_blocks: s.f_bavail,
            fs_id: s.f_fsid,
            name_max: s.f_namemax,
            io_size: s.f_bsize,
            total_files: s.f_files,
            free_files: s.f_ffree,
            clones_extents: *self
                .share
                .clones
                .get_or_init(|| probe_clones(self.share.root())),
        })
    }

    fn find_case_insensitive(&self, dir: &RelPath, name: &str) -> io::Result<Option<String>> {
        let fd = self
            .share
            .resolve(dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        let names = list_names(&fd)?;
        Ok(case::unique_match(
            names.iter().map(|(n, _)| n.as_str()),
            name,
        ))
    }
}

/// A name no client has chosen, for a link that replaces another in one rename: the
/// process id, a counter and the clock's nanoseconds. The leading dot and the prefix keep it
/// out of the way for the moment it exists.
fn temp_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(".smbq-link-{}-{n}-{nanos}", std::process::id())
}
