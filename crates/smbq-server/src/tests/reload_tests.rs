//! Reloading the share list (crate::reload): added shares are reachable at once, removed or
//! changed ones end their tree connects and opens, unchanged ones are untouched, and a list
//! that cannot be served changes nothing; reloaded limits reach the server's own caps.

use smbq_wire::NtStatus;
use smbq_wire::create::CreateDisposition as D;

use super::harness::{H, share};
use crate::access::mask;

#[tokio::test]
async fn added_removed_changed_and_unchanged_shares() {
    let other = tempfile::tempdir().unwrap();
    let h = H::with(|c| c.shares.push(share("keep", c.shares[0].path.as_path()))).await;
    let data = h.srv.config().shares[0].clone();
    let keep = h.srv.config().shares[1].clone();
    h.put("f", b"x").await;
    let open = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await.id;
    let keep_tree = h.tree_connect("\\\\srv\\keep").await.tree_id.unwrap();
    assert_eq!(
        h.tree_connect("\\\\srv\\new").await.status,
        NtStatus::BAD_NETWORK_NAME
    );

    // "data" becomes read-only (changed), "new" is added, "keep" stays as it was.
    let mut ro = data.clone();
    ro.read_only = true;
    let added = share("new", other.path());
    let c = h
        .srv
        .reload_shares(&[ro.clone(), keep.clone(), added.clone()])
        .unwrap();
    assert_eq!(c.added, vec!["new".to_string()]);
    assert_eq!(c.changed, vec!["data".to_string()]);
    assert!(c.removed.is_empty());
    // The tree of the changed share is gone, and with it the open under it.
    assert_eq!(
        h.read(open, 0, 1).await.status,
        NtStatus::NETWORK_NAME_DELETED
    );
    assert!(h.srv.status().opens.is_empty());
    // A new tree connect gets the new settings.
    let r = h.tree_connect("\\\\srv\\data").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert_eq!(H::tree_resp(&r).maximal_access & mask::FILE_WRITE_DATA, 0);
    assert_eq!(
        h.tree_connect("\\\\srv\\new").await.status,
        NtStatus::SUCCESS
    );
    // The unchanged share's tree connect goes on.
    assert!(
        h.srv
            .session_state(h.session.id)
            .unwrap()
            .tree(keep_tree)
            .is_some_and(|t| !t.share.is_retired())
    );

    // A list naming a directory that does not exist is refused whole.
    let mut broken = share("broken", other.path());
    broken.path = other.path().join("missing");
    assert!(h.srv.reload_shares(&[ro.clone(), broken]).is_err());
    assert!(h.srv.shares().find("keep").is_some());
    assert!(h.srv.shares().find("broken").is_none());

    // Removing "keep" ends its tree connect.
    let c = h.srv.reload_shares(&[ro, added]).unwrap();
    assert_eq!(c.removed, vec!["keep".to_string()]);
    assert!(
        h.srv
            .session_state(h.session.id)
            .unwrap()
            .tree(keep_tree)
            .is_none()
    );
    assert_eq!(
        h.tree_connect("\\\\srv\\keep").await.status,
        NtStatus::BAD_NETWORK_NAME
    );
}

/// A reload's `[limits]` reach the server's own caps: a lowered open limit refuses the next
/// open of a live session, and raising it again lets it through.
#[tokio::test]
async fn reloaded_open_limit_applies_to_live_sessions() {
    let h = H::new().await;
    h.put("f", b"x").await;
    let first = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(first.status, NtStatus::SUCCESS);

    let mut lower = (*h.srv.limits()).clone();
    lower.max_opens_per_session = 1;
    h.srv.set_limits(lower.clone());
    let second = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(second.status, NtStatus::INSUFFICIENT_RESOURCES);

    lower.max_opens_per_session = 2;
    h.srv.set_limits(lower);
    let third = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(third.status, NtStatus::SUCCESS);
}
