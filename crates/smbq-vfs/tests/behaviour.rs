//! Behaviour both backends must share, written once over `&dyn Vfs` and run against each.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::Bytes;
use smbq_vfs::{
    CreateMode, FileKind, MemVfs, OpenOptions, PosixOptions, PosixVfs, RelPath, Timespec, Vfs,
    VfsFile,
};
use std::io;

fn p(s: &str) -> RelPath {
    RelPath::parse(s).unwrap()
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error()
        .unwrap_or_else(|| panic!("no errno in {e:?}"))
}

const ENOENT: i32 = 2;
const EBADF: i32 = 9;
const EEXIST: i32 = 17;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const EINVAL: i32 = 22;
const ENOTEMPTY: i32 = 39;

fn opts(read: bool, write: bool, create: CreateMode, directory: Option<bool>) -> OpenOptions {
    OpenOptions {
        read,
        write,
        create,
        directory,
        mode: 0o755,
    }
}

fn create_file(vfs: &dyn Vfs, path: &str, data: &[u8]) {
    let f = vfs
        .open(
            &p(path),
            &opts(true, true, CreateMode::CreateNew, Some(false)),
        )
        .unwrap();
    assert!(f.created);
    assert_eq!(
        f.file.write_at(0, &[Bytes::copy_from_slice(data)]).unwrap(),
        data.len()
    );
}

fn mkdir(vfs: &dyn Vfs, path: &str) {
    let d = vfs
        .open(
            &p(path),
            &opts(true, false, CreateMode::CreateNew, Some(true)),
        )
        .unwrap();
    assert!(d.created);
}

fn read_all(vfs: &dyn Vfs, path: &str) -> Vec<u8> {
    let f = vfs
        .open(&p(path), &opts(true, false, CreateMode::OpenExisting, None))
        .unwrap();
    f.file.read_at(0, 1 << 20).unwrap().to_vec()
}

fn open_err(vfs: &dyn Vfs, path: &str, o: OpenOptions) -> io::Error {
    vfs.open(&p(path), &o)
        .err()
        .unwrap_or_else(|| panic!("open {path} with {o:?} succeeded"))
}

fn vectored_round_trip(vfs: &dyn Vfs) {
    let f = vfs
        .open(&p("f"), &opts(true, true, CreateMode::CreateNew, None))
        .unwrap()
        .file;
    let bufs = [
        Bytes::from_static(b"hello "),
        Bytes::new(),
        Bytes::from_static(b"world"),
    ];
    assert_eq!(f.write_at(0, &bufs).unwrap(), 11);
    assert_eq!(&f.read_at(0, 100).unwrap()[..], b"hello world");
    assert_eq!(&f.read_at(6, 3).unwrap()[..], b"wor");
    assert!(f.read_at(11, 10).unwrap().is_empty());
    assert!(f.read_at(1 << 40, usize::MAX).unwrap().is_empty());
    // Writing past the end leaves a zero-filled hole.
    assert_eq!(f.write_at(13, &[Bytes::from_static(b"!")]).unwrap(), 1);
    assert_eq!(&f.read_at(10, 10).unwrap()[..], b"d\0\0!");
    assert_eq!(f.stat().unwrap().size, 14);
    assert_eq!(vfs.stat(&p("f")).unwrap().size, 14);
    // Many slices in one call (more than one iovec batch on POSIX).
    let many: Vec<Bytes> = (0..2500u32)
        .map(|i| Bytes::from(vec![(i % 251) as u8; 3]))
        .collect();
    assert_eq!(f.write_at(100, &many).unwrap(), 7500);
    let back = f.read_at(100, 7500).unwrap();
    assert_eq!(back.len(), 7500);
    assert!(
        back.chunks(3)
            .enumerate()
            .all(|(i, c)| c == [(i % 251) as u8; 3])
    );
}

