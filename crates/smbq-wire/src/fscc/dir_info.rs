//! Directory enumeration entries returned by QUERY_DIRECTORY (MS-SMB2 2.2.34, MS-FSCC 2.4):
//! FileDirectoryInformation, FileFullDirectoryInformation, FileBothDirectoryInformation,
//! FileIdBothDirectoryInformation, FileIdFullDirectoryInformation,
//! FileIdExtdDirectoryInformation and FileNamesInformation.
//!
//! Every class shares one source record, [`DirEntryInfo`]; [`DirListEncoder`] packs records of
//! one class into a bounded output buffer.

use std::borrow::Cow;

use super::chain;
use super::info_class::FileInfoClass;
use crate::cursor::{Reader, Writer, len32, to_usize, utf16le_decode, utf16le_encode};
use crate::error::DecodeError;

/// The 8.3 ShortName field is a fixed 24 bytes (12 UTF-16 units).
pub const SHORT_NAME_BYTES: usize = 24;
/// Cap on entries a client-side decode will collect from one response.
pub const MAX_DIR_ENTRIES: usize = 65_536;

/// The directory classes QUERY_DIRECTORY can return (a closed set: MS-SMB2 2.2.33 lists them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirClass {
    /// MS-FSCC 2.4 FileDirectoryInformation (FILE_DIRECTORY_INFORMATION).
    Directory,
    /// MS-FSCC 2.4 FileFullDirectoryInformation (FILE_FULL_DIR_INFORMATION).
    FullDirectory,
    /// MS-FSCC 2.4 FileBothDirectoryInformation (FILE_BOTH_DIR_INFORMATION).
    BothDirectory,
    /// MS-FSCC 2.4 FileIdBothDirectoryInformation (FILE_ID_BOTH_DIR_INFORMATION).
    IdBothDirectory,
    /// MS-FSCC 2.4 FileIdFullDirectoryInformation (FILE_ID_FULL_DIR_INFORMATION).
    IdFullDirectory,
    /// FileIdExtdDirectoryInformation (MS-FSCC 2.4 FILE_ID_EXTD_DIR_INFORMATION).
    IdExtdDirectory,
    /// MS-FSCC 2.4 FileNamesInformation (FILE_NAMES_INFORMATION).
    Names,
    /// FILE_POSIX_INFORMATION entries of the SMB3 POSIX extensions (crate::posix): the
    /// entry's [`DirEntryInfo::posix`] after the times, then the name. Its fixed part varies
    /// with the owner and group SIDs.
    Posix,
}

impl DirClass {
    /// `None` for a class QUERY_DIRECTORY does not serve (STATUS_INVALID_INFO_CLASS).
    pub fn from_info_class(c: FileInfoClass) -> Option<Self> {
        Some(match c {
            FileInfoClass::DIRECTORY => Self::Directory,
            FileInfoClass::FULL_DIRECTORY => Self::FullDirectory,
            FileInfoClass::BOTH_DIRECTORY => Self::BothDirectory,
            FileInfoClass::ID_BOTH_DIRECTORY => Self::IdBothDirectory,
            FileInfoClass::ID_FULL_DIRECTORY => Self::IdFullDirectory,
            FileInfoClass::ID_EXTD_DIRECTORY => Self::IdExtdDirectory,
            FileInfoClass::NAMES => Self::Names,
            FileInfoClass(crate::posix::INFO_CLASS) => Self::Posix,
            _ => return None,
        })
    }

    pub fn info_class(self) -> FileInfoClass {
        match self {
            Self::Directory => FileInfoClass::DIRECTORY,
            Self::FullDirectory => FileInfoClass::FULL_DIRECTORY,
            Self::BothDirectory => FileInfoClass::BOTH_DIRECTORY,
            Self::IdBothDirectory => FileInfoClass::ID_BOTH_DIRECTORY,
            Self::IdFullDirectory => FileInfoClass::ID_FULL_DIRECTORY,
            Self::IdExtdDirectory => FileInfoClass::ID_EXTD_DIRECTORY,
            Self::Names => FileInfoClass::NAMES,
            Self::Posix => FileInfoClass(crate::posix::INFO_CLASS),
        }
    }

