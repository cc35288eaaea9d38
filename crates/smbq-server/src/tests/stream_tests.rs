//! Named streams (crate::streams), EAs (crate::ea) and the rename sharing rules, through the
//! handlers on a PosixVfs share in a temporary directory.

use smbq_wire::create::CreateDisposition as D;
use smbq_wire::create_context::{CreateContext, CreateContextTag, contexts_to_bytes};
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::file_info::{
    DispositionInfo, EaInfo, FullEa, GetEaList, RenameInfo, StreamInfo,
};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse, query_info_flags};
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::{Command, FileId, NtStatus, Writer};

use super::harness::{H, msg};
use crate::access::{mask, opts, share};

async fn qi(
    h: &H,
    id: FileId,
    class: FileInfoClass,
    input: &[u8],
    flags: u32,
) -> (NtStatus, Vec<u8>) {
    let m = msg(Command::QUERY_INFO, h.tree, h.session.id, |w| {
        QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: class.0,
            output_buffer_length: 4096,
            additional_information: 0,
            flags,
            file_id: id,
            input,
        }
        .encode(w)
    });
    let r = h.send(m).await;
    let mut full = vec![0u8; 64];
    full.extend_from_slice(&r.body);
    let buf = match r.status {
        NtStatus::SUCCESS | NtStatus::BUFFER_OVERFLOW => {
            QueryInfoResponse::decode(&full).unwrap().buffer.to_vec()
        }
        _ => Vec::new(),
    };
    (r.status, buf)
}

async fn set(h: &H, id: FileId, class: FileInfoClass, buf: &[u8]) -> NtStatus {
    let m = msg(Command::SET_INFO, h.tree, h.session.id, |w| {
        SetInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: class.0,
            additional_information: 0,
            file_id: id,
            buffer: buf,
        }
        .encode(w)
    });
    h.send(m).await.status
}

fn rename(name: &str, replace: bool) -> Vec<u8> {
    let mut w = Writer::new();
    RenameInfo {
        replace_if_exists: replace,
        root_directory: 0,
        file_name: name.into(),
    }
    .encode(&mut w);
    w.into_vec()
}

fn delete_pending() -> Vec<u8> {
    let mut w = Writer::new();
    DispositionInfo {
        delete_pending: true,
    }
    .encode(&mut w);
    w.into_vec()
}

async fn streams(h: &H, id: FileId) -> Vec<(String, u64)> {
    let (s, b) = qi(h, id, FileInfoClass::STREAM, &[], 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let mut v: Vec<_> = StreamInfo::decode(&b)
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.size))
        .collect();
    v.sort();
    v
}

fn eas(list: &[(&[u8], &[u8])]) -> Vec<u8> {
    let l: Vec<FullEa<'_>> = list
        .iter()
        .map(|&(name, value)| FullEa {
            flags: 0,
            name,
            value,
        })
        .collect();
    let mut w = Writer::new();
    FullEa::encode_list(&l, &mut w);
    w.into_vec()
}

