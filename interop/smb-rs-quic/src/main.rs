//! Interop peer for smbq over QUIC.
//!
//! `ls`/`put`/`get`/`rm` drive the crates.io `smb` client (0.12.1) over QUIC, as a third-party
//! client would. `raw` speaks quinn directly to send what no well-behaved client sends.
//!
//! Every network step runs under a timeout, and the process leaves through `std::process::exit`:
//! after a lost QUIC connection the smb crate's receive loop can spin forever, so nothing here
//! waits for its tasks to wind down.

#![forbid(unsafe_code)]

mod client;
mod insecure;
mod negotiate;
mod raw;
mod watchdog;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(about = "SMB-over-QUIC interop peer for smbq (smb crate 0.12.1 + raw quinn probes)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args, Clone)]
pub struct SmbArgs {
    /// Server UDP port (QUIC) or TCP port with --tcp.
    #[arg(long)]
    pub port: u16,
    /// DER certificate trusted as a root (the smb crate takes DER files only).
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// UNC server name: also the TLS server name, so the certificate needs it as a SAN.
    #[arg(long, default_value = "localhost")]
    pub server: String,
    #[arg(long, default_value = "share")]
    pub share: String,
    #[arg(long, env = "SMBQ_USER", default_value = "tester")]
    pub user: String,
    #[arg(long, env = "SMBQ_PASSWORD", hide_env_values = true)]
    pub password: String,
    /// Seconds allowed for each step (connect, open, one read/write, close).
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// SMB encryption: allowed | required | disabled.
    #[arg(long, default_value = "allowed")]
    pub encrypt: String,
    /// Start with the SMB1 multi-protocol NEGOTIATE and offer 2.0.2-3.1.1 (the crate's default).
    #[arg(long)]
    pub multi_protocol: bool,
    /// Use TCP instead of QUIC (for comparisons).
    #[arg(long)]
    pub tcp: bool,
    /// Requests in flight during put/get.
    #[arg(long, default_value_t = 4)]
    pub depth: usize,
    /// Turn on the crate's SMB 3.1.1 compression (LZ4 and Pattern_V1): messages over 1 KiB
    /// go out compressed and READs ask for compressed responses.
    #[arg(long)]
    pub compress: bool,
}

impl SmbArgs {
    pub fn step(&self) -> Duration {
        Duration::from_secs(self.timeout)
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// List a directory of the share (default: its root): NAME<TAB>SIZE<TAB>D|F per line.
    Ls {
        #[command(flatten)]
        smb: SmbArgs,
        #[arg(default_value = "")]
        dir: String,
    },
    /// Upload LOCAL to REMOTE (overwriting), then print its size, SHA-256 and rate.
    Put {
        #[command(flatten)]
        smb: SmbArgs,
        local: PathBuf,
        remote: String,
    },
    /// Download REMOTE to LOCAL, then print its size, SHA-256 and rate.
    Get {
        #[command(flatten)]
        smb: SmbArgs,
        remote: String,
        local: PathBuf,
    },
    /// Delete REMOTE.
    Rm {
        #[command(flatten)]
        smb: SmbArgs,
        remote: String,
    },
    /// Raw quinn probes for hostile-input and access-control tests.
    Raw(raw::RawArgs),
}

fn main() {
    // Off unless RUST_LOG asks: after a lost QUIC connection the crate logs the same error in a
    // tight loop (smb 0.12.1), which would flood the test output.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("off")).init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => fail(&format!("tokio runtime: {e}")),
    };
    let result = rt.block_on(async move {
        match cli.cmd {
            Cmd::Ls { smb, dir } => client::ls(&smb, &dir).await,
            Cmd::Put { smb, local, remote } => client::put(&smb, &local, &remote).await,
            Cmd::Get { smb, remote, local } => client::get(&smb, &remote, &local).await,
            Cmd::Rm { smb, remote } => client::rm(&smb, &remote).await,
            Cmd::Raw(args) => raw::run(&args).await,
        }
    });
    match result {
        Ok(()) => {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            std::process::exit(0)
        }
        Err(e) => fail(&e),
    }
}

fn fail(msg: &str) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    eprintln!("smb-rs-quic: error: {msg}");
    std::process::exit(1)
}
