//! Durable handles through the handlers: granted with a batch oplock, parked when the session
//! is lost, reclaimed by the same user only, purged by a conflicting open, timed out, bounded;
//! every path leaves the tables empty.

use std::sync::Arc;

use smbq_auth::Identity;
use smbq_wire::create::{CreateDisposition as D, CreateRequest, OplockLevel};
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, contexts_to_bytes, parse_contexts,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::{Command, FileId, NtStatus, Writer};

use super::harness::{H, Open, msg, session};
use crate::access::{mask, share};
use crate::open_state::Queries as _;

const DATA: u32 = mask::FILE_READ_DATA | mask::FILE_WRITE_DATA;

/// Sends `req` (with the name `name`) as a CREATE on `h`'s tree.
pub(super) async fn send_create(h: &H, name: &str, req: CreateRequest<'_>) -> Open {
    let n = utf16le_encode(name);
    let m = msg(Command::CREATE, h.tree, h.session.id, |w| {
        CreateRequest { name: &n, ..req }.encode(w)
    });
    let r = h.send(m).await;
    Open {
        status: r.status,
        id: r.file_id.unwrap_or_default(),
        resp: Some(r),
    }
}

/// A CREATE asking for a batch oplock and a durable v1 handle, sharing nothing.
async fn durable_open(h: &H, name: &str) -> Open {
    let dhnq = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DHNQ, &[0; 16])]);
    let req = CreateRequest {
        requested_oplock_level: OplockLevel::BATCH,
        desired_access: DATA,
        share_access: 0,
        create_disposition: D::OPEN_IF,
        contexts: &dhnq,
        ..Default::default()
    };
    send_create(h, name, req).await
}

/// A DHnC reconnect of `id` (every other field is ignored by the server).
async fn reconnect(h: &H, id: FileId) -> Open {
    let mut w = Writer::new();
    id.encode(&mut w);
    let blob = w.into_vec();
    let dhnc = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DHNC, &blob)]);
    let req = CreateRequest {
        contexts: &dhnc,
        ..Default::default()
    };
    send_create(h, "ignored", req).await
}

pub(super) fn has_context(o: &Open, tag: CreateContextTag<'_>) -> bool {
    parse_contexts(o.create().contexts)
        .unwrap()
        .iter()
        .any(|c| c.tag() == tag)
}

/// Moves `h` onto a new session `id` of user `user` with its own tree connect, as a client
/// that reconnected.
pub(super) async fn new_session(h: &mut H, id: u64, user: &str) {
    h.srv.session_table().insert(id);
    h.srv.session_started(id, h.conn.id);
    h.session = session(id);
    h.session.identity = Arc::new(Identity {
        user: user.into(),
        domain: "D".into(),
        is_guest: false,
        is_anonymous: false,
    });
    let r = h.tree_connect("\\\\srv\\data").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    h.tree = r.tree_id.unwrap();
}

#[tokio::test]
async fn a_lost_session_parks_the_open_and_its_user_reclaims_it() {
    let mut h = H::new().await;
    let o = durable_open(&h, "f").await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(o.create().oplock_level, OplockLevel::BATCH);
    assert!(has_context(&o, CreateContextTag::DHNQ), "durable granted");

    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);

    // Another user may not take it, and the attempt leaves it parked.
    new_session(&mut h, 0x12, "mallory").await;
    assert_eq!(reconnect(&h, o.id).await.status, NtStatus::ACCESS_DENIED);
    assert_eq!(h.srv.parked_opens(), 1);
    // An id that was never durable is not found.
    let wrong = FileId {
        persistent: o.id.persistent + 1,
        volatile: o.id.volatile + 1,
    };
    new_session(&mut h, 0x13, "alice").await;
    assert_eq!(
        reconnect(&h, wrong).await.status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );

    let back = reconnect(&h, o.id).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id, "the same handle");
    assert_eq!(back.create().oplock_level, OplockLevel::BATCH);
    assert_eq!(h.srv.parked_opens(), 0);
    assert_eq!(
        h.write(back.id, 0, b"still mine").await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"still mine");
    assert_eq!(h.srv.open_state().open_count_any(key_of(&h, "f")), 0);
}

pub(super) fn key_of(h: &H, name: &str) -> crate::file_state::FileKey {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(h.path(name)).unwrap();
    crate::file_state::FileKey {
        dev: m.dev(),
        ino: m.ino(),
        stream: 0,
    }
}

