//! The symbolic link reparse buffer (MS-FSCC 2.1.2.4, IO_REPARSE_TAG_SYMLINK): what a client
//! sends in FSCTL_SET_REPARSE_POINT to make a symlink and reads back with
//! FSCTL_GET_REPARSE_POINT. The server keeps such buffers as data (smbq-server's reparse
//! module) and never parses them; smbq's client writes and reads them.

use crate::cursor::{Reader, Writer, utf16le_decode, utf16le_encode};
use crate::error::DecodeError;
use crate::fscc::attributes::IO_REPARSE_TAG_SYMLINK;

/// SYMLINK_FLAG_RELATIVE: the target is relative to the link's directory.
pub const SYMLINK_FLAG_RELATIVE: u32 = 0x0000_0001;

/// A symbolic link's reparse data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymlinkReparse {
    pub substitute_name: String,
    pub print_name: String,
    pub flags: u32,
}

impl SymlinkReparse {
    /// A link to `target` as POSIX clients make one: substitute and print name alike,
    /// relative unless the target starts with a separator.
    pub fn to(target: &str) -> Self {
        let flags = if target.starts_with(['/', '\\']) {
            0
        } else {
            SYMLINK_FLAG_RELATIVE
        };
        Self {
            substitute_name: target.to_owned(),
            print_name: target.to_owned(),
            flags,
        }
    }

    /// The whole REPARSE_DATA_BUFFER: tag, ReparseDataLength, then the names' offsets and
    /// lengths, the flags, and PathBuffer with the substitute name then the print name.
    pub fn encode(&self) -> Vec<u8> {
        let sub = utf16le_encode(&self.substitute_name);
        let print = utf16le_encode(&self.print_name);
        let len16 = |n: usize| u16::try_from(n).unwrap_or(u16::MAX);
        let mut w = Writer::new();
        w.u32(IO_REPARSE_TAG_SYMLINK)
            .u16(len16(12 + sub.len() + print.len()))
            .u16(0)
            .u16(0)
            .u16(len16(sub.len()))
            .u16(len16(sub.len()))
            .u16(len16(print.len()))
            .u32(self.flags)
            .bytes(&sub)
            .bytes(&print);
        w.into_vec()
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        if r.u32()? != IO_REPARSE_TAG_SYMLINK {
            return Err(DecodeError::InvalidField {
                field: "ReparseTag",
            });
        }
        let len = usize::from(r.u16()?);
        r.skip(2)?;
        let data = r.bytes(len)?;
        let mut r = Reader::new(data);
        let sub_off = usize::from(r.u16()?);
        let sub_len = usize::from(r.u16()?);
        let print_off = usize::from(r.u16()?);
        let print_len = usize::from(r.u16()?);
        let flags = r.u32()?;
        let path = r.rest();
        let name = |off, len| crate::cursor::slice_at(path, off, len).and_then(utf16le_decode);
        Ok(Self {
            substitute_name: name(sub_off, sub_len)?,
            print_name: name(print_off, print_len)?,
            flags,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes Samba's reparse_data_buffer_marshall_syml gives a relative link to "t".
    #[test]
    fn round_trips_samba_layout() {
        let want = [
            0x0C, 0x00, 0x00, 0xA0, 16, 0, 0, 0, 0, 0, 2, 0, 2, 0, 2, 0, 1, 0, 0, 0, b't', 0, b't',
            0,
        ];
        let s = SymlinkReparse::to("t");
        assert_eq!(s.encode(), want);
        assert_eq!(SymlinkReparse::decode(&want).ok(), Some(s));
        assert_eq!(SymlinkReparse::to("/abs").flags, 0);
        assert!(SymlinkReparse::decode(&want[..10]).is_err());
        let mut other = want;
        other[3] = 0x80;
        assert!(SymlinkReparse::decode(&other).is_err());
    }
}
