//! End-to-end tests of the srvsvc pipe: PDUs in, PDUs out, decoded here independently of the
//! crate's own decoders (explicit offsets into the C706 layouts).
//!
//! Stub fixtures marked "Samba" were produced by Samba 4.17's pidl-generated NDR code
//! (python3-samba: `samba.ndr.ndr_pack_in` / `ndr_pack_out` on `samba.dcerpc.srvsvc`
//! function objects), i.e. the very marshalling code smbclient and rpcclient use.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use smbq_rpc::pdu::{self, Bind, ContextElem, Header, NDR20, NDR64, SyntaxId, Uuid};
use smbq_rpc::srvsvc::SRVSVC_SYNTAX;
use smbq_rpc::{PipeEndpoint, RpcError, ShareInfo, ShareKind, ShareSource};
use smbq_wire::cursor::Writer;
use std::sync::Arc;

struct Shares(Vec<ShareInfo>);
impl ShareSource for Shares {
    fn shares(&self) -> Vec<ShareInfo> {
        self.0.clone()
    }
}

fn share(name: &str, comment: &str, path: &str) -> ShareInfo {
    ShareInfo {
        name: name.into(),
        kind: ShareKind::Disk,
        comment: comment.into(),
        path: path.into(),
    }
}

/// The shares behind the Samba fixtures (IPC$ is added by the endpoint).
fn fixture_shares() -> Vec<ShareInfo> {
    vec![
        share("public", "Public files", "C:\\srv\\public"),
        share("home$", "", "C:\\home"),
    ]
}

fn endpoint_with(shares: Vec<ShareInfo>) -> PipeEndpoint {
    PipeEndpoint::srvsvc("SMBQ".into(), Arc::new(Shares(shares)))
}

fn ctx(id: u16, abs: SyntaxId, ts: &[SyntaxId]) -> ContextElem {
    ContextElem {
        context_id: id,
        abstract_syntax: abs,
        transfer_syntaxes: ts.to_vec(),
    }
}

fn bind_pdu(call_id: u32, frag: u16, contexts: Vec<ContextElem>) -> Vec<u8> {
    let b = Bind {
        max_xmit_frag: frag,
        max_recv_frag: frag,
        assoc_group_id: 0,
        contexts,
    };
    let mut w = Writer::new();
    b.encode(&mut w);
    pdu::encode_pdu(Header::new(pdu::PTYPE_BIND, 3, call_id), w.as_slice())
}

fn request_pdu(
    call_id: u32,
    flags: u8,
    context_id: u16,
    opnum: u16,
    alloc_hint: u32,
    stub: &[u8],
) -> Vec<u8> {
    let r = pdu::Request {
        alloc_hint,
        context_id,
        opnum,
        object: None,
        stub,
    };
    let mut w = Writer::new();
    r.encode(&mut w);
    pdu::encode_pdu(
        Header::new(pdu::PTYPE_REQUEST, flags, call_id),
        w.as_slice(),
    )
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Every queued message, one read each.
fn drain(ep: &mut PipeEndpoint) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    loop {
        let m = ep.read(usize::MAX);
        if m.is_empty() {
            return v;
        }
        assert_eq!(ep.message_remaining(), 0);
        v.push(m);
    }
}

/// C706 12.6.3.1 header checks common to every server PDU; returns (ptype, flags, call_id).
fn check_header(p: &[u8]) -> (u8, u8, u32) {
    assert_eq!(&p[0..2], &[5, 0], "rpc version 5.0");
    assert_eq!(&p[4..8], &[0x10, 0, 0, 0], "little-endian drep");
    assert_eq!(le16(p, 8) as usize, p.len(), "frag_length");
    assert_eq!(le16(p, 10), 0, "auth_length");
    (p[2], p[3], le32(p, 12))
}

fn smbclient_bind(ep: &mut PipeEndpoint) {
    // Samba 4.17 cli_pipe.c binds with one context: srvsvc v3.0 over NDR v2, 4280-octet
    // fragments, a new association group, call id 1.
    ep.write(&bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]))
        .unwrap();
    let msgs = drain(ep);
    assert_eq!(msgs.len(), 1);
    assert_eq!(check_header(&msgs[0]).0, pdu::PTYPE_BIND_ACK);
}

