//! An open file or directory: READ, WRITE, FLUSH, QUERY/SET_INFO, QUERY_DIRECTORY, CLOSE.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use smbq_proto::client::Incoming;
use smbq_wire::close::CloseRequest;
use smbq_wire::create::{CreateAction, CreateResponse};
use smbq_wire::flush::FlushRequest;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::dir_info::{DirClass, decode_dir_list};
use smbq_wire::lock::{LockElement, LockRequest};
use smbq_wire::query_directory::{
    QueryDirectoryRequest, QueryDirectoryResponse, query_directory_flags as qd_flags,
};
use smbq_wire::query_info::{InfoType, QueryInfoRequest, QueryInfoResponse};
use smbq_wire::read::{ReadRequest, ReadResponse};
use smbq_wire::set_info::SetInfoRequest;
use smbq_wire::write::{WriteRequest, WriteResponse};
use smbq_wire::{Command, FileId, NtStatus, Writer};

use crate::compound::Part;
use crate::session::check;
use crate::tree::Tree;
use crate::{DirEntry, Error, Metadata, ProtocolError};

/// Output buffer asked for in one QUERY_DIRECTORY (what Windows uses).
const DIR_BUFFER: u32 = 64 * 1024;
/// Entries accepted in one listing before the server is considered hostile.
const MAX_LISTING: usize = 10_000_000;

struct Inner {
    tree: Tree,
    id: FileId,
    meta: Metadata,
    created: bool,
    closed: AtomicBool,
    /// A READ that went with the CREATE (offset, length asked, data), for the first
    /// [`crate::transfer::download`] to take instead of asking again.
    prefetch: parking_lot::Mutex<Option<(u64, u32, Bytes)>>,
    /// WRITEs that start below this offset are replays (see [`File::replay_writes_below`]).
    replay_below: AtomicU64,
}

/// An open handle. Cheap to clone; several requests may use it at once. Closed by
/// [`File::close`], or in the background when the last clone is dropped.
#[derive(Clone)]
pub struct File {
    inner: Arc<Inner>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let tree = self.tree.clone();
        let id = self.id;
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = close(&tree, id).await;
            });
        }
    }
}

async fn close(tree: &Tree, id: FileId) -> Result<(), Error> {
    tree.session().client().shared.unwatch_breaks(id.persistent);
    let mut w = Writer::new();
    CloseRequest {
        flags: 0,
        file_id: id,
    }
    .encode(&mut w);
    let r = tree
        .send_for(id, Command::CLOSE, w.into_vec(), None, 0, false)
        .await?;
    check(&r, "CLOSE")
}

