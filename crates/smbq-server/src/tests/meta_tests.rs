//! DOS attributes, CreationTime and ChangeTime round trips (crate::dos), NumberOfLinks while
//! delete is pending, FilePositionInformation on synchronous opens, directory enumeration
//! after deletes, and shares that grant a user nothing.

use smbq_wire::create::CreateDisposition as D;
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::dir_info::{DirClass, decode_dir_list};
use smbq_wire::fscc::file_info::{AllInfo, BasicInfo, DispositionInfo, FullEa, mode};
use smbq_wire::query_directory::{
    QueryDirectoryRequest, QueryDirectoryResponse, query_directory_flags as qf,
};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg, share};
use crate::access::{attr, mask, opts};

async fn set(h: &H, id: FileId, class: u8, buf: &[u8]) -> NtStatus {
    let m = msg(Command::SET_INFO, h.tree, h.session.id, |w| {
        SetInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: class,
            additional_information: 0,
            file_id: id,
            buffer: buf,
        }
        .encode(w)
    });
    h.send(m).await.status
}

async fn all_info(h: &H, id: FileId) -> AllInfo {
    let m = msg(Command::QUERY_INFO, h.tree, h.session.id, |w| {
        QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: 18,
            output_buffer_length: 65535,
            additional_information: 0,
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
    AllInfo::decode(QueryInfoResponse::decode(&full).unwrap().buffer).unwrap()
}

const T0: u64 = 133_000_000_000_000_000;

#[tokio::test]
async fn basic_info_times_and_attributes_round_trip() {
    let h = H::new().await;
    h.put("f", b"abc").await;
    let o = h.create("f", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    let want = BasicInfo {
        creation_time: T0 + 900,
        last_access_time: T0 + 600,
        last_write_time: T0 + 300,
        change_time: T0 + 100,
        file_attributes: attr::READONLY,
    };
    assert_eq!(set(&h, o.id, 4, &want.to_bytes()).await, NtStatus::SUCCESS);
    assert_eq!(all_info(&h, o.id).await.basic, want);

    // Zero times keep every value, ChangeTime included although the attribute change below
    // moves the inode's ctime (Open.UserSetChangeTime).
    let normal = BasicInfo {
        file_attributes: attr::NORMAL,
        ..Default::default()
    };
    assert_eq!(
        set(&h, o.id, 4, &normal.to_bytes()).await,
        NtStatus::SUCCESS
    );
    let got = all_info(&h, o.id).await.basic;
    assert_eq!(
        got,
        BasicInfo {
            file_attributes: attr::NORMAL,
            ..want
        }
    );
    let hidden = BasicInfo {
        file_attributes: attr::HIDDEN,
        ..Default::default()
    };
    assert_eq!(
        set(&h, o.id, 4, &hidden.to_bytes()).await,
        NtStatus::SUCCESS
    );
    assert_eq!(all_info(&h, o.id).await.basic.file_attributes, attr::HIDDEN);
    let dir = BasicInfo {
        file_attributes: attr::DIRECTORY,
        ..Default::default()
    };
    assert_eq!(
        set(&h, o.id, 4, &dir.to_bytes()).await,
        NtStatus::INVALID_PARAMETER
    );
    h.close(o.id).await;

    // CreationTime and attributes live on disk; ChangeTime only until the inode changes.
    let o = h.create("f", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    let c = o.create();
    assert_eq!(
        (c.creation_time, c.file_attributes),
        (T0 + 900, attr::HIDDEN)
    );
    assert_eq!(h.write(o.id, 0, b"x").await.status, NtStatus::SUCCESS);
    assert_ne!(all_info(&h, o.id).await.basic.change_time, T0 + 100);
}

#[tokio::test]
async fn create_stores_requested_attributes() {
    let h = H::new().await;
    let o = h
        .create_req("n", mask::MAXIMUM_ALLOWED, D::CREATE)
        .share(0)
        .attrs(attr::HIDDEN | attr::SYSTEM)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let want = attr::HIDDEN | attr::SYSTEM | attr::ARCHIVE;
    assert_eq!(o.create().file_attributes, want);
    assert_eq!(all_info(&h, o.id).await.basic.file_attributes, want);
}

#[tokio::test]
async fn delete_pending_drops_the_link_count() {
    let h = H::new().await;
    h.put("f", b"abc").await;
    let o = h.create("f", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    let on = DispositionInfo {
        delete_pending: true,
    };
    assert_eq!(set(&h, o.id, 13, &on.to_bytes()).await, NtStatus::SUCCESS);
    let s = all_info(&h, o.id).await.standard;
    assert_eq!((s.delete_pending, s.number_of_links), (true, 0));
    let off = DispositionInfo {
        delete_pending: false,
    };
    assert_eq!(set(&h, o.id, 13, &off.to_bytes()).await, NtStatus::SUCCESS);
    assert_eq!(all_info(&h, o.id).await.standard.number_of_links, 1);
}

#[tokio::test]
async fn position_follows_io_only_on_synchronous_opens() {
    let h = H::new().await;
    h.put("f", &[0u8; 100]).await;
    let plain = h.create("f", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    assert_eq!(h.read(plain.id, 0, 10).await.status, NtStatus::SUCCESS);
    assert_eq!(all_info(&h, plain.id).await.position.current_byte_offset, 0);
    let sync = h
        .create(
            "f",
            mask::MAXIMUM_ALLOWED,
            D::OPEN,
            mode::FILE_SYNCHRONOUS_IO_NONALERT,
        )
        .await;
    assert_eq!(h.read(sync.id, 5, 10).await.status, NtStatus::SUCCESS);
    assert_eq!(all_info(&h, sync.id).await.position.current_byte_offset, 15);
    assert_eq!(
        h.write(sync.id, 40, b"abcd").await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(all_info(&h, sync.id).await.position.current_byte_offset, 44);
}

async fn list(h: &H, id: FileId, flags: u8, max: u32) -> (NtStatus, Vec<String>) {
    let p = utf16le_encode("*");
    let m = msg(Command::QUERY_DIRECTORY, h.tree, h.session.id, |w| {
        QueryDirectoryRequest {
            file_information_class: DirClass::BothDirectory.info_class().0,
            flags,
            file_index: 0,
            file_id: id,
            file_name: &p,
            output_buffer_length: max,
        }
        .encode(w)
    });
    let r = h.send(m).await;
    if r.status != NtStatus::SUCCESS {
        return (r.status, vec![]);
    }
    let mut full = vec![0u8; 64];
    full.extend_from_slice(&r.body);
    let resp = QueryDirectoryResponse::decode(&full).unwrap();
    let names = decode_dir_list(DirClass::BothDirectory, resp.buffer)
        .unwrap()
        .into_iter()
        .map(|e| e.name.into_owned())
        .collect();
    (r.status, names)
}

/// smb2.dir.fixed: names deleted after an enumeration started are not returned by it.
#[tokio::test]
async fn enumeration_skips_names_deleted_since_it_started() {
    let h = H::new().await;
    for n in ["a", "b", "c", "d"] {
        h.put(n, b"x").await;
    }
    let d = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    let (s, names) = list(&h, d.id, qf::RETURN_SINGLE_ENTRY, 4096).await;
    assert_eq!((s, names), (NtStatus::SUCCESS, vec![".".to_owned()]));
    std::fs::remove_file(h.path("b")).unwrap();
    std::fs::remove_file(h.path("d")).unwrap();
    let (s, names) = list(&h, d.id, 0, 4096).await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(names, ["..", "a", "c"]);
    assert_eq!(list(&h, d.id, 0, 4096).await.0, NtStatus::NO_MORE_FILES);

    // Everything left deleted: the continuation ends instead of returning stale names.
    let d2 = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(list(&h, d2.id, 0, 136).await.0, NtStatus::SUCCESS);
    std::fs::remove_file(h.path("a")).unwrap();
    std::fs::remove_file(h.path("c")).unwrap();
    let (s, names) = list(&h, d2.id, 0, 4096).await;
    assert!(
        s == NtStatus::NO_MORE_FILES || names.iter().all(|n| n == "." || n == ".."),
        "{s:?} {names:?}"
    );
}

/// smb2.ioctl.bug14788: a user the share grants nothing may connect, with MaximalAccess 0,
/// but opens nothing.
#[tokio::test]
async fn no_access_users_connect_but_open_nothing() {
    let mut h = H::with(|c| {
        let mut s = share("noperm", c.shares[0].path.as_path());
        s.no_access_users = vec!["ALICE".into()];
        c.shares.push(s);
    })
    .await;
    let r = h.tree_connect("\\\\host\\noperm").await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert_eq!(H::tree_resp(&r).maximal_access, 0);
    h.tree = r.tree_id.unwrap();
    let o = h.create("", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::ACCESS_DENIED);
}

/// One QUERY_DIRECTORY of `class` over the whole directory: the output buffer.
async fn list_class(h: &H, id: FileId, class: DirClass) -> Vec<u8> {
    let p = utf16le_encode("*");
    let m = msg(Command::QUERY_DIRECTORY, h.tree, h.session.id, |w| {
        QueryDirectoryRequest {
            file_information_class: class.info_class().0,
            flags: qf::RESTART_SCANS,
            file_index: 0,
            file_id: id,
            file_name: &p,
            output_buffer_length: 65536,
        }
        .encode(w)
    });
    let r = h.send(m).await;
    assert_eq!(r.status, NtStatus::SUCCESS, "{class:?}");
    let mut full = vec![0u8; 64];
    full.extend_from_slice(&r.body);
    QueryDirectoryResponse::decode(&full)
        .unwrap()
        .buffer
        .to_vec()
}

/// Issue 15: a listing reports what QUERY_INFO on the entry's own handle reports, stored
/// DOS attributes, CreationTime, a client-set ChangeTime, a preallocation and the EA size
/// included, in every directory information class that carries them (Explorer shows hidden
/// and system files from the listing alone).
#[tokio::test]
async fn listing_matches_query_info() {
    let h = H::new().await;
    h.put("plain", b"abc").await;
    h.put("marked", b"abcdef").await;
    let o = h.create("marked", mask::MAXIMUM_ALLOWED, D::OPEN, 0).await;
    let basic = BasicInfo {
        creation_time: T0 + 900,
        last_access_time: 0,
        last_write_time: 0,
        change_time: T0 + 100,
        file_attributes: attr::HIDDEN | attr::SYSTEM | attr::ARCHIVE,
    };
    assert_eq!(set(&h, o.id, 4, &basic.to_bytes()).await, NtStatus::SUCCESS);
    let ea = {
        let list = [FullEa {
            flags: 0,
            name: b"COLOUR",
            value: b"blue",
        }];
        let mut w = smbq_wire::Writer::new();
        FullEa::encode_list(&list, &mut w);
        w.into_vec()
    };
    assert_eq!(set(&h, o.id, 15, &ea).await, NtStatus::SUCCESS);
    // FileAllocationInformation: a preallocation shows while the file is open.
    let alloc = 1_000_000u64.to_le_bytes();
    assert_eq!(set(&h, o.id, 19, &alloc).await, NtStatus::SUCCESS);
    let want = all_info(&h, o.id).await;
    assert_eq!(want.basic.file_attributes, basic.file_attributes);
    assert_ne!(want.ea.ea_size, 0);

    let d = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    for class in [
        DirClass::Directory,
        DirClass::FullDirectory,
        DirClass::BothDirectory,
        DirClass::IdBothDirectory,
        DirClass::IdFullDirectory,
        DirClass::IdExtdDirectory,
    ] {
        let buf = list_class(&h, d.id, class).await;
        let entries = decode_dir_list(class, &buf).unwrap();
        let e = entries.iter().find(|e| e.name == "marked").unwrap();
        assert_eq!(e.file_attributes, want.basic.file_attributes, "{class:?}");
        assert_eq!(e.creation_time, want.basic.creation_time, "{class:?}");
        assert_eq!(e.last_write_time, want.basic.last_write_time, "{class:?}");
        assert_eq!(e.change_time, want.basic.change_time, "{class:?}");
        assert_eq!(e.end_of_file, want.standard.end_of_file, "{class:?}");
        assert_eq!(
            e.allocation_size, want.standard.allocation_size,
            "{class:?}"
        );
        if !matches!(class, DirClass::Directory | DirClass::IdExtdDirectory) {
            assert_eq!(e.ea_size, want.ea.ea_size, "{class:?}");
        }
        let p = entries.iter().find(|e| e.name == "plain").unwrap();
        assert_eq!(p.file_attributes, attr::ARCHIVE, "{class:?}");
        assert_eq!(p.ea_size, 0, "{class:?}");
    }
    h.close(o.id).await;
}
