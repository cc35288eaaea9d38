//! Stored security descriptors through the handlers: SecD on CREATE, the DACL access check on
//! later opens, SET_INFO / QUERY_INFO SECURITY with their access rules, inheritance, owners.

use std::sync::Arc;

use smbq_auth::Identity;
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::security::{Ace, Acl, SecurityDescriptor, Sid, ace_flags, control, info};
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, conn, msg, session};
use crate::access::{attr, mask, opts};
use crate::security::Token;

pub(super) fn sd(owner: Option<Sid>, dacl: Option<Vec<Ace>>) -> SecurityDescriptor {
    SecurityDescriptor {
        control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
        owner,
        group: None,
        sacl: None,
        dacl: dacl.map(Acl::new),
    }
}

fn secd(d: &SecurityDescriptor) -> Vec<u8> {
    let b = d.to_bytes();
    contexts_to_bytes(&[CreateContext::new(CreateContextTag::SECD, &b)])
}

pub(super) async fn create_sd(
    h: &H,
    name: &str,
    access: u32,
    options: u32,
    d: &SecurityDescriptor,
) -> (NtStatus, FileId) {
    let o = h
        .create_req(name, access, D::CREATE)
        .options(options)
        .contexts(&secd(d))
        .send()
        .await;
    (o.status, o.id)
}

async fn open(h: &H, name: &str, access: u32) -> (NtStatus, FileId) {
    let o = h.create(name, access, D::OPEN, 0).await;
    (o.status, o.id)
}

async fn query_sd(h: &H, id: FileId, addl: u32) -> (NtStatus, Option<SecurityDescriptor>) {
    let m = msg(Command::QUERY_INFO, h.tree, h.session.id, |w| {
        QueryInfoRequest {
            info_type: InfoType::SECURITY,
            file_info_class: 0,
            output_buffer_length: 4096,
            additional_information: addl,
            flags: 0,
            file_id: id,
            input: &[],
        }
        .encode(w)
    });
    let r = h.send(m).await;
    if r.status != NtStatus::SUCCESS {
        return (r.status, None);
    }
    let mut full = vec![0u8; 64];
    full.extend_from_slice(&r.body);
    let buf = QueryInfoResponse::decode(&full).unwrap().buffer.to_vec();
    (r.status, Some(SecurityDescriptor::decode(&buf).unwrap()))
}

async fn query_file(h: &H, id: FileId, class: u8) -> NtStatus {
    let m = msg(Command::QUERY_INFO, h.tree, h.session.id, |w| {
        QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: class,
            output_buffer_length: 4096,
            additional_information: 0,
            flags: 0,
            file_id: id,
            input: &[],
        }
        .encode(w)
    });
    h.send(m).await.status
}

pub(super) async fn set_sd(h: &H, id: FileId, addl: u32, d: &SecurityDescriptor) -> NtStatus {
    let b = d.to_bytes();
    let m = msg(Command::SET_INFO, h.tree, h.session.id, |w| {
        SetInfoRequest {
            info_type: InfoType::SECURITY,
            file_info_class: 0,
            additional_information: addl,
            file_id: id,
            buffer: &b,
        }
        .encode(w)
    });
    h.send(m).await.status
}

/// A second user on the same server and share.
async fn other_user(h: &H, name: &str) -> H {
    let mut s = session(0x22);
    h.srv.session_table().insert(s.id);
    h.srv.session_started(s.id, h.conn.id);
    s.identity = Arc::new(Identity {
        user: name.into(),
        domain: "D".into(),
        is_guest: false,
        is_anonymous: false,
    });
    let mut o = H {
        srv: h.srv.clone(),
        conn: conn(),
        session: s,
        tree: 0,
        dir: tempfile::tempdir().unwrap(),
    };
    let r = o.tree_connect("\\\\srv\\data").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    o.tree = r.tree_id.unwrap();
    o
}

pub(super) fn token(h: &H) -> Token {
    Token::for_identity(&h.session.identity, &h.srv.config().server_guid)
}

const READ: u32 = mask::FILE_GENERIC_READ;

