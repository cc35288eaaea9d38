//! NEGOTIATE from the client's side (MS-SMB2 3.2.4.2.2, 3.2.5.2).

use smbq_compress::Compression;
use smbq_crypto::{Cipher, SigningAlgorithm};
use smbq_wire::multi_stream::MultiStream;
use smbq_wire::negotiate::{
    Cipher as WireCipher, HashAlgorithm, NegotiateContext, NegotiateContextType, NegotiateRequest,
    NegotiateResponse, SigningAlgorithm as WireSigning, capabilities, compression_flags,
    security_mode, transport_flags,
};
use smbq_wire::posix;
use smbq_wire::smb1_negotiate::{DIALECT_SMB2_002, DIALECT_SMB2_WILDCARD, Smb1NegotiateRequest};
use smbq_wire::{Command, Dialect, Header, NtStatus, Writer};

use super::{ClientConfig, ClientError, ProtocolError};

/// What NEGOTIATE settled.
#[derive(Clone, Debug)]
pub struct Negotiated {
    pub dialect: Dialect,
    pub cipher: Option<Cipher>,
    pub signing: SigningAlgorithm,
    pub capabilities: u32,
    pub security_mode: u16,
    pub server_guid: [u8; 16],
    pub max_transact: u32,
    pub max_read: u32,
    pub max_write: u32,
    /// The server accepted SMB2_ACCEPT_TRANSPORT_LEVEL_SECURITY (MS-SMB2 3.2.5.2).
    pub transport_security: bool,
    /// The server's SPNEGO hint (negTokenInit2), for mechanism selection.
    pub security_blob: Vec<u8>,
    /// Data streams the server granted (docs/multistream.md 3); 0 if none.
    pub data_streams: u16,
    /// What the compression context settled (off unless both ends offered it).
    pub compression: Compression,
    /// The server took the SMB3 POSIX extensions (smbq_wire::posix).
    pub posix: bool,
}

impl Negotiated {
    /// Whether multi-credit requests are allowed (MS-SMB2 3.2.4.1.5).
    pub fn large_mtu(&self) -> bool {
        self.dialect != Dialect::SMB2_0_2 && self.capabilities & capabilities::LARGE_MTU != 0
    }

    pub fn server_requires_signing(&self) -> bool {
        self.security_mode & security_mode::SIGNING_REQUIRED != 0
    }

    /// The server offers multichannel on this connection (SMB2_GLOBAL_CAP_MULTI_CHANNEL).
    pub fn multichannel(&self) -> bool {
        self.capabilities & capabilities::MULTI_CHANNEL != 0
    }
}

/// The SMB1 NEGOTIATE a Windows client sends first, offering SMB 2.002 and SMB 2.???
/// (MS-SMB2 3.2.4.2.1). The reply is an SMB2 NEGOTIATE response.
pub fn smb1_negotiate_request() -> Vec<u8> {
    let req = Smb1NegotiateRequest {
        dialects: vec![b"NT LM 0.12", DIALECT_SMB2_002, DIALECT_SMB2_WILDCARD],
    };
    let mut w = Writer::new();
    req.encode(&mut w);
    w.into_vec()
}

/// An SMB2 NEGOTIATE request (header included) with the 3.1.1 contexts when 3.1.1 is offered.
pub fn negotiate_request(cfg: &ClientConfig, header: &Header, salt: &[u8; 32]) -> Vec<u8> {
    let multi_stream = MultiStream::new(cfg.data_streams).encode();
    let mut contexts = Vec::new();
    let mut caps = capabilities::LARGE_MTU;
    if cfg.dialects.iter().any(|d| d.is_smb3()) {
        caps |= capabilities::ENCRYPTION;
        // Only a caller that binds more connections (smbq-client's Client::bind) asks.
        if cfg.multichannel {
            caps |= capabilities::MULTI_CHANNEL;
        }
    }
    if cfg.dialects.contains(&Dialect::SMB3_1_1) {
        contexts.push(NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![HashAlgorithm::SHA512],
            salt,
        });
        if !cfg.ciphers.is_empty() {
            contexts.push(NegotiateContext::Encryption {
                ciphers: cfg
                    .ciphers
                    .iter()
                    .map(|c| WireCipher(c.wire_id()))
                    .collect(),
            });
        }
        if !cfg.signing.is_empty() {
            contexts.push(NegotiateContext::Signing {
                algorithms: cfg
                    .signing
                    .iter()
                    .map(|a| WireSigning(a.wire_id()))
                    .collect(),
            });
        }
        if cfg.transport_security {
            contexts.push(NegotiateContext::Transport {
                flags: transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
            });
        }
        if cfg.data_streams > 0 {
            contexts.push(MultiStream::context(&multi_stream));
        }
        if !cfg.compression.is_empty() {
            contexts.push(NegotiateContext::Compression {
                flags: compression_flags::CHAINED,
                algorithms: cfg.compression.iter().map(|a| a.wire()).collect(),
            });
        }
        if cfg.posix {
            contexts.push(NegotiateContext::Other {
                context_type: posix::NEGOTIATE_CONTEXT,
                data: &posix::TAG,
            });
        }
    }
    let req = NegotiateRequest {
        security_mode: if cfg.signing_required {
            security_mode::SIGNING_ENABLED | security_mode::SIGNING_REQUIRED
        } else {
            security_mode::SIGNING_ENABLED
        },
        capabilities: caps,
        client_guid: cfg.client_guid,
        dialects: cfg.dialects.clone(),
        contexts,
    };
    let mut w = Writer::new();
    let mut h = header.clone();
    h.command = Command::NEGOTIATE;
    h.encode(&mut w);
    req.encode(&mut w);
    w.into_vec()
}

