use std::sync::Arc;

use smbq_auth::Identity;
use smbq_wire::ioctl::{CtlCode, IoctlRequest, ValidateNegotiateInfoRequest, flags};
use smbq_wire::tree_connect::{share_flags, share_type};
use smbq_wire::{Command, Dialect, FileId, NtStatus};

use super::harness::{H, msg, share};

#[tokio::test]
async fn tree_connect_shares() {
    let h = H::with(|c| {
        let mut s = share("secret", c.shares[0].path.as_path());
        s.encrypt = true;
        c.shares.push(s);
        let mut s = share("others", c.shares[0].path.as_path());
        s.allowed_users = Some(vec!["bob".into()]);
        c.shares.push(s);
    })
    .await;
    let r = h.tree_connect("\\\\host\\DATA").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert_eq!(H::tree_resp(&r).share_type, share_type::DISK);
    let r = h.tree_connect("\\\\host\\ipc$").await;
    assert_eq!(H::tree_resp(&r).share_type, share_type::PIPE);
    let r = h.tree_connect("\\\\host\\secret").await;
    assert_ne!(H::tree_resp(&r).share_flags & share_flags::ENCRYPT_DATA, 0);
    assert_eq!(
        h.tree_connect("\\\\host\\others").await.status,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        h.tree_connect("\\\\host\\nope").await.status,
        NtStatus::BAD_NETWORK_NAME
    );
    // Unencrypted request on the encrypted share from a session that can encrypt.
    let tid = r.tree_id.unwrap();
    let m = msg(Command::TREE_DISCONNECT, tid, h.session.id, |w| {
        w.u16(4).u16(0);
    });
    assert_eq!(h.send(m).await.status, NtStatus::ACCESS_DENIED);
    let m = msg(Command::TREE_DISCONNECT, h.tree, h.session.id, |w| {
        w.u16(4).u16(0);
    });
    assert_eq!(h.send(m).await.status, NtStatus::SUCCESS);
    let m = msg(Command::TREE_DISCONNECT, h.tree, h.session.id, |w| {
        w.u16(4).u16(0);
    });
    assert_eq!(h.send(m).await.status, NtStatus::NETWORK_NAME_DELETED);
}

#[tokio::test]
async fn validate_negotiate() {
    let mut h = H::new().await;
    h.conn.dialect = Dialect::SMB3_0_2;
    let good = ValidateNegotiateInfoRequest {
        capabilities: h.conn.client_capabilities,
        guid: h.conn.client_guid,
        security_mode: h.conn.client_security_mode,
        dialects: vec![Dialect::SMB3_0_2, Dialect::SMB3_1_1],
    };
    h.conn.client_dialects = good.dialects.clone();
    let send = |v: &ValidateNegotiateInfoRequest| {
        let mut w = smbq_wire::Writer::new();
        v.encode(&mut w);
        let input = w.into_vec();
        msg(Command::IOCTL, h.tree, h.session.id, |w| {
            IoctlRequest {
                ctl_code: CtlCode::VALIDATE_NEGOTIATE_INFO,
                file_id: FileId::RELATED,
                input: &input,
                max_input_response: 0,
                output: &[],
                max_output_response: 24,
                flags: flags::IS_FSCTL,
            }
            .encode(w)
        })
    };
    // 3.0.2 negotiated, but the client's best is 3.1.1: a downgrade.
    assert!(h.send(send(&good)).await.disconnect);
    let mut ok = good.clone();
    ok.dialects = vec![Dialect::SMB3_0, Dialect::SMB3_0_2];
    h.conn.client_dialects = ok.dialects.clone();
    let r = h.send(send(&ok)).await;
    assert_eq!((r.status, r.disconnect), (NtStatus::SUCCESS, false));
    let mut bad = ok.clone();
    bad.guid = [9; 16];
    assert!(h.send(send(&bad)).await.disconnect);
    h.conn.dialect = Dialect::SMB3_1_1;
    assert!(h.send(send(&ok)).await.disconnect);
}

#[tokio::test]
async fn named_pipes_on_ipc() {
    let mut h = H::new().await;
    let r = h.tree_connect("\\\\host\\IPC$").await;
    h.tree = r.tree_id.unwrap();
    let o = h
        .create(
            "srvsvc",
            crate::access::mask::GENERIC_ALL,
            smbq_wire::create::CreateDisposition::OPEN,
            0,
        )
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    // Nothing written yet: nothing to read.
    assert_eq!(h.read(o.id, 0, 100).await.status, NtStatus::PIPE_EMPTY);
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
    let o = h
        .create(
            "nosuchpipe",
            crate::access::mask::GENERIC_ALL,
            smbq_wire::create::CreateDisposition::OPEN,
            0,
        )
        .await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_NOT_FOUND);
}

