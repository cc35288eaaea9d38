//! `copy_range`: the server-side copy under FSCTL_SRV_COPYCHUNK. The same bytes arrive whether
//! the kernel copies (POSIX) or memory does (MemVfs, and POSIX's fallback for overlapping
//! ranges of one file); a short source stops the copy at its end.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use bytes::Bytes;
use smbq_vfs::{
    COPY_PIECE, CreateMode, MemVfs, OpenOptions, PosixOptions, PosixVfs, RelPath, Vfs, VfsFile,
    copy_range,
};

fn rw() -> OpenOptions {
    OpenOptions {
        read: true,
        write: true,
        create: CreateMode::OpenOrCreate,
        directory: Some(false),
        mode: 0o644,
    }
}

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 4096 + seed) as u8).collect()
}

fn all(f: &dyn VfsFile) -> Vec<u8> {
    f.read_at(0, usize::MAX).unwrap().to_vec()
}

fn check(vfs: &dyn Vfs) {
    let src = vfs
        .open(&RelPath::parse("src").unwrap(), &rw())
        .unwrap()
        .file;
    let dst = vfs
        .open(&RelPath::parse("dst").unwrap(), &rw())
        .unwrap()
        .file;
    let data = pattern(3 * COPY_PIECE + 1234, 1);
    src.write_at(0, &[Bytes::copy_from_slice(&data)]).unwrap();

    // Whole file, then a piece into the middle of existing data.
    let n = copy_range(src.as_ref(), 0, dst.as_ref(), 0, data.len() as u64).unwrap();
    assert_eq!(n, data.len() as u64);
    assert_eq!(all(dst.as_ref()), data);
    assert_eq!(
        copy_range(src.as_ref(), 10, dst.as_ref(), 5000, 100).unwrap(),
        100
    );
    let mut want = data.clone();
    want.copy_within(10..110, 5000);
    assert_eq!(all(dst.as_ref()), want);

    // Past the source's end: short; beyond it: nothing.
    let tail = copy_range(src.as_ref(), data.len() as u64 - 10, dst.as_ref(), 0, 1000).unwrap();
    assert_eq!(tail, 10);
    assert_eq!(
        copy_range(src.as_ref(), data.len() as u64 + 1, dst.as_ref(), 0, 10).unwrap(),
        0
    );

    // Growing the destination, with a hole before the copy.
    let far = data.len() as u64 + 8192;
    assert_eq!(
        copy_range(src.as_ref(), 0, dst.as_ref(), far, 4).unwrap(),
        4
    );
    assert_eq!(dst.stat().unwrap().size, far + 4);

    // One file, overlapping ranges, a chunk at most one piece: memmove's result.
    let one = vfs
        .open(&RelPath::parse("one").unwrap(), &rw())
        .unwrap()
        .file;
    let d = pattern(64 * 1024, 3);
    one.write_at(0, &[Bytes::copy_from_slice(&d)]).unwrap();
    assert_eq!(
        copy_range(one.as_ref(), 0, one.as_ref(), 100, 8192).unwrap(),
        8192
    );
    let mut moved = d.clone();
    moved.copy_within(0..8192, 100);
    assert_eq!(all(one.as_ref()), moved);

    // Offsets past what a file can hold are refused before anything is copied.
    assert!(copy_range(src.as_ref(), 0, dst.as_ref(), u64::MAX - 5, 10).is_err());
    assert!(copy_range(src.as_ref(), i64::MAX as u64, dst.as_ref(), 0, 10).is_err());
}

#[test]
fn posix_copies_in_the_kernel_or_through_memory() {
    let dir = tempfile::tempdir().unwrap();
    let vfs = PosixVfs::new(dir.path(), PosixOptions::default()).unwrap();
    check(&vfs);
}

#[test]
fn memory_backend_copies_the_same() {
    check(&MemVfs::new());
}
