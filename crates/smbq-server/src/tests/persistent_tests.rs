//! Persistent handles (MS-SMB2 3.3.5.9.10, crate::durable::persistent) through the handlers:
//! granted on a continuously available share only, whatever the open caches; while parked
//! they keep other opens out with STATUS_FILE_NOT_AVAILABLE (stat opens aside); only a DH2C
//! that says "persistent" takes one back.

use smbq_wire::create::{CreateDisposition as D, CreateRequest, OplockLevel};
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, DH2_FLAG_PERSISTENT, Dh2cRequest, Dh2qRequest, Dh2qResponse,
    contexts_to_bytes, parse_contexts,
};
use smbq_wire::negotiate::capabilities;
use smbq_wire::tree_connect::share_capabilities;
use smbq_wire::{FileId, NtStatus};

use super::durable_tests::{key_of, new_session, send_create};
use super::harness::{H, Open};
use crate::access::{mask, share};
use crate::open_state::Queries as _;
use smbq_wire::create::create_options as opts;

/// A server whose share is continuously available, on a connection that negotiated
/// persistent handles (as the engine offers them when a share is CA), with its tree connected
/// again so that it sees both; the TREE_CONNECT response's capabilities.
async fn ca_harness(ca: bool) -> (H, u32) {
    let mut h = H::with(|c| c.shares[0].continuous_availability = ca).await;
    h.conn.server_capabilities |= capabilities::PERSISTENT_HANDLES;
    let r = h.tree_connect("\\\\srv\\data").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    h.tree = r.tree_id.unwrap();
    (h, H::tree_resp(&r).capabilities)
}

/// A DH2Q (or, with `id`, DH2C) CREATE of `name` with no oplock and no lease, with the
/// persistent flag as `persistent` says, sharing `share_access`.
async fn ph(h: &H, name: &str, id: Option<FileId>, persistent: bool, share_access: u32) -> Open {
    let rw = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA;
    ph_with(h, name, id, (persistent, share_access), rw).await
}

/// [`ph`] asking for `access`.
async fn ph_with(
    h: &H,
    name: &str,
    id: Option<FileId>,
    (persistent, share_access): (bool, u32),
    access: u32,
) -> Open {
    let flags = if persistent { DH2_FLAG_PERSISTENT } else { 0 };
    let mut guid = [0x50; 16];
    guid[..name.len().min(16)].copy_from_slice(&name.as_bytes()[..name.len().min(16)]);
    let (tag, blob) = match id {
        Some(file_id) => (
            CreateContextTag::DH2C,
            Dh2cRequest {
                file_id,
                create_guid: guid,
                flags,
            }
            .to_bytes(),
        ),
        None => (
            CreateContextTag::DH2Q,
            Dh2qRequest {
                timeout: 5000,
                flags,
                create_guid: guid,
            }
            .to_bytes(),
        ),
    };
    let list = contexts_to_bytes(&[CreateContext::new(tag, &blob)]);
    let req = CreateRequest {
        requested_oplock_level: OplockLevel::NONE,
        desired_access: access,
        share_access,
        create_disposition: D::OPEN_IF,
        contexts: &list,
        ..Default::default()
    };
    send_create(h, name, req).await
}

/// A plain CREATE of `name` asking for `access`, sharing everything.
async fn plain(h: &H, name: &str, access: u32) -> Open {
    let req = CreateRequest {
        desired_access: access,
        share_access: share::READ | share::WRITE | share::DELETE,
        create_disposition: D::OPEN,
        ..Default::default()
    };
    send_create(h, name, req).await
}

/// The DH2Q response of a CREATE, if it carried one.
fn dh2q_response(o: &Open) -> Option<Dh2qResponse> {
    parse_contexts(o.create().contexts)
        .unwrap()
        .iter()
        .find(|c| c.tag() == CreateContextTag::DH2Q)
        .map(|c| Dh2qResponse::decode(c.data).unwrap())
}

