//! Server-side copy (MS-SMB2 3.3.5.15.5, 3.3.5.15.6): FSCTL_SRV_REQUEST_RESUME_KEY names a
//! source open; FSCTL_SRV_COPYCHUNK(_WRITE), sent on the destination open, copies chunks of
//! it inside the server, so a copy within the server never crosses the network. The order of
//! the checks and the statuses are Windows Server 2012's, which smbtorture's smb2.ioctl
//! copy_chunk_* tests pin down (where MS-SMB2 says END_OF_FILE for a source range past the end,
//! Windows answers INVALID_VIEW_SIZE: MS-SMB2 footnote on 3.3.5.15.6).

use std::sync::Arc;

use smbq_proto::Response;
use smbq_wire::NtStatus;
use smbq_wire::copychunk::{Chunk, CopyChunkCopy, CopyChunkResponse, ResumeKeyResponse};
use smbq_wire::ioctl::{CtlCode, IoctlRequest};

use super::{Ctx, blocking};
use crate::Server;
use crate::access::mask;
use crate::errors::map_io_error;
use crate::file_state::FileKey;
use crate::resume_key::ResumeKeys;
use crate::tables::Open;

/// Server limits (MS-SMB2 3.3.5.15.6, Windows' values, returned in the response when a
/// request breaks one of them).
pub const MAX_CHUNKS: u32 = 256;
pub const MAX_CHUNK_BYTES: u32 = 1 << 20;
pub const MAX_TOTAL_BYTES: u32 = 16 << 20;