    /// Offset of FileName within an entry, i.e. the size of the fixed part; for
    /// [`DirClass::Posix`], the part before the SIDs (see [`DirEntryInfo::fixed_len`]).
    pub fn fixed_len(self) -> usize {
        match self {
            Self::Directory => 64,
            Self::FullDirectory => 68,
            Self::BothDirectory => 94,
            Self::IdBothDirectory => 104,
            Self::IdFullDirectory => 80,
            Self::IdExtdDirectory => 88,
            Self::Names => 12,
            // NextEntryOffset, FileIndex, the 68 bytes of times to inode, the link count,
            // reparse tag and mode, and FileNameLength.
            Self::Posix => 8 + crate::posix::PosixInfo::FIXED_LEN + 12 + 4,
        }
    }
}

/// One directory entry, in the union of the fields the classes carry. Each class encodes the
/// subset it defines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirEntryInfo<'a> {
    /// Position in the directory; servers without stable indexes send 0 (MS-FSCC 2.4 FileDirectoryInformation).
    pub file_index: u32,
    pub creation_time: u64,
    pub last_access_time: u64,
    pub last_write_time: u64,
    pub change_time: u64,
    pub end_of_file: u64,
    pub allocation_size: u64,
    pub file_attributes: u32,
    /// EA size; for a reparse point the Full/Both/IdFull/IdBoth classes carry the reparse tag
    /// here instead (MS-FSCC 2.4 FileFullDirectoryInformation, EaSize), which the caller puts in this field.
    pub ea_size: u32,
    /// FileIdExtdDirectoryInformation only.
    pub reparse_tag: u32,
    /// FileId of the Id* classes; IdExtd widens it to 128 bits with zeros above.
    pub file_id: u64,
    pub name: Cow<'a, str>,
    /// 8.3 name of the Both classes; at most 12 UTF-16 units are sent.
    pub short_name: Cow<'a, str>,
    /// [`DirClass::Posix`] only: the inode, the device (32 bits) and the POSIX facts.
    pub inode: u64,
    pub device: u32,
    pub posix: Option<crate::posix::PosixStat>,
}

