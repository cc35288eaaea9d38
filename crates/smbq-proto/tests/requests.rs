//! The engine's request rules, run on simulated time without sockets: compound chaining
//! (MS-SMB2 3.3.5.2.7.2), interim responses (3.3.4.2, 3.3.4.1.3), CANCEL (3.3.5.16), the credit
//! window under a flood (3.3.1.2) and stream routing.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::*;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_proto::engine::{Action, Execute, INTERIM_AFTER, StreamId};
use smbq_proto::{Response, Violation};
use smbq_wire::header::flags;
use smbq_wire::{Command, FileId, Header, NtStatus};

const FID: FileId = FileId {
    persistent: 0x77,
    volatile: 0x88,
};

fn logged_in() -> (Server, Client) {
    logged_in_with(Cipher::Aes128Gcm, 5)
}

/// A request with a body the engine does not look into (32 zero bytes: no payload charge).
fn request(client: &mut Client, command: Command, related: bool) -> Vec<u8> {
    let mut h: Header = client.header(command, 1);
    if related {
        h.flags |= flags::RELATED_OPERATIONS;
    }
    Client::message(&h, &[0u8; 32])
}

fn compound(client: &mut Client, parts: &[(Command, bool)]) -> Vec<u8> {
    let msgs = parts
        .iter()
        .map(|(c, related)| (request(client, *c, *related), false))
        .collect();
    frame(&client.compound(msgs))
}

/// The one request the actions hand to the server.
fn one_execute(actions: Vec<Action>) -> Execute {
    let mut xs: Vec<Execute> = actions
        .into_iter()
        .filter_map(|a| match a {
            Action::Execute(x) => Some(x),
            _ => None,
        })
        .collect();
    assert_eq!(xs.len(), 1, "expected one request to run");
    xs.pop().unwrap()
}

fn created() -> Response {
    Response {
        file_id: Some(FID),
        ..Response::ok(vec![0; 8])
    }
}

fn statuses(client: &mut Client, frame: &[u8]) -> Vec<(Command, NtStatus)> {
    client
        .receive(frame)
        .msgs
        .iter()
        .map(|m| (m.header.command, m.status()))
        .collect()
}

#[test]
fn related_requests_run_one_at_a_time_with_the_created_file_id() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::CREATE, false),
            (Command::READ, true),
            (Command::CLOSE, true),
        ],
    );
    let x = one_execute(server.feed(&wire).unwrap());
    assert_eq!(x.request.command(), Command::CREATE);
    assert_eq!(
        x.chain_charges,
        Some(vec![(first, 1), (first + 1, 1), (first + 2, 1)]),
        "the first request of a chain announces the chain's charge"
    );
    assert!(
        server.sent().is_empty(),
        "nothing goes out before the chain is done"
    );

    server.complete(first, created());
    let x = one_execute(server.actions());
    assert_eq!(x.request.command(), Command::READ);
    assert_eq!(x.chain_charges, None);
    assert_eq!(x.request.resolve_file_id(FileId::RELATED), FID);

    server.complete(first + 1, Response::ok(vec![0; 16]));
    let x = one_execute(server.actions());
    assert_eq!(x.request.resolve_file_id(FileId::RELATED), FID);
    server.complete(first + 2, Response::ok(vec![0; 60]));

    let actions = server.actions();
    assert!(
        matches!(&actions[..], [Action::Answered { message_ids, chain_done: true, .. }]
            if *message_ids == vec![first, first + 1, first + 2]),
        "{actions:?}"
    );
    let frame = single(server.sent());
    assert_eq!(
        statuses(&mut client, &frame),
        [
            (Command::CREATE, NtStatus::SUCCESS),
            (Command::READ, NtStatus::SUCCESS),
            (Command::CLOSE, NtStatus::SUCCESS)
        ]
    );
    assert!(server.engine.is_idle());
}

