//! Where a file's NT security descriptor lives: self-relative bytes in the `user.smbq.sd`
//! extended attribute. Files without one present the descriptor their POSIX owner and mode
//! give ([`SecurityDescriptor::from_posix`]); only files that were given a descriptor (SET_INFO,
//! a SecD create context, or inheritance from a parent that has one) carry the xattr.
//!
//! An object this server created without a descriptor records who created it in the
//! `user.smbq.creator` xattr, and its POSIX view names that SID as owner: on Windows the
//! creator owns what it makes, and the children it makes under an inheriting parent are given
//! the creator as owner (crate::security::inherit), so parent and child must agree
//! (smbtorture smb2.acls.INHERITANCE compares them). The POSIX owner is the server's own
//! user for every file in the shared identity mode, so it cannot say who created a file.

use smbq_vfs::{FileKind, Stat, VfsFile};
use smbq_wire::security::{SecurityDescriptor, Sid};

use crate::meta;

/// The xattr (`user.` is added by the VFS).
pub const XATTR: &str = "smbq.sd";

/// Who created an object stored without a descriptor: inode (u64 LE), uid (u32 LE), SID. It
/// counts only while inode and uid are the same (a local chown or a copy with its xattrs is
/// another owner's file).
const CREATOR_XATTR: &str = "smbq.creator";

/// A stored descriptor larger than this is treated as damaged (the SMB2 SET_INFO buffer that
/// could produce it is far smaller; this only bounds what a read can cost).
const MAX_STORED: usize = 64 * 1024;

/// The stored descriptor, if any. Anything that does not decode (or has no owner) is ignored
/// with a warning, so a damaged xattr falls back to the POSIX view instead of locking the file.
pub fn read(file: &dyn VfsFile) -> Option<SecurityDescriptor> {
    decode(&file.get_xattr(XATTR).ok().flatten()?)
}

/// Whether a stored descriptor grants `token` all of `need`: no descriptor, or one that does
/// not decode, leaves the decision to the share's and the POSIX rules (true); a descriptor
/// that cannot be read fails closed (false). Access-based enumeration and change notify's
/// listing check both ask this.
pub fn grants(
    stored: std::io::Result<Option<Vec<u8>>>,
    token: &crate::security::Token,
    need: u32,
) -> bool {
    match stored {
        Err(_) => false,
        Ok(None) => true,
        Ok(Some(bytes)) => {
            decode(&bytes).is_none_or(|sd| super::check::maximal_access(&sd, token) & need == need)
        }
    }
}

/// A stored descriptor's bytes (the value of [`XATTR`]), as [`read`] judges them.
pub fn decode(bytes: &[u8]) -> Option<SecurityDescriptor> {
    if bytes.len() > MAX_STORED {
        tracing::warn!(
            len = bytes.len(),
            "oversized stored security descriptor ignored"
        );
        return None;
    }
    match SecurityDescriptor::decode(bytes) {
        Ok(sd) if sd.owner.is_some() => Some(sd),
        _ => {
            tracing::warn!("undecodable stored security descriptor ignored");
            None
        }
    }
}

/// Stores `sd`; an unencodable descriptor is refused (it could not be read back).
pub fn write(file: &dyn VfsFile, sd: &SecurityDescriptor) -> std::io::Result<()> {
    if !sd.is_encodable() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "security descriptor does not fit its wire fields",
        ));
    }
    let bytes = sd.to_bytes();
    if bytes.len() > MAX_STORED {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "security descriptor too large",
        ));
    }
    file.set_xattr(XATTR, &bytes)
}

/// Records `sid` as the creator of `file` (which has `st` and no stored descriptor).
pub fn write_creator(file: &dyn VfsFile, st: &Stat, sid: &Sid) -> std::io::Result<()> {
    let mut v = Vec::with_capacity(12 + sid.encoded_len());
    v.extend_from_slice(&st.ino.to_le_bytes());
    v.extend_from_slice(&st.uid.to_le_bytes());
    v.extend_from_slice(&sid.to_bytes());
    file.set_xattr(CREATOR_XATTR, &v)
}

/// The creator [`write_creator`] recorded, if the file is still the one it was recorded on.
fn read_creator(file: &dyn VfsFile, st: &Stat) -> Option<Sid> {
    let b = file.get_xattr(CREATOR_XATTR).ok().flatten()?;
    let ino = b
        .get(..8)
        .and_then(|x| x.try_into().ok())
        .map(u64::from_le_bytes)?;
    let uid = b
        .get(8..12)
        .and_then(|x| x.try_into().ok())
        .map(u32::from_le_bytes)?;
    if ino != st.ino || uid != st.uid {
        return None;
    }
    Sid::decode(b.get(12..)?).ok()
}