impl DirEntryInfo<'_> {
    /// The size of the entry's fixed part in `class` (where FileName starts).
    pub fn fixed_len(&self, class: DirClass) -> usize {
        match (class, &self.posix) {
            (DirClass::Posix, Some(p)) => {
                class.fixed_len() + p.owner.encoded_len() + p.group.encoded_len()
            }
            // posix_info() writes two null SIDs (S-1-0-0, 12 bytes each).
            (DirClass::Posix, None) => class.fixed_len() + 24,
            _ => class.fixed_len(),
        }
    }

    /// Encodes the entry with NextEntryOffset 0 (the list encoder patches it).
    fn encode(&self, class: DirClass, name: &[u8], w: &mut Writer) {
        let name_len = len32(name.len());
        w.u32(0).u32(self.file_index);
        if class == DirClass::Names {
            w.u32(name_len).bytes(name);
            return;
        }
        if class == DirClass::Posix {
            self.posix_info().encode(w);
            w.u32(name_len).bytes(name);
            return;
        }
        w.u64(self.creation_time)
            .u64(self.last_access_time)
            .u64(self.last_write_time)
            .u64(self.change_time)
            .u64(self.end_of_file)
            .u64(self.allocation_size)
            .u32(self.file_attributes)
            .u32(name_len);
        match class {
            DirClass::Directory | DirClass::Names | DirClass::Posix => {}
            DirClass::FullDirectory => {
                w.u32(self.ea_size);
            }
            DirClass::IdFullDirectory => {
                w.u32(self.ea_size).u32(0).u64(self.file_id);
            }
            DirClass::BothDirectory | DirClass::IdBothDirectory => {
                w.u32(self.ea_size);
                let short = short_name_bytes(&self.short_name);
                w.u8(short.len() as u8).u8(0).bytes(&short);
                w.zeros(SHORT_NAME_BYTES - short.len());
                if class == DirClass::IdBothDirectory {
                    w.u16(0).u64(self.file_id);
                }
            }
            DirClass::IdExtdDirectory => {
                w.u32(self.ea_size)
                    .u32(self.reparse_tag)
                    .u64(self.file_id)
                    .u64(0);
            }
        }
        w.bytes(name);
    }

    /// The entry as FILE_POSIX_INFORMATION (a missing [`DirEntryInfo::posix`] reads as
    /// nothing known: no links, mode 0, the null SIDs).
    fn posix_info(&self) -> crate::posix::PosixInfo {
        crate::posix::PosixInfo {
            creation_time: self.creation_time,
            last_access_time: self.last_access_time,
            last_write_time: self.last_write_time,
            change_time: self.change_time,
            end_of_file: self.end_of_file,
            allocation_size: self.allocation_size,
            file_attributes: self.file_attributes,
            inode: self.inode,
            device: self.device,
            stat: self
                .posix
                .clone()
                .unwrap_or_else(|| crate::posix::PosixStat {
                    nlink: 0,
                    reparse_tag: 0,
                    mode: 0,
                    owner: crate::security::Sid::new(0, &[0]),
                    group: crate::security::Sid::new(0, &[0]),
                }),
        }
    }

    /// Decodes one entry of `class` from `entry` (which starts at NextEntryOffset).
    fn decode(class: DirClass, entry: &[u8]) -> Result<DirEntryInfo<'static>, DecodeError> {
        let mut r = Reader::new(entry);
        let mut e = DirEntryInfo::default();
        r.skip(4)?;
        e.file_index = r.u32()?;
        let name_len;
        if class == DirClass::Names {
            name_len = r.u32()?;
        } else if class == DirClass::Posix {
            let p = crate::posix::PosixInfo::read(&mut r)?;
            e.creation_time = p.creation_time;
            e.last_access_time = p.last_access_time;
            e.last_write_time = p.last_write_time;
            e.change_time = p.change_time;
            e.end_of_file = p.end_of_file;
            e.allocation_size = p.allocation_size;
            e.file_attributes = p.file_attributes;
            e.inode = p.inode;
            e.device = p.device;
            e.posix = Some(p.stat);
            name_len = r.u32()?;
        } else {
            e.creation_time = r.u64()?;
            e.last_access_time = r.u64()?;
            e.last_write_time = r.u64()?;
            e.change_time = r.u64()?;
            e.end_of_file = r.u64()?;
            e.allocation_size = r.u64()?;
            e.file_attributes = r.u32()?;
            name_len = r.u32()?;
            match class {
                DirClass::Directory | DirClass::Names | DirClass::Posix => {}
                DirClass::FullDirectory => e.ea_size = r.u32()?,
                DirClass::IdFullDirectory => {
                    e.ea_size = r.u32()?;
                    r.skip(4)?;
                    e.file_id = r.u64()?;
                }
                DirClass::BothDirectory | DirClass::IdBothDirectory => {
                    e.ea_size = r.u32()?;
                    let short_len = usize::from(r.u8()?).min(SHORT_NAME_BYTES);
                    r.skip(1)?;
                    let short = r.array::<SHORT_NAME_BYTES>()?;
                    e.short_name =
                        Cow::Owned(utf16le_decode(short.get(..short_len).unwrap_or_default())?);
                    if class == DirClass::IdBothDirectory {
                        r.skip(2)?;
                        e.file_id = r.u64()?;
                    }
                }
                DirClass::IdExtdDirectory => {
                    e.ea_size = r.u32()?;
                    e.reparse_tag = r.u32()?;
                    e.file_id = r.u64()?;
                    r.skip(8)?;
                }
            }
        }
        e.name = Cow::Owned(utf16le_decode(r.bytes(to_usize(name_len))?)?);
        Ok(e)
    }
}

