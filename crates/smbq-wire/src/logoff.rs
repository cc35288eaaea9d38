//! SMB2 LOGOFF request and response (MS-SMB2 2.2.7, 2.2.8): a 4-byte body,
//! StructureSize 4 and Reserved.

use crate::cursor::Writer;
use crate::error::DecodeError;

/// SMB2 LOGOFF Request (MS-SMB2 2.2.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LogoffRequest;

impl LogoffRequest {
    pub const STRUCTURE_SIZE: u16 = 4;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        crate::cursor::decode_reserved4(msg).map(|()| Self)
    }

    pub fn encode(&self, w: &mut Writer) {
        crate::cursor::encode_reserved4(w);
    }
}

/// SMB2 LOGOFF Response (MS-SMB2 2.2.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LogoffResponse;

impl LogoffResponse {
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
        LogoffRequest.encode(&mut w);
        assert_eq!(w.as_slice(), &[4, 0, 0, 0]);
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(w.as_slice());
        assert_eq!(LogoffRequest::decode(&m).unwrap(), LogoffRequest);
        let mut w = Writer::new();
        LogoffResponse.encode(&mut w);
        assert_eq!(w.as_slice(), &[4, 0, 0, 0]);
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(w.as_slice());
        assert_eq!(LogoffResponse::decode(&m).unwrap(), LogoffResponse);
    }

    #[test]
    fn rejects_wrong_size_and_truncation() {
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(&[8, 0, 0, 0]);
        assert!(matches!(
            LogoffRequest::decode(&m),
            Err(DecodeError::StructureSize {
                expected: 4,
                got: 8
            })
        ));
        let mut m = Header::default().to_bytes();
        m.extend_from_slice(&[4, 0, 0]);
        assert!(LogoffRequest::decode(&m).is_err());
    }
}
