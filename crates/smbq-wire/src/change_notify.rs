//! SMB2 CHANGE_NOTIFY request and response (MS-SMB2 2.2.35, 2.2.36), and the
//! FILE_NOTIFY_INFORMATION list the response carries (MS-FSCC 2.7.1).

use crate::body;
use crate::cursor::{Reader, Writer, len32, to_usize, utf16le_decode, utf16le_encode};
use crate::error::DecodeError;
use crate::file_id::FileId;

/// CHANGE_NOTIFY request Flags (MS-SMB2 2.2.35).
pub mod flags {
    pub const WATCH_TREE: u16 = 0x0001;
}

/// CompletionFilter bits (MS-SMB2 2.2.35).
pub mod completion_filter {
    pub const FILE_NAME: u32 = 0x0000_0001;
    pub const DIR_NAME: u32 = 0x0000_0002;
    pub const ATTRIBUTES: u32 = 0x0000_0004;
    pub const SIZE: u32 = 0x0000_0008;
    pub const LAST_WRITE: u32 = 0x0000_0010;
    pub const LAST_ACCESS: u32 = 0x0000_0020;
    pub const CREATION: u32 = 0x0000_0040;
    pub const EA: u32 = 0x0000_0080;
    pub const SECURITY: u32 = 0x0000_0100;
    pub const STREAM_NAME: u32 = 0x0000_0200;
    pub const STREAM_SIZE: u32 = 0x0000_0400;
    pub const STREAM_WRITE: u32 = 0x0000_0800;
}

crate::open_enum! {
    /// FILE_NOTIFY_INFORMATION Action (MS-FSCC 2.7.1).
    NotifyAction(u32) {
        ADDED = 0x0000_0001,
        REMOVED = 0x0000_0002,
        MODIFIED = 0x0000_0003,
        RENAMED_OLD_NAME = 0x0000_0004,
        RENAMED_NEW_NAME = 0x0000_0005,
        ADDED_STREAM = 0x0000_0006,
        REMOVED_STREAM = 0x0000_0007,
        MODIFIED_STREAM = 0x0000_0008,
        REMOVED_BY_DELETE = 0x0000_0009,
        ID_NOT_TUNNELLED = 0x0000_000A,
        TUNNELLED_ID_COLLISION = 0x0000_000B,
    }
}

/// Most FILE_NOTIFY_INFORMATION entries parsed from one response.
pub const MAX_NOTIFY_ENTRIES: usize = 4096;

/// SMB2 CHANGE_NOTIFY Request (MS-SMB2 2.2.35).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ChangeNotifyRequest {
    pub flags: u16,
    pub output_buffer_length: u32,
    pub file_id: FileId,
    pub completion_filter: u32,
}

impl ChangeNotifyRequest {
    pub const STRUCTURE_SIZE: u16 = 32;

    pub fn watch_tree(&self) -> bool {
        self.flags & flags::WATCH_TREE != 0
    }

    pub fn decode(msg: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::body(msg, Self::STRUCTURE_SIZE)?;
        let flags = r.u16()?;
        let output_buffer_length = r.u32()?;
        let file_id = FileId::decode(&mut r)?;
        let completion_filter = r.u32()?;
        let _reserved = r.u32()?;
        Ok(Self {
            flags,
            output_buffer_length,
            file_id,
            completion_filter,
        })
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u16(Self::STRUCTURE_SIZE)
            .u16(self.flags)
            .u32(self.output_buffer_length);
        self.file_id.encode(w);
        w.u32(self.completion_filter).u32(0);
    }
}

body::output_buffer_body! {
    /// SMB2 CHANGE_NOTIFY Response (MS-SMB2 2.2.36). A non-empty buffer must lie inside the
    /// message (this decoder has never also insisted that it start after the fixed part).
    ChangeNotifyResponse {
        /// A FILE_NOTIFY_INFORMATION list (MS-FSCC 2.7.1).
        output,
        placement: InsideMessage,
    }
}

/// Encodes FILE_NOTIFY_INFORMATION entries (MS-FSCC 2.7.1): each entry after the first
/// starts 4-byte aligned; the last has NextEntryOffset 0. Returns the encoded length so the
/// caller can compare it with OutputBufferLength (too long means STATUS_NOTIFY_ENUM_DIR).
pub fn encode_notify_entries<'n>(
    entries: impl IntoIterator<Item = (NotifyAction, &'n str)>,
    w: &mut Writer,
) -> usize {
    let start = w.len();
    let mut prev_entry: Option<usize> = None;
    for (action, name) in entries {
        if let Some(prev) = prev_entry {
            w.align_from(start, 4);
            w.patch_u32(prev, len32(w.len() - prev));
        }
        prev_entry = Some(w.len());
        let name = utf16le_encode(name);
        w.u32(0).u32(action.0).u32(len32(name.len())).bytes(&name);
    }
    w.len() - start
}

