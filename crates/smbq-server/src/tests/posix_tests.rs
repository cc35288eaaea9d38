//! The SMB3 POSIX extensions (crate::posix): the create context, FILE_POSIX_INFORMATION in
//! QUERY_INFO and QUERY_DIRECTORY, and the file-system class, on POSIX opens and not
//! elsewhere.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::fscc::dir_info::{DirClass, decode_dir_list};
use smbq_wire::posix::{FsPosixInfo, INFO_CLASS, PosixInfo, PosixStat, wire_mode};
use smbq_wire::query_directory::{QueryDirectoryRequest, QueryDirectoryResponse};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::security::Sid;
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg};
use crate::access::{mask, opts};

fn posix_ctx(mode: &[u8]) -> Vec<u8> {
    contexts_to_bytes(&[CreateContext::new(CreateContextTag::POSIX, mode)])
}

fn posix_answer(o: &super::harness::Open) -> Option<PosixStat> {
    let c = o.create();
    let list = c.parse_contexts().unwrap();
    let p = list.iter().find(|c| c.tag() == CreateContextTag::POSIX)?;
    Some(PosixStat::read(&mut smbq_wire::Reader::new(p.data)).unwrap())
}

#[tokio::test]
async fn a_posix_create_gets_its_mode_and_the_file_s_facts() {
    let h = H::new().await;
    let ctx = posix_ctx(&0o640u32.to_le_bytes());
    let o = h
        .create_req("f", mask::GENERIC_READ | mask::GENERIC_WRITE, D::CREATE)
        .contexts(&ctx)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let md = std::fs::metadata(h.path("f")).unwrap();
    // The mode asked for, not the process umask's idea of it.
    assert_eq!(md.permissions().mode() & 0o7777, 0o640);
    let p = posix_answer(&o).expect("a POSIX context in the answer");
    assert_eq!(p.nlink, 1);
    assert_eq!(p.reparse_tag, 0);
    assert_eq!(p.mode, 0o640);
    assert_eq!(p.owner, Sid::unix_user(md.uid()));
    assert_eq!(p.group, Sid::unix_group(md.gid()));

    // A directory: its type in bits 12-15; setuid and setgid are never given.
    let o = h
        .create_req("d", mask::GENERIC_READ, D::CREATE)
        .options(opts::DIRECTORY_FILE)
        .contexts(&posix_ctx(&0o6750u32.to_le_bytes()))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(
        std::fs::metadata(h.path("d")).unwrap().permissions().mode() & 0o7777,
        0o750
    );
    assert_eq!(posix_answer(&o).unwrap().mode, wire_mode(0o040750));

    // Below a set-group-ID directory a new directory keeps the bit the kernel gave it, so
    // files made in it keep the group, as `mkdir` there would.
    std::fs::create_dir(h.path("shared")).unwrap();
    std::fs::set_permissions(h.path("shared"), PermissionsExt::from_mode(0o2775)).unwrap();
    let o = h
        .create_req("shared/d", mask::GENERIC_READ, D::CREATE)
        .options(opts::DIRECTORY_FILE)
        .contexts(&posix_ctx(&0o750u32.to_le_bytes()))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let mode_of = |p: &str| std::fs::metadata(h.path(p)).unwrap().permissions().mode();
    assert_eq!(mode_of("shared/d") & 0o7777, 0o2750);
    // A client's chmod sets what it says: the bit goes, as chmod(2) would drop it.
    {
        use smbq_wire::security::{Ace, Acl, SecurityDescriptor, control, info};
        let sd = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: None,
            group: None,
            sacl: None,
            dacl: Some(Acl::new(vec![Ace::allowed(
                Sid::new(5, &[88, 3, 0o750]),
                0,
                0,
            )])),
        };
        let d = h
            .create_req("shared/d", mask::WRITE_DAC, D::OPEN)
            .options(opts::DIRECTORY_FILE)
            .contexts(&posix_ctx(&[0; 4]))
            .send()
            .await;
        let dacl = info::DACL_SECURITY_INFORMATION;
        let s = super::security_tests::set_sd(&h, d.id, dacl, &sd).await;
        assert_eq!(s, NtStatus::SUCCESS);
        assert_eq!(mode_of("shared/d") & 0o7777, 0o750);
    }

    // A mode of any other length is malformed; nothing is created.
    let o = h
        .create_req("g", mask::GENERIC_READ, D::CREATE)
        .contexts(&posix_ctx(&[0; 5]))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::INVALID_PARAMETER);
    assert!(!h.path("g").exists());
}

