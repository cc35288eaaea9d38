//! FSCTL_GET_COMPRESSION / FSCTL_SET_COMPRESSION (MS-FSA 2.1.5.10.7, .37) on a file system
//! without compression, as Windows Server 2016 answers on ReFS: every file reports
//! COMPRESSION_FORMAT_NONE, setting NONE succeeds, and any other format is NOT_SUPPORTED
//! (smbtorture smb2.ioctl.compress_notsup_get/_set). The volume does not advertise
//! FILE_FILE_COMPRESSION, so clients do not offer to compress.

use std::sync::Arc;

use smbq_wire::NtStatus;

use crate::access::mask;
use crate::tables::Open;

/// MS-FSCC 2.3.9 COMPRESSION_STATE: the format, a USHORT.
const STATE_LEN: usize = 2;
const COMPRESSION_FORMAT_NONE: u16 = 0;

pub(super) fn get(open: &Arc<Open>, max_out: usize) -> Result<Vec<u8>, NtStatus> {
    open.file().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    if max_out < STATE_LEN {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(COMPRESSION_FORMAT_NONE.to_le_bytes().to_vec())
}

pub(super) fn set(open: &Arc<Open>, input: &[u8]) -> Result<(), NtStatus> {
    open.file().ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let format = match input {
        [a, b, ..] => u16::from_le_bytes([*a, *b]),
        _ => return Err(NtStatus::INVALID_PARAMETER),
    };
    // MS-FSA 2.1.5.10.37: changing the state is a change to the file's data and attributes.
    crate::security::require_any(open, mask::FILE_WRITE_DATA | mask::FILE_WRITE_ATTRIBUTES)?;
    if format == COMPRESSION_FORMAT_NONE {
        Ok(())
    } else {
        Err(NtStatus::NOT_SUPPORTED)
    }
}