#[tokio::test]
async fn only_a_ca_share_grants_persistent_handles_and_then_without_caching() {
    let (h, caps) = ca_harness(false).await;
    assert_eq!(caps & share_capabilities::CONTINUOUS_AVAILABILITY, 0);
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(
        dh2q_response(&o),
        None,
        "no handle caching, not CA: not durable"
    );

    let (h, caps) = ca_harness(true).await;
    assert_ne!(caps & share_capabilities::CONTINUOUS_AVAILABILITY, 0);
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let r = dh2q_response(&o).expect("durable");
    assert_eq!(r.flags, DH2_FLAG_PERSISTENT);
    assert_eq!(r.timeout, 5000, "the timeout asked for");
    // Without the flag a CA share grants what any share would: nothing here.
    let o = ph(&h, "g", None, false, 0).await;
    assert_eq!(dh2q_response(&o), None);
}

#[tokio::test]
async fn a_parked_persistent_open_keeps_its_file_until_its_client_reclaims_it() {
    let (mut h, _) = ca_harness(true).await;
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(
        dh2q_response(&o).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT)
    );
    assert_eq!(h.write(o.id, 0, b"kept").await.status, NtStatus::SUCCESS);
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);

    new_session(&mut h, 0x12, "alice").await;
    // MS-SMB2 3.3.5.9: not SHARING_VIOLATION (it shares nothing), FILE_NOT_AVAILABLE.
    let other = plain(&h, "f", mask::FILE_READ_DATA).await;
    assert_eq!(other.status, NtStatus::FILE_NOT_AVAILABLE);
    let stat = plain(&h, "f", mask::FILE_READ_ATTRIBUTES).await;
    assert_eq!(stat.status, NtStatus::SUCCESS, "a stat open is let in");
    assert_eq!(h.close(stat.id).await.status, NtStatus::SUCCESS);
    // A reconnect that does not say "persistent" does not find it, and leaves it parked.
    let wrong = ph(&h, "f", Some(o.id), false, 0).await;
    assert_eq!(wrong.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    assert_eq!(h.srv.parked_opens(), 1);

    let back = ph(&h, "f", Some(o.id), true, 0).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id);
    // Connected again, it is an ordinary open: the share mode answers.
    let other = plain(&h, "f", mask::FILE_READ_DATA).await;
    assert_eq!(other.status, NtStatus::SHARING_VIOLATION);
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
    let other = plain(&h, "f", mask::FILE_READ_DATA).await;
    assert_eq!(other.status, NtStatus::SUCCESS);
    assert_eq!(h.close(other.id).await.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"kept");
    assert_eq!(h.srv.open_state().open_count_any(key_of(&h, "f")), 0);
}

/// A DH2C saying "persistent" for an open that is durable only is INVALID_PARAMETER (as
/// Samba answers), and leaves it parked for a proper reconnect.
#[tokio::test]
async fn a_persistent_reconnect_of_a_durable_open_is_invalid() {
    let (mut h, _) = ca_harness(true).await;
    let mut guid = [0x50; 16];
    guid[0] = b'f';
    let dh2q = Dh2qRequest {
        timeout: 0,
        flags: 0,
        create_guid: guid,
    }
    .to_bytes();
    let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DH2Q, &dh2q)]);
    let req = CreateRequest {
        requested_oplock_level: OplockLevel::BATCH,
        desired_access: mask::FILE_READ_DATA,
        share_access: share::READ,
        create_disposition: D::OPEN_IF,
        contexts: &list,
        ..Default::default()
    };
    let o = send_create(&h, "f", req).await;
    assert_eq!(
        dh2q_response(&o).map(|r| r.flags),
        Some(0),
        "durable, not persistent"
    );
    h.srv.session_lost(h.session.id);
    new_session(&mut h, 0x12, "alice").await;
    let r = ph(&h, "f", Some(o.id), true, 0).await;
    assert_eq!(r.status, NtStatus::INVALID_PARAMETER);
    assert_eq!(h.srv.parked_opens(), 1);
    // A durable open without persistence does not keep others out.
    let other = plain(&h, "f", mask::FILE_READ_DATA).await;
    assert_eq!(other.status, NtStatus::SUCCESS);
}

