//! What each handler reports to the watches (MS-FSA 2.1.5.x "FsRtlNotifyFilterReportChange"
//! steps): the filter bits and actions per operation, so the handlers call one line each.

use std::sync::atomic::Ordering;

use smbq_vfs::RelPath;
use smbq_wire::change_notify::{NotifyAction, completion_filter as cf};
use smbq_wire::create::CreateAction;
use smbq_wire::filetime::SetTime;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::file_info::{BasicInfo, LinkInfo};

use crate::Server;
use crate::file_state::LastClose;
use crate::notify::Event;
use crate::open_state::Effects;
use crate::tables::Open;

fn name_filter(is_dir: bool) -> u32 {
    if is_dir { cf::DIR_NAME } else { cf::FILE_NAME }
}

impl Server {
    /// The watch hub (CHANGE_NOTIFY waits here).
    pub(crate) fn notify(&self) -> &crate::notify::NotifyHub {
        &self.notify
    }

    fn share_key(open: &Open) -> String {
        open.tree.share.cfg.name.to_lowercase()
    }

    fn stream_of(open: &Open) -> Option<String> {
        open.file()
            .and_then(|f| f.stream.as_ref())
            .and_then(|s| s.name())
    }

    /// One change to the file (or named stream) `open` names.
    fn notify_open(&self, open: &Open, action: NotifyAction, filter: u32) {
        let path = open.path();
        let stream = Self::stream_of(open);
        let (action, filter) = match (&stream, action) {
            (Some(_), NotifyAction::MODIFIED) => {
                (NotifyAction::MODIFIED_STREAM, stream_bits(filter))
            }
            _ => (action, filter),
        };
        self.notify.report(
            &Self::share_key(open),
            &[Event {
                path: &path,
                stream: stream.as_deref(),
                action,
                filter,
            }],
        );
    }

    /// CREATE (MS-FSA 2.1.5.1): a new file or directory, a new named stream, or an
    /// overwritten file.
    pub(crate) fn notify_created(&self, open: &Open, action: CreateAction) {
        let Some(f) = open.file() else { return };
        if f.stream.is_none()
            && matches!(
                action,
                CreateAction::CREATED | CreateAction::OVERWRITTEN | CreateAction::SUPERSEDED
            )
        {
            self.break_parent_leases(open, &open.path()); // crate::file_state::dir_lease
        }
        match action {
            CreateAction::CREATED if f.stream.is_some() => {
                self.notify_open(open, NotifyAction::ADDED_STREAM, cf::STREAM_NAME)
            }
            CreateAction::CREATED => {
                self.notify_open(open, NotifyAction::ADDED, name_filter(f.is_dir))
            }
            CreateAction::OVERWRITTEN | CreateAction::SUPERSEDED => self.notify_open(
                open,
                NotifyAction::MODIFIED,
                cf::ATTRIBUTES | cf::SIZE | cf::LAST_WRITE,
            ),
            _ => {}
        }
    }

    /// WRITE (MS-FSA 2.1.5.3).
    pub(crate) fn notify_write(&self, open: &Open) {
        // The directory's leases break when this open closes (crate::file_state::dir_lease).
        open.modified.store(true, Ordering::Relaxed);
        self.notify_open(open, NotifyAction::MODIFIED, cf::LAST_WRITE | cf::SIZE);
    }

    /// SET_INFO with a security descriptor (MS-FSA 2.1.5.16).
    pub(crate) fn notify_security(&self, open: &Open) {
        self.notify_open(open, NotifyAction::MODIFIED, cf::SECURITY);
    }

    /// SET_INFO on a file class that succeeded (MS-FSA 2.1.5.15.x); `before` is the path the
    /// open had before, for renames.
    pub(crate) fn notify_set_info(
        &self,
        open: &Open,
        class: FileInfoClass,
        buf: &[u8],
        before: &RelPath,
    ) {
        // A ChangeTime set alone notifies no filter, but it is a change a listing shows, so
        // the directory's leases break as for any other time (Samba 4.25, smbtorture
        // smb2.dirlease.setctime).
        let mut listing_changed = false;
        let filter = match class {
            FileInfoClass::BASIC => match BasicInfo::decode(buf) {
                Ok(b) => {
                    listing_changed =
                        matches!(SetTime::from_wire(b.change_time), Some(SetTime::Set(_)));
                    basic_bits(&b)
                }
                Err(_) => 0,
            },
            FileInfoClass::END_OF_FILE => cf::SIZE | cf::LAST_WRITE,
            FileInfoClass::ALLOCATION => cf::SIZE,
            FileInfoClass::FULL_EA => cf::EA,
            FileInfoClass::RENAME | FileInfoClass::RENAME_EX => {
                self.notify_renamed(open, before);
                0
            }
            FileInfoClass::LINK => {
                self.notify_linked(open, buf);
                0
            }
            FileInfoClass::DISPOSITION | FileInfoClass::DISPOSITION_EX => {
                // A directory marked for deletion ends the waits on it (smb2.notify.rmdir2).
                if let Some(f) = open.file()
                    && f.is_dir
                    && self.open_state().delete_pending(f.key)
                {
                    self.notify
                        .delete_pending(&Self::share_key(open), &open.path());
                }
                0
            }
            _ => 0,
        };
        if filter != 0 {
            self.notify_open(open, NotifyAction::MODIFIED, filter);
        }
        if filter != 0 || listing_changed {
            // What a listing shows changed (crate::file_state::dir_lease).
            self.break_parent_leases(open, &open.path());
        }
    }