/// MS-SMB2 3.3.5.2.7.2: a failed CREATE fails the related requests after it with its status,
/// without running them; an unrelated request starts afresh.
#[test]
fn a_failed_create_fails_its_related_followers_only() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::CREATE, false),
            (Command::READ, true),
            (Command::CLOSE, true),
            (Command::ECHO, false),
            (Command::CREATE, false),
            (Command::CLOSE, true),
        ],
    );
    let x = one_execute(server.feed(&wire).unwrap());
    assert_eq!(x.request.header.message_id, first);
    server.complete(first, Response::error(NtStatus::OBJECT_NAME_NOT_FOUND));
    // READ and CLOSE are skipped, ECHO is the engine's, the second CREATE runs.
    let x = one_execute(server.actions());
    assert_eq!(x.request.header.message_id, first + 4);
    assert_eq!(
        x.request.related_file_id, None,
        "a new segment carries nothing over"
    );
    server.complete(first + 4, created());
    let x = one_execute(server.actions());
    assert_eq!(x.request.resolve_file_id(FileId::RELATED), FID);
    server.complete(first + 5, Response::ok(vec![0; 60]));
    server.actions();
    let frame = single(server.sent());
    assert_eq!(
        statuses(&mut client, &frame),
        [
            (Command::CREATE, NtStatus::OBJECT_NAME_NOT_FOUND),
            (Command::READ, NtStatus::OBJECT_NAME_NOT_FOUND),
            (Command::CLOSE, NtStatus::OBJECT_NAME_NOT_FOUND),
            (Command::ECHO, NtStatus::SUCCESS),
            (Command::CREATE, NtStatus::SUCCESS),
            (Command::CLOSE, NtStatus::SUCCESS),
        ]
    );
}

/// STOPPED_ON_SYMLINK is a warning, not an error, but the CREATE made no open: the related
/// requests after it fail with it too (a Linux client's CREATE + QUERY_INFO + CLOSE of a
/// symlink; Samba's compound_create_err).
#[test]
fn a_create_stopped_on_a_symlink_fails_its_related_followers() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::CREATE, false),
            (Command::QUERY_INFO, true),
            (Command::CLOSE, true),
        ],
    );
    let x = one_execute(server.feed(&wire).unwrap());
    assert_eq!(x.request.header.message_id, first);
    server.complete(first, Response::error(NtStatus::STOPPED_ON_SYMLINK));
    server.actions();
    let frame = single(server.sent());
    assert_eq!(
        statuses(&mut client, &frame),
        [
            (Command::CREATE, NtStatus::STOPPED_ON_SYMLINK),
            (Command::QUERY_INFO, NtStatus::STOPPED_ON_SYMLINK),
            (Command::CLOSE, NtStatus::STOPPED_ON_SYMLINK),
        ]
    );
}

#[test]
fn a_lone_request_goes_async_at_the_interim_deadline_not_before() {
    let (mut server, mut client) = logged_in();
    let mid = client.next_mid;
    let wire = frame(&request(&mut client, Command::CHANGE_NOTIFY, false));
    server.feed(&wire).unwrap();
    assert_eq!(
        server.engine.poll_timeout(),
        Some(server.clock + INTERIM_AFTER)
    );

    server.advance(INTERIM_AFTER - Duration::from_millis(1));
    assert!(server.sent().is_empty(), "no interim before the deadline");
    server.advance(Duration::from_millis(1));
    let interim = client.receive(&single(server.sent()));
    let m = interim.one();
    assert_eq!(m.status(), NtStatus::PENDING);
    assert_eq!(m.header.message_id, mid);
    let async_id = m.header.async_id.unwrap();
    assert!(m.header.credits > 0, "the interim grants the credits");
    assert_eq!(
        server.engine.poll_timeout(),
        None,
        "one interim per request"
    );

    server.advance(Duration::from_secs(60));
    assert!(server.sent().is_empty());
    server.complete(mid, Response::error(NtStatus::NOTIFY_ENUM_DIR));
    let last = client.receive(&single(server.sent()));
    assert_eq!(last.one().header.async_id, Some(async_id));
    assert_eq!(
        last.one().header.credits,
        0,
        "the final async response grants none"
    );
}

/// A request that finishes before the deadline never gets an interim, however late the timer
/// fires.
#[test]
fn a_quick_request_gets_no_interim() {
    let (mut server, mut client) = logged_in();
    let mid = client.next_mid;
    server
        .feed(&frame(&request(&mut client, Command::CREATE, false)))
        .unwrap();
    server.advance(INTERIM_AFTER / 2);
    server.complete(mid, created());
    server.advance(INTERIM_AFTER);
    let sent = server.sent();
    assert_eq!(sent.len(), 1);
    assert_eq!(client.receive(&sent[0]).one().header.async_id, None);
}