/// Two handles appending at once, in small records from two threads: every record lands
/// whole and none is written over (each append goes where the end is when it is written;
/// finding the end first and writing there loses records to the other appender).
fn concurrent_appends_never_overlap(vfs: &dyn Vfs) {
    create_file(vfs, "log", b"");
    let open = || {
        vfs.open(&p("log"), &opts(true, true, CreateMode::OpenExisting, None))
            .unwrap()
            .file
    };
    const RECORDS: usize = 2000;
    const LEN: usize = 61;
    let (a, b) = (open(), open());
    std::thread::scope(|s| {
        for (f, tag) in [(&a, b'a'), (&b, b'b')] {
            s.spawn(move || {
                for i in 0..RECORDS {
                    let mut rec = vec![tag; LEN];
                    rec[1..5].copy_from_slice(&(i as u32).to_be_bytes());
                    assert_eq!(f.append(&[Bytes::from(rec)]).unwrap(), LEN);
                }
            });
        }
    });
    let all = a.read_at(0, 4 * RECORDS * LEN).unwrap();
    assert_eq!(all.len(), 2 * RECORDS * LEN, "records were written over");
    let mut next = [0u32; 2];
    for rec in all.chunks(LEN) {
        let who = usize::from(rec[0] == b'b');
        assert!(rec[5..].iter().all(|&x| x == rec[0]), "a torn record");
        assert_eq!(u32::from_be_bytes(rec[1..5].try_into().unwrap()), next[who]);
        next[who] += 1;
    }
}

fn create_modes(vfs: &dyn Vfs) {
    let rw = |c| opts(true, true, c, None);
    assert_eq!(
        errno(&open_err(vfs, "x", rw(CreateMode::OpenExisting))),
        ENOENT
    );
    assert_eq!(errno(&open_err(vfs, "x", rw(CreateMode::Truncate))), ENOENT);
    assert!(
        vfs.open(&p("x"), &rw(CreateMode::OpenOrCreate))
            .unwrap()
            .created
    );
    assert!(
        !vfs.open(&p("x"), &rw(CreateMode::OpenOrCreate))
            .unwrap()
            .created
    );
    assert_eq!(
        errno(&open_err(vfs, "x", rw(CreateMode::CreateNew))),
        EEXIST
    );
    create_file(vfs, "t", b"0123456789");
    let o = vfs.open(&p("t"), &rw(CreateMode::Truncate)).unwrap();
    assert!(!o.created);
    assert_eq!(o.file.stat().unwrap().size, 0);
    create_file(vfs, "u", b"abc");
    // Truncation works even without write access asked for.
    let o = vfs
        .open(
            &p("u"),
            &opts(true, false, CreateMode::CreateOrTruncate, None),
        )
        .unwrap();
    assert!(!o.created);
    assert_eq!(vfs.stat(&p("u")).unwrap().size, 0);
    assert!(
        vfs.open(&p("v"), &rw(CreateMode::CreateOrTruncate))
            .unwrap()
            .created
    );
    assert_eq!(
        errno(&open_err(vfs, "missing/x", rw(CreateMode::OpenOrCreate))),
        ENOENT
    );
    assert_eq!(
        errno(&open_err(vfs, "t/x", rw(CreateMode::OpenOrCreate))),
        ENOTDIR
    );
}

