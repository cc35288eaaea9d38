//! Per-user identities (crate::unix_identity): the SMB rights whose changes smbq carries out
//! with the server's uid, granted only as far as the kernel lets the request's Unix user make
//! the change itself.
//!
//! Data, renames and new files go through the kernel as the user, which refuses what the
//! user may not do. Descriptors, DOS attributes, EAs and named streams live in extended
//! attributes that smbq writes as root (smbq_vfs::privilege), so for them the kernel is asked
//! at CREATE, on the opened object, and what it would refuse is never granted:
//!
//! | Right | Granted when |
//! |---|---|
//! | WRITE_DAC, WRITE_OWNER | the user owns the file (POSIX chmod/chown; Samba alike) |
//! | FILE_WRITE_ATTRIBUTES, FILE_WRITE_EA | the user owns the file or may write it |
//! | FILE_WRITE_DATA, FILE_APPEND_DATA (and a directory's FILE_DELETE_CHILD) | the user may write it |
//! | DELETE of a named stream | the user may write the file (a stream is part of it) |
//!
//! "May write" is the kernel's answer for the thread's effective ids (faccessat2 with
//! AT_EACCESS: mode bits, POSIX ACLs, read-only mounts). DELETE of a file or directory is
//! the kernel's answer on unlinking it (`Vfs::may_unlink`, asked by CREATE before opening).

use smbq_vfs::{Stat, VfsFile};

use crate::access::mask;

/// What kind of object an open names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Object {
    File,
    Dir,
    /// A named stream of a file or directory: its data is the base's extended attributes.
    Stream,
}

/// The kernel's verdicts on one object for the calling thread's user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The user owns the object (or is root).
    pub owner: bool,
    /// The kernel lets the user write the object.
    pub writable: bool,
}

impl Verdict {
    /// Asks the kernel about `file` (whose status is `st`) for the calling thread's user.
    pub(crate) fn ask(file: &dyn VfsFile, st: &Stat) -> std::io::Result<Verdict> {
        let me = rustix::process::geteuid();
        Ok(Verdict {
            owner: me.is_root() || me.as_raw() == st.uid,
            writable: file.may_write()?,
        })
    }

    /// `maximal` without the rights the kernel would refuse (the table above).
    pub(crate) fn narrow(self, object: Object, maximal: u32) -> u32 {
        let mut refused = 0;
        if !self.owner {
            refused |= mask::WRITE_DAC | mask::WRITE_OWNER;
        }
        if !self.writable {
            refused |= mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA;
            if !self.owner {
                refused |= mask::FILE_WRITE_ATTRIBUTES | mask::FILE_WRITE_EA;
            }
            match object {
                Object::File => {}
                Object::Dir => refused |= mask::FILE_DELETE_CHILD,
                Object::Stream => refused |= mask::DELETE,
            }
        }
        maximal & !refused
    }
}

/// `maximal` narrowed to what the kernel allows the request's user on `file`, when the thread
/// runs a request as its user; `maximal` unchanged otherwise.
pub(crate) fn narrow(file: &dyn VfsFile, object: Object, maximal: u32) -> std::io::Result<u32> {
    if !crate::unix_identity::active() {
        return Ok(maximal);
    }
    let st = file.stat()?;
    Ok(Verdict::ask(file, &st)?.narrow(object, maximal))
}

/// Whether the request's user may change `file` (add a named stream to it, say): always when
/// the thread runs as the server.
pub(crate) fn may_change(file: &dyn VfsFile) -> std::io::Result<bool> {
    if !crate::unix_identity::active() {
        return Ok(true);
    }
    file.may_write()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u32 = mask::FILE_ALL_ACCESS;

    fn v(owner: bool, writable: bool) -> Verdict {
        Verdict { owner, writable }
    }

    #[test]
    fn the_owner_and_a_writer_keep_what_they_may_do() {
        assert_eq!(v(true, true).narrow(Object::File, ALL), ALL);
        assert_eq!(v(true, true).narrow(Object::Stream, ALL), ALL);
        let writer = v(false, true).narrow(Object::File, ALL);
        assert_eq!(writer, ALL & !(mask::WRITE_DAC | mask::WRITE_OWNER));
        assert_ne!(writer & mask::FILE_WRITE_ATTRIBUTES, 0);
        assert_ne!(writer & mask::FILE_WRITE_EA, 0);
        assert_ne!(v(false, true).narrow(Object::Stream, ALL) & mask::DELETE, 0);
    }

    #[test]
    fn a_reader_changes_nothing() {
        let changes = mask::FILE_WRITE_DATA
            | mask::FILE_APPEND_DATA
            | mask::FILE_WRITE_ATTRIBUTES
            | mask::FILE_WRITE_EA
            | mask::WRITE_DAC
            | mask::WRITE_OWNER;
        for object in [Object::File, Object::Dir, Object::Stream] {
            let got = v(false, false).narrow(object, ALL);
            assert_eq!(got & changes, 0, "{object:?}");
            assert_ne!(got & mask::FILE_READ_DATA, 0, "{object:?}");
        }
        assert_eq!(
            v(false, false).narrow(Object::Stream, ALL) & mask::DELETE,
            0
        );
        assert_eq!(
            v(false, false).narrow(Object::Dir, ALL) & mask::FILE_DELETE_CHILD,
            0
        );
        // The file's DELETE is the unlink check's (the directory decides), not this one's.
        assert_ne!(v(false, false).narrow(Object::File, ALL) & mask::DELETE, 0);
    }

    #[test]
    fn the_owner_of_a_read_only_file_keeps_its_attributes_and_descriptor() {
        let got = v(true, false).narrow(Object::File, ALL);
        assert_eq!(got & (mask::FILE_WRITE_DATA | mask::FILE_APPEND_DATA), 0);
        let kept = mask::FILE_WRITE_ATTRIBUTES | mask::FILE_WRITE_EA | mask::WRITE_DAC;
        assert_eq!(got & kept, kept);
    }

    #[test]
    fn never_more_than_it_was_given() {
        let read = mask::FILE_GENERIC_READ;
        for (o, w) in [(true, true), (true, false), (false, true), (false, false)] {
            assert_eq!(v(o, w).narrow(Object::Stream, read), read);
        }
    }
}