impl File {
    pub(crate) fn new(tree: Tree, id: FileId, meta: Metadata, created: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                tree,
                id,
                meta,
                created,
                closed: AtomicBool::new(false),
                prefetch: parking_lot::Mutex::new(None),
                replay_below: AtomicU64::new(0),
            }),
        }
    }

    /// The handle a CREATE response describes.
    pub(crate) fn from_create(tree: Tree, r: &Incoming) -> Result<Self, Error> {
        let c = CreateResponse::decode(&r.msg)?;
        Ok(Self::new(
            tree,
            c.file_id,
            meta_of(&c),
            c.create_action == CreateAction::CREATED,
        ))
    }

    pub(crate) fn keep_prefetch(&self, offset: u64, asked: u32, data: Bytes) {
        *self.inner.prefetch.lock() = Some((offset, asked, data));
    }

    /// The data of the READ that went with the open, if it was at `offset`: (length asked,
    /// data). Taken once.
    pub(crate) fn take_prefetch(&self, offset: u64) -> Option<(u32, Bytes)> {
        let mut p = self.inner.prefetch.lock();
        match p.take() {
            Some((at, asked, data)) if at == offset => Some((asked, data)),
            _ => None,
        }
    }

    pub(crate) fn id(&self) -> FileId {
        self.inner.id
    }

    /// What CREATE reported.
    pub fn metadata(&self) -> &Metadata {
        &self.inner.meta
    }

    /// The open created the file.
    pub fn was_created(&self) -> bool {
        self.inner.created
    }

    pub fn tree(&self) -> &Tree {
        &self.inner.tree
    }

    /// Largest single READ, from the server's limit and the client's cap.
    pub fn max_read(&self) -> u32 {
        self.inner.tree.max_read()
    }

    pub fn max_write(&self) -> u32 {
        self.inner.tree.max_write()
    }

    /// One READ of at most `len` bytes (capped at [`File::max_read`]); empty at end of file.
    pub async fn read_at(&self, offset: u64, len: u32) -> Result<Bytes, Error> {
        let len = len.min(self.max_read());
        let r = self
            .inner
            .tree
            .send_for(
                self.inner.id,
                Command::READ,
                read_body(self.inner.id, offset, len),
                None,
                len as usize,
                false,
            )
            .await?;
        read_data(&r, len)
    }

    /// One WRITE of `data` (at most [`File::max_write`] bytes); returns the count written.
    pub async fn write_at(&self, offset: u64, data: Bytes) -> Result<u32, Error> {
        let len = u32::try_from(data.len())
            .ok()
            .filter(|&l| l <= self.max_write())
            .ok_or(ProtocolError::TooLarge(
                "write larger than the negotiated maximum",
            ))?;
        let mut w = Writer::new();
        WriteRequest {
            offset,
            file_id: self.inner.id,
            ..Default::default()
        }
        .encode_header(len, &mut w);
        let body = w.into_vec();
        let tree = &self.inner.tree;
        let replay = offset < self.inner.replay_below.load(Ordering::Relaxed)
            && tree.session().client().negotiated().dialect.is_smb3();
        let r = tree
            .send_for(
                self.inner.id,
                Command::WRITE,
                body,
                Some(data),
                len as usize,
                replay,
            )
            .await?;
        check(&r, "WRITE")?;
        Ok(WriteResponse::decode(&r.msg)?.count)
    }

    /// This open was taken back after its connection broke (a durable reclaim), and the WRITEs
    /// below `offset` may have reached the server without their answers reaching us: when
    /// sent again they carry SMB2_FLAGS_REPLAY_OPERATION (MS-SMB2 3.2.4.1.x on 3.x
    /// dialects), so the server's replay checks see them as what they are.
    pub fn replay_writes_below(&self, offset: u64) {
        self.inner.replay_below.store(offset, Ordering::Relaxed);
    }

    /// FLUSH (MS-SMB2 3.2.4.17): the server has the data on stable storage when it returns.
    pub async fn flush(&self) -> Result<(), Error> {
        let mut w = Writer::new();
        FlushRequest {
            file_id: self.inner.id,
        }
        .encode(&mut w);
        let r = self
            .inner
            .tree
            .send_for(self.inner.id, Command::FLUSH, w.into_vec(), None, 0, false)
            .await?;
        check(&r, "FLUSH")
    }

    /// LOCK (MS-SMB2 3.2.4.19): takes or releases byte-range locks, all or none. A lock
    /// without SMB2_LOCKFLAG_FAIL_IMMEDIATELY waits on the server (an interim response) until
    /// it is granted; a conflict with FAIL_IMMEDIATELY is STATUS_LOCK_NOT_GRANTED.
    pub async fn lock(&self, locks: &[LockElement]) -> Result<(), Error> {
        let mut w = Writer::new();
        LockRequest {
            lock_sequence: 0,
            file_id: self.inner.id,
            locks: locks.to_vec(),
        }
        .encode(&mut w);
        let r = self
            .inner
            .tree
            .send_for(self.inner.id, Command::LOCK, w.into_vec(), None, 0, false)
            .await?;
        check(&r, "LOCK")
    }

    /// QUERY_INFO of a file information class; the raw output buffer.
    pub async fn query_info(&self, class: FileInfoClass, max: u32) -> Result<Bytes, Error> {
        let mut w = Writer::new();
        QueryInfoRequest {
            info_type: InfoType::FILE,
            file_info_class: class.0,
            output_buffer_length: max,
            file_id: self.inner.id,
            ..Default::default()
        }
        .encode(&mut w);
        let r = self
            .inner
            .tree
            .send_for(
                self.inner.id,
                Command::QUERY_INFO,
                w.into_vec(),
                None,
                max as usize,
                false,
            )
            .await?;
        check(&r, "QUERY_INFO")?;
        let b = QueryInfoResponse::decode(&r.msg)?.buffer;
        Ok(r.msg.slice_ref(b))
    }

    /// SET_INFO of a file information class with an encoded buffer.
    pub async fn set_info(&self, class: FileInfoClass, buffer: Vec<u8>) -> Result<(), Error> {
        let r = self
            .inner
            .tree
            .send_for(
                self.inner.id,
                Command::SET_INFO,
                set_info_body(self.inner.id, class, &buffer),
                None,
                buffer.len(),
                false,
            )
            .await?;
        check(&r, "SET_INFO")
    }

    /// Sets the end of file (truncates or extends).
    pub async fn set_len(&self, len: u64) -> Result<(), Error> {
        self.set_info(FileInfoClass::END_OF_FILE, len.to_le_bytes().to_vec())
            .await
    }

    /// Sets the last-write time (FILETIME) through FileBasicInformation; 0 leaves a field as is.
    pub async fn set_modified(&self, filetime: u64) -> Result<(), Error> {
        let mut w = Writer::new();
        w.u64(0).u64(0).u64(filetime).u64(0).u32(0).u32(0);
        self.set_info(FileInfoClass::BASIC, w.into_vec()).await
    }

    /// Every entry matching `pattern` (MS-SMB2 3.2.4.17), FileIdBothDirectoryInformation.
    pub async fn read_dir(&self, pattern: &str) -> Result<Vec<DirEntry>, Error> {
        let first = self.query_dir(pattern, true).await?;
        self.read_dir_after(first, pattern).await
    }

    async fn query_dir(&self, pattern: &str, restart: bool) -> Result<Incoming, Error> {
        let part = query_dir_part(self.inner.id, pattern, restart);
        self.inner
            .tree
            .send_for(
                self.inner.id,
                part.command,
                part.body,
                None,
                part.io_size,
                false,
            )
            .await
    }

    /// Continues a listing whose first QUERY_DIRECTORY answered `first` (it may have gone
    /// with the open, compounded) until the server says NO_MORE_FILES.
    pub(crate) async fn read_dir_after(
        &self,
        first: Incoming,
        pattern: &str,
    ) -> Result<Vec<DirEntry>, Error> {
        let mut out = Vec::new();
        let mut r = first;
        while append_dir_entries(&mut out, &r)? {
            r = self.query_dir(pattern, false).await?;
        }
        Ok(out)
    }

    /// CLOSE (MS-SMB2 3.2.4.5).
    pub async fn close(self) -> Result<(), Error> {
        if self.inner.closed.swap(true, Ordering::Relaxed) {
            return Ok(());
        }
        close(&self.inner.tree, self.inner.id).await
    }
}

