//! `smbq_wire::Header::decode` (MS-SMB2 2.2.1): any 64 bytes that decode re-encode to the
//! same bytes, except the sync header's Reserved field, which is written as zero.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_wire::{HEADER_LEN, Header};

fuzz_target!(|data: &[u8]| {
    let Ok(h) = Header::decode(data) else { return };
    let enc = h.to_bytes();
    assert_eq!(enc.len(), HEADER_LEN);
    assert_eq!(Header::decode(&enc).as_ref(), Ok(&h), "header round trip");
    assert_eq!(
        h.is_async(),
        h.async_id.is_some(),
        "ASYNC_COMMAND flag vs AsyncId"
    );
    let orig = &data[..HEADER_LEN];
    assert_eq!(
        enc[..32],
        orig[..32],
        "bytes 0..32 must survive a round trip"
    );
    assert_eq!(
        enc[36..],
        orig[36..],
        "bytes 36..64 must survive a round trip"
    );
    if h.is_async() {
        assert_eq!(
            enc[32..36],
            orig[32..36],
            "AsyncId must survive a round trip"
        );
    }
});
