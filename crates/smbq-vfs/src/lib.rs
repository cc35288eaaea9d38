//! The filesystem seen by the SMB server: a synchronous [`Vfs`] trait (called from tokio's
//! blocking pool), a POSIX backend confined to its share root, and an in-memory backend for
//! server tests. No SMB types cross this API; errors are `io::Error` carrying the raw errno
//! where one exists, so the server maps them to NTSTATUS in one place.
#![forbid(unsafe_code)]

mod case;
mod copy;
mod error;
mod mem;
mod path;
mod posix;
pub mod privilege;
mod types;

pub use case::simple_lowercase_eq;
pub use copy::{COPY_PIECE, clone_range, copy_range};
pub use error::{VfsError, is_confinement_error};
pub use mem::MemVfs;
pub use path::{PathError, RelPath};
pub use posix::{PosixOptions, PosixVfs};
pub use types::{CreateMode, DirEntry, FileKind, FsStat, OpenOptions, Opened, Stat, Timespec};

use bytes::Bytes;
use std::io;

/// A share's file tree. Every path is relative to the share root and cannot leave it.
pub trait Vfs: Send + Sync {
    /// Opens (and, per `opts.create`, creates) the file or directory at `path`.
    /// A directory is created when `opts.directory == Some(true)` and `opts.create` creates.
    fn open(&self, path: &RelPath, opts: &OpenOptions) -> io::Result<Opened>;
    /// Metadata of `path`; symlinks are followed only while they stay inside the share.
    fn stat(&self, path: &RelPath) -> io::Result<Stat>;
    /// Renames `from` to `to`; when `replace` is false an existing `to` fails with EEXIST.
    fn rename(&self, from: &RelPath, to: &RelPath, replace: bool) -> io::Result<()>;
    /// Adds the name `to` for the file at `from` (a hard link). With `replace` an existing
    /// non-directory `to` is replaced in one step; without, an existing `to` fails with
    /// EEXIST. A backend (or share) that offers no hard links fails with `Unsupported`.
    ///
    /// `source` is the `(dev, ino)` of the file the caller means (its open's): a `from` that
    /// names another file by the time of the link (moved and replaced meanwhile) links
    /// nothing, leaves an existing `to` as it was, and fails with ESTALE.
    fn link(
        &self,
        _from: &RelPath,
        _source: (u64, u64),
        _to: &RelPath,
        _replace: bool,
    ) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Whether [`Self::link`] can succeed here (MS-FSA's Volume.IsHardLinksSupported).
    fn hard_links(&self) -> bool {
        false
    }
    /// Removes a non-directory (the link itself when `path` is a symlink).
    fn unlink(&self, path: &RelPath) -> io::Result<()>;
    /// Removes an empty directory.
    fn rmdir(&self, path: &RelPath) -> io::Result<()>;
    /// Whether the calling thread's effective identity may remove `path` (write and search
    /// permission on its directory, and the sticky-bit rule). Asked where a delete is granted
    /// long before it happens (delete-on-close) and the server does not run as root for the
    /// request; a backend without Unix permissions says yes.
    fn may_unlink(&self, _path: &RelPath) -> io::Result<bool> {
        Ok(true)
    }
    /// Space and naming limits of the filesystem holding the share.
    fn statfs(&self) -> io::Result<FsStat>;
    /// Case-insensitive lookup of one component inside directory `dir`: the on-disk name when
    /// exactly one entry equals `name` under Unicode simple lowercase, else `None` (no match or
    /// ambiguous). Windows clients expect case-insensitive names; the server calls this after
    /// an exact lookup failed.
    fn find_case_insensitive(&self, dir: &RelPath, name: &str) -> io::Result<Option<String>>;
}

/// An open file or directory.
pub trait VfsFile: Send + Sync {
    /// Reads up to `len` bytes at `offset`; shorter only at end of file.
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes>;
    /// [`read_at`](Self::read_at), but only if it can be served from memory without waiting
    /// for the disk (Linux `preadv2(RWF_NOWAIT)`); `Ok(None)` when it cannot (or not all of
    /// it), and the caller goes the blocking way. Lets the async side answer a READ of cached
    /// data without a hop to a blocking thread; meant for small reads (POSIX declines more than
    /// 1 MiB, and never stats the file). The default never can.
    fn read_cached(&self, _offset: u64, _len: usize) -> io::Result<Option<Bytes>> {
        Ok(None)
    }
    /// Writes all of `bufs`, in order, starting at `offset`; returns the byte count written.
    fn write_at(&self, offset: u64, bufs: &[Bytes]) -> io::Result<usize>;
    /// Writes all of `bufs` at the end of the file as it is at the moment of the write
    /// (O_APPEND for this write alone), so two appenders, through this server or beside it,
    /// never write over each other. Returns the byte count written. The default finds the end
    /// first and writes there, which another writer can race.
    fn append(&self, bufs: &[Bytes]) -> io::Result<usize> {
        let at = self.stat()?.size;
        self.write_at(at, bufs)
    }
    /// Whether the file lives on a local disk or memory file system (ext4, XFS, btrfs, f2fs,
    /// tmpfs), where a small buffered write returns in microseconds unless the kernel throttles
    /// dirty pages; false for network and FUSE file systems, whose writes can wait on another
    /// machine or process without bound. The default says false.
    fn local_storage(&self) -> bool {
        false
    }
    fn stat(&self) -> io::Result<Stat>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Reserves space for `len` bytes without changing the size; a no-op where unsupported.
    fn allocate(&self, len: u64) -> io::Result<()>;
    /// `None` leaves that time unchanged.
    fn set_times(&self, atime: Option<Timespec>, mtime: Option<Timespec>) -> io::Result<()>;
    /// Permission bits; setuid and setgid are never added (a client must not mint them), but
    /// a directory keeps a setgid bit it has when `mode` asks for it (an inherited one).
    fn set_mode(&self, mode: u32) -> io::Result<()>;
    /// Changes the owner and group (`fchown`), as the calling thread's user: the kernel
    /// decides who may. `None` leaves one as it is. Unsupported where the store has no
    /// owners.
    fn set_owner(&self, _uid: Option<u32>, _gid: Option<u32>) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this store keeps no owners",
        ))
    }
    /// Whether the calling thread's effective user may write this file or directory, as the
    /// kernel decides (mode bits, POSIX ACLs, read-only mounts). Per-user identities ask it
    /// before granting a change smbq makes with the server's uid (smbq_server::kernel_rights).
    /// The default says yes.
    fn may_write(&self) -> io::Result<bool> {
        Ok(true)
    }
    fn fsync(&self) -> io::Result<()>;
    /// The data on stable storage, and the metadata needed to read it back (the size), not
    /// the times (fdatasync): what a write-through WRITE promises. The default is `fsync`.
    fn fdatasync(&self) -> io::Result<()> {
        self.fsync()
    }
    /// Deallocates `[offset, offset + len)` without changing the size (the range then reads
    /// as zeros; FSCTL_SET_ZERO_DATA on a sparse file). The default writes zeros up to the end
    /// of the file.
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        copy::write_zeros(self, offset, len)
    }
    /// Where data starts at or after `offset` (lseek SEEK_DATA), `None` past the last data;
    /// FSCTL_QUERY_ALLOCATED_RANGES. The default reports every byte before the end as data.
    fn next_data(&self, offset: u64) -> io::Result<Option<u64>> {
        Ok((offset < self.stat()?.size).then_some(offset))
    }
    /// Where the hole after `offset` starts (lseek SEEK_HOLE; the end of the file counts as
    /// one). The default: the end of the file.
    fn next_hole(&self, offset: u64) -> io::Result<u64> {
        Ok(self.stat()?.size.max(offset))
    }
    /// The open file's descriptor, so [`copy_range`] can copy between two files inside the
    /// kernel; `None` where files are not descriptors (the default; [`MemVfs`]).
    fn as_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    /// All entries of a directory except `.` and `..`, each with its [`Stat`]; names that are
    /// not UTF-8 are skipped. A symlink entry reports its target when that stays inside the
    /// share, else itself (kind [`FileKind::Symlink`]).
    fn read_dir(&self) -> io::Result<Vec<DirEntry>>;
    /// Reads extended attribute `user.<name>`; `None` when absent or unsupported.
    fn get_xattr(&self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// Writes extended attribute `user.<name>`; `ErrorKind::Unsupported` where the
    /// filesystem has none.
    fn set_xattr(&self, name: &str, value: &[u8]) -> io::Result<()>;
    /// Names of the `user.` extended attributes, without that prefix, in no particular order;
    /// names that are not UTF-8 are skipped, and a filesystem without xattrs lists none.
    fn list_xattrs(&self) -> io::Result<Vec<String>>;
    /// Removes extended attribute `user.<name>`; `Ok(false)` when it was not there.
    fn remove_xattr(&self, name: &str) -> io::Result<bool>;
    /// The `user.` extended attributes (name without the prefix, value) of `entry`, one
    /// component of this directory, whose names `want` accepts, without following a symlink
    /// (which reports none). Lets a listing show what each entry's own handle would, without
    /// opening every entry. Empty when the entry has none, is gone, or the filesystem keeps
    /// none.
    fn entry_xattrs(
        &self,
        entry: &str,
        want: &dyn Fn(&str) -> bool,
    ) -> io::Result<Vec<(String, Vec<u8>)>>;
}
