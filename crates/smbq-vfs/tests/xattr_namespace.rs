//! Where smbq's metadata lives: `trusted.` for a root server (local users can neither read
//! nor forge it), with values an older smbq left in `user.` moved on first touch; `user.`
//! for a server without root.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use smbq_vfs::{CreateMode, OpenOptions, PosixOptions, PosixVfs, RelPath, Vfs};

fn xattr(path: &std::path::Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(4096);
    rustix::fs::getxattr(path, name, rustix::buffer::spare_capacity(&mut buf))
        .ok()
        .map(|_| buf)
}

#[test]
fn metadata_goes_to_trusted_as_root_and_legacy_values_move_on_first_touch() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = PosixVfs::new(dir.path(), PosixOptions::default()).unwrap();
    let opts = OpenOptions {
        read: true,
        write: true,
        create: CreateMode::CreateNew,
        directory: Some(false),
        mode: 0o644,
    };
    let f = vfs.open(&RelPath::parse("f").unwrap(), &opts).unwrap().file;
    let path = dir.path().join("f");
    let root = rustix::process::getuid().is_root();
    let (ns, other) = if root {
        ("trusted.", "user.")
    } else {
        ("user.", "trusted.")
    };
    if f.set_xattr("smbq.a", b"1").is_err() {
        eprintln!("no xattrs on this filesystem; nothing to test");
        return;
    }
    assert_eq!(xattr(&path, &format!("{ns}smbq.a")), Some(b"1".to_vec()));
    assert_eq!(xattr(&path, &format!("{other}smbq.a")), None);
    if !root {
        return;
    }
    // An older smbq's value in user.: read through, moved to trusted. and gone from user.
    rustix::fs::setxattr(
        &path,
        "user.smbq.old",
        b"legacy",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let mut names = f.list_xattrs().unwrap();
    names.sort();
    assert_eq!(names, vec!["smbq.a".to_string(), "smbq.old".to_string()]);
    assert_eq!(f.get_xattr("smbq.old").unwrap(), Some(b"legacy".to_vec()));
    assert_eq!(xattr(&path, "trusted.smbq.old"), Some(b"legacy".to_vec()));
    assert_eq!(xattr(&path, "user.smbq.old"), None);
    // A legacy copy never shadows the current value, and removing takes both.
    rustix::fs::setxattr(
        &path,
        "user.smbq.a",
        b"stale",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    assert_eq!(f.get_xattr("smbq.a").unwrap(), Some(b"1".to_vec()));
    assert!(f.remove_xattr("smbq.a").unwrap());
    assert_eq!(xattr(&path, "trusted.smbq.a"), None);
    assert_eq!(xattr(&path, "user.smbq.a"), None);
}
