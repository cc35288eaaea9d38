//! The srvsvc client functions (smbq_rpc::client) against smbq's own pipe endpoint, against
//! stubs marshalled by Samba, and against hostile input.
//!
//! Fixtures:
//! - `SAMBA_ENUM1_REQ`: Samba 4.17 rpcclient's NetShareEnumAll level-1 request stub for
//!   `\\127.0.0.1` (pidl NDR, via python3-samba `ndr_pack_in`).
//! - `SMBD_ENUM1_RESP`: the answer of a real smbd 4.17.12 (shares `data` "Data share",
//!   `nocomment` without comment, `hidden$` "Hidden") to that request, fetched with
//!   python3-samba `dcerpc.base.ClientConnection.request(15, stub)` over ncacn_np on loopback.
//!   Its referent ids start at 0x0002000c, not at MIDL's 0x00020000.
//! - `PIDL_NULL_COMMENT_RESP`: python3-samba `ndr_pack_out` of a NetShareEnumAll answer whose
//!   `C$` entry has no comment (a NULL pointer).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use smbq_rpc::client::{
    ERROR_MORE_DATA, ResponseAssembler, RpcClientError, ShareInfo1, bind_request, check_bind_ack,
    parse_share_enum, share_enum_request,
};
use smbq_rpc::pdu::{self, Header};
use smbq_rpc::{PipeEndpoint, ShareInfo, ShareKind, ShareSource};
use smbq_wire::cursor::Writer;
use std::sync::Arc;

const SAMBA_ENUM1_REQ: &str = "000002000c000000000000000c0000005c005c003100320037002e0030002e0030002e00310000000100000001000000040002000000000000000000ffffffff0800020000000000";

const SMBD_ENUM1_RESP: &str = "01000000010000000c0002000400000010000200040000001400020000000000180002001c00020000000000200002002400020000000000280002002c00020003000080300002000500000000000000050000006400610074006100000000000b000000000000000b0000004400610074006100200073006800610072006500000000000a000000000000000a0000006e006f0063006f006d006d0065006e007400000001000000000000000100000000000000080000000000000008000000680069006400640065006e0024000000070000000000000007000000480069006400640065006e00000000000500000000000000050000004900500043002400000000002300000000000000230000004900500043002000530065007200760069006300650020002800530061006d0062006100200034002e00310037002e00310032002d00440065006200690061006e0029000000000004000000340002000000000000000000";

const PIDL_NULL_COMMENT_RESP: &str = "01000000010000000000020004000000040002000400000008000200000000000c0002001000020000000080000000001400020003000080180002001c00020000000040200002000500000000000000050000006400610074006100000000000b000000000000000b00000044006100740061002000730068006100720065000000000003000000000000000300000043002400000000000500000000000000050000004900500043002400000000000b000000000000000b000000520065006d006f007400650020004900500043000000000004000000000000000400000074006d00700000000100000000000000010000000000000004000000240002000000000000000000";

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn row(name: &str, share_type: u32, comment: &str) -> ShareInfo1 {
    ShareInfo1 {
        name: name.into(),
        share_type,
        comment: comment.into(),
    }
}

struct Shares(Vec<ShareInfo>);
impl ShareSource for Shares {
    fn shares(&self) -> Vec<ShareInfo> {
        self.0.clone()
    }
}

fn disk(name: &str, comment: &str) -> ShareInfo {
    ShareInfo {
        name: name.into(),
        kind: ShareKind::Disk,
        comment: comment.into(),
        path: "/srv".into(),
    }
}

fn endpoint(shares: Vec<ShareInfo>) -> PipeEndpoint {
    PipeEndpoint::srvsvc("SMBQ".into(), Arc::new(Shares(shares)))
}

/// Every queued message, one read each (message-mode pipe: one PDU per read).
fn drain(ep: &mut PipeEndpoint) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    loop {
        let m = ep.read(usize::MAX);
        if m.is_empty() {
            return v;
        }
        v.push(m);
    }
}

