//! `ls` and `stat`: one line per entry, and key: value blocks.

use std::io::Write;

use smbq_client::{Error, Metadata};
use smbq_wire::NtStatus;
use smbq_wire::filetime;
use smbq_wire::fscc::attributes::{
    FILE_ATTRIBUTE_ARCHIVE, FILE_ATTRIBUTE_COMPRESSED, FILE_ATTRIBUTE_DIRECTORY,
    FILE_ATTRIBUTE_ENCRYPTED, FILE_ATTRIBUTE_HIDDEN, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_OFFLINE,
    FILE_ATTRIBUTE_READONLY, FILE_ATTRIBUTE_REPARSE_POINT, FILE_ATTRIBUTE_SPARSE_FILE,
    FILE_ATTRIBUTE_SYSTEM, FILE_ATTRIBUTE_TEMPORARY,
};

use super::Command;
use super::args::ConnArgs;
use super::connect::Connector;
use super::exit::CliError;
use super::url::{SmbUrl, parse_url};
use super::{each, simple::stdout_error};

#[derive(clap::Args)]
pub struct LsArgs {
    /// Long listing: mode, links, owner and group (uid and gid), size, modified time, name,
    /// from the SMB3 POSIX extensions (a server without them: the short listing).
    #[arg(short, long)]
    pub long: bool,
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for LsArgs {
    const NAME: &'static str = "ls";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        ls(self, c).await
    }
}

