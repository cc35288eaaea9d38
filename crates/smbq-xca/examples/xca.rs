//! Command-line front end to the codecs, for cross-checks against other implementations
//! (tests/interop/test_xca_dissect.py) and quick speed measurements.
//!
//! ```text
//! xca compress   lz77|lz77huffman|lznt1 <in> <out>
//! xca decompress lz77|lz77huffman|lznt1 <in> <out> <expected_len>
//! xca bench      <in>          # MB/s of each codec on <in>, release build advised
//! ```

use std::process::ExitCode;
use std::time::Instant;

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

/// Compresses and decompresses `input` with each codec for about half a second each and
/// prints the ratio and speeds (MB/s of uncompressed data).
fn bench(input: &str) -> Result<(), String> {
    let data = std::fs::read(input).map_err(|e| format!("{input}: {e}"))?;
    for (name, c, d) in CODECS {
        let mut z = Vec::new();
        let speed = |f: &mut dyn FnMut()| {
            let t = Instant::now();
            let mut n = 0u32;
            while n < 3 || t.elapsed().as_secs_f64() < 0.5 {
                f();
                n += 1;
            }
            data.len() as f64 * f64::from(n) / t.elapsed().as_secs_f64() / 1e6
        };
        let cs = speed(&mut || {
            z.clear();
            c(&data, &mut z);
        });
        let mut out = Vec::new();
        let ds = speed(&mut || {
            out.clear();
            let _ = d(&z, &mut out, data.len());
        });
        if out != data {
            return Err(format!("{name}: round trip failed"));
        }
        println!(
            "{name:12} {:>9} -> {:>9} bytes ({:5.1}%)  compress {cs:7.0} MB/s  decompress {ds:7.0} MB/s",
            data.len(),
            z.len(),
            100.0 * z.len() as f64 / data.len().max(1) as f64
        );
    }
    Ok(())
}
