//! An open file or directory of the POSIX backend.

use super::Share;
use super::stat::{fstatx, lstatx_in};
use crate::error::{VfsError, errno};
use crate::types::MODE_MASK;
use crate::{DirEntry, FileKind, RelPath, Stat, Timespec, VfsFile};
use bytes::{Buf, Bytes};
use parking_lot::Mutex;
use rustix::fs::{
    FallocateFlags, FileType, Mode, OFlags, RawDir, SeekFrom, Timestamps, XattrFlags,
};
use rustix::io::{Errno, ReadWriteFlags};
use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// Linux `IOV_MAX`: a single pwritev takes at most this many slices.
const IOV_MAX: usize = 1024;
/// Linux `XATTR_SIZE_MAX`: no attribute value is larger.
const XATTR_SIZE_MAX: usize = 64 * 1024;
/// Linux `XATTR_LIST_MAX`: no name list is longer.
const XATTR_LIST_MAX: usize = 64 * 1024;
/// getdents buffer; one entry needs at most ~280 bytes.
const DIR_BUF: usize = 32 * 1024;
/// Highest byte offset a file can have (`loff_t` is signed).
const MAX_OFFSET: u64 = i64::MAX as u64;

pub(crate) struct PosixFile {
    fd: OwnedFd,
    kind: FileKind,
    /// Where the file was opened; used to follow symlinks found by `read_dir` (from the
    /// root, so confinement is the share's, not this directory's).
    path: RelPath,
    share: Arc<Share>,
    /// getdents moves the shared fd offset, so listings are serialised.
    dir_lock: Mutex<()>,
    /// [`VfsFile::local_storage`], asked of the kernel once.
    local: std::sync::OnceLock<bool>,
}

/// `statfs` f_type of the file systems [`VfsFile::local_storage`] trusts (linux/magic.h).
const LOCAL_FS_MAGIC: [u64; 5] = [
    0xEF53,      // ext2/3/4
    0x5846_5342, // XFS
    0x9123_683E, // btrfs
    0xF2F5_2010, // f2fs
    0x0102_1994, // tmpfs
];

impl PosixFile {
    /// Writes all of `bufs` at `offset`, or each call at the end of the file (`None`).
    fn write_all(&self, offset: Option<u64>, bufs: &[Bytes]) -> io::Result<usize> {
        let mut pending: VecDeque<Bytes> = bufs.iter().filter(|b| !b.is_empty()).cloned().collect();
        let mut done = 0usize;
        while !pending.is_empty() {
            let iov: Vec<IoSlice<'_>> = pending
                .iter()
                .take(IOV_MAX)
                .map(|b| IoSlice::new(b))
                .collect();
            let mut n = match offset {
                Some(offset) => {
                    let pos = offset.saturating_add(done as u64);
                    retry_intr(|| rustix::io::pwritev(&self.fd, &iov, pos))?
                }
                // The position is ignored with RWF_APPEND.
                None => retry_intr(|| {
                    rustix::io::pwritev2(&self.fd, &iov, 0, rustix::io::ReadWriteFlags::APPEND)
                })?,
            };
            drop(iov);
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            done += n;
            // Drop what was written; a short write leaves the rest for the next round.
            while let Some(front) = pending.front_mut() {
                if n < front.len() {
                    front.advance(n);
                    break;
                }
                n -= front.len();
                pending.pop_front();
            }
        }
        Ok(done)
    }

    pub(super) fn new(fd: OwnedFd, kind: FileKind, path: RelPath, share: Arc<Share>) -> Self {
        Self {
            fd,
            kind,
            path,
            share,
            dir_lock: Mutex::new(()),
            local: std::sync::OnceLock::new(),
        }
    }

    fn follow_entry(&self, name: &str, own: Stat) -> Stat {
        let Ok(target) = self.path.join(name) else {
            return own;
        };
        match self
            .share
            .resolve(&target, OFlags::PATH, Mode::empty())
            .and_then(fstatx)
        {
            Ok(st) => st,
            // Dangling, looping or escaping: show the link itself.
            Err(_) => own,
        }
    }
}

/// Largest request [`VfsFile::read_cached`] serves (its buffer is sized by the request).
const CACHED_READ_MAX: usize = 1 << 20;

fn retry_intr<T>(mut f: impl FnMut() -> rustix::io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(Errno::INTR) => continue,
            r => return r.map_err(errno),
        }
    }
}

