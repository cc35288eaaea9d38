//! results.md: a table per scenario and the ratio table with the goals' status.

use std::fmt::Write;

use crate::report::Results;
use crate::report::plots::size_label;
use crate::report::ratios::Ratio;
use crate::stats::Summary;

/// "median (min–max)" with the precision the magnitude deserves.
pub fn fmt_summary(s: &Summary) -> String {
    if s.n == 0 {
        return "–".into();
    }
    if s.n == 1 || s.min == s.max {
        return num(s.median);
    }
    format!("{} ({}–{})", num(s.median), num(s.min), num(s.max))
}

pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn render(res: &Results, ratios: &[Ratio], meta: &serde_json::Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# smbq benchmark results\n");
    let at = |p: &str| meta.pointer(p).cloned().unwrap_or(serde_json::Value::Null);
    let text = |p: &str, default: &str| at(p).as_str().unwrap_or(default).to_string();
    let _ = writeln!(
        o,
        "Mode: {}; link: {}; repeats: {}; machine: {} ({} CPUs), kernel {}; {}; {}; {}.\n",
        if at("/quick").as_bool().unwrap_or(false) {
            "quick"
        } else {
            "full"
        },
        text("/settings/link/kind", "?"),
        at("/settings/repeats"),
        text("/machine/cpu_model", "?"),
        at("/machine/cpus"),
        text("/machine/kernel", "?"),
        text("/versions/smbq", "smbq ?"),
        text("/versions/samba", "Samba: not run"),
        text("/versions/openssh", "OpenSSH: not run"),
    );
    let _ = writeln!(
        o,
        "QUIC: congestion controller {}, MTU-discovery bound {} bytes.\n",
        text("/settings/quic_congestion", "?"),
        at("/settings/quic_mtu_upper_bound"),
    );
    let _ = writeln!(
        o,
        "Numbers are medians; (min–max) over the repeats follow where there were several.\n"
    );

    let _ = writeln!(o, "## Ratios\n");
    let _ = writeln!(
        o,
        "| Ratio | Case | Value | Goal | Status |\n|---|---|---|---|---|"
    );
    for r in ratios {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            r.kind,
            r.case,
            r.value
                .map(|v| format!("{v:.2}x"))
                .unwrap_or_else(|| "–".into()),
            r.goal.map(|g| format!(">= {g}x")).unwrap_or_default(),
            r.status()
        );
    }
    o.push('\n');

    if let Some(raw) = &res.raw {
        let _ = writeln!(o, "## 1. Raw transport baselines (one connection)\n");
        // Cycles per byte: CPU s per GB times the clock in GHz (no cycle counters in a VM).
        let ghz = meta
            .pointer("/machine/cpu_mhz")
            .and_then(serde_json::Value::as_f64)
            .map(|m| m / 1000.0);
        let cycles = |s: &crate::stats::Summary| match ghz {
            Some(g) if s.n > 0 => format!("{:.2}", s.median * g),
            _ => "–".into(),
        };
        let _ = writeln!(
            o,
            "| Transport | Direction | MB/s | Client CPU s/GB | Server CPU s/GB | Client cycles/B | Server cycles/B |\n|---|---|---|---|---|---|---|"
        );
        for r in raw {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} |",
                r.transport,
                r.direction,
                fmt_summary(&r.mb_s),
                fmt_summary(&r.client_cpu_s_per_gb),
                fmt_summary(&r.server_cpu_s_per_gb),
                cycles(&r.client_cpu_s_per_gb),
                cycles(&r.server_cpu_s_per_gb)
            );
        }
        if let Some(g) = ghz {
            let _ = writeln!(
                o,
                "\nCycles per byte are CPU seconds per GB times the clock the kernel reports \
                 ({g:.2} GHz): the hardware's cycle counters are not available everywhere \
                 (not in this kind of VM)."
            );
        }
        if raw.iter().any(|r| r.transport == "quic-msquic") {
            o.push_str(
                "\nquic-msquic: both ends run in the bench process on MsQuic's shared worker \
                 threads, so their CPU is not split (no CPU figures).\n",
            );
        }
        o.push_str("\n![raw](raw.svg)\n\n");
    }
    if let Some(fio) = &res.fio {
        let _ = writeln!(
            o,
            "## 2. fio-shaped jobs (S1 sequential, S2 random, S3 many files)\n"
        );
        let _ = writeln!(
            o,
            "| Job | RW | Target | MB/s | IOPS | p50 µs | p99 µs | Client CPU % | Server CPU % | SMB enc | signed |\n|---|---|---|---|---|---|---|---|---|---|---|"
        );
        for r in fio {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.job,
                r.rw,
                r.target.name(),
                fmt_summary(&r.mb_s),
                fmt_summary(&r.iops),
                fmt_summary(&r.lat_p50_us),
                fmt_summary(&r.lat_p99_us),
                num(r.client_cpu_pct.median),
                num(r.server_cpu_pct.median),
                if r.smb_encrypted { "yes" } else { "no" },
                if r.smb_signed { "yes" } else { "no" },
            );
        }
        o.push_str("\n![S1](fio_s1.svg) ![S2](fio_s2.svg) ![S3](fio_s3.svg)\n\n");
    }
    if let Some(sweep) = &res.sweep {
        let _ = writeln!(o, "## 3. File-size sweep (copies onto the share)\n");
        let _ = writeln!(
            o,
            "| Size | Mode | Target | Copies | MB/s per copy | MB/s overall | Client CPU % | Server CPU % | Server RSS MiB (peak) |\n|---|---|---|---|---|---|---|---|---|"
        );
        for r in sweep {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} ({}) |",
                size_label(r.size),
                r.mode,
                r.target.name(),
                r.copies,
                fmt_summary(&r.per_copy_mb_s),
                num(r.mb_s),
                num(r.client_cpu_pct),
                num(r.server_cpu_pct),
                num(r.server_rss_kib as f64 / 1024.0),
                num(r.server_peak_rss_kib as f64 / 1024.0),
            );
        }
        o.push_str("\n![sweep](sweep.svg) ![sweep CPU](sweep_cpu.svg)\n\n");
    }
    if let Some(setup) = &res.setup {
        let _ = writeln!(
            o,
            "## 4. Connection setup (nothing to first byte of 1 KB)\n"
        );
        let _ = writeln!(
            o,
            "| RTT ms | Target | Setups | First byte ms (min–max) | p50 ms | p99 ms | With CLOSE p50 ms | Setups/s sequential | Setups/s with {} clients |\n|---|---|---|---|---|---|---|---|---|",
            setup.first().map(|r| r.concurrency).unwrap_or(0)
        );
        for r in setup {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.rtt_ms,
                r.target.name(),
                r.iterations,
                fmt_summary(&r.first_byte_ms),
                num(r.first_byte_p50_ms),
                num(r.first_byte_p99_ms),
                num(r.total_p50_ms),
                num(r.sequential_setups_per_s),
                num(r.parallel_setups_per_s),
            );
        }
        o.push_str("\n![setup](setup.svg)\n\n");
    }
    if let Some(loss) = &res.loss {
        let _ = writeln!(o, "## 5. Loss and delay (transfer time, seconds)\n");
        let _ = writeln!(
            o,
            "A time marked * includes transfers stopped at the time limit (counted at the \
             limit). Measured loss is what the emulator dropped over the condition.\n"
        );
        let _ = writeln!(
            o,
            "| Group | One-way delay ms | Loss % (measured) | TCP / QUIC congestion control | smbq TCP+enc | smbq QUIC, 1 stream | smbq QUIC, data streams | scp |\n|---|---|---|---|---|---|---|---|"
        );
        // One line per condition: the first row of each run of rows that share it.
        let mut conds: Vec<&crate::scenarios::loss::LossRow> = Vec::new();
        for r in loss {
            let same = |c: &&crate::scenarios::loss::LossRow| {
                c.group == r.group
                    && c.one_way_delay_ms == r.one_way_delay_ms
                    && c.loss_pct == r.loss_pct
                    && c.tcp_congestion == r.tcp_congestion
            };
            if !conds.iter().any(same) {
                conds.push(r);
            }
        }
        for c in conds {
            let (g, d, l, cc) = (c.group, c.one_way_delay_ms, c.loss_pct, &c.tcp_congestion);
            let (files, bytes, measured, qcc) =
                (c.files, c.bytes, c.measured_loss_pct, c.quic_congestion);
            let t = |m: &str| {
                loss.iter()
                    .find(|r| {
                        r.group == g
                            && r.one_way_delay_ms == d
                            && r.loss_pct == l
                            && &r.tcp_congestion == cc
                            && r.method == m
                    })
                    .map(|r| {
                        let mark = if r.timeouts > 0 { "*" } else { "" };
                        format!("{}{mark}", fmt_summary(&r.seconds))
                    })
                    .unwrap_or_else(|| "–".into())
            };
            let measured = measured.map(|m| format!(" ({m:.2})")).unwrap_or_default();
            let _ = writeln!(
                o,
                "| {g} ({files} files, {:.1} MB) | {d} | {l}{measured} | {cc} / {qcc} | {} | {} | {} | {} |",
                bytes as f64 / 1e6,
                t("smbq-tcp-enc"),
                t("smbq-quic"),
                t("smbq-quic-multi"),
                t("scp")
            );
        }
        // The figures plots.rs draws: a group's curve over delay (rows without loss) or over
        // loss (rows without delay); a goal-point-only run has none.
        let figures: Vec<String> = [
            ("files", "delay"),
            ("files", "loss"),
            ("big", "delay"),
            ("big", "loss"),
        ]
        .into_iter()
        .filter(|(g, axis)| {
            loss.iter().any(|r| {
                r.group == *g
                    && if *axis == "delay" {
                        r.loss_pct == 0.0
                    } else {
                        r.one_way_delay_ms == 0.0
                    }
            })
        })
        .map(|(g, axis)| format!("![{g} vs {axis}](loss_{g}_{axis}.svg)"))
        .collect();
        if figures.is_empty() {
            o.push('\n');
        } else {
            let _ = writeln!(o, "\n{}\n", figures.join(" "));
        }
    }
    if let Some(rows) = &res.interactive {
        interactive_table(&mut o, rows);
    }
    if let Some(crypto) = &res.crypto {
        crypto_table(&mut o, crypto, meta);
    }
    if let Some(rows) = &res.compression {
        compression_table(&mut o, rows);
    }
    if let Some(rows) = &res.ca {
        ca_table(&mut o, rows);
    }
    if let Some(rows) = &res.cluster {
        cluster_table(&mut o, rows);
    }
    if let Some(rows) = &res.get {
        get_table(&mut o, rows);
    }
    if let Some(errors) = meta
        .get("errors")
        .and_then(|e| e.as_array())
        .filter(|e| !e.is_empty())
    {
        let _ = writeln!(o, "## Errors and skipped parts\n");
        for e in errors {
            let _ = writeln!(o, "- {}", e.as_str().unwrap_or_default().replace('\n', " "));
        }
        o.push('\n');
    }
    o
}

