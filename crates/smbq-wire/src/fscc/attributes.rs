//! File attributes (MS-FSCC 2.6). A bit set, so plain `u32` constants rather than an open enum.

pub const FILE_ATTRIBUTE_READONLY: u32 = 0x0000_0001;
pub const FILE_ATTRIBUTE_HIDDEN: u32 = 0x0000_0002;
pub const FILE_ATTRIBUTE_SYSTEM: u32 = 0x0000_0004;
pub const FILE_ATTRIBUTE_DIRECTORY: u32 = 0x0000_0010;
pub const FILE_ATTRIBUTE_ARCHIVE: u32 = 0x0000_0020;
/// Only valid alone (MS-FSCC 2.6); a server reports it when no other bit is set.
pub const FILE_ATTRIBUTE_NORMAL: u32 = 0x0000_0080;
pub const FILE_ATTRIBUTE_TEMPORARY: u32 = 0x0000_0100;
pub const FILE_ATTRIBUTE_SPARSE_FILE: u32 = 0x0000_0200;
pub const FILE_ATTRIBUTE_REPARSE_POINT: u32 = 0x0000_0400;
pub const FILE_ATTRIBUTE_COMPRESSED: u32 = 0x0000_0800;
pub const FILE_ATTRIBUTE_OFFLINE: u32 = 0x0000_1000;
pub const FILE_ATTRIBUTE_NOT_CONTENT_INDEXED: u32 = 0x0000_2000;
pub const FILE_ATTRIBUTE_ENCRYPTED: u32 = 0x0000_4000;
pub const FILE_ATTRIBUTE_INTEGRITY_STREAM: u32 = 0x0000_8000;
pub const FILE_ATTRIBUTE_NO_SCRUB_DATA: u32 = 0x0002_0000;
pub const FILE_ATTRIBUTE_RECALL_ON_OPEN: u32 = 0x0004_0000;
pub const FILE_ATTRIBUTE_PINNED: u32 = 0x0008_0000;
pub const FILE_ATTRIBUTE_UNPINNED: u32 = 0x0010_0000;
pub const FILE_ATTRIBUTE_RECALL_ON_DATA_ACCESS: u32 = 0x0040_0000;

/// The attributes a client may change through SET_INFO FileBasicInformation (MS-FSA
/// 2.1.5.15.2 "ValidSetAttributes"); the server ignores the others.
pub const SETTABLE: u32 = FILE_ATTRIBUTE_READONLY
    | FILE_ATTRIBUTE_HIDDEN
    | FILE_ATTRIBUTE_SYSTEM
    | FILE_ATTRIBUTE_ARCHIVE
    | FILE_ATTRIBUTE_TEMPORARY
    | FILE_ATTRIBUTE_OFFLINE
    | FILE_ATTRIBUTE_NOT_CONTENT_INDEXED;

/// Reparse tags (MS-FSCC 2.1.2.1) a POSIX server may report for special files.
pub const IO_REPARSE_TAG_SYMLINK: u32 = 0xA000_000C;
/// NFS-style reparse tag used by Windows for POSIX special files (MS-FSCC 2.1.2.1).
pub const IO_REPARSE_TAG_NFS: u32 = 0x8000_0014;

/// `attrs` as a server reports it: FILE_ATTRIBUTE_NORMAL when nothing else is set, and never
/// NORMAL combined with another bit (MS-FSCC 2.6).
pub fn normalize(attrs: u32) -> u32 {
    let a = attrs & !FILE_ATTRIBUTE_NORMAL;
    if a == 0 { FILE_ATTRIBUTE_NORMAL } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_only_alone() {
        assert_eq!(normalize(0), FILE_ATTRIBUTE_NORMAL);
        assert_eq!(normalize(FILE_ATTRIBUTE_NORMAL), FILE_ATTRIBUTE_NORMAL);
        assert_eq!(
            normalize(FILE_ATTRIBUTE_NORMAL | FILE_ATTRIBUTE_DIRECTORY),
            FILE_ATTRIBUTE_DIRECTORY
        );
    }
}
