//! READ (MS-SMB2 3.3.5.12). File data travels in `Response::data` as the `Bytes` the VFS
//! returned, without another copy.

use std::sync::atomic::Ordering;

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::fscc::file_info::mode;
use smbq_wire::read::{ReadRequest, ReadResponse, read_flags};

use super::{Ctx, bad, blocking, body};
use crate::access::mask;
use crate::errors::map_io_error;
use crate::tables::Open;

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = ReadRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?.clone();
    if req.length > ctx.conn.max_read_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if let Some(pipe) = open.pipe() {
        let r = pipe.io.lock().read(req.length as usize)?;
        if r.data.is_empty() && !r.more {
            return Err(NtStatus::PIPE_EMPTY);
        }
        let status = if r.more {
            NtStatus::BUFFER_OVERFLOW
        } else {
            NtStatus::SUCCESS
        };
        let len = r.data.len() as u32;
        let mut resp = Response::with_status(
            status,
            body(|w| ReadResponse::default().encode_header(len, w)),
        );
        resp.data = Some(r.data.into());
        return Ok(resp);
    }
    if open.is_dir() {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    if !open.has(mask::FILE_READ_DATA | mask::FILE_EXECUTE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
    if req.offset > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let range = (req.offset, u64::from(req.length));
    ctx.srv
        .open_state()
        .check_io(f.key, open.volatile(), range, false)?;
    let (offset, len, min) = (req.offset, req.length as usize, req.minimum_count as usize);
    // A small READ of data in the page cache is answered here: the hop to a blocking thread
    // and back costs more than the copy (random 4 KiB reads, fio S2/S3). Anything that would
    // wait for the disk, or is large enough to hold this worker too long, goes there.
    let cached = if len <= READ_CACHED_MAX {
        f.file
            .read_cached(offset, len)
            .map_err(|e| map_io_error(&e))?
    } else {
        None
    };
    let data = match cached {
        Some(data) => {
            advance_position(&open, offset.saturating_add(data.len() as u64));
            data
        }
        None => {
            blocking(move || {
                let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
                let data = f.file.read_at(offset, len).map_err(|e| map_io_error(&e))?;
                advance_position(&open, offset.saturating_add(data.len() as u64));
                Ok(data)
            })
            .await?
        }
    };
    // 3.3.5.12: nothing read (at or past end of file), or less than MinimumCount.
    if (data.is_empty() && len > 0) || data.len() < min {
        return Err(NtStatus::END_OF_FILE);
    }
    let dlen = data.len() as u32;
    let mut resp = Response::ok(body(|w| ReadResponse::default().encode_header(dlen, w)));
    resp.data = Some(data);
    resp.compress = wants_compression(ctx, &req);
    Ok(resp)
}

/// MS-SMB2 3.3.5.12: a READ response is compressed when the client asked, or the share
/// compresses all data (SMB2_SHAREFLAG_COMPRESS_DATA); the engine does it if the connection
/// negotiated compression and it pays.
fn wants_compression(ctx: &Ctx<'_>, req: &ReadRequest<'_>) -> bool {
    req.flags & read_flags::REQUEST_COMPRESSED != 0
        || ctx.tree().is_ok_and(|t| t.share.cfg.compress_data)
}

/// MS-FSA 2.1.5.2 / 2.1.5.3: only an open in synchronous mode (FILE_SYNCHRONOUS_IO_ALERT or
/// _NONALERT) tracks CurrentByteOffset; other opens leave FilePositionInformation alone, as
/// Windows does.
pub(super) fn advance_position(open: &Open, end: u64) {
    if open.mode.load(Ordering::Relaxed) & SYNCHRONOUS != 0 {
        open.position.store(end, Ordering::Relaxed);
    }
}

/// Largest READ tried from the page cache on the async side (a copy of this much takes tens of
/// microseconds, about what the blocking-pool hop it saves costs).
const READ_CACHED_MAX: usize = 256 * 1024;

const SYNCHRONOUS: u32 = mode::FILE_SYNCHRONOUS_IO_ALERT | mode::FILE_SYNCHRONOUS_IO_NONALERT;