#[tokio::test]
async fn secd_dacl_decides_later_opens() {
    let h = H::new().await;
    let d = sd(
        None,
        Some(vec![Ace::allowed(Sid::authenticated_users(), READ, 0)]),
    );
    let (s, id) = create_sd(&h, "f", mask::GENERIC_ALL, 0, &d).await;
    assert_eq!(s, NtStatus::SUCCESS, "the creator gets what it asked for");
    h.close(id).await;

    assert_eq!(
        open(&h, "f", mask::FILE_WRITE_DATA).await.0,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        open(&h, "f", mask::GENERIC_WRITE).await.0,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        open(&h, "f", mask::WRITE_OWNER).await.0,
        NtStatus::ACCESS_DENIED
    );
    let (s, id) = open(&h, "f", mask::GENERIC_READ).await;
    assert_eq!(s, NtStatus::SUCCESS);
    h.close(id).await;
    // Owner: WRITE_DAC implicitly; DELETE through the parent's FILE_DELETE_CHILD.
    let (s, id) = open(&h, "f", mask::WRITE_DAC | mask::DELETE).await;
    assert_eq!(s, NtStatus::SUCCESS);
    h.close(id).await;
    // MAXIMUM_ALLOWED gives exactly the union.
    let (s, id) = open(&h, "f", mask::MAXIMUM_ALLOWED).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let (_, got) = query_sd(&h, id, info::OWNER_SECURITY_INFORMATION).await;
    assert_eq!(got.unwrap().owner, Some(token(&h).user), "creator owns it");
    h.close(id).await;

    // Another user is not the owner: no WRITE_DAC.
    let bob = other_user(&h, "bob").await;
    assert_eq!(
        open(&bob, "f", mask::WRITE_DAC).await.0,
        NtStatus::ACCESS_DENIED
    );
    let (s, id) = open(&bob, "f", mask::GENERIC_READ).await;
    assert_eq!(s, NtStatus::SUCCESS);
    bob.close(id).await;
}

#[tokio::test]
async fn empty_and_null_dacls() {
    let h = H::new().await;
    let d = sd(None, Some(vec![]));
    let (s, id) = create_sd(&h, "f", mask::READ_CONTROL | mask::WRITE_DAC, 0, &d).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let (s, got) = query_sd(&h, id, info::DACL_SECURITY_INFORMATION).await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(got.unwrap().dacl, Some(Acl::new(vec![])));
    // Empty DACL: only the owner's implicit rights.
    assert_eq!(
        open(&h, "f", mask::FILE_READ_DATA).await.0,
        NtStatus::ACCESS_DENIED
    );
    let (s, id2) = open(&h, "f", mask::READ_CONTROL).await;
    assert_eq!(s, NtStatus::SUCCESS);
    h.close(id2).await;

    // NULL DACL (selected, not present): everything for everyone.
    let null = SecurityDescriptor {
        control: control::SE_SELF_RELATIVE,
        ..Default::default()
    };
    assert_eq!(
        set_sd(&h, id, info::DACL_SECURITY_INFORMATION, &null).await,
        NtStatus::SUCCESS
    );
    let (_, got) = query_sd(&h, id, info::DACL_SECURITY_INFORMATION).await;
    let got = got.unwrap();
    assert_eq!(got.dacl, None);
    assert_ne!(got.control & control::SE_DACL_PRESENT, 0);
    let bob = other_user(&h, "bob").await;
    let (s, id3) = open(&bob, "f", mask::GENERIC_ALL).await;
    assert_eq!(s, NtStatus::SUCCESS);
    bob.close(id3).await;
    h.close(id).await;
}