/// A READ request's body (MS-SMB2 2.2.19).
pub(crate) fn read_body(file_id: FileId, offset: u64, len: u32) -> Vec<u8> {
    let mut w = Writer::new();
    ReadRequest {
        length: len,
        offset,
        file_id,
        ..Default::default()
    }
    .encode(&mut w);
    w.into_vec()
}

/// The data of a READ response, left in the received frame's buffer; empty at end of file.
pub(crate) fn read_data(r: &Incoming, asked: u32) -> Result<Bytes, Error> {
    if r.header.status == NtStatus::END_OF_FILE {
        return Ok(Bytes::new());
    }
    check(r, "READ")?;
    let data = ReadResponse::decode(&r.msg)?.data;
    if data.len() > asked as usize {
        return Err(ProtocolError::ReadOverrun {
            got: data.len(),
            asked,
        }
        .into());
    }
    Ok(r.msg.slice_ref(data))
}

/// A WRITE request's body with its data after the fixed part (MS-SMB2 2.2.21).
pub(crate) fn write_body(file_id: FileId, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(48 + data.len());
    WriteRequest {
        offset,
        file_id,
        data,
        ..Default::default()
    }
    .encode(&mut w);
    w.into_vec()
}

/// A SET_INFO request's body for a file information class (MS-SMB2 2.2.39).
pub(crate) fn set_info_body(file_id: FileId, class: FileInfoClass, buffer: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    SetInfoRequest {
        info_type: InfoType::FILE,
        file_info_class: class.0,
        additional_information: 0,
        file_id,
        buffer,
    }
    .encode(&mut w);
    w.into_vec()
}

