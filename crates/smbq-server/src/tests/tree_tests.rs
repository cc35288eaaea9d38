use smbq_wire::ioctl::{CtlCode, IoctlRequest, ValidateNegotiateInfoRequest, flags};
use smbq_wire::tree_connect::{share_flags, share_type};
use smbq_wire::{Command, Dialect, FileId, NtStatus};

use super::harness::{H, msg, share};
use crate::STATUS_DISCONNECT;

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
    assert_eq!(h.send(send(&good)).await.status, STATUS_DISCONNECT);
    let mut ok = good.clone();
    ok.dialects = vec![Dialect::SMB3_0, Dialect::SMB3_0_2];
    h.conn.client_dialects = ok.dialects.clone();
    assert_eq!(h.send(send(&ok)).await.status, NtStatus::SUCCESS);
    let mut bad = ok.clone();
    bad.guid = [9; 16];
    assert_eq!(h.send(send(&bad)).await.status, STATUS_DISCONNECT);
    h.conn.dialect = Dialect::SMB3_1_1;
    assert_eq!(h.send(send(&ok)).await.status, STATUS_DISCONNECT);
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
