//! Which opens exist on one file, with their access and share modes (MS-FSA 2.1.5.1.2 share
//! access check) and the file's delete-pending state (MS-FSA 2.1.5.4 / 2.1.5.14.3). Pure:
//! [`super::FileStates`] keeps one [`ShareModes`] per file that has opens.
//!
//! Opens of named streams (`crate::streams`) live in their file's entry, tagged with the
//! stream: share modes are checked between opens of the same stream only, except that an
//! open of the file itself asking for DELETE needs every open stream to share delete, and a
//! delete-pending file refuses opens of any of its streams (smbtorture smb2.streams.delete).

use smbq_vfs::RelPath;
use smbq_wire::NtStatus;

use super::FileKey;
use crate::access::{mask, share};

/// Rights that take part in share-mode checks; an open with none of them ("attribute-only")
/// neither conflicts nor is conflicted with.
const SHARING_RIGHTS: u32 = mask::FILE_READ_DATA
    | mask::FILE_WRITE_DATA
    | mask::FILE_APPEND_DATA
    | mask::FILE_EXECUTE
    | mask::DELETE;

#[derive(Clone, Copy, Debug)]
struct Entry {
    open_id: u64,
    access: u32,
    share: u32,
    /// [`FileKey::stream`] of the stream this open addresses.
    stream: u64,
    /// A POSIX open (crate::posix): it does not keep a delete-pending file's name alive.
    posix: bool,
}

/// The opens of one file and what they decided together.
#[derive(Debug)]
pub(crate) struct ShareModes {
    opens: Vec<Entry>,
    delete_pending: bool,
    /// Named streams marked for deletion when their last open closes.
    stream_delete: Vec<u64>,
    /// A client's preallocation of the unnamed stream, forgotten at the last close.
    allocation: Option<u64>,
    /// Where the file is now, relative to its share (renames update it), for the final unlink.
    path: RelPath,
    is_dir: bool,
    /// The parent lease key (its 16 bytes) of the open that made the file delete-pending, if
    /// it named one: the directory lease the final unlink may spare ([`LastClose`]).
    delete_parent: Option<[u8; 16]>,
    /// The delete-pending file was unlinked while POSIX opens still had it ([`Self::remove`]):
    /// their closes delete nothing, whatever has the name now.
    unlinked: bool,
}

/// What the last close of a file must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastClose {
    pub path: RelPath,
    pub is_dir: bool,
    /// The last open of the file is gone and the file is delete-pending: unlink it.
    pub delete: bool,
    /// The last open of a delete-pending named stream is gone: remove that stream (other
    /// opens of the file may remain; then `delete` is false).
    pub delete_stream: bool,
    /// The parent lease key of the open that made the file delete-pending: the unlink breaks
    /// every lease on the directory but the one both it and the last closer named, as Samba
    /// does (smbtorture smb2.dirlease.unlink_different_set_and_close,
    /// unlink_different_initial_and_close; crate::file_state::dir_lease).
    pub delete_parent: Option<[u8; 16]>,
}

/// MS-FSA 2.1.5.1.2.1: does a new open (`access`, `share_access`) conflict with `e`?
fn conflicts(e: &Entry, access: u32, share_access: u32) -> bool {
    share_conflict((e.access, e.share), access, share_access)
}

/// MS-FSA 2.1.5.1.2.1: does a new open (`access`, `share_access`) conflict with an open that
/// holds `(access, share_access)`? The one rule, for this table and a cluster node's check
/// of other nodes' opens (smbq-cluster).
pub fn share_conflict(held: (u32, u32), access: u32, share_access: u32) -> bool {
    let (held_access, held_share) = held;
    if held_access & SHARING_RIGHTS == 0 || access & SHARING_RIGHTS == 0 {
        return false;
    }
    let reads = |a: u32| a & (mask::FILE_READ_DATA | mask::FILE_EXECUTE) != 0;
    let writes = |a: u32| a & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) != 0;
    let deletes = |a: u32| a & mask::DELETE != 0;
    (reads(access) && held_share & share::READ == 0)
        || (writes(access) && held_share & share::WRITE == 0)
        || (deletes(access) && held_share & share::DELETE == 0)
        || (reads(held_access) && share_access & share::READ == 0)
        || (writes(held_access) && share_access & share::WRITE == 0)
        || (deletes(held_access) && share_access & share::DELETE == 0)
}

