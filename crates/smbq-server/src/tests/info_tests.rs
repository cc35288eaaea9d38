use smbq_wire::create::CreateDisposition as D;
use smbq_wire::fscc::file_info::{AllInfo, StandardInfo};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg};
use crate::access::mask;

pub(super) async fn qi(
    h: &H,
    id: FileId,
    t: InfoType,
    class: u8,
    max: u32,
    addl: u32,
) -> (NtStatus, Vec<u8>) {
    let m = msg(Command::QUERY_INFO, h.tree, h.session.id, |w| {
        QueryInfoRequest {
            info_type: t,
            file_info_class: class,
            output_buffer_length: max,
            additional_information: addl,
            flags: 0,
            file_id: id,
            input: &[],
        }
        .encode(w)
    });
    let r = h.send(m).await;
    let mut full = vec![0u8; 64];
    full.extend_from_slice(&r.body);
    let buf = if r.status == NtStatus::SUCCESS || r.status == NtStatus::BUFFER_OVERFLOW {
        QueryInfoResponse::decode(&full).unwrap().buffer.to_vec()
    } else {
        r.body.clone()
    };
    (r.status, buf)
}

#[tokio::test]
async fn file_classes_and_buffer_checks() {
    let h = H::new().await;
    h.put("bufsize.txt", b"12345").await;
    let o = h
        .create("bufsize.txt", mask::MAXIMUM_ALLOWED, D::OPEN, 0)
        .await;
    let (s, b) = qi(&h, o.id, InfoType::FILE, 5, 65535, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let st = StandardInfo::decode(&b).unwrap();
    assert_eq!(
        (st.end_of_file, st.directory, st.delete_pending),
        (5, false, false)
    );
    let (s, b) = qi(&h, o.id, InfoType::FILE, 18, 65535, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(AllInfo::decode(&b).unwrap().name.file_name, "\\bufsize.txt");
    // The smbtorture qfile_buffercheck table: (class, fixed size).
    for (class, fixed) in [
        (4u8, 40usize),
        (5, 24),
        (6, 8),
        (7, 4),
        (8, 4),
        (16, 4),
        (17, 4),
        (18, 104),
        (21, 8),
        (22, 32),
        (28, 16),
        (34, 56),
        (35, 8),
    ] {
        let (s, full) = qi(&h, o.id, InfoType::FILE, class, 65535, 0).await;
        assert_eq!(s, NtStatus::SUCCESS, "class {class}");
        for i in 0..=full.len() {
            let (s, got) = qi(&h, o.id, InfoType::FILE, class, i as u32, 0).await;
            let want = if i < fixed {
                NtStatus::INFO_LENGTH_MISMATCH
            } else if i < full.len() {
                NtStatus::BUFFER_OVERFLOW
            } else {
                NtStatus::SUCCESS
            };
            assert_eq!(s, want, "class {class} len {i}");
            if s == NtStatus::BUFFER_OVERFLOW {
                assert_eq!(got, full[..i], "class {class} len {i}");
            }
        }
    }
    assert_eq!(
        qi(&h, o.id, InfoType::FILE, 200, 100, 0).await.0,
        NtStatus::INVALID_INFO_CLASS
    );
}

#[tokio::test]
async fn fs_classes_and_security() {
    let h = H::new().await;
    let root = h.create("", mask::GENERIC_READ, D::OPEN, 0).await;
    for (class, fixed) in [
        (1u8, 24usize),
        (3, 24),
        (4, 8),
        (5, 16),
        (6, 48),
        (7, 32),
        (11, 28),
    ] {
        let (s, full) = qi(&h, root.id, InfoType::FILESYSTEM, class, 65535, 0).await;
        assert_eq!(s, NtStatus::SUCCESS, "fs class {class}");
        assert!(full.len() >= fixed.min(full.len()));
        let (s, _) = qi(
            &h,
            root.id,
            InfoType::FILESYSTEM,
            class,
            (fixed - 1) as u32,
            0,
        )
        .await;
        assert_eq!(s, NtStatus::INFO_LENGTH_MISMATCH, "fs class {class}");
    }
    // qsec_buffercheck: a too-small buffer is BUFFER_TOO_SMALL with the needed size.
    let (s, body) = qi(&h, root.id, InfoType::SECURITY, 0, 0, 0).await;
    assert_eq!(s, NtStatus::BUFFER_TOO_SMALL);
    assert_eq!(body.len(), 8 + 4);
    let need = u32::from_le_bytes(body[8..12].try_into().unwrap());
    let (s, sd) = qi(&h, root.id, InfoType::SECURITY, 0, need, 0x7).await;
    assert!(s == NtStatus::SUCCESS || s == NtStatus::BUFFER_TOO_SMALL);
    let (s, sd2) = qi(&h, root.id, InfoType::SECURITY, 0, 4096, 0x7).await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert!(sd2.len() > 20);
    let _ = sd;
}

/// FILE_SUPPORTS_BLOCK_REFCOUNTING is advertised exactly where FSCTL_DUPLICATE_EXTENTS_TO_FILE
/// works: on the test's file system (ext4 here) neither; on XFS or Btrfs both
/// (tests/interop/test_reflink.py runs the XFS side against the real binary).
#[tokio::test]
async fn block_refcounting_is_advertised_where_duplicate_extents_works() {
    use smbq_wire::ioctl::CtlCode;
    let h = H::new().await;
    h.put("src", &[7u8; 4096]).await;
    h.put("dst", &[0u8; 4096]).await;
    let src = h.create("src", mask::GENERIC_ALL, D::OPEN, 0).await.id;
    let dst = h.create("dst", mask::GENERIC_ALL, D::OPEN, 0).await.id;
    let (s, attrs) = qi(&h, dst, InfoType::FILESYSTEM, 5, 65535, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let flags = u32::from_le_bytes(attrs[..4].try_into().unwrap());
    let advertised = flags & smbq_wire::fscc::fs_info::FILE_SUPPORTS_BLOCK_REFCOUNTING != 0;
    let mut input = Vec::new();
    for v in [src.persistent, src.volatile, 0, 0, 4096] {
        input.extend_from_slice(&v.to_le_bytes());
    }
    let (s, _) = h
        .fsctl(CtlCode::DUPLICATE_EXTENTS_TO_FILE, dst, &input, 0)
        .await;
    let data = std::fs::read(h.path("dst")).unwrap();
    if advertised {
        assert_eq!(s, NtStatus::SUCCESS);
        assert_eq!(data, vec![7u8; 4096]);
    } else {
        assert_eq!(s, NtStatus::INVALID_DEVICE_REQUEST);
        assert_eq!(data, vec![0u8; 4096], "nothing copied");
    }
    // A short input is refused before anything else where the FSCTL is served.
    let (s, _) = h
        .fsctl(CtlCode::DUPLICATE_EXTENTS_TO_FILE, dst, &input[..39], 0)
        .await;
    let expected = if advertised {
        NtStatus::INVALID_PARAMETER
    } else {
        NtStatus::INVALID_DEVICE_REQUEST
    };
    assert_eq!(s, expected);
}
