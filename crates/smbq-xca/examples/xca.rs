//! Command-line front end to the codecs, for cross-checks against other implementations
//! (tests/interop/test_xca_dissect.py) and quick speed measurements.
//!
//! ```text
//! xca compress   lz77|lz77huffman|lznt1 <in> <out>
//! xca decompress lz77|lz77huffman|lznt1 <in> <out> <expected_len>
//! xca bench      <in>          # MB/s of each codec on <in>, release build advised
//! ```

use std::process::ExitCode;
use std::time::{Duration, Instant};

type Compress = fn(&[u8], &mut Vec<u8>);
type Decompress = fn(&[u8], &mut Vec<u8>, usize) -> Result<(), smbq_xca::Error>;

const CODECS: [(&str, Compress, Decompress); 3] = [
    ("lz77", smbq_xca::lz77::compress, smbq_xca::lz77::decompress),
    (
        "lz77huffman",
        smbq_xca::lz77_huffman::compress,
        smbq_xca::lz77_huffman::decompress,
    ),
    (
        "lznt1",
        smbq_xca::lznt1::compress,
        smbq_xca::lznt1::decompress,
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xca: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<(), String> {
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    match strs.as_slice() {
        ["bench", input] => bench(input),
        [mode, algo, input, output, rest @ ..] => {
            let (_, c, d) = CODECS
                .iter()
                .find(|(name, _, _)| name == algo)
                .ok_or_else(|| format!("unknown algorithm {algo}"))?;
            let data = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
            let mut out = Vec::new();
            match (*mode, rest) {
                ("compress", []) => c(&data, &mut out),
                ("decompress", [len]) => {
                    let len = len.parse().map_err(|e| format!("expected_len: {e}"))?;
                    d(&data, &mut out, len).map_err(|e| e.to_string())?;
                }
                _ => return Err(usage()),
            }
            std::fs::write(output, out).map_err(|e| format!("{output}: {e}"))
        }
        _ => Err(usage()),
    }
}

fn usage() -> String {
    "usage: xca compress|decompress lz77|lz77huffman|lznt1 <in> <out> [expected_len] | xca bench <in>".into()
}

/// This thread's time on a CPU (Linux: /proc/thread-self/schedstat), so a measurement on a
/// busy machine counts only the time the codec actually ran.
fn cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(
        s.split_whitespace().next()?.parse().ok()?,
    ))
}

/// Runs `f` at least 3 times and for at least half a second of wall time; returns MB/s of
/// `len` bytes per run, by wall time and by CPU time (if known).
fn speed(len: usize, f: &mut dyn FnMut()) -> (f64, Option<f64>) {
    let (t, c) = (Instant::now(), cpu_time());
    let mut n = 0u32;
    while n < 3 || t.elapsed().as_secs_f64() < 0.5 {
        f();
        n += 1;
    }
    let mb = len as f64 * f64::from(n) / 1e6;
    let cpu = c.zip(cpu_time()).map(|(a, b)| mb / (b - a).as_secs_f64());
    (mb / t.elapsed().as_secs_f64(), cpu)
}

/// Compresses and decompresses `input` with each codec and prints the ratio and speeds (MB/s
/// of uncompressed data; wall time, and CPU time in parentheses).
fn bench(input: &str) -> Result<(), String> {
    let data = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    let show = |(wall, cpu): (f64, Option<f64>)| match cpu {
        Some(c) => format!("{wall:5.0} ({c:5.0} cpu)"),
        None => format!("{wall:5.0}"),
    };
    for (name, c, d) in CODECS {
        let mut z = Vec::new();
        let cs = speed(data.len(), &mut || {
            z.clear();
            c(&data, &mut z);
        });
        let mut out = Vec::new();
        let ds = speed(data.len(), &mut || {
            out.clear();
            let _ = d(&z, &mut out, data.len());
        });
        if out != data {
            return Err(format!("{name}: round trip failed"));
        }
        println!(
            "{name:12} {:>8} -> {:>8} ({:5.1}%)  compress {} MB/s  decompress {} MB/s",
            data.len(),
            z.len(),
            100.0 * z.len() as f64 / data.len().max(1) as f64,
            show(cs),
            show(ds),
        );
    }
    Ok(())
}
