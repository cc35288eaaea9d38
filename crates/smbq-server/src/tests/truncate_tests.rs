//! Overwrite and supersede need the rights the destruction implies (issue 10, item 1): a
//! read-only open on a read-only share, under a read-only DACL, or against an open that denies
//! write sharing must not empty the file.

use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::security::{Ace, Acl, SecurityDescriptor, Sid, control};

use super::harness::H;
use crate::access::{mask, share};

const DATA: &[u8] = b"precious bytes";
const TRUNCATING: [D; 3] = [D::OVERWRITE, D::OVERWRITE_IF, D::SUPERSEDE];

fn read_only_dacl() -> Vec<u8> {
    let d = SecurityDescriptor {
        control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl::new(vec![Ace::allowed(
            Sid::authenticated_users(),
            mask::FILE_GENERIC_READ,
            0,
        )])),
    };
    let b = d.to_bytes();
    contexts_to_bytes(&[CreateContext::new(CreateContextTag::SECD, &b)])
}

fn assert_intact(h: &H, name: &str, what: &str) {
    assert_eq!(std::fs::read(h.path(name)).unwrap(), DATA, "{what}");
}

#[tokio::test]
async fn read_only_share_refuses_every_truncating_disposition() {
    let h = H::with(|c| c.shares[0].read_only = true).await;
    std::fs::write(h.path("f"), DATA).unwrap();
    for d in TRUNCATING {
        for access in [
            mask::FILE_READ_DATA,
            mask::GENERIC_READ,
            mask::MAXIMUM_ALLOWED,
        ] {
            let o = h.create("f", access, d, 0).await;
            assert_eq!(o.status, NtStatus::ACCESS_DENIED, "{d:?} {access:#x}");
            assert_intact(&h, "f", "read-only share");
        }
    }
    // Reading still works.
    let o = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
}

#[tokio::test]
async fn read_only_dacl_refuses_truncation_and_a_writable_one_allows_it() {
    let h = H::new().await;
    let o = h
        .create_req("f", mask::GENERIC_ALL, D::CREATE)
        .contexts(&read_only_dacl())
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(h.write(o.id, 0, DATA).await.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    for d in TRUNCATING {
        for access in [mask::FILE_READ_DATA, mask::MAXIMUM_ALLOWED] {
            let o = h.create("f", access, d, 0).await;
            assert_eq!(o.status, NtStatus::ACCESS_DENIED, "{d:?} {access:#x}");
            assert_intact(&h, "f", "read-only DACL");
        }
    }
    // Without a stored descriptor the same read-only request may overwrite, as on Windows
    // (the right is checked, not demanded in DesiredAccess).
    std::fs::write(h.path("g"), DATA).unwrap();
    let o = h.create("g", mask::FILE_READ_DATA, D::OVERWRITE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::metadata(h.path("g")).unwrap().len(), 0);
    h.close(o.id).await;
}

#[tokio::test]
async fn an_open_denying_write_sharing_keeps_its_data() {
    let h = H::new().await;
    std::fs::write(h.path("f"), DATA).unwrap();
    let holder = h
        .create_req("f", mask::FILE_READ_DATA, D::OPEN)
        .share(share::READ)
        .send()
        .await;
    assert_eq!(holder.status, NtStatus::SUCCESS);
    for d in TRUNCATING {
        let o = h.create("f", mask::FILE_READ_DATA, d, 0).await;
        assert_eq!(o.status, NtStatus::SHARING_VIOLATION, "{d:?}");
        assert_intact(&h, "f", "share mode");
    }
    // A plain read-only open is compatible with the holder.
    let o = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    h.close(holder.id).await;
    let o = h.create("f", mask::FILE_READ_DATA, D::OVERWRITE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS, "once the holder is gone");
}

#[tokio::test]
async fn named_streams_follow_the_same_rule() {
    let h = H::with(|c| c.shares[0].read_only = false).await;
    let o = h.create("f:s", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(h.write(o.id, 0, DATA).await.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    let holder = h
        .create_req("f:s", mask::FILE_READ_DATA, D::OPEN)
        .share(share::READ)
        .send()
        .await;
    assert_eq!(holder.status, NtStatus::SUCCESS);
    let o = h.create("f:s", mask::FILE_READ_DATA, D::OVERWRITE, 0).await;
    assert_eq!(o.status, NtStatus::SHARING_VIOLATION);
    h.close(holder.id).await;
    let o = h.create("f:s", mask::FILE_READ_DATA, D::OPEN, 0).await;
    let r = h.read(o.id, 0, 64).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    h.close(o.id).await;
}
