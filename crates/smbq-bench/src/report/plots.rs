//! The figures, one per study figure; a scenario that did not run draws none.

use crate::report::Results;
use crate::report::svg::{Bar, bar_chart, line_chart};
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

/// (file name, SVG text) of every figure the results allow.
pub fn all(res: &Results) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if let Some(raw) = &res.raw {
        let cats = vec!["upload".to_string(), "download".to_string()];
        let series = ["tcp", "quic"]
            .into_iter()
            .map(|t| {
                let vals = cats
                    .iter()
                    .map(|d| {
                        raw.iter()
                            .find(|r| r.transport == t && r.direction == d)
                            .and_then(|r| bar(&r.mb_s))
                    })
                    .collect();
                (format!("raw {}", t.to_uppercase()), vals)
            })
            .collect::<Vec<_>>();
        out.push((
            "raw.svg".into(),
            bar_chart(
                "Raw transport, one connection (iPerf / SecNetPerf)",
                "MB/s",
                &cats,
                &series,
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
                format!("fio_{}.svg", job.to_lowercase()),
                bar_chart(title, if iops { "IOPS" } else { "MB/s" }, &cats, &series),
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
            "sweep.svg".into(),
            line_chart(
                "File-size sweep: throughput per copy (median)",
                "file size",
                "MB/s",
                true,
                &ticks,
                &line(&|r| r.per_copy_mb_s.median),
            ),
        ));
        out.push((
            "sweep_cpu.svg".into(),
            line_chart(
                "File-size sweep: client CPU",
                "file size",
                "client CPU %",
                true,
                &ticks,
                &line(&|r| r.client_cpu_pct),
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
            "setup.svg".into(),
            bar_chart(
                "Nothing to first byte of a 1 KB file (median, min-max)",
                "ms",
                &cats,
                &series,
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
                let series: Vec<(String, Vec<(f64, f64)>)> = ["smbq-tcp-enc", "smbq-quic", "scp"]
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
                    format!("loss_{group}_{file}.svg"),
                    line_chart(
                        &format!("Transfer time, {what}"),
                        x_label,
                        "seconds",
                        false,
                        &ticks,
                        &series,
                    ),
                ));
            }
        }
    }
    out
}
