//! What identifies a version of a file without reading it, so reloads can poll cheaply.

use std::path::Path;
use std::time::SystemTime;

/// Modification time, size and inode; None while the file cannot be stat'ed. The inode
/// catches a file replaced by rename (how smbq itself writes), whose mtime may land in the
/// same clock tick as the old one's.
pub type Stamp = Option<(SystemTime, u64, u64)>;

pub fn stamp(p: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len(), m.ino()))
}