fn bound_endpoint(shares: Vec<ShareInfo>) -> PipeEndpoint {
    let mut ep = endpoint(shares);
    ep.write(&bind_request(1)).unwrap();
    let msgs = drain(&mut ep);
    assert_eq!(msgs.len(), 1);
    check_bind_ack(&msgs[0]).unwrap();
    ep
}

/// Runs NetrShareEnum through the endpoint and returns the response fragments.
fn enum_fragments(ep: &mut PipeEndpoint, call_id: u32) -> Vec<Vec<u8>> {
    ep.write(&share_enum_request(call_id, "\\\\smbq")).unwrap();
    drain(ep)
}

fn assemble(frags: &[Vec<u8>]) -> Result<Vec<u8>, RpcClientError> {
    let mut a = ResponseAssembler::new(1 << 20);
    for (i, f) in frags.iter().enumerate() {
        match a.push(f)? {
            Some(stub) => {
                assert_eq!(i, frags.len() - 1, "stub returned before the last fragment");
                return Ok(stub);
            }
            None => assert!(i < frags.len() - 1, "last fragment did not complete"),
        }
    }
    panic!("no fragments");
}

/// A PDU with arbitrary header fields (frag_length set by encode_pdu).
fn raw_pdu(ptype: u8, flags: u8, call_id: u32, body: &[u8]) -> Vec<u8> {
    pdu::encode_pdu(Header::new(ptype, flags, call_id), body)
}

/// A response fragment carrying `stub` for context 0.
fn response_pdu(call_id: u32, flags: u8, stub: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    pdu::Response {
        alloc_hint: stub.len() as u32,
        context_id: 0,
        cancel_count: 0,
        stub,
    }
    .encode(&mut w);
    raw_pdu(pdu::PTYPE_RESPONSE, flags, call_id, w.as_slice())
}

fn fault_pdu(call_id: u32, status: u32) -> Vec<u8> {
    let mut w = Writer::new();
    pdu::Fault {
        alloc_hint: 24,
        context_id: 0,
        cancel_count: 0,
        status,
    }
    .encode(&mut w);
    raw_pdu(pdu::PTYPE_FAULT, 3, call_id, w.as_slice())
}

fn bind_ack_pdu(results: &[(u16, u16, pdu::SyntaxId)]) -> Vec<u8> {
    let ack = pdu::BindAck {
        max_xmit_frag: 4280,
        max_recv_frag: 4280,
        assoc_group_id: 0x1234,
        secondary_address: "\\PIPE\\srvsvc".into(),
        results: results
            .iter()
            .map(|&(result, reason, transfer_syntax)| pdu::ContextResult {
                result,
                reason,
                transfer_syntax,
            })
            .collect(),
    };
    let mut w = Writer::new();
    ack.encode(&mut w);
    raw_pdu(pdu::PTYPE_BIND_ACK, 3, 1, w.as_slice())
}

// ---- a hand NDR writer: explicit referent ids, explicit counts ----

#[derive(Default)]
struct Ndr(Vec<u8>);

