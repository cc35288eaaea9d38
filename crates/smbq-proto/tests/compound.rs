//! Compound requests (MS-SMB2 3.3.5.2.7) split by the engine and joined again by `finish`
//! (MS-SMB2 3.3.4.1.3), signed per message or sealed as a whole.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use common::*;
use smbq_crypto::Cipher;
use smbq_proto::engine::Action;
use smbq_proto::{Request, Response, Violation};
use smbq_wire::close::{CloseRequest, CloseResponse};
use smbq_wire::create::{CreateAction, CreateDisposition, CreateRequest, CreateResponse};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::header::flags;
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::{Command, FileId, Header, NtStatus, Writer};

const TREE: u32 = 7;
const FID: FileId = FileId {
    persistent: 0x1111,
    volatile: 0x2222,
};

fn logged_in() -> (Server, Client) {
    logged_in_with(Cipher::Aes128Gcm, TREE)
}

fn msg(h: &Header, encode: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new();
    h.encode(&mut w);
    encode(&mut w);
    w.into_vec()
}

/// CREATE, then QUERY_INFO and CLOSE related to it (session/tree all ones, FileId RELATED).
fn create_query_close(client: &mut Client) -> Vec<Vec<u8>> {
    let name = utf16le_encode("dir\\file.txt");
    let h = client.header(Command::CREATE, 1);
    let create = msg(&h, |w| {
        CreateRequest {
            desired_access: 0x0012_0089,
            share_access: 7,
            create_disposition: CreateDisposition::OPEN,
            name: &name,
            ..Default::default()
        }
        .encode(w)
    });
    let related = |client: &mut Client, cmd| {
        let mut h = client.header(cmd, 1);
        h.flags |= flags::RELATED_OPERATIONS;
        h.session_id = u64::MAX;
        h.tree_id = u32::MAX;
        h
    };
    let h = related(client, Command::QUERY_INFO);
    let query = msg(&h, |w| {
        QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: 5,
            output_buffer_length: 4096,
            file_id: FileId::RELATED,
            ..Default::default()
        }
        .encode(w)
    });
    let h = related(client, Command::CLOSE);
    let close = msg(&h, |w| {
        CloseRequest {
            flags: 0,
            file_id: FileId::RELATED,
        }
        .encode(w)
    });
    vec![create, query, close]
}

fn handler(r: &Request) -> Response {
    match r.header.command {
        Command::CREATE => {
            let mut w = Writer::new();
            CreateResponse {
                create_action: CreateAction::OPENED,
                file_id: FID,
                end_of_file: 5,
                ..Default::default()
            }
            .encode(&mut w);
            Response {
                file_id: Some(FID),
                ..Response::ok(w.into_vec())
            }
        }
        // An odd-sized body, so the next message needs padding.
        Command::QUERY_INFO => {
            let mut w = Writer::new();
            QueryInfoResponse { buffer: &[1, 2, 3] }.encode(&mut w);
            Response::ok(w.into_vec())
        }
        Command::CLOSE => {
            let mut w = Writer::new();
            CloseResponse::default().encode(&mut w);
            Response::ok(w.into_vec())
        }
        c => panic!("unexpected {c:?}"),
    }
}

/// Runs every request the actions ask for with [`handler`] and returns them in the order the
/// engine handed them up, with the one frame sent.
fn run_recording(server: &mut Server, actions: Vec<Action>) -> (Vec<Request>, Vec<u8>) {
    let mut seen = Vec::new();
    server.run_all(actions, &mut |r| {
        seen.push(r.clone());
        handler(r)
    });
    (seen, single(server.sent()))
}

fn check_chain(
    reqs: &[Request],
    encrypted: bool,
    client: &Client,
    sent: &[Vec<u8>],
    first_mid: u64,
) {
    assert_eq!(reqs.len(), 3);
    let cmds: Vec<Command> = reqs.iter().map(|r| r.command()).collect();
    assert_eq!(cmds, [Command::CREATE, Command::QUERY_INFO, Command::CLOSE]);
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(r.header.is_related(), i > 0, "related flag of #{i}");
        // MS-SMB2 3.3.5.2.7.2: related requests inherit SessionId and TreeId.
        assert_eq!(r.header.session_id, client.session_id, "SessionId of #{i}");
        assert_eq!(r.header.tree_id, TREE, "TreeId of #{i}");
        assert_eq!(r.header.message_id, first_mid + i as u64);
        assert_eq!(r.session.as_ref().unwrap().id, client.session_id);
        assert_eq!(r.encrypted, encrypted);
        // The message handed up is the one sent (padding included), ready for the decoders.
        assert_eq!(&r.msg[..], &sent[i][..], "message #{i} as sent");
    }
    assert_eq!(
        QueryInfoRequest::decode(&reqs[1].msg).unwrap().file_id,
        FileId::RELATED
    );
    // MS-SMB2 3.3.5.2.7.2: the FileId the CREATE produced is carried to what follows.
    assert_eq!(reqs[0].related_file_id, None);
    assert_eq!(reqs[1].resolve_file_id(FileId::RELATED), FID);
    assert_eq!(reqs[2].resolve_file_id(FileId::RELATED), FID);
}

