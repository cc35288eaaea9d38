//! Windows metadata POSIX has no place for: DOS attributes, CreationTime and the file id
//! stamped at creation (crate::file_id), kept in the `user.smbq.dos` extended attribute, and a
//! ChangeTime a client set explicitly, kept in memory (MS-FSCC 2.4.7 FILE_BASIC_INFORMATION,
//! MS-FSA 2.1.5.15.2).
//!
//! A ChangeTime cannot be stored on disk: writing anything moves the inode's ctime again. So
//! the server remembers, per file, the ctime the inode had right after the client's SET_INFO
//! and the FILETIME it asked for; as long as the inode's ctime is still that value nothing
//! has changed the file since, and the client's value is reported.

use smbq_vfs::{FileKind, Stat, VfsFile};

use crate::access::attr;
use crate::file_state::FileKey;
use crate::open_state::Queries as _;
use crate::{Server, meta};

/// The xattr (`user.` is added by the VFS) holding a [`DosInfo`].
pub const XATTR: &str = "smbq.dos";

/// Version 1 holds attributes and CreationTime; version 2 adds the file id stamp. A value
/// without a stamp is still written as version 1, so it reads the same everywhere; a server
/// from before version 2 reads a stamped value as "nothing stored" (POSIX defaults).
const V1: u8 = 1;
const V1_LEN: usize = 13;
const V2: u8 = 2;
const V2_LEN: usize = 29;

/// What the xattr holds. `None` fields were never set and fall back to what POSIX gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DosInfo {
    /// The stored attribute bits ([`attr::STORED`], plus READONLY for directories, where the
    /// mode cannot carry it); a file's READONLY and DIRECTORY always come from
    /// the mode and file type instead.
    pub attributes: Option<u32>,
    /// CreationTime as a FILETIME.
    pub creation: Option<u64>,
    /// The file id given to the file when this server created it (crate::file_id).
    pub file_id: Option<IdStamp>,
    /// The tag of the file's reparse point (crate::reparse), which lives in an xattr of its
    /// own: FILE_ATTRIBUTE_REPARSE_POINT is reported while there is one.
    pub reparse_tag: Option<u32>,
}

/// A file id and the inode it was given to: a copy of the xattr on another inode (`cp -a`,
/// a restore) is not that file, and must not report its id (crate::file_id::reported).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdStamp {
    pub ino: u64,
    pub id: u64,
}

impl DosInfo {
    /// `[version u8][attributes u32 LE][creation FILETIME u64 LE]`, then for version 2
    /// `[inode u64 LE][file id u64 LE]`; an all-ones attributes word, a zero creation time
    /// and a zero file id mean "not set".
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(V2_LEN);
        out.push(if self.file_id.is_some() { V2 } else { V1 });
        out.extend_from_slice(&self.attributes.unwrap_or(u32::MAX).to_le_bytes());
        out.extend_from_slice(&self.creation.unwrap_or(0).to_le_bytes());
        if let Some(s) = self.file_id {
            out.extend_from_slice(&s.ino.to_le_bytes());
            out.extend_from_slice(&s.id.to_le_bytes());
        }
        out
    }

    /// Anything unrecognised (another version, a wrong length) reads as "nothing stored":
    /// the xattr is advisory and a damaged one must not make the file unusable.
    pub fn decode(b: &[u8]) -> DosInfo {
        let (common, stamp) = match (b.first(), b.len()) {
            (Some(&V1), V1_LEN) => (b, None),
            (Some(&V2), V2_LEN) => match b.split_at_checked(V1_LEN) {
                Some((c, s)) => (c, Some(s)),
                None => return DosInfo::default(),
            },
            _ => return DosInfo::default(),
        };
        let u32_at = |i: usize| {
            common
                .get(i..i + 4)
                .and_then(|s| <[u8; 4]>::try_from(s).ok())
                .map_or(0, u32::from_le_bytes)
        };
        let u64_at = |s: &[u8], i: usize| {
            s.get(i..i + 8)
                .and_then(|s| <[u8; 8]>::try_from(s).ok())
                .map_or(0, u64::from_le_bytes)
        };
        let a = u32_at(1);
        let c = u64_at(common, 5);
        let file_id = stamp.and_then(|s| {
            let id = u64_at(s, 8);
            (id != 0).then(|| IdStamp {
                ino: u64_at(s, 0),
                id,
            })
        });
        DosInfo {
            attributes: (a != u32::MAX).then_some(a & (attr::STORED | attr::READONLY)),
            creation: (c != 0).then_some(c),
            file_id,
            reparse_tag: None,
        }
    }

    pub fn read(file: &dyn VfsFile) -> DosInfo {
        let mut info = match file.get_xattr(XATTR) {
            Ok(Some(b)) => DosInfo::decode(&b),
            _ => DosInfo::default(),
        };
        info.reparse_tag = crate::reparse::tag(file);
        info
    }

    /// From xattrs already read (a directory listing's [`VfsFile::entry_xattrs`], asked for
    /// the names [`DosInfo::wants`] accepts).
    pub fn from_xattrs(xattrs: &[(String, Vec<u8>)]) -> DosInfo {
        let mut info = xattrs
            .iter()
            .find(|(n, _)| n == XATTR)
            .map_or_else(DosInfo::default, |(_, v)| DosInfo::decode(v));
        info.reparse_tag = xattrs
            .iter()
            .find(|(n, _)| n == crate::reparse::XATTR)
            .and_then(|(_, v)| crate::reparse::tag_in(v));
        info
    }

    /// The xattrs [`DosInfo::from_xattrs`] reads.
    pub fn wants(name: &str) -> bool {
        name == XATTR || name == crate::reparse::XATTR
    }

    pub fn write(&self, file: &dyn VfsFile) -> std::io::Result<()> {
        file.set_xattr(XATTR, &self.encode())
    }
}

