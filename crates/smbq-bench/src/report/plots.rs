//! The figures, one per study figure, each as SVG and PNG; a scenario that did not run draws
//! none.

use crate::report::Results;
use crate::report::figure::{Bar, Chart};
use crate::stats::Summary;
use crate::target::Target;

fn bar(s: &Summary) -> Option<Bar> {
    (s.n > 0).then_some(Bar {
        median: s.median,
        min: s.min,
        max: s.max,
    })
}

pub fn size_label(bytes: u64) -> String {
    match bytes {
        b if b >= 1_000_000_000 => format!("{} GB", b / 1_000_000_000),
        b if b >= 1_000_000 => format!("{} MB", b / 1_000_000),
        b if b >= 1_000 => format!("{} KB", b / 1_000),
        b => format!("{b} B"),
    }
}

/// (file name, contents) of every figure the results allow: `NAME.svg` and `NAME.png` each.
pub fn all(res: &Results) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut out = Vec::new();
    for (name, chart) in charts(res) {
        out.push((format!("{name}.svg"), chart.svg()?.into_bytes()));
        out.push((format!("{name}.png"), chart.png()?));
    }
    Ok(out)
}

/// Latencies of `ops` for each of `setups` (row key, legend), p50 with a bar to p90
/// (scenarios `ca` and `cluster`).
fn latency_bars(
    title: &str,
    rows: &[crate::scenarios::ca::CaRow],
    setups: &[(&str, &str)],
    ops: &[&str],
) -> Chart {
    let cats: Vec<String> = ops.iter().map(|o| format!("{o} p50")).collect();
    let series = setups
        .iter()
        .map(|(key, label)| {
            let vals = ops
                .iter()
                .map(|op| {
                    rows.iter()
                        .find(|r| r.share == *key && r.op == *op)
                        .map(|r| Bar {
                            median: r.p50_ms,
                            min: r.p50_ms,
                            max: r.p90_ms,
                        })
                })
                .collect();
            (label.to_string(), vals)
        })
        .collect();
    bars(title, "ms", cats, series)
}

fn bars(
    title: &str,
    y_label: &str,
    categories: Vec<String>,
    series: Vec<(String, Vec<Option<Bar>>)>,
) -> Chart {
    Chart::Bars {
        title: title.into(),
        y_label: y_label.into(),
        categories,
        series,
    }
}

fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    log_x: bool,
    x_ticks: Vec<(f64, String)>,
    series: Vec<(String, Vec<(f64, f64)>)>,
) -> Chart {
    Chart::Lines {
        title: title.into(),
        x_label: x_label.into(),
        y_label: y_label.into(),
        log_x,
        x_ticks,
        series,
    }
}

/// The compression scenario's figures: (base file name, link).
pub const COMPRESSION_FIGURES: [(&str, &str); 2] = [
    ("compression", "100mbit"),
    ("compression_loopback", "loopback"),
];

/// Scenario `compression`: download MB/s on one link, per data set and transport, a bar per
/// algorithm (and off).
fn compression_chart(
    rows: &[crate::scenarios::compression::CompressionRow],
    link: &str,
) -> Option<Chart> {
    use crate::scenarios::compression::{DATA_SETS, TARGETS, algorithm_order, link_label};
    let here: Vec<_> = rows.iter().filter(|r| r.link == link).collect();
    if here.is_empty() {
        return None;
    }
    let cells: Vec<(&str, Target)> = DATA_SETS
        .into_iter()
        .flat_map(|d| TARGETS.map(|t| (d, t)))
        .filter(|(d, t)| here.iter().any(|r| r.data == *d && r.target == *t))
        .collect();
    let categories = cells
        .iter()
        .map(|(d, t)| format!("{d}, {}", t.label()))
        .collect();
    let series = algorithm_order()
        .into_iter()
        .filter(|a| here.iter().any(|r| r.algorithm == *a))
        .map(|a| {
            let vals = cells
                .iter()
                .map(|(d, t)| {
                    here.iter()
                        .find(|r| r.data == *d && r.target == *t && r.algorithm == a)
                        .and_then(|r| bar(&r.read_mb_s))
                })
                .collect();
            (a.to_string(), vals)
        })
        .collect();
    Some(bars(
        &format!("Download with SMB compression, {}", link_label(link)),
        "MB/s",
        categories,
        series,
    ))
}

