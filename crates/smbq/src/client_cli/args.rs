//! Flags shared by the client commands, and their value parsers.

use std::path::PathBuf;

use smbq_client::{ClientConfig, EncryptionPolicy};
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_wire::Dialect;

use crate::cert;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Transport {
    Quic,
    Tcp,
}

/// How to reach and authenticate to the server.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConnArgs {
    /// Use only this transport. Default: both raced, QUIC first and TCP after a short head
    /// start (250 ms; at once where QUIC did not answer last time), the first to connect
    /// wins; a QUIC certificate the client does not trust is an error, never a fallback.
    #[arg(long, value_enum)]
    pub transport: Option<Transport>,
    /// TCP port (default: the URL's :PORT, else 445). Also `?tcp-port=N` in the URL.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub tcp_port: Option<u16>,
    /// QUIC (UDP) port (default: the URL's :PORT, else 443). Also `?quic-port=N` in the URL.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub quic_port: Option<u16>,
    /// Log on with Kerberos: a ticket for cifs/HOST from the credential cache (`kinit` first;
    /// KRB5CCNAME names another cache). Without this flag Kerberos is still tried, before
    /// asking for a password, when no password is given and the cache holds a ticket.
    #[arg(long, conflicts_with_all = ["anonymous", "credentials"])]
    pub kerberos: bool,
    /// Connect to this address instead of resolving the URL's host, which still names the
    /// server (its Kerberos principal cifs/HOST, its certificate, \\HOST\share), like
    /// smbclient's -I.
    #[arg(long, value_name = "ADDR")]
    pub ip: Option<std::net::IpAddr>,
    /// Log on anonymously (a null session: IPC$ and guest shares only). Without it, a URL
    /// that names no user logs on as the local user, as smbclient and ssh do.
    #[arg(long, short = 'N', conflicts_with = "credentials")]
    pub anonymous: bool,
    /// Trust the server certificate if it chains to a CA in this PEM file (QUIC).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pin", "insecure"])]
    pub ca: Option<PathBuf>,
    /// Trust exactly the server certificate with this SHA-256 (what `smbq cert show` prints).
    #[arg(long, value_name = "sha256:HEX", value_parser = parse_pin, conflicts_with = "insecure")]
    pub pin: Option<[u8; 32]>,
    /// Accept any server certificate. Anyone on the path can then impersonate the server.
    #[arg(long)]
    pub insecure: bool,
    /// Client certificate (PEM chain) for servers that require one over QUIC.
    #[arg(long, value_name = "FILE", requires = "client_key")]
    pub client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "client_cert")]
    pub client_key: Option<PathBuf>,
    /// smbclient-style file with `username =`, `password =`, `domain =` lines.
    #[arg(long, short = 'A', value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// Offer only these dialects (repeatable): 3.1.1, 3.0.2, 3.0, 2.1, 2.0.2. Default: all.
    #[arg(long, value_name = "DIALECT", value_parser = parse_dialect)]
    pub dialect: Vec<Dialect>,
    /// Ciphers to offer, most preferred first (repeatable): aes-128-gcm, aes-256-gcm,
    /// aes-128-ccm, aes-256-ccm.
    #[arg(long, value_name = "CIPHER", value_parser = parse_cipher)]
    pub cipher: Vec<Cipher>,
    /// Signing algorithms to offer, most preferred first (repeatable): gmac, cmac, hmac-sha256.
    /// Default: all three, gmac first; cmac first with `--channels` above 1 (under gmac a
    /// session can be bound once only: docs/security.md).
    #[arg(long, value_name = "ALG", value_parser = parse_signing)]
    pub signing: Vec<SigningAlgorithm>,
    /// Encrypt every message (SMB3 encryption); fail if the server cannot.
    #[arg(long)]
    pub encrypt: bool,
    /// Start with an SMB1 multi-protocol NEGOTIATE, as Windows does.
    #[arg(long)]
    pub smb1_negotiate: bool,
    /// Over QUIC, do not offer to rely on TLS instead of SMB3 encryption.
    #[arg(long)]
    pub no_transport_security: bool,
    /// SMB 3.1.1 compression: WRITE data compressed and READs asking for compressed data,
    /// where it pays. On by default over QUIC; `--compress` turns it on over TCP too, and
    /// `--compress ALG[,ALG...]` offers only those, in that order (lz4, pattern_v1, lz77,
    /// lz77_huffman, lznt1).
    #[arg(long, value_name = "ALGS", num_args = 0..=1, default_missing_value = "all",
          value_parser = parse_compress, conflicts_with = "no_compress")]
    pub compress: Option<CompressList>,
    /// No compression, over QUIC either.
    #[arg(long)]
    pub no_compress: bool,
    /// Compress whenever it shrinks the data, even where the link is faster than compressing
    /// (by default compression steps aside then): for metered links.
    #[arg(long, conflicts_with = "no_compress")]
    pub compress_always: bool,
    /// Over QUIC, data streams to ask an smbq server for besides the control stream
    /// (smbq's multi-stream extension, docs/multistream.md): requests of different files
    /// then do not wait behind each other's lost packets. 0 keeps one stream, as Windows
    /// does. Default: 4.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=64))]
    pub streams: Option<u16>,
    /// Connections to spread READ and WRITE over (SMB 3 multichannel: the session is bound to
    /// N-1 more connections to the same address, of the first one's transport). Needs a
    /// password logon and a server that offers multichannel (over QUIC, smbq's `[quic]
    /// multichannel`; Windows offers none there); otherwise one connection is used, with a note.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=32))]
    pub channels: u16,
    /// Largest QUIC packet to probe for and accept (MTU-discovery bound, bytes). The default,
    /// 1452, is safe on the internet; on a LAN with jumbo frames raise it on both ends (up to
    /// 8952, with `[quic] mtu_upper_bound` on the server) for about twice the throughput.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(i64::from(smbq_transport::MIN_MTU)..=i64::from(smbq_transport::MAX_MTU_UPPER_BOUND)))]
    pub quic_mtu: Option<u16>,
    /// QUIC implementation: quinn (the default) or msquic (Microsoft's MsQuic, in builds with
    /// the msquic feature).
    #[arg(long, value_name = "STACK", value_parser = |s: &str| s.parse::<smbq_transport::QuicStack>())]
    pub quic_stack: Option<smbq_transport::QuicStack>,
    /// Seconds to wait for a transport to connect.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub connect_timeout: f64,
    /// Seconds without progress after which the connection counts as lost (0: wait forever).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub timeout: f64,
    /// Seconds a `get` or `put` whose connection broke keeps trying to reconnect and go on
    /// (0: one attempt only).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub reconnect_for: f64,
    /// No progress bar, no summary line, no notices.
    #[arg(long, short)]
    pub quiet: bool,
}

