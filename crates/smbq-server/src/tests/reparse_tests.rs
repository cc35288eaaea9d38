//! Reparse points a client sets (crate::reparse): kept as data on a regular file and given
//! back, never acted on; the file reports them, and opening it needs FILE_OPEN_REPARSE_POINT
//! (a symlink without it is STOPPED_ON_SYMLINK, with where it points).

use std::os::unix::fs::FileTypeExt;

use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::fscc::dir_info::DirClass;
use smbq_wire::ioctl::CtlCode;
use smbq_wire::posix::{PosixInfo, file_type};
use smbq_wire::query_info::InfoType;

use super::harness::H;
use crate::access::{attr, mask, opts};

const SYMLINK: u32 = 0xA000_000C;

/// An IO_REPARSE_TAG_SYMLINK buffer (MS-FSCC 2.1.2.4) naming `target`, as Samba's client
/// sends it (substitute and print name alike, relative).
fn symlink(target: &str) -> Vec<u8> {
    let name: Vec<u8> = target.encode_utf16().flat_map(u16::to_le_bytes).collect();
    let n = u16::try_from(name.len()).unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(&SYMLINK.to_le_bytes());
    b.extend_from_slice(&(12 + 2 * n).to_le_bytes());
    b.extend_from_slice(&[0, 0]);
    for v in [0, n, n, n] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&name);
    b.extend_from_slice(&name);
    b
}

/// The Symbolic Link Error Response (MS-SMB2 2.2.2.2.1) of a STOPPED_ON_SYMLINK answer, in
/// its 3.1.1 error context: unparsed length, substitute name, print name, flags.
fn stopped_on(o: &super::harness::Open) -> (u16, Vec<u8>, Vec<u8>, u32) {
    use smbq_wire::error_response::{ErrorId, ErrorResponse, SymlinkErrorResponse};
    let mut msg = vec![0u8; smbq_wire::HEADER_LEN];
    msg.extend_from_slice(&o.resp.as_ref().unwrap().body);
    let e = ErrorResponse::decode(&msg).unwrap();
    let contexts = e.contexts().unwrap();
    assert_eq!(contexts.len(), 1);
    assert_eq!(contexts[0].error_id, ErrorId::DEFAULT);
    let l = SymlinkErrorResponse::decode(contexts[0].data).unwrap();
    (
        l.unparsed_path_length,
        l.substitute_name.to_vec(),
        l.print_name.to_vec(),
        l.flags,
    )
}

