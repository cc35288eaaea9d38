//! SMB names (as sent in CREATE and SET_INFO rename) to share-relative [`RelPath`]s, and their
//! case-insensitive resolution against a [`Vfs`].

use smbq_vfs::{RelPath, Stat, Vfs};
use smbq_wire::NtStatus;

use crate::errors::{IoContext, map_io_error_in};

/// Longest single component, in UTF-16 units (NTFS: 255).
const MAX_COMPONENT_UNITS: usize = 255;

/// Which data stream of the named file a CREATE addresses (MS-FSCC 2.1.5 stream names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stream {
    /// The unnamed `::$DATA` stream, i.e. the file itself.
    Default,
    /// A named alternate data stream; this server keeps none.
    Named(String),
}

/// A syntactically valid SMB path, split into components.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmbName {
    pub components: Vec<String>,
    pub stream: Stream,
    /// The name spelled out the unnamed stream (`name::$DATA`), which a directory does not
    /// have (smbtorture smb2.streams.dir).
    pub default_data: bool,
}

impl SmbName {
    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The path as given (no case folding), for creating a missing final component.
    pub fn rel_path(&self) -> Result<RelPath, NtStatus> {
        let mut p = RelPath::root();
        for c in &self.components {
            p = p.join(c).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
        }
        Ok(p)
    }
}

/// A POSIX open's name (crate::posix; Samba's POSIX pathnames): `/` separates components,
/// as Linux's cifs client sends them, and so does `\`, which smbclient's POSIX mode keeps
/// (Samba takes only `/`, so such a client reaches no subdirectory there). No stream syntax:
/// `:` is a character like the others the Windows rules refuse (`*?<>"|`), which POSIX names
/// may hold. Still refused: empty and `.` components, `..` (nothing above the share is ever
/// named), NUL and over-long components.
pub fn parse_posix_name(name: &str) -> Result<SmbName, NtStatus> {
    let is_sep = |c: char| c == '/' || c == '\\';
    if name.starts_with(is_sep) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let mut components = Vec::new();
    if !name.is_empty() {
        let trimmed = name.strip_suffix(is_sep).unwrap_or(name);
        for c in trimmed.split(is_sep) {
            if c == ".." {
                return Err(NtStatus::OBJECT_PATH_SYNTAX_BAD);
            }
            if c.is_empty()
                || c == "."
                || c.contains('\0')
                || c.encode_utf16().count() > MAX_COMPONENT_UNITS
            {
                return Err(NtStatus::OBJECT_NAME_INVALID);
            }
            components.push(c.to_owned());
        }
    }
    Ok(SmbName {
        components,
        stream: Stream::Default,
        default_data: false,
    })
}

/// The name of a CREATE or a rename or link target, parsed for an open of its kind.
pub fn parse_name(name: &str, posix: bool) -> Result<SmbName, NtStatus> {
    if posix {
        parse_posix_name(name)
    } else {
        parse_smb_name(name)
    }
}

