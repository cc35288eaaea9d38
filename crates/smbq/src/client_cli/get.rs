//! `get URL LOCAL`: download a file (or with -r a tree). Data goes to `LOCAL.part` and is
//! renamed to LOCAL only when complete, so a file under its real name is always whole; after
//! a failure the `.part` stays, and `--continue` picks up at its length. Pieces arrive in
//! file order (transfer::download delivers them so), so a `.part` never has holes.

use std::fs;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use smbq_client::transfer::{self, TransferOptions};
use smbq_client::{Error, File, OpenOptions, Tree};

use super::Command;
use super::again::{Again, connection_lost};
use super::args::{ConnArgs, XferArgs};
use super::connect::Connector;
use super::exit::{CliError, Code};
use super::paths::{local_part, local_target, remote_join, safe_entry_name};
use super::progress::{self, Progress};
use super::set_partial;
use super::url::{SmbUrl, parse_url};
use super::watchdog;

#[derive(clap::Args)]
pub struct GetArgs {
    #[arg(value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub url: SmbUrl,
    /// Destination file, a directory to download into (default: the current directory), or
    /// `-` for stdout.
    #[arg(value_name = "LOCAL", default_value = ".")]
    pub local: PathBuf,
    #[command(flatten)]
    pub xfer: XferArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for GetArgs {
    const NAME: &'static str = "get";
    fn urls(&self) -> &[SmbUrl] {
        std::slice::from_ref(&self.url)
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        run(self, c).await
    }
}

fn local_err(path: &Path, e: std::io::Error) -> CliError {
    CliError::other(format!("{}: {e}", path.display()))
}

/// What `--continue` finds locally for a file of `remote_size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum Resume {
    /// The file is there, whole: nothing to do.
    Complete,
    /// Append to the `.part` from this offset (0: start afresh).
    From(u64),
    /// The `.part` is longer than the remote file: it is not a prefix of it.
    TooLong(u64),
}

/// Decides from the lengths of LOCAL and LOCAL.part (None: absent).
pub fn resume_point(target_len: Option<u64>, part_len: Option<u64>, remote_size: u64) -> Resume {
    match (part_len, target_len) {
        (Some(p), _) if p > remote_size => Resume::TooLong(p),
        (Some(p), _) => Resume::From(p),
        (None, Some(t)) if t == remote_size => Resume::Complete,
        // A shorter LOCAL (an interrupted plain download) is taken as the partial file.
        (None, Some(t)) if t < remote_size => Resume::From(t),
        _ => Resume::From(0),
    }
}

fn len_of(p: &Path) -> Option<u64> {
    fs::metadata(p)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
}

/// The download's sink: each piece is written to `out` and counted in `progress`; a local
/// write error stops the transfer as `Error::Local`, for the caller to report with its path.
fn sink<'a>(
    out: &'a mut fs::File,
    progress: &'a Progress,
) -> impl FnMut(&bytes::Bytes) -> Result<(), Error> + 'a {
    move |b| {
        out.write_all(b).map_err(|source| Error::Local {
            what: "local write",
            source,
        })?;
        progress.add(b.len() as u64);
        Ok(())
    }
}

/// Writes straight into an existing device, FIFO or socket (`/dev/null`, a pipe to another
/// program): the `.part` renamed over it would replace the device node itself with a regular
/// file (seen with `get URL /dev/null`, which turned /dev/null into a file on the machine).
async fn get_into_special(
    f: &File,
    target: &Path,
    size: u64,
    opts: TransferOptions,
    progress: &Progress,
) -> Result<(), CliError> {
    let mut out = fs::OpenOptions::new()
        .write(true)
        .open(target)
        .map_err(|e| local_err(target, e))?;
    let r = transfer::download(f, 0, size, opts, sink(&mut out, progress)).await;
    let (r, local) = match r {
        Err(Error::Local { source, .. }) => (Ok(0), Some(source)),
        r => (r, None),
    };
    if let Some(e) = local.or(out.flush().err()) {
        return Err(local_err(target, e));
    }
    r.map_err(CliError::from)?;
    progress.file_done();
    Ok(())
}

/// Opens a remote file (or directory) for `get`. Without `--continue` the first chunk is read
/// in the same compound as the open (one round trip fewer; a small file arrives whole with
/// its open); a directory's failed READ is of no interest.
async fn open_for_get(
    tree: &smbq_client::Tree,
    path: &str,
    resume: bool,
    opts: TransferOptions,
) -> Result<File, Error> {
    if resume {
        return tree.open(path, &OpenOptions::read()).await;
    }
    let (f, _) = tree
        .open_and_read(path, &OpenOptions::read(), opts.chunk)
        .await?;
    Ok(f)
}