fn crypto_table(
    o: &mut String,
    rows: &[crate::scenarios::crypto::CryptoRow],
    meta: &serde_json::Value,
) {
    use crate::scenarios::crypto::size_name;
    let _ = writeln!(
        o,
        "## 7. Crypto micro-benchmark (one thread, GB/s = 10^9 bytes per CPU second)\n"
    );
    let _ = writeln!(
        o,
        "smbq-crypto called as the server calls it (sign an outgoing message, verify a received \
         one, seal and open the payload under a transform header), in one thread, timed by \
         that thread's CPU time; median (min–max) over the repeats. OpenSSL is `openssl speed \
         -mr` on the same primitive and size in the same run ({}), also per CPU second, right \
         after smbq's cell (median over its runs: one of 1 s quick, three full). smbq / \
         OpenSSL below 1 means smbq is slower.\n",
        meta.pointer("/versions/openssl")
            .and_then(|v| v.as_str())
            .unwrap_or("OpenSSL version unknown")
    );
    let _ = writeln!(
        o,
        "| Algorithm | Operation | Size | smbq GB/s | OpenSSL GB/s | smbq / OpenSSL |\n|---|---|---|---|---|---|"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            r.algorithm,
            r.operation.name(),
            size_name(r.size),
            fmt_summary(&r.smbq_gb_s),
            r.openssl_gb_s
                .as_ref()
                .map(fmt_summary)
                .unwrap_or_else(|| "–".into()),
            r.ratio
                .map(|v| format!("{v:.2}x"))
                .unwrap_or_else(|| "–".into()),
        );
    }
    let _ = writeln!(
        o,
        "\nWhat OpenSSL measures: AES-GMAC is `openssl speed ghash`, GMAC's update alone \
         (no per-message nonce or tag, so it flatters OpenSSL most at 1 KiB); AES-CMAC is \
         `-cmac aes-128-cbc` and HMAC-SHA256 `-hmac sha256`, each init, update and final per \
         message; OpenSSL has no MAC verification, so verify rows compare with the sign \
         number. The ciphers are `-aead -evp aes-…-gcm|ccm` (`-decrypt` for open): per message \
         a nonce, 13 bytes of AAD, the data and the tag, as TLS does (smbq: 32 bytes of AAD). \
         The copy the engine makes of a received payload before opening it is not counted.\n"
    );
    let missing: Vec<String> = rows
        .iter()
        .filter(|r| r.openssl_gb_s.is_none())
        .map(|r| {
            format!(
                "- {} {} {}: {}",
                r.algorithm,
                r.operation.name(),
                size_name(r.size),
                r.openssl_note.as_deref().unwrap_or("not measured")
            )
        })
        .collect();
    if !missing.is_empty() {
        let _ = writeln!(o, "Without an OpenSSL number:\n\n{}\n", missing.join("\n"));
    }
}

