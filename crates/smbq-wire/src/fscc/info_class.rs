//! Information class codes: FileInformationClass (MS-FSCC 2.4) and FsInformationClass
//! (MS-FSCC 2.5), as carried in the one-byte FileInfoClass field of QUERY_INFO, SET_INFO and
//! QUERY_DIRECTORY (MS-SMB2 2.2.37, 2.2.39, 2.2.33).

crate::open_enum! {
    /// FileInformationClass values (MS-FSCC 2.4). Unknown values stay data; the handler answers
    /// them with STATUS_INVALID_INFO_CLASS or STATUS_NOT_SUPPORTED.
    FileInfoClass(u8) {
        DIRECTORY = 1,
        FULL_DIRECTORY = 2,
        BOTH_DIRECTORY = 3,
        BASIC = 4,
        STANDARD = 5,
        INTERNAL = 6,
        EA = 7,
        ACCESS = 8,
        NAME = 9,
        RENAME = 10,
        LINK = 11,
        NAMES = 12,
        DISPOSITION = 13,
        POSITION = 14,
        FULL_EA = 15,
        MODE = 16,
        ALIGNMENT = 17,
        ALL = 18,
        ALLOCATION = 19,
        END_OF_FILE = 20,
        ALTERNATE_NAME = 21,
        STREAM = 22,
        PIPE = 23,
        PIPE_LOCAL = 24,
        PIPE_REMOTE = 25,
        MAILSLOT_QUERY = 26,
        MAILSLOT_SET = 27,
        COMPRESSION = 28,
        OBJECT_ID = 29,
        MOVE_CLUSTER = 31,
        QUOTA = 32,
        REPARSE_POINT = 33,
        NETWORK_OPEN = 34,
        ATTRIBUTE_TAG = 35,
        TRACKING = 36,
        ID_BOTH_DIRECTORY = 37,
        ID_FULL_DIRECTORY = 38,
        VALID_DATA_LENGTH = 39,
        SHORT_NAME = 40,
        SFIO_RESERVE = 44,
        SFIO_VOLUME = 45,
        HARD_LINK = 46,
        NORMALIZED_NAME = 48,
        ID_GLOBAL_TX_DIRECTORY = 50,
        STANDARD_LINK = 54,
        ID = 59,
        ID_EXTD_DIRECTORY = 60,
        HARD_LINK_FULL_ID = 62,
        ID_EXTD_BOTH_DIRECTORY = 63,
        DISPOSITION_EX = 64,
        RENAME_EX = 65,
        DESIRED_STORAGE_CLASS = 67,
        STAT = 68,
        STAT_LX = 70,
        CASE_SENSITIVE = 71,
        LINK_EX = 72,
    }
}

impl FileInfoClass {
    /// Classes valid in QUERY_DIRECTORY (MS-SMB2 2.2.33).
    pub fn is_directory_class(self) -> bool {
        matches!(
            self,
            Self::DIRECTORY
                | Self::FULL_DIRECTORY
                | Self::BOTH_DIRECTORY
                | Self::NAMES
                | Self::ID_BOTH_DIRECTORY
                | Self::ID_FULL_DIRECTORY
                | Self::ID_EXTD_DIRECTORY
                | Self::ID_EXTD_BOTH_DIRECTORY
        )
    }
}

crate::open_enum! {
    /// FsInformationClass values (MS-FSCC 2.5).
    FsInfoClass(u8) {
        VOLUME = 1,
        LABEL = 2,
        SIZE = 3,
        DEVICE = 4,
        ATTRIBUTE = 5,
        CONTROL = 6,
        FULL_SIZE = 7,
        OBJECT_ID = 8,
        DRIVER_PATH = 9,
        VOLUME_FLAGS = 10,
        SECTOR_SIZE = 11,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_ms_fscc() {
        assert_eq!(FileInfoClass::BASIC.0, 4);
        assert_eq!(FileInfoClass::ALL.0, 18);
        assert_eq!(FileInfoClass::NETWORK_OPEN.0, 34);
        assert_eq!(FileInfoClass::ID_BOTH_DIRECTORY.0, 37);
        assert_eq!(FileInfoClass::NORMALIZED_NAME.0, 48);
        assert_eq!(FileInfoClass::DISPOSITION_EX.0, 64);
        assert_eq!(FileInfoClass::STAT.0, 68);
        assert_eq!(FsInfoClass::FULL_SIZE.0, 7);
        assert_eq!(FsInfoClass::SECTOR_SIZE.0, 11);
    }

    #[test]
    fn unknown_values_stay_data() {
        assert_eq!(format!("{:?}", FileInfoClass(200)), "FileInfoClass(0xc8)");
        assert_eq!(format!("{:?}", FileInfoClass(4)), "BASIC");
        assert!(FileInfoClass::ID_FULL_DIRECTORY.is_directory_class());
        assert!(!FileInfoClass::BASIC.is_directory_class());
    }
}