/// Downloads the open remote `f` (at `remote`) to `target` through `target.part`. When the
/// connection breaks, `again` connects anew and the download goes on where it was.
async fn get_file(
    f: &File,
    remote: &str,
    target: &Path,
    resume: bool,
    opts: TransferOptions,
    progress: &Progress,
    again: &Again<'_, '_>,
) -> Result<(), CliError> {
    let size = f.metadata().size;
    if fs::metadata(target).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return get_into_special(f, target, size, opts, progress).await;
    }
    let part = local_part(target);
    let mut offset = 0;
    if resume {
        match resume_from(target, &part, size, progress)? {
            Some(o) => offset = o,
            None => return Ok(()),
        }
    }
    let mut out = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(offset == 0)
        .open(&part)
        .map_err(|e| local_err(&part, e))?;
    out.seek(SeekFrom::Start(offset))
        .map_err(|e| local_err(&part, e))?;
    set_partial(Some(part.display().to_string()));
    progress.skip(offset);
    let mut local: Option<std::io::Error> = None;
    let mut file = f.clone();
    let mut reopened = false;
    let mut at = offset;
    let r = loop {
        let mut delivered = 0u64;
        let mut put = sink(&mut out, progress);
        let r = transfer::download(&file, at, size, opts, |b| {
            put(b)?;
            delivered += b.len() as u64;
            Ok(())
        })
        .await;
        drop(put);
        match r {
            Err(Error::Local { source, .. }) => {
                local = Some(source);
                break Ok(at);
            }
            Err(e) if connection_lost(&e) => {
                at += delivered;
                Again::report_lost(at, &e);
                match again.reopen_for_read(remote).await {
                    Ok(f2) => {
                        file = f2;
                        reopened = true;
                    }
                    Err(e2) => break Err(e2),
                }
            }
            other => break other.map_err(CliError::from),
        }
    };
    if reopened {
        let _ = file.close().await;
    }
    finish_part(out, local, r, &part, target, progress)
}

/// `--continue`: the offset the download goes on from (a partial LOCAL becomes the `.part`),
/// or `None` when the file is already whole.
fn resume_from(
    target: &Path,
    part: &Path,
    size: u64,
    progress: &Progress,
) -> Result<Option<u64>, CliError> {
    match resume_point(len_of(target), len_of(part), size) {
        Resume::Complete => {
            progress.skip(size);
            progress.file_done();
            Ok(None)
        }
        Resume::TooLong(p) => Err(CliError::other(format!(
            "{} ({p} bytes) is longer than the remote file ({size} bytes); remove it or drop --continue",
            part.display()
        ))),
        Resume::From(o) => {
            if o > 0 && len_of(part).is_none() {
                fs::rename(target, part).map_err(|e| local_err(target, e))?;
            }
            Ok(Some(o))
        }
    }
}

/// The end of a download into `part`: flushed, then renamed over `target` when both the
/// local writes and the transfer `r` went well; kept for `--continue` otherwise.
fn finish_part(
    mut out: fs::File,
    local: Option<std::io::Error>,
    r: Result<u64, CliError>,
    part: &Path,
    target: &Path,
    progress: &Progress,
) -> Result<(), CliError> {
    let flushed = out.flush();
    drop(out);
    let kept = || {
        format!(
            "{} bytes kept in {} (resume with --continue)",
            len_of(part).unwrap_or(0),
            part.display()
        )
    };
    if let Some(e) = local.or(flushed.err()) {
        set_partial(None);
        return Err(local_err(part, e).note(&kept()));
    }
    if let Err(e) = r {
        set_partial(None);
        return Err(e.note(&kept()));
    }
    // Shorter than announced means the file shrank while we read: what we have is the file.
    fs::rename(part, target).map_err(|e| local_err(target, e))?;
    set_partial(None);
    progress.file_done();
    Ok(())
}

/// A download planned by walking the remote tree.
enum Item {
    Dir(PathBuf),
    File {
        remote: String,
        local: PathBuf,
        size: u64,
    },
}

/// Lists `remote` recursively into `items`, mirroring it under `local`.
async fn plan(tree: &Tree, remote: &str, local: &Path, items: &mut Vec<Item>) -> Result<(), Error> {
    items.push(Item::Dir(local.to_path_buf()));
    let mut entries = tree.list(remote).await?;
    watchdog::touch();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for e in entries {
        if !safe_entry_name(&e.name) {
            eprintln!(
                "smbq: warning: skipping {:?} in {remote}: not a usable file name",
                e.name
            );
            continue;
        }
        let r = remote_join(remote, &e.name);
        let l = local.join(&e.name);
        if e.meta.is_dir() {
            Box::pin(plan(tree, &r, &l, items)).await?;
        } else {
            items.push(Item::File {
                remote: r,
                local: l,
                size: e.meta.size,
            });
        }
    }
    Ok(())
}