#[tokio::test]
async fn without_the_extensions_the_context_is_ignored() {
    let h = H::with(|c| c.shares.iter_mut().for_each(|s| s.posix_extensions = false)).await;
    let o = h
        .create_req("f", mask::GENERIC_READ, D::CREATE)
        .contexts(&posix_ctx(&[0; 5]))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(posix_answer(&o).is_none());
    let (s, _) = super::info_tests::qi(&h, o.id, InfoType::FILE, INFO_CLASS, 65536, 0).await;
    assert_eq!(s, NtStatus::INVALID_LEVEL);
}

#[tokio::test]
async fn posix_information_on_posix_opens_only() {
    let h = H::new().await;
    h.put("f", b"hello").await;
    std::fs::hard_link(h.path("f"), h.path("g")).unwrap();
    let plain = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(plain.status, NtStatus::SUCCESS);
    let (s, _) = super::info_tests::qi(&h, plain.id, InfoType::FILE, INFO_CLASS, 65536, 0).await;
    assert_eq!(s, NtStatus::INVALID_LEVEL);
    let (s, _) =
        super::info_tests::qi(&h, plain.id, InfoType::FILESYSTEM, INFO_CLASS, 65536, 0).await;
    assert_eq!(s, NtStatus::INVALID_INFO_CLASS);

    let o = h
        .create_req("f", mask::GENERIC_READ, D::OPEN)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let (s, b) = super::info_tests::qi(&h, o.id, InfoType::FILE, INFO_CLASS, 65536, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let info = PosixInfo::decode(&b).unwrap();
    let md = std::fs::metadata(h.path("f")).unwrap();
    assert_eq!(info.end_of_file, 5);
    assert_eq!(info.inode, md.ino());
    assert_eq!(info.stat.nlink, 2);
    assert_eq!(info.stat.mode, wire_mode(md.mode()));
    // The mode was not changed by opening an existing file.
    assert_eq!(md.permissions().mode() & 0o777, 0o644 & !current_umask());

    let (s, b) = super::info_tests::qi(&h, o.id, InfoType::FILESYSTEM, INFO_CLASS, 65536, 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let fs = FsPosixInfo::decode(&b).unwrap();
    assert_eq!(b.len(), FsPosixInfo::LEN);
    assert!(fs.total_blocks > 0 && fs.block_size > 0 && fs.total_file_nodes > 0);
}

fn current_umask() -> u32 {
    let probe = tempfile::tempdir().unwrap();
    let p = probe.path().join("x");
    std::fs::write(&p, b"").unwrap();
    !std::fs::metadata(&p).unwrap().permissions().mode() & 0o666
}

#[tokio::test]
async fn a_posix_directory_lists_posix_entries() {
    let h = H::new().await;
    h.put("a", b"12").await;
    std::fs::create_dir(h.path("sub")).unwrap();
    let list = |id: FileId, class: DirClass| {
        let p = smbq_wire::cursor::utf16le_encode("*");
        msg(Command::QUERY_DIRECTORY, h.tree, h.session.id, move |w| {
            QueryDirectoryRequest {
                file_information_class: class.info_class().0,
                flags: 0,
                file_index: 0,
                file_id: id,
                file_name: &p,
                output_buffer_length: 65536,
            }
            .encode(w)
        })
    };
    let plain = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    let r = h.send(list(plain.id, DirClass::Posix)).await;
    assert_eq!(r.status, NtStatus::INVALID_LEVEL);

    let dir = h
        .create_req("", mask::GENERIC_READ, D::OPEN)
        .options(opts::DIRECTORY_FILE)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    assert_eq!(dir.status, NtStatus::SUCCESS);
    let r = h.send(list(dir.id, DirClass::Posix)).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut full = vec![0u8; 64];
    full.extend_from_slice(&r.body);
    let resp = QueryDirectoryResponse::decode(&full).unwrap();
    let entries = decode_dir_list(DirClass::Posix, resp.buffer).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(names, [".", "..", "a", "sub"]);
    let a = entries.iter().find(|e| e.name == "a").unwrap();
    let md = std::fs::metadata(h.path("a")).unwrap();
    assert_eq!(a.end_of_file, 2);
    assert_eq!(a.inode, md.ino());
    let p = a.posix.as_ref().unwrap();
    assert_eq!(p.mode, wire_mode(md.mode()));
    assert_eq!(p.owner, Sid::unix_user(md.uid()));
    let sub = entries.iter().find(|e| e.name == "sub").unwrap();
    assert_eq!(sub.posix.as_ref().unwrap().mode >> 12, 1);
    // The share root's "..": what lies above the share is no one's, as Samba answers.
    let up = entries.iter().find(|e| e.name == "..").unwrap();
    assert_eq!((up.inode, up.device), (0, 0));
    let p = up.posix.as_ref().unwrap();
    assert_eq!((&p.owner, &p.group), (&Sid::nobody(), &Sid::nobody()));
    let here = entries.iter().find(|e| e.name == ".").unwrap();
    assert_ne!(here.inode, 0);
}

#[tokio::test]
async fn posix_opens_name_files_case_sensitively() {
    let h = H::new().await;
    h.put("Report.txt", b"upper").await;
    let posix = posix_ctx(&0o644u32.to_le_bytes());
    // A Windows open finds the file whatever the case; a POSIX one only as spelled.
    let o = h.create("REPORT.TXT", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let o = h
        .create_req("REPORT.TXT", mask::GENERIC_READ, D::OPEN)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    // Two names that differ only in case are two files.
    let o = h
        .create_req(
            "report.txt",
            mask::GENERIC_READ | mask::GENERIC_WRITE,
            D::CREATE,
        )
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(h.path("report.txt").exists() && h.path("Report.txt").exists());
    assert_eq!(std::fs::read(h.path("Report.txt")).unwrap(), b"upper");
    // No 8.3 names either.
    h.put("a long file name.txt", b"x").await;
    let short = crate::short_name::short_name("a long file name.txt");
    let o = h.create(&short, mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let o = h
        .create_req(&short, mask::GENERIC_READ, D::OPEN)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    // A missing parent is still a path that is not found.
    let o = h
        .create_req("nodir\\f", mask::GENERIC_READ, D::CREATE)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::OBJECT_PATH_NOT_FOUND);

    // A POSIX directory listing matches its pattern case-sensitively.
    let dir = h
        .create_req("", mask::GENERIC_READ, D::OPEN)
        .options(opts::DIRECTORY_FILE)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    let (s, names) = super::dir_tests::query(&h, dir.id, DirClass::Posix, "r*", 0, 65536).await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(names, ["report.txt"]);
}

/// Samba's and Linux's chmod: one ACE naming S-1-5-88-3-mode. On a POSIX open it sets the
/// mode (rwx only) and drops a stored descriptor that would hide it; on any other open it is
/// a descriptor like any other.
#[tokio::test]
async fn chmod_through_the_nfs_mode_sid_on_posix_opens() {
    use smbq_wire::security::{Ace, Acl, SecurityDescriptor, control, info};
    let h = &H::new().await;
    h.put("f", b"x").await;
    std::fs::set_permissions(h.path("f"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let nfs_mode = |mode: u32| Sid::new(5, &[88, 3, mode]);
    let chmod = |mode: u32| SecurityDescriptor {
        control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl::new(vec![Ace::allowed(nfs_mode(mode), 0, 0)])),
    };
    let mode_of = || std::fs::metadata(h.path("f")).unwrap().permissions().mode() & 0o7777;
    let set = |id, sd| async move {
        super::security_tests::set_sd(h, id, info::DACL_SECURITY_INFORMATION, &sd).await
    };
    let dacl_sids = |id| async move {
        let m = msg(Command::QUERY_INFO, h.tree, h.session.id, |w| {
            QueryInfoRequest {
                info_type: InfoType::SECURITY,
                file_info_class: 0,
                output_buffer_length: 65536,
                additional_information: info::DACL_SECURITY_INFORMATION,
                flags: 0,
                file_id: id,
                input: &[],
            }
            .encode(w)
        });
        let r = h.send(m).await;
        assert_eq!(r.status, NtStatus::SUCCESS);
        let mut full = vec![0u8; 64];
        full.extend_from_slice(&r.body);
        let buf = QueryInfoResponse::decode(&full).unwrap().buffer.to_vec();
        let sd = SecurityDescriptor::decode(&buf).unwrap();
        sd.dacl
            .unwrap()
            .aces
            .into_iter()
            .map(|a| a.sid)
            .collect::<Vec<_>>()
    };

    // On a Windows open the descriptor is stored as sent, and the mode stays.
    let w = h
        .create("f", mask::WRITE_DAC | mask::READ_CONTROL, D::OPEN, 0)
        .await;
    assert_eq!(set(w.id, chmod(0o600)).await, NtStatus::SUCCESS);
    assert_eq!(mode_of(), 0o644);
    assert_eq!(dacl_sids(w.id).await, [nfs_mode(0o600)]);

    let o = h
        .create_req("f", mask::WRITE_DAC | mask::READ_CONTROL, D::OPEN)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(set(o.id, chmod(0o4751)).await, NtStatus::SUCCESS);
    assert_eq!(mode_of(), 0o751, "rwx only: no setuid");
    // The descriptor is the mode's again.
    assert!(!dacl_sids(o.id).await.contains(&nfs_mode(0o600)));

    // Without WRITE_DAC it is refused, as any descriptor change.
    let o2 = h
        .create_req("f", mask::GENERIC_READ, D::OPEN)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    assert_eq!(set(o2.id, chmod(0o600)).await, NtStatus::ACCESS_DENIED);
    assert_eq!(mode_of(), 0o751);
}

/// What the server never opens, a FIFO and a link leading out of the share, is listed to a
/// POSIX directory open for what it is (type and reparse tag, attributes REPARSE_POINT
/// alone), left out of other listings, and still never opened.
#[tokio::test]
async fn special_files_are_listed_to_posix_opens_and_never_opened() {
    let h = H::new().await;
    let made = std::process::Command::new("mkfifo")
        .arg(h.path("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink("/etc/passwd", h.path("out")).unwrap();
    let posix = posix_ctx(&[0; 4]);
    let dir = h
        .create_req("", mask::GENERIC_READ, D::OPEN)
        .options(opts::DIRECTORY_FILE)
        .contexts(&posix)
        .send()
        .await;
    let entries = super::dir_tests::query_entries(&h, dir.id, DirClass::Posix, "*").await;
    let fifo = entries
        .iter()
        .find(|e| e.name == "fifo")
        .expect("fifo listed");
    let p = fifo.posix.as_ref().unwrap();
    assert_eq!(p.mode >> 12, smbq_wire::posix::file_type::FIFO);
    assert_eq!(p.reparse_tag, 0x8000_0014);
    assert_eq!(fifo.file_attributes, crate::access::attr::REPARSE_POINT);
    let out = entries
        .iter()
        .find(|e| e.name == "out")
        .expect("link listed");
    let p = out.posix.as_ref().unwrap();
    assert_eq!(p.mode >> 12, smbq_wire::posix::file_type::SYMLINK);
    assert_eq!(p.reparse_tag, 0xA000_000C);

    let plain = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    let names: Vec<String> =
        super::dir_tests::query_entries(&h, plain.id, DirClass::FullDirectory, "*")
            .await
            .into_iter()
            .map(|e| e.name.into_owned())
            .collect();
    assert!(!names.contains(&"fifo".to_owned()) && !names.contains(&"out".to_owned()));

    for name in ["fifo", "out"] {
        let o = h
            .create_req(name, mask::GENERIC_READ, D::OPEN)
            .contexts(&posix)
            .send()
            .await;
        assert_ne!(o.status, NtStatus::SUCCESS, "{name} opened");
    }
}

/// POSIX delete: a POSIX open does not keep a delete-pending file's name alive (Samba
/// close.c; a Linux client's unlink of an open file). The name goes when the last other
/// open closes; the POSIX opens carry on with the file, and their closes delete nothing,
/// whatever has the name by then. A Windows open still keeps the name until it closes.
#[tokio::test]
async fn posix_opens_do_not_keep_a_deleted_name() {
    use smbq_wire::fscc::file_info::DispositionInfo;
    use smbq_wire::set_info::SetInfoRequest;
    let h = H::new().await;
    let posix = posix_ctx(&[0; 4]);
    let rw = mask::GENERIC_READ | mask::GENERIC_WRITE;
    let all = crate::access::share::ALL;
    let set_delete = |id: FileId| {
        let mut b = smbq_wire::Writer::new();
        DispositionInfo {
            delete_pending: true,
        }
        .encode(&mut b);
        let buf = b.into_vec();
        msg(Command::SET_INFO, h.tree, h.session.id, move |w| {
            SetInfoRequest {
                info_type: InfoType::FILE,
                file_info_class: 13,
                additional_information: 0,
                file_id: id,
                buffer: &buf,
            }
            .encode(w)
        })
    };

    h.put("f", b"old").await;
    let keeper = h
        .create_req("f", rw, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    let deleter = h
        .create_req("f", rw | mask::DELETE, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(
        h.send(set_delete(deleter.id)).await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(h.close(deleter.id).await.status, NtStatus::SUCCESS);
    assert!(
        !h.path("f").exists(),
        "unlinked although a POSIX open remains"
    );
    // The remaining open carries on with the file.
    assert_eq!(
        h.write(keeper.id, 3, b"+more").await.status,
        NtStatus::SUCCESS
    );
    let r = h.read(keeper.id, 0, 100).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    // The name is free for a new file, which the old open's close leaves alone.
    h.put("f", b"new").await;
    assert_eq!(h.close(keeper.id).await.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"new");

    // A Windows open keeps the name until it closes.
    h.put("g", b"x").await;
    let windows = h.create("g", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(windows.status, NtStatus::SUCCESS);
    let deleter = h
        .create_req("g", rw | mask::DELETE, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(deleter.status, NtStatus::SUCCESS);
    assert_eq!(
        h.send(set_delete(deleter.id)).await.status,
        NtStatus::SUCCESS
    );
    h.close(deleter.id).await;
    assert!(h.path("g").exists());
    h.close(windows.id).await;
    assert!(!h.path("g").exists());
}

/// A POSIX open's names: `/` separates, and `:` and the other characters Windows refuses are
/// part of the name (no streams); a Windows open of the same bytes means something else.
#[tokio::test]
async fn posix_names_take_slashes_and_colons() {
    let h = H::new().await;
    std::fs::create_dir(h.path("sub")).unwrap();
    let posix = posix_ctx(&0o600u32.to_le_bytes());
    let o = h
        .create_req(
            "sub/a:b*c",
            mask::GENERIC_READ | mask::GENERIC_WRITE,
            D::CREATE,
        )
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(h.path("sub").join("a:b*c").is_file());
    let w = h.create("sub\\a:b*c", mask::GENERIC_READ, D::OPEN, 0).await;
    // To a Windows open that is stream "b*c" of a file "a", which does not exist.
    assert_eq!(w.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    let o = h
        .create_req("../etc", mask::GENERIC_READ, D::OPEN)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::OBJECT_PATH_SYNTAX_BAD);
}

/// chown on a POSIX open: owner and group as S-1-22 SIDs. Where sessions act as the server
/// itself (no per-user identity) only what changes nothing is accepted; a descriptor naming
/// other SIDs is an ordinary descriptor.
#[tokio::test]
async fn chown_without_per_user_identity_changes_nothing() {
    use smbq_wire::security::{SecurityDescriptor, control, info};
    let h = H::new().await;
    h.put("f", b"x").await;
    let md = std::fs::metadata(h.path("f")).unwrap();
    let o = h
        .create_req("f", mask::WRITE_OWNER | mask::READ_CONTROL, D::OPEN)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let sd = |uid: u32, gid: u32| SecurityDescriptor {
        control: control::SE_SELF_RELATIVE,
        owner: Some(Sid::unix_user(uid)),
        group: Some(Sid::unix_group(gid)),
        sacl: None,
        dacl: None,
    };
    let both = info::OWNER_SECURITY_INFORMATION | info::GROUP_SECURITY_INFORMATION;
    let h = &h;
    let set = |d: SecurityDescriptor| async move {
        super::security_tests::set_sd(h, o.id, both, &d).await
    };
    assert_eq!(
        set(sd(md.uid() + 1, md.gid())).await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(sd(md.uid(), md.gid() + 1)).await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(set(sd(md.uid(), md.gid())).await, NtStatus::SUCCESS);
    let after = std::fs::metadata(h.path("f")).unwrap();
    assert_eq!((after.uid(), after.gid()), (md.uid(), md.gid()));
}

/// After a POSIX delete unlinked a name that another file then took, the POSIX opens of the
/// first file rename and link nothing: their old path names the other file now (the first
/// one keeps a second hard link, so its link count tells nothing).
#[tokio::test]
async fn an_unlinked_posix_open_moves_no_other_file() {
    use smbq_wire::fscc::file_info::DispositionInfo;
    use smbq_wire::set_info::SetInfoRequest;
    let h = H::new().await;
    let posix = posix_ctx(&[0; 4]);
    let all = crate::access::share::ALL;
    h.put("a", b"first").await;
    std::fs::hard_link(h.path("a"), h.path("b")).unwrap();
    let set = |id: FileId, class: u8, buf: Vec<u8>| {
        msg(Command::SET_INFO, h.tree, h.session.id, move |w| {
            SetInfoRequest {
                info_type: InfoType::FILE,
                file_info_class: class,
                additional_information: 0,
                file_id: id,
                buffer: &buf,
            }
            .encode(w)
        })
    };
    let keeper = h
        .create_req("a", mask::GENERIC_READ | mask::DELETE, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    let deleter = h
        .create_req("a", mask::GENERIC_READ | mask::DELETE, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    let mut w = smbq_wire::Writer::new();
    DispositionInfo {
        delete_pending: true,
    }
    .encode(&mut w);
    assert_eq!(
        h.send(set(deleter.id, 13, w.into_vec())).await.status,
        NtStatus::SUCCESS
    );
    h.close(deleter.id).await;
    assert!(!h.path("a").exists() && h.path("b").exists());
    // Someone else's file takes the name.
    h.put("a", b"victim").await;
    let r = h.rename(keeper.id, "moved").await;
    assert_eq!(r.status, NtStatus::OBJECT_NAME_NOT_FOUND);
    assert_eq!(std::fs::read(h.path("a")).unwrap(), b"victim");
    assert!(!h.path("moved").exists());
    h.close(keeper.id).await;
    assert_eq!(std::fs::read(h.path("a")).unwrap(), b"victim");
}

/// A POSIX open renames a directory while POSIX opens below it stay open, as Samba allows
/// (have_file_open_below ignores POSIX opens for a POSIX directory open): those opens follow
/// the directory, for their own renames and their delete-on-close. A Windows open's rename,
/// or a Windows open below, still gets ACCESS_DENIED.
#[tokio::test]
async fn a_posix_directory_rename_takes_the_posix_opens_below_along() {
    use super::set_info_tests::{rename_buf, set};
    let h = H::new().await;
    let posix = posix_ctx(&[0; 4]);
    let all = crate::access::share::ALL;
    std::fs::create_dir_all(h.path("d/s")).unwrap();
    h.put("d\\s\\f", b"data").await;
    let child = h
        .create_req("d/s/f", mask::GENERIC_READ | mask::DELETE, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(child.status, NtStatus::SUCCESS);
    let dir_open = |as_posix: bool| {
        let r = h
            .create_req("d", mask::GENERIC_READ | mask::DELETE, D::OPEN)
            .share(all)
            .options(opts::DIRECTORY_FILE);
        if as_posix { r.contexts(&posix) } else { r }
    };
    let windows = dir_open(false).send().await;
    assert_eq!(
        set(&h, windows.id, 10, &rename_buf("e", false)).await,
        NtStatus::ACCESS_DENIED
    );
    h.close(windows.id).await;
    let dir = dir_open(true).send().await;
    assert_eq!(dir.status, NtStatus::SUCCESS);
    assert_eq!(
        set(&h, dir.id, 10, &rename_buf("e", false)).await,
        NtStatus::SUCCESS
    );
    assert!(h.path("e/s/f").is_file() && !h.path("d").exists());
    // Another file takes the old name; the moved open renames and deletes its own file.
    std::fs::create_dir_all(h.path("d/s")).unwrap();
    std::fs::write(h.path("d/s/f"), b"other").unwrap();
    assert_eq!(
        set(&h, child.id, 10, &rename_buf("e/s/g", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("e/s/g")).unwrap(), b"data");
    let mut w = smbq_wire::Writer::new();
    smbq_wire::fscc::file_info::DispositionInfo {
        delete_pending: true,
    }
    .encode(&mut w);
    assert_eq!(
        set(&h, child.id, 13, &w.into_vec()).await,
        NtStatus::SUCCESS
    );
    h.close(child.id).await;
    assert!(!h.path("e/s/g").exists());
    assert_eq!(std::fs::read(h.path("d/s/f")).unwrap(), b"other");

    // A Windows open below keeps the directory where it is, even for a POSIX open.
    h.put("e\\s\\w", b"w").await;
    let below = h.create("e\\s\\w", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(below.status, NtStatus::SUCCESS);
    assert_eq!(
        set(&h, dir.id, 10, &rename_buf("z", false)).await,
        NtStatus::ACCESS_DENIED
    );
    assert!(h.path("e/s/w").is_file());
}

/// A durable POSIX open under a lease is reconnected by its POSIX name: `:` and `/` are name
/// characters and case counts, as when it was opened; the same name in another case names
/// another file, so that reconnect is INVALID_PARAMETER (MS-SMB2 3.3.5.9.12's name check).
#[tokio::test]
async fn a_durable_posix_open_reconnects_by_its_posix_name() {
    use super::durable_tests::{leased_v2_at, new_session};
    let mut h = H::new().await;
    std::fs::create_dir(h.path("sub")).unwrap();
    let ids = ([0x71; 16], [0x72; 16]);
    let o = leased_v2_at(&h, "sub/a:B", ids, None, true).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert!(h.path("sub").join("a:B").is_file());
    h.srv.session_lost(h.session.id);
    assert_eq!(h.srv.parked_opens(), 1);
    new_session(&mut h, 0x12, "alice").await;
    let other_case = leased_v2_at(&h, "sub/a:b", ids, Some(o.id), true).await;
    assert_eq!(other_case.status, NtStatus::INVALID_PARAMETER);
    let back = leased_v2_at(&h, "sub/a:B", ids, Some(o.id), true).await;
    assert_eq!(back.status, NtStatus::SUCCESS);
    assert_eq!(back.id, o.id);
    assert_eq!(h.close(back.id).await.status, NtStatus::SUCCESS);
    assert_eq!(h.srv.parked_opens(), 0);
}

/// Two places POSIX opens follow unlink(2) and O_APPEND rather than Windows, as Samba's smbd
/// does: a READONLY file is deleted through a POSIX open that may change its attributes (a
/// Windows open gets CANNOT_DELETE), and a POSIX open with FILE_APPEND_DATA but not
/// FILE_WRITE_DATA writes only at the end (offset all ones), any other offset refused.
#[tokio::test]
async fn posix_opens_delete_read_only_files_and_append_only_at_the_end() {
    use super::set_info_tests::set;
    let h = H::new().await;
    let posix = posix_ctx(&[0; 4]);
    let all = crate::access::share::ALL;
    let ro = h.create("ro", mask::GENERIC_ALL, D::CREATE, 0).await;
    h.close(ro.id).await;
    let mut p = std::fs::metadata(h.path("ro")).unwrap().permissions();
    p.set_readonly(true);
    std::fs::set_permissions(h.path("ro"), p).unwrap();
    let delete = [1u8];
    let access = mask::DELETE | mask::FILE_WRITE_ATTRIBUTES;
    let w = h.create_req("ro", access, D::OPEN).share(all).send().await;
    assert_eq!(set(&h, w.id, 13, &delete).await, NtStatus::CANNOT_DELETE);
    h.close(w.id).await;
    let no_attrs = h
        .create_req("ro", mask::DELETE, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(
        set(&h, no_attrs.id, 13, &delete).await,
        NtStatus::CANNOT_DELETE
    );
    h.close(no_attrs.id).await;
    let o = h
        .create_req("ro", access, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(set(&h, o.id, 13, &delete).await, NtStatus::SUCCESS);
    h.close(o.id).await;
    assert!(!h.path("ro").exists());

    h.put("log", b"hello").await;
    let append = mask::FILE_APPEND_DATA | mask::FILE_READ_DATA;
    let a = h
        .create_req("log", append, D::OPEN)
        .share(all)
        .contexts(&posix)
        .send()
        .await;
    assert_eq!(
        h.write(a.id, 0, b"!").await.status,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        h.write(a.id, u64::MAX, b" world").await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("log")).unwrap(), b"hello world");
    // A Windows append-only open still writes where it says (smbtorture smb2.rw.append).
    let wa = h.create_req("log", append, D::OPEN).share(all).send().await;
    assert_eq!(h.write(wa.id, 0, b"J").await.status, NtStatus::SUCCESS);
    assert_eq!(std::fs::read(h.path("log")).unwrap(), b"Jello world");
}

/// The POSIX opens below a directory a POSIX open renames keep their handle leases: nothing
/// is broken (a Linux client's opens hold RH leases), the rename goes through at once.
#[tokio::test]
async fn a_posix_directory_rename_breaks_no_lease_below() {
    use super::set_info_tests::{rename_buf, set};
    use smbq_wire::create::OplockLevel;
    use smbq_wire::create_context::{Lease, lease_state};
    let h = H::new().await;
    let all = crate::access::share::ALL;
    std::fs::create_dir(h.path("d")).unwrap();
    h.put("d\\f", b"x").await;
    let lease = Lease {
        key: [0x42; 16],
        state: lease_state::READ_CACHING | lease_state::HANDLE_CACHING,
        ..Default::default()
    }
    .to_bytes();
    let ctx = contexts_to_bytes(&[
        CreateContext::new(CreateContextTag::RQLS, &lease),
        CreateContext::new(CreateContextTag::POSIX, &[0; 4]),
    ]);
    let child = h
        .create_req("d/f", mask::GENERIC_READ, D::OPEN)
        .share(all)
        .oplock(OplockLevel::LEASE)
        .contexts(&ctx)
        .send()
        .await;
    assert_eq!(child.status, NtStatus::SUCCESS);
    assert_eq!(child.create().oplock_level, OplockLevel::LEASE);
    let dir = h
        .create_req("d", mask::GENERIC_READ | mask::DELETE, D::OPEN)
        .share(all)
        .options(opts::DIRECTORY_FILE)
        .contexts(&posix_ctx(&[0; 4]))
        .send()
        .await;
    let renamed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        set(&h, dir.id, 10, &rename_buf("e", false)),
    )
    .await
    .expect("no lease break to wait for");
    assert_eq!(renamed, NtStatus::SUCCESS);
    assert!(h.path("e/f").is_file());
    assert_eq!(h.read(child.id, 0, 1).await.status, NtStatus::SUCCESS);
}
