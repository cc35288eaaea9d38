//! The SMB1 multi-protocol NEGOTIATE a client may open with (MS-SMB2 3.3.5.3.1).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_proto::Violation;
use smbq_wire::negotiate::NegotiateResponse;
use smbq_wire::smb1_negotiate::Smb1NegotiateRequest;
use smbq_wire::{Command, Dialect, NtStatus, Writer};

fn smb1_negotiate(dialects: &[&[u8]]) -> Vec<u8> {
    let mut w = Writer::new();
    Smb1NegotiateRequest {
        dialects: dialects.to_vec(),
    }
    .encode(&mut w);
    frame(w.as_slice())
}

const WINDOWS_LIKE: [&[u8]; 3] = [b"NT LM 0.12", b"SMB 2.002", b"SMB 2.???"];

#[test]
fn wildcard_answer_is_an_smb2_negotiate_response() {
    let mut server = Server::new(config());
    let (frames, actions) = server
        .exchange_engine_only(&smb1_negotiate(&WINDOWS_LIKE))
        .unwrap();
    assert!(actions.is_empty());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    let resp = client.receive(&single(frames));
    let m = resp.one();
    assert_eq!(m.header.command, Command::NEGOTIATE);
    assert_eq!(m.status(), NtStatus::SUCCESS);
    assert_eq!(m.header.message_id, 0);
    assert_eq!(m.header.credits, 1);
    assert_eq!(m.header.session_id, 0);
    let r = NegotiateResponse::decode(&m.bytes).unwrap();
    assert_eq!(r.dialect, Dialect::WILDCARD);
    assert!(r.contexts.is_empty());
    assert_eq!(r.server_guid, SERVER_GUID);
    assert_eq!(r.system_time, NOW);
    assert!(server.engine.conn_view().is_none(), "not negotiated yet");
}

/// MS-SMB2 3.3.5.3.1: after the 0x02FF answer the client sends an SMB2 NEGOTIATE with
/// MessageId 1, using the one credit the response granted.
#[test]
fn smb2_negotiate_after_wildcard_uses_message_id_1() {
    let mut server = Server::new(config());
    server
        .exchange_engine_only(&smb1_negotiate(&WINDOWS_LIKE))
        .unwrap();
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.next_mid = 1;
    let req = client.negotiate_request();
    let frames = server.exchange_engine_only(&frame(&req));
    let (frames, _) = frames.expect("MessageId 1 must be accepted after the SMB1 negotiate");
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().header.message_id, 1);
    let n = client.on_negotiate_response(&req, resp.one());
    assert_eq!(n.dialect, Dialect::SMB3_1_1);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert!(client.verifies(&setup.last));
}

#[test]
fn only_smb2_002_negotiates_202_directly() {
    let mut server = Server::new(config());
    let (frames, _) = server
        .exchange_engine_only(&smb1_negotiate(&[b"NT LM 0.12", b"SMB 2.002"]))
        .unwrap();
    let mut client = Client::new(Offer::legacy(Dialect::SMB2_0_2));
    let resp = client.receive(&single(frames));
    let m = resp.one();
    assert_eq!(m.status(), NtStatus::SUCCESS);
    assert_eq!(m.header.message_id, 0);
    assert_eq!(m.header.credits, 1);
    let r = NegotiateResponse::decode(&m.bytes).unwrap();
    assert_eq!(r.dialect, Dialect::SMB2_0_2);
    assert!(r.max_read_size <= 65536, "2.0.2 sizes are capped at 64 KiB");
    let view = server.engine.conn_view().expect("negotiated");
    assert_eq!(view.dialect, Dialect::SMB2_0_2);

    // The connection is negotiated: a second (SMB2) NEGOTIATE is a violation.
    let mut server2 = Server::new(config());
    server2
        .exchange_engine_only(&smb1_negotiate(&[b"SMB 2.002"]))
        .unwrap();
    let mut c2 = Client::new(Offer::legacy(Dialect::SMB2_0_2));
    c2.next_mid = 1;
    let req = c2.negotiate_request();
    let err = server2.feed(&frame(&req)).unwrap_err();
    assert_eq!(err, Violation::Renegotiate);
}

/// After a direct 2.0.2 answer, SESSION_SETUP comes with MessageId 1.
#[test]
fn session_setup_after_direct_202_uses_message_id_1() {
    let mut server = Server::new(config());
    let (frames, _) = server
        .exchange_engine_only(&smb1_negotiate(&[b"SMB 2.002"]))
        .unwrap();
    let mut client = Client::new(Offer::legacy(Dialect::SMB2_0_2));
    client.next_mid = 0;
    let fake_req = client.negotiate_request();
    let resp = client.receive(&single(frames));
    client.on_negotiate_response(&fake_req, resp.one());
    assert_eq!(client.next_mid, 1);
    let setup = client.session_setup(&mut server, USER, PASSWORD);
    assert_eq!(setup.status, NtStatus::SUCCESS);
    assert!(client.verifies(&setup.last));
}

#[test]
fn smb1_without_smb2_dialects_is_refused() {
    let mut server = Server::new(config());
    let err = server
        .feed(&smb1_negotiate(&[b"NT LM 0.12", b"LANMAN2.1"]))
        .unwrap_err();
    assert_eq!(err, Violation::NoCommonDialect);
}

#[test]
fn smb1_negotiate_twice_or_after_smb2_is_refused() {
    let mut server = Server::new(config());
    server
        .exchange_engine_only(&smb1_negotiate(&WINDOWS_LIKE))
        .unwrap();
    let err = server.feed(&smb1_negotiate(&WINDOWS_LIKE)).unwrap_err();
    assert_eq!(err, Violation::Renegotiate);

    let mut server = Server::new(config());
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.negotiate(&mut server);
    let err = server.feed(&smb1_negotiate(&WINDOWS_LIKE)).unwrap_err();
    assert_eq!(err, Violation::Renegotiate);
}
