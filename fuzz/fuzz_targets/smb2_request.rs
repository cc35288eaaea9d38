//! Every SMB2 message body decoder in smbq-wire (MS-SMB2 2.2.3 - 2.2.40).
//!
//! Input: byte 0 picks the command (`% 19`), the rest is the body after a valid 64-byte header.
//! Requests are always decoded (the server's attack surface); when bit 7 of byte 0 is set the
//! response decoder of the same command runs too (what smbq's client parses). Whatever decodes
//! must re-encode to a message that decodes to the same value; nested buffers (create contexts,
//! SET_INFO classes, VALIDATE_NEGOTIATE_INFO, notify entries) go through their own codecs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_fuzz::{fscc, smb2};
use smbq_wire::cancel::CancelRequest;
use smbq_wire::change_notify::{
    ChangeNotifyRequest, ChangeNotifyResponse, decode_notify_entries, encode_notify_entries,
};
use smbq_wire::close::{CloseRequest, CloseResponse};
use smbq_wire::create::{CreateRequest, CreateResponse};
use smbq_wire::create_context::{
    self, CreateContextTag, Dh2cRequest, Dh2qRequest, Dh2qResponse, Lease, MxAcRequest,
    MxAcResponse, QFidResponse, contexts_to_bytes,
};
use smbq_wire::echo::{EchoRequest, EchoResponse};
use smbq_wire::error_response::ErrorResponse;
use smbq_wire::flush::{FlushRequest, FlushResponse};
use smbq_wire::ioctl::{
    CtlCode, IoctlRequest, IoctlResponse, ValidateNegotiateInfoRequest,
    ValidateNegotiateInfoResponse,
};
use smbq_wire::lock::{LockRequest, LockResponse};
use smbq_wire::logoff::{LogoffRequest, LogoffResponse};
use smbq_wire::negotiate::{NegotiateRequest, NegotiateResponse};
use smbq_wire::oplock_break::{OplockBreakAck, OplockBreakFromServer};
use smbq_wire::query_directory::{QueryDirectoryRequest, QueryDirectoryResponse};
use smbq_wire::query_info::{QueryInfoRequest, QueryInfoResponse};
use smbq_wire::read::{ReadRequest, ReadResponse};
use smbq_wire::session_setup::{SessionSetupRequest, SessionSetupResponse};
use smbq_wire::set_info::{SetInfoRequest, SetInfoResponse};
use smbq_wire::tree_connect::{
    self, TreeConnectRequest, TreeConnectResponse, TreeDisconnectRequest, TreeDisconnectResponse,
};
use smbq_wire::write::{WriteRequest, WriteResponse};
use smbq_wire::{Command, HEADER_LEN, Writer};

/// decode(encode(decode(msg))) == decode(msg), and the encoding is canonical: encoding the
/// re-decoded value gives the same bytes. `$norm` applies a normalization the encoder documents
/// (a flag it derives from other fields). Evaluates to the first decode's result.
macro_rules! rt {
    ($ty:ident, $msg:expr) => {
        rt!($ty, decode, $msg, |_| {})
    };
    ($ty:ident, $decode:ident, $msg:expr) => {
        rt!($ty, $decode, $msg, |_| {})
    };
    ($ty:ident, $decode:ident, $msg:expr, $norm:expr) => {{
        let msg: &[u8] = $msg;
        let a = $ty::$decode(msg);
        if let Ok(a) = &a {
            let enc = reencode(msg, |w| a.encode(w));
            match $ty::$decode(&enc) {
                Ok(b) => {
                    let mut want = a.clone();
                    ($norm)(&mut want);
                    assert_eq!(
                        want,
                        b,
                        "{}::{} round trip",
                        stringify!($ty),
                        stringify!($decode)
                    );
                    let again = reencode(msg, |w| b.encode(w));
                    assert_eq!(enc, again, "{} encoding is not canonical", stringify!($ty));
                }
                Err(e) => panic!("{} re-encoding does not decode: {e:?}", stringify!($ty)),
            }
        }
        a
    }};
}

/// The input's header followed by the body `body` writes.
fn reencode(msg: &[u8], body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::new();
    w.bytes(&msg[..HEADER_LEN]);
    body(&mut w);
    w.into_vec()
}