/// An open asking to be admitted to a file ([`super::FileStates::admit_checking`]).
#[derive(Clone, Copy, Debug)]
pub struct NewOpen<'a> {
    pub open_id: u64,
    /// The access checked against the other opens (MS-FSA 2.1.5.1.2.1).
    pub checked: u32,
    /// The access registered, which later opens are checked against.
    pub access: u32,
    pub share_access: u32,
    /// Where the file is, kept for the unlink at its last close.
    pub path: &'a RelPath,
    pub is_dir: bool,
    /// A POSIX open (crate::posix).
    pub posix: bool,
    /// A persistent open held again (crate::persist), not a client's CREATE: what waits
    /// for its own client elsewhere (a cluster's holds) does not refuse it.
    pub restoring: bool,
}

impl ShareModes {
    pub fn new(path: &RelPath, is_dir: bool) -> Self {
        ShareModes {
            opens: Vec::new(),
            delete_pending: false,
            stream_delete: Vec::new(),
            allocation: None,
            path: path.clone(),
            is_dir,
            delete_parent: None,
            unlinked: false,
        }
    }

    /// Checks `new.checked` against the other opens, then registers `new.access`: an
    /// overwriting open is checked as the writer it is for a moment, then holds only what it
    /// was granted.
    pub fn admit(&mut self, key: FileKey, new: &NewOpen<'_>) -> Result<(), NtStatus> {
        self.check(key, new.checked, new.share_access)?;
        self.opens.push(Entry {
            open_id: new.open_id,
            access: new.access,
            share: new.share_access,
            stream: key.stream,
            posix: new.posix,
        });
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.opens.is_empty()
    }

    /// No opens, and not a file its last close is deleting.
    pub fn is_idle(&self) -> bool {
        self.opens.is_empty() && !self.delete_pending
    }

    /// Unregisters an open. Says what its close must do: remove a delete-pending stream, or,
    /// when it was the last open ([`is_empty`](Self::is_empty) afterwards), delete the file
    /// if it is delete-pending. `delete_on_close` marks the file delete-pending first
    /// (MS-FSA 2.1.5.4: an open's DeleteOnClose becomes the file's at cleanup).
    /// `parent`: the closing open's parent lease key.
    pub fn remove(
        &mut self,
        key: FileKey,
        open_id: u64,
        delete_on_close: bool,
        parent: Option<[u8; 16]>,
    ) -> Option<LastClose> {
        // The stream the open has now (a stream rename may have moved it).
        let stream = self
            .opens
            .iter()
            .find(|e| e.open_id == open_id)
            .map_or(key.stream, |e| e.stream);
        self.opens.retain(|e| e.open_id != open_id);
        if delete_on_close {
            self.mark_delete(stream, true, parent);
        }
        let mut delete_stream = false;
        if stream != 0
            && self.stream_delete.contains(&stream)
            && !self.opens.iter().any(|e| e.stream == stream)
        {
            self.stream_delete.retain(|s| *s != stream);
            delete_stream = true;
        }
        let last = self.opens.is_empty();
        // SMB3 POSIX extensions (Samba close.c): POSIX opens do not keep a delete-pending
        // file's name; it goes when the last other open of the file closes, and those POSIX
        // opens carry on with the unlinked file (a Linux client's unlink of an open file).
        let only_posix = stream == 0 && self.opens.iter().all(|e| e.posix);
        let delete = self.delete_pending && !self.unlinked && (last || only_posix);
        if delete && !last {
            self.unlinked = true;
        }
        (last || delete_stream || delete).then(|| LastClose {
            path: self.path.clone(),
            is_dir: self.is_dir,
            delete,
            delete_stream,
            delete_parent: self.delete_parent,
        })
    }