fn handle_access_is_enforced(vfs: &dyn Vfs) {
    create_file(vfs, "f", b"data");
    let ro = vfs
        .open(&p("f"), &opts(true, false, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    assert_eq!(
        errno(&ro.write_at(0, &[Bytes::from_static(b"x")]).unwrap_err()),
        EBADF
    );
    let wo = vfs
        .open(&p("f"), &opts(false, true, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    assert_eq!(errno(&wo.read_at(0, 4).unwrap_err()), EBADF);
    assert_eq!(read_all(vfs, "f"), b"data");
}

fn directories(vfs: &dyn Vfs) {
    mkdir(vfs, "d");
    let dir_new = opts(true, false, CreateMode::CreateNew, Some(true));
    assert_eq!(errno(&open_err(vfs, "d", dir_new)), EEXIST);
    assert!(
        !vfs.open(
            &p("d"),
            &opts(true, false, CreateMode::OpenOrCreate, Some(true))
        )
        .unwrap()
        .created
    );
    assert_eq!(
        errno(&open_err(
            vfs,
            "d",
            opts(true, false, CreateMode::OpenExisting, Some(false))
        )),
        EISDIR
    );
    assert_eq!(
        errno(&open_err(
            vfs,
            "d",
            opts(true, true, CreateMode::Truncate, None)
        )),
        EISDIR
    );
    assert_eq!(
        errno(&open_err(
            vfs,
            "d",
            opts(true, false, CreateMode::CreateOrTruncate, Some(true))
        )),
        EINVAL
    );
    // A directory opened without saying so, even asking for write (attribute updates).
    let d = vfs
        .open(&p("d"), &opts(true, true, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    assert_eq!(d.stat().unwrap().kind, FileKind::Dir);
    assert_eq!(errno(&d.read_at(0, 10).unwrap_err()), EISDIR);

    create_file(vfs, "d/f", b"x");
    assert_eq!(
        errno(&open_err(
            vfs,
            "d/f",
            opts(true, false, CreateMode::OpenExisting, Some(true))
        )),
        ENOTDIR
    );
    assert_eq!(
        errno(&open_err(
            vfs,
            "d/f",
            opts(true, false, CreateMode::OpenOrCreate, Some(true))
        )),
        ENOTDIR
    );
    assert_eq!(errno(&vfs.rmdir(&p("d")).unwrap_err()), ENOTEMPTY);
    assert_eq!(errno(&vfs.unlink(&p("d")).unwrap_err()), EISDIR);
    assert_eq!(errno(&vfs.rmdir(&p("d/f")).unwrap_err()), ENOTDIR);
    vfs.unlink(&p("d/f")).unwrap();
    assert_eq!(errno(&vfs.unlink(&p("d/f")).unwrap_err()), ENOENT);
    vfs.rmdir(&p("d")).unwrap();
    assert_eq!(errno(&vfs.stat(&p("d")).unwrap_err()), ENOENT);
    // The root is a directory that cannot be removed or renamed.
    assert_eq!(vfs.stat(&RelPath::root()).unwrap().kind, FileKind::Dir);
    assert!(vfs.rmdir(&RelPath::root()).is_err());
    assert!(vfs.rename(&RelPath::root(), &p("r"), true).is_err());
}

fn rename(vfs: &dyn Vfs) {
    create_file(vfs, "a", b"AAA");
    create_file(vfs, "b", b"B");
    assert_eq!(
        errno(&vfs.rename(&p("a"), &p("b"), false).unwrap_err()),
        EEXIST
    );
    assert_eq!(read_all(vfs, "a"), b"AAA");
    assert_eq!(read_all(vfs, "b"), b"B");
    vfs.rename(&p("a"), &p("b"), true).unwrap();
    assert_eq!(errno(&vfs.stat(&p("a")).unwrap_err()), ENOENT);
    assert_eq!(read_all(vfs, "b"), b"AAA");
    vfs.rename(&p("b"), &p("c"), false).unwrap();
    assert_eq!(read_all(vfs, "c"), b"AAA");

    mkdir(vfs, "d");
    create_file(vfs, "d/inner", b"i");
    vfs.rename(&p("d"), &p("e"), false).unwrap();
    assert_eq!(read_all(vfs, "e/inner"), b"i");
    vfs.rename(&p("c"), &p("e/c"), false).unwrap();
    assert_eq!(read_all(vfs, "e/c"), b"AAA");
    assert_eq!(
        errno(&vfs.rename(&p("e/c"), &p("nope/c"), false).unwrap_err()),
        ENOENT
    );
    assert_eq!(
        errno(&vfs.rename(&p("gone"), &p("x"), false).unwrap_err()),
        ENOENT
    );
    mkdir(vfs, "e/sub");
    assert_eq!(
        errno(&vfs.rename(&p("e"), &p("e/sub/e"), false).unwrap_err()),
        EINVAL
    );
    mkdir(vfs, "f");
    assert_eq!(
        errno(&vfs.rename(&p("e/c"), &p("f"), true).unwrap_err()),
        EISDIR
    );
    assert_eq!(
        errno(&vfs.rename(&p("f"), &p("e/c"), true).unwrap_err()),
        ENOTDIR
    );
    assert_eq!(
        errno(&vfs.rename(&p("f"), &p("e"), true).unwrap_err()),
        ENOTEMPTY
    );
    vfs.rename(&p("e/sub"), &p("f"), true).unwrap();
    assert_eq!(vfs.stat(&p("f")).unwrap().kind, FileKind::Dir);
}

fn case_insensitive(vfs: &dyn Vfs) {
    create_file(vfs, "Readme.TXT", b"");
    mkdir(vfs, "Sub");
    create_file(vfs, "Sub/ÄRGER", b"");
    create_file(vfs, "Sub/dup", b"");
    create_file(vfs, "Sub/DUP", b"");
    let root = RelPath::root();
    assert_eq!(
        vfs.find_case_insensitive(&root, "readme.txt")
            .unwrap()
            .as_deref(),
        Some("Readme.TXT")
    );
    assert_eq!(
        vfs.find_case_insensitive(&root, "SUB").unwrap().as_deref(),
        Some("Sub")
    );
    assert_eq!(vfs.find_case_insensitive(&root, "nothing").unwrap(), None);
    assert_eq!(
        vfs.find_case_insensitive(&p("Sub"), "ärger")
            .unwrap()
            .as_deref(),
        Some("ÄRGER")
    );
    assert_eq!(
        vfs.find_case_insensitive(&p("Sub"), "Dup").unwrap(),
        None,
        "ambiguous"
    );
    assert_eq!(
        errno(
            &vfs.find_case_insensitive(&p("Readme.TXT"), "x")
                .unwrap_err()
        ),
        ENOTDIR
    );
    assert_eq!(
        errno(&vfs.find_case_insensitive(&p("none"), "x").unwrap_err()),
        ENOENT
    );
}

fn read_dir_lists_with_stats(vfs: &dyn Vfs) {
    create_file(vfs, "a", b"abc");
    mkdir(vfs, "d");
    create_file(vfs, "d/deep", b"12345");
    let root = vfs
        .open(
            &RelPath::root(),
            &opts(true, false, CreateMode::OpenExisting, Some(true)),
        )
        .unwrap();
    // Listing twice gives the same answer (the POSIX backend rewinds its fd).
    for _ in 0..2 {
        let mut list = root.file.read_dir().unwrap();
        list.sort_by(|x, y| x.name.cmp(&y.name));
        let names: Vec<_> = list.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "d"]);
        assert_eq!(list[0].stat.kind, FileKind::File);
        assert_eq!(list[0].stat.size, 3);
        assert_eq!(list[0].stat, vfs.stat(&p("a")).unwrap());
        assert_eq!(list[1].stat.kind, FileKind::Dir);
    }
    let d = vfs
        .open(
            &p("d"),
            &opts(true, false, CreateMode::OpenExisting, Some(true)),
        )
        .unwrap();
    let list = d.file.read_dir().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].name.as_str(), list[0].stat.size), ("deep", 5));
    let f = vfs
        .open(&p("a"), &opts(true, false, CreateMode::OpenExisting, None))
        .unwrap();
    assert_eq!(errno(&f.file.read_dir().unwrap_err()), ENOTDIR);
}

fn times_and_mode(vfs: &dyn Vfs) {
    create_file(vfs, "f", b"x");
    let f = vfs
        .open(&p("f"), &opts(true, true, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    let before = f.stat().unwrap();
    let a = Timespec::new(1_000_000_000, 123_456_789);
    let m = Timespec::new(1_200_000_000, 5);
    f.set_times(Some(a), None).unwrap();
    let s = f.stat().unwrap();
    assert_eq!((s.atime, s.mtime), (a, before.mtime));
    f.set_times(None, Some(m)).unwrap();
    let s = vfs.stat(&p("f")).unwrap();
    assert_eq!((s.atime, s.mtime), (a, m));
    assert!(
        f.set_times(Some(Timespec::new(0, 1_000_000_000)), None)
            .is_err()
    );

    f.set_mode(0o4640).unwrap();
    let mode = f.stat().unwrap().mode;
    assert_eq!(mode & 0o7777, 0o640, "setuid must be dropped");
    assert_eq!(mode & 0o170000, 0o100000, "type bits are reported");
}

fn size_changes(vfs: &dyn Vfs) {
    create_file(vfs, "f", b"abc");
    let f = vfs
        .open(&p("f"), &opts(true, true, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    f.set_len(10).unwrap();
    assert_eq!(&f.read_at(0, 100).unwrap()[..], b"abc\0\0\0\0\0\0\0");
    f.allocate(1 << 20).unwrap();
    assert_eq!(f.stat().unwrap().size, 10, "allocate keeps the size");
    f.set_len(1).unwrap();
    assert_eq!(&f.read_at(0, 100).unwrap()[..], b"a");
    f.fsync().unwrap();
    assert!(f.set_len(u64::MAX).is_err());
    assert!(
        f.write_at(u64::MAX - 1, &[Bytes::from_static(b"xx")])
            .is_err()
    );
}

fn open_handle_survives_unlink(vfs: &dyn Vfs) {
    create_file(vfs, "f", b"still here");
    let f = vfs
        .open(&p("f"), &opts(true, false, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    vfs.unlink(&p("f")).unwrap();
    assert_eq!(errno(&vfs.stat(&p("f")).unwrap_err()), ENOENT);
    assert_eq!(&f.read_at(0, 100).unwrap()[..], b"still here");
    assert_eq!(f.stat().unwrap().nlink, 0);
}

fn xattrs(vfs: &dyn Vfs) {
    create_file(vfs, "f", b"");
    let f = vfs
        .open(&p("f"), &opts(true, true, CreateMode::OpenExisting, None))
        .unwrap()
        .file;
    assert!(f.get_xattr("").is_err());
    assert!(f.get_xattr("a\0b").is_err());
    match f.set_xattr("DOSATTRIB", b"\x01\x02") {
        Ok(()) => {
            assert_eq!(
                f.get_xattr("DOSATTRIB").unwrap().as_deref(),
                Some(&b"\x01\x02"[..])
            );
            assert_eq!(f.get_xattr("other").unwrap(), None);
            f.set_xattr("smbq.stream.a\nb", b"").unwrap();
            let mut names = f.list_xattrs().unwrap();
            names.sort();
            // Only our `user.` names, without the prefix (the kernel may add others, e.g.
            // security.selinux, which must not show).
            assert_eq!(names, ["DOSATTRIB", "smbq.stream.a\nb"]);
            assert!(f.remove_xattr("DOSATTRIB").unwrap());
            assert!(!f.remove_xattr("DOSATTRIB").unwrap());
            assert_eq!(f.get_xattr("DOSATTRIB").unwrap(), None);
            assert_eq!(f.list_xattrs().unwrap(), ["smbq.stream.a\nb"]);
            assert!(f.remove_xattr("").is_err());
            // Directories carry user xattrs too (named streams of directories live there).
            vfs.open(
                &p("d"),
                &opts(true, false, CreateMode::CreateNew, Some(true)),
            )
            .unwrap();
            let d = vfs
                .open(
                    &p("d"),
                    &opts(true, false, CreateMode::OpenExisting, Some(true)),
                )
                .unwrap()
                .file;
            assert_eq!(d.list_xattrs().unwrap(), Vec::<String>::new());
            d.set_xattr("x", b"1").unwrap();
            assert_eq!(d.list_xattrs().unwrap(), ["x"]);
        }
        // Some filesystems under the test tmpdir have no user xattrs; then reads say absent.
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {
            assert_eq!(f.get_xattr("DOSATTRIB").unwrap(), None);
            assert!(f.list_xattrs().unwrap().is_empty());
            assert!(!f.remove_xattr("DOSATTRIB").unwrap());
        }
        Err(e) => panic!("set_xattr: {e:?}"),
    }
}

fn statfs_is_sane(vfs: &dyn Vfs) {
    let s = vfs.statfs().unwrap();
    assert!(s.block_size > 0);
    assert!(s.total_blocks >= s.free_blocks && s.free_blocks >= s.avail_blocks);
    assert!(s.name_max >= 255);
}

macro_rules! behaviours {
    ($($name:ident),* $(,)?) => {
        mod posix {
            $(#[test] fn $name() {
                let dir = tempfile::tempdir().unwrap();
                let vfs = super::PosixVfs::new(dir.path(), super::PosixOptions::default()).unwrap();
                super::$name(&vfs);
            })*
        }
        mod mem {
            $(#[test] fn $name() { super::$name(&super::MemVfs::new()); })*
        }
    };
}

behaviours!(
    vectored_round_trip,
    concurrent_appends_never_overlap,
    create_modes,
    handle_access_is_enforced,
    directories,
    rename,
    case_insensitive,
    read_dir_lists_with_stats,
    times_and_mode,
    size_changes,
    open_handle_survives_unlink,
    xattrs,
    statfs_is_sane,
);

#[allow(dead_code)]
fn assert_object_safe(_: &dyn VfsFile) {}