/// The descriptor a file without a stored one presents. A READONLY file (all write bits
/// cleared, see `crate::meta`) is shown with its owner's write bit back: READONLY is an
/// attribute, and toggling it must not change the ACL (smbtorture smb2.winattr).
pub fn synthesised(st: &Stat) -> SecurityDescriptor {
    let is_dir = st.kind == FileKind::Dir;
    let mode = if meta::is_read_only(st) {
        st.mode | 0o200
    } else {
        st.mode
    };
    SecurityDescriptor::from_posix(st.uid, st.gid, mode, is_dir)
}

/// The stored descriptor, else the synthesised one, owned by its creator where one was
/// recorded.
pub fn effective(file: &dyn VfsFile, st: &Stat) -> SecurityDescriptor {
    read(file).unwrap_or_else(|| {
        let mut sd = synthesised(st);
        if let Some(creator) = read_creator(file, st) {
            sd.owner = Some(creator);
        }
        sd
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_vfs::{CreateMode, MemVfs, OpenOptions, RelPath, Vfs};
    use smbq_wire::security::{Ace, Acl, control};

    fn file() -> Box<dyn VfsFile> {
        let vfs = MemVfs::new();
        let opts = OpenOptions {
            write: true,
            create: CreateMode::CreateNew,
            ..Default::default()
        };
        vfs.open(&RelPath::parse("f").unwrap(), &opts).unwrap().file
    }

    #[test]
    fn round_trip_and_damaged_values() {
        let f = file();
        assert_eq!(read(f.as_ref()), None);
        let sd = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(Sid::everyone()),
            group: Some(Sid::builtin_users()),
            sacl: None,
            dacl: Some(Acl::new(vec![Ace::allowed(Sid::everyone(), 1, 0)])),
        };
        write(f.as_ref(), &sd).unwrap();
        assert_eq!(read(f.as_ref()), Some(sd));
        f.set_xattr(XATTR, &[1, 0, 0]).unwrap();
        assert_eq!(read(f.as_ref()), None, "garbage falls back");
        let no_owner = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE,
            ..Default::default()
        };
        f.set_xattr(XATTR, &no_owner.to_bytes()).unwrap();
        assert_eq!(
            read(f.as_ref()),
            None,
            "an ownerless descriptor is not trusted"
        );
    }

    #[test]
    fn readonly_does_not_change_the_synthesised_acl() {
        let st = file().stat().unwrap();
        let mut ro = st.clone();
        ro.mode = st.mode & !0o222;
        let mut rw = st.clone();
        rw.mode = (st.mode & !0o222) | 0o200;
        assert_eq!(synthesised(&ro), synthesised(&rw));
    }

    #[test]
    fn the_creator_owns_what_it_made_while_it_is_the_same_file() {
        let f = file();
        let st = f.stat().unwrap();
        let posix = synthesised(&st).owner;
        assert_eq!(effective(f.as_ref(), &st).owner, posix);
        let alice = Sid::builtin_users();
        write_creator(f.as_ref(), &st, &alice).unwrap();
        let sd = effective(f.as_ref(), &st);
        assert_eq!(sd.owner, Some(alice));
        assert_eq!(
            sd.dacl,
            synthesised(&st).dacl,
            "the ACEs still describe the mode"
        );
        // Another inode or owner (a copy, a local chown) is not the creator's file.
        let mut other = st.clone();
        other.ino += 1;
        assert_eq!(
            effective(f.as_ref(), &other).owner,
            synthesised(&other).owner
        );
        let mut chowned = st.clone();
        chowned.uid += 1;
        assert_eq!(
            effective(f.as_ref(), &chowned).owner,
            synthesised(&chowned).owner
        );
        // A stored descriptor wins.
        let stored = SecurityDescriptor {
            control: control::SE_SELF_RELATIVE | control::SE_DACL_PRESENT,
            owner: Some(Sid::everyone()),
            group: Some(Sid::builtin_users()),
            sacl: None,
            dacl: Some(Acl::new(vec![Ace::allowed(Sid::everyone(), 1, 0)])),
        };
        write(f.as_ref(), &stored).unwrap();
        assert_eq!(effective(f.as_ref(), &st), stored);
        // Truncated records are ignored.
        f.set_xattr(CREATOR_XATTR, &[1, 2, 3]).unwrap();
        assert_eq!(read_creator(f.as_ref(), &st), None);
    }
}
