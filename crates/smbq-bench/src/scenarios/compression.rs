//! Scenario `compression` (issue 36 item 6): what SMB 3.1.1 compression (docs/compression.md)
//! gains on a slow link and costs on a fast one. One file of each data set (source-like text,
//! a VM-disk-like image with runs of zeros, random bytes) is downloaded (READ) and uploaded
//! (WRITE) over one session, with compression off and with each general algorithm this build
//! has (Pattern_V1 offered along with it), over smbq's TCP (SMB3 encryption) and QUIC (one
//! stream, transport security), on loopback and through the link emulator at 1 Gbit/s and
//! 100 Mbit/s with 20 ms round trip. Time, client and server CPU per GB, and the compression
//! the server's metrics saw.

use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use smbq_client::transfer::{TransferOptions, download, upload};
use smbq_client::{OpenOptions, Tree};
use smbq_compress::Algorithm;

use crate::net::{CLIENT_THREADS, LinkDesc, Net};
use crate::progress::Progress;
use crate::servers::smbq::SmbqServer;
use crate::stats::Summary;
use crate::sys;
use crate::target::{Endpoint, Target, check_protection};
use crate::{Ctx, Scale};

const DIR: &str = "compression";
/// The data sets, in table order.
pub const DATA_SETS: [&str; 3] = ["text", "vmdisk", "random"];
/// The transports, in table order.
pub const TARGETS: [Target; 2] = [Target::SmbqTcpEnc, Target::SmbqQuic];
/// The links, in the order they run: loopback, then the emulated 1 Gbit/s and 100 Mbit/s.
pub const LINKS: [&str; 3] = ["loopback", "1gbit", "100mbit"];
/// The label of a row without compression.
pub const OFF: &str = "off";
/// The label of a row where the client offers every algorithm (as `smbq get` does) and the
/// ends' pace picks one per message, or none (smbq_compress::pace).
pub const AUTO: &str = "auto";

/// What a row's client offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Off,
    /// One algorithm (and Pattern_V1).
    One(Algorithm),
    /// Every algorithm, the pace choosing.
    Auto,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => OFF,
            Self::One(a) => a.name(),
            Self::Auto => AUTO,
        }
    }

    /// What the client offers, in order.
    pub fn offer(self) -> Vec<Algorithm> {
        match self {
            Self::Off => Vec::new(),
            Self::One(a) => vec![a, Algorithm::PatternV1],
            Self::Auto => Algorithm::ALL
                .into_iter()
                .filter(|a| a.available())
                .collect(),
        }
    }
}
/// One-way delay of the emulated links: 20 ms round trip.
const ONE_WAY_MS: f64 = 10.0;
/// The VM-disk image's block, and how many blocks in 100 are zero and random (the rest are
/// structured records).
const DISK_BLOCK: usize = 64 << 10;
const DISK_ZERO_PCT: u64 = 60;
const DISK_RANDOM_PCT: u64 = 25;
/// The slowest general algorithms first: the one the random data set is measured with beside
/// LZ4 (when this build has it).
const SLOWEST_FIRST: [Algorithm; 3] = [Algorithm::Lz77Huffman, Algorithm::Lznt1, Algorithm::Lz77];

/// One data set over one link and transport with one algorithm (or none): a download and an
/// upload per repeat, each a fresh session.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CompressionRow {
    /// One of [`DATA_SETS`].
    pub data: &'static str,
    /// How the data set was made.
    pub data_about: String,
    /// One of [`LINKS`].
    pub link: &'static str,
    /// The link's settings.
    pub link_desc: LinkDesc,
    pub target: Target,
    /// An algorithm's name (`lz4`, `lz77`, ...) or [`OFF`].
    pub algorithm: &'static str,
    /// What the client offered, in order (empty: nothing).
    pub offered: Vec<&'static str>,
    /// Bytes moved each way per repeat.
    pub bytes: u64,
    pub read_mb_s: Summary,
    pub write_mb_s: Summary,
    pub read_client_cpu_s_per_gb: Summary,
    pub read_server_cpu_s_per_gb: Summary,
    pub write_client_cpu_s_per_gb: Summary,
    pub write_server_cpu_s_per_gb: Summary,
    /// File bytes over what crossed the wire for them (the bytes the server's
    /// `smbq_compressed_*` metrics saw saved), READ responses; 1.0: nothing compressed.
    pub read_ratio: Summary,
    /// The same for the WRITE requests the server received.
    pub write_ratio: Summary,
}