/// smbtorture smb2.durable-open.oplock: an open that needs the parked open's batch oplock
/// broken purges it, since its client cannot hear the break, and gets the file to itself.
#[tokio::test]
async fn a_conflicting_open_purges_a_parked_open() {
    let mut h = H::new().await;
    let o = durable_open(&h, "f").await;
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);
    new_session(&mut h, 0x12, "bob").await;
    let other = durable_open(&h, "f").await;
    assert_eq!(other.status, NtStatus::SUCCESS, "no sharing violation");
    assert_eq!(other.create().oplock_level, OplockLevel::BATCH);
    assert_eq!(h.srv.parked_opens(), 0);
    assert_eq!(
        reconnect(&h, o.id).await.status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
}

/// A parked open nobody reclaims is closed at its timeout, and nothing of it remains.
#[tokio::test]
async fn parked_opens_time_out_and_leave_nothing() {
    let h = H::with(|c| c.limits.durable_timeout_secs = 1).await;
    let o = durable_open(&h, "f").await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let key = key_of(&h, "f");
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);
    assert_eq!(
        h.srv.open_state().open_count_any(key),
        1,
        "the share mode stays"
    );
    for _ in 0..50 {
        if h.srv.parked_opens() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(h.srv.parked_opens(), 0);
    assert_eq!(h.srv.open_state().open_count_any(key), 0);
    assert!(h.srv.lookup_open(o.id.volatile).is_none());
}

/// The store is bounded per user: past the limit a lost session's durable opens close.
#[tokio::test]
async fn the_store_is_bounded() {
    let h = H::with(|c| c.limits.max_durable_opens_per_user = 2).await;
    for name in ["a", "b", "c", "d"] {
        assert_eq!(durable_open(&h, name).await.status, NtStatus::SUCCESS);
    }
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 2);
    let open_files = ["a", "b", "c", "d"]
        .iter()
        .filter(|n| h.srv.open_state().open_count_any(key_of(&h, n)) > 0)
        .count();
    assert_eq!(open_files, 2, "the others were closed");
}

/// Without a batch oplock (or an H lease) no durable handle is granted, and a lost session
/// closes the open.
#[tokio::test]
async fn no_durable_handle_without_handle_caching() {
    let h = H::new().await;
    assert_eq!(durable_open(&h, "f").await.status, NtStatus::SUCCESS);
    // An open asking for no oplock asks for a durable handle too: none is granted.
    let dhnq = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DHNQ, &[0; 16])]);
    let o = h
        .create_req("g", DATA, D::OPEN_IF)
        .share(share::ALL)
        .contexts(&dhnq)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(!has_context(&o, CreateContextTag::DHNQ));
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1, "only the batch open");
    assert_eq!(h.srv.open_state().open_count_any(key_of(&h, "g")), 0);
}

/// A durable v2 CREATE asking for `level`, sent with the replay flag when `replay`.
async fn dh2q_open(h: &H, name: &str, guid: [u8; 16], level: OplockLevel, replay: bool) -> Open {
    let dh2q = smbq_wire::create_context::Dh2qRequest {
        timeout: 0,
        flags: 0,
        create_guid: guid,
    }
    .to_bytes();
    let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::DH2Q, &dh2q)]);
    let n = utf16le_encode(name);
    let m = msg(Command::CREATE, h.tree, h.session.id, |w| {
        CreateRequest {
            requested_oplock_level: level,
            desired_access: DATA,
            share_access: 0,
            create_disposition: D::OPEN_IF,
            name: &n,
            contexts: &list,
            ..Default::default()
        }
        .encode(w)
    });
    let m = if replay {
        // Header.Flags is at offset 16.
        let mut v = m.to_vec();
        let f = u32::from_le_bytes(v[16..20].try_into().unwrap())
            | smbq_wire::header::flags::REPLAY_OPERATION;
        v[16..20].copy_from_slice(&f.to_le_bytes());
        bytes::Bytes::from(v)
    } else {
        m
    };
    let r = h.send(m).await;
    Open {
        status: r.status,
        id: r.file_id.unwrap_or_default(),
        resp: Some(r),
    }
}

