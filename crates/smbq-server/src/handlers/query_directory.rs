//! QUERY_DIRECTORY (MS-SMB2 3.3.5.18): enumerates a directory open with a per-open cursor.
//! The first query (or RESTART_SCANS / REOPEN) takes a snapshot of the matching entries, with
//! "." and ".." first as Windows returns them; later queries continue from the cursor.

use smbq_proto::Response;
use smbq_vfs::{FileKind, RelPath, Vfs, VfsFile};
use smbq_wire::NtStatus;
use smbq_wire::fscc::FileInfoClass;
use smbq_wire::fscc::dir_info::{DirClass, DirEntryInfo, DirListEncoder};
use smbq_wire::fscc::wildcard::Pattern;
use smbq_wire::query_directory::{
    QueryDirectoryRequest, QueryDirectoryResponse, query_directory_flags as qf,
};

use super::{Ctx, bad, blocking, body};
use crate::Server;
use crate::access::mask;
use crate::dos::{self, DosInfo};
use crate::errors::map_io_error;
use crate::file_state::FileKey;
use crate::meta;
use crate::open_state::Queries as _;
use crate::security::{Token, check, store};
use crate::tables::Open;
use crate::tables::open::{DirCursor, FileOpen, ListEntry};

pub(super) async fn handle(ctx: &Ctx<'_>) -> Result<Response, NtStatus> {
    let req = QueryDirectoryRequest::decode(&ctx.req.msg).map_err(bad)?;
    let open = ctx.open()?.clone();
    if !open.is_dir() {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if !open.has(mask::FILE_LIST_DIRECTORY) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    let class = DirClass::from_info_class(FileInfoClass(req.file_information_class))
        .ok_or(NtStatus::INVALID_INFO_CLASS)?;
    // FILE_POSIX_INFORMATION entries list POSIX opens only (crate::posix; Samba answers
    // INVALID_LEVEL elsewhere).
    if class == DirClass::Posix && !open.posix {
        return Err(NtStatus::INVALID_LEVEL);
    }
    let max = req.output_buffer_length;
    if max > ctx.conn.max_transact_size {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let pattern = pattern_of(&req)?;
    let flags = req.flags;
    let srv = ctx.srv.self_arc();
    // Access-based enumeration: only what this session may read is listed.
    let abe = open
        .tree
        .share
        .cfg
        .access_based_enumeration
        .then(|| ctx.token());
    let vfs = open
        .tree
        .share
        .vfs
        .clone()
        .ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let buf = blocking(move || {
        let f = open.file().ok_or(NtStatus::INVALID_HANDLE)?;
        let mut cur = f.dir.lock();
        if flags & (qf::RESTART_SCANS | qf::REOPEN) != 0 {
            *cur = DirCursor::default();
        }
        let first = cur.entries.is_none();
        if first {
            start_listing(&mut cur, vfs.as_ref(), &open, f, &pattern, abe.as_deref())?;
        }
        let dir = open.path();
        let handle = f.file.as_ref();
        // Entries snapshotted by an earlier query may have been deleted or changed since;
        // Windows enumerates the live directory, so look at each one again (dir.fixed).
        // What the xattrs add (attributes, CreationTime, EA size) is read only for the
        // entries being returned.
        let refresh =
            |e: &ListEntry| refreshed(&srv, vfs.as_ref(), &dir, handle, abe.as_deref(), first, e);
        fill(
            &mut cur,
            class,
            max as usize,
            flags & qf::RETURN_SINGLE_ENTRY != 0,
            first,
            refresh,
        )
    })
    .await?;
    Ok(Response::ok(body(|w| {
        QueryDirectoryResponse { buffer: &buf }.encode(w)
    })))
}

/// The search pattern: none means every name (`*`); one with a path separator or NUL is
/// OBJECT_NAME_INVALID.
fn pattern_of(req: &QueryDirectoryRequest<'_>) -> Result<String, NtStatus> {
    let pattern = req
        .file_name_string()
        .map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    if pattern.contains(['\\', '/', '\0']) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(if pattern.is_empty() {
        "*".to_owned()
    } else {
        pattern
    })
}

/// The first query (or RESTART_SCANS / REOPEN): the cursor starts over on a new snapshot of
/// the entries matching `pattern`.
fn start_listing(
    cur: &mut DirCursor,
    vfs: &dyn Vfs,
    open: &Open,
    f: &FileOpen,
    pattern: &str,
    abe: Option<&Token>,
) -> Result<(), NtStatus> {
    // A POSIX directory open matches names case-sensitively (crate::posix).
    let pat = if open.posix {
        Pattern::case_sensitive(pattern)
    } else {
        Pattern::new(pattern)
    };
    let dir = open.path();
    let mut entries = snapshot(vfs, &dir, f.file.as_ref(), &pat, open.posix)?;
    // Hidden entries are left out before the emptiness check, so a pattern that
    // matches only them answers NO_SUCH_FILE, as one that matches nothing: the status
    // must not tell a hidden name from an absent one.
    if let Some(token) = abe {
        let handle = f.file.as_ref();
        entries.retain(|e| e.name == "." || e.name == ".." || readable(handle, &e.name, token));
    }
    cur.entries = Some(entries);
    cur.pattern = Some(pat);
    cur.next = 0;
    Ok(())
}

/// A snapshotted entry as this query returns it, looked at again unless the snapshot was
/// taken just now; `None` when it is gone or hidden from `abe`'s token.
fn refreshed(
    srv: &Server,
    vfs: &dyn Vfs,
    dir: &RelPath,
    handle: &dyn VfsFile,
    abe: Option<&Token>,
    first: bool,
    e: &ListEntry,
) -> Option<Seen> {
    let dots = e.name == "." || e.name == "..";
    // The first query's snapshot was filtered just now.
    if let Some(token) = abe
        && !first
        && !dots
        && !readable(handle, &e.name, token)
    {
        return None;
    }
    // What the server does not follow or open (crate::posix::special) keeps its snapshot:
    // a stat would follow the link.
    let entry = if first || dots || crate::posix::special(&e.stat).is_some() {
        e.clone()
    } else {
        let p = dir.join(&e.name).ok()?;
        ListEntry {
            name: e.name.clone(),
            stat: vfs.stat(&p).ok()?,
        }
    };
    Some(Seen::of(srv, handle, entry))
}

/// Whether access-based enumeration lists `name` (an entry of `dir`) to `token`: what it grants
/// must include reading the data, attributes, EAs and descriptor, the rights Windows' ABE
/// checks on the entry's own descriptor (Samba user_can_read_fsp; smbtorture
/// smb2.acls.ACCESSBASED). An entry without a stored descriptor is shown: the share's and the
/// POSIX rules decide its access, and they let the session list the directory. Links and
/// devices are never listed (snapshot), so the descriptor read is the entry's own.
fn readable(dir: &dyn VfsFile, name: &str, token: &Token) -> bool {
    let want = |x: &str| x == store::XATTR;
    // Unreadable metadata hides the entry: access-based enumeration fails closed.
    let stored = dir.entry_xattrs(name, &want).map(|xattrs| {
        xattrs
            .into_iter()
            .find(|(n, _)| n == store::XATTR)
            .map(|(_, bytes)| bytes)
    });
    store::grants(stored, token, check::ABE_READ)
}

/// Every matching entry, "." and ".." first. `posix`: a POSIX directory open's listing, which
/// also shows what cannot be opened (crate::posix::special).
fn snapshot(
    vfs: &dyn Vfs,
    dir: &RelPath,
    handle: &dyn smbq_vfs::VfsFile,
    pat: &Pattern,
    posix: bool,
) -> Result<Vec<ListEntry>, NtStatus> {
    let mut out = Vec::new();
    let me = handle.stat().map_err(|e| map_io_error(&e))?;
    if pat.matches(".") {
        out.push(ListEntry {
            name: ".".into(),
            stat: me.clone(),
        });
    }
    if pat.matches("..") {
        let parent = match dir.parent() {
            Some(p) => vfs.stat(&p).unwrap_or_else(|_| me.clone()),
            None => crate::posix::share_parent(&me),
        };
        out.push(ListEntry {
            name: "..".into(),
            stat: parent,
        });
    }
    let mut entries = handle.read_dir().map_err(|e| map_io_error(&e))?;
    // Stable order across queries of one snapshot; clients do not rely on any particular one.
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        // Links leading outside the share and device nodes cannot be opened; only a POSIX
        // listing shows them, for what they are (SMB3 POSIX extensions).
        if !posix && matches!(e.stat.kind, FileKind::Symlink | FileKind::Other) {
            continue;
        }
        if pat.matches(&e.name) {
            out.push(ListEntry {
                name: e.name,
                stat: e.stat,
            });
        }
    }
    Ok(out)
}

/// Packs entries from the cursor. MS-SMB2 3.3.5.18: no match on the first query is
/// NO_SUCH_FILE, an exhausted cursor NO_MORE_FILES, and a first entry that does not fit the
/// output buffer INFO_LENGTH_MISMATCH. `refresh` gives an entry's current state, or `None`
/// when it is gone and must be skipped.
fn fill(
    cur: &mut DirCursor,
    class: DirClass,
    max: usize,
    single: bool,
    first: bool,
    refresh: impl Fn(&ListEntry) -> Option<Seen>,
) -> Result<Vec<u8>, NtStatus> {
    let entries = cur.entries.as_deref().unwrap_or_default();
    if entries.is_empty() && first {
        return Err(NtStatus::NO_SUCH_FILE);
    }
    let mut enc = DirListEncoder::new(class, max);
    while let Some(e) = entries.get(cur.next) {
        let Some(e) = refresh(e) else {
            cur.next += 1;
            continue;
        };
        let info = entry_info(&e, class);
        if !enc.push(&info) {
            break;
        }
        cur.next += 1;
        if single {
            break;
        }
    }
    if enc.is_empty() {
        if cur.next >= entries.len() {
            return Err(NtStatus::NO_MORE_FILES);
        }
        return Err(NtStatus::INFO_LENGTH_MISMATCH);
    }
    Ok(enc.finish())
}

/// An entry as a client sees it: the same attributes, times, sizes and EA size a
/// QUERY_INFO on its own handle reports (MS-FSCC 2.4.17/2.4.18/2.4.8, same fields as 2.4.7
/// FileBasicInformation and 2.4.41 FileStandardInformation).
struct Seen {
    entry: ListEntry,
    view: dos::View,
    allocation: u64,
    ea_size: u32,
}

impl Seen {
    fn of(srv: &Server, dir: &dyn VfsFile, entry: ListEntry) -> Seen {
        let st = &entry.stat;
        let key = FileKey::of(st);
        let (info, ea_size) = match entry.name.as_str() {
            // A link the server does not follow, a FIFO, socket or device (listed to POSIX
            // opens only): nothing of it is read; it says what it is.
            _ if crate::posix::special(st).is_some() => (
                DosInfo {
                    reparse_tag: crate::posix::special(st),
                    ..DosInfo::default()
                },
                0,
            ),
            "." => (DosInfo::read(dir), crate::ea::ea_size(dir)),
            // The parent may be the share root's own parent, which is not the share's to
            // show; Windows clients ignore ".." anyway, so it reports what POSIX gives.
            ".." => (DosInfo::default(), 0),
            name => {
                let want = |x: &str| DosInfo::wants(x) || crate::ea::is_ea_xattr(x);
                let xattrs = dir.entry_xattrs(name, &want).unwrap_or_default();
                (
                    DosInfo::from_xattrs(&xattrs),
                    crate::ea::ea_size_of(&xattrs),
                )
            }
        };
        let view = dos::View::new(
            st,
            &entry.name,
            &info,
            srv.open_state().change_time(key, st.ctime),
        );
        let allocation = meta::allocation_with(st, srv.open_state().allocation(key));
        Seen {
            entry,
            view,
            allocation,
            ea_size,
        }
    }
}

fn entry_info(seen: &Seen, class: DirClass) -> DirEntryInfo<'_> {
    let e = &seen.entry;
    let st = &e.stat;
    let v = &seen.view;
    DirEntryInfo {
        file_index: 0,
        creation_time: v.creation,
        last_access_time: v.last_access,
        last_write_time: v.last_write,
        change_time: v.change,
        end_of_file: meta::end_of_file(st),
        allocation_size: seen.allocation,
        file_attributes: v.attributes,
        // MS-FSCC 2.4.14 (and the other classes with EaSize): a reparse point's entry carries
        // its tag there instead.
        ea_size: if v.reparse_tag != 0 {
            v.reparse_tag
        } else {
            seen.ea_size
        },
        reparse_tag: v.reparse_tag,
        // MS-FSA 2.1.5.6.3.8: ".." SHOULD carry the parent's FileId64, else zero. Its stamp
        // (crate::file_id) is not read here, so zero rather than an id the parent's own
        // QUERY_INFO would not report.
        file_id: if e.name == ".." { 0 } else { v.file_id },
        name: e.name.as_str().into(),
        // Like NTFS, only names that are not already 8.3 carry a separate short name.
        short_name: if crate::short_name::is_8_3(&e.name) {
            "".into()
        } else {
            crate::short_name::short_name(&e.name).into()
        },
        inode: st.ino,
        device: st.dev as u32,
        posix: (class == DirClass::Posix).then(|| crate::posix::stat(st, v.reparse_tag)),
    }
}