impl Ndr {
    fn u32(&mut self, v: u32) -> &mut Self {
        while !self.0.len().is_multiple_of(4) {
            // Padding octets are unspecified (C706 14.2.2); use garbage to prove they are skipped.
            self.0.push(0xee);
        }
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A conformant varying string with explicit max/actual counts; `units` are written as given.
    fn string(&mut self, max: u32, units: &[u16]) -> &mut Self {
        self.u32(max).u32(0).u32(units.len() as u32);
        for u in units {
            self.0.extend_from_slice(&u.to_le_bytes());
        }
        self
    }
    fn wstr(&mut self, s: &str) -> &mut Self {
        let mut units: Vec<u16> = s.encode_utf16().collect();
        units.push(0);
        self.string(units.len() as u32, &units)
    }
}

// ---- requests ----

#[test]
fn bind_request_is_srvsvc_over_ndr20() {
    let b = bind_request(0x0102_0304);
    assert_eq!(b.len(), 72);
    assert_eq!(&b[..4], &[5, 0, pdu::PTYPE_BIND, 3]);
    assert_eq!(&b[4..8], &[0x10, 0, 0, 0]);
    assert_eq!(le16(&b, 8), 72);
    assert_eq!(le16(&b, 10), 0, "no auth");
    assert_eq!(le32(&b, 12), 0x0102_0304);
    assert_eq!((le16(&b, 16), le16(&b, 18)), (4280, 4280));
    assert_eq!(le32(&b, 20), 0, "new association group");
    assert_eq!(b[24], 1, "one context");
    assert_eq!(le16(&b, 28), 0, "context id");
    assert_eq!(b[30], 1, "one transfer syntax");
    // MS-SRVS 1.9: 4B324FC8-1670-01D3-1278-5A47BF6EE188 v3.0, in NDR UUID order.
    assert_eq!(hex::encode(&b[32..48]), "c84f324b7016d30112785a47bf6ee188");
    assert_eq!(le32(&b, 48), 3);
    // C706 14: NDR 8A885D04-1CEB-11C9-9FE8-08002B104860 v2.
    assert_eq!(hex::encode(&b[52..68]), "045d888aeb1cc9119fe808002b104860");
    assert_eq!(le32(&b, 68), 2);
}

#[test]
fn share_enum_request_matches_samba() {
    let p = share_enum_request(9, "\\\\127.0.0.1");
    let stub = unhex(SAMBA_ENUM1_REQ);
    assert_eq!(p.len(), 24 + stub.len());
    assert_eq!(&p[..4], &[5, 0, pdu::PTYPE_REQUEST, 3]);
    assert_eq!(le16(&p, 8) as usize, p.len());
    assert_eq!(le32(&p, 12), 9);
    assert_eq!(le32(&p, 16) as usize, stub.len(), "alloc_hint");
    assert_eq!((le16(&p, 20), le16(&p, 22)), (0, 15), "context 0, opnum 15");
    assert_eq!(hex::encode(&p[24..]), SAMBA_ENUM1_REQ);
}

#[test]
fn empty_server_name_is_a_null_pointer() {
    let p = share_enum_request(2, "");
    // smbd 4.17.12 answers this stub with its full share list.
    assert_eq!(
        hex::encode(&p[24..]),
        "000000000100000001000000000002000000000000000000ffffffff0400020000000000"
    );
    let mut ep = bound_endpoint(vec![disk("a", "")]);
    ep.write(&p).unwrap();
    let shares = parse_share_enum(&assemble(&drain(&mut ep)).unwrap()).unwrap();
    assert_eq!(shares[0], row("a", 0, ""));
}

#[test]
fn long_server_name_is_sent_in_fragments_the_server_reassembles() {
    let name = format!("\\\\{}", "h".repeat(2000));
    let bytes = share_enum_request(4, &name);
    let mut frags = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = le16(&bytes, at + 8) as usize;
        frags.push(&bytes[at..at + n]);
        at += n;
    }
    assert_eq!(at, bytes.len());
    assert!(frags.len() >= 3, "{} fragments", frags.len());
    let stub_len: usize = frags.iter().map(|f| f.len() - 24).sum();
    let mut left = stub_len;
    for (i, f) in frags.iter().enumerate() {
        assert!(f.len() <= 1432, "C706 MustRecvFragSize");
        assert_eq!(f[3] & 1 != 0, i == 0, "PFC_FIRST_FRAG");
        assert_eq!(f[3] & 2 != 0, i == frags.len() - 1, "PFC_LAST_FRAG");
        assert_eq!(le32(f, 12), 4);
        assert_eq!(le32(f, 16) as usize, left, "alloc_hint counts what is left");
        left -= f.len() - 24;
    }
    let mut ep = bound_endpoint(vec![disk("x", "y")]);
    for f in &frags {
        ep.write(f).unwrap();
    }
    let shares = parse_share_enum(&assemble(&drain(&mut ep)).unwrap()).unwrap();
    assert_eq!(shares[0], row("x", 0, "y"));
}

