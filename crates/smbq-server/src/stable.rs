//! When a change must be on stable storage before the client hears of it. One rule for every
//! handler that writes data (WRITE, server-side copy, block cloning, a size change):
//!
//! - the WRITE asks for it (SMB2_WRITEFLAG_WRITE_THROUGH, MS-SMB2 3.3.5.13);
//! - the open was made or set write-through (FILE_WRITE_THROUGH in its mode, MS-FSA 2.1.5.3:
//!   "If Open.Mode.FILE_WRITE_THROUGH is TRUE ... the object store MUST flush");
//! - the share is continuously available: a client told its data is written may lose the
//!   server the next moment and carry on after a restart or elsewhere (Samba adds
//!   FILE_WRITE_THROUGH to persistent opens; Windows' CA shares write through);
//! - another server has the file open (a cluster node, smbq-cluster): it reads through its
//!   own mount of a shared file system, which sees only what this mount flushed. This one is
//!   asked after the change ([`flushed_after`]), so that a change either sees the other
//!   server's open or was made before it, and then the other server's admission had it
//!   flushed (`open_state::Effects::flush`).
//!
//! On a continuously available share the names a client is told of are made stable too: a
//! created file's directory entry and both ends of a rename, so a persistent open's record
//! never names a file a crash took back.

use std::io;
use std::sync::atomic::Ordering;

use smbq_vfs::{OpenOptions, RelPath, Vfs};
use smbq_wire::fscc::file_info::mode::FILE_WRITE_THROUGH;

use crate::Server;
use crate::tables::Open;

/// Whether a data change through `open` is flushed before the answer; `asked`: the request's
/// own write-through flag.
pub(crate) fn write_through(open: &Open, asked: bool) -> bool {
    asked || open.tree.ca || open.mode.load(Ordering::Relaxed) & FILE_WRITE_THROUGH != 0
}

/// Whether a change just made through `open` is flushed before the answer: `through`
/// ([`write_through`]), or another server has the file open now.
pub(crate) fn flushed_after(srv: &Server, open: &Open, through: bool) -> bool {
    through
        || open
            .file()
            .is_some_and(|f| srv.open_state().shared_elsewhere(f.key))
}

/// Flushes the data (and the size that reads it back) of `open`'s file when
/// [`flushed_after`] says so; the times may follow.
pub(crate) fn flush_data(srv: &Server, open: &Open) -> io::Result<()> {
    match open.file() {
        Some(f) if flushed_after(srv, open, write_through(open, false)) => f.file.fdatasync(),
        _ => Ok(()),
    }
}

/// On a continuously available share, makes the entry of `path` in its directory stable
/// (after a create or a rename); elsewhere nothing.
pub(crate) fn flush_entry(open: &Open, vfs: &dyn Vfs, path: &RelPath) -> io::Result<()> {
    if !open.tree.ca {
        return Ok(());
    }
    let dir = path.parent().unwrap_or_else(RelPath::root);
    let opts = OpenOptions {
        directory: Some(true),
        ..OpenOptions::default()
    };
    vfs.open(&dir, &opts)?.file.fsync()
}

/// After a rename from `from` to `to` on disk: on a continuously available share both
/// directory entries are made stable. The rename has happened, so a failure is logged.
pub(crate) fn flush_rename(open: &Open, vfs: &dyn Vfs, from: &RelPath, to: &RelPath) {
    let mut flushed = flush_entry(open, vfs, to);
    if flushed.is_ok() && from.parent() != to.parent() {
        flushed = flush_entry(open, vfs, from);
    }
    if let Err(e) = flushed {
        tracing::error!(path = %to, error = %e, "flush after rename failed");
    }
}