/// Inside a compound nothing goes async, except as below.
#[test]
fn requests_inside_a_compound_wait_without_interim() {
    let (mut server, mut client) = logged_in();
    let wire = compound(
        &mut client,
        &[(Command::QUERY_INFO, false), (Command::CLOSE, false)],
    );
    server.feed(&wire).unwrap();
    assert_eq!(server.engine.poll_timeout(), None);
    server.advance(Duration::from_secs(5));
    assert!(server.sent().is_empty());
}

/// smbtorture smb2.compound_async.rename_non_compound_no_async (Windows Server 2022): a
/// SET_INFO never goes async, even alone, however long it waits for a lease break.
#[test]
fn a_set_info_gets_no_interim_even_alone() {
    let (mut server, mut client) = logged_in();
    let wire = frame(&request(&mut client, Command::SET_INFO, false));
    server.feed(&wire).unwrap();
    assert_eq!(server.engine.poll_timeout(), None);
    server.advance(Duration::from_secs(5));
    assert!(server.sent().is_empty());
}

/// smbtorture smb2.compound_async.getinfo_middle (Windows Server 2022): a CREATE that runs
/// long at the head of a compound goes async alone; the requests after it run when it is
/// done, and their answers follow its final one.
#[test]
fn a_create_at_the_head_of_a_compound_goes_async_and_the_rest_follow() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::CREATE, false),
            (Command::QUERY_INFO, true),
            (Command::CLOSE, true),
        ],
    );
    let create = one_execute(server.feed(&wire).unwrap());
    assert_eq!(create.request.header.command, Command::CREATE);
    server.advance(INTERIM_AFTER);
    assert!(
        server.actions().is_empty(),
        "nothing before the CREATE to answer"
    );
    let interim = client.receive(&single(server.sent()));
    assert_eq!(interim.one().status(), NtStatus::PENDING);
    assert_eq!(interim.one().header.message_id, first);

    server.complete(first, created());
    let after = server.actions();
    let rest = server.run_all(after, &mut |_| Response::ok(vec![0; 8]));
    assert!(
        matches!(&rest[..], [Action::Answered { message_ids, chain_done: true, .. }]
            if *message_ids == vec![first, first + 1, first + 2]),
        "{rest:?}"
    );
    let sent = server.sent();
    let all: Vec<_> = sent.iter().flat_map(|f| statuses(&mut client, f)).collect();
    assert_eq!(
        all,
        [
            (Command::CREATE, NtStatus::SUCCESS),
            (Command::QUERY_INFO, NtStatus::SUCCESS),
            (Command::CLOSE, NtStatus::SUCCESS),
        ]
    );
}

/// A CREATE that runs long in the middle of a compound: what came before it is answered
/// first, and only that; the requests after it are still owed and answered with it later.
#[test]
fn a_create_in_the_middle_of_a_compound_flushes_only_what_ran() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::QUERY_INFO, false),
            (Command::CREATE, false),
            (Command::CLOSE, true),
        ],
    );
    server.feed(&wire).unwrap();
    server.complete(first, Response::ok(vec![0; 8]));
    let create = one_execute(server.actions());
    assert_eq!(create.request.header.message_id, first + 1);
    server.advance(INTERIM_AFTER);
    let actions = server.actions();
    assert!(
        matches!(&actions[..], [Action::Answered { message_ids, chain_done: false, .. }]
            if *message_ids == vec![first]),
        "{actions:?}"
    );
    let sent = server.sent();
    assert_eq!(sent.len(), 2, "the QUERY_INFO's response, then the interim");
    assert_eq!(client.receive(&sent[1]).one().status(), NtStatus::PENDING);
    server.complete(first + 1, created());
    let after = server.actions();
    let rest = server.run_all(after, &mut |_| Response::ok(vec![0; 8]));
    assert!(
        matches!(&rest[..], [Action::Answered { message_ids, chain_done: true, .. }]
            if *message_ids == vec![first + 1, first + 2]),
        "{rest:?}"
    );
}

