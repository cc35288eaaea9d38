//! A session bound to several connections (multichannel, MS-SMB2 3.3.5.5.2) lives as long as
//! one of them: losing a channel keeps the session and its opens (MS-SMB2 3.3.7.1 applies to
//! the last one only), and breaks go to a channel that is still there.

use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition as D;

use super::harness::H;
use crate::access::mask;

#[tokio::test]
async fn a_session_outlives_all_but_its_last_channel() {
    let h = H::new().await;
    let (first, second) = (h.conn.id, h.conn.id + 1000);
    h.srv.session_started(h.session.id, second);
    let rec = h.srv.session_table().get(h.session.id).unwrap();
    assert_eq!(rec.channels(), vec![first, second]);
    h.put("f", b"data").await;
    let open = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await.id;

    // The first connection goes: the session and its open stay, on the second.
    h.srv.channel_lost(h.session.id, first);
    assert!(!rec.has_ended());
    assert_eq!(rec.channels(), vec![second]);
    assert_eq!(h.read(open, 0, 4).await.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.status().opens.len(), 1);

    // The last one goes: the session ends and its open is closed.
    h.srv.channel_lost(h.session.id, second);
    assert!(rec.has_ended());
    assert!(h.srv.session_table().get(h.session.id).is_none());
    assert!(h.srv.status().opens.is_empty());
}

/// A CREATE still running when its session ends (one that outlived its channel) cannot add
/// its open to the ended session: the opens are taken and the door closed under one lock.
#[test]
fn an_ended_session_takes_no_new_open() {
    let st = crate::tables::SessionState::new(7, 4, 4);
    assert!(st.add_open(1));
    assert_eq!(st.end_opens(), vec![1]);
    assert!(!st.add_open(2), "no open joins an ended session");
}
