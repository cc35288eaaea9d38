//! The client commands of the smbq binary, used the way scp and smbclient are:
//! `smbq ls|stat|cat|get|put|rm|mkdir|rmdir|mv|shares smb://[DOMAIN;]USER@HOST[:PORT]/SHARE/PATH`.
//! Data goes to stdout (cat, ls, stat, shares); progress, notices and the one-line error go
//! to stderr; the exit status says what kind of failure it was ([`exit::Code`]).

mod again;
mod args;
mod connect;
mod cp;
mod exit;
mod get;
mod ls;
mod password;
mod paths;
mod posix;
mod progress;
mod put;
mod race;
mod remember;
mod shares;
mod simple;
mod url;
mod watchdog;

use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

use clap::Subcommand;

pub use exit::EXIT_CODES_HELP;

use args::ConnArgs;
use connect::Connector;
use exit::{CliError, Code};

#[derive(Subcommand)]
pub enum ClientCmd {
    /// List a directory (type+attributes, size, modified time in UTC, name), or show one file; -l: mode, links, owner and group too (SMB3 POSIX extensions).
    Ls(ls::LsArgs),
    /// Show a file's size, attributes and all four times.
    Stat(ls::StatArgs),
    /// Write files to stdout.
    Cat(simple::CatArgs),
    /// Download URL to LOCAL (a directory: into it). Data lands in LOCAL.part until complete (a device or FIFO such as /dev/null is written directly).
    Get(get::GetArgs),
    /// Upload LOCAL to URL (a directory or a URL ending in /: into it), through NAME.part.
    Put(put::PutArgs),
    /// Delete files (-r: directory trees).
    Rm(simple::RmArgs),
    /// Create directories (-p: with parents, no error if present).
    Mkdir(simple::MkdirArgs),
    /// Remove empty directories.
    Rmdir(simple::RmdirArgs),
    /// Rename URL to NEWPATH (share-relative, or a URL on the same share).
    Mv(simple::MvArgs),
    /// Copy URL to NEWPATH inside the server (no data over the network): within a share, or to a URL on another share of the same server.
    Cp(cp::CpArgs),
    /// List the server's shares: name, type, comment (URL: smb://USER@HOST[:PORT]).
    Shares(shares::SharesArgs),
    /// Set the permission bits (octal) of files (SMB3 POSIX extensions).
    Chmod(posix::ChmodArgs),
    /// Change the owner and/or group (numeric UID[:GID]) of files (SMB3 POSIX extensions).
    Chown(posix::ChownArgs),
    /// Make a symbolic link at URL pointing to TARGET (-s; SMB3 POSIX extensions).
    Ln(posix::LnArgs),
    /// Print where symbolic links point (SMB3 POSIX extensions).
    Readlink(posix::ReadlinkArgs),
}

impl ClientCmd {
    /// The one place that lists the commands again: everything else a command needs comes
    /// through [`Command`].
    async fn run(self) -> Result<(), CliError> {
        match self {
            Self::Ls(a) => run_command(a).await,
            Self::Stat(a) => run_command(a).await,
            Self::Cat(a) => run_command(a).await,
            Self::Get(a) => run_command(a).await,
            Self::Put(a) => run_command(a).await,
            Self::Rm(a) => run_command(a).await,
            Self::Mkdir(a) => run_command(a).await,
            Self::Rmdir(a) => run_command(a).await,
            Self::Mv(a) => run_command(a).await,
            Self::Cp(a) => run_command(a).await,
            Self::Shares(a) => run_command(a).await,
            Self::Chmod(a) => run_command(a).await,
            Self::Chown(a) => run_command(a).await,
            Self::Ln(a) => run_command(a).await,
            Self::Readlink(a) => run_command(a).await,
        }
    }
}

/// A client command's parsed arguments, implemented next to each command's clap struct: what
/// [`run_command`] needs to connect, report and run it.
trait Command {
    /// The command's name, for messages not tied to one step.
    const NAME: &'static str;

