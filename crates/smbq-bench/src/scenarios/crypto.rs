//! Scenario 6, crypto: how fast smbq-crypto signs, verifies, seals and opens SMB2 messages,
//! in GB/s (10^9 bytes per second) at 1 KiB, 64 KiB and 1 MiB, in one thread, with
//! `openssl speed` on the same primitives and sizes in the same run as the reference.
//!
//! Everything goes through smbq-crypto's public API the way the engine (smbq-proto) calls it:
//! `Signer::sign` on an outgoing message whose Signature field is zero, `Signer::verify` on a
//! received signed request (which stays unmodified), `Sealer::seal_in_place` and
//! `Sealer::open_in_place` on the payload under a transform header, with the header's nonce
//! and its 32 bytes of AAD. Time is the measuring thread's CPU time, as `openssl speed`
//! divides by its user CPU time, so other load on the machine slows neither side's number.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use rand::Rng;
use smbq_crypto::{
    Cipher, SIGNATURE, Sealer, Signer, SigningAlgorithm, TRANSFORM_AAD, TRANSFORM_HEADER_LEN,
    TRANSFORM_NONCE, TRANSFORM_SIGNATURE,
};

use crate::progress::Progress;
use crate::stats::{Summary, ratio};
use crate::{Ctx, Scale};

/// Message sizes: what one call signs (the whole SMB2 message) or seals (the payload under the
/// transform header).
pub const SIZES: [usize; 3] = [1024, 64 * 1024, 1024 * 1024];

/// Every algorithm smbq negotiates, signing first.
pub const ALGORITHMS: [Algo; 7] = [
    Algo::Sign(SigningAlgorithm::AesGmac),
    Algo::Sign(SigningAlgorithm::AesCmac),
    Algo::Sign(SigningAlgorithm::HmacSha256),
    Algo::Enc(Cipher::Aes128Gcm),
    Algo::Enc(Cipher::Aes256Gcm),
    Algo::Enc(Cipher::Aes128Ccm),
    Algo::Enc(Cipher::Aes256Ccm),
];

/// Every measurement runs on one thread, and says so in its row.
pub const THREADS: usize = 1;
pub const CLOCK: &str = "thread CPU time";

/// Messages in a pool are this many bytes together (at least one message): each timed batch
/// goes once over the pool, which keeps the data in cache as `openssl speed` keeps its buffer.
const POOL_BYTES: usize = 256 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algo {
    Sign(SigningAlgorithm),
    Enc(Cipher),
}

