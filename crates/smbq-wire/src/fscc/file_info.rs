//! File information classes (MS-FSCC 2.4) carried in QUERY_INFO responses and SET_INFO requests
//! with InfoType SMB2_0_INFO_FILE. Fixed-size classes expose `LEN` (exact encoded size) and
//! `MIN_LEN` (a shorter SET_INFO buffer is STATUS_INFO_LENGTH_MISMATCH at the handler; any
//! other decode error is STATUS_INVALID_PARAMETER).

use super::chain;
use super::fixed::{fixed_class, need};
use crate::cursor::{Reader, Writer, len32, to_usize, utf16le_decode, utf16le_encode};
use crate::error::DecodeError;

/// Cap on a file name carried in a class (a UTF-16 path is at most 32767 units on Windows).
pub const MAX_NAME_BYTES: usize = 64 * 1024;
/// Cap on entries in a decoded stream or EA list; a SET_INFO buffer is already bounded, this
/// bounds the `Vec` independently of the transport limit.
pub const MAX_LIST_ENTRIES: usize = 4096;

fixed_class! {
    /// FileBasicInformation (MS-FSCC 2.4.7): four FILETIMEs, attributes, 4 reserved bytes.
    /// In SET_INFO the times follow [`crate::filetime::SetTime`] and attributes 0 means "keep".
    BasicInfo, len = 40, reserved = 4, {
        creation_time: u64,
        last_access_time: u64,
        last_write_time: u64,
        change_time: u64,
        file_attributes: u32,
    }
}

fixed_class! {
    /// FileStandardInformation (MS-FSCC 2.4 FILE_STANDARD_INFORMATION): 24 bytes.
    StandardInfo, len = 24, reserved = 2, {
        allocation_size: u64,
        end_of_file: u64,
        number_of_links: u32,
        delete_pending: bool,
        directory: bool,
    }
}

fixed_class! {
    /// FileInternalInformation (MS-FSCC 2.4 FILE_INTERNAL_INFORMATION): the 64-bit file id.
    InternalInfo, len = 8, reserved = 0, { index_number: u64 }
}

fixed_class! {
    /// FileEaInformation (MS-FSCC 2.4 FILE_EA_INFORMATION).
    EaInfo, len = 4, reserved = 0, { ea_size: u32 }
}

fixed_class! {
    /// FileAccessInformation (MS-FSCC 2.4 FILE_ACCESS_INFORMATION): the open's granted access.
    AccessInfo, len = 4, reserved = 0, { access_flags: u32 }
}

fixed_class! {
    /// FilePositionInformation (MS-FSCC 2.4 FILE_POSITION_INFORMATION); settable.
    PositionInfo, len = 8, reserved = 0, { current_byte_offset: u64 }
}

fixed_class! {
    /// FileModeInformation (MS-FSCC 2.4 FILE_MODE_INFORMATION); settable, see [`mode`].
    ModeInfo, len = 4, reserved = 0, { mode: u32 }
}

/// FileModeInformation bits (MS-FSCC 2.4 FILE_MODE_INFORMATION).
pub mod mode {
    pub const FILE_WRITE_THROUGH: u32 = 0x0000_0002;
    pub const FILE_SEQUENTIAL_ONLY: u32 = 0x0000_0004;
    pub const FILE_NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
    pub const FILE_SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
    pub const FILE_SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
    pub const FILE_DELETE_ON_CLOSE: u32 = 0x0000_1000;
    /// The only bits a client may change with SET_INFO (MS-FSA 2.1.5.15.8 FileModeInformation).
    pub const SETTABLE: u32 = FILE_WRITE_THROUGH
        | FILE_SEQUENTIAL_ONLY
        | FILE_SYNCHRONOUS_IO_ALERT
        | FILE_SYNCHRONOUS_IO_NONALERT;
}

fixed_class! {
    /// FileAlignmentInformation (MS-FSCC 2.4 FILE_ALIGNMENT_INFORMATION); 0 = byte aligned.
    AlignmentInfo, len = 4, reserved = 0, { alignment_requirement: u32 }
}

