//! Access masks, generic mapping and the protocol constants the handlers test (MS-SMB2 2.2.13,
//! MS-DTYP 2.4.3, MS-FSCC 2.6).

/// MS-SMB2 2.2.13.1.1 / 2.2.13.1.2 access mask bits.
pub mod mask {
    pub const FILE_READ_DATA: u32 = 0x0000_0001;
    pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
    pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
    pub const FILE_ADD_FILE: u32 = 0x0000_0002;
    pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
    pub const FILE_ADD_SUBDIRECTORY: u32 = 0x0000_0004;
    pub const FILE_READ_EA: u32 = 0x0000_0008;
    pub const FILE_WRITE_EA: u32 = 0x0000_0010;
    pub const FILE_EXECUTE: u32 = 0x0000_0020;
    pub const FILE_TRAVERSE: u32 = 0x0000_0020;
    pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
    pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0001_0000;
    pub const READ_CONTROL: u32 = 0x0002_0000;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
    pub const SYNCHRONIZE: u32 = 0x0010_0000;
    pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
    pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;
    pub const GENERIC_ALL: u32 = 0x1000_0000;
    pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
    pub const GENERIC_WRITE: u32 = 0x4000_0000;
    pub const GENERIC_READ: u32 = 0x8000_0000;

    /// Windows FILE_GENERIC_* mappings (MS-DTYP 2.4.3 via MS-FSA's file object mapping).
    pub const FILE_GENERIC_READ: u32 =
        READ_CONTROL | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA | SYNCHRONIZE;
    pub const FILE_GENERIC_WRITE: u32 = READ_CONTROL
        | FILE_WRITE_DATA
        | FILE_WRITE_ATTRIBUTES
        | FILE_WRITE_EA
        | FILE_APPEND_DATA
        | SYNCHRONIZE;
    pub const FILE_GENERIC_EXECUTE: u32 =
        READ_CONTROL | FILE_READ_ATTRIBUTES | FILE_EXECUTE | SYNCHRONIZE;
    pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;

    /// Every right that modifies the file or its metadata (refused on read-only shares).
    pub const WRITE_RIGHTS: u32 = FILE_WRITE_DATA
        | FILE_APPEND_DATA
        | FILE_WRITE_EA
        | FILE_WRITE_ATTRIBUTES
        | FILE_DELETE_CHILD
        | DELETE
        | WRITE_DAC
        | WRITE_OWNER;
    pub const READ_RIGHTS: u32 = FILE_READ_DATA
        | FILE_READ_EA
        | FILE_READ_ATTRIBUTES
        | READ_CONTROL
        | FILE_EXECUTE
        | SYNCHRONIZE;

    /// MS-SMB2 3.3.5.9: reserved access bits; any set -> STATUS_ACCESS_DENIED.
    pub const INVALID_BITS: u32 = 0x0CE0_FE00;
}

/// MS-DTYP 2.4.3: turns GENERIC_* bits into the file-specific rights they stand for.
pub fn map_generic(m: u32) -> u32 {
    use mask::*;
    let mut out = m & !(GENERIC_ALL | GENERIC_EXECUTE | GENERIC_WRITE | GENERIC_READ);
    if m & GENERIC_READ != 0 {
        out |= FILE_GENERIC_READ;
    }
    if m & GENERIC_WRITE != 0 {
        out |= FILE_GENERIC_WRITE;
    }
    if m & GENERIC_EXECUTE != 0 {
        out |= FILE_GENERIC_EXECUTE;
    }
    if m & GENERIC_ALL != 0 {
        out |= FILE_ALL_ACCESS;
    }
    out
}

