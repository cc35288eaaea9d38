//! `VfsFile::read_cached`: the page-cache-only read the READ handler tries on the async side.
//! On POSIX it returns exactly what `read_at` would (sized by the file, short only at its end)
//! or nothing; never other bytes. The in-memory backend never claims to have it.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::Bytes;
use smbq_vfs::{CreateMode, MemVfs, OpenOptions, PosixOptions, PosixVfs, RelPath, Vfs};

fn rw() -> OpenOptions {
    OpenOptions {
        read: true,
        write: true,
        create: CreateMode::CreateNew,
        directory: Some(false),
        mode: 0o644,
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 4096) as u8).collect()
}

#[test]
fn posix_cached_reads_equal_read_at_or_decline() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = PosixVfs::new(dir.path(), PosixOptions::default()).unwrap();
    let data = pattern(300 * 1024);
    let f = vfs.open(&RelPath::parse("f").unwrap(), &rw()).unwrap().file;
    f.write_at(0, &[Bytes::copy_from_slice(&data)]).unwrap();
    // Just written: in the page cache.
    let got = f
        .read_cached(4096, 4096)
        .unwrap()
        .expect("fresh data is cached");
    assert_eq!(&got[..], &data[4096..8192]);
    let tail = f
        .read_cached(data.len() as u64 - 100, 4096)
        .unwrap()
        .unwrap();
    assert_eq!(&tail[..], &data[data.len() - 100..]);
    assert!(
        f.read_cached(data.len() as u64 + 5, 10)
            .unwrap()
            .unwrap()
            .is_empty()
    );
    // Evicted (where the file system can): either declined or the right bytes, and the
    // blocking read gets them.
    let fd = std::fs::File::open(dir.path().join("f")).unwrap();
    rustix::fs::fadvise(&fd, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    if let Some(b) = f.read_cached(200_000, 65536).unwrap() {
        assert_eq!(&b[..], &data[200_000..265_536]);
    }
    assert_eq!(
        &f.read_at(200_000, 65536).unwrap()[..],
        &data[200_000..265_536]
    );
}

#[test]
fn memory_backend_declines() {
    let vfs = MemVfs::new();
    let f = vfs.open(&RelPath::parse("f").unwrap(), &rw()).unwrap().file;
    f.write_at(0, &[Bytes::from_static(b"abc")]).unwrap();
    assert!(f.read_cached(0, 3).unwrap().is_none());
}

/// `local_storage`, which lets the WRITE handler write small blocks on the async side: true
/// for a file on the test machine's local disk (/tmp, the crate's temp dir) and on /dev/shm
/// (tmpfs), and what `statfs(1)` says matches.
#[test]
fn local_storage_follows_the_file_system_type() {
    for base in [std::env::temp_dir(), std::path::PathBuf::from("/dev/shm")] {
        if !base.is_dir() {
            continue;
        }
        let dir = tempfile::tempdir_in(&base).unwrap();
        let vfs = PosixVfs::new(dir.path(), PosixOptions::default()).unwrap();
        let f = vfs.open(&RelPath::parse("f").unwrap(), &rw()).unwrap().file;
        let fs_type = std::process::Command::new("stat")
            .args(["-f", "-c", "%T"])
            .arg(dir.path())
            .output()
            .unwrap();
        let fs_type = String::from_utf8_lossy(&fs_type.stdout).trim().to_string();
        let local = ["ext2/ext3", "xfs", "btrfs", "f2fs", "tmpfs"].contains(&fs_type.as_str());
        assert_eq!(
            f.local_storage(),
            local,
            "{} is {fs_type}",
            dir.path().display()
        );
    }
    let mem = MemVfs::new();
    let f = mem.open(&RelPath::parse("f").unwrap(), &rw()).unwrap().file;
    assert!(f.local_storage());
}