    /// MS-FSA 2.1.5.15.6: a new link is a name added to its directory, whose leases break
    /// but for the one the open named as its parent (smbtorture smb2.dirlease.hardlink).
    fn notify_linked(&self, open: &Open, buf: &[u8]) {
        let Ok(l) = LinkInfo::decode(buf) else { return };
        let Some(vfs) = open.tree.share.vfs.as_ref() else {
            return;
        };
        let target = l.file_name.strip_prefix('\\').unwrap_or(&l.file_name);
        // The new name as the link made it: looked up as the link looked it up, so a name the
        // client spelt in another case is the one on disk, whose directory's watches and
        // leases are the ones to tell.
        let Ok(path) = crate::path::parse_name(target, open.posix)
            .and_then(|n| crate::path::lookup(vfs.as_ref(), &n, open.posix))
            .map(|found| found.path)
        else {
            return;
        };
        self.notify.report(
            &Self::share_key(open),
            &[Event {
                path: &path,
                stream: None,
                action: NotifyAction::ADDED,
                filter: name_filter(false),
            }],
        );
        self.break_parent_leases(open, &path); // crate::file_state::dir_lease
    }

    /// MS-FSA 2.1.5.15.11: within one directory the old and new names; across directories a
    /// removal and an addition (smbtorture smb2.notify.rec).
    fn notify_renamed(&self, open: &Open, before: &RelPath) {
        let after = open.path();
        let Some(f) = open.file() else { return };
        if after == *before || f.stream.is_some() {
            return;
        }
        let filter = name_filter(f.is_dir);
        let (old, new) = if after.parent() == before.parent() {
            (
                NotifyAction::RENAMED_OLD_NAME,
                NotifyAction::RENAMED_NEW_NAME,
            )
        } else {
            (NotifyAction::REMOVED, NotifyAction::ADDED)
        };
        let ev = |path, action| Event {
            path,
            stream: None,
            action,
            filter,
        };
        let share = Self::share_key(open);
        self.notify
            .report(&share, &[ev(before, old), ev(&after, new)]);
        if f.is_dir {
            // Watches on the directory or below it follow it.
            self.notify.moved(&share, before, &after);
        }
        self.break_parent_leases(open, before); // crate::file_state::dir_lease
        self.break_parent_leases(open, &after);
        if !f.is_dir {
            self.notify.mark_renamed(open.volatile());
        }
    }

    /// Called as the open closes: its waiting CHANGE_NOTIFYs complete with NOTIFY_CLEANUP; a
    /// directory it marked delete-on-close ends the waits of other opens watching it with
    /// DELETE_PENDING; a file it renamed shows an attribute change under its new name (as
    /// Windows does; smbtorture smb2.notify.mask-change).
    /// Returns the directory lease breaks a close after a write causes, for the caller to send.
    pub(crate) fn notify_closing(&self, open: &Open, delete_on_close: bool) -> Effects {
        let renamed = self.notify.closed(open.volatile());
        let Some(f) = open.file() else {
            return Effects::default();
        };
        if delete_on_close && f.is_dir {
            self.notify
                .delete_pending(&Self::share_key(open), &open.path());
        }
        if renamed && !delete_on_close {
            self.notify_open(open, NotifyAction::MODIFIED, cf::ATTRIBUTES);
        }
        if open.modified.load(Ordering::Relaxed) && !delete_on_close {
            // smbtorture smb2.lease.v2_request: the close, not the write, breaks the
            // directory's leases (crate::file_state::dir_lease).
            let except = open.parent_lease.as_ref();
            return self.parent_lease_breaks(open, &open.path(), except);
        }
        Effects::default()
    }

    /// The last close deleted the file, directory or named stream.
    /// Returns the directory lease breaks the removal causes, for the caller to send.
    pub(crate) fn notify_removed(
        &self,
        open: &Open,
        last: &LastClose,
        stream: Option<&str>,
    ) -> Effects {
        let mut breaks = Effects::default();
        if stream.is_none() {
            // The lease spared is the one both the open that made the file delete-pending
            // and the last closer named (crate::file_state::dir_lease).
            let except = open
                .parent_lease
                .as_ref()
                .filter(|k| last.delete_parent == Some(k.key));
            breaks = self.parent_lease_breaks(open, &last.path, except);
        }
        let (action, filter) = match stream {
            Some(_) => (NotifyAction::REMOVED_STREAM, cf::STREAM_NAME),
            None => (NotifyAction::REMOVED, name_filter(last.is_dir)),
        };
        self.notify.report(
            &Self::share_key(open),
            &[Event {
                path: &last.path,
                stream,
                action,
                filter,
            }],
        );
        breaks
    }
}

/// A change to a stream's data is a stream change (MS-FSA 2.1.5.3).
fn stream_bits(filter: u32) -> u32 {
    let mut out = 0;
    if filter & cf::SIZE != 0 {
        out |= cf::STREAM_SIZE;
    }
    if filter & cf::LAST_WRITE != 0 {
        out |= cf::STREAM_WRITE;
    }
    out
}

/// MS-FSA 2.1.5.15.2: the filter bits of the fields FileBasicInformation actually sets (0 and
/// -1/-2 keep a time; ChangeTime has no bit of its own).
fn basic_bits(b: &BasicInfo) -> u32 {
    let set = |v: u64| matches!(SetTime::from_wire(v), Some(SetTime::Set(_)));
    let mut bits = 0;
    if b.file_attributes != 0 {
        bits |= cf::ATTRIBUTES;
    }
    if set(b.creation_time) {
        bits |= cf::CREATION;
    }
    if set(b.last_access_time) {
        bits |= cf::LAST_ACCESS;
    }
    if set(b.last_write_time) {
        bits |= cf::LAST_WRITE;
    }
    bits
}