/// MS-SMB2 3.3.4.1.3 note (Windows; smbtorture smb2.compound.interim1): a CHANGE_NOTIFY that
/// ends a compound and runs long goes async alone; the responses before it go out first.
#[test]
fn a_notify_ending_a_compound_flushes_what_came_before_then_goes_async() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[(Command::CREATE, false), (Command::CHANGE_NOTIFY, true)],
    );
    server.feed(&wire).unwrap();
    server.complete(first, created());
    server.actions();
    server.advance(INTERIM_AFTER);
    let actions = server.actions();
    assert!(
        matches!(&actions[..], [Action::Answered { message_ids, chain_done: false, .. }]
            if *message_ids == vec![first]),
        "{actions:?}"
    );
    let sent = server.sent();
    assert_eq!(sent.len(), 2, "the CREATE's response, then the interim");
    assert_eq!(
        statuses(&mut client, &sent[0]),
        [(Command::CREATE, NtStatus::SUCCESS)]
    );
    let interim = client.receive(&sent[1]);
    assert_eq!(interim.one().status(), NtStatus::PENDING);
    assert_eq!(interim.one().header.message_id, first + 1);

    server.complete(first + 1, Response::error(NtStatus::CANCELLED));
    let actions = server.actions();
    assert!(
        matches!(&actions[..], [Action::Answered { message_ids, chain_done: true, .. }]
            if *message_ids == vec![first + 1]),
        "{actions:?}"
    );
    let last = client.receive(&single(server.sent()));
    assert_eq!(last.one().header.message_id, first + 1);
    assert!(last.one().header.async_id.is_some());
}

/// smbtorture smb2.compound.interim2: a CHANGE_NOTIFY in the middle of a compound cannot go
/// async; Windows fails it with STATUS_INTERNAL_ERROR and goes on with the chain.
#[test]
fn a_notify_inside_a_compound_fails_at_the_deadline() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::CREATE, false),
            (Command::CHANGE_NOTIFY, true),
            (Command::CLOSE, true),
        ],
    );
    server.feed(&wire).unwrap();
    server.complete(first, created());
    one_execute(server.actions());
    server.advance(INTERIM_AFTER);
    let actions = server.actions();
    assert!(
        matches!(&actions[0], Action::Cancel { message_id, .. } if *message_id == first + 1),
        "the server is told to stop the notify: {actions:?}"
    );
    let x = one_execute(actions);
    assert_eq!(x.request.command(), Command::CLOSE);
    // The notify's own late answer changes nothing.
    server.complete(first + 1, Response::error(NtStatus::CANCELLED));
    server.complete(first + 2, Response::ok(vec![0; 60]));
    server.actions();
    let frame = single(server.sent());
    assert_eq!(
        statuses(&mut client, &frame),
        [
            (Command::CREATE, NtStatus::SUCCESS),
            (Command::CHANGE_NOTIFY, NtStatus::INTERNAL_ERROR),
            (Command::CLOSE, NtStatus::SUCCESS),
        ]
    );
}

fn cancel(client: &Client, message_id: u64, async_id: Option<u64>) -> Vec<u8> {
    let h = Header {
        command: Command::CANCEL,
        message_id,
        async_id,
        flags: if async_id.is_some() {
            flags::ASYNC_COMMAND
        } else {
            0
        },
        session_id: client.session_id,
        tree_id: client.tree_id,
        ..Default::default()
    };
    let mut m = Client::message(&h, &[4, 0, 0, 0]);
    client.sign(&mut m);
    frame(&m)
}

#[test]
fn cancel_by_async_id_reaches_the_running_request() {
    let (mut server, mut client) = logged_in();
    let mid = client.next_mid;
    server
        .feed(&frame(&request(&mut client, Command::CHANGE_NOTIFY, false)))
        .unwrap();
    server.advance(INTERIM_AFTER);
    let async_id = client.receive(&single(server.sent())).one().header.async_id;
    let actions = server.feed(&cancel(&client, mid, async_id)).unwrap();
    assert!(
        matches!(&actions[..], [Action::Cancel { message_id, .. }] if *message_id == mid),
        "{actions:?}"
    );
    // An async id nobody holds names nothing.
    let actions = server.feed(&cancel(&client, 0, Some(0xDEAD))).unwrap();
    assert!(actions.is_empty(), "{actions:?}");
}