/// How a data set was made, for the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DataSet {
    pub name: &'static str,
    pub about: String,
    #[serde(skip)]
    bytes: Bytes,
}

impl DataSet {
    fn path(&self) -> String {
        format!("{DIR}/{}.bin", self.name)
    }
}

/// Bytes per data set moved on `link`. Quick runs stay long enough to mean something: at
/// 1 Gbit/s and 20 ms RTT 16 MiB is mostly slow start (~50 MB/s whatever the data), and on
/// loopback it takes ~30 ms, below the 10 ms CPU clock's resolution per GB.
pub fn size(scale: Scale, link: &str) -> u64 {
    match (scale, link) {
        (Scale::Quick, "100mbit") => 16 << 20,
        (Scale::Quick, "1gbit") => 64 << 20,
        (Scale::Quick, _) => 128 << 20,
        (Scale::Full, "100mbit") => 64 << 20,
        (Scale::Full, _) => 256 << 20,
    }
}

/// A link's name in tables and figures.
pub fn link_label(link: &str) -> &'static str {
    match link {
        "loopback" => "loopback",
        "1gbit" => "1 Gbit/s, 20 ms RTT",
        "100mbit" => "100 Mbit/s, 20 ms RTT",
        _ => "?",
    }
}

/// The algorithm names rows can carry, in table order: [`OFF`], then smbq's order, then
/// [`AUTO`].
pub fn algorithm_order() -> Vec<&'static str> {
    std::iter::once(OFF)
        .chain(
            Algorithm::ALL
                .into_iter()
                .filter(|a| a.is_general())
                .map(Algorithm::name),
        )
        .chain(std::iter::once(AUTO))
        .collect()
}

fn link_desc(link: &str) -> LinkDesc {
    match link {
        "loopback" => LinkDesc::loopback(),
        "1gbit" => LinkDesc::emulated(ONE_WAY_MS, 0.0, Some(1000.0)),
        _ => LinkDesc::emulated(ONE_WAY_MS, 0.0, Some(100.0)),
    }
}

/// The general algorithms this build has, in smbq's order of preference.
pub fn general_algorithms() -> Vec<Algorithm> {
    Algorithm::ALL
        .into_iter()
        .filter(|a| a.is_general() && a.available())
        .collect()
}

/// How a data set is measured: off, each algorithm alone, then all of them with the pace
/// choosing. Random data, which does not compress, only with LZ4, the slowest algorithm this
/// build has, and all.
pub fn plan(data: &str) -> Vec<Method> {
    let general = general_algorithms();
    let mut v = vec![Method::Off];
    if data == "random" {
        v.extend(
            general
                .iter()
                .copied()
                .filter(|a| *a == Algorithm::Lz4)
                .map(Method::One),
        );
        v.extend(
            SLOWEST_FIRST
                .into_iter()
                .find(|a| general.contains(a))
                .map(Method::One),
        );
    } else {
        v.extend(general.into_iter().map(Method::One));
    }
    v.push(Method::Auto);
    v
}

/// xorshift64*: deterministic data without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(v.get(..chunk.len()).unwrap_or_default());
        }
    }
}

