//! The one-request-or-so commands: cat, rm, mkdir, rmdir, mv.

use std::io::Write;

use smbq_client::transfer::{self, TransferOptions};
use smbq_client::{Error, OpenOptions, ProtocolError, Tree};
use smbq_wire::NtStatus;
use smbq_wire::create::create_options;

use super::Command;
use super::args::ConnArgs;
use super::connect::Connector;
use super::each;
use super::exit::{CliError, Code};
use super::paths::{remote_join, safe_entry_name};
use super::url::{SmbUrl, parse_share_path, parse_url};
use super::watchdog;

#[derive(clap::Args)]
pub struct CatArgs {
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for CatArgs {
    const NAME: &'static str = "cat";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        cat(self, c).await
    }
}

#[derive(clap::Args)]
pub struct RmArgs {
    /// Remove directories and everything in them.
    #[arg(short, long)]
    pub recursive: bool,
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for RmArgs {
    const NAME: &'static str = "rm";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        rm(self, c).await
    }
}

#[derive(clap::Args)]
pub struct MkdirArgs {
    /// Create missing parents too; an existing directory is no error.
    #[arg(short, long)]
    pub parents: bool,
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for MkdirArgs {
    const NAME: &'static str = "mkdir";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        mkdir(self, c).await
    }
}

#[derive(clap::Args)]
pub struct RmdirArgs {
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for RmdirArgs {
    const NAME: &'static str = "rmdir";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        rmdir(self, c).await
    }
}

#[derive(clap::Args)]
pub struct MvArgs {
    /// Replace NEWPATH if it exists.
    #[arg(short, long)]
    pub force: bool,
    #[arg(value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub from: SmbUrl,
    /// Share-relative path (`dir/name`), or a URL on the same share.
    #[arg(value_name = "NEWPATH")]
    pub to: String,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for MvArgs {
    const NAME: &'static str = "mv";
    fn urls(&self) -> &[SmbUrl] {
        std::slice::from_ref(&self.from)
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        mv(self, c).await
    }
}

/// A failed write to stdout.
pub fn stdout_error(e: std::io::Error) -> CliError {
    CliError::other(format!("writing to stdout: {e}"))
}

fn not_root(u: &SmbUrl, what: &str) -> Result<(), CliError> {
    if u.path.is_empty() {
        Err(CliError::usage(format!("cannot {what} the share root")))
    } else {
        Ok(())
    }
}

/// Streams one remote file to stdout, `opts.depth` READs ahead.
pub async fn to_stdout(tree: &Tree, path: &str, opts: TransferOptions) -> Result<(), CliError> {
    let o = OpenOptions {
        options: create_options::NON_DIRECTORY_FILE,
        ..OpenOptions::read()
    };
    // The first chunk goes with the open (one compound, one round trip fewer).
    let (f, first) = tree.open_and_read(path, &o, opts.chunk).await?;
    first?;
    let mut out = std::io::stdout().lock();
    // To the end of the file as it is while reading, not as it was at open.
    let r = transfer::download(&f, 0, u64::MAX, opts, |b| {
        watchdog::touch();
        out.write_all(b).map_err(|source| Error::Local {
            what: "stdout",
            source,
        })
    })
    .await;
    let _ = f.close().await;
    let flushed = out.flush();
    let (r, local) = match r {
        Err(Error::Local { source, .. }) => (Ok(0), Some(source)),
        r => (r, None),
    };
    match local.or(flushed.err()) {
        // The reader went away (`| head`): not an error, as with cat(1) under SIGPIPE.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Some(e) => Err(stdout_error(e)),
        None => r.map(|_| ()).map_err(CliError::from),
    }
}

async fn cat(a: CatArgs, c: &mut Connector) -> Result<(), CliError> {
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("cat", &u.raw);
        let tree = c.tree(&u).await.map_err(at)?;
        to_stdout(&tree, &u.path, TransferOptions::default())
            .await
            .map_err(at)
    })
    .await
}

/// Deletes a directory tree, children first.
async fn rm_tree(tree: &Tree, path: &str) -> Result<(), Error> {
    for e in tree.list(path).await? {
        if !safe_entry_name(&e.name) {
            return Err(ProtocolError::BadName(e.name).into());
        }
        let child = remote_join(path, &e.name);
        if e.meta.is_dir() {
            Box::pin(rm_tree(tree, &child)).await?;
        } else {
            tree.remove(&child).await?;
        }
        watchdog::touch();
    }
    tree.rmdir(path).await
}