fn meta_of(c: &CreateResponse<'_>) -> Metadata {
    Metadata {
        size: c.end_of_file,
        allocation: c.allocation_size,
        attributes: c.file_attributes,
        created: c.creation_time,
        accessed: c.last_access_time,
        modified: c.last_write_time,
        changed: c.change_time,
    }
}

/// What a CREATE response reports about the file.
pub(crate) fn metadata_of(r: &Incoming) -> Result<Metadata, Error> {
    Ok(meta_of(&CreateResponse::decode(&r.msg)?))
}

/// A QUERY_DIRECTORY for FileIdBothDirectoryInformation (MS-SMB2 2.2.33), the first of a
/// listing restarting the scan.
pub(crate) fn query_dir_part(file_id: FileId, pattern: &str, restart: bool) -> Part {
    let pattern = smbq_wire::cursor::utf16le_encode(pattern);
    let mut w = Writer::new();
    QueryDirectoryRequest {
        file_information_class: DirClass::IdBothDirectory.info_class().0,
        flags: if restart { qd_flags::RESTART_SCANS } else { 0 },
        file_index: 0,
        file_id,
        file_name: &pattern,
        output_buffer_length: DIR_BUFFER,
    }
    .encode(&mut w);
    Part {
        command: Command::QUERY_DIRECTORY,
        body: w.into_vec(),
        io_size: DIR_BUFFER as usize,
    }
}

/// Appends the entries of one QUERY_DIRECTORY response (without `.` and `..`); false once the
/// listing is complete (NO_MORE_FILES, or an empty answer).
pub(crate) fn append_dir_entries(out: &mut Vec<DirEntry>, r: &Incoming) -> Result<bool, Error> {
    if r.header.status == NtStatus::NO_MORE_FILES {
        return Ok(false);
    }
    check(r, "QUERY_DIRECTORY")?;
    let buf = QueryDirectoryResponse::decode(&r.msg)?.buffer;
    let entries = decode_dir_list(DirClass::IdBothDirectory, buf)?;
    if entries.is_empty() {
        return Ok(false);
    }
    for e in entries {
        if e.name == "." || e.name == ".." {
            continue;
        }
        if out.len() == MAX_LISTING {
            return Err(ProtocolError::TooLarge("directory listing too long").into());
        }
        out.push(DirEntry {
            name: e.name.into_owned(),
            meta: Metadata {
                size: e.end_of_file,
                allocation: e.allocation_size,
                attributes: e.file_attributes,
                created: e.creation_time,
                accessed: e.last_access_time,
                modified: e.last_write_time,
                changed: e.change_time,
            },
        });
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use smbq_wire::Header;
    use smbq_wire::header::flags;

    use super::*;

    /// A READ response message (header and body) carrying `data`, as `split_compound` hands
    /// one out.
    fn read_response(data: &[u8]) -> Incoming {
        let header = Header {
            command: Command::READ,
            flags: flags::SERVER_TO_REDIR,
            ..Default::default()
        };
        let mut w = Writer::new();
        header.encode(&mut w);
        ReadResponse {
            data_remaining: 0,
            flags: 0,
            data,
        }
        .encode(&mut w);
        Incoming {
            header,
            msg: Bytes::from(w.into_vec()),
            encrypted: false,
        }
    }

    #[test]
    fn a_read_within_what_was_asked_is_its_data() {
        let data = read_data(&read_response(b"abcd"), 4).expect("4 of 4");
        assert_eq!(&data[..], b"abcd");
    }

    #[test]
    fn a_read_past_what_was_asked_is_a_typed_overrun() {
        let e = read_data(&read_response(b"abcdef"), 4).expect_err("6 of 4");
        assert!(
            matches!(
                e,
                Error::Protocol(ProtocolError::ReadOverrun { got: 6, asked: 4 })
            ),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("READ returned more than asked"),
            "{e}"
        );
    }

    #[test]
    fn a_truncated_read_response_is_malformed() {
        let mut r = read_response(b"abcd");
        r.msg.truncate(smbq_wire::HEADER_LEN + 4);
        let e = read_data(&r, 4).expect_err("truncated");
        assert!(
            matches!(e, Error::Protocol(ProtocolError::Malformed(_))),
            "{e:?}"
        );
        assert!(e.to_string().contains("malformed response"), "{e}");
    }
}