// ---- round trips against smbq's own endpoint ----

#[test]
fn round_trip_against_own_endpoint() {
    let configured = vec![
        disk("public", "Public files"),
        disk("home$", ""),
        disk("Überweisung", "Zahlungen für März"),
        disk("odd", "\u{1f4c1} folder"),
    ];
    let mut ep = bound_endpoint(configured);
    let frags = enum_fragments(&mut ep, 7);
    assert_eq!(frags.len(), 1);
    let mut a = ResponseAssembler::new(1 << 16).expect_call_id(7);
    let stub = a.push(&frags[0]).unwrap().unwrap();
    let shares = parse_share_enum(&stub).unwrap();
    assert_eq!(
        shares,
        vec![
            row("public", 0, "Public files"),
            row("home$", 0x8000_0000, ""),
            row("Überweisung", 0, "Zahlungen für März"),
            row("odd", 0, "\u{1f4c1} folder"),
            row("IPC$", 0x8000_0003, "Remote IPC"),
        ]
    );
    assert!(shares[1].is_special() && shares[4].is_special());
    assert_eq!(shares[4].base_type(), 3);
    assert!(!shares[0].is_special());
    assert!(!shares[4].is_temporary());
}

#[test]
fn transceive_round_trip() {
    let mut ep = endpoint(vec![disk("t", "c")]);
    check_bind_ack(&ep.transceive(&bind_request(1), 4280).unwrap()).unwrap();
    let out = ep
        .transceive(&share_enum_request(2, "\\\\srv"), 4280)
        .unwrap();
    let stub = ResponseAssembler::new(4096).push(&out).unwrap().unwrap();
    assert_eq!(
        parse_share_enum(&stub).unwrap(),
        vec![row("t", 0, "c"), row("IPC$", 0x8000_0003, "Remote IPC")]
    );
}

fn many(n: usize) -> Vec<ShareInfo> {
    (0..n)
        .map(|i| disk(&format!("s{i}"), &"c".repeat(i % 23)))
        .collect()
}

#[test]
fn fragmented_response_is_reassembled() {
    let mut ep = bound_endpoint(many(300));
    let frags = enum_fragments(&mut ep, 3);
    assert!(frags.len() >= 4, "{} fragments", frags.len());
    let stub = assemble(&frags).unwrap();
    let shares = parse_share_enum(&stub).unwrap();
    assert_eq!(shares.len(), 301);
    for (i, s) in shares.iter().take(300).enumerate() {
        assert_eq!(*s, row(&format!("s{i}"), 0, &"c".repeat(i % 23)));
    }

    // The same bytes split at arbitrary points (short READs, STATUS_BUFFER_OVERFLOW).
    let all: Vec<u8> = frags.concat();
    for chunk in [1, 7, 100, 4279, 5000] {
        let mut a = ResponseAssembler::new(1 << 20);
        let mut got = None;
        for (i, piece) in all.chunks(chunk).enumerate() {
            let r = a.push(piece).unwrap();
            if r.is_some() {
                assert_eq!(i, all.len().div_ceil(chunk) - 1, "chunk {chunk}");
                got = r;
            }
        }
        assert_eq!(got.as_deref(), Some(&stub[..]), "chunk {chunk}");
    }

    // Partial reads straight from the endpoint.
    let mut ep = bound_endpoint(many(300));
    ep.write(&share_enum_request(4, "\\\\smbq")).unwrap();
    let mut a = ResponseAssembler::new(1 << 20).expect_call_id(4);
    let mut got = None;
    while got.is_none() {
        let piece = ep.read(333);
        assert!(
            !piece.is_empty(),
            "endpoint ran dry before the last fragment"
        );
        got = a.push(&piece).unwrap();
    }
    assert_eq!(got.unwrap(), stub);
    assert_eq!(ep.pending_output(), 0);
}

