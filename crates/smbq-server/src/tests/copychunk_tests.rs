//! Server-side copy (MS-SMB2 3.3.5.15.5-6; crate::handlers::copychunk): statuses and counts as
//! Windows Server 2012 and smbtorture's smb2.ioctl copy_chunk_* tests expect them.

use smbq_wire::copychunk::{
    Chunk, CopyChunkCopy, CopyChunkResponse, RESUME_KEY_LEN, ResumeKeyResponse,
};
use smbq_wire::create::CreateDisposition as D;
use smbq_wire::ioctl::CtlCode;
use smbq_wire::lock::{LockElement, LockRequest, lock_flags as lf};
use smbq_wire::{Command, FileId, NtStatus};
use tokio_util::sync::CancellationToken;

use super::harness::{H, ioctl_msg, msg, session};
use crate::access::mask;

const ALL: u32 = mask::FILE_ALL_ACCESS;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

pub(super) async fn key(h: &H, id: FileId) -> [u8; RESUME_KEY_LEN] {
    let (status, out) = h.fsctl(CtlCode::SRV_REQUEST_RESUME_KEY, id, &[], 32).await;
    assert_eq!(status, NtStatus::SUCCESS);
    assert_eq!(
        out.len(),
        ResumeKeyResponse::LEN,
        "Samba's client parses 32 bytes"
    );
    ResumeKeyResponse::decode(&out).unwrap().resume_key
}

fn chunks(list: &[(u64, u64, u32)]) -> Vec<Chunk> {
    list.iter()
        .map(|&(source_offset, target_offset, length)| Chunk {
            source_offset,
            target_offset,
            length,
        })
        .collect()
}

/// SRV_COPYCHUNK_COPY naming `key` and the (source, target, length) chunks.
fn copy_input(key: [u8; RESUME_KEY_LEN], list: &[(u64, u64, u32)]) -> Vec<u8> {
    let c = CopyChunkCopy {
        source_key: key,
        chunk_count: list.len() as u32,
        chunks: chunks(list),
    };
    let mut w = smbq_wire::Writer::new();
    c.encode(&mut w);
    w.into_vec()
}

/// Sends a COPYCHUNK(_WRITE) on `dst`; the status and, when the answer has one, its counts.
pub(super) async fn copy(
    h: &H,
    ctl: CtlCode,
    dst: FileId,
    key: [u8; RESUME_KEY_LEN],
    list: &[(u64, u64, u32)],
) -> (NtStatus, Option<CopyChunkResponse>) {
    let (status, out) = h.fsctl(ctl, dst, &copy_input(key, list), 12).await;
    let counts = (!out.is_empty()).then(|| CopyChunkResponse::decode(&out).unwrap());
    (status, counts)
}

fn counts(c: u32, t: u32) -> Option<CopyChunkResponse> {
    Some(CopyChunkResponse {
        chunks_written: c,
        chunk_bytes_written: 0,
        total_bytes_written: t,
    })
}

async fn setup(h: &H, src_len: usize) -> (FileId, FileId, Vec<u8>) {
    let data = pattern(src_len, 7);
    h.put("src", &data).await;
    let s = h.create("src", ALL, D::OPEN, 0).await;
    let d = h.create("dst", ALL, D::OVERWRITE_IF, 0).await;
    assert_eq!((s.status, d.status), (NtStatus::SUCCESS, NtStatus::SUCCESS));
    (s.id, d.id, data)
}

fn file(h: &H, name: &str) -> Vec<u8> {
    std::fs::read(h.path(name)).unwrap()
}

