//! The LastWriteTime clients see while a file is open, when it is not the inode's mtime.
//!
//! Windows does not move a file's LastWriteTime at each WRITE: the first write through a
//! handle schedules one update about two seconds later, and later writes move nothing until
//! that handle closes, which sets the time of the close. A FLUSH, a SET_INFO of the end of
//! file or of FileBasicInformation through a handle that wrote makes a scheduled update
//! happen at once; a time set by a client (or frozen with -1, MS-FSA 2.1.5.15.2
//! Open.UserSetModificationTime) stays until the handle closes. Samba does the same
//! (WRITE_TIME_UPDATE_USEC_DELAY); smbtorture's smb2.timestamps.delayed-* tests pin it down.
//!
//! The inode's mtime still moves with every write (other local readers see real times); this
//! keeps the time clients are shown, per file (every open of it sees one value), from the first
//! write until the last open goes. No timer runs: an update whose moment has passed is taken
//! when someone next looks, from the inode's mtime then (crate::write_time).

use std::time::{Duration, Instant};

use super::{FileKey, FileStates};

/// How long after a handle's first write the shown LastWriteTime follows (Windows: ~2 s).
pub const UPDATE_DELAY: Duration = Duration::from_secs(2);

/// The shown LastWriteTime of a file with opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ShownWriteTime {
    /// FILETIME.
    shown: u64,
    /// When a scheduled update is due; `None` once it was taken (or none was scheduled).
    due: Option<Instant>,
}

/// The shown time of one file, after taking an update that was due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteTimeState {
    pub shown: u64,
    /// An update is scheduled and not due yet.
    pub pending: bool,
}

impl FileStates {
    /// The LastWriteTime to show for `key` whose inode mtime is `disk` (FILETIME), if it is not
    /// `disk`; an update that is due at `now` is taken from `disk` first.
    pub fn write_time(&self, key: FileKey, disk: u64, now: Instant) -> Option<WriteTimeState> {
        self.with_entry(key, |e| {
            let w = e.write_time.as_mut()?;
            if w.due.is_some_and(|due| now >= due) {
                *w = ShownWriteTime {
                    shown: disk,
                    due: None,
                };
            }
            Some(WriteTimeState {
                shown: w.shown,
                pending: w.due.is_some(),
            })
        })
        .flatten()
    }

    /// Whether a WRITE to `key` at `now` needs the mtime from before it (the first write, or
    /// one after a scheduled update became due).
    pub fn write_time_needs_base(&self, key: FileKey, now: Instant) -> bool {
        self.read(key, |e| match e.write_time {
            None => true,
            Some(w) => w.due.is_some_and(|due| now >= due),
        })
        .unwrap_or(true)
    }

    /// A WRITE to `key` happened at `now`; `before` is the mtime (FILETIME) the file had before
    /// it, when [`write_time_needs_base`](Self::write_time_needs_base) asked for it, and
    /// `first` says it is the writing handle's first. True when the write came after the
    /// file's update was taken: the writing handle's close then sets the time
    /// (crate::write_time::settle). A handle's first write schedules an update of its own,
    /// as on Windows, even when another handle's was taken already. Nothing is kept for a file
    /// without opens.
    pub fn note_write(&self, key: FileKey, before: Option<u64>, first: bool, now: Instant) -> bool {
        self.with_entry(key, |e| {
            if e.opens.is_none() {
                return false;
            }
            match (&mut e.write_time, before) {
                (None, Some(shown)) => {
                    e.write_time = Some(ShownWriteTime {
                        shown,
                        due: Some(now + UPDATE_DELAY),
                    });
                    false
                }
                (None, None) => false,
                (Some(w), before) => match w.due {
                    Some(due) if now < due => false,
                    Some(_) => {
                        // Due while nobody looked: the update shows the previous write's time.
                        if let Some(b) = before {
                            *w = ShownWriteTime {
                                shown: b,
                                due: None,
                            };
                        } else {
                            w.due = None;
                        }
                        true
                    }
                    None if first => {
                        w.due = Some(now + UPDATE_DELAY);
                        false
                    }
                    None => true,
                },
            }
        })
        .unwrap_or(false)
    }

    /// From now on `key` shows `shown` (an update taken, or a time a client set or froze).
    /// Nothing is kept for a file without opens.
    pub fn set_write_time(&self, key: FileKey, shown: u64) {
        self.with_entry(key, |e| {
            if e.opens.is_some() {
                e.write_time = Some(ShownWriteTime { shown, due: None });
            }
        });
    }

    /// Changes `key`'s entry if it has one (never makes one: the shown time lives only while
    /// the file has opens, and so an entry).
    fn with_entry<R>(&self, key: FileKey, f: impl FnOnce(&mut super::FileEntry) -> R) -> Option<R> {
        self.shard(key).files.lock().map.get_mut(&key.base()).map(f)
    }
}