/// The encoder derives EXTENSION_PRESENT from whether there are contexts (MS-SMB2 2.2.9), so a
/// request claiming the extension with zero contexts comes back without the flag.
fn tree_connect_norm(r: &mut TreeConnectRequest<'_>) {
    if r.contexts.is_empty() {
        r.flags &= !tree_connect::flags::EXTENSION_PRESENT;
    }
}

/// The same for a payload codec with `decode(&[u8])` and `to_bytes()`.
macro_rules! rt_bytes {
    ($ty:ident, $data:expr) => {{
        if let Ok(a) = $ty::decode($data) {
            assert_eq!(
                $ty::decode(&a.to_bytes()).ok(),
                Some(a),
                "{} round trip",
                stringify!($ty)
            );
        }
    }};
}

fn create_contexts(list: &[u8]) {
    let Ok(ctxs) = create_context::parse_contexts(list) else {
        return;
    };
    let enc = contexts_to_bytes(&ctxs);
    assert_eq!(
        create_context::parse_contexts(&enc).ok().as_ref(),
        Some(&ctxs),
        "create contexts"
    );
    for c in &ctxs {
        let tag = c.tag();
        if tag == CreateContextTag::MXAC {
            rt_bytes!(MxAcRequest, c.data);
            rt_bytes!(MxAcResponse, c.data);
        } else if tag == CreateContextTag::QFID {
            rt_bytes!(QFidResponse, c.data);
        } else if tag == CreateContextTag::DH2Q {
            rt_bytes!(Dh2qRequest, c.data);
            rt_bytes!(Dh2qResponse, c.data);
        } else if tag == CreateContextTag::DH2C {
            rt_bytes!(Dh2cRequest, c.data);
        } else if tag == CreateContextTag::RQLS {
            rt_bytes!(Lease, c.data);
        } else if tag == CreateContextTag::DHNC {
            let _ = create_context::decode_dhnc(c.data);
        } else if tag == CreateContextTag::APP_INSTANCE_ID {
            let _ = create_context::decode_app_instance_id(c.data);
        } else if tag == CreateContextTag::APP_INSTANCE_VERSION {
            let _ = create_context::decode_app_instance_version(c.data);
        }
    }
}

fn request(cmd: Command, msg: &[u8]) {
    match cmd {
        Command::NEGOTIATE => {
            if let Ok(r) = rt!(NegotiateRequest, msg) {
                for c in &r.contexts {
                    let _ = c.netname();
                }
            }
        }
        Command::SESSION_SETUP => drop(rt!(SessionSetupRequest, msg)),
        Command::LOGOFF => drop(rt!(LogoffRequest, msg)),
        Command::TREE_CONNECT => {
            if let Ok(r) = rt!(TreeConnectRequest, decode, msg, tree_connect_norm) {
                let _ = r.path();
            }
            drop(rt!(TreeConnectRequest, decode_pre_311, msg));
        }
        Command::TREE_DISCONNECT => drop(rt!(TreeDisconnectRequest, msg)),
        Command::CREATE => {
            if let Ok(r) = rt!(CreateRequest, msg) {
                let _ = r.name_string();
                create_contexts(r.contexts);
            }
        }
        Command::CLOSE => drop(rt!(CloseRequest, msg)),
        Command::FLUSH => drop(rt!(FlushRequest, msg)),
        Command::READ => drop(rt!(ReadRequest, msg)),
        Command::WRITE => {
            let decoded = rt!(WriteRequest, msg);
            let range = WriteRequest::data_range(msg);
            match (&decoded, range) {
                (Ok(r), Ok(range)) => {
                    assert_eq!(
                        msg.get(range),
                        Some(r.data),
                        "data_range disagrees with decode"
                    )
                }
                (Err(_), Err(_)) => {}
                (d, r) => panic!("WriteRequest::decode {d:?} but data_range {r:?}"),
            }
        }
        Command::LOCK => drop(rt!(LockRequest, msg)),
        Command::IOCTL => {
            if let Ok(r) = rt!(IoctlRequest, msg)
                && r.ctl_code == CtlCode::VALIDATE_NEGOTIATE_INFO
                && let Ok(v) = ValidateNegotiateInfoRequest::decode(r.input)
            {
                let mut w = Writer::new();
                v.encode(&mut w);
                let again = ValidateNegotiateInfoRequest::decode(w.as_slice());
                assert_eq!(again.ok(), Some(v), "VALIDATE_NEGOTIATE_INFO round trip");
            }
        }
        Command::CANCEL => drop(rt!(CancelRequest, msg)),
        Command::ECHO => drop(rt!(EchoRequest, msg)),
        Command::QUERY_DIRECTORY => {
            if let Ok(r) = rt!(QueryDirectoryRequest, msg) {
                let _ = r.file_name_string();
            }
        }
        Command::CHANGE_NOTIFY => drop(rt!(ChangeNotifyRequest, msg)),
        Command::QUERY_INFO => {
            if let Ok(r) = rt!(QueryInfoRequest, msg) {
                fscc::check(r.info_type, r.file_info_class, r.input);
            }
        }
        Command::SET_INFO => {
            if let Ok(r) = rt!(SetInfoRequest, msg) {
                fscc::check(r.info_type, r.file_info_class, r.buffer);
            }
        }
        Command::OPLOCK_BREAK => drop(rt!(OplockBreakAck, msg)),
        _ => unreachable!("command is taken modulo 19"),
    }
}

