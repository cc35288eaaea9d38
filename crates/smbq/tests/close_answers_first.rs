//! Issue 38: a CLOSE that deletes a file answers before the directory's leases break. Samba
//! sends them in that order, and smbtorture 4.25's `smb2.dirlease.unlink_different_*` depend
//! on it: a client holding two directory leases hears the first break after its CLOSE
//! returns and the second while it acknowledges the first. Against the real binary, on a raw
//! socket, so the order of the frames is what the server wrote.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::io::Write;

use common::raw::{Raw, Server};
use smbq_wire::close::CloseRequest;
use smbq_wire::create::{
    CreateDisposition, CreateRequest, CreateResponse, ImpersonationLevel, OplockLevel,
    create_options,
};
use smbq_wire::create_context::{
    CreateContext, CreateContextTag, Lease, LeaseV2, contexts_to_bytes, parse_contexts,
};
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::access;
use smbq_wire::negotiate::capabilities;
use smbq_wire::oplock_break::LeaseBreakNotification;
use smbq_wire::{Command, FileId, Header, NtStatus, Writer};

const PASSWORD: &str = "close-answers-first-password";
const R: u32 = 1;
const H: u32 = 2;

/// CREATE of `name` with a V2 lease asking `state` under `key`; returns the FileId and the
/// lease state granted.
fn open_leased(
    raw: &mut Raw,
    name: &str,
    dir: bool,
    key: u8,
    state: u32,
    opts: u32,
) -> (FileId, u32) {
    let lease = Lease {
        key: [key; 16],
        state,
        v2: Some(LeaseV2::default()),
        ..Lease::default()
    }
    .to_bytes();
    let ctx = contexts_to_bytes(&[CreateContext::new(CreateContextTag::RQLS, &lease)]);
    let name = utf16le_encode(name);
    let mut w = Writer::new();
    CreateRequest {
        requested_oplock_level: OplockLevel::LEASE,
        impersonation_level: ImpersonationLevel::IMPERSONATION,
        desired_access: if dir {
            access::FILE_READ_ATTRIBUTES | access::FILE_LIST_DIRECTORY | access::SYNCHRONIZE
        } else {
            access::FILE_READ_DATA | access::DELETE
        },
        share_access: access::FILE_SHARE_READ
            | access::FILE_SHARE_WRITE
            | access::FILE_SHARE_DELETE,
        create_disposition: CreateDisposition::OPEN,
        create_options: opts
            | if dir {
                create_options::DIRECTORY_FILE
            } else {
                0
            },
        name: &name,
        contexts: &ctx,
        ..Default::default()
    }
    .encode(&mut w);
    let h = raw.header(Command::CREATE, 1, 64);
    let m = raw.signed(&h, &w.into_vec());
    let resp = raw.call(&m);
    assert_eq!(
        Header::decode(&resp).unwrap().status,
        NtStatus::SUCCESS,
        "CREATE"
    );
    let c = CreateResponse::decode(&resp).unwrap();
    let granted = parse_contexts(c.contexts)
        .unwrap()
        .iter()
        .find(|x| x.tag() == CreateContextTag::RQLS)
        .map(|x| Lease::decode(x.data).unwrap().state)
        .unwrap_or(0);
    (c.file_id, granted)
}

fn close(raw: &mut Raw, file_id: FileId) -> u64 {
    let mut w = Writer::new();
    CloseRequest { flags: 0, file_id }.encode(&mut w);
    let h = raw.header(Command::CLOSE, 1, 64);
    let m = raw.signed(&h, &w.into_vec());
    raw.s.write_all(&Raw::frame(&m)).unwrap();
    h.message_id
}

/// Reads the answer to CLOSE `mid` and the `breaks` lease breaks it caused, in the order
/// they came: "close", then "break KK" per lease key's first byte.
fn close_and_breaks(raw: &mut Raw, mid: u64, breaks: usize) -> Vec<String> {
    let mut order = Vec::new();
    while order.len() < 1 + breaks {
        let msg = raw.recv();
        let hdr = Header::decode(&msg).unwrap();
        if hdr.command == Command::CLOSE {
            assert_eq!(hdr.message_id, mid);
            assert_eq!(hdr.status, NtStatus::SUCCESS, "CLOSE");
            raw.credits += i64::from(hdr.credits);
            order.push("close".to_string());
        } else {
            assert_eq!(hdr.command, Command::OPLOCK_BREAK, "{hdr:?}");
            assert_eq!(hdr.message_id, u64::MAX, "an unsolicited break");
            let b = LeaseBreakNotification::decode(&msg).unwrap();
            assert_eq!((b.current_lease_state, b.new_lease_state), (R | H, 0));
            order.push(format!("break {:x}", b.lease_key[0]));
        }
    }
    order
}

#[test]
fn a_delete_at_close_answers_the_close_before_breaking_the_directory_leases() {
    let cfg = "directory_leases = true\n";
    let srv = Server::start(PASSWORD, cfg, &[]);
    std::fs::create_dir(srv.share_path("d")).unwrap();
    let mut raw = Raw::login_with_caps(
        srv.addr,
        PASSWORD,
        capabilities::LEASING | capabilities::DIRECTORY_LEASING,
    );
    // Which frame the connection writes first is a race unless the server orders them, so
    // the same steps run several times, each with fresh lease keys.
    for round in 0..10u8 {
        std::fs::write(srv.share_path("d/f"), b"x").unwrap();
        // Two RH leases on the directory, under two keys: both break when its file goes.
        let (k1, k2) = (0x10 + 2 * round, 0x11 + 2 * round);
        let (d1, s1) = open_leased(&mut raw, "d", true, k1, R | H, 0);
        let (d2, s2) = open_leased(&mut raw, "d", true, k2, R | H, 0);
        assert_eq!((s1, s2), (R | H, R | H), "directory leases granted");
        let opts = create_options::DELETE_ON_CLOSE;
        let (f, _) = open_leased(&mut raw, "d\\f", false, 0xf1, R, opts);

        let mid = close(&mut raw, f);
        let mut order = close_and_breaks(&mut raw, mid, 2);
        assert_eq!(
            order[0], "close",
            "round {round}: the CLOSE answers first: {order:?}"
        );
        order[1..].sort();
        let want = [format!("break {k1:x}"), format!("break {k2:x}")];
        assert_eq!(order[1..], want, "round {round}");
        assert!(!srv.share_path("d/f").exists(), "deleted at close");
        for d in [d1, d2] {
            let mid = close(&mut raw, d);
            assert_eq!(close_and_breaks(&mut raw, mid, 0), ["close"]);
        }
    }
    srv.stop();
}
