//! What smbq's client parses from a (possibly hostile) server: the response frame split by
//! NextCommand, then each message through the decoder the client would use for it, the
//! NEGOTIATE answer checked against the offer, a SESSION_SETUP leg, and srvsvc replies.
//! Errors are fine; panics are not.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use smbq_proto::client::{ClientConfig, parse_negotiate_response, split_compound};
use smbq_wire::Command;
use smbq_wire::fscc::dir_info::{DirClass, decode_dir_list};

fuzz_target!(|data: &[u8]| {
    let cfg = ClientConfig::default();
    let _ = smbq_rpc::client::parse_share_enum(data);
    let _ = smbq_rpc::client::check_bind_ack(data);
    let mut asm = smbq_rpc::client::ResponseAssembler::new(1 << 16);
    let _ = asm.push(data);
    let Ok(msgs) = split_compound(Bytes::copy_from_slice(data), false) else {
        return;
    };
    for m in msgs {
        let b = &m.msg[..];
        match m.header.command {
            Command::NEGOTIATE => {
                let _ = parse_negotiate_response(&cfg, b);
            }
            Command::SESSION_SETUP => {
                let _ = smbq_wire::session_setup::SessionSetupResponse::decode(b);
            }
            Command::TREE_CONNECT => {
                let _ = smbq_wire::tree_connect::TreeConnectResponse::decode(b);
            }
            Command::CREATE => {
                let _ = smbq_wire::create::CreateResponse::decode(b);
            }
            Command::READ => {
                let _ = smbq_wire::read::ReadResponse::decode(b);
            }
            Command::WRITE => {
                let _ = smbq_wire::write::WriteResponse::decode(b);
            }
            Command::QUERY_DIRECTORY => {
                if let Ok(r) = smbq_wire::query_directory::QueryDirectoryResponse::decode(b) {
                    let _ = decode_dir_list(DirClass::IdBothDirectory, r.buffer);
                }
            }
            Command::QUERY_INFO => {
                let _ = smbq_wire::query_info::QueryInfoResponse::decode(b);
            }
            Command::IOCTL => {
                let _ = smbq_wire::ioctl::IoctlResponse::decode(b);
            }
            _ => {}
        }
    }
});