/// Sends one request and reassembles the response stub, checking C706 fragment rules.
fn call(ep: &mut PipeEndpoint, call_id: u32, opnum: u16, stub: &[u8]) -> Vec<u8> {
    ep.write(&request_pdu(call_id, 3, 0, opnum, stub.len() as u32, stub))
        .unwrap();
    let msgs = drain(ep);
    assert!(!msgs.is_empty());
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let (ptype, flags, cid) = check_header(m);
        assert_eq!(
            ptype,
            pdu::PTYPE_RESPONSE,
            "fault instead of response: {m:02x?}"
        );
        assert_eq!(cid, call_id);
        assert_eq!(flags & 1 != 0, i == 0, "PFC_FIRST_FRAG only on the first");
        assert_eq!(
            flags & 2 != 0,
            i == msgs.len() - 1,
            "PFC_LAST_FRAG only on the last"
        );
        assert_eq!(le16(m, 20), 0, "context id");
        assert_eq!(m[22], 0, "cancel_count");
        let alloc_hint = le32(m, 16) as usize;
        out.extend_from_slice(&m[24..]);
        assert_eq!(alloc_hint, m.len() - 24 + remaining_after(&msgs[i + 1..]));
    }
    out
}

fn remaining_after(msgs: &[Vec<u8>]) -> usize {
    msgs.iter().map(|m| m.len() - 24).sum()
}

/// Returns the fault status after checking the fault PDU layout (C706 12.6.4.7).
fn expect_fault(msgs: &[Vec<u8>], call_id: u32) -> (u32, u8) {
    assert_eq!(msgs.len(), 1);
    let m = &msgs[0];
    let (ptype, flags, cid) = check_header(m);
    assert_eq!(ptype, pdu::PTYPE_FAULT);
    assert_eq!(cid, call_id);
    assert_eq!(m.len(), 32);
    (le32(m, 24), flags)
}

// ---- an NDR walker written for these tests, independent of smbq_rpc::ndr ----

struct Walk<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Walk<'_> {
    fn u32(&mut self) -> u32 {
        self.pos = self.pos.div_ceil(4) * 4;
        let v = le32(self.b, self.pos);
        self.pos += 4;
        v
    }
    fn string(&mut self) -> String {
        let max = self.u32();
        assert_eq!(self.u32(), 0, "offset");
        let actual = self.u32();
        assert_eq!(max, actual);
        let units: Vec<u16> = (0..actual as usize)
            .map(|i| le16(self.b, self.pos + 2 * i))
            .collect();
        self.pos += 2 * actual as usize;
        assert_eq!(units.last(), Some(&0), "NUL terminated");
        String::from_utf16(&units[..units.len() - 1]).unwrap()
    }
}

/// NetrShareEnum level 1 out: (entries (name, type, comment), total, resume, result).
type Row = (String, u32, String);

fn decode_enum1(stub: &[u8]) -> (Vec<Row>, u32, Option<u32>, u32) {
    let mut w = Walk { b: stub, pos: 0 };
    assert_eq!(w.u32(), 1, "InfoStruct.Level");
    assert_eq!(w.u32(), 1, "union discriminant");
    assert_ne!(w.u32(), 0, "Level1 container pointer");
    let count = w.u32();
    let mut rows = Vec::new();
    if w.u32() != 0 {
        assert_eq!(w.u32(), count, "conformant max_count");
        let mut ptrs = Vec::new();
        for _ in 0..count {
            let (n, t, c) = (w.u32(), w.u32(), w.u32());
            assert!(n != 0 && c != 0);
            ptrs.push(t);
        }
        for t in ptrs {
            let name = w.string();
            let comment = w.string();
            rows.push((name, t, comment));
        }
    }
    let total = w.u32();
    let resume = if w.u32() != 0 { Some(w.u32()) } else { None };
    let result = w.u32();
    assert_eq!(w.pos, stub.len(), "no trailing octets");
    (rows, total, resume, result)
}