/// The checkout the bench runs from (the current directory or one above it, else where it
/// was built), if it is there.
fn repository() -> Option<std::path::PathBuf> {
    let built = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let here = std::env::current_dir().ok();
    here.iter()
        .flat_map(|d| d.ancestors().map(Path::to_path_buf))
        .chain(std::iter::once(built))
        .find(|d| d.join("crates/smbq-bench/Cargo.toml").is_file())
}

/// `*.rs` and `*.md` files under `dir`, recursively, without build output.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() && name != "target" && !name.to_string_lossy().starts_with('.') {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs" || x == "md") {
            out.push(p);
        }
    }
}

/// The text corpus: the repository's own sources and documentation (`crates/` and `docs/`,
/// sorted by path, each after a line naming it), or generated log lines without a checkout.
fn text_corpus() -> (Vec<u8>, String) {
    if let Some(root) = repository() {
        let mut files = Vec::new();
        sources(&root.join("crates"), &mut files);
        sources(&root.join("docs"), &mut files);
        files.sort();
        let mut text = Vec::new();
        for f in &files {
            if let Ok(b) = std::fs::read(f) {
                let rel = f.strip_prefix(&root).unwrap_or(f);
                text.extend_from_slice(format!("// ---- {} ----\n", rel.display()).as_bytes());
                text.extend_from_slice(&b);
            }
        }
        if text.len() >= 1 << 20 {
            let about = format!(
                "smbq's own *.rs and *.md files ({} files, {:.1} MB, sorted by path), repeated",
                files.len(),
                text.len() as f64 / 1e6
            );
            return (text, about);
        }
    }
    (
        log_lines(4 << 20),
        "generated server log lines (no checkout found)".into(),
    )
}

/// Log lines like a file server's, `n` bytes or a little more.
fn log_lines(n: usize) -> Vec<u8> {
    const LEVELS: [&str; 4] = ["INFO", "DEBUG", "WARN", "INFO"];
    const WHAT: [&str; 6] = ["open", "read", "write", "close", "query_info", "set_info"];
    const DIRS: [&str; 5] = ["projects", "home/alice", "scans/2026", "builds", "shared"];
    let mut rng = XorShift(0x1095);
    let mut out = Vec::with_capacity(n + 256);
    let mut t = 0u64;
    while out.len() < n {
        t += rng.next_u64() % 5000;
        let r = rng.next_u64();
        let pick = |k: u64, len: usize| (k % len as u64) as usize;
        let line = format!(
            "2026-11-28T{:02}:{:02}:{:02}.{:06}Z {} smbq_server::conn: {} {}/file{}.dat session=0x{:08x} tree={} bytes={} took={}us\n",
            (t / 3_600_000_000) % 24,
            (t / 60_000_000) % 60,
            (t / 1_000_000) % 60,
            t % 1_000_000,
            LEVELS.get(pick(r, 4)).unwrap_or(&"INFO"),
            WHAT.get(pick(r >> 8, 6)).unwrap_or(&"read"),
            DIRS.get(pick(r >> 16, 5)).unwrap_or(&"shared"),
            (r >> 24) % 500,
            (r >> 32) % 64,
            (r >> 40) % 8,
            ((r >> 44) % 16) << 12,
            (r >> 52) % 900,
        );
        out.extend_from_slice(line.as_bytes());
    }
    out
}