/// Parses an SMB2 CREATE name (MS-SMB2 2.2.13: relative to the share, `\`-separated).
///
/// - A leading `\` is refused with STATUS_INVALID_PARAMETER, as Windows does
///   (smbtorture smb2.create.leading-slash).
/// - Empty and `.` components are refused (STATUS_OBJECT_NAME_INVALID), `..` components with
///   STATUS_OBJECT_PATH_SYNTAX_BAD (as Windows and Samba): `..` would name
///   something outside the share and Windows never resolves them server-side.
/// - Wildcards and other characters invalid in NTFS names (MS-FSCC 2.1.5.2) are refused.
/// - A `:` in the last component starts a stream name; `name::$DATA` is the file itself.
pub fn parse_smb_name(name: &str) -> Result<SmbName, NtStatus> {
    if name.is_empty() {
        return Ok(SmbName {
            components: Vec::new(),
            stream: Stream::Default,
            default_data: false,
        });
    }
    if name.starts_with('\\') {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    // One trailing separator is tolerated ("dir\"), as Windows does for directories.
    let trimmed = name.strip_suffix('\\').unwrap_or(name);
    let parts: Vec<&str> = trimmed.split('\\').collect();
    let last_idx = parts.len().saturating_sub(1);
    let mut components = Vec::with_capacity(parts.len());
    let mut stream = Stream::Default;
    let mut default_data = false;
    for (i, part) in parts.into_iter().enumerate() {
        let base = if i == last_idx {
            let (base, s) = split_stream(part)?;
            default_data = s == Stream::Default && part.len() > base.len();
            stream = s;
            base
        } else {
            part
        };
        check_component(base)?;
        components.push(base.to_owned());
    }
    Ok(SmbName {
        components,
        stream,
        default_data,
    })
}

/// Splits `file:stream:type` (MS-FSCC 2.1.5.3).
fn split_stream(part: &str) -> Result<(&str, Stream), NtStatus> {
    let mut it = part.splitn(3, ':');
    let base = it.next().unwrap_or_default();
    let Some(stream) = it.next() else {
        return Ok((base, Stream::Default));
    };
    let kind = it.next();
    if let Some(k) = kind
        && (!k.eq_ignore_ascii_case("$DATA") || k.contains(':'))
    {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if stream.is_empty() {
        // "file:" is malformed; "file::$DATA" is the default stream.
        return match kind {
            Some(_) => Ok((base, Stream::Default)),
            None => Err(NtStatus::OBJECT_NAME_INVALID),
        };
    }
    if stream.chars().any(|c| matches!(c, '\\' | '/' | ':' | '\0')) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok((base, Stream::Named(stream.to_owned())))
}

/// MS-FSCC 2.1.5.2: characters that may not appear in a file name component.
fn check_component(c: &str) -> Result<(), NtStatus> {
    // A parent reference is a path syntax error (Windows and Samba: smbtorture smb2.mkdir);
    // nothing is ever resolved above the share.
    if c == ".." {
        return Err(NtStatus::OBJECT_PATH_SYNTAX_BAD);
    }
    if c.is_empty() || c == "." {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    if c.encode_utf16().count() > MAX_COMPONENT_UNITS {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    let bad = |ch: char| {
        matches!(ch, '"' | '*' | '/' | ':' | '<' | '>' | '?' | '|' | '\\') || (ch as u32) < 0x20
    };
    if c.chars().any(bad) {
        return Err(NtStatus::OBJECT_NAME_INVALID);
    }
    Ok(())
}

/// The entry of directory `dir` whose generated short name is `short`, with its metadata.
fn by_short_name(
    vfs: &dyn Vfs,
    dir: &RelPath,
    short: &str,
) -> Result<Option<(RelPath, Stat)>, NtStatus> {
    let opts = smbq_vfs::OpenOptions {
        directory: Some(true),
        ..Default::default()
    };
    let Ok(handle) = vfs.open(dir, &opts) else {
        return Ok(None);
    };
    let entries = handle.file.read_dir().map_err(|e| parent_err(&e))?;
    let Some(long) =
        crate::short_name::long_name_of(entries.iter().map(|e| e.name.as_str()), short)
    else {
        return Ok(None);
    };
    let p = dir.join(long).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    let st = vfs.stat(&p).map_err(|e| parent_err(&e))?;
    Ok(Some((p, st)))
}

/// A name resolved against the share: the on-disk path and, when it exists, its metadata.
/// When `stat` is `None` the parent exists and `path` ends with the name as the client gave it.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub path: RelPath,
    pub stat: Option<Stat>,
}

/// Resolves `name` as an open of its kind looks names up: [`resolve_exact`] for a POSIX open
/// (crate::posix), [`resolve`] for any other.
pub fn lookup(vfs: &dyn Vfs, name: &SmbName, posix: bool) -> Result<Resolved, NtStatus> {
    if posix {
        resolve_exact(vfs, name)
    } else {
        resolve(vfs, name)
    }
}

/// Resolves `name` as it is spelled, as a POSIX open does (POSIX-SMB2; Samba's POSIX
/// pathnames): case-sensitively and without 8.3 names, so `a` and `A` are two files. A
/// missing name's parent must exist. Blocking: call on the blocking pool.
pub fn resolve_exact(vfs: &dyn Vfs, name: &SmbName) -> Result<Resolved, NtStatus> {
    let path = name.rel_path()?;
    match vfs.stat(&path) {
        Ok(st) => Ok(Resolved {
            path,
            stat: Some(st),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(parent) = path.parent() {
                match vfs.stat(&parent) {
                    Ok(st) if st.kind == smbq_vfs::FileKind::Dir => {}
                    Ok(_) => return Err(NtStatus::OBJECT_PATH_NOT_FOUND),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(NtStatus::OBJECT_PATH_NOT_FOUND);
                    }
                    Err(e) => return Err(parent_err(&e)),
                }
            }
            Ok(Resolved { path, stat: None })
        }
        Err(e) => Err(parent_err(&e)),
    }
}

/// Resolves `name` exactly first, then component by component case-insensitively
/// (Windows clients expect case-insensitive names). Blocking: call on the blocking pool.
pub fn resolve(vfs: &dyn Vfs, name: &SmbName) -> Result<Resolved, NtStatus> {
    let exact = name.rel_path()?;
    match vfs.stat(&exact) {
        Ok(st) => {
            return Ok(Resolved {
                path: exact,
                stat: Some(st),
            });
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(map_io_error_in(&e, IoContext::Parent));
        }
        Err(_) => {}
    }
    let last = name.components.len().saturating_sub(1);
    let mut cur = RelPath::root();
    for (i, comp) in name.components.iter().enumerate() {
        let cand = cur.join(comp).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
        let found = step(vfs, &cur, comp, false)?;
        match found {
            Some((p, st)) if i == last => {
                return Ok(Resolved {
                    path: p,
                    stat: Some(st),
                });
            }
            Some((p, st)) => {
                if st.kind != smbq_vfs::FileKind::Dir {
                    return Err(NtStatus::OBJECT_PATH_NOT_FOUND);
                }
                cur = p;
            }
            None if i == last => {
                return Ok(Resolved {
                    path: cand,
                    stat: None,
                });
            }
            None => return Err(NtStatus::OBJECT_PATH_NOT_FOUND),
        }
    }
    // Only the root has no components, and the root always stats.
    Err(NtStatus::OBJECT_PATH_NOT_FOUND)
}

/// One component of a name, looked up in `dir` as an open of its kind looks it up: as
/// spelled; for a Windows open (not `posix`) then case-insensitively, then by an 8.3 name this
/// server reported for a long one (crate::short_name: old applications open files by it, as
/// on Windows). `None`: not there.
fn step(
    vfs: &dyn Vfs,
    dir: &RelPath,
    comp: &str,
    posix: bool,
) -> Result<Option<(RelPath, Stat)>, NtStatus> {
    let cand = dir.join(comp).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
    match vfs.stat(&cand) {
        Ok(st) => Ok(Some((cand, st))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !posix => {
            match vfs
                .find_case_insensitive(dir, comp)
                .map_err(|e| parent_err(&e))?
            {
                Some(real) => {
                    let p = dir.join(&real).map_err(|_| NtStatus::OBJECT_NAME_INVALID)?;
                    let st = vfs.stat(&p).map_err(|e| parent_err(&e))?;
                    Ok(Some((p, st)))
                }
                None if crate::short_name::looks_generated(comp) => by_short_name(vfs, dir, comp),
                None => Ok(None),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(parent_err(&e)),
    }
}

/// Where the lookup of `name` stops before its last component: the first component that
/// exists and is not a directory, with its index, found in one walk as [`lookup`] walks (a
/// symlink reparse point there is answered STOPPED_ON_SYMLINK, crate::reparse). `None` when
/// every component but the last is a directory, or one is missing. Blocking.
pub fn blocked_at(vfs: &dyn Vfs, name: &SmbName, posix: bool) -> Option<(RelPath, usize)> {
    let mut cur = RelPath::root();
    let parents = name.components.len().checked_sub(1)?;
    for (i, comp) in name.components.iter().take(parents).enumerate() {
        let (p, st) = step(vfs, &cur, comp, posix).ok()??;
        if st.kind != smbq_vfs::FileKind::Dir {
            return Some((p, i));
        }
        cur = p;
    }
    None
}

fn parent_err(e: &std::io::Error) -> NtStatus {
    map_io_error_in(e, IoContext::Parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps(n: &str) -> Vec<String> {
        parse_smb_name(n).unwrap().components
    }

    #[test]
    fn posix_names_split_on_both_separators_and_keep_other_characters() {
        let c = |n: &str| parse_posix_name(n).map(|n| n.components);
        assert_eq!(c("a/b\\c:d*?").unwrap(), ["a", "b", "c:d*?"]);
        assert_eq!(c("dir/").unwrap(), ["dir"]);
        assert!(c("").unwrap().is_empty());
        let n = parse_posix_name("f:stream").unwrap();
        assert_eq!(n.stream, Stream::Default);
        assert_eq!(c("/etc"), Err(NtStatus::INVALID_PARAMETER));
        assert_eq!(c("a/../b"), Err(NtStatus::OBJECT_PATH_SYNTAX_BAD));
        assert_eq!(c(".."), Err(NtStatus::OBJECT_PATH_SYNTAX_BAD));
        assert_eq!(c("a//b"), Err(NtStatus::OBJECT_NAME_INVALID));
        assert_eq!(c("a/./b"), Err(NtStatus::OBJECT_NAME_INVALID));
        assert_eq!(c("a\0b"), Err(NtStatus::OBJECT_NAME_INVALID));
        assert_eq!(c(&"x".repeat(256)), Err(NtStatus::OBJECT_NAME_INVALID));
    }

    #[test]
    fn splits_on_backslash() {
        assert_eq!(comps("a\\b\\c.txt"), ["a", "b", "c.txt"]);
        assert!(parse_smb_name("").unwrap().is_root());
        assert_eq!(comps("dir\\"), ["dir"]);
        assert_eq!(
            parse_smb_name("a\\b").unwrap().rel_path().unwrap().as_str(),
            "a/b"
        );
    }

    #[test]
    fn refuses_leading_slash_dots_and_wildcards() {
        assert_eq!(parse_smb_name("\\a"), Err(NtStatus::INVALID_PARAMETER));
        for dots in ["..", "a\\..\\b", "..\\..\\.."] {
            assert_eq!(
                parse_smb_name(dots),
                Err(NtStatus::OBJECT_PATH_SYNTAX_BAD),
                "{dots:?}"
            );
        }
        for bad in [
            ".", "a\\\\b", "a*", "a?b", "a<", "a>", "a\"b", "a|b", "a/b", "a\u{1}",
        ] {
            assert_eq!(
                parse_smb_name(bad),
                Err(NtStatus::OBJECT_NAME_INVALID),
                "{bad:?}"
            );
        }
        let long = "x".repeat(256);
        assert_eq!(parse_smb_name(&long), Err(NtStatus::OBJECT_NAME_INVALID));
        assert!(parse_smb_name(&"x".repeat(255)).is_ok());
    }

    #[test]
    fn stream_syntax() {
        let n = parse_smb_name("f.txt::$DATA").unwrap();
        assert_eq!(n.components, ["f.txt"]);
        assert_eq!(n.stream, Stream::Default);
        assert!(n.default_data);
        assert!(!parse_smb_name("f.txt").unwrap().default_data);
        assert!(!parse_smb_name("f.txt:s:$DATA").unwrap().default_data);
        // MS-FSCC 2.1.5.3: stream names may hold characters file names may not.
        let n = parse_smb_name("f:\u{5}Stream\n One:$DATA").unwrap();
        assert_eq!(n.stream, Stream::Named("\u{5}Stream\n One".into()));
        assert_eq!(
            parse_smb_name("f:?Stream*").unwrap().stream,
            Stream::Named("?Stream*".into())
        );
        assert_eq!(
            parse_smb_name("d\\stream*:s:$DATA"),
            Err(NtStatus::OBJECT_NAME_INVALID)
        );
        let n = parse_smb_name("d\\f.txt:s1").unwrap();
        assert_eq!(n.stream, Stream::Named("s1".into()));
        let n = parse_smb_name("f:s1:$data").unwrap();
        assert_eq!(n.stream, Stream::Named("s1".into()));
        assert_eq!(parse_smb_name("f:"), Err(NtStatus::OBJECT_NAME_INVALID));
        assert_eq!(
            parse_smb_name("f:s:$INDEX_ALLOCATION"),
            Err(NtStatus::OBJECT_NAME_INVALID)
        );
        assert_eq!(parse_smb_name("d:x\\f"), Err(NtStatus::OBJECT_NAME_INVALID));
    }
}
