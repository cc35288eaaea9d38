//! The ratios that matter, computed from medians, and where each of the project's goals
//! stands.

use crate::report::Results;
use crate::scenarios::fio::FioRow;
use crate::stats::ratio;
use crate::target::Target;

#[derive(Clone, Debug, serde::Serialize)]
pub struct Ratio {
    /// Which comparison ("QUIC / encrypted TCP", ...).
    pub kind: &'static str,
    /// Where it was measured ("S1 read", "files at 10 ms, 2 %", ...).
    pub case: String,
    pub value: Option<f64>,
    /// The goal's lower bound, when this ratio is one of the goals.
    pub goal: Option<f64>,
}

impl Ratio {
    pub fn status(&self) -> &'static str {
        match (self.value, self.goal) {
            (_, None) => "",
            (None, Some(_)) => "not measured",
            (Some(v), Some(g)) if v >= g => "met",
            (Some(_), Some(_)) => "not met",
        }
    }
}

fn fio_mb(rows: &[FioRow], job: &str, rw: &str, t: Target) -> Option<f64> {
    rows.iter()
        .find(|r| r.job == job && r.rw == rw && r.target == t)
        .map(|r| r.mb_s.median)
}

/// Server CPU seconds per GB moved, from the medians of CPU % and MB/s.
fn fio_cpu_per_gb(rows: &[FioRow], job: &str, rw: &str, t: Target) -> Option<f64> {
    rows.iter()
        .find(|r| r.job == job && r.rw == rw && r.target == t)
        .and_then(|r| {
            (r.mb_s.median > 0.0).then(|| r.server_cpu_pct.median / 100.0 / (r.mb_s.median / 1e3))
        })
}

/// One ratio per fio job and direction: target `a`'s MB/s over target `b`'s.
fn per_job(
    out: &mut Vec<Ratio>,
    fio: &[FioRow],
    kind: &'static str,
    (a, b): (Target, Target),
    goal: impl Fn(&str) -> Option<f64>,
) {
    for job in ["S1", "S2", "S3"] {
        for rw in ["read", "write"] {
            out.push(Ratio {
                kind,
                case: format!("{job} {rw}"),
                value: ratio(fio_mb(fio, job, rw, a), fio_mb(fio, job, rw, b)),
                goal: goal(job),
            });
        }
    }
}

/// One ratio per S1 direction, `value` given "read" or "write".
fn s1_rows(
    out: &mut Vec<Ratio>,
    kind: &'static str,
    goal: Option<f64>,
    value: impl Fn(&str) -> Option<f64>,
) {
    for rw in ["read", "write"] {
        out.push(Ratio {
            kind,
            case: format!("S1 {rw}"),
            value: value(rw),
            goal,
        });
    }
}

/// Scenario `interactive`: the p99 of small operations against the 3-RTT budget (issue 14:
/// met when the budget over the p99 is at least 1), and how the methods compare.
fn interactive(out: &mut Vec<Ratio>, rows: &[crate::scenarios::interactive::InteractiveRow]) {
    let p99 = |loss: f64, m: &str| {
        rows.iter()
            .find(|r| r.loss_pct == loss && r.method == m)
            .map(|r| r.p99_ms)
    };
    let mut losses: Vec<f64> = rows.iter().map(|r| r.loss_pct).collect();
    losses.dedup();
    for loss in losses {
        let rtt = rows
            .iter()
            .find(|r| r.loss_pct == loss)
            .map(crate::scenarios::interactive::InteractiveRow::rtt_ms);
        let case = format!("small ops under a bulk read, {loss} % loss");
        out.push(Ratio {
            kind: "3 RTT / p99 with data streams",
            case: case.clone(),
            value: ratio(rtt.map(|r| 3.0 * r), p99(loss, "smbq-quic-multi")),
            goal: Some(1.0),
        });
        out.push(Ratio {
            kind: "p99 on one QUIC stream / p99 with data streams",
            case: case.clone(),
            value: ratio(p99(loss, "smbq-quic"), p99(loss, "smbq-quic-multi")),
            goal: None,
        });
        out.push(Ratio {
            kind: "p99 over TCP / p99 with data streams",
            case,
            value: ratio(p99(loss, "smbq-tcp-enc"), p99(loss, "smbq-quic-multi")),
            goal: None,
        });
    }
}