const ENUM1_REQ: &str = "000002000c000000000000000c0000005c005c003100320037002e0030002e0030002e00310000000100000001000000040002000000000000000000ffffffff0800020000000000";
const ENUM1_RESP: &str = "01000000010000000000020003000000040002000300000008000200000000000c00020010000200000000801400020018000200030000801c0002000700000000000000070000007000750062006c0069006300000000000d000000000000000d0000005000750062006c00690063002000660069006c00650073000000000006000000000000000600000068006f006d00650024000000010000000000000001000000000000000500000000000000050000004900500043002400000000000b000000000000000b000000520065006d006f007400650020004900500043000000000003000000200002000000000000000000";
const GET2_REQ: &str = "000002000600000000000000060000005c005c0073007200760000000700000000000000070000005000550042004c00490043000000000002000000";
const GET2_RESP: &str = "020000000000020004000200000000000800020000000000ffffffff000000000c000200000000000700000000000000070000007000750062006c0069006300000000000d000000000000000d0000005000750062006c00690063002000660069006c0065007300000000000e000000000000000e00000043003a005c007300720076005c007000750062006c0069006300000000000000";
const GET1005_REQ: &str =
    "000000000700000000000000070000007000750062006c006900630000000000ed030000";
const GET1005_RESP: &str = "ed030000000002000000000000000000";
const SRV101_REQ: &str = "000002000600000000000000060000005c005c00730072007600000065000000";
const SRV101_RESP: &str = "6500000000000200f4010000040002000a00000000000000039000000800020005000000000000000500000053004d0042005100000000000100000000000000010000000000000000000000";

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap()
}

#[test]
fn smbclient_bind_gets_bind_ack() {
    let mut ep = endpoint_with(fixture_shares());
    ep.write(&bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]))
        .unwrap();
    let msgs = drain(&mut ep);
    assert_eq!(msgs.len(), 1);
    let a = &msgs[0];
    assert_eq!(check_header(a), (pdu::PTYPE_BIND_ACK, 3, 1));
    assert_eq!(le16(a, 16), 4280, "max_xmit_frag");
    assert_eq!(le16(a, 18), 4280, "max_recv_frag");
    assert_ne!(le32(a, 20), 0, "a new association group");
    assert_eq!(le16(a, 24), 13, "secondary address length with NUL");
    assert_eq!(&a[26..39], b"\\PIPE\\srvsvc\0");
    assert_eq!(a[39], 0, "pad to 4");
    assert_eq!(a[40], 1, "n_results");
    assert_eq!(le16(a, 44), 0, "acceptance");
    assert_eq!(le16(a, 46), 0, "reason");
    // NDR transfer syntax 8a885d04-1ceb-11c9-9fe8-08002b104860 version 2, in wire order.
    assert_eq!(
        &a[48..68],
        &unhex("045d888aeb1cc9119fe808002b10486002000000")[..]
    );
    assert_eq!(a.len(), 68);
}

