//! Oplock grant, break-before-open and acknowledgment through the handlers, with the break
//! notifications caught on the connection's push channel.

use smbq_proto::Response;
use smbq_wire::create::{CreateDisposition as D, CreateRequest, CreateResponse, OplockLevel};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::oplock_break::{OplockBreak, oplock_level};
use smbq_wire::{Command, FileId, NtStatus};
use tokio::sync::mpsc;

use super::harness::{H, msg};
use crate::access::{mask, share};
use crate::push::Push;

async fn open(h: &H, name: &str, access: u32, share: u32, disp: D, level: OplockLevel) -> Response {
    let n = utf16le_encode(name);
    h.send(msg(Command::CREATE, h.tree, h.session.id, |w| {
        CreateRequest {
            requested_oplock_level: level,
            desired_access: access,
            share_access: share,
            create_disposition: disp,
            name: &n,
            ..Default::default()
        }
        .encode(w)
    }))
    .await
}

fn granted(r: &Response) -> OplockLevel {
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    CreateResponse::decode(&m).unwrap().oplock_level
}

async fn ack(h: &H, file_id: FileId, level: u8) -> Response {
    h.send(msg(Command::OPLOCK_BREAK, h.tree, h.session.id, |w| {
        OplockBreak {
            oplock_level: level,
            file_id,
        }
        .encode(w)
    }))
    .await
}

fn notice(p: Push) -> OplockBreak {
    let Push::Notification { command, body, .. } = p;
    assert_eq!(command, Command::OPLOCK_BREAK);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&body);
    OplockBreak::decode(&m).unwrap()
}

fn listen(h: &H) -> mpsc::UnboundedReceiver<Push> {
    let (tx, rx) = mpsc::unbounded_channel();
    h.srv.register_connection(h.conn.id, tx);
    rx
}

#[tokio::test]
async fn second_open_waits_for_the_break_ack() {
    let h = H::new().await;
    let mut rx = listen(&h);
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let a = open(&h, "f", rw, share::ALL, D::OPEN_IF, OplockLevel::BATCH).await;
    assert_eq!(a.status, NtStatus::SUCCESS);
    assert_eq!(granted(&a), OplockLevel::BATCH);
    let a_id = a.file_id.unwrap();

    let second = open(&h, "f", rw, share::ALL, D::OPEN, OplockLevel::BATCH);
    let holder = async {
        let n = notice(rx.recv().await.unwrap());
        assert_eq!(n.file_id, a_id);
        assert_eq!(n.oplock_level, oplock_level::II);
        let r = ack(&h, a_id, oplock_level::II).await;
        assert_eq!(r.status, NtStatus::SUCCESS);
        let mut m = vec![0u8; 64];
        m.extend_from_slice(&r.body);
        assert_eq!(
            OplockBreak::decode(&m).unwrap().oplock_level,
            oplock_level::II
        );
    };
    let (b, ()) = tokio::join!(second, holder);
    assert_eq!(b.status, NtStatus::SUCCESS);
    assert_eq!(granted(&b), OplockLevel::II);
    let b_id = b.file_id.unwrap();

    // Nothing is being broken any more.
    let again = ack(&h, a_id, oplock_level::NONE).await;
    assert_eq!(again.status, NtStatus::INVALID_OPLOCK_PROTOCOL);

    // A write breaks both level II holders to none, without acknowledgment.
    assert_eq!(h.write(b_id, 0, b"x").await.status, NtStatus::SUCCESS);
    let mut ids = [
        notice(rx.recv().await.unwrap()),
        notice(rx.recv().await.unwrap()),
    ]
    .map(|n| {
        assert_eq!(n.oplock_level, oplock_level::NONE);
        n.file_id.volatile
    });
    ids.sort_unstable();
    let mut want = [a_id.volatile, b_id.volatile];
    want.sort_unstable();
    assert_eq!(ids, want);
    assert!(rx.try_recv().is_err());
}

#[tokio::test]
async fn closing_instead_of_acking_frees_the_share_mode() {
    let h = H::new().await;
    let mut rx = listen(&h);
    let all = mask::GENERIC_ALL;
    let a = open(&h, "f", all, 0, D::OPEN_IF, OplockLevel::BATCH).await;
    assert_eq!(granted(&a), OplockLevel::BATCH);
    let a_id = a.file_id.unwrap();
    let second = open(&h, "f", all, 0, D::OPEN_IF, OplockLevel::BATCH);
    let holder = async {
        assert_eq!(notice(rx.recv().await.unwrap()).file_id, a_id);
        assert_eq!(h.close(a_id).await.status, NtStatus::SUCCESS);
    };
    let (b, ()) = tokio::join!(second, holder);
    assert_eq!(b.status, NtStatus::SUCCESS);
    // The holder is gone: the new open is alone and gets what it asked for (batch7).
    assert_eq!(granted(&b), OplockLevel::BATCH);
}

