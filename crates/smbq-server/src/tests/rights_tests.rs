//! Security issue 10 (the paths other than CREATE): every operation that changes a file's data
//! or metadata must check the right that change needs against Open.GrantedAccess, and a
//! read-only share must refuse the change even if some grant slipped through. Each refusal is
//! paired with the right that does allow it, so no test passes by refusing everything.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use parking_lot::Mutex;
use smbq_vfs::{FileKind, OpenOptions, RelPath};
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::fscc::file_info::{
    AllocationInfo, BasicInfo, DispositionInfo, DispositionInfoEx, EndOfFileInfo, FullEa,
    RenameInfo, disposition_ex as dx,
};
use smbq_wire::ioctl::{CtlCode, IoctlRequest, flags as ioctl_flags};
use smbq_wire::query_info::InfoType;
use smbq_wire::security::{Ace, Acl, SecurityDescriptor, Sid, control, info};
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::{Command, FileId, NtStatus, Writer};

use super::harness::{H, conn, msg, share as share_cfg};
use crate::access::{mask, opts, share};
use crate::file_state::FileKey;
use crate::tables::open::{FileOpen, Open, OpenKind};

const CONTENT: &[u8] = b"0123456789";

/// Everything a refused change could have touched: data, mode, times that writes and
/// attribute changes move, and every xattr (DOS attributes, EAs, streams, stored descriptor).
#[derive(Debug, PartialEq)]
struct Snap {
    data: Vec<u8>,
    mode: u32,
    mtime: (i64, i64),
    ctime: (i64, i64),
    xattrs: Vec<(String, Option<Vec<u8>>)>,
}

fn snap(h: &H, name: &str) -> Snap {
    let p = h.path(name);
    let md = std::fs::metadata(&p).unwrap();
    let data = if md.is_dir() {
        Vec::new()
    } else {
        std::fs::read(&p).unwrap()
    };
    let vfs = h.srv.shares().find("data").unwrap().vfs.clone().unwrap();
    let f = vfs
        .open(&RelPath::parse(name).unwrap(), &OpenOptions::default())
        .unwrap()
        .file;
    let mut names = f.list_xattrs().unwrap();
    names.sort();
    let xattrs = names
        .into_iter()
        .map(|n| {
            let v = f.get_xattr(&n).unwrap();
            (n, v)
        })
        .collect();
    Snap {
        data,
        mode: md.mode(),
        mtime: (md.mtime(), md.mtime_nsec()),
        ctime: (md.ctime(), md.ctime_nsec()),
        xattrs,
    }
}

async fn set(h: &H, id: FileId, info_type: InfoType, class: u8, addl: u32, buf: &[u8]) -> NtStatus {
    let m = msg(Command::SET_INFO, h.tree, h.session.id, |w| {
        SetInfoRequest {
            info_type,
            file_info_class: class,
            additional_information: addl,
            file_id: id,
            buffer: buf,
        }
        .encode(w)
    });
    h.send(m).await.status
}

async fn set_file(h: &H, id: FileId, class: u8, buf: &[u8]) -> NtStatus {
    set(h, id, InfoType::FILE, class, 0, buf).await
}

async fn flush(h: &H, id: FileId) -> NtStatus {
    h.flush(id).await.status
}

async fn set_sparse(h: &H, id: FileId) -> NtStatus {
    let m = msg(Command::IOCTL, h.tree, h.session.id, |w| {
        IoctlRequest {
            ctl_code: CtlCode::SET_SPARSE,
            file_id: id,
            flags: ioctl_flags::IS_FSCTL,
            ..Default::default()
        }
        .encode(w)
    });
    h.send(m).await.status
}

fn rename_buf(name: &str, replace: bool) -> Vec<u8> {
    let mut w = Writer::new();
    RenameInfo {
        replace_if_exists: replace,
        root_directory: 0,
        file_name: name.into(),
    }
    .encode(&mut w);
    w.into_vec()
}

fn ea_buf() -> Vec<u8> {
    let mut w = Writer::new();
    FullEa::encode_list(
        &[FullEa {
            flags: 0,
            name: b"SECRET",
            value: b"1",
        }],
        &mut w,
    );
    w.into_vec()
}

fn dacl_sd(aces: Vec<Ace>) -> SecurityDescriptor {
    SecurityDescriptor {
        control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl::new(aces)),
    }
}

