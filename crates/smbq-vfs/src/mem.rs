//! An in-memory [`Vfs`] for server tests. It mirrors the POSIX backend's behaviour and errnos
//! (so the server's error mapping is exercised identically) but has no symlinks, hard links
//! or permission checks.

use crate::error::{VfsError, errno};
use crate::types::MODE_MASK;
use crate::{
    CreateMode, DirEntry, FileKind, FsStat, OpenOptions, Opened, RelPath, Stat, Timespec, Vfs,
    VfsFile, case,
};
use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use rustix::io::Errno;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

const ROOT: u64 = 1;
const DEV: u64 = 0x6d656d;
const BLOCK: u64 = 4096;
const TOTAL_BLOCKS: u64 = 1 << 18;
/// Largest file this backend holds, so a test cannot make it allocate without bound.
const MAX_FILE_SIZE: u64 = 1 << 30;
const S_IFREG: u32 = 0o100000;
const S_IFDIR: u32 = 0o040000;

type Clock = dyn Fn() -> Timespec + Send + Sync;

/// An in-memory file tree. Cloning shares the tree.
#[derive(Clone)]
pub struct MemVfs {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    clock: Box<Clock>,
    /// fsync and fdatasync calls on any file or directory of the tree, for tests of what is
    /// flushed when.
    syncs: std::sync::atomic::AtomicU64,
}

struct State {
    nodes: HashMap<u64, Node>,
    next_ino: u64,
}

struct Node {
    data: Data,
    perm: u32,
    nlink: u64,
    /// Open handles; an unlinked node lives until the last one closes.
    open: u64,
    atime: Timespec,
    mtime: Timespec,
    ctime: Timespec,
    btime: Timespec,
    xattrs: BTreeMap<String, Vec<u8>>,
}

enum Data {
    File(Vec<u8>),
    Dir(BTreeMap<String, u64>),
}

fn err(e: Errno) -> io::Error {
    errno(e)
}

impl Default for MemVfs {
    fn default() -> Self {
        Self::new()
    }
}

impl MemVfs {
    /// An empty tree whose times come from the system clock.
    pub fn new() -> Self {
        Self::with_clock(Timespec::now)
    }

