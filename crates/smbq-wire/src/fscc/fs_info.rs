//! File system information classes (MS-FSCC 2.5) carried in QUERY_INFO with InfoType
//! SMB2_0_INFO_FILESYSTEM. Decoders exist for the client side.

use super::fixed::{fixed_class, need};
use crate::cursor::{Reader, Writer, len32, to_usize, utf16le_decode, utf16le_encode};
use crate::error::DecodeError;

/// Cap on a volume label or file system name (MS-FSCC 2.5.9 limits labels to 32 characters;
/// this only bounds what a decoder will allocate).
pub const MAX_NAME_BYTES: usize = 1024;

fn read_utf16(r: &mut Reader<'_>, len: u32, field: &'static str) -> Result<String, DecodeError> {
    let len = to_usize(len);
    if len > MAX_NAME_BYTES {
        return Err(DecodeError::TooLong {
            field,
            len,
            limit: MAX_NAME_BYTES,
        });
    }
    utf16le_decode(r.bytes(len)?)
}

fn byte_len(raw: &[u8]) -> u32 {
    len32(raw.len())
}

/// FileFsVolumeInformation (MS-FSCC 2.5.9): 18 fixed bytes then the UTF-16 label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VolumeInfo {
    pub volume_creation_time: u64,
    pub volume_serial_number: u32,
    pub supports_objects: bool,
    pub volume_label: String,
}

impl VolumeInfo {
    /// VolumeCreationTime, VolumeSerialNumber, VolumeLabelLength, SupportsObjects, Reserved.
    pub const FIXED_LEN: usize = 18;

    pub fn encode(&self, w: &mut Writer) {
        let label = utf16le_encode(&self.volume_label);
        w.u64(self.volume_creation_time)
            .u32(self.volume_serial_number)
            .u32(byte_len(&label))
            .u8(u8::from(self.supports_objects))
            .u8(0)
            .bytes(&label);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::FIXED_LEN)?;
        let mut r = Reader::new(buf);
        let volume_creation_time = r.u64()?;
        let volume_serial_number = r.u32()?;
        let len = r.u32()?;
        let supports_objects = r.u8()? != 0;
        r.skip(1)?;
        Ok(Self {
            volume_creation_time,
            volume_serial_number,
            supports_objects,
            volume_label: read_utf16(&mut r, len, "VolumeLabelLength")?,
        })
    }
}

fixed_class! {
    /// FileFsSizeInformation (MS-FSCC 2.5.8): 24 bytes.
    SizeInfo, len = 24, reserved = 0, {
        total_allocation_units: u64,
        available_allocation_units: u64,
        sectors_per_allocation_unit: u32,
        bytes_per_sector: u32,
    }
}

fixed_class! {
    /// FileFsFullSizeInformation (MS-FSCC 2.5.4): 32 bytes.
    FullSizeInfo, len = 32, reserved = 0, {
        total_allocation_units: u64,
        /// What the caller may use (after quotas).
        caller_available_allocation_units: u64,
        actual_available_allocation_units: u64,
        sectors_per_allocation_unit: u32,
        bytes_per_sector: u32,
    }
}

fixed_class! {
    /// FileFsDeviceInformation (MS-FSCC 2.5.10): DeviceType and Characteristics.
    DeviceInfo, len = 8, reserved = 0, {
        /// [`FILE_DEVICE_DISK`] for a share backed by a file system.
        device_type: u32,
        /// `FILE_*` device characteristics below.
        characteristics: u32,
    }
}

/// DeviceType values (MS-FSCC 2.5.10).
pub const FILE_DEVICE_CD_ROM: u32 = 0x0000_0002;
pub const FILE_DEVICE_DISK: u32 = 0x0000_0007;

/// Device characteristics (MS-FSCC 2.5.10).
pub const FILE_REMOVABLE_MEDIA: u32 = 0x0000_0001;
pub const FILE_READ_ONLY_DEVICE: u32 = 0x0000_0002;
pub const FILE_FLOPPY_DISKETTE: u32 = 0x0000_0004;
pub const FILE_WRITE_ONCE_MEDIA: u32 = 0x0000_0008;
pub const FILE_REMOTE_DEVICE: u32 = 0x0000_0010;
pub const FILE_DEVICE_IS_MOUNTED: u32 = 0x0000_0020;
pub const FILE_VIRTUAL_VOLUME: u32 = 0x0000_0040;
pub const FILE_DEVICE_SECURE_OPEN: u32 = 0x0000_0100;
pub const FILE_CHARACTERISTIC_TS_DEVICE: u32 = 0x0000_1000;
pub const FILE_CHARACTERISTIC_WEBDAV_DEVICE: u32 = 0x0000_2000;
pub const FILE_DEVICE_ALLOW_APPCONTAINER_TRAVERSAL: u32 = 0x0002_0000;
pub const FILE_PORTABLE_DEVICE: u32 = 0x0004_0000;