impl ConnArgs {
    /// What the SMB client offers.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig {
            dialects: ClientConfig::all_dialects(),
            ..ClientConfig::default()
        };
        if !self.dialect.is_empty() {
            c.dialects.clone_from(&self.dialect);
        }
        if !self.cipher.is_empty() {
            c.ciphers.clone_from(&self.cipher);
        }
        if !self.signing.is_empty() {
            c.signing.clone_from(&self.signing);
        } else if self.channels > 1 {
            // A session bound to more channels signs each binding's legs with its own key
            // from MessageId 1 on: AES-GMAC would repeat nonces (MS-SMB2 3.1.4.1; issue 42),
            // AES-CMAC has none. See docs/security.md.
            c.signing = vec![
                SigningAlgorithm::AesCmac,
                SigningAlgorithm::AesGmac,
                SigningAlgorithm::HmacSha256,
            ];
        }
        if self.encrypt {
            c.encryption = EncryptionPolicy::Required;
        }
        c.smb1_first = self.smb1_negotiate;
        c.multichannel = self.channels > 1;
        // Client::connect turns it off again over TCP (MS-SMB2 2.2.3.1.5 is QUIC only).
        c.transport_security = !self.no_transport_security;
        if let Some(n) = self.streams {
            c.data_streams = n;
        }
        c.compress_adaptive = !self.compress_always;
        c.compression = match (&self.compress, self.no_compress) {
            (_, true) => Vec::new(),
            (Some(CompressList(list)), false) => list.clone(),
            (None, false) => default_compression(),
        };
        c
    }

    /// What to offer on a connection of `kind`: compression is on by default over QUIC only
    /// (where the link, not the CPU, is usually the limit); over TCP when asked.
    pub fn client_config_for(&self, kind: smbq_transport::TransportKind) -> ClientConfig {
        let mut c = self.client_config();
        if kind == smbq_transport::TransportKind::Tcp
            && self.compress.is_none()
            && !self.compress_always
        {
            c.compression.clear();
        }
        c
    }
}

