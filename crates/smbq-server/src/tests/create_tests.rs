use smbq_wire::NtStatus;
use smbq_wire::create::{CreateAction, CreateDisposition as D};
use smbq_wire::create_context::{CreateContext, CreateContextTag, MxAcResponse, contexts_to_bytes};

use super::harness::H;
use crate::access::{attr, mask, opts, share};

const RW: u32 = mask::GENERIC_READ | mask::GENERIC_WRITE;

#[tokio::test]
async fn dispositions_and_actions() {
    let h = H::new().await;
    // (disposition, exists before, expected status, expected action)
    let rows = [
        (D::OPEN, false, NtStatus::OBJECT_NAME_NOT_FOUND, None),
        (D::OVERWRITE, false, NtStatus::OBJECT_NAME_NOT_FOUND, None),
        (
            D::CREATE,
            false,
            NtStatus::SUCCESS,
            Some(CreateAction::CREATED),
        ),
        (D::CREATE, true, NtStatus::OBJECT_NAME_COLLISION, None),
        (D::OPEN, true, NtStatus::SUCCESS, Some(CreateAction::OPENED)),
        (
            D::OPEN_IF,
            true,
            NtStatus::SUCCESS,
            Some(CreateAction::OPENED),
        ),
        (
            D::OPEN_IF,
            false,
            NtStatus::SUCCESS,
            Some(CreateAction::CREATED),
        ),
        (
            D::OVERWRITE,
            true,
            NtStatus::SUCCESS,
            Some(CreateAction::OVERWRITTEN),
        ),
        (
            D::OVERWRITE_IF,
            true,
            NtStatus::SUCCESS,
            Some(CreateAction::OVERWRITTEN),
        ),
        (
            D::OVERWRITE_IF,
            false,
            NtStatus::SUCCESS,
            Some(CreateAction::CREATED),
        ),
        (
            D::SUPERSEDE,
            true,
            NtStatus::SUCCESS,
            Some(CreateAction::SUPERSEDED),
        ),
        (
            D::SUPERSEDE,
            false,
            NtStatus::SUCCESS,
            Some(CreateAction::CREATED),
        ),
    ];
    for (i, (d, exists, status, action)) in rows.into_iter().enumerate() {
        let name = format!("f{i}");
        if exists {
            h.put(&name, b"hello").await;
        }
        let o = h.create(&name, RW, d, 0).await;
        assert_eq!(o.status, status, "row {i} {d:?}");
        if let Some(a) = action {
            let c = o.create();
            assert_eq!(c.create_action, a, "row {i}");
            let truncated = matches!(d, D::OVERWRITE | D::OVERWRITE_IF | D::SUPERSEDE) || !exists;
            assert_eq!(c.end_of_file, if truncated { 0 } else { 5 }, "row {i}");
            assert_eq!(
                std::fs::metadata(h.path(&name)).unwrap().len(),
                c.end_of_file
            );
            h.close(o.id).await;
        }
    }
}

