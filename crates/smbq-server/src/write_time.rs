//! When a handle's writes show in the LastWriteTime clients see (the rules and the state are
//! crate::file_state::write_time's): the hooks WRITE, FLUSH, SET_INFO and CLOSE call. Each
//! runs on the blocking pool (it may stat or set the inode's times).

use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use smbq_vfs::Timespec;

use crate::Server;
use crate::meta;
use crate::tables::Open;
use crate::tables::open::FileOpen;

/// Before a WRITE through `open`: the mtime the file had, when the write starts the file's
/// delayed update (the shown time stays this until then).
pub(crate) fn before_write(srv: &Server, open: &Open, f: &FileOpen) -> Option<u64> {
    if open.sticky_write.load(Ordering::Acquire)
        || !srv.files().write_time_needs_base(f.key, Instant::now())
    {
        return None;
    }
    f.file.stat().ok().map(|st| meta::ft(st.mtime))
}

/// After a WRITE through `open` (`before` from [`before_write`]).
pub(crate) fn after_write(srv: &Server, open: &Open, f: &FileOpen, before: Option<u64>) {
    // A frozen or client-set time: the handle's close puts it back (MS-FSA 2.1.4.17).
    if open.sticky_write.load(Ordering::Acquire) {
        return;
    }
    let first = !open.wrote_once.swap(true, Ordering::AcqRel);
    if srv.files().note_write(f.key, before, first, Instant::now()) {
        open.written_after_update.store(true, Ordering::Release);
    }
}

/// FLUSH, SET_INFO of the size or of FileBasicInformation through `open`: a scheduled update
/// of a file this handle wrote happens now, as do writes made after the update; `force` (a
/// size change) moves the shown time in any case. Callers that answer a client treat a
/// failure here as no update ([`best_effort`]): the request itself succeeded.
pub(crate) fn flush(srv: &Server, open: &Open, force: bool) -> std::io::Result<()> {
    let Some(f) = open.file() else {
        return Ok(());
    };
    if open.sticky_write.load(Ordering::Acquire)
        || !(force || open.modified.load(Ordering::Relaxed))
    {
        // Only a handle that wrote (or a size change) moves the time: no stat for the rest.
        return Ok(());
    }
    let st = f.file.stat()?;
    let Some(w) = srv
        .files()
        .write_time(f.key, meta::ft(st.mtime), Instant::now())
    else {
        return Ok(()); // Nothing written since the file was opened: the inode's mtime is shown.
    };
    let wrote = open.modified.load(Ordering::Relaxed);
    if force || (wrote && (w.pending || open.written_after_update.load(Ordering::Acquire))) {
        touch(srv, open, f)?;
    }
    Ok(())
}

/// Runs [`flush`] for a request that already did its own work: a time that cannot be set is
/// logged, not answered (the write, size change or attributes stand).
pub(crate) fn best_effort(srv: &Server, open: &Open, force: bool) {
    if let Err(e) = flush(srv, open, force) {
        tracing::debug!(path = %open.path(), error = %e, "write time not updated");
    }
}

/// A handle closes (CLOSE, logoff, tree disconnect, lost connection): what it wrote shows now
/// (Windows sets the time of the close), and a time it set or froze, which its own writes
/// moved on the inode, is put back.
pub(crate) fn settle(srv: &Server, open: &Open) {
    let r = if open.sticky_write.load(Ordering::Acquire) {
        restore(srv, open)
    } else {
        flush(srv, open, false)
    };
    if let Err(e) = r {
        tracing::debug!(path = %open.path(), error = %e, "write time at close not set");
    }
}

/// The shown time of `open`'s file onto the inode, where the handle's writes moved it.
fn restore(srv: &Server, open: &Open) -> std::io::Result<()> {
    let Some(f) = open.file() else {
        return Ok(());
    };
    if !open.modified.load(Ordering::Relaxed) {
        return Ok(());
    }
    let st = f.file.stat()?;
    let disk = meta::ft(st.mtime);
    match srv.files().write_time(f.key, disk, Instant::now()) {
        // Puts back what this handle itself set (as its user) or froze.
        Some(w) if w.shown != disk => {
            smbq_vfs::privilege::as_server(|| f.file.set_times(None, Some(to_timespec(w.shown))))
        }
        _ => Ok(()),
    }
}

/// The update itself: the inode's mtime and the shown time become now. The clock is read here
/// (not UTIME_NOW, whose coarse kernel clock can lag a client's reading taken just before its
/// CLOSE; smbtorture delayed-2write), and the value shown is the one the inode kept.
fn touch(srv: &Server, open: &Open, f: &FileOpen) -> std::io::Result<()> {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let now = Timespec::new(
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        d.subsec_nanos() / 100 * 100,
    );
    // As the server: Linux lets only a file's owner set an explicit time, and this handle's
    // own writes (which the kernel allowed) are what moves it. A time a client sets goes
    // through as its user (set_info.rs), so only a user who may do so sets one.
    smbq_vfs::privilege::as_server(|| f.file.set_times(None, Some(now)))?;
    let st = f.file.stat()?;
    srv.files().set_write_time(f.key, meta::ft(st.mtime));
    open.written_after_update.store(false, Ordering::Release);
    Ok(())
}

/// FILETIME to the inode's time.
pub(crate) fn to_timespec(ft: u64) -> Timespec {
    let (sec, nsec) = smbq_wire::filetime::to_unix(ft);
    Timespec::new(sec, nsec)
}

/// SET_INFO FileBasicInformation's LastWriteTime through `open`, after [`flush`] and after an
/// explicit time went to the inode: 0 changes nothing; -1 keeps the shown time for the rest of
/// this handle's life; -2 lets its writes move it again; a time (already on the inode) is shown
/// and kept like -1 (MS-FSA 2.1.5.15.2, Open.UserSetModificationTime).
pub(crate) fn set_by_client(
    srv: &Server,
    open: &Open,
    f: &FileOpen,
    t: smbq_wire::filetime::SetTime,
) -> std::io::Result<()> {
    use smbq_wire::filetime::SetTime;
    match t {
        SetTime::NoChange => {}
        SetTime::Unfreeze => {
            // What this handle wrote while the time was held does not show now either: the
            // inode gets the held time back before the handle's writes count again.
            if open.sticky_write.load(Ordering::Acquire) {
                restore(srv, open)?;
            }
            open.sticky_write.store(false, Ordering::Release);
        }
        SetTime::Freeze => {
            let disk = meta::ft(f.file.stat()?.mtime);
            let shown = srv
                .files()
                .write_time(f.key, disk, Instant::now())
                .map_or(disk, |w| w.shown);
            srv.files().set_write_time(f.key, shown);
            open.sticky_write.store(true, Ordering::Release);
        }
        SetTime::Set(_) => {
            let disk = meta::ft(f.file.stat()?.mtime);
            srv.files().set_write_time(f.key, disk);
            open.sticky_write.store(true, Ordering::Release);
        }
    }
    Ok(())
}

/// The LastWriteTime to show for `key` whose inode has `st`.
pub(crate) fn shown(srv: &Server, key: crate::file_state::FileKey, st: &smbq_vfs::Stat) -> u64 {
    let disk = meta::ft(st.mtime);
    srv.files()
        .write_time(key, disk, Instant::now())
        .map_or(disk, |w| w.shown)
}
