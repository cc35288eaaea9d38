//! SMB2 CANCEL request (MS-SMB2 2.2.30; it has no response): a 4-byte body, StructureSize 4
//! and Reserved.

use crate::cursor::Writer;
use crate::error::DecodeError;

/// SMB2 CANCEL Request (MS-SMB2 2.2.30).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CancelRequest;

impl CancelRequest {
    pub const STRUCTURE_SIZE: u16 = 4;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        crate::cursor::decode_reserved4(msg).map(|()| Self)
    }

    pub fn encode(&self, w: &mut Writer) {
        crate::cursor::encode_reserved4(w);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::header::Header;

    #[test]
    fn round_trip_and_hand_assembled() {
        let mut w = Writer::new();
        CancelRequest.encode(&mut w);
        assert_eq!(w.as_slice(), &[4, 0, 0, 0]);
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(w.as_slice());
        assert_eq!(CancelRequest::decode(&m).unwrap(), CancelRequest);
    }

    #[test]
    fn rejects_wrong_size_and_truncation() {
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(&[8, 0, 0, 0]);
        assert!(matches!(
            CancelRequest::decode(&m),
            Err(DecodeError::StructureSize {
                expected: 4,
                got: 8
            })
        ));
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(&[4, 0, 0]);
        assert!(CancelRequest::decode(&m).is_err());
    }
}