/// A server restarted over the same share and store (crate::persist): `old` is gone first,
/// as a killed process is, without closing anything.
async fn restart(old: H, store: &std::path::Path) -> (H, crate::persist::RestoreReport) {
    let H { srv, dir, .. } = old;
    drop(srv);
    let mut h = H::on_dir(dir, |c| c.shares[0].continuous_availability = true).await;
    h.conn.server_capabilities |= capabilities::PERSISTENT_HANDLES;
    let r = h.tree_connect("\\\\srv\\data").await;
    h.tree = r.tree_id.unwrap();
    let report = h.srv.open_persistent_store(store).unwrap();
    (h, report)
}

/// Restarts the server on `store`, checks that one open was restored, and returns the
/// byte-range locks open `id` of file `key` holds again.
async fn locks_after_restart(
    old: H,
    store: &std::path::Path,
    (key, id): (crate::file_state::FileKey, u64),
) -> Vec<(u64, u64, bool)> {
    let (h, report) = restart(old, store).await;
    assert_eq!(report.restored, 1, "{:?}", report.dropped);
    h.srv.open_state().held_by(key, id).locks
}

/// Issue 37: a persistent open outlives the server. After a restart it holds its file
/// against other clients (FILE_NOT_AVAILABLE), keeps its byte-range lock, and its owner
/// reclaims it under the same FileId and reads what it wrote; its close removes its record.
#[tokio::test]
async fn a_persistent_open_survives_a_restart_and_is_reclaimed() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    assert_eq!(h.srv.open_persistent_store(&store).unwrap().restored, 0);
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(
        dh2q_response(&o).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT)
    );
    assert_eq!(h.srv.persistent_records(), 1, "on disk before the answer");
    assert_eq!(
        h.write(o.id, 0, b"acknowledged").await.status,
        NtStatus::SUCCESS
    );
    let lock = smbq_wire::lock::LockRequest {
        lock_sequence: 0,
        file_id: o.id,
        locks: vec![smbq_wire::lock::LockElement {
            offset: 0,
            length: 4,
            flags: smbq_wire::lock::lock_flags::EXCLUSIVE
                | smbq_wire::lock::lock_flags::FAIL_IMMEDIATELY,
        }],
    };
    let m = super::harness::msg(smbq_wire::Command::LOCK, h.tree, h.session.id, |w| {
        lock.encode(w)
    });
    assert_eq!(h.send(m).await.status, NtStatus::SUCCESS);
    let key = key_of(&h, "f");

    let (mut h, report) = restart(h, &store).await;
    assert_eq!(
        (report.restored, report.dropped.len()),
        (1, 0),
        "{:?}",
        report.dropped
    );
    assert_eq!(h.srv.parked_opens(), 1);
    let held = h.srv.open_state().held_by(key, o.id.volatile);
    assert_eq!(held.locks, vec![(0, 4, true)], "the lock is back");
    new_session(&mut h, 0x12, "alice").await;
    let other = plain(&h, "f", mask::FILE_READ_DATA).await;
    assert_eq!(other.status, NtStatus::FILE_NOT_AVAILABLE);

    let back = ph(&h, "f", Some(o.id), true, 0).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id, "the FileId the client knows");
    let r = h.read(back.id, 0, 12).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert!(r.body.ends_with(b"acknowledged") || r.data.as_deref() == Some(b"acknowledged"));
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.persistent_records(), 0, "closed: forgotten");
    assert_eq!(h.srv.open_state().open_count_any(key), 0);
    assert_eq!(h.srv.open_slots_in_use(), 0);
}

/// A record whose file was replaced while the server was down names another file now: it
/// is dropped, said so, and the new file is free.
#[tokio::test]
async fn a_restart_drops_an_open_whose_file_was_replaced() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    h.srv.open_persistent_store(&store).unwrap();
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(
        dh2q_response(&o).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT)
    );
    let g = ph(&h, "g", None, true, 0).await;
    assert_eq!(
        dh2q_response(&g).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT)
    );
    std::fs::remove_file(h.path("f")).unwrap();
    std::fs::write(h.path("f.tmp"), b"new").unwrap();
    std::fs::rename(h.path("f.tmp"), h.path("f")).unwrap();

    let (mut h, report) = restart(h, &store).await;
    assert_eq!(report.restored, 1, "g is kept");
    assert_eq!(report.dropped.len(), 1);
    assert!(
        report.dropped[0].contains("another file"),
        "{:?}",
        report.dropped
    );
    assert_eq!(h.srv.persistent_records(), 1);
    new_session(&mut h, 0x12, "alice").await;
    let other = plain(&h, "f", mask::FILE_READ_DATA).await;
    assert_eq!(other.status, NtStatus::SUCCESS, "the new file is nobody's");
    let gone = ph(&h, "f", Some(o.id), true, 0).await;
    assert_eq!(gone.status, NtStatus::OBJECT_NAME_NOT_FOUND);
}

