//! Reparse points (MS-FSCC 2.1.2; FSCTL_SET_REPARSE_POINT, FSCTL_GET_REPARSE_POINT and
//! FSCTL_DELETE_REPARSE_POINT, MS-FSA 2.1.5.10): what a client sets is kept as data, in the
//! `user.smbq.reparse` xattr of a regular file, and given back as it was sent. It is never
//! acted on: a symlink a client makes this way (the SMB3 POSIX extensions' symlinks, Samba's
//! smbclient `symlink`) is never created on disk and never followed by the server, wherever
//! it points; a tag can never become a device node. Samba keeps them the same way
//! (`user.SmbReparse`).
//!
//! The file then reports FILE_ATTRIBUTE_REPARSE_POINT and its tag (crate::dos), and a CREATE
//! of it without FILE_OPEN_REPARSE_POINT is refused (handlers::create): a symlink with
//! STATUS_STOPPED_ON_SYMLINK and where it points ([`symlink_error`]), so the client follows
//! it itself, as Windows and Samba answer; any other tag as NTFS refuses one no filter
//! handles.

use smbq_vfs::{Vfs, VfsFile};
use smbq_wire::NtStatus;

/// The xattr (`user.` is added by the VFS) holding the REPARSE_DATA_BUFFER as set.
pub const XATTR: &str = "smbq.reparse";

/// MAXIMUM_REPARSE_DATA_BUFFER_SIZE (MS-FSCC 2.1.2.2): no buffer is larger.
pub const MAX_LEN: usize = 16 * 1024;

/// The fixed header: ReparseTag, ReparseDataLength, Reserved (MS-FSCC 2.1.2.2).
const HEADER: usize = 8;
/// A non-Microsoft tag's buffer also carries a GUID (REPARSE_GUID_DATA_BUFFER, 2.1.2.3).
const GUID_HEADER: usize = HEADER + 16;

/// Bit 31 of a tag: a Microsoft tag (MS-FSCC 2.1.2.1), whose buffer has no GUID.
const MICROSOFT_TAG: u32 = 0x8000_0000;

/// The tag of the buffer `v` (a stored xattr value).
pub fn tag_in(v: &[u8]) -> Option<u32> {
    let b: [u8; 4] = v.get(..4)?.try_into().ok()?;
    Some(u32::from_le_bytes(b))
}

/// The tag of `file`'s reparse point, if it has one.
pub fn tag(file: &dyn VfsFile) -> Option<u32> {
    file.get_xattr(XATTR)
        .ok()
        .flatten()
        .and_then(|v| tag_in(&v))
}

/// Checks a REPARSE_DATA_BUFFER or REPARSE_GUID_DATA_BUFFER as a client sends it and returns
/// its tag: ReparseDataLength must count exactly the bytes after the header (MS-FSA
/// 2.1.5.10.37), and tag 0 is reserved.
fn check(buf: &[u8]) -> Result<u32, NtStatus> {
    if buf.is_empty() {
        return Err(NtStatus::INVALID_BUFFER_SIZE);
    }
    if buf.len() < HEADER || buf.len() > MAX_LEN {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    }
    let tag = tag_in(buf).ok_or(NtStatus::IO_REPARSE_DATA_INVALID)?;
    if tag == 0 {
        return Err(NtStatus::IO_REPARSE_TAG_INVALID);
    }
    let len = buf
        .get(4..6)
        .and_then(|b| <[u8; 2]>::try_from(b).ok())
        .map(|b| usize::from(u16::from_le_bytes(b)))
        .ok_or(NtStatus::IO_REPARSE_DATA_INVALID)?;
    let header = if tag & MICROSOFT_TAG != 0 {
        HEADER
    } else {
        GUID_HEADER
    };
    if buf.len() < header || len != buf.len() - header {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    }
    Ok(tag)
}

/// FSCTL_SET_REPARSE_POINT on `file` (a regular file: Samba refuses others, and a directory
/// with a reparse point would change how every path through it resolves). The caller checked
/// the open holds FILE_WRITE_DATA or FILE_WRITE_ATTRIBUTES. A file that has a reparse point
/// keeps its tag: setting another is IO_REPARSE_TAG_MISMATCH (MS-FSA 2.1.5.10.37).
pub fn set(file: &dyn VfsFile, is_dir: bool, buf: &[u8]) -> Result<(), NtStatus> {
    let new = check(buf)?;
    if is_dir {
        return Err(NtStatus::ACCESS_DENIED);
    }
    if tag(file).is_some_and(|t| t != new) {
        return Err(NtStatus::IO_REPARSE_TAG_MISMATCH);
    }
    file.set_xattr(XATTR, buf)
        .map_err(|e| crate::errors::map_io_error(&e))
}

/// The ErrorData of STATUS_STOPPED_ON_SYMLINK for `file`, a symlink reparse point opened
/// as the last component of a CREATE's name (MS-SMB2 3.3.5.9, 2.2.2.2.1: nothing of the
/// name is left unparsed). `None` when the file holds no well-formed symlink buffer.
pub fn symlink_error(file: &dyn VfsFile) -> Option<Vec<u8>> {
    symlink_error_with(file, 0)
}