/// A disk-image-like file: 64 KiB blocks, most of them zero, some random (compressed or
/// encrypted content), the rest structured records (tables, metadata).
fn vmdisk(size: usize) -> Vec<u8> {
    let mut rng = XorShift(0xd15c);
    let mut out = vec![0u8; size];
    for (i, block) in out.chunks_mut(DISK_BLOCK).enumerate() {
        let kind = rng.next_u64() % 100;
        if kind < DISK_ZERO_PCT {
            continue;
        }
        if kind < DISK_ZERO_PCT + DISK_RANDOM_PCT {
            rng.fill(block);
            continue;
        }
        // 64-byte records: an id, a small number, a name from a short list, zero padding.
        for (j, rec) in block.chunks_mut(64).enumerate() {
            let id = (i * DISK_BLOCK / 64 + j) as u64;
            let r = rng.next_u64();
            let name = ["kernel", "libc.so", "config", "journal", "inode"]
                .get((r % 5) as usize)
                .copied()
                .unwrap_or("inode");
            let mut fields = Vec::with_capacity(64);
            fields.extend_from_slice(&id.to_le_bytes());
            fields.extend_from_slice(&((r >> 8) % 4096).to_le_bytes());
            fields.extend_from_slice(name.as_bytes());
            let n = fields.len().min(rec.len());
            if let (Some(dst), Some(src)) = (rec.get_mut(..n), fields.get(..n)) {
                dst.copy_from_slice(src);
            }
        }
    }
    out
}

/// `unit` repeated to `size` bytes.
fn repeated(unit: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size);
    while out.len() < size && !unit.is_empty() {
        let n = (size - out.len()).min(unit.len());
        out.extend_from_slice(unit.get(..n).unwrap_or_default());
    }
    out
}

/// Makes the three data sets, `size` bytes each, and writes them into the share.
fn prepare(ctx: &Ctx, size: u64) -> Result<Vec<DataSet>, String> {
    std::fs::create_dir_all(ctx.data.join(DIR)).map_err(|e| e.to_string())?;
    let n = usize::try_from(size).map_err(|e| e.to_string())?;
    let (corpus, text_about) = text_corpus();
    let mut random = vec![0u8; n];
    XorShift(0x5eed_1234).fill(&mut random);
    let sets = [
        ("text", repeated(&corpus, n), text_about),
        (
            "vmdisk",
            vmdisk(n),
            format!(
                "64 KiB blocks: {DISK_ZERO_PCT} % zero, {DISK_RANDOM_PCT} % random, the rest \
                 64-byte records (id, small number, name)"
            ),
        ),
        ("random", random, "xorshift64* bytes".into()),
    ];
    let mut out = Vec::new();
    for (name, bytes, about) in sets {
        let set = DataSet {
            name,
            about,
            bytes: Bytes::from(bytes),
        };
        let p = ctx.data.join(set.path());
        // On disk before the runs: written back later, hundreds of MB would slow the first
        // uploads (a full run's first loopback writes varied 4x before this).
        std::fs::File::create(&p)
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, &set.bytes)?;
                f.sync_all()
            })
            .map_err(|e| format!("{}: {e}", p.display()))?;
        out.push(set);
    }
    Ok(out)
}