/// UTF-16LE of the short name, cut to whole units within the 24-byte field.
fn short_name_bytes(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(SHORT_NAME_BYTES);
    for unit in s.encode_utf16().take(SHORT_NAME_BYTES / 2) {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}

/// Packs directory entries of one class into a QUERY_DIRECTORY output buffer (MS-SMB2
/// 3.3.5.18): each entry starts on an 8-byte boundary, NextEntryOffset chains them, the last
/// entry's NextEntryOffset is 0, and the padding after the last entry is not part of the output.
#[derive(Debug)]
pub struct DirListEncoder {
    class: DirClass,
    max_len: usize,
    buf: Writer,
    last: Option<usize>,
    count: usize,
}

impl DirListEncoder {
    /// `max_len` is the request's OutputBufferLength (already capped by the server's limits).
    pub fn new(class: DirClass, max_len: usize) -> Self {
        Self {
            class,
            max_len,
            buf: Writer::with_capacity(max_len.min(1 << 16)),
            last: None,
            count: 0,
        }
    }

    pub fn class(&self) -> DirClass {
        self.class
    }

    /// Appends `entry`. Returns false, writing nothing, if it would end past `max_len`; the
    /// caller keeps that entry for the next QUERY_DIRECTORY (or, if the list is still empty,
    /// answers STATUS_BUFFER_OVERFLOW / STATUS_INFO_LENGTH_MISMATCH as MS-SMB2 3.3.5.18 says).
    pub fn push(&mut self, entry: &DirEntryInfo<'_>) -> bool {
        let name = utf16le_encode(&entry.name);
        let start = match self.last {
            None => 0,
            Some(_) => self.buf.len().next_multiple_of(8),
        };
        let Some(end) = start
            .checked_add(entry.fixed_len(self.class))
            .and_then(|n| n.checked_add(name.len()))
        else {
            return false;
        };
        if end > self.max_len {
            return false;
        }
        self.buf.zeros(start - self.buf.len());
        entry.encode(self.class, &name, &mut self.buf);
        if let Some(prev) = self.last {
            self.buf
                .patch_u32(prev, u32::try_from(start - prev).unwrap_or(0));
        }
        self.last = Some(start);
        self.count += 1;
        true
    }

    pub fn count(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes so far; the next entry would start at this rounded up to 8.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf.into_vec()
    }
}

/// Decodes a QUERY_DIRECTORY output buffer of `class` (client side). NextEntryOffset is
/// followed as sent (8-byte alignment is not demanded of other servers), bounded by the buffer.
pub fn decode_dir_list(
    class: DirClass,
    buf: &[u8],
) -> Result<Vec<DirEntryInfo<'static>>, DecodeError> {
    chain::split(buf, class.fixed_len(), 1, MAX_DIR_ENTRIES)?
        .into_iter()
        .map(|entry| DirEntryInfo::decode(class, entry))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn u16_at(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
    }
    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    fn sample(name: &str) -> DirEntryInfo<'_> {
        DirEntryInfo {
            file_index: 0,
            creation_time: 0x1111,
            last_access_time: 0x2222,
            last_write_time: 0x3333,
            change_time: 0x4444,
            end_of_file: 0x5555,
            allocation_size: 0x6666,
            file_attributes: 0x20,
            ea_size: 0x77,
            reparse_tag: 0,
            file_id: 0x0102_0304_0506_0708,
            name: Cow::Borrowed(name),
            short_name: Cow::Borrowed("ABC~1.TXT"),
            inode: 0,
            device: 0,
            posix: None,
        }
    }

    /// A FILE_POSIX_INFORMATION entry as Samba's smbd_marshall_dir_entry lays it out:
    /// NextEntryOffset, FileIndex, the 68-byte fixed part, links, tag, mode, the two SIDs,
    /// FileNameLength and the name; the next entry on an 8-byte boundary.
    #[test]
    fn posix_entries() {
        use crate::posix::{PosixStat, wire_mode};
        use crate::security::Sid;
        let mut e = sample("ab");
        e.inode = 42;
        e.device = 7;
        e.posix = Some(PosixStat {
            nlink: 3,
            reparse_tag: 0,
            mode: wire_mode(0o040755),
            owner: Sid::unix_user(1000),
            group: Sid::unix_group(100),
        });
        let mut enc = DirListEncoder::new(DirClass::Posix, 1 << 16);
        assert!(enc.push(&e));
        assert!(enc.push(&sample("c")));
        let b = enc.finish();
        // 8 + 68 + 12 + 16 + 16 + 4 + 4 (name) = 128, already a multiple of 8.
        assert_eq!(u32_at(&b, 0), 128);
        assert_eq!(u64_at(&b, 8), 0x1111);
        assert_eq!(u64_at(&b, 60), 42);
        assert_eq!(u32_at(&b, 68), 7);
        assert_eq!(u32_at(&b, 76), 3);
        assert_eq!(u32_at(&b, 84), 0x11ED);
        assert_eq!(u32_at(&b, 120), 4);
        assert_eq!(&b[124..128], &[b'a', 0, b'b', 0]);
        let back = decode_dir_list(DirClass::Posix, &b).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].name, "ab");
        assert_eq!(back[0].posix, e.posix);
        assert_eq!(back[0].inode, 42);
        assert_eq!(back[1].name, "c");
        // An entry that does not fit is not written.
        let mut small = DirListEncoder::new(DirClass::Posix, 127);
        assert!(!small.push(&e));
    }

    fn one(class: DirClass, e: &DirEntryInfo<'_>) -> Vec<u8> {
        let mut enc = DirListEncoder::new(class, 1 << 16);
        assert!(enc.push(e));
        enc.finish()
    }

    const ALL: [DirClass; 7] = [
        DirClass::Directory,
        DirClass::FullDirectory,
        DirClass::BothDirectory,
        DirClass::IdBothDirectory,
        DirClass::IdFullDirectory,
        DirClass::IdExtdDirectory,
        DirClass::Names,
    ];

    #[test]
    fn common_prefix_offsets() {
        let e = sample("ab");
        for class in ALL {
            let b = one(class, &e);
            assert_eq!(b.len(), class.fixed_len() + 4, "{class:?}");
            assert_eq!(&b[class.fixed_len()..], &[b'a', 0, b'b', 0]);
            if class == DirClass::Names {
                assert_eq!(u32_at(&b, 8), 4);
                continue;
            }
            assert_eq!(u64_at(&b, 8), 0x1111);
            assert_eq!(u64_at(&b, 32), 0x4444);
            assert_eq!(u64_at(&b, 40), 0x5555);
            assert_eq!(u64_at(&b, 48), 0x6666);
            assert_eq!(u32_at(&b, 56), 0x20);
            assert_eq!(u32_at(&b, 60), 4);
            if class != DirClass::Directory {
                assert_eq!(u32_at(&b, 64), 0x77);
            }
        }
    }

    #[test]
    fn class_specific_offsets() {
        let e = sample("x");
        let b = one(DirClass::IdFullDirectory, &e);
        assert_eq!(u32_at(&b, 68), 0);
        assert_eq!(u64_at(&b, 72), e.file_id);

        let b = one(DirClass::BothDirectory, &e);
        assert_eq!(b[68], 18);
        assert_eq!(b[69], 0);
        assert_eq!(&b[70..72], &[b'A', 0]);
        assert_eq!(&b[88..94], &[0; 6]);

        let b = one(DirClass::IdBothDirectory, &e);
        assert_eq!(b[68], 18);
        assert_eq!(u16_at(&b, 94), 0);
        assert_eq!(u64_at(&b, 96), e.file_id);

        let mut r = e.clone();
        r.reparse_tag = 0xA000_000C;
        let b = one(DirClass::IdExtdDirectory, &r);
        assert_eq!(u32_at(&b, 68), 0xA000_000C);
        assert_eq!(u64_at(&b, 72), e.file_id);
        assert_eq!(u64_at(&b, 80), 0);
    }

    #[test]
    fn long_short_name_is_cut_to_12_units() {
        let mut e = sample("x");
        e.short_name = Cow::Borrowed("ABCDEFGHIJKLMNOP");
        let b = one(DirClass::BothDirectory, &e);
        assert_eq!(b[68], 24);
        assert_eq!(b.len(), 94 + 2);
    }

    #[test]
    fn chaining_alignment_and_no_trailing_padding() {
        let mut enc = DirListEncoder::new(DirClass::Directory, 4096);
        assert!(enc.push(&sample("a")));
        assert!(enc.push(&sample("abc")));
        assert!(enc.push(&sample("abcd")));
        let b = enc.finish();
        // 64 + 2 = 66 -> next at 72; 64 + 6 = 70 -> next at 72 + 72 = 144; last is 64 + 8.
        assert_eq!(u32_at(&b, 0), 72);
        assert_eq!(u32_at(&b, 72), 72);
        assert_eq!(u32_at(&b, 144), 0);
        assert_eq!(b.len(), 144 + 72);
        assert_eq!(&b[66..72], &[0; 6]);
        let d = decode_dir_list(DirClass::Directory, &b).unwrap();
        assert_eq!(d.len(), 3);
        assert_eq!(d[1].name, "abc");
        assert_eq!(d[2].end_of_file, 0x5555);
    }

    #[test]
    fn refuses_entry_past_max_len_and_keeps_state() {
        // Room for exactly one 66-byte entry plus a second ending at 72 + 66 = 138.
        let mut enc = DirListEncoder::new(DirClass::Directory, 138);
        assert!(enc.push(&sample("a")));
        assert!(!enc.push(&sample("ab")), "would end at 140");
        assert_eq!(enc.count(), 1);
        assert_eq!(enc.len(), 66);
        assert!(enc.push(&sample("b")));
        assert!(!enc.push(&sample("c")));
        let b = enc.finish();
        assert_eq!(b.len(), 138);
        assert_eq!(u32_at(&b, 0), 72);
        assert_eq!(u32_at(&b, 72), 0);

        let mut tiny = DirListEncoder::new(DirClass::IdBothDirectory, 100);
        assert!(!tiny.push(&sample("a")));
        assert!(tiny.is_empty());
        assert!(tiny.finish().is_empty());
    }

    #[test]
    fn every_class_round_trips() {
        for class in ALL {
            let mut enc = DirListEncoder::new(class, 1 << 16);
            let a = sample("first.txt");
            let mut b = sample("\u{e9}l\u{e8}ve");
            b.file_index = 9;
            assert!(enc.push(&a) && enc.push(&b));
            let d = decode_dir_list(class, &enc.finish()).unwrap();
            assert_eq!(d.len(), 2);
            assert_eq!(d[0].name, "first.txt");
            assert_eq!(d[1].name, b.name);
            assert_eq!(d[1].file_index, 9);
            match class {
                DirClass::Names => assert_eq!(d[0].end_of_file, 0),
                DirClass::BothDirectory | DirClass::IdBothDirectory => {
                    assert_eq!(d[0].short_name, "ABC~1.TXT");
                    assert_eq!(d[0].end_of_file, 0x5555);
                }
                _ => assert_eq!(d[0].allocation_size, 0x6666),
            }
            let has_id = matches!(
                class,
                DirClass::IdBothDirectory | DirClass::IdFullDirectory | DirClass::IdExtdDirectory
            );
            assert_eq!(d[0].file_id, if has_id { a.file_id } else { 0 });
        }
    }

    #[test]
    fn decode_rejects_hostile_lists() {
        let b = one(DirClass::Directory, &sample("abcd"));
        assert!(decode_dir_list(DirClass::Directory, &b[..70]).is_err());
        let mut bad = b.clone();
        bad[60..64].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_dir_list(DirClass::Directory, &bad).is_err());
        let mut self_loop = b.clone();
        self_loop[0] = 8;
        assert!(decode_dir_list(DirClass::Directory, &self_loop).is_err());
    }

    #[test]
    fn class_mapping() {
        for class in ALL {
            assert_eq!(DirClass::from_info_class(class.info_class()), Some(class));
            assert!(class.info_class().is_directory_class());
        }
        assert_eq!(DirClass::from_info_class(FileInfoClass::BASIC), None);
    }
}
