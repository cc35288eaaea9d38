//! What the kernel says about processes and threads (proc(5)): CPU time, resident memory,
//! process trees; and the facts about this machine a result set records.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustix::process::{Pid, Signal};

/// Clock ticks per second of the utime/stime fields in `/proc/*/stat`.
fn ticks_per_second() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

/// The fields after the command name of a `/proc/.../stat` line. The name is in parentheses
/// and may itself hold spaces or parentheses, so the split is at the last `)`.
fn stat_fields(text: &str) -> Option<Vec<&str>> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    Some(rest.split_whitespace().collect())
}

/// utime + stime (and, with `children`, cutime + cstime) of one stat file, in seconds.
fn stat_cpu(path: &Path, children: bool) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let f = stat_fields(&text)?;
    // proc(5): after the name come state (3), ppid (4), ... utime (14), stime (15),
    // cutime (16), cstime (17); index 0 here is field 3.
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let mut ticks = field(14)? + field(15)?;
    if children {
        ticks += field(16)? + field(17)?;
    }
    Some(ticks as f64 / ticks_per_second())
}

fn stat_ppid(pid: u32) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&text)?.get(1)?.parse().ok()
}

/// Every live process whose parent chain reaches `root`, `root` included.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut parent = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok())
                && let Some(pp) = stat_ppid(pid)
            {
                parent.insert(pid, pp);
            }
        }
    }
    let mut out = vec![root];
    for &pid in parent.keys() {
        let mut p = pid;
        // Bounded walk: a pid table that changes under us cannot loop forever.
        for _ in 0..64 {
            match parent.get(&p) {
                Some(&pp) if pp == root => {
                    out.push(pid);
                    break;
                }
                Some(&pp) if pp > 1 => p = pp,
                _ => break,
            }
        }
    }
    out
}

/// CPU seconds used by `root` and its descendants so far (children already reaped count
/// through the root's cutime/cstime; Samba forks one smbd per connection).
pub fn tree_cpu(root: u32) -> f64 {
    process_tree(root)
        .into_iter()
        .filter_map(|pid| stat_cpu(Path::new(&format!("/proc/{pid}/stat")), pid == root))
        .sum()
}

/// `VmRSS` and `VmHWM` (peak) in KiB, summed over the process tree.
pub fn tree_rss_kib(root: u32) -> (u64, u64) {
    let mut rss = 0;
    let mut hwm = 0;
    for pid in process_tree(root) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        for line in text.lines() {
            let kib = |l: &str| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            if line.starts_with("VmRSS:") {
                rss += kib(line);
            } else if line.starts_with("VmHWM:") {
                hwm += kib(line);
            }
        }
    }
    (rss, hwm)
}

/// CPU seconds of this process's threads whose name starts with `prefix` (tokio names its
/// workers after the runtime). Separate runtimes for the client, the in-process raw server and
/// the link emulator keep their CPU apart although they share the process.
pub fn threads_cpu(prefix: &str) -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    entries
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("comm"))
                .is_ok_and(|c| c.trim_end().starts_with(prefix))
        })
        .filter_map(|e| stat_cpu(&e.path().join("stat"), false))
        .sum()
}

/// Sends `sig` to a process, or to a process group when `group` is set.
pub fn signal(pid: u32, sig: Signal, group: bool) {
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    let _ = if group {
        rustix::process::kill_process_group(p, sig)
    } else {
        rustix::process::kill_process(p, sig)
    };
}

/// Live (not zombie) processes whose command line contains `needle`.
pub fn processes_with_arg(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmdline).contains(needle) {
            continue;
        }
        let zombie = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|t| stat_fields(&t).and_then(|f| f.first().map(|s| *s == "Z")))
            .unwrap_or(true);
        if !zombie {
            out.push(pid);
        }
    }
    out
}

/// Waits for a child, killing it (SIGTERM, then SIGKILL) when it outlives `grace`.
pub fn stop_child(child: &mut std::process::Child, grace: Duration, group: bool) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    signal(child.id(), Signal::TERM, group);
    let deadline = std::time::Instant::now() + grace;
    while std::time::Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(child.id(), Signal::KILL, group);
    let _ = child.wait();
}