/// MS-SMB2 3.3.5.9.10 (smbtorture smb2.replay.replay-dhv2-oplock1/2): a replayed durable v2
/// CREATE is answered from the open it made, without opening again; one asking for less is
/// answered with less, and the open keeps its oplock.
#[tokio::test]
async fn a_replayed_create_gets_its_first_answer() {
    let h = H::new().await;
    let guid = [9; 16];
    let first = dh2q_open(&h, "f", guid, OplockLevel::BATCH, false).await;
    assert_eq!(first.status, NtStatus::SUCCESS);
    assert!(has_context(&first, CreateContextTag::DH2Q));

    let again = dh2q_open(&h, "f", guid, OplockLevel::BATCH, true).await;
    assert_eq!(
        again.status,
        NtStatus::SUCCESS,
        "no sharing violation with itself"
    );
    assert_eq!(again.id, first.id);
    assert_eq!(again.create().create_action, first.create().create_action);
    assert!(has_context(&again, CreateContextTag::DH2Q));

    let less = dh2q_open(&h, "f", guid, OplockLevel::NONE, true).await;
    assert_eq!(less.id, first.id);
    assert_eq!(less.create().oplock_level, OplockLevel::NONE);
    assert!(!has_context(&less, CreateContextTag::DH2Q));

    // Without the flag, while the answer may still be replayed, the same CreateGuid is
    // refused as a duplicate (smbtorture smb2.replay.replay6)...
    let dup = dh2q_open(&h, "f", guid, OplockLevel::BATCH, false).await;
    assert_eq!(dup.status, NtStatus::DUPLICATE_OBJECTID);
    // ...and once the client used the handle (it has the answer), it is a new open, which
    // the first one's share mode refuses; a replay no longer finds the first one either.
    assert_eq!(h.write(first.id, 0, b"x").await.status, NtStatus::SUCCESS);
    let fresh = dh2q_open(&h, "f", guid, OplockLevel::BATCH, false).await;
    assert_eq!(fresh.status, NtStatus::SHARING_VIOLATION);
    let late = dh2q_open(&h, "f", guid, OplockLevel::BATCH, true).await;
    assert_eq!(late.status, NtStatus::SHARING_VIOLATION);
    // The first open is still the only one, and still durable.
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);
}

/// A durable open whose break is under way when its connection goes can never acknowledge
/// it: it is closed rather than kept, and the open waiting for the break goes on at once
/// instead of after the 35 s timeout (the case of a killed QUIC client, issue 10).
#[tokio::test]
async fn an_open_lost_while_being_broken_is_closed_not_kept() {
    let mut h = H::new().await;
    let first = h.session.id;
    assert_eq!(durable_open(&h, "f").await.status, NtStatus::SUCCESS);
    // The first session's channel is alive: the break reaches it, and nobody answers.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    h.srv.register_connection(h.conn.id, tx);
    new_session(&mut h, 0x12, "alice").await;
    let start = std::time::Instant::now();
    let (second, ()) = tokio::join!(durable_open(&h, "f"), async {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(rx.try_recv().is_ok(), "the break was sent");
        h.srv.session_lost(first);
    });
    assert_eq!(second.status, NtStatus::SUCCESS);
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(h.srv.parked_opens(), 0, "not kept");
}

/// Thousands of durable opens from one client: the store keeps what the per-user limit allows
/// and closes the rest at once; at the timeout everything goes, and no table keeps anything.
#[tokio::test]
async fn thousands_of_durable_opens_leave_nothing_behind() {
    let h = H::with(|c| {
        c.limits.max_durable_opens_per_user = 1000;
        c.limits.durable_timeout_secs = 1;
    })
    .await;
    for i in 0..2000 {
        let o = durable_open(&h, &format!("f{i}")).await;
        assert_eq!(o.status, NtStatus::SUCCESS, "open {i}");
    }
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1000);
    for _ in 0..100 {
        if h.srv.parked_opens() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(h.srv.parked_opens(), 0);
    let held = (0..2000)
        .filter(|i| {
            h.srv
                .open_state()
                .open_count_any(key_of(&h, &format!("f{i}")))
                > 0
        })
        .count();
    assert_eq!(held, 0, "every share mode released");
    assert_eq!(h.srv.open_slots_in_use(), 0, "every open id freed");
}

/// FSCTL_LMR_REQUEST_RESILIENCY on `id` with `input` as its buffer.
async fn request_resiliency(h: &H, id: FileId, input: &[u8]) -> NtStatus {
    use smbq_wire::ioctl::{CtlCode, IoctlRequest, flags};
    let m = msg(Command::IOCTL, h.tree, h.session.id, |w| {
        IoctlRequest {
            ctl_code: CtlCode::LMR_REQUEST_RESILIENCY,
            file_id: id,
            flags: flags::IS_FSCTL,
            input,
            ..Default::default()
        }
        .encode(w)
    });
    h.send(m).await.status
}