fn check_range(offset: u64, len: u64) -> io::Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_OFFSET => Ok(()),
        _ => Err(errno(Errno::FBIG)),
    }
}

fn timespec(t: Option<Timespec>) -> io::Result<rustix::fs::Timespec> {
    match t {
        None => Ok(rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        }),
        Some(t) if t.nsec < 1_000_000_000 => Ok(rustix::fs::Timespec {
            tv_sec: t.sec,
            tv_nsec: t.nsec.into(),
        }),
        Some(_) => Err(errno(Errno::INVAL)),
    }
}

fn xattr_name(name: &str) -> io::Result<String> {
    // "trusted." + name must fit XATTR_NAME_MAX (255).
    if name.is_empty() || name.len() > 247 || name.contains('\0') {
        return Err(VfsError::XattrName.into());
    }
    Ok(format!("{}{name}", namespace()))
}

const USER: &str = "user.";
const TRUSTED: &str = "trusted.";

/// Where smbq keeps its metadata: `trusted.` when the server runs as root (its real uid, which
/// per-user identities leave alone), so local users, even a file's owner, can neither read nor
/// forge it; `user.` otherwise, the only namespace an unprivileged server may write.
fn namespace() -> &'static str {
    static NS: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
    NS.get_or_init(|| {
        if rustix::process::getuid().is_root() {
            TRUSTED
        } else {
            USER
        }
    })
}

/// The `user.` name an older smbq (or one run without root) wrote `name` under, when the
/// metadata now lives in `trusted.`: read once more there, and moved on that first touch.
fn legacy_name(name: &str) -> Option<String> {
    (namespace() == TRUSTED).then(|| format!("{USER}{name}"))
}

/// Names (and d_type) of every entry in the directory `fd`, from its start, except `.`/`..`
/// and names that are not UTF-8.
pub(crate) fn list_names(fd: &OwnedFd) -> io::Result<Vec<(String, FileType)>> {
    rustix::fs::seek(fd, SeekFrom::Start(0)).map_err(errno)?;
    let mut buf: Vec<MaybeUninit<u8>> = vec![MaybeUninit::uninit(); DIR_BUF];
    let mut dir = RawDir::new(fd, &mut buf);
    let mut out = Vec::new();
    while let Some(entry) = dir.next() {
        let entry = entry.map_err(errno)?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        if name == "." || name == ".." {
            continue;
        }
        out.push((name.to_owned(), entry.file_type()));
    }
    Ok(out)
}