fixed_class! {
    /// FileNetworkOpenInformation (MS-FSCC 2.4 FILE_NETWORK_OPEN_INFORMATION): 56 bytes.
    NetworkOpenInfo, len = 56, reserved = 4, {
        creation_time: u64,
        last_access_time: u64,
        last_write_time: u64,
        change_time: u64,
        allocation_size: u64,
        end_of_file: u64,
        file_attributes: u32,
    }
}

fixed_class! {
    /// FileAttributeTagInformation (MS-FSCC 2.4 FILE_ATTRIBUTE_TAG_INFORMATION).
    AttributeTagInfo, len = 8, reserved = 0, { file_attributes: u32, reparse_tag: u32 }
}

fixed_class! {
    /// FileCompressionInformation (MS-FSCC 2.4 FILE_COMPRESSION_INFORMATION): 16 bytes.
    CompressionInfo, len = 16, reserved = 3, {
        compressed_file_size: u64,
        /// COMPRESSION_FORMAT_NONE = 0, LZNT1 = 2.
        compression_format: u16,
        compression_unit_shift: u8,
        chunk_shift: u8,
        cluster_shift: u8,
    }
}

fixed_class! {
    /// FileEndOfFileInformation (MS-FSCC 2.4 FILE_END_OF_FILE_INFORMATION); SET_INFO only.
    EndOfFileInfo, len = 8, reserved = 0, { end_of_file: u64 }
}

fixed_class! {
    /// FileAllocationInformation (MS-FSCC 2.4 FILE_ALLOCATION_INFORMATION); SET_INFO only.
    AllocationInfo, len = 8, reserved = 0, { allocation_size: u64 }
}

fixed_class! {
    /// FileValidDataLengthInformation (MS-FSCC 2.4 FILE_VALID_DATA_LENGTH_INFORMATION).
    ValidDataLengthInfo, len = 8, reserved = 0, { valid_data_length: u64 }
}

fixed_class! {
    /// FileDispositionInformation (MS-FSCC 2.4 FILE_DISPOSITION_INFORMATION): one BOOLEAN.
    DispositionInfo, len = 1, reserved = 0, { delete_pending: bool }
}

fixed_class! {
    /// FileDispositionInformationEx (MS-FSCC 2.4 FILE_DISPOSITION_INFORMATION_EX); see
    /// [`disposition_ex`] for the flags.
    DispositionInfoEx, len = 4, reserved = 0, { flags: u32 }
}

/// FileDispositionInformationEx flags (MS-FSCC 2.4 FILE_DISPOSITION_INFORMATION_EX).
pub mod disposition_ex {
    pub const FILE_DISPOSITION_DO_NOT_DELETE: u32 = 0x0000_0000;
    pub const FILE_DISPOSITION_DELETE: u32 = 0x0000_0001;
    pub const FILE_DISPOSITION_POSIX_SEMANTICS: u32 = 0x0000_0002;
    pub const FILE_DISPOSITION_FORCE_IMAGE_SECTION_CHECK: u32 = 0x0000_0004;
    pub const FILE_DISPOSITION_ON_CLOSE: u32 = 0x0000_0008;
    pub const FILE_DISPOSITION_IGNORE_READONLY_ATTRIBUTE: u32 = 0x0000_0010;
}

/// Decodes a UTF-16LE name of `len` bytes from `r`, enforcing [`MAX_NAME_BYTES`].
fn read_name(r: &mut Reader<'_>, len: u32) -> Result<String, DecodeError> {
    let len = to_usize(len);
    if len > MAX_NAME_BYTES {
        return Err(DecodeError::TooLong {
            field: "FileNameLength",
            len,
            limit: MAX_NAME_BYTES,
        });
    }
    let start = r.pos();
    let total = r.whole().len();
    let raw = r.bytes(len).map_err(|_| DecodeError::BadOffset {
        offset: start,
        len,
        total,
    })?;
    utf16le_decode(raw)
}

