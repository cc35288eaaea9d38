//! Reloading the share list without a restart (issue 17): the binary re-reads its
//! configuration and hands the new list here. Added shares are reachable at once; removed or
//! changed ones are retired: their tree connects end (the next request on one gets
//! NETWORK_NAME_DELETED, MS-SMB2 3.3.5.2.11) and the opens under them are closed, so a share
//! made read-only or closed to a user keeps no writer or reader it no longer allows. A new
//! list that cannot be served (a path that does not exist) changes nothing.

use std::io;
use std::sync::Arc;

use crate::{Server, ShareConfig, pipe};

/// What a reload changed, by share name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareChanges {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
}

impl ShareChanges {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

impl Server {
    /// Serves `shares` from now on. Blocking (opens of retired shares are closed, which may
    /// delete files marked delete-on-close); run it off the async threads.
    pub fn reload_shares(&self, shares: &[ShareConfig]) -> io::Result<ShareChanges> {
        let old = self.shares();
        let new = {
            let mut open = self.opener.lock();
            old.reloaded(shares, &mut *open)?
        };
        let new = Arc::new(new);
        let mut changes = ShareChanges::default();
        let mut retired = Vec::new();
        for s in old.iter() {
            match new.find(s.name()) {
                Some(n) if Arc::ptr_eq(&n, s) => {}
                Some(_) => {
                    changes.changed.push(s.name().to_owned());
                    retired.push(s.clone());
                }
                None => {
                    changes.removed.push(s.name().to_owned());
                    retired.push(s.clone());
                }
            }
        }
        changes.added = new
            .iter()
            .filter(|s| old.find(s.name()).is_none())
            .map(|s| s.name().to_owned())
            .collect();
        *self.share_list.write() = Arc::new(pipe::ShareList::new(&new));
        *self.shares.write() = new;
        for s in &retired {
            s.retire();
        }
        self.end_retired_trees();
        Ok(changes)
    }

    /// Takes the trees of retired shares out of every session, closing their opens.
    fn end_retired_trees(&self) {
        for rec in self.sessions.live() {
            let Some(st) = rec.ext::<crate::tables::SessionState>() else {
                continue;
            };
            for id in st.open_ids() {
                if self
                    .lookup_open(id)
                    .is_some_and(|o| o.tree.share.is_retired())
                {
                    self.close_open_by_id(id);
                }
            }
            for t in st.trees() {
                if t.share.is_retired() {
                    st.remove_tree(t.id);
                }
            }
        }
    }
}
