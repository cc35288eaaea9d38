//! Share-relative paths that cannot name anything outside the share by themselves.

use std::fmt;
use thiserror::Error;

/// Longest path accepted (Linux `PATH_MAX`); the kernel would refuse longer ones anyway.
const MAX_PATH_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum PathError {
    #[error("empty path component")]
    EmptyComponent,
    #[error("\".\" or \"..\" path component")]
    DotComponent,
    #[error("NUL byte in path")]
    Nul,
    #[error("'/' inside a name")]
    Slash,
    #[error("path longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
}

impl From<PathError> for std::io::Error {
    fn from(e: PathError) -> Self {
        let kind = match e {
            PathError::TooLong => std::io::ErrorKind::InvalidFilename,
            _ => std::io::ErrorKind::InvalidInput,
        };
        std::io::Error::new(kind, e)
    }
}

/// A validated path relative to a share root: components are non-empty, not `.` or `..`,
/// and contain no `/` or NUL. The empty path is the share root.
///
/// Stored joined with `/` so [`RelPath::as_str`] is free.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RelPath {
    joined: String,
}

impl RelPath {
    /// The share root.
    pub fn root() -> Self {
        Self::default()
    }

    /// Parses a `/`-separated path; `""` is the root. No leading, trailing or doubled `/`.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        if s.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        if !s.is_empty() {
            for comp in s.split('/') {
                check_component(comp)?;
            }
        }
        Ok(Self {
            joined: s.to_owned(),
        })
    }

    pub fn is_root(&self) -> bool {
        self.joined.is_empty()
    }

    /// The path joined with `/` (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.joined
    }

    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.joined.split('/').filter(|c| !c.is_empty())
    }

    /// The containing directory; `None` for the root.
    pub fn parent(&self) -> Option<RelPath> {
        if self.is_root() {
            return None;
        }
        let parent = match self.joined.rfind('/') {
            Some(i) => self.joined.get(..i).unwrap_or_default(),
            None => "",
        };
        Some(Self {
            joined: parent.to_owned(),
        })
    }

    /// The last component; `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        if self.is_root() {
            return None;
        }
        self.joined.rsplit('/').next()
    }

    /// This path extended by one validated component.
    pub fn join(&self, name: &str) -> Result<RelPath, PathError> {
        check_component(name)?;
        let joined = if self.is_root() {
            name.to_owned()
        } else {
            format!("{}/{}", self.joined, name)
        };
        if joined.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong);
        }
        Ok(Self { joined })
    }

    /// Whether `self` is `other` or lies below it.
    pub fn starts_with(&self, other: &RelPath) -> bool {
        other.is_root()
            || self.joined == other.joined
            || self
                .joined
                .strip_prefix(other.joined.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    }

    /// `self` with its leading `from` replaced by `to`, as a rename of directory `from` to
    /// `to` moves it; `None` when `self` is not `from` or below it, or the result is too long.
    pub fn rebase(&self, from: &RelPath, to: &RelPath) -> Option<RelPath> {
        if !self.starts_with(from) {
            return None;
        }
        let rest = self
            .joined
            .get(from.joined.len()..)?
            .trim_start_matches('/');
        let joined = match (to.is_root(), rest.is_empty()) {
            (_, true) => to.joined.clone(),
            (true, false) => rest.to_owned(),
            (false, false) => format!("{}/{rest}", to.joined),
        };
        (joined.len() <= MAX_PATH_BYTES).then_some(Self { joined })
    }

    /// The form handed to `openat2`: the root becomes `.`.
    pub(crate) fn as_os_arg(&self) -> &str {
        if self.is_root() { "." } else { &self.joined }
    }
}