#[tokio::test]
async fn directory_and_non_directory_options() {
    let h = H::new().await;
    let d = h
        .create("sub", mask::GENERIC_READ, D::CREATE, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(d.status, NtStatus::SUCCESS);
    assert!(h.path("sub").is_dir());
    assert_eq!(
        d.create().file_attributes & attr::DIRECTORY,
        attr::DIRECTORY
    );
    h.put("file", b"x").await;
    assert_eq!(
        h.create("sub", RW, D::OPEN, opts::NON_DIRECTORY_FILE)
            .await
            .status,
        NtStatus::FILE_IS_A_DIRECTORY
    );
    assert_eq!(
        h.create("file", RW, D::OPEN, opts::DIRECTORY_FILE)
            .await
            .status,
        NtStatus::NOT_A_DIRECTORY
    );
    assert_eq!(
        h.create(
            "x",
            RW,
            D::OPEN,
            opts::DIRECTORY_FILE | opts::NON_DIRECTORY_FILE
        )
        .await
        .status,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.create("y", RW, D::OVERWRITE_IF, opts::DIRECTORY_FILE)
            .await
            .status,
        NtStatus::INVALID_PARAMETER
    );
    // Missing parent directory.
    assert_eq!(
        h.create("nodir\\f", RW, D::CREATE, 0).await.status,
        NtStatus::OBJECT_PATH_NOT_FOUND
    );
    // The share root opens with an empty name.
    let root = h.create("", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(root.status, NtStatus::SUCCESS);
}

#[tokio::test]
async fn names_are_validated_and_case_insensitive() {
    let h = H::new().await;
    h.put("Readme.TXT", b"abc").await;
    let o = h.create("readme.txt", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(o.create().end_of_file, 3);
    assert_eq!(
        h.create("\\Readme.TXT", RW, D::OPEN, 0).await.status,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.create("a*b", RW, D::CREATE, 0).await.status,
        NtStatus::OBJECT_NAME_INVALID
    );
    assert_eq!(
        h.create("..\\etc\\passwd", RW, D::OPEN, 0).await.status,
        NtStatus::OBJECT_PATH_SYNTAX_BAD
    );
    assert_eq!(
        h.create("Readme.TXT::$DATA", mask::GENERIC_READ, D::OPEN, 0)
            .await
            .status,
        NtStatus::SUCCESS
    );
    assert_eq!(
        h.create("Readme.TXT:alt", mask::GENERIC_READ, D::OPEN, 0)
            .await
            .status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
}

#[tokio::test]
async fn symlink_out_of_share_is_refused() {
    let h = H::new().await;
    std::os::unix::fs::symlink("/etc", h.path("etc")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", h.path("pw")).unwrap();
    for name in ["etc\\passwd", "pw", "etc"] {
        let o = h.create(name, mask::GENERIC_READ, D::OPEN, 0).await;
        assert_ne!(o.status, NtStatus::SUCCESS, "{name}");
    }
}

#[tokio::test]
async fn share_modes_conflict() {
    let h = H::new().await;
    h.put("f", b"data").await;
    let a = h
        .create_req("f", mask::GENERIC_READ, D::OPEN)
        .share(share::READ)
        .send()
        .await;
    assert_eq!(a.status, NtStatus::SUCCESS);
    let b = h.create_req("f", RW, D::OPEN).send().await;
    assert_eq!(b.status, NtStatus::SHARING_VIOLATION);
    let c = h
        .create_req("f", mask::GENERIC_READ, D::OPEN)
        .share(share::READ)
        .send()
        .await;
    assert_eq!(c.status, NtStatus::SUCCESS);
    // Attribute-only opens never conflict.
    let d = h
        .create_req("f", mask::FILE_READ_ATTRIBUTES, D::OPEN)
        .share(0)
        .send()
        .await;
    assert_eq!(d.status, NtStatus::SUCCESS);
    // Overwrite is refused before truncating.
    let e = h.create_req("f", RW, D::OVERWRITE).send().await;
    assert_eq!(e.status, NtStatus::SHARING_VIOLATION);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"data");
    h.close(a.id).await;
    h.close(c.id).await;
    let b = h.create_req("f", RW, D::OPEN).send().await;
    assert_eq!(b.status, NtStatus::SUCCESS);
}

/// The last close deletes the file it holds, not whatever has its name by then: a file that
/// was renamed on the server's disk behind the open's back is spared, and so is the file
/// that took its name.
#[tokio::test]
async fn delete_on_close_spares_a_file_that_took_the_name() {
    let h = H::new().await;
    h.put("f", b"mine").await;
    let o = h
        .create(
            "f",
            mask::GENERIC_READ | mask::DELETE,
            D::OPEN,
            opts::DELETE_ON_CLOSE,
        )
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    std::fs::rename(h.path("f"), h.path("moved")).unwrap();
    std::fs::write(h.path("f"), b"theirs").unwrap();
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"theirs");
    assert_eq!(std::fs::read(h.path("moved")).unwrap(), b"mine");
}

#[tokio::test]
async fn delete_on_close() {
    let h = H::new().await;
    h.put("f", b"data").await;
    // Without DELETE access: refused.
    let o = h
        .create("f", mask::GENERIC_READ, D::OPEN, opts::DELETE_ON_CLOSE)
        .await;
    assert_eq!(o.status, NtStatus::ACCESS_DENIED);
    let a = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    let o = h
        .create(
            "f",
            mask::GENERIC_READ | mask::DELETE,
            D::OPEN,
            opts::DELETE_ON_CLOSE,
        )
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    // Pending: still there while `a` is open, new opens refused.
    assert!(h.path("f").exists());
    assert_eq!(
        h.create("f", mask::GENERIC_READ, D::OPEN, 0).await.status,
        NtStatus::DELETE_PENDING
    );
    h.close(a.id).await;
    assert!(!h.path("f").exists());
    // Read-only file: CANNOT_DELETE.
    h.put("ro", b"").await;
    let mut p = std::fs::metadata(h.path("ro")).unwrap().permissions();
    p.set_readonly(true);
    std::fs::set_permissions(h.path("ro"), p).unwrap();
    let o = h
        .create("ro", mask::DELETE, D::OPEN, opts::DELETE_ON_CLOSE)
        .await;
    assert_eq!(o.status, NtStatus::CANNOT_DELETE);
    // A new file asked to be READONLY and deleted on close: CANNOT_DELETE, nothing created.
    let o = h
        .create_req("new-ro", mask::GENERIC_ALL, D::CREATE)
        .options(opts::DELETE_ON_CLOSE | opts::NON_DIRECTORY_FILE)
        .attrs(attr::READONLY)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::CANNOT_DELETE);
    assert!(!h.path("new-ro").exists());
    assert_eq!(
        h.create("ro", mask::GENERIC_WRITE, D::OPEN, 0).await.status,
        NtStatus::ACCESS_DENIED
    );
}

#[tokio::test]
async fn read_only_share_refuses_writes() {
    let h = H::with(|c| c.shares[0].read_only = true).await;
    std::fs::write(h.path("f"), b"x").unwrap();
    assert_eq!(
        h.create("f", mask::GENERIC_WRITE, D::OPEN, 0).await.status,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        h.create("new", mask::GENERIC_READ, D::CREATE, 0)
            .await
            .status,
        NtStatus::ACCESS_DENIED
    );
    let o = h.create("f", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(h.write(o.id, 0, b"y").await.status, NtStatus::ACCESS_DENIED);
}

#[tokio::test]
async fn mxac_context_answers_maximal_access() {
    let h = H::new().await;
    let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::MXAC, &[])]);
    let o = h
        .create_req("f", mask::GENERIC_READ, D::CREATE)
        .contexts(&list)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let c = o.create();
    let ctxs = c.parse_contexts().unwrap();
    let mx = ctxs
        .iter()
        .find(|c| c.tag() == CreateContextTag::MXAC)
        .unwrap();
    let r = MxAcResponse::decode(mx.data).unwrap();
    assert_eq!(r.query_status, NtStatus::SUCCESS);
    assert_eq!(r.maximal_access, mask::FILE_ALL_ACCESS);
}