/// Scenario `compression` (issue 36): compressed over uncompressed MB/s, per transport and
/// direction. On text at 100 Mbit/s with the best algorithm (goal 3x), on the VM-disk image
/// there (no goal), and on random data at loopback with the worst algorithm (goal 0.95x:
/// compression must give up when it does not pay).
fn compression(out: &mut Vec<Ratio>, rows: &[crate::scenarios::compression::CompressionRow]) {
    use crate::scenarios::compression::{OFF, TARGETS, link_label};
    let cases: [(&str, &str, bool, Option<f64>, &'static str); 3] = [
        (
            "text",
            "100mbit",
            true,
            Some(3.0),
            "compressed / uncompressed MB/s, best algorithm",
        ),
        (
            "vmdisk",
            "100mbit",
            true,
            None,
            "compressed / uncompressed MB/s, best algorithm",
        ),
        (
            "random",
            "loopback",
            false,
            Some(0.95),
            "compressed / uncompressed MB/s, worst algorithm",
        ),
    ];
    for (data, link, best, goal, kind) in cases {
        for t in TARGETS {
            for read in [true, false] {
                let of = |r: &crate::scenarios::compression::CompressionRow| {
                    if read {
                        r.read_mb_s.median
                    } else {
                        r.write_mb_s.median
                    }
                };
                let here = rows
                    .iter()
                    .filter(|r| r.data == data && r.link == link && r.target == t);
                let off = here.clone().find(|r| r.algorithm == OFF).map(of);
                let pick = here
                    .filter(|r| r.algorithm != OFF)
                    .map(|r| (r.algorithm, of(r)))
                    .reduce(|a, b| if (b.1 > a.1) == best { b } else { a });
                out.push(Ratio {
                    kind,
                    case: format!(
                        "{data} at {}, {} {} ({})",
                        link_label(link),
                        t.name(),
                        if read { "read" } else { "write" },
                        pick.map_or("–", |p| p.0)
                    ),
                    value: ratio(pick.map(|p| p.1), off),
                    goal,
                });
            }
        }
    }
    // What a user gets by default (every algorithm offered, the pace choosing): never slower
    // than without compression on a fast link, whatever the data.
    for data in ["text", "vmdisk", "random"] {
        for t in TARGETS {
            for read in [true, false] {
                let of = |algorithm: &str| {
                    rows.iter()
                        .find(|r| {
                            r.data == data
                                && r.link == "loopback"
                                && r.target == t
                                && r.algorithm == algorithm
                        })
                        .map(|r| {
                            if read {
                                r.read_mb_s.median
                            } else {
                                r.write_mb_s.median
                            }
                        })
                };
                out.push(Ratio {
                    kind: "compressed / uncompressed MB/s, every algorithm offered (auto)",
                    case: format!(
                        "{data} at loopback, {} {}",
                        t.name(),
                        if read { "read" } else { "write" }
                    ),
                    value: ratio(of(crate::scenarios::compression::AUTO), of(OFF)),
                    goal: Some(0.95),
                });
            }
        }
    }
}

pub fn compute(res: &Results) -> Vec<Ratio> {
    let mut out = Vec::new();
    if let Some(fio) = &res.fio {
        per_job(
            &mut out,
            fio,
            "QUIC / encrypted TCP (smbq)",
            (Target::SmbqQuic, Target::SmbqTcpEnc),
            // Issue 11: 0.8x in S1 (the long-term goal stays 1.0x).
            |job| (job == "S1").then_some(0.8),
        );
        per_job(
            &mut out,
            fio,
            "smbq / Samba (encrypted TCP)",
            (Target::SmbqTcpEnc, Target::SambaTcpEnc),
            // Issue 11: 1.3x in S1, 1.1x in S2 and S3.
            |job| Some(if job == "S1" { 1.3 } else { 1.1 }),
        );
        // Issue 11: the server's CPU seconds per GB moved in S1 at most Samba's.
        s1_rows(
            &mut out,
            "server CPU s per GB, Samba / smbq (encrypted TCP)",
            Some(1.0),
            |rw| {
                ratio(
                    fio_cpu_per_gb(fio, "S1", rw, Target::SambaTcpEnc),
                    fio_cpu_per_gb(fio, "S1", rw, Target::SmbqTcpEnc),
                )
            },
        );
        if fio.iter().any(|r| r.target == Target::SmbqMsQuic) {
            // Issue 11 item 7: the thesis's prototype (Tuxera Fusion on MsQuic) reached
            // 0.50x / 0.65x of encrypted TCP in S1 (shared/reference/studies.md); smbq on
            // the same QUIC library, and smbq's two stacks against each other.
            for (rw, published) in [("read", 0.50), ("write", 0.65)] {
                out.push(Ratio {
                    kind: "QUIC / encrypted TCP, Fusion + MsQuic (thesis, published)",
                    case: format!("S1 {rw}"),
                    value: Some(published),
                    goal: None,
                });
            }
            per_job(
                &mut out,
                fio,
                "QUIC / encrypted TCP (smbq + MsQuic)",
                (Target::SmbqMsQuic, Target::SmbqTcpEnc),
                |_| None,
            );
            per_job(
                &mut out,
                fio,
                "smbq QUIC: MsQuic / quinn",
                (Target::SmbqMsQuic, Target::SmbqQuic),
                |_| None,
            );
        }
        if fio.iter().any(|r| r.target == Target::SmbqTcpEnc2Ch) {
            // Issue 16: the session on two TCP connections against one, S1 only.
            s1_rows(
                &mut out,
                "2 / 1 TCP channels (smbq, encrypted)",
                None,
                |rw| {
                    ratio(
                        fio_mb(fio, "S1", rw, Target::SmbqTcpEnc2Ch),
                        fio_mb(fio, "S1", rw, Target::SmbqTcpEnc),
                    )
                },
            );
        }
        per_job(
            &mut out,
            fio,
            "encrypted / plain TCP (smbq)",
            (Target::SmbqTcpEnc, Target::SmbqTcpPlain),
            |_| None,
        );
    }
    if let (Some(fio), Some(raw)) = (&res.fio, &res.raw) {
        let raw_mb = |transport: &str, dir: &str| {
            raw.iter()
                .find(|r| r.transport == transport && r.direction == dir)
                .map(|r| r.mb_s.median)
        };
        for (rw, dir) in [("read", "download"), ("write", "upload")] {
            out.push(Ratio {
                kind: "SMB over QUIC / raw QUIC",
                case: format!("S1 {rw} / raw {dir}"),
                value: ratio(fio_mb(fio, "S1", rw, Target::SmbqQuic), raw_mb("quic", dir)),
                goal: Some(0.8),
            });
            if raw.iter().any(|r| r.transport == "quic-msquic") {
                out.push(Ratio {
                    kind: "SMB over QUIC / raw QUIC (MsQuic)",
                    case: format!("S1 {rw} / raw {dir}"),
                    value: ratio(
                        fio_mb(fio, "S1", rw, Target::SmbqMsQuic),
                        raw_mb("quic-msquic", dir),
                    ),
                    goal: None,
                });
            }
            out.push(Ratio {
                kind: "SMB over TCP / raw TCP",
                case: format!("S1 {rw} (encrypted) / raw {dir}"),
                value: ratio(
                    fio_mb(fio, "S1", rw, Target::SmbqTcpEnc),
                    raw_mb("tcp", dir),
                ),
                goal: None,
            });
        }
    }
    if let Some(raw) = &res.raw {
        let mb = |transport: &str, dir: &str| {
            raw.iter()
                .find(|r| r.transport == transport && r.direction == dir)
                .map(|r| r.mb_s.median)
        };
        // Issue 11: raw QUIC on loopback at the default MTU bound at least 1.3x the ~750 MB/s
        // of the run that opened the issue (2026-11-22).
        if res.raw_at_default_mtu_on_loopback {
            for dir in ["upload", "download"] {
                if let Some(v) = mb("quic", dir) {
                    out.push(Ratio {
                        kind: "raw QUIC / 750 MB/s (issue 11's baseline)",
                        case: dir.to_string(),
                        value: Some(v / 750.0),
                        goal: Some(1.3),
                    });
                }
            }
        }
        // Issue 40: raw QUIC at most 0.4 CPU s per GB on each end (the busier end counts).
        for dir in ["upload", "download"] {
            let busier = raw
                .iter()
                .find(|r| r.transport == "quic" && r.direction == dir)
                .map(|r| {
                    r.client_cpu_s_per_gb
                        .median
                        .max(r.server_cpu_s_per_gb.median)
                })
                .filter(|c| *c > 0.0);
            if let Some(c) = busier {
                out.push(Ratio {
                    kind: "0.4 CPU s/GB (issue 40's goal) / raw QUIC's, busier end",
                    case: dir.to_string(),
                    value: Some(0.4 / c),
                    goal: Some(1.0),
                });
            }
        }
        if raw.iter().any(|r| r.transport == "quic-msquic") {
            for dir in ["upload", "download"] {
                out.push(Ratio {
                    kind: "raw QUIC: MsQuic / quinn",
                    case: dir.to_string(),
                    value: ratio(mb("quic-msquic", dir), mb("quic", dir)),
                    goal: None,
                });
            }
        }
    }
    if let Some(sweep) = &res.sweep {
        // Issue 11: a fresh connection per copy (connect, log on, copy, log off) over QUIC at
        // 0.8x of the same over encrypted TCP or better.
        let per_copy = |size: u64, t: Target| {
            sweep
                .iter()
                .find(|r| r.size == size && r.mode == "ephemeral" && r.target == t)
                .map(|r| r.per_copy_mb_s.median)
        };
        let sizes = [1_000u64, 1_000_000];
        for size in sizes {
            let value = ratio(
                per_copy(size, Target::SmbqQuic),
                per_copy(size, Target::SmbqTcpEnc),
            );
            if value.is_some() {
                out.push(Ratio {
                    kind: "ephemeral copy, QUIC / encrypted TCP (smbq)",
                    case: crate::report::plots::size_label(size),
                    value,
                    goal: Some(0.8),
                });
            }
        }
    }
    if let Some(loss) = &res.loss {
        let time = |group: &str, d: f64, l: f64, cc: &str, m: &str| {
            loss.iter()
                .find(|r| {
                    r.group == group
                        && r.one_way_delay_ms == d
                        && r.loss_pct == l
                        && r.tcp_congestion == cc
                        && r.method == m
                })
                .map(|r| r.seconds.median)
        };
        let mut conds: Vec<(&str, f64, f64, &str, &str)> = loss
            .iter()
            .map(|r| {
                (
                    r.group,
                    r.one_way_delay_ms,
                    r.loss_pct,
                    r.tcp_congestion.as_str(),
                    r.quic_congestion,
                )
            })
            .collect();
        conds.dedup();
        for (group, d, l, cc, qcc) in conds {
            let what = if group == "files" {
                "100 files"
            } else {
                "big file"
            };
            let case = format!("{what}, {d} ms one-way, {l} % loss, TCP {cc} / QUIC {qcc}");
            let time = |group: &str, d: f64, l: f64, m: &str| time(group, d, l, cc, m);
            let goal_point = group == "files" && d == 10.0 && l == 2.0;
            out.push(Ratio {
                kind: "time over TCP / time over QUIC",
                case: case.clone(),
                value: ratio(
                    time(group, d, l, "smbq-tcp-enc"),
                    time(group, d, l, "smbq-quic"),
                ),
                goal: goal_point.then_some(2.0),
            });
            out.push(Ratio {
                kind: "time over TCP / time over QUIC with data streams",
                case: case.clone(),
                value: ratio(
                    time(group, d, l, "smbq-tcp-enc"),
                    time(group, d, l, "smbq-quic-multi"),
                ),
                goal: goal_point.then_some(2.0),
            });
            out.push(Ratio {
                kind: "time over one QUIC stream / time with data streams",
                case: case.clone(),
                value: ratio(
                    time(group, d, l, "smbq-quic"),
                    time(group, d, l, "smbq-quic-multi"),
                ),
                goal: goal_point.then_some(1.3),
            });
            out.push(Ratio {
                kind: "time of scp / time over QUIC",
                case: case.clone(),
                value: ratio(time(group, d, l, "scp"), time(group, d, l, "smbq-quic")),
                goal: None,
            });
            out.push(Ratio {
                kind: "time of scp / time over TCP",
                case,
                value: ratio(time(group, d, l, "scp"), time(group, d, l, "smbq-tcp-enc")),
                goal: None,
            });
        }
    }
    if let Some(rows) = &res.interactive {
        interactive(&mut out, rows);
    }
    if let Some(rows) = &res.compression {
        compression(&mut out, rows);
    }
    if let Some(rows) = &res.ca {
        ca(&mut out, rows);
    }
    if let Some(rows) = &res.cluster {
        cluster(&mut out, rows);
    }
    if let Some(rows) = &res.get {
        get(&mut out, rows);
    }
    out
}

/// Scenario `get` (issue 40): each QUIC way of downloading against encrypted TCP, in MB/s of
/// the whole command. The goal (0.5x) is quinn's, on one connection.
fn get(out: &mut Vec<Ratio>, rows: &[crate::scenarios::get::GetRow]) {
    let tcp = rows
        .iter()
        .find(|r| r.transport == "tcp-enc")
        .map(|r| r.mb_s.median);
    for r in rows.iter().filter(|r| r.transport == "quic") {
        out.push(Ratio {
            kind: "smbq get, QUIC / encrypted TCP",
            case: format!(
                "{}, {} channel{}",
                r.stack,
                r.channels,
                if r.channels == 1 { "" } else { "s" }
            ),
            value: ratio(Some(r.mb_s.median), tcp),
            goal: (r.stack == "quinn" && r.channels == 1).then_some(0.5),
        });
    }
}

/// Scenario `ca` (issue 37): the plain share's p50 over the CA share's (goal 0.5: CA at most
/// 2x), and the upload's MB/s on the CA share over the plain one's (no goal).
fn ca(out: &mut Vec<Ratio>, rows: &[crate::scenarios::ca::CaRow]) {
    let find = |share: &str, op: &str| rows.iter().find(|r| r.share == share && r.op == op);
    for op in crate::scenarios::ca::OPS {
        out.push(Ratio {
            kind: "p50 on a plain share / p50 on a CA share",
            case: op.to_string(),
            value: ratio(
                find("share", op).map(|r| r.p50_ms),
                find("ca", op).map(|r| r.p50_ms),
            ),
            goal: Some(0.5),
        });
    }
    // The best the ratio above can be on this disk: the plain share's answer plus the disk's
    // own flush of the same write, which a write-through answer cannot do without.
    let floor = find(crate::scenarios::ca::DISK, "write_4k")
        .zip(find("share", "write_4k"))
        .map(|(d, p)| d.p50_ms + p.p50_ms);
    out.push(Ratio {
        kind: "p50 on a plain share / (plain share + the disk's own flush) p50",
        case: "write_4k: the best plain / CA this disk allows".into(),
        value: ratio(find("share", "write_4k").map(|r| r.p50_ms), floor),
        goal: None,
    });
    out.push(Ratio {
        kind: "MB/s on a CA share (write-through) / on a plain share",
        case: "sequential upload".into(),
        value: ratio(
            find("ca", "upload").map(|r| r.mb_s.median),
            find("share", "upload").map(|r| r.mb_s.median),
        ),
        goal: None,
    });
}

/// Scenario `cluster` (issue 39): smbq alone's p50 over a cluster node's, and a cluster
/// node's MB/s over smbq alone's (no goals: the issue expects +1 to 3 ms per CREATE+CLOSE
/// and READ and WRITE unchanged; the table says the difference in ms).
fn cluster(out: &mut Vec<Ratio>, rows: &[crate::scenarios::ca::CaRow]) {
    let find = |setup: &str, op: &str| rows.iter().find(|r| r.share == setup && r.op == op);
    for op in crate::scenarios::cluster::OPS {
        out.push(Ratio {
            kind: "p50 alone / p50 on a cluster node",
            case: op.to_string(),
            value: ratio(
                find("alone", op).map(|r| r.p50_ms),
                find("cluster node", op).map(|r| r.p50_ms),
            ),
            goal: None,
        });
    }
    for op in ["upload", "download"] {
        out.push(Ratio {
            kind: "MB/s on a cluster node / alone",
            case: op.to_string(),
            value: ratio(
                find("cluster node", op).map(|r| r.mb_s.median),
                find("alone", op).map(|r| r.mb_s.median),
            ),
            goal: None,
        });
    }
    for op in ["aggregate_upload", "aggregate_download"] {
        out.push(Ratio {
            kind: "aggregate MB/s, 3 nodes / 1 node",
            case: op.to_string(),
            value: ratio(
                find("3 nodes", op).map(|r| r.mb_s.median),
                find("1 node", op).map(|r| r.mb_s.median),
            ),
            goal: None,
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::scenarios::sweep::SweepRow;
    use crate::stats::Summary;

    fn row(size: u64, mode: &'static str, target: Target, mb_s: f64) -> SweepRow {
        SweepRow {
            size,
            mode,
            target,
            copies: 1,
            per_copy_mb_s: Summary::of(&[mb_s]),
            mb_s,
            client_cpu_pct: 0.0,
            server_cpu_pct: 0.0,
            server_rss_kib: 0,
            server_peak_rss_kib: 0,
        }
    }

    fn fio(job: &'static str, rw: &'static str, target: Target, mb: f64, cpu: f64) -> FioRow {
        FioRow {
            job,
            rw,
            target,
            block_size: 1 << 20,
            iodepth: 4,
            file_size: 1 << 30,
            files: 1,
            mb_s: Summary::of(&[mb]),
            iops: Summary::of(&[mb]),
            lat_p50_us: Summary::of(&[1.0]),
            lat_p99_us: Summary::of(&[1.0]),
            client_cpu_pct: Summary::of(&[50.0]),
            server_cpu_pct: Summary::of(&[cpu]),
            smb_encrypted: true,
            smb_signed: true,
        }
    }

    #[test]
    fn fio_ratios_carry_issue_11s_goals_and_cpu_per_gb() {
        let res = Results {
            fio: Some(vec![
                // smbq: 3000 MB/s at 90 % = 0.30 s/GB; Samba: 2000 MB/s at 100 % = 0.50 s/GB.
                fio("S1", "write", Target::SmbqTcpEnc, 3000.0, 90.0),
                fio("S1", "write", Target::SambaTcpEnc, 2000.0, 100.0),
                fio("S2", "write", Target::SmbqTcpEnc, 105.0, 100.0),
                fio("S2", "write", Target::SambaTcpEnc, 100.0, 100.0),
                fio("S1", "write", Target::SmbqQuic, 2500.0, 100.0),
            ]),
            ..Results::default()
        };
        let r = compute(&res);
        let find = |kind: &str, case: &str| {
            r.iter()
                .find(|x| x.kind == kind && x.case == case)
                .unwrap()
                .clone()
        };
        let s1 = find("smbq / Samba (encrypted TCP)", "S1 write");
        assert_eq!((s1.goal, s1.status()), (Some(1.3), "met"));
        let s2 = find("smbq / Samba (encrypted TCP)", "S2 write");
        assert_eq!((s2.goal, s2.status()), (Some(1.1), "not met"));
        let cpu = find(
            "server CPU s per GB, Samba / smbq (encrypted TCP)",
            "S1 write",
        );
        assert!((cpu.value.unwrap() - 0.5 / 0.3).abs() < 1e-9);
        assert_eq!(cpu.status(), "met");
        let q = find("QUIC / encrypted TCP (smbq)", "S1 write");
        assert_eq!((q.goal, q.status()), (Some(0.8), "met"));
        // No raw rows: the raw-QUIC goal is absent rather than failed.
        assert!(!r.iter().any(|x| x.kind.starts_with("raw QUIC / 750")));
    }

    #[test]
    fn ephemeral_quic_over_tcp_against_the_issue_goal() {
        let res = Results {
            sweep: Some(vec![
                row(1_000, "ephemeral", Target::SmbqQuic, 0.6),
                row(1_000, "ephemeral", Target::SmbqTcpEnc, 1.2),
                row(1_000, "persistent", Target::SmbqQuic, 9.0),
                row(1_000_000, "ephemeral", Target::SmbqQuic, 450.0),
                row(1_000_000, "ephemeral", Target::SmbqTcpEnc, 500.0),
            ]),
            ..Results::default()
        };
        let r: Vec<Ratio> = compute(&res)
            .into_iter()
            .filter(|r| r.kind.starts_with("ephemeral"))
            .collect();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].case, "1 KB");
        assert!((r[0].value.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(r[0].status(), "not met");
        assert_eq!(r[1].case, "1 MB");
        assert!((r[1].value.unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(r[1].status(), "met");
    }
}