    /// Whether the file, or the named stream `key` addresses, is delete-pending.
    pub fn delete_pending(&self, key: FileKey) -> bool {
        self.delete_pending || (key.stream != 0 && self.stream_delete.contains(&key.stream))
    }

    /// Opens of the stream `key` addresses.
    pub fn open_count(&self, key: FileKey) -> usize {
        self.opens.iter().filter(|e| e.stream == key.stream).count()
    }

    /// The opens of `key`'s stream that are more than stat opens (the ones a lease's write
    /// caching must be alone among, smbtorture smb2.lease.statopen2-4). For granting W the
    /// stat rights are the oplock ones, READ_CONTROL not among them: an open that may read the
    /// security descriptor leaves a new lease no W (smbtorture smb2.durable-v2-open.
    /// nonstat-and-lease; Samba's is_oplock_stat_open), though it breaks no lease either.
    pub fn data_opens(&self, key: FileKey) -> impl Iterator<Item = u64> + '_ {
        self.opens
            .iter()
            .filter(move |e| e.stream == key.stream && !super::oplock::is_stat_open(e.access))
            .map(|e| e.open_id)
    }

    /// The ids of the file's opens, any stream.
    pub fn open_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.opens.iter().map(|e| e.open_id)
    }

    /// Opens of the file, any stream.
    pub fn open_count_any(&self) -> usize {
        self.opens.len()
    }

    /// Whether a named stream of the file is open (MS-FSA 2.1.5.15.11: the file cannot be
    /// renamed then).
    pub fn has_stream_opens(&self) -> bool {
        self.opens.iter().any(|e| e.stream != 0)
    }

    pub fn set_allocation(&mut self, size: u64) {
        self.allocation = Some(size);
    }

    pub fn allocation(&self) -> Option<u64> {
        self.allocation
    }

    /// After a stream rename, open `open_id` addresses stream `to` of the file.
    pub fn move_open(&mut self, open_id: u64, to: u64) {
        for e in self.opens.iter_mut().filter(|e| e.open_id == open_id) {
            e.stream = to;
        }
    }

    pub fn path(&self) -> &RelPath {
        &self.path
    }

    pub fn set_path(&mut self, path: RelPath) {
        self.path = path;
    }

    /// Whether open `open_id` is a POSIX open (crate::posix).
    pub fn is_posix(&self, open_id: u64) -> bool {
        self.opens.iter().any(|e| e.open_id == open_id && e.posix)
    }

    /// Whether every open of `key`'s stream but `open_id` shares delete (rename and delete
    /// need that).
    pub fn others_share_delete(&self, key: FileKey, open_id: u64) -> bool {
        self.opens
            .iter()
            .filter(|e| e.open_id != open_id && e.stream == key.stream)
            .all(|e| e.share & share::DELETE != 0)
    }

    /// The admission checks for an open of stream `key.stream` of this file.
    pub fn check(&self, key: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus> {
        if self.delete_pending || (key.stream != 0 && self.stream_delete.contains(&key.stream)) {
            return Err(NtStatus::DELETE_PENDING);
        }
        let same = |e: &&Entry| e.stream == key.stream;
        if self
            .opens
            .iter()
            .filter(same)
            .any(|e| conflicts(e, access, share_access))
        {
            return Err(NtStatus::SHARING_VIOLATION);
        }
        // Deleting the file deletes its streams, so each open stream must share delete
        // (smbtorture smb2.streams.delete); the reverse is not checked, as on Windows.
        if key.stream == 0
            && access & mask::DELETE != 0
            && self
                .opens
                .iter()
                .any(|e| e.stream != 0 && e.share & share::DELETE == 0)
        {
            return Err(NtStatus::SHARING_VIOLATION);
        }
        Ok(())
    }

    /// Marks (or clears) delete-pending; `parent`: the parent lease key of the open doing it,
    /// remembered for the first marking of the file.
    pub fn mark_delete(&mut self, stream: u64, pending: bool, parent: Option<[u8; 16]>) {
        if stream == 0 {
            if pending && !self.delete_pending {
                self.delete_parent = parent;
            } else if !pending {
                self.delete_parent = None;
            }
            self.delete_pending = pending;
        } else if pending {
            if !self.stream_delete.contains(&stream) {
                self.stream_delete.push(stream);
            }
        } else {
            self.stream_delete.retain(|s| *s != stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::FileStates;
    use super::*;
    use crate::open_state::{OpenState as _, Queries as _};

    const K: FileKey = FileKey {
        dev: 7,
        ino: 9,
        stream: 0,
    };
    const R: u32 = mask::FILE_READ_DATA;
    const W: u32 = mask::FILE_WRITE_DATA;
    const D: u32 = mask::DELETE;
    const ATTR: u32 = mask::FILE_READ_ATTRIBUTES;

    fn p() -> RelPath {
        RelPath::parse("f").unwrap()
    }

    /// Rows: (first open access, first share, second access, second share, expected).
    #[test]
    fn share_mode_table() {
        let ok = NtStatus::SUCCESS;
        let sv = NtStatus::SHARING_VIOLATION;
        let rows = [
            (R, share::READ, R, share::READ, ok),
            (R, share::READ, W, share::ALL, sv),
            (R, share::ALL, W, share::WRITE, sv), // second must share read with the reader
            (R, share::ALL, W, share::READ | share::WRITE, ok),
            (W, share::WRITE, W, share::WRITE, ok),
            (W, share::READ, R, share::READ, sv), // second forbids the first's write
            (R, 0, ATTR, 0, ok),                  // attribute-only never conflicts
            (ATTR, 0, R | W | D, 0, ok),
            (R, share::READ | share::WRITE, D, share::ALL, sv),
            (D, share::ALL, R, share::READ | share::WRITE, sv),
            (D, share::ALL, R, share::ALL, ok),
        ];
        for (i, (a1, s1, a2, s2, want)) in rows.into_iter().enumerate() {
            let t = FileStates::new();
            t.admit(K, 1, a1, s1, &p(), false).unwrap();
            let got = t
                .admit(K, 2, a2, s2, &p(), false)
                .err()
                .unwrap_or(NtStatus::SUCCESS);
            assert_eq!(got, want, "row {i}");
            if want != ok {
                assert_eq!(t.check(K, a2, s2), Err(want), "check row {i}");
            }
        }
    }

    #[test]
    fn delete_on_close_applies_at_last_close() {
        let t = FileStates::new();
        t.admit(K, 1, R, share::ALL, &p(), false).unwrap();
        t.admit(K, 2, R | D, share::ALL, &p(), false).unwrap();
        assert_eq!(t.release(K, 2, true, None), None);
        // Delete pending now: new opens are refused.
        assert_eq!(
            t.admit(K, 3, R, share::ALL, &p(), false),
            Err(NtStatus::DELETE_PENDING)
        );
        let last = t.release(K, 1, false, None).unwrap();
        assert!(last.delete);
        assert_eq!(last.path, p());
        assert_eq!(t.open_count(K), 0);
    }

    /// Streams of one file: share modes per stream, DELETE on the file needs every open
    /// stream to share delete, delete-pending reaches the streams (smb2.streams.delete).
    #[test]
    fn streams_share_modes_and_delete() {
        let s1 = FileKey { stream: 11, ..K };
        let s2 = FileKey { stream: 22, ..K };
        let t = FileStates::new();
        t.admit(s1, 1, W, 0, &p(), false).unwrap();
        t.admit(s2, 2, W, 0, &p(), false).unwrap();
        assert_eq!(
            t.admit(s1, 3, W, 0, &p(), false),
            Err(NtStatus::SHARING_VIOLATION)
        );
        // The file's own data is another unit; DELETE on it is not, while s1/s2 refuse it.
        t.admit(K, 4, W, share::ALL, &p(), false).unwrap();
        assert_eq!(
            t.admit(K, 5, D, share::ALL, &p(), false),
            Err(NtStatus::SHARING_VIOLATION)
        );
        assert_eq!(t.open_count(s1), 1);
        assert_eq!(t.open_count_any(K), 3);
        assert!(t.has_stream_opens(K));
        assert!(t.release(s2, 2, false, None).is_none());
        assert!(t.release(K, 4, false, None).is_none());
        // A delete-pending stream goes with its last open, the file stays.
        let last = t.release(s1, 1, true, None).unwrap();
        assert!(last.delete_stream && !last.delete);
        assert_eq!(t.open_count_any(K), 0);
        // A delete-pending file refuses its streams too, and is deleted at the very end.
        t.admit(s1, 6, R, share::ALL, &p(), false).unwrap();
        t.admit(K, 7, D, share::ALL, &p(), false).unwrap();
        assert_eq!(t.release(K, 7, true, None), None);
        assert_eq!(
            t.admit(s2, 8, R, share::ALL, &p(), false),
            Err(NtStatus::DELETE_PENDING)
        );
        let last = t.release(s1, 6, false, None).unwrap();
        assert!(last.delete && !last.delete_stream);
    }

    #[test]
    fn moved_opens_and_allocation() {
        let s1 = FileKey { stream: 11, ..K };
        let t = FileStates::new();
        t.admit(s1, 1, R, 0, &p(), false).unwrap();
        t.move_open(s1, 1, 33);
        assert_eq!(t.open_count(s1), 0);
        assert_eq!(t.open_count(FileKey { stream: 33, ..K }), 1);
        t.set_allocation(K, 8192);
        assert_eq!(t.allocation(K), Some(8192));
        assert_eq!(t.allocation(s1), None);
        t.release(s1, 1, false, None).unwrap();
        // Forgotten with the last open, as NTFS trims preallocation at cleanup.
        assert_eq!(t.allocation(K), None);
    }

    /// The parent lease key of whoever made the file delete-pending first reaches the last
    /// close (crate::file_state::dir_lease spares only the lease both named); clearing the
    /// mark forgets it.
    #[test]
    fn the_last_close_names_who_made_the_file_delete_pending() {
        let t = FileStates::new();
        t.admit(K, 1, D, share::ALL, &p(), false).unwrap();
        t.admit(K, 2, D, share::ALL, &p(), false).unwrap();
        t.set_delete_pending(K, true, Some([1; 16]));
        // A second marking, by another open at its close, keeps the first one's key.
        assert_eq!(t.release(K, 1, true, Some([2; 16])), None);
        let last = t.release(K, 2, false, Some([2; 16])).unwrap();
        assert!(last.delete);
        assert_eq!(last.delete_parent, Some([1; 16]));

        // Another file: this one is deleted now.
        let k = FileKey {
            ino: K.ino + 1,
            ..K
        };
        t.admit(k, 3, D, share::ALL, &p(), false).unwrap();
        t.set_delete_pending(k, true, Some([1; 16]));
        t.set_delete_pending(k, false, None);
        let last = t.release(k, 3, true, Some([3; 16])).unwrap();
        assert_eq!(
            last.delete_parent,
            Some([3; 16]),
            "the close marked it anew"
        );
    }

    #[test]
    fn delete_pending_can_be_cleared() {
        let t = FileStates::new();
        t.admit(K, 1, D, share::ALL, &p(), false).unwrap();
        t.set_delete_pending(K, true, None);
        assert!(t.delete_pending(K));
        t.set_delete_pending(K, false, None);
        assert!(!t.release(K, 1, false, None).unwrap().delete);
    }
}