/// Splits the sent compound back into its messages (each with its padding).
fn sent_parts(compound: &[u8]) -> Vec<Vec<u8>> {
    split_compound(compound)
        .into_iter()
        .map(|m| m.bytes)
        .collect()
}

fn check_response(client: &Client, resp: &Received, first_mid: u64, signed: bool) {
    assert_eq!(resp.msgs.len(), 3, "one frame with three responses");
    let cmds: Vec<Command> = resp.msgs.iter().map(|m| m.header.command).collect();
    assert_eq!(cmds, [Command::CREATE, Command::QUERY_INFO, Command::CLOSE]);
    for (i, m) in resp.msgs.iter().enumerate() {
        assert_eq!(m.status(), NtStatus::SUCCESS);
        assert_eq!(m.header.message_id, first_mid + i as u64);
        assert_eq!(m.header.is_related(), i > 0, "related flag echoed on #{i}");
        assert_eq!(m.header.session_id, client.session_id);
        assert_eq!(m.header.tree_id, TREE);
        assert!(m.header.credits > 0, "credits granted on #{i}");
        // Every response of a compound is padded to 8, the last one too (as Windows does).
        assert_eq!(m.bytes.len() % 8, 0, "response #{i} padded");
        if i + 1 == resp.msgs.len() {
            assert_eq!(m.header.next_command, 0);
        }
        if signed {
            assert!(client.verifies(m), "response #{i} must verify on its own");
        } else {
            assert!(!m.header.is_signed());
        }
    }
    let c = CreateResponse::decode(&resp.msgs[0].bytes).unwrap();
    assert_eq!(c.file_id, FID);
    let q = QueryInfoResponse::decode(&resp.msgs[1].bytes).unwrap();
    assert_eq!(q.buffer, &[1, 2, 3]);
    CloseResponse::decode(&resp.msgs[2].bytes).unwrap();
}

#[test]
fn signed_related_chain_is_split_and_joined() {
    let (mut server, mut client) = logged_in();
    let first_mid = client.next_mid;
    let parts = create_query_close(&mut client);
    let compound = client.compound(parts.into_iter().map(|m| (m, true)).collect());
    let sent = sent_parts(&compound);

    let actions = server.feed(&frame(&compound)).unwrap();
    assert_eq!(
        executes(&actions).len(),
        1,
        "one request at a time: {actions:?}"
    );
    let (reqs, out) = run_recording(&mut server, actions);
    check_chain(&reqs, false, &client, &sent, first_mid);
    let resp = client.receive(&out);
    assert!(!resp.encrypted);
    check_response(&client, &resp, first_mid, true);
}

#[test]
fn unsigned_related_chain_is_joined_unsigned() {
    let (mut server, mut client) = logged_in();
    let first_mid = client.next_mid;
    let parts = create_query_close(&mut client);
    let compound = client.compound(parts.into_iter().map(|m| (m, false)).collect());
    let (frames, _) = server.exchange(&frame(&compound), &mut handler).unwrap();
    let resp = client.receive(&single(frames));
    check_response(&client, &resp, first_mid, false);
}

#[test]
fn sealed_chain_comes_back_in_one_transform() {
    let (mut server, mut client) = logged_in();
    let first_mid = client.next_mid;
    let parts = create_query_close(&mut client);
    let compound = client.compound(parts.into_iter().map(|m| (m, false)).collect());
    let sent = sent_parts(&compound);
    let sealed = client.seal(&compound);

    let actions = server.feed(&sealed).unwrap();
    let (reqs, out) = run_recording(&mut server, actions);
    check_chain(&reqs, true, &client, &sent, first_mid);
    let resp = client.receive(&out);
    assert!(resp.encrypted);
    check_response(&client, &resp, first_mid, false);
}