/// MS-FSCC 2.6 file attributes.
pub mod attr {
    pub const READONLY: u32 = 0x0000_0001;
    pub const HIDDEN: u32 = 0x0000_0002;
    pub const SYSTEM: u32 = 0x0000_0004;
    pub const DIRECTORY: u32 = 0x0000_0010;
    pub const ARCHIVE: u32 = 0x0000_0020;
    pub const NORMAL: u32 = 0x0000_0080;
    pub const TEMPORARY: u32 = 0x0000_0100;
    pub const SPARSE_FILE: u32 = 0x0000_0200;
    pub const REPARSE_POINT: u32 = 0x0000_0400;
    pub const COMPRESSED: u32 = 0x0000_0800;
    pub const OFFLINE: u32 = 0x0000_1000;
    pub const NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
    pub const ENCRYPTED: u32 = 0x0000_4000;
    pub const INTEGRITY_STREAM: u32 = 0x0000_8000;
    pub const NO_SCRUB_DATA: u32 = 0x0002_0000;
    /// Attributes this server stores (in `user.DOSATTRIB`) besides READONLY/DIRECTORY.
    pub const STORED: u32 =
        HIDDEN | SYSTEM | ARCHIVE | TEMPORARY | SPARSE_FILE | OFFLINE | NOT_CONTENT_INDEXED;
    /// Attribute bits a client may pass in CREATE; others give STATUS_INVALID_PARAMETER
    /// (Samba's FILE_ATTRIBUTE_ALL_MASK, matching Windows in smb2.create.gentest).
    pub const VALID_SET: u32 = 0x0000_7FFF;
}

/// MS-SMB2 2.2.13 ShareAccess.
pub mod share {
    pub const READ: u32 = 0x1;
    pub const WRITE: u32 = 0x2;
    pub const DELETE: u32 = 0x4;
    pub const ALL: u32 = READ | WRITE | DELETE;
}

/// MS-SMB2 2.2.13 CreateOptions.
pub mod opts {
    pub const DIRECTORY_FILE: u32 = 0x0000_0001;
    pub const WRITE_THROUGH: u32 = 0x0000_0002;
    pub const SEQUENTIAL_ONLY: u32 = 0x0000_0004;
    pub const NO_INTERMEDIATE_BUFFERING: u32 = 0x0000_0008;
    pub const SYNCHRONOUS_IO_ALERT: u32 = 0x0000_0010;
    pub const SYNCHRONOUS_IO_NONALERT: u32 = 0x0000_0020;
    pub const NON_DIRECTORY_FILE: u32 = 0x0000_0040;
    pub const COMPLETE_IF_OPLOCKED: u32 = 0x0000_0100;
    pub const NO_EA_KNOWLEDGE: u32 = 0x0000_0200;
    pub const RANDOM_ACCESS: u32 = 0x0000_0800;
    pub const DELETE_ON_CLOSE: u32 = 0x0000_1000;
    pub const OPEN_BY_FILE_ID: u32 = 0x0000_2000;
    pub const OPEN_FOR_BACKUP_INTENT: u32 = 0x0000_4000;
    pub const NO_COMPRESSION: u32 = 0x0000_8000;
    pub const OPEN_REMOTE_INSTANCE: u32 = 0x0000_0400;
    pub const OPEN_REQUIRING_OPLOCK: u32 = 0x0001_0000;
    pub const DISALLOW_EXCLUSIVE: u32 = 0x0002_0000;
    pub const RESERVE_OPFILTER: u32 = 0x0010_0000;
    pub const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
    pub const OPEN_NO_RECALL: u32 = 0x0040_0000;
    pub const OPEN_FOR_FREE_SPACE_QUERY: u32 = 0x0080_0000;
}

/// MS-SMB2 2.2.13 CreateDisposition.
pub mod disposition {
    pub const SUPERSEDE: u32 = 0;
    pub const OPEN: u32 = 1;
    pub const CREATE: u32 = 2;
    pub const OPEN_IF: u32 = 3;
    pub const OVERWRITE: u32 = 4;
    pub const OVERWRITE_IF: u32 = 5;
}

/// MS-SMB2 2.2.14 CreateAction.
pub mod action {
    pub const SUPERSEDED: u32 = 0;
    pub const OPENED: u32 = 1;
    pub const CREATED: u32 = 2;
    pub const OVERWRITTEN: u32 = 3;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_mapping_matches_windows_values() {
        // FILE_GENERIC_READ/WRITE/EXECUTE as documented in winnt.h / MS-SMB2 2.2.13.1.
        assert_eq!(mask::FILE_GENERIC_READ, 0x0012_0089);
        assert_eq!(mask::FILE_GENERIC_WRITE, 0x0012_0116);
        assert_eq!(mask::FILE_GENERIC_EXECUTE, 0x0012_00A0);
        assert_eq!(map_generic(mask::GENERIC_ALL), mask::FILE_ALL_ACCESS);
        assert_eq!(
            map_generic(mask::GENERIC_READ | mask::DELETE),
            0x0012_0089 | mask::DELETE
        );
    }
}
