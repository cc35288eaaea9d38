//! Sparse files (crate::handlers::sparse): the attribute only FSCTL_SET_SPARSE sets, holes
//! punched by FSCTL_SET_ZERO_DATA, and FSCTL_QUERY_ALLOCATED_RANGES over them, with the
//! statuses smbtorture's smb2.ioctl.sparse_* tests and Windows give.

use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create::create_options;
use smbq_wire::ioctl::CtlCode;
use smbq_wire::lock::{LockElement, LockRequest, lock_flags as lf};
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg};
use crate::access::{attr, mask};

const ALL: u32 = mask::FILE_ALL_ACCESS;
const K64: u64 = 64 * 1024;

fn pair(a: u64, b: u64) -> Vec<u8> {
    let mut v = a.to_le_bytes().to_vec();
    v.extend_from_slice(&b.to_le_bytes());
    v
}

async fn qar(h: &H, id: FileId, off: u64, len: u64, max_out: u32) -> (NtStatus, Vec<(u64, u64)>) {
    let (s, out) = h
        .fsctl(
            CtlCode::QUERY_ALLOCATED_RANGES,
            id,
            &pair(off, len),
            max_out,
        )
        .await;
    let ranges = out
        .chunks(16)
        .map(|c| {
            (
                u64::from_le_bytes(c[..8].try_into().unwrap()),
                u64::from_le_bytes(c[8..].try_into().unwrap()),
            )
        })
        .collect();
    (s, ranges)
}

async fn attributes(h: &H, name: &str) -> u32 {
    let o = h.create(name, mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let a = o.create().file_attributes;
    h.close(o.id).await;
    a
}

#[tokio::test]
async fn only_set_sparse_sets_the_attribute_and_it_stays_with_the_file() {
    let h = H::new().await;
    // A CREATE asking for SPARSE_FILE does not get it.
    let o = h
        .create_req("f", ALL, D::CREATE)
        .attrs(attr::NORMAL | attr::SPARSE_FILE)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(attributes(&h, "f").await & attr::SPARSE_FILE, 0);
    // No buffer: set; again: still set; [0]: clear; 100 bytes starting 0xFF: set.
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, o.id, &[], 0).await.0,
        NtStatus::SUCCESS
    );
    assert_ne!(attributes(&h, "f").await & attr::SPARSE_FILE, 0);
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, o.id, &[], 0).await.0,
        NtStatus::SUCCESS
    );
    assert_ne!(attributes(&h, "f").await & attr::SPARSE_FILE, 0);
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, o.id, &[0], 0).await.0,
        NtStatus::SUCCESS
    );
    assert_eq!(attributes(&h, "f").await & attr::SPARSE_FILE, 0);
    let mut big = vec![0u8; 100];
    big[0] = 0xFF;
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, o.id, &big, 0).await.0,
        NtStatus::SUCCESS
    );
    h.close(o.id).await;
    assert_ne!(
        attributes(&h, "f").await & attr::SPARSE_FILE,
        0,
        "outlives the handle"
    );
    // SET_INFO basic attributes keep it.
    // Rights: WRITE_EA alone is not enough; a directory is refused.
    let ea = h.create("f", mask::FILE_WRITE_EA, D::OPEN, 0).await;
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, ea.id, &[0], 0).await.0,
        NtStatus::ACCESS_DENIED
    );
    assert_ne!(attributes(&h, "f").await & attr::SPARSE_FILE, 0);
    let wa = h.create("f", mask::FILE_WRITE_ATTRIBUTES, D::OPEN, 0).await;
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, wa.id, &[0], 0).await.0,
        NtStatus::SUCCESS
    );
    let dir = h
        .create(
            "d",
            mask::GENERIC_ALL,
            D::CREATE,
            create_options::DIRECTORY_FILE,
        )
        .await;
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, dir.id, &[], 0).await.0,
        NtStatus::INVALID_PARAMETER
    );
}