/// Scenario `interactive`: latency of small operations beside a bulk read on one connection.
fn interactive_table(o: &mut String, rows: &[crate::scenarios::interactive::InteractiveRow]) {
    let _ = writeln!(
        o,
        "## 6. Small operations during a bulk read on the same connection (latency, ms)\n"
    );
    let _ = writeln!(
        o,
        "Stats, 4 KiB reads of open files and directory listings, one at a time, while the \
         connection reads a large file; pooled over the repeats. \"3 RTT\" is the goal's \
         budget for the p99 with data streams.\n"
    );
    let _ = writeln!(
        o,
        "| One-way delay ms | Loss % | Method | Ops | p50 | p99 | max | stat p99 | 4 KiB read p99 | listing p99 | p99 in RTTs | bulk read MB/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let mark = if r.timeouts > 0 { "*" } else { "" };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {}{mark} |",
            r.one_way_delay_ms,
            r.loss_pct,
            r.method,
            r.ops,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.stat_p99_ms,
            r.read_p99_ms,
            r.list_p99_ms,
            if r.rtt_ms() > 0.0 {
                r.p99_ms / r.rtt_ms()
            } else {
                0.0
            },
            fmt_summary(&r.bulk_mb_s)
        );
    }
    o.push_str("\n![interactive latency](interactive.svg)\n\n");
}