#[tokio::test]
async fn stale_and_foreign_file_ids_are_closed() {
    let h = H::new().await;
    let o = h.create("f", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
    assert_eq!(h.close(o.id).await.status, NtStatus::FILE_CLOSED);
    // The slot is reused by the next open, with a new generation.
    let o2 = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    assert_eq!(o2.id.volatile & 0xFFFF_FFFF, o.id.volatile & 0xFFFF_FFFF);
    assert_eq!(h.read(o.id, 0, 1).await.status, NtStatus::FILE_CLOSED);
    // Another session cannot use it.
    let m = super::harness::msg(smbq_wire::Command::CLOSE, h.tree, 0x99, |w| {
        smbq_wire::close::CloseRequest {
            flags: 0,
            file_id: o2.id,
        }
        .encode(w)
    });
    let other = super::harness::session(0x99);
    h.srv.session_table().insert(other.id);
    h.srv.session_started(other.id, h.conn.id);
    let r = h.send_with(m, Some(other), Default::default()).await;
    assert_eq!(r.status, NtStatus::NETWORK_NAME_DELETED);
    // Unknown tree and missing session.
    let m = super::harness::msg(smbq_wire::Command::CLOSE, 0x1234, h.session.id, |w| {
        smbq_wire::close::CloseRequest {
            flags: 0,
            file_id: o2.id,
        }
        .encode(w)
    });
    assert_eq!(h.send(m).await.status, NtStatus::NETWORK_NAME_DELETED);
}

#[tokio::test]
async fn session_end_closes_opens_and_applies_delete_on_close() {
    let h = H::new().await;
    let o = h
        .create(
            "doomed",
            mask::GENERIC_ALL,
            D::CREATE,
            opts::DELETE_ON_CLOSE,
        )
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(h.path("doomed").exists());
    h.srv.session_ended(h.session.id);
    assert!(!h.path("doomed").exists());
    // An ended session is gone for requests still routed to it.
    assert_eq!(h.close(o.id).await.status, NtStatus::USER_SESSION_DELETED);
}