/// Sums the samples of counter `name` with `direction="..."` in Prometheus text.
pub fn counter_sum(text: &str, name: &str, direction: &str) -> f64 {
    let label = format!("direction=\"{direction}\"");
    text.lines()
        .filter_map(|l| l.strip_prefix(name))
        .filter(|rest| rest.starts_with('{') && rest.contains(&label))
        .filter_map(|rest| rest.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Bytes the server's compression saved so far in one direction ("sent": READ responses,
/// "received": WRITE requests); None without metrics.
fn saved(net: &Net, server: &SmbqServer, direction: &str) -> Option<f64> {
    let text = server.scrape_metrics(net).ok()?;
    Some(
        counter_sum(&text, "smbq_compressed_plain_bytes_total", direction)
            - counter_sum(&text, "smbq_compressed_wire_bytes_total", direction),
    )
}

/// One direction of one run.
#[derive(Clone, Copy, Default)]
struct Pass {
    mb_s: f64,
    client_cpu_s_per_gb: f64,
    server_cpu_s_per_gb: f64,
    /// File bytes over wire bytes, when the server's metrics answered.
    ratio: Option<f64>,
}

/// Longest one transfer may take before the run fails.
const TIME_LIMIT: Duration = Duration::from_secs(300);

/// Runs `job` (one transfer of `size` bytes) on the client and measures it.
fn timed<F>(
    net: &Net,
    server: &SmbqServer,
    (size, direction): (u64, &str),
    job: F,
) -> Result<Pass, String>
where
    F: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    let saved0 = saved(net, server, direction);
    let (c0, s0) = (sys::threads_cpu(CLIENT_THREADS), server.cpu());
    let t0 = Instant::now();
    net.on_client(async move { tokio::time::timeout(TIME_LIMIT, job).await })?
        .map_err(|_| format!("no end after {} s", TIME_LIMIT.as_secs()))??;
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    let (c1, s1) = (sys::threads_cpu(CLIENT_THREADS), server.cpu());
    let saved1 = saved(net, server, direction);
    let gb = size as f64 / 1e9;
    let ratio = saved0.zip(saved1).map(|(a, b)| {
        let wire = (size as f64 - (b - a)).max(1.0);
        size as f64 / wire
    });
    Ok(Pass {
        mb_s: size as f64 / 1e6 / secs,
        client_cpu_s_per_gb: (c1 - c0) / gb,
        server_cpu_s_per_gb: (s1 - s0) / gb,
        ratio,
    })
}

async fn read_file(tree: Tree, name: String, size: u64) -> Result<(), String> {
    let f = tree
        .open(&name, &OpenOptions::read())
        .await
        .map_err(|e| format!("open {name}: {e}"))?;
    let got = download(&f, 0, size, TransferOptions::default(), |_| Ok(()))
        .await
        .map_err(|e| format!("download {name}: {e}"))?;
    f.close().await.map_err(|e| format!("close {name}: {e}"))?;
    if got != size {
        return Err(format!("{name}: read {got} of {size} bytes"));
    }
    Ok(())
}

async fn write_file(tree: Tree, name: String, data: Bytes) -> Result<(), String> {
    let f = tree
        .open(&name, &OpenOptions::create_truncate())
        .await
        .map_err(|e| format!("create {name}: {e}"))?;
    let len = data.len() as u64;
    let mut at = 0usize;
    let source = move |want: usize| {
        let end = at.saturating_add(want).min(data.len());
        let piece = data.slice(at..end);
        at = end;
        Ok(piece)
    };
    let n = upload(&f, 0, TransferOptions::default(), source, |_| {})
        .await
        .map_err(|e| format!("upload {name}: {e}"))?;
    f.close().await.map_err(|e| format!("close {name}: {e}"))?;
    if n != len {
        return Err(format!("{name}: wrote {n} of {len} bytes"));
    }
    Ok(())
}

/// Fails unless the session negotiated what was offered: compression off, or on with the
/// algorithm asked for.
fn check_compression(tree: &Tree, method: Method) -> Result<(), String> {
    let n = tree.session().client().negotiated();
    let c = &n.compression;
    match method {
        Method::Off if c.is_on() => Err("compression is on though none was offered".into()),
        Method::One(a) if !c.is_on() || !c.algorithms().contains(&a) => Err(format!(
            "{} offered but the server settled {:?}",
            a.name(),
            c.algorithms()
        )),
        Method::Auto if c.algorithms().len() < general_algorithms().len() => Err(format!(
            "every algorithm offered but the server settled {:?}",
            c.algorithms()
        )),
        _ => Ok(()),
    }
}

/// What one run moves: the data set's first `size` bytes, down from its file and up to a
/// new one.
struct Work<'a> {
    set: &'a DataSet,
    size: u64,
    method: Method,
}

