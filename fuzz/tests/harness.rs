//! The harness reaches the states it claims to: without this, a fuzz target could silently
//! stop short (e.g. at a refused handshake) and still "pass".

use smbq_fuzz::driver::{Driver, FIRST_SESSION_ID, MID_AFTER_NEGOTIATE, MID_AFTER_SESSION};
use smbq_fuzz::{chunks, join_chunks, rpc, smb2};
use smbq_proto::Violation;
use smbq_wire::echo::EchoRequest;
use smbq_wire::tree_connect::TreeConnectRequest;
use smbq_wire::{Command, NtStatus};

fn echo(mid: u64, sid: u64) -> Vec<u8> {
    smb2::message(&smb2::header(Command::ECHO, mid, sid, 0), |w| {
        EchoRequest.encode(w)
    })
}

#[test]
fn chunks_invert_join_chunks() {
    let parts: [&[u8]; 3] = [b"abc", b"", &[7; 300]];
    assert_eq!(chunks(&join_chunks(&parts)), parts);
    // A length past the end takes what is left.
    assert_eq!(chunks(&[5, 0, 1, 2]), vec![&[1u8, 2][..]]);
}

#[test]
fn a_fresh_engine_refuses_requests_before_negotiate() {
    let mut d = Driver::new();
    let r = d.feed(&smb2::frame(&echo(0, 0)));
    assert!(matches!(r, Err(Violation::NotNegotiated)), "{:?}", r.err());
}

#[test]
fn after_negotiate_echo_is_answered() {
    let mut d = Driver::new();
    d.negotiate();
    let sent = d
        .feed(&smb2::frame(&echo(MID_AFTER_NEGOTIATE, 0)))
        .expect("echo");
    assert_eq!(sent.len(), 1);
    let h = sent[0].header();
    assert_eq!((h.command, h.status), (Command::ECHO, NtStatus::SUCCESS));
}

#[test]
fn after_logon_requests_reach_the_server_in_the_session() {
    let mut d = Driver::new();
    d.negotiate();
    assert_eq!(d.authenticate(), FIRST_SESSION_ID);
    let path = smbq_wire::cursor::utf16le_encode("\\\\FUZZSRV\\data");
    let req = TreeConnectRequest {
        flags: 0,
        path_utf16: &path,
        contexts: vec![],
    };
    let msg = smb2::message(
        &smb2::header(
            Command::TREE_CONNECT,
            MID_AFTER_SESSION,
            FIRST_SESSION_ID,
            0,
        ),
        |w| req.encode(w),
    );
    let sent = d.feed(&smb2::frame(&msg)).expect("tree connect");
    let h = sent[0].header();
    // NOT_SUPPORTED is the driver's canned answer: the request was handed up as a valid
    // session's (an unknown session would be USER_SESSION_DELETED from the engine).
    assert_eq!(
        (h.command, h.status),
        (Command::TREE_CONNECT, NtStatus::NOT_SUPPORTED)
    );
    assert_eq!(h.session_id, FIRST_SESSION_ID);
}

#[test]
fn the_srvsvc_conversation_is_answered() {
    let mut pipe = rpc::endpoint();
    for pdu in rpc::conversation() {
        assert_eq!(pipe.write(&pdu), Ok(pdu.len()));
        let out = pipe.read(usize::from(smbq_rpc::pipe::MAX_FRAG));
        let h = smbq_rpc::pdu::Header::decode(&out).expect("response PDU");
        // bind_ack for the bind, response (not fault) for each call.
        assert!(
            [smbq_rpc::pdu::PTYPE_BIND_ACK, smbq_rpc::pdu::PTYPE_RESPONSE].contains(&h.ptype),
            "ptype {}",
            h.ptype
        );
    }
}
