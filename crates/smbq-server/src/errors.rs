//! The one mapping from `io::Error` (what the VFS reports) to NTSTATUS (what the client sees).
//!
//! Callers that know more than the errno (for example that the *parent* of a path is missing)
//! use [`map_io_error_in`] with the [`IoContext`] they are in.

use std::io;

use smbq_wire::NtStatus;

/// What the failed filesystem call was doing, where the errno alone is ambiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IoContext {
    /// Anything without a special case.
    #[default]
    General,
    /// Walking the parent directories of a name: ENOENT/ENOTDIR mean the *path* is missing
    /// (MS-FSA 2.1.5.1: STATUS_OBJECT_PATH_NOT_FOUND).
    Parent,
    /// Opening or creating the final component with a NON_DIRECTORY/DIRECTORY requirement.
    Final,
}

/// Maps an `io::Error` with no extra context.
pub fn map_io_error(e: &io::Error) -> NtStatus {
    map_io_error_in(e, IoContext::General)
}

/// Maps an `io::Error`, using `ctx` to split the ambiguous errnos.
pub fn map_io_error_in(e: &io::Error, ctx: IoContext) -> NtStatus {
    if let Some(errno) = e.raw_os_error() {
        return map_errno(errno, ctx);
    }
    match e.kind() {
        io::ErrorKind::NotFound => not_found(ctx),
        io::ErrorKind::PermissionDenied => NtStatus::ACCESS_DENIED,
        io::ErrorKind::AlreadyExists => NtStatus::OBJECT_NAME_COLLISION,
        io::ErrorKind::DirectoryNotEmpty => NtStatus::DIRECTORY_NOT_EMPTY,
        io::ErrorKind::IsADirectory => NtStatus::FILE_IS_A_DIRECTORY,
        io::ErrorKind::NotADirectory => not_a_directory(ctx),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => NtStatus::DISK_FULL,
        io::ErrorKind::InvalidFilename => NtStatus::OBJECT_NAME_INVALID,
        io::ErrorKind::ReadOnlyFilesystem => NtStatus::MEDIA_WRITE_PROTECTED,
        io::ErrorKind::FileTooLarge => NtStatus::DISK_FULL,
        io::ErrorKind::CrossesDevices => NtStatus::NOT_SAME_DEVICE,
        io::ErrorKind::InvalidInput => NtStatus::INVALID_PARAMETER,
        io::ErrorKind::Unsupported => NtStatus::NOT_SUPPORTED,
        io::ErrorKind::OutOfMemory => NtStatus::NO_MEMORY,
        io::ErrorKind::ResourceBusy => NtStatus::SHARING_VIOLATION,
        io::ErrorKind::UnexpectedEof => NtStatus::END_OF_FILE,
        _ => NtStatus::UNEXPECTED_IO_ERROR,
    }
}

fn not_found(ctx: IoContext) -> NtStatus {
    match ctx {
        IoContext::Parent => NtStatus::OBJECT_PATH_NOT_FOUND,
        _ => NtStatus::OBJECT_NAME_NOT_FOUND,
    }
}

fn not_a_directory(ctx: IoContext) -> NtStatus {
    match ctx {
        // A file used as a directory in the middle of a path.
        IoContext::Parent | IoContext::General => NtStatus::OBJECT_PATH_NOT_FOUND,
        // DIRECTORY_FILE asked for on a regular file.
        IoContext::Final => NtStatus::NOT_A_DIRECTORY,
    }
}

