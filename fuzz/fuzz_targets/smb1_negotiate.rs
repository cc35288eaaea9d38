//! `smbq_wire::smb1_negotiate` (MS-SMB2 3.3.5.3.1, MS-CIFS 2.2.4.52.1): the SMB1 NEGOTIATE a
//! client may open with. Dialect lists that decode re-encode to the same list.
#![no_main]

use libfuzzer_sys::fuzz_target;
use smbq_wire::Writer;
use smbq_wire::smb1_negotiate::{Smb1NegotiateRequest, is_smb1};

fuzz_target!(|data: &[u8]| {
    let Ok(req) = Smb1NegotiateRequest::decode(data) else {
        return;
    };
    assert!(
        is_smb1(data),
        "decoded a message without the SMB1 protocol id"
    );
    assert!(
        req.dialects.iter().all(|d| !d.contains(&0)),
        "dialect string holds a NUL"
    );
    let _ = req.best_smb2_reply();
    let mut w = Writer::new();
    req.encode(&mut w);
    let again = Smb1NegotiateRequest::decode(w.as_slice());
    assert_eq!(again.as_ref(), Ok(&req), "SMB1 NEGOTIATE round trip");
});
