use smbq_wire::create::CreateDisposition as D;
use smbq_wire::fscc::file_info::{BasicInfo, DispositionInfo, EndOfFileInfo, RenameInfo};
use smbq_wire::query_info::InfoType;
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::{Command, FileId, NtStatus};

use super::harness::{H, msg};
use crate::access::{attr, mask};

pub(super) async fn set(h: &H, id: FileId, class: u8, buf: &[u8]) -> NtStatus {
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

pub(super) fn rename_buf(name: &str, replace: bool) -> Vec<u8> {
    RenameInfo {
        replace_if_exists: replace,
        root_directory: 0,
        file_name: name.into(),
    }
    .encode_to_vec()
}

trait EncodeVec {
    fn encode_to_vec(&self) -> Vec<u8>;
}
impl EncodeVec for RenameInfo {
    fn encode_to_vec(&self) -> Vec<u8> {
        let mut w = smbq_wire::Writer::new();
        self.encode(&mut w);
        w.into_vec()
    }
}

#[tokio::test]
async fn rename_rules() {
    let h = H::new().await;
    h.put("a", b"A").await;
    h.put("b", b"B").await;
    std::fs::create_dir(h.path("d")).unwrap();
    let o = h
        .create("a", mask::DELETE | mask::GENERIC_READ, D::OPEN, 0)
        .await;
    assert_eq!(
        set(&h, o.id, 10, &rename_buf("b", false)).await,
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(
        set(&h, o.id, 10, &rename_buf("d\\a2", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("d/a2")).unwrap(), b"A");
    assert_eq!(
        set(&h, o.id, 10, &rename_buf("b", true)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("b")).unwrap(), b"A");
    // Needs DELETE access.
    let r = h.create("b", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(
        set(&h, r.id, 10, &rename_buf("c", false)).await,
        NtStatus::ACCESS_DENIED
    );
    // A directory with an open file below cannot move.
    let f = h.create("d\\inner", mask::GENERIC_ALL, D::CREATE, 0).await;
    let dh = h
        .create_req("d", mask::DELETE | mask::GENERIC_READ, D::OPEN)
        .send()
        .await;
    assert_eq!(
        set(&h, dh.id, 10, &rename_buf("e", false)).await,
        NtStatus::ACCESS_DENIED
    );
    h.close(f.id).await;
    assert_eq!(
        set(&h, dh.id, 10, &rename_buf("e", false)).await,
        NtStatus::SUCCESS
    );
    assert!(h.path("e/inner").exists());
    // Escapes are refused.
    assert_ne!(
        set(&h, o.id, 10, &rename_buf("..\\x", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(&h, o.id, 10, &[0u8; 4]).await,
        NtStatus::INFO_LENGTH_MISMATCH
    );
}

#[tokio::test]
async fn disposition_eof_and_basic() {
    let h = H::new().await;
    h.put("f", b"0123456789").await;
    std::fs::create_dir(h.path("full")).unwrap();
    std::fs::write(h.path("full/x"), b"").unwrap();
    let o = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    assert_eq!(
        set(&h, o.id, 20, &EndOfFileInfo { end_of_file: 3 }.to_bytes()).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::metadata(h.path("f")).unwrap().len(), 3);
    let mut basic = BasicInfo {
        last_write_time: smbq_wire::filetime::from_unix(1_000_000_000, 0),
        ..Default::default()
    };
    assert_eq!(set(&h, o.id, 4, &basic.to_bytes()).await, NtStatus::SUCCESS);
    let mtime = std::fs::metadata(h.path("f")).unwrap().modified().unwrap();
    assert_eq!(
        mtime
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        1_000_000_000
    );
    basic.file_attributes = attr::READONLY;
    assert_eq!(set(&h, o.id, 4, &basic.to_bytes()).await, NtStatus::SUCCESS);
    assert!(
        std::fs::metadata(h.path("f"))
            .unwrap()
            .permissions()
            .readonly()
    );
    // Read-only: cannot be deleted.
    assert_eq!(
        set(
            &h,
            o.id,
            13,
            &DispositionInfo {
                delete_pending: true
            }
            .to_bytes()
        )
        .await,
        NtStatus::CANNOT_DELETE
    );
    basic.file_attributes = attr::NORMAL;
    assert_eq!(set(&h, o.id, 4, &basic.to_bytes()).await, NtStatus::SUCCESS);
    assert_eq!(
        set(
            &h,
            o.id,
            13,
            &DispositionInfo {
                delete_pending: true
            }
            .to_bytes()
        )
        .await,
        NtStatus::SUCCESS
    );
    h.close(o.id).await;
    assert!(!h.path("f").exists());
    let d = h.create("full", mask::GENERIC_ALL, D::OPEN, 0).await;
    assert_eq!(
        set(
            &h,
            d.id,
            13,
            &DispositionInfo {
                delete_pending: true
            }
            .to_bytes()
        )
        .await,
        NtStatus::DIRECTORY_NOT_EMPTY
    );
    assert_eq!(
        set(&h, d.id, 200, &[0u8; 8]).await,
        NtStatus::INVALID_INFO_CLASS
    );
}

#[tokio::test]
async fn a_directory_cannot_be_temporary_and_sparse_is_not_settable() {
    let h = H::new().await;
    let d = h
        .create(
            "d",
            mask::GENERIC_ALL,
            D::CREATE,
            smbq_wire::create::create_options::DIRECTORY_FILE,
        )
        .await;
    let basic = |file_attributes| {
        BasicInfo {
            file_attributes,
            ..Default::default()
        }
        .to_bytes()
    };
    assert_eq!(
        set(&h, d.id, 4, &basic(attr::DIRECTORY | attr::TEMPORARY)).await,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        set(&h, d.id, 4, &basic(attr::HIDDEN)).await,
        NtStatus::SUCCESS
    );
    // SPARSE_FILE in FileBasicInformation changes nothing either way (only FSCTL_SET_SPARSE).
    h.put("f", b"x").await;
    let f = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    assert_eq!(
        set(&h, f.id, 4, &basic(attr::SPARSE_FILE)).await,
        NtStatus::SUCCESS
    );
    let g = h.create("f", mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    assert_eq!(g.create().file_attributes & attr::SPARSE_FILE, 0);
}

fn mtime_secs(h: &H, name: &str) -> u64 {
    std::fs::metadata(h.path(name))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn mtime(h: &H, name: &str) -> std::time::SystemTime {
    std::fs::metadata(h.path(name)).unwrap().modified().unwrap()
}

/// Past the file system's timestamp granularity (the kernel's coarse clock ticks every few
/// milliseconds), as smbtorture's timestamps tests wait.
async fn tick() {
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
}

/// MS-FSA 2.1.4.17 and 2.1.5.15.2 (Open.UserSetModificationTime), as Windows Server 2022
/// keeps them (crate::write_time; smbtorture 4.25 smb2.timestamps.modern_write_time_update-1):
/// a write moves LastWriteTime at once. After a client set the time through a handle, or
/// froze it with -1, that handle's writes leave the time where it is, and another handle's
/// writes still move it; -2 lets the handle's writes move it again. FLUSH and CLOSE set
/// nothing, and a same-size end of file moves it.
#[tokio::test]
async fn writes_move_the_write_time_at_once_except_through_a_handle_that_set_it() {
    let h = H::new().await;
    h.put("f", b"0123456789").await;
    let o1 = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    let o2 = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    let t0 = mtime(&h, "f");
    tick().await;
    assert_eq!(h.write(o1.id, 0, b"a").await.status, NtStatus::SUCCESS);
    let t1 = mtime(&h, "f");
    assert!(t1 > t0, "a write moves the time at once");

    // A time set through o1: o1's writes keep it, o2's move it.
    let basic = BasicInfo {
        last_write_time: smbq_wire::filetime::from_unix(1_000_000_000, 0),
        ..Default::default()
    };
    assert_eq!(
        set(&h, o1.id, 4, &basic.to_bytes()).await,
        NtStatus::SUCCESS
    );
    assert_eq!(mtime_secs(&h, "f"), 1_000_000_000);
    tick().await;
    assert_eq!(h.write(o1.id, 1, b"b").await.status, NtStatus::SUCCESS);
    assert_eq!(
        mtime_secs(&h, "f"),
        1_000_000_000,
        "the setter's write keeps it"
    );
    assert_eq!(h.write(o2.id, 2, b"c").await.status, NtStatus::SUCCESS);
    let t2 = mtime(&h, "f");
    assert!(t2 > t1, "another handle's write moves it");
    tick().await;
    assert_eq!(h.write(o1.id, 3, b"d").await.status, NtStatus::SUCCESS);
    assert_eq!(
        mtime(&h, "f"),
        t2,
        "the setter's write keeps the time it found"
    );

    // FLUSH and a same-size end of file through the sticky handle: nothing moves.
    assert_eq!(h.flush(o1.id).await.status, NtStatus::SUCCESS);
    let eof = EndOfFileInfo { end_of_file: 10 }.to_bytes();
    assert_eq!(set(&h, o1.id, 20, &eof).await, NtStatus::SUCCESS);
    assert_eq!(mtime(&h, "f"), t2);
    // Through o2, the same end of file moves it (the file counts as modified).
    tick().await;
    assert_eq!(set(&h, o2.id, 20, &eof).await, NtStatus::SUCCESS);
    let t3 = mtime(&h, "f");
    assert!(t3 > t2, "a same-size end of file moves it");

    // -2 on o1: its writes move the time again.
    let unfreeze = BasicInfo {
        last_write_time: u64::MAX - 1,
        ..Default::default()
    };
    assert_eq!(
        set(&h, o1.id, 4, &unfreeze.to_bytes()).await,
        NtStatus::SUCCESS
    );
    assert_eq!(mtime(&h, "f"), t3, "-2 itself changes nothing");
    tick().await;
    assert_eq!(h.write(o1.id, 4, b"e").await.status, NtStatus::SUCCESS);
    let t4 = mtime(&h, "f");
    assert!(t4 > t3);

    // -1 on o2 freezes it for o2's writes.
    let freeze = BasicInfo {
        last_write_time: u64::MAX,
        ..Default::default()
    };
    assert_eq!(
        set(&h, o2.id, 4, &freeze.to_bytes()).await,
        NtStatus::SUCCESS
    );
    tick().await;
    assert_eq!(h.write(o2.id, 5, b"f").await.status, NtStatus::SUCCESS);
    assert_eq!(mtime(&h, "f"), t4);

    // Closing sets nothing.
    tick().await;
    assert_eq!(h.close(o1.id).await.status, NtStatus::SUCCESS);
    assert_eq!(h.close(o2.id).await.status, NtStatus::SUCCESS);
    assert_eq!(mtime(&h, "f"), t4);
}

/// Zeroing a range (FSCTL_SET_ZERO_DATA) is writing: it moves LastWriteTime, except through a
/// handle that set the time, like a WRITE (MS-FSA 2.1.4.17, crate::write_time).
#[tokio::test]
async fn zeroing_through_a_handle_that_set_the_time_keeps_it() {
    use smbq_wire::ioctl::CtlCode;
    let h = H::new().await;
    h.put("f", &[7u8; 8192]).await;
    let o = h.create("f", mask::GENERIC_ALL, D::OPEN, 0).await;
    let zero = |from: u64, beyond: u64| [from.to_le_bytes(), beyond.to_le_bytes()].concat();
    let t0 = mtime(&h, "f");
    tick().await;
    let r = h
        .fsctl(CtlCode::SET_ZERO_DATA, o.id, &zero(0, 4096), 0)
        .await;
    assert_eq!(r.0, NtStatus::SUCCESS);
    let t1 = mtime(&h, "f");
    assert!(t1 > t0, "zeroing moves the time");
    let basic = BasicInfo {
        last_write_time: smbq_wire::filetime::from_unix(1_000_000_000, 0),
        ..Default::default()
    };
    assert_eq!(set(&h, o.id, 4, &basic.to_bytes()).await, NtStatus::SUCCESS);
    tick().await;
    let r = h
        .fsctl(CtlCode::SET_ZERO_DATA, o.id, &zero(4096, 8192), 0)
        .await;
    assert_eq!(r.0, NtStatus::SUCCESS);
    assert_eq!(
        mtime_secs(&h, "f"),
        1_000_000_000,
        "but not through the setter"
    );
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
}

/// A named stream's write moves its file's LastWriteTime (MS-FSA 2.1.4.17): the stream lives
/// in xattrs, and writing those moves no mtime by itself (crate::write_time).
#[tokio::test]
async fn a_stream_write_moves_its_files_write_time() {
    let h = H::new().await;
    h.put("f", b"x").await;
    let o = h.create("f:s", mask::GENERIC_ALL, D::CREATE, 0).await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    let t0 = mtime(&h, "f");
    tick().await;
    assert_eq!(h.write(o.id, 0, b"data").await.status, NtStatus::SUCCESS);
    assert!(mtime(&h, "f") > t0);
    assert_eq!(h.close(o.id).await.status, NtStatus::SUCCESS);
}

/// An RH lease with key `key` on `name`, for `access`.
async fn rh_leased(h: &H, name: &str, key: u8, access: u32) -> FileId {
    use smbq_wire::create::OplockLevel;
    use smbq_wire::create_context::{
        CreateContext, CreateContextTag, Lease, contexts_to_bytes, lease_state,
    };
    let lease = Lease {
        key: [key; 16],
        state: lease_state::READ_CACHING | lease_state::HANDLE_CACHING,
        ..Default::default()
    }
    .to_bytes();
    let list = contexts_to_bytes(&[CreateContext::new(CreateContextTag::RQLS, &lease)]);
    let o = h
        .create_req(name, access, D::OPEN)
        .oplock(OplockLevel::LEASE)
        .contexts(&list)
        .send()
        .await;
    assert_eq!(o.status, NtStatus::SUCCESS);
    o.id
}

/// MS-FSA 2.1.5.15.11: a rename's handle breaks start on the connection's loop
/// (`Server::before_task`), before the request's task runs, so the client has the break
/// before the answers to what it sent after the SET_INFO (smbtorture smb2.lease.rename_wait,
/// which failed under load when the task started late). The task then finds the break under
/// way and sends nothing twice.
#[tokio::test]
async fn rename_breaks_start_before_the_request_task() {
    let h = H::new().await;
    h.put("src", b"x").await;
    let renamer = rh_leased(&h, "src", 1, mask::DELETE | mask::GENERIC_READ).await;
    let _reader = rh_leased(&h, "src", 2, mask::GENERIC_READ).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    h.srv.register_connection(h.conn.id, tx);
    let rename = |to: &str| {
        let buf = rename_buf(to, true);
        msg(Command::SET_INFO, h.tree, h.session.id, |w| {
            SetInfoRequest {
                info_type: InfoType::FILE,
                file_info_class: 10,
                additional_information: 0,
                file_id: renamer,
                buffer: &buf,
            }
            .encode(w)
        })
    };
    // Other requests start nothing.
    let close = msg(Command::CLOSE, h.tree, h.session.id, |w| {
        smbq_wire::close::CloseRequest {
            flags: 0,
            file_id: renamer,
        }
        .encode(w)
    });
    h.srv.before_task(&h.conn, &h.request(close));
    assert!(rx.try_recv().is_err());

    h.srv.before_task(&h.conn, &h.request(rename("dst")));
    let crate::push::Push::Notification { command, body, .. } = rx
        .try_recv()
        .expect("the break is queued before the task runs");
    assert_eq!(command, Command::OPLOCK_BREAK);
    assert_eq!(acknowledge(&h, &body).await, ([2; 16], 1));
    assert_eq!(h.send(rename("dst")).await.status, NtStatus::SUCCESS);
    assert!(rx.try_recv().is_err(), "no second break");
    assert!(h.path("dst").exists());
}

/// MS-FSA 2.1.4.12: marking a file delete-pending breaks the handle caching of other lease
/// keys, as a rename does (smbtorture 4.25 smb2.lease.unlink); clearing it breaks nothing.
#[tokio::test]
async fn a_delete_pending_set_breaks_other_keys_handle_caching() {
    let h = H::new().await;
    h.put("f", b"x").await;
    let _first = rh_leased(&h, "f", 1, mask::GENERIC_READ).await;
    let deleter = rh_leased(&h, "f", 2, mask::DELETE | mask::GENERIC_READ).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    h.srv.register_connection(h.conn.id, tx);
    let disposition = |delete_pending: bool| DispositionInfo { delete_pending }.to_bytes();
    assert_eq!(
        set(&h, deleter, 13, &disposition(false)).await,
        NtStatus::SUCCESS
    );
    assert!(rx.try_recv().is_err(), "clearing breaks nothing");
    let delete = disposition(true);
    let (status, ()) = tokio::join!(set(&h, deleter, 13, &delete), async {
        let wait = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv());
        let crate::push::Push::Notification { body, .. } =
            wait.await.expect("a break").expect("the channel is open");
        assert_eq!(acknowledge(&h, &body).await, ([1; 16], 1), "RH to R");
    });
    assert_eq!(status, NtStatus::SUCCESS);
}

/// Acknowledges the LEASE_BREAK notification `body` with the state it asks for; its lease
/// key and new state.
async fn acknowledge(h: &H, body: &[u8]) -> ([u8; 16], u32) {
    use smbq_wire::oplock_break::{LeaseBreakAck, LeaseBreakNotification};
    let mut m = vec![0u8; 64];
    m.extend_from_slice(body);
    let n = LeaseBreakNotification::decode(&m).unwrap();
    let ack = msg(Command::OPLOCK_BREAK, h.tree, h.session.id, |w| {
        LeaseBreakAck {
            lease_key: n.lease_key,
            lease_state: n.new_lease_state,
            ..Default::default()
        }
        .encode(w)
    });
    assert_eq!(h.send(ack).await.status, NtStatus::SUCCESS);
    (n.lease_key, n.new_lease_state)
}

/// FileLinkInformation (11): the same layout as a rename's (MS-FSCC 2.4.27.2).
fn link_buf(name: &str, replace: bool) -> Vec<u8> {
    rename_buf(name, replace)
}

fn links_of(h: &H, name: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(h.path(name)).unwrap().nlink()
}

/// Over 80 lines: one file, one open and one sequence of links, each step's outcome
/// depending on the links before it (MS-FSA 2.1.5.15.6 in order).
#[tokio::test]
async fn hard_links_follow_ms_fsa() {
    let h = H::new().await;
    h.put("a", b"A").await;
    h.put("b", b"B").await;
    std::fs::create_dir(h.path("d")).unwrap();
    // No right on the file is needed (as on Windows), only room in the target directory.
    let o = h.create("a", mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    assert_eq!(
        set(&h, o.id, 11, &link_buf("d\\a2", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("d/a2")).unwrap(), b"A");
    assert_eq!(links_of(&h, "a"), 2);
    // An existing name stays unless the client asks to replace it, and a name the file
    // already has is no change.
    assert_eq!(
        set(&h, o.id, 11, &link_buf("b", false)).await,
        NtStatus::OBJECT_NAME_COLLISION
    );
    assert_eq!(std::fs::read(h.path("b")).unwrap(), b"B");
    assert_eq!(
        set(&h, o.id, 11, &link_buf("d\\a2", true)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(links_of(&h, "a"), 2);
    // An open file or a directory is never replaced.
    let b = h.create("b", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(
        set(&h, o.id, 11, &link_buf("b", true)).await,
        NtStatus::ACCESS_DENIED
    );
    h.close(b.id).await;
    assert_eq!(
        set(&h, o.id, 11, &link_buf("d", true)).await,
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        set(&h, o.id, 11, &link_buf("b", true)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("b")).unwrap(), b"A");
    assert_eq!(links_of(&h, "a"), 3);
    // A directory cannot get a link; a named stream cannot give one; RootDirectory must be 0;
    // a stream name is no file name; the name stays inside the share.
    let dh = h.create_req("d", mask::GENERIC_READ, D::OPEN).send().await;
    assert_eq!(
        set(&h, dh.id, 11, &link_buf("d2", false)).await,
        NtStatus::FILE_IS_A_DIRECTORY
    );
    let s = h.create("a:s", mask::GENERIC_ALL, D::OPEN_IF, 0).await;
    assert_eq!(
        set(&h, s.id, 11, &link_buf("x", false)).await,
        NtStatus::INVALID_PARAMETER
    );
    let mut rooted = link_buf("x", false);
    rooted[8] = 1;
    assert_eq!(
        set(&h, o.id, 11, &rooted).await,
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        set(&h, o.id, 11, &link_buf("x:s", false)).await,
        NtStatus::OBJECT_NAME_INVALID
    );
    assert_ne!(
        set(&h, o.id, 11, &link_buf("..\\x", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(
        set(&h, o.id, 11, &[0u8; 4]).await,
        NtStatus::INFO_LENGTH_MISMATCH
    );
    // A file on its way out gets no new name.
    let del = DispositionInfo {
        delete_pending: true,
    };
    let mut w = smbq_wire::Writer::new();
    del.encode(&mut w);
    let gone = h
        .create("b", mask::DELETE | mask::GENERIC_READ, D::OPEN, 0)
        .await;
    assert_eq!(set(&h, gone.id, 13, &w.into_vec()).await, NtStatus::SUCCESS);
    assert_eq!(
        set(&h, gone.id, 11, &link_buf("y", false)).await,
        NtStatus::ACCESS_DENIED
    );
    assert!(!h.path("y").exists());
}

#[tokio::test]
async fn a_share_that_refuses_hard_links_makes_none() {
    let h = H::with(|c| c.refuse_hardlinks = true).await;
    h.put("a", b"A").await;
    let o = h.create("a", mask::GENERIC_READ, D::OPEN, 0).await;
    assert_eq!(
        set(&h, o.id, 11, &link_buf("b", false)).await,
        NtStatus::NOT_SUPPORTED
    );
    assert!(!h.path("b").exists());
    assert_eq!(links_of(&h, "a"), 1);
}

/// A rename through one handle moves the file for its other handles too: a later rename
/// through another handle moves the same file, never whatever took the old name. A handle
/// whose name was taken behind the server's back renames and links nothing.
#[tokio::test]
async fn renames_follow_the_file_not_its_old_name() {
    let h = H::new().await;
    h.put("f", b"mine").await;
    let all = crate::access::share::ALL;
    let access = mask::DELETE | mask::GENERIC_READ;
    let a = h.create_req("f", access, D::OPEN).share(all).send().await;
    let b = h.create_req("f", access, D::OPEN).share(all).send().await;
    assert_eq!(
        set(&h, a.id, 10, &rename_buf("g", false)).await,
        NtStatus::SUCCESS
    );
    std::fs::write(h.path("f"), b"theirs").unwrap();
    assert_eq!(
        set(&h, b.id, 10, &rename_buf("h", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("h")).unwrap(), b"mine");
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"theirs");

    // Moved locally, and another file took the name: the open's name is not its file's.
    std::fs::rename(h.path("h"), h.path("moved")).unwrap();
    std::fs::write(h.path("h"), b"victim").unwrap();
    let link = {
        let mut w = smbq_wire::Writer::new();
        smbq_wire::fscc::file_info::LinkInfo {
            replace_if_exists: true,
            root_directory: 0,
            file_name: "f".into(),
        }
        .encode(&mut w);
        w.into_vec()
    };
    assert_eq!(
        set(&h, b.id, 11, &link).await,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(std::fs::read(h.path("f")).unwrap(), b"theirs");
    assert_eq!(
        set(&h, a.id, 10, &rename_buf("x", false)).await,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    assert_eq!(std::fs::read(h.path("h")).unwrap(), b"victim");
}

/// A hard link named in another case than its directory on disk breaks that directory's
/// lease (MS-SMB2 3.3.4.7 via crate::file_state::dir_lease), as the link itself resolved the
/// name: the client's spelling names no directory on a case-sensitive disk.
#[tokio::test]
async fn a_link_breaks_the_lease_of_the_directory_it_lands_in_whatever_the_case() {
    let mut h = H::new().await;
    h.conn.server_capabilities |= smbq_wire::negotiate::capabilities::DIRECTORY_LEASING;
    std::fs::create_dir(h.path("dir")).unwrap();
    h.put("a", b"A").await;
    let _dir = rh_leased(&h, "dir", 9, mask::GENERIC_READ).await;
    let o = h.create("a", mask::FILE_READ_ATTRIBUTES, D::OPEN, 0).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    h.srv.register_connection(h.conn.id, tx);
    assert_eq!(
        set(&h, o.id, 11, &link_buf("DIR\\a2", false)).await,
        NtStatus::SUCCESS
    );
    assert_eq!(std::fs::read(h.path("dir/a2")).unwrap(), b"A");
    let wait = tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv());
    let crate::push::Push::Notification { body, .. } = wait
        .await
        .expect("the directory's lease breaks")
        .expect("open channel");
    assert_eq!(acknowledge(&h, &body).await.0, [9; 16]);
}
