//! Extended attributes in the Windows sense (MS-FSCC 2.4.15 FileFullEaInformation): kept as
//! `user.smbq.ea.<NAME>` xattrs whose value is the EA's flags byte followed by its value.
//!
//! EA names are case-insensitive and Windows stores them upper-cased, so the name is
//! upper-cased (ASCII) on the way in. Names are limited to printable ASCII without the
//! characters MS-FSCC 2.4.15 forbids, and to 242 bytes (the xattr name limit minus the
//! prefix) instead of 255. All EAs of a file share the filesystem's xattr space (about
//! 4 KiB per inode on ext4 without `ea_inode`); a set that does not fit is EA_TOO_LARGE.

use std::io;

use smbq_vfs::VfsFile;
use smbq_wire::fscc::file_info::{FILE_NEED_EA, FullEa, GetEaList};
use smbq_wire::query_info::query_info_flags as qflags;
use smbq_wire::{NtStatus, Writer};

use crate::errors::map_io_error;

/// The xattr name prefix (the VFS adds `user.`).
pub const PREFIX: &str = "smbq.ea.";
/// Longest storable EA name: the VFS takes xattr names up to 250 bytes.
const MAX_NAME: usize = 250 - PREFIX.len();
/// MS-ERREF STATUS_NO_MORE_EAS: an enumeration went past the last EA.
pub const STATUS_NO_MORE_EAS: NtStatus = NtStatus(0x8000_0012);
/// MS-ERREF STATUS_EA_LIST_INCONSISTENT: a malformed FILE_FULL_EA_INFORMATION list.
pub const STATUS_EA_LIST_INCONSISTENT: NtStatus = NtStatus(0x8000_0014);
/// MS-FSCC 2.4.15: the only flag an EA may carry.
const VALID_FLAGS: u8 = FILE_NEED_EA;

/// One stored EA, name upper-cased.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ea {
    pub flags: u8,
    pub name: String,
    pub value: Vec<u8>,
}

/// MS-FSCC 2.4.15: an EA name is 1..=255 8-bit characters without control characters or
/// any of `" * + , / : ; < = > ? [ \ ] |`; this server also needs it printable ASCII and
/// short enough for an xattr name. Returns the upper-cased form.
pub fn check_name(name: &[u8]) -> Result<String, NtStatus> {
    let bad = |b: u8| {
        !(0x20..0x7F).contains(&b)
            || matches!(
                b,
                b'"' | b'*'
                    | b'+'
                    | b','
                    | b'/'
                    | b':'
                    | b';'
                    | b'<'
                    | b'='
                    | b'>'
                    | b'?'
                    | b'['
                    | b'\\'
                    | b']'
                    | b'|'
            )
    };
    if name.is_empty() || name.len() > MAX_NAME || name.iter().any(|&b| bad(b)) {
        return Err(NtStatus::INVALID_EA_NAME);
    }
    let s = std::str::from_utf8(name).map_err(|_| NtStatus::INVALID_EA_NAME)?;
    Ok(s.to_ascii_uppercase())
}

/// Every EA of `file`, in the order the filesystem lists them (creation order on ext4).
pub fn list(file: &dyn VfsFile) -> io::Result<Vec<Ea>> {
    let mut out = Vec::new();
    for x in file.list_xattrs()? {
        if stored_name(&x).is_none() {
            continue;
        }
        if let Some(v) = file.get_xattr(&x)? {
            out.extend(decode(&x, &v));
        }
    }
    Ok(out)
}

/// The EA name of xattr `x` (without `user.`), when `x` holds a valid EA.
fn stored_name(x: &str) -> Option<&str> {
    let name = x.strip_prefix(PREFIX)?;
    check_name(name.as_bytes()).ok().map(|_| name)
}

/// Whether xattr `x` (without `user.`) holds an EA; for [`VfsFile::entry_xattrs`].
pub fn is_ea_xattr(x: &str) -> bool {
    stored_name(x).is_some()
}