#[tokio::test]
async fn allocated_ranges_of_a_plain_file_are_the_window_up_to_its_end() {
    let h = H::new().await;
    h.put("f", &vec![1u8; 128 * 1024]).await;
    let o = h.create("f", ALL, D::OPEN, 0).await;
    let end = 128 * 1024;
    assert_eq!(
        qar(&h, o.id, 0, end - 1, 1024).await,
        (NtStatus::SUCCESS, vec![(0, end - 1)])
    );
    assert_eq!(
        qar(&h, o.id, 0, end + 1, 1024).await,
        (NtStatus::SUCCESS, vec![(0, end)])
    );
    assert_eq!(
        qar(&h, o.id, 1, end, 1024).await,
        (NtStatus::SUCCESS, vec![(1, end - 1)])
    );
    assert_eq!(
        qar(&h, o.id, end, 10, 1024).await,
        (NtStatus::SUCCESS, vec![])
    );
    assert_eq!(qar(&h, o.id, 0, 0, 1024).await, (NtStatus::SUCCESS, vec![]));
    // No room for one range: BUFFER_TOO_SMALL; bad input: INVALID_PARAMETER.
    assert_eq!(qar(&h, o.id, 0, 10, 0).await.0, NtStatus::BUFFER_TOO_SMALL);
    assert_eq!(
        qar(&h, o.id, 512, u64::MAX, 1024).await.0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        qar(&h, o.id, i64::MAX as u64, 10, 1024).await.0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.fsctl(CtlCode::QUERY_ALLOCATED_RANGES, o.id, &[0; 8], 1024)
            .await
            .0,
        NtStatus::INVALID_PARAMETER
    );
    // READ_DATA is needed.
    let ra = h.create("f", mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    assert_eq!(qar(&h, ra.id, 0, 10, 1024).await.0, NtStatus::ACCESS_DENIED);
}

#[tokio::test]
async fn zero_data_punches_holes_that_allocated_ranges_skip() {
    let h = H::new().await;
    let data = vec![0x5Au8; 10 * 128 * 1024];
    // More than one WRITE holds: straight into the share.
    std::fs::write(h.path("f"), &data).unwrap();
    let o = h.create("f", ALL, D::OPEN, 0).await;
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, o.id, &[], 0).await.0,
        NtStatus::SUCCESS
    );
    for i in 0..10u64 {
        let at = i * 2 * K64;
        let (s, _) = h
            .fsctl(CtlCode::SET_ZERO_DATA, o.id, &pair(at, at + K64), 0)
            .await;
        assert_eq!(s, NtStatus::SUCCESS);
    }
    let on_disk = std::fs::read(h.path("f")).unwrap();
    assert_eq!(on_disk.len(), data.len(), "the size never changes");
    for i in 0..10usize {
        let at = i * 2 * K64 as usize;
        assert!(on_disk[at..at + K64 as usize].iter().all(|&b| b == 0));
        assert!(
            on_disk[at + K64 as usize..at + 2 * K64 as usize]
                .iter()
                .all(|&b| b == 0x5A)
        );
    }
    let (s, ranges) = qar(&h, o.id, 0, data.len() as u64, 1024).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let want: Vec<(u64, u64)> = (0..10).map(|i| (i * 2 * K64 + K64, K64)).collect();
    // ext4 and tmpfs (where these tests run) give the holes back.
    assert_eq!(ranges, want);
    // Room for 3 of the 10: those, and BUFFER_OVERFLOW.
    let (s, some) = qar(&h, o.id, 0, data.len() as u64, 3 * 16 + 8).await;
    assert_eq!(
        (s, some.as_slice()),
        (NtStatus::BUFFER_OVERFLOW, &want[..3])
    );
    // Beyond the end nothing grows.
    let end = data.len() as u64;
    let (s, _) = h
        .fsctl(CtlCode::SET_ZERO_DATA, o.id, &pair(end, end + 4096), 0)
        .await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(std::fs::metadata(h.path("f")).unwrap().len(), end);
    // Invalid ranges, and an empty one that succeeds at once.
    assert_eq!(
        h.fsctl(CtlCode::SET_ZERO_DATA, o.id, &pair(4096, 4095), 0)
            .await
            .0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.fsctl(CtlCode::SET_ZERO_DATA, o.id, &pair(4095, 4095), 0)
            .await
            .0,
        NtStatus::SUCCESS
    );
    // Once not sparse, the whole window counts as allocated again; the zeros stay.
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, o.id, &[0], 0).await.0,
        NtStatus::SUCCESS
    );
    assert_eq!(
        qar(&h, o.id, 0, end, 1024).await,
        (NtStatus::SUCCESS, vec![(0, end)])
    );
}