#[tokio::test]
async fn exclusive_holder_with_conflicting_share_is_not_broken() {
    let h = H::new().await;
    let mut rx = listen(&h);
    let all = mask::GENERIC_ALL;
    let a = open(&h, "f", all, 0, D::OPEN_IF, OplockLevel::EXCLUSIVE).await;
    assert_eq!(granted(&a), OplockLevel::EXCLUSIVE);
    let b = open(&h, "f", all, 0, D::OPEN_IF, OplockLevel::EXCLUSIVE).await;
    assert_eq!(b.status, NtStatus::SHARING_VIOLATION);
    // An attribute-only open neither breaks nor gets an oplock (exclusive4).
    let attrs = mask::FILE_READ_ATTRIBUTES | mask::SYNCHRONIZE;
    let c = open(&h, "f", attrs, 0, D::OPEN, OplockLevel::EXCLUSIVE).await;
    assert_eq!(c.status, NtStatus::SUCCESS);
    assert_eq!(granted(&c), OplockLevel::NONE);
    assert!(rx.try_recv().is_err());
}

#[tokio::test]
async fn undeliverable_break_does_not_stall_the_open() {
    // No connection registered: the notification cannot be sent, so nobody waits for it.
    let h = H::new().await;
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let a = open(&h, "f", rw, share::ALL, D::OPEN_IF, OplockLevel::BATCH).await;
    assert_eq!(granted(&a), OplockLevel::BATCH);
    let b = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        open(&h, "f", rw, share::ALL, D::OPEN, OplockLevel::BATCH),
    )
    .await
    .unwrap();
    assert_eq!(b.status, NtStatus::SUCCESS);
    assert_eq!(granted(&b), OplockLevel::II);
}

/// MS-FSA 2.1.5.4: a zero-byte WRITE returns before the oplock check, so a level II holder
/// keeps its oplock (pike readwrite.test_write_none_oplock, as Windows); a one-byte WRITE
/// breaks it to none.
#[tokio::test]
async fn zero_byte_write_keeps_level_ii() {
    let h = H::new().await;
    let mut rx = listen(&h);
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let writer = open(&h, "f", rw, share::ALL, D::OPEN_IF, OplockLevel::NONE).await;
    assert_eq!(writer.status, NtStatus::SUCCESS);
    let w_id = writer.file_id.unwrap();
    let holder = open(&h, "f", rw, share::ALL, D::OPEN, OplockLevel::II).await;
    assert_eq!(granted(&holder), OplockLevel::II);
    let holder_id = holder.file_id.unwrap();

    let r = h.write(w_id, 0, b"").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut m = vec![0u8; 64];
    m.extend_from_slice(&r.body);
    assert_eq!(
        smbq_wire::write::WriteResponse::decode(&m).unwrap().count,
        0
    );
    // Breaks are pushed before the WRITE answers, so nothing queued means none was sent.
    assert!(rx.try_recv().is_err(), "a zero-byte write broke the oplock");
    assert_eq!(std::fs::metadata(h.path("f")).unwrap().len(), 0);

    assert_eq!(h.write(w_id, 0, b"x").await.status, NtStatus::SUCCESS);
    let n = notice(rx.recv().await.unwrap());
    assert_eq!(n.file_id, holder_id);
    assert_eq!(n.oplock_level, oplock_level::NONE);
    assert!(rx.try_recv().is_err());
}

/// MS-SMB2 3.3.4.6: a break goes to the session owning the open, on any of its channels
/// that is alive, not to the connection the open was made on.
#[tokio::test]
async fn break_reaches_the_session_on_another_channel() {
    let h = H::new().await;
    let _first = listen(&h);
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let a = open(&h, "f", rw, share::ALL, D::OPEN_IF, OplockLevel::BATCH).await;
    assert_eq!(granted(&a), OplockLevel::BATCH);
    let a_id = a.file_id.unwrap();
    // The connection the open came on goes; the session lives on through a second one.
    let other = h.conn.id + 1000;
    let (tx, mut rx) = mpsc::unbounded_channel();
    h.srv.register_connection(other, tx);
    h.srv.session_started(h.session.id, other);
    h.srv.connection_ended(h.conn.id);

    let second = open(&h, "f", rw, share::ALL, D::OPEN, OplockLevel::BATCH);
    let holder = async {
        let wait = std::time::Duration::from_secs(5);
        let got = tokio::time::timeout(wait, rx.recv()).await;
        let n = notice(got.expect("no break on the live channel").unwrap());
        assert_eq!(n.file_id, a_id);
        assert_eq!(n.oplock_level, oplock_level::II);
        assert_eq!(
            ack(&h, a_id, oplock_level::II).await.status,
            NtStatus::SUCCESS
        );
    };
    let (b, ()) = tokio::join!(second, holder);
    assert_eq!(b.status, NtStatus::SUCCESS);
    assert_eq!(granted(&b), OplockLevel::II);
}

