//! `put LOCAL URL`: upload a file (or with -r a tree) to `NAME.part` on the server, then
//! rename it over NAME (FileRenameInformation with ReplaceIfExists, MS-FSCC 2.4.42.2) once it
//! is complete, so a file under its real name is always whole.
//!
//! WRITEs complete out of order, so a failed upload can leave holes in the `.part` below its
//! size. The writes here never run more than one window (depth × chunk) past the first
//! unconfirmed byte, so everything below `size - window` is known to be written, and
//! `--continue` resumes from there.

use std::collections::BTreeSet;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use smbq_client::transfer::TransferOptions;
use smbq_client::{DurableHandle, Error, File, OpenOptions, ProtocolError, Tree};
use smbq_wire::NtStatus;

use super::Command;
use super::again::{Again, connection_lost};
use super::args::{ConnArgs, XferArgs};
use super::connect::Connector;
use super::exit::{CliError, Code};
use super::paths::{local_basename, remote_join, remote_part, smb_name};
use super::progress::{self, Progress};
use super::set_partial;
use super::url::{SmbUrl, parse_url};
use super::watchdog;

#[derive(clap::Args)]
pub struct PutArgs {
    /// The local file to upload (a directory with -r).
    #[arg(value_name = "LOCAL")]
    pub local: PathBuf,
    // The destination: a file, or a directory to upload into (an existing one, or any URL
    // ending in /), as the command's own help says.
    #[arg(value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub url: SmbUrl,
    #[command(flatten)]
    pub xfer: XferArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for PutArgs {
    const NAME: &'static str = "put";
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

/// Resuming backs off at least this far: the largest window of a run with the default
/// depth (8) and the largest chunk the client sends (8 MiB), in case the interrupted run used
/// a bigger window than this one.
const MIN_RESUME_BACKOFF: u64 = 64 << 20;

fn local_err(path: &Path, e: std::io::Error) -> CliError {
    CliError::other(format!("{}: {e}", path.display()))
}

fn not_found(e: &Error) -> bool {
    matches!(
        e.status(),
        Some(NtStatus::OBJECT_NAME_NOT_FOUND | NtStatus::OBJECT_PATH_NOT_FOUND)
    )
}

/// Where in the remote `.part` of `part_size` bytes an upload of `local_size` bytes resumes.
pub fn resume_offset(part_size: u64, local_size: u64, backoff: u64) -> u64 {
    part_size.min(local_size).saturating_sub(backoff)
}

/// Why a windowed upload stopped early: the error, the offset below which every byte is
/// confirmed written (where a reclaimed open resumes), and the offset up to which WRITEs
/// were sent (those past `confirmed` may have been done without their answers arriving).
struct Stopped {
    error: Error,
    confirmed: u64,
    sent: u64,
}

/// Writes what `source` yields from `offset` on, `depth` WRITEs in flight, none starting
/// more than `window` bytes past the first write not yet confirmed. Reports to `progress` as
/// the confirmed prefix grows, so a resumed upload counts no byte twice. Returns the offset
/// after the last byte written.
async fn upload_window(
    file: &File,
    offset: u64,
    opts: TransferOptions,
    mut source: impl FnMut(usize) -> Result<Bytes, Error>,
    mut progress: impl FnMut(u64),
) -> Result<u64, Stopped> {
    let chunk = opts.chunk.min(file.max_write()).max(1) as usize;
    let depth = opts.depth.max(1);
    let window = window_of(opts, file);
    let mut set = tokio::task::JoinSet::new();
    let mut unconfirmed: BTreeSet<u64> = BTreeSet::new();
    let mut at = offset;
    let mut low = offset;
    let mut eof = false;
    loop {
        while !eof
            && set.len() < depth
            && unconfirmed
                .first()
                .is_none_or(|&low| at + chunk as u64 <= low + window)
        {
            let data = source(chunk).map_err(|error| Stopped {
                error,
                confirmed: low,
                sent: at,
            })?;
            if data.is_empty() {
                eof = true;
                break;
            }
            let len = data.len() as u64;
            let f = file.clone();
            let pos = at;
            set.spawn(async move {
                let n = f.write_at(pos, data).await?;
                if u64::from(n) != len {
                    return Err(ProtocolError::ShortWrite {
                        written: n.into(),
                        asked: len,
                    }
                    .into());
                }
                Ok(pos)
            });
            unconfirmed.insert(pos);
            at += len;
        }
        let error = match set.join_next().await {
            None => return Ok(at),
            Some(Ok(Ok(pos))) => {
                unconfirmed.remove(&pos);
                let new_low = unconfirmed.first().copied().unwrap_or(at);
                if new_low > low {
                    progress(new_low - low);
                    low = new_low;
                }
                continue;
            }
            Some(Ok(Err(e))) => e,
            Some(Err(source)) => Error::Task {
                what: "write",
                source,
            },
        };
        return Err(Stopped {
            error,
            confirmed: low,
            sent: at,
        });
    }
}

fn window_of(opts: TransferOptions, file: &File) -> u64 {
    u64::from(opts.chunk.min(file.max_write()).max(1)) * opts.depth.max(1) as u64
}

/// One `upload_window` from `from`, read from `src`; a read error of `src` stops it as
/// `Error::Local`.
async fn send_window(
    f: &File,
    from: u64,
    opts: TransferOptions,
    src: &mut fs::File,
    progress: &Progress,
) -> Result<u64, Stopped> {
    let source = |n: usize| {
        read_chunk(src, n).map_err(|source| Error::Local {
            what: "local read",
            source,
        })
    };
    upload_window(f, from, opts, source, |n| progress.add(n)).await
}

/// The end of an upload through `part`: cut to `end` when it was resumed, closed, renamed
/// over `target`.
async fn finish_upload(
    f: File,
    tree: &Tree,
    part: &str,
    target: &str,
    resumed: bool,
    end: u64,
) -> Result<(), Error> {
    if resumed {
        // A longer .part (the local file shrank since) must not keep its old tail.
        f.set_len(end).await?;
    }
    f.close().await?;
    tree.rename(part, target, true).await
}

/// What every file of one `put` run shares: where the files go, how they are sent and the
/// progress display they report to.
struct Upload<'a, 'c> {
    /// The share, and how to connect again when the connection breaks.
    again: &'a Again<'a, 'c>,
    /// The URL given, for naming remote paths in messages.
    url: &'a SmbUrl,
    /// `--continue`: resume from a `.part`, skip files already complete.
    resume: bool,
    opts: TransferOptions,
    progress: &'a Progress,
}

/// Where an upload starts, as `--continue` finds the remote side.
enum Start {
    /// From the beginning, truncating any `.part`.
    Fresh,
    /// Into the existing `.part`, which holds this many bytes.
    Resume(u64),
    /// The file is there under its real name, whole: nothing to do.
    Complete,
}

impl Upload<'_, '_> {
    fn tree(&self) -> Tree {
        self.again.tree()
    }

    /// What `--continue` finds for an upload of `size` bytes to `target` through `part`.
    async fn start(&self, part: &str, target: &str, size: u64) -> Result<Start, Error> {
        if !self.resume {
            return Ok(Start::Fresh);
        }
        match self.tree().stat(part).await {
            Ok(m) if !m.is_dir() => Ok(Start::Resume(m.size)),
            Ok(_) => Ok(Start::Fresh),
            Err(e) if not_found(&e) => match self.tree().stat(target).await {
                Ok(m) if !m.is_dir() && m.size == size => Ok(Start::Complete),
                Ok(_) => Ok(Start::Fresh),
                Err(e) if not_found(&e) => Ok(Start::Fresh),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// Uploads `local` (`size` bytes) to `target` through `target.part`.
    // Long: resume point, upload window and the `.part` rename in the order they happen.
    async fn put_file(&self, local: &Path, size: u64, target: &str) -> Result<(), CliError> {
        let (tree, progress, opts) = (&self.tree(), self.progress, self.opts);
        let part = remote_part(target);
        let shown_part = self.url.display_path(&part);
        let resumed = match self.start(&part, target, size).await? {
            Start::Complete => {
                progress.skip(size);
                progress.file_done();
                return Ok(());
            }
            Start::Resume(part_size) => Some(part_size),
            Start::Fresh => None,
        };
        if resumed.is_none() && size <= u64::from(opts.chunk.min(tree.max_write())) {
            return put_small(tree, local, size, &part, target, progress).await;
        }
        let how = if resumed.is_some() {
            OpenOptions::create_keep()
        } else {
            OpenOptions::create_truncate()
        };
        // A durable open (when the server grants one) lets the upload go on after the
        // connection breaks: `reclaim` takes it back on a new connection.
        let (mut f, mut handle) = tree.open_durable(&part, &how).await?;
        let mut tree = tree.clone();
        let offset = resumed.map_or(0, |part_size| {
            resume_offset(part_size, size, window_of(opts, &f).max(MIN_RESUME_BACKOFF))
        });
        let mut src = fs::File::open(local).map_err(|e| local_err(local, e))?;
        set_partial(Some(shown_part.clone()));
        progress.skip(offset);
        let kept = format!("the upload so far is kept in {shown_part} (resume with --continue)");
        let mut from = offset;
        let end = loop {
            src.seek(SeekFrom::Start(from))
                .map_err(|e| local_err(local, e))?;
            match send_window(&f, from, opts, &mut src, progress).await {
                Ok(end) => break end,
                Err(Stopped {
                    error: Error::Local { source, .. },
                    ..
                }) => {
                    set_partial(None);
                    let _ = f.close().await;
                    return Err(local_err(local, source).note(&kept));
                }
                Err(stop) if connection_lost(&stop.error) && handle.is_some() => {
                    let Some(h) = handle.as_ref() else {
                        unreachable!("checked in the guard")
                    };
                    Again::report_lost(stop.confirmed, &stop.error);
                    match self.reclaim(h, stop.confirmed).await {
                        Ok((t, file, renewed)) => {
                            match renewed {
                                Some(new) => handle = new,
                                // The same open: WRITEs it may have done unanswered go
                                // again as replays.
                                None => file.replay_writes_below(stop.sent),
                            }
                            (tree, f) = (t, file);
                            from = stop.confirmed;
                        }
                        Err(e) => {
                            set_partial(None);
                            return Err(e.note(&kept));
                        }
                    }
                }
                Err(stop) => {
                    set_partial(None);
                    let _ = f.close().await;
                    return Err(CliError::from(stop.error).note(&kept));
                }
            }
        };
        let r = finish_upload(f, &tree, &part, target, resumed.is_some(), end).await;
        set_partial(None);
        r.map_err(|e| CliError::from(e).note(&kept))?;
        progress.file_done();
        watchdog::touch();
        Ok(())
    }

    /// After the connection broke mid-upload: connects again (naming the old session) and
    /// takes the durable open back, while the server may still keep it (its durable timeout).
    /// When the server no longer does (it timed out, or another client's open purged it, as
    /// MS-SMB2 3.3.4.6 has it for a break a disconnected open cannot hear), the `.part` is
    /// opened again: the bytes below `confirmed` were acknowledged, so they are on the server
    /// whatever became of the open. The new durable handle is returned when there is one.
    async fn reclaim(
        &self,
        h: &DurableHandle,
        confirmed: u64,
    ) -> Result<(Tree, File, Option<Option<DurableHandle>>), CliError> {
        let limit = Duration::from_millis(u64::from(h.timeout_ms));
        let give_up = std::time::Instant::now() + limit;
        let tree = self.again.reconnect(limit).await?;
        let mut r = tree.reclaim(h).await;
        // MS-SMB2 3.3.5.9.12: the open still has a connection, or (a cluster, reached on
        // another node) the node it was opened on is not yet known to be gone. Once it is,
        // the node this client reached takes the open over (docs/cluster.md).
        while matches!(&r, Err(e) if e.status() == Some(NtStatus::FILE_NOT_AVAILABLE))
            && std::time::Instant::now() < give_up
        {
            super::watchdog::touch();
            tokio::time::sleep(Duration::from_millis(250)).await;
            r = tree.reclaim(h).await;
        }
        match r {
            Ok(f) => Ok((tree, f, None)),
            Err(e) if e.status() == Some(NtStatus::OBJECT_NAME_NOT_FOUND) => {
                eprintln!(
                    "smbq: warning: the server no longer kept the open upload; opening it again to go on from {confirmed} bytes"
                );
                let (f, renewed) = tree
                    .open_durable(&h.path, &OpenOptions::create_keep())
                    .await?;
                Ok((tree, f, Some(renewed)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the directories and uploads the files of a planned tree, in order; stops at
    /// the first failure.
    async fn put_tree(&self, items: &[Item]) -> Result<(), CliError> {
        for item in items {
            match item {
                Item::Dir(d) => {
                    if !d.is_empty() {
                        ensure_dir(&self.tree(), d).await.map_err(|e| {
                            CliError::from(e).at("mkdir", &self.url.display_path(d))
                        })?;
                    }
                    watchdog::touch();
                }
                Item::File {
                    local,
                    remote,
                    size,
                } => {
                    self.progress.file(remote);
                    self.put_file(local, *size, remote)
                        .await
                        .map_err(|e| e.at("put", &self.url.display_path(remote)))?;
                }
            }
        }
        Ok(())
    }
}

/// Up to `n` bytes from `src`, fewer only at its end.
fn read_chunk(src: &mut impl Read, n: usize) -> std::io::Result<Bytes> {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        match src.read(buf.get_mut(filled..).unwrap_or_default()) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(Bytes::from(buf))
}

/// A file that fits one WRITE: CREATE + WRITE + CLOSE of the `.part` as one compound, then
/// the rename (itself CREATE + SET_INFO + CLOSE, compounded): two round trips in all.
async fn put_small(
    tree: &Tree,
    local: &Path,
    size: u64,
    part: &str,
    target: &str,
    progress: &Progress,
) -> Result<(), CliError> {
    let data = fs::read(local).map_err(|e| local_err(local, e))?;
    if data.len() as u64 != size {
        return Err(CliError::other(format!(
            "{} changed size while being sent ({size} then {} bytes)",
            local.display(),
            data.len()
        )));
    }
    tree.write_small(part, &OpenOptions::create_truncate(), &data)
        .await?;
    progress.add(size);
    tree.rename(part, target, true).await?;
    progress.file_done();
    watchdog::touch();
    Ok(())
}

/// Where an upload of something called `name` goes when the user said `u`: into the URL when
/// it is a directory (existing, the share root, or written with a trailing /), else to it.
async fn remote_target(tree: &Tree, u: &SmbUrl, name: &str) -> Result<String, Error> {
    if u.path.is_empty() || u.trailing_slash {
        return Ok(remote_join(&u.path, name));
    }
    match tree.stat(&u.path).await {
        Ok(m) if m.is_dir() => Ok(remote_join(&u.path, name)),
        Ok(_) => Ok(u.path.clone()),
        Err(e) if not_found(&e) => Ok(u.path.clone()),
        Err(e) => Err(e),
    }
}

/// An upload planned by walking the local tree.
enum Item {
    Dir(String),
    File {
        local: PathBuf,
        remote: String,
        size: u64,
    },
}

/// Walks `local` into `items`, mirrored under `remote`. Symbolic links to files are followed;
/// links to directories are skipped (they can loop).
fn plan(local: &Path, remote: &str, items: &mut Vec<Item>) -> Result<(), CliError> {
    items.push(Item::Dir(remote.to_string()));
    let mut entries: Vec<fs::DirEntry> = fs::read_dir(local)
        .map_err(|e| local_err(local, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| local_err(local, e))?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let Some(name) = smb_name(&e.file_name()).map(str::to_string) else {
            eprintln!(
                "smbq: warning: skipping {}: the name cannot be used over SMB",
                path.display()
            );
            continue;
        };
        let link = e.file_type().is_ok_and(|t| t.is_symlink());
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(err) => {
                eprintln!("smbq: warning: skipping {}: {err}", path.display());
                continue;
            }
        };
        let r = remote_join(remote, &name);
        if meta.is_dir() {
            if link {
                eprintln!(
                    "smbq: warning: skipping {}: a link to a directory",
                    path.display()
                );
                continue;
            }
            plan(&path, &r, items)?;
        } else if meta.is_file() {
            items.push(Item::File {
                local: path,
                remote: r,
                size: meta.len(),
            });
        } else {
            eprintln!(
                "smbq: warning: skipping {}: not a regular file",
                path.display()
            );
        }
    }
    Ok(())
}

/// mkdir that is content with an existing directory.
async fn ensure_dir(tree: &Tree, path: &str) -> Result<(), Error> {
    match tree.mkdir(path).await {
        Err(Error::Status {
            status: NtStatus::OBJECT_NAME_COLLISION,
            op,
        }) => {
            if tree.stat(path).await?.is_dir() {
                Ok(())
            } else {
                Err(Error::Status {
                    op,
                    status: NtStatus::OBJECT_NAME_COLLISION,
                })
            }
        }
        r => r,
    }
}

async fn run(a: PutArgs, c: &mut Connector) -> Result<(), CliError> {
    let u = &a.url;
    let at = |e: CliError| e.at("put", &a.local.display().to_string());
    let meta = fs::metadata(&a.local).map_err(|e| at(local_err(&a.local, e)))?;
    let name = local_basename(&a.local).ok_or_else(|| {
        at(CliError::usage(
            "cannot name the remote copy after this path (use a URL with the file name)",
        ))
    })?;
    let opts = TransferOptions {
        chunk: a.xfer.chunk,
        depth: usize::from(a.xfer.depth),
    };
    let mode = progress::mode(c.args().quiet, a.xfer.progress);
    let at_url = |e: CliError| e.at("put", &u.raw);
    if meta.is_dir() && !a.xfer.recursive {
        return Err(at(CliError::new(
            Code::Other,
            "is a directory (use -r to upload it)",
        )));
    }
    let tree = c.tree(u).await.map_err(at_url)?;
    let conn = tokio::sync::Mutex::new(c);
    let again = Again::new(&conn, u, tree.clone());
    let target = remote_target(&tree, u, &name)
        .await
        .map_err(|e| at_url(e.into()))?;
    if !meta.is_dir() {
        let p = Progress::new("put", mode, meta.len());
        p.file(&name);
        let up = Upload {
            again: &again,
            url: u,
            resume: a.xfer.resume,
            opts,
            progress: &p,
        };
        return match up.put_file(&a.local, meta.len(), &target).await {
            Ok(()) => {
                p.finish(false);
                Ok(())
            }
            Err(e) => {
                p.abandon();
                Err(e.at("put", &u.display_path(&target)))
            }
        };
    }
    let mut items = Vec::new();
    plan(&a.local, &target, &mut items).map_err(at)?;
    let total = items
        .iter()
        .map(|i| match i {
            Item::File { size, .. } => *size,
            Item::Dir(_) => 0,
        })
        .sum();
    let p = Progress::new("put", mode, total);
    let up = Upload {
        again: &again,
        url: u,
        resume: a.xfer.resume,
        opts,
        progress: &p,
    };
    match up.put_tree(&items).await {
        Ok(()) => {
            p.finish(true);
            Ok(())
        }
        Err(e) => {
            p.abandon();
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_offsets_back_off_by_the_window() {
        let mib = 1u64 << 20;
        assert_eq!(resume_offset(100 * mib, 200 * mib, 64 * mib), 36 * mib);
        assert_eq!(resume_offset(10 * mib, 200 * mib, 64 * mib), 0);
        // A .part longer than the local file (it shrank): resume within the local file.
        assert_eq!(resume_offset(300 * mib, 200 * mib, 64 * mib), 136 * mib);
    }

    #[test]
    fn plan_mirrors_and_skips_what_smb_cannot_name() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("top");
        fs::create_dir_all(root.join("sub/deeper")).unwrap();
        fs::write(root.join("a.txt"), b"12345").unwrap();
        fs::write(root.join("sub/deeper/b"), b"xy").unwrap();
        fs::write(root.join("back\\slash"), b"no").unwrap();
        std::os::unix::fs::symlink(&root, root.join("sub/loop")).unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("link.txt")).unwrap();
        let mut items = Vec::new();
        plan(&root, "dest", &mut items).unwrap();
        let got: Vec<String> = items
            .iter()
            .map(|i| match i {
                Item::Dir(r) => format!("D {r}"),
                Item::File { remote, size, .. } => format!("F {remote} {size}"),
            })
            .collect();
        assert_eq!(
            got,
            [
                "D dest",
                "F dest/a.txt 5",
                "F dest/link.txt 5",
                "D dest/sub",
                "D dest/sub/deeper",
                "F dest/sub/deeper/b 2",
            ]
        );
    }
}
