//! Access masks (MS-DTYP 2.4.3, MS-SMB2 2.2.13.1.1 file/pipe/printer rights, 2.2.13.1.2
//! directory rights) and share access (MS-SMB2 2.2.13). Bit sets, so plain `u32` constants.

// File, pipe and printer specific rights (MS-SMB2 2.2.13.1.1).
pub const FILE_READ_DATA: u32 = 0x0000_0001;
pub const FILE_WRITE_DATA: u32 = 0x0000_0002;
pub const FILE_APPEND_DATA: u32 = 0x0000_0004;
pub const FILE_READ_EA: u32 = 0x0000_0008;
pub const FILE_WRITE_EA: u32 = 0x0000_0010;
pub const FILE_EXECUTE: u32 = 0x0000_0020;
/// Only meaningful on directories, but Windows defines it in the file right set too.
pub const FILE_DELETE_CHILD: u32 = 0x0000_0040;
pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0000_0100;

// Directory aliases of the same bits (MS-SMB2 2.2.13.1.2).
pub const FILE_LIST_DIRECTORY: u32 = FILE_READ_DATA;
pub const FILE_ADD_FILE: u32 = FILE_WRITE_DATA;
pub const FILE_ADD_SUBDIRECTORY: u32 = FILE_APPEND_DATA;
pub const FILE_TRAVERSE: u32 = FILE_EXECUTE;

// Standard rights (MS-DTYP 2.4.3).
pub const DELETE: u32 = 0x0001_0000;
pub const READ_CONTROL: u32 = 0x0002_0000;
pub const WRITE_DAC: u32 = 0x0004_0000;
pub const WRITE_OWNER: u32 = 0x0008_0000;
pub const SYNCHRONIZE: u32 = 0x0010_0000;
pub const STANDARD_RIGHTS_REQUIRED: u32 = DELETE | READ_CONTROL | WRITE_DAC | WRITE_OWNER;
pub const ACCESS_SYSTEM_SECURITY: u32 = 0x0100_0000;
pub const MAXIMUM_ALLOWED: u32 = 0x0200_0000;

// Generic rights (MS-DTYP 2.4.3).
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const GENERIC_EXECUTE: u32 = 0x2000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;
pub const GENERIC_READ: u32 = 0x8000_0000;
const GENERIC_MASK: u32 = GENERIC_ALL | GENERIC_EXECUTE | GENERIC_WRITE | GENERIC_READ;

/// The file object's generic mapping (the Windows FILE_GENERIC_* definitions MS-FSA and
/// MS-SMB2 3.3.5.9 rely on).
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
/// Every specific file right (0x1FF) plus the standard rights and SYNCHRONIZE.
pub const FILE_ALL_ACCESS: u32 = STANDARD_RIGHTS_REQUIRED | SYNCHRONIZE | 0x1FF;

/// Every bit a DesiredAccess may carry; MS-SMB2 3.3.5.9 fails a CREATE with any other bit set
/// (STATUS_ACCESS_DENIED).
pub const VALID_ACCESS_MASK: u32 =
    FILE_ALL_ACCESS | ACCESS_SYSTEM_SECURITY | MAXIMUM_ALLOWED | GENERIC_MASK;

/// Replaces GENERIC_* bits with the file rights they stand for (MS-DTYP 2.4.3; files and
/// directories share this one mapping); other bits pass through (MAXIMUM_ALLOWED and
/// ACCESS_SYSTEM_SECURITY are resolved by the caller's access check). The only definition:
/// the server and the client both use it.
pub fn map_generic(mask: u32) -> u32 {
    let mut out = mask & !GENERIC_MASK;
    if mask & GENERIC_READ != 0 {
        out |= FILE_GENERIC_READ;
    }
    if mask & GENERIC_WRITE != 0 {
        out |= FILE_GENERIC_WRITE;
    }
    if mask & GENERIC_EXECUTE != 0 {
        out |= FILE_GENERIC_EXECUTE;
    }
    if mask & GENERIC_ALL != 0 {
        out |= FILE_ALL_ACCESS;
    }
    out
}

// ShareAccess (MS-SMB2 2.2.13).
pub const FILE_SHARE_READ: u32 = 0x0000_0001;
pub const FILE_SHARE_WRITE: u32 = 0x0000_0002;
pub const FILE_SHARE_DELETE: u32 = 0x0000_0004;
pub const FILE_SHARE_VALID: u32 = FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_file_rights_have_their_windows_values() {
        // The numeric values winnt.h gives for FILE_GENERIC_* and FILE_ALL_ACCESS.
        assert_eq!(FILE_GENERIC_READ, 0x0012_0089);
        assert_eq!(FILE_GENERIC_WRITE, 0x0012_0116);
        assert_eq!(FILE_GENERIC_EXECUTE, 0x0012_00A0);
        assert_eq!(FILE_ALL_ACCESS, 0x001F_01FF);
    }

    #[test]
    fn map_generic_expands_and_clears_generic_bits() {
        assert_eq!(map_generic(GENERIC_READ), FILE_GENERIC_READ);
        assert_eq!(
            map_generic(GENERIC_WRITE | DELETE),
            FILE_GENERIC_WRITE | DELETE
        );
        assert_eq!(map_generic(GENERIC_EXECUTE), FILE_GENERIC_EXECUTE);
        assert_eq!(map_generic(GENERIC_ALL), FILE_ALL_ACCESS);
        assert_eq!(map_generic(MAXIMUM_ALLOWED), MAXIMUM_ALLOWED);
        assert_eq!(map_generic(u32::MAX) & GENERIC_MASK, 0);
        assert_eq!(map_generic(FILE_READ_DATA), FILE_READ_DATA);
    }

    #[test]
    fn valid_mask_excludes_reserved_bits() {
        assert_eq!(VALID_ACCESS_MASK, 0xF31F_01FF);
        assert_eq!(VALID_ACCESS_MASK & 0x0C00_0000, 0);
    }
}