/// One session: a download of the data set's file, then an upload of the same bytes.
fn one_run(
    ctx: &Ctx,
    net: &Net,
    server: &SmbqServer,
    ep: &Endpoint,
    w: &Work,
) -> Result<(Pass, Pass), String> {
    let e = ep.clone();
    let tree = net.on_client(async move { e.open_tree().await })??;
    check_protection(ep.target, &tree)?;
    check_compression(&tree, w.method)?;
    let up = format!("{DIR}/upload-{}-{}.bin", w.set.name, ep.target.name());
    let data = w
        .set
        .bytes
        .slice(..usize::try_from(w.size).map_err(|e| e.to_string())?);
    let read = timed(
        net,
        server,
        (w.size, "sent"),
        read_file(tree.clone(), w.set.path(), w.size),
    );
    let write = read.and_then(|read| {
        let job = write_file(tree.clone(), up.clone(), data);
        Ok((read, timed(net, server, (w.size, "received"), job)?))
    });
    let _ = net.on_client(async move {
        let _ = tree.disconnect().await;
        let _ = tree.session().logoff().await;
    });
    let _ = std::fs::remove_file(ctx.data.join(&up));
    write
}

/// The repeats of one row, summarised.
fn row(
    link: &'static str,
    net: &Net,
    target: Target,
    w: &Work,
    passes: &[(Pass, Pass)],
) -> CompressionRow {
    let s =
        |f: &dyn Fn(&(Pass, Pass)) -> f64| Summary::of(&passes.iter().map(f).collect::<Vec<_>>());
    let ratios = |f: &dyn Fn(&(Pass, Pass)) -> Option<f64>| {
        Summary::of(&passes.iter().filter_map(f).collect::<Vec<_>>())
    };
    CompressionRow {
        data: w.set.name,
        data_about: w.set.about.clone(),
        link,
        link_desc: net.desc.clone(),
        target,
        algorithm: w.method.name(),
        offered: w.method.offer().into_iter().map(Algorithm::name).collect(),
        bytes: w.size,
        read_mb_s: s(&|p| p.0.mb_s),
        write_mb_s: s(&|p| p.1.mb_s),
        read_client_cpu_s_per_gb: s(&|p| p.0.client_cpu_s_per_gb),
        read_server_cpu_s_per_gb: s(&|p| p.0.server_cpu_s_per_gb),
        write_client_cpu_s_per_gb: s(&|p| p.1.client_cpu_s_per_gb),
        write_server_cpu_s_per_gb: s(&|p| p.1.server_cpu_s_per_gb),
        read_ratio: ratios(&|p| p.0.ratio),
        write_ratio: ratios(&|p| p.1.ratio),
    }
}

/// Every transport, data set and algorithm on one link's server.
fn measure(
    ctx: &Ctx,
    net: &Net,
    link: &'static str,
    server: &SmbqServer,
    (sets, prog): (&[DataSet], &mut Progress),
) -> Result<Vec<CompressionRow>, String> {
    let (u, p) = (ctx.user.clone(), ctx.password.clone());
    let (qa, pin, qs) = (
        server.quic.ok_or("no QUIC address")?,
        server.pin,
        server.quic_settings.clone(),
    );
    let quic = net.on_client(async move { Endpoint::quic(qa, pin, qs, &u, &p) })??;
    let tcp = Endpoint::tcp(
        Target::SmbqTcpEnc,
        server.tcp.ok_or("no TCP address")?,
        &ctx.user,
        &ctx.password,
    );
    let size = size(ctx.scale, link);
    let mut rows = Vec::new();
    for target in TARGETS {
        let base = if target == Target::SmbqQuic {
            &quic
        } else {
            &tcp
        };
        for set in sets {
            let work: Vec<(Work, Endpoint)> = plan(set.name)
                .into_iter()
                .filter(|m| selected(&[set.name, link, target.name(), m.name()].map(Some)))
                .map(|method| {
                    let ep = base.clone().with_compression(method.offer());
                    (Work { set, size, method }, ep)
                })
                .collect();
            // The repeats go round the rows (off, each algorithm, auto, then off again), so
            // a drift of this noisy machine's speed falls on both sides of each ratio alike:
            // one row's repeats back to back put the loopback ratios 5-10 % off either way.
            let mut passes: Vec<Vec<_>> = work.iter().map(|_| Vec::new()).collect();
            for r in 0..ctx.repeats() {
                for ((w, ep), done) in work.iter().zip(passes.iter_mut()) {
                    prog.step(&format!(
                        "{} {link} {} {} (repeat {})",
                        set.name,
                        target.name(),
                        w.method.name(),
                        r + 1
                    ));
                    done.push(one_run(ctx, net, server, ep, w)?);
                }
            }
            for ((w, _), done) in work.iter().zip(&passes) {
                rows.push(row(link, net, target, w, done));
            }
        }
    }
    let _ = net.on_client(async move { drop(quic) });
    Ok(rows)
}

