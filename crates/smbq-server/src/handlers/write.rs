//! WRITE (MS-SMB2 3.3.5.13). The payload is a `Bytes` slice of the request message, handed to
//! the VFS without copying.

use std::sync::Arc;

use bytes::Bytes;
use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::write::{WriteRequest, WriteResponse, write_flags};

use super::{Ctx, bad, blocking, body};
use crate::Server;
use crate::access::mask;
use crate::errors::map_io_error;
use crate::tables::Open;

/// 3.3.5.13: an Offset of all ones writes at the end of the file (append).
const APPEND_OFFSET: u64 = u64::MAX;

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = WriteRequest::decode(&ctx.req.msg).map_err(bad)?;
    let range = WriteRequest::data_range(&ctx.req.msg).map_err(bad)?;
    let data = ctx.req.msg.slice(range);
    let open = ctx.open()?.clone();
    if data.len() > ctx.conn.max_write_size as usize {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if let Some(pipe) = open.pipe() {
        pipe.io.lock().write(&data)?;
        let count = data.len() as u32;
        return Ok(written(count));
    }
    check(&open, req.offset, data.len())?;
    // MS-FSA 2.1.5.4: a write of zero bytes succeeds at once, after the access and range
    // checks: it breaks no oplock (pike readwrite.test_write_none_oplock, as Windows), meets
    // no byte-range lock, and changes neither the file, its times nor the position.
    if data.is_empty() {
        return Ok(written(0));
    }
    let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
    // MS-FSA 2.1.4.12.2: a write breaks every level II oplock on the file (crate::open_state).
    let srv = ctx.srv;
    srv.before_write(f.key, open.volatile());
    // Asked for, the open's mode, or a continuously available share (crate::stable).
    let asked = req.flags & write_flags::WRITE_THROUGH != 0;
    let write_through = crate::stable::write_through(&open, asked);
    let count = run(srv, &open, data, req.offset, write_through).await?;
    srv.notify_write(&open); // CHANGE_NOTIFY (crate::notify)
    let count = u32::try_from(count).unwrap_or(u32::MAX);
    Ok(written(count))
}

/// What a WRITE to a file must pass before anything happens: a file, not a directory; the
/// right to write; an offset and length inside what an i64 addresses.
fn check(open: &Open, offset: u64, len: usize) -> Result<(), NtStatus> {
    if open.is_dir() {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    // MS-SMB2 3.3.5.13: FILE_WRITE_DATA or FILE_APPEND_DATA. The spec says a write inside the
    // file SHOULD need FILE_WRITE_DATA, but Windows servers allow it with either (note <358>),
    // as Samba 4.25 does (smbtorture smb2.rw.append, "verify Windows SEC_FILE_APPEND_DATA
    // behaviour", Samba bug 15751): the offset is honoured, not turned into an append.
    crate::security::require_any(open, mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA)?;
    // A POSIX open with FILE_APPEND_DATA and not FILE_WRITE_DATA is an O_APPEND file: it
    // writes only at the end, so only APPEND_OFFSET is a valid offset (as in Samba's
    // smb2_write.c, posix_append).
    let posix_append = open.posix && open.granted & mask::FILE_WRITE_DATA == 0;
    if posix_append && offset != APPEND_OFFSET {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if offset != APPEND_OFFSET
        && (offset > i64::MAX as u64
            || offset
                .checked_add(len as u64)
                .is_none_or(|e| e > i64::MAX as u64))
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}

/// Runs the write where it costs least. A small write without WRITE_THROUGH goes to the page
/// cache in microseconds: it runs here rather than paying the blocking pool's hop
/// (crate::inline_io says what bounds it); a flushing one runs in place of this worker; the
/// rest go to the pool.
async fn run(
    srv: &Server,
    open: &Arc<Open>,
    data: Bytes,
    offset: u64,
    write_through: bool,
) -> Result<usize, NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
    let (key, local) = (f.key, f.file.local_storage());
    let len = data.len();
    let (me, o) = (srv.self_arc(), open.clone());
    let job = move || write_at(&me, &o, data, offset, write_through);
    let gate = crate::inline_io::InlineGate::get();
    // A write that flushes (crate::stable; another cluster node's open is a hint here, the
    // rule is asked again after the write) runs on a blocking thread, never inline.
    let flushes = write_through || srv.open_state().shared_elsewhere(key);
    let pass = (!flushes).then(|| gate.try_pass(len, key, local));
    if let Some(pass) = pass.flatten() {
        let r = super::inline(job);
        drop(pass);
        return r;
    }
    // Counted while it runs: the inode lock it holds keeps the file's small writes off the
    // workers meanwhile.
    let _on_pool = gate.pool_write(key);
    // A flushing write runs on this thread, which hands its other tasks to another one
    // meanwhile (block_in_place): the answer then waits for the flush alone, not also for a
    // pool thread to wake and to wake this task again (`smbq bench ca`: 4 KiB write-through
    // p50 8 to 12 % lower on this 2-core machine). Only a multi-threaded runtime can.
    if flushes
        && tokio::runtime::Handle::current().runtime_flavor()
            == tokio::runtime::RuntimeFlavor::MultiThread
    {
        return tokio::task::block_in_place(|| super::inline(job));
    }
    blocking(job).await
}

/// A WRITE response for `count` bytes.
fn written(count: u32) -> Response {
    Response::ok(body(|w| {
        WriteResponse {
            count,
            remaining: 0,
        }
        .encode(w)
    }))
}

/// The write itself, on whichever thread runs it: where it lands (the end of the file for
/// APPEND_OFFSET), the byte-range locks, the data, the write time, WRITE_THROUGH's flush and
/// the new position.
fn write_at(
    srv: &Server,
    open: &Open,
    data: Bytes,
    offset: u64,
    write_through: bool,
) -> Result<usize, NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
    let eof = || f.file.stat().map(|s| s.size).map_err(|e| map_io_error(&e));
    let at = if offset == APPEND_OFFSET {
        eof()?
    } else {
        offset
    };
    srv.open_state()
        .check_io(f.key, open.volatile(), (at, data.len() as u64), true)?;
    // MS-FSA 2.1.4.17: the write moves LastWriteTime at once, unless this handle's is
    // sticky (crate::write_time).
    let held = crate::write_time::held(open, f);
    // An append goes where the end is when it is written, not where it was at the stat
    // above: two appenders (two handles, or a local process) never write over each other.
    let n = if offset == APPEND_OFFSET {
        f.file.append(&[data])
    } else {
        f.file.write_at(at, &[data])
    }
    .map_err(|e| map_io_error(&e));
    crate::write_time::after(open, f, held, f.key.stream != 0 && n.is_ok());
    let n = n?;
    if crate::stable::flushed_after(srv, open, write_through) {
        // MS-SMB2 3.3.5.13 WRITE_THROUGH: the data (and the size that reads it back) on
        // stable storage before the answer; the times may follow.
        f.file.fdatasync().map_err(|e| map_io_error(&e))?;
    }
    super::read::advance_position(open, at.saturating_add(n as u64));
    Ok(n)
}