/// FileSystemAttributes flags (MS-FSCC 2.5.1).
pub const FILE_CASE_SENSITIVE_SEARCH: u32 = 0x0000_0001;
pub const FILE_CASE_PRESERVED_NAMES: u32 = 0x0000_0002;
pub const FILE_UNICODE_ON_DISK: u32 = 0x0000_0004;
pub const FILE_PERSISTENT_ACLS: u32 = 0x0000_0008;
pub const FILE_FILE_COMPRESSION: u32 = 0x0000_0010;
pub const FILE_VOLUME_QUOTAS: u32 = 0x0000_0020;
pub const FILE_SUPPORTS_SPARSE_FILES: u32 = 0x0000_0040;
pub const FILE_SUPPORTS_REPARSE_POINTS: u32 = 0x0000_0080;
pub const FILE_SUPPORTS_REMOTE_STORAGE: u32 = 0x0000_0100;
pub const FILE_VOLUME_IS_COMPRESSED: u32 = 0x0000_8000;
pub const FILE_SUPPORTS_OBJECT_IDS: u32 = 0x0001_0000;
pub const FILE_SUPPORTS_ENCRYPTION: u32 = 0x0002_0000;
pub const FILE_NAMED_STREAMS: u32 = 0x0004_0000;
pub const FILE_READ_ONLY_VOLUME: u32 = 0x0008_0000;
pub const FILE_SEQUENTIAL_WRITE_ONCE: u32 = 0x0010_0000;
pub const FILE_SUPPORTS_TRANSACTIONS: u32 = 0x0020_0000;
pub const FILE_SUPPORTS_HARD_LINKS: u32 = 0x0040_0000;
pub const FILE_SUPPORTS_EXTENDED_ATTRIBUTES: u32 = 0x0080_0000;
pub const FILE_SUPPORTS_OPEN_BY_FILE_ID: u32 = 0x0100_0000;
pub const FILE_SUPPORTS_USN_JOURNAL: u32 = 0x0200_0000;
pub const FILE_SUPPORT_INTEGRITY_STREAMS: u32 = 0x0400_0000;
pub const FILE_SUPPORTS_BLOCK_REFCOUNTING: u32 = 0x0800_0000;
pub const FILE_SUPPORTS_SPARSE_VDL: u32 = 0x1000_0000;
pub const FILE_DAX_VOLUME: u32 = 0x2000_0000;
pub const FILE_SUPPORTS_GHOSTING: u32 = 0x4000_0000;

/// FileFsAttributeInformation (MS-FSCC 2.5.1): 12 fixed bytes then the UTF-16 file system
/// name (e.g. "NTFS", which clients use to decide which features to try).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttributeInfo {
    pub file_system_attributes: u32,
    /// In characters; 255 for NTFS-like file systems.
    pub maximum_component_name_length: u32,
    pub file_system_name: String,
}

impl AttributeInfo {
    /// FileSystemAttributes, MaximumComponentNameLength, FileSystemNameLength.
    pub const FIXED_LEN: usize = 12;

    pub fn encode(&self, w: &mut Writer) {
        let name = utf16le_encode(&self.file_system_name);
        w.u32(self.file_system_attributes)
            .u32(self.maximum_component_name_length)
            .u32(byte_len(&name))
            .bytes(&name);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::FIXED_LEN)?;
        let mut r = Reader::new(buf);
        let file_system_attributes = r.u32()?;
        let maximum_component_name_length = r.u32()?;
        let len = r.u32()?;
        Ok(Self {
            file_system_attributes,
            maximum_component_name_length,
            file_system_name: read_utf16(&mut r, len, "FileSystemNameLength")?,
        })
    }
}

fixed_class! {
    /// FileFsSectorSizeInformation (MS-FSCC 2.5.7): 28 bytes.
    SectorSizeInfo, len = 28, reserved = 0, {
        logical_bytes_per_sector: u32,
        physical_bytes_per_sector_for_atomicity: u32,
        physical_bytes_per_sector_for_performance: u32,
        file_system_effective_physical_bytes_per_sector_for_atomicity: u32,
        /// `SSINFO_FLAGS_*` below.
        flags: u32,
        /// [`SSINFO_OFFSET_UNKNOWN`] when not known.
        byte_offset_for_sector_alignment: u32,
        byte_offset_for_partition_alignment: u32,
    }
}

/// FileFsSectorSizeInformation flags and sentinel (MS-FSCC 2.5.7).
pub const SSINFO_FLAGS_ALIGNED_DEVICE: u32 = 0x0000_0001;
pub const SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE: u32 = 0x0000_0002;
pub const SSINFO_FLAGS_NO_SEEK_PENALTY: u32 = 0x0000_0004;
pub const SSINFO_FLAGS_TRIM_ENABLED: u32 = 0x0000_0008;
pub const SSINFO_OFFSET_UNKNOWN: u32 = 0xFFFF_FFFF;

/// FileFsObjectIdInformation (MS-FSCC 2.5.6): the volume's GUID and 48 bytes of extended
/// information, 64 bytes in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectIdInfo {
    pub object_id: [u8; 16],
    pub extended_info: [u8; 48],
}

impl ObjectIdInfo {
    pub const LEN: usize = 64;
    pub const MIN_LEN: usize = 64;

