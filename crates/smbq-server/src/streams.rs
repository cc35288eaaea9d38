//! Named data streams (MS-FSCC 2.1.4, names per 2.1.5.3), kept the way Samba's
//! `vfs_streams_xattr` keeps them: each stream is one extended attribute of its base file,
//! `user.smbq.stream.<name>`, whose value is the stream's bytes.
//!
//! Consequences of that choice, on purpose:
//! - Streams follow the inode: renaming the base file keeps them, deleting it deletes them,
//!   and a directory can have named streams (but never a `::$DATA` stream).
//! - A stream is at most one xattr value: 64 KiB on Linux (`XATTR_SIZE_MAX`), and on ext4
//!   without `ea_inode` all xattrs of a file share about 4 KiB. Writes past what the
//!   filesystem takes fail with STATUS_DISK_FULL.
//! - IO is read/modify/write of the whole value, serialised per file; fine for the small
//!   streams clients keep (Zone.Identifier, AFP_AfpInfo, thumbnails), slow for big ones.
//! - The stream name is kept with the case it was created with; lookups ignore case, as
//!   NTFS does.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use smbq_vfs::{DirEntry, FileKind, Stat, Timespec, VfsFile};
use smbq_wire::NtStatus;

/// The xattr name prefix (the VFS adds `user.`).
pub const PREFIX: &str = "smbq.stream.";
/// Linux `XATTR_SIZE_MAX`: no stream can be larger than one xattr value.
pub const MAX_STREAM_SIZE: u64 = 64 * 1024;
/// The VFS takes xattr names up to 250 bytes (255 with `user.`).
const MAX_NAME_BYTES: usize = 250 - PREFIX.len();
/// How many stream names a file may report; more than fit in any xattr list anyway.
const MAX_STREAMS: usize = 4096;

/// The xattr holding stream `name`. A name too long to store is OBJECT_NAME_INVALID (NTFS
/// allows 255 UTF-16 units; here the UTF-8 form must fit the xattr name limit).
pub fn xattr_name(name: &str) -> Result<String, NtStatus> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(format!("{PREFIX}{name}"))
}

/// The share-mode / oplock / byte-lock identity of stream `stored` (the name as on disk)
/// within its file: FNV-1a of the name, never 0 (0 is the unnamed stream). Two names of one
/// file that collide would only share their share-mode entries.
pub fn stream_id(stored: &str) -> u64 {
    crate::fnv::fnv1a(stored.as_bytes()) | 1 << 63
}

/// The stored names of every stream of `file`.
pub fn names(file: &dyn VfsFile) -> io::Result<Vec<String>> {
    Ok(file
        .list_xattrs()?
        .into_iter()
        .filter_map(|n| n.strip_prefix(PREFIX).map(str::to_owned))
        .filter(|n| !n.is_empty())
        .take(MAX_STREAMS)
        .collect())
}

/// The stored name of the stream `wanted` names, compared without case (MS-FSA 2.1.5.1:
/// stream names are case-insensitive), or `None`.
pub fn find(file: &dyn VfsFile, wanted: &str) -> io::Result<Option<String>> {
    if let Ok(x) = xattr_name(wanted)
        && file.get_xattr(&x)?.is_some()
    {
        return Ok(Some(wanted.to_owned()));
    }
    Ok(names(file)?
        .into_iter()
        .find(|n| smbq_vfs::simple_lowercase_eq(n, wanted)))
}

/// Every named stream with its size, for FileStreamInformation.
pub fn list(file: &dyn VfsFile) -> io::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    for n in names(file)? {
        if let Some(v) = file.get_xattr(&format!("{PREFIX}{n}"))? {
            out.push((n, v.len() as u64));
        }
    }
    Ok(out)
}

/// Deletes every named stream (overwrite and supersede of the base file, MS-FSA 2.1.5.1.2.1).
pub fn remove_all(file: &dyn VfsFile) -> io::Result<()> {
    for n in names(file)? {
        file.remove_xattr(&format!("{PREFIX}{n}"))?;
    }
    Ok(())
}

/// Creates an empty stream (its xattr with an empty value).
pub fn create(file: &dyn VfsFile, name: &str) -> io::Result<()> {
    let x = xattr_name(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    file.set_xattr(&x, &[]).map_err(too_big)
}

/// An xattr value the filesystem will not take is a full disk to the client.
fn too_big(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::E2BIG | libc::ERANGE) => io::Error::from(io::ErrorKind::FileTooLarge),
        _ => e,
    }
}

