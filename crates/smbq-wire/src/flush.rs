//! SMB2 FLUSH request and response (MS-SMB2 2.2.17, 2.2.18).

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::file_id::FileId;

/// A FLUSH request (MS-SMB2 2.2.17): two reserved fields and the FileId.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FlushRequest {
    pub file_id: FileId,
}

impl FlushRequest {
    pub const STRUCTURE_SIZE: u16 = 24;

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        r.skip(6)?;
        Ok(Self {
            file_id: FileId::decode(&mut r)?,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE).u16(0).u32(0);
        self.file_id.encode(w);
    }
}

crate::body::empty_body! {
    /// A FLUSH response (MS-SMB2 2.2.18): StructureSize 4 and a reserved u16.
    FlushResponse { structure_size: 4, reserved: 2 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as msg;

    #[test]
    fn request_round_trip_and_hand_assembled() {
        let req = FlushRequest {
            file_id: FileId {
                persistent: 0x0C_0000_0414,
                volatile: 0x0C_0010_0051,
            },
        };
        let mut w = Writer::new();
        req.encode(&mut w);
        assert_eq!(
            hex::encode(w.as_slice()),
            "1800000000000000140400000c000000510010000c000000"
        );
        assert_eq!(FlushRequest::decode(&msg(w.as_slice())).unwrap(), req);
        // Reserved fields are ignored on receipt.
        let mut b = w.into_vec();
        b[2..8].fill(0xEE);
        assert_eq!(FlushRequest::decode(&msg(&b)).unwrap(), req);
        assert!(FlushRequest::decode(&msg(&b[..20])).is_err());
    }

    #[test]
    fn response_round_trip() {
        let mut w = Writer::new();
        FlushResponse.encode(&mut w);
        assert_eq!(w.as_slice(), &[4, 0, 0, 0]);
        assert_eq!(
            FlushResponse::decode(&msg(w.as_slice())).unwrap(),
            FlushResponse
        );
        assert!(FlushResponse::decode(&msg(&[2, 0, 0, 0])).is_err());
    }
}
