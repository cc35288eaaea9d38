//! The DACL evaluation of MS-DTYP 2.5.3.2 (AccessCheck), computing the full set of rights a
//! token holds; a request for specific rights succeeds when they are a subset (evaluating in
//! ACE order makes both answers agree, since an ACE only affects bits still undecided).

use smbq_wire::security::{AceType, SecurityDescriptor, Sid, ace_flags};

use super::Token;
use crate::access::{map_generic, mask};

/// S-1-3-4 OWNER RIGHTS: when the DACL names it, the owner's implicit rights are replaced by
/// what those ACEs say (MS-DTYP 2.5.3.2).
pub fn owner_rights() -> Sid {
    Sid::new(3, &[4])
}

/// Rights the owner holds whatever the DACL says (MS-DTYP 2.5.3.2).
pub const OWNER_IMPLICIT: u32 = mask::READ_CONTROL | mask::WRITE_DAC;

/// The rights access-based enumeration needs an entry's own descriptor to grant before a
/// listing shows the entry: reading its data, attributes, EAs and descriptor (Samba
/// user_can_read_fsp; smbtorture smb2.acls.ACCESSBASED).
pub const ABE_READ: u32 =
    mask::FILE_READ_DATA | mask::FILE_READ_EA | mask::FILE_READ_ATTRIBUTES | mask::READ_CONTROL;