fn check_component(c: &str) -> Result<(), PathError> {
    if c.is_empty() {
        Err(PathError::EmptyComponent)
    } else if c == "." || c == ".." {
        Err(PathError::DotComponent)
    } else if c.contains('\0') {
        Err(PathError::Nul)
    } else if c.contains('/') {
        Err(PathError::Slash)
    } else {
        Ok(())
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RelPath({:?})", self.joined)
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.joined)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_paths() {
        let p = RelPath::parse("a/b c/d.txt").unwrap();
        assert_eq!(p.as_str(), "a/b c/d.txt");
        assert_eq!(p.file_name(), Some("d.txt"));
        assert_eq!(p.parent().unwrap().as_str(), "a/b c");
        assert_eq!(p.parent().unwrap().parent().unwrap().as_str(), "a");
        assert!(
            p.parent()
                .unwrap()
                .parent()
                .unwrap()
                .parent()
                .unwrap()
                .is_root()
        );
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "b c", "d.txt"]);
        // Dots inside names are ordinary characters.
        assert!(RelPath::parse("...").is_ok());
        assert!(RelPath::parse(".hidden/..x").is_ok());
    }

    #[test]
    fn root() {
        let r = RelPath::parse("").unwrap();
        assert!(r.is_root());
        assert_eq!(r, RelPath::root());
        assert_eq!(r.parent(), None);
        assert_eq!(r.file_name(), None);
        assert_eq!(r.components().count(), 0);
        assert_eq!(r.as_os_arg(), ".");
        assert_eq!(r.join("x").unwrap().as_str(), "x");
    }

    #[test]
    fn rejects_dot_components() {
        for s in ["..", ".", "a/..", "../a", "a/./b", "a/../../etc"] {
            assert_eq!(RelPath::parse(s), Err(PathError::DotComponent), "{s}");
        }
    }

    #[test]
    fn rejects_empty_components() {
        for s in ["/", "/etc", "a/", "a//b", "//"] {
            assert_eq!(RelPath::parse(s), Err(PathError::EmptyComponent), "{s}");
        }
    }

    #[test]
    fn rejects_nul() {
        assert_eq!(RelPath::parse("a\0b"), Err(PathError::Nul));
        assert_eq!(RelPath::root().join("x\0"), Err(PathError::Nul));
    }

    #[test]
    fn join_validates_one_component() {
        let a = RelPath::parse("a").unwrap();
        assert_eq!(a.join("b").unwrap().as_str(), "a/b");
        assert_eq!(a.join("b/c"), Err(PathError::Slash));
        assert_eq!(a.join(".."), Err(PathError::DotComponent));
        assert_eq!(a.join(""), Err(PathError::EmptyComponent));
    }

    #[test]
    fn length_is_capped() {
        let long = "a/".repeat(2048) + "a";
        assert_eq!(RelPath::parse(&long), Err(PathError::TooLong));
        let ok = "a/".repeat(2047) + "a";
        assert!(RelPath::parse(&ok).is_ok());
    }

    #[test]
    fn starts_with_respects_component_boundaries() {
        let ab = RelPath::parse("a/b").unwrap();
        assert!(ab.starts_with(&RelPath::parse("a").unwrap()));
        assert!(ab.starts_with(&ab));
        assert!(ab.starts_with(&RelPath::root()));
        assert!(
            !RelPath::parse("ab")
                .unwrap()
                .starts_with(&RelPath::parse("a").unwrap())
        );
        assert!(!RelPath::parse("a").unwrap().starts_with(&ab));
    }

    #[test]
    fn rebase_moves_what_lies_below() {
        let p = |s: &str| RelPath::parse(s).unwrap();
        assert_eq!(p("a/b/c").rebase(&p("a/b"), &p("x")), Some(p("x/c")));
        assert_eq!(p("a/b").rebase(&p("a/b"), &p("x/y")), Some(p("x/y")));
        assert_eq!(p("a/b").rebase(&RelPath::root(), &p("x")), Some(p("x/a/b")));
        assert_eq!(p("a/b").rebase(&p("a"), &RelPath::root()), Some(p("b")));
        assert_eq!(p("ab/c").rebase(&p("a"), &p("x")), None);
        assert_eq!(p("a").rebase(&p("a/b"), &p("x")), None);
        let long = p("d/".repeat(2048).trim_end_matches('/'));
        assert_eq!(p("d/e").rebase(&p("d"), &long), None);
    }
}
