//! CHANGE_NOTIFY through the handlers: validation, a change made by another request, and
//! the completion of a waiting request by CLOSE and by CANCEL.

use std::time::Duration;

use bytes::Bytes;
use smbq_wire::change_notify::{
    ChangeNotifyRequest, ChangeNotifyResponse, NotifyAction, completion_filter as cf,
    decode_notify_entries, flags,
};
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::{Command, FileId, NtStatus};
use tokio_util::sync::CancellationToken;

use super::harness::{H, msg};
use crate::access::{mask, opts};

fn notify_msg(h: &H, id: FileId, filter: u32, buffer: u32) -> Bytes {
    msg(Command::CHANGE_NOTIFY, h.tree, h.session.id, |w| {
        ChangeNotifyRequest {
            flags: flags::WATCH_TREE,
            output_buffer_length: buffer,
            file_id: id,
            completion_filter: filter,
        }
        .encode(w)
    })
}

async fn dir(h: &H, name: &str, access: u32) -> FileId {
    let o = h
        .create(name, access, D::OPEN_IF, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    o.id
}

#[tokio::test]
async fn validation() {
    let h = H::new().await;
    let d = dir(&h, "d", mask::GENERIC_ALL).await;
    let f = h.create("f", mask::GENERIC_ALL, D::CREATE, 0).await;
    let r = h.send(notify_msg(&h, f.id, cf::FILE_NAME, 100)).await;
    assert_eq!(r.status, NtStatus::INVALID_PARAMETER, "file handle");
    let too_big = h.conn.max_transact_size + 1;
    let r = h.send(notify_msg(&h, d, cf::FILE_NAME, too_big)).await;
    assert_eq!(r.status, NtStatus::INVALID_PARAMETER, "buffer");
    let attr_only = dir(&h, "d", mask::FILE_READ_ATTRIBUTES).await;
    let r = h.send(notify_msg(&h, attr_only, cf::FILE_NAME, 100)).await;
    assert_eq!(r.status, NtStatus::ACCESS_DENIED);
}

#[tokio::test]
async fn a_create_completes_a_waiting_request_and_close_cleans_up() {
    let h = H::new().await;
    let d = dir(&h, "d", mask::GENERIC_ALL).await;
    let (r, ()) = tokio::join!(h.send(notify_msg(&h, d, cf::FILE_NAME, 1000)), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.put("d\\new.txt", b"").await;
    });
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    let resp = ChangeNotifyResponse::decode(&m).unwrap();
    assert_eq!(
        decode_notify_entries(resp.output).unwrap(),
        vec![(NotifyAction::ADDED, "new.txt".to_string())]
    );
    // Changes while no request waits are buffered and returned at once, in order.
    h.put("d\\gone", b"").await;
    let g = h
        .create("d\\gone", mask::GENERIC_ALL, D::OPEN, opts::DELETE_ON_CLOSE)
        .await;
    assert_eq!(h.close(g.id).await.status, NtStatus::SUCCESS);
    let r = h.send(notify_msg(&h, d, cf::FILE_NAME, 1000)).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    let resp = ChangeNotifyResponse::decode(&m).unwrap();
    assert_eq!(
        decode_notify_entries(resp.output).unwrap(),
        vec![
            (NotifyAction::ADDED, "gone".to_string()),
            (NotifyAction::REMOVED, "gone".to_string())
        ]
    );
    // A waiting request ends with NOTIFY_CLEANUP when the directory handle closes.
    let (r, _) = tokio::join!(h.send(notify_msg(&h, d, cf::FILE_NAME, 1000)), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.close(d).await
    });
    assert_eq!(r.status, NtStatus::NOTIFY_CLEANUP);
}

#[tokio::test]
async fn cancel_ends_a_wait() {
    let h = H::new().await;
    let d = dir(&h, "d", mask::GENERIC_ALL).await;
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    let (r, ()) = tokio::join!(
        h.send_with(notify_msg(&h, d, cf::DIR_NAME, 1000), None, cancel),
        async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            c2.cancel();
        }
    );
    assert_eq!(r.status, NtStatus::CANCELLED);
}

