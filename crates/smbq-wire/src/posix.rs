//! The SMB3 POSIX extensions (POSIX-SMB2 and POSIX-FSCC, smb3posix.org; as Samba 4.25 and the
//! Linux cifs client speak them): the negotiate context, the create context, the wire mode,
//! FILE_POSIX_INFORMATION (QUERY_INFO class 100 and QUERY_DIRECTORY class 0x64) and
//! FILE_FS_POSIX_INFORMATION (file-system class 100). Sans-IO, like the rest of the crate.
//!
//! All integers are little-endian and nothing is padded: Samba encodes these structures with
//! NDR_NOALIGN (librpc/idl/smb3posix.idl).

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;
use crate::security::Sid;

/// The 16 bytes that name the extensions: the data of the SMB2_POSIX_EXTENSIONS_AVAILABLE
/// negotiate context (type 0x100) and the name of the POSIX create context. Sent as these
/// bytes, in this order (not swapped as a GUID would be).
pub const TAG: [u8; 16] = [
    0x93, 0xAD, 0x25, 0x50, 0x9C, 0xB4, 0x11, 0xE7, 0xB4, 0x23, 0x83, 0xDE, 0x96, 0x8B, 0xCD, 0x7C,
];

/// SMB2_POSIX_EXTENSIONS_AVAILABLE, the negotiate context type (0x100, which MS-SMB2 2.2.3.1
/// lists as reserved).
pub const NEGOTIATE_CONTEXT: crate::negotiate::NegotiateContextType =
    crate::negotiate::NegotiateContextType::CONTEXTTYPE_RESERVED;

/// FileInformationClass / FsInformationClass of the POSIX information (QUERY_INFO with info
/// type FILE or FILESYSTEM, and QUERY_DIRECTORY).
pub const INFO_CLASS: u8 = 100;

/// What a NEGOTIATE's POSIX context asks (POSIX-SMB2 2.2.3.1.8; Samba
/// smb2_negotiate_context_process_posix): its data is a list of 16-byte tags, and the
/// extensions are on when one of them is [`TAG`]. Data whose length is not a multiple of 16
/// is malformed (STATUS_INVALID_PARAMETER); a list without the tag asks for nothing.
pub fn negotiate_asks(data: &[u8]) -> Result<bool, DecodeError> {
    if !data.len().is_multiple_of(TAG.len()) {
        return Err(DecodeError::InvalidField {
            field: "PosixExtensions.DataLength",
        });
    }
    Ok(data.chunks_exact(TAG.len()).any(|c| c == TAG))
}

/// The mode a POSIX create context asks for (4 bytes: the wire mode, of which only the
/// permission bits 07777 are used). Any other length is malformed.
pub fn create_request_mode(data: &[u8]) -> Result<u32, DecodeError> {
    let b: [u8; 4] = data.try_into().map_err(|_| DecodeError::InvalidField {
        field: "PosixCreateContext.Mode",
    })?;
    Ok(u32::from_le_bytes(b))
}

/// The file types of the wire mode, in its bits 12-15 (POSIX-FSCC; Samba
/// unix_filetype_to_wire). Not Linux's S_IFMT values.
pub mod file_type {
    pub const FILE: u32 = 0;
    pub const DIRECTORY: u32 = 1;
    pub const SYMLINK: u32 = 2;
    pub const CHARDEV: u32 = 3;
    pub const BLOCKDEV: u32 = 4;
    pub const FIFO: u32 = 5;
    pub const SOCKET: u32 = 6;
}

/// The permission bits the wire mode carries (rwx for owner, group, others, and the setuid,
/// setgid and sticky bits, with Linux's octal values).
pub const PERMISSION_BITS: u32 = 0o7777;

/// A Linux `st_mode` as the wire mode: its permission bits, and its type as [`file_type`] in
/// bits 12-15.
pub fn wire_mode(st_mode: u32) -> u32 {
    const S_IFMT: u32 = 0o170000;
    let kind = match st_mode & S_IFMT {
        0o040000 => file_type::DIRECTORY,
        0o120000 => file_type::SYMLINK,
        0o020000 => file_type::CHARDEV,
        0o060000 => file_type::BLOCKDEV,
        0o010000 => file_type::FIFO,
        0o140000 => file_type::SOCKET,
        _ => file_type::FILE,
    };
    (st_mode & PERMISSION_BITS) | (kind << 12)
}

