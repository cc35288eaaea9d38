//! `smbq status` (crate::status): the snapshot shows what the tables hold, and the
//! administrator's two actions change them.

use std::sync::Arc;

use smbq_wire::create::CreateDisposition as D;
use smbq_wire::lock::{LockElement, LockRequest, lock_flags as lf};
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg};
use crate::access::mask;
use crate::status::{ConnInfo, Protection};

async fn h_with_owner() -> H {
    let h = H::new().await;
    let rec = h.srv.session_table().get(h.session.id).unwrap();
    rec.set_owner(h.session.identity.clone());
    h
}

async fn lock(h: &H, id: FileId, offset: u64, length: u64, flags: u32) -> NtStatus {
    let m = msg(Command::LOCK, h.tree, h.session.id, move |w| {
        LockRequest {
            lock_sequence: 0,
            file_id: id,
            locks: vec![LockElement {
                offset,
                length,
                flags,
            }],
        }
        .encode(w)
    });
    h.send(m).await.status
}

#[tokio::test]
async fn snapshot_lists_the_session_tree_open_and_lock_and_drops_them_on_close() {
    let h = h_with_owner().await;
    let info = Arc::new(ConnInfo::new(
        h.conn.id,
        "192.0.2.7:50000".parse().unwrap(),
        "tcp",
        None,
    ));
    info.add_in(100);
    info.add_out(40);
    h.srv.register_connection_info(info.clone());
    let p = Protection::of(
        smbq_wire::Dialect::SMB3_1_1,
        Some(smbq_crypto::SigningAlgorithm::AesGmac),
        Some(smbq_crypto::Cipher::Aes128Gcm),
    );
    info.set_protection(p.clone());
    h.srv.session_protection(h.session.id, p, true);
    std::fs::create_dir(h.path("dir")).unwrap();
    h.put("dir\\f.txt", b"hello").await;
    let o = h
        .create(
            "dir\\f.txt",
            mask::FILE_READ_DATA | mask::FILE_WRITE_DATA,
            D::OPEN,
            0,
        )
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(
        lock(&h, o.id, 10, 5, lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY).await,
        NtStatus::SUCCESS
    );

    let s = h.srv.status();
    assert_eq!(s.server.pid, std::process::id());
    let c = &s.connections[0];
    assert_eq!(
        (c.id, c.peer.as_str(), c.transport.as_str()),
        (h.conn.id, "192.0.2.7:50000", "tcp")
    );
    assert_eq!((c.bytes_in, c.bytes_out), (100, 40));
    assert_eq!(c.dialect.as_deref(), Some("3.1.1"));
    assert_eq!(c.signing.as_deref(), Some("AES-128-GMAC"));
    assert_eq!(c.cipher.as_deref(), Some("AES-128-GCM"));
    let sess = &s.sessions[0];
    assert_eq!(
        (sess.id, sess.user.as_str(), sess.encrypted),
        (h.session.id, "alice", true)
    );
    assert_eq!(sess.connections, vec![h.conn.id]);
    assert_eq!(s.trees.len(), 1);
    assert_eq!(
        (s.trees[0].tree_id, s.trees[0].share.as_str()),
        (h.tree, "data")
    );
    assert_eq!(s.opens.len(), 1);
    let open = &s.opens[0];
    assert_eq!(open.id, o.id.volatile);
    assert_eq!(
        (open.path.as_str(), open.kind.as_str()),
        ("dir\\f.txt", "file")
    );
    assert_eq!(open.access & mask::FILE_WRITE_DATA, mask::FILE_WRITE_DATA);
    assert_eq!(open.user, "alice");
    assert_eq!(s.locks.len(), 1);
    let l = &s.locks[0];
    assert_eq!(
        (l.open_id, l.offset, l.length, l.exclusive),
        (o.id.volatile, 10, 5, true)
    );
    // It round-trips through JSON, which is what the admin socket carries.
    let json = serde_json::to_string(&s).unwrap();
    assert_eq!(
        serde_json::from_str::<crate::status::Snapshot>(&json).unwrap(),
        s
    );

    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
    let s = h.srv.status();
    assert!(s.opens.is_empty() && s.locks.is_empty());
    h.srv.connection_ended(h.conn.id);
    assert!(h.srv.status().connections.is_empty());
}

#[tokio::test]
async fn close_file_releases_the_open_and_kill_session_ends_it() {
    let h = h_with_owner().await;
    h.put("f", b"x").await;
    let o = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    // A second open that denies sharing fails while the first is there...
    let deny = h
        .create_req("f", mask::FILE_READ_DATA, D::OPEN)
        .share(0)
        .send()
        .await;
    assert_eq!(deny.status, NtStatus::SHARING_VIOLATION);
    assert!(h.srv.close_file(o.id.volatile));
    assert!(!h.srv.close_file(o.id.volatile), "already closed");
    // ...and succeeds once the administrator closed it; the client's handle is gone.
    assert_eq!(h.read(o.id, 0, 1).await.status, NtStatus::FILE_CLOSED);
    let again = h
        .create_req("f", mask::FILE_READ_DATA, D::OPEN)
        .share(0)
        .send()
        .await;
    assert_eq!(again.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.status().opens.len(), 1);

    assert!(h.srv.kill_session(h.session.id));
    assert!(!h.srv.kill_session(h.session.id), "already ended");
    let s = h.srv.status();
    assert!(s.sessions.is_empty() && s.opens.is_empty() && s.trees.is_empty());
}