/// Waits for a child to exit and returns its status, the CPU seconds it used (with those of
/// its own children it waited for), and what it wrote to stderr (when piped). The CPU is read
/// from the exited child's `/proc` entry before it is reaped (`waitid` with `WNOWAIT`), so
/// nothing of its last moments is missed.
pub fn wait_with_cpu(
    mut child: std::process::Child,
) -> Result<(std::process::ExitStatus, f64, String), String> {
    use rustix::process::{WaitId, WaitIdOptions, waitid};
    let stderr = child.stderr.take().map(|mut e| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
            s
        })
    });
    let pid = Pid::from_raw(i32::try_from(child.id()).map_err(|e| e.to_string())?)
        .ok_or("child without a pid")?;
    loop {
        match waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(_) => break,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("waitid: {e}")),
        }
    }
    let cpu = stat_cpu(Path::new(&format!("/proc/{}/stat", child.id())), true).unwrap_or(0.0);
    let status = child.wait().map_err(|e| e.to_string())?;
    let text = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok((status, cpu, text))
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// First line of a command's output (stdout, else stderr), for version strings.
pub fn command_line_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_string())
}

/// Facts about the machine a result set was taken on.
/// The kernel's TCP congestion controller (every TCP measurement uses it; namespaces inherit
/// it from the initial one).
pub fn tcp_congestion() -> Option<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .ok()
        .map(|s| s.trim().to_string())
}

pub fn machine_facts() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .unwrap_or_default();
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    // The clock the kernel reports for the first CPU: CPU seconds per GB times it (in GHz)
    // is cycles per byte, where the hardware's cycle counters are out of reach (a VM).
    let mhz = cpuinfo
        .lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|s| s.trim().parse::<f64>().ok());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    let os = std::fs::read_to_string("/etc/os-release")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("PRETTY_NAME="))
        .map(|l| {
            l.trim_start_matches("PRETTY_NAME=")
                .trim_matches('"')
                .to_string()
        })
        .unwrap_or_default();
    let rmem_max = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    serde_json::json!({
        "cpu_model": model,
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_mhz": mhz,
        "aes_ni": has("aes"),
        "vaes": has("vaes"),
        "memory_gib": (mem_kib as f64 / 1048576.0 * 10.0).round() / 10.0,
        "kernel": command_line_output("uname", &["-r"]).unwrap_or_default(),
        "os": os,
        "net_core_rmem_max": rmem_max,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_names_with_spaces_and_parens() {
        let line = "1234 (tokio (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 7 3 20 0";
        let f = stat_fields(line).unwrap();
        assert_eq!(f[0], "S");
        assert_eq!(f[1], "1");
        assert_eq!(f[14 - 3], "250");
        assert_eq!(f[15 - 3], "50");
    }

    #[test]
    fn own_process_has_cpu_and_memory() {
        // Burn some CPU so the counters have moved.
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert!(x != 42);
        let me = std::process::id();
        assert!(tree_cpu(me) > 0.0);
        let (rss, hwm) = tree_rss_kib(me);
        assert!(rss > 0 && hwm >= rss);
        assert!(process_tree(me).contains(&me));
    }

    #[test]
    fn thread_cpu_is_counted_by_name() {
        let t = std::thread::Builder::new()
            .name("cpuprobe-x".into())
            .spawn(|| {
                let mut x = 1u64;
                let start = std::time::Instant::now();
                while start.elapsed() < Duration::from_millis(120) {
                    x = x.wrapping_mul(31).wrapping_add(7);
                }
                let used = threads_cpu("cpuprobe");
                (x, used)
            })
            .unwrap();
        let (_, used) = t.join().unwrap();
        assert!(used >= 0.05, "thread used {used}s");
        assert_eq!(threads_cpu("no-such-thread-name"), 0.0);
    }
}