/// A symlink reparse point met before the last component of a CREATE's name (`name`, as
/// parsed from `spelled`): the ErrorData of STATUS_STOPPED_ON_SYMLINK, with what follows the
/// link in the name (its UTF-16 bytes, from the separator after the link) as
/// UnparsedPathLength, for the client to follow the link and carry on (MS-SMB2 2.2.2.2.1;
/// Samba's filename.c does the same). `None` when no component before the last is one;
/// looked up as the open looks names up (`posix`). Blocking.
pub fn symlink_in_path(
    vfs: &dyn Vfs,
    name: &crate::path::SmbName,
    spelled: &str,
    posix: bool,
) -> Option<Vec<u8>> {
    let (path, at) = crate::path::blocked_at(vfs, name, posix)?;
    // The name as spelled up to and including the link: its components and the separators
    // between them.
    let consumed: usize = name
        .components
        .get(..=at)?
        .iter()
        .map(|c| c.encode_utf16().count())
        .sum::<usize>()
        + at;
    let unparsed = spelled.encode_utf16().count().checked_sub(consumed)?;
    let opts = smbq_vfs::OpenOptions {
        directory: Some(false),
        ..Default::default()
    };
    let file = vfs.open(&path, &opts).ok()?.file;
    symlink_error_with(file.as_ref(), u16::try_from(unparsed * 2).ok()?)
}

fn symlink_error_with(file: &dyn VfsFile, unparsed_path_length: u16) -> Option<Vec<u8>> {
    use smbq_wire::cursor::utf16le_encode;
    use smbq_wire::error_response::SymlinkErrorResponse;
    use smbq_wire::fscc::reparse::SymlinkReparse;
    let v = file.get_xattr(XATTR).ok().flatten()?;
    check(&v).ok()?;
    let link = SymlinkReparse::decode(&v).ok()?;
    let (substitute, print) = (
        utf16le_encode(&link.substitute_name),
        utf16le_encode(&link.print_name),
    );
    let mut w = smbq_wire::Writer::new();
    SymlinkErrorResponse {
        unparsed_path_length,
        substitute_name: &substitute,
        print_name: &print,
        flags: link.flags,
    }
    .encode(&mut w);
    Some(w.into_vec())
}

/// FSCTL_GET_REPARSE_POINT: the buffer as set; NOT_A_REPARSE_POINT without one. An output
/// buffer too small for the header is BUFFER_TOO_SMALL; one too small for the data gets what
/// fits and BUFFER_OVERFLOW (MS-FSA 2.1.5.10.24).
pub fn get(file: &dyn VfsFile, max_out: usize) -> Result<(Vec<u8>, NtStatus), NtStatus> {
    let v = file
        .get_xattr(XATTR)
        .map_err(|e| crate::errors::map_io_error(&e))?
        .filter(|v| check(v).is_ok())
        .ok_or(NtStatus::NOT_A_REPARSE_POINT)?;
    if max_out < HEADER {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    if v.len() > max_out {
        return Ok((
            v.get(..max_out).unwrap_or_default().to_vec(),
            NtStatus::BUFFER_OVERFLOW,
        ));
    }
    Ok((v, NtStatus::SUCCESS))
}

/// FSCTL_DELETE_REPARSE_POINT: the buffer names the tag (and no data); it must be the file's
/// (MS-FSA 2.1.5.10.9).
pub fn delete(file: &dyn VfsFile, buf: &[u8]) -> Result<(), NtStatus> {
    let asked = check(buf)?;
    let header = if asked & MICROSOFT_TAG != 0 {
        HEADER
    } else {
        GUID_HEADER
    };
    if buf.len() != header {
        return Err(NtStatus::IO_REPARSE_DATA_INVALID);
    }
    match tag(file) {
        None => Err(NtStatus::NOT_A_REPARSE_POINT),
        Some(t) if t != asked => Err(NtStatus::IO_REPARSE_TAG_MISMATCH),
        Some(_) => file
            .remove_xattr(XATTR)
            .map(|_| ())
            .map_err(|e| crate::errors::map_io_error(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symlink_buffer(target: &str) -> Vec<u8> {
        let name: Vec<u8> = target.encode_utf16().flat_map(u16::to_le_bytes).collect();
        let mut b = Vec::new();
        b.extend_from_slice(&0xA000_000Cu32.to_le_bytes());
        b.extend_from_slice(
            &u16::try_from(12 + 2 * name.len())
                .unwrap_or(0)
                .to_le_bytes(),
        );
        b.extend_from_slice(&[0, 0]);
        let n = u16::try_from(name.len()).unwrap_or(0);
        for v in [0, n, n, n] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&1u32.to_le_bytes());
        b.extend_from_slice(&name);
        b.extend_from_slice(&name);
        b
    }

    #[test]
    fn buffers_are_checked_as_ms_fsa_says() {
        let good = symlink_buffer("../outside");
        assert_eq!(check(&good), Ok(0xA000_000C));
        assert_eq!(check(&[]), Err(NtStatus::INVALID_BUFFER_SIZE));
        assert_eq!(check(&good[..7]), Err(NtStatus::IO_REPARSE_DATA_INVALID));
        assert_eq!(
            check(&good[..good.len() - 1]),
            Err(NtStatus::IO_REPARSE_DATA_INVALID)
        );
        assert_eq!(
            check(&[0, 0, 0, 0, 0, 0, 0, 0]),
            Err(NtStatus::IO_REPARSE_TAG_INVALID)
        );
        // A non-Microsoft tag needs its GUID: 24 bytes of header.
        let mut guid = vec![0x25, 0, 0, 0x00, 0, 0, 0, 0];
        assert_eq!(check(&guid), Err(NtStatus::IO_REPARSE_DATA_INVALID));
        guid.extend_from_slice(&[7; 16]);
        assert_eq!(check(&guid), Ok(0x25));
        let big = vec![0u8; MAX_LEN + 1];
        assert_eq!(check(&big), Err(NtStatus::IO_REPARSE_DATA_INVALID));
    }
}
