//! Who a session is, as SIDs (MS-DTYP 2.5.2 Token/Authorization Context): a user SID derived
//! from the account name, the well-known groups every such user belongs to, and a primary group
//! used as the default group of new objects.
//!
//! No account database holds SIDs, so a user's SID is computed: the domain part comes from the
//! server GUID (stable for an install), the RID from the lowercased user name. The same name
//! always yields the same SID, across restarts and sessions, without writing anything.
//!
//! Every authenticated (not guest, not anonymous) user also carries the SIDs of the Unix user
//! and group it acts as on disk (S-1-22-1-uid, S-1-22-2-gid), so the descriptors synthesised
//! from POSIX metadata, which name the file's Unix owner, name it. Without per-user identities
//! that is the server's own user: on disk every session *is* that user, so such a descriptor
//! can be changed by any authenticated user, and taking ownership with one's own SID protects
//! it. With `unix_identity = "per-user"` it is the account's Unix user and its groups
//! (crate::unix_identity), so only the file's real owner is its owner over SMB too.

use smbq_auth::Identity;
use smbq_wire::security::Sid;

/// NT authority (MS-DTYP 2.4.2.4).
const NT_AUTHORITY: u64 = 5;
/// S-1-5-21: the prefix of domain and machine SIDs.
const NT_NON_UNIQUE: u32 = 21;
/// Well-known RIDs (MS-DTYP 2.4.2.4).
const RID_GUEST: u32 = 501;
const RID_DOMAIN_USERS: u32 = 513;
const RID_DOMAIN_GUESTS: u32 = 514;
/// Computed user RIDs start above the well-known range and stay below 2^31.
const RID_FIRST_USER: u32 = 1000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub user: Sid,
    /// Group given to objects this token creates without naming one.
    pub primary_group: Sid,
    /// Every group SID the token carries (the primary group included).
    pub groups: Vec<Sid>,
}

/// The (uid, gid) the server process runs as, from the owner of `/proc/self` (procfs gives
/// it the effective ids); `None` where that cannot be read.
pub fn process_ids() -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    static IDS: std::sync::OnceLock<Option<(u32, u32)>> = std::sync::OnceLock::new();
    *IDS.get_or_init(|| {
        std::fs::metadata("/proc/self")
            .ok()
            .map(|m| (m.uid(), m.gid()))
    })
}

/// S-1-5-7 ANONYMOUS LOGON.
fn anonymous() -> Sid {
    Sid::new(NT_AUTHORITY, &[7])
}

/// S-1-5-32-546 BUILTIN\Guests.
pub fn builtin_guests() -> Sid {
    Sid::new(NT_AUTHORITY, &[32, 546])
}

/// The server's domain SID S-1-5-21-a-b-c, the three sub-authorities read from the GUID.
pub fn domain_sid(server_guid: &[u8; 16]) -> [u32; 4] {
    let word = |i: usize| {
        let mut b = [0u8; 4];
        if let Some(s) = server_guid.get(i * 4..i * 4 + 4) {
            b.copy_from_slice(s);
        }
        u32::from_le_bytes(b)
    };
    [NT_NON_UNIQUE, word(0), word(1), word(2)]
}

/// A stable RID for `user`: FNV-1a over the lowercased name, folded into
/// `[RID_FIRST_USER, 2^31)`. Distinct names can collide (about one pair in 2^31); a collision
/// would give two accounts the same SID.
pub fn user_rid(user: &str) -> u32 {
    let h = crate::fnv::fnv1a(user.to_lowercase().as_bytes());
    let span = u64::from((1u32 << 31) - RID_FIRST_USER);
    RID_FIRST_USER + u32::try_from((h ^ (h >> 32)) % span).unwrap_or(0)
}

fn domain_member(server_guid: &[u8; 16], rid: u32) -> Sid {
    let d = domain_sid(server_guid);
    Sid::new(NT_AUTHORITY, &[d[0], d[1], d[2], d[3], rid])
}

impl Token {
    /// The token of a session: authenticated users get their own SID, Domain Users,
    /// Everyone, Authenticated Users and BUILTIN\Users; guests get Guest, Domain Guests,
    /// Everyone and BUILTIN\Guests; anonymous logons get ANONYMOUS LOGON and BUILTIN\Guests
    /// (Windows leaves Everyone out of anonymous tokens by default).
    pub fn for_identity(id: &Identity, server_guid: &[u8; 16]) -> Token {
        Self::with_unix_ids(id, server_guid, process_ids())
    }

    /// The token of a session acting on disk as `unix` (per-user identities): its uid, its
    /// primary group and every supplementary group.
    pub fn for_unix_user(
        id: &Identity,
        server_guid: &[u8; 16],
        unix: &crate::unix_identity::UnixIdentity,
    ) -> Token {
        let mut t = Self::with_unix_ids(id, server_guid, Some((unix.uid, unix.gid)));
        for g in &unix.groups {
            let sid = Sid::unix_group(*g);
            if !t.groups.contains(&sid) {
                t.groups.push(sid);
            }
        }
        t
    }