    pub fn encode(&self, w: &mut Writer) {
        w.bytes(&self.object_id).bytes(&self.extended_info);
    }

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        need(buf, Self::LEN)?;
        let mut r = Reader::new(buf);
        Ok(Self {
            object_id: r.array()?,
            extended_info: r.array()?,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::LEN);
        self.encode(&mut w);
        w.into_vec()
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
    fn enc(f: impl Fn(&mut Writer)) -> Vec<u8> {
        let mut w = Writer::new();
        f(&mut w);
        w.into_vec()
    }

    #[test]
    fn volume_layout() {
        let v = VolumeInfo {
            volume_creation_time: 9,
            volume_serial_number: 0xABCD,
            supports_objects: false,
            volume_label: "share".into(),
        };
        let b = enc(|w| v.encode(w));
        assert_eq!(b.len(), 18 + 10);
        assert_eq!(u64_at(&b, 0), 9);
        assert_eq!(u32_at(&b, 8), 0xABCD);
        assert_eq!(u32_at(&b, 12), 10);
        assert_eq!((b[16], b[17]), (0, 0));
        assert_eq!(&b[18..20], &[b's', 0]);
        assert_eq!(VolumeInfo::decode(&b).unwrap(), v);
        assert!(VolumeInfo::decode(&b[..17]).is_err());
        assert!(VolumeInfo::decode(&b[..27]).is_err());
    }

    #[test]
    fn size_and_full_size_layout() {
        let s = SizeInfo {
            total_allocation_units: 1,
            available_allocation_units: 2,
            sectors_per_allocation_unit: 8,
            bytes_per_sector: 512,
        };
        let b = s.to_bytes();
        assert_eq!(b.len(), 24);
        assert_eq!((u64_at(&b, 0), u64_at(&b, 8)), (1, 2));
        assert_eq!((u32_at(&b, 16), u32_at(&b, 20)), (8, 512));
        assert_eq!(SizeInfo::decode(&b).unwrap(), s);

        let f = FullSizeInfo {
            total_allocation_units: 1,
            caller_available_allocation_units: 2,
            actual_available_allocation_units: 3,
            sectors_per_allocation_unit: 8,
            bytes_per_sector: 4096,
        };
        let b = f.to_bytes();
        assert_eq!(b.len(), 32);
        assert_eq!((u64_at(&b, 8), u64_at(&b, 16)), (2, 3));
        assert_eq!((u32_at(&b, 24), u32_at(&b, 28)), (8, 4096));
        assert_eq!(FullSizeInfo::decode(&b).unwrap(), f);
    }

    #[test]
    fn device_layout() {
        let d = DeviceInfo {
            device_type: FILE_DEVICE_DISK,
            characteristics: FILE_DEVICE_IS_MOUNTED,
        };
        assert_eq!(d.to_bytes(), [7, 0, 0, 0, 0x20, 0, 0, 0]);
    }

    #[test]
    fn attribute_layout() {
        let a = AttributeInfo {
            file_system_attributes: FILE_CASE_PRESERVED_NAMES | FILE_UNICODE_ON_DISK,
            maximum_component_name_length: 255,
            file_system_name: "NTFS".into(),
        };
        let b = enc(|w| a.encode(w));
        assert_eq!(b.len(), 12 + 8);
        assert_eq!(u32_at(&b, 0), 6);
        assert_eq!(u32_at(&b, 4), 255);
        assert_eq!(u32_at(&b, 8), 8);
        assert_eq!(&b[12..], &[b'N', 0, b'T', 0, b'F', 0, b'S', 0]);
        assert_eq!(AttributeInfo::decode(&b).unwrap(), a);
        let mut huge = b.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(AttributeInfo::decode(&huge).is_err());
    }

    #[test]
    fn sector_size_is_28_bytes() {
        let s = SectorSizeInfo {
            logical_bytes_per_sector: 512,
            physical_bytes_per_sector_for_atomicity: 4096,
            physical_bytes_per_sector_for_performance: 4096,
            file_system_effective_physical_bytes_per_sector_for_atomicity: 4096,
            flags: SSINFO_FLAGS_ALIGNED_DEVICE | SSINFO_FLAGS_PARTITION_ALIGNED_ON_DEVICE,
            byte_offset_for_sector_alignment: 0,
            byte_offset_for_partition_alignment: SSINFO_OFFSET_UNKNOWN,
        };
        let b = s.to_bytes();
        assert_eq!(b.len(), 28);
        assert_eq!(u32_at(&b, 0), 512);
        assert_eq!(u32_at(&b, 16), 3);
        assert_eq!(u32_at(&b, 24), 0xFFFF_FFFF);
        assert_eq!(SectorSizeInfo::decode(&b).unwrap(), s);
    }

    #[test]
    fn object_id_is_64_bytes() {
        let o = ObjectIdInfo {
            object_id: [0x11; 16],
            extended_info: [0x22; 48],
        };
        let b = o.to_bytes();
        assert_eq!(b.len(), 64);
        assert_eq!(&b[..16], &[0x11; 16]);
        assert_eq!(&b[16..], &[0x22; 48]);
        assert_eq!(ObjectIdInfo::decode(&b).unwrap(), o);
    }
}