#[tokio::test]
async fn copies_chunks_in_order_with_memmove_semantics() {
    let h = H::new().await;
    let (s, d, data) = setup(&h, 8192).await;
    let k = key(&h, s).await;
    assert_eq!(k, key(&h, s).await, "one key per open");
    let r = copy(
        &h,
        CtlCode::SRV_COPYCHUNK,
        d,
        k,
        &[(0, 0, 4096), (4096, 0, 4096)],
    )
    .await;
    assert_eq!(r, (NtStatus::SUCCESS, counts(2, 8192)));
    assert_eq!(file(&h, "dst"), data[4096..]);
    // Past the end leaves a hole that reads as zeros (copy_chunk_sparse_dest).
    let r = copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(0, 10_000, 100)]).await;
    assert_eq!(r, (NtStatus::SUCCESS, counts(1, 100)));
    let got = file(&h, "dst");
    assert_eq!(got.len(), 10_100);
    assert!(got[4096..10_000].iter().all(|&b| b == 0));
    assert_eq!(got[10_000..], data[..100]);
    // Source is destination, overlapping: as if the chunk were read whole first.
    let r = copy(&h, CtlCode::SRV_COPYCHUNK, s, k, &[(0, 2040, 2048)]).await;
    assert_eq!(r, (NtStatus::SUCCESS, counts(1, 2048)));
    let mut want = data.clone();
    want.copy_within(0..2048, 2040);
    assert_eq!(file(&h, "src"), want);
}

#[tokio::test]
async fn limits_are_answered_with_the_limits_and_nothing_is_written() {
    let h = H::new().await;
    let (s, d, _) = setup(&h, 4096).await;
    let k = key(&h, s).await;
    let limits = counts(256, 16 << 20).map(|c| CopyChunkResponse {
        chunk_bytes_written: 1 << 20,
        ..c
    });
    for bad in [
        vec![(0, 0, u32::MAX)],
        vec![(0, 0, 0)],
        vec![(0, 0, (1 << 20) + 1)],
        vec![(0, 0, 1 << 20); 17],
    ] {
        let r = copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &bad).await;
        assert_eq!(
            r,
            (NtStatus::INVALID_PARAMETER, limits),
            "{:?}",
            bad.first()
        );
    }
    let many = vec![(0, 0, 1); 257];
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &many).await,
        (NtStatus::INVALID_PARAMETER, limits)
    );
    assert_eq!(file(&h, "dst").len(), 0);
    // No chunks: success with zero counts.
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[]).await,
        (NtStatus::SUCCESS, counts(0, 0))
    );
    // Room for less than the 12-byte answer: a plain error.
    let input = copy_input(k, &[(0, 0, 10)]);
    let (status, out) = h.fsctl(CtlCode::SRV_COPYCHUNK, d, &input, 11).await;
    assert_eq!((status, out.len()), (NtStatus::INVALID_PARAMETER, 0));
    // A count larger than the bytes that follow it: malformed.
    let mut w = smbq_wire::Writer::new();
    w.bytes(&k).u32(3).u32(0).zeros(24);
    let (status, _) = h.fsctl(CtlCode::SRV_COPYCHUNK, d, w.as_slice(), 12).await;
    assert_eq!(status, NtStatus::INVALID_PARAMETER);
}

#[tokio::test]
async fn a_source_range_past_the_end_stops_after_the_chunks_before_it() {
    let h = H::new().await;
    let (s, d, data) = setup(&h, 8192).await;
    let k = key(&h, s).await;
    let r = copy(
        &h,
        CtlCode::SRV_COPYCHUNK,
        d,
        k,
        &[(0, 0, 4096), (4096, 4096, 8192)],
    )
    .await;
    assert_eq!(r, (NtStatus::INVALID_VIEW_SIZE, counts(1, 4096)));
    assert_eq!(file(&h, "dst"), data[..4096]);
    let r = copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(u64::MAX - 10, 0, 100)]).await;
    assert_eq!(r.0, NtStatus::INVALID_PARAMETER);
}

