//! The SMB2 packet header, sync and async forms (MS-SMB2 2.2.1.1, 2.2.1.2).

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::ntstatus::NtStatus;

/// Every SMB2 header is 64 bytes; message offsets on the wire count from its first byte.
pub const HEADER_LEN: usize = 64;
/// 0xFE 'S' 'M' 'B'
pub const PROTOCOL_ID: [u8; 4] = [0xFE, b'S', b'M', b'B'];
/// SMB1 protocol id, only ever seen in a multi-protocol NEGOTIATE.
pub const SMB1_PROTOCOL_ID: [u8; 4] = [0xFF, b'S', b'M', b'B'];

crate::open_enum! {
    /// SMB2 command codes (MS-SMB2 2.2.1.2).
    Command(u16) {
        NEGOTIATE = 0x0000,
        SESSION_SETUP = 0x0001,
        LOGOFF = 0x0002,
        TREE_CONNECT = 0x0003,
        TREE_DISCONNECT = 0x0004,
        CREATE = 0x0005,
        CLOSE = 0x0006,
        FLUSH = 0x0007,
        READ = 0x0008,
        WRITE = 0x0009,
        LOCK = 0x000A,
        IOCTL = 0x000B,
        CANCEL = 0x000C,
        ECHO = 0x000D,
        QUERY_DIRECTORY = 0x000E,
        CHANGE_NOTIFY = 0x000F,
        QUERY_INFO = 0x0010,
        SET_INFO = 0x0011,
        OPLOCK_BREAK = 0x0012,
    }
}

crate::open_enum! {
    /// Dialect revisions (MS-SMB2 2.2.3).
    Dialect(u16) {
        SMB2_0_2 = 0x0202,
        SMB2_1 = 0x0210,
        SMB3_0 = 0x0300,
        SMB3_0_2 = 0x0302,
        SMB3_1_1 = 0x0311,
        /// "SMB 2.???": answer to an SMB1 negotiate offering SMB 2.1 or later.
        WILDCARD = 0x02FF,
    }
}

impl Dialect {
    /// SMB 3.x family (signing with CMAC/GMAC, encryption, KDF).
    pub fn is_smb3(self) -> bool {
        self.0 >= 0x0300 && self != Self::WILDCARD
    }
}

/// Header flag bits (MS-SMB2 2.2.1.2).
pub mod flags {
    pub const SERVER_TO_REDIR: u32 = 0x0000_0001;
    pub const ASYNC_COMMAND: u32 = 0x0000_0002;
    pub const RELATED_OPERATIONS: u32 = 0x0000_0004;
    pub const SIGNED: u32 = 0x0000_0008;
    pub const PRIORITY_MASK: u32 = 0x0000_0070;
    pub const DFS_OPERATIONS: u32 = 0x1000_0000;
    pub const REPLAY_OPERATION: u32 = 0x2000_0000;
}

/// An SMB2 header. `async_id` is set iff the ASYNC flag is; otherwise `tree_id` is meaningful.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub credit_charge: u16,
    /// In requests: ChannelSequence/Reserved (3.x) or Status (2.x, zero). In responses: Status.
    pub status: NtStatus,
    pub command: Command,
    /// CreditRequest in requests, CreditResponse in responses.
    pub credits: u16,
    pub flags: u32,
    pub next_command: u32,
    pub message_id: u64,
    /// Sync: Reserved(4) + TreeId(4). Async: AsyncId(8).
    pub async_id: Option<u64>,
    pub tree_id: u32,
    pub session_id: u64,
    pub signature: [u8; 16],
}

impl Header {
    pub fn is_response(&self) -> bool {
        self.flags & flags::SERVER_TO_REDIR != 0
    }
    pub fn is_related(&self) -> bool {
        self.flags & flags::RELATED_OPERATIONS != 0
    }
    pub fn is_signed(&self) -> bool {
        self.flags & flags::SIGNED != 0
    }
    pub fn is_async(&self) -> bool {
        self.flags & flags::ASYNC_COMMAND != 0
    }

    /// Decodes the first 64 bytes of `msg`.
    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(msg);
        if r.array::<4>()? != PROTOCOL_ID {
            return Err(DecodeError::BadProtocolId);
        }
        r.structure_size(64)?;
        let credit_charge = r.u16()?;
        let status = NtStatus(r.u32()?);
        let command = Command(r.u16()?);
        let credits = r.u16()?;
        let flags = r.u32()?;
        let next_command = r.u32()?;
        let message_id = r.u64()?;
        let (async_id, tree_id) = if flags & flags::ASYNC_COMMAND != 0 {
            (Some(r.u64()?), 0)
        } else {
            let _reserved = r.u32()?;
            (None, r.u32()?)
        };
        let session_id = r.u64()?;
        let signature = r.array::<16>()?;
        Ok(Self {
            credit_charge,
            status,
            command,
            credits,
            flags,
            next_command,
            message_id,
            async_id,
            tree_id,
            session_id,
            signature,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        let mut flags = self.flags;
        if self.async_id.is_some() {
            flags |= flags::ASYNC_COMMAND;
        } else {
            flags &= !flags::ASYNC_COMMAND;
        }
        w.bytes(&PROTOCOL_ID)
            .u16(64)
            .u16(self.credit_charge)
            .u32(self.status.0)
            .u16(self.command.0)
            .u16(self.credits)
            .u32(flags)
            .u32(self.next_command)
            .u64(self.message_id);
        match self.async_id {
            Some(id) => {
                w.u64(id);
            }
            None => {
                w.u32(0).u32(self.tree_id);
            }
        }
        w.u64(self.session_id).bytes(&self.signature);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(HEADER_LEN);
        self.encode(&mut w);
        w.into_vec()
    }
}

/// Byte range of the Signature field inside a header.
pub const SIGNATURE_RANGE: core::ops::Range<usize> = 48..64;
/// Byte offset of the Flags field inside a header.
pub const FLAGS_OFFSET: usize = 16;
/// Byte offset of the NextCommand field inside a header.
pub const NEXT_COMMAND_OFFSET: usize = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_header_round_trip() {
        let h = Header {
            credit_charge: 1,
            status: NtStatus::SUCCESS,
            command: Command::CREATE,
            credits: 31,
            flags: flags::SIGNED,
            next_command: 0,
            message_id: 7,
            async_id: None,
            tree_id: 0x1234,
            session_id: 0x4000_0000_0001,
            signature: [0xAA; 16],
        };
        let b = h.to_bytes();
        assert_eq!(b.len(), HEADER_LEN);
        assert_eq!(&b[..4], &PROTOCOL_ID);
        assert_eq!(Header::decode(&b).unwrap(), h);
    }

    #[test]
    fn async_header_round_trip() {
        let h = Header {
            command: Command::CHANGE_NOTIFY,
            flags: flags::SERVER_TO_REDIR | flags::ASYNC_COMMAND,
            status: NtStatus::PENDING,
            async_id: Some(0x55),
            ..Default::default()
        };
        let b = h.to_bytes();
        let d = Header::decode(&b).unwrap();
        assert_eq!(d.async_id, Some(0x55));
        assert_eq!(d.status, NtStatus::PENDING);
        assert!(d.is_async() && d.is_response());
    }

    #[test]
    fn rejects_bad_id_and_short_input() {
        let mut b = Header::default().to_bytes();
        assert!(Header::decode(&b[..63]).is_err());
        b[0] = 0xFF;
        assert_eq!(Header::decode(&b), Err(DecodeError::BadProtocolId));
    }
}
