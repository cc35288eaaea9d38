use smbq_wire::create::CreateDisposition as D;
use smbq_wire::cursor::utf16le_encode;
use smbq_wire::fscc::dir_info::{DirClass, DirEntryInfo, decode_dir_list};
use smbq_wire::query_directory::{
    QueryDirectoryRequest, QueryDirectoryResponse, query_directory_flags as qf,
};
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg};
use crate::access::{mask, opts};

pub(super) async fn query(
    h: &H,
    id: FileId,
    class: DirClass,
    pattern: &str,
    flags: u8,
    max: u32,
) -> (NtStatus, Vec<String>) {
    let (status, entries) = query_with(h, id, class, pattern, flags, max).await;
    let names = entries.into_iter().map(|e| e.name.into_owned()).collect();
    (status, names)
}

/// The entries of a first query of `class` matching `pattern` (none on failure).
pub(super) async fn query_entries(
    h: &H,
    id: FileId,
    class: DirClass,
    pattern: &str,
) -> Vec<DirEntryInfo<'static>> {
    query_with(h, id, class, pattern, qf::RESTART_SCANS, 65536)
        .await
        .1
}

async fn query_with(
    h: &H,
    id: FileId,
    class: DirClass,
    pattern: &str,
    flags: u8,
    max: u32,
) -> (NtStatus, Vec<DirEntryInfo<'static>>) {
    let p = utf16le_encode(pattern);
    let m = msg(Command::QUERY_DIRECTORY, h.tree, h.session.id, |w| {
        QueryDirectoryRequest {
            file_information_class: class.info_class().0,
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
    (r.status, decode_dir_list(class, resp.buffer).unwrap())
}

#[tokio::test]
async fn lists_with_dots_first_and_patterns() {
    let h = H::new().await;
    for n in ["b.txt", "a.txt", "c.dat"] {
        h.put(n, b"x").await;
    }
    std::fs::create_dir(h.path("sub")).unwrap();
    let d = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    for class in [
        DirClass::Directory,
        DirClass::FullDirectory,
        DirClass::BothDirectory,
        DirClass::IdBothDirectory,
        DirClass::IdFullDirectory,
        DirClass::Names,
    ] {
        let (s, names) = query(&h, d.id, class, "*", qf::RESTART_SCANS, 65536).await;
        assert_eq!(s, NtStatus::SUCCESS, "{class:?}");
        assert_eq!(
            names,
            [".", "..", "a.txt", "b.txt", "c.dat", "sub"],
            "{class:?}"
        );
        assert_eq!(
            query(&h, d.id, class, "*", 0, 65536).await.0,
            NtStatus::NO_MORE_FILES
        );
    }
    let (_, names) = query(&h, d.id, DirClass::Names, "*.TXT", qf::REOPEN, 65536).await;
    assert_eq!(names, ["a.txt", "b.txt"]);
    let (s, _) = query(
        &h,
        d.id,
        DirClass::Names,
        "nomatch*",
        qf::RESTART_SCANS,
        65536,
    )
    .await;
    assert_eq!(s, NtStatus::NO_SUCH_FILE);
    // Single entries walk the cursor.
    let (_, n1) = query(
        &h,
        d.id,
        DirClass::Names,
        "?.txt",
        qf::RESTART_SCANS | qf::RETURN_SINGLE_ENTRY,
        65536,
    )
    .await;
    let (_, n2) = query(
        &h,
        d.id,
        DirClass::Names,
        "?.txt",
        qf::RETURN_SINGLE_ENTRY,
        65536,
    )
    .await;
    assert_eq!(
        (n1, n2),
        (vec!["a.txt".to_owned()], vec!["b.txt".to_owned()])
    );
}

#[tokio::test]
async fn buffer_limits() {
    let h = H::new().await;
    for i in 0..20 {
        h.put(&format!("file{i:02}"), b"").await;
    }
    let d = h
        .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await;
    // Too small for even one entry.
    let (s, _) = query(
        &h,
        d.id,
        DirClass::FullDirectory,
        "*",
        qf::RESTART_SCANS,
        10,
    )
    .await;
    assert_eq!(s, NtStatus::INFO_LENGTH_MISMATCH);
    // Small buffers page through everything exactly once.
    let mut all = vec![];
    let mut flags = qf::RESTART_SCANS;
    loop {
        let (s, names) = query(&h, d.id, DirClass::FullDirectory, "*", flags, 200).await;
        flags = 0;
        if s == NtStatus::NO_MORE_FILES {
            break;
        }
        assert_eq!(s, NtStatus::SUCCESS);
        assert!(!names.is_empty() && names.len() <= 2);
        all.extend(names);
    }
    assert_eq!(all.len(), 22);
    // Not a directory.
    let f = h.create("file00", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(
        query(&h, f.id, DirClass::Names, "*", 0, 1000).await.0,
        NtStatus::INVALID_PARAMETER
    );
}

/// On a compress_data share every response is offered to compression (the engine then
/// compresses what is long enough and pays); elsewhere only READs that ask are.
#[tokio::test]
async fn a_compress_data_share_offers_listings_to_compression() {
    for share_compresses in [false, true] {
        let h = H::with(|c| c.shares[0].compress_data = share_compresses).await;
        for i in 0..50 {
            std::fs::write(h.path(&format!("file-{i:03}.txt")), b"x").unwrap();
        }
        let d = h
            .create("", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
            .await;
        let p = utf16le_encode("*");
        let m = msg(Command::QUERY_DIRECTORY, h.tree, h.session.id, |w| {
            QueryDirectoryRequest {
                file_information_class: DirClass::Names.info_class().0,
                flags: 0,
                file_index: 0,
                file_id: d.id,
                file_name: &p,
                output_buffer_length: 65536,
            }
            .encode(w)
        });
        let r = h.send(m).await;
        assert_eq!(r.status, NtStatus::SUCCESS);
        assert_eq!(r.compress, share_compresses);
    }
}

/// A QUERY_DIRECTORY that arrived before the CLOSE of its handle works on that handle even
/// when the CLOSE runs first (`Server::before_task` holds the open it arrived for), as on
/// Windows (smbtorture smb2.compound_find.compound_find_close got FILE_CLOSED under load);
/// one sent after the CLOSE gets FILE_CLOSED.
#[tokio::test]
async fn a_query_sent_before_the_close_of_its_handle_still_runs() {
    let h = H::new().await;
    std::fs::create_dir(h.path("d")).unwrap();
    h.put("d\\a", b"").await;
    let d = h
        .create("d", mask::GENERIC_READ, D::OPEN, opts::DIRECTORY_FILE)
        .await
        .id;
    let p = utf16le_encode("*");
    let query_mid = |mid: u64| {
        let m = msg(Command::QUERY_DIRECTORY, h.tree, h.session.id, |w| {
            QueryDirectoryRequest {
                file_information_class: DirClass::Names.info_class().0,
                flags: 0,
                file_index: 0,
                file_id: d,
                file_name: &p,
                output_buffer_length: 4096,
            }
            .encode(w)
        });
        let mut req = h.request(m);
        req.header.message_id = mid;
        req
    };
    let before = query_mid(9);
    let arrival = h.srv.before_task(&h.conn, &before);
    let mut close = h.request(msg(Command::CLOSE, h.tree, h.session.id, |w| {
        smbq_wire::close::CloseRequest {
            flags: 0,
            file_id: d,
        }
        .encode(w)
    }));
    close.header.message_id = 10;
    let cancel = tokio_util::sync::CancellationToken::new;
    assert_eq!(
        h.srv.handle(&h.conn, &close, cancel()).await.status,
        NtStatus::SUCCESS
    );
    let r = h
        .srv
        .handle_arrived(&h.conn, &before, cancel(), arrival)
        .await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    let after = query_mid(11);
    let arrival = h.srv.before_task(&h.conn, &after);
    let r = h
        .srv
        .handle_arrived(&h.conn, &after, cancel(), arrival)
        .await;
    assert_eq!(r.status, NtStatus::FILE_CLOSED);
}