#[test]
fn windows_style_bind_rejects_ndr64_and_acks_feature_negotiation() {
    let mut ep = endpoint_with(fixture_shares());
    let mut btfn = Uuid::from_fields(0x6cb71c2c, 0x9812, 0x4540, [0; 8]);
    btfn.0[8] = 0x03; // both features offered
    let unknown = SyntaxId {
        uuid: Uuid::from_fields(1, 2, 3, [4; 8]),
        version: 1,
    };
    ep.write(&bind_pdu(
        2,
        5840,
        vec![
            ctx(0, SRVSVC_SYNTAX, &[NDR20]),
            ctx(1, SRVSVC_SYNTAX, &[NDR64]),
            ctx(
                2,
                SRVSVC_SYNTAX,
                &[SyntaxId {
                    uuid: btfn,
                    version: 1,
                }],
            ),
            ctx(3, unknown, &[NDR20]),
        ],
    ))
    .unwrap();
    let msgs = drain(&mut ep);
    let a = &msgs[0];
    assert_eq!(check_header(a).0, pdu::PTYPE_BIND_ACK);
    assert_eq!(le16(a, 16), 4280, "capped at the ncacn_np fragment size");
    assert_eq!(a[40], 4);
    let res = |i: usize| {
        (
            le16(a, 44 + 24 * i),
            le16(a, 46 + 24 * i),
            &a[48 + 24 * i..68 + 24 * i],
        )
    };
    assert_eq!(res(0).0, 0);
    assert_eq!(
        (res(1).0, res(1).1),
        (2, 2),
        "NDR64: provider rejection, transfer syntaxes"
    );
    assert_eq!(res(1).2, &[0u8; 20]);
    // MS-RPCE 3.3.1.5.3: negotiate_ack with the supported subset in `reason`.
    assert_eq!((res(2).0, res(2).1), (3, 0x0002));
    assert_eq!(res(2).2, &[0u8; 20]);
    assert_eq!(
        (res(3).0, res(3).1),
        (2, 1),
        "abstract syntax not supported"
    );
}

#[test]
fn small_fragment_offer_is_raised_to_2048() {
    let mut ep = endpoint_with(vec![]);
    ep.write(&bind_pdu(1, 1000, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]))
        .unwrap();
    let a = &drain(&mut ep)[0];
    assert_eq!((le16(a, 16), le16(a, 18)), (2048, 2048));
}

#[test]
fn share_enum_level1_matches_samba_and_decodes() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let stub = call(&mut ep, 2, 15, &unhex(ENUM1_REQ));
    assert_eq!(
        hex::encode(&stub),
        ENUM1_RESP,
        "byte-identical to Samba's NDR"
    );
    let (rows, total, resume, result) = decode_enum1(&stub);
    assert_eq!(
        rows,
        vec![
            ("public".to_string(), 0, "Public files".to_string()),
            ("home$".to_string(), 0x8000_0000, String::new()),
            ("IPC$".to_string(), 0x8000_0003, "Remote IPC".to_string()),
        ]
    );
    assert_eq!((total, resume, result), (3, Some(0), 0));
}

#[test]
fn sticky_enum_leaves_out_special_shares() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let (rows, total, _, result) = decode_enum1(&call(&mut ep, 2, 36, &unhex(ENUM1_REQ)));
    assert_eq!(
        rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["public"]
    );
    assert_eq!((total, result), (1, 0));
}

/// NetrShareEnum request at `level` with no server name and no resume handle.
fn enum_req(level: u32, arm: bool) -> Vec<u8> {
    let mut v = Vec::new();
    for x in [0, level, level] {
        v.extend_from_slice(&u32::to_le_bytes(x));
    }
    if arm {
        // container pointer, EntriesRead 0, NULL buffer
        for x in [0x0002_0000, 0, 0] {
            v.extend_from_slice(&u32::to_le_bytes(x));
        }
    }
    v.extend_from_slice(&u32::MAX.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v
}

#[test]
fn share_enum_level2_and_unknown_levels() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let s = call(&mut ep, 2, 15, &enum_req(2, true));
    let mut w = Walk { b: &s, pos: 0 };
    assert_eq!((w.u32(), w.u32()), (2, 2));
    assert_ne!(w.u32(), 0);
    assert_eq!(w.u32(), 3);
    assert_ne!(w.u32(), 0);
    assert_eq!(w.u32(), 3);
    let mut passwd_ptrs = Vec::new();
    for _ in 0..3 {
        let f: Vec<u32> = (0..8).map(|_| w.u32()).collect();
        assert_eq!((f[3], f[4], f[5]), (0, u32::MAX, 0));
        passwd_ptrs.push(f[7]);
    }
    assert_eq!(passwd_ptrs, [0, 0, 0], "no share passwords");
    assert_eq!(
        (w.string(), w.string(), w.string()),
        (
            "public".into(),
            "Public files".into(),
            "C:\\srv\\public".into()
        )
    );
    // Level 3 has no arm in either IDL: discriminant, then straight to TotalEntries.
    let s = call(&mut ep, 3, 15, &enum_req(3, false));
    assert_eq!(
        s,
        unhex(
            "03000000030000000000000000000000 7c000000"
                .replace(' ', "")
                .as_str()
        )
    );
    // Level 503 has an arm (MS-SRVS) but is not served: NULL container, ERROR_INVALID_LEVEL.
    let s = call(&mut ep, 4, 15, &enum_req(503, true));
    assert_eq!(le32(&s, 8), 0);
    assert_eq!(le32(&s, s.len() - 4), 124);
}

