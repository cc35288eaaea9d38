//! FSCTL_SRV_ENUMERATE_SNAPSHOTS (MS-SMB2 3.3.5.15.1, 2.2.32.2): the "previous versions" a
//! share offers. smbq keeps no snapshots, so the list is empty; the shape is what Windows and
//! Samba send: with MaxOutputResponse 16 only the counts (and the size the names would need),
//! with more the (empty) name list, ending in its UNICODE null.

use smbq_wire::NtStatus;

/// An empty array is its terminating UTF-16 null.
const EMPTY_ARRAY: u32 = 2;

pub(super) fn enumerate(max_out: usize) -> Result<Vec<u8>, NtStatus> {
    if max_out < 16 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut w = smbq_wire::Writer::new();
    // NumberOfSnapShots, NumberOfSnapShotsReturned, SnapShotArraySize.
    w.u32(0).u32(0).u32(EMPTY_ARRAY);
    if max_out == 16 {
        // Asking for the counts only: 16 bytes, as Windows answers.
        w.u32(0);
    } else {
        w.zeros(EMPTY_ARRAY as usize);
    }
    Ok(w.into_vec())
}