fn secd(d: &SecurityDescriptor) -> Vec<u8> {
    let b = d.to_bytes();
    contexts_to_bytes(&[CreateContext::new(CreateContextTag::SECD, &b)])
}

fn stored_sd(h: &H, name: &str) -> Option<SecurityDescriptor> {
    let vfs = h.srv.shares().find("data").unwrap().vfs.clone().unwrap();
    let f = vfs
        .open(&RelPath::parse(name).unwrap(), &OpenOptions::default())
        .unwrap()
        .file;
    crate::security::store::read(f.as_ref())
}

/// One SET_INFO FILE class, its buffer and the one right it needs (MS-SMB2 3.3.5.21.1).
struct Case {
    what: &'static str,
    class: u8,
    buf: Vec<u8>,
    right: u32,
}

fn file_cases() -> Vec<Case> {
    let basic = BasicInfo {
        last_write_time: smbq_wire::filetime::from_unix(1_000_000_000, 0),
        file_attributes: crate::access::attr::HIDDEN,
        ..Default::default()
    };
    vec![
        Case {
            what: "basic",
            class: 4,
            buf: basic.to_bytes(),
            right: mask::FILE_WRITE_ATTRIBUTES,
        },
        Case {
            what: "end of file",
            class: 20,
            buf: EndOfFileInfo { end_of_file: 0 }.to_bytes(),
            right: mask::FILE_WRITE_DATA,
        },
        Case {
            what: "allocation",
            class: 19,
            buf: AllocationInfo { allocation_size: 0 }.to_bytes(),
            right: mask::FILE_WRITE_DATA,
        },
        Case {
            what: "full EA",
            class: 15,
            buf: ea_buf(),
            right: mask::FILE_WRITE_EA,
        },
        Case {
            what: "disposition",
            class: 13,
            buf: DispositionInfo {
                delete_pending: true,
            }
            .to_bytes(),
            right: mask::DELETE,
        },
        Case {
            what: "disposition ex on close",
            class: 64,
            buf: DispositionInfoEx {
                flags: dx::FILE_DISPOSITION_DELETE | dx::FILE_DISPOSITION_ON_CLOSE,
            }
            .to_bytes(),
            right: mask::DELETE,
        },
        Case {
            what: "rename",
            class: 10,
            buf: rename_buf("moved", false),
            right: mask::DELETE,
        },
    ]
}

/// Every SET_INFO class that changes the file, opened with every right but the one it needs:
/// refused, nothing changed. Then with only that right: done.
#[tokio::test]
async fn set_info_file_classes_need_their_own_right() {
    let h = H::new().await;
    for c in file_cases() {
        h.put("f", CONTENT).await;
        let o = h
            .create("f", mask::FILE_ALL_ACCESS & !c.right, D::OPEN, 0)
            .await;
        assert_eq!(o.status, NtStatus::SUCCESS, "{}", c.what);
        let before = snap(&h, "f");
        assert_eq!(
            set_file(&h, o.id, c.class, &c.buf).await,
            NtStatus::ACCESS_DENIED,
            "{} without its right",
            c.what
        );
        assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
        assert!(h.path("f").exists(), "{}: not deleted", c.what);
        assert!(!h.path("moved").exists(), "{}: not renamed", c.what);
        assert_eq!(snap(&h, "f"), before, "{}: unchanged", c.what);

        let o = h.create("f", c.right, D::OPEN, 0).await;
        assert_eq!(o.status, NtStatus::SUCCESS, "{}", c.what);
        assert_eq!(
            set_file(&h, o.id, c.class, &c.buf).await,
            NtStatus::SUCCESS,
            "{} with its right",
            c.what
        );
        assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
        let _ = std::fs::remove_file(h.path("moved"));
        let _ = std::fs::remove_file(h.path("f"));
    }
}