    /// Every URL the command will connect to; the first names the command in messages not
    /// tied to one step.
    fn urls(&self) -> &[url::SmbUrl];

    /// How to reach and authenticate to the server.
    fn conn(&self) -> &ConnArgs;

    /// The command's work, on connections from `c`.
    async fn run(self, c: &mut Connector) -> Result<(), CliError>;
}

/// The partial file (`NAME.part`, local or remote) a transfer is writing, so an interrupt
/// can say where the data went.
static PARTIAL: Mutex<Option<String>> = Mutex::new(None);

pub(crate) fn set_partial(p: Option<String>) {
    if let Ok(mut g) = PARTIAL.lock() {
        *g = p;
    }
}

fn partial() -> Option<String> {
    PARTIAL.lock().ok().and_then(|g| g.clone())
}

/// Waits for the stall timer, or forever when there is none.
async fn stall(limit: Option<Duration>) -> CliError {
    match limit {
        Some(l) => watchdog::expired(l).await,
        None => std::future::pending().await,
    }
}

/// Connects for `cmd` (asking for passwords first) and runs it, until it ends, Ctrl-C or the
/// stall timer.
async fn run_command<C: Command>(cmd: C) -> Result<(), CliError> {
    let args = cmd.conn().clone();
    let name = C::NAME;
    let target = cmd
        .urls()
        .first()
        .map(|u| u.raw.clone())
        .unwrap_or_default();
    let mut connector = Connector::new(args.clone()).map_err(|e| e.at(name, &target))?;
    connector
        .ask_passwords(cmd.urls())
        .map_err(|e| e.at(name, &target))?;
    let result = {
        let work = cmd.run(&mut connector);
        tokio::select! {
            r = work => r,
            _ = tokio::signal::ctrl_c() => {
                let msg = match partial() {
                    Some(p) => format!("interrupted; partial data kept in {p} (resume with --continue)"),
                    None => "interrupted".into(),
                };
                return Err(CliError::new(Code::Interrupted, msg).at(name, &target));
            }
            e = stall(connect::stall_timeout(&args)) => {
                let e = match partial() {
                    Some(p) => e.note(&format!("partial data kept in {p} (resume with --continue)")),
                    None => e,
                };
                return Err(e.at(name, &target));
            }
        }
    };
    // A dead connection answers nothing; only say goodbye on a live one.
    if result
        .as_ref()
        .err()
        .is_none_or(|e| e.code != Code::Connection)
    {
        connector.close().await;
    }
    result
}

/// Runs one client command and turns its outcome into the exit status.
pub fn run(cmd: ClientCmd) -> ExitCode {
    // Logs only on request: stderr is for progress and the one error line.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init();
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("smbq: starting the runtime: {e}");
            return ExitCode::from(Code::Other.as_u8());
        }
    };
    let result = rt.block_on(cmd.run());
    // Tasks still waiting on a dead peer must not hold the exit up.
    rt.shutdown_timeout(Duration::from_millis(200));
    // An MsQuic registration dropped with the runtime closes on a thread of its own; exiting
    // under it panics in the msquic crate's exit handler (seen after a `put` over MsQuic in
    // CI). As `serve` does: wait for those closes, a moment at most (none: no wait).
    smbq_transport::QuicStack::MsQuic.wait_for_closes(Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.reported {
                eprintln!("{e}");
            }
            ExitCode::from(e.code.as_u8())
        }
    }
}

/// Runs `op` on each item, reporting each failure as it happens; the exit code is the first
/// failure's.
pub(crate) async fn each<T>(
    items: Vec<T>,
    mut op: impl AsyncFnMut(T) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let mut first: Option<Code> = None;
    let several = items.len() > 1;
    for item in items {
        if let Err(e) = op(item).await {
            // Alone, the error goes back up (and may gain a note there); among several, now.
            if !several {
                return Err(e);
            }
            if !e.reported {
                eprintln!("{e}");
            }
            first.get_or_insert(e.code);
        }
    }
    match first {
        Some(c) => Err(CliError::reported(c)),
        None => Ok(()),
    }
}