/// Writes a u32 byte length followed by the UTF-16LE name.
fn write_name(w: &mut Writer, name: &str) {
    let raw = utf16le_encode(name);
    w.u32(len32(raw.len())).bytes(&raw);
}

/// FILE_NAME_INFORMATION (MS-FSCC 2.4): FileNameLength then the name. Also the layout of
/// FileAlternateNameInformation and FileNormalizedNameInformation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameInfo {
    pub file_name: String,
}

impl NameInfo {
    /// FileNameLength; the name follows.
    pub const MIN_LEN: usize = 4;

    pub fn encode(&self, w: &mut Writer) {
        write_name(w, &self.file_name);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::MIN_LEN)?;
        let mut r = Reader::new(buf);
        let len = r.u32()?;
        Ok(Self {
            file_name: read_name(&mut r, len)?,
        })
    }
}

/// FileAllInformation (MS-FSCC 2.4 FILE_ALL_INFORMATION): Basic, Standard, Internal, Ea,
/// Access, Position, Mode, Alignment and Name, back to back: 100 bytes plus the name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllInfo {
    pub basic: BasicInfo,
    pub standard: StandardInfo,
    pub internal: InternalInfo,
    pub ea: EaInfo,
    pub access: AccessInfo,
    pub position: PositionInfo,
    pub mode: ModeInfo,
    pub alignment: AlignmentInfo,
    pub name: NameInfo,
}

impl AllInfo {
    /// Size of everything before the name's characters.
    pub const FIXED_LEN: usize = 100;
    pub const MIN_LEN: usize = Self::FIXED_LEN;

    pub fn encode(&self, w: &mut Writer) {
        self.basic.encode(w);
        self.standard.encode(w);
        self.internal.encode(w);
        self.ea.encode(w);
        self.access.encode(w);
        self.position.encode(w);
        self.mode.encode(w);
        self.alignment.encode(w);
        self.name.encode(w);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::MIN_LEN)?;
        let mut at = 0usize;
        let mut part = |len: usize| {
            let s = buf.get(at..).unwrap_or_default();
            at += len;
            s
        };
        Ok(Self {
            basic: BasicInfo::decode(part(BasicInfo::LEN))?,
            standard: StandardInfo::decode(part(StandardInfo::LEN))?,
            internal: InternalInfo::decode(part(InternalInfo::LEN))?,
            ea: EaInfo::decode(part(EaInfo::LEN))?,
            access: AccessInfo::decode(part(AccessInfo::LEN))?,
            position: PositionInfo::decode(part(PositionInfo::LEN))?,
            mode: ModeInfo::decode(part(ModeInfo::LEN))?,
            alignment: AlignmentInfo::decode(part(AlignmentInfo::LEN))?,
            name: NameInfo::decode(part(0))?,
        })
    }
}

/// One FILE_STREAM_INFORMATION entry (MS-FSCC 2.4 FileStreamInformation). `name` is the full
/// stream name as Windows reports it, e.g. `::$DATA` for the unnamed data stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamEntry {
    pub name: String,
    pub size: u64,
    pub allocation_size: u64,
}

/// FileStreamInformation list codec (MS-FSCC 2.4): entries chained by NextEntryOffset, each
/// starting on an 8-byte boundary; the last entry has NextEntryOffset 0 and is not padded.
pub struct StreamInfo;

impl StreamInfo {
    /// NextEntryOffset, StreamNameLength, StreamSize, StreamAllocationSize.
    pub const ENTRY_FIXED_LEN: usize = 24;
    /// The name of the unnamed data stream of a file.
    pub const DEFAULT_DATA_STREAM: &'static str = "::$DATA";

    pub fn encode(entries: &[StreamEntry], w: &mut Writer) {
        let base = w.len();
        let mut prev: Option<usize> = None;
        for e in entries {
            if let Some(p) = prev {
                w.align_from(base, 8);
                w.patch_u32(p, u32::try_from(w.len() - p).unwrap_or(0));
            }
            prev = Some(w.len());
            let name = utf16le_encode(&e.name);
            w.u32(0)
                .u32(len32(name.len()))
                .u64(e.size)
                .u64(e.allocation_size)
                .bytes(&name);
        }
    }