impl Algo {
    pub fn name(self) -> &'static str {
        match self {
            Self::Sign(SigningAlgorithm::AesGmac) => "AES-128-GMAC",
            Self::Sign(SigningAlgorithm::AesCmac) => "AES-128-CMAC",
            Self::Sign(SigningAlgorithm::HmacSha256) => "HMAC-SHA256",
            Self::Enc(Cipher::Aes128Gcm) => "AES-128-GCM",
            Self::Enc(Cipher::Aes256Gcm) => "AES-256-GCM",
            Self::Enc(Cipher::Aes128Ccm) => "AES-128-CCM",
            Self::Enc(Cipher::Aes256Ccm) => "AES-256-CCM",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Self::Sign(_) => "signing",
            Self::Enc(_) => "encryption",
        }
    }

    pub fn ops(self) -> [Op; 2] {
        match self {
            Self::Sign(_) => [Op::Sign, Op::Verify],
            Self::Enc(_) => [Op::Seal, Op::Open],
        }
    }

    /// The `openssl speed` arguments (before `-mr -seconds S -bytes N`) that measure the same
    /// primitive, and the name its `-mr` output gives the result. MACs have no separate
    /// verification in `openssl speed`: sign and verify share one reference.
    pub fn openssl(self, op: Op) -> (Vec<&'static str>, &'static str) {
        let decrypt = op == Op::Open;
        let aead = |evp: &'static str, name: &'static str| {
            let mut args = vec!["-aead", "-evp", evp];
            if decrypt {
                args.push("-decrypt");
            }
            (args, name)
        };
        match self {
            Self::Sign(SigningAlgorithm::AesGmac) => (vec!["ghash"], "ghash"),
            Self::Sign(SigningAlgorithm::AesCmac) => {
                (vec!["-cmac", "aes-128-cbc"], "cmac(aes-128-cbc)")
            }
            Self::Sign(SigningAlgorithm::HmacSha256) => (vec!["-hmac", "sha256"], "hmac(sha256)"),
            Self::Enc(Cipher::Aes128Gcm) => aead("aes-128-gcm", "AES-128-GCM"),
            Self::Enc(Cipher::Aes256Gcm) => aead("aes-256-gcm", "AES-256-GCM"),
            Self::Enc(Cipher::Aes128Ccm) => aead("aes-128-ccm", "AES-128-CCM"),
            Self::Enc(Cipher::Aes256Ccm) => aead("aes-256-ccm", "AES-256-CCM"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Sign,
    Verify,
    Seal,
    Open,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Self::Sign => "sign",
            Self::Verify => "verify",
            Self::Seal => "seal",
            Self::Open => "open",
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct CryptoRow {
    pub algorithm: &'static str,
    /// "signing" or "encryption".
    pub kind: &'static str,
    pub operation: Op,
    /// Bytes per message.
    pub size: usize,
    /// smbq-crypto, GB/s (10^9 bytes per CPU second): min/median/max over the repeats.
    pub smbq_gb_s: Summary,
    /// `openssl speed` on the same primitive and size, GB/s per CPU second as it reports it:
    /// min/median/max over its runs (1 quick, 3 full); None when it could not be measured
    /// (`openssl_note` says why).
    pub openssl_gb_s: Option<Summary>,
    /// smbq's median / OpenSSL's median.
    pub ratio: Option<f64>,
    /// The `openssl speed` command line the reference came from.
    pub openssl_command: Option<String>,
    pub openssl_note: Option<String>,
    pub threads: usize,
    pub clock: &'static str,
}

/// How long to measure each cell.
#[derive(Clone, Debug)]
pub struct Plan {
    pub sizes: Vec<usize>,
    pub repeats: usize,
    /// Measured CPU time of each repeat.
    pub per_repeat: Duration,
}

impl Plan {
    /// About 0.1 s per cell quick and 0.75 s full, split over the repeats (5 by default:
    /// cells are cheap, and a median of one says nothing about noise).
    pub fn new(scale: Scale, repeats: Option<usize>) -> Self {
        let repeats = repeats.unwrap_or(5).max(1);
        let cell = match scale {
            Scale::Quick => 0.1,
            Scale::Full => 0.75,
        };
        Self {
            sizes: SIZES.to_vec(),
            repeats,
            per_repeat: Duration::from_secs_f64(cell / repeats as f64),
        }
    }

    pub fn cells(&self) -> usize {
        ALGORITHMS.len() * 2 * self.sizes.len()
    }
}

/// The reference for one cell.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    pub gb_s: Option<Summary>,
    pub command: Option<String>,
    pub note: Option<String>,
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<CryptoRow>, String> {
    let plan = Plan::new(ctx.scale, ctx.args.repeats);
    // `openssl speed -seconds` takes whole seconds: one run of 1 s per cell quick, three full.
    let runs = match ctx.scale {
        Scale::Quick => 1,
        Scale::Full => 3,
    };
    let mut openssl = OpenSsl::new(1, runs);
    if let Some(e) = &openssl.missing {
        ctx.note_error(format!(
            "crypto: openssl speed cannot run ({e}); the OpenSSL reference columns are empty"
        ));
    }
    let mut prog = Progress::new("crypto", plan.cells());
    let rows = measure(
        &plan,
        |algo, op, size| openssl.reference(algo, op, size),
        |what| prog.step(what),
    );
    prog.finish();
    for e in openssl.errors {
        ctx.note_error(format!("crypto: {e}"));
    }
    rows
}

/// Measures every cell of `plan`; `reference` supplies each cell's OpenSSL number right after
/// smbq's, so both see the machine in the same state; `step` hears of each cell first.
pub fn measure(
    plan: &Plan,
    mut reference: impl FnMut(Algo, Op, usize) -> Reference,
    mut step: impl FnMut(&str),
) -> Result<Vec<CryptoRow>, String> {
    let mut rows = Vec::new();
    for algo in ALGORITHMS {
        for &size in &plan.sizes {
            for op in algo.ops() {
                step(&format!(
                    "{} {} {}",
                    algo.name(),
                    op.name(),
                    size_name(size)
                ));
                let gb_s = measure_cell(algo, op, size, plan)
                    .map_err(|e| format!("{} {} {size}: {e}", algo.name(), op.name()))?;
                let r = reference(algo, op, size);
                rows.push(CryptoRow {
                    algorithm: algo.name(),
                    kind: algo.kind(),
                    operation: op,
                    size,
                    smbq_gb_s: gb_s,
                    openssl_gb_s: r.gb_s,
                    ratio: ratio(Some(gb_s.median), r.gb_s.map(|g| g.median)),
                    openssl_command: r.command,
                    openssl_note: r.note,
                    threads: THREADS,
                    clock: CLOCK,
                });
            }
        }
    }
    Ok(rows)
}

/// "1 KiB", "64 KiB", "1 MiB".
pub fn size_name(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// CPU seconds this thread has run.
fn cpu_seconds() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// A pool of messages that one batch goes over once: returns (bytes, CPU seconds measured).
trait Batch {
    fn run(&mut self) -> Result<(u64, f64), String>;
}

fn measure_cell(algo: Algo, op: Op, size: usize, plan: &Plan) -> Result<Summary, String> {
    let count = (POOL_BYTES / size.max(1)).max(1);
    let mut batch: Box<dyn Batch> = match (algo, op) {
        (Algo::Sign(a), Op::Sign) => Box::new(SignBatch::new(a, size, count)?),
        (Algo::Sign(a), Op::Verify) => Box::new(VerifyBatch::new(a, size, count)?),
        (Algo::Enc(c), Op::Seal) => Box::new(SealBatch::new(c, size, count)?),
        (Algo::Enc(c), Op::Open) => Box::new(OpenBatch::new(c, size, count)?),
        _ => return Err(format!("{} has no {}", algo.name(), op.name())),
    };
    batch.run()?; // warm-up
    let want = plan.per_repeat.as_secs_f64();
    // A bound on the wall clock too, should the thread get little of the CPU.
    let wall_limit = Duration::from_secs_f64(want * 20.0 + 1.0);
    let mut rates = Vec::with_capacity(plan.repeats);
    for _ in 0..plan.repeats {
        let started = Instant::now();
        let (mut bytes, mut secs) = (0u64, 0.0);
        while secs < want && started.elapsed() < wall_limit {
            let (b, s) = batch.run()?;
            bytes += b;
            secs += s;
        }
        if secs <= 0.0 {
            return Err("no CPU time measured".into());
        }
        rates.push(bytes as f64 / secs / 1e9);
    }
    Ok(Summary::of(&rates))
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    rand::thread_rng().fill(v.as_mut_slice());
    v
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) -> Result<(), String> {
    buf.get_mut(at..at + bytes.len())
        .ok_or_else(|| format!("{} bytes do not fit at {at}", bytes.len()))?
        .copy_from_slice(bytes);
    Ok(())
}

/// A `size`-byte SMB2 message: a READ header (the server's response when `from_server`, else
/// the client's request) with SMB2_FLAGS_SIGNED and its own MessageId, then random bytes.
fn smb2_message(size: usize, message_id: u64, from_server: bool) -> Result<Vec<u8>, String> {
    let mut m = random_bytes(size.max(smbq_crypto::HEADER_LEN));
    put(&mut m, 0, b"\xfeSMB")?;
    put(&mut m, 4, &64u16.to_le_bytes())?; // StructureSize
    put(&mut m, 12, &8u16.to_le_bytes())?; // READ
    let flags: u32 = 0x8 | u32::from(from_server); // SIGNED, SERVER_TO_REDIR
    put(&mut m, 16, &flags.to_le_bytes())?;
    put(&mut m, 24, &message_id.to_le_bytes())?;
    m.get_mut(SIGNATURE).ok_or("short message")?.fill(0);
    Ok(m)
}

fn key(len: usize) -> Vec<u8> {
    random_bytes(len)
}

struct SignBatch {
    signer: Signer,
    msgs: Vec<Vec<u8>>,
}

impl SignBatch {
    fn new(alg: SigningAlgorithm, size: usize, count: usize) -> Result<Self, String> {
        let signer = Signer::new(alg, &key(16)).map_err(|e| e.to_string())?;
        let msgs = (0..count)
            .map(|i| smb2_message(size, i as u64, true))
            .collect::<Result<_, _>>()?;
        Ok(Self { signer, msgs })
    }
}

impl Batch for SignBatch {
    fn run(&mut self) -> Result<(u64, f64), String> {
        let mut bytes = 0u64;
        let t0 = cpu_seconds();
        for m in &mut self.msgs {
            // The engine signs freshly encoded messages, whose Signature field is zero.
            m.get_mut(SIGNATURE).ok_or("short message")?.fill(0);
            self.signer.sign(m).map_err(|e| e.to_string())?;
            bytes += m.len() as u64;
        }
        Ok((bytes, cpu_seconds() - t0))
    }
}

struct VerifyBatch {
    signer: Signer,
    msgs: Vec<Vec<u8>>,
}

impl VerifyBatch {
    fn new(alg: SigningAlgorithm, size: usize, count: usize) -> Result<Self, String> {
        let signer = Signer::new(alg, &key(16)).map_err(|e| e.to_string())?;
        let mut msgs = Vec::with_capacity(count);
        for i in 0..count {
            let mut m = smb2_message(size, i as u64, false)?;
            signer.sign(&mut m).map_err(|e| e.to_string())?;
            msgs.push(m);
        }
        Ok(Self { signer, msgs })
    }
}

impl Batch for VerifyBatch {
    fn run(&mut self) -> Result<(u64, f64), String> {
        let mut bytes = 0u64;
        let t0 = cpu_seconds();
        for m in &self.msgs {
            // As received: the signature in place, the buffer shared and left unmodified.
            if !self.signer.verify(m) {
                return Err("a correctly signed message did not verify".into());
            }
            bytes += m.len() as u64;
        }
        Ok((bytes, cpu_seconds() - t0))
    }
}

/// One encrypted message: its transform header and the payload under it.
struct Sealed {
    header: [u8; TRANSFORM_HEADER_LEN],
    payload: Vec<u8>,
}

/// A transform header as the engine fills it in (MS-SMB2 3.3.4.1.4): the nonce (a message
/// counter, then "smb" in the rest of the cipher's nonce), OriginalMessageSize, Flags
/// (encrypted) and SessionId; the Signature follows from sealing.
fn transform_header(counter: u64, size: usize) -> Result<[u8; TRANSFORM_HEADER_LEN], String> {
    let mut h = [0u8; TRANSFORM_HEADER_LEN];
    put(&mut h, 0, b"\xfdSMB")?;
    set_nonce(&mut h, counter)?;
    put(&mut h, 36, &(size as u32).to_le_bytes())?;
    put(&mut h, 42, &1u16.to_le_bytes())?;
    put(&mut h, 44, &0x0000_0400_0000_0041u64.to_le_bytes())?;
    Ok(h)
}

fn set_nonce(h: &mut [u8; TRANSFORM_HEADER_LEN], counter: u64) -> Result<(), String> {
    put(h, TRANSFORM_NONCE.start, &counter.to_le_bytes())?;
    put(h, TRANSFORM_NONCE.start + 8, &[0x73, 0x6d, 0x62])
}

/// `Sealer::seal_in_place` on `m`, as the engine calls it: the cipher's part of the Nonce
/// field, the header's AAD, the tag into the Signature field.
fn seal_one(sealer: &Sealer, m: &mut Sealed) -> Result<(), String> {
    let nlen = sealer.cipher().nonce_len();
    let tag = {
        let nonce = m
            .header
            .get(TRANSFORM_NONCE.start..TRANSFORM_NONCE.start + nlen)
            .ok_or("nonce")?;
        let aad = m.header.get(TRANSFORM_AAD).ok_or("aad")?;
        sealer
            .seal_in_place(nonce, aad, &mut m.payload)
            .map_err(|e| e.to_string())?
    };
    m.header
        .get_mut(TRANSFORM_SIGNATURE)
        .ok_or("signature")?
        .copy_from_slice(&tag);
    Ok(())
}

fn open_one(sealer: &Sealer, m: &mut Sealed) -> Result<(), String> {
    let nlen = sealer.cipher().nonce_len();
    let mut tag = [0u8; 16];
    tag.copy_from_slice(m.header.get(TRANSFORM_SIGNATURE).ok_or("signature")?);
    let nonce = m
        .header
        .get(TRANSFORM_NONCE.start..TRANSFORM_NONCE.start + nlen)
        .ok_or("nonce")?;
    let aad = m.header.get(TRANSFORM_AAD).ok_or("aad")?;
    sealer
        .open_in_place(nonce, aad, &mut m.payload, &tag)
        .map_err(|e| format!("a correctly sealed message did not open: {e}"))
}

fn sealed_pool(cipher: Cipher, size: usize, count: usize) -> Result<(Sealer, Vec<Sealed>), String> {
    let sealer = Sealer::new(cipher, &key(cipher.key_len())).map_err(|e| e.to_string())?;
    let msgs = (0..count)
        .map(|i| {
            Ok(Sealed {
                header: transform_header(i as u64 + 1, size)?,
                payload: random_bytes(size),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok((sealer, msgs))
}

struct SealBatch {
    sealer: Sealer,
    msgs: Vec<Sealed>,
    counter: u64,
}

impl SealBatch {
    fn new(cipher: Cipher, size: usize, count: usize) -> Result<Self, String> {
        let (sealer, msgs) = sealed_pool(cipher, size, count)?;
        Ok(Self {
            sealer,
            msgs,
            counter: 0,
        })
    }
}

impl Batch for SealBatch {
    fn run(&mut self) -> Result<(u64, f64), String> {
        let mut bytes = 0u64;
        let t0 = cpu_seconds();
        for m in &mut self.msgs {
            // A fresh nonce for every message, as the engine's per-session counter gives.
            self.counter += 1;
            set_nonce(&mut m.header, self.counter)?;
            seal_one(&self.sealer, m)?;
            bytes += m.payload.len() as u64;
        }
        Ok((bytes, cpu_seconds() - t0))
    }
}

struct OpenBatch {
    sealer: Sealer,
    msgs: Vec<Sealed>,
}

impl OpenBatch {
    fn new(cipher: Cipher, size: usize, count: usize) -> Result<Self, String> {
        let (sealer, mut msgs) = sealed_pool(cipher, size, count)?;
        for m in &mut msgs {
            seal_one(&sealer, m)?;
        }
        Ok(Self { sealer, msgs })
    }
}

impl Batch for OpenBatch {
    fn run(&mut self) -> Result<(u64, f64), String> {
        let mut bytes = 0u64;
        let t0 = cpu_seconds();
        for m in &mut self.msgs {
            open_one(&self.sealer, m)?;
            bytes += m.payload.len() as u64;
        }
        let secs = cpu_seconds() - t0;
        // Not measured: sealing again under the same nonce brings back the same ciphertext
        // and tag, ready for the next batch.
        for m in &mut self.msgs {
            let tag = m.header.get(TRANSFORM_SIGNATURE).map(<[u8]>::to_vec);
            seal_one(&self.sealer, m)?;
            if m.header.get(TRANSFORM_SIGNATURE).map(<[u8]>::to_vec) != tag {
                return Err("sealing again gave another tag".into());
            }
        }
        Ok((bytes, secs))
    }
}

/// One result of `openssl speed -mr`.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeedResult {
    pub name: String,
    pub bytes: usize,
    pub bytes_per_s: f64,
}

/// Parses `openssl speed -mr` output (stdout and stderr together). `+H:size:...` names the
/// sizes and `+F:index:name:bytes_per_s:...` gives the rates (per CPU second unless
/// `-elapsed`); where no `+F` line came, `+DT:name:seconds:size` and `+R:count:name:seconds`
/// give count * size / seconds.
pub fn parse_speed_mr(text: &str) -> Vec<SpeedResult> {
    let mut sizes: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    let mut dt_size: HashMap<String, usize> = HashMap::new();
    let mut counted: Vec<(String, f64, f64)> = Vec::new();
    for line in text.lines().map(str::trim) {
        let fields: Vec<&str> = line.split(':').collect();
        match fields.as_slice() {
            ["+H", rest @ ..] => {
                sizes = rest.iter().filter_map(|s| s.parse().ok()).collect();
            }
            ["+F", _, name, rates @ ..] => {
                for (rate, &bytes) in rates.iter().zip(&sizes) {
                    if let Ok(r) = rate.parse::<f64>() {
                        out.push(SpeedResult {
                            name: name.to_string(),
                            bytes,
                            bytes_per_s: r,
                        });
                    }
                }
            }
            ["+DT", name, _, size] => {
                if let Ok(s) = size.parse() {
                    dt_size.insert(name.to_string(), s);
                }
            }
            ["+R", count, name, secs] => {
                if let (Ok(c), Ok(s)) = (count.parse::<f64>(), secs.parse::<f64>()) {
                    counted.push((name.to_string(), c, s));
                }
            }
            _ => {}
        }
    }
    if out.is_empty() {
        for (name, count, secs) in counted {
            if let Some(&bytes) = dt_size.get(&name)
                && secs > 0.0
            {
                out.push(SpeedResult {
                    name,
                    bytes,
                    bytes_per_s: count * bytes as f64 / secs,
                });
            }
        }
    }
    out
}

/// Runs `openssl speed` for the references, `runs` times per command line.
struct OpenSsl {
    seconds: u32,
    runs: usize,
    /// Why openssl cannot run at all, if it cannot.
    missing: Option<String>,
    cache: HashMap<String, Result<Summary, String>>,
    errors: Vec<String>,
}

impl OpenSsl {
    fn new(seconds: u32, runs: usize) -> Self {
        let missing = match Command::new("openssl").arg("version").output() {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!("`openssl version` exited with {}", o.status)),
            Err(e) => Some(format!("openssl: {e}")),
        };
        Self {
            seconds,
            runs: runs.max(1),
            missing,
            cache: HashMap::new(),
            errors: Vec::new(),
        }
    }

    fn reference(&mut self, algo: Algo, op: Op, size: usize) -> Reference {
        if let Some(e) = &self.missing {
            return Reference {
                note: Some(format!("openssl speed cannot run: {e}")),
                ..Reference::default()
            };
        }
        let (prim, name) = algo.openssl(op);
        let (secs, bytes) = (self.seconds.to_string(), size.to_string());
        let mut args = vec!["speed", "-mr", "-seconds", &secs, "-bytes", &bytes];
        args.extend(prim);
        let command = format!("openssl {}", args.join(" "));
        let result = match self.cache.get(&command) {
            Some(r) => r.clone(),
            None => {
                let r = (0..self.runs)
                    .map(|_| speed(&args, name, size).map(|b| b / 1e9))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|v| Summary::of(&v));
                if let Err(e) = &r {
                    self.errors.push(format!("`{command}`: {e}"));
                }
                self.cache.insert(command.clone(), r.clone());
                r
            }
        };
        let shared = matches!(algo, Algo::Sign(_))
            .then(|| "openssl speed has no MAC verification: the sign reference".to_string());
        match result {
            Ok(g) => Reference {
                gb_s: Some(g),
                command: Some(command),
                note: if op == Op::Verify { shared } else { None },
            },
            Err(e) => Reference {
                gb_s: None,
                command: Some(command),
                note: Some(e),
            },
        }
    }
}

/// Bytes per second of `name` at `size` from one `openssl speed` run.
fn speed(args: &[&str], name: &str, size: usize) -> Result<f64, String> {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .map_err(|e| format!("openssl: {e}"))?;
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr)
            .lines()
            .find(|l| !l.starts_with('+') && !l.trim().is_empty())
            .unwrap_or("no message")
            .to_string();
        return Err(format!("openssl speed failed ({}): {why}", out.status));
    }
    parse_speed_mr(&text)
        .into_iter()
        .find(|r| r.name.eq_ignore_ascii_case(name) && r.bytes == size)
        .map(|r| r.bytes_per_s)
        .filter(|b| *b > 0.0)
        .ok_or_else(|| format!("no result for {name} at {size} bytes in openssl's output"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_is_measured_at_tiny_scale() {
        let plan = Plan {
            sizes: SIZES.to_vec(),
            repeats: 2,
            per_repeat: Duration::from_millis(1),
        };
        let mut steps = 0;
        let rows = measure(&plan, |_, _, _| Reference::default(), |_| steps += 1).unwrap();
        assert_eq!(rows.len(), plan.cells());
        assert_eq!(steps, plan.cells());
        for algo in ALGORITHMS {
            for op in algo.ops() {
                for size in SIZES {
                    let r = rows
                        .iter()
                        .find(|r| r.algorithm == algo.name() && r.operation == op && r.size == size)
                        .unwrap_or_else(|| panic!("{} {op:?} {size} missing", algo.name()));
                    assert_eq!(r.smbq_gb_s.n, 2, "{r:?}");
                    assert!(
                        r.smbq_gb_s.min > 0.0 && r.smbq_gb_s.median.is_finite(),
                        "{r:?}"
                    );
                    assert_eq!(r.kind, algo.kind());
                    assert_eq!((r.threads, r.openssl_gb_s, r.ratio), (1, None, None));
                }
            }
        }
    }

    #[test]
    fn references_fill_gb_s_and_ratio() {
        let plan = Plan {
            sizes: vec![1024],
            repeats: 1,
            per_repeat: Duration::from_millis(1),
        };
        let rows = measure(
            &plan,
            |algo, op, _| Reference {
                gb_s: Some(Summary::of(&[2.0])),
                command: Some(format!("openssl speed {}", algo.openssl(op).0.join(" "))),
                note: None,
            },
            |_| {},
        )
        .unwrap();
        for r in &rows {
            assert_eq!(r.openssl_gb_s.map(|g| g.median), Some(2.0));
            let ratio = r.ratio.unwrap();
            assert!((ratio - r.smbq_gb_s.median / 2.0).abs() < 1e-12);
        }
        let open = rows
            .iter()
            .find(|r| r.algorithm == "AES-256-CCM" && r.operation == Op::Open)
            .unwrap();
        assert_eq!(
            open.openssl_command.as_deref(),
            Some("openssl speed -aead -evp aes-256-ccm -decrypt")
        );
    }

    // Captured on this project's 2-core CI machine (OpenSSL 3.0.19, Debian 12):
    // `openssl speed -mr -aead -decrypt -seconds 1 -bytes 65536 -evp aes-256-ccm`, stdout then
    // stderr.
    const AEAD_SAMPLE: &str = "+H:65536
+F:25:AES-256-CCM:1157365760.00
+DT:AES-256-CCM:1:65536
+R:17660:AES-256-CCM:1.000000
";

    // `openssl speed -mr -seconds 1 -bytes 1024 -hmac sha256 -cmac aes-128-cbc ghash`, both
    // streams as they interleaved.
    const MAC_SAMPLE: &str = "+DT:hmac(sha256):1:1024
+R:1221973:hmac(sha256):0.770000
+DT:ghash:1:1024
+R:7080774:ghash:0.750000
+DT:cmac(aes-128-cbc):1:1024
+R:1045744:cmac(aes-128-cbc):0.860000
+H:1024
+F:9:hmac(sha256):1625065392.21
+F:26:ghash:9667616768.00
+F:28:cmac(aes-128-cbc):1245164948.84
";

    #[test]
    fn parses_openssl_speed_mr_output() {
        assert_eq!(
            parse_speed_mr(AEAD_SAMPLE),
            vec![SpeedResult {
                name: "AES-256-CCM".into(),
                bytes: 65536,
                bytes_per_s: 1157365760.0
            }]
        );
        let macs = parse_speed_mr(MAC_SAMPLE);
        let names: Vec<_> = macs.iter().map(|r| (r.name.as_str(), r.bytes)).collect();
        assert_eq!(
            names,
            [
                ("hmac(sha256)", 1024),
                ("ghash", 1024),
                ("cmac(aes-128-cbc)", 1024)
            ]
        );
        assert_eq!(macs[1].bytes_per_s, 9667616768.0);
        // Every name the scenario looks for is one openssl prints.
        for algo in [ALGORITHMS[0], ALGORITHMS[1], ALGORITHMS[2]] {
            let name = algo.openssl(Op::Sign).1;
            assert!(macs.iter().any(|r| r.name == name), "{name}");
        }
    }

    #[test]
    fn falls_back_to_counts_without_f_lines() {
        let only_stderr: String = AEAD_SAMPLE
            .lines()
            .filter(|l| l.starts_with("+DT") || l.starts_with("+R"))
            .map(|l| format!("{l}\n"))
            .collect();
        let r = parse_speed_mr(&only_stderr);
        assert_eq!(r.len(), 1);
        assert!((r[0].bytes_per_s - 17660.0 * 65536.0).abs() < 1.0);
        assert!(parse_speed_mr("speed: nosuch is an unknown cipher or digest\n").is_empty());
    }

    #[test]
    fn sizes_are_named_in_binary_units() {
        assert_eq!(size_name(1024), "1 KiB");
        assert_eq!(size_name(65536), "64 KiB");
        assert_eq!(size_name(1 << 20), "1 MiB");
        assert_eq!(size_name(100), "100 B");
    }

    #[test]
    fn openssl_measures_a_primitive_when_installed() {
        let mut o = OpenSsl::new(1, 1);
        if o.missing.is_some() {
            return;
        }
        let r = o.reference(ALGORITHMS[2], Op::Sign, 1024);
        assert!(r.gb_s.is_some_and(|g| g.n == 1 && g.median > 0.0), "{r:?}");
        // Verification reuses the run.
        let v = o.reference(ALGORITHMS[2], Op::Verify, 1024);
        assert_eq!(v.gb_s, r.gb_s);
        assert!(o.errors.is_empty(), "{:?}", o.errors);
    }
}