fn map_errno(errno: i32, ctx: IoContext) -> NtStatus {
    match errno {
        libc::ENOENT => not_found(ctx),
        libc::ENOTDIR => not_a_directory(ctx),
        libc::EEXIST => NtStatus::OBJECT_NAME_COLLISION,
        libc::ENOTEMPTY => NtStatus::DIRECTORY_NOT_EMPTY,
        libc::EISDIR => NtStatus::FILE_IS_A_DIRECTORY,
        libc::EMLINK => NtStatus::TOO_MANY_LINKS,
        // EXDEV is what RESOLVE_BENEATH reports for an escape attempt; ELOOP for a symlink we
        // refused to follow. Both are the client asking for something outside its share.
        libc::EACCES | libc::EPERM | libc::EXDEV | libc::ELOOP => NtStatus::ACCESS_DENIED,
        libc::ENOSPC | libc::EDQUOT | libc::EFBIG => NtStatus::DISK_FULL,
        libc::ENAMETOOLONG => NtStatus::OBJECT_NAME_INVALID,
        libc::EROFS => NtStatus::MEDIA_WRITE_PROTECTED,
        libc::EBUSY | libc::ETXTBSY => NtStatus::SHARING_VIOLATION,
        libc::EINVAL => NtStatus::INVALID_PARAMETER,
        libc::EBADF => NtStatus::INVALID_HANDLE,
        libc::ENOMEM => NtStatus::NO_MEMORY,
        libc::EMFILE | libc::ENFILE => NtStatus::TOO_MANY_OPENED_FILES,
        libc::ENOTSUP => NtStatus::NOT_SUPPORTED,
        libc::ENODATA => NtStatus::NOT_FOUND,
        libc::E2BIG | libc::ERANGE => NtStatus::BUFFER_OVERFLOW,
        libc::EILSEQ => NtStatus::OBJECT_NAME_INVALID,
        _ => NtStatus::UNEXPECTED_IO_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(e: i32) -> io::Error {
        io::Error::from_raw_os_error(e)
    }

    #[test]
    fn errnos_map_per_table() {
        let cases = [
            (
                libc::ENOENT,
                IoContext::General,
                NtStatus::OBJECT_NAME_NOT_FOUND,
            ),
            (
                libc::ENOENT,
                IoContext::Parent,
                NtStatus::OBJECT_PATH_NOT_FOUND,
            ),
            (
                libc::EEXIST,
                IoContext::General,
                NtStatus::OBJECT_NAME_COLLISION,
            ),
            (
                libc::ENOTEMPTY,
                IoContext::General,
                NtStatus::DIRECTORY_NOT_EMPTY,
            ),
            (
                libc::EISDIR,
                IoContext::General,
                NtStatus::FILE_IS_A_DIRECTORY,
            ),
            (libc::ENOTDIR, IoContext::Final, NtStatus::NOT_A_DIRECTORY),
            (
                libc::ENOTDIR,
                IoContext::Parent,
                NtStatus::OBJECT_PATH_NOT_FOUND,
            ),
            (libc::EACCES, IoContext::General, NtStatus::ACCESS_DENIED),
            (libc::EPERM, IoContext::General, NtStatus::ACCESS_DENIED),
            (libc::EXDEV, IoContext::General, NtStatus::ACCESS_DENIED),
            (libc::ELOOP, IoContext::General, NtStatus::ACCESS_DENIED),
            (libc::ENOSPC, IoContext::General, NtStatus::DISK_FULL),
            (
                libc::ENAMETOOLONG,
                IoContext::General,
                NtStatus::OBJECT_NAME_INVALID,
            ),
        ];
        for (errno, ctx, want) in cases {
            assert_eq!(
                map_io_error_in(&os(errno), ctx),
                want,
                "errno {errno} in {ctx:?}"
            );
        }
    }

    #[test]
    fn kinds_without_errno_map_too() {
        let e = io::Error::new(io::ErrorKind::NotFound, "x");
        assert_eq!(map_io_error(&e), NtStatus::OBJECT_NAME_NOT_FOUND);
        let e = io::Error::new(io::ErrorKind::PermissionDenied, "x");
        assert_eq!(map_io_error(&e), NtStatus::ACCESS_DENIED);
        let e = io::Error::other("x");
        assert_eq!(map_io_error(&e), NtStatus::UNEXPECTED_IO_ERROR);
    }
}