/// MS-SMB2 3.3.5.15.5. Needs no access right (smbtorture asks on a handle with
/// READ_ATTRIBUTES only); the copy checks the source's rights when the key is used.
pub(super) fn resume_key(ctx: &Ctx<'_>, req: &IoctlRequest<'_>) -> Result<Response, NtStatus> {
    let open = ctx.open()?;
    if open.file().is_none() {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    if (req.max_output_response as usize) < ResumeKeyResponse::LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let out = ResumeKeyResponse {
        resume_key: ctx.srv.resume_keys().key_for(open.file_id),
    };
    let mut w = smbq_wire::Writer::new();
    out.encode(&mut w);
    Ok(super::ioctl::reply(req, NtStatus::SUCCESS, w.as_slice()))
}

/// MS-SMB2 3.3.5.15.6.
pub(super) async fn copy(ctx: &Ctx<'_>, req: &IoctlRequest<'_>) -> Result<Response, NtStatus> {
    let dst = ctx.open()?.clone();
    // Too small for the 12-byte answer: a plain error, nothing else checked.
    if (req.max_output_response as usize) < CopyChunkResponse::LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let answer = |status: NtStatus, r: CopyChunkResponse| {
        let mut w = smbq_wire::Writer::new();
        r.encode(&mut w);
        super::ioctl::reply(req, status, w.as_slice())
    };
    let cc =
        CopyChunkCopy::decode(req.input, MAX_CHUNKS).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    // 3.3.5.15.6.2: a broken limit is answered with the limits, before anything is copied.
    let total: u64 = cc.chunks.iter().map(|c| u64::from(c.length)).sum();
    if cc.chunk_count > MAX_CHUNKS
        || cc
            .chunks
            .iter()
            .any(|c| c.length == 0 || c.length > MAX_CHUNK_BYTES)
        || total > u64::from(MAX_TOTAL_BYTES)
    {
        return Ok(answer(
            NtStatus::INVALID_PARAMETER,
            CopyChunkResponse {
                chunks_written: MAX_CHUNKS,
                chunk_bytes_written: MAX_CHUNK_BYTES,
                total_bytes_written: MAX_TOTAL_BYTES,
            },
        ));
    }
    if cc.chunks.is_empty() {
        return Ok(answer(NtStatus::SUCCESS, CopyChunkResponse::default()));
    }
    let mut done = CopyChunkResponse::default();
    let src = match source(ctx, &cc.source_key, &dst, req.ctl_code) {
        Ok(s) => s,
        Err(status) => return Ok(answer(status, done)),
    };
    let (Some(sf), Some(df)) = (src.file(), dst.file()) else {
        return Ok(answer(NtStatus::ACCESS_DENIED, done));
    };
    let (skey, dkey) = (sf.key, df.key);
    // Level II oplocks on the destination break as for a WRITE (MS-FSA 2.1.4.12.2).
    ctx.srv.before_write(dkey, dst.volatile());
    let session = ctx.session.clone();
    let _slot = tokio::select! {
        slot = session.copy_slot() => slot,
        () = ctx.cancel.cancelled() => return Err(NtStatus::CANCELLED),
    };
    let srv = ctx.srv.self_arc();
    let chunks = cc.chunks;
    let (s2, d2) = (src.clone(), dst.clone());
    // 3.3.5.15.6.1: chunks in order; the first failure ends the copy, and the answer counts
    // what was copied before it (those bytes stay written).
    let (status, copied) =
        blocking(move || copy_chunks(&srv, &s2, &d2, skey, dkey, &chunks)).await?;
    done = copied;
    if done.total_bytes_written > 0 {
        ctx.srv.notify_write(&dst); // CHANGE_NOTIFY and the parent's leases (crate::notify)
    }
    Ok(answer(status, done))
}

/// 3.3.5.15.6.1, on a blocking thread: each chunk's range and lock checks, then the copy.
/// Always `Ok`: a failure is the status to answer with, next to what was copied before it.
fn copy_chunks(
    srv: &Server,
    src: &Open,
    dst: &Open,
    skey: FileKey,
    dkey: FileKey,
    chunks: &[Chunk],
) -> Result<(NtStatus, CopyChunkResponse), NtStatus> {
    let mut copied = CopyChunkResponse::default();
    let (Some(sf), Some(df)) = (src.file(), dst.file()) else {
        return Ok((NtStatus::ACCESS_DENIED, copied));
    };
    for c in chunks {
        let len = u64::from(c.length);
        if c.source_offset > i64::MAX as u64 - len || c.target_offset > i64::MAX as u64 - len {
            return Ok((NtStatus::INVALID_PARAMETER, copied));
        }
        let size = match sf.file.stat() {
            Ok(st) => st.size,
            Err(e) => return Ok((map_io_error(&e), copied)),
        };
        if size < c.source_offset + len {
            return Ok((NtStatus::INVALID_VIEW_SIZE, copied));
        }
        let state = srv.open_state();
        if let Err(s) = state
            .check_io(skey, src.volatile(), (c.source_offset, len), false)
            .and_then(|()| state.check_io(dkey, dst.volatile(), (c.target_offset, len), true))
        {
            return Ok((s, copied));
        }
        // Copying in is writing: the destination's time moves unless its handle set it
        // (MS-FSA 2.1.4.17, crate::write_time).
        let held = crate::write_time::held(dst, df);
        let r = smbq_vfs::copy_range(
            sf.file.as_ref(),
            c.source_offset,
            df.file.as_ref(),
            c.target_offset,
            len,
        );
        crate::write_time::after(dst, df, held, dkey.stream != 0 && r.is_ok());
        match r {
            Ok(n) if n == len => {}
            // The source shrank between the size check and the copy.
            Ok(_) => return Ok((NtStatus::INVALID_VIEW_SIZE, copied)),
            Err(e) => return Ok((map_io_error(&e), copied)),
        }
        copied.chunks_written += 1;
        copied.total_bytes_written += c.length;
    }
    // Copied in is written: on stable storage first where writes are (crate::stable).
    if let Err(e) = crate::stable::flush_data(srv, dst) {
        return Ok((map_io_error(&e), copied));
    }
    Ok((NtStatus::SUCCESS, copied))
}

/// The open a resume key names, if this session may copy from it into `dst` (Samba and
/// Windows: same session, both data files, read access on the source, write access on the
/// destination, and read access there too unless the request is COPYCHUNK_WRITE).
fn source(
    ctx: &Ctx<'_>,
    key: &[u8; smbq_wire::copychunk::RESUME_KEY_LEN],
    dst: &Arc<Open>,
    ctl: CtlCode,
) -> Result<Arc<Open>, NtStatus> {
    let keys = ctx.srv.resume_keys();
    let src = ctx
        .srv
        .lookup_open(ResumeKeys::volatile_of(key))
        .filter(|o| keys.verify(key, o.file_id))
        .filter(|o| !o.closed.load(std::sync::atomic::Ordering::Acquire))
        .ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
    if src.session_id != dst.session_id || src.is_dir() || dst.is_dir() {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if !src.has(mask::FILE_READ_DATA | mask::FILE_EXECUTE)
        || (ctl == CtlCode::SRV_COPYCHUNK && !dst.has(mask::FILE_READ_DATA))
    {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Writing is checked as a WRITE is, with the read-only share refused again at the point of
    // change (crate::security::refuse_on_read_only).
    crate::security::require_any(dst, mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA)?;
    Ok(src)
}
