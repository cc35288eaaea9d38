//! Round-trip checks for the MS-FSCC information-class codecs in smbq-wire (the buffers of
//! SET_INFO requests and of QUERY_INFO / QUERY_DIRECTORY responses): whatever decodes must
//! re-encode to bytes that decode to the same value.

use smbq_wire::Writer;
use smbq_wire::fscc::dir_info::{DirClass, DirListEncoder, decode_dir_list};
use smbq_wire::fscc::file_info::{
    AccessInfo, AlignmentInfo, AllInfo, AllocationInfo, AttributeTagInfo, BasicInfo,
    CompressionInfo, DispositionInfo, DispositionInfoEx, EaInfo, EndOfFileInfo, FullEa, GetEaList,
    InternalInfo, ModeInfo, NameInfo, NetworkOpenInfo, PositionInfo, RenameInfo, RenameInfoEx,
    StandardInfo, StreamInfo, ValidDataLengthInfo,
};
use smbq_wire::fscc::fs_info::{
    AttributeInfo, DeviceInfo, FullSizeInfo, ObjectIdInfo, SectorSizeInfo, SizeInfo, VolumeInfo,
};
use smbq_wire::fscc::{FileInfoClass, FsInfoClass};
use smbq_wire::query_info::InfoType;
use smbq_wire::security::{ACL_REVISION_DS, SecurityDescriptor, control};

/// decode(encode(decode(buf))) == decode(buf) for a type with `decode(&[u8])` and
/// `encode(&self, &mut Writer)`.
macro_rules! round_trip {
    ($ty:ty, $buf:expr) => {{
        if let Ok(a) = <$ty>::decode($buf) {
            let mut w = Writer::new();
            a.encode(&mut w);
            let enc = w.into_vec();
            match <$ty>::decode(&enc) {
                Ok(b) => {
                    assert_eq!(a, b, "{} changed across a round trip", stringify!($ty));
                    let mut w = Writer::new();
                    b.encode(&mut w);
                    assert_eq!(
                        enc,
                        w.into_vec(),
                        "{} encoding is not canonical",
                        stringify!($ty)
                    );
                }
                Err(e) => panic!("{} re-encoding does not decode: {e:?}", stringify!($ty)),
            }
        }
    }};
}

/// Like [`round_trip!`] for fixed-size classes, which also promise their exact length.
macro_rules! round_trip_fixed {
    ($ty:ty, $buf:expr) => {{
        if let Ok(a) = <$ty>::decode($buf) {
            assert!(
                $buf.len() >= <$ty>::LEN,
                "{} decoded a short buffer",
                stringify!($ty)
            );
            let enc = a.to_bytes();
            assert_eq!(
                enc.len(),
                <$ty>::LEN,
                "{} encodes to the wrong length",
                stringify!($ty)
            );
            assert_eq!(
                <$ty>::decode(&enc).ok(),
                Some(a),
                "{} round trip",
                stringify!($ty)
            );
        }
    }};
}

/// Runs the codec of `class` (as an InfoType / class pair from SMB2 QUERY_INFO or SET_INFO)
/// over `buf`.
pub fn check(info_type: InfoType, class: u8, buf: &[u8]) {
    match info_type {
        InfoType::FILE => check_file(FileInfoClass(class), buf),
        InfoType::FILESYSTEM => check_fs(FsInfoClass(class), buf),
        InfoType::SECURITY => check_security(buf),
        _ => {}
    }
}