/// A CANCEL that arrives after its request finished (the race every client has) does nothing:
/// no action, no response.
#[test]
fn cancel_after_completion_is_ignored() {
    let (mut server, mut client) = logged_in();
    let mid = client.next_mid;
    server
        .feed(&frame(&request(&mut client, Command::CREATE, false)))
        .unwrap();
    server.complete(mid, created());
    server.actions();
    assert_eq!(server.sent().len(), 1);
    let actions = server.feed(&cancel(&client, mid, None)).unwrap();
    assert!(actions.is_empty(), "{actions:?}");
    assert!(server.sent().is_empty());
}

/// A CANCEL for a request still waiting behind another in its compound: it never runs and is
/// answered STATUS_CANCELLED in its place; the running one is left alone.
#[test]
fn cancel_of_a_waiting_request_in_a_chain() {
    let (mut server, mut client) = logged_in();
    let first = client.next_mid;
    let wire = compound(
        &mut client,
        &[
            (Command::CREATE, false),
            (Command::READ, true),
            (Command::CLOSE, true),
        ],
    );
    server.feed(&wire).unwrap();
    let actions = server.feed(&cancel(&client, first + 1, None)).unwrap();
    assert!(
        actions.is_empty(),
        "the running CREATE is not stopped: {actions:?}"
    );
    server.complete(first, created());
    let x = one_execute(server.actions());
    assert_eq!(x.request.command(), Command::CLOSE, "the READ never runs");
    server.complete(first + 2, Response::ok(vec![0; 60]));
    let actions = server.actions();
    assert!(
        matches!(&actions[..], [Action::Answered { message_ids, .. }] if message_ids.len() == 3),
        "the cancelled one is answered too: {actions:?}"
    );
    assert_eq!(
        statuses(&mut client, &single(server.sent())),
        [
            (Command::CREATE, NtStatus::SUCCESS),
            (Command::READ, NtStatus::CANCELLED),
            (Command::CLOSE, NtStatus::SUCCESS),
        ]
    );
}

/// A client that sends without reading its responses: while the shell holds the ceiling at 0
/// (its backlog is full) responses grant only the one credit a client with none must get
/// (MS-SMB2 3.3.1.2), so what it has in flight stays within its window, and a request beyond
/// the window costs it the connection (MS-SMB2 3.3.5.2.3).
#[test]
fn a_flood_is_stopped_by_the_credit_window() {
    let (mut server, mut client) = logged_in();
    server.engine.set_credit_ceiling(0);
    client.credit_request = 64;
    let window = client.credits;
    assert!(window > 0);
    let mut mids = Vec::new();
    for _ in 0..window {
        mids.push(client.next_mid);
        server
            .feed(&frame(&request(&mut client, Command::CREATE, false)))
            .unwrap();
    }
    assert_eq!(client.credits, 0, "the client spent its window");
    for mid in mids {
        server.complete(mid, created());
    }
    server.actions();
    let granted: u16 = server
        .sent()
        .iter()
        .map(|f| client.receive(f).one().header.credits)
        .sum();
    assert_eq!(granted, 1, "only the credit that keeps the client alive");
    // That one credit lets one request in; a second sent before its answer is over the window.
    server
        .feed(&frame(&request(&mut client, Command::CREATE, false)))
        .unwrap();
    let over = request(&mut client, Command::CREATE, false);
    let mid = Header::decode(&over).unwrap().message_id;
    assert_eq!(
        server.feed(&frame(&over)).unwrap_err(),
        Violation::BadMessageId(mid)
    );
}

/// Once the backlog drains, the next response replenishes the window again.
#[test]
fn credits_come_back_when_the_ceiling_lifts() {
    let (mut server, mut client) = logged_in();
    server.engine.set_credit_ceiling(0);
    let mid = client.next_mid;
    server
        .feed(&frame(&request(&mut client, Command::CREATE, false)))
        .unwrap();
    server.engine.set_credit_ceiling(u32::MAX);
    server.complete(mid, created());
    server.actions();
    let r = client.receive(&single(server.sent()));
    assert!(r.one().header.credits > 0);
}