#[derive(clap::Args)]
pub struct StatArgs {
    #[arg(required = true, value_name = "URL", value_parser = parse_url, help = super::url::URL_HELP)]
    pub urls: Vec<SmbUrl>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

impl Command for StatArgs {
    const NAME: &'static str = "stat";
    fn urls(&self) -> &[SmbUrl] {
        &self.urls
    }
    fn conn(&self) -> &ConnArgs {
        &self.conn
    }
    async fn run(self, c: &mut Connector) -> Result<(), CliError> {
        stat(self, c).await
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, with 7 fractional digits (FILETIME's 100 ns) when `frac`; `-` for
/// 0 (the server does not know).
pub fn iso8601(ft: u64, frac: bool) -> String {
    if ft == 0 {
        return "-".into();
    }
    let (secs, nanos) = filetime::to_unix(ft);
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(secs) else {
        return format!("filetime:{ft}");
    };
    let base = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    if frac {
        format!("{base}.{:07}Z", nanos / 100)
    } else {
        format!("{base}Z")
    }
}

/// `d` or `-`, then r h s a (read-only, hidden, system, archive) or `-`.
pub fn mode_string(attrs: u32) -> String {
    let flag = |bit: u32, c: char| if attrs & bit != 0 { c } else { '-' };
    [
        flag(FILE_ATTRIBUTE_DIRECTORY, 'd'),
        flag(FILE_ATTRIBUTE_READONLY, 'r'),
        flag(FILE_ATTRIBUTE_HIDDEN, 'h'),
        flag(FILE_ATTRIBUTE_SYSTEM, 's'),
        flag(FILE_ATTRIBUTE_ARCHIVE, 'a'),
    ]
    .into_iter()
    .collect()
}

/// Attribute names, `0x00000020 ARCHIVE`-style (MS-FSCC 2.6).
pub fn attribute_names(attrs: u32) -> String {
    const NAMES: [(u32, &str); 12] = [
        (FILE_ATTRIBUTE_READONLY, "READONLY"),
        (FILE_ATTRIBUTE_HIDDEN, "HIDDEN"),
        (FILE_ATTRIBUTE_SYSTEM, "SYSTEM"),
        (FILE_ATTRIBUTE_DIRECTORY, "DIRECTORY"),
        (FILE_ATTRIBUTE_ARCHIVE, "ARCHIVE"),
        (FILE_ATTRIBUTE_NORMAL, "NORMAL"),
        (FILE_ATTRIBUTE_TEMPORARY, "TEMPORARY"),
        (FILE_ATTRIBUTE_SPARSE_FILE, "SPARSE_FILE"),
        (FILE_ATTRIBUTE_REPARSE_POINT, "REPARSE_POINT"),
        (FILE_ATTRIBUTE_COMPRESSED, "COMPRESSED"),
        (FILE_ATTRIBUTE_OFFLINE, "OFFLINE"),
        (FILE_ATTRIBUTE_ENCRYPTED, "ENCRYPTED"),
    ];
    let mut s = format!("0x{attrs:08x}");
    for (bit, name) in NAMES {
        if attrs & bit != 0 {
            s.push(' ');
            s.push_str(name);
        }
    }
    s
}

/// One `ls` line: mode, size, modified time, name.
pub fn ls_line(name: &str, m: &Metadata) -> String {
    format!(
        "{} {:>14} {} {name}",
        mode_string(m.attributes),
        m.size,
        iso8601(m.modified, false)
    )
}

pub fn stat_block(url: &str, m: &Metadata) -> String {
    format!(
        "url: {url}\ntype: {}\nsize: {}\nallocation: {}\nattributes: {}\ncreated: {}\naccessed: {}\nmodified: {}\nchanged: {}\n",
        if m.is_dir() { "directory" } else { "file" },
        m.size,
        m.allocation,
        attribute_names(m.attributes),
        iso8601(m.created, true),
        iso8601(m.accessed, true),
        iso8601(m.modified, true),
        iso8601(m.changed, true),
    )
}

fn print(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_error)
}

async fn ls(a: LsArgs, c: &mut Connector) -> Result<(), CliError> {
    let headers = a.urls.len() > 1;
    let long = a.long;
    let mut first = true;
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("ls", &u.raw);
        let tree = c.tree(&u).await.map_err(at)?;
        let mut text = String::new();
        if headers {
            if !first {
                text.push('\n');
            }
            text.push_str(&format!("{}:\n", u.raw));
        }
        first = false;
        if long && tree.posix() {
            match tree.list_posix(&u.path).await {
                Ok(mut entries) => {
                    entries.sort_by(|x, y| x.name.cmp(&y.name));
                    for e in &entries {
                        text.push_str(&super::posix::long_line(e));
                        text.push('\n');
                    }
                    return print(&text).map_err(at);
                }
                // A file: its line below, from the short listing's stat.
                Err(Error::Status {
                    status: NtStatus::NOT_A_DIRECTORY,
                    ..
                }) => {}
                Err(e) => return Err(at(e.into())),
            }
        }
        // Listing first: one round trip for the common case; a file answers NOT_A_DIRECTORY.
        match tree.list(&u.path).await {
            Ok(mut entries) => {
                entries.sort_by(|x, y| x.name.cmp(&y.name));
                for e in &entries {
                    text.push_str(&ls_line(&e.name, &e.meta));
                    text.push('\n');
                }
            }
            Err(Error::Status {
                status: NtStatus::NOT_A_DIRECTORY,
                ..
            }) => {
                let m = tree.stat(&u.path).await.map_err(|e| at(e.into()))?;
                text.push_str(&ls_line(u.basename(), &m));
                text.push('\n');
            }
            Err(e) => return Err(at(e.into())),
        }
        print(&text).map_err(at)
    })
    .await
}

async fn stat(a: StatArgs, c: &mut Connector) -> Result<(), CliError> {
    let mut first = true;
    each(a.urls, async |u: SmbUrl| {
        let at = |e: CliError| e.at("stat", &u.raw);
        let tree = c.tree(&u).await.map_err(at)?;
        let m = tree.stat(&u.path).await.map_err(|e| at(e.into()))?;
        let sep = if first { "" } else { "\n" };
        first = false;
        print(&format!("{sep}{}", stat_block(&u.raw, &m))).map_err(at)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        // 2024-02-29T12:34:56.1234567Z
        let unix = 1_709_210_096u64;
        let ft = filetime::UNIX_EPOCH + unix * 10_000_000 + 1_234_567;
        assert_eq!(iso8601(ft, false), "2024-02-29T12:34:56Z");
        assert_eq!(iso8601(ft, true), "2024-02-29T12:34:56.1234567Z");
        assert_eq!(iso8601(0, true), "-");
        assert_eq!(iso8601(filetime::UNIX_EPOCH, false), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn modes_and_lines() {
        assert_eq!(mode_string(FILE_ATTRIBUTE_DIRECTORY), "d----");
        assert_eq!(
            mode_string(FILE_ATTRIBUTE_READONLY | FILE_ATTRIBUTE_HIDDEN | FILE_ATTRIBUTE_ARCHIVE),
            "-rh-a"
        );
        let m = Metadata {
            size: 1234,
            attributes: FILE_ATTRIBUTE_ARCHIVE,
            modified: filetime::UNIX_EPOCH + 86_400 * 10_000_000,
            ..Metadata::default()
        };
        assert_eq!(
            ls_line("a b.txt", &m),
            "----a           1234 1970-01-02T00:00:00Z a b.txt"
        );
    }

    #[test]
    fn attribute_list() {
        assert_eq!(
            attribute_names(FILE_ATTRIBUTE_DIRECTORY | FILE_ATTRIBUTE_HIDDEN),
            "0x00000012 HIDDEN DIRECTORY"
        );
        assert_eq!(attribute_names(0), "0x00000000");
    }

    #[test]
    fn stat_block_has_every_time() {
        let m = Metadata {
            size: 5,
            attributes: FILE_ATTRIBUTE_ARCHIVE,
            created: filetime::UNIX_EPOCH,
            ..Metadata::default()
        };
        let b = stat_block("smb://h/s/f", &m);
        for key in [
            "url: smb://h/s/f\n",
            "type: file\n",
            "size: 5\n",
            "created: 1970-01-01T00:00:00.0000000Z\n",
            "accessed: -\n",
            "modified: -\n",
            "changed: -\n",
        ] {
            assert!(b.contains(key), "{key:?} missing from {b}");
        }
    }
}