/// Scenario `get`: `smbq cat` of one large file over each transport.
fn get_table(o: &mut String, rows: &[crate::scenarios::get::GetRow]) {
    let _ = writeln!(o, "## One download with smbq's client (`smbq cat`)\n");
    let _ = writeln!(
        o,
        "`smbq cat` of {} MiB as its own process, output discarded, timed from start to exit; \
         over TCP with SMB3 encryption, over QUIC signed inside TLS 1.3, with one connection or \
         N bound as channels. CPU seconds per GB moved.\n",
        rows.first().map_or(0, |r| r.bytes >> 20)
    );
    let _ = writeln!(
        o,
        "| Transport | Stack | Channels | MB/s | Client CPU s/GB | Server CPU s/GB |\n|---|---|---|---|---|---|"
    );
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.2} | {:.2} |",
            r.transport,
            r.stack,
            r.channels,
            fmt_summary(&r.mb_s),
            r.client_cpu_s_per_gb,
            r.server_cpu_s_per_gb
        );
    }
    o.push_str("\n![get](get.svg)\n\n");
}

/// Scenario `ca`: the plain share against the continuously available one.
fn ca_table(o: &mut String, rows: &[crate::scenarios::ca::CaRow]) {
    let _ = writeln!(
        o,
        "## Continuous availability: a plain share against a CA share (encrypted TCP)\n"
    );
    let _ = writeln!(
        o,
        "One at a time: a CREATE (durable v2 with an RWH lease, persistent on the CA share, \
         its record committed to the store first) and its CLOSE (which removes the record), \
         and a 4 KiB WRITE (write-through on the CA share); then a sequential upload. \
         Row `disk`: the bench's own 4 KiB appending writes in the share's directory, each \
         followed by fdatasync, with no server (the flush a write-through answer waits for). \
         Latencies pooled over the repeats.\n"
    );
    latency_rows(o, "Share", rows);
    o.push_str("\n![continuous availability](ca.svg)\n\n");
}