#[test]
fn share_get_info_matches_samba() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    assert_eq!(
        hex::encode(call(&mut ep, 2, 16, &unhex(GET2_REQ))),
        GET2_RESP
    );
    assert_eq!(
        hex::encode(call(&mut ep, 3, 16, &unhex(GET1005_REQ))),
        GET1005_RESP
    );
    // Unknown share at a served level: NULL info, NERR_NetNameNotFound.
    let mut req = unhex(GET2_REQ);
    let at = req.len() - 10; // the 'C' of "PUBLIC"
    req[at] = b'X';
    assert_eq!(
        call(&mut ep, 4, 16, &req),
        unhex("0200000000000000 06090000".replace(' ', "").as_str())
    );
    // Level 7 is in neither union: discriminant only, ERROR_INVALID_LEVEL.
    let mut req = unhex(GET2_REQ);
    let n = req.len();
    req[n - 4] = 7;
    assert_eq!(call(&mut ep, 5, 16, &req), unhex("070000007c000000"));
}

#[test]
fn server_get_info_101_matches_samba() {
    let mut ep = endpoint_with(vec![]);
    smbclient_bind(&mut ep);
    assert_eq!(
        hex::encode(call(&mut ep, 2, 21, &unhex(SRV101_REQ))),
        SRV101_RESP
    );
}

fn many_shares(n: usize) -> Vec<ShareInfo> {
    (0..n)
        .map(|i| {
            share(
                &format!("share{i:03}"),
                &format!("comment number {i} {}", "x".repeat(i % 17)),
                "/p",
            )
        })
        .collect()
}

#[test]
fn large_response_is_fragmented_to_max_xmit_frag() {
    let mut ep = endpoint_with(many_shares(100));
    ep.write(&bind_pdu(1, 2048, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]))
        .unwrap();
    drain(&mut ep);
    ep.write(&request_pdu(7, 3, 0, 15, 0, &unhex(ENUM1_REQ)))
        .unwrap();
    let msgs = drain(&mut ep);
    assert!(msgs.len() >= 4, "{} fragments", msgs.len());
    for m in &msgs {
        assert!(m.len() <= 2048);
    }
    for m in &msgs[..msgs.len() - 1] {
        assert_eq!(
            (m.len() - 24) % 16,
            0,
            "non-final stub chunks are 16-octet multiples"
        );
    }
    let mut stub = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let (_, flags, cid) = check_header(m);
        assert_eq!(cid, 7);
        assert_eq!(
            flags & 3,
            u8::from(i == 0) | (u8::from(i == msgs.len() - 1) << 1)
        );
        assert_eq!(
            le32(m, 16) as usize,
            m.len() - 24 + remaining_after(&msgs[i + 1..])
        );
        stub.extend_from_slice(&m[24..]);
    }
    let (rows, total, _, result) = decode_enum1(&stub);
    assert_eq!((rows.len(), total, result), (101, 101, 0));
    assert_eq!(
        rows[42],
        (
            "share042".into(),
            0,
            format!("comment number 42 {}", "x".repeat(42 % 17))
        )
    );
}