impl VfsFile for PosixFile {
    fn as_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        Some(self.fd.as_fd())
    }

    fn local_storage(&self) -> bool {
        *self.local.get_or_init(|| {
            rustix::fs::fstatfs(&self.fd)
                .is_ok_and(|st| LOCAL_FS_MAGIC.contains(&(st.f_type as u64)))
        })
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::FallocateFlags as F;
        check_range(offset, len)?;
        match retry_intr(|| {
            rustix::fs::fallocate(&self.fd, F::PUNCH_HOLE | F::KEEP_SIZE, offset, len)
        }) {
            // A file system that cannot deallocate (or a kernel without it): zeros instead.
            Err(e) if e.raw_os_error() == Some(Errno::OPNOTSUPP.raw_os_error()) => {
                crate::copy::write_zeros(self, offset, len)
            }
            r => r,
        }
    }

    fn next_data(&self, offset: u64) -> io::Result<Option<u64>> {
        check_range(offset, 0)?;
        match retry_intr(|| rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Data(offset))) {
            Ok(at) => Ok(Some(at)),
            Err(e) if e.raw_os_error() == Some(Errno::NXIO.raw_os_error()) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn next_hole(&self, offset: u64) -> io::Result<u64> {
        check_range(offset, 0)?;
        match retry_intr(|| rustix::fs::seek(&self.fd, rustix::fs::SeekFrom::Hole(offset))) {
            Ok(at) => Ok(at),
            // Past the end: the end itself is the hole.
            Err(e) if e.raw_os_error() == Some(Errno::NXIO.raw_os_error()) => {
                Ok(fstatx(&self.fd)?.size.max(offset))
            }
            Err(e) => Err(e),
        }
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let size = fstatx(&self.fd)?.size;
        // Sized by the file, not by the request: a huge `len` on a small file allocates little.
        let want = usize::try_from(size.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(len);
        // A pooled buffer (smbq_buf): no fresh pages to fault in per READ; only the bytes
        // pread wrote are kept.
        let mut buf = smbq_buf::take(want);
        buf.fill(want, |dst| {
            let mut filled = 0;
            while let Some(rest) = dst.get_mut(filled..).filter(|r| !r.is_empty()) {
                let pos = offset.saturating_add(filled as u64);
                let n = retry_intr(|| rustix::io::pread(&self.fd, &mut *rest, pos))?;
                if n == 0 {
                    break;
                }
                filled += n;
            }
            Ok::<_, io::Error>(filled)
        })?;
        Ok(buf.freeze())
    }

    fn read_cached(&self, offset: u64, len: usize) -> io::Result<Option<Bytes>> {
        // No fstat first (on a network file system it may wait for the server): the buffer
        // is sized by the request, which is why large ones are declined; the end of the file
        // shows as a read of 0.
        if len > CACHED_READ_MAX {
            return Ok(None);
        }
        let want = len;
        let mut buf = smbq_buf::take(want);
        let mut whole = true;
        buf.fill(want, |dst| {
            let mut filled = 0;
            while let Some(rest) = dst.get_mut(filled..).filter(|r| !r.is_empty()) {
                let pos = offset.saturating_add(filled as u64);
                let mut iov = [std::io::IoSliceMut::new(rest)];
                match retry_intr(|| {
                    rustix::io::preadv2(&self.fd, &mut iov, pos, ReadWriteFlags::NOWAIT)
                }) {
                    Ok(0) => break,
                    Ok(n) => filled += n,
                    // EAGAIN: not (all) in the page cache; EOPNOTSUPP: a file system or
                    // kernel without RWF_NOWAIT. Either way the blocking path reads it.
                    Err(_) => {
                        whole = false;
                        break;
                    }
                }
            }
            Ok::<_, io::Error>(filled)
        })?;
        Ok(whole.then(|| buf.freeze()))
    }

    fn write_at(&self, offset: u64, bufs: &[Bytes]) -> io::Result<usize> {
        let total = bufs
            .iter()
            .try_fold(0u64, |acc, b| acc.checked_add(b.len() as u64));
        check_range(offset, total.unwrap_or(u64::MAX))?;
        self.write_all(Some(offset), bufs)
    }

    /// `pwritev2` with RWF_APPEND (Linux 4.16): the kernel puts each call's bytes at the end
    /// under the inode lock, as for an O_APPEND file. A short write's rest is appended by the
    /// next call, which another appender could precede; regular files write short only when
    /// the disk fills or the size limit is hit.
    fn append(&self, bufs: &[Bytes]) -> io::Result<usize> {
        self.write_all(None, bufs)
    }

    fn stat(&self) -> io::Result<Stat> {
        fstatx(&self.fd)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        check_range(len, 0)?;
        rustix::fs::ftruncate(&self.fd, len).map_err(errno)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        check_range(len, 0)?;
        if len == 0 {
            return Ok(());
        }
        match rustix::fs::fallocate(&self.fd, FallocateFlags::KEEP_SIZE, 0, len) {
            Ok(()) | Err(Errno::OPNOTSUPP) => Ok(()),
            Err(e) => Err(errno(e)),
        }
    }

    fn set_times(&self, atime: Option<Timespec>, mtime: Option<Timespec>) -> io::Result<()> {
        let times = Timestamps {
            last_access: timespec(atime)?,
            last_modification: timespec(mtime)?,
        };
        rustix::fs::futimens(&self.fd, &times).map_err(errno)
    }

    fn set_mode(&self, mode: u32) -> io::Result<()> {
        // A directory may keep a set-group-ID bit it has (inherited from its parent, so
        // files made in it keep the group) when `mode` asks for it; one is never added.
        let sgid = Mode::SGID.bits();
        let keep = if mode & sgid != 0 {
            let st = rustix::fs::fstat(&self.fd).map_err(errno)?;
            let is_dir = rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir();
            if is_dir { st.st_mode & sgid } else { 0 }
        } else {
            0
        };
        rustix::fs::fchmod(&self.fd, Mode::from_raw_mode((mode & MODE_MASK) | keep)).map_err(errno)
    }

    fn set_owner(&self, uid: Option<u32>, gid: Option<u32>) -> io::Result<()> {
        rustix::fs::fchown(
            &self.fd,
            uid.map(rustix::process::Uid::from_raw),
            gid.map(rustix::process::Gid::from_raw),
        )
        .map_err(errno)
    }

    fn fsync(&self) -> io::Result<()> {
        rustix::fs::fsync(&self.fd).map_err(errno)
    }

    fn fdatasync(&self) -> io::Result<()> {
        rustix::fs::fdatasync(&self.fd).map_err(errno)
    }

    fn may_write(&self) -> io::Result<bool> {
        // faccessat2 with AT_EACCESS checks the thread's effective ids (the user a per-user
        // request switched it to). The descriptor's own /proc link names the opened inode, so
        // the answer is about this file, not whatever its path names by now; the same thread
        // group may always follow its own descriptors' links.
        let link = format!("/proc/thread-self/fd/{}", self.fd.as_raw_fd());
        let w = rustix::fs::Access::WRITE_OK;
        match rustix::fs::accessat(
            rustix::fs::CWD,
            link.as_str(),
            w,
            rustix::fs::AtFlags::EACCESS,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::ACCESS | Errno::PERM | Errno::ROFS) => Ok(false),
            Err(e) => Err(errno(e)),
        }
    }

    fn read_dir(&self) -> io::Result<Vec<DirEntry>> {
        if self.kind != FileKind::Dir {
            return Err(errno(Errno::NOTDIR));
        }
        let names = {
            let _guard = self.dir_lock.lock();
            list_names(&self.fd)?
        };
        let mut out = Vec::with_capacity(names.len());
        for (name, _) in names {
            let stat = match lstatx_in(&self.fd, &name) {
                Ok(st) if st.kind == FileKind::Symlink => self.follow_entry(&name, st),
                Ok(st) => st,
                // Removed since it was listed.
                Err(e) if e.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => continue,
                Err(e) => return Err(e),
            };
            out.push(DirEntry { name, stat });
        }
        Ok(out)
    }

    fn get_xattr(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        crate::privilege::as_server(|| self.get_xattr_now(name))
    }

    fn set_xattr(&self, name: &str, value: &[u8]) -> io::Result<()> {
        crate::privilege::as_server(|| self.set_xattr_now(name, value))
    }

    fn list_xattrs(&self) -> io::Result<Vec<String>> {
        crate::privilege::as_server(|| self.list_xattrs_now())
    }

    fn remove_xattr(&self, name: &str) -> io::Result<bool> {
        crate::privilege::as_server(|| self.remove_xattr_now(name))
    }

    fn entry_xattrs(
        &self,
        entry: &str,
        want: &dyn Fn(&str) -> bool,
    ) -> io::Result<Vec<(String, Vec<u8>)>> {
        crate::privilege::as_server(|| self.entry_xattrs_now(entry, want))
    }
}

