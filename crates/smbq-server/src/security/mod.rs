//! NT security: session tokens, descriptors stored per file, the DACL access check,
//! inheritance for new objects, and the SET_INFO / QUERY_INFO rules for descriptors
//! (MS-DTYP 2.5.3, MS-FSA 2.1.5.16 / 2.1.5.12, MS-SMB2 3.3.5.20.3 / 3.3.5.21.3).
//!
//! Files without a stored descriptor keep the behaviour derived from POSIX metadata (the
//! share's access and the READONLY attribute); a stored descriptor's DACL decides otherwise.

pub mod check;
pub mod inherit;
pub mod store;
pub mod token;

pub use token::Token;

use smbq_wire::NtStatus;
use smbq_wire::security::{SecurityDescriptor, Sid, control, info};

use crate::access::mask;
use crate::tables::Open;

/// STATUS_INVALID_OWNER (MS-ERREF 2.3.1): the owner named is not one the caller may assign.
pub const INVALID_OWNER: NtStatus = NtStatus(0xC000_005A);

/// The access an open needs to read the parts of a descriptor `addl` selects (MS-FSA
/// 2.1.5.12 via MS-SMB2 3.3.5.20.3): READ_CONTROL for owner, group, DACL and label;
/// ACCESS_SYSTEM_SECURITY for the SACL. Selecting nothing needs nothing (smb2.sdread).
pub fn query_needs(addl: u32) -> u32 {
    let mut need = 0;
    if addl
        & (info::OWNER_SECURITY_INFORMATION
            | info::GROUP_SECURITY_INFORMATION
            | info::DACL_SECURITY_INFORMATION
            | info::LABEL_SECURITY_INFORMATION
            | info::ATTRIBUTE_SECURITY_INFORMATION
            | info::SCOPE_SECURITY_INFORMATION)
        != 0
    {
        need |= mask::READ_CONTROL;
    }
    if addl & (info::SACL_SECURITY_INFORMATION | info::BACKUP_SECURITY_INFORMATION) != 0 {
        need |= mask::ACCESS_SYSTEM_SECURITY;
    }
    need
}

/// The access an open needs to change the parts `addl` selects (MS-FSA 2.1.5.16): WRITE_OWNER
/// for owner, group and label, WRITE_DAC for the DACL, ACCESS_SYSTEM_SECURITY for the SACL.
pub fn set_needs(addl: u32) -> u32 {
    let mut need = 0;
    if addl
        & (info::OWNER_SECURITY_INFORMATION
            | info::GROUP_SECURITY_INFORMATION
            | info::LABEL_SECURITY_INFORMATION)
        != 0
    {
        need |= mask::WRITE_OWNER;
    }
    if addl & info::DACL_SECURITY_INFORMATION != 0 {
        need |= mask::WRITE_DAC;
    }
    if addl & (info::SACL_SECURITY_INFORMATION | info::BACKUP_SECURITY_INFORMATION) != 0 {
        need |= mask::ACCESS_SYSTEM_SECURITY;
    }
    need
}

/// Every right in `need` must be in Open.GrantedAccess, as each handler's section of MS-SMB2
/// 3.3.5 and MS-FSA 2.1.5 requires: holding some other right (FILE_READ_DATA for a truncation,
/// say) is not enough. See [`refuse_on_read_only`] for the share check that follows.
pub fn require(open: &Open, need: u32) -> Result<(), NtStatus> {
    if open.granted & need != need {
        return Err(NtStatus::ACCESS_DENIED);
    }
    refuse_on_read_only(open, need)
}

/// For operations any one of several rights allows (WRITE: FILE_WRITE_DATA or
/// FILE_APPEND_DATA, MS-SMB2 3.3.5.13; FLUSH, 3.3.5.11).
pub fn require_any(open: &Open, any: u32) -> Result<(), NtStatus> {
    if open.granted & any == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    refuse_on_read_only(open, any)
}

/// A read-only share's MaximalAccess already leaves out every right that modifies, so a
/// mutation reaching a handler there means a grant slipped through somewhere (CREATE, a stored
/// DACL). The share flag is checked again at the point of change so that one mistake in how
/// access was granted cannot write to a share the administrator made read-only.
pub fn refuse_on_read_only(open: &Open, rights: u32) -> Result<(), NtStatus> {
    if rights & mask::WRITE_RIGHTS != 0 && open.tree.read_only() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    Ok(())
}

