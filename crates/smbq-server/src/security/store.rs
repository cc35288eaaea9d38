//! Where a file's NT security descriptor lives: self-relative bytes in the `user.smbq.sd`
//! extended attribute. Files without one present the descriptor their POSIX owner and mode
//! give ([`SecurityDescriptor::from_posix`]); only files that were given a descriptor (SET_INFO,
//! a SecD create context, or inheritance from a parent that has one) carry the xattr.

use smbq_vfs::{FileKind, Stat, VfsFile};
use smbq_wire::security::SecurityDescriptor;

use crate::meta;

/// The xattr (`user.` is added by the VFS).
pub const XATTR: &str = "smbq.sd";

/// A stored descriptor larger than this is treated as damaged (the SMB2 SET_INFO buffer that
/// could produce it is far smaller; this only bounds what a read can cost).
const MAX_STORED: usize = 64 * 1024;

/// The stored descriptor, if any. Anything that does not decode (or has no owner) is ignored
/// with a warning, so a damaged xattr falls back to the POSIX view instead of locking the file.
pub fn read(file: &dyn VfsFile) -> Option<SecurityDescriptor> {
    let bytes = file.get_xattr(XATTR).ok().flatten()?;
    if bytes.len() > MAX_STORED {
        tracing::warn!(
            len = bytes.len(),
            "oversized stored security descriptor ignored"
        );
        return None;
    }
    match SecurityDescriptor::decode(&bytes) {
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

/// The stored descriptor, else the synthesised one.
pub fn effective(file: &dyn VfsFile, st: &Stat) -> SecurityDescriptor {
    read(file).unwrap_or_else(|| synthesised(st))
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_vfs::{CreateMode, MemVfs, OpenOptions, RelPath, Vfs};
    use smbq_wire::security::{Ace, Acl, Sid, control};

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
}