fn decode(x: &str, v: &[u8]) -> Option<Ea> {
    let name = stored_name(x)?;
    let (flags, value) = v.split_first().map_or((0, &[][..]), |(f, r)| (*f, r));
    Some(Ea {
        flags: flags & VALID_FLAGS,
        name: name.to_owned(),
        value: value.to_vec(),
    })
}

/// [`ea_size`] from xattrs already read (a directory listing's
/// [`VfsFile::entry_xattrs`]); others in `xattrs` are ignored.
pub fn ea_size_of(xattrs: &[(String, Vec<u8>)]) -> u32 {
    let total: u64 = xattrs
        .iter()
        .filter_map(|(x, v)| decode(x, v))
        .map(|e| entry_len(&e))
        .sum();
    u32::try_from(total).unwrap_or(u32::MAX)
}

/// One FILE_FULL_EA_INFORMATION entry's length including its padding to 4 bytes.
fn entry_len(e: &Ea) -> u64 {
    let raw = (FullEa::MIN_LEN + e.name.len() + e.value.len()) as u64;
    raw.div_ceil(4) * 4
}

/// MS-FSCC 2.4.12 FileEaInformation.EaSize: the bytes a FILE_FULL_EA_INFORMATION list of
/// every EA takes (0 without EAs). Best effort: unreadable xattrs count as none.
pub fn ea_size(file: &dyn VfsFile) -> u32 {
    let total: u64 = list(file).unwrap_or_default().iter().map(entry_len).sum();
    u32::try_from(total).unwrap_or(u32::MAX)
}

/// Validates a FILE_FULL_EA_INFORMATION list from a client (SET_INFO FileFullEaInformation
/// or the ExtA create context) and returns it with names upper-cased.
pub fn parse_set(buf: &[u8]) -> Result<Vec<Ea>, NtStatus> {
    let list = FullEa::decode_list(buf).map_err(|_| STATUS_EA_LIST_INCONSISTENT)?;
    list.iter()
        .map(|e| {
            if e.flags & !VALID_FLAGS != 0 {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            Ok(Ea {
                flags: e.flags,
                name: check_name(e.name)?,
                value: e.value.to_vec(),
            })
        })
        .collect()
}

/// MS-FSA 2.1.5.15.4: each EA of the list is added, replaced, or (with an empty value)
/// deleted; deleting one that does not exist is fine.
pub fn apply(file: &dyn VfsFile, eas: &[Ea]) -> Result<(), NtStatus> {
    for e in eas {
        let x = format!("{PREFIX}{}", e.name);
        if e.value.is_empty() {
            file.remove_xattr(&x).map_err(|e| map_io_error(&e))?;
            continue;
        }
        let mut v = Vec::with_capacity(1 + e.value.len());
        v.push(e.flags);
        v.extend_from_slice(&e.value);
        file.set_xattr(&x, &v).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSPC | libc::E2BIG | libc::ERANGE) => NtStatus::EA_TOO_LARGE,
            _ if e.kind() == io::ErrorKind::Unsupported => NtStatus::EAS_NOT_SUPPORTED,
            _ => map_io_error(&e),
        })?;
    }
    Ok(())
}

/// Removes every EA (supersede and overwrite replace the EAs with those of the request).
pub fn remove_all(file: &dyn VfsFile) -> io::Result<()> {
    for x in file.list_xattrs()? {
        if x.starts_with(PREFIX) {
            file.remove_xattr(&x)?;
        }
    }
    Ok(())
}

/// The answer to QUERY_INFO FileFullEaInformation.
#[derive(Debug, PartialEq, Eq)]
pub struct Query {
    pub status: NtStatus,
    pub data: Vec<u8>,
    /// Where the open's enumeration continues next time.
    pub next_index: u32,
}

