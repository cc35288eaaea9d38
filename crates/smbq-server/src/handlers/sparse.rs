//! Sparse files (MS-FSA 2.1.5.10.38, .39, .22; MS-FSCC 2.3.51-2.3.65): FSCTL_SET_SPARSE keeps
//! FILE_ATTRIBUTE_SPARSE_FILE in the file's stored DOS attributes (every open sees it, and it
//! outlives the handle), FSCTL_SET_ZERO_DATA deallocates (fallocate PUNCH_HOLE) and
//! FSCTL_QUERY_ALLOCATED_RANGES reports the data extents (SEEK_DATA/SEEK_HOLE) of a sparse
//! file, and the whole range of any other, as Windows and Samba do.

use std::sync::Arc;

use smbq_wire::NtStatus;

use super::blocking;
use crate::access::{attr, mask};
use crate::dos::{self, DosInfo};
use crate::errors::map_io_error;
use crate::tables::Open;

/// One FILE_ALLOCATED_RANGE_BUFFER (MS-FSCC 2.3.52).
const RANGE_LEN: usize = 16;

fn i64_pair(input: &[u8]) -> Result<(u64, u64), NtStatus> {
    let mut r = smbq_wire::Reader::new(input);
    let (Ok(a), Ok(b)) = (r.u64(), r.u64()) else {
        return Err(NtStatus::INVALID_PARAMETER);
    };
    // Both are LONGLONG on the wire; negative values are invalid (MS-FSA).
    if a > i64::MAX as u64 || b > i64::MAX as u64 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok((a, b))
}

/// Whether the file is marked sparse.
fn is_sparse(f: &dyn smbq_vfs::VfsFile) -> bool {
    DosInfo::read(f)
        .attributes
        .is_some_and(|a| a & attr::SPARSE_FILE != 0)
}

/// FSCTL_SET_SPARSE (MS-FSA 2.1.5.10.38): no buffer sets; a first byte of 0 clears, any
/// other sets (further bytes are ignored, smbtorture sparse_set_oversize).
pub(super) async fn set_sparse(open: &Arc<Open>, input: &[u8]) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    crate::security::require_any(
        open,
        mask::FILE_WRITE_DATA | mask::FILE_WRITE_ATTRIBUTES | mask::FILE_APPEND_DATA,
    )?;
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let set = input.first().is_none_or(|&b| b != 0);
    let open = open.clone();
    blocking(move || {
        let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
        let mut d = DosInfo::read(f.file.as_ref());
        let stored = match d.attributes {
            Some(a) => a,
            None => {
                let st = f.file.stat().map_err(|e| map_io_error(&e))?;
                let name = open.path();
                dos::attributes(&st, name.file_name().unwrap_or_default(), &d) & attr::STORED
            }
        };
        let want = if set {
            stored | attr::SPARSE_FILE
        } else {
            stored & !attr::SPARSE_FILE
        };
        if d.attributes != Some(want) {
            d.attributes = Some(want);
            // The server keeps the attribute itself: no WRITE_EA right is needed.
            d.write(f.file.as_ref())
                .map_err(|_| NtStatus::INVALID_DEVICE_REQUEST)?;
        }
        Ok(())
    })
    .await
}

/// FSCTL_SET_ZERO_DATA (MS-FSA 2.1.5.10.39): the range reads as zeros afterwards and the size
/// never changes; a sparse file's blocks are given back.
pub(super) async fn zero_data(
    srv: &crate::Server,
    open: &Arc<Open>,
    input: &[u8],
) -> Result<(), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    crate::security::require_any(open, mask::FILE_WRITE_DATA)?;
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (from, beyond) = i64_pair(input)?;
    if from > beyond {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if from == beyond {
        return Ok(());
    }
    // A write as far as locks and level II oplocks go (MS-FSA 2.1.5.10.39 "as if written").
    let range = (from, beyond - from);
    srv.open_state()
        .check_io(f.key, open.volatile(), range, true)?;
    srv.before_write(f.key, open.volatile());
    let o = open.clone();
    blocking(move || {
        let f = o.file().ok_or(NtStatus::INVALID_HANDLE)?;
        let size = f.file.stat().map_err(|e| map_io_error(&e))?.size;
        let end = beyond.min(size);
        if from < end {
            // Zeroing is writing (MS-FSA 2.1.4.17, crate::write_time).
            let held = crate::write_time::held(&o, f);
            let r = f.file.punch_hole(from, end - from);
            crate::write_time::after(&o, f, held, f.key.stream != 0 && r.is_ok());
            r.map_err(|e| map_io_error(&e))?;
        }
        Ok(())
    })
    .await?;
    // Zeroed is written: on stable storage first where writes are (crate::stable).
    crate::stable::flush_data(srv, open).map_err(|e| map_io_error(&e))?;
    srv.notify_write(open);
    Ok(())
}

/// FSCTL_QUERY_ALLOCATED_RANGES (MS-FSA 2.1.5.10.22): the encoded ranges and whether more
/// did not fit in `max_out` (then BUFFER_OVERFLOW with as many as fit; none fitting at all
/// is BUFFER_TOO_SMALL).
pub(super) async fn allocated_ranges(
    open: &Arc<Open>,
    input: &[u8],
    max_out: usize,
) -> Result<(Vec<u8>, bool), NtStatus> {
    let f = open.file().ok_or(NtStatus::INVALID_PARAMETER)?;
    crate::security::require_any(open, mask::FILE_READ_DATA)?;
    if f.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let (offset, length) = i64_pair(input)?;
    let window_end = offset
        .checked_add(length)
        .filter(|&e| e <= i64::MAX as u64)
        .ok_or(NtStatus::INVALID_PARAMETER)?;
    let o = open.clone();
    let ranges = blocking(move || {
        let f = o.file().ok_or(NtStatus::INVALID_HANDLE)?;
        let io = |e: std::io::Error| map_io_error(&e);
        let size = f.file.stat().map_err(io)?.size;
        let end = window_end.min(size);
        let mut ranges = Vec::new();
        if length == 0 || offset >= end {
            return Ok(ranges);
        }
        if !is_sparse(f.file.as_ref()) {
            ranges.push((offset, end - offset));
            return Ok(ranges);
        }
        // The extents are bounded by the window; a file of a million extents still yields
        // no more ranges than the answer can hold (plus one, to know there were more).
        let cap = max_out / RANGE_LEN + 1;
        let mut at = offset;
        while at < end && ranges.len() < cap {
            let Some(d) = f.file.next_data(at).map_err(io)? else {
                break;
            };
            if d >= end {
                break;
            }
            let h = f.file.next_hole(d).map_err(io)?.max(d + 1);
            ranges.push((d, h.min(end) - d));
            at = h;
        }
        Ok(ranges)
    })
    .await?;
    let fit = max_out / RANGE_LEN;
    if !ranges.is_empty() && fit == 0 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let more = ranges.len() > fit;
    let mut w = smbq_wire::Writer::new();
    for (o, l) in ranges.into_iter().take(fit) {
        w.u64(o).u64(l);
    }
    Ok((w.into_vec(), more))
}
