//! CANCEL bookkeeping (MS-SMB2 3.3.5.16) and interim/async responses (MS-SMB2 3.3.4.2).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::Cipher;
use smbq_proto::engine::{Action, INTERIM_AFTER};
use smbq_proto::{Request, Response};
use smbq_wire::change_notify::ChangeNotifyRequest;
use smbq_wire::header::flags;
use smbq_wire::{Command, FileId, Header, NtStatus, Writer};

fn logged_in() -> (Server, Client) {
    logged_in_with(Cipher::Aes256Gcm, 3)
}

fn change_notify(client: &mut Client, signed: bool) -> Vec<u8> {
    let h = client.header(Command::CHANGE_NOTIFY, 1);
    let mut w = Writer::new();
    h.encode(&mut w);
    ChangeNotifyRequest {
        output_buffer_length: 4096,
        file_id: FileId {
            persistent: 9,
            volatile: 9,
        },
        completion_filter: 0x17,
        ..Default::default()
    }
    .encode(&mut w);
    let mut m = w.into_vec();
    if signed {
        client.sign(&mut m);
    }
    m
}

/// A CANCEL for `message_id` (sync) or `async_id`: it consumes no credit and takes no id.
fn cancel(client: &Client, message_id: u64, async_id: Option<u64>, signed: bool) -> Vec<u8> {
    let h = Header {
        command: Command::CANCEL,
        message_id,
        async_id,
        session_id: client.session_id,
        tree_id: client.tree_id,
        ..Default::default()
    };
    let mut m = Client::message(&h, &[4, 0, 0, 0]);
    if signed {
        client.sign(&mut m);
    }
    m
}

/// Feeds a request the engine passes up and returns it.
fn pass_up(server: &mut Server, bytes: &[u8]) -> Request {
    let actions = server.feed(bytes).unwrap();
    let [Action::Execute(x)] = &actions[..] else {
        panic!("expected one request to run, got {actions:?}")
    };
    (*x.request).clone()
}

/// Lets the request run past the interim deadline and returns the interim response's frame.
fn go_async(server: &mut Server) -> Vec<u8> {
    server.advance(INTERIM_AFTER);
    single(server.sent())
}

#[test]
fn cancel_is_reported_and_never_answered() {
    let (mut server, mut client) = logged_in();
    let req = pass_up(&mut server, &frame(&change_notify(&mut client, true)));
    let mid = req.header.message_id;
    let credits_before = client.credits;

    let actions = server
        .feed(&frame(&cancel(&client, mid, None, true)))
        .unwrap();
    assert_eq!(
        actions.len(),
        1,
        "only the cancel, no response: {actions:?}"
    );
    match &actions[0] {
        Action::Cancel {
            message_id,
            async_id,
            session_id,
        } => {
            assert_eq!(*message_id, mid);
            assert_eq!(*async_id, None);
            assert_eq!(*session_id, client.session_id);
        }
        other => panic!("expected Cancel, got {other:?}"),
    }
    assert!(server.sent().is_empty(), "CANCEL itself is never answered");
    // CANCEL took no message id: the next id is still usable.
    assert_eq!(client.credits, credits_before);
    let echo = client.echo(true);
    let resp = client.receive(&single(
        server.exchange_engine_only(&frame(&echo)).unwrap().0,
    ));
    assert_eq!(resp.one().status(), NtStatus::SUCCESS);
    assert_eq!(resp.one().header.message_id, mid + 1);
}