/// The store is bounded by `max_durable_opens`: beyond it no persistent handle is promised.
#[tokio::test]
async fn persistent_handles_are_bounded_by_the_store() {
    let mut h = H::with(|c| {
        c.shares[0].continuous_availability = true;
        c.limits.max_durable_opens = 2;
    })
    .await;
    h.conn.server_capabilities |= capabilities::PERSISTENT_HANDLES;
    let r = h.tree_connect("\\\\srv\\data").await;
    h.tree = r.tree_id.unwrap();
    let state = tempfile::tempdir().unwrap();
    h.srv
        .open_persistent_store(&state.path().join("p.redb"))
        .unwrap();
    for name in ["a", "b"] {
        let o = ph(&h, name, None, true, 0).await;
        assert_eq!(
            dh2q_response(&o).map(|r| r.flags),
            Some(DH2_FLAG_PERSISTENT)
        );
    }
    let third = ph(&h, "c", None, true, 0).await;
    assert_eq!(third.status, NtStatus::SUCCESS, "opened all the same");
    assert_eq!(dh2q_response(&third), None, "but not persistent");
    assert_eq!(h.srv.persistent_records(), 2);
}

/// Each account's share of the store is bounded by `max_durable_opens_per_user`, so one
/// client cannot fill it for everyone; another account still gets persistent handles, and a
/// close gives the account its place back.
#[tokio::test]
async fn persistent_handles_are_bounded_per_user() {
    let mut h = H::with(|c| {
        c.shares[0].continuous_availability = true;
        c.limits.max_durable_opens = 10;
        c.limits.max_durable_opens_per_user = 2;
    })
    .await;
    h.conn.server_capabilities |= capabilities::PERSISTENT_HANDLES;
    let state = tempfile::tempdir().unwrap();
    h.srv
        .open_persistent_store(&state.path().join("p.redb"))
        .unwrap();
    new_session(&mut h, 0x21, "alice").await;
    let mut kept = Vec::new();
    for name in ["a1", "a2", "a3"] {
        let o = ph(&h, name, None, true, 0).await;
        assert_eq!(o.status, NtStatus::SUCCESS, "{name} opens all the same");
        kept.push((o.id, dh2q_response(&o).map(|r| r.flags)));
    }
    let flags: Vec<_> = kept.iter().map(|(_, f)| *f).collect();
    assert_eq!(
        flags,
        [Some(DH2_FLAG_PERSISTENT), Some(DH2_FLAG_PERSISTENT), None],
        "alice's third is not persistent"
    );
    assert_eq!(h.srv.persistent_records_of("alice"), 2);
    assert_eq!(h.close(kept[0].0).await.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.persistent_records_of("alice"), 1);
    let again = ph(&h, "a4", None, true, 0).await;
    assert_eq!(
        dh2q_response(&again).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT),
        "a close gives the place back"
    );
    new_session(&mut h, 0x22, "bob").await;
    let b = ph(&h, "b1", None, true, 0).await;
    assert_eq!(
        dh2q_response(&b).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT),
        "bob is not held back by alice"
    );
    assert_eq!(h.srv.persistent_records(), 3);
}

/// A CLOSE that races a write of the open's record (here: the write comes after the close)
/// leaves no record behind: a closed open never comes back at a restart.
#[tokio::test]
async fn a_closed_open_leaves_no_record_whatever_the_order() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    h.srv
        .open_persistent_store(&state.path().join("p.redb"))
        .unwrap();
    let o = ph(&h, "f", None, true, 0).await;
    let open = h.srv.lookup_open(o.id.volatile).unwrap();
    assert_eq!(h.srv.persistent_records(), 1);
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.persistent_records(), 0);
    assert!(h.srv.persist(&open), "nothing to write is no failure");
    assert_eq!(h.srv.persistent_records(), 0);
}