#[tokio::test]
async fn security_info_access_rules() {
    let h = H::new().await;
    h.put("f", b"x").await;
    let (s, id) = open(&h, "f", mask::FILE_READ_ATTRIBUTES).await;
    assert_eq!(s, NtStatus::SUCCESS);
    // Nothing selected needs nothing (smb2.sdread); any part needs READ_CONTROL.
    let (s, got) = query_sd(&h, id, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let got = got.unwrap();
    assert!(got.owner.is_none() && got.group.is_none() && got.dacl.is_none());
    for part in [
        info::OWNER_SECURITY_INFORMATION,
        info::GROUP_SECURITY_INFORMATION,
        info::DACL_SECURITY_INFORMATION,
        info::SACL_SECURITY_INFORMATION,
    ] {
        assert_eq!(
            query_sd(&h, id, part).await.0,
            NtStatus::ACCESS_DENIED,
            "{part}"
        );
    }
    let d = sd(None, Some(vec![]));
    assert_eq!(
        set_sd(&h, id, info::DACL_SECURITY_INFORMATION, &d).await,
        NtStatus::ACCESS_DENIED
    );
    h.close(id).await;

    // READ_CONTROL alone: descriptor yes, attributes no (MS-SMB2 3.3.5.20.1).
    let (_, id) = open(&h, "f", mask::READ_CONTROL).await;
    assert_eq!(
        query_sd(&h, id, info::DACL_SECURITY_INFORMATION).await.0,
        NtStatus::SUCCESS
    );
    assert_eq!(
        query_sd(&h, id, info::SACL_SECURITY_INFORMATION).await.0,
        NtStatus::ACCESS_DENIED
    );
    for class in [4u8, 18, 34, 35] {
        assert_eq!(
            query_file(&h, id, class).await,
            NtStatus::ACCESS_DENIED,
            "class {class}"
        );
    }
    assert_eq!(
        query_file(&h, id, 5).await,
        NtStatus::SUCCESS,
        "standard info needs nothing"
    );
    h.close(id).await;
}

#[tokio::test]
async fn owners_a_user_may_assign() {
    let h = H::new().await;
    let admin = sd(Some(Sid::builtin_administrators()), Some(vec![]));
    let (s, _) = create_sd(&h, "f", mask::GENERIC_ALL, 0, &admin).await;
    assert_eq!(s, crate::security::INVALID_OWNER);
    assert!(
        !h.path("f").exists(),
        "a refused create leaves nothing behind"
    );

    let everyone = sd(Some(Sid::everyone()), None);
    let (s, id) = create_sd(&h, "g", mask::GENERIC_ALL, 0, &everyone).await;
    assert_eq!(s, NtStatus::SUCCESS, "a group the user is in may own it");
    let mine = sd(Some(token(&h).user), None);
    assert_eq!(
        set_sd(&h, id, info::OWNER_SECURITY_INFORMATION, &mine).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set_sd(&h, id, info::OWNER_SECURITY_INFORMATION, &admin).await,
        crate::security::INVALID_OWNER
    );
    h.close(id).await;

    // A SACL needs a privilege nobody here holds.
    let mut with_sacl = sd(None, None);
    with_sacl.sacl = Some(Acl::new(vec![]));
    assert_eq!(
        create_sd(&h, "h", mask::GENERIC_ALL, 0, &with_sacl).await.0,
        NtStatus::PRIVILEGE_NOT_HELD
    );
}

#[tokio::test]
async fn children_inherit_and_parent_rules_apply() {
    let h = H::new().await;
    let everyone_all = Ace::allowed(
        Sid::everyone(),
        mask::FILE_ALL_ACCESS,
        ace_flags::OBJECT_INHERIT_ACE | ace_flags::CONTAINER_INHERIT_ACE,
    );
    let creator = Ace::allowed(
        Sid::creator_owner(),
        mask::GENERIC_ALL,
        ace_flags::OBJECT_INHERIT_ACE | ace_flags::INHERIT_ONLY_ACE,
    );
    let d = sd(None, Some(vec![everyone_all.clone(), creator]));
    let (s, id) = create_sd(&h, "d", mask::GENERIC_ALL, opts::DIRECTORY_FILE, &d).await;
    assert_eq!(s, NtStatus::SUCCESS);
    h.close(id).await;

    let o = h.create("d\\f", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let (_, got) = query_sd(
        &h,
        o.id,
        info::OWNER_SECURITY_INFORMATION | info::DACL_SECURITY_INFORMATION,
    )
    .await;
    let got = got.unwrap();
    let me = token(&h).user;
    assert_eq!(got.owner.as_ref(), Some(&me));
    assert_eq!(
        got.dacl.unwrap().aces,
        vec![
            // The parent's DACL is not auto-inherited: no INHERITED_ACE mark (as Windows).
            Ace::allowed(Sid::everyone(), mask::FILE_ALL_ACCESS, 0),
            Ace::allowed(me, mask::FILE_ALL_ACCESS, 0),
        ]
    );
    h.close(o.id).await;

    // A directory that does not let anyone add files refuses new children.
    let locked = sd(None, Some(vec![Ace::allowed(Sid::everyone(), READ, 0)]));
    let (s, id) = create_sd(&h, "ro", mask::GENERIC_ALL, opts::DIRECTORY_FILE, &locked).await;
    assert_eq!(s, NtStatus::SUCCESS);
    h.close(id).await;
    assert_eq!(
        h.create("ro\\x", mask::GENERIC_ALL, D::CREATE, 0)
            .await
            .status,
        NtStatus::ACCESS_DENIED
    );
    assert!(!h.path("ro/x").exists());
    // Nor through a stream of a missing file, which creates the file (MS-FSA 2.1.5.1.1).
    assert_eq!(
        h.create("ro\\y:s", mask::GENERIC_ALL, D::CREATE, 0)
            .await
            .status,
        NtStatus::ACCESS_DENIED
    );
    assert!(!h.path("ro/y").exists());
    // A stream's new base file inherits like any new file.
    let o = h.create("d\\g:s", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    let o = h.create("d\\g", mask::READ_CONTROL, D::OPEN, 0).await;
    let (_, got) = query_sd(&h, o.id, info::DACL_SECURITY_INFORMATION).await;
    assert_eq!(
        got.unwrap().dacl.unwrap().aces,
        vec![
            Ace::allowed(Sid::everyone(), mask::FILE_ALL_ACCESS, 0),
            Ace::allowed(token(&h).user, mask::FILE_ALL_ACCESS, 0),
        ]
    );
    h.close(o.id).await;
    // And without FILE_DELETE_CHILD there, a child's DELETE comes from its own DACL only.

    // Without any stored descriptor, new files keep the POSIX view (no descriptor written),
    // owned by whoever created them; a file made locally shows its Unix owner.
    h.put("plain", b"").await;
    let o = h.create("plain", mask::READ_CONTROL, D::OPEN, 0).await;
    let (_, got) = query_sd(&h, o.id, info::OWNER_SECURITY_INFORMATION).await;
    assert_eq!(got.unwrap().owner, Some(token(&h).user));
    h.close(o.id).await;
    std::fs::write(h.path("local"), b"").unwrap();
    let o = h.create("local", mask::READ_CONTROL, D::OPEN, 0).await;
    let (_, got) = query_sd(&h, o.id, info::OWNER_SECURITY_INFORMATION).await;
    assert!(got.unwrap().owner.unwrap().as_unix_user().is_some());
    h.close(o.id).await;
}

#[tokio::test]
async fn overwrite_must_keep_hidden_and_system() {
    let h = H::new().await;
    let o = h
        .create_req("f", mask::GENERIC_ALL, D::CREATE)
        .attrs(attr::HIDDEN)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    let ow = |a| {
        h.create_req("f", mask::GENERIC_ALL, D::OVERWRITE_IF)
            .attrs(a)
            .send()
    };
    assert_eq!(ow(attr::NORMAL).await.status, NtStatus::ACCESS_DENIED);
    let o = ow(attr::HIDDEN).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    h.close(o.id).await;
    // A dot-name's HIDDEN is presentation, not a stored attribute.
    h.put(".dot", b"").await;
    let o = h
        .create_req(".dot", mask::GENERIC_ALL, D::OVERWRITE_IF)
        .attrs(attr::NORMAL)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
}

/// smb2.setinfo's descriptor step: read the POSIX view, add an ACE, write all three parts
/// back (owner unchanged), read it again, then remove the ACE.
#[tokio::test]
async fn posix_view_round_trips_through_set_info() {
    let h = H::new().await;
    h.put("f", b"x").await;
    let (_, id) = open(&h, "f", mask::MAXIMUM_ALLOWED).await;
    let all = info::OWNER_SECURITY_INFORMATION
        | info::GROUP_SECURITY_INFORMATION
        | info::DACL_SECURITY_INFORMATION;
    let (_, orig) = query_sd(&h, id, all).await;
    let orig = orig.unwrap();
    let mut added = orig.clone();
    let extra: Sid = "S-1-5-32-1234-5432".parse().unwrap();
    added
        .dacl
        .as_mut()
        .unwrap()
        .aces
        .push(Ace::allowed(extra, 0x001F_0000, 0));
    assert_eq!(set_sd(&h, id, all, &added).await, NtStatus::SUCCESS);
    let (_, got) = query_sd(&h, id, all).await;
    let got = got.unwrap();
    assert_eq!(got.dacl, added.dacl);
    assert_eq!(got.owner, orig.owner);
    assert_eq!(set_sd(&h, id, all, &orig).await, NtStatus::SUCCESS);
    let (_, got) = query_sd(&h, id, all).await;
    assert_eq!(got.unwrap().dacl, orig.dacl);
    h.close(id).await;
}

#[tokio::test]
async fn generic_rights_are_stored_mapped_and_attributes_readable_through_the_parent() {
    let h = H::new().await;
    let me = token(&h).user;
    h.put("f", b"x").await;
    let (_, id) = open(&h, "f", mask::GENERIC_ALL).await;
    let d = sd(
        Some(me.clone()),
        Some(vec![
            Ace::allowed(me.clone(), mask::GENERIC_READ, 0),
            // Inherit-only: kept generic for the children it would go to.
            Ace::allowed(
                me.clone(),
                mask::GENERIC_WRITE,
                ace_flags::INHERIT_ONLY_ACE | ace_flags::OBJECT_INHERIT_ACE,
            ),
        ]),
    );
    let addl = info::DACL_SECURITY_INFORMATION | info::OWNER_SECURITY_INFORMATION;
    assert_eq!(set_sd(&h, id, addl, &d).await, NtStatus::SUCCESS);
    let (_, got) = query_sd(&h, id, info::DACL_SECURITY_INFORMATION).await;
    let aces = got.unwrap().dacl.unwrap().aces;
    assert_eq!(aces[0].mask, mask::FILE_GENERIC_READ);
    assert_eq!(aces[1].mask, mask::GENERIC_WRITE);
    h.close(id).await;
    // A DACL granting nothing: the owner still gets READ_CONTROL and WRITE_DAC, DELETE and
    // FILE_READ_ATTRIBUTES come through the (listable) parent.
    let (s, id) = open(&h, "f", mask::WRITE_DAC).await;
    assert_eq!(s, NtStatus::SUCCESS, "the owner may always change the DACL");
    let nothing = sd(Some(me.clone()), Some(vec![Ace::allowed(me.clone(), 0, 0)]));
    let dacl = info::DACL_SECURITY_INFORMATION;
    assert_eq!(set_sd(&h, id, dacl, &nothing).await, NtStatus::SUCCESS);
    h.close(id).await;
    let o = h.create("f", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let maximal = mask::WRITE_DAC | mask::READ_CONTROL | mask::FILE_READ_ATTRIBUTES | mask::DELETE;
    let r = h.srv.lookup_open(o.id.volatile).unwrap();
    assert_eq!(r.granted, maximal);
    assert_eq!(
        open(&h, "f", mask::FILE_READ_ATTRIBUTES).await.0,
        NtStatus::SUCCESS
    );
    assert_eq!(
        open(&h, "f", mask::FILE_READ_DATA).await.0,
        NtStatus::ACCESS_DENIED
    );
}

/// Access-based enumeration (a share setting; Samba `hide unreadable`): TREE_CONNECT says so,
/// and a listing leaves out entries whose descriptor does not let the session read data,
/// attributes, EAs and the descriptor; entries without a stored descriptor stay listed, and a
/// hidden file can still be opened by name.
#[tokio::test]
async fn access_based_enumeration_hides_what_the_session_may_not_read() {
    use smbq_wire::fscc::dir_info::DirClass;
    use smbq_wire::tree_connect::share_flags;
    let h = H::with(|c| c.shares[0].access_based_enumeration = true).await;
    let r = h.tree_connect("\\\\srv\\data").await;
    assert_ne!(
        H::tree_resp(&r).share_flags & share_flags::ACCESS_BASED_DIRECTORY_ENUM,
        0
    );
    let me = token(&h).user;
    let read = mask::FILE_READ_DATA | mask::FILE_READ_EA | mask::FILE_READ_ATTRIBUTES;
    let grants = |m| sd(Some(me.clone()), Some(vec![Ace::allowed(me.clone(), m, 0)]));
    for (name, access) in [
        ("open", read | mask::READ_CONTROL),
        ("noea", mask::FILE_READ_DATA),
    ] {
        let (st, id) = create_sd(&h, name, mask::GENERIC_ALL, 0, &grants(access)).await;
        assert_eq!(st, NtStatus::SUCCESS);
        h.close(id).await;
    }
    h.put("plain", b"x").await;
    let d = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    let (st, names) = super::dir_tests::query(&h, d.id, DirClass::Directory, "*", 0, 4096).await;
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(names, [".", "..", "open", "plain"]);
    // A pattern that matches only hidden names answers as one that matches nothing.
    for pattern in ["noe*", "nothing*"] {
        let (st, _) =
            super::dir_tests::query(&h, d.id, DirClass::Directory, pattern, 0x01, 4096).await;
        assert_eq!(st, NtStatus::NO_SUCH_FILE, "{pattern}");
    }
    h.close(d.id).await;
    let (st, id) = open(&h, "noea", mask::FILE_READ_DATA).await;
    assert_eq!(
        st,
        NtStatus::SUCCESS,
        "hidden from listings, not from opens"
    );
    h.close(id).await;

    // The same share without the setting lists everything.
    let h2 = H::new().await;
    let (st, id) = create_sd(
        &h2,
        "noea",
        mask::GENERIC_ALL,
        0,
        &grants(mask::FILE_READ_DATA),
    )
    .await;
    assert_eq!(st, NtStatus::SUCCESS);
    h2.close(id).await;
    let d = h2
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    let (_, names) = super::dir_tests::query(&h2, d.id, DirClass::Directory, "*", 0, 4096).await;
    assert_eq!(names, [".", "..", "noea"]);
}