/// FILE_APPEND_DATA is not FILE_WRITE_DATA: a size change needs the latter (MS-SMB2
/// 3.3.5.21.1). A WRITE inside the file is allowed with either, as Windows servers allow it
/// (MS-SMB2 3.3.5.13 note <358>; smbtorture smb2.rw.append), at the offset asked.
#[tokio::test]
async fn append_only_cannot_truncate_but_writes_where_asked() {
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let o = h
        .create(
            "f",
            mask::FILE_APPEND_DATA | mask::FILE_READ_DATA,
            D::OPEN,
            0,
        )
        .await;
    let before = snap(&h, "f");
    for (class, buf) in [
        (20, EndOfFileInfo { end_of_file: 0 }.to_bytes()),
        (19, AllocationInfo { allocation_size: 0 }.to_bytes()),
    ] {
        assert_eq!(
            set_file(&h, o.id, class, &buf).await,
            NtStatus::ACCESS_DENIED
        );
    }
    assert_eq!(snap(&h, "f"), before);
    assert_eq!(h.write(o.id, 0, b"XX").await.status, NtStatus::SUCCESS);
    // At the end it may write, and an all-ones offset appends.
    assert_eq!(h.write(o.id, 10, b"ab").await.status, NtStatus::SUCCESS);
    assert_eq!(
        h.write(o.id, u64::MAX, b"cd").await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"XX23456789abcd");
    h.close(o.id).await;
}

