//! The QUIC tuning knobs end to end against the real binary: a server with a jumbo
//! MTU-discovery bound and quinn's drivers on their own thread (`[quic] mtu_upper_bound`,
//! `io_thread`) serves `smbq cat --quic-mtu` byte for byte; an impossible bound is refused.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

const PASSWORD: &str = "quic-tuning-password";

#[test]
fn jumbo_mtu_and_io_thread_serve_a_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let share = dir.path().join("share");
    std::fs::create_dir_all(&share).unwrap();
    let data: Vec<u8> = (0..24u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(share.join("big.bin"), &data).unwrap();
    let cfg = dir.path().join("smbq.toml");
    std::fs::write(&cfg, "[quic]\nmtu_upper_bound = 6500\nio_thread = true\n").unwrap();
    let (tcp, quic) = (common::free_tcp_port(), common::free_udp_port());
    let (tcp_s, quic_s, state) = (tcp.to_string(), quic.to_string(), dir.path().join("st"));
    let args: Vec<&std::ffi::OsStr> = vec![
        share.as_os_str(),
        "--config".as_ref(),
        cfg.as_os_str(),
        "--listen".as_ref(),
        "127.0.0.1".as_ref(),
        "--quic-port".as_ref(),
        quic_s.as_ref(),
        "--tcp-port".as_ref(),
        tcp_s.as_ref(),
        "--state-dir".as_ref(),
        state.as_os_str(),
    ];
    let (mut child, out, err) = common::spawn_serve(&args, |c| {
        c.env("SMBQ_USER", "tester")
            .env("SMBQ_PASSWORD", PASSWORD)
            .env("RUST_LOG", "info");
    });
    let ready = out
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_default();
    assert!(ready.starts_with("smbq: listening"), "not started: {ready}");

    let url = format!("smb://tester@127.0.0.1:{quic}/share/big.bin");
    let cat = |mtu: &str| {
        Command::new(common::BIN)
            .args([
                "cat",
                "--transport",
                "quic",
                "--insecure",
                "--quic-mtu",
                mtu,
            ])
            .arg(&url)
            .env("SMBQ_PASSWORD", PASSWORD)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .unwrap()
    };
    let got = cat("6500");
    assert!(
        got.status.success(),
        "cat failed: {}",
        String::from_utf8_lossy(&got.stderr)
    );
    assert!(
        got.stdout == data,
        "content differs ({} bytes)",
        got.stdout.len()
    );

    let refused = cat("100");
    assert_eq!(
        refused.status.code(),
        Some(2),
        "a bound below 1200 is a usage error"
    );

    child.kill().unwrap();
    let _ = child.wait();
    let log: Vec<String> = err.try_iter().collect();
    assert!(
        log.iter()
            .any(|l| l.contains("SMB over QUIC listening") && l.contains("mtu_upper_bound=6500")),
        "the listener did not report the bound: {log:?}"
    );
}