/// Serialises the read/modify/write cycles on streams; striped by inode so unrelated files
/// rarely wait for each other.
static LOCKS: [Mutex<()>; 64] = [const { Mutex::new(()) }; 64];

/// Which stream an open addresses; shared between the open and its [`StreamFile`] so a
/// rename (MS-FSA 2.1.5.15.11.1) is seen by both. `None` once the stream was renamed onto
/// the unnamed stream: the open then works on the file's data.
#[derive(Debug)]
pub struct StreamRef(Mutex<Option<String>>);

impl StreamRef {
    pub fn new(stored: String) -> Arc<StreamRef> {
        Arc::new(StreamRef(Mutex::new(Some(stored))))
    }

    pub fn name(&self) -> Option<String> {
        self.0.lock().clone()
    }

    pub fn set(&self, name: Option<String>) {
        *self.0.lock() = name;
    }
}

/// A named stream seen as a file: data calls go to the stream's xattr, metadata calls to the
/// base file (a stream has no times or attributes of its own).
pub struct StreamFile {
    base: Box<dyn VfsFile>,
    name: Arc<StreamRef>,
    lock: &'static Mutex<()>,
}

impl StreamFile {
    pub fn new(base: Box<dyn VfsFile>, name: Arc<StreamRef>) -> io::Result<StreamFile> {
        let st = base.stat()?;
        let stripe = (st.ino ^ st.dev.rotate_left(17)) % LOCKS.len() as u64;
        let lock = LOCKS
            .get(usize::try_from(stripe).unwrap_or(0))
            .unwrap_or(&LOCKS[0]);
        Ok(StreamFile { base, name, lock })
    }

    fn xattr(&self) -> Option<String> {
        self.name.name().map(|n| format!("{PREFIX}{n}"))
    }

    fn value(&self, x: &str) -> io::Result<Vec<u8>> {
        // A stream deleted under an open reads as empty, as an unlinked file would.
        Ok(self.base.get_xattr(x)?.unwrap_or_default())
    }

    fn store(&self, x: &str, v: &[u8]) -> io::Result<()> {
        self.base.set_xattr(x, v).map_err(too_big)
    }
}

fn end_of(offset: u64, len: u64) -> io::Result<usize> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_STREAM_SIZE => Ok(end as usize),
        _ => Err(io::Error::from(io::ErrorKind::FileTooLarge)),
    }
}

impl VfsFile for StreamFile {
    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        let Some(x) = self.xattr() else {
            return self.base.read_at(offset, len);
        };
        let v = self.value(&x)?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let chunk = v.get(start..).unwrap_or_default();
        let chunk = chunk.get(..len).unwrap_or(chunk);
        Ok(Bytes::copy_from_slice(chunk))
    }

    fn write_at(&self, offset: u64, bufs: &[Bytes]) -> io::Result<usize> {
        let Some(x) = self.xattr() else {
            return self.base.write_at(offset, bufs);
        };
        let total: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        let end = end_of(offset, total)?;
        let start = end - total as usize;
        let _g = self.lock.lock();
        let mut v = self.value(&x)?;
        if v.len() < end {
            v.resize(end, 0);
        }
        let mut pos = start;
        for b in bufs {
            if let Some(dst) = v.get_mut(pos..pos + b.len()) {
                dst.copy_from_slice(b);
            }
            pos += b.len();
        }
        self.store(&x, &v)?;
        Ok(total as usize)
    }

    fn stat(&self) -> io::Result<Stat> {
        let mut st = self.base.stat()?;
        let Some(x) = self.xattr() else {
            return Ok(st);
        };
        st.size = self.value(&x)?.len() as u64;
        // Reported allocation is the size rounded to clusters (crate::meta).
        st.alloc_size = 0;
        st.kind = FileKind::File;
        Ok(st)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let Some(x) = self.xattr() else {
            return self.base.set_len(len);
        };
        let len = end_of(len, 0)?;
        let _g = self.lock.lock();
        let mut v = self.value(&x)?;
        v.resize(len, 0);
        self.store(&x, &v)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        match self.xattr() {
            None => self.base.allocate(len),
            Some(_) => end_of(len, 0).map(|_| ()),
        }
    }

    fn set_times(&self, atime: Option<Timespec>, mtime: Option<Timespec>) -> io::Result<()> {
        self.base.set_times(atime, mtime)
    }

    fn set_mode(&self, mode: u32) -> io::Result<()> {
        self.base.set_mode(mode)
    }
    /// A stream is part of its file: writable where the file is.
    fn may_write(&self) -> io::Result<bool> {
        self.base.may_write()
    }

    fn fsync(&self) -> io::Result<()> {
        self.base.fsync()
    }

    /// A stream's data lives in the base file's xattrs, which fdatasync need not flush.
    fn fdatasync(&self) -> io::Result<()> {
        self.base.fsync()
    }

    fn read_dir(&self) -> io::Result<Vec<DirEntry>> {
        Err(io::Error::from_raw_os_error(libc::ENOTDIR))
    }

    fn get_xattr(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.base.get_xattr(name)
    }

    fn set_xattr(&self, name: &str, value: &[u8]) -> io::Result<()> {
        self.base.set_xattr(name, value)
    }

    fn list_xattrs(&self) -> io::Result<Vec<String>> {
        self.base.list_xattrs()
    }

    fn remove_xattr(&self, name: &str) -> io::Result<bool> {
        self.base.remove_xattr(name)
    }

    fn entry_xattrs(
        &self,
        _entry: &str,
        _want: &dyn Fn(&str) -> bool,
    ) -> io::Result<Vec<(String, Vec<u8>)>> {
        Err(io::Error::from_raw_os_error(libc::ENOTDIR))
    }
}