/// MS-SMB2 3.3.5.15.9 and 3.3.7.1: a resilient open needs no oplock to be kept; a
/// conflicting open meanwhile finds its share mode (it is not purged), the same user takes it
/// back with DHnC, and at its timeout it goes with nothing left behind. Bad requests get
/// STATUS_INVALID_PARAMETER.
#[tokio::test]
async fn a_resilient_open_is_kept_without_an_oplock_and_not_purged() {
    let mut h = H::with(|c| c.limits.max_durable_timeout_secs = 60).await;
    let req = CreateRequest {
        desired_access: DATA,
        share_access: 0,
        create_disposition: D::OPEN_IF,
        ..Default::default()
    };
    let o = send_create(&h, "r", req.clone()).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(o.create().oplock_level, OplockLevel::NONE);
    assert_eq!(
        request_resiliency(&h, o.id, &[0; 4]).await,
        NtStatus::INVALID_PARAMETER,
        "input shorter than NETWORK_RESILIENCY_REQUEST"
    );
    let too_long = 61_000u32.to_le_bytes();
    assert_eq!(
        request_resiliency(&h, o.id, &[&too_long[..], &[0; 4]].concat()).await,
        NtStatus::INVALID_PARAMETER,
        "past the maximum: refused, not clamped"
    );
    let one_second = 1000u32.to_le_bytes();
    let input = [&one_second[..], &[0; 4]].concat();
    assert_eq!(
        request_resiliency(&h, o.id, &input).await,
        NtStatus::SUCCESS
    );

    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1, "kept without an oplock");
    new_session(&mut h, 0x12, "bob").await;
    let other = send_create(&h, "r", req.clone()).await;
    assert_eq!(
        other.status,
        NtStatus::SHARING_VIOLATION,
        "its share mode holds"
    );
    assert_eq!(h.srv.parked_opens(), 1, "not purged");

    new_session(&mut h, 0x13, "alice").await;
    let back = reconnect(&h, o.id).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id);
    assert_eq!(h.write(back.id, 0, b"kept").await.status, NtStatus::SUCCESS);

    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);
    for _ in 0..60 {
        if h.srv.parked_opens() == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(h.srv.parked_opens(), 0, "gone at its one-second timeout");
    assert_eq!(h.srv.open_state().open_count_any(key_of(&h, "r")), 0);
    assert_eq!(h.srv.open_slots_in_use(), 0);
    assert_eq!(std::fs::read(h.path("r")).unwrap(), b"kept");
}

/// A durable v2 CREATE (CreateGuid `guid`) under an RWH V2 lease with key `key`, or its
/// reconnect (DH2C naming `id`) when `id` is given.
async fn leased_v2(h: &H, guid: [u8; 16], key: [u8; 16], id: Option<FileId>) -> Open {
    leased_v2_at(h, "leased", (guid, key), id, false).await
}

/// A durable v2 open of `name` under an RWH lease (`ids`: CreateGuid and lease key), or its
/// DH2C reconnect when `id` is given; `posix` adds the POSIX create context (crate::posix).
pub(super) async fn leased_v2_at(
    h: &H,
    name: &str,
    (guid, key): ([u8; 16], [u8; 16]),
    id: Option<FileId>,
    posix: bool,
) -> Open {
    use smbq_wire::create_context::{Dh2cRequest, Dh2qRequest, Lease, LeaseV2, lease_state};
    let lease = Lease {
        key,
        state: lease_state::READ_CACHING | lease_state::WRITE_CACHING | lease_state::HANDLE_CACHING,
        v2: Some(LeaseV2::default()),
        ..Default::default()
    }
    .to_bytes();
    let (tag, durable) = match id {
        Some(file_id) => (
            CreateContextTag::DH2C,
            Dh2cRequest {
                file_id,
                create_guid: guid,
                flags: 0,
            }
            .to_bytes(),
        ),
        None => (
            CreateContextTag::DH2Q,
            Dh2qRequest {
                timeout: 0,
                flags: 0,
                create_guid: guid,
            }
            .to_bytes(),
        ),
    };
    let mut list = vec![
        CreateContext::new(tag, &durable),
        CreateContext::new(CreateContextTag::RQLS, &lease),
    ];
    if posix {
        list.push(CreateContext::new(CreateContextTag::POSIX, &[0; 4]));
    }
    let list = contexts_to_bytes(&list);
    let req = CreateRequest {
        requested_oplock_level: OplockLevel::LEASE,
        desired_access: DATA,
        share_access: 0,
        create_disposition: D::OPEN_IF,
        contexts: &list,
        ..Default::default()
    };
    send_create(h, name, req).await
}