    pub fn decode(buf: &[u8]) -> Result<Vec<StreamEntry>, DecodeError> {
        chain::split(buf, Self::ENTRY_FIXED_LEN, 8, MAX_LIST_ENTRIES)?
            .into_iter()
            .map(|entry| {
                let mut r = Reader::new(entry);
                r.skip(4)?;
                let len = r.u32()?;
                let size = r.u64()?;
                let allocation_size = r.u64()?;
                Ok(StreamEntry {
                    name: read_name(&mut r, len)?,
                    size,
                    allocation_size,
                })
            })
            .collect()
    }
}

/// FILE_RENAME_INFORMATION_TYPE_2 (MS-FSCC 2.4 FileRenameInformation for SMB2): ReplaceIfExists,
/// 7 reserved bytes, RootDirectory (must be 0 over the network), FileNameLength, FileName.
/// FileLinkInformation for SMB2 has the same layout ([`LinkInfo`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenameInfo {
    pub replace_if_exists: bool,
    pub root_directory: u64,
    pub file_name: String,
}

/// FILE_LINK_INFORMATION_TYPE_2 (MS-FSCC 2.4 FileLinkInformation for SMB2).
pub type LinkInfo = RenameInfo;

impl RenameInfo {
    /// Everything before FileName.
    pub const MIN_LEN: usize = 20;

    pub fn encode(&self, w: &mut Writer) {
        w.u8(u8::from(self.replace_if_exists))
            .zeros(7)
            .u64(self.root_directory);
        write_name(w, &self.file_name);
    }

    /// A FileNameLength running past the buffer is BadOffset (STATUS_INVALID_PARAMETER per
    /// MS-FSCC 2.4 FileRenameInformation), as is one above [`MAX_NAME_BYTES`].
    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::MIN_LEN)?;
        let mut r = Reader::new(buf);
        let replace_if_exists = r.u8()? != 0;
        r.skip(7)?;
        let root_directory = r.u64()?;
        let len = r.u32()?;
        Ok(Self {
            replace_if_exists,
            root_directory,
            file_name: read_name(&mut r, len)?,
        })
    }
}

/// FileRenameInformationEx / FileLinkInformationEx over SMB2: the same 20-byte fixed part, with
/// a u32 Flags word (see [`rename_flags`]) in place of ReplaceIfExists and 3 reserved bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenameInfoEx {
    pub flags: u32,
    pub root_directory: u64,
    pub file_name: String,
}

/// FILE_RENAME_INFORMATION_EX / FILE_LINK_INFORMATION_EX flags (MS-FSCC 2.4).
pub mod rename_flags {
    pub const FILE_RENAME_REPLACE_IF_EXISTS: u32 = 0x0000_0001;
    pub const FILE_RENAME_POSIX_SEMANTICS: u32 = 0x0000_0002;
    pub const FILE_RENAME_SUPPRESS_PIN_STATE_INHERITANCE: u32 = 0x0000_0004;
    pub const FILE_RENAME_SUPPRESS_STORAGE_RESERVE_INHERITANCE: u32 = 0x0000_0008;
    pub const FILE_RENAME_NO_INCREASE_AVAILABLE_SPACE: u32 = 0x0000_0010;
    pub const FILE_RENAME_NO_DECREASE_AVAILABLE_SPACE: u32 = 0x0000_0020;
    pub const FILE_RENAME_IGNORE_READONLY_ATTRIBUTE: u32 = 0x0000_0040;
    pub const FILE_RENAME_FORCE_RESIZE_TARGET_SR: u32 = 0x0000_0080;
    pub const FILE_RENAME_FORCE_RESIZE_SOURCE_SR: u32 = 0x0000_0100;
}

impl RenameInfoEx {
    pub const MIN_LEN: usize = 20;