/// The xattr calls themselves (crate::privilege decides with which uid they run).
impl PosixFile {
    fn get_xattr_now(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        let full = xattr_name(name)?;
        if let Some(v) = self.read_xattr(&full)? {
            return Ok(Some(v));
        }
        let Some(old) = legacy_name(name) else {
            return Ok(None);
        };
        let Some(v) = self.read_xattr(&old)? else {
            return Ok(None);
        };
        // Moved on first touch; if the move fails the old copy stays and is read again.
        if rustix::fs::fsetxattr(&self.fd, full.as_str(), &v, XattrFlags::empty()).is_ok() {
            let _ = rustix::fs::fremovexattr(&self.fd, old.as_str());
        }
        Ok(Some(v))
    }

    fn read_xattr(&self, full: &str) -> io::Result<Option<Vec<u8>>> {
        let mut buf = Vec::with_capacity(XATTR_SIZE_MAX);
        match rustix::fs::fgetxattr(&self.fd, full, rustix::buffer::spare_capacity(&mut buf)) {
            Ok(_) => {
                buf.shrink_to_fit();
                Ok(Some(buf))
            }
            Err(Errno::NODATA | Errno::OPNOTSUPP) => Ok(None),
            Err(e) => Err(errno(e)),
        }
    }

    fn set_xattr_now(&self, name: &str, value: &[u8]) -> io::Result<()> {
        let full = xattr_name(name)?;
        match rustix::fs::fsetxattr(&self.fd, full.as_str(), value, XattrFlags::empty()) {
            // A legacy `user.` copy, if any, is left: reads and listings prefer the current
            // namespace, and removing takes both, so no syscall is spent here on every write.
            Ok(()) => Ok(()),
            Err(Errno::OPNOTSUPP) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "no user xattrs on this filesystem",
            )),
            Err(e) => Err(errno(e)),
        }
    }

    fn list_xattrs_now(&self) -> io::Result<Vec<String>> {
        let mut buf = Vec::with_capacity(XATTR_LIST_MAX);
        match rustix::fs::flistxattr(&self.fd, rustix::buffer::spare_capacity(&mut buf)) {
            Ok(_) => {
                let mut names: Vec<String> = user_names(&buf).into_iter().map(|(_, n)| n).collect();
                let mut seen = std::collections::HashSet::new();
                names.retain(|n| seen.insert(n.clone()));
                Ok(names)
            }
            Err(Errno::OPNOTSUPP) => Ok(Vec::new()),
            Err(e) => Err(errno(e)),
        }
    }

    fn remove_xattr_now(&self, name: &str) -> io::Result<bool> {
        let mut removed = false;
        for full in std::iter::once(xattr_name(name)?).chain(legacy_name(name)) {
            match rustix::fs::fremovexattr(&self.fd, full.as_str()) {
                Ok(()) => removed = true,
                Err(Errno::NODATA | Errno::OPNOTSUPP) => {}
                Err(e) => return Err(errno(e)),
            }
        }
        Ok(removed)
    }

    fn entry_xattrs_now(
        &self,
        entry: &str,
        want: &dyn Fn(&str) -> bool,
    ) -> io::Result<Vec<(String, Vec<u8>)>> {
        if self.kind != FileKind::Dir {
            return Err(errno(Errno::NOTDIR));
        }
        if entry.is_empty() || entry == "." || entry == ".." || entry.contains(['/', '\0']) {
            return Err(errno(Errno::INVAL));
        }
        // Through the directory's /proc magic link, so the entry is looked up in this very
        // directory (never outside the share) and, with the l* calls, a symlink is not
        // followed; one syscall for the common entry without attributes.
        let path = format!("/proc/self/fd/{}/{entry}", self.fd.as_raw_fd());
        // Small buffers first: a listing calls this per entry, and most entries hold a few
        // short xattrs or none.
        let list = sized(XATTR_LIST_MAX, |buf| {
            rustix::fs::llistxattr(&path, rustix::buffer::spare_capacity(buf))
        });
        let list = match list {
            Ok(l) => l,
            // Gone since it was listed, a filesystem without xattrs, or a symlink's
            // user namespace (which Linux does not have).
            Err(Errno::NOENT | Errno::OPNOTSUPP | Errno::PERM) => return Ok(Vec::new()),
            Err(e) => return Err(errno(e)),
        };
        let names = user_names(&list);
        let mut out: Vec<(String, Vec<u8>)> = Vec::with_capacity(names.len());
        // smbq's names, the current namespace first so its value wins over a legacy copy.
        for (full, name) in names.into_iter().filter(|(_, n)| want(n)) {
            if out.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let value = sized(XATTR_SIZE_MAX, |buf| {
                rustix::fs::lgetxattr(&path, full.as_str(), rustix::buffer::spare_capacity(buf))
            });
            match value {
                Ok(v) => out.push((name, v)),
                Err(Errno::NODATA | Errno::NOENT) => {}
                Err(e) => return Err(errno(e)),
            }
        }
        Ok(out)
    }
}