#[tokio::test]
async fn stream_data_is_separate_and_listed() {
    let h = H::new().await;
    // Creating a stream of a missing file creates the file.
    let s = h
        .create("f.txt:Stream One", mask::GENERIC_ALL, D::CREATE, 0)
        .await;
    assert_eq!(s.status, NtStatus::SUCCESS);
    assert!(h.path("f.txt").is_file());
    assert_eq!(
        h.write(s.id, 0, b"test data").await.status,
        NtStatus::SUCCESS
    );
    assert_eq!(
        h.write(s.id, 5, b"MORE DATA ").await.status,
        NtStatus::SUCCESS
    );
    h.close(s.id).await;
    // The file's own data is untouched.
    assert_eq!(std::fs::read(h.path("f.txt")).unwrap(), b"");
    // Names are case-insensitive and `:$DATA` may be spelled out in any case.
    let s = h
        .create("f.txt:STREAM ONE:$data", mask::GENERIC_READ, D::OPEN, 0)
        .await;
    assert_eq!(s.status, NtStatus::SUCCESS);
    let r = h.read(s.id, 0, 100).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert_eq!(r.data.as_deref(), Some(&b"test MORE DATA "[..]));
    assert_eq!(
        streams(&h, s.id).await,
        [
            ("::$DATA".to_owned(), 0),
            (":Stream One:$DATA".to_owned(), 15)
        ]
    );
    h.close(s.id).await;
    for (name, want) in [
        ("f.txt:missing", NtStatus::OBJECT_NAME_NOT_FOUND),
        ("f.txt:Stream One:", NtStatus::OBJECT_NAME_INVALID),
        ("f.txt:Stream One:$FOO", NtStatus::OBJECT_NAME_INVALID),
        ("none:s", NtStatus::OBJECT_NAME_NOT_FOUND),
    ] {
        assert_eq!(
            h.create(name, mask::GENERIC_READ, D::OPEN, 0).await.status,
            want,
            "{name}"
        );
    }
    // Overwriting the file drops its streams (MS-FSA 2.1.5.1.2.1).
    let o = h.create("f.txt", mask::GENERIC_ALL, D::OVERWRITE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    assert_eq!(streams(&h, o.id).await, [("::$DATA".to_owned(), 0)]);
    h.close(o.id).await;
}

#[tokio::test]
async fn directories_have_named_streams_but_no_data_stream() {
    let h = H::new().await;
    std::fs::create_dir(h.path("d")).unwrap();
    let o = h
        .create(
            "d::$DATA",
            mask::GENERIC_READ,
            D::OPEN,
            opts::DIRECTORY_FILE,
        )
        .await;
    assert_eq!(o.status, NtStatus::NOT_A_DIRECTORY);
    let o = h.create("d::$DATA", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(o.status, NtStatus::FILE_IS_A_DIRECTORY);
    let o = h
        .create("d\\x:s", mask::GENERIC_ALL, D::CREATE, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(o.status, NtStatus::NOT_A_DIRECTORY);
    let s = h.create("d:s", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(s.status, NtStatus::SUCCESS);
    assert_eq!(h.write(s.id, 0, b"xy").await.status, NtStatus::SUCCESS);
    h.close(s.id).await;
    let d = h
        .create("d", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    assert_eq!(streams(&h, d.id).await, [(":s:$DATA".to_owned(), 2)]);
    h.close(d.id).await;
}

#[tokio::test]
async fn share_modes_are_per_stream() {
    let h = H::new().await;
    let w = mask::FILE_WRITE_DATA;
    let a = h.create_req("f:a", w, D::CREATE).share(0).send().await;
    assert_eq!(a.status, NtStatus::SUCCESS);
    // Another stream of the same file is another share-mode unit.
    let b = h.create_req("f:b", w, D::CREATE).share(0).send().await;
    assert_eq!(b.status, NtStatus::SUCCESS);
    let a2 = h.create_req("f:A", w, D::OPEN).share(0).send().await;
    assert_eq!(a2.status, NtStatus::SHARING_VIOLATION);
    // The base file opens; but not for DELETE while a stream does not share delete.
    let base = h.create_req("f", w, D::OPEN).send().await;
    assert_eq!(base.status, NtStatus::SUCCESS);
    h.close(base.id).await;
    let del = h.create_req("f", mask::DELETE, D::OPEN).send().await;
    assert_eq!(del.status, NtStatus::SHARING_VIOLATION);
    h.close(a.id).await;
    h.close(b.id).await;
    let del = h.create_req("f", mask::DELETE, D::OPEN).send().await;
    assert_eq!(del.status, NtStatus::SUCCESS);
    h.close(del.id).await;
}

#[tokio::test]
async fn deleting_streams_and_their_file() {
    let h = H::new().await;
    let s = h.create("f:s1", mask::GENERIC_ALL, D::CREATE, 0).await;
    h.close(s.id).await;
    let s = h.create("f:s2", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(h.write(s.id, 0, b"kept").await.status, NtStatus::SUCCESS);
    h.close(s.id).await;
    // Delete on close removes only that stream.
    let s = h
        .create("f:s1", mask::GENERIC_ALL, D::OPEN, opts::DELETE_ON_CLOSE)
        .await;
    assert_eq!(s.status, NtStatus::SUCCESS);
    h.close(s.id).await;
    assert_eq!(
        h.create("f:s1", mask::GENERIC_READ, D::OPEN, 0)
            .await
            .status,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    // A stream open sharing delete lets the file go; until it closes, names are pending.
    let s = h
        .create_req("f:s2", mask::GENERIC_READ, D::OPEN)
        .send()
        .await;
    let f = h.create("f", mask::DELETE, D::OPEN, 0).await;
    assert_eq!(f.status, NtStatus::SUCCESS);
    assert_eq!(
        set(&h, f.id, FileInfoClass::DISPOSITION, &delete_pending()).await,
        NtStatus::SUCCESS
    );
    h.close(f.id).await;
    assert!(h.path("f").exists());
    for name in ["f", "f:s2"] {
        assert_eq!(
            h.create(name, mask::GENERIC_READ, D::OPEN_IF, 0)
                .await
                .status,
            NtStatus::DELETE_PENDING,
            "{name}"
        );
    }
    assert_eq!(h.read(s.id, 0, 10).await.status, NtStatus::SUCCESS);
    h.close(s.id).await;
    assert!(!h.path("f").exists());
}

#[tokio::test]
async fn stream_renames() {
    let h = H::new().await;
    let s = h.create("f:one", mask::GENERIC_ALL, D::CREATE, 0).await;
    h.close(s.id).await;
    let s = h
        .create("f:two", mask::GENERIC_ALL | mask::DELETE, D::CREATE, 0)
        .await;
    assert_eq!(h.write(s.id, 0, b"2").await.status, NtStatus::SUCCESS);
    let ren = FileInfoClass::RENAME;
    assert_eq!(
        set(&h, s.id, ren, &rename(":one", false)).await,
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        set(&h, s.id, ren, &rename(":one:$DATA", true)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        streams(&h, s.id).await,
        [("::$DATA".into(), 0), (":one:$DATA".into(), 1)]
    );
    // The open follows its stream.
    assert_eq!(h.write(s.id, 1, b"x").await.status, NtStatus::SUCCESS);
    assert_eq!(
        set(&h, s.id, ren, &rename("f:three", false)).await,
        NtStatus::SHARING_VIOLATION
    );
    assert_eq!(
        set(&h, s.id, ren, &rename(":bad:", false)).await,
        NtStatus::INVALID_PARAMETER
    );
    // Onto the empty unnamed stream: the data becomes the file's.
    assert_eq!(
        set(&h, s.id, ren, &rename("::$DATA", true)).await,
        NtStatus::SUCCESS
    );
    h.close(s.id).await;
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"2x");
    let o = h.create("f", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(streams(&h, o.id).await, [("::$DATA".into(), 2)]);
    h.close(o.id).await;
}

#[tokio::test]
async fn rename_sharing_rules() {
    let h = H::new().await;
    std::fs::create_dir(h.path("d")).unwrap();
    h.put("d\\f", b"x").await;
    let ren = FileInfoClass::RENAME;
    // MS-FSA 2.1.5.15.11: not while a named stream of the file is open.
    let s = h
        .create_req("d\\f:s", mask::GENERIC_ALL, D::CREATE)
        .send()
        .await;
    let f = h
        .create_req("d\\f", mask::GENERIC_ALL | mask::DELETE, D::OPEN)
        .send()
        .await;
    assert_eq!(
        set(&h, f.id, ren, &rename("d\\g", false)).await,
        NtStatus::ACCESS_DENIED
    );
    h.close(s.id).await;
    // The target directory open with DELETE access, or without sharing write, blocks it.
    for (access, share_access, want) in [
        (
            mask::GENERIC_READ | mask::DELETE,
            share::ALL,
            NtStatus::SHARING_VIOLATION,
        ),
        (mask::GENERIC_READ, 0, NtStatus::SHARING_VIOLATION),
        (mask::GENERIC_READ, share::ALL, NtStatus::SUCCESS),
    ] {
        let d = h
            .create_req("d", access, D::OPEN)
            .share(share_access)
            .options(opts::DIRECTORY_FILE)
            .send()
            .await;
        assert_eq!(d.status, NtStatus::SUCCESS);
        assert_eq!(
            set(&h, f.id, ren, &rename("d\\g", false)).await,
            want,
            "{access:#x} {share_access}"
        );
        h.close(d.id).await;
    }
    h.close(f.id).await;
    assert!(h.path("d/g").is_file());
}

#[tokio::test]
async fn extended_attributes() {
    let h = H::new().await;
    h.put("f", b"").await;
    let o = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    let (s, _) = qi(
        &h,
        o.id,
        FileInfoClass::FULL_EA,
        &[],
        query_info_flags::RESTART_SCAN,
    )
    .await;
    assert_eq!(s, NtStatus::NO_EAS_ON_FILE);
    let set_list = eas(&[(b"EaOne", b"VALUE1"), (b"second", b"ValueTwo")]);
    assert_eq!(
        set(&h, o.id, FileInfoClass::FULL_EA, &set_list).await,
        NtStatus::SUCCESS
    );
    let (s, b) = qi(
        &h,
        o.id,
        FileInfoClass::FULL_EA,
        &[],
        query_info_flags::RESTART_SCAN,
    )
    .await;
    assert_eq!(s, NtStatus::SUCCESS);
    let mut got: Vec<(Vec<u8>, Vec<u8>)> = FullEa::decode_list(&b)
        .unwrap()
        .into_iter()
        .map(|e| (e.name.to_vec(), e.value.to_vec()))
        .collect();
    got.sort();
    // Names come back upper-cased, as Windows stores them.
    assert_eq!(
        got,
        [
            (b"EAONE".to_vec(), b"VALUE1".to_vec()),
            (b"SECOND".to_vec(), b"ValueTwo".to_vec())
        ]
    );
    let (_, b) = qi(&h, o.id, FileInfoClass::EA, &[], 0).await;
    // 8 + 5 + 1 + 6 = 20 and 8 + 6 + 1 + 8 = 23 -> 24, each padded to 4.
    assert_eq!(EaInfo::decode(&b).unwrap().ea_size, 44);
    // By name, with a missing one coming back empty.
    let mut w = Writer::new();
    GetEaList::encode(&[b"second", b"nope"], &mut w);
    let (s, b) = qi(&h, o.id, FileInfoClass::FULL_EA, &w.into_vec(), 0).await;
    assert_eq!(s, NtStatus::SUCCESS);
    let l = FullEa::decode_list(&b).unwrap();
    assert_eq!((l[0].name, l[0].value), (&b"SECOND"[..], &b"ValueTwo"[..]));
    assert_eq!((l[1].name, l[1].value), (&b"NOPE"[..], &b""[..]));
    // An empty value deletes; a bad name is refused.
    assert_eq!(
        set(&h, o.id, FileInfoClass::FULL_EA, &eas(&[(b"EAONE", b"")])).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(&h, o.id, FileInfoClass::FULL_EA, &eas(&[(b"a*", b"v")])).await,
        NtStatus::INVALID_EA_NAME
    );
    let (_, b) = qi(&h, o.id, FileInfoClass::EA, &[], 0).await;
    assert_eq!(EaInfo::decode(&b).unwrap().ea_size, 24);
    h.close(o.id).await;
    // Without FILE_WRITE_EA / FILE_READ_EA.
    let r = h.create("f", mask::FILE_READ_DATA, D::OPEN, 0).await;
    assert_eq!(
        set(&h, r.id, FileInfoClass::FULL_EA, &set_list).await,
        NtStatus::ACCESS_DENIED
    );
    let (s, _) = qi(&h, r.id, FileInfoClass::FULL_EA, &[], 0).await;
    assert_eq!(s, NtStatus::ACCESS_DENIED);
    h.close(r.id).await;
}

#[tokio::test]
async fn ext_a_context_sets_eas_on_create() {
    let h = H::new().await;
    let list = eas(&[(b"CtxEa", b"v")]);
    let ctx = contexts_to_bytes(&[CreateContext::new(CreateContextTag::EXTA, &list)]);
    let o = h
        .create_req("f", mask::GENERIC_ALL, D::CREATE)
        .contexts(&ctx)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let (s, b) = qi(
        &h,
        o.id,
        FileInfoClass::FULL_EA,
        &[],
        query_info_flags::RESTART_SCAN,
    )
    .await;
    assert_eq!(s, NtStatus::SUCCESS);
    assert_eq!(FullEa::decode_list(&b).unwrap()[0].name, b"CTXEA");
    h.close(o.id).await;
    let bad = eas(&[(b"bad?", b"v")]);
    let ctx = contexts_to_bytes(&[CreateContext::new(CreateContextTag::EXTA, &bad)]);
    let o = h
        .create_req("g", mask::GENERIC_ALL, D::CREATE)
        .contexts(&ctx)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::INVALID_EA_NAME);
    assert!(!h.path("g").exists());
}