#[test]
fn interim_then_final_async_response() {
    let (mut server, mut client) = logged_in();
    let req = pass_up(&mut server, &frame(&change_notify(&mut client, true)));
    let mid = req.header.message_id;

    let interim = client.receive(&go_async(&mut server));
    assert!(!interim.encrypted);
    let m = interim.one();
    let async_id = m.header.async_id.unwrap();
    assert_ne!(async_id, 0);
    assert_eq!(m.status(), NtStatus::PENDING);
    assert_eq!(m.header.command, Command::CHANGE_NOTIFY);
    assert_eq!(m.header.message_id, mid);
    assert_ne!(m.header.flags & flags::ASYNC_COMMAND, 0, "interim is async");
    assert_eq!(m.header.async_id, Some(async_id));
    assert_eq!(m.header.session_id, client.session_id);
    assert!(
        m.header.credits > 0,
        "the interim response grants the credits"
    );
    let credits_after_interim = client.credits;

    // A CANCEL naming the async id.
    let actions = server
        .feed(&frame(&cancel(&client, mid, Some(async_id), true)))
        .unwrap();
    assert!(
        matches!(
            &actions[..],
            [Action::Cancel { message_id, async_id: Some(a), .. }] if *message_id == mid && *a == async_id
        ),
        "{actions:?}"
    );

    // The final response carries the async id and grants nothing more.
    server.complete(mid, Response::error(NtStatus::CANCELLED));
    let last = client.receive(&single(server.sent()));
    let m = last.one();
    assert_eq!(m.status(), NtStatus::CANCELLED);
    assert_eq!(m.header.message_id, mid);
    assert_ne!(m.header.flags & flags::ASYNC_COMMAND, 0);
    assert_eq!(m.header.async_id, Some(async_id));
    assert_eq!(
        m.header.credits, 0,
        "final async response grants no credits"
    );
    assert_eq!(client.credits, credits_after_interim);
    assert!(
        client.verifies(m),
        "final response to a signed request is signed"
    );
}

#[test]
fn async_ids_are_distinct() {
    let (mut server, mut client) = logged_in();
    pass_up(&mut server, &frame(&change_notify(&mut client, false)));
    pass_up(&mut server, &frame(&change_notify(&mut client, false)));
    server.advance(INTERIM_AFTER);
    let ids: Vec<u64> = server
        .sent()
        .iter()
        .map(|f| client.receive(f).one().header.async_id.unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "both went async");
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn encrypted_request_gets_sealed_interim_and_final() {
    let (mut server, mut client) = logged_in();
    let m = change_notify(&mut client, false);
    let sealed = client.seal(&m);
    let req = pass_up(&mut server, &sealed);
    assert!(req.encrypted);
    let interim = client.receive(&go_async(&mut server));
    assert!(interim.encrypted);
    assert_eq!(interim.one().status(), NtStatus::PENDING);
    let async_id = interim.one().header.async_id.unwrap();

    server.complete(
        req.header.message_id,
        Response::error(NtStatus::NOTIFY_ENUM_DIR),
    );
    let last = client.receive(&single(server.sent()));
    assert!(last.encrypted);
    assert_eq!(last.one().header.async_id, Some(async_id));
    assert_eq!(last.one().header.credits, 0);
}

/// Oplock/lease break notifications (MS-SMB2 3.3.4.6): MessageId all ones, no session, no
/// credits, never signed; sealed when the session encrypts.
#[test]
fn notifications_are_unsolicited_and_unsigned() {
    let (mut server, mut client) = logged_in();
    let body = [
        24u8, 0, 1, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0,
    ];
    server
        .engine
        .notification(client.session_id, Command::OPLOCK_BREAK, &body);
    let n = client.receive(&single(server.sent()));
    assert!(!n.encrypted);
    let m = n.one();
    assert_eq!(m.header.message_id, u64::MAX);
    assert_eq!(m.header.session_id, 0);
    assert_eq!(m.header.credits, 0);
    assert!(!m.header.is_signed());
    assert_eq!(m.body(), &body);

    let mut server = Server::new(config().encrypt(false, true));
    let mut client = Client::new(Offer::smb311(&[Cipher::Aes128Ccm], &[]));
    client.connect(&mut server);
    server
        .engine
        .notification(client.session_id, Command::OPLOCK_BREAK, &body);
    let n = client.receive(&single(server.sent()));
    assert!(n.encrypted);
    assert_eq!(n.one().header.message_id, u64::MAX);
}
