//! `smbq bench` before the CLI wires it, for development:
//!
//! ```text
//! cargo build --release -p smbq && cargo run -p smbq-bench --release --example bench -- --quick --out /tmp/b
//! ```
//!
//! The server binary is $SMBQ_BIN, else `smbq` next to this example's directory
//! (target/release/smbq for a release build).

use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: smbq_bench::BenchArgs,
}

fn main() -> std::process::ExitCode {
    let mut cli = Cli::parse();
    if cli.args.smbq_bin.is_none() && std::env::var_os("SMBQ_BIN").is_none() {
        // target/<profile>/examples/bench -> target/<profile>/smbq
        cli.args.smbq_bin = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent()?.parent().map(|d| d.join("smbq")));
    }
    match smbq_bench::run(cli.args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("smbq bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