/// Whether a row is measured: `SMBQ_BENCH_ROWS` (a development aid, e.g.
/// `text,100mbit,lz77_huffman`) keeps the rows whose data set, link, target or algorithm
/// names match one of each group of its words: a word names what it filters by what it
/// matches. Unset: every row.
fn selected(names: &[Option<&str>; 4]) -> bool {
    let Ok(filter) = std::env::var("SMBQ_BENCH_ROWS") else {
        return true;
    };
    filter_rows(&filter, names)
}

/// Whether `names` (data set, link, target, algorithm; None: any) pass `filter`'s
/// comma-separated words. A word filters the position whose names it is one of; words of
/// the same position are alternatives (`text,vmdisk`); a position no word names passes.
fn filter_rows(filter: &str, names: &[Option<&str>; 4]) -> bool {
    let words: Vec<&str> = filter
        .split(',')
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    let universe: [Vec<&str>; 4] = [
        vec!["text", "vmdisk", "random"],
        LINKS.to_vec(),
        TARGETS.iter().map(|t| t.name()).collect(),
        algorithm_order(),
    ];
    names.iter().zip(universe.iter()).all(|(name, all)| {
        let here: Vec<&&str> = words.iter().filter(|w| all.contains(w)).collect();
        here.is_empty() || name.is_none_or(|n| here.iter().any(|w| **w == n))
    })
}