async fn rm(a: RmArgs, c: &mut Connector) -> Result<(), CliError> {
    let recursive = a.recursive;
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("rm", &u.raw);
        not_root(&u, "remove").map_err(at)?;
        let tree = c.tree(&u).await.map_err(at)?;
        let r = match tree.remove(&u.path).await {
            Err(Error::Status {
                status: NtStatus::FILE_IS_A_DIRECTORY,
                ..
            }) if recursive => rm_tree(&tree, &u.path).await,
            r => r,
        };
        r.map_err(|e| at(e.into()))
    })
    .await
}

async fn mkdir_parents(tree: &Tree, path: &str) -> Result<(), Error> {
    let mut prefix = String::new();
    for part in path.split('/') {
        prefix = remote_join(&prefix, part);
        match tree.mkdir(&prefix).await {
            Ok(()) => {}
            Err(Error::Status {
                status: NtStatus::OBJECT_NAME_COLLISION,
                op,
            }) => {
                if !tree.stat(&prefix).await?.is_dir() {
                    return Err(Error::Status {
                        op,
                        status: NtStatus::OBJECT_NAME_COLLISION,
                    });
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn mkdir(a: MkdirArgs, c: &mut Connector) -> Result<(), CliError> {
    let parents = a.parents;
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("mkdir", &u.raw);
        not_root(&u, "create").map_err(at)?;
        let tree = c.tree(&u).await.map_err(at)?;
        let r = if parents {
            mkdir_parents(&tree, &u.path).await
        } else {
            tree.mkdir(&u.path).await
        };
        r.map_err(|e| at(e.into()))
    })
    .await
}

async fn rmdir(a: RmdirArgs, c: &mut Connector) -> Result<(), CliError> {
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("rmdir", &u.raw);
        not_root(&u, "remove").map_err(at)?;
        let tree = c.tree(&u).await.map_err(at)?;
        tree.rmdir(&u.path).await.map_err(|e| at(e.into()))
    })
    .await
}

/// NEWPATH as a share-relative path: itself, or the path of a URL on the same share.
pub fn mv_target(from: &SmbUrl, to: &str) -> Result<String, String> {
    if to.len() >= 6
        && to
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case("smb://"))
    {
        let t = SmbUrl::parse(to)?;
        if !from.same_share(&t) {
            return Err(format!(
                "{to}: not on the same share as {} (mv renames within a share)",
                from.raw
            ));
        }
        if t.path.is_empty() {
            return Err(format!("{to}: the share root is not a name"));
        }
        return Ok(t.path);
    }
    parse_share_path(to)
}

async fn mv(a: MvArgs, c: &mut Connector) -> Result<(), CliError> {
    let u = a.from;
    let at = |e: CliError| e.at("mv", &u.raw);
    not_root(&u, "rename").map_err(at)?;
    let to = mv_target(&u, &a.to).map_err(|e| at(CliError::usage(e)))?;
    let tree = c.tree(&u).await.map_err(at)?;
    tree.rename(&u.path, &to, a.force).await.map_err(|e| {
        let e: CliError = e.into();
        let hint = e.code == Code::Server && e.message.contains("OBJECT_NAME_COLLISION");
        let e = at(e);
        if hint {
            e.note("use -f to replace it")
        } else {
            e
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mv_targets() {
        let from = SmbUrl::parse("smb://u@Host/Share/a/b.txt").unwrap();
        assert_eq!(mv_target(&from, "c/d.txt").unwrap(), "c/d.txt");
        assert_eq!(mv_target(&from, "/c/d.txt").unwrap(), "c/d.txt");
        assert_eq!(
            mv_target(&from, "smb://u@host/share/x/y%20z").unwrap(),
            "x/y z"
        );
        assert!(mv_target(&from, "smb://u@host/other/x").is_err());
        assert!(mv_target(&from, "smb://u@elsewhere/share/x").is_err());
        assert!(mv_target(&from, "smb://u@host/share").is_err());
        assert!(mv_target(&from, "..").is_err());
    }
}