/// Over 80 lines: one story on one file (set, read back, how it shows, how it opens, as a
/// POSIX open sees it, replaced, deleted), each step depending on the one before.
#[tokio::test]
async fn a_symlink_reparse_point_is_data_never_a_link() {
    let h = H::new().await;
    let access = mask::FILE_READ_ATTRIBUTES | mask::FILE_WRITE_ATTRIBUTES | mask::DELETE;
    let o = h
        .create_req("evil", access, D::CREATE)
        .options(opts::OPEN_REPARSE_POINT | opts::NON_DIRECTORY_FILE)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    for target in ["../../../etc/passwd", "/etc/shadow", ".."] {
        let buf = symlink(target);
        let (s, _) = h.fsctl(CtlCode::SET_REPARSE_POINT, o.id, &buf, 0).await;
        assert_eq!(s, NtStatus::SUCCESS, "{target}");
        let (s, out) = h.fsctl(CtlCode::GET_REPARSE_POINT, o.id, &[], 16384).await;
        assert_eq!((s, out), (NtStatus::SUCCESS, buf), "given back as set");
    }
    // On disk it is an empty regular file: nothing is ever created that could be followed.
    let md = std::fs::symlink_metadata(h.path("evil")).unwrap();
    assert!(md.file_type().is_file() && !md.file_type().is_symlink());
    assert!(!md.file_type().is_char_device() && !md.file_type().is_block_device());
    assert_eq!(md.len(), 0);

    // It says so: the attribute, the tag, and the EaSize of a listing.
    let (s, b) = super::info_tests::qi(&h, o.id, InfoType::FILE, 35, 65536, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let attrs = u32::from_le_bytes(b[0..4].try_into().unwrap());
    assert_ne!(attrs & attr::REPARSE_POINT, 0);
    assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), SYMLINK);
    let root = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    let entries =
        super::dir_tests::query_entries(&h, root.id, DirClass::FullDirectory, "evil").await;
    assert_eq!(entries.len(), 1);
    assert_ne!(entries[0].file_attributes & attr::REPARSE_POINT, 0);
    assert_eq!(entries[0].ea_size, SYMLINK);

    // Opening it as a file needs FILE_OPEN_REPARSE_POINT: no read goes through it. Without,
    // the client is told where it points, to follow it itself.
    let plain = h.create("evil", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(plain.status, NtStatus::STOPPED_ON_SYMLINK);
    let utf16 = |s: &str| {
        s.encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect::<Vec<u8>>()
    };
    let err = stopped_on(&plain);
    assert_eq!((err.0, err.1, err.2), (0, utf16(".."), utf16("..")));
    assert_eq!(err.3, 1, "relative");
    // Met on the way to a name below it: the rest of the name ("\\x\\y", 4 UTF-16
    // characters) is unparsed, for the client to carry on from the target.
    let below = h.create("evil\\x\\y", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(below.status, NtStatus::STOPPED_ON_SYMLINK);
    assert_eq!(stopped_on(&below).0, 8);
    let posix = contexts_to_bytes(&[CreateContext::new(CreateContextTag::POSIX, &[0; 4])]);
    let below = h
        .create_req("evil/x", mask::GENERIC_READ, D::OPEN)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(below.status, NtStatus::STOPPED_ON_SYMLINK);
    assert_eq!(stopped_on(&below).0, 4);
    // A plain file on the way is still just a missing path.
    h.put("plain", b"").await;
    let r = h.create("plain\\x", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(r.status, NtStatus::OBJECT_PATH_NOT_FOUND);
    let own = h
        .create_req("evil", mask::GENERIC_READ, D::OPEN)
        .options(opts::OPEN_REPARSE_POINT)
        .send()
        .await;
    assert_eq!(own.status, NtStatus::SUCCESS);
    let r = h.read(own.id, 0, 100).await;
    assert_eq!(r.status, NtStatus::END_OF_FILE);

    // A POSIX open reports it as a symlink, with its tag.
    let posix = contexts_to_bytes(&[CreateContext::new(CreateContextTag::POSIX, &[0; 4])]);
    let p = h
        .create_req("evil", mask::FILE_READ_ATTRIBUTES, D::OPEN)
        .options(opts::OPEN_REPARSE_POINT)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(p.status, NtStatus::SUCCESS);
    let (s, b) = super::info_tests::qi(&h, p.id, InfoType::FILE, 100, 65536, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let info = PosixInfo::decode(&b).unwrap();
    assert_eq!(info.stat.reparse_tag, SYMLINK);
    assert_eq!(info.stat.mode >> 12, file_type::SYMLINK);

    // Another tag cannot replace it; deleting it needs its tag, and then it is a file again.
    let mut other = symlink("x");
    other[0..4].copy_from_slice(&0x8000_0014u32.to_le_bytes());
    let (s, _) = h.fsctl(CtlCode::SET_REPARSE_POINT, o.id, &other, 0).await;
    assert_eq!(s, NtStatus::IO_REPARSE_TAG_MISMATCH);
    let mut del = SYMLINK.to_le_bytes().to_vec();
    del.extend_from_slice(&[0; 4]);
    let (s, _) = h.fsctl(CtlCode::DELETE_REPARSE_POINT, o.id, &del, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let (s, _) = h.fsctl(CtlCode::GET_REPARSE_POINT, o.id, &[], 16384).await;
    assert_eq!(s, NtStatus::NOT_A_REPARSE_POINT);
    assert_eq!(
        h.create("evil", mask::GENERIC_READ, D::OPEN, 0)
            .await
            .status,
        NtStatus::SUCCESS
    );
}

#[tokio::test]
async fn setting_a_reparse_point_needs_a_write_right_and_a_good_buffer() {
    let h = H::new().await;
    h.put("f", b"data").await;
    let ro = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    let (s, _) = h
        .fsctl(CtlCode::SET_REPARSE_POINT, ro.id, &symlink("t"), 0)
        .await;
    assert_eq!(s, NtStatus::ACCESS_DENIED);
    let (s, _) = h.fsctl(CtlCode::GET_REPARSE_POINT, ro.id, &[], 16384).await;
    assert_eq!(s, NtStatus::NOT_A_REPARSE_POINT);
    let rw = h
        .create(
            "f",
            mask::FILE_WRITE_ATTRIBUTES | mask::FILE_READ_ATTRIBUTES,
            D::OPEN,
            0,
        )
        .await;
    let mut bad = symlink("t");
    bad.pop();
    let (s, _) = h.fsctl(CtlCode::SET_REPARSE_POINT, rw.id, &bad, 0).await;
    assert_eq!(s, NtStatus::IO_REPARSE_DATA_INVALID);
    let (s, _) = h.fsctl(CtlCode::SET_REPARSE_POINT, rw.id, &[], 0).await;
    assert_eq!(s, NtStatus::INVALID_BUFFER_SIZE);
    // A directory takes none.
    std::fs::create_dir(h.path("d")).unwrap();
    let d = h
        .create(
            "d",
            mask::FILE_WRITE_ATTRIBUTES,
            D::OPEN,
            opts::DIRECTORY_FILE,
        )
        .await;
    let (s, _) = h
        .fsctl(CtlCode::SET_REPARSE_POINT, d.id, &symlink("t"), 0)
        .await;
    assert_eq!(s, NtStatus::ACCESS_DENIED);
    // An output buffer too small for the header.
    let (s, _) = h
        .fsctl(CtlCode::SET_REPARSE_POINT, rw.id, &symlink("t"), 0)
        .await;
    assert_eq!(s, NtStatus::SUCCESS);
    let (s, _) = h.fsctl(CtlCode::GET_REPARSE_POINT, rw.id, &[], 4).await;
    assert_eq!(s, NtStatus::BUFFER_TOO_SMALL);
    let (s, out) = h.fsctl(CtlCode::GET_REPARSE_POINT, rw.id, &[], 10).await;
    assert_eq!((s, out.len()), (NtStatus::BUFFER_OVERFLOW, 10));
    // The data stays as it was.
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"data");
}

#[tokio::test]
async fn shares_without_the_posix_extensions_take_no_reparse_points() {
    let h = H::with(|c| c.shares.iter_mut().for_each(|s| s.posix_extensions = false)).await;
    h.put("f", b"data").await;
    let rw = h
        .create(
            "f",
            mask::FILE_WRITE_ATTRIBUTES | mask::FILE_READ_ATTRIBUTES,
            D::OPEN,
            0,
        )
        .await;
    let (s, _) = h
        .fsctl(CtlCode::SET_REPARSE_POINT, rw.id, &symlink("t"), 0)
        .await;
    assert_eq!(s, NtStatus::INVALID_DEVICE_REQUEST);
    let (s, _) = h.fsctl(CtlCode::GET_REPARSE_POINT, rw.id, &[], 16384).await;
    assert_eq!(s, NtStatus::NOT_A_REPARSE_POINT);
    assert_eq!(
        h.create("f", mask::GENERIC_READ, D::OPEN, 0).await.status,
        NtStatus::SUCCESS
    );
}

/// A reparse point of another tag than a symlink (here IO_REPARSE_TAG_NFS, a FIFO as Linux
/// clients describe one) is refused to a plain open as NTFS refuses a tag no filter handles:
/// there is nothing for the client to follow.
#[tokio::test]
async fn another_tag_is_not_handled_without_open_reparse_point() {
    let h = H::new().await;
    let access = mask::FILE_READ_ATTRIBUTES | mask::FILE_WRITE_ATTRIBUTES;
    let o = h
        .create_req("fifo", access, D::CREATE)
        .options(opts::OPEN_REPARSE_POINT | opts::NON_DIRECTORY_FILE)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let mut buf = 0x8000_0014u32.to_le_bytes().to_vec();
    buf.extend_from_slice(&8u16.to_le_bytes());
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(b"FIFO\0\0\0\0");
    let (s, _) = h.fsctl(CtlCode::SET_REPARSE_POINT, o.id, &buf, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let plain = h.create("fifo", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(plain.status, NtStatus::IO_REPARSE_TAG_NOT_HANDLED);
    let md = std::fs::symlink_metadata(h.path("fifo")).unwrap();
    assert!(md.file_type().is_file() && !md.file_type().is_fifo());
}