/// The four FILETIMEs, the attributes and the file id a client sees for one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub creation: u64,
    pub last_access: u64,
    pub last_write: u64,
    pub change: u64,
    pub attributes: u32,
    /// FileId / IndexNumber (crate::file_id::reported).
    pub file_id: u64,
    /// The reparse point's tag, 0 without one (crate::reparse).
    pub reparse_tag: u32,
}

impl View {
    /// `change` is the ChangeTime clients are shown when it is not the inode's (a client set
    /// it). LastWriteTime is always the inode's (crate::write_time).
    pub fn new(st: &Stat, name: &str, dos: &DosInfo, change: Option<u64>) -> View {
        View {
            creation: dos.creation.unwrap_or_else(|| meta::creation_time(st)),
            last_access: meta::ft(st.atime),
            last_write: meta::ft(st.mtime),
            change: change.unwrap_or_else(|| meta::ft(st.ctime)),
            attributes: attributes(st, name, dos),
            file_id: crate::file_id::reported(st, dos),
            reparse_tag: dos.reparse_tag.unwrap_or(0),
        }
    }
}

/// What `file` (an open of `key`, whose metadata is `st`) looks like to a client.
pub fn view(srv: &Server, file: &dyn VfsFile, key: FileKey, st: &Stat, name: &str) -> View {
    let dos = DosInfo::read(file);
    View::new(st, name, &dos, srv.open_state().change_time(key, st.ctime))
}

/// MS-FSCC 2.6: stored bits plus READONLY (mode) and DIRECTORY (type); a file with none left
/// is NORMAL. Without stored bits, the POSIX-derived defaults of [`meta::attributes`].
pub fn attributes(st: &Stat, name: &str, dos: &DosInfo) -> u32 {
    // What the server never opens (crate::posix::special) is a reparse point and no more.
    if !matches!(st.kind, FileKind::File | FileKind::Dir) {
        return attr::REPARSE_POINT;
    }
    let a = stored_attributes(st, name, dos);
    // MS-FSCC 2.6: a file with a reparse point says so (crate::reparse); NORMAL is only ever
    // alone.
    match dos.reparse_tag {
        Some(_) if a == attr::NORMAL => attr::REPARSE_POINT,
        Some(_) => a | attr::REPARSE_POINT,
        None => a,
    }
}

