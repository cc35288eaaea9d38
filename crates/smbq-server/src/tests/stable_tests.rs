//! What reaches stable storage before the answer (crate::stable): counted on the in-memory
//! tree, whose files and directories count their fsync and fdatasync calls.

use smbq_vfs::MemVfs;
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::fscc::file_info::EndOfFileInfo;
use smbq_wire::negotiate::capabilities;
use smbq_wire::tree_connect::share_capabilities;
use smbq_wire::write::{WriteRequest, write_flags};
use smbq_wire::{Command, NtStatus};

use super::harness::{H, msg};
use super::set_info_tests::{rename_buf, set};
use crate::access::{mask, opts};

const END_OF_FILE: u8 = 20;
const RENAME: u8 = 10;

async fn write_flagged(h: &H, id: smbq_wire::FileId, data: &[u8], flags: u32) -> NtStatus {
    let m = msg(Command::WRITE, h.tree, h.session.id, |w| {
        WriteRequest {
            offset: 0,
            file_id: id,
            data,
            flags,
            ..Default::default()
        }
        .encode(w)
    });
    h.send(m).await.status
}

fn eof(size: u64) -> Vec<u8> {
    let mut w = smbq_wire::Writer::new();
    EndOfFileInfo { end_of_file: size }.encode(&mut w);
    w.into_vec()
}

/// On a plain share only what asks is flushed: a WRITE with SMB2_WRITEFLAG_WRITE_THROUGH and
/// every write of an open made with FILE_WRITE_THROUGH (MS-FSA 2.1.5.3).
#[tokio::test]
async fn a_plain_share_flushes_what_asks() {
    let vfs = MemVfs::new();
    let h = H::on_mem(vfs.clone(), |_| {}).await;
    let rw = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA | mask::DELETE;
    let o = h.create("f", rw, D::CREATE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let before = vfs.syncs();
    assert_eq!(write_flagged(&h, o.id, b"abc", 0).await, NtStatus::SUCCESS);
    assert_eq!(set(&h, o.id, END_OF_FILE, &eof(1)).await, NtStatus::SUCCESS);
    assert_eq!(
        set(&h, o.id, RENAME, &rename_buf("g", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        vfs.syncs(),
        before,
        "a create, a write, a size change, a rename: none"
    );
    let asked = write_flagged(&h, o.id, b"abc", write_flags::WRITE_THROUGH).await;
    assert_eq!(asked, NtStatus::SUCCESS);
    assert_eq!(vfs.syncs(), before + 1, "the write that asked");

    let t = h.create("t", rw, D::CREATE, opts::WRITE_THROUGH).await;
    assert_eq!(t.status, NtStatus::SUCCESS);
    let before = vfs.syncs();
    for _ in 0..2 {
        assert_eq!(write_flagged(&h, t.id, b"abc", 0).await, NtStatus::SUCCESS);
    }
    assert_eq!(set(&h, t.id, END_OF_FILE, &eof(1)).await, NtStatus::SUCCESS);
    assert_eq!(
        vfs.syncs(),
        before + 3,
        "every data change of a write-through open"
    );
}

/// On a continuously available share everything a client is told of is flushed first: the
/// created file's directory entry, each write, a size change, a rename's new entry.
#[tokio::test]
async fn a_continuously_available_share_flushes_everything_it_answers() {
    let vfs = MemVfs::new();
    let mut h = H::on_mem(vfs.clone(), |c| c.shares[0].continuous_availability = true).await;
    // A CA tree is one a 3.x client with persistent handles connects (crate::share).
    h.conn.server_capabilities |= capabilities::PERSISTENT_HANDLES;
    let r = h.tree_connect("\\\\srv\\data").await;
    h.tree = r.tree_id.unwrap_or_default();
    let caps = H::tree_resp(&r).capabilities;
    assert_ne!(caps & share_capabilities::CONTINUOUS_AVAILABILITY, 0);
    let rw = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA | mask::DELETE;
    let before = vfs.syncs();
    let o = h.create("f", rw, D::CREATE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(vfs.syncs(), before + 1, "the new entry");
    assert_eq!(write_flagged(&h, o.id, b"abc", 0).await, NtStatus::SUCCESS);
    assert_eq!(vfs.syncs(), before + 2, "the write");
    assert_eq!(set(&h, o.id, END_OF_FILE, &eof(1)).await, NtStatus::SUCCESS);
    assert_eq!(vfs.syncs(), before + 3, "the size change");
    assert_eq!(
        set(&h, o.id, RENAME, &rename_buf("g", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(vfs.syncs(), before + 4, "the rename, within one directory");
    // Opening what exists writes nothing.
    let again = h.create("g", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(again.status, NtStatus::SUCCESS);
    assert_eq!(vfs.syncs(), before + 4);
}

/// A server-side copy into a write-through open is flushed before its answer, as a WRITE
/// would be (MS-FSA 2.1.5.3 through FSCTL_SRV_COPYCHUNK's writes).
#[tokio::test]
async fn a_copy_into_a_write_through_open_is_flushed() {
    use super::copychunk_tests::{copy, key};
    use smbq_wire::ioctl::CtlCode;

    let vfs = MemVfs::new();
    let h = H::on_mem(vfs.clone(), |_| {}).await;
    h.put("src", &[7; 4096]).await;
    let all = mask::GENERIC_ALL;
    let s = h.create("src", all, D::OPEN, 0).await;
    let plain = h.create("d1", all, D::CREATE, 0).await;
    let through = h.create("d2", all, D::CREATE, opts::WRITE_THROUGH).await;
    let k = key(&h, s.id).await;
    let before = vfs.syncs();
    let (st, _) = copy(
        &h,
        CtlCode::SRV_COPYCHUNK_WRITE,
        plain.id,
        k,
        &[(0, 0, 4096)],
    )
    .await;
    assert_eq!((st, vfs.syncs()), (NtStatus::SUCCESS, before));
    let (st, _) = copy(
        &h,
        CtlCode::SRV_COPYCHUNK_WRITE,
        through.id,
        k,
        &[(0, 0, 4096)],
    )
    .await;
    assert_eq!((st, vfs.syncs()), (NtStatus::SUCCESS, before + 1));
}