    /// An empty tree whose times come from `clock` (for deterministic tests).
    pub fn with_clock(clock: impl Fn() -> Timespec + Send + Sync + 'static) -> Self {
        let now = clock();
        let mut nodes = HashMap::new();
        nodes.insert(ROOT, Node::new(Data::Dir(BTreeMap::new()), 0o755, now));
        let state = State {
            nodes,
            next_ino: ROOT + 1,
        };
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(state),
                clock: Box::new(clock),
                syncs: Default::default(),
            }),
        }
    }

    fn now(&self) -> Timespec {
        (self.inner.clock)()
    }

    /// How many times a file or directory of the tree was flushed (fsync or fdatasync).
    pub fn syncs(&self) -> u64 {
        self.inner.syncs.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Node {
    fn new(data: Data, perm: u32, now: Timespec) -> Self {
        let nlink = match data {
            Data::File(_) => 1,
            Data::Dir(_) => 2,
        };
        Self {
            data,
            perm: perm & MODE_MASK,
            nlink,
            open: 0,
            atime: now,
            mtime: now,
            ctime: now,
            btime: now,
            xattrs: BTreeMap::new(),
        }
    }

    fn kind(&self) -> FileKind {
        match self.data {
            Data::File(_) => FileKind::File,
            Data::Dir(_) => FileKind::Dir,
        }
    }

    fn stat(&self, ino: u64) -> Stat {
        let (size, type_bits) = match &self.data {
            Data::File(d) => (d.len() as u64, S_IFREG),
            Data::Dir(_) => (BLOCK, S_IFDIR),
        };
        Stat {
            kind: self.kind(),
            size,
            alloc_size: size.div_ceil(BLOCK) * BLOCK,
            nlink: self.nlink,
            ino,
            dev: DEV,
            mode: type_bits | self.perm,
            uid: 0,
            gid: 0,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            btime: Some(self.btime),
        }
    }

    fn entries(&self) -> io::Result<&BTreeMap<String, u64>> {
        match &self.data {
            Data::Dir(e) => Ok(e),
            Data::File(_) => Err(err(Errno::NOTDIR)),
        }
    }

    fn entries_mut(&mut self) -> io::Result<&mut BTreeMap<String, u64>> {
        match &mut self.data {
            Data::Dir(e) => Ok(e),
            Data::File(_) => Err(err(Errno::NOTDIR)),
        }
    }

    fn touch(&mut self, now: Timespec) {
        self.mtime = now;
        self.ctime = now;
    }
}

impl State {
    fn node(&self, ino: u64) -> io::Result<&Node> {
        self.nodes.get(&ino).ok_or_else(|| err(Errno::NOENT))
    }

    fn node_mut(&mut self, ino: u64) -> io::Result<&mut Node> {
        self.nodes.get_mut(&ino).ok_or_else(|| err(Errno::NOENT))
    }

    fn lookup(&self, path: &RelPath) -> io::Result<u64> {
        let mut ino = ROOT;
        for comp in path.components() {
            ino = *self
                .node(ino)?
                .entries()?
                .get(comp)
                .ok_or_else(|| err(Errno::NOENT))?;
        }
        Ok(ino)
    }

    /// The directory holding `path`, the last component, and what that names (if anything).
    fn locate<'p>(&self, path: &'p RelPath) -> io::Result<(u64, &'p str, Option<u64>)> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(VfsError::ShareRoot.into());
        };
        let dir = self.lookup(&parent)?;
        let child = self.node(dir)?.entries()?.get(name).copied();
        Ok((dir, name, child))
    }

    fn insert(&mut self, dir: u64, name: &str, node: Node, now: Timespec) -> io::Result<u64> {
        let ino = self.next_ino;
        self.next_ino += 1;
        let parent = self.node_mut(dir)?;
        parent.entries_mut()?.insert(name.to_owned(), ino);
        parent.touch(now);
        self.nodes.insert(ino, node);
        Ok(ino)
    }

    fn detach(&mut self, dir: u64, name: &str, now: Timespec) -> io::Result<()> {
        let parent = self.node_mut(dir)?;
        let ino = parent
            .entries_mut()?
            .remove(name)
            .ok_or_else(|| err(Errno::NOENT))?;
        parent.touch(now);
        if let Some(node) = self.nodes.get_mut(&ino) {
            // A file's other hard links keep it; a directory has only this name.
            node.nlink = match node.data {
                Data::File(_) => node.nlink.saturating_sub(1),
                Data::Dir(_) => 0,
            };
            node.ctime = now;
            if node.open == 0 && node.nlink == 0 {
                self.nodes.remove(&ino);
            }
        }
        Ok(())
    }

    fn used_blocks(&self) -> u64 {
        self.nodes
            .values()
            .map(|n| n.stat(0).alloc_size / BLOCK)
            .sum()
    }
}

impl Vfs for MemVfs {
    fn open(&self, path: &RelPath, opts: &OpenOptions) -> io::Result<Opened> {
        let now = self.now();
        let mut st = self.inner.state.lock();
        let (place, existing) = if path.is_root() {
            (None, Some(ROOT))
        } else {
            let (dir, name, child) = st.locate(path)?;
            (Some((dir, name)), child)
        };
        let want_dir = opts.directory == Some(true);
        if want_dir && opts.create.truncates() {
            return Err(err(Errno::INVAL));
        }
        let (ino, created) = match existing {
            Some(_) if opts.create == CreateMode::CreateNew => return Err(err(Errno::EXIST)),
            Some(ino) => {
                let node = st.node_mut(ino)?;
                match (node.kind(), opts.directory) {
                    (FileKind::Dir, Some(false)) => return Err(err(Errno::ISDIR)),
                    (FileKind::Dir, _) if opts.create.truncates() => return Err(err(Errno::ISDIR)),
                    (FileKind::File, Some(true)) => return Err(err(Errno::NOTDIR)),
                    _ => {}
                }
                if let Data::File(data) = &mut node.data
                    && opts.create.truncates()
                {
                    data.clear();
                    node.touch(now);
                }
                (ino, false)
            }
            None if !opts.create.creates() => return Err(err(Errno::NOENT)),
            None => {
                let Some((dir, name)) = place else {
                    return Err(err(Errno::NOENT));
                };
                let data = if want_dir {
                    Data::Dir(BTreeMap::new())
                } else {
                    Data::File(Vec::new())
                };
                (
                    st.insert(dir, name, Node::new(data, opts.mode, now), now)?,
                    true,
                )
            }
        };
        let node = st.node_mut(ino)?;
        node.open += 1;
        let file = MemFile {
            vfs: self.clone(),
            ino,
            read: opts.read,
            write: opts.write || opts.create.truncates(),
        };
        Ok(Opened {
            file: Box::new(file),
            created,
        })
    }