/// (base file name, chart) of every figure the results allow.
pub fn charts(res: &Results) -> Vec<(String, Chart)> {
    let mut out = Vec::new();
    if let Some(raw) = &res.raw {
        let cats = vec!["upload".to_string(), "download".to_string()];
        let series = crate::scenarios::raw::TRANSPORTS
            .into_iter()
            .filter(|t| raw.iter().any(|r| r.transport == *t))
            .map(|t| {
                let vals = cats
                    .iter()
                    .map(|d| {
                        raw.iter()
                            .find(|r| r.transport == t && r.direction == d)
                            .and_then(|r| bar(&r.mb_s))
                    })
                    .collect();
                let name = match t {
                    "quic-msquic" => "raw QUIC (MsQuic)".to_string(),
                    t => format!("raw {}", t.to_uppercase()),
                };
                (name, vals)
            })
            .collect::<Vec<_>>();
        out.push((
            "raw".into(),
            bars(
                "Raw transport, one connection (iPerf / SecNetPerf)",
                "MB/s",
                cats,
                series,
            ),
        ));
    }
    if let Some(fio) = &res.fio {
        for job in ["S1", "S2", "S3"] {
            let cats = vec!["read".to_string(), "write".to_string()];
            let iops = job != "S1";
            let series = Target::ALL
                .into_iter()
                .filter(|t| fio.iter().any(|r| r.target == *t))
                .map(|t| {
                    let vals = cats
                        .iter()
                        .map(|rw| {
                            fio.iter()
                                .find(|r| r.job == job && r.rw == rw && r.target == t)
                                .and_then(|r| bar(if iops { &r.iops } else { &r.mb_s }))
                        })
                        .collect();
                    (t.label().to_string(), vals)
                })
                .collect::<Vec<_>>();
            let title = match job {
                "S1" => "S1 sequential, 1 MiB blocks, QD 4",
                "S2" => "S2 random 4 KiB, one file, QD 16",
                _ => "S3 random 4 KiB, 16 files of 100 KiB, QD 4",
            };
            out.push((
                format!("fio_{}", job.to_lowercase()),
                bars(title, if iops { "IOPS" } else { "MB/s" }, cats, series),
            ));
        }
    }
    if let Some(sweep) = &res.sweep {
        let mut sizes: Vec<u64> = sweep.iter().map(|r| r.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let ticks: Vec<(f64, String)> = sizes.iter().map(|&s| (s as f64, size_label(s))).collect();
        let line = |metric: &dyn Fn(&crate::scenarios::sweep::SweepRow) -> f64| {
            let mut series = Vec::new();
            for t in [Target::SmbqTcpEnc, Target::SmbqQuic] {
                for mode in ["persistent", "ephemeral"] {
                    let pts = sweep
                        .iter()
                        .filter(|r| r.target == t && r.mode == mode)
                        .map(|r| (r.size as f64, metric(r)))
                        .collect();
                    let name = if t == Target::SmbqQuic {
                        "QUIC"
                    } else {
                        "TCP+enc"
                    };
                    series.push((format!("{name} {mode}"), pts));
                }
            }
            series
        };
        out.push((
            "sweep".into(),
            lines(
                "File-size sweep: throughput per copy (median)",
                "file size",
                "MB/s",
                true,
                ticks.clone(),
                line(&|r| r.per_copy_mb_s.median),
            ),
        ));
        out.push((
            "sweep_cpu".into(),
            lines(
                "File-size sweep: client CPU",
                "file size",
                "client CPU %",
                true,
                ticks,
                line(&|r| r.client_cpu_pct),
            ),
        ));
    }
    if let Some(setup) = &res.setup {
        let mut rtts: Vec<f64> = setup.iter().map(|r| r.rtt_ms).collect();
        rtts.dedup();
        let cats: Vec<String> = rtts.iter().map(|r| format!("{r} ms RTT")).collect();
        let series = [Target::SmbqTcpEnc, Target::SmbqQuic]
            .into_iter()
            .map(|t| {
                let vals = rtts
                    .iter()
                    .map(|rtt| {
                        setup
                            .iter()
                            .find(|r| r.target == t && r.rtt_ms == *rtt)
                            .and_then(|r| bar(&r.first_byte_ms))
                    })
                    .collect();
                (t.label().to_string(), vals)
            })
            .collect::<Vec<_>>();
        out.push((
            "setup".into(),
            bars(
                "Nothing to first byte of a 1 KB file (median, min-max)",
                "ms",
                cats,
                series,
            ),
        ));
    }
    if let Some(loss) = &res.loss {
        // The grid's own TCP congestion controller (the extra Cubic point is in the table).
        let grid_cc = loss
            .first()
            .map(|r| r.tcp_congestion.as_str())
            .unwrap_or("");
        let loss: Vec<_> = loss
            .iter()
            .filter(|r| r.tcp_congestion == grid_cc)
            .cloned()
            .collect();
        for group in ["files", "big"] {
            for (axis, file) in [("delay", "delay"), ("loss", "loss")] {
                let rows: Vec<_> = loss
                    .iter()
                    .filter(|r| r.group == group)
                    .filter(|r| {
                        if axis == "delay" {
                            r.loss_pct == 0.0
                        } else {
                            r.one_way_delay_ms == 0.0
                        }
                    })
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                let x_of = |r: &crate::scenarios::loss::LossRow| {
                    if axis == "delay" {
                        r.one_way_delay_ms
                    } else {
                        r.loss_pct
                    }
                };
                let mut xs: Vec<f64> = rows.iter().map(|r| x_of(r)).collect();
                xs.sort_by(f64::total_cmp);
                xs.dedup();
                let ticks: Vec<(f64, String)> = xs.iter().map(|x| (*x, format!("{x}"))).collect();
                let series: Vec<(String, Vec<(f64, f64)>)> = crate::scenarios::loss::METHODS
                    .into_iter()
                    .map(|m| {
                        (
                            m.to_string(),
                            rows.iter()
                                .filter(|r| r.method == m)
                                .map(|r| (x_of(r), r.seconds.median))
                                .collect(),
                        )
                    })
                    .collect();
                let what = if group == "files" {
                    "100 files in parallel"
                } else {
                    "one large file"
                };
                let x_label = if axis == "delay" {
                    "one-way delay (ms), no loss"
                } else {
                    "loss (%), no added delay"
                };
                out.push((
                    format!("loss_{group}_{file}"),
                    lines(
                        &format!("Transfer time, {what}"),
                        x_label,
                        "seconds",
                        false,
                        ticks,
                        series,
                    ),
                ));
            }
        }
    }
    if let Some(rows) = &res.get {
        let cats = rows
            .iter()
            .map(|r| match r.transport {
                "quic" => format!("QUIC {} x{}", r.stack, r.channels),
                _ => "TCP, encrypted".to_string(),
            })
            .collect();
        out.push((
            "get".to_string(),
            bars(
                "smbq cat of one large file (MB/s, bar from min to max)",
                "MB/s",
                cats,
                vec![(
                    "smbq".to_string(),
                    rows.iter().map(|r| bar(&r.mb_s)).collect(),
                )],
            ),
        ));
    }
    if let Some(rows) = &res.ca {
        out.push((
            "ca".to_string(),
            latency_bars(
                "Latency on a plain and a continuously available share (p50, bar to p90)",
                rows,
                &[
                    ("share", "plain share"),
                    ("ca", "CA share"),
                    (crate::scenarios::ca::DISK, "disk alone (fdatasync)"),
                ],
                &crate::scenarios::ca::OPS,
            ),
        ));
    }
    if let Some(rows) = &res.cluster {
        out.push((
            "cluster".to_string(),
            latency_bars(
                "Latency of smbq alone and of a cluster node with 3 etcd members (p50, bar to p90)",
                rows,
                &[("alone", "alone"), ("cluster node", "cluster node")],
                &crate::scenarios::cluster::OPS,
            ),
        ));
        let ops = ["aggregate_upload", "aggregate_download"];
        let series = crate::scenarios::cluster::SPREAD
            .iter()
            .map(|(setup, _)| {
                let vals = ops
                    .iter()
                    .map(|op| {
                        rows.iter()
                            .find(|r| r.share == *setup && r.op == *op)
                            .and_then(|r| bar(&r.mb_s))
                    })
                    .collect();
                (setup.to_string(), vals)
            })
            .collect();
        let title = format!(
            "{} clients at once on 1 and on 3 cluster nodes (median, bar min to max)",
            crate::scenarios::cluster::CLIENTS
        );
        let cats = ops.iter().map(|o| o.to_string()).collect();
        out.push((
            "cluster_aggregate".to_string(),
            bars(&title, "MB/s", cats, series),
        ));
    }
    if let Some(rows) = &res.interactive {
        let mut losses: Vec<f64> = rows.iter().map(|r| r.loss_pct).collect();
        losses.dedup();
        let cats: Vec<String> = losses.iter().map(|l| format!("{l} % loss")).collect();
        let series = crate::scenarios::interactive::METHODS
            .into_iter()
            .map(|m| {
                let vals = losses
                    .iter()
                    .map(|l| {
                        rows.iter()
                            .find(|r| r.loss_pct == *l && r.method == m)
                            .map(|r| Bar {
                                median: r.p99_ms,
                                min: r.p99_ms,
                                max: r.p99_ms,
                            })
                    })
                    .collect();
                (m.to_string(), vals)
            })
            .collect();
        out.push((
            "interactive".to_string(),
            bars(
                "p99 of small operations during a bulk read, 20 ms RTT",
                "ms",
                cats,
                series,
            ),
        ));
    }
    if let Some(rows) = &res.compression {
        for (name, link) in COMPRESSION_FIGURES {
            if let Some(c) = compression_chart(rows, link) {
                out.push((name.to_string(), c));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::LinkDesc;
    use crate::report::figure::{HEIGHT, PNG_SCALE, WIDTH};
    use crate::report::{Report, Results};
    use crate::scenarios::fio::FioRow;
    use crate::scenarios::loss::LossRow;
    use crate::scenarios::raw::RawRow;
    use crate::scenarios::setup::SetupRow;
    use crate::scenarios::sweep::SweepRow;

    const FIGURES: [&str; 11] = [
        "raw",
        "fio_s1",
        "fio_s2",
        "fio_s3",
        "sweep",
        "sweep_cpu",
        "setup",
        "loss_files_delay",
        "loss_files_loss",
        "loss_big_delay",
        "loss_big_loss",
    ];

    fn spread(median: f64) -> Summary {
        Summary::of(&[median * 0.9, median, median * 1.08])
    }

    /// Every scenario, with made-up but plausible numbers.
    fn results() -> Results {
        let raw = ["tcp", "quic"]
            .into_iter()
            .flat_map(|transport| {
                ["upload", "download"].map(|direction| RawRow {
                    transport,
                    direction,
                    mb_s: spread(if transport == "tcp" { 2900.0 } else { 1100.0 }),
                    client_cpu_s_per_gb: spread(0.4),
                    server_cpu_s_per_gb: spread(0.5),
                    seconds_per_run: 5.0,
                })
            })
            .collect();
        let mut fio = Vec::new();
        for job in ["S1", "S2", "S3"] {
            for rw in ["read", "write"] {
                for (i, target) in Target::ALL.into_iter().enumerate() {
                    fio.push(FioRow {
                        job,
                        rw,
                        target,
                        block_size: if job == "S1" { 1 << 20 } else { 4096 },
                        iodepth: 4,
                        file_size: 1 << 30,
                        files: 1,
                        mb_s: spread(400.0 + 150.0 * i as f64),
                        iops: spread(20_000.0 + 5_000.0 * i as f64),
                        lat_p50_us: spread(100.0),
                        lat_p99_us: spread(400.0),
                        client_cpu_pct: spread(50.0),
                        server_cpu_pct: spread(60.0),
                        smb_encrypted: true,
                        smb_signed: true,
                    });
                }
            }
        }
        let mut sweep = Vec::new();
        for size in [1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000] {
            for target in [Target::SmbqTcpEnc, Target::SmbqQuic] {
                for mode in ["persistent", "ephemeral"] {
                    let f = (size as f64).log10();
                    let quic = if target == Target::SmbqQuic { 0.7 } else { 1.0 };
                    let eph = if mode == "ephemeral" { 0.5 } else { 1.0 };
                    sweep.push(SweepRow {
                        size,
                        mode,
                        target,
                        copies: 10,
                        per_copy_mb_s: spread(f * f * 12.0 * quic * eph),
                        mb_s: f * 20.0,
                        client_cpu_pct: 20.0 + f * 8.0 * eph / quic,
                        server_cpu_pct: 30.0,
                        server_rss_kib: 10_000,
                        server_peak_rss_kib: 12_000,
                    });
                }
            }
        }
        let setup = [0.0, 10.0, 50.0]
            .into_iter()
            .flat_map(|rtt_ms| {
                [Target::SmbqTcpEnc, Target::SmbqQuic].map(|target| SetupRow {
                    rtt_ms,
                    link: LinkDesc::loopback(),
                    target,
                    iterations: 20,
                    first_byte_ms: spread(
                        1.0 + rtt_ms * if target == Target::SmbqQuic { 3.0 } else { 5.0 },
                    ),
                    first_byte_p50_ms: 1.0,
                    first_byte_p99_ms: 2.0,
                    total_p50_ms: 1.5,
                    sequential_setups_per_s: 100.0,
                    parallel_setups_per_s: 400.0,
                    concurrency: 8,
                })
            })
            .collect();
        let mut loss = Vec::new();
        for group in ["files", "big"] {
            let conditions = [(0.0, 0.0), (10.0, 0.0), (50.0, 0.0), (0.0, 1.0), (0.0, 5.0)];
            for (delay, loss_pct) in conditions {
                for (i, method) in crate::scenarios::loss::METHODS.into_iter().enumerate() {
                    loss.push(LossRow {
                        group,
                        one_way_delay_ms: delay,
                        loss_pct,
                        method,
                        timeouts: 0,
                        seconds: spread(2.0 + (delay * 0.05 + loss_pct) * (i + 1) as f64),
                        bytes: 1 << 30,
                        files: 100,
                        tcp_congestion: "bbr".into(),
                        quic_congestion: "cubic",
                        measured_loss_pct: None,
                    });
                }
            }
        }
        Results {
            raw: Some(raw),
            fio: Some(fio),
            sweep: Some(sweep),
            setup: Some(setup),
            loss: Some(loss),
            ..Results::default()
        }
    }

    /// All the text an SVG shows.
    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_string())
            .collect()
    }

    #[test]
    fn a_scenario_that_did_not_run_draws_nothing() {
        assert!(all(&Results::default()).unwrap().is_empty());
        let only_raw = Results {
            raw: results().raw,
            ..Results::default()
        };
        let names: Vec<String> = all(&only_raw).unwrap().into_iter().map(|f| f.0).collect();
        assert_eq!(names, ["raw.svg", "raw.png"]);
    }

    #[test]
    fn every_figure_is_written_as_svg_and_png_with_its_words() {
        let res = results();
        let dir = tempfile::tempdir().unwrap();
        let report = Report {
            results: &res,
            meta: serde_json::json!({}),
        };
        let written = report.write(dir.path()).unwrap();
        // Set SMBQ_BENCH_FIGURES=DIR to keep the figures and look at them.
        if let Some(keep) = std::env::var_os("SMBQ_BENCH_FIGURES") {
            std::fs::create_dir_all(&keep).unwrap();
            for name in &written {
                std::fs::copy(
                    dir.path().join(name),
                    std::path::Path::new(&keep).join(name),
                )
                .unwrap();
            }
        }
        let charts = charts(&res);
        let names: Vec<&str> = charts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, FIGURES);
        for (name, chart) in &charts {
            assert!(written.contains(&format!("{name}.svg")), "{name}");
            assert!(written.contains(&format!("{name}.png")), "{name}");

            let svg = std::fs::read_to_string(dir.path().join(format!("{name}.svg"))).unwrap();
            let doc = roxmltree::Document::parse(&svg).unwrap();
            let root = doc.root_element();
            assert_eq!(root.attribute("width"), Some(WIDTH.to_string().as_str()));
            assert_eq!(root.attribute("height"), Some(HEIGHT.to_string().as_str()));
            let shown = texts(&svg);
            let (title, labels, series, categories): (_, Vec<&str>, Vec<&str>, Vec<&str>) =
                match chart {
                    Chart::Bars {
                        title,
                        y_label,
                        categories,
                        series,
                    } => (
                        title,
                        vec![y_label.as_str()],
                        series.iter().map(|s| s.0.as_str()).collect(),
                        categories.iter().map(String::as_str).collect(),
                    ),
                    Chart::Lines {
                        title,
                        x_label,
                        y_label,
                        x_ticks,
                        series,
                        ..
                    } => (
                        title,
                        vec![x_label.as_str(), y_label.as_str()],
                        series.iter().map(|s| s.0.as_str()).collect(),
                        x_ticks.iter().map(|t| t.1.as_str()).collect(),
                    ),
                };
            for want in std::iter::once(title.as_str())
                .chain(labels)
                .chain(series)
                .chain(categories)
            {
                assert!(
                    shown.iter().any(|t| t == want),
                    "{name}: {want:?} in {shown:?}"
                );
            }

            let png = std::fs::read(dir.path().join(format!("{name}.png"))).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}");
            let mut reader = png::Decoder::new(std::io::Cursor::new(png))
                .read_info()
                .unwrap();
            let info = reader.info();
            assert_eq!(
                (info.width, info.height),
                (WIDTH * PNG_SCALE, HEIGHT * PNG_SCALE),
                "{name}"
            );
            let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
            reader.next_frame(&mut pixels).unwrap();
            // The first series' blue is drawn (bars, or a line and its dots).
            let blue = pixels
                .chunks_exact(3)
                .filter(|p| *p == [0x1f, 0x77, 0xb4])
                .count();
            assert!(blue > 500, "{name}: {blue} blue pixels");
        }
    }
}