#[tokio::test]
async fn keys_that_name_no_open_are_not_found() {
    let h = H::new().await;
    let (s, d, _) = setup(&h, 4096).await;
    let k = key(&h, s).await;
    let bogus = *b"deadbeefdeadbeefdeadbeef";
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, bogus, &[(0, 0, 4096)])
            .await
            .0,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    // The right open id with a forged tag.
    let mut forged = k;
    forged[RESUME_KEY_LEN - 1] ^= 0x80;
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, forged, &[(0, 0, 4096)])
            .await
            .0,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    // A closed source's key dies with it, also once its slot is used again.
    assert_eq!(h.close(s).await.status, NtStatus::SUCCESS);
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(0, 0, 4096)])
            .await
            .0,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    let again = h.create("src", ALL, D::OPEN, 0).await;
    assert_eq!(again.status, NtStatus::SUCCESS);
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(0, 0, 4096)])
            .await
            .0,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(file(&h, "dst").len(), 0);
}

#[tokio::test]
async fn rights_are_checked_on_both_opens() {
    let h = H::new().await;
    h.put("src", &pattern(4096, 1)).await;
    async fn open(h: &H, name: &str, access: u32) -> FileId {
        let o = h.create(name, access, D::OPEN_IF, 0).await;
        assert_eq!(o.status, NtStatus::SUCCESS, "{name} {access:#x}");
        o.id
    }
    let ra = mask::FILE_READ_ATTRIBUTES;
    let cases = [
        // (source access, destination access, ctl, expected)
        (
            mask::FILE_READ_DATA | ra,
            ALL,
            CtlCode::SRV_COPYCHUNK,
            NtStatus::SUCCESS,
        ),
        (
            mask::FILE_EXECUTE | ra,
            ALL,
            CtlCode::SRV_COPYCHUNK,
            NtStatus::SUCCESS,
        ),
        (ra, ALL, CtlCode::SRV_COPYCHUNK, NtStatus::ACCESS_DENIED),
        (
            mask::FILE_READ_DATA | ra,
            ALL & !(mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA),
            CtlCode::SRV_COPYCHUNK,
            NtStatus::ACCESS_DENIED,
        ),
        (
            mask::FILE_READ_DATA | ra,
            ALL & !mask::FILE_READ_DATA,
            CtlCode::SRV_COPYCHUNK,
            NtStatus::ACCESS_DENIED,
        ),
        // COPYCHUNK_WRITE does not read the destination.
        (
            mask::FILE_READ_DATA | ra,
            ALL & !mask::FILE_READ_DATA,
            CtlCode::SRV_COPYCHUNK_WRITE,
            NtStatus::SUCCESS,
        ),
    ];
    for (i, (sa, da, ctl, want)) in cases.into_iter().enumerate() {
        let s = open(&h, "src", sa).await;
        let d = open(&h, &format!("dst{i}"), da).await;
        // The key itself needs no right at all.
        let k = key(&h, s).await;
        let (status, _) = copy(&h, ctl, d, k, &[(0, 0, 4096)]).await;
        assert_eq!(status, want, "case {i}");
        h.close(s).await;
        h.close(d).await;
    }
    // A directory is neither source nor destination.
    let dir = h
        .create(
            "dir",
            mask::GENERIC_ALL,
            D::CREATE,
            smbq_wire::create::create_options::DIRECTORY_FILE,
        )
        .await;
    let s = open(&h, "src", ALL).await;
    let k = key(&h, s).await;
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, dir.id, k, &[(0, 0, 10)])
            .await
            .0,
        NtStatus::ACCESS_DENIED
    );
}