#[test]
fn reassembly_is_capped() {
    let mut ep = bound_endpoint(many(300));
    let frags = enum_fragments(&mut ep, 3);
    let total: usize = frags.iter().map(|f| f.len() - 24).sum();
    let mut a = ResponseAssembler::new(total - 1);
    let mut err = None;
    for f in &frags {
        match a.push(f) {
            Ok(Some(_)) => panic!("over-cap stub returned"),
            Ok(None) => {}
            Err(e) => {
                err = Some(e);
                break;
            }
        }
    }
    assert_eq!(err, Some(RpcClientError::TooLarge { limit: total - 1 }));
    assert!(a.push(&frags[0]).is_err(), "spent after an error");
    // Exactly at the cap is fine.
    assert!(
        ResponseAssembler::new(total)
            .push(&frags.concat())
            .unwrap()
            .is_some()
    );
}

// ---- faults, naks, sequence errors ----

#[test]
fn faults_are_reported_with_their_status() {
    // The endpoint's own fault: a request before any bind (nca_s_proto_error).
    let mut ep = endpoint(vec![]);
    ep.write(&share_enum_request(1, "\\\\x")).unwrap();
    let msgs = drain(&mut ep);
    assert_eq!(
        ResponseAssembler::new(4096).push(&msgs[0]),
        Err(RpcClientError::Fault(0x1c01_000b))
    );

    // rpc_x_bad_stub_data, as Windows and Samba send it.
    let f = fault_pdu(5, 0x6f7);
    assert_eq!(
        ResponseAssembler::new(4096).expect_call_id(5).push(&f),
        Err(RpcClientError::Fault(0x6f7))
    );
    // A fault after the first response fragment ends the call too.
    let mut a = ResponseAssembler::new(4096);
    assert_eq!(a.push(&response_pdu(5, 1, &[0; 16])), Ok(None));
    assert_eq!(a.push(&f), Err(RpcClientError::Fault(0x6f7)));
    // And a fault answering the bind.
    assert_eq!(check_bind_ack(&f), Err(RpcClientError::Fault(0x6f7)));
}

#[test]
fn bind_nak_and_rejected_context() {
    // A second bind on the association is refused with a bind_nak (C706 12.6.4.5).
    let mut ep = bound_endpoint(vec![]);
    ep.write(&bind_request(2)).unwrap();
    let nak = drain(&mut ep);
    assert_eq!(
        check_bind_ack(&nak[0]),
        Err(RpcClientError::BindNak { reason: 0 })
    );
    let nak = raw_pdu(pdu::PTYPE_BIND_NAK, 3, 1, &[4, 0, 1, 5, 0, 0, 0, 0]);
    assert_eq!(
        check_bind_ack(&nak),
        Err(RpcClientError::BindNak { reason: 4 })
    );

    assert_eq!(check_bind_ack(&bind_ack_pdu(&[(0, 0, pdu::NDR20)])), Ok(()));
    assert_eq!(
        check_bind_ack(&bind_ack_pdu(&[(2, 1, pdu::SyntaxId::NIL)])),
        Err(RpcClientError::ContextRejected {
            result: 2,
            reason: 1
        })
    );
    assert!(matches!(
        check_bind_ack(&bind_ack_pdu(&[])),
        Err(RpcClientError::Protocol(_))
    ));
    assert!(matches!(
        check_bind_ack(&bind_ack_pdu(&[(0, 0, pdu::NDR64)])),
        Err(RpcClientError::Protocol(_))
    ));
    assert_eq!(
        check_bind_ack(&response_pdu(1, 3, &[])),
        Err(RpcClientError::UnexpectedPdu(pdu::PTYPE_RESPONSE))
    );
    // Trailing octets after frag_length.
    let mut long = bind_ack_pdu(&[(0, 0, pdu::NDR20)]);
    long.push(0);
    assert!(check_bind_ack(&long).is_err());
    // Big-endian data representation.
    let mut be = bind_ack_pdu(&[(0, 0, pdu::NDR20)]);
    be[4] = 0;
    be.swap(8, 9);
    assert!(matches!(
        check_bind_ack(&be),
        Err(RpcClientError::Protocol(_))
    ));
}