/// Responses go back on the stream their request came on (interim and final alike);
/// unsolicited notifications go on the control stream.
#[test]
fn responses_follow_their_request_stream() {
    let mut server = Server::with_transport(config(), smbq_proto::engine::Transport::Quic);
    server.engine.set_data_stream_limit(4);
    let mut offer = Offer::smb311(&[Cipher::Aes128Gcm], &[SigningAlgorithm::AesGmac]);
    offer.data_streams = 2;
    let mut client = Client::new(offer);
    client.connect(&mut server);
    client.tree_id = 5;
    let data = StreamId(4);
    let a = client.next_mid;
    server
        .feed_on(data, &frame(&request(&mut client, Command::LOCK, false)))
        .unwrap();
    let b = client.next_mid;
    server
        .feed_on(data, &frame(&request(&mut client, Command::FLUSH, false)))
        .unwrap();
    server.advance(INTERIM_AFTER);
    server.complete(a, Response::error(NtStatus::CANCELLED));
    server.complete(b, Response::ok(vec![4, 0, 0, 0]));
    server
        .engine
        .notification(client.session_id, Command::OPLOCK_BREAK, &[0; 24]);
    let streams: Vec<StreamId> = server
        .sent_with_streams()
        .into_iter()
        .map(|(s, _)| s)
        .collect();
    // Two interims, two finals on the data stream; the break on the control stream.
    assert_eq!(streams, [data, data, data, data, StreamId::CONTROL]);
}

/// One session table for every connection (MS-SMB2 3.3.1.5): a session ended there, as the
/// server ends one a reconnect replaced (3.3.5.5.3), is gone for the engine that still holds
/// it, without a message to that connection.
#[test]
fn a_session_ended_in_the_shared_table_is_gone_for_its_connection() {
    let (mut server, mut client) = logged_in();
    let rec = server
        .table
        .get(client.session_id)
        .expect("setup made the record");
    assert!(!rec.has_ended());
    let mut other = Server::sharing(
        config(),
        smbq_proto::engine::Transport::Tcp,
        server.table.clone(),
    );
    let mut second = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesGmac]));
    second.connect(&mut other);
    assert_ne!(second.session_id, client.session_id);
    assert_eq!(
        server.table.len(),
        2,
        "both connections' sessions in one table"
    );

    server.table.end(client.session_id);
    assert!(rec.has_ended());
    let echo = client.echo(true);
    let (frames, _) = server.exchange_engine_only(&frame(&echo)).unwrap();
    assert_eq!(
        client.receive(&single(frames)).one().status(),
        NtStatus::USER_SESSION_DELETED
    );
    // The other connection's session is untouched.
    let echo = second.echo(true);
    let (frames, _) = other.exchange_engine_only(&frame(&echo)).unwrap();
    assert_eq!(
        second.receive(&single(frames)).one().status(),
        NtStatus::SUCCESS
    );
}

/// A first authentication that fails leaves nothing in the table; a connection's sessions
/// are the server's to end (it closes their opens first).
#[test]
fn a_failed_logon_leaves_no_record() {
    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[SigningAlgorithm::AesGmac]));
    client.negotiate(&mut server);
    let s = client.session_setup(&mut server, USER, "wrong password");
    assert_eq!(s.status, NtStatus::LOGON_FAILURE);
    assert!(server.table.is_empty());
}

/// A session that ends while one of its requests runs (a reconnect elsewhere, or a LOGOFF)
/// takes no new requests, but the response still owed goes out sealed as its request came,
/// never in the clear.
#[test]
fn responses_owed_by_an_ended_session_keep_their_keys() {
    let (mut server, mut client) = logged_in();
    let mid = client.next_mid;
    let create = request(&mut client, Command::CREATE, false);
    let sealed = client.seal(&create);
    server.feed(&sealed).unwrap();
    server.table.end(client.session_id);
    // Another frame on the connection: the session is gone for it.
    let echo = client.echo(true);
    let late = client.seal(&echo);
    server.feed(&late).unwrap();
    let answer = client.receive(&single(server.sent()));
    assert_eq!(answer.one().status(), NtStatus::USER_SESSION_DELETED);
    // The CREATE's response is still sealed with the session's key.
    server.complete(mid, created());
    server.actions();
    let r = client.receive(&single(server.sent()));
    assert!(r.encrypted, "an owed response is never sent in the clear");
    assert_eq!(r.one().status(), NtStatus::SUCCESS);
    // Once nothing is owed, the keys go.
    let echo = client.echo(true);
    let late = client.seal(&echo);
    assert_eq!(
        server.feed(&late).unwrap_err(),
        Violation::DecryptFailed,
        "nothing left to open it with"
    );
}