/// The part of FILE_POSIX_INFORMATION that is also the POSIX create context's response
/// (Samba's smb3_posix_cc_info): link count, reparse tag, wire mode, owner and group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PosixStat {
    pub nlink: u32,
    pub reparse_tag: u32,
    /// The wire mode ([`wire_mode`]).
    pub mode: u32,
    pub owner: Sid,
    pub group: Sid,
}

impl PosixStat {
    pub fn encoded_len(&self) -> usize {
        12 + self.owner.encoded_len() + self.group.encoded_len()
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.nlink).u32(self.reparse_tag).u32(self.mode);
        self.owner.encode(w);
        self.group.encode(w);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        self.encode(&mut w);
        w.into_vec()
    }

    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            nlink: r.u32()?,
            reparse_tag: r.u32()?,
            mode: r.u32()?,
            owner: Sid::read(r)?,
            group: Sid::read(r)?,
        })
    }
}

/// FILE_POSIX_INFORMATION: 68 bytes of times, sizes, attributes and identity, then
/// [`PosixStat`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PosixInfo {
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub end_of_file: u64,
    pub allocation_size: u64,
    pub file_attributes: u32,
    pub inode: u64,
    pub device: u32,
    pub stat: PosixStat,
}

impl PosixInfo {
    /// The bytes before [`PosixStat`].
    pub const FIXED_LEN: usize = 68;

    pub fn encoded_len(&self) -> usize {
        Self::FIXED_LEN + self.stat.encoded_len()
    }

    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.creation_time)
            .u64(self.last_access_time)
            .u64(self.last_write_time)
            .u64(self.change_time)
            .u64(self.end_of_file)
            .u64(self.allocation_size)
            .u32(self.file_attributes)
            .u64(self.inode)
            .u32(self.device)
            .u32(0);
        self.stat.encode(w);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(self.encoded_len());
        self.encode(&mut w);
        w.into_vec()
    }

    pub fn read(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let creation_time = r.u64()?;
        let last_access_time = r.u64()?;
        let last_write_time = r.u64()?;
        let change_time = r.u64()?;
        let end_of_file = r.u64()?;
        let allocation_size = r.u64()?;
        let file_attributes = r.u32()?;
        let inode = r.u64()?;
        let device = r.u32()?;
        r.skip(4)?;
        Ok(Self {
            creation_time,
            last_access_time,
            last_write_time,
            change_time,
            end_of_file,
            allocation_size,
            file_attributes,
            inode,
            device,
            stat: PosixStat::read(r)?,
        })
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut Reader::new(buf))
    }
}

/// FILE_FS_POSIX_INFORMATION (file-system class 100): statvfs's numbers, 56 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FsPosixInfo {
    pub optimal_transfer_size: u32,
    pub block_size: u32,
    pub total_blocks: u64,
    pub free_blocks: u64,
    pub user_free_blocks: u64,
    pub total_file_nodes: u64,
    pub free_file_nodes: u64,
    pub fs_identifier: u64,
}