#[test]
fn fragmented_request_is_reassembled() {
    let req = unhex(ENUM1_REQ);
    let mut whole = endpoint_with(fixture_shares());
    smbclient_bind(&mut whole);
    let expected = call(&mut whole, 2, 15, &req);

    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let (a, rest) = req.split_at(20);
    let (b, c) = rest.split_at(20);
    let n = req.len() as u32;
    let mut bytes = request_pdu(2, 1, 0, 15, n, a);
    bytes.extend(request_pdu(2, 0, 0, 15, n - 20, b));
    bytes.extend(request_pdu(2, 2, 0, 15, n - 40, c));
    // Deliver byte by byte too: frames must be found across arbitrary write boundaries.
    for byte in &bytes[..bytes.len() - 1] {
        ep.write(std::slice::from_ref(byte)).unwrap();
        assert_eq!(ep.pending_output(), 0);
    }
    ep.write(&bytes[bytes.len() - 1..]).unwrap();
    let msgs = drain(&mut ep);
    assert_eq!(msgs.len(), 1);
    assert_eq!(&msgs[0][24..], &expected[..]);
}

#[test]
fn unknown_opnum_faults_and_pipe_stays_usable() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    ep.write(&request_pdu(5, 3, 0, 99, 0, &[])).unwrap();
    let (status, flags) = expect_fault(&drain(&mut ep), 5);
    assert_eq!(status, 0x1c01_0002, "nca_s_op_rng_error");
    assert_eq!(flags, 0x23, "first|last|did_not_execute");
    assert_eq!(decode_enum1(&call(&mut ep, 6, 15, &unhex(ENUM1_REQ))).3, 0);
}

#[test]
fn bad_stubs_fault_with_bad_stub_data() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let req = unhex(ENUM1_REQ);
    for (i, n) in (0..req.len()).step_by(3).enumerate() {
        let call_id = 10 + i as u32;
        ep.write(&request_pdu(call_id, 3, 0, 15, 0, &req[..n]))
            .unwrap();
        assert_eq!(
            expect_fault(&drain(&mut ep), call_id).0,
            0x6f7,
            "prefix {n}"
        );
    }
    // Union discriminant differing from Level.
    let mut bad = unhex(ENUM1_REQ);
    bad[44] = 2;
    ep.write(&request_pdu(99, 3, 0, 15, 0, &bad)).unwrap();
    assert_eq!(expect_fault(&drain(&mut ep), 99).0, 0x6f7);
    assert!(!ep.is_closed());
}

#[test]
fn unknown_context_faults_with_unk_if() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    ep.write(&request_pdu(3, 3, 9, 15, 0, &unhex(ENUM1_REQ)))
        .unwrap();
    let msgs = drain(&mut ep);
    assert_eq!(expect_fault(&msgs, 3).0, 0x1c01_0003);
    assert_eq!(le16(&msgs[0], 20), 9);
}

#[test]
fn alter_context_adds_a_context() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let b = Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 4280,
        assoc_group_id: 0,
        contexts: vec![ctx(1, SRVSVC_SYNTAX, &[NDR64, NDR20])],
    };
    let mut w = Writer::new();
    b.encode(&mut w);
    ep.write(&pdu::encode_pdu(
        Header::new(pdu::PTYPE_ALTER_CONTEXT, 3, 2),
        w.as_slice(),
    ))
    .unwrap();
    let msgs = drain(&mut ep);
    let a = &msgs[0];
    assert_eq!(check_header(a), (pdu::PTYPE_ALTER_CONTEXT_RESP, 3, 2));
    assert_eq!(le16(a, 24), 0, "no secondary address in alter_context_resp");
    assert_eq!(a[28], 1);
    assert_eq!(le16(a, 32), 0, "accepted");
    assert_eq!(
        &a[36..56],
        &unhex("045d888aeb1cc9119fe808002b10486002000000")[..]
    );
    ep.write(&request_pdu(3, 3, 1, 15, 0, &unhex(ENUM1_REQ)))
        .unwrap();
    assert_eq!(check_header(&drain(&mut ep)[0]).0, pdu::PTYPE_RESPONSE);
}

#[test]
fn request_before_bind_faults_and_closes() {
    let mut ep = endpoint_with(vec![]);
    ep.write(&request_pdu(1, 3, 0, 15, 0, &unhex(ENUM1_REQ)))
        .unwrap();
    assert_eq!(expect_fault(&drain(&mut ep), 1).0, 0x1c01_000b);
    assert!(ep.is_closed());
    assert_eq!(
        ep.write(&bind_pdu(2, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])])),
        Err(RpcError::Closed)
    );
}

