//! A srvsvc pipe endpoint (smbq-rpc) and valid DCE/RPC PDUs for it (C706 chapter 12, MS-SRVS).

use std::sync::Arc;

use smbq_rpc::ndr::NdrWriter;
use smbq_rpc::pdu::{
    BIND_TIME_FEATURE_PREFIX, Bind, ContextElem, Header, NDR20, PFC_FIRST_FRAG, PFC_LAST_FRAG,
    PTYPE_BIND, PTYPE_REQUEST, Request, SyntaxId, Uuid, encode_pdu,
};
use smbq_rpc::srvsvc::{SRVSVC_SYNTAX, opnum};
use smbq_rpc::{PipeEndpoint, ShareInfo, ShareKind, ShareSource};
use smbq_wire::Writer;

pub const SERVER_NAME: &str = "FUZZSRV";

struct Shares;

impl ShareSource for Shares {
    fn shares(&self) -> Vec<ShareInfo> {
        let share = |name: &str, kind| ShareInfo {
            name: name.into(),
            kind,
            comment: format!("{name} comment"),
            path: format!("C:\\srv\\{name}"),
        };
        vec![
            share("data", ShareKind::Disk),
            share("IPC$", ShareKind::Ipc),
            share("admin$", ShareKind::Disk),
        ]
    }
}

pub fn endpoint() -> PipeEndpoint {
    PipeEndpoint::srvsvc(SERVER_NAME.into(), Arc::new(Shares))
}

/// A bind offering srvsvc over NDR20 (context 0) and bind-time feature negotiation (context 1),
/// as Windows clients send.
pub fn bind(call_id: u32) -> Vec<u8> {
    let mut btfn = BIND_TIME_FEATURE_PREFIX.0;
    btfn[8] = 0x03;
    let b = Bind {
        max_xmit_frag: 4280,
        max_recv_frag: 4280,
        assoc_group_id: 0,
        contexts: vec![
            ContextElem {
                context_id: 0,
                abstract_syntax: SRVSVC_SYNTAX,
                transfer_syntaxes: vec![NDR20],
            },
            ContextElem {
                context_id: 1,
                abstract_syntax: SRVSVC_SYNTAX,
                transfer_syntaxes: vec![SyntaxId {
                    uuid: Uuid(btfn),
                    version: 1,
                }],
            },
        ],
    };
    let mut w = Writer::new();
    b.encode(&mut w);
    encode_pdu(
        Header::new(PTYPE_BIND, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id),
        w.as_slice(),
    )
}

/// A single-fragment request on context 0.
pub fn request(call_id: u32, opnum: u16, stub: &[u8]) -> Vec<u8> {
    let req = Request {
        alloc_hint: u32::try_from(stub.len()).unwrap_or(u32::MAX),
        context_id: 0,
        opnum,
        object: None,
        stub,
    };
    let mut w = Writer::new();
    req.encode(&mut w);
    encode_pdu(
        Header::new(PTYPE_REQUEST, PFC_FIRST_FRAG | PFC_LAST_FRAG, call_id),
        w.as_slice(),
    )
}

/// NetrShareEnum (MS-SRVS 3.1.4.8) at `level` with an empty container, as `smbclient -L` asks.
pub fn share_enum_stub(level: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.pointer(true).wstring(&format!("\\\\{SERVER_NAME}"));
    w.u32(level).u32(level).pointer(true).u32(0).pointer(false);
    w.u32(u32::MAX).pointer(true).u32(0);
    w.into_vec()
}

/// NetrShareGetInfo (MS-SRVS 3.1.4.10).
pub fn share_get_info_stub(share: &str, level: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.pointer(true)
        .wstring(&format!("\\\\{SERVER_NAME}"))
        .wstring(share)
        .u32(level);
    w.into_vec()
}

/// NetrServerGetInfo (MS-SRVS 3.1.4.17).
pub fn server_get_info_stub(level: u32) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.pointer(true)
        .wstring(&format!("\\\\{SERVER_NAME}"))
        .u32(level);
    w.into_vec()
}

/// A whole valid conversation: bind, then the three calls.
pub fn conversation() -> Vec<Vec<u8>> {
    vec![
        bind(1),
        request(2, opnum::NETR_SHARE_ENUM, &share_enum_stub(1)),
        request(
            3,
            opnum::NETR_SHARE_GET_INFO,
            &share_get_info_stub("data", 2),
        ),
        request(4, opnum::NETR_SERVER_GET_INFO, &server_get_info_stub(101)),
    ]
}