/// Scenario `cluster`: smbq alone against a cluster node with its open state in etcd.
fn cluster_table(o: &mut String, rows: &[crate::scenarios::ca::CaRow]) {
    let _ = writeln!(
        o,
        "## Scale-out: smbq alone against a cluster node (encrypted TCP, 3 etcd members)\n"
    );
    let _ = writeln!(
        o,
        "One at a time: a CREATE and its CLOSE (two etcd transactions on a cluster node); the \
         same with a persistent handle on a continuously available share (create_close_ca: \
         its record committed to the server's own database alone, to etcd on a cluster node); \
         a 4 KiB WRITE (none); an exclusive LOCK, released after each (a read and a transaction), and \
         the same with the file also open through a client of another node \
         (lock_open_elsewhere; alone: another client of the same server), where the LOCK is \
         granted once that node has seen it; then a sequential upload and download (none). \
         Latencies pooled over the repeats.\n"
    );
    latency_rows(o, "Setup", rows);
    let p50 = |setup: &str| {
        rows.iter()
            .find(|r| r.share == setup && r.op == "create_close")
            .map(|r| r.p50_ms)
    };
    if let (Some(alone), Some(node)) = (p50("alone"), p50("cluster node")) {
        let _ = writeln!(
            o,
            "\netcd adds {:.2} ms to a CREATE+CLOSE at p50 (issue 39 expects 1 to 3 ms).",
            node - alone
        );
        let cas = rows
            .iter()
            .find(|r| r.share == crate::scenarios::cluster::ETCD && r.op == "cas")
            .map(|r| r.p50_ms);
        if let Some(cas) = cas.filter(|c| *c > 0.0) {
            let _ = writeln!(
                o,
                "etcd alone answers a compare-and-swap (through its JSON gateway) in {cas:.2} ms \
                 at p50 here: a CREATE+CLOSE on a cluster node costs {:.1} of them.",
                (node - alone) / cas
            );
        }
    }
    o.push_str("\n![cluster](cluster.svg)\n\n");
    let agg = |setup: &str, op: &str| {
        rows.iter()
            .find(|r| r.share == setup && r.op == op)
            .map(|r| r.mb_s.median)
    };
    let _ = writeln!(
        o,
        "Aggregate: {} clients at once over encrypted TCP, each uploading and then downloading \
         a file of its own, on one cluster node or spread over three (same etcd). The nodes \
         share this machine's cores with the clients.\n",
        crate::scenarios::cluster::CLIENTS
    );
    for op in ["aggregate_upload", "aggregate_download"] {
        if let (Some(one), Some(three)) = (agg("1 node", op), agg("3 nodes", op)) {
            let _ = writeln!(
                o,
                "- {op}: {one:.0} MB/s on 1 node, {three:.0} MB/s on 3 nodes ({:.2}x).",
                three / one
            );
        }
    }
    o.push_str("\n![cluster_aggregate](cluster_aggregate.svg)\n\n");
}

/// The rows of a latency table (`ca`, `cluster`): one per operation, and MB/s for the
/// transfers.
fn latency_rows(o: &mut String, first: &str, rows: &[crate::scenarios::ca::CaRow]) {
    let _ = writeln!(
        o,
        "| {first} | Operation | Ops | p50 ms | p90 ms | p99 ms | MB/s |\n|---|---|---|---|---|---|---|"
    );
    for r in rows {
        if r.op.ends_with("upload") || r.op.ends_with("download") {
            let _ = writeln!(
                o,
                "| {} | {} | {} | | | | {} |",
                r.share,
                r.op,
                r.ops,
                fmt_summary(&r.mb_s)
            );
        } else {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | |",
                r.share, r.op, r.ops, r.p50_ms, r.p90_ms, r.p99_ms
            );
        }
    }
}