/// `m` with MessageId `mid` (requests of one connection have increasing ids).
fn with_mid(m: Bytes, mid: u64) -> Bytes {
    let mut v = m.to_vec();
    v[24..32].copy_from_slice(&mid.to_le_bytes());
    Bytes::from(v)
}

/// Requests run as separate tasks, so a CLOSE may run before a CHANGE_NOTIFY sent just before
/// it: that notify gets the NOTIFY_CLEANUP it would have had waiting, not FILE_CLOSED
/// (smbtorture smb2.notify.dir under load); one sent after the CLOSE gets FILE_CLOSED.
#[tokio::test]
async fn a_notify_overtaken_by_the_close_of_its_handle_is_cleaned_up() {
    let h = H::new().await;
    let d = dir(&h, "d", mask::GENERIC_ALL).await;
    let close = msg(Command::CLOSE, h.tree, h.session.id, |w| {
        smbq_wire::close::CloseRequest {
            flags: 0,
            file_id: d,
        }
        .encode(w)
    });
    assert_eq!(h.send(with_mid(close, 10)).await.status, NtStatus::SUCCESS);
    let before = h
        .send(with_mid(notify_msg(&h, d, cf::FILE_NAME, 1000), 9))
        .await;
    assert_eq!(before.status, NtStatus::NOTIFY_CLEANUP);
    let after = h
        .send(with_mid(notify_msg(&h, d, cf::FILE_NAME, 1000), 11))
        .await;
    assert_eq!(after.status, NtStatus::FILE_CLOSED);
}

/// The names the first answer to a WATCH_TREE watch of the share root holds when files are
/// made in `shut` (a directory whose descriptor grants the session `shut_grants`) and then in
/// `open` (no descriptor).
async fn first_tree_names(h: &H, shut_grants: u32) -> Vec<String> {
    use super::security_tests::{create_sd, sd, token};
    use smbq_wire::security::Ace;
    let me = token(h).user;
    let grants = sd(
        Some(me.clone()),
        Some(vec![Ace::allowed(me, shut_grants, 0)]),
    );
    let (st, id) = create_sd(
        h,
        "shut",
        mask::FILE_READ_ATTRIBUTES,
        opts::DIRECTORY_FILE,
        &grants,
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    h.close(id).await;
    let open = dir(h, "open", mask::GENERIC_ALL).await;
    h.close(open).await;
    let root = dir(h, "", mask::GENERIC_READ).await;
    let (r, ()) = tokio::join!(h.send(notify_msg(h, root, cf::FILE_NAME, 1000)), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.put("shut\\secret.txt", b"").await;
        h.put("open\\seen.txt", b"").await;
    });
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    let resp = ChangeNotifyResponse::decode(&m).unwrap();
    decode_notify_entries(resp.output)
        .unwrap()
        .into_iter()
        .map(|(_, name)| name)
        .collect()
}

/// Issue 42: a WATCH_TREE watch hears of a change below a subdirectory only where its session
/// may list every directory on the way (crate::notify::visible). A stored descriptor that
/// lets the session add files to a directory but not list it hides them from the watch; under
/// access-based enumeration the directory must also grant what a listing needs to show it.
#[tokio::test]
async fn a_tree_watch_drops_changes_below_a_directory_its_session_may_not_list() {
    let all = mask::FILE_ALL_ACCESS;
    let h = H::new().await;
    let names = first_tree_names(&h, all & !mask::FILE_LIST_DIRECTORY).await;
    assert_eq!(names, ["open\\seen.txt"], "no FILE_LIST_DIRECTORY");

    let no_read_ea = all & !mask::FILE_READ_EA;
    let h = H::new().await;
    let names = first_tree_names(&h, no_read_ea).await;
    assert_eq!(
        names,
        ["shut\\secret.txt"],
        "listable, no access-based enumeration"
    );
    let h = H::with(|c| c.shares[0].access_based_enumeration = true).await;
    let names = first_tree_names(&h, no_read_ea).await;
    assert_eq!(
        names,
        ["open\\seen.txt"],
        "a listing of the root would not show shut"
    );
}