/// A bad signature on one element fails that element only.
#[test]
fn bad_signature_inside_a_chain_fails_that_request() {
    let (mut server, mut client) = logged_in();
    let parts = create_query_close(&mut client);
    let mut compound = client.compound(parts.into_iter().map(|m| (m, true)).collect());
    let second = Header::decode(&compound).unwrap().next_command as usize;
    compound[second + 50] ^= 0xFF;
    let actions = server.feed(&frame(&compound)).unwrap();
    let (reqs, out) = run_recording(&mut server, actions);
    let ran: Vec<Command> = reqs.iter().map(|r| r.command()).collect();
    assert_eq!(
        ran,
        [Command::CREATE, Command::CLOSE],
        "the bad one never ran"
    );
    let statuses: Vec<NtStatus> = client
        .receive(&out)
        .msgs
        .iter()
        .map(|m| m.status())
        .collect();
    assert_eq!(
        statuses,
        [
            NtStatus::SUCCESS,
            NtStatus::ACCESS_DENIED,
            NtStatus::SUCCESS
        ]
    );
}

/// MS-SMB2 3.3.5.2.7.2: the first request of a chain cannot be related.
#[test]
fn related_first_request_is_invalid_parameter() {
    let (mut server, mut client) = logged_in();
    let mut parts = create_query_close(&mut client);
    let first = &mut parts[0];
    let f = u32::from_le_bytes(first[16..20].try_into().unwrap()) | flags::RELATED_OPERATIONS;
    first[16..20].copy_from_slice(&f.to_le_bytes());
    let compound = client.compound(parts.into_iter().map(|m| (m, true)).collect());
    let actions = server.feed(&frame(&compound)).unwrap();
    let (reqs, out) = run_recording(&mut server, actions);
    assert!(reqs.is_empty(), "nothing runs: {reqs:?}");
    let statuses: Vec<NtStatus> = client
        .receive(&out)
        .msgs
        .iter()
        .map(|m| m.status())
        .collect();
    // The CREATE the engine failed fails the related requests after it, with its status.
    assert_eq!(statuses, [NtStatus::INVALID_PARAMETER; 3]);
}

/// MS-SMB2 3.3.5.2.7.2: a related request with no FileId before it to take fails without
/// running, with the failed request's status before it (smbtorture compound.related5), or
/// INVALID_PARAMETER when nothing before it failed (related9); its own FileId is not used.
#[test]
fn related_request_without_a_file_before_it_does_not_run() {
    for (first_status, expected) in [
        (NtStatus::FILE_CLOSED, NtStatus::FILE_CLOSED),
        (NtStatus::SUCCESS, NtStatus::INVALID_PARAMETER),
    ] {
        let (mut server, mut client) = logged_in();
        let h = client.header(Command::QUERY_INFO, 1);
        let query = msg(&h, |w| {
            QueryInfoRequest {
                info_type: InfoType::FILE,
                file_info_class: 5,
                output_buffer_length: 4096,
                file_id: FID,
                ..Default::default()
            }
            .encode(w)
        });
        let mut h = client.header(Command::CLOSE, 1);
        h.flags |= flags::RELATED_OPERATIONS;
        let close = msg(&h, |w| {
            CloseRequest {
                flags: 0,
                file_id: FID,
            }
            .encode(w)
        });
        let compound = client.compound(vec![(query, true), (close, true)]);
        let actions = server.feed(&frame(&compound)).unwrap();
        let mut ran = Vec::new();
        server.run_all(actions, &mut |r| {
            ran.push(r.command());
            // The handler answers without naming an open (as for a FileId it cannot find).
            if first_status == NtStatus::SUCCESS {
                let mut w = Writer::new();
                QueryInfoResponse { buffer: &[1] }.encode(&mut w);
                Response::ok(w.into_vec())
            } else {
                Response::error(first_status)
            }
        });
        assert_eq!(ran, [Command::QUERY_INFO], "the CLOSE never runs");
        let out = single(server.sent());
        let statuses: Vec<NtStatus> = client
            .receive(&out)
            .msgs
            .iter()
            .map(|m| m.status())
            .collect();
        assert_eq!(statuses, [first_status, expected]);
    }
}

#[test]
fn unaligned_next_command_is_a_violation() {
    let (mut server, mut client) = logged_in();
    let e1 = client.echo(false);
    let e2 = client.echo(false);
    // 68 bytes: a valid ECHO, but the next message would not start 8-byte aligned.
    let mut m = e1.clone();
    m[20..24].copy_from_slice(&(e1.len() as u32).to_le_bytes());
    m.extend_from_slice(&e2);
    assert_eq!(e1.len() % 8, 4);
    assert!(matches!(
        server.feed(&frame(&m)).unwrap_err(),
        Violation::BadCompound(_)
    ));
}

#[test]
fn compound_longer_than_the_limit_is_a_violation() {
    let mut cfg = config();
    cfg.limits.max_compound = 4;
    let mut server = Server::new(cfg);
    let mut client = Client::new(Offer::smb311(&[], &[]));
    client.connect(&mut server);
    let echoes: Vec<(Vec<u8>, bool)> = (0..5).map(|_| (client.echo(false), false)).collect();
    let compound = client.compound(echoes);
    assert_eq!(
        server.feed(&frame(&compound)).unwrap_err(),
        Violation::CompoundTooLong
    );
}