fn stored_attributes(st: &Stat, name: &str, dos: &DosInfo) -> u32 {
    let Some(stored) = dos.attributes else {
        return meta::attributes(st, name);
    };
    let mut a = stored & attr::STORED;
    if st.kind == FileKind::Dir {
        // A directory's READONLY restricts nothing on Windows; it is only remembered.
        a |= attr::DIRECTORY | (stored & attr::READONLY);
    } else if meta::is_read_only(st) {
        a |= attr::READONLY;
    }
    if a == 0 { attr::NORMAL } else { a }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_vfs::Timespec;

    fn stat(kind: FileKind, mode: u32) -> Stat {
        Stat {
            kind,
            size: 0,
            alloc_size: 0,
            nlink: 1,
            ino: 7,
            dev: 1,
            mode,
            uid: 0,
            gid: 0,
            atime: Timespec::new(1, 0),
            mtime: Timespec::new(2, 0),
            ctime: Timespec::new(3, 0),
            btime: None,
        }
    }

    #[test]
    fn encoding_round_trips_and_tolerates_garbage() {
        for d in [
            DosInfo::default(),
            DosInfo {
                attributes: Some(attr::HIDDEN | attr::SYSTEM),
                creation: Some(0x01d0_0000_1234_5678),
                file_id: None,
                reparse_tag: None,
            },
            DosInfo {
                attributes: Some(0),
                creation: None,
                file_id: None,
                reparse_tag: None,
            },
            DosInfo {
                attributes: None,
                creation: Some(7),
                file_id: Some(IdStamp {
                    ino: 12,
                    id: crate::file_id::STAMPED | 5,
                }),
                reparse_tag: None,
            },
        ] {
            assert_eq!(DosInfo::decode(&d.encode()), d);
        }
        assert_eq!(DosInfo::decode(b"short"), DosInfo::default());
        let mut other_version = DosInfo::default().encode();
        if let Some(v) = other_version.first_mut() {
            *v = 9;
        }
        assert_eq!(DosInfo::decode(&other_version), DosInfo::default());
        // A value without a stamp stays version 1 (13 bytes), readable by older servers.
        assert_eq!(DosInfo::default().encode().len(), 13);
        // A version 2 value cut short is damaged, not a version 1 value.
        let stamped = DosInfo {
            attributes: Some(attr::HIDDEN),
            creation: None,
            file_id: Some(IdStamp { ino: 1, id: 2 }),
            reparse_tag: None,
        }
        .encode();
        assert_eq!(stamped.len(), 29);
        assert_eq!(
            DosInfo::decode(stamped.get(..13).unwrap_or_default()),
            DosInfo::default()
        );
        // Bits this server does not store are dropped on the way in.
        let d = DosInfo {
            attributes: Some(attr::HIDDEN | attr::DIRECTORY | attr::READONLY),
            creation: None,
            file_id: None,
            reparse_tag: None,
        };
        assert_eq!(
            DosInfo::decode(&d.encode()).attributes,
            Some(attr::HIDDEN | attr::READONLY),
            "DIRECTORY is never stored"
        );
    }

    #[test]
    fn attributes_follow_the_stored_bits() {
        let f = stat(FileKind::File, 0o100644);
        let none = DosInfo::default();
        assert_eq!(attributes(&f, "a", &none), attr::ARCHIVE);
        let normal = DosInfo {
            attributes: Some(0),
            creation: None,
            file_id: None,
            reparse_tag: None,
        };
        assert_eq!(attributes(&f, "a", &normal), attr::NORMAL);
        let hidden = DosInfo {
            attributes: Some(attr::HIDDEN),
            creation: None,
            file_id: None,
            reparse_tag: None,
        };
        assert_eq!(attributes(&f, "a", &hidden), attr::HIDDEN);
        let ro = stat(FileKind::File, 0o100444);
        assert_eq!(attributes(&ro, "a", &normal), attr::READONLY);
        let d = stat(FileKind::Dir, 0o040755);
        assert_eq!(attributes(&d, "d", &normal), attr::DIRECTORY);
        // READONLY is stored for directories only; a file's comes from its mode.
        let stored_ro = DosInfo {
            attributes: Some(attr::READONLY),
            creation: None,
            file_id: None,
            reparse_tag: None,
        };
        assert_eq!(
            attributes(&d, "d", &stored_ro),
            attr::DIRECTORY | attr::READONLY
        );
        assert_eq!(attributes(&f, "a", &stored_ro), attr::NORMAL);
    }

    #[test]
    fn change_time_holds_until_the_inode_changes() {
        let t = crate::file_state::FileStates::new();
        let key = FileKey {
            dev: 1,
            ino: 2,
            stream: 0,
        };
        let c1 = Timespec::new(100, 5);
        t.set_change_time(key, c1, 42);
        assert_eq!(t.change_time(key, c1), Some(42));
        assert_eq!(t.change_time(key, Timespec::new(100, 6)), None);
        assert_eq!(
            t.change_time(
                FileKey {
                    dev: 1,
                    ino: 3,
                    stream: 0
                },
                c1
            ),
            None
        );
        let view = View::new(
            &stat(FileKind::File, 0o100644),
            "a",
            &DosInfo::default(),
            None,
        );
        assert_eq!(view.change, meta::ft(Timespec::new(3, 0)));
    }
}
