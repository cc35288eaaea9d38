//! `smbq cp URL NEWPATH`: a copy made by the server (FSCTL_SRV_COPYCHUNK), so the data never
//! crosses the network; within a share or between shares of one server and session.

use smbq_client::{Error, File, OpenOptions, Tree};
use smbq_wire::NtStatus;
use smbq_wire::create::{CreateDisposition, create_options};
use smbq_wire::fscc::access;

use super::Command;
use super::args::ConnArgs;
use super::connect::Connector;
use super::exit::{CliError, Code};
use super::paths::remote_join;
use super::progress::{self, Progress};
use super::url::{SmbUrl, parse_share_path, parse_url};

#[derive(clap::Args)]
pub struct CpArgs {
    /// Replace NEWPATH if it exists.
    #[arg(short, long)]
    pub force: bool,
    /// Show a progress bar, or progress lines when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    #[arg(value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub from: SmbUrl,
    /// Share-relative path (`dir/name`; an existing directory: into it), or a URL on the same
    /// server (any share).
    #[arg(value_name = "NEWPATH")]
    pub to: String,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for CpArgs {
    const NAME: &'static str = "cp";
    fn urls(&self) -> &[SmbUrl] {
        std::slice::from_ref(&self.from)
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        cp(self, c).await
    }
}

/// The destination as a URL: NEWPATH on the source's share, or a URL on the same server.
pub fn cp_target(from: &SmbUrl, to: &str) -> Result<SmbUrl, String> {
    if to
        .get(..6)
        .is_some_and(|p| p.eq_ignore_ascii_case("smb://"))
    {
        let t = SmbUrl::parse(to)?;
        if !t.host.eq_ignore_ascii_case(&from.host) || t.port != from.port {
            return Err(format!(
                "{to}: not on the server of {} (cp copies within one server; use get and put)",
                from.raw
            ));
        }
        t.require_share()?;
        return Ok(t);
    }
    let mut t = from.clone();
    // "/" is the share root (the source's name goes inside it).
    t.path = if to.trim_matches(['/', '\\']).is_empty() {
        String::new()
    } else {
        parse_share_path(to)?
    };
    t.raw = from.display_path(&t.path);
    Ok(t)
}

async fn cp(a: CpArgs, c: &mut Connector) -> Result<(), CliError> {
    let u = a.from;
    let at = |e: CliError| e.at("cp", &u.raw);
    if u.path.is_empty() {
        return Err(at(CliError::usage("cannot copy the share root")));
    }
    let mut to = cp_target(&u, &a.to).map_err(|e| at(CliError::usage(e)))?;
    let src_tree = c.tree(&u).await.map_err(at)?;
    let dst_tree = c.tree(&to).await.map_err(at)?;
    let o = OpenOptions {
        options: create_options::NON_DIRECTORY_FILE,
        ..OpenOptions::read()
    };
    let src = src_tree.open(&u.path, &o).await.map_err(|e| at(e.into()))?;
    // An existing directory (or the share root) takes the source's name inside it.
    if to.path.is_empty() || dst_tree.stat(&to.path).await.is_ok_and(|m| m.is_dir()) {
        to.path = remote_join(&to.path, u.basename());
    }
    let r = copy_open(&src, &dst_tree, &to, a.force, c, a.progress).await;
    let _ = src.close().await;
    r
}

async fn copy_open(
    src: &File,
    dst_tree: &Tree,
    to: &SmbUrl,
    force: bool,
    c: &Connector,
    show: bool,
) -> Result<(), CliError> {
    let at = |e: CliError| e.at("cp", &to.raw);
    let meta = src.metadata().clone();
    let o = OpenOptions {
        // COPYCHUNK_WRITE needs no read access on the destination.
        access: access::FILE_WRITE_DATA | access::FILE_WRITE_ATTRIBUTES | access::SYNCHRONIZE,
        disposition: if force {
            CreateDisposition::OVERWRITE_IF
        } else {
            CreateDisposition::CREATE
        },
        ..OpenOptions::create_truncate()
    };
    let dst = dst_tree.open(&to.path, &o).await.map_err(|e| {
        let e: CliError = e.into();
        let hint = e.code == Code::Server && e.message.contains("OBJECT_NAME_COLLISION");
        let e = at(e);
        if hint {
            e.note("use -f to replace it")
        } else {
            e
        }
    })?;
    let p = Progress::new("cp", progress::mode(c.args().quiet, show), meta.size);
    p.file(&to.path);
    let mut last = 0;
    let r = smbq_client::server_copy(src, &dst, meta.size, |done| {
        p.add(done - last);
        last = done;
    })
    .await;
    let r = match r {
        // Like Explorer: the copy keeps the source's last-write time.
        Ok(_) => dst.set_modified(meta.modified).await,
        Err(e) => Err(e),
    };
    let closed = dst.close().await;
    match r.and(closed) {
        Ok(()) => {
            p.file_done();
            p.finish(false);
            Ok(())
        }
        Err(e) => {
            p.abandon();
            // A partial copy is not left behind under the new name.
            let _ = dst_tree.remove(&to.path).await;
            Err(at(not_supported_hint(e)))
        }
    }
}

fn not_supported_hint(e: Error) -> CliError {
    let unsupported = matches!(
        e.status(),
        Some(NtStatus::NOT_SUPPORTED | NtStatus::INVALID_DEVICE_REQUEST)
    );
    let e: CliError = e.into();
    if unsupported {
        e.note("the server does not copy on its own (FSCTL_SRV_COPYCHUNK); use get and put")
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cp_targets() {
        let from = SmbUrl::parse("smb://u@Host/Share/a/b.txt").unwrap();
        let t = cp_target(&from, "c/d.txt").unwrap();
        assert_eq!(
            (t.share.as_deref(), t.path.as_str()),
            (Some("Share"), "c/d.txt")
        );
        let t = cp_target(&from, "smb://u@host/other/x").unwrap();
        assert_eq!((t.share.as_deref(), t.path.as_str()), (Some("other"), "x"));
        assert!(cp_target(&from, "smb://u@elsewhere/share/x").is_err());
        assert!(cp_target(&from, "smb://u@host:4455/share/x").is_err());
        assert!(cp_target(&from, "..").is_err());
        assert_eq!(cp_target(&from, "/").unwrap().path, "");
    }
}