#[test]
fn second_bind_and_authenticated_bind_are_nakked() {
    let mut ep = endpoint_with(vec![]);
    smbclient_bind(&mut ep);
    ep.write(&bind_pdu(2, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]))
        .unwrap();
    let m = &drain(&mut ep)[0];
    assert_eq!(check_header(m), (pdu::PTYPE_BIND_NAK, 3, 2));
    assert_eq!(m.len(), 24);
    assert_eq!(&m[16..21], &[0, 0, 1, 5, 0], "reason 0, versions {{5.0}}");

    let mut ep = endpoint_with(vec![]);
    let mut p = bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]);
    // append an 8-octet sec_trailer and 16-octet verifier, as an NTLMSSP bind would
    p.extend_from_slice(&[10, 2, 0, 0, 0, 0, 0, 0]);
    p.extend_from_slice(&[0; 16]);
    let n = p.len() as u16;
    p[8..10].copy_from_slice(&n.to_le_bytes());
    p[10..12].copy_from_slice(&16u16.to_le_bytes());
    ep.write(&p).unwrap();
    let m = &drain(&mut ep)[0];
    assert_eq!(check_header(m).0, pdu::PTYPE_BIND_NAK);
    assert_eq!(le16(m, 16), 8, "authentication type not recognized");
}

#[test]
fn big_endian_is_refused() {
    let mut ep = endpoint_with(vec![]);
    smbclient_bind(&mut ep);
    let mut p = request_pdu(0x0102_0304, 3, 0, 15, 0, &unhex(ENUM1_REQ));
    let len = p.len() as u16;
    p[4] = 0x00;
    p[8..10].copy_from_slice(&len.to_be_bytes());
    p[12..16].copy_from_slice(&0x0102_0304u32.to_be_bytes());
    ep.write(&p).unwrap();
    let (status, _) = expect_fault(&drain(&mut ep), 0x0102_0304);
    assert_eq!(status, 0x1c01_0017, "nca_s_unsupported_type");
}

#[test]
fn oversized_reassembly_is_refused() {
    let mut ep = endpoint_with(vec![]);
    smbclient_bind(&mut ep);
    ep.write(&request_pdu(4, 1, 0, 15, 2 << 20, &[0; 16]))
        .unwrap();
    assert_eq!(expect_fault(&drain(&mut ep), 4).0, 0x1c00_001b);

    let mut ep = endpoint_with(vec![]);
    smbclient_bind(&mut ep);
    let chunk = vec![0u8; 4000];
    ep.write(&request_pdu(4, 1, 0, 15, 0, &chunk)).unwrap();
    let mut faulted = false;
    for _ in 0..300 {
        if ep.write(&request_pdu(4, 0, 0, 15, 0, &chunk)).is_err() {
            break;
        }
        if ep.pending_output() > 0 {
            faulted = true;
            break;
        }
    }
    assert!(faulted);
    assert_eq!(expect_fault(&drain(&mut ep), 4).0, 0x1c00_001b);
    assert!(ep.is_closed());
}

#[test]
fn continuation_without_first_fragment_is_a_protocol_error() {
    let mut ep = endpoint_with(vec![]);
    smbclient_bind(&mut ep);
    ep.write(&request_pdu(4, 2, 0, 15, 0, &[0; 8])).unwrap();
    assert_eq!(expect_fault(&drain(&mut ep), 4).0, 0x1c01_000b);
    assert!(ep.is_closed());
}