#[test]
fn assembler_enforces_fragment_rules() {
    let stub = unhex(SMBD_ENUM1_RESP);
    let (a, b) = stub.split_at(64);
    let first = response_pdu(8, 1, a);
    let last = response_pdu(8, 2, b);

    let mut ok = ResponseAssembler::new(4096).expect_call_id(8);
    assert_eq!(ok.push(&first), Ok(None));
    assert_eq!(ok.push(&last), Ok(Some(stub.clone())));
    assert!(ok.push(&last).is_err(), "spent after the last fragment");

    let cases: Vec<(&str, ResponseAssembler, Vec<Vec<u8>>)> = vec![
        ("no first", ResponseAssembler::new(4096), vec![last.clone()]),
        (
            "first twice",
            ResponseAssembler::new(4096),
            vec![first.clone(), first.clone()],
        ),
        (
            "wrong call id",
            ResponseAssembler::new(4096).expect_call_id(9),
            vec![first.clone()],
        ),
        (
            "call id changes",
            ResponseAssembler::new(4096),
            vec![first.clone(), response_pdu(7, 2, b)],
        ),
        (
            "data after last",
            ResponseAssembler::new(4096),
            vec![[response_pdu(8, 3, &stub), first.clone()].concat()],
        ),
        (
            "bind_ack instead",
            ResponseAssembler::new(4096),
            vec![bind_ack_pdu(&[(0, 0, pdu::NDR20)])],
        ),
        (
            "auth verifier",
            ResponseAssembler::new(4096),
            vec![{
                let mut p = response_pdu(8, 3, &[0; 24]);
                p[10] = 8;
                p
            }],
        ),
        (
            "big-endian",
            ResponseAssembler::new(4096),
            vec![{
                let mut p = response_pdu(8, 3, &stub);
                p[4] = 0;
                p.swap(8, 9);
                p
            }],
        ),
        (
            "other context",
            ResponseAssembler::new(4096),
            vec![{
                let mut p = response_pdu(8, 3, &stub);
                p[20] = 1;
                p
            }],
        ),
        (
            "frag_length below the header",
            ResponseAssembler::new(4096),
            vec![{
                let mut p = response_pdu(8, 3, &stub);
                p[8] = 15;
                p[9] = 0;
                p
            }],
        ),
        (
            "RPC version 4",
            ResponseAssembler::new(4096),
            vec![{
                let mut p = response_pdu(8, 3, &stub);
                p[0] = 4;
                p
            }],
        ),
    ];
    for (what, mut asm, pdus) in cases {
        let mut res = Ok(None);
        for p in &pdus {
            res = asm.push(p);
            if res.is_err() {
                break;
            }
        }
        assert!(res.is_err(), "{what}: {res:?}");
    }
}

// ---- stubs from Samba and hand-built NDR ----

#[test]
fn real_smbd_answer_parses() {
    let shares = parse_share_enum(&unhex(SMBD_ENUM1_RESP)).unwrap();
    assert_eq!(
        shares,
        vec![
            row("data", 0, "Data share"),
            row("nocomment", 0, ""),
            row("hidden$", 0, "Hidden"),
            row("IPC$", 0x8000_0003, "IPC Service (Samba 4.17.12-Debian)"),
        ]
    );
}

#[test]
fn pidl_null_comment_and_type_flags() {
    let shares = parse_share_enum(&unhex(PIDL_NULL_COMMENT_RESP)).unwrap();
    assert_eq!(
        shares,
        vec![
            row("data", 0, "Data share"),
            row("C$", 0x8000_0000, ""),
            row("IPC$", 0x8000_0003, "Remote IPC"),
            row("tmp", 0x4000_0000, ""),
        ]
    );
    assert!(shares[3].is_temporary() && !shares[3].is_special());
    assert_eq!(shares[1].base_type(), 0);
}

