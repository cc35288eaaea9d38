//! Which changes a watcher may see (issue 42): a WATCH_TREE watch reports names from every
//! directory below the watched one, and a name is only the watcher's to learn where it could
//! list the directory holding it. Windows makes the same kind of check: a file system hands
//! FsRtlNotifyFullChangeDirectory a traverse callback run with the watcher's security context
//! for a change in a subdirectory, and a change the watcher may not reach is not returned to
//! it ("Security checks on IRP_MJ_DIRECTORY_CONTROL"; MS-SMB2 3.3.5.19 passes the request to
//! the object store, MS-FSA 2.1.5.11). POSIX has no bypass-traverse privilege, and a
//! directory's names belong to whoever may read it, so smbq asks for listing, not traverse:
//!
//! - every directory between the watched one and the changed entry must open for listing as
//!   the watcher (on per-user shares the kernel decides, as the watcher's Unix user: the
//!   caller runs this on a blocking thread switched to that user), and
//! - its stored descriptor, if any, must grant the watcher FILE_LIST_DIRECTORY, and under
//!   access-based enumeration what a listing of its parent needs to show it
//!   ([`check::ABE_READ`]).
//!
//! A change that fails is dropped, as Windows drops it. Changes in the watched directory
//! itself need no check: the watch's open already holds FILE_LIST_DIRECTORY there.
//! Verdicts are remembered for one batch of changes only, so a permission change counts from
//! the next response on; the memo is bounded by the batch, which the request's output buffer
//! bounds.

use std::collections::HashMap;

use smbq_vfs::{OpenOptions, RelPath, Vfs};

use super::Change;
use crate::access::mask;
use crate::security::{Token, check, store};

/// The directories of `name` (relative to the watched directory, `\`-separated, a stream
/// after the first `:`) between the watched directory and the entry: `a\b\c:s` gives `a`
/// and `a\b`.
fn dirs_on_the_way(name: &str) -> impl Iterator<Item = &str> {
    let path = name.split(':').next().unwrap_or(name);
    path.match_indices('\\')
        .filter_map(move |(i, _)| path.get(..i))
}

/// Whether some change lies below a subdirectory (only those need [`retain_listable`]).
pub fn needs_check(changes: &[Change]) -> bool {
    changes
        .iter()
        .any(|c| dirs_on_the_way(&c.name).next().is_some())
}

/// Keeps the changes whose every directory on the way down `may_list` allows; each
/// directory is asked once.
pub fn retain_listable(
    changes: Vec<Change>,
    mut may_list: impl FnMut(&str) -> bool,
) -> Vec<Change> {
    let mut memo: HashMap<String, bool> = HashMap::new();
    changes
        .into_iter()
        .filter(|c| {
            dirs_on_the_way(&c.name).all(|d| {
                if let Some(v) = memo.get(d) {
                    return *v;
                }
                let v = may_list(d);
                memo.insert(d.to_owned(), v);
                v
            })
        })
        .collect()
}

/// Whether `token` may list `dir` (a `\`-separated path below `watched`), as the calling
/// thread's identity. Fails closed: a directory that is gone, or whose descriptor cannot be
/// read, hides what was reported in it.
pub fn may_list(vfs: &dyn Vfs, watched: &RelPath, dir: &str, token: &Token, abe: bool) -> bool {
    let mut path = watched.clone();
    for comp in dir.split('\\') {
        match path.join(comp) {
            Ok(p) => path = p,
            Err(_) => return false,
        }
    }
    let opts = OpenOptions {
        read: true,
        directory: Some(true),
        ..Default::default()
    };
    // Opening for reading is listing's kernel check (read permission on the directory,
    // search permission on the way to it).
    let Ok(opened) = vfs.open(&path, &opts) else {
        return false;
    };
    let need = if abe {
        check::ABE_READ
    } else {
        mask::FILE_LIST_DIRECTORY
    };
    store::grants(opened.file.get_xattr(store::XATTR), token, need)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_wire::change_notify::NotifyAction;

    fn ch(name: &str) -> Change {
        Change {
            action: NotifyAction::ADDED,
            name: name.into(),
        }
    }

    #[test]
    fn the_directories_on_the_way_down_exclude_the_entry_and_its_stream() {
        let v: Vec<&str> = dirs_on_the_way("a\\b\\c.txt").collect();
        assert_eq!(v, ["a", "a\\b"]);
        assert_eq!(dirs_on_the_way("top.txt").count(), 0);
        let v: Vec<&str> = dirs_on_the_way("d\\f:s\\x").collect();
        assert_eq!(v, ["d"], "a stream name is not a directory");
        assert!(!needs_check(&[ch("a"), ch("b:s")]));
        assert!(needs_check(&[ch("a"), ch("d\\e")]));
    }

    #[test]
    fn changes_below_an_unlistable_directory_are_dropped_and_each_directory_asked_once() {
        let mut asked = Vec::new();
        let kept = retain_listable(
            vec![
                ch("top"),
                ch("open\\a"),
                ch("shut\\secret"),
                ch("open\\shut\\deep"),
                ch("open\\b"),
                ch("shut\\other"),
            ],
            |d| {
                asked.push(d.to_owned());
                !d.ends_with("shut")
            },
        );
        let names: Vec<&str> = kept.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["top", "open\\a", "open\\b"]);
        assert_eq!(asked, ["open", "shut", "open\\shut"]);
    }
}