/// Runs an xattr read into a 256-byte buffer, and again into a `max`-byte one only when that
/// was too small (ERANGE); a value or list changed in between is read whole the second time.
fn sized(
    max: usize,
    mut read: impl FnMut(&mut Vec<u8>) -> Result<usize, Errno>,
) -> Result<Vec<u8>, Errno> {
    let mut buf = Vec::with_capacity(256);
    match read(&mut buf) {
        Err(Errno::RANGE) => {
            buf = Vec::with_capacity(max);
            read(&mut buf)?;
        }
        r => {
            r?;
        }
    }
    Ok(buf)
}

/// smbq's names in a NUL-separated `listxattr` result, as (full name, name without the
/// prefix): those of the current namespace first, then legacy `user.` ones (crate docs of
/// [`namespace`]).
fn user_names(list: &[u8]) -> Vec<(String, String)> {
    let all: Vec<&str> = list
        .split(|&b| b == 0)
        .filter_map(|n| std::str::from_utf8(n).ok())
        .collect();
    let mut prefixes = vec![namespace()];
    if namespace() == TRUSTED {
        prefixes.push(USER);
    }
    let mut out = Vec::new();
    for p in prefixes {
        for full in &all {
            if let Some(n) = full.strip_prefix(p).filter(|n| !n.is_empty()) {
                out.push((full.to_string(), n.to_string()));
            }
        }
    }
    out
}

impl AsFd for PosixFile {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