    fn stat(&self, path: &RelPath) -> io::Result<Stat> {
        let st = self.inner.state.lock();
        let ino = st.lookup(path)?;
        Ok(st.node(ino)?.stat(ino))
    }

    fn rename(&self, from: &RelPath, to: &RelPath, replace: bool) -> io::Result<()> {
        let now = self.now();
        let mut st = self.inner.state.lock();
        let (from_dir, from_name, from_ino) = st.locate(from)?;
        let from_ino = from_ino.ok_or_else(|| err(Errno::NOENT))?;
        let (to_dir, to_name, to_ino) = st.locate(to)?;
        let from_is_dir = st.node(from_ino)?.kind() == FileKind::Dir;
        if from_is_dir && to.starts_with(from) && to != from {
            return Err(err(Errno::INVAL));
        }
        if let Some(to_ino) = to_ino {
            if !replace {
                return Err(err(Errno::EXIST));
            }
            if to_ino == from_ino {
                return Ok(());
            }
            let target = st.node(to_ino)?;
            match (from_is_dir, target.kind() == FileKind::Dir) {
                (true, false) => return Err(err(Errno::NOTDIR)),
                (false, true) => return Err(err(Errno::ISDIR)),
                (true, true) if !target.entries()?.is_empty() => return Err(err(Errno::NOTEMPTY)),
                _ => {}
            }
            st.detach(to_dir, to_name, now)?;
        }
        let src = st.node_mut(from_dir)?;
        src.entries_mut()?.remove(from_name);
        src.touch(now);
        let dst = st.node_mut(to_dir)?;
        dst.entries_mut()?.insert(to_name.to_owned(), from_ino);
        dst.touch(now);
        st.node_mut(from_ino)?.ctime = now;
        Ok(())
    }

    fn hard_links(&self) -> bool {
        true
    }

    fn link(
        &self,
        from: &RelPath,
        source: (u64, u64),
        to: &RelPath,
        replace: bool,
    ) -> io::Result<()> {
        let now = self.now();
        let mut st = self.inner.state.lock();
        let (_, _, from_ino) = st.locate(from)?;
        let from_ino = from_ino.ok_or_else(|| err(Errno::NOENT))?;
        if (DEV, from_ino) != source {
            return Err(err(Errno::STALE));
        }
        if st.node(from_ino)?.kind() == FileKind::Dir {
            return Err(err(Errno::PERM));
        }
        let (to_dir, to_name, to_ino) = st.locate(to)?;
        if let Some(to_ino) = to_ino {
            if !replace {
                return Err(err(Errno::EXIST));
            }
            if to_ino == from_ino {
                return Ok(());
            }
            if st.node(to_ino)?.kind() == FileKind::Dir {
                return Err(err(Errno::ISDIR));
            }
            st.detach(to_dir, to_name, now)?;
        }
        let dir = st.node_mut(to_dir)?;
        dir.entries_mut()?.insert(to_name.to_owned(), from_ino);
        dir.touch(now);
        let node = st.node_mut(from_ino)?;
        node.nlink += 1;
        node.ctime = now;
        Ok(())
    }

    fn unlink(&self, path: &RelPath) -> io::Result<()> {
        let now = self.now();
        let mut st = self.inner.state.lock();
        let (dir, name, ino) = st.locate(path)?;
        let ino = ino.ok_or_else(|| err(Errno::NOENT))?;
        if st.node(ino)?.kind() == FileKind::Dir {
            return Err(err(Errno::ISDIR));
        }
        st.detach(dir, name, now)
    }