/// Parses a FILE_NOTIFY_INFORMATION list into (action, name) pairs.
pub fn decode_notify_entries(buf: &[u8]) -> Result<Vec<(NotifyAction, String)>, DecodeError> {
    let mut out = Vec::new();
    if buf.is_empty() {
        return Ok(out);
    }
    let mut pos = 0usize;
    loop {
        if out.len() == MAX_NOTIFY_ENTRIES {
            return Err(DecodeError::TooLong {
                field: "FILE_NOTIFY_INFORMATION",
                len: out.len() + 1,
                limit: MAX_NOTIFY_ENTRIES,
            });
        }
        let mut r = Reader::at(buf, pos)?;
        let next = to_usize(r.u32()?);
        let action = NotifyAction(r.u32()?);
        let name_len = to_usize(r.u32()?);
        let name = utf16le_decode(r.bytes(name_len)?)?;
        out.push((action, name));
        if next == 0 {
            return Ok(out);
        }
        // NextEntryOffset must move forward past this entry's fixed part.
        if next < 12 {
            return Err(DecodeError::InvalidField {
                field: "NextEntryOffset",
            });
        }
        pos = pos.checked_add(next).ok_or(DecodeError::InvalidField {
            field: "NextEntryOffset",
        })?;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::body::test_message as with_header;

    #[test]
    fn request_hand_assembled() {
        let req = ChangeNotifyRequest {
            flags: flags::WATCH_TREE,
            output_buffer_length: 0x1000,
            file_id: FileId {
                persistent: 5,
                volatile: 6,
            },
            completion_filter: completion_filter::FILE_NAME | completion_filter::DIR_NAME,
        };
        let mut expect = vec![32, 0, 1, 0, 0, 0x10, 0, 0];
        expect.extend_from_slice(&5u64.to_le_bytes());
        expect.extend_from_slice(&6u64.to_le_bytes());
        expect.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
        let mut w = Writer::new();
        req.encode(&mut w);
        assert_eq!(w.as_slice(), &expect[..]);
        let d = ChangeNotifyRequest::decode(&with_header(&expect)).unwrap();
        assert_eq!(d, req);
        assert!(d.watch_tree());
        assert!(ChangeNotifyRequest::decode(&with_header(&expect[..31])).is_err());
    }

    #[test]
    fn entries_are_4_aligned_and_parse_back() {
        let mut w = Writer::new();
        let n = encode_notify_entries(
            [
                (NotifyAction::ADDED, "a"),
                (NotifyAction::RENAMED_OLD_NAME, "bc"),
                (NotifyAction::REMOVED, "d"),
            ],
            &mut w,
        );
        let b = w.into_vec();
        assert_eq!(n, b.len());
        // Entry 1: 12 + 2 = 14 -> next at 16. Entry 2: 12 + 4 = 16 -> next at 32. Entry 3: 14.
        assert_eq!(&b[0..4], &16u32.to_le_bytes());
        assert_eq!(&b[4..8], &1u32.to_le_bytes());
        assert_eq!(&b[8..12], &2u32.to_le_bytes());
        assert_eq!(&b[12..14], &[b'a', 0]);
        assert_eq!(&b[16..20], &16u32.to_le_bytes());
        assert_eq!(&b[32..36], &0u32.to_le_bytes());
        assert_eq!(b.len(), 32 + 14);
        let back = decode_notify_entries(&b).unwrap();
        assert_eq!(
            back,
            vec![
                (NotifyAction::ADDED, "a".to_string()),
                (NotifyAction::RENAMED_OLD_NAME, "bc".to_string()),
                (NotifyAction::REMOVED, "d".to_string()),
            ]
        );
    }

    #[test]
    fn response_round_trip() {
        let mut w = Writer::new();
        encode_notify_entries([(NotifyAction::MODIFIED, "f.txt")], &mut w);
        let list = w.into_vec();
        let resp = ChangeNotifyResponse { output: &list };
        let mut w = Writer::new();
        resp.encode(&mut w);
        let body = w.into_vec();
        assert_eq!(&body[0..4], &[9, 0, 72, 0]);
        let m = with_header(&body);
        assert_eq!(ChangeNotifyResponse::decode(&m).unwrap(), resp);
        let empty = ChangeNotifyResponse::default();
        let mut w = Writer::new();
        empty.encode(&mut w);
        assert_eq!(w.len(), 9);
        assert_eq!(
            ChangeNotifyResponse::decode(&with_header(w.as_slice())).unwrap(),
            empty
        );
    }

    #[test]
    fn hostile_entry_lists_fail() {
        // NextEntryOffset pointing backwards/into itself.
        let mut b = vec![4, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0];
        assert!(decode_notify_entries(&b).is_err());
        // Past the end.
        b[0] = 64;
        assert!(decode_notify_entries(&b).is_err());
        // Name longer than buffer.
        let b = [0, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, b'a', 0];
        assert!(decode_notify_entries(&b).is_err());
        assert!(decode_notify_entries(&[]).unwrap().is_empty());
    }
}
