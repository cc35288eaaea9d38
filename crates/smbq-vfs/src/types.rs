//! Plain data crossing the VFS API.

use crate::VfsFile;

/// A point in time as seconds and nanoseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timespec {
    pub sec: i64,
    /// Always below 1_000_000_000.
    pub nsec: u32,
}

impl Timespec {
    pub const fn new(sec: i64, nsec: u32) -> Self {
        Self { sec, nsec }
    }

    pub(crate) fn now() -> Self {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            nsec: d.subsec_nanos(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    /// Devices, FIFOs, sockets: listed but never opened for data.
    Other,
}

/// Metadata of one file system object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stat {
    pub kind: FileKind,
    pub size: u64,
    /// Bytes actually allocated (512-byte blocks * 512).
    pub alloc_size: u64,
    pub nlink: u64,
    pub ino: u64,
    pub dev: u64,
    /// `st_mode`, including the `S_IFMT` type bits.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub atime: Timespec,
    pub mtime: Timespec,
    pub ctime: Timespec,
    /// Creation time, where the filesystem records one.
    pub btime: Option<Timespec>,
}

/// What `open` does about an existing or missing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Fails with ENOENT when missing.
    OpenExisting,
    /// Fails with EEXIST when present.
    CreateNew,
    OpenOrCreate,
    /// Truncates an existing file to zero; fails with ENOENT when missing.
    Truncate,
    CreateOrTruncate,
}

impl CreateMode {
    pub(crate) fn creates(self) -> bool {
        matches!(
            self,
            Self::CreateNew | Self::OpenOrCreate | Self::CreateOrTruncate
        )
    }

    pub(crate) fn truncates(self) -> bool {
        matches!(self, Self::Truncate | Self::CreateOrTruncate)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    pub read: bool,
    pub write: bool,
    pub create: CreateMode,
    /// `Some(true)`: must be a directory; `Some(false)`: must not be; `None`: either.
    pub directory: Option<bool>,
    /// Permission bits for a created file or directory (the process umask still applies;
    /// setuid/setgid are dropped). Pass directory-appropriate bits (e.g. 0o755) for mkdir.
    pub mode: u32,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            read: true,
            write: false,
            create: CreateMode::OpenExisting,
            directory: None,
            mode: 0o644,
        }
    }
}

/// The result of [`crate::Vfs::open`].
pub struct Opened {
    pub file: Box<dyn VfsFile>,
    /// Whether this open created the object.
    pub created: bool,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("created", &self.created)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub stat: Stat,
}

/// Filesystem-wide numbers (statvfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FsStat {
    /// Fundamental block size (`f_frsize`); the block counts are in these units.
    pub block_size: u64,
    pub total_blocks: u64,
    pub free_blocks: u64,
    /// Free blocks available to an unprivileged user.
    pub avail_blocks: u64,
    pub fs_id: u64,
    pub name_max: u64,
    /// The preferred I/O size (`f_bsize`).
    pub io_size: u64,
    /// Inodes in all, and free (`f_files`, `f_ffree`).
    pub total_files: u64,
    pub free_files: u64,
    /// The file system shares extents between files (XFS with reflink, Btrfs; probed with
    /// FICLONE): [`crate::clone_range`] works on it (FSCTL_DUPLICATE_EXTENTS_TO_FILE).
    pub clones_extents: bool,
}

/// Permission bits a client may set: no setuid/setgid.
pub(crate) const MODE_MASK: u32 = 0o1777;