/// What every file of one recursive `get` shares: where they come from, how they are read
/// and the progress display they report to.
struct Download<'a, 'c> {
    /// The share, and how to connect again when the connection breaks.
    again: &'a Again<'a, 'c>,
    /// The URL given, for naming remote paths in messages.
    url: &'a SmbUrl,
    /// `--continue`: resume from a `.part`, skip files already complete.
    resume: bool,
    opts: TransferOptions,
    progress: &'a Progress,
}

impl Download<'_, '_> {
    /// Creates the directories and downloads the files of a planned tree, in order; stops at
    /// the first failure.
    async fn get_tree(&self, items: &[Item]) -> Result<(), CliError> {
        for item in items {
            match item {
                Item::Dir(d) => fs::create_dir_all(d).map_err(|e| local_err(d, e))?,
                Item::File { remote, local, .. } => {
                    let shown = self.url.display_path(remote);
                    self.progress.file(remote);
                    let tree = self.again.tree();
                    let f = open_for_get(&tree, remote, self.resume, self.opts)
                        .await
                        .map_err(|e| CliError::from(e).at("get", &shown))?;
                    let r = get_file(
                        &f,
                        remote,
                        local,
                        self.resume,
                        self.opts,
                        self.progress,
                        self.again,
                    )
                    .await;
                    let _ = f.close().await;
                    r.map_err(|e| e.at("get", &shown))?;
                }
            }
        }
        Ok(())
    }
}

async fn run(a: GetArgs, c: &mut Connector) -> Result<(), CliError> {
    let u = &a.url;
    let at = |e: CliError| e.at("get", &u.raw);
    let opts = TransferOptions {
        chunk: a.xfer.chunk,
        depth: usize::from(a.xfer.depth),
    };
    let mode = progress::mode(c.args().quiet, a.xfer.progress);
    let tree = c.tree(u).await.map_err(at)?;
    if a.local.as_os_str() == "-" {
        return super::simple::to_stdout(&tree, &u.path, opts)
            .await
            .map_err(at);
    }
    let f = open_for_get(&tree, &u.path, a.xfer.resume, opts)
        .await
        .map_err(|e| at(e.into()))?;
    let conn = tokio::sync::Mutex::new(c);
    let again = Again::new(&conn, u, tree.clone());
    let target = local_target(&a.local, u.basename());
    if !f.metadata().is_dir() {
        let p = Progress::new("get", mode, f.metadata().size);
        p.file(u.basename());
        let r = get_file(&f, &u.path, &target, a.xfer.resume, opts, &p, &again).await;
        let _ = f.close().await;
        return match r {
            Ok(()) => {
                p.finish(false);
                Ok(())
            }
            Err(e) => {
                p.abandon();
                Err(at(e))
            }
        };
    }
    let _ = f.close().await;
    if !a.xfer.recursive {
        return Err(at(CliError::new(
            Code::Other,
            "is a directory (use -r to download it)",
        )));
    }
    let mut items = Vec::new();
    plan(&tree, &u.path, &target, &mut items)
        .await
        .map_err(|e| at(e.into()))?;
    let total = items
        .iter()
        .map(|i| match i {
            Item::File { size, .. } => *size,
            Item::Dir(_) => 0,
        })
        .sum();
    let p = Progress::new("get", mode, total);
    let download = Download {
        again: &again,
        url: u,
        resume: a.xfer.resume,
        opts,
        progress: &p,
    };
    match download.get_tree(&items).await {
        Ok(()) => {
            p.finish(true);
            Ok(())
        }
        Err(e) => {
            p.abandon();
            Err(at(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_points() {
        // Nothing local: from the start.
        assert_eq!(resume_point(None, None, 100), Resume::From(0));
        // A .part: from its length, whatever LOCAL is.
        assert_eq!(resume_point(None, Some(40), 100), Resume::From(40));
        assert_eq!(resume_point(Some(100), Some(40), 100), Resume::From(40));
        assert_eq!(resume_point(None, Some(100), 100), Resume::From(100));
        assert_eq!(resume_point(None, Some(101), 100), Resume::TooLong(101));
        // LOCAL alone: whole, partial, or something else (overwritten).
        assert_eq!(resume_point(Some(100), None, 100), Resume::Complete);
        assert_eq!(resume_point(Some(30), None, 100), Resume::From(30));
        assert_eq!(resume_point(Some(300), None, 100), Resume::From(0));
        assert_eq!(resume_point(Some(0), None, 0), Resume::Complete);
    }

    #[test]
    fn resume_appends_to_the_part_without_truncating() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("f");
        std::fs::write(&target, b"abc").unwrap();
        assert_eq!(
            resume_point(len_of(&target), len_of(&local_part(&target)), 10),
            Resume::From(3)
        );
        assert_eq!(len_of(&d.path().join("missing")), None);
        // A directory of that name is not a partial file.
        std::fs::create_dir(d.path().join("dir")).unwrap();
        assert_eq!(len_of(&d.path().join("dir")), None);
    }
}