#[test]
fn hand_built_answer_with_arbitrary_referents() {
    let mut n = Ndr::default();
    n.u32(1).u32(1).u32(0xdead_beef); // Level, discriminant, container referent
    n.u32(3).u32(0x0000_0004); // EntriesRead, Buffer referent
    n.u32(3); // max_count
    // Referent ids in no order, one repeated (unique pointers carry no identity), a NULL
    // comment, and flag bits above the base type.
    n.u32(0x7fff_fff0).u32(0x8000_0000).u32(0);
    n.u32(0x0000_0100).u32(0x4000_0001).u32(0x0000_0100);
    n.u32(0x1234_5678).u32(0x8000_0003).u32(0x0002_0000);
    // "C$": 3 units, so the next count starts after 2 octets of padding.
    n.wstr("C$");
    // A varying string with slack (actual < max) and no terminator.
    n.string(40, &"prn".encode_utf16().collect::<Vec<_>>());
    // A comment whose NUL comes early: the value stops there.
    n.string(9, &[b'l' as u16, b'p' as u16, 0, b'x' as u16]);
    n.wstr("IPC$").wstr("Remote \u{1f4c1}");
    n.u32(3); // TotalEntries
    n.u32(0x0002_0010).u32(0); // ResumeHandle
    n.u32(0); // WERROR
    let shares = parse_share_enum(&n.0).unwrap();
    assert_eq!(
        shares,
        vec![
            row("C$", 0x8000_0000, ""),
            row("prn", 0x4000_0001, "lp"),
            row("IPC$", 0x8000_0003, "Remote \u{1f4c1}"),
        ]
    );
    assert_eq!(shares[1].base_type(), 1);

    // Without the ResumeHandle (a NULL pointer), and with trailing padding.
    let mut m = Ndr::default();
    m.u32(1).u32(1).u32(0x10).u32(1).u32(0x20).u32(1);
    m.u32(0x30).u32(0).u32(0x40).wstr("a").wstr("b");
    m.u32(1).u32(0).u32(0);
    m.0.extend_from_slice(&[0; 4]);
    assert_eq!(parse_share_enum(&m.0).unwrap(), vec![row("a", 0, "b")]);
}

#[test]
fn empty_and_null_containers() {
    // NULL container pointer.
    let mut n = Ndr::default();
    n.u32(1).u32(1).u32(0).u32(0).u32(0).u32(0);
    assert_eq!(parse_share_enum(&n.0).unwrap(), vec![]);
    // Container with a NULL Buffer.
    let mut n = Ndr::default();
    n.u32(1)
        .u32(1)
        .u32(0x20000)
        .u32(0)
        .u32(0)
        .u32(0)
        .u32(0)
        .u32(0);
    assert_eq!(parse_share_enum(&n.0).unwrap(), vec![]);
}

#[test]
fn werror_is_checked() {
    // ERROR_ACCESS_DENIED with a NULL container, as Windows answers an unprivileged level.
    let mut n = Ndr::default();
    n.u32(1).u32(1).u32(0).u32(0).u32(0).u32(5);
    assert_eq!(parse_share_enum(&n.0), Err(RpcClientError::Werror(5)));
    // ERROR_MORE_DATA with a partial list is not passed off as the whole list.
    let mut n = Ndr::default();
    n.u32(1).u32(1).u32(0x20000).u32(1).u32(0x20004).u32(1);
    n.u32(0x20008).u32(0).u32(0).wstr("a");
    n.u32(2).u32(0x2000c).u32(1).u32(ERROR_MORE_DATA);
    assert_eq!(
        parse_share_enum(&n.0),
        Err(RpcClientError::Werror(ERROR_MORE_DATA))
    );
}

