//! The smbq binary: `serve`, account management, and (later) client and benchmark commands.
#![forbid(unsafe_code)]

mod accept_loop;
mod accounts;
mod admin;
mod cert;
mod cert_cmd;
mod client_cli;
mod cluster;
mod config;
mod fd_limit;
mod file_stamp;
mod kdc_proxy;
mod kerberos;
mod keylog;
mod logging;
mod metrics;
mod quic_config;
mod quic_setup;
mod reload;
mod serve;
mod unix_users;

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// jemalloc instead of glibc malloc: after a load of 8 MiB READs glibc kept ~545 MiB resident
/// for good (freed large buffers stay in its per-thread arenas once the dynamic mmap threshold
/// has risen); jemalloc's background threads return dirty pages to the kernel after ~10 s
/// (issue 10, item 6).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "smbq",
    version,
    about = "SMB 3.1.1 file server for Linux, over TCP and QUIC",
    after_long_help = client_cli::EXIT_CODES_HELP
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve PATH as the share "share" (created if missing), plus any --share.
    #[command(after_help = serve::AFTER_HELP)]
    Serve(serve::ServeArgs),
    /// Show, export or create the server certificate used for SMB over QUIC.
    Cert {
        #[command(subcommand)]
        cmd: cert_cmd::CertCmd,
    },
    /// Manage the account database (NT hashes, mode 0600).
    User {
        #[command(subcommand)]
        cmd: UserCmd,
    },
    #[command(flatten)]
    Client(Box<client_cli::ClientCmd>),
    /// Benchmark suite: raw baselines, fio-shaped jobs vs Samba, file-size sweep, connection
    /// setup and loss/delay vs scp, crypto vs openssl, on loopback or through the link
    /// emulator. JSON, Markdown, SVG and PNG results in --out.
    Bench(smbq_bench::BenchArgs),
    /// What the running server holds: connections, sessions, tree connects, open files,
    /// locks, change notifications (through its admin socket).
    Status(admin::status_cmd::StatusArgs),
}

#[derive(clap::Args, Clone)]
struct DbArgs {
    /// Account database file (default: STATE_DIR/users).
    #[arg(long)]
    users: Option<PathBuf>,
    /// State directory (default: ./.smbq).
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

impl DbArgs {
    fn path(&self) -> PathBuf {
        self.users.clone().unwrap_or_else(|| {
            self.state_dir
                .clone()
                .unwrap_or_else(serve::default_state_dir)
                .join("users")
        })
    }
}

#[derive(Subcommand)]
enum UserCmd {
    /// Add a user or change its password. The password is read from the first line of stdin
    /// when stdin is not a terminal, else prompted for.
    Add {
        /// The account name, as clients give it (case-insensitive; no `:`, `\`, `/`, `@`).
        name: String,
        /// The Unix user the account acts as on shares with `unix_identity = "per-user"`
        /// (default: the user of the same name). Kept when a password is changed.
        #[arg(long, value_name = "NAME")]
        unix_user: Option<String>,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Remove a user.
    Del {
        /// The account name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
    /// List user names.
    List {
        #[command(flatten)]
        db: DbArgs,
    },
}

fn read_password(prompt: &str) -> Result<String, String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprint!("{prompt}");
    }
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("reading password: {e}"))?;
    let pw = line.trim_end_matches(['\n', '\r']).to_string();
    if pw.is_empty() {
        return Err("empty password".into());
    }
    Ok(pw)
}

fn user_cmd(cmd: UserCmd) -> Result<(), String> {
    match cmd {
        UserCmd::Add {
            name,
            unix_user,
            db,
        } => {
            let path = db.path();
            let mut file = accounts::AccountFile::load(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if let Some(u) = &unix_user
                && unix_users::resolve(u).is_none()
            {
                eprintln!("smbq: warning: no Unix user {u} on this machine (yet)");
            }
            let pw = read_password(&format!("Password for {name}: "))?;
            file.set_password(&name, &pw).map_err(|e| e.to_string())?;
            if unix_user.is_some() {
                file.set_unix_user(&name, unix_user.as_deref())
                    .map_err(|e| e.to_string())?;
            }
            file.save()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!(
                "smbq: user {name} saved in {}; a running server picks it up within a second",
                path.display()
            );
        }
        UserCmd::Del { name, db } => {
            let path = db.path();
            let mut file = accounts::AccountFile::load(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if !file.remove(&name) {
                return Err(format!("no user {name} in {}", path.display()));
            }
            file.save()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!(
                "smbq: user {name} removed from {}; a running server refuses its logons within \
                 a second (sessions already open stay)",
                path.display()
            );
        }
        UserCmd::List { db } => {
            let path = db.path();
            let file = accounts::AccountFile::load(&path)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            for n in file.names() {
                println!("{n}");
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Serve(args) => serve::run(args),
        Cmd::Cert { cmd } => cert_cmd::run(cmd),
        Cmd::User { cmd } => user_cmd(cmd),
        Cmd::Client(cmd) => return client_cli::run(*cmd),
        Cmd::Bench(args) => smbq_bench::run(args),
        Cmd::Status(args) => admin::status_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smbq: {e}");
            ExitCode::FAILURE
        }
    }
}