/// `--compress` algorithms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompressList(pub Vec<smbq_compress::Algorithm>);

fn default_compression() -> Vec<smbq_compress::Algorithm> {
    smbq_compress::Algorithm::ALL
        .into_iter()
        .filter(|a| a.available())
        .collect()
}

fn parse_compress(s: &str) -> Result<CompressList, String> {
    if s == "all" {
        return Ok(CompressList(default_compression()));
    }
    let mut out = Vec::new();
    for name in s.split(',').filter(|n| !n.trim().is_empty()) {
        let a = smbq_compress::Algorithm::from_name(name)
            .filter(|a| a.available())
            .ok_or_else(|| {
                format!("unknown compression algorithm {name:?} (lz4, pattern_v1, lz77, lz77_huffman, lznt1)")
            })?;
        if !out.contains(&a) {
            out.push(a);
        }
    }
    if out.is_empty() {
        return Err("no compression algorithm given".into());
    }
    Ok(CompressList(out))
}

/// Transfer knobs (get, put).
#[derive(clap::Args, Clone, Debug)]
pub struct XferArgs {
    /// Copy directories recursively.
    #[arg(short, long)]
    pub recursive: bool,
    /// Resume from a partial NAME.part left by an earlier run; skip files already complete.
    #[arg(short = 'c', long = "continue")]
    pub resume: bool,
    /// Show a progress bar, or progress lines when stderr is not a terminal.
    #[arg(long)]
    pub progress: bool,
    /// READs or WRITEs in flight.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub depth: u16,
    /// Bytes per READ or WRITE (K and M suffixes allowed; capped by the server's maximum).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub chunk: u32,
}

fn parse_pin(s: &str) -> Result<[u8; 32], String> {
    cert::parse_fingerprint(s).map_err(|e| e.to_string())
}

pub fn parse_dialect(s: &str) -> Result<Dialect, String> {
    Ok(match s {
        "3.1.1" | "311" => Dialect::SMB3_1_1,
        "3.0.2" | "302" => Dialect::SMB3_0_2,
        "3.0" | "3.0.0" | "300" => Dialect::SMB3_0,
        "2.1" | "2.1.0" | "210" => Dialect::SMB2_1,
        "2.0.2" | "202" => Dialect::SMB2_0_2,
        _ => return Err(format!("{s:?}: expected 3.1.1, 3.0.2, 3.0, 2.1 or 2.0.2")),
    })
}

pub fn parse_cipher(s: &str) -> Result<Cipher, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "aes-128-gcm" => Cipher::Aes128Gcm,
        "aes-256-gcm" => Cipher::Aes256Gcm,
        "aes-128-ccm" => Cipher::Aes128Ccm,
        "aes-256-ccm" => Cipher::Aes256Ccm,
        _ => {
            return Err(format!(
                "{s:?}: expected aes-128-gcm, aes-256-gcm, aes-128-ccm or aes-256-ccm"
            ));
        }
    })
}

