//! The commands of the SMB3 POSIX extensions (docs/posix.md): `chmod`, `ln -s`, `readlink`,
//! and the long listing `ls -l` uses. They need a server that took the extensions.

use smbq_client::{PosixEntry, Tree};
use smbq_wire::posix::{PERMISSION_BITS, file_type};

use super::Command;
use super::args::ConnArgs;
use super::connect::Connector;
use super::each;
use super::exit::CliError;
use super::url::{SmbUrl, parse_url};

#[derive(clap::Args)]
pub struct ChmodArgs {
    /// Octal mode (rwx bits only), as chmod(1) takes it: 644, 0755.
    #[arg(value_name = "MODE", value_parser = parse_mode)]
    pub mode: u32,
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{s:?}: expected an octal mode from 0 to 777"))
}

impl Command for ChmodArgs {
    const NAME: &'static str = "chmod";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        let mode = self.mode;
        each(self.urls, async |u: SmbUrl| {
            let at = |e: CliError| e.at("chmod", &u.raw);
            let tree = posix_tree(c, &u).await.map_err(at)?;
            tree.chmod(&u.path, mode).await.map_err(|e| at(e.into()))
        })
        .await
    }
}

#[derive(clap::Args)]
pub struct ChownArgs {
    /// UID, UID:GID or :GID (numbers: the server's Unix ids).
    #[arg(value_name = "OWNER", value_parser = parse_owner)]
    pub owner: Owner,
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `chown`'s UID and GID, either left as is when `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

fn parse_owner(s: &str) -> Result<Owner, String> {
    let bad = || format!("{s:?}: expected UID, UID:GID or :GID");
    let num = |x: &str| x.parse::<u32>().map_err(|_| bad());
    let (u, g) = match s.split_once(':') {
        Some((u, g)) => (u, g),
        None => (s, ""),
    };
    let uid = if u.is_empty() { None } else { Some(num(u)?) };
    let gid = if g.is_empty() { None } else { Some(num(g)?) };
    if uid.is_none() && gid.is_none() {
        return Err(bad());
    }
    Ok(Owner { uid, gid })
}

impl Command for ChownArgs {
    const NAME: &'static str = "chown";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        let Owner { uid, gid } = self.owner;
        each(self.urls, async |u: SmbUrl| {
            let at = |e: CliError| e.at("chown", &u.raw);
            let tree = posix_tree(c, &u).await.map_err(at)?;
            tree.chown(&u.path, uid, gid)
                .await
                .map_err(|e| at(e.into()))
        })
        .await
    }
}

#[derive(clap::Args)]
pub struct LnArgs {
    /// Make a symbolic link (the only kind this command makes; hard links: not yet).
    #[arg(short, long, required = true)]
    pub symbolic: bool,
    /// What the link points to, stored as given and never followed by the server.
    #[arg(value_name = "TARGET")]
    pub target: String,
    #[arg(value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub link: SmbUrl,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for LnArgs {
    const NAME: &'static str = "ln";
    fn urls(&self) -> &[SmbUrl] {
        std::slice::from_ref(&self.link)
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        let u = self.link;
        let at = |e: CliError| e.at("ln", &u.raw);
        if u.path.is_empty() {
            return Err(at(CliError::usage("cannot make the share root a link")));
        }
        let tree = posix_tree(c, &u).await.map_err(at)?;
        tree.symlink(&self.target, &u.path)
            .await
            .map_err(|e| at(e.into()))
    }
}

#[derive(clap::Args)]
pub struct ReadlinkArgs {
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for ReadlinkArgs {
    const NAME: &'static str = "readlink";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        each(self.urls, async |u: SmbUrl| {
            let at = |e: CliError| e.at("readlink", &u.raw);
            let tree = posix_tree(c, &u).await.map_err(at)?;
            let target = tree.readlink(&u.path).await.map_err(|e| at(e.into()))?;
            println!("{target}");
            Ok(())
        })
        .await
    }
}

/// The tree of `u`, on a connection that negotiated the extensions.
async fn posix_tree(c: &mut Connector, u: &SmbUrl) -> Result<Tree, CliError> {
    let tree = c.tree(u).await?;
    if !tree.posix() {
        return Err(CliError::other(
            "the server does not offer the SMB3 POSIX extensions (smbq: posix_extensions)",
        ));
    }
    Ok(tree)
}

/// `ls -l`'s type and permission column, as ls(1) writes it.
pub fn mode_string(wire_mode: u32) -> String {
    let kind = match wire_mode >> 12 {
        file_type::DIRECTORY => 'd',
        file_type::SYMLINK => 'l',
        file_type::CHARDEV => 'c',
        file_type::BLOCKDEV => 'b',
        file_type::FIFO => 'p',
        file_type::SOCKET => 's',
        _ => '-',
    };
    let m = wire_mode & PERMISSION_BITS;
    let bit = |b: u32, c: char| if m & b != 0 { c } else { '-' };
    // setuid, setgid and sticky show in the x columns, as ls(1) shows them.
    let x = |b: u32, special: u32, on: char, off: char| match (m & b != 0, m & special != 0) {
        (true, true) => on,
        (false, true) => off,
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        kind,
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        x(0o100, 0o4000, 's', 'S'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        x(0o010, 0o2000, 's', 'S'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        x(0o001, 0o1000, 't', 'T'),
    ]
    .into_iter()
    .collect()
}

/// One `ls -l` line: mode, links, owner, group, size, modified time (UTC), name.
pub fn long_line(e: &PosixEntry) -> String {
    let (nlink, mode, owner, group) = match &e.posix {
        Some(p) => (
            p.nlink,
            p.mode,
            p.owner
                .as_unix_user()
                .map_or_else(|| p.owner.to_string(), |u| u.to_string()),
            p.group
                .as_unix_group()
                .map_or_else(|| p.group.to_string(), |g| g.to_string()),
        ),
        None => (0, 0, "?".into(), "?".into()),
    };
    format!(
        "{} {nlink:>3} {owner:>6} {group:>6} {:>14} {} {}",
        mode_string(mode),
        e.end_of_file,
        super::ls::iso8601(e.last_write_time, false),
        e.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_as_ls_writes_them() {
        assert_eq!(mode_string(0o644), "-rw-r--r--");
        assert_eq!(mode_string((1 << 12) | 0o755), "drwxr-xr-x");
        assert_eq!(mode_string((2 << 12) | 0o777), "lrwxrwxrwx");
        assert_eq!(mode_string((5 << 12) | 0o600), "prw-------");
        assert_eq!(mode_string((1 << 12) | 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(0o4754), "-rwsr-xr--");
        assert_eq!(mode_string(0o2640), "-rw-r-S---");
    }

    #[test]
    fn owners_parse_as_chown_takes_them() {
        let o = |uid, gid| Ok(Owner { uid, gid });
        assert_eq!(parse_owner("1000"), o(Some(1000), None));
        assert_eq!(parse_owner("1000:100"), o(Some(1000), Some(100)));
        assert_eq!(parse_owner(":100"), o(None, Some(100)));
        assert!(parse_owner(":").is_err());
        assert!(parse_owner("alice").is_err());
    }

    #[test]
    fn modes_parse_as_octal_rwx_only() {
        assert_eq!(parse_mode("644"), Ok(0o644));
        assert_eq!(parse_mode("0755"), Ok(0o755));
        assert!(parse_mode("4755").is_err());
        assert!(parse_mode("abc").is_err());
        assert!(parse_mode("9").is_err());
    }
}
