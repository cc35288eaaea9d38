//! SMB2 CANCEL request (MS-SMB2 2.2.30; it has no response): a 4-byte body, StructureSize 4
//! and Reserved. Tested with the other empty bodies in `body`.

crate::body::empty_body! {
    /// SMB2 CANCEL Request (MS-SMB2 2.2.30).
    CancelRequest { structure_size: 4, reserved: 2 }
}
