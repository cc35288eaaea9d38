//! SMB2 LOGOFF request and response (MS-SMB2 2.2.7, 2.2.8): a 4-byte body,
//! StructureSize 4 and Reserved. Tested with the other empty bodies in `body`.

crate::body::empty_body! {
    /// SMB2 LOGOFF Request (MS-SMB2 2.2.7).
    LogoffRequest { structure_size: 4, reserved: 2 }
}

crate::body::empty_body! {
    /// SMB2 LOGOFF Response (MS-SMB2 2.2.8).
    LogoffResponse { structure_size: 4, reserved: 2 }
}