#[test]
fn unframeable_input_is_an_error() {
    let mut ep = endpoint_with(vec![]);
    let mut p = bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]);
    p[8] = 8;
    p[9] = 0;
    assert!(matches!(ep.write(&p), Err(RpcError::Malformed(_))));
    assert!(ep.is_closed());

    let mut ep = endpoint_with(vec![]);
    let mut p = request_pdu(1, 3, 0, 15, 0, &[]);
    p[0] = 4;
    assert!(matches!(ep.write(&p), Err(RpcError::Malformed(_))));

    // A bind for RPC version 4 gets bind_nak(protocol version not supported).
    let mut ep = endpoint_with(vec![]);
    let mut p = bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]);
    p[0] = 4;
    ep.write(&p).unwrap();
    let m = &drain(&mut ep)[0];
    assert_eq!((m[2], le16(m, 16)), (pdu::PTYPE_BIND_NAK, 4));
}

#[test]
fn partial_reads_and_transceive() {
    let mut ep = endpoint_with(fixture_shares());
    let bind = bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]);
    let head = ep.transceive(&bind, 10).unwrap();
    assert_eq!(head.len(), 10);
    assert_eq!(ep.message_remaining(), 58);
    assert_eq!(ep.transceive(&bind, 10), Err(RpcError::PipeBusy));
    let tail = ep.read(1000);
    assert_eq!(tail.len(), 58);
    assert_eq!(ep.message_remaining(), 0);
    assert_eq!(ep.pending_output(), 0);
    let resp = ep
        .transceive(&request_pdu(2, 3, 0, 15, 0, &unhex(ENUM1_REQ)), 4280)
        .unwrap();
    assert_eq!(hex::encode(&resp[24..]), ENUM1_RESP);
    assert!(ep.read(100).is_empty());
}

#[test]
fn orphaned_drops_the_partial_call() {
    let mut ep = endpoint_with(fixture_shares());
    smbclient_bind(&mut ep);
    let req = unhex(ENUM1_REQ);
    ep.write(&request_pdu(2, 1, 0, 15, 0, &req[..8])).unwrap();
    ep.write(&pdu::encode_pdu(
        Header::new(pdu::PTYPE_ORPHANED, 3, 2),
        &[],
    ))
    .unwrap();
    assert_eq!(decode_enum1(&call(&mut ep, 3, 15, &req)).3, 0);
}

#[test]
fn mutated_pdus_never_panic() {
    // Deterministic xorshift so failures reproduce.
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let bind = bind_pdu(1, 4280, vec![ctx(0, SRVSVC_SYNTAX, &[NDR20])]);
    let reqs = [
        request_pdu(2, 3, 0, 15, 0, &unhex(ENUM1_REQ)),
        request_pdu(3, 3, 0, 16, 0, &unhex(GET2_REQ)),
        request_pdu(4, 3, 0, 21, 0, &unhex(SRV101_REQ)),
    ];
    for round in 0..3000 {
        let mut ep = endpoint_with(fixture_shares());
        let target = round % 4;
        let mut pdus: Vec<Vec<u8>> = std::iter::once(bind.clone())
            .chain(reqs.iter().cloned())
            .collect();
        let p = &mut pdus[target];
        for _ in 0..(1 + rnd() % 4) {
            let at = (rnd() as usize) % p.len();
            // keep frag_length intact most of the time so the mutation reaches the body
            if (8..10).contains(&at) && rnd() % 4 != 0 {
                continue;
            }
            p[at] = rnd() as u8;
        }
        if rnd() % 8 == 0 {
            let cut = (rnd() as usize) % p.len();
            p.truncate(cut);
        }
        for p in &pdus {
            if ep.write(p).is_err() {
                break;
            }
            while !ep.read(1 + (rnd() as usize) % 5000).is_empty() {}
        }
    }
}

#[test]
fn supported_pipe_names() {
    for n in [
        "srvsvc",
        "SRVSVC",
        "\\PIPE\\srvsvc",
        "\\pipe\\SrvSvc",
        "\\srvsvc",
    ] {
        assert!(PipeEndpoint::is_supported_pipe(n), "{n}");
    }
    for n in [
        "lsarpc",
        "srvsvc2",
        "PIPE\\srvsvc\\",
        "",
        "\\PIPE\\",
        "\\PIPE\\\\srvsvc",
    ] {
        assert!(!PipeEndpoint::is_supported_pipe(n), "{n}");
    }
}