#[tokio::test]
async fn write_and_flush_need_write_or_append() {
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let o = h
        .create(
            "f",
            mask::FILE_ALL_ACCESS & !(mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA),
            D::OPEN,
            0,
        )
        .await;
    let before = snap(&h, "f");
    assert_eq!(
        h.write(o.id, 0, b"XX").await.status,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(flush(&h, o.id).await, NtStatus::ACCESS_DENIED);
    assert_eq!(snap(&h, "f"), before);
    h.close(o.id).await;
    let o = h.create("f", mask::FILE_WRITE_DATA, D::OPEN, 0).await;
    assert_eq!(h.write(o.id, 0, b"XX").await.status, NtStatus::SUCCESS);
    assert_eq!(flush(&h, o.id).await, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"XX23456789");
    h.close(o.id).await;
}

/// READ needs FILE_READ_DATA, or FILE_EXECUTE (Windows and Samba, smb2.read.access).
#[tokio::test]
async fn read_needs_read_data_or_execute() {
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let o = h
        .create(
            "f",
            mask::FILE_ALL_ACCESS & !(mask::FILE_READ_DATA | mask::FILE_EXECUTE),
            D::OPEN,
            0,
        )
        .await;
    assert_eq!(h.read(o.id, 0, 4).await.status, NtStatus::ACCESS_DENIED);
    h.close(o.id).await;
    for right in [mask::FILE_READ_DATA, mask::FILE_EXECUTE] {
        let o = h.create("f", right, D::OPEN, 0).await;
        assert_eq!(h.read(o.id, 0, 4).await.status, NtStatus::SUCCESS);
        h.close(o.id).await;
    }
}

/// FSCTL_SET_SPARSE answered success to any handle; MS-FSA wants FILE_WRITE_DATA,
/// FILE_WRITE_ATTRIBUTES or FILE_APPEND_DATA.
#[tokio::test]
async fn set_sparse_needs_a_write_right() {
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let o = h
        .create("f", mask::FILE_GENERIC_READ | mask::DELETE, D::OPEN, 0)
        .await;
    assert_eq!(set_sparse(&h, o.id).await, NtStatus::ACCESS_DENIED);
    h.close(o.id).await;
    for right in [
        mask::FILE_WRITE_DATA,
        mask::FILE_WRITE_ATTRIBUTES,
        mask::FILE_APPEND_DATA,
    ] {
        let o = h.create("f", right, D::OPEN, 0).await;
        assert_eq!(set_sparse(&h, o.id).await, NtStatus::SUCCESS);
        h.close(o.id).await;
    }
    std::fs::create_dir(h.path("d")).unwrap();
    let d = h
        .create("d", mask::GENERIC_ALL, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(set_sparse(&h, d.id).await, NtStatus::INVALID_PARAMETER);
}

/// SET_INFO SECURITY that selects nothing used to store the file's POSIX-derived descriptor,
/// from a handle holding no right at all, pinning it against later mode changes.
#[tokio::test]
async fn security_set_selecting_nothing_stores_nothing() {
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let all = dacl_sd(vec![Ace::allowed(
        Sid::everyone(),
        mask::FILE_ALL_ACCESS,
        0,
    )])
    .to_bytes();
    let o = h.create("f", mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    let before = snap(&h, "f");
    assert_eq!(
        set(&h, o.id, InfoType::SECURITY, 0, 0, &all).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(
            &h,
            o.id,
            InfoType::SECURITY,
            0,
            info::LABEL_SECURITY_INFORMATION,
            &all
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(
            &h,
            o.id,
            InfoType::SECURITY,
            0,
            info::DACL_SECURITY_INFORMATION,
            &all
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(
            &h,
            o.id,
            InfoType::SECURITY,
            0,
            info::OWNER_SECURITY_INFORMATION,
            &all
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(snap(&h, "f"), before);
    assert!(stored_sd(&h, "f").is_none());
    h.close(o.id).await;
    // WRITE_DAC sets the DACL.
    let o = h.create("f", mask::WRITE_DAC, D::OPEN, 0).await;
    assert_eq!(
        set(
            &h,
            o.id,
            InfoType::SECURITY,
            0,
            info::DACL_SECURITY_INFORMATION,
            &all
        )
        .await,
        NtStatus::SUCCESS
    );
    assert!(stored_sd(&h, "f").is_some());
    h.close(o.id).await;
}

/// A rename adds a name to the target directory: a directory whose DACL refuses FILE_ADD_FILE
/// cannot receive the file, whatever DELETE the source open holds.
#[tokio::test]
async fn rename_needs_add_file_in_target_directory() {
    let h = H::new().await;
    let read_only_dir = dacl_sd(vec![Ace::allowed(
        Sid::everyone(),
        mask::FILE_GENERIC_READ | mask::FILE_TRAVERSE,
        0,
    )]);
    let d = h
        .create_req("locked", mask::GENERIC_ALL, D::CREATE)
        .options(opts::DIRECTORY_FILE)
        .contexts(&secd(&read_only_dir))
        .send()
        .await;
    assert_eq!(d.status, NtStatus::SUCCESS);
    h.close(d.id).await;
    std::fs::create_dir(h.path("open")).unwrap();
    h.put("f", CONTENT).await;
    let o = h.create("f", mask::DELETE, D::OPEN, 0).await;
    assert_eq!(
        set_file(&h, o.id, 10, &rename_buf("locked\\f", false)).await,
        NtStatus::ACCESS_DENIED
    );
    assert!(!h.path("locked/f").exists());
    assert_eq!(std::fs::read(h.path("f")).unwrap(), CONTENT);
    assert_eq!(
        set_file(&h, o.id, 10, &rename_buf("open\\f", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("open/f")).unwrap(), CONTENT);
    h.close(o.id).await;
}

/// ReplaceIfExists destroys the target, so the target must be deletable: not READONLY, and
/// DELETE from its DACL or FILE_DELETE_CHILD from its directory's.
#[tokio::test]
async fn rename_replace_needs_a_deletable_target() {
    let h = H::new().await;
    // READONLY target.
    h.put("f", CONTENT).await;
    h.put("ro", b"keep").await;
    std::fs::set_permissions(h.path("ro"), std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = h.create("f", mask::DELETE, D::OPEN, 0).await;
    assert_eq!(
        set_file(&h, o.id, 10, &rename_buf("ro", true)).await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(std::fs::read(h.path("ro")).unwrap(), b"keep");
    assert_eq!(std::fs::read(h.path("f")).unwrap(), CONTENT);
    h.close(o.id).await;

    // A directory that lets everyone add files but not delete children, holding a target whose
    // own DACL does not grant DELETE, and one whose DACL does.
    let dir = dacl_sd(vec![Ace::allowed(
        Sid::everyone(),
        mask::FILE_GENERIC_READ | mask::FILE_TRAVERSE | mask::FILE_ADD_FILE,
        0,
    )]);
    let d = h
        .create_req("d", mask::GENERIC_ALL, D::CREATE)
        .options(opts::DIRECTORY_FILE)
        .contexts(&secd(&dir))
        .send()
        .await;
    assert_eq!(d.status, NtStatus::SUCCESS);
    h.close(d.id).await;
    for (name, rights) in [
        ("d\\keep", mask::FILE_GENERIC_READ),
        ("d\\gone", mask::FILE_ALL_ACCESS),
    ] {
        let sd = dacl_sd(vec![Ace::allowed(Sid::everyone(), rights, 0)]);
        let t = h
            .create_req(name, mask::GENERIC_ALL, D::CREATE)
            .contexts(&secd(&sd))
            .send()
            .await;
        assert_eq!(t.status, NtStatus::SUCCESS, "{name}");
        assert_eq!(h.write(t.id, 0, b"old").await.status, NtStatus::SUCCESS);
        h.close(t.id).await;
    }
    let o = h.create("f", mask::DELETE, D::OPEN, 0).await;
    assert_eq!(
        set_file(&h, o.id, 10, &rename_buf("d\\keep", true)).await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(std::fs::read(h.path("d/keep")).unwrap(), b"old");
    assert!(h.path("f").exists());
    assert_eq!(
        set_file(&h, o.id, 10, &rename_buf("d\\gone", true)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("d/gone")).unwrap(), CONTENT);
    h.close(o.id).await;
}

/// A server with the share `data` and a read-only share `ro` over the same directory, and a
/// handle on `ro` for `ro_tree`.
async fn with_read_only_share() -> (H, H) {
    let h = H::with(|cfg| {
        let path = cfg.shares[0].path.clone();
        let mut ro = share_cfg("ro", &path);
        ro.read_only = true;
        cfg.shares.push(ro);
    })
    .await;
    let mut ro = H {
        srv: h.srv.clone(),
        conn: conn(),
        session: h.session.clone(),
        tree: 0,
        dir: tempfile::tempdir().unwrap(),
    };
    let r = ro.tree_connect("\\\\srv\\ro").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    ro.tree = r.tree_id.unwrap();
    (h, ro)
}

/// Installs an open of `name` on `ro`'s tree that holds `granted`, as if a grant had slipped
/// through CREATE, to show the handlers still refuse to change anything on a read-only share.
fn forge_open(ro: &H, name: &str, granted: u32, delete_on_close: bool) -> FileId {
    let session = ro.srv.session_state(ro.session.id).unwrap();
    let tree = session.tree(ro.tree).unwrap();
    let vfs = tree.share.vfs.clone().unwrap();
    let path = RelPath::parse(name).unwrap();
    let file = vfs
        .open(
            &path,
            &OpenOptions {
                write: true,
                ..Default::default()
            },
        )
        .unwrap()
        .file;
    let st = file.stat().unwrap();
    let key = FileKey {
        dev: st.dev,
        ino: st.ino,
        stream: 0,
    };
    let is_dir = st.kind == FileKind::Dir;
    let id = ro.srv.reserve_open_id().unwrap();
    let new = crate::file_state::NewOpen {
        open_id: id,
        checked: granted,
        access: granted,
        share_access: share::ALL,
        path: &path,
        is_dir,
        posix: false,
        restoring: false,
    };
    ro.srv.open_state().admit(key, &new).unwrap();
    assert!(session.add_open(id));
    let file_id = FileId {
        persistent: id,
        volatile: id,
    };
    ro.srv.install_open(Arc::new(Open {
        file_id,
        session_id: ro.session.id,
        tree,
        kind: OpenKind::File(FileOpen {
            file,
            key,
            is_dir,
            dir: Default::default(),
            stream: None,
        }),
        path: Mutex::new(path),
        granted,
        share_access: share::ALL,
        create_options: 0,
        delete_on_close: AtomicBool::new(delete_on_close),
        position: AtomicU64::new(0),
        mode: AtomicU32::new(0),
        closed: AtomicBool::new(false),
        ea_index: AtomicU32::new(0),
        durable: Mutex::new(None),
        replay: Mutex::new(None),
        channel: Mutex::new(Default::default()),
        lock_seq: Mutex::new(Default::default()),
        parent_lease: None,
        modified: AtomicBool::new(false),
        sticky_write: AtomicBool::new(false),
        persisting: Default::default(),
        record_behind: AtomicBool::new(false),
        posix: false,
    }));
    file_id
}

#[tokio::test]
async fn read_only_share_refuses_every_change_even_with_a_full_grant() {
    let (h, ro) = with_read_only_share().await;
    h.put("f", CONTENT).await;
    h.put("t", b"target").await;
    let id = forge_open(&ro, "f", mask::FILE_ALL_ACCESS, true);
    let before = snap(&h, "f");
    let target = snap(&h, "t");
    // Reading is what the share is for.
    assert_eq!(ro.read(id, 0, 4).await.status, NtStatus::SUCCESS);
    assert_eq!(ro.write(id, 0, b"XX").await.status, NtStatus::ACCESS_DENIED);
    assert_eq!(
        ro.write(id, u64::MAX, b"XX").await.status,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(flush(&ro, id).await, NtStatus::ACCESS_DENIED);
    assert_eq!(set_sparse(&ro, id).await, NtStatus::ACCESS_DENIED);
    for c in file_cases() {
        assert_eq!(
            set_file(&ro, id, c.class, &c.buf).await,
            NtStatus::ACCESS_DENIED,
            "{}",
            c.what
        );
    }
    assert_eq!(
        set_file(&ro, id, 10, &rename_buf("t", true)).await,
        NtStatus::ACCESS_DENIED
    );
    let all = dacl_sd(vec![Ace::allowed(
        Sid::everyone(),
        mask::FILE_ALL_ACCESS,
        0,
    )])
    .to_bytes();
    assert_eq!(
        set(
            &ro,
            id,
            InfoType::SECURITY,
            0,
            info::DACL_SECURITY_INFORMATION,
            &all
        )
        .await,
        NtStatus::ACCESS_DENIED
    );
    // Delete-on-close does not delete on a read-only share.
    assert_eq!(ro.close(id).await.status, NtStatus::SUCCESS);
    assert!(h.path("f").exists());
    assert!(!h.path("moved").exists());
    assert_eq!(snap(&h, "f"), before);
    assert_eq!(snap(&h, "t"), target);
    assert!(stored_sd(&h, "f").is_none());

    // The same grant on the writable share does change the file (the forged open is sound).
    let w = H {
        srv: h.srv.clone(),
        conn: conn(),
        session: h.session.clone(),
        tree: h.tree,
        dir: tempfile::tempdir().unwrap(),
    };
    let id = forge_open(&w, "f", mask::FILE_ALL_ACCESS, true);
    assert_eq!(w.write(id, 0, b"XX").await.status, NtStatus::SUCCESS);
    assert_eq!(w.close(id).await.status, NtStatus::SUCCESS);
    assert!(!h.path("f").exists());
}

/// CLOSE deletes a delete-on-close file only for an open that holds DELETE.
#[tokio::test]
async fn close_deletes_only_with_delete_right() {
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let id = forge_open(
        &h,
        "f",
        mask::FILE_GENERIC_READ | mask::FILE_GENERIC_WRITE,
        true,
    );
    assert_eq!(h.close(id).await.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), CONTENT);
    let id = forge_open(&h, "f", mask::DELETE, true);
    assert_eq!(h.close(id).await.status, NtStatus::SUCCESS);
    assert!(!h.path("f").exists());
}

/// Reading what a handle may not see: the descriptor needs READ_CONTROL, EAs FILE_READ_EA.
#[tokio::test]
async fn queries_need_their_read_rights() {
    use smbq_wire::query_info::QueryInfoRequest;
    let h = H::new().await;
    h.put("f", CONTENT).await;
    let query = |id: FileId, info_type: InfoType, class: u8, addl: u32| {
        msg(Command::QUERY_INFO, h.tree, h.session.id, move |w| {
            QueryInfoRequest {
                info_type,
                file_info_class: class,
                output_buffer_length: 4096,
                additional_information: addl,
                flags: 0,
                file_id: id,
                input: &[],
            }
            .encode(w)
        })
    };
    let o = h
        .create(
            "f",
            mask::FILE_ALL_ACCESS & !(mask::READ_CONTROL | mask::FILE_READ_EA),
            D::OPEN,
            0,
        )
        .await;
    let dacl = info::DACL_SECURITY_INFORMATION;
    assert_eq!(
        h.send(query(o.id, InfoType::SECURITY, 0, dacl))
            .await
            .status,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        h.send(query(o.id, InfoType::FILE, 15, 0)).await.status,
        NtStatus::ACCESS_DENIED
    );
    h.close(o.id).await;
    let o = h
        .create("f", mask::READ_CONTROL | mask::FILE_READ_EA, D::OPEN, 0)
        .await;
    assert_eq!(
        h.send(query(o.id, InfoType::SECURITY, 0, dacl))
            .await
            .status,
        NtStatus::SUCCESS
    );
    assert_ne!(
        h.send(query(o.id, InfoType::FILE, 15, 0)).await.status,
        NtStatus::ACCESS_DENIED
    );
    h.close(o.id).await;
}