pub fn check_file(class: FileInfoClass, buf: &[u8]) {
    if let Some(dir) = DirClass::from_info_class(class) {
        check_dir_list(dir, buf);
        return;
    }
    match class {
        FileInfoClass::BASIC => round_trip_fixed!(BasicInfo, buf),
        FileInfoClass::STANDARD => round_trip_fixed!(StandardInfo, buf),
        FileInfoClass::INTERNAL => round_trip_fixed!(InternalInfo, buf),
        FileInfoClass::EA => round_trip_fixed!(EaInfo, buf),
        FileInfoClass::ACCESS => round_trip_fixed!(AccessInfo, buf),
        FileInfoClass::POSITION => round_trip_fixed!(PositionInfo, buf),
        FileInfoClass::MODE => round_trip_fixed!(ModeInfo, buf),
        FileInfoClass::ALIGNMENT => round_trip_fixed!(AlignmentInfo, buf),
        FileInfoClass::NETWORK_OPEN => round_trip_fixed!(NetworkOpenInfo, buf),
        FileInfoClass::ATTRIBUTE_TAG => round_trip_fixed!(AttributeTagInfo, buf),
        FileInfoClass::COMPRESSION => round_trip_fixed!(CompressionInfo, buf),
        FileInfoClass::END_OF_FILE => round_trip_fixed!(EndOfFileInfo, buf),
        FileInfoClass::ALLOCATION => round_trip_fixed!(AllocationInfo, buf),
        FileInfoClass::VALID_DATA_LENGTH => round_trip_fixed!(ValidDataLengthInfo, buf),
        FileInfoClass::DISPOSITION => round_trip_fixed!(DispositionInfo, buf),
        FileInfoClass::DISPOSITION_EX => round_trip_fixed!(DispositionInfoEx, buf),
        FileInfoClass::NAME
        | FileInfoClass::ALTERNATE_NAME
        | FileInfoClass::NORMALIZED_NAME
        | FileInfoClass::SHORT_NAME => round_trip!(NameInfo, buf),
        FileInfoClass::ALL => round_trip!(AllInfo, buf),
        FileInfoClass::RENAME | FileInfoClass::LINK => round_trip!(RenameInfo, buf),
        FileInfoClass::RENAME_EX | FileInfoClass::LINK_EX => round_trip!(RenameInfoEx, buf),
        FileInfoClass::STREAM => {
            if let Ok(a) = StreamInfo::decode(buf) {
                let mut w = Writer::new();
                StreamInfo::encode(&a, &mut w);
                assert_eq!(
                    StreamInfo::decode(w.as_slice()).ok(),
                    Some(a),
                    "StreamInfo round trip"
                );
            }
        }
        FileInfoClass::FULL_EA => {
            if let Ok(a) = FullEa::decode_list(buf) {
                let mut w = Writer::new();
                FullEa::encode_list(&a, &mut w);
                assert_eq!(
                    FullEa::decode_list(w.as_slice()).ok(),
                    Some(a),
                    "FullEa round trip"
                );
            }
            // The same class's QUERY_INFO input is a FILE_GET_EA_INFORMATION list.
            if let Ok(a) = GetEaList::decode(buf) {
                let mut w = Writer::new();
                GetEaList::encode(&a, &mut w);
                assert_eq!(
                    GetEaList::decode(w.as_slice()).ok(),
                    Some(a),
                    "GetEaList round trip"
                );
            }
        }
        _ => {}
    }
}

pub fn check_fs(class: FsInfoClass, buf: &[u8]) {
    match class {
        FsInfoClass::VOLUME => round_trip!(VolumeInfo, buf),
        FsInfoClass::ATTRIBUTE => round_trip!(AttributeInfo, buf),
        FsInfoClass::SIZE => round_trip_fixed!(SizeInfo, buf),
        FsInfoClass::FULL_SIZE => round_trip_fixed!(FullSizeInfo, buf),
        FsInfoClass::DEVICE => round_trip_fixed!(DeviceInfo, buf),
        FsInfoClass::SECTOR_SIZE => round_trip_fixed!(SectorSizeInfo, buf),
        FsInfoClass::OBJECT_ID => round_trip_fixed!(ObjectIdInfo, buf),
        _ => {}
    }
}

/// A QUERY_DIRECTORY output buffer: decode, re-pack with the server's encoder, decode again.
pub fn check_dir_list(class: DirClass, buf: &[u8]) {
    let Ok(entries) = decode_dir_list(class, buf) else {
        return;
    };
    let mut enc = DirListEncoder::new(class, usize::MAX);
    for e in &entries {
        assert!(
            enc.push(e),
            "DirListEncoder refused an entry with no size limit"
        );
    }
    assert_eq!(enc.count(), entries.len());
    let out = enc.finish();
    assert_eq!(
        decode_dir_list(class, &out).ok(),
        Some(entries),
        "{class:?} list round trip"
    );
}

/// A self-relative security descriptor (MS-DTYP 2.4.6), as SET_INFO with InfoType SECURITY
/// carries it. The encoder clears SE_OWNER_DEFAULTED / SE_GROUP_DEFAULTED when there is no
/// owner / group, so those two bits are compared after that normalization; it also raises an
/// ACL holding an object ACE to ACL_REVISION_DS (MS-DTYP 2.4.5).
pub fn check_security(buf: &[u8]) {
    let Ok(sd) = SecurityDescriptor::decode(buf) else {
        return;
    };
    if !sd.is_encodable() {
        return;
    }
    let enc = sd.to_bytes();
    let again = match SecurityDescriptor::decode(&enc) {
        Ok(again) => again,
        Err(e) => panic!("re-encoded security descriptor does not decode: {e:?}"),
    };
    let mut want = sd.clone();
    want.control |= control::SE_SELF_RELATIVE;
    if want.owner.is_none() {
        want.control &= !control::SE_OWNER_DEFAULTED;
    }
    if want.group.is_none() {
        want.control &= !control::SE_GROUP_DEFAULTED;
    }
    if want.dacl.is_some() {
        want.control |= control::SE_DACL_PRESENT;
    }
    if want.sacl.is_some() {
        want.control |= control::SE_SACL_PRESENT;
    }
    for acl in [want.dacl.as_mut(), want.sacl.as_mut()].into_iter().flatten() {
        if acl.aces.iter().any(|a| a.object.is_some()) {
            acl.revision = ACL_REVISION_DS;
        }
    }
    assert_eq!(again, want, "security descriptor round trip");
    assert_eq!(
        again.to_bytes(),
        enc,
        "security descriptor encoding is not canonical"
    );
}