#[tokio::test]
async fn zero_data_needs_write_data_and_meets_other_opens_locks() {
    let h = H::new().await;
    h.put("f", &vec![7u8; 2 * K64 as usize]).await;
    let append = h
        .create(
            "f",
            mask::FILE_APPEND_DATA | mask::FILE_WRITE_ATTRIBUTES,
            D::OPEN,
            0,
        )
        .await;
    assert_eq!(
        h.fsctl(CtlCode::SET_ZERO_DATA, append.id, &pair(0, 10), 0)
            .await
            .0,
        NtStatus::ACCESS_DENIED
    );
    let a = h.create("f", ALL, D::OPEN, 0).await;
    let b = h.create("f", ALL, D::OPEN, 0).await;
    let lock = msg(Command::LOCK, h.tree, h.session.id, |w| {
        LockRequest {
            lock_sequence: 0,
            file_id: b.id,
            locks: vec![LockElement {
                offset: 0,
                length: K64,
                flags: lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY,
            }],
        }
        .encode(w)
    });
    assert_eq!(h.send(lock).await.status, NtStatus::SUCCESS);
    assert_eq!(
        h.fsctl(CtlCode::SET_ZERO_DATA, a.id, &pair(0, 4096), 0)
            .await
            .0,
        NtStatus::FILE_LOCK_CONFLICT
    );
    assert_eq!(
        h.fsctl(CtlCode::SET_ZERO_DATA, a.id, &pair(K64, K64 + 4096), 0)
            .await
            .0,
        NtStatus::SUCCESS
    );
    // Setting the flag and asking for ranges meet no lock.
    assert_eq!(
        h.fsctl(CtlCode::SET_SPARSE, a.id, &[], 0).await.0,
        NtStatus::SUCCESS
    );
    assert_eq!(
        qar(&h, a.id, 0, 4096, 1024).await,
        (NtStatus::SUCCESS, vec![(0, 4096)])
    );
    assert!(
        std::fs::read(h.path("f")).unwrap()[..K64 as usize]
            .iter()
            .all(|&x| x == 7)
    );
}

#[tokio::test]
async fn compression_is_none_and_snapshots_are_an_empty_list() {
    let h = H::new().await;
    h.put("f", b"x").await;
    let o = h.create("f", ALL, D::OPEN, 0).await;
    let (s, out) = h.fsctl(CtlCode::GET_COMPRESSION, o.id, &[], 2).await;
    assert_eq!((s, out), (NtStatus::SUCCESS, vec![0, 0]));
    assert_eq!(
        h.fsctl(CtlCode::GET_COMPRESSION, o.id, &[], 1).await.0,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.fsctl(CtlCode::SET_COMPRESSION, o.id, &[0, 0], 0).await.0,
        NtStatus::SUCCESS
    );
    for format in [1u8, 2] {
        assert_eq!(
            h.fsctl(CtlCode::SET_COMPRESSION, o.id, &[format, 0], 0)
                .await
                .0,
            NtStatus::NOT_SUPPORTED
        );
    }
    assert_eq!(
        h.fsctl(CtlCode::SET_COMPRESSION, o.id, &[0], 0).await.0,
        NtStatus::INVALID_PARAMETER
    );
    let ro = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(
        h.fsctl(CtlCode::SET_COMPRESSION, ro.id, &[0, 0], 0).await.0,
        NtStatus::ACCESS_DENIED
    );
    // Snapshots: counts only with 16 bytes of room, the empty name list with more.
    let (s, out) = h
        .fsctl(CtlCode::SRV_ENUMERATE_SNAPSHOTS, o.id, &[], 16)
        .await;
    assert_eq!((s, out.len()), (NtStatus::SUCCESS, 16));
    assert_eq!(out[8..12], 2u32.to_le_bytes());
    let (s, out) = h
        .fsctl(CtlCode::SRV_ENUMERATE_SNAPSHOTS, o.id, &[], 4096)
        .await;
    assert_eq!(
        (s, out),
        (
            NtStatus::SUCCESS,
            vec![0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0]
        )
    );
    assert_eq!(
        h.fsctl(CtlCode::SRV_ENUMERATE_SNAPSHOTS, o.id, &[], 15)
            .await
            .0,
        NtStatus::INVALID_PARAMETER
    );
}