    pub fn encode(&self, w: &mut Writer) {
        w.u32(self.flags).zeros(4).u64(self.root_directory);
        write_name(w, &self.file_name);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::MIN_LEN)?;
        let mut r = Reader::new(buf);
        let flags = r.u32()?;
        r.skip(4)?;
        let root_directory = r.u64()?;
        let len = r.u32()?;
        Ok(Self {
            flags,
            root_directory,
            file_name: read_name(&mut r, len)?,
        })
    }

    pub fn replace_if_exists(&self) -> bool {
        self.flags & rename_flags::FILE_RENAME_REPLACE_IF_EXISTS != 0
    }
}

/// FILE_NEED_EA: the file cannot be interpreted without this EA (MS-FSCC 2.4 FileFullEaInformation).
pub const FILE_NEED_EA: u8 = 0x80;

/// One FILE_FULL_EA_INFORMATION entry (MS-FSCC 2.4 FileFullEaInformation). The name is 8-bit
/// (ASCII in practice) and NUL-terminated on the wire; neither part includes the terminator.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FullEa<'a> {
    pub flags: u8,
    pub name: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> FullEa<'a> {
    /// NextEntryOffset, Flags, EaNameLength, EaValueLength, and the name's NUL.
    pub const MIN_LEN: usize = 9;

    /// Encodes a list: entries start on 4-byte boundaries, the last has NextEntryOffset 0 and no
    /// padding. Names longer than 255 bytes and values longer than 65535 bytes cannot be
    /// represented and are cut to those limits; callers validate before building the list.
    pub fn encode_list(entries: &[FullEa<'_>], w: &mut Writer) {
        let base = w.len();
        let mut prev: Option<usize> = None;
        for e in entries {
            if let Some(p) = prev {
                w.align_from(base, 4);
                w.patch_u32(p, u32::try_from(w.len() - p).unwrap_or(0));
            }
            prev = Some(w.len());
            let name = e.name.get(..255).unwrap_or(e.name);
            let value = e.value.get(..0xFFFF).unwrap_or(e.value);
            w.u32(0)
                .u8(e.flags)
                .u8(name.len() as u8)
                .u16(value.len() as u16)
                .bytes(name)
                .u8(0)
                .bytes(value);
        }
    }

    /// Decodes a list, borrowing names and values from `buf`. A missing NUL after the name, a
    /// misaligned or out-of-range NextEntryOffset, or an entry running past its successor is an
    /// error (the handler's STATUS_EA_LIST_INCONSISTENT / STATUS_INVALID_PARAMETER).
    pub fn decode_list(buf: &'a [u8]) -> Result<Vec<Self>, DecodeError> {
        chain::split(buf, Self::MIN_LEN, 4, MAX_LIST_ENTRIES)?
            .into_iter()
            .map(|entry| {
                let mut r = Reader::new(entry);
                r.skip(4)?;
                let flags = r.u8()?;
                let name_len = usize::from(r.u8()?);
                let value_len = usize::from(r.u16()?);
                let name = r.bytes(name_len)?;
                if r.u8()? != 0 {
                    return Err(DecodeError::InvalidField { field: "EaName" });
                }
                let value = r.bytes(value_len)?;
                Ok(Self { flags, name, value })
            })
            .collect()
    }
}

/// One FILE_GET_EA_INFORMATION entry (MS-FSCC 2.4 FileFullEaInformation, FILE_GET_EA_INFORMATION): the EA names a client asks for in the
/// QUERY_INFO input buffer of FileFullEaInformation.
pub struct GetEaList;

impl GetEaList {
    /// NextEntryOffset, EaNameLength, and the name's NUL.
    pub const MIN_LEN: usize = 6;

    pub fn decode(buf: &[u8]) -> Result<Vec<&[u8]>, DecodeError> {
        chain::split(buf, Self::MIN_LEN, 4, MAX_LIST_ENTRIES)?
            .into_iter()
            .map(|entry| {
                let mut r = Reader::new(entry);
                r.skip(4)?;
                let len = usize::from(r.u8()?);
                let name = r.bytes(len)?;
                if r.u8()? != 0 {
                    return Err(DecodeError::InvalidField { field: "EaName" });
                }
                Ok(name)
            })
            .collect()
    }