/// A rename moves the record with the file, and a delete-pending set on the file is in it:
/// after a restart the open is held at its new name, still delete-pending, and its close
/// deletes the file.
#[tokio::test]
async fn a_renamed_delete_pending_open_is_restored_as_it_was() {
    use super::set_info_tests::{rename_buf, set};
    use smbq_wire::fscc::file_info::DispositionInfo;
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    h.srv.open_persistent_store(&store).unwrap();
    let all = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA | mask::DELETE;
    let o = ph_with(&h, "f", None, (true, 0), all).await;
    assert_eq!(
        dh2q_response(&o).map(|r| r.flags),
        Some(DH2_FLAG_PERSISTENT)
    );
    assert_eq!(
        set(&h, o.id, 10, &rename_buf("g", false)).await,
        NtStatus::SUCCESS
    );
    let doc = DispositionInfo {
        delete_pending: true,
    }
    .to_bytes();
    assert_eq!(set(&h, o.id, 13, &doc).await, NtStatus::SUCCESS);

    let (mut h, report) = restart(h, &store).await;
    assert_eq!(
        (report.restored, report.dropped.len()),
        (1, 0),
        "{:?}",
        report.dropped
    );
    assert!(h.path("g").exists() && !h.path("f").exists());
    new_session(&mut h, 0x12, "alice").await;
    // Named by its FileId and CreateGuid (the helper's is made from the name it was opened by).
    let back = ph_with(&h, "f", Some(o.id), (true, 0), all).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
    assert!(!h.path("g").exists(), "delete-pending survived the restart");
}

/// An open that cannot be restored (here: no room among the disconnected opens) is dropped
/// without acting on its file: a delete-on-close it carried deletes nothing.
#[tokio::test]
async fn an_open_not_restored_deletes_nothing() {
    use super::set_info_tests::set;
    use smbq_wire::fscc::file_info::DispositionInfo;
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    h.srv.open_persistent_store(&store).unwrap();
    let all = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA | mask::DELETE;
    let o = ph_with(&h, "f", None, (true, 0), all).await;
    let doc = DispositionInfo {
        delete_pending: true,
    }
    .to_bytes();
    assert_eq!(set(&h, o.id, 13, &doc).await, NtStatus::SUCCESS);
    let H { srv, dir, .. } = h;
    drop(srv);
    let mut h = H::on_dir(dir, |c| {
        c.shares[0].continuous_availability = true;
        c.limits.max_durable_opens = 0;
    })
    .await;
    h.conn.server_capabilities |= capabilities::PERSISTENT_HANDLES;
    let report = h.srv.open_persistent_store(&store).unwrap();
    assert_eq!((report.restored, report.dropped.len()), (0, 1));
    assert!(h.path("f").exists(), "not deleted by a drop");
    assert_eq!(h.srv.persistent_records(), 0);
    assert_eq!(h.srv.open_slots_in_use(), 0);
    let _ = &mut h;
}

/// The server restores opens as itself: a share made read-only while it was down drops the
/// persistent opens that could change their files, and keeps the ones that only read.
#[tokio::test]
async fn a_share_made_read_only_drops_the_opens_that_could_write() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    h.srv.open_persistent_store(&store).unwrap();
    let w = ph(&h, "w", None, true, share::ALL).await;
    let r = ph_with(&h, "r", None, (true, share::ALL), mask::FILE_READ_DATA).await;
    for o in [&w, &r] {
        assert_eq!(dh2q_response(o).map(|r| r.flags), Some(DH2_FLAG_PERSISTENT));
    }
    let H { srv, dir, .. } = h;
    drop(srv);
    let h = H::on_dir(dir, |c| {
        c.shares[0].continuous_availability = true;
        c.shares[0].read_only = true;
    })
    .await;
    let report = h.srv.open_persistent_store(&store).unwrap();
    assert_eq!((report.restored, report.dropped.len()), (1, 1));
    assert!(
        report.dropped[0].contains("read-only"),
        "{:?}",
        report.dropped
    );
    assert_eq!(h.srv.persistent_records(), 1, "the reader's record stays");
}

