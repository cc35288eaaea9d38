//! Step 2 of a CREATE, resolution: the name is parsed and looked up in the share (`openat2`
//! with `RESOLVE_BENEATH`, case-insensitively; crate::path), and what it names decides what
//! is done with it: a named stream, an existing object (opened, overwritten or superseded as
//! the disposition says) or a new one. Resolution only reads.

use smbq_vfs::{FileKind, RelPath, Stat, Vfs};
use smbq_wire::NtStatus;

use super::Stop;
use super::disposition::{Plan, plan};
use super::intent::CreateIntent;
use crate::access::opts;
use crate::path::{Resolved, SmbName, Stream, lookup, parse_name};

/// What a CREATE's name resolved to, and what the disposition makes of it.
pub(super) enum Target<'n> {
    /// A named stream of the file `found` names (stream.rs).
    Stream { found: Resolved, sname: &'n str },
    /// An existing file or directory, to open as `plan` (a [`Plan::OpenExisting`]) says.
    Existing { path: RelPath, st: Stat, plan: Plan },
    /// A missing name the disposition creates.
    New { path: RelPath },
}

/// The CREATE's name, parsed (crate::path).
pub(super) fn name(intent: &CreateIntent) -> Result<SmbName, NtStatus> {
    parse_name(&intent.name, intent.contexts.posix_mode.is_some())
}

/// Looks `name` up in the share and decides what the CREATE does with it.
pub(super) fn target<'n>(
    vfs: &dyn Vfs,
    intent: &CreateIntent,
    name: &'n SmbName,
) -> Result<Target<'n>, Stop> {
    // A POSIX open names files case-sensitively (crate::posix).
    let posix = intent.contexts.posix_mode.is_some();
    let found = match lookup(vfs, name, posix) {
        Ok(found) => found,
        // A symlink reparse point on the way: the client follows it (crate::reparse).
        Err(NtStatus::OBJECT_PATH_NOT_FOUND) => {
            return Err(
                match crate::reparse::symlink_in_path(vfs, name, &intent.name, posix) {
                    Some(data) => Stop::Symlink(data),
                    None => NtStatus::OBJECT_PATH_NOT_FOUND.into(),
                },
            );
        }
        Err(e) => return Err(e.into()),
    };
    if let Stream::Named(sname) = &name.stream {
        return Ok(Target::Stream { found, sname });
    }
    // MS-FSCC 2.1.4: a directory has no unnamed data stream (smb2.streams.dir).
    if name.default_data && found.stat.as_ref().is_some_and(|s| s.kind == FileKind::Dir) {
        return Err(Stop::Failed(
            if intent.options & opts::DIRECTORY_FILE != 0 {
                NtStatus::NOT_A_DIRECTORY
            } else {
                NtStatus::FILE_IS_A_DIRECTORY
            },
        ));
    }
    match plan(intent.disposition, found.stat.is_some())? {
        existing @ Plan::OpenExisting { .. } => {
            let st = found.stat.ok_or(NtStatus::INTERNAL_ERROR)?;
            Ok(Target::Existing {
                path: found.path,
                st,
                plan: existing,
            })
        }
        Plan::Create => Ok(Target::New { path: found.path }),
    }
}
