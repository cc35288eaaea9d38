//! SMB2 ECHO request and response (MS-SMB2 2.2.28, 2.2.29): a 4-byte body,
//! StructureSize 4 and Reserved. Tested with the other empty bodies in `body`.

crate::body::empty_body! {
    /// SMB2 ECHO Request (MS-SMB2 2.2.28).
    EchoRequest { structure_size: 4, reserved: 2 }
}

crate::body::empty_body! {
    /// SMB2 ECHO Response (MS-SMB2 2.2.29).
    EchoResponse { structure_size: 4, reserved: 2 }
}