/// A parked persistent open keeps its whole file (MS-SMB2 3.3.5.9: Open.File, whatever the
/// stream): a named stream of it is no way around FILE_NOT_AVAILABLE. (A named stream's own
/// open is never durable, as on Samba.)
#[tokio::test]
async fn a_named_stream_is_no_way_around_a_parked_persistent_open() {
    let (mut h, _) = ca_harness(true).await;
    let st = h.create("f:other", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(h.close(st.id).await.status, NtStatus::SUCCESS);
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let s = ph(&h, "g:st", None, true, 0).await;
    assert_eq!(s.status, NtStatus::SUCCESS);
    assert_eq!(dh2q_response(&s), None, "a stream's open is not durable");
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);

    new_session(&mut h, 0x13, "alice").await;
    let rw = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA;
    for name in ["f:other", "f:other:$DATA", "f"] {
        let other = plain(&h, name, rw).await;
        assert_eq!(other.status, NtStatus::FILE_NOT_AVAILABLE, "{name}");
    }
    let stat = plain(&h, "f:other", mask::FILE_READ_ATTRIBUTES).await;
    assert_eq!(stat.status, NtStatus::SUCCESS, "a stat open is let in");
    let g = plain(&h, "g:st", rw).await;
    assert_eq!(g.status, NtStatus::SUCCESS, "another file is free");
}

/// A parked persistent open of the share root does not lock every other client out of the
/// share (`persistent::keeps_file_at`): others list the root, while a directory below it is
/// kept for its client; the root's parked open still holds its share mode.
#[tokio::test]
async fn a_parked_persistent_open_of_the_share_root_keeps_only_its_share_mode() {
    let (mut h, _) = ca_harness(true).await;
    let d = h
        .create("d", mask::GENERIC_ALL, D::CREATE, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(h.close(d.id).await.status, NtStatus::SUCCESS);
    let all = share::READ | share::WRITE | share::DELETE;
    for (name, share_access) in [("", all), ("d", all)] {
        let o = ph(&h, name, None, true, share_access).await;
        assert_eq!(o.status, NtStatus::SUCCESS, "{name:?}");
        assert!(dh2q_response(&o).is_some_and(|r| r.flags & DH2_FLAG_PERSISTENT != 0));
    }
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 2);

    new_session(&mut h, 0x13, "alice").await;
    let list = mask::FILE_LIST_DIRECTORY | mask::SYNCHRONIZE;
    assert_eq!(plain(&h, "", list).await.status, NtStatus::SUCCESS);
    assert_eq!(
        plain(&h, "d", list).await.status,
        NtStatus::FILE_NOT_AVAILABLE,
        "a directory below the root is kept for its client"
    );

    // The share mode still counts: a parked root open that shares nothing refuses a listing
    // as a connected one would.
    let (mut h, _) = ca_harness(true).await;
    let o = ph(&h, "", None, true, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    h.srv.session_lost(h.session.id);
    new_session(&mut h, 0x14, "alice").await;
    assert_eq!(
        plain(&h, "", list).await.status,
        NtStatus::SHARING_VIOLATION
    );
}

/// A LOCK of a persistent open whose record cannot be written is refused and takes nothing
/// (MS-SMB2 3.3.5.9.10: the state is on stable storage before the response that depends on
/// it), so a restart cannot lose a lock its client was told it holds.
#[tokio::test]
async fn a_lock_the_store_cannot_record_is_not_granted() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    let (db, loaded) = crate::durable::store::Store::open(&store).unwrap();
    assert!(loaded.records.is_empty());
    let db = std::sync::Arc::new(db);
    h.srv.use_record_store(db.clone()).unwrap();
    let o = ph(&h, "f", None, true, 0).await;
    assert_eq!(h.srv.persistent_records(), 1);
    let key = key_of(&h, "f");
    db.fail_puts(true);
    assert_eq!(
        h.send(lock_msg(&h, o.id, 0, false)).await.status,
        NtStatus::INSUFFICIENT_RESOURCES
    );
    assert_eq!(h.srv.open_state().held_by(key, o.id.volatile).locks, vec![]);
    db.fail_puts(false);
    assert_eq!(
        h.send(lock_msg(&h, o.id, 8, false)).await.status,
        NtStatus::SUCCESS
    );

    drop(db); // the database closes with the server
    assert_eq!(
        locks_after_restart(h, &store, (key, o.id.volatile)).await,
        vec![(8, 4, true)],
        "only the recorded lock is back"
    );
}

