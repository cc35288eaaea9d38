//! `smbq_wire::transform` (MS-SMB2 2.2.41): TRANSFORM_HEADER decode and frame classification.
//! What decodes re-encodes to the same 52 bytes except Reserved (written as zero).
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_wire::transform::{ProtocolKind, TRANSFORM_HEADER_LEN, TransformHeader, aad, classify};

fuzz_target!(|data: &[u8]| {
    let kind = classify(data);
    let Ok(th) = TransformHeader::decode(data) else {
        return;
    };
    assert_eq!(
        kind,
        Some(ProtocolKind::Transform),
        "decoded a frame classify() rejects"
    );
    let enc = th.to_bytes();
    assert_eq!(
        TransformHeader::decode(&enc).as_ref(),
        Ok(&th),
        "transform header round trip"
    );
    let orig = &data[..TRANSFORM_HEADER_LEN];
    assert_eq!(
        enc[..40],
        orig[..40],
        "bytes 0..40 must survive a round trip"
    );
    assert_eq!(
        enc[42..],
        orig[42..],
        "Flags and SessionId must survive a round trip"
    );
    // MS-SMB2 3.1.4.3: the AAD is the header after ProtocolId and Signature (32 bytes).
    assert_eq!(aad(&enc), &enc[20..52]);
});
