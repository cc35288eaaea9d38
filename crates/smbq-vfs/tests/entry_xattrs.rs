//! `VfsFile::entry_xattrs`: a directory handle reads its entries' `user.` xattrs, filtered,
//! whole (values and name lists past the first small buffer too), and never a symlink's
//! target's.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use smbq_vfs::{CreateMode, OpenOptions, PosixOptions, PosixVfs, RelPath, Vfs};

fn open(vfs: &PosixVfs, path: &str, create: CreateMode, dir: bool) -> Box<dyn smbq_vfs::VfsFile> {
    let opts = OpenOptions {
        read: true,
        write: !dir,
        create,
        directory: Some(dir),
        mode: 0o644,
    };
    let p = if path.is_empty() {
        RelPath::root()
    } else {
        RelPath::parse(path).unwrap()
    };
    vfs.open(&p, &opts).unwrap().file
}

#[test]
fn values_and_lists_larger_than_the_first_buffer_come_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = PosixVfs::new(dir.path(), PosixOptions::default()).unwrap();
    let f = open(&vfs, "f", CreateMode::CreateNew, false);
    let big: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
    if f.set_xattr("smbq.big", &big).is_err() {
        eprintln!("no user xattrs on this filesystem; nothing to test");
        return;
    }
    // Enough names that the list alone passes 256 bytes.
    for i in 0..30 {
        f.set_xattr(&format!("other.attribute.number.{i}"), b"x")
            .unwrap();
    }
    f.set_xattr("smbq.small", b"s").unwrap();
    drop(f);
    std::os::unix::fs::symlink("f", dir.path().join("link")).unwrap();

    let root = open(&vfs, "", CreateMode::OpenExisting, true);
    let want = |n: &str| n.starts_with("smbq.");
    let mut got = root.entry_xattrs("f", &want).unwrap();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("smbq.big".to_string(), big),
            ("smbq.small".to_string(), b"s".to_vec())
        ]
    );
    assert!(root.entry_xattrs("link", &want).unwrap().is_empty());
    assert!(root.entry_xattrs("gone", &want).unwrap().is_empty());
    assert!(root.entry_xattrs("../f", &want).is_err());
}
