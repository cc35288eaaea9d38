//! Which opens exist on each file (by device and inode), with their access and share modes
//! (MS-FSA 2.1.5.1.2 share access check) and the file's delete-pending state
//! (MS-FSA 2.1.5.4 / 2.1.5.14.3).

use std::collections::HashMap;

use parking_lot::Mutex;
use smbq_vfs::RelPath;
use smbq_wire::NtStatus;

use crate::access::{mask, share};
use crate::byte_lock::FileKey;

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
}

#[derive(Debug)]
struct FileState {
    opens: Vec<Entry>,
    delete_pending: bool,
    /// Where the file is now, relative to its share (renames update it), for the final unlink.
    path: RelPath,
    is_dir: bool,
}

/// What the last close of a file must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LastClose {
    pub path: RelPath,
    pub is_dir: bool,
    pub delete: bool,
}

/// MS-FSA 2.1.5.1.2.1: does a new open (`access`, `share_access`) conflict with `e`?
fn conflicts(e: &Entry, access: u32, share_access: u32) -> bool {
    if e.access & SHARING_RIGHTS == 0 || access & SHARING_RIGHTS == 0 {
        return false;
    }
    let reads = |a: u32| a & (mask::FILE_READ_DATA | mask::FILE_EXECUTE) != 0;
    let writes = |a: u32| a & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA) != 0;
    let deletes = |a: u32| a & mask::DELETE != 0;
    (reads(access) && e.share & share::READ == 0)
        || (writes(access) && e.share & share::WRITE == 0)
        || (deletes(access) && e.share & share::DELETE == 0)
        || (reads(e.access) && share_access & share::READ == 0)
        || (writes(e.access) && share_access & share::WRITE == 0)
        || (deletes(e.access) && share_access & share::DELETE == 0)
}

#[derive(Default)]
pub struct FileTable {
    files: Mutex<HashMap<FileKey, FileState>>,
}

impl FileTable {
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks share modes and delete-pending, then registers the open; atomic with respect
    /// to other admissions of the same file.
    pub fn admit(
        &self,
        key: FileKey,
        open_id: u64,
        access: u32,
        share_access: u32,
        path: &RelPath,
        is_dir: bool,
    ) -> Result<(), NtStatus> {
        let mut files = self.files.lock();
        let st = files.entry(key).or_insert_with(|| FileState {
            opens: Vec::new(),
            delete_pending: false,
            path: path.clone(),
            is_dir,
        });
        if st.delete_pending {
            return Err(NtStatus::DELETE_PENDING);
        }
        if st.opens.iter().any(|e| conflicts(e, access, share_access)) {
            if st.opens.is_empty() {
                files.remove(&key);
            }
            return Err(NtStatus::SHARING_VIOLATION);
        }
        st.opens.push(Entry {
            open_id,
            access,
            share: share_access,
        });
        Ok(())
    }

    /// The same checks as [`admit`](Self::admit) without registering anything (before a
    /// destructive step such as truncation).
    pub fn check(&self, key: FileKey, access: u32, share_access: u32) -> Result<(), NtStatus> {
        let files = self.files.lock();
        let Some(st) = files.get(&key) else {
            return Ok(());
        };
        if st.delete_pending {
            return Err(NtStatus::DELETE_PENDING);
        }
        if st.opens.iter().any(|e| conflicts(e, access, share_access)) {
            return Err(NtStatus::SHARING_VIOLATION);
        }
        Ok(())
    }

    /// Unregisters an open. When it was the last one, says where the file is and whether it
    /// must now be deleted; `delete_on_close` marks the file delete-pending first
    /// (MS-FSA 2.1.5.4: an open's DeleteOnClose becomes the file's at cleanup).
    pub fn remove(&self, key: FileKey, open_id: u64, delete_on_close: bool) -> Option<LastClose> {
        let mut files = self.files.lock();
        let st = files.get_mut(&key)?;
        st.opens.retain(|e| e.open_id != open_id);
        if delete_on_close {
            st.delete_pending = true;
        }
        if !st.opens.is_empty() {
            return None;
        }
        let st = files.remove(&key)?;
        Some(LastClose {
            path: st.path,
            is_dir: st.is_dir,
            delete: st.delete_pending,
        })
    }

    pub fn set_delete_pending(&self, key: FileKey, pending: bool) {
        if let Some(st) = self.files.lock().get_mut(&key) {
            st.delete_pending = pending;
        }
    }

    pub fn delete_pending(&self, key: FileKey) -> bool {
        self.files
            .lock()
            .get(&key)
            .is_some_and(|s| s.delete_pending)
    }

    pub fn open_count(&self, key: FileKey) -> usize {
        self.files.lock().get(&key).map_or(0, |s| s.opens.len())
    }

    /// The file's current path (after renames).
    pub fn path(&self, key: FileKey) -> Option<RelPath> {
        self.files.lock().get(&key).map(|s| s.path.clone())
    }

    pub fn set_path(&self, key: FileKey, path: RelPath) {
        if let Some(st) = self.files.lock().get_mut(&key) {
            st.path = path;
        }
    }

    /// Whether any open file other than `except` lies strictly below `dir` (Windows refuses
    /// to rename a directory while files inside it are open).
    pub fn any_open_below(&self, dir: &RelPath, except: FileKey) -> bool {
        self.files
            .lock()
            .iter()
            .any(|(k, s)| *k != except && s.path != *dir && s.path.starts_with(dir))
    }

    /// Whether another open on `key` lacks FILE_SHARE_DELETE (rename and delete need every
    /// other open to share delete).
    pub fn others_share_delete(&self, key: FileKey, open_id: u64) -> bool {
        self.files.lock().get(&key).is_none_or(|s| {
            s.opens
                .iter()
                .filter(|e| e.open_id != open_id)
                .all(|e| e.share & share::DELETE != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: FileKey = FileKey { dev: 7, ino: 9 };
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
            let t = FileTable::new();
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
        let t = FileTable::new();
        t.admit(K, 1, R, share::ALL, &p(), false).unwrap();
        t.admit(K, 2, R | D, share::ALL, &p(), false).unwrap();
        assert_eq!(t.remove(K, 2, true), None);
        // Delete pending now: new opens are refused.
        assert_eq!(
            t.admit(K, 3, R, share::ALL, &p(), false),
            Err(NtStatus::DELETE_PENDING)
        );
        let last = t.remove(K, 1, false).unwrap();
        assert!(last.delete);
        assert_eq!(last.path, p());
        assert_eq!(t.open_count(K), 0);
    }

    #[test]
    fn delete_pending_can_be_cleared() {
        let t = FileTable::new();
        t.admit(K, 1, D, share::ALL, &p(), false).unwrap();
        t.set_delete_pending(K, true);
        assert!(t.delete_pending(K));
        t.set_delete_pending(K, false);
        assert!(!t.remove(K, 1, false).unwrap().delete);
    }
}
