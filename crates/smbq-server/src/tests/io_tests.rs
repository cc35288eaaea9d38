use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::write::WriteResponse;

use super::harness::H;
use crate::access::{mask, opts};

#[tokio::test]
async fn write_then_read_back() {
    let h = H::new().await;
    let o = h
        .create("f", mask::GENERIC_READ | mask::GENERIC_WRITE, D::CREATE, 0)
        .await;
    let w = h.write(o.id, 0, b"hello world").await;
    assert_eq!(w.status, NtStatus::SUCCESS);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&w.body);
    assert_eq!(WriteResponse::decode(&m).unwrap().count, 11);
    let r = h.read(o.id, 6, 100).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert_eq!(r.data.as_deref(), Some(&b"world"[..]));
    // At end of file.
    assert_eq!(h.read(o.id, 11, 10).await.status, NtStatus::END_OF_FILE);
    assert_eq!(h.read(o.id, 1000, 10).await.status, NtStatus::END_OF_FILE);
    // Longer than the negotiated maximum.
    assert_eq!(
        h.read(o.id, 0, (1 << 20) + 1).await.status,
        NtStatus::INVALID_PARAMETER
    );
    // Append with the all-ones offset.
    assert_eq!(
        h.write(o.id, u64::MAX, b"!").await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"hello world!");
}

#[tokio::test]
async fn access_is_checked_on_io() {
    let h = H::new().await;
    h.put("f", b"abc").await;
    let r = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(h.write(r.id, 0, b"x").await.status, NtStatus::ACCESS_DENIED);
    let w = h.create("f", mask::FILE_WRITE_DATA, D::OPEN, 0).await;
    assert_eq!(h.read(w.id, 0, 1).await.status, NtStatus::ACCESS_DENIED);
    let d = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(
        h.read(d.id, 0, 1).await.status,
        NtStatus::INVALID_DEVICE_REQUEST
    );
}

/// On a multi-worker runtime small writes run inline (crate::inline_io), one at a time, and
/// the rest through the blocking pool: many concurrent writers, small and large, through the
/// two paths at once, must all land where they were sent, and the append offset too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_small_and_large_writes_all_land() {
    let h = std::sync::Arc::new(H::new().await);
    let o = h
        .create("f", mask::GENERIC_READ | mask::GENERIC_WRITE, D::CREATE, 0)
        .await;
    const SMALL: usize = 4096;
    const LARGE: usize = crate::inline_io::INLINE_WRITE_MAX + 1;
    let mut tasks = Vec::new();
    let mut expect = Vec::new();
    let mut offset = 0u64;
    let inline_before = crate::inline_io::InlineGate::get().passes();
    for i in 0..48u8 {
        let len = if i % 6 == 5 { LARGE } else { SMALL };
        let data = vec![i.wrapping_mul(37).wrapping_add(1); len];
        expect.push((offset, data.clone()));
        let (h, id, at) = (h.clone(), o.id, offset);
        tasks.push(tokio::spawn(
            async move { h.write(id, at, &data).await.status },
        ));
        offset += len as u64;
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), NtStatus::SUCCESS);
    }
    assert_eq!(
        h.write(o.id, u64::MAX, b"end").await.status,
        NtStatus::SUCCESS
    );
    let on_disk = std::fs::read(h.path("f")).unwrap();
    assert_eq!(on_disk.len() as u64, offset + 3);
    for (at, data) in expect {
        let at = at as usize;
        assert!(on_disk[at..at + data.len()] == data[..], "write at {at}");
    }
    assert_eq!(&on_disk[offset as usize..], b"end");
    // Only files on local file systems go inline (VfsFile::local_storage).
    let fs_type = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(h.path("f"))
        .output()
        .unwrap();
    let fs_type = String::from_utf8_lossy(&fs_type.stdout).trim().to_string();
    if ["ext2/ext3", "xfs", "btrfs", "f2fs", "tmpfs"].contains(&fs_type.as_str()) {
        assert!(
            crate::inline_io::InlineGate::get().passes() > inline_before,
            "no write took the inline path on {fs_type}"
        );
    }
}

/// MS-SMB2 3.3.5.12: a READ response is marked for compression when the client asked
/// (SMB2_READFLAG_REQUEST_COMPRESSED) or the share has compress_data; the engine compresses it
/// if the connection negotiated compression and it pays (smbq-proto/tests/compression.rs).
#[tokio::test]
async fn read_responses_are_marked_for_compression_when_asked_or_by_the_share() {
    for share_compresses in [false, true] {
        let h = H::with(|c| c.shares[0].compress_data = share_compresses).await;
        let o = h
            .create("f", mask::GENERIC_READ | mask::GENERIC_WRITE, D::CREATE, 0)
            .await;
        assert_eq!(h.write(o.id, 0, &[7; 8192]).await.status, NtStatus::SUCCESS);
        assert_eq!(h.read(o.id, 0, 8192).await.compress, share_compresses);
        let asked = h
            .send(super::harness::msg(
                smbq_wire::Command::READ,
                h.tree,
                h.session.id,
                |w| {
                    smbq_wire::read::ReadRequest {
                        padding: 0x50,
                        flags: smbq_wire::read::read_flags::REQUEST_COMPRESSED,
                        length: 8192,
                        file_id: o.id,
                        ..Default::default()
                    }
                    .encode(w)
                },
            ))
            .await;
        assert_eq!(asked.status, NtStatus::SUCCESS);
        assert!(asked.compress);
    }
}
