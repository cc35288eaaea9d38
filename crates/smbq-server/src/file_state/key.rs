//! The key every piece of per-file state is found by.

/// Identity of a stream across opens: device, inode and which data stream of it. Share
/// modes, oplocks and byte-range locks are per stream (MS-FSA 2.1.1: an Open is of a Stream),
/// so a named stream (`crate::streams::stream_id`) is a key of its own; the state of all of a
/// file's streams lives in one entry, found by [`FileKey::base`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    /// 0 for the unnamed data stream (and directories).
    pub stream: u64,
}

impl FileKey {
    /// The key of the file (its unnamed stream) whose metadata is `st`.
    pub fn of(st: &smbq_vfs::Stat) -> FileKey {
        FileKey {
            dev: st.dev,
            ino: st.ino,
            stream: 0,
        }
    }

    /// The file itself (its unnamed stream), whatever stream `self` names.
    pub fn base(self) -> FileKey {
        FileKey { stream: 0, ..self }
    }

    /// Whether `path` names this file still: `Some(false)` when it names another one (a local
    /// rename, a POSIX delete, a rename through another open that a path here missed),
    /// `None` when it cannot be looked at (gone). Blocking.
    pub fn named_by(self, vfs: &dyn smbq_vfs::Vfs, path: &smbq_vfs::RelPath) -> Option<bool> {
        let st = vfs.stat(path).ok()?;
        Some((st.dev, st.ino) == (self.dev, self.ino))
    }
}