/// A DH2Q (or, with `id`, DH2C) persistent CREATE of `a:b` carrying the POSIX context.
async fn posix_ph(h: &H, id: Option<FileId>) -> Open {
    let create_guid = [0x77; 16];
    let (tag, blob) = match id {
        Some(file_id) => (
            CreateContextTag::DH2C,
            Dh2cRequest {
                file_id,
                create_guid,
                flags: DH2_FLAG_PERSISTENT,
            }
            .to_bytes(),
        ),
        None => (
            CreateContextTag::DH2Q,
            Dh2qRequest {
                timeout: 5000,
                flags: DH2_FLAG_PERSISTENT,
                create_guid,
            }
            .to_bytes(),
        ),
    };
    let list = contexts_to_bytes(&[
        CreateContext::new(tag, &blob),
        CreateContext::new(CreateContextTag::POSIX, &0o600u32.to_le_bytes()),
    ]);
    let req = CreateRequest {
        desired_access: mask::FILE_READ_DATA | mask::FILE_WRITE_DATA | mask::FILE_READ_ATTRIBUTES,
        create_disposition: D::OPEN_IF,
        contexts: &list,
        ..Default::default()
    };
    send_create(h, "a:b", req).await
}

/// A persistent POSIX open (crate::posix) comes back after a restart as a POSIX open, under
/// its POSIX name: FILE_POSIX_INFORMATION, which only POSIX opens get, answers on it.
#[tokio::test]
async fn a_persistent_posix_open_is_restored_as_one() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("p.redb");
    h.srv.open_persistent_store(&store).unwrap();
    let o = posix_ph(&h, None).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(h.path("a:b").is_file());
    let (mut h, report) = restart(h, &store).await;
    assert_eq!(report.restored, 1, "{:?}", report.dropped);
    new_session(&mut h, 0x12, "alice").await;
    let back = posix_ph(&h, Some(o.id)).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id);
    let class = smbq_wire::posix::INFO_CLASS;
    let info = smbq_wire::query_info::InfoType::FILE;
    let (s, _) = super::info_tests::qi(&h, back.id, info, class, 65536, 0).await;
    assert_eq!(s, NtStatus::SUCCESS, "a POSIX open again");
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
}

/// A record store (redb underneath) whose puts can be made slow, and which notes whether two
/// writes of one open ever overlapped: the server must give each open's writes turns.
#[derive(Debug)]
struct Turns {
    db: std::sync::Arc<crate::durable::store::Store>,
    slow_puts: std::sync::atomic::AtomicBool,
    busy: std::sync::Mutex<std::collections::HashSet<u64>>,
    overlapped: std::sync::atomic::AtomicBool,
}