    fn rmdir(&self, path: &RelPath) -> io::Result<()> {
        let now = self.now();
        let mut st = self.inner.state.lock();
        let (dir, name, ino) = st.locate(path)?;
        let ino = ino.ok_or_else(|| err(Errno::NOENT))?;
        if !st.node(ino)?.entries()?.is_empty() {
            return Err(err(Errno::NOTEMPTY));
        }
        st.detach(dir, name, now)
    }

    fn statfs(&self) -> io::Result<FsStat> {
        let (used, st_count) = {
            let st = self.inner.state.lock();
            (st.used_blocks(), st.nodes.len() as u64)
        };
        let free = TOTAL_BLOCKS.saturating_sub(used);
        Ok(FsStat {
            block_size: BLOCK,
            total_blocks: TOTAL_BLOCKS,
            free_blocks: free,
            avail_blocks: free,
            fs_id: DEV,
            name_max: 255,
            io_size: BLOCK,
            total_files: 1 << 20,
            free_files: (1u64 << 20).saturating_sub(st_count),
            clones_extents: false,
        })
    }

    fn find_case_insensitive(&self, dir: &RelPath, name: &str) -> io::Result<Option<String>> {
        let st = self.inner.state.lock();
        let ino = st.lookup(dir)?;
        let entries = st.node(ino)?.entries()?;
        Ok(case::unique_match(entries.keys().map(String::as_str), name))
    }
}

struct MemFile {
    vfs: MemVfs,
    ino: u64,
    read: bool,
    write: bool,
}

impl MemFile {
    fn with<T>(&self, f: impl FnOnce(&mut Node) -> io::Result<T>) -> io::Result<T> {
        let mut st = self.vfs.inner.state.lock();
        f(st.node_mut(self.ino)?)
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        let mut st = self.vfs.inner.state.lock();
        if let Some(node) = st.nodes.get_mut(&self.ino) {
            node.open = node.open.saturating_sub(1);
            if node.open == 0 && node.nlink == 0 {
                st.nodes.remove(&self.ino);
            }
        }
    }
}

fn end_of(offset: u64, len: u64) -> io::Result<u64> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_FILE_SIZE => Ok(end),
        _ => Err(err(Errno::FBIG)),
    }
}

/// A regular file's bytes, through a handle that may write them (EBADF otherwise).
fn writable(node: &mut Node, write: bool) -> io::Result<&mut Vec<u8>> {
    match &mut node.data {
        Data::File(data) if write => Ok(data),
        _ => Err(err(Errno::BADF)),
    }
}

fn to_usize(v: u64) -> io::Result<usize> {
    usize::try_from(v).map_err(|_| err(Errno::FBIG))
}

impl VfsFile for MemFile {
    fn local_storage(&self) -> bool {
        true
    }

    fn read_at(&self, offset: u64, len: usize) -> io::Result<Bytes> {
        self.with(|node| {
            let Data::File(data) = &node.data else {
                return Err(err(Errno::ISDIR));
            };
            if !self.read {
                return Err(err(Errno::BADF));
            }
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let chunk = data.get(start..).unwrap_or_default();
            let chunk = chunk.get(..len).unwrap_or(chunk);
            Ok(BytesMut::from(chunk).freeze())
        })
    }

    fn write_at(&self, offset: u64, bufs: &[Bytes]) -> io::Result<usize> {
        let now = self.vfs.now();
        self.with(|node| {
            let data = writable(node, self.write)?;
            let total = bufs.iter().map(|b| b.len() as u64).sum::<u64>();
            let end = to_usize(end_of(offset, total)?)?;
            let start = to_usize(offset)?;
            if data.len() < end {
                data.resize(end, 0);
            }
            let mut pos = start;
            for b in bufs {
                let dst = data
                    .get_mut(pos..pos + b.len())
                    .ok_or_else(|| err(Errno::FBIG))?;
                dst.copy_from_slice(b);
                pos += b.len();
            }
            node.touch(now);
            Ok(end - start)
        })
    }

