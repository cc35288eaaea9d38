//! Directory leases (MS-SMB2 3.3.5.9.11 on a directory, SMB2_GLOBAL_CAP_DIRECTORY_LEASING):
//! a 3.x client may cache a directory's listing under an R or RH lease. The lease itself is
//! an ordinary one on the directory's entry ([`super::lease`]); what is particular is how it
//! breaks: when anything in the directory changes through smbq (a child created, deleted,
//! renamed, its attributes or times set, or its data changed and the changing open closed),
//! every lease on the directory breaks to none, except the one the changing open named as its
//! parent lease key (MS-SMB2 2.2.13.2.10 ParentLeaseKey: its holder made the change itself).
//! As Windows Server 2025 and Samba 4.22 (contend_dirleases) do; nobody waits for these
//! breaks. Changes made on the server's disk by other programs are not seen.

use std::time::Instant;

use smbq_vfs::RelPath;

use super::lease::{LeaseBreakNotice, LeaseKey};
use super::{FileKey, FileStates};
use crate::Server;
use crate::tables::Open;

impl FileStates {
    /// Whether any directory holds a lease: when none does, a change costs no lookup.
    pub fn any_dir_leases(&self) -> bool {
        !self.dir_leased.lock().is_empty()
    }

    /// The breaks a change inside directory `dir` forces (see the module docs).
    pub fn break_for_child_change(
        &self,
        dir: FileKey,
        except: Option<&LeaseKey>,
        now: Instant,
    ) -> Vec<LeaseBreakNotice> {
        if !self.dir_leased.lock().contains(&dir.base()) {
            return Vec::new();
        }
        self.update(dir, |e| e.leases.break_for_child_change(except, now))
    }
}

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
        if !self.files().any_dir_leases() {
            return;
        }
        let (Some(parent), Some(vfs)) = (path.parent(), open.tree.share.vfs.as_ref()) else {
            return;
        };
        // A directory with a lease has an open, so this stat finds it unless it was just
        // removed (then there is no lease left to break either).
        let Ok(st) = vfs.stat(&parent) else { return };
        let notices = self
            .files()
            .break_for_child_change(FileKey::of(&st), except, Instant::now());
        if !notices.is_empty() {
            self.send_lease_breaks(&notices);
        }
    }
}