/// Engine-answered and passed-up requests keep their order in one response frame.
#[test]
fn echo_inside_a_chain_keeps_its_place() {
    let (mut server, mut client) = logged_in();
    let first_mid = client.next_mid;
    let mut parts = create_query_close(&mut client);
    // Drop QUERY_INFO and CLOSE (their message ids stay unused, which is allowed).
    parts.truncate(1);
    parts.push(client.echo(false));
    let compound = client.compound(parts.into_iter().map(|m| (m, true)).collect());
    let (frames, _) = server.exchange(&frame(&compound), &mut handler).unwrap();
    let resp = client.receive(&single(frames));
    let cmds: Vec<(Command, u64)> = resp
        .msgs
        .iter()
        .map(|m| (m.header.command, m.header.message_id))
        .collect();
    assert_eq!(
        cmds,
        [(Command::CREATE, first_mid), (Command::ECHO, first_mid + 3)]
    );
    for m in &resp.msgs {
        assert!(client.verifies(m));
    }
}

fn read_msg(client: &mut Client, related: bool) -> Vec<u8> {
    let mut h = client.header(Command::READ, 1);
    if related {
        h.flags |= flags::RELATED_OPERATIONS;
    }
    msg(&h, |w| {
        smbq_wire::read::ReadRequest {
            padding: 0x50,
            length: 1000,
            file_id: FID,
            ..Default::default()
        }
        .encode(w)
    })
}

/// READ data travels as a separate `Bytes` segment; it must land inside the frame, be covered
/// by the signature (or the seal), and be padded when another message follows.
#[test]
fn read_data_segments_are_framed_signed_and_sealed() {
    let data: Vec<u8> = (0..101u8).collect();
    let read_handler = |r: &Request| -> Response {
        match r.header.command {
            Command::READ => {
                let mut w = Writer::new();
                smbq_wire::read::ReadResponse {
                    data: &[],
                    ..Default::default()
                }
                .encode_header(data.len() as u32, &mut w);
                Response {
                    data: Some(bytes::Bytes::from(data.clone())),
                    ..Response::ok(w.into_vec())
                }
            }
            _ => handler(r),
        }
    };
    // (signed, sealed, READ followed by a related CLOSE)
    for (signed, sealed, chained) in [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (false, false, true),
        (true, false, true),
        (false, true, true),
    ] {
        let (mut server, mut client) = logged_in();
        let mut parts = vec![(read_msg(&mut client, false), signed)];
        if chained {
            let mut h = client.header(Command::CLOSE, 1);
            h.flags |= flags::RELATED_OPERATIONS;
            let close = msg(&h, |w| {
                CloseRequest {
                    flags: 0,
                    file_id: FileId::RELATED,
                }
                .encode(w)
            });
            parts.push((close, signed));
        }
        let compound = client.compound(parts);
        let wire = if sealed {
            client.seal(&compound)
        } else {
            frame(&compound)
        };
        let mut h = read_handler;
        let (frames, _) = server.exchange(&wire, &mut h).unwrap();
        let resp = client.receive(&single(frames));
        let case = format!("signed={signed} sealed={sealed} chained={chained}");
        assert_eq!(resp.encrypted, sealed, "{case}");
        assert_eq!(resp.msgs.len(), if chained { 2 } else { 1 }, "{case}");
        let r = smbq_wire::read::ReadResponse::decode(&resp.msgs[0].bytes).unwrap();
        assert_eq!(r.data, &data[..], "{case}");
        for m in &resp.msgs {
            assert_eq!(client.verifies(m), signed, "{case}");
        }
    }
}

/// TREE_CONNECT's new TreeId goes in the response header, under the signature.
#[test]
fn tree_id_from_the_handler_is_in_the_signed_header() {
    let (mut server, mut client) = logged_in();
    client.tree_id = 0;
    let h = client.header(Command::TREE_CONNECT, 1);
    let mut m = Client::message(&h, &[9, 0, 0, 0, 0x48, 0, 0, 0, 0]);
    client.sign(&mut m);
    let (frames, _) = server
        .exchange(&frame(&m), &mut |_| Response {
            tree_id: Some(42),
            ..Response::ok(vec![
                16, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0x01, 0x1F, 0,
            ])
        })
        .unwrap();
    let resp = client.receive(&single(frames));
    assert_eq!(resp.one().header.tree_id, 42);
    assert!(client.verifies(resp.one()));
}