/// Scenario `compression`: each data set with and without compression, per link, transport
/// and algorithm.
fn compression_table(o: &mut String, rows: &[crate::scenarios::compression::CompressionRow]) {
    use crate::scenarios::compression::link_label;
    let _ = writeln!(
        o,
        "## 8. SMB compression (download and upload of one file per data set)\n"
    );
    let _ = writeln!(
        o,
        "Each run is one session: a download (READ) of the data set's file, then an upload \
         (WRITE) of the same bytes, with compression off or with one algorithm offered \
         (Pattern_V1 with it, chained). \"Ratio\" is file bytes over the bytes that crossed \
         the wire for them, from the server's `smbq_compressed_*` metrics (1.00: nothing \
         compressed; compression gives up where it does not pay). CPU is seconds per GB of \
         file data, on the client (its runtime's threads) and on the server (the process).\n"
    );
    let mut about: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !about.iter().any(|(d, _)| *d == r.data) {
            about.push((r.data, &r.data_about));
        }
    }
    for (d, a) in about {
        let _ = writeln!(o, "- `{d}`: {a}");
    }
    let _ = writeln!(
        o,
        "\n| Data | Link | Transport | Algorithm | MB | Read MB/s | Write MB/s | Read ratio | Write ratio | Client CPU s/GB read / write | Server CPU s/GB read / write |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let ratio = |s: &Summary| {
        if s.n == 0 {
            "–".to_string()
        } else {
            format!("{:.2}", s.median)
        }
    };
    for r in rows {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {} / {} | {} / {} |",
            r.data,
            link_label(r.link),
            r.target.name(),
            r.algorithm,
            r.bytes as f64 / 1e6,
            fmt_summary(&r.read_mb_s),
            fmt_summary(&r.write_mb_s),
            ratio(&r.read_ratio),
            ratio(&r.write_ratio),
            num(r.read_client_cpu_s_per_gb.median),
            num(r.write_client_cpu_s_per_gb.median),
            num(r.read_server_cpu_s_per_gb.median),
            num(r.write_server_cpu_s_per_gb.median),
        );
    }
    let figures: Vec<String> = crate::report::plots::COMPRESSION_FIGURES
        .into_iter()
        .filter(|(_, link)| rows.iter().any(|r| r.link == *link))
        .map(|(name, link)| format!("![{}]({name}.svg)", link_label(link)))
        .collect();
    let _ = writeln!(o, "\n{}\n", figures.join(" "));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_show_noise_only_when_there_is_some() {
        assert_eq!(fmt_summary(&Summary::of(&[5.0])), "5.00");
        assert_eq!(
            fmt_summary(&Summary::of(&[100.0, 120.0, 110.0])),
            "110 (100–120)"
        );
        assert_eq!(fmt_summary(&Summary::default()), "–");
    }

    #[test]
    fn crypto_table_shows_references_and_why_one_is_missing() {
        use crate::scenarios::crypto::{CLOCK, CryptoRow, Op};
        let row = |op, openssl: Option<f64>, note: Option<&str>| CryptoRow {
            algorithm: "AES-128-CCM",
            kind: "encryption",
            operation: op,
            size: 65536,
            smbq_gb_s: Summary::of(&[1.0, 1.2, 1.1]),
            openssl_gb_s: openssl.map(|g| Summary::of(&[g])),
            ratio: openssl.map(|g| 1.1 / g),
            openssl_command: None,
            openssl_note: note.map(str::to_string),
            threads: 1,
            clock: CLOCK,
        };
        let res = Results {
            crypto: Some(vec![
                row(Op::Seal, Some(2.2), None),
                row(Op::Open, None, Some("openssl speed failed")),
            ]),
            ..Results::default()
        };
        let meta = serde_json::json!({"versions": {"openssl": "OpenSSL 3.0.19 27 Jan 2026"}});
        let md = render(&res, &[], &meta);
        assert!(md.contains("## 7. Crypto micro-benchmark"), "{md}");
        assert!(md.contains("(OpenSSL 3.0.19 27 Jan 2026)"), "{md}");
        assert!(
            md.contains("| AES-128-CCM | seal | 64 KiB | 1.10 (1.00–1.20) | 2.20 | 0.50x |"),
            "{md}"
        );
        assert!(
            md.contains("| AES-128-CCM | open | 64 KiB | 1.10 (1.00–1.20) | – | – |"),
            "{md}"
        );
        assert!(
            md.contains("- AES-128-CCM open 64 KiB: openssl speed failed"),
            "{md}"
        );
    }
}