/// MS-SMB2 3.3.5.20.1 / MS-FSA 2.1.5.12 (FileFullEaInformation): with a
/// FILE_GET_EA_INFORMATION list in `input`, the named EAs in that order (a missing one comes
/// back with an empty value); without one, the file's EAs from the open's enumeration index
/// (`index`, reset by SL_RESTART_SCAN), as many whole entries as fit in `max` bytes, or one
/// with SL_RETURN_SINGLE_ENTRY.
pub fn query(
    eas: &[Ea],
    input: &[u8],
    flags: u32,
    index: u32,
    max: usize,
) -> Result<Query, NtStatus> {
    let restart = flags & qflags::RESTART_SCAN != 0;
    let single = flags & qflags::RETURN_SINGLE_ENTRY != 0;
    let (picked, start): (Vec<Ea>, usize) = if input.is_empty() {
        if eas.is_empty() {
            return Err(NtStatus::NO_EAS_ON_FILE);
        }
        let start = if restart { 0 } else { index as usize };
        let rest = eas.get(start..).unwrap_or_default();
        if rest.is_empty() {
            return Err(STATUS_NO_MORE_EAS);
        }
        (rest.to_vec(), start)
    } else {
        let names = GetEaList::decode(input).map_err(|_| STATUS_EA_LIST_INCONSISTENT)?;
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            let upper = check_name(n)?;
            let found = eas.iter().find(|e| e.name == upper).cloned();
            out.push(found.unwrap_or(Ea {
                flags: 0,
                name: upper,
                value: Vec::new(),
            }));
        }
        (out, 0)
    };
    let limit = if single { 1 } else { picked.len() };
    // Whole entries only: the last one taken needs no padding.
    let mut taken = 0;
    let mut used = 0u64;
    for e in picked.iter().take(limit) {
        let unpadded = (FullEa::MIN_LEN + e.name.len() + e.value.len()) as u64;
        if used + unpadded > max as u64 {
            break;
        }
        used += entry_len(e);
        taken += 1;
    }
    if taken == 0 {
        return Err(NtStatus::BUFFER_TOO_SMALL);
    }
    let entries: Vec<FullEa<'_>> = picked
        .iter()
        .take(taken)
        .map(|e| FullEa {
            flags: e.flags,
            name: e.name.as_bytes(),
            value: &e.value,
        })
        .collect();
    let mut w = Writer::new();
    FullEa::encode_list(&entries, &mut w);
    let status = if taken < limit {
        NtStatus::BUFFER_OVERFLOW
    } else {
        NtStatus::SUCCESS
    };
    Ok(Query {
        status,
        data: w.into_vec(),
        next_index: u32::try_from(start + taken).unwrap_or(u32::MAX),
    })
}

