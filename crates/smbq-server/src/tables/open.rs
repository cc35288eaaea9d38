//! An open (MS-SMB2 3.3.1.10 Open): a file, a directory, or a named pipe, with the state
//! handlers keep per handle (position, mode, delete-on-close, directory enumeration cursor).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use parking_lot::Mutex;
use smbq_vfs::{RelPath, Stat, VfsFile};
use smbq_wire::FileId;

use super::tree::Tree;
use crate::file_state::FileKey;
use crate::pipe::PipeOpen;
use crate::streams::StreamRef;
use smbq_wire::fscc::wildcard::Pattern;

/// One directory entry as enumerated (name as on disk, metadata at enumeration time).
#[derive(Clone, Debug)]
pub struct ListEntry {
    pub name: String,
    pub stat: Stat,
}

/// Per-open enumeration state (MS-SMB2 3.3.1.10 Open.EnumerationLocation/SearchPattern).
#[derive(Debug, Default)]
pub struct DirCursor {
    /// The snapshot being returned, filtered by `pattern`; `None` before the first query.
    pub entries: Option<Vec<ListEntry>>,
    pub next: usize,
    pub pattern: Option<Pattern>,
}

pub struct FileOpen {
    /// For a named stream, a `crate::streams::StreamFile` over the base file.
    pub file: Box<dyn VfsFile>,
    /// The stream this open was admitted as (a later stream rename moves the share-mode
    /// entry, see `FileTable::move_open`, but not this key).
    pub key: FileKey,
    pub is_dir: bool,
    pub dir: Mutex<DirCursor>,
    /// `Some` for an open of a named stream (MS-FSCC 2.1.4).
    pub stream: Option<Arc<StreamRef>>,
}

pub enum OpenKind {
    File(FileOpen),
    Pipe(PipeOpen),
}

pub struct Open {
    pub file_id: FileId,
    pub session_id: u64,
    pub tree: Arc<Tree>,
    pub kind: OpenKind,
    /// Where this open's file is (share-relative); renames through this open update it.
    pub path: Mutex<RelPath>,
    /// Open.GrantedAccess after generic mapping and MAXIMUM_ALLOWED.
    pub granted: u32,
    pub share_access: u32,
    pub create_options: u32,
    pub delete_on_close: AtomicBool,
    /// FilePositionInformation (kept, not used for IO: SMB2 IO carries offsets).
    pub position: AtomicU64,
    /// FileModeInformation.
    pub mode: AtomicU32,
    /// Set once CLOSE (or logoff/disconnect) has begun; later requests get FILE_CLOSED.
    pub closed: AtomicBool,
    /// Where a FileFullEaInformation enumeration continues (MS-FSA Open.NextEaEntry).
    pub ea_index: AtomicU32,
    /// Open.IsDurable: set when the CREATE granted a durable handle (crate::durable).
    pub durable: Mutex<Option<crate::durable::DurableGrant>>,
    /// Open.CreateGuid and the first answer, for replays (crate::durable::replay).
    pub replay: Mutex<Option<crate::durable::replay::ReplayRecord>>,
    /// Open.ChannelSequence and the requests counted under it (MS-SMB2 3.3.5.2.10).
    pub channel: Mutex<super::channel_seq::ChannelSeq>,
    /// Open.LockSequenceArray (MS-SMB2 3.3.5.14).
    pub lock_seq: Mutex<super::lock_seq::LockSequences>,
    /// The client's lease on the parent directory, named in the CREATE (V2 ParentLeaseKey):
    /// changes made through this open leave that directory lease alone.
    pub parent_lease: Option<crate::file_state::lease::LeaseKey>,
    /// Data or size was changed through this open: its close breaks the parent directory's
    /// leases (the listing's size and times changed; smbtorture smb2.lease.v2_request).
    pub modified: AtomicBool,
    /// MS-FSA Open.UserSetModificationTime: a client set or froze LastWriteTime through this
    /// handle, so its writes do not move it (crate::write_time).
    pub sticky_write: AtomicBool,
    /// Held while this open's record is written to or removed from the persistent store
    /// (crate::persist): one write at a time, each with the state as it is when its turn
    /// comes, and none after the close removed the record.
    pub persisting: Mutex<()>,
    /// The store did not take this open's last record, and a task writes it again until the
    /// store does (crate::persist::Server::persist).
    pub record_behind: AtomicBool,
    /// Opened with the SMB3 POSIX create context where the extensions apply (crate::posix):
    /// the POSIX information classes answer on it.
    pub posix: bool,
}

impl std::fmt::Debug for Open {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Open")
            .field("file_id", &self.file_id)
            .field("path", &*self.path.lock())
            .field("granted", &format_args!("{:#x}", self.granted))
            .finish_non_exhaustive()
    }
}

impl Open {
    pub fn volatile(&self) -> u64 {
        self.file_id.volatile
    }

    pub fn file(&self) -> Option<&FileOpen> {
        match &self.kind {
            OpenKind::File(f) => Some(f),
            OpenKind::Pipe(_) => None,
        }
    }

    pub fn pipe(&self) -> Option<&PipeOpen> {
        match &self.kind {
            OpenKind::Pipe(p) => Some(p),
            OpenKind::File(_) => None,
        }
    }

    pub fn is_dir(&self) -> bool {
        self.file().is_some_and(|f| f.is_dir)
    }

    pub fn has(&self, access: u32) -> bool {
        self.granted & access != 0
    }

    pub fn path(&self) -> RelPath {
        self.path.lock().clone()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
