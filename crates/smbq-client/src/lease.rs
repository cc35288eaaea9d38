//! Leases from the client's side (MS-SMB2 3.2.4.3.8, 3.2.5.7.4, 3.2.5.19.2): a CREATE asks
//! for one with an RqLs context (V2 on SMB 3.x, V1 on 2.1, none on 2.0.2) under a key of its
//! own; the server's answer says what was granted; breaks reach the holder through
//! `conn.rs` ([`crate::conn::LeaseHolder`]) and are acknowledged there.

use std::sync::Weak;

use rand::RngCore;
use smbq_proto::client::Incoming;
use smbq_wire::Dialect;
use smbq_wire::create::{CreateResponse, OplockLevel};
use smbq_wire::create_context::{CreateContextTag, Lease, LeaseV2, parse_contexts};
use smbq_wire::negotiate::capabilities;

use crate::Error;
use crate::conn::{BreakTarget, LeaseHolder};
use crate::tree::Tree;

pub use smbq_wire::create_context::lease_state::{
    HANDLE_CACHING as H, READ_CACHING as R, WRITE_CACHING as W,
};

/// A fresh lease key: one per file this client opens with a lease.
pub(crate) fn new_key() -> [u8; 16] {
    let mut k = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut k);
    k
}

impl Tree {
    /// The RqLs context data asking for `state` under `key`, or `None` when the connection
    /// has no leases (2.0.2, or a server without SMB2_GLOBAL_CAP_LEASING).
    pub(crate) fn lease_request(&self, key: [u8; 16], state: u32) -> Option<Vec<u8>> {
        let n = self.session.client().negotiated();
        if n.dialect == Dialect::SMB2_0_2 || n.capabilities & capabilities::LEASING == 0 {
            return None;
        }
        let v2 = n.dialect.is_smb3().then(LeaseV2::default);
        Some(
            Lease {
                key,
                state,
                v2,
                ..Default::default()
            }
            .to_bytes(),
        )
    }

    /// Routes the breaks of lease `key`, held through the open the CREATE response `r`
    /// describes, to `holder` and acknowledges them on this tree (see `conn.rs`).
    pub(crate) fn watch_lease(
        &self,
        r: &Incoming,
        key: [u8; 16],
        holder: Option<Weak<dyn LeaseHolder>>,
    ) -> Result<(), Error> {
        let c = CreateResponse::decode(&r.msg)?;
        let shared = &self.session.client().shared;
        shared.watch_breaks(c.file_id.persistent, self.break_target());
        shared.watch_lease(key, c.file_id.persistent, self.break_target(), holder);
        Ok(())
    }

    /// Where acknowledgments of breaks of this tree's opens go.
    pub(crate) fn break_target(&self) -> BreakTarget {
        BreakTarget {
            session_id: self.session.id(),
            tree_id: self.id,
            protect: self.session.protect(self.encrypt),
        }
    }
}

/// The lease state a CREATE response grants under `key` (0 for none).
pub(crate) fn granted(r: &Incoming, key: &[u8; 16]) -> Result<u32, Error> {
    let c = CreateResponse::decode(&r.msg)?;
    if c.oplock_level != OplockLevel::LEASE {
        return Ok(0);
    }
    let state = parse_contexts(c.contexts)?
        .iter()
        .filter(|x| x.tag() == CreateContextTag::RQLS)
        .find_map(|x| Lease::decode(x.data).ok())
        .filter(|l| l.key == *key)
        .map_or(0, |l| l.state);
    Ok(state)
}