impl FsPosixInfo {
    pub const LEN: usize = 56;

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.optimal_transfer_size)
            .u32(self.block_size)
            .u64(self.total_blocks)
            .u64(self.free_blocks)
            .u64(self.user_free_blocks)
            .u64(self.total_file_nodes)
            .u64(self.free_file_nodes)
            .u64(self.fs_identifier);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(buf);
        Ok(Self {
            optimal_transfer_size: r.u32()?,
            block_size: r.u32()?,
            total_blocks: r.u64()?,
            free_blocks: r.u64()?,
            user_free_blocks: r.u64()?,
            total_file_nodes: r.u64()?,
            free_file_nodes: r.u64()?,
            fs_identifier: r.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PosixStat {
        PosixStat {
            nlink: 1,
            reparse_tag: 0,
            mode: wire_mode(0o100644),
            owner: Sid::unix_user(1000),
            group: Sid::unix_group(1000),
        }
    }

    /// The 44 bytes Samba's smb3_posix_cc_info gives a regular file 0644 with one link,
    /// owned by unmapped uid and gid 1000 (NDR_NOALIGN: no padding).
    #[test]
    fn create_context_response_matches_samba_bytes() {
        let want: Vec<u8> = [
            &[1, 0, 0, 0, 0, 0, 0, 0, 0xA4, 0x01, 0, 0][..],
            &[1, 2, 0, 0, 0, 0, 0, 22, 1, 0, 0, 0, 0xE8, 3, 0, 0],
            &[1, 2, 0, 0, 0, 0, 0, 22, 2, 0, 0, 0, 0xE8, 3, 0, 0],
        ]
        .concat();
        assert_eq!(sample().to_bytes(), want);
        assert_eq!(
            PosixStat::read(&mut Reader::new(&want)).ok(),
            Some(sample())
        );
    }

    #[test]
    fn wire_mode_carries_the_type_in_bits_12_to_15() {
        assert_eq!(wire_mode(0o100644), 0o644);
        assert_eq!(wire_mode(0o040755), 0x11ED);
        assert_eq!(wire_mode(0o120777), 0x21FF);
        assert_eq!(wire_mode(0o020600) >> 12, file_type::CHARDEV);
        assert_eq!(wire_mode(0o060600) >> 12, file_type::BLOCKDEV);
        assert_eq!(wire_mode(0o010600) >> 12, file_type::FIFO);
        assert_eq!(wire_mode(0o140600) >> 12, file_type::SOCKET);
        assert_eq!(wire_mode(0o104755), 0o4755);
    }

    #[test]
    fn negotiate_data_is_a_list_of_tags() {
        assert_eq!(negotiate_asks(&TAG).ok(), Some(true));
        assert_eq!(negotiate_asks(&[[0u8; 16], TAG].concat()).ok(), Some(true));
        assert_eq!(negotiate_asks(&[0u8; 16]).ok(), Some(false));
        assert_eq!(negotiate_asks(&[]).ok(), Some(false));
        assert!(negotiate_asks(&TAG[..5]).is_err());
        assert!(negotiate_asks(&[TAG.as_slice(), &[0]].concat()).is_err());
    }

    #[test]
    fn create_request_is_four_bytes() {
        assert_eq!(
            create_request_mode(&0o755u32.to_le_bytes()).ok(),
            Some(0o755)
        );
        assert!(create_request_mode(&[0; 5]).is_err());
        assert!(create_request_mode(&[]).is_err());
    }

    /// nlink sits at offset 68 and the mode at 76, where libsmbclient's
    /// `smb311_posix.statinfo` reads them.
    #[test]
    fn posix_information_layout() {
        let info = PosixInfo {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            end_of_file: 5,
            allocation_size: 4096,
            file_attributes: 0x20,
            inode: 77,
            device: 9,
            stat: PosixStat {
                nlink: 3,
                ..sample()
            },
        };
        let b = info.to_bytes();
        assert_eq!(b.len(), 112);
        assert_eq!(b.get(52..60), Some(&77u64.to_le_bytes()[..]));
        assert_eq!(b.get(68..72), Some(&3u32.to_le_bytes()[..]));
        assert_eq!(b.get(76..80), Some(&0o644u32.to_le_bytes()[..]));
        assert_eq!(PosixInfo::decode(&b).ok(), Some(info));
        assert!(PosixInfo::decode(b.get(..100).unwrap_or_default()).is_err());
    }

    #[test]
    fn fs_information_is_56_bytes() {
        let fs = FsPosixInfo {
            optimal_transfer_size: 4096,
            block_size: 4096,
            total_blocks: 10,
            free_blocks: 5,
            user_free_blocks: 4,
            total_file_nodes: 100,
            free_file_nodes: 50,
            fs_identifier: 0xABCD,
        };
        let mut w = Writer::new();
        fs.encode(&mut w);
        assert_eq!(w.len(), FsPosixInfo::LEN);
        assert_eq!(FsPosixInfo::decode(w.as_slice()).ok(), Some(fs));
    }
}
