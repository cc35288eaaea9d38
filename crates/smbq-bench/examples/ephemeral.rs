//! Where an ephemeral copy's time goes (issue 11 item 6): the sweep's ephemeral mode, phase by
//! phase, against a running `smbq serve`, over TCP and QUIC, on a current-thread runtime.
//!
//! ```text
//! ephemeral tcp|quic|quic-msquic ADDR PIN(sha256:HEX) USER PASSWORD COPIES
//! ```
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::time::Instant;

use bytes::Bytes;
use smbq_bench::target::{Endpoint, Target};
use smbq_transport::{QuicSettings, QuicStack};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (kind, addr, pin, user, pw, n) = (
        a[1].clone(),
        a[2].parse().unwrap(),
        a[3].clone(),
        a[4].clone(),
        a[5].clone(),
        a[6].parse::<usize>().unwrap(),
    );
    let hex = pin.trim_start_matches("sha256:");
    let pin: [u8; 32] = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect::<Vec<_>>()
        .try_into()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let ep = match kind.as_str() {
            "tcp" => Endpoint::tcp(Target::SmbqTcpEnc, addr, &user, &pw),
            q => {
                let stack = if q == "quic-msquic" {
                    QuicStack::MsQuic
                } else {
                    QuicStack::Quinn
                };
                let s = QuicSettings {
                    stack,
                    ..QuicSettings::default()
                };
                Endpoint::quic(addr, pin, s, &user, &pw).unwrap()
            }
        };
        let block = Bytes::from(vec![7u8; 1000]);
        // The transport handshake alone, to split "connect+negotiate".
        if kind != "tcp" {
            let stack = if kind == "quic-msquic" {
                QuicStack::MsQuic
            } else {
                QuicStack::Quinn
            };
            let cfg = smbq_transport::QuicClientConfig {
                settings: QuicSettings {
                    stack,
                    ..QuicSettings::default()
                },
                ..smbq_transport::QuicClientConfig::new(smbq_transport::ServerTrust::Pin(pin))
            };
            let qc = stack.client(cfg, "0.0.0.0:0".parse().unwrap()).unwrap();
            let t0 = Instant::now();
            for _ in 0..n {
                let c = qc.connect(addr, "127.0.0.1").await.unwrap();
                drop(c);
            }
            println!(
                "{kind:12} {:20} {:8.1} us",
                "handshake only",
                (Instant::now() - t0).as_secs_f64() / n as f64 * 1e6
            );
        }
        let mut t = [0f64; 5];
        for _ in 0..n {
            let t0 = Instant::now();
            let client = ep.connect().await.unwrap();
            let t1 = Instant::now();
            let session = client.login(&user, "", &pw).await.unwrap();
            let t2 = Instant::now();
            let tree = session.tree_connect("share").await.unwrap();
            let t3 = Instant::now();
            tree.write_small(
                "eph.bin",
                &smbq_client::OpenOptions::create_truncate(),
                &block,
            )
            .await
            .unwrap();
            let t4 = Instant::now();
            tree.disconnect().await.unwrap();
            session.logoff().await.unwrap();
            let t5 = Instant::now();
            for (i, (x, y)) in [(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5)]
                .into_iter()
                .enumerate()
            {
                t[i] += (y - x).as_secs_f64();
            }
        }
        let names = [
            "connect+negotiate",
            "login",
            "tree",
            "copy",
            "disconnect+logoff",
        ];
        let total: f64 = t.iter().sum();
        for (name, v) in names.iter().zip(t) {
            println!("{kind:12} {name:20} {:8.1} us", v / n as f64 * 1e6);
        }
        println!("{kind:12} {:20} {:8.1} us", "total", total / n as f64 * 1e6);
    });
}