    /// At the end as it is under the node's lock, so appenders never overlap.
    fn append(&self, bufs: &[Bytes]) -> io::Result<usize> {
        let now = self.vfs.now();
        self.with(|node| {
            let data = writable(node, self.write)?;
            let total = bufs.iter().map(|b| b.len() as u64).sum::<u64>();
            to_usize(end_of(data.len() as u64, total)?)?;
            for b in bufs {
                data.extend_from_slice(b);
            }
            node.touch(now);
            Ok(usize::try_from(total).unwrap_or(usize::MAX))
        })
    }

    fn stat(&self) -> io::Result<Stat> {
        let ino = self.ino;
        self.with(|node| Ok(node.stat(ino)))
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let now = self.vfs.now();
        self.with(|node| {
            let Data::File(data) = &mut node.data else {
                return Err(err(Errno::INVAL));
            };
            if !self.write {
                return Err(err(Errno::INVAL));
            }
            data.resize(to_usize(end_of(len, 0)?)?, 0);
            node.touch(now);
            Ok(())
        })
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        end_of(len, 0)?;
        if !self.write {
            return Err(err(Errno::BADF));
        }
        Ok(())
    }

    fn set_times(&self, atime: Option<Timespec>, mtime: Option<Timespec>) -> io::Result<()> {
        if [atime, mtime]
            .iter()
            .flatten()
            .any(|t| t.nsec >= 1_000_000_000)
        {
            return Err(err(Errno::INVAL));
        }
        let now = self.vfs.now();
        self.with(|node| {
            if let Some(a) = atime {
                node.atime = a;
            }
            if let Some(m) = mtime {
                node.mtime = m;
            }
            node.ctime = now;
            Ok(())
        })
    }

    fn set_mode(&self, mode: u32) -> io::Result<()> {
        let now = self.vfs.now();
        self.with(|node| {
            node.perm = mode & MODE_MASK;
            node.ctime = now;
            Ok(())
        })
    }

    fn fsync(&self) -> io::Result<()> {
        self.with(|_| Ok(()))?;
        let syncs = &self.vfs.inner.syncs;
        syncs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn read_dir(&self) -> io::Result<Vec<DirEntry>> {
        let st = self.vfs.inner.state.lock();
        let entries = st.node(self.ino)?.entries()?;
        entries
            .iter()
            .map(|(name, &ino)| {
                Ok(DirEntry {
                    name: name.clone(),
                    stat: st.node(ino)?.stat(ino),
                })
            })
            .collect()
    }

    fn entry_xattrs(
        &self,
        entry: &str,
        want: &dyn Fn(&str) -> bool,
    ) -> io::Result<Vec<(String, Vec<u8>)>> {
        let st = self.vfs.inner.state.lock();
        let Some(&ino) = st.node(self.ino)?.entries()?.get(entry) else {
            return Ok(Vec::new());
        };
        Ok(st
            .node(ino)?
            .xattrs
            .iter()
            .filter(|(k, _)| want(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn get_xattr(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        check_xattr_name(name)?;
        self.with(|node| Ok(node.xattrs.get(name).cloned()))
    }

    fn set_xattr(&self, name: &str, value: &[u8]) -> io::Result<()> {
        check_xattr_name(name)?;
        if value.len() > 64 * 1024 {
            return Err(err(Errno::TOOBIG));
        }
        self.with(|node| {
            node.xattrs.insert(name.to_owned(), value.to_vec());
            Ok(())
        })
    }

    fn list_xattrs(&self) -> io::Result<Vec<String>> {
        self.with(|node| Ok(node.xattrs.keys().cloned().collect()))
    }

    fn remove_xattr(&self, name: &str) -> io::Result<bool> {
        check_xattr_name(name)?;
        self.with(|node| Ok(node.xattrs.remove(name).is_some()))
    }
}

/// Same rule as the POSIX backend, whose names become `user.<name>` (255 bytes at most).
fn check_xattr_name(name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() > 250 || name.contains('\0') {
        return Err(VfsError::XattrName.into());
    }
    Ok(())
}
