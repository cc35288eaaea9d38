//! Joining remote and local paths, the `.part` names transfers write through, and the checks
//! that keep names from a server inside the local destination.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Suffix of a file still being transferred; renamed away when complete.
pub const PART_SUFFIX: &str = ".part";

/// `dir/name` for share-relative paths (`dir` empty at the share root).
pub fn remote_join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The remote partial-upload name of `path`.
pub fn remote_part(path: &str) -> String {
    format!("{path}{PART_SUFFIX}")
}

/// The local partial-download name of `path`: same directory, so the final rename is atomic.
pub fn local_part(path: &Path) -> PathBuf {
    let mut name: OsString = path.file_name().map(OsString::from).unwrap_or_default();
    name.push(PART_SUFFIX);
    path.with_file_name(name)
}

/// Where a download of something called `name` goes when the user said `local`: into it when
/// it is a directory (or written as one, with a trailing `/`), else to it.
pub fn local_target(local: &Path, name: &str) -> PathBuf {
    let as_dir = local.as_os_str().as_encoded_bytes().ends_with(b"/") || local.is_dir();
    if as_dir {
        local.join(name)
    } else {
        local.to_path_buf()
    }
}

/// A directory entry name from the server that is safe to create locally: one plain
/// component. A hostile server could otherwise send `..` or `a/../../x` and write outside the
/// destination directory.
pub fn safe_entry_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// A local file name SMB can carry as one component (`\` is a separator there).
pub fn smb_name(name: &std::ffi::OsStr) -> Option<&str> {
    name.to_str().filter(|n| safe_entry_name(n))
}

/// The last component of a local path, for naming the remote copy (`dir/.` names `dir`).
pub fn local_basename(path: &Path) -> Option<String> {
    let name = match path.components().next_back()? {
        std::path::Component::Normal(n) => n.to_os_string(),
        _ => path.canonicalize().ok()?.file_name()?.to_os_string(),
    };
    smb_name(&name).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins() {
        assert_eq!(remote_join("", "a"), "a");
        assert_eq!(remote_join("x/y", "a"), "x/y/a");
        assert_eq!(remote_part("x/y"), "x/y.part");
        assert_eq!(
            local_part(Path::new("/tmp/f.bin")),
            Path::new("/tmp/f.bin.part")
        );
        assert_eq!(local_part(Path::new("f")), Path::new("f.part"));
    }

    #[test]
    fn local_targets() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(local_target(d.path(), "x"), d.path().join("x"));
        let f = d.path().join("file");
        assert_eq!(local_target(&f, "x"), f);
        let slash = PathBuf::from(format!("{}/new/", d.path().display()));
        assert_eq!(local_target(&slash, "x"), slash.join("x"));
    }

    #[test]
    fn hostile_names_are_refused() {
        for bad in ["", ".", "..", "a/b", "..\\x", "a\0b", "/etc"] {
            assert!(!safe_entry_name(bad), "{bad:?}");
        }
        for good in ["a", ".hidden", "a..b", "€", "with space"] {
            assert!(safe_entry_name(good), "{good:?}");
        }
    }

    #[test]
    fn basenames() {
        assert_eq!(local_basename(Path::new("/a/b/c.txt")).unwrap(), "c.txt");
        assert_eq!(local_basename(Path::new("dir/")).unwrap(), "dir");
        assert_eq!(local_basename(Path::new("a\\b")), None);
        let d = tempfile::tempdir().unwrap();
        let name = d.path().file_name().unwrap().to_str().unwrap().to_string();
        let dot = d.path().join(".");
        assert_eq!(local_basename(&dot), Some(name));
    }
}