/// Every right `token` holds on an object protected by `sd` (file-specific bits, generic
/// rights mapped). No DACL at all, or a NULL DACL (present without an ACL), protects nothing. ACCESS_SYSTEM_SECURITY is never in the result: it comes from a privilege
/// no session here holds.
pub fn maximal_access(sd: &SecurityDescriptor, token: &Token) -> u32 {
    let Some(dacl) = &sd.dacl else {
        return mask::FILE_ALL_ACCESS;
    };
    let is_owner = sd.owner.as_ref().is_some_and(|o| token.has(o));
    let owner_rights = owner_rights();
    let names_owner_rights = dacl.aces.iter().any(|a| a.sid == owner_rights);
    let mut granted = 0u32;
    let mut denied = 0u32;
    if is_owner && !names_owner_rights {
        granted |= OWNER_IMPLICIT;
    }
    for ace in &dacl.aces {
        if ace.flags & ace_flags::INHERIT_ONLY_ACE != 0 {
            continue;
        }
        let applies = if ace.sid == owner_rights {
            is_owner
        } else {
            token.has(&ace.sid)
        };
        if !applies {
            continue;
        }
        let bits = map_generic(ace.mask) & mask::FILE_ALL_ACCESS;
        match ace.ace_type {
            AceType::ACCESS_ALLOWED => granted |= bits & !denied,
            // A callback deny ACE whose condition we cannot evaluate still denies; a callback
            // allow ACE grants nothing (the safe readings of an unknown condition).
            AceType::ACCESS_DENIED | AceType::ACCESS_DENIED_CALLBACK => denied |= bits & !granted,
            _ => {}
        }
    }
    granted
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_wire::security::{Ace, Acl, control};

    fn token() -> Token {
        Token {
            user: "S-1-5-21-1-2-3-1001".parse().unwrap(),
            primary_group: "S-1-5-21-1-2-3-513".parse().unwrap(),
            groups: vec![Sid::everyone(), Sid::authenticated_users()],
        }
    }

    fn sd(owner: &str, dacl: Option<Vec<Ace>>) -> SecurityDescriptor {
        SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(owner.parse().unwrap()),
            group: None,
            sacl: None,
            dacl: dacl.map(Acl::new),
        }
    }

    const ME: &str = "S-1-5-21-1-2-3-1001";
    const OTHER: &str = "S-1-5-21-1-2-3-1002";

    /// One row per AccessCheck case (MS-DTYP 2.5.3.2); long because it is a table.
    #[test]
    fn table() {
        let read = mask::FILE_GENERIC_READ;
        let write = mask::FILE_GENERIC_WRITE;
        let everyone = Sid::everyone;
        let auth = Sid::authenticated_users;
        let other = || OTHER.parse::<Sid>().unwrap();
        let rows: Vec<(&str, SecurityDescriptor, u32)> = vec![
            ("null dacl", sd(OTHER, None), mask::FILE_ALL_ACCESS),
            ("empty dacl, not owner", sd(OTHER, Some(vec![])), 0),
            ("empty dacl, owner", sd(ME, Some(vec![])), OWNER_IMPLICIT),
            (
                "allow group",
                sd(OTHER, Some(vec![Ace::allowed(auth(), read, 0)])),
                read,
            ),
            (
                "allow for someone else",
                sd(
                    OTHER,
                    Some(vec![Ace::allowed(other(), mask::FILE_ALL_ACCESS, 0)]),
                ),
                0,
            ),
            (
                "deny before allow wins",
                sd(
                    OTHER,
                    Some(vec![
                        Ace::denied(everyone(), mask::FILE_WRITE_DATA, 0),
                        Ace::allowed(auth(), read | write, 0),
                    ]),
                ),
                (read | write) & !mask::FILE_WRITE_DATA,
            ),
            (
                "allow before deny wins",
                sd(
                    OTHER,
                    Some(vec![
                        Ace::allowed(auth(), read | write, 0),
                        Ace::denied(everyone(), mask::FILE_WRITE_DATA, 0),
                    ]),
                ),
                read | write,
            ),
            (
                "inherit-only ACEs do not apply",
                sd(
                    OTHER,
                    Some(vec![Ace::allowed(
                        everyone(),
                        read,
                        ace_flags::INHERIT_ONLY_ACE | ace_flags::OBJECT_INHERIT_ACE,
                    )]),
                ),
                0,
            ),
            (
                "generic bits are mapped",
                sd(
                    OTHER,
                    Some(vec![Ace::allowed(everyone(), mask::GENERIC_ALL, 0)]),
                ),
                mask::FILE_ALL_ACCESS,
            ),
            (
                "owner cannot be denied implicit rights",
                sd(
                    ME,
                    Some(vec![Ace::denied(everyone(), mask::FILE_ALL_ACCESS, 0)]),
                ),
                OWNER_IMPLICIT,
            ),
            (
                "OWNER RIGHTS replaces the implicit rights",
                sd(
                    ME,
                    Some(vec![Ace::allowed(owner_rights(), mask::READ_CONTROL, 0)]),
                ),
                mask::READ_CONTROL,
            ),
            (
                "OWNER RIGHTS does not match a non-owner",
                sd(
                    OTHER,
                    Some(vec![Ace::allowed(owner_rights(), mask::READ_CONTROL, 0)]),
                ),
                0,
            ),
            (
                "ACCESS_SYSTEM_SECURITY never comes from a DACL",
                sd(
                    OTHER,
                    Some(vec![Ace::allowed(
                        everyone(),
                        mask::ACCESS_SYSTEM_SECURITY | mask::DELETE,
                        0,
                    )]),
                ),
                mask::DELETE,
            ),
        ];
        let t = token();
        for (name, d, want) in rows {
            assert_eq!(maximal_access(&d, &t), want, "{name}");
        }
    }

    #[test]
    fn callback_aces() {
        let t = token();
        let mut deny = Ace::denied(Sid::everyone(), mask::FILE_WRITE_DATA, 0);
        deny.ace_type = AceType::ACCESS_DENIED_CALLBACK;
        let mut allow = Ace::allowed(Sid::everyone(), mask::FILE_READ_DATA, 0);
        allow.ace_type = AceType::ACCESS_ALLOWED_CALLBACK;
        let d = sd(
            OTHER,
            Some(vec![
                deny,
                allow,
                Ace::allowed(Sid::everyone(), mask::FILE_WRITE_DATA, 0),
            ]),
        );
        assert_eq!(maximal_access(&d, &t), 0);
    }
}