/// Checks the server's choice against the offer (MS-SMB2 3.2.5.2): the dialect, cipher and
/// signing algorithm must be ones the client offered, and 3.1.1 must carry exactly one
/// preauth integrity context with SHA-512.
pub fn parse_negotiate_response(cfg: &ClientConfig, msg: &[u8]) -> Result<Negotiated, ClientError> {
    let header = Header::decode(msg)?;
    if header.status != NtStatus::SUCCESS {
        return Err(ClientError::Status {
            op: "NEGOTIATE",
            status: header.status,
        });
    }
    let r = NegotiateResponse::decode(msg)?;
    if r.dialect != Dialect::WILDCARD && !cfg.dialects.contains(&r.dialect) {
        return Err(ProtocolError::DialectNotOffered(r.dialect).into());
    }
    let mut n = Negotiated {
        dialect: r.dialect,
        cipher: None,
        signing: SigningAlgorithm::default_for_dialect(r.dialect.0),
        capabilities: r.capabilities,
        security_mode: r.security_mode,
        server_guid: r.server_guid,
        max_transact: r.max_transact_size,
        max_read: r.max_read_size,
        max_write: r.max_write_size,
        transport_security: false,
        security_blob: r.security_buffer.to_vec(),
        data_streams: 0,
        compression: Compression::default(),
        posix: false,
    };
    if r.dialect == Dialect::SMB3_1_1 {
        settle_contexts(cfg, &r.contexts, &mut n)?;
    } else if r.dialect.is_smb3() && r.capabilities & capabilities::ENCRYPTION != 0 {
        // 3.0 / 3.0.2 have one cipher, signalled by the capability (MS-SMB2 3.2.5.2).
        n.cipher = Some(Cipher::Aes128Ccm);
    }
    Ok(n)
}

/// The 3.1.1 negotiate contexts of the response: exactly one SHA-512 preauth integrity
/// context, and a cipher, signing algorithm, multi-stream grant and POSIX answer among those
/// offered. Over 80 lines: one short match arm per context type, each a rule of 3.2.5.2;
/// splitting them apart would only scatter the table.
fn settle_contexts(
    cfg: &ClientConfig,
    contexts: &[NegotiateContext<'_>],
    n: &mut Negotiated,
) -> Result<(), ClientError> {
    let mut preauth = 0;
    for c in contexts {
        match c {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms, ..
            } => {
                preauth += 1;
                if hash_algorithms.as_slice() != [HashAlgorithm::SHA512] {
                    return Err(ProtocolError::Violation("preauth hash is not SHA-512").into());
                }
            }
            NegotiateContext::Encryption { ciphers } => {
                let [one] = ciphers.as_slice() else {
                    return Err(ProtocolError::Violation("server must choose one cipher").into());
                };
                // 0 means "no common cipher" (MS-SMB2 3.3.5.2.5.2).
                if one.0 != 0 {
                    let c = Cipher::from_wire_id(one.0)
                        .filter(|c| cfg.ciphers.contains(c))
                        .ok_or(ProtocolError::Violation("cipher not offered"))?;
                    n.cipher = Some(c);
                }
            }
            NegotiateContext::Signing { algorithms } => {
                let [one] = algorithms.as_slice() else {
                    return Err(ProtocolError::Violation(
                        "server must choose one signing algorithm",
                    )
                    .into());
                };
                n.signing = SigningAlgorithm::from_wire_id(one.0)
                    .filter(|a| cfg.signing.contains(a))
                    .ok_or(ProtocolError::Violation("signing algorithm not offered"))?;
            }
            // MS-SMB2 3.2.5.2: only algorithms offered, chained only if asked for.
            NegotiateContext::Compression { flags, algorithms } => {
                n.compression = Compression::accept(&cfg.compression, true, *flags, algorithms)
                    .ok()
                    .filter(|_| !cfg.compression.is_empty())
                    .ok_or(ProtocolError::Violation(
                        "compression context not offered or out of range",
                    ))?;
            }
            NegotiateContext::Transport { flags } => {
                n.transport_security = cfg.transport_security
                    && flags & transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY != 0;
            }
            // The answer is the tag itself, byte for byte (as Samba's client checks).
            NegotiateContext::Other { context_type, data }
                if *context_type == posix::NEGOTIATE_CONTEXT =>
            {
                n.posix = cfg.posix && *data == posix::TAG;
            }
            // docs/multistream.md 3, rule 5: only an answer to our offer, within it.
            NegotiateContext::Other { context_type, data }
                if *context_type == NegotiateContextType::SMBQ_MULTI_STREAM =>
            {
                let granted = MultiStream::decode(data)
                    .ok()
                    .filter(|m| cfg.data_streams > 0 && m.acceptable_response(cfg.data_streams))
                    .ok_or(ProtocolError::Violation(
                        "multi-stream context not offered or out of range",
                    ))?;
                n.data_streams = granted.streams;
            }
            _ => {}
        }
    }
    if preauth != 1 {
        return Err(ProtocolError::Violation(
            "3.1.1 response without exactly one preauth integrity context",
        )
        .into());
    }
    Ok(())
}