/// Starts the server on one link, measures, and stops it.
fn on_link(
    ctx: &mut Ctx,
    link: &'static str,
    sets: &[DataSet],
    prog: &mut Progress,
) -> Result<Vec<CompressionRow>, String> {
    let net = ctx.net(Some(link_desc(link)))?;
    let r = ctx
        .start_smbq_with_metrics(&net, true, &format!("compression-{link}"))
        .and_then(|server| {
            let r = measure(ctx, &net, link, &server, (sets, prog));
            let stopped = server.stop();
            let rows = r?;
            stopped.map(|()| rows)
        });
    ctx.stop_net(net);
    r
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<CompressionRow>, String> {
    let links: Vec<&'static str> = if ctx.can_emulate() {
        LINKS.to_vec()
    } else {
        ctx.note_error("compression: emulated links skipped (they need root)".into());
        vec!["loopback"]
    };
    let largest = links.iter().map(|l| size(ctx.scale, l)).max().unwrap_or(0);
    let sets = prepare(ctx, largest)?;
    for s in &sets {
        eprintln!("bench: compression data set {}: {}", s.name, s.about);
    }
    let runs = links
        .iter()
        .flat_map(|l| TARGETS.iter().map(move |t| (*l, t.name())))
        .flat_map(|(l, t)| {
            sets.iter().flat_map(move |s| {
                plan(s.name)
                    .into_iter()
                    .map(move |m| [s.name, l, t, m.name()])
            })
        })
        .filter(|names| selected(&names.map(Some)))
        .count();
    let mut prog = Progress::new("compression", runs * ctx.repeats());
    let mut rows = Vec::new();
    for link in links {
        if std::env::var("SMBQ_BENCH_ROWS")
            .is_ok_and(|f| !filter_rows(&f, &[None, Some(link), None, None]))
        {
            continue;
        }
        rows.extend(on_link(ctx, link, &sets, &mut prog)?);
    }
    prog.finish();
    for s in &sets {
        let _ = std::fs::remove_file(ctx.data.join(s.path()));
    }
    Ok(rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn the_row_filter_keeps_what_each_named_position_allows() {
        let row = |d, l, t, a| [Some(d), Some(l), Some(t), Some(a)];
        let f = "text,vmdisk,100mbit,lz77_huffman,off";
        assert!(filter_rows(f, &row("text", "100mbit", "smbq-quic", "off")));
        assert!(filter_rows(
            f,
            &row("vmdisk", "100mbit", "smbq-tcp-enc", "lz77_huffman")
        ));
        assert!(!filter_rows(
            f,
            &row("random", "100mbit", "smbq-quic", "off")
        ));
        assert!(!filter_rows(
            f,
            &row("text", "loopback", "smbq-quic", "off")
        ));
        assert!(!filter_rows(f, &row("text", "100mbit", "smbq-quic", "lz4")));
        assert!(filter_rows(f, &[None, Some("100mbit"), None, None]));
        assert!(!filter_rows(f, &[None, Some("1gbit"), None, None]));
        assert!(filter_rows("", &row("random", "1gbit", "smbq-quic", "lz4")));
    }

    #[test]
    fn plans_start_without_compression_and_keep_random_short() {
        for d in DATA_SETS {
            let p = plan(d);
            assert_eq!(p[0], Method::Off);
            assert_eq!(p.last(), Some(&Method::Auto));
            assert!(p.contains(&Method::One(Algorithm::Lz4)), "{d}");
            assert!(!p.contains(&Method::One(Algorithm::PatternV1)), "{d}");
        }
        assert_eq!(plan("text").len(), 2 + general_algorithms().len());
        assert!(plan("random").len() <= 4);
        assert_eq!(
            Method::One(Algorithm::Lz4).offer(),
            vec![Algorithm::Lz4, Algorithm::PatternV1]
        );
        assert!(Method::Off.offer().is_empty());
        assert_eq!(Method::Auto.offer().len(), Algorithm::ALL.len());
    }

    #[test]
    fn data_sets_are_deterministic_and_shaped() {
        let a = vmdisk(4 << 20);
        assert_eq!(a, vmdisk(4 << 20));
        let zero_blocks = a
            .chunks(DISK_BLOCK)
            .filter(|b| b.iter().all(|x| *x == 0))
            .count();
        // 64 blocks, about 60 % of them zero.
        assert!((25..=50).contains(&zero_blocks), "{zero_blocks}");
        let text = log_lines(100_000);
        assert!(text.len() >= 100_000 && text.is_ascii());
        assert_eq!(repeated(b"abc", 7), b"abcabca");
        let mut r = [0u8; 13];
        XorShift(1).fill(&mut r);
        assert!(r.iter().any(|x| *x != 0));
    }

    #[test]
    fn counters_are_summed_per_direction() {
        let text = "# TYPE smbq_compressed_wire_bytes counter\n\
            smbq_compressed_wire_bytes_total{direction=\"sent\",algorithm=\"lz4\"} 100\n\
            smbq_compressed_wire_bytes_total{direction=\"sent\",algorithm=\"pattern_v1\"} 20\n\
            smbq_compressed_wire_bytes_total{direction=\"received\",algorithm=\"any\"} 7\n\
            smbq_compressed_plain_bytes_total{direction=\"sent\",algorithm=\"lz4\"} 900\n";
        assert_eq!(
            counter_sum(text, "smbq_compressed_wire_bytes_total", "sent"),
            120.0
        );
        assert_eq!(
            counter_sum(text, "smbq_compressed_wire_bytes_total", "received"),
            7.0
        );
        assert_eq!(
            counter_sum(text, "smbq_compressed_plain_bytes_total", "received"),
            0.0
        );
    }
}