    pub fn encode(names: &[&[u8]], w: &mut Writer) {
        let base = w.len();
        let mut prev: Option<usize> = None;
        for name in names {
            if let Some(p) = prev {
                w.align_from(base, 4);
                w.patch_u32(p, u32::try_from(w.len() - p).unwrap_or(0));
            }
            prev = Some(w.len());
            let name = name.get(..255).unwrap_or(name);
            w.u32(0).u8(name.len() as u8).bytes(name).u8(0);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn basic_is_40_bytes_with_fields_at_spec_offsets() {
        let v = BasicInfo {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            file_attributes: 0x20,
        };
        let b = v.to_bytes();
        assert_eq!(b.len(), 40);
        assert_eq!(
            (u64_at(&b, 0), u64_at(&b, 8), u64_at(&b, 16), u64_at(&b, 24)),
            (1, 2, 3, 4)
        );
        assert_eq!(u32_at(&b, 32), 0x20);
        assert_eq!(u32_at(&b, 36), 0);
        assert_eq!(BasicInfo::decode(&b).unwrap(), v);
        assert!(BasicInfo::decode(&b[..39]).is_err());
        assert_eq!(BasicInfo::MIN_LEN, 40);
    }

    #[test]
    fn standard_is_24_bytes() {
        let v = StandardInfo {
            allocation_size: 4096,
            end_of_file: 10,
            number_of_links: 3,
            delete_pending: true,
            directory: false,
        };
        let b = v.to_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!(u64_at(&b, 0), 4096);
        assert_eq!(u64_at(&b, 8), 10);
        assert_eq!(u32_at(&b, 16), 3);
        assert_eq!((b[20], b[21], b[22], b[23]), (1, 0, 0, 0));
        assert_eq!(StandardInfo::decode(&b).unwrap(), v);
    }

    #[test]
    fn small_fixed_classes_have_spec_sizes() {
        assert_eq!(
            InternalInfo { index_number: 7 }.to_bytes(),
            7u64.to_le_bytes()
        );
        assert_eq!(EaInfo { ea_size: 9 }.to_bytes(), 9u32.to_le_bytes());
        assert_eq!(
            AccessInfo {
                access_flags: 0x1F01FF
            }
            .to_bytes(),
            0x1F01FFu32.to_le_bytes()
        );
        assert_eq!(
            PositionInfo {
                current_byte_offset: 5
            }
            .to_bytes(),
            5u64.to_le_bytes()
        );
        assert_eq!(ModeInfo { mode: 0x20 }.to_bytes(), 0x20u32.to_le_bytes());
        assert_eq!(
            AlignmentInfo {
                alignment_requirement: 0
            }
            .to_bytes()
            .len(),
            4
        );
        assert_eq!(
            EndOfFileInfo {
                end_of_file: 1 << 40
            }
            .to_bytes(),
            (1u64 << 40).to_le_bytes()
        );
        assert_eq!(AllocationInfo { allocation_size: 3 }.to_bytes().len(), 8);
        assert_eq!(
            DispositionInfo {
                delete_pending: true
            }
            .to_bytes(),
            [1]
        );
        assert_eq!(
            DispositionInfoEx { flags: 0x11 }.to_bytes(),
            0x11u32.to_le_bytes()
        );
        let at = AttributeTagInfo {
            file_attributes: 0x400,
            reparse_tag: 0xA000_000C,
        };
        let b = at.to_bytes();
        assert_eq!(
            (b.len(), u32_at(&b, 0), u32_at(&b, 4)),
            (8, 0x400, 0xA000_000C)
        );
    }

    #[test]
    fn set_info_decoders_reject_short_buffers() {
        assert!(DispositionInfo::decode(&[]).is_err());
        assert!(DispositionInfo::decode(&[2]).unwrap().delete_pending);
        assert!(!DispositionInfo::decode(&[0]).unwrap().delete_pending);
        assert!(EndOfFileInfo::decode(&[0; 7]).is_err());
        assert!(AllocationInfo::decode(&[0; 7]).is_err());
        assert!(PositionInfo::decode(&[0; 7]).is_err());
        assert!(ModeInfo::decode(&[0; 3]).is_err());
        assert!(DispositionInfoEx::decode(&[0; 3]).is_err());
        // Longer than the class is accepted and the tail ignored.
        assert_eq!(
            EndOfFileInfo::decode(&[1, 0, 0, 0, 0, 0, 0, 0, 9])
                .unwrap()
                .end_of_file,
            1
        );
    }

    #[test]
    fn network_open_is_56_bytes() {
        let v = NetworkOpenInfo {
            creation_time: 1,
            last_access_time: 2,
            last_write_time: 3,
            change_time: 4,
            allocation_size: 5,
            end_of_file: 6,
            file_attributes: 0x10,
        };
        let b = v.to_bytes();
        assert_eq!(b.len(), 56);
        assert_eq!(u64_at(&b, 32), 5);
        assert_eq!(u64_at(&b, 40), 6);
        assert_eq!(u32_at(&b, 48), 0x10);
        assert_eq!(u32_at(&b, 52), 0);
        assert_eq!(NetworkOpenInfo::decode(&b).unwrap(), v);
    }

    #[test]
    fn compression_is_16_bytes() {
        let v = CompressionInfo {
            compressed_file_size: 100,
            compression_format: 2,
            compression_unit_shift: 16,
            chunk_shift: 12,
            cluster_shift: 9,
        };
        let b = v.to_bytes();
        assert_eq!(b.len(), 16);
        assert_eq!(u64_at(&b, 0), 100);
        assert_eq!(&b[8..16], &[2, 0, 16, 12, 9, 0, 0, 0]);
        assert_eq!(CompressionInfo::decode(&b).unwrap(), v);
    }

    #[test]
    fn name_info_and_all_info_layout() {
        let n = NameInfo {
            file_name: "\\dir\\a.txt".into(),
        };
        let mut w = Writer::new();
        n.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(u32_at(&b, 0), 20);
        assert_eq!(b.len(), 24);
        assert_eq!(NameInfo::decode(&b).unwrap(), n);

        let all = AllInfo {
            basic: BasicInfo {
                change_time: 44,
                file_attributes: 0x80,
                ..Default::default()
            },
            standard: StandardInfo {
                end_of_file: 55,
                number_of_links: 1,
                ..Default::default()
            },
            internal: InternalInfo { index_number: 66 },
            ea: EaInfo { ea_size: 0 },
            access: AccessInfo {
                access_flags: 0x0012_0089,
            },
            position: PositionInfo {
                current_byte_offset: 77,
            },
            mode: ModeInfo { mode: 0x20 },
            alignment: AlignmentInfo {
                alignment_requirement: 0,
            },
            name: NameInfo {
                file_name: "ab".into(),
            },
        };
        let mut w = Writer::new();
        all.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b.len(), 100 + 4);
        // Offsets are the running sums of the member classes' sizes.
        assert_eq!(u64_at(&b, 24), 44);
        assert_eq!(u32_at(&b, 32), 0x80);
        assert_eq!(u64_at(&b, 48), 55);
        assert_eq!(u64_at(&b, 64), 66);
        assert_eq!(u32_at(&b, 76), 0x0012_0089);
        assert_eq!(u64_at(&b, 80), 77);
        assert_eq!(u32_at(&b, 88), 0x20);
        assert_eq!(u32_at(&b, 96), 4);
        assert_eq!(&b[100..], &[b'a', 0, b'b', 0]);
        assert_eq!(AllInfo::decode(&b).unwrap(), all);
        assert!(AllInfo::decode(&b[..99]).is_err());
        assert!(AllInfo::decode(&b[..103]).is_err());
    }

    #[test]
    fn stream_list_chains_on_8_byte_boundaries() {
        let entries = vec![
            StreamEntry {
                name: "::$DATA".into(),
                size: 10,
                allocation_size: 4096,
            },
            StreamEntry {
                name: ":x:$DATA".into(),
                size: 1,
                allocation_size: 8,
            },
        ];
        let mut w = Writer::new();
        StreamInfo::encode(&entries, &mut w);
        let b = w.into_vec();
        // First entry: 24 + 14 = 38 bytes, padded to 40.
        assert_eq!(u32_at(&b, 0), 40);
        assert_eq!(u32_at(&b, 4), 14);
        assert_eq!(u64_at(&b, 8), 10);
        assert_eq!(u64_at(&b, 16), 4096);
        assert_eq!(u32_at(&b, 40), 0);
        assert_eq!(b.len(), 40 + 24 + 16);
        assert_eq!(StreamInfo::decode(&b).unwrap(), entries);
    }

    #[test]
    fn rename_type2_layout_and_bounds() {
        let v = RenameInfo {
            replace_if_exists: true,
            root_directory: 0,
            file_name: "new\\name.txt".into(),
        };
        let mut w = Writer::new();
        v.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(b[0], 1);
        assert_eq!(u64_at(&b, 8), 0);
        assert_eq!(u32_at(&b, 16), 24);
        assert_eq!(b.len(), 20 + 24);
        assert_eq!(RenameInfo::decode(&b).unwrap(), v);

        assert!(matches!(
            RenameInfo::decode(&b[..19]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            RenameInfo::decode(&b[..43]),
            Err(DecodeError::BadOffset { .. })
        ));
        let mut huge = b.clone();
        huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            RenameInfo::decode(&huge),
            Err(DecodeError::TooLong { .. })
        ));
        let mut odd = b.clone();
        odd[16..20].copy_from_slice(&3u32.to_le_bytes());
        assert_eq!(RenameInfo::decode(&odd), Err(DecodeError::BadString));

        let ex = RenameInfoEx {
            flags: 3,
            root_directory: 0,
            file_name: "x".into(),
        };
        let mut w = Writer::new();
        ex.encode(&mut w);
        let b = w.into_vec();
        assert_eq!(u32_at(&b, 0), 3);
        assert_eq!(u32_at(&b, 16), 2);
        let d = RenameInfoEx::decode(&b).unwrap();
        assert!(d.replace_if_exists());
        assert_eq!(d, ex);
    }