#[tokio::test]
async fn a_key_from_another_session_is_refused() {
    let h = H::new().await;
    let (s, _, _) = setup(&h, 4096).await;
    let k = key(&h, s).await;
    // A second session of the same connection with its own tree and open.
    h.srv.session_table().insert(0x22);
    h.srv.session_started(0x22, super::harness::conn().id);
    let other = session(0x22);
    let tc = msg(Command::TREE_CONNECT, 0, 0x22, |w| {
        let p = smbq_wire::cursor::utf16le_encode("\\\\srv\\data");
        smbq_wire::tree_connect::TreeConnectRequest {
            flags: 0,
            path_utf16: &p,
            contexts: vec![],
        }
        .encode(w)
    });
    let r = h
        .send_with(tc, Some(other.clone()), CancellationToken::new())
        .await;
    let tree = r.tree_id.unwrap();
    let n = smbq_wire::cursor::utf16le_encode("theirs");
    let cr = msg(Command::CREATE, tree, 0x22, |w| {
        smbq_wire::create::CreateRequest {
            desired_access: ALL,
            share_access: 7,
            create_disposition: D::OVERWRITE_IF,
            name: &n,
            ..Default::default()
        }
        .encode(w)
    });
    let d = h
        .send_with(cr, Some(other.clone()), CancellationToken::new())
        .await
        .file_id
        .unwrap();
    let input = copy_input(k, &[(0, 0, 4096)]);
    let req = ioctl_msg(tree, 0x22, CtlCode::SRV_COPYCHUNK, d, &input, 12);
    let r = h
        .send_with(req, Some(other), CancellationToken::new())
        .await;
    assert_eq!(r.status, NtStatus::ACCESS_DENIED);
    assert_eq!(file(&h, "theirs").len(), 0);
}

#[tokio::test]
async fn byte_range_locks_of_other_opens_conflict() {
    let h = H::new().await;
    let (s, d, data) = setup(&h, 4096).await;
    let k = key(&h, s).await;
    let other = h.create("src", ALL, D::OPEN, 0).await.id;
    let lock = |id, flags| {
        msg(Command::LOCK, h.tree, h.session.id, move |w| {
            LockRequest {
                lock_sequence: 0,
                file_id: id,
                locks: vec![LockElement {
                    offset: 0,
                    length: 4096,
                    flags,
                }],
            }
            .encode(w)
        })
    };
    let ex = lf::EXCLUSIVE | lf::FAIL_IMMEDIATELY;
    assert_eq!(h.send(lock(other, ex)).await.status, NtStatus::SUCCESS);
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(0, 0, 4096)]).await,
        (NtStatus::FILE_LOCK_CONFLICT, counts(0, 0))
    );
    assert_eq!(
        h.send(lock(other, lf::UNLOCK)).await.status,
        NtStatus::SUCCESS
    );
    // The copy's own opens' locks do not stand in its way.
    assert_eq!(h.send(lock(s, ex)).await.status, NtStatus::SUCCESS);
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(0, 0, 4096)]).await,
        (NtStatus::SUCCESS, counts(1, 4096))
    );
    assert_eq!(file(&h, "dst"), data);
    // A lock on the destination by another open.
    let dother = h.create("dst", ALL, D::OPEN, 0).await.id;
    assert_eq!(h.send(lock(dother, ex)).await.status, NtStatus::SUCCESS);
    assert_eq!(
        copy(&h, CtlCode::SRV_COPYCHUNK, d, k, &[(0, 0, 4096)])
            .await
            .0,
        NtStatus::FILE_LOCK_CONFLICT
    );
}

#[tokio::test]
async fn copies_of_one_session_run_one_at_a_time_and_a_waiting_one_can_be_cancelled() {
    let h = H::new().await;
    let (s, d, data) = setup(&h, 4096).await;
    let k = key(&h, s).await;
    let state = h.srv.session_state(h.session.id).unwrap();
    let held = state.copy_slot().await.unwrap();
    let input = copy_input(k, &[(0, 0, 4096)]);
    let req = || ioctl_msg(h.tree, h.session.id, CtlCode::SRV_COPYCHUNK, d, &input, 12);
    // While another copy holds the slot, this one waits and copies nothing.
    let cancel = CancellationToken::new();
    let waiting = h.send_with(req(), None, cancel.clone());
    tokio::pin!(waiting);
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(50), &mut waiting)
            .await
            .is_err(),
        "a second copy of the session must wait"
    );
    assert!(file(&h, "dst").is_empty());
    cancel.cancel();
    assert_eq!(waiting.await.status, NtStatus::CANCELLED);
    assert!(file(&h, "dst").is_empty());
    // Once the slot is free a copy runs.
    drop(held);
    let r = h.send_with(req(), None, CancellationToken::new()).await;
    assert_eq!(r.status, NtStatus::SUCCESS);
    assert_eq!(file(&h, "dst"), data);
}