fn response(cmd: Command, msg: &[u8]) {
    if let Ok(e) = rt!(ErrorResponse, msg) {
        let _ = e.contexts();
        let _ = e.buffer_too_small_required();
    }
    match cmd {
        Command::NEGOTIATE => drop(rt!(NegotiateResponse, msg)),
        Command::SESSION_SETUP => drop(rt!(SessionSetupResponse, msg)),
        Command::LOGOFF => drop(rt!(LogoffResponse, msg)),
        Command::TREE_CONNECT => drop(rt!(TreeConnectResponse, msg)),
        Command::TREE_DISCONNECT => drop(rt!(TreeDisconnectResponse, msg)),
        Command::CREATE => {
            if let Ok(r) = rt!(CreateResponse, msg) {
                create_contexts(r.contexts);
            }
        }
        Command::CLOSE => drop(rt!(CloseResponse, msg)),
        Command::FLUSH => drop(rt!(FlushResponse, msg)),
        Command::READ => drop(rt!(ReadResponse, msg)),
        Command::WRITE => drop(rt!(WriteResponse, msg)),
        Command::LOCK => drop(rt!(LockResponse, msg)),
        Command::IOCTL => {
            if let Ok(r) = rt!(IoctlResponse, msg)
                && let Ok(v) = ValidateNegotiateInfoResponse::decode(r.output)
            {
                let mut w = Writer::new();
                v.encode(&mut w);
                let again = ValidateNegotiateInfoResponse::decode(w.as_slice());
                assert_eq!(
                    again.ok(),
                    Some(v),
                    "VALIDATE_NEGOTIATE_INFO response round trip"
                );
            }
        }
        Command::CANCEL => {}
        Command::ECHO => drop(rt!(EchoResponse, msg)),
        Command::QUERY_DIRECTORY => {
            if let Ok(r) = rt!(QueryDirectoryResponse, msg) {
                // The class is not in the response; try each one the server can send.
                for class in [1u8, 2, 3, 12, 37, 38, 60] {
                    fscc::check_file(smbq_wire::fscc::FileInfoClass(class), r.buffer);
                }
            }
        }
        Command::CHANGE_NOTIFY => {
            if let Ok(r) = rt!(ChangeNotifyResponse, msg)
                && let Ok(entries) = decode_notify_entries(r.output)
            {
                let mut w = Writer::new();
                encode_notify_entries(entries.iter().map(|(a, n)| (*a, n.as_str())), &mut w);
                let again = decode_notify_entries(w.as_slice());
                assert_eq!(again.ok(), Some(entries), "notify entries round trip");
            }
        }
        Command::QUERY_INFO => drop(rt!(QueryInfoResponse, msg)),
        Command::SET_INFO => drop(rt!(SetInfoResponse, msg)),
        Command::OPLOCK_BREAK => drop(rt!(OplockBreakFromServer, msg)),
        _ => unreachable!("command is taken modulo 19"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    let cmd = Command(u16::from(sel % 19));
    let mut msg = smb2::message(&smb2::header(cmd, 1, 0, 0), |_| {});
    msg.extend_from_slice(body);
    request(cmd, &msg);
    if sel & 0x80 != 0 {
        response(cmd, &msg);
    }
});