    #[test]
    fn full_ea_list_round_trip_and_alignment() {
        let eas = [
            FullEa {
                flags: 0,
                name: b"user.a",
                value: b"12345",
            },
            FullEa {
                flags: FILE_NEED_EA,
                name: b"B",
                value: b"",
            },
        ];
        let mut w = Writer::new();
        FullEa::encode_list(&eas, &mut w);
        let b = w.into_vec();
        // 8 + 6 + 1 + 5 = 20 (already aligned), then 8 + 1 + 1 = 10.
        assert_eq!(u32_at(&b, 0), 20);
        assert_eq!((b[4], b[5], u16::from_le_bytes([b[6], b[7]])), (0, 6, 5));
        assert_eq!(b[14], 0);
        assert_eq!(b.len(), 30);
        assert_eq!(FullEa::decode_list(&b).unwrap(), eas);

        let mut no_nul = b.clone();
        no_nul[14] = b'x';
        assert!(FullEa::decode_list(&no_nul).is_err());
        let mut long_value = b.clone();
        long_value[6] = 200;
        assert!(FullEa::decode_list(&long_value).is_err());
        assert!(FullEa::decode_list(&b[..8]).is_err());
    }

    #[test]
    fn get_ea_list_round_trip() {
        let names: [&[u8]; 2] = [b"one", b"three"];
        let mut w = Writer::new();
        GetEaList::encode(&names, &mut w);
        let b = w.into_vec();
        assert_eq!(u32_at(&b, 0), 12);
        assert_eq!(GetEaList::decode(&b).unwrap(), names);
    }
}
