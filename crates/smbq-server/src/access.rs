//! Access masks, generic mapping and the protocol constants the handlers test (MS-SMB2 2.2.13,
//! MS-DTYP 2.4.3, MS-FSCC 2.6).

/// Access mask bits (MS-SMB2 2.2.13.1.1 / 2.2.13.1.2, MS-DTYP 2.4.3): smbq-wire's definitions,
/// plus the groupings only the server's access policy uses.
pub mod mask {
    pub use smbq_wire::fscc::access::*;

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
    pub const INVALID_BITS: u32 = !VALID_ACCESS_MASK;
}

/// MS-DTYP 2.4.3: turns GENERIC_* bits into the file-specific rights they stand for
/// (smbq-wire's mapping, the one definition).
pub use smbq_wire::fscc::access::map_generic;

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
    use smbq_wire::fscc::access as wire;

    pub const READ: u32 = wire::FILE_SHARE_READ;
    pub const WRITE: u32 = wire::FILE_SHARE_WRITE;
    pub const DELETE: u32 = wire::FILE_SHARE_DELETE;
    pub const ALL: u32 = wire::FILE_SHARE_VALID;
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
    fn server_groupings_keep_their_values() {
        // The reserved bits MS-SMB2 3.3.5.9 rejects, as this module listed them before it
        // took its masks from smbq-wire.
        assert_eq!(mask::INVALID_BITS, 0x0CE0_FE00);
        assert_eq!(mask::WRITE_RIGHTS, 0x000D_0156);
        assert_eq!(mask::READ_RIGHTS, 0x0012_00A9);
        assert_eq!(share::ALL, 0x7);
        assert_eq!(
            map_generic(mask::GENERIC_READ | mask::DELETE),
            0x0012_0089 | mask::DELETE
        );
    }
}