/// MS-FSA 2.1.5.15.11.1: renames the stream behind `file` (an open of stream `from`, as
/// stored) to `to` on the same file, replacing an existing `to` only when `replace`. The data
/// moves with the name; the caller checked access, sharing and the name's syntax.
pub fn rename(file: &dyn VfsFile, from: &str, to: &str, replace: bool) -> Result<(), NtStatus> {
    let io = |e: io::Error| crate::errors::map_io_error(&e);
    let from_x = xattr_name(from)?;
    let to_x = xattr_name(to)?;
    match find(file, to).map_err(io)? {
        // The stream itself under another spelling: only the case changes.
        Some(t) if t == from => {}
        Some(_) if !replace => return Err(NtStatus::OBJECT_NAME_COLLISION),
        Some(t) => {
            file.remove_xattr(&format!("{PREFIX}{t}")).map_err(io)?;
        }
        None => {}
    }
    if from_x == to_x {
        return Ok(());
    }
    let data = file.get_xattr(&from_x).map_err(io)?.unwrap_or_default();
    file.remove_xattr(&from_x).map_err(io)?;
    if let Err(e) = file.set_xattr(&to_x, &data) {
        // Put the old name back so the data is not lost.
        let _ = file.set_xattr(&from_x, &data);
        return Err(io(too_big(e)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_vfs::{CreateMode, MemVfs, OpenOptions, RelPath, Vfs};

    /// A file and a second handle on it (as a stream open has its own handle on the base).
    fn base() -> (Box<dyn VfsFile>, Box<dyn VfsFile>) {
        let vfs = MemVfs::new();
        let path = RelPath::parse("f").unwrap();
        let o = OpenOptions {
            write: true,
            create: CreateMode::CreateNew,
            ..Default::default()
        };
        let first = vfs.open(&path, &o).unwrap().file;
        let o = OpenOptions {
            create: CreateMode::OpenExisting,
            ..o
        };
        (first, vfs.open(&path, &o).unwrap().file)
    }

    #[test]
    fn ids_are_stable_and_never_the_unnamed_stream() {
        assert_eq!(stream_id("a"), stream_id("a"));
        assert_eq!(
            stream_id("a"),
            0xaf63_dc4c_8601_ec8c,
            "the same ids as ever"
        );
        assert_ne!(stream_id("a"), stream_id("b"));
        assert_ne!(stream_id(""), 0);
        assert_ne!(stream_id("Zone.Identifier"), 0);
    }

    #[test]
    fn names_that_do_not_fit_an_xattr_are_invalid() {
        assert_eq!(xattr_name("s").unwrap(), "smbq.stream.s");
        assert!(xattr_name(&"x".repeat(MAX_NAME_BYTES)).is_ok());
        assert_eq!(
            xattr_name(&"x".repeat(MAX_NAME_BYTES + 1)),
            Err(NtStatus::OBJECT_NAME_INVALID)
        );
        assert_eq!(xattr_name(""), Err(NtStatus::OBJECT_NAME_INVALID));
    }

    #[test]
    fn stream_io_goes_to_the_xattr_and_metadata_to_the_base() {
        let (f, g) = base();
        f.write_at(0, &[Bytes::from_static(b"base data")]).unwrap();
        create(f.as_ref(), "Stream One").unwrap();
        f.set_xattr("smbq.dos", b"x").unwrap();
        let s = StreamFile::new(g, StreamRef::new("Stream One".into())).unwrap();
        assert_eq!(s.stat().unwrap().size, 0);
        s.write_at(5, &[Bytes::from_static(b"MORE"), Bytes::from_static(b"!")])
            .unwrap();
        assert_eq!(&s.read_at(0, 100).unwrap()[..], b"\0\0\0\0\0MORE!");
        assert_eq!(&s.read_at(5, 2).unwrap()[..], b"MO");
        assert!(s.read_at(50, 2).unwrap().is_empty());
        assert_eq!(s.stat().unwrap().size, 10);
        s.set_len(3).unwrap();
        assert_eq!(s.stat().unwrap().size, 3);
        // The base file's data is untouched; its xattrs are shared.
        assert_eq!(&f.read_at(0, 100).unwrap()[..], b"base data");
        assert_eq!(f.stat().unwrap().size, 9);
        assert_eq!(s.get_xattr("smbq.dos").unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(list(f.as_ref()).unwrap(), [("Stream One".to_owned(), 3)]);
        assert!(s.read_dir().is_err());
    }

    #[test]
    fn the_size_limit_is_a_full_disk() {
        let (f, g) = base();
        create(f.as_ref(), "s").unwrap();
        let s = StreamFile::new(g, StreamRef::new("s".into())).unwrap();
        let e = s
            .write_at(MAX_STREAM_SIZE, &[Bytes::from_static(b"x")])
            .unwrap_err();
        assert_eq!(crate::errors::map_io_error(&e), NtStatus::DISK_FULL);
        let e = s.set_len(MAX_STREAM_SIZE + 1).unwrap_err();
        assert_eq!(crate::errors::map_io_error(&e), NtStatus::DISK_FULL);
        s.set_len(MAX_STREAM_SIZE).unwrap();
    }

    #[test]
    fn lookup_ignores_case_and_keeps_the_stored_name() {
        let (f, _) = base();
        create(f.as_ref(), "Second Stream").unwrap();
        assert_eq!(
            find(f.as_ref(), "SECOND STREAM").unwrap().as_deref(),
            Some("Second Stream")
        );
        assert_eq!(find(f.as_ref(), "other").unwrap(), None);
        // Other xattrs (DOS attributes, EAs) are not streams.
        f.set_xattr("smbq.dos", b"x").unwrap();
        assert_eq!(names(f.as_ref()).unwrap(), ["Second Stream"]);
        remove_all(f.as_ref()).unwrap();
        assert!(names(f.as_ref()).unwrap().is_empty());
        assert!(f.get_xattr("smbq.dos").unwrap().is_some());
    }

    #[test]
    fn rename_moves_data_and_respects_replace() {
        let (f, _) = base();
        create(f.as_ref(), "a").unwrap();
        f.set_xattr("smbq.stream.a", b"data").unwrap();
        create(f.as_ref(), "b").unwrap();
        assert_eq!(
            rename(f.as_ref(), "a", "B", false),
            Err(NtStatus::OBJECT_NAME_COLLISION)
        );
        rename(f.as_ref(), "a", "c", false).unwrap();
        assert_eq!(f.get_xattr("smbq.stream.a").unwrap(), None);
        assert_eq!(f.get_xattr("smbq.stream.c").unwrap().unwrap(), b"data");
        // Replacing "b" by the name "B": the replaced stream goes, the new spelling stays.
        rename(f.as_ref(), "c", "B", true).unwrap();
        assert_eq!(f.get_xattr("smbq.stream.B").unwrap().unwrap(), b"data");
        assert_eq!(names(f.as_ref()).unwrap(), ["B"]);
        // A case-only rename keeps the stream and takes the new spelling.
        rename(f.as_ref(), "B", "b", false).unwrap();
        assert_eq!(names(f.as_ref()).unwrap(), ["b"]);
        assert_eq!(f.get_xattr("smbq.stream.b").unwrap().unwrap(), b"data");
    }
}
