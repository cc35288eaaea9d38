//! Directory leases break when something in the directory changes through smbq
//! ([`crate::file_state::dir_lease`] decides which); this finds the directory and sends them.

use std::time::Instant;

use smbq_vfs::RelPath;

use crate::Server;
use crate::file_state::FileKey;
use crate::file_state::lease::LeaseKey;
use crate::open_state::{Changes as _, Effects};
use crate::tables::Open;

impl Server {
    /// Something at `path` (share-relative), in `open`'s share, was created, deleted,
    /// renamed or changed through `open`: the leases on its directory break.
    pub(crate) fn break_parent_leases(&self, open: &Open, path: &RelPath) {
        self.break_parent_leases_except(open, path, open.parent_lease.as_ref());
    }

    /// [`Self::break_parent_leases`] sparing the lease `except` instead of the one `open`
    /// named as its parent.
    pub(crate) fn break_parent_leases_except(
        &self,
        open: &Open,
        path: &RelPath,
        except: Option<&LeaseKey>,
    ) {
        // The request's answer goes first, as Samba sends them (smbtorture smb2.dirlease.rename:
        // a break read before its SET_INFO returns is acknowledged too early).
        self.after_answer(self.parent_lease_breaks(open, path, except));
    }

    /// The breaks of [`Self::break_parent_leases_except`], for the caller to send (after the
    /// answer: [`Self::after_answer`]). They never wait.
    pub(crate) fn parent_lease_breaks(
        &self,
        open: &Open,
        path: &RelPath,
        except: Option<&LeaseKey>,
    ) -> Effects {
        if !self.open_state().any_dir_leases() {
            return Effects::default();
        }
        let (Some(parent), Some(vfs)) = (path.parent(), open.tree.share.vfs.as_ref()) else {
            return Effects::default();
        };
        // A directory with a lease has an open, so this stat finds it unless it was just
        // removed (then there is no lease left to break either).
        let Ok(st) = vfs.stat(&parent) else {
            return Effects::default();
        };
        self.open_state()
            .on_child_change(FileKey::of(&st), except, Instant::now())
    }
}