    /// [`Token::for_identity`] with the server's Unix (uid, gid) given explicitly.
    pub fn with_unix_ids(id: &Identity, server_guid: &[u8; 16], unix: Option<(u32, u32)>) -> Token {
        if id.is_anonymous {
            let primary = builtin_guests();
            return Token {
                user: anonymous(),
                primary_group: primary.clone(),
                groups: vec![primary],
            };
        }
        if id.is_guest {
            let primary = domain_member(server_guid, RID_DOMAIN_GUESTS);
            return Token {
                user: domain_member(server_guid, RID_GUEST),
                primary_group: primary.clone(),
                groups: vec![primary, Sid::everyone(), builtin_guests()],
            };
        }
        let primary = domain_member(server_guid, RID_DOMAIN_USERS);
        let mut groups = vec![
            primary.clone(),
            Sid::everyone(),
            Sid::authenticated_users(),
            Sid::builtin_users(),
        ];
        if let Some((uid, gid)) = unix {
            groups.push(Sid::unix_user(uid));
            groups.push(Sid::unix_group(gid));
        }
        Token {
            user: domain_member(server_guid, user_rid(&id.user)),
            primary_group: primary,
            groups,
        }
    }

    /// Whether `sid` is the token's user or one of its groups.
    pub fn has(&self, sid: &Sid) -> bool {
        self.user == *sid || self.groups.iter().any(|g| g == sid)
    }

    /// Whether `sid` names the token's user itself: its account SID, or the S-1-22-1-uid of
    /// the Unix user it acts as (carried with its groups), never a group.
    pub fn is_self(&self, sid: &Sid) -> bool {
        self.user == *sid || (sid.as_unix_user().is_some() && self.groups.iter().any(|g| g == sid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ident(user: &str, guest: bool, anon: bool) -> Identity {
        Identity {
            user: user.into(),
            domain: "WORKGROUP".into(),
            is_guest: guest,
            is_anonymous: anon,
        }
    }

    const GUID: [u8; 16] = [1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0];

    #[test]
    fn user_sid_is_stable_and_case_insensitive() {
        let a = Token::for_identity(&ident("Alice", false, false), &GUID);
        let b = Token::for_identity(&ident("alice", false, false), &GUID);
        let c = Token::for_identity(&ident("bob", false, false), &GUID);
        assert_eq!(a.user, b.user);
        assert_ne!(a.user, c.user);
        let s = a.user.to_string();
        assert!(s.starts_with("S-1-5-21-1-2-3-"), "{s}");
        let rid = user_rid("alice");
        assert_eq!(rid, 1_954_291_364, "a user keeps the SID it always had");
        assert!((RID_FIRST_USER..1 << 31).contains(&rid));
        assert!(a.has(&Sid::everyone()) && a.has(&Sid::authenticated_users()));
        assert!(a.has(&Sid::builtin_users()) && a.has(&a.user));
        assert!(!a.has(&builtin_guests()));
    }

    #[test]
    fn authenticated_users_are_the_servers_unix_user() {
        let ids = Some((1234, 99));
        let a = Token::with_unix_ids(&ident("alice", false, false), &GUID, ids);
        assert!(a.has(&Sid::unix_user(1234)) && a.has(&Sid::unix_group(99)));
        assert!(!a.has(&Sid::unix_user(0)));
        let g = Token::with_unix_ids(&ident("x", true, false), &GUID, ids);
        assert!(!g.has(&Sid::unix_user(1234)), "guests are not");
        let n = Token::with_unix_ids(&ident("", false, true), &GUID, ids);
        assert!(!n.has(&Sid::unix_user(1234)), "anonymous is not");
        let none = Token::with_unix_ids(&ident("alice", false, false), &GUID, None);
        assert_eq!(none.groups.len(), 4);
    }

    #[test]
    fn guests_and_anonymous_are_not_authenticated_users() {
        let g = Token::for_identity(&ident("x", true, false), &GUID);
        assert_eq!(g.user.to_string(), "S-1-5-21-1-2-3-501");
        assert!(g.has(&builtin_guests()) && g.has(&Sid::everyone()));
        assert!(!g.has(&Sid::authenticated_users()));
        let n = Token::for_identity(&ident("", false, true), &GUID);
        assert_eq!(n.user.to_string(), "S-1-5-7");
        assert!(!n.has(&Sid::everyone()) && !n.has(&Sid::authenticated_users()));
    }

    #[test]
    fn different_servers_give_different_domains() {
        let mut other = GUID;
        other[0] = 9;
        let a = Token::for_identity(&ident("alice", false, false), &GUID);
        let b = Token::for_identity(&ident("alice", false, false), &other);
        assert_ne!(a.user, b.user);
    }

    #[test]
    fn a_per_user_token_names_the_unix_user_and_its_groups_not_the_server() {
        let unix = crate::unix_identity::UnixIdentity {
            name: "alice".into(),
            uid: 1001,
            gid: 1001,
            groups: vec![1001, 27, 100],
        };
        let t = Token::for_unix_user(&ident("alice", false, false), &GUID, &unix);
        assert!(t.has(&Sid::unix_user(1001)));
        for g in [1001, 27, 100] {
            assert!(t.has(&Sid::unix_group(g)), "{g}");
        }
        if let Some((uid, _)) = process_ids().filter(|(uid, _)| *uid != 1001) {
            assert!(!t.has(&Sid::unix_user(uid)), "not the server's own user");
        }
    }

    #[test]
    fn only_the_user_itself_is_self() {
        let unix = crate::unix_identity::UnixIdentity {
            name: "alice".into(),
            uid: 1001,
            gid: 1001,
            groups: vec![1001, 27],
        };
        let t = Token::for_unix_user(&ident("alice", false, false), &GUID, &unix);
        assert!(t.is_self(&t.user.clone()));
        assert!(t.is_self(&Sid::unix_user(1001)));
        for other in [
            Sid::everyone(),
            Sid::authenticated_users(),
            Sid::unix_group(27),
            Sid::unix_user(1002),
            t.primary_group.clone(),
        ] {
            assert!(t.has(&other) || other == Sid::unix_user(1002));
            assert!(!t.is_self(&other), "{other:?}");
        }
    }
}
