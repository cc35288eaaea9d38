//! Security descriptors of new files and directories (MS-DTYP 2.5.3.4 CreateSecurityDescriptor,
//! 2.5.3.4.2 ComputeInheritedACLfromParent): the creator's descriptor when one came with the
//! CREATE (SecD context), else ACEs inherited from the parent, else the token's defaults.

use smbq_wire::security::{Ace, Acl, SecurityDescriptor, Sid, ace_flags, control};

use super::Token;
use crate::access::{map_generic, mask};

const INHERIT_FLAGS: u8 = ace_flags::OBJECT_INHERIT_ACE
    | ace_flags::CONTAINER_INHERIT_ACE
    | ace_flags::NO_PROPAGATE_INHERIT_ACE
    | ace_flags::INHERIT_ONLY_ACE;

const GENERIC: u32 =
    mask::GENERIC_ALL | mask::GENERIC_EXECUTE | mask::GENERIC_WRITE | mask::GENERIC_READ;

/// The ACEs a new child of a directory whose DACL is `parent` inherits. `owner` and `group`
/// replace CREATOR OWNER / CREATOR GROUP in the ACEs that take effect on the child; an ACE
/// that both takes effect and passes on to grandchildren is split in two so the placeholder
/// survives for them (MS-DTYP 2.5.3.4.2).
///
/// `auto`: the parent's DACL is auto-inherited (SE_DACL_AUTO_INHERITED), so the copies are
/// marked INHERITED_ACE (MS-DTYP 2.5.3.4.2 with DACL_AUTO_INHERIT); without it Windows and
/// Samba leave the mark off (smbtorture smb2.acls.INHERITANCE).
pub fn inherited_aces(
    parent: &Acl,
    is_dir: bool,
    owner: &Sid,
    group: &Sid,
    auto: bool,
) -> Vec<Ace> {
    let mut out = Vec::new();
    for ace in &parent.aces {
        let oi = ace.flags & ace_flags::OBJECT_INHERIT_ACE != 0;
        let ci = ace.flags & ace_flags::CONTAINER_INHERIT_ACE != 0;
        let np = ace.flags & ace_flags::NO_PROPAGATE_INHERIT_ACE != 0;
        let audit =
            ace.flags & (ace_flags::SUCCESSFUL_ACCESS_ACE_FLAG | ace_flags::FAILED_ACCESS_ACE_FLAG);
        let inherited = if auto { ace_flags::INHERITED_ACE } else { 0 };
        let base = inherited | audit;
        // (applies to the child, flags it keeps for its own children)
        let (effective, passes_on) = if is_dir {
            if ci {
                (
                    true,
                    if np {
                        0
                    } else {
                        ace.flags
                            & (ace_flags::OBJECT_INHERIT_ACE | ace_flags::CONTAINER_INHERIT_ACE)
                    },
                )
            } else if oi && !np {
                // Not for the directory itself, only for the files it will hold.
                (false, ace_flags::OBJECT_INHERIT_ACE)
            } else {
                continue;
            }
        } else if oi {
            (true, 0)
        } else {
            continue;
        };
        if !effective {
            out.push(Ace {
                flags: base | passes_on | ace_flags::INHERIT_ONLY_ACE,
                ..ace.clone()
            });
            continue;
        }
        let placeholder = ace.sid == Sid::creator_owner() || ace.sid == Sid::creator_group();
        let generic = ace.mask & GENERIC != 0;
        if passes_on != 0 && (placeholder || generic) {
            out.push(effective_copy(ace, base, owner, group));
            out.push(Ace {
                flags: base | passes_on | ace_flags::INHERIT_ONLY_ACE,
                ..ace.clone()
            });
        } else if passes_on != 0 {
            out.push(Ace {
                flags: base | passes_on,
                ..ace.clone()
            });
        } else {
            out.push(effective_copy(ace, base, owner, group));
        }
    }
    out
}

/// The copy of `ace` that takes effect on the child: placeholders resolved, generic rights
/// mapped, no inheritance flags.
fn effective_copy(ace: &Ace, flags: u8, owner: &Sid, group: &Sid) -> Ace {
    let sid = if ace.sid == Sid::creator_owner() {
        owner.clone()
    } else if ace.sid == Sid::creator_group() {
        group.clone()
    } else {
        ace.sid.clone()
    };
    Ace {
        flags: flags & !INHERIT_FLAGS,
        mask: map_generic(ace.mask),
        sid,
        ..ace.clone()
    }
}