impl Turns {
    fn turn<R>(&self, id: u64, slow: bool, f: impl FnOnce() -> R) -> R {
        use std::sync::atomic::Ordering::SeqCst;
        if !self.busy.lock().unwrap().insert(id) {
            self.overlapped.store(true, SeqCst);
        }
        if slow && self.slow_puts.swap(false, SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
        let r = f();
        self.busy.lock().unwrap().remove(&id);
        r
    }
}

impl crate::durable::store::RecordStore for Turns {
    fn put(&self, rec: &crate::durable::store::Record) -> std::io::Result<()> {
        self.turn(rec.file_id, true, || self.db.put(rec))
    }
    fn remove(&self, id: u64) -> std::io::Result<()> {
        self.turn(id, false, || self.db.remove(id))
    }
    fn records_of(&self, user: &str) -> usize {
        self.db.records_of(user)
    }
    fn records(&self) -> std::io::Result<usize> {
        self.db.records()
    }
}

/// A LOCK request of 4 bytes at `offset` on `id`: exclusive, failing at once (or, with
/// `unlock`, an unlock).
fn lock_msg(h: &H, id: FileId, offset: u64, unlock: bool) -> bytes::Bytes {
    use smbq_wire::lock::lock_flags as lf;
    let req = smbq_wire::lock::LockRequest {
        lock_sequence: 0,
        file_id: id,
        locks: vec![smbq_wire::lock::LockElement {
            offset,
            length: 4,
            flags: if unlock {
                lf::UNLOCK
            } else {
                lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY
            },
        }],
    };
    super::harness::msg(smbq_wire::Command::LOCK, h.tree, h.session.id, |w| {
        req.encode(w)
    })
}

/// One open's writes to the store take turns, each describing the open when its turn comes:
/// a slow write of the open's state (no locks) under way while a LOCK records the lock
/// leaves the lock in the store, not the older state written last; and a write under way at
/// the CLOSE leaves no record behind. Before, both raced: with etcd's store the close's
/// removal could come first and the late write bring the record and its hold back for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_opens_store_writes_take_turns_and_none_outlives_its_close() {
    use std::sync::atomic::Ordering::SeqCst;
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("p.redb");
    let (db, _) = crate::durable::store::Store::open(&path).unwrap();
    let turns = std::sync::Arc::new(Turns {
        db: std::sync::Arc::new(db),
        slow_puts: Default::default(),
        busy: Default::default(),
        overlapped: Default::default(),
    });
    h.srv.use_record_store(turns.clone()).unwrap();
    let o = ph(&h, "f", None, true, 0).await;
    let g = ph(&h, "g", None, true, 0).await;
    let key = key_of(&h, "f");
    let slow_write = |id: FileId| {
        turns.slow_puts.store(true, SeqCst);
        let srv = h.srv.clone();
        let open = srv.lookup_open(id.volatile).unwrap();
        tokio::task::spawn_blocking(move || srv.persist(&open))
    };

    // A write of f's state without the lock, slow, then the LOCK while it is under way.
    let slow = slow_write(o.id);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        h.send(lock_msg(&h, o.id, 8, false)).await.status,
        NtStatus::SUCCESS
    );
    assert!(slow.await.unwrap());
    assert!(
        !turns.overlapped.load(SeqCst),
        "two writes of one open overlapped"
    );

    // A slow write of g under way when g's CLOSE comes.
    let slow = slow_write(g.id);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(h.close(g.id).await.status, NtStatus::SUCCESS);
    slow.await.unwrap();
    assert!(
        !turns.overlapped.load(SeqCst),
        "a write overlapped the close's removal"
    );
    assert_eq!(h.srv.persistent_records(), 1, "only f's record is left");

    // What the store holds of f is its newest state, with the lock.
    drop(turns);
    assert_eq!(
        locks_after_restart(h, &path, (key, o.id.volatile)).await,
        vec![(8, 4, true)],
        "the older state was written last"
    );
}

/// An unlock the store could not record stands (it cannot be taken back), and the record is
/// written again in the background once the store takes writes: after a restart the lock is
/// not back. Before, the stale lock stayed in the record until the open's next write (on a
/// cluster, other nodes' READ and WRITE met it meanwhile).
#[tokio::test]
async fn an_unlock_the_store_could_not_record_is_recorded_once_it_can() {
    let (h, _) = ca_harness(true).await;
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join("p.redb");
    let (db, _) = crate::durable::store::Store::open(&path).unwrap();
    let db = std::sync::Arc::new(db);
    h.srv.use_record_store(db.clone()).unwrap();
    let o = ph(&h, "f", None, true, 0).await;
    let key = key_of(&h, "f");
    assert_eq!(
        h.send(lock_msg(&h, o.id, 8, false)).await.status,
        NtStatus::SUCCESS
    );
    db.fail_puts(true);
    assert_eq!(
        h.send(lock_msg(&h, o.id, 8, true)).await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(h.srv.open_state().held_by(key, o.id.volatile).locks, vec![]);
    // Failing writes are tried again, not given up: two rounds (0.5 s, 1 s) fail too.
    tokio::time::sleep(std::time::Duration::from_millis(1700)).await;
    db.fail_puts(false);
    // The next round (2 s later) writes the record.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;

    drop(db);
    assert_eq!(
        locks_after_restart(h, &path, (key, o.id.volatile)).await,
        vec![],
        "the unlocked range is locked again after the restart"
    );
}