pub fn parse_signing(s: &str) -> Result<SigningAlgorithm, String> {
    Ok(match s.to_ascii_lowercase().as_str() {
        "gmac" | "aes-gmac" => SigningAlgorithm::AesGmac,
        "cmac" | "aes-cmac" => SigningAlgorithm::AesCmac,
        "hmac-sha256" | "hmac" => SigningAlgorithm::HmacSha256,
        _ => return Err(format!("{s:?}: expected gmac, cmac or hmac-sha256")),
    })
}

/// `1048576`, `64K`, `1M` (binary multiples).
pub fn parse_size(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let (num, mul) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (t.get(..i).unwrap_or_default(), 1u64 << 10),
        Some((i, 'm' | 'M')) => (t.get(..i).unwrap_or_default(), 1u64 << 20),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a size such as 65536, 64K or 1M"))?;
    n.checked_mul(mul)
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| (1..=64 << 20).contains(&v))
        .ok_or_else(|| format!("{s:?}: must be between 1 byte and 64M"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects() {
        assert_eq!(parse_dialect("3.1.1").unwrap(), Dialect::SMB3_1_1);
        assert_eq!(parse_dialect("3.0.2").unwrap(), Dialect::SMB3_0_2);
        assert_eq!(parse_dialect("3.0").unwrap(), Dialect::SMB3_0);
        assert_eq!(parse_dialect("2.1").unwrap(), Dialect::SMB2_1);
        assert_eq!(parse_dialect("2.0.2").unwrap(), Dialect::SMB2_0_2);
        assert!(parse_dialect("1.0").is_err());
    }

    #[test]
    fn ciphers_and_signing() {
        assert_eq!(parse_cipher("AES-256-GCM").unwrap(), Cipher::Aes256Gcm);
        assert_eq!(parse_cipher("aes-128-ccm").unwrap(), Cipher::Aes128Ccm);
        assert!(parse_cipher("des").is_err());
        assert_eq!(parse_signing("gmac").unwrap(), SigningAlgorithm::AesGmac);
        assert_eq!(
            parse_signing("hmac-sha256").unwrap(),
            SigningAlgorithm::HmacSha256
        );
        assert!(parse_signing("md5").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("64k").unwrap(), 64 << 10);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert!(parse_size("0").is_err());
        assert!(parse_size("65M").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("M").is_err());
    }

    #[test]
    fn config_from_flags() {
        let a = ConnArgs {
            dialect: vec![Dialect::SMB3_0],
            cipher: vec![Cipher::Aes256Ccm],
            signing: vec![SigningAlgorithm::HmacSha256],
            encrypt: true,
            smb1_negotiate: true,
            no_transport_security: true,
            streams: Some(0),
            ..ConnArgs::default()
        };
        let c = a.client_config();
        assert_eq!(c.dialects, vec![Dialect::SMB3_0]);
        assert_eq!(c.ciphers, vec![Cipher::Aes256Ccm]);
        assert_eq!(c.signing, vec![SigningAlgorithm::HmacSha256]);
        assert_eq!(c.encryption, EncryptionPolicy::Required);
        assert!(c.smb1_first);
        assert!(!c.transport_security);
        assert_eq!(c.data_streams, 0);
        let d = ConnArgs::default().client_config();
        assert_eq!(d.signing.first(), Some(&SigningAlgorithm::AesGmac));
        assert_eq!(d.data_streams, 4);
        assert_eq!(d.dialects, ClientConfig::all_dialects());
        assert!(d.transport_security);
        assert_eq!(d.encryption, EncryptionPolicy::Auto);
    }

    #[test]
    fn more_channels_prefer_cmac_unless_told() {
        let many = ConnArgs {
            channels: 3,
            ..ConnArgs::default()
        };
        assert_eq!(
            many.client_config().signing.first(),
            Some(&SigningAlgorithm::AesCmac)
        );
        let gmac = ConnArgs {
            channels: 3,
            signing: vec![SigningAlgorithm::AesGmac],
            ..ConnArgs::default()
        };
        assert_eq!(
            gmac.client_config().signing,
            vec![SigningAlgorithm::AesGmac]
        );
    }
}