/// One RPC round trip on an open pipe: WRITE the request PDU(s), READ the answer, and return
/// the response stub.
async fn rpc_call(h: &H, id: FileId, call_id: u32, pdu: &[u8]) -> Vec<u8> {
    assert_eq!(h.write(id, 0, pdu).await.status, NtStatus::SUCCESS);
    let r = h.read(id, 0, 65536).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    let data = r.data.unwrap();
    if call_id == 1 {
        smbq_rpc::client::check_bind_ack(&data).unwrap();
        return Vec::new();
    }
    smbq_rpc::client::ResponseAssembler::new(1 << 20)
        .expect_call_id(call_id)
        .push(&data)
        .unwrap()
        .unwrap()
}

/// NetrShareGetInfo (opnum 16) for `name` at level 1; the WERROR it returns.
async fn share_get_info(h: &H, id: FileId, call_id: u32, name: &str) -> u32 {
    use smbq_rpc::pdu;
    let mut stub = smbq_rpc::ndr::NdrWriter::new();
    // ServerName NULL, NetName [ref string], Level.
    stub.pointer(false).wstring(name).u32(1);
    let req = pdu::Request {
        alloc_hint: stub.len() as u32,
        context_id: 0,
        opnum: smbq_rpc::srvsvc::opnum::NETR_SHARE_GET_INFO,
        object: None,
        stub: stub.as_slice(),
    };
    let mut w = smbq_wire::Writer::new();
    req.encode(&mut w);
    let flags = pdu::PFC_FIRST_FRAG | pdu::PFC_LAST_FRAG;
    let pdu = pdu::encode_pdu(
        pdu::Header::new(pdu::PTYPE_REQUEST, flags, call_id),
        w.as_slice(),
    );
    let out = rpc_call(h, id, call_id, &pdu).await;
    u32::from_le_bytes(out[out.len() - 4..].try_into().unwrap())
}

/// What a session with `identity` sees through srvsvc: the NetrShareEnum names, and the
/// NetrShareGetInfo WERROR for each of `probe`.
async fn srvsvc_view(h: &mut H, identity: Identity, probe: &[&str]) -> (Vec<String>, Vec<u32>) {
    h.session.id += 1;
    h.srv.session_table().insert(h.session.id);
    h.srv.session_started(h.session.id, h.conn.id);
    h.session.identity = Arc::new(identity);
    let r = h.tree_connect("\\\\host\\IPC$").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    h.tree = r.tree_id.unwrap();
    let o = h
        .create(
            "srvsvc",
            crate::access::mask::GENERIC_ALL,
            smbq_wire::create::CreateDisposition::OPEN,
            0,
        )
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    rpc_call(h, o.id, 1, &smbq_rpc::client::bind_request(1)).await;
    let req = smbq_rpc::client::share_enum_request(2, "\\\\host");
    let stub = rpc_call(h, o.id, 2, &req).await;
    let names = smbq_rpc::client::parse_share_enum(&stub)
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    let mut werrors = Vec::new();
    for (i, name) in probe.iter().enumerate() {
        werrors.push(share_get_info(h, o.id, 3 + i as u32, name).await);
    }
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
    (names, werrors)
}

fn identity(user: &str, is_anonymous: bool) -> Identity {
    Identity {
        user: user.into(),
        domain: String::new(),
        is_guest: false,
        is_anonymous,
    }
}

#[tokio::test]
async fn srvsvc_lists_only_shares_the_session_may_connect_to() {
    let with_shares = |abse: bool| {
        move |c: &mut crate::ServerConfig| {
            let base = c.shares[0].path.clone();
            let mut s = share("team", &base);
            s.allowed_users = Some(vec!["tester".into()]);
            c.shares.push(s);
            let mut s = share("secret", &base);
            s.allowed_users = Some(vec!["nobody-else".into()]);
            c.shares.push(s);
            let mut s = share("public", &base);
            s.guest_ok = true;
            c.shares.push(s);
            c.guest_ok = true;
            c.access_based_share_enum = abse;
        }
    };
    const NOT_FOUND: u32 = smbq_rpc::srvsvc::werror::NET_NAME_NOT_FOUND;
    let probe = ["team", "SECRET", "public"];

    let mut h = H::with(with_shares(true)).await;
    let (names, werrors) = srvsvc_view(&mut h, identity("tester", false), &probe).await;
    assert_eq!(names, ["data", "team", "public", "IPC$"]);
    assert_eq!(werrors, [0, NOT_FOUND, 0]);
    let (names, werrors) = srvsvc_view(&mut h, identity("", true), &probe).await;
    assert_eq!(names, ["public", "IPC$"]);
    assert_eq!(werrors, [NOT_FOUND, NOT_FOUND, 0]);
    // What is listed is exactly what TREE_CONNECT lets this session reach.
    for name in ["data", "team", "secret"] {
        let r = h.tree_connect(&format!("\\\\host\\{name}")).await;
        assert_eq!(r.status, NtStatus::ACCESS_DENIED, "{name}");
    }

    let mut h = H::with(with_shares(false)).await;
    let everything = ["data", "team", "secret", "public", "IPC$"];
    let (names, werrors) = srvsvc_view(&mut h, identity("", true), &probe).await;
    assert_eq!(names, everything);
    assert_eq!(werrors, [0, 0, 0]);
}