/// The DACL a token gives objects it creates where nothing else applies: full control for
/// the creator and for SYSTEM (Windows' default token DACL).
pub fn default_dacl(token: &Token) -> Acl {
    Acl::new(vec![
        Ace::allowed(token.user.clone(), mask::FILE_ALL_ACCESS, 0),
        Ace::allowed(Sid::local_system(), mask::FILE_ALL_ACCESS, 0),
    ])
}

/// The descriptor of a new object. `creator` is the SecD context's descriptor (its owner
/// already validated), `parent` the parent directory's stored descriptor. Returns `None` when
/// neither exists or the parent passes nothing on: the object then keeps the descriptor its
/// POSIX metadata gives.
pub fn new_object_sd(
    creator: Option<&SecurityDescriptor>,
    parent: Option<&SecurityDescriptor>,
    is_dir: bool,
    token: &Token,
) -> Option<SecurityDescriptor> {
    let owner = creator
        .and_then(|c| c.owner.clone())
        .unwrap_or_else(|| token.user.clone());
    let group = creator
        .and_then(|c| c.group.clone())
        .unwrap_or_else(|| token.primary_group.clone());
    let parent_auto = parent.is_some_and(|p| p.control & control::SE_DACL_AUTO_INHERITED != 0);
    let inherited = parent
        .filter(|p| p.control & control::SE_DACL_PRESENT != 0 || p.dacl.is_some())
        .and_then(|p| p.dacl.as_ref())
        .map(|d| inherited_aces(d, is_dir, &owner, &group, parent_auto))
        .filter(|aces| !aces.is_empty());
    let mut ctl = control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT;
    let dacl = match creator {
        Some(c) if c.control & control::SE_DACL_PRESENT != 0 => {
            ctl |= c.control & (control::SE_DACL_PROTECTED | control::SE_DACL_AUTO_INHERITED);
            c.dacl.clone()
        }
        Some(_) => match inherited {
            Some(aces) => {
                if parent_auto {
                    ctl |= control::SE_DACL_AUTO_INHERITED;
                }
                Some(Acl::new(aces))
            }
            None => Some(default_dacl(token)),
        },
        None => {
            let aces = inherited?;
            if parent_auto {
                ctl |= control::SE_DACL_AUTO_INHERITED;
            }
            Some(Acl::new(aces))
        }
    };
    Some(SecurityDescriptor {
        control: ctl,
        owner: Some(owner),
        group: Some(group),
        sacl: None,
        dacl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ace_flags::*;

    fn token() -> Token {
        Token {
            user: "S-1-5-21-1-2-3-1001".parse().unwrap(),
            primary_group: "S-1-5-21-1-2-3-513".parse().unwrap(),
            groups: vec![Sid::everyone()],
        }
    }

    fn parent(aces: Vec<Ace>) -> SecurityDescriptor {
        SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(Sid::builtin_administrators()),
            group: Some(Sid::builtin_users()),
            sacl: None,
            dacl: Some(Acl::new(aces)),
        }
    }

    const R: u32 = mask::FILE_GENERIC_READ;

    /// (parent ACE flags, child is dir) -> flags of the child's ACEs (empty: not inherited).
    #[test]
    fn inheritance_flags_table() {
        let rows: &[(u8, bool, &[u8])] = &[
            (0, false, &[]),
            (0, true, &[]),
            (OBJECT_INHERIT_ACE, false, &[INHERITED_ACE]),
            (
                OBJECT_INHERIT_ACE,
                true,
                &[INHERITED_ACE | INHERIT_ONLY_ACE | OBJECT_INHERIT_ACE],
            ),
            (CONTAINER_INHERIT_ACE, false, &[]),
            (
                CONTAINER_INHERIT_ACE,
                true,
                &[INHERITED_ACE | CONTAINER_INHERIT_ACE],
            ),
            (
                OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                true,
                &[INHERITED_ACE | OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE],
            ),
            (
                OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                false,
                &[INHERITED_ACE],
            ),
            (
                CONTAINER_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE,
                true,
                &[INHERITED_ACE],
            ),
            (OBJECT_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE, true, &[]),
            (
                OBJECT_INHERIT_ACE | NO_PROPAGATE_INHERIT_ACE,
                false,
                &[INHERITED_ACE],
            ),
            // An inherit-only ACE on the parent still takes effect on the children.
            (
                OBJECT_INHERIT_ACE | INHERIT_ONLY_ACE,
                false,
                &[INHERITED_ACE],
            ),
            (
                CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE,
                true,
                &[INHERITED_ACE | CONTAINER_INHERIT_ACE],
            ),
        ];
        let t = token();
        for &(flags, is_dir, want) in rows {
            let p = Acl::new(vec![Ace::allowed(Sid::everyone(), R, flags)]);
            let got: Vec<u8> = inherited_aces(&p, is_dir, &t.user, &t.primary_group, true)
                .iter()
                .map(|a| a.flags)
                .collect();
            assert_eq!(got, want, "flags {flags:#x} dir {is_dir}");
        }
    }

    #[test]
    fn creator_owner_is_substituted_and_kept_for_grandchildren() {
        let t = token();
        let p = Acl::new(vec![Ace::allowed(
            Sid::creator_owner(),
            mask::GENERIC_ALL,
            OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
        )]);
        let file = inherited_aces(&p, false, &t.user, &t.primary_group, true);
        assert_eq!(
            file,
            vec![Ace::allowed(
                t.user.clone(),
                mask::FILE_ALL_ACCESS,
                INHERITED_ACE
            )]
        );
        let dir = inherited_aces(&p, true, &t.user, &t.primary_group, true);
        assert_eq!(dir.len(), 2);
        assert_eq!(
            dir[0],
            Ace::allowed(t.user.clone(), mask::FILE_ALL_ACCESS, INHERITED_ACE)
        );
        assert_eq!(dir[1].sid, Sid::creator_owner());
        assert_eq!(dir[1].mask, mask::GENERIC_ALL);
        assert_eq!(
            dir[1].flags,
            INHERITED_ACE | INHERIT_ONLY_ACE | OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
        );
        let g = Acl::new(vec![Ace::allowed(
            Sid::creator_group(),
            R,
            OBJECT_INHERIT_ACE,
        )]);
        let file = inherited_aces(&g, false, &t.user, &t.primary_group, true);
        assert_eq!(file[0].sid, t.primary_group);
    }

    #[test]
    fn new_object_descriptors() {
        let t = token();
        // Nothing to go on: keep the POSIX view.
        assert_eq!(new_object_sd(None, None, false, &t), None);
        let no_inherit = parent(vec![Ace::allowed(Sid::everyone(), R, 0)]);
        assert_eq!(new_object_sd(None, Some(&no_inherit), false, &t), None);

        let inh = parent(vec![Ace::allowed(Sid::everyone(), R, OBJECT_INHERIT_ACE)]);
        let sd = new_object_sd(None, Some(&inh), false, &t).unwrap();
        assert_eq!(sd.owner.as_ref(), Some(&t.user));
        assert_eq!(sd.group.as_ref(), Some(&t.primary_group));
        assert_eq!(
            sd.dacl.unwrap().aces,
            vec![Ace::allowed(Sid::everyone(), R, 0)]
        );
        // Under an auto-inherited parent the copies are marked inherited, and so is the DACL.
        let auto = SecurityDescriptor {
            control: inh.control | control::SE_DACL_AUTO_INHERITED,
            ..inh.clone()
        };
        let sd = new_object_sd(None, Some(&auto), false, &t).unwrap();
        assert_ne!(sd.control & control::SE_DACL_AUTO_INHERITED, 0);
        assert_eq!(
            sd.dacl.unwrap().aces,
            vec![Ace::allowed(Sid::everyone(), R, INHERITED_ACE)]
        );

        // A creator descriptor without a DACL gets the inherited one, or the default.
        let empty = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE,
            ..Default::default()
        };
        let sd = new_object_sd(Some(&empty), None, false, &t).unwrap();
        assert_eq!(sd.dacl, Some(default_dacl(&t)));
        assert_ne!(sd.control & control::SE_DACL_PRESENT, 0);
        let sd = new_object_sd(Some(&empty), Some(&inh), false, &t).unwrap();
        assert_eq!(sd.dacl.unwrap().aces.len(), 1);

        // An explicit DACL (even NULL) wins over inheritance; the owner given is kept.
        let null = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(Sid::everyone()),
            ..Default::default()
        };
        let sd = new_object_sd(Some(&null), Some(&inh), false, &t).unwrap();
        assert_eq!(sd.dacl, None);
        assert_eq!(sd.owner, Some(Sid::everyone()));
        assert_ne!(sd.control & control::SE_DACL_PRESENT, 0);
    }
}