/// Whether `token` may make `owner` the owner of an object whose POSIX owner is presented as
/// `unix_owner`: the Unix owner the file already has on disk, which hands back nothing new,
/// or one of the token's own SIDs (MS-DTYP 2.5.3.4, no SeRestorePrivilege here).
///
/// Which SIDs are its own: where the request runs as its Unix user (crate::unix_identity)
/// only itself, its account SID or S-1-22-1-uid, as POSIX lets only root give a file away and
/// Windows lets a user name a group only where the group carries SE_GROUP_OWNER (none here).
/// A group every token holds (Everyone) would otherwise hand bob's descriptor to everyone.
/// Where every session is the server's user on disk, its groups too, as before.
pub fn may_assign_owner(token: &Token, owner: &Sid, unix_owner: &Sid) -> bool {
    if owner == unix_owner {
        return true;
    }
    if crate::unix_identity::active() {
        token.is_self(owner)
    } else {
        token.has(owner)
    }
}

/// Applies the parts of `new` that `addl` selects to `current` (MS-FSA 2.1.5.16). A DACL
/// selected but not marked present is a NULL DACL, as on Windows. SACLs are never applied
/// (the caller has already refused them: no session holds ACCESS_SYSTEM_SECURITY).
///
/// `canonicalize`: a new DACL is marked auto-inherited (SE_DACL_AUTO_INHERITED) only when the
/// client also set SE_DACL_AUTO_INHERIT_REQ, which is never stored (MS-DTYP 2.4.6: DR asks for
/// the propagation DI records; Windows' SetSecurityInfo, and Samba's canonicalize_inheritance_bits,
/// smbtorture smb2.acls.INHERITFLAGS). Without it, DI is stored as sent (a share with
/// `acl_flag_inherited_canonicalization = false`; smb2.acls_non_canonical).
pub fn merge(
    current: &SecurityDescriptor,
    new: &SecurityDescriptor,
    addl: u32,
    canonicalize: bool,
) -> Result<SecurityDescriptor, NtStatus> {
    let mut out = current.clone();
    out.control |= control::SE_SELF_RELATIVE;
    if addl & info::OWNER_SECURITY_INFORMATION != 0 {
        out.owner = Some(new.owner.clone().ok_or(INVALID_OWNER)?);
        out.control &= !control::SE_OWNER_DEFAULTED;
    }
    if addl & info::GROUP_SECURITY_INFORMATION != 0
        && let Some(g) = &new.group
    {
        out.group = Some(g.clone());
        out.control &= !control::SE_GROUP_DEFAULTED;
    }
    if addl & info::DACL_SECURITY_INFORMATION != 0 {
        let auto = control::SE_DACL_AUTO_INHERITED | control::SE_DACL_AUTO_INHERIT_REQ;
        let inherited = if canonicalize {
            new.control & auto == auto
        } else {
            new.control & control::SE_DACL_AUTO_INHERITED != 0
        };
        out.control = (out.control
            & !(control::SE_DACL_PROTECTED | auto | control::SE_DACL_DEFAULTED))
            | (new.control & control::SE_DACL_PROTECTED)
            | if inherited {
                control::SE_DACL_AUTO_INHERITED
            } else {
                0
            }
            | control::SE_DACL_PRESENT;
        out.dacl = if new.control & control::SE_DACL_PRESENT != 0 {
            new.dacl.clone()
        } else {
            None
        };
    }
    if out.dacl.is_none() {
        out.control |= control::SE_DACL_PRESENT;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_wire::security::{Ace, Acl};

    fn sd(owner: Sid, dacl: Option<Acl>, ctl: u16) -> SecurityDescriptor {
        SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | ctl,
            owner: Some(owner),
            group: Some(Sid::builtin_users()),
            sacl: None,
            dacl,
        }
    }

    #[test]
    fn access_needed_per_part() {
        use info::*;
        assert_eq!(query_needs(0), 0);
        assert_eq!(query_needs(OWNER_SECURITY_INFORMATION), mask::READ_CONTROL);
        assert_eq!(query_needs(DACL_SECURITY_INFORMATION), mask::READ_CONTROL);
        assert_eq!(
            query_needs(SACL_SECURITY_INFORMATION | GROUP_SECURITY_INFORMATION),
            mask::READ_CONTROL | mask::ACCESS_SYSTEM_SECURITY
        );
        assert_eq!(set_needs(0), 0);
        assert_eq!(set_needs(OWNER_SECURITY_INFORMATION), mask::WRITE_OWNER);
        assert_eq!(set_needs(GROUP_SECURITY_INFORMATION), mask::WRITE_OWNER);
        assert_eq!(set_needs(DACL_SECURITY_INFORMATION), mask::WRITE_DAC);
        assert_eq!(
            set_needs(SACL_SECURITY_INFORMATION),
            mask::ACCESS_SYSTEM_SECURITY
        );
    }

    #[test]
    fn merge_selected_parts() {
        let acl = Acl::new(vec![Ace::allowed(Sid::everyone(), 1, 0)]);
        let cur = sd(
            Sid::builtin_administrators(),
            Some(acl.clone()),
            control::SE_DACL_PRESENT,
        );
        let other_acl = Acl::new(vec![]);
        let new = sd(
            Sid::everyone(),
            Some(other_acl.clone()),
            control::SE_DACL_PRESENT,
        );

        let m = merge(&cur, &new, info::OWNER_SECURITY_INFORMATION, true).unwrap();
        assert_eq!(m.owner, Some(Sid::everyone()));
        assert_eq!(m.dacl, Some(acl.clone()), "DACL untouched");

        let m = merge(&cur, &new, info::DACL_SECURITY_INFORMATION, true).unwrap();
        assert_eq!(m.owner, cur.owner);
        assert_eq!(m.dacl, Some(other_acl));

        // DACL selected without DACL_PRESENT: a NULL DACL.
        let absent = sd(Sid::everyone(), None, 0);
        let m = merge(&cur, &absent, info::DACL_SECURITY_INFORMATION, true).unwrap();
        assert_eq!(m.dacl, None);
        assert_ne!(m.control & control::SE_DACL_PRESENT, 0);

        // Owner selected but missing.
        let mut no_owner = new.clone();
        no_owner.owner = None;
        assert_eq!(
            merge(&cur, &no_owner, info::OWNER_SECURITY_INFORMATION, true),
            Err(INVALID_OWNER)
        );
        // Protection bits follow the new DACL.
        let prot = sd(
            Sid::everyone(),
            Some(acl),
            control::SE_DACL_PRESENT | control::SE_DACL_PROTECTED,
        );
        let m = merge(&cur, &prot, info::DACL_SECURITY_INFORMATION, true).unwrap();
        assert_ne!(m.control & control::SE_DACL_PROTECTED, 0);
    }

    #[test]
    fn auto_inherited_needs_auto_inherit_required() {
        let acl = Acl::new(vec![Ace::allowed(Sid::everyone(), 1, 0)]);
        let cur = sd(Sid::everyone(), Some(acl.clone()), control::SE_DACL_PRESENT);
        let (di, dr) = (
            control::SE_DACL_AUTO_INHERITED,
            control::SE_DACL_AUTO_INHERIT_REQ,
        );
        let with = |ctl| {
            sd(
                Sid::everyone(),
                Some(acl.clone()),
                control::SE_DACL_PRESENT | ctl,
            )
        };
        let dacl = info::DACL_SECURITY_INFORMATION;
        // Canonical (Windows): DI only with DR, and DR itself is never kept.
        for (sent, kept) in [(0, 0), (di, 0), (dr, 0), (di | dr, di)] {
            let m = merge(&cur, &with(sent), dacl, true).unwrap();
            assert_eq!(m.control & (di | dr), kept, "sent {sent:#x}");
        }
        // Not canonical: DI as sent.
        for (sent, kept) in [(0, 0), (di, di), (dr, 0), (di | dr, di)] {
            let m = merge(&cur, &with(sent), dacl, false).unwrap();
            assert_eq!(m.control & (di | dr), kept, "sent {sent:#x}");
        }
        // A stored DI goes when a new DACL comes without it.
        let stored = merge(&cur, &with(di | dr), dacl, true).unwrap();
        let m = merge(&stored, &with(0), dacl, true).unwrap();
        assert_eq!(m.control & di, 0);
    }

    #[test]
    fn owner_assignment() {
        let t = Token {
            user: "S-1-5-21-1-2-3-1001".parse().unwrap(),
            primary_group: Sid::builtin_users(),
            groups: vec![Sid::everyone()],
        };
        let unix = Sid::unix_user(0);
        assert!(may_assign_owner(&t, &t.user, &unix));
        assert!(may_assign_owner(&t, &Sid::everyone(), &unix));
        assert!(may_assign_owner(&t, &unix, &unix));
        assert!(!may_assign_owner(&t, &Sid::builtin_administrators(), &unix));
        assert!(!may_assign_owner(&t, &Sid::unix_user(1000), &unix));
    }
}