/// MS-SMB2 3.3.5.9.12: a reconnect naming the open with another CreateGuid, or coming from a
/// client with another ClientGuid (the lease is that client's), is OBJECT_NAME_NOT_FOUND and
/// leaves the open parked for its own client, which then takes it back.
#[tokio::test]
async fn reconnects_with_the_wrong_guids_are_not_found() {
    let mut h = H::new().await;
    let (guid, key) = ([0x61; 16], [0x62; 16]);
    let o = leased_v2(&h, guid, key, None).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(o.create().oplock_level, OplockLevel::LEASE);
    assert!(
        has_context(&o, CreateContextTag::DH2Q),
        "durable under an H lease"
    );
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);

    new_session(&mut h, 0x12, "alice").await;
    let wrong_guid = leased_v2(&h, [0x63; 16], key, Some(o.id)).await;
    assert_eq!(wrong_guid.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    let first_client = h.conn.client_guid;
    h.conn.client_guid = [0x64; 16];
    let other_client = leased_v2(&h, guid, key, Some(o.id)).await;
    assert_eq!(other_client.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    assert_eq!(h.srv.parked_opens(), 1, "still kept for its client");

    h.conn.client_guid = first_client;
    let back = leased_v2(&h, guid, key, Some(o.id)).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id);
    assert_eq!(back.create().oplock_level, OplockLevel::LEASE);
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.parked_opens(), 0);
    assert_eq!(h.srv.open_state().open_count_any(key_of(&h, "leased")), 0);
    assert_eq!(h.srv.open_slots_in_use(), 0);
}

/// MS-SMB2 3.3.5.15.9: no resiliency on 2.0.2 (INVALID_DEVICE_REQUEST) nor for a guest, who
/// could never prove to be the open's owner when reclaiming it (NOT_SUPPORTED).
#[tokio::test]
async fn resiliency_is_refused_on_2_0_2_and_to_guests() {
    let mut h = H::new().await;
    let req = CreateRequest {
        desired_access: DATA,
        create_disposition: D::OPEN_IF,
        ..Default::default()
    };
    let o = send_create(&h, "g", req).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let input = [0u8; 8];
    h.conn.dialect = smbq_wire::Dialect::SMB2_0_2;
    assert_eq!(
        request_resiliency(&h, o.id, &input).await,
        NtStatus::INVALID_DEVICE_REQUEST
    );
    h.conn.dialect = smbq_wire::Dialect::SMB3_1_1;
    h.session.identity = Arc::new(Identity {
        user: "guest".into(),
        domain: "D".into(),
        is_guest: true,
        is_anonymous: false,
    });
    assert_eq!(
        request_resiliency(&h, o.id, &input).await,
        NtStatus::NOT_SUPPORTED
    );
    assert!(has_no_durable_grant(&h, o.id));
}

fn has_no_durable_grant(h: &H, id: FileId) -> bool {
    h.srv
        .lookup_open(id.volatile)
        .is_some_and(|o| o.durable.lock().is_none())
}

/// A client reconnects the moment its old connection closed, before the server's teardown
/// of that connection has parked the open (smbtorture durable-open.reopen2-lease under
/// load): the reconnect waits for the parking instead of answering NOT_FOUND. An open whose
/// connection stays alive is still NOT_FOUND, after the short wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_waits_for_the_old_connection_to_be_torn_down() {
    let mut h = H::new().await;
    let o = durable_open(&h, "f").await;
    assert!(has_context(&o, CreateContextTag::DHNQ), "durable granted");
    let old_session = h.session.id;

    // Still installed, and it stays so: NOT_FOUND after the wait.
    new_session(&mut h, 0x21, "alice").await;
    let started = std::time::Instant::now();
    assert_eq!(
        reconnect(&h, o.id).await.status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));

    // Torn down 100 ms after the reconnect arrived: reclaimed.
    let srv = h.srv.clone();
    let teardown = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        srv.session_lost(old_session);
    });
    let back = reconnect(&h, o.id).await;
    teardown.await.unwrap();
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id);
    assert_eq!(h.srv.parked_opens(), 0);
}
