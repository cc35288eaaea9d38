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

use super::lease::{LeaseBreakNotice, LeaseKey};
use super::{FileKey, FileStates};

impl<L: super::Layout> FileStates<L> {
    /// Whether any directory holds a lease: when none does, a change costs no lookup.
    pub fn any_dir_leases(&self) -> bool {
        !self.dir_leased.lock().is_empty()
    }

    /// The breaks a change inside directory `dir` forces (see the module docs), and the
    /// opens of `dir` a timed-out break changed (`Leases::take_expired`).
    pub fn break_for_child_change(
        &self,
        dir: FileKey,
        except: Option<&LeaseKey>,
        now: Instant,
    ) -> (Vec<LeaseBreakNotice>, Vec<u64>) {
        if !self.dir_leased.lock().contains(&dir.base()) {
            return Default::default();
        }
        self.update(dir, |e| {
            let breaks = e.leases.break_for_child_change(except, now);
            (breaks, e.leases.take_expired())
        })
    }
}
