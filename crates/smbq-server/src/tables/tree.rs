//! A tree connect (MS-SMB2 3.3.1.10): one session's connection to one share.

use std::sync::Arc;

use crate::share::Share;

#[derive(Debug)]
pub struct Tree {
    pub id: u32,
    pub session_id: u64,
    pub share: Arc<Share>,
    /// TreeConnect.MaximalAccess: the most any open on this tree may be granted.
    pub maximal_access: u32,
    /// Requests on this tree must arrive encrypted (Share.EncryptData or the global policy).
    pub encrypt: bool,
    /// TreeConnect.Share.IsCA on a connection that may use it (3.x, persistent handles
    /// negotiated): opens on this tree that ask get persistent handles (crate::durable).
    pub ca: bool,
}

impl Tree {
    pub fn read_only(&self) -> bool {
        self.share.cfg.read_only
    }
}
