//! FSCTL_DUPLICATE_EXTENTS_TO_FILE (MS-FSCC 2.3.7.2, MS-FSA 2.1.5.10.4): a range of one file
//! made to share the blocks of another (ReFS block cloning; what Windows' copy engine uses on
//! volumes that advertise FILE_SUPPORTS_BLOCK_REFCOUNTING). Where the share's file system
//! clones (probed with FICLONE: XFS with reflink, Btrfs) block-aligned ranges are cloned with
//! copy_file_range(2), so nothing is read or written and no request can make the server copy
//! bytes; other file systems do not advertise the capability and get
//! STATUS_INVALID_DEVICE_REQUEST, as MS-FSCC says.
//!
//! The checks and their order are Windows Server 2016's as smbtorture's smb2.ioctl.dup_extents_*
//! tests pin them down (and Samba follows): the destination never grows (the count is cut to
//! its end), a source range past its end is STATUS_NOT_SUPPORTED, overlapping ranges of one
//! file and a sparse source into a non-sparse destination are refused the same way, and byte-
//! range locks are not checked (Windows and Samba do not: the operation is a metadata change
//! of the destination, like setting its allocation).

use std::sync::Arc;

use crate::access::attr;
use smbq_wire::NtStatus;

use super::{Ctx, blocking};
use crate::access::mask;
use crate::dos::DosInfo;
use crate::errors::map_io_error;
use crate::tables::Open;

/// DUPLICATE_EXTENTS_DATA: source FileId (16), SourceFileOffset, TargetFileOffset, ByteCount.
const INPUT_LEN: usize = 40;

struct Request {
    persistent: u64,
    volatile: u64,
    source_offset: u64,
    target_offset: u64,
    count: u64,
}

fn parse(input: &[u8]) -> Result<Request, NtStatus> {
    let u64_at = |at: usize| -> Result<u64, NtStatus> {
        input
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or(NtStatus::INVALID_PARAMETER)
    };
    if input.len() < INPUT_LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(Request {
        persistent: u64_at(0)?,
        volatile: u64_at(8)?,
        source_offset: u64_at(16)?,
        target_offset: u64_at(24)?,
        count: u64_at(32)?,
    })
}

fn is_sparse(open: &Open) -> bool {
    open.file().is_some_and(|f| {
        DosInfo::read(f.file.as_ref())
            .attributes
            .is_some_and(|a| a & attr::SPARSE_FILE != 0)
    })
}

/// The source: an open of this session on this tree connect (Windows and Samba answer
/// INVALID_HANDLE where MS-FSCC says INVALID_PARAMETER; smbtorture dup_extents_bad_handle).
fn source(ctx: &Ctx<'_>, dst: &Open, r: &Request) -> Result<Arc<Open>, NtStatus> {
    ctx.srv
        .lookup_open(r.volatile)
        .filter(|o| o.file_id.persistent == r.persistent)
        .filter(|o| o.session_id == dst.session_id && Arc::ptr_eq(&o.tree, &dst.tree))
        .filter(|o| !o.closed.load(std::sync::atomic::Ordering::Acquire))
        .ok_or(NtStatus::INVALID_HANDLE)
}

/// Runs the FSCTL sent on `dst` with `input`.
pub(super) async fn duplicate(ctx: &Ctx<'_>, dst: Arc<Open>, input: &[u8]) -> Result<(), NtStatus> {
    let vfs = dst
        .tree
        .share
        .vfs
        .as_ref()
        .ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let fs = vfs.statfs().map_err(|e| map_io_error(&e))?;
    if !fs.clones_extents {
        return Err(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let r = parse(input)?;
    let src = source(ctx, &dst, &r)?;
    let (Some(sf), Some(df)) = (src.file(), dst.file()) else {
        return Err(NtStatus::ACCESS_DENIED);
    };
    let max = i64::MAX as u64;
    if r.source_offset.checked_add(r.count).is_none_or(|e| e > max)
        || r.target_offset.checked_add(r.count).is_none_or(|e| e > max)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let src_size = sf.file.stat().map_err(|e| map_io_error(&e))?.size;
    if src_size < r.source_offset + r.count {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    // The destination keeps its size: what would lie past its end is not cloned.
    let dst_size = df.file.stat().map_err(|e| map_io_error(&e))?.size;
    if r.target_offset > dst_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let count = r.count.min(dst_size - r.target_offset);
    if count == 0 {
        return Ok(());
    }
    if sf.key == df.key
        && r.source_offset < r.target_offset + count
        && r.target_offset < r.source_offset + count
    {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if is_sparse(&src) && !is_sparse(&dst) {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    // Clones are of whole blocks (ReFS: clusters), the last one may end at the source's end.
    let bs = fs.block_size.max(1);
    if r.source_offset % bs != 0
        || r.target_offset % bs != 0
        || (count % bs != 0 && r.source_offset + count != src_size)
    {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if src.is_dir() || dst.is_dir() || !src.has(mask::FILE_READ_DATA | mask::FILE_EXECUTE) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Writing is checked as a WRITE is (a read-only share refuses it here too); the range is
    // inside the file, so appending alone does not allow it (as WRITE below the end).
    crate::security::require_any(&dst, mask::FILE_WRITE_DATA)?;
    ctx.srv.before_write(df.key, dst.volatile());
    let (s2, d2, srv) = (src.clone(), dst.clone(), ctx.srv.self_arc());
    let (so, to) = (r.source_offset, r.target_offset);
    // Never a copy through memory: a range the file system does not clone is refused.
    blocking(move || {
        let (Some(sf), Some(df)) = (s2.file(), d2.file()) else {
            return Err(NtStatus::ACCESS_DENIED);
        };
        // Cloning in is writing (MS-FSA 2.1.4.17, crate::write_time).
        let held = crate::write_time::held(&d2, df);
        let r = smbq_vfs::clone_range(sf.file.as_ref(), so, df.file.as_ref(), to, count);
        crate::write_time::after(&d2, df, held, df.key.stream != 0 && r.is_ok());
        r.map_err(|_| NtStatus::NOT_SUPPORTED)?;
        // Cloned in is written: on stable storage first where writes are (crate::stable).
        crate::stable::flush_data(&srv, &d2).map_err(|e| crate::errors::map_io_error(&e))
    })
    .await?;
    ctx.srv.notify_write(&dst); // CHANGE_NOTIFY and the parent's leases (crate::notify)
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn input_is_forty_bytes_little_endian() {
        let mut b = Vec::new();
        for v in [1u64, 2, 3, 4, 5] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let r = parse(&b).unwrap();
        assert_eq!(
            (
                r.persistent,
                r.volatile,
                r.source_offset,
                r.target_offset,
                r.count
            ),
            (1, 2, 3, 4, 5)
        );
        assert_eq!(parse(&b[..39]).err(), Some(NtStatus::INVALID_PARAMETER));
    }
}