/// A notify that reaches the hub after another open marked its directory delete-on-close
/// (and the DELETE_PENDING that sent was for nobody) fails at once with DELETE_PENDING
/// instead of waiting forever (MS-FSA 2.1.5.10; smbtorture smb2.notify.rmdir3 under load).
#[tokio::test]
async fn a_notify_on_a_delete_pending_directory_fails_at_once() {
    let h = H::new().await;
    let d = dir(&h, "gone", mask::GENERIC_ALL).await;
    let other = h
        .create("gone", mask::GENERIC_ALL, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(other.status, NtStatus::SUCCESS);
    let disposition = msg(Command::SET_INFO, h.tree, h.session.id, |w| {
        smbq_wire::set_info::SetInfoRequest {
            info_type: smbq_wire::query_info::InfoType::FILE,
            file_info_class: smbq_wire::fscc::FileInfoClass::DISPOSITION.0,
            additional_information: 0,
            file_id: other.id,
            buffer: &[1],
        }
        .encode(w)
    });
    assert_eq!(h.send(disposition).await.status, NtStatus::SUCCESS);
    assert_eq!(h.close(other.id).await.status, NtStatus::SUCCESS);
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        h.send(notify_msg(&h, d, cf::FILE_NAME, 1000)),
    )
    .await
    .expect("the notify does not wait forever");
    assert_eq!(r.status, NtStatus::DELETE_PENDING);
}

fn names(r: &smbq_proto::Response) -> Vec<(NotifyAction, String)> {
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    decode_notify_entries(ChangeNotifyResponse::decode(&m).unwrap().output).unwrap()
}

/// CHANGE_NOTIFYs registered by the connection's loop as they arrive
/// (`Server::before_task`) get one change each of those made after they were sent, however
/// late their tasks run (smbtorture smb2.notify.mask-change failed under load when both
/// changes were buffered before the first request's task reached the watch).
#[tokio::test]
async fn requests_registered_on_arrival_get_the_changes_after_them() {
    let h = H::new().await;
    let d = dir(&h, "d", mask::GENERIC_ALL).await;
    let first = h.request(with_mid(notify_msg(&h, d, cf::FILE_NAME, 1000), 10));
    let second = h.request(with_mid(notify_msg(&h, d, cf::FILE_NAME, 1000), 11));
    h.srv.before_task(&h.conn, &first);
    h.srv.before_task(&h.conn, &second);
    h.put("d\\a", b"").await;
    h.put("d\\b", b"").await;
    let r1 = h
        .srv
        .handle(&h.conn, &first, CancellationToken::new())
        .await;
    assert_eq!(names(&r1), vec![(NotifyAction::ADDED, "a".to_string())]);
    let r2 = tokio::time::timeout(
        Duration::from_secs(5),
        h.srv.handle(&h.conn, &second, CancellationToken::new()),
    )
    .await
    .expect("the second change is the second request's");
    assert_eq!(names(&r2), vec![(NotifyAction::ADDED, "b".to_string())]);
    assert_eq!(h.srv.notify().watches()[0].1, 0, "nobody waits");
}

/// A watched directory renamed through its own handle keeps watching: a file created under
/// the new name is reported (the watch followed the directory, as the open did), and one
/// made under a new directory that took the old name is not.
#[tokio::test]
async fn a_watch_follows_its_renamed_directory() {
    let h = H::new().await;
    let d = dir(&h, "w", mask::GENERIC_ALL).await;
    // The watch starts with its first request (a change under the old name ends it).
    let (r, ()) = tokio::join!(h.send(notify_msg(&h, d, cf::FILE_NAME, 1000)), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        h.put("w\\first", b"").await;
    });
    assert_eq!(names(&r), vec![(NotifyAction::ADDED, "first".to_string())]);
    assert_eq!(h.rename(d, "w2").await.status, NtStatus::SUCCESS);
    let old = dir(&h, "w", mask::GENERIC_ALL).await;
    h.put("w\\not-mine", b"").await;
    h.put("w2\\mine", b"").await;
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        h.send(notify_msg(&h, d, cf::FILE_NAME, 1000)),
    )
    .await
    .expect("the change under the new name was not reported");
    assert_eq!(names(&r), vec![(NotifyAction::ADDED, "mine".to_string())]);
    h.close(old).await;
    h.close(d).await;
}