/// A replaced session ends in the one session table: nothing is sent to any connection (its
/// own engine finds it ended), its opens are closed, and requests still routed to it fail.
#[tokio::test]
async fn a_replaced_session_ends_without_messages() {
    let h = H::new().await;
    let mut mine = listen(&h);
    let stranger = h.conn.id + 2000;
    let (tx, mut theirs) = mpsc::unbounded_channel();
    h.srv.register_connection(stranger, tx);
    let held = h.srv.session_table().get(h.session.id).unwrap();
    let o = open(
        &h,
        "held",
        mask::GENERIC_READ | mask::GENERIC_WRITE,
        0,
        D::OPEN_IF,
        OplockLevel::NONE,
    )
    .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    // Another user cannot end it by naming it (MS-SMB2 3.3.5.5.3 wants the same user).
    let as_user = |id: u64, user: &str| {
        h.srv.session_table().insert(id);
        h.srv.session_started(id, h.conn.id + 3000);
        let rec = h.srv.session_table().get(id).unwrap();
        rec.set_owner(std::sync::Arc::new(smbq_auth::Identity {
            user: user.into(),
            ..(*h.session.identity).clone()
        }));
    };
    held.set_owner(h.session.identity.clone());
    as_user(0x5150, "mallory");
    assert!(!h.srv.session_replaced(h.session.id, 0x5150));
    assert!(!held.has_ended());
    // The same user reconnecting does.
    as_user(0x5151, &h.session.identity.user);
    assert!(h.srv.session_replaced(h.session.id, 0x5151));
    assert!(
        held.has_ended(),
        "an engine holding the session sees it ended"
    );
    assert!(h.srv.session_table().get(h.session.id).is_none());
    assert!(mine.try_recv().is_err());
    assert!(theirs.try_recv().is_err());
    let fid = o.file_id.unwrap();
    assert!(
        h.srv.lookup_open(fid.volatile).is_none(),
        "its open was closed"
    );
    // Requests still routed to it fail.
    let r = open(
        &h,
        "f",
        mask::GENERIC_READ,
        share::ALL,
        D::OPEN_IF,
        OplockLevel::NONE,
    )
    .await;
    assert_eq!(r.status, NtStatus::USER_SESSION_DELETED);
}

/// A SessionStarted that arrives after its session ended (a LOGOFF in the same compound, a
/// reconnect elsewhere meanwhile) must not bring the record back: nothing would end it again.
#[tokio::test]
async fn an_ended_session_is_not_revived() {
    let h = H::new().await;
    h.srv.session_ended(h.session.id);
    h.srv.session_started(h.session.id, h.conn.id);
    assert!(h.srv.session_table().get(h.session.id).is_none());
    assert!(h.srv.session_table().is_empty());
}

/// crate::clients: a lease break goes to the client's first session (same ClientGuid) of the
/// same user, on that session's connection, though the lease's open came through a later one
/// (Windows, smbtorture smb2.lease.v2_complex1); a session of another user presenting the same
/// ClientGuid never gets it.
#[tokio::test]
async fn a_lease_break_goes_to_the_clients_first_session_of_the_same_user() {
    use smbq_wire::create_context::{
        CreateContext, CreateContextTag, Lease, contexts_to_bytes, lease_state,
    };
    use smbq_wire::oplock_break::LeaseBreakNotification;

    for (user, to_first) in [(None, true), (Some("mallory"), false)] {
        let h = H::new().await;
        let mut mine = listen(&h);
        let guid = h.conn.client_guid;
        let held = h.srv.session_table().get(h.session.id).unwrap();
        held.set_owner(h.session.identity.clone());
        // An older session of the same client, on a connection of its own.
        let (first, first_conn) = (0x66, h.conn.id + 500);
        let (tx, mut theirs) = mpsc::unbounded_channel();
        h.srv.register_connection(first_conn, tx);
        h.srv.session_table().insert(first);
        h.srv.session_started(first, first_conn);
        let owner = match user {
            Some(u) => std::sync::Arc::new(smbq_auth::Identity {
                user: u.into(),
                ..(*h.session.identity).clone()
            }),
            None => h.session.identity.clone(),
        };
        h.srv.session_table().get(first).unwrap().set_owner(owner);
        h.srv.client_session(guid, first);
        h.srv.client_session(guid, h.session.id);

        let lease = Lease {
            key: [9; 16],
            state: lease_state::READ_CACHING | lease_state::HANDLE_CACHING,
            ..Default::default()
        }
        .to_bytes();
        let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::RQLS, &lease)]);
        let leased = h
            .create_req("f", mask::GENERIC_READ, D::OPEN_IF)
            .oplock(OplockLevel::LEASE)
            .contexts(&list)
            .send()
            .await;
        assert_eq!(leased.status, NtStatus::SUCCESS);
        let w = h.create("f", mask::GENERIC_WRITE, D::OPEN, 0).await;
        assert_eq!(h.write(w.id, 0, b"x").await.status, NtStatus::SUCCESS);

        let (got, silent) = if to_first {
            (&mut theirs, &mut mine)
        } else {
            (&mut mine, &mut theirs)
        };
        let Push::Notification {
            session_id, body, ..
        } = got.try_recv().expect("the break");
        let mut m = vec![0u8; 64];
        m.extend_from_slice(&body);
        let b = LeaseBreakNotification::decode(&m).unwrap();
        assert_eq!(b.lease_key, [9; 16]);
        assert_eq!(session_id, if to_first { first } else { h.session.id });
        assert!(silent.try_recv().is_err(), "one break, on one connection");
    }
}