/// Whether any EA is marked FILE_NEED_EA (a FILE_NO_EA_KNOWLEDGE open is refused then).
pub fn any_needed(file: &dyn VfsFile) -> bool {
    list(file)
        .unwrap_or_default()
        .iter()
        .any(|e| e.flags & FILE_NEED_EA != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_vfs::{CreateMode, MemVfs, OpenOptions, RelPath, Vfs};

    fn file() -> Box<dyn VfsFile> {
        let o = OpenOptions {
            write: true,
            create: CreateMode::CreateNew,
            ..Default::default()
        };
        MemVfs::new()
            .open(&RelPath::parse("f").unwrap(), &o)
            .unwrap()
            .file
    }

    fn wire(eas: &[(u8, &[u8], &[u8])]) -> Vec<u8> {
        let list: Vec<FullEa<'_>> = eas
            .iter()
            .map(|&(flags, name, value)| FullEa { flags, name, value })
            .collect();
        let mut w = Writer::new();
        FullEa::encode_list(&list, &mut w);
        w.into_vec()
    }

    fn ea(name: &str, value: &[u8]) -> Ea {
        Ea {
            flags: 0,
            name: name.into(),
            value: value.into(),
        }
    }

    #[test]
    fn names_are_checked_and_upper_cased() {
        assert_eq!(check_name(b"EaOne").unwrap(), "EAONE");
        for bad in [&b""[..], b"a*b", b"a:b", b"a\x01", b"a=b", b"\xe9t\xe9"] {
            assert_eq!(check_name(bad), Err(NtStatus::INVALID_EA_NAME), "{bad:?}");
        }
        assert!(check_name(&[b'x'; MAX_NAME]).is_ok());
        assert!(check_name(&[b'x'; MAX_NAME + 1]).is_err());
    }

    #[test]
    fn set_list_replace_and_delete() {
        let f = file();
        let set = parse_set(&wire(&[(0, b"eaone", b"VALUE1"), (0x80, b"Second", b"2")])).unwrap();
        apply(f.as_ref(), &set).unwrap();
        let mut got = list(f.as_ref()).unwrap();
        got.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            got,
            [
                ea("EAONE", b"VALUE1"),
                Ea {
                    flags: FILE_NEED_EA,
                    ..ea("SECOND", b"2")
                }
            ]
        );
        assert!(any_needed(f.as_ref()));
        // Each entry: 8 fixed + name + NUL + value, padded to 4: 20 and 16.
        assert_eq!(ea_size(f.as_ref()), 20 + 16);
        // A zero-length value deletes; deleting a missing EA is fine.
        apply(
            f.as_ref(),
            &parse_set(&wire(&[(0, b"SECOND", b""), (0, b"none", b"")])).unwrap(),
        )
        .unwrap();
        assert_eq!(list(f.as_ref()).unwrap(), [ea("EAONE", b"VALUE1")]);
        assert!(!any_needed(f.as_ref()));
        // Other xattrs are not EAs.
        f.set_xattr("smbq.dos", b"x").unwrap();
        remove_all(f.as_ref()).unwrap();
        assert!(list(f.as_ref()).unwrap().is_empty());
        assert_eq!(ea_size(f.as_ref()), 0);
    }

    #[test]
    fn bad_lists_are_refused() {
        assert_eq!(
            parse_set(&wire(&[(0, b"a?", b"v")])),
            Err(NtStatus::INVALID_EA_NAME)
        );
        assert_eq!(
            parse_set(&wire(&[(0x01, b"a", b"v")])),
            Err(NtStatus::INVALID_PARAMETER)
        );
        let mut b = wire(&[(0, b"abc", b"v")]);
        b.truncate(b.len() - 1);
        assert_eq!(parse_set(&b), Err(STATUS_EA_LIST_INCONSISTENT));
    }

    #[test]
    fn query_enumerates_with_restart_single_and_overflow() {
        let eas = [ea("A", b"1"), ea("BB", b"22"), ea("CCC", b"333")];
        assert_eq!(query(&[], &[], 0, 0, 100), Err(NtStatus::NO_EAS_ON_FILE));
        let all = query(&eas, &[], qflags::RESTART_SCAN, 7, 1000).unwrap();
        assert_eq!(all.status, NtStatus::SUCCESS);
        assert_eq!(all.next_index, 3);
        let back = FullEa::decode_list(&all.data).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[2].name, b"CCC");
        // One at a time, continuing from the open's index.
        let one = query(&eas, &[], qflags::RETURN_SINGLE_ENTRY, 1, 1000).unwrap();
        assert_eq!(FullEa::decode_list(&one.data).unwrap()[0].name, b"BB");
        assert_eq!(one.next_index, 2);
        assert_eq!(query(&eas, &[], 0, 3, 1000), Err(STATUS_NO_MORE_EAS));
        // Room for the first entry (12 bytes padded) and not the second.
        let part = query(&eas, &[], qflags::RESTART_SCAN, 0, 20).unwrap();
        assert_eq!(part.status, NtStatus::BUFFER_OVERFLOW);
        assert_eq!(part.next_index, 1);
        assert_eq!(
            query(&eas, &[], qflags::RESTART_SCAN, 0, 5),
            Err(NtStatus::BUFFER_TOO_SMALL)
        );
    }

    #[test]
    fn query_by_name_returns_missing_names_empty() {
        let eas = [ea("A", b"1"), ea("BB", b"22")];
        let mut w = Writer::new();
        GetEaList::encode(&[b"bb", b"zz"], &mut w);
        let q = query(&eas, &w.into_vec(), 0, 0, 1000).unwrap();
        let back = FullEa::decode_list(&q.data).unwrap();
        assert_eq!(back[0].name, b"BB");
        assert_eq!(back[0].value, b"22");
        assert_eq!(back[1].name, b"ZZ");
        assert!(back[1].value.is_empty());
    }
}
