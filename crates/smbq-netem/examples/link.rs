//! Starts an emulated link, prints its namespaces and waits for Ctrl-C; for manual runs:
//!
//! ```text
//! cargo run -p smbq-netem --example link -- --delay-ms 10 --loss 0.02
//! ip netns exec <ns_b> iperf3 -s &  ip netns exec <ns_a> ping 10.77.0.2
//! ```

use std::time::Duration;

use clap::Parser;
use smbq_netem::{Link, LinkSettings};

/// Settings apply to both directions unless a --ba-* option overrides the B-to-A one.
#[derive(Parser, Debug)]
struct Args {
    /// One-way delay, milliseconds.
    #[arg(long, default_value_t = 0.0)]
    delay_ms: f64,
    /// Loss probability per packet, 0..1.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Rate limit, Mbit/s (none when absent).
    #[arg(long)]
    rate_mbit: Option<f64>,
    /// Router buffer in bytes (0: one bandwidth-delay product).
    #[arg(long, default_value_t = 0)]
    queue_bytes: usize,
    #[arg(long, default_value_t = smbq_netem::DEFAULT_MTU)]
    mtu: u16,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// B-to-A one-way delay, milliseconds.
    #[arg(long)]
    ba_delay_ms: Option<f64>,
    /// B-to-A loss probability.
    #[arg(long)]
    ba_loss: Option<f64>,
    /// B-to-A rate limit, Mbit/s.
    #[arg(long)]
    ba_rate_mbit: Option<f64>,
}

fn settings(delay_ms: f64, loss: f64, rate_mbit: Option<f64>, args: &Args) -> LinkSettings {
    LinkSettings {
        mtu: args.mtu,
        delay: Duration::from_secs_f64(delay_ms.max(0.0) / 1000.0),
        loss,
        rate_bps: rate_mbit.map(|m| (m * 1e6) as u64),
        queue_bytes: args.queue_bytes,
        seed: args.seed,
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let a_to_b = settings(args.delay_ms, args.loss, args.rate_mbit, &args);
    let b_to_a = settings(
        args.ba_delay_ms.unwrap_or(args.delay_ms),
        args.ba_loss.unwrap_or(args.loss),
        args.ba_rate_mbit.or(args.rate_mbit),
        &args,
    );
    let link = Link::start(a_to_b, b_to_a).await?;
    println!("ns_a {} addr {}", link.ns_a(), link.addr_a());
    println!("ns_b {} addr {}", link.ns_b(), link.addr_b());
    println!(
        "e.g.: ip netns exec {} ping {}   (Ctrl-C to stop)",
        link.ns_a(),
        link.addr_b()
    );
    // SIGTERM too, so `timeout` or `kill` also cleans up; SIGKILL leaves the namespaces to the
    // next start's sweep.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    println!("{:#?}", link.stats());
    link.stop().await;
    Ok(())
}