#[test]
fn inconsistent_answers_are_rejected() {
    let ok = unhex(PIDL_NULL_COMMENT_RESP);
    let set = |at: usize, v: u32| {
        let mut b = ok.clone();
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        b
    };
    for (what, bad) in [
        ("level 2", set(0, 2)),
        ("discriminant differs", set(4, 2)),
        ("EntriesRead differs from max_count", set(12, 3)),
        ("max_count differs", set(20, 5)),
        ("max_count over the cap", set(20, 70_000)),
        ("name max_count huge", set(72, 0x7fff_ffff)),
        ("name offset non-zero", set(76, 1)),
        ("name actual > max", set(80, 6)),
    ] {
        assert!(parse_share_enum(&bad).is_err(), "{what}");
    }
    // A lone surrogate in a name.
    let mut bad = ok.clone();
    bad[84..86].copy_from_slice(&0xd800u16.to_le_bytes());
    assert!(parse_share_enum(&bad).is_err());
    // A huge count with almost nothing behind it allocates nothing large and fails.
    let mut n = Ndr::default();
    n.u32(1).u32(1).u32(1).u32(65_536).u32(1).u32(65_536);
    assert!(parse_share_enum(&n.0).is_err());
}

// ---- hostile input ----

#[test]
fn every_prefix_fails_without_panicking() {
    for fixture in [SMBD_ENUM1_RESP, PIDL_NULL_COMMENT_RESP] {
        let stub = unhex(fixture);
        assert!(parse_share_enum(&stub).is_ok());
        for n in 0..stub.len() {
            assert!(parse_share_enum(&stub[..n]).is_err(), "stub prefix {n}");
        }
    }

    let mut ep = bound_endpoint(vec![disk("p", "q")]);
    let frags = enum_fragments(&mut ep, 2);
    assert_eq!(frags.len(), 1);
    let resp = &frags[0];
    for n in 0..resp.len() {
        // A prefix is an incomplete fragment: wait for more, unless the header already
        // makes no sense (never, for a prefix of a valid PDU).
        assert_eq!(
            ResponseAssembler::new(4096).push(&resp[..n]),
            Ok(None),
            "{n}"
        );
        assert!(check_bind_ack(&resp[..n]).is_err());
    }

    let ack = bind_ack_pdu(&[(0, 0, pdu::NDR20)]);
    for n in 0..ack.len() {
        assert!(check_bind_ack(&ack[..n]).is_err(), "bind_ack prefix {n}");
    }
    // Truncated body with a consistent frag_length.
    for n in 16..ack.len() {
        let mut p = ack[..n].to_vec();
        p[8..10].copy_from_slice(&(n as u16).to_le_bytes());
        assert!(check_bind_ack(&p).is_err(), "short bind_ack body {n}");
    }
}

#[test]
fn garbage_never_panics() {
    // Deterministic xorshift so failures reproduce.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let stubs = [unhex(SMBD_ENUM1_RESP), unhex(PIDL_NULL_COMMENT_RESP)];
    let pdus = [
        bind_ack_pdu(&[(0, 0, pdu::NDR20)]),
        response_pdu(1, 3, &stubs[0]),
        fault_pdu(1, 5),
    ];
    for round in 0..20_000 {
        // Mutations of valid inputs reach deep into the decoders.
        let mut s = stubs[round % 2].clone();
        for _ in 0..1 + rnd() % 4 {
            let at = rnd() as usize % s.len();
            s[at] = rnd() as u8;
        }
        let _ = parse_share_enum(&s);
        let mut p = pdus[round % 3].clone();
        for _ in 0..1 + rnd() % 3 {
            let at = rnd() as usize % p.len();
            if (8..10).contains(&at) && rnd() % 4 != 0 {
                continue;
            }
            p[at] = rnd() as u8;
        }
        let _ = check_bind_ack(&p);
        let mut a = ResponseAssembler::new(1 << 16);
        let _ = a.push(&p);
        let _ = a.push(&p);
        // Pure noise of every small length.
        let len = round % 300;
        let noise: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        let _ = parse_share_enum(&noise);
        let _ = check_bind_ack(&noise);
        let _ = ResponseAssembler::new(1 << 16).push(&noise);
    }
}
