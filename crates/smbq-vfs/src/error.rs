//! Errors this crate makes up itself; everything else is the kernel's errno, kept raw.

use std::io;
use thiserror::Error;

/// Refusals that have no errno of their own. They travel as `io::Error` with
/// `ErrorKind::PermissionDenied` (or `InvalidInput`) and no raw errno, so the server answers
/// `STATUS_ACCESS_DENIED`; [`is_confinement_error`] tells them apart for logging.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum VfsError {
    /// Path resolution would leave the share (absolute symlink, `..` above the root, or a
    /// symlink whose target lies outside); the kernel reports EXDEV for these.
    #[error("path escapes the share")]
    Escape,
    /// A non-directory with more than one link: it may be a link to a file outside the share.
    #[error("file has several hard links")]
    HardLink,
    /// Devices, FIFOs and sockets are never opened for data.
    #[error("not a regular file or directory")]
    SpecialFile,
    /// The share root itself cannot be renamed or removed.
    #[error("operation not allowed on the share root")]
    ShareRoot,
    #[error("invalid extended attribute name")]
    XattrName,
}

impl From<VfsError> for io::Error {
    fn from(e: VfsError) -> Self {
        let kind = match e {
            VfsError::XattrName => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, e)
    }
}

/// Whether `e` is one of this crate's refusals to reach outside the share.
pub fn is_confinement_error(e: &io::Error) -> bool {
    matches!(
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<VfsError>()),
        Some(VfsError::Escape | VfsError::HardLink)
    )
}

/// An `io::Error` with the given errno, so `raw_os_error()` works the same for both backends.
pub(crate) fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}
