//! NEGOTIATE (MS-SMB2 3.3.5.3.1, 3.3.5.4): the SMB1 multi-protocol upgrade, the SMB2
//! NEGOTIATE with its 3.1.1 contexts (preauth integrity, cipher, signing algorithm, transport
//! security, multi-stream), the capabilities offered and the connection's negotiated state.

use bytes::Bytes;
use smbq_compress::Compression;
use smbq_crypto::{Cipher, PreauthHash, SigningAlgorithm};
use smbq_wire::multi_stream::MultiStream;
use smbq_wire::negotiate::{
    Cipher as WireCipher, HashAlgorithm, NegotiateContext, NegotiateContextType, NegotiateRequest,
    NegotiateResponse, SigningAlgorithm as WireSigning, capabilities, security_mode,
    transport_flags,
};
use smbq_wire::posix;
use smbq_wire::{Command, Dialect, Header, NtStatus, Writer};

use super::{Action, ConnState, ERROR_BODY, Env, Negotiated, ServerConnection, malformed};
use crate::error::Violation;
use crate::request::ConnView;
use crate::transport::Transport;

impl ServerConnection {
    /// Whether a dialect this connection may select matches `f`. MS-SMB2 2.1: SMB over QUIC
    /// is defined for 3.1.1 only, so a QUIC connection never selects an older dialect.
    fn dialect_allowed_any(&self, f: impl Fn(Dialect) -> bool) -> bool {
        self.cfg
            .dialects
            .iter()
            .copied()
            .filter(|d| self.transport == Transport::Tcp || *d == Dialect::SMB3_1_1)
            .any(f)
    }

    /// MS-SMB2 3.3.5.3.1: an SMB1 multi-protocol NEGOTIATE as the first message.
    pub(super) fn on_smb1(
        &mut self,
        frame: &[u8],
        env: &mut Env<'_>,
    ) -> Result<Vec<Action>, Violation> {
        if !matches!(self.state, ConnState::ExpectNegotiate { after_smb1: false }) {
            return Err(Violation::Renegotiate);
        }
        let req = smbq_wire::smb1_negotiate::Smb1NegotiateRequest::decode(frame)
            .map_err(|e| malformed("SMB1 NEGOTIATE", e))?;
        let reply = req.best_smb2_reply();
        self.smb1_upgrade = true;
        if !self.credits.consume(0, 1) {
            return Err(Violation::BadMessageId(0));
        }
        // MS-SMB2 3.3.5.3.1: exactly one credit, so the SMB2 NEGOTIATE that follows uses
        // MessageId 1.
        let hdr = Header {
            command: Command::NEGOTIATE,
            credits: self.credits.grant(1),
            ..Default::default()
        };
        match reply {
            Some(Dialect::WILDCARD) if self.dialect_allowed_any(|d| d.0 >= 0x0210) => {
                let body = self.negotiate_body(Dialect::WILDCARD, env.now, 0, Vec::new());
                self.state = ConnState::ExpectNegotiate { after_smb1: true };
                let frame = self.plain_response(&hdr, NtStatus::SUCCESS, &body)?;
                self.transmit(self.rx_stream, vec![frame]);
                Ok(Vec::new())
            }
            Some(_) if self.dialect_allowed_any(|d| d == Dialect::SMB2_0_2) => {
                // Only "SMB 2.002" offered: that is the final negotiate (MS-SMB2 3.3.5.3.1).
                let body = self.negotiate_body(Dialect::SMB2_0_2, env.now, 0, Vec::new());
                // SMB1 carries no GUID, capabilities or security mode for SMB2.
                let offer = ClientOffer {
                    guid: [0; 16],
                    capabilities: 0,
                    security_mode: 0,
                    dialects: vec![Dialect::SMB2_0_2],
                };
                self.enter_negotiated(
                    Dialect::SMB2_0_2,
                    offer,
                    None,
                    None,
                    false,
                    PreauthHash::new(),
                );
                let frame = self.plain_response(&hdr, NtStatus::SUCCESS, &body)?;
                self.transmit(self.rx_stream, vec![frame]);
                Ok(Vec::new())
            }
            _ => Err(Violation::NoCommonDialect),
        }
    }

    pub(super) fn on_negotiate_message(
        &mut self,
        hdr: &Header,
        msg: &[u8],
        env: &mut Env<'_>,
    ) -> Result<(), Violation> {
        // MS-SMB2 3.3.5.2.4: a NEGOTIATE cannot be signed (no key exists yet).
        let frame = if hdr.is_signed() && !matches!(self.state, ConnState::Negotiated(_)) {
            let mut rhdr = hdr.clone();
            rhdr.credits = self.credits.grant(hdr.credits);
            self.plain_response(&rhdr, NtStatus::INVALID_PARAMETER, &ERROR_BODY)?
        } else {
            self.negotiate(hdr, msg, env)?
        };
        self.transmit(self.rx_stream, vec![frame]);
        Ok(())
    }

    fn negotiate_body(
        &self,
        dialect: Dialect,
        now: u64,
        caps: u32,
        contexts: Vec<NegotiateContext<'_>>,
    ) -> Vec<u8> {
        let token = smbq_auth::spnego_init_token(self.cfg.kerberos.is_some(), self.ntlm());
        let small = dialect == Dialect::SMB2_0_2 || dialect == Dialect::WILDCARD;
        let cap_size = |v: u32| if small { v.min(65536) } else { v };
        let mut sec_mode = security_mode::SIGNING_ENABLED;
        if self.cfg.require_signing {
            sec_mode |= security_mode::SIGNING_REQUIRED;
        }
        let resp = NegotiateResponse {
            security_mode: sec_mode,
            dialect,
            server_guid: self.cfg.server_guid,
            capabilities: caps,
            max_transact_size: cap_size(self.cfg.limits.max_transact),
            max_read_size: cap_size(self.cfg.limits.max_read),
            max_write_size: cap_size(self.cfg.limits.max_write),
            system_time: now,
            server_start_time: 0,
            security_buffer: &token,
            contexts,
        };
        let mut w = Writer::new();
        resp.encode(&mut w);
        w.into_vec()
    }

    /// MS-SMB2 3.3.5.4, its steps in the spec's order (the 3.1.1 contexts are settled in
    /// `settle_contexts`).
    // Long: kept whole so its steps read in MS-SMB2 3.3.5.4's order.
    fn negotiate(
        &mut self,
        hdr: &Header,
        msg: &[u8],
        env: &mut Env<'_>,
    ) -> Result<Bytes, Violation> {
        if matches!(self.state, ConnState::Negotiated(_)) {
            return Err(Violation::Renegotiate);
        }
        let req = NegotiateRequest::decode(msg).map_err(|e| malformed("NEGOTIATE request", e))?;
        let mut rhdr = hdr.clone();
        rhdr.credits = self.credits.grant(hdr.credits);
        if req.dialects.is_empty() {
            return self.plain_response(&rhdr, NtStatus::INVALID_PARAMETER, &ERROR_BODY);
        }
        let Some(dialect) = req
            .dialects
            .iter()
            .copied()
            .filter(|d| self.dialect_allowed_any(|a| a == *d))
            .max()
        else {
            return self.plain_response(&rhdr, NtStatus::NOT_SUPPORTED, &ERROR_BODY);
        };

        let mut caps = self.offered_caps(dialect, req.capabilities);
        let salt: [u8; 32] = {
            let mut s = [0u8; 32];
            env.rng.fill_bytes(&mut s);
            s
        };
        let mut settled = Settled {
            out_ctx: Vec::new(),
            cipher: None,
            signing: if dialect.is_smb3() {
                SigningAlgorithm::AesCmac
            } else {
                SigningAlgorithm::HmacSha256
            },
            transport_security: false,
            data_streams: 0,
            compression: Compression::default(),
            posix: false,
        };
        if dialect == Dialect::SMB3_1_1 {
            settled = match self.settle_contexts(&req, settled) {
                Ok(s) => s,
                Err(status) => return self.plain_response(&rhdr, status, &ERROR_BODY),
            };
        } else if dialect.is_smb3() && req.capabilities & capabilities::ENCRYPTION != 0 {
            // 3.0 / 3.0.2 have one cipher, AES-128-CCM, signalled by the capability.
            if self.cfg.ciphers.contains(&Cipher::Aes128Ccm) {
                caps |= capabilities::ENCRYPTION;
                settled.cipher = Some(Cipher::Aes128Ccm);
            }
        }
        let Settled {
            out_ctx,
            cipher,
            signing,
            transport_security,
            data_streams,
            compression,
            posix,
        } = settled;
        let mut out_ctx: Vec<NegotiateContext<'_>> = out_ctx;
        // The salt must be filled in the encoded context; rebuild the preauth context with it.
        if let Some(NegotiateContext::PreauthIntegrity { salt: s, .. }) = out_ctx.first_mut() {
            *s = &salt;
        }
        let multi_stream = MultiStream::new(data_streams).encode();
        if data_streams > 0 {
            out_ctx.push(MultiStream::context(&multi_stream));
        }

        let body = self.negotiate_body(dialect, env.now, caps, out_ctx);
        let mut preauth = PreauthHash::new();
        let frame = self.plain_response(&rhdr, NtStatus::SUCCESS, &body)?;
        if dialect == Dialect::SMB3_1_1 {
            preauth.update(msg);
            preauth.update(frame.get(4..).unwrap_or_default());
        }
        let offer = ClientOffer {
            guid: req.client_guid,
            capabilities: req.capabilities,
            security_mode: req.security_mode,
            dialects: req.dialects.clone(),
        };
        self.enter_negotiated(
            dialect,
            offer,
            cipher,
            Some(signing),
            transport_security,
            preauth,
        );
        if let ConnState::Negotiated(n) = &mut self.state {
            n.data_streams = data_streams;
            n.compression = compression;
            n.view.posix = posix;
        }
        let _ = caps;
        Ok(frame)
    }

    /// MS-SMB2 3.3.5.4 for 3.1.1: each context type at most once, SHA-512 preauth required,
    /// then the cipher, signing algorithm and transport security the contexts settle, with the
    /// response's contexts (the preauth salt left for the caller to fill in).
    fn settle_contexts(
        &self,
        req: &NegotiateRequest<'_>,
        mut s: Settled,
    ) -> Result<Settled, NtStatus> {
        each_context_once(&req.contexts)?;
        let preauth = req.contexts.iter().find_map(|c| match c {
            NegotiateContext::PreauthIntegrity {
                hash_algorithms, ..
            } => Some(hash_algorithms),
            _ => None,
        });
        match preauth {
            None => return Err(NtStatus::INVALID_PARAMETER),
            Some(algs) if !algs.contains(&HashAlgorithm::SHA512) => {
                return Err(NtStatus::SMB_NO_PREAUTH_INTEGRITY_HASH_OVERLAP);
            }
            Some(_) => {}
        }
        s.out_ctx.push(NegotiateContext::PreauthIntegrity {
            hash_algorithms: vec![HashAlgorithm::SHA512],
            salt: &[],
        });
        for c in &req.contexts {
            match c {
                NegotiateContext::Encryption { ciphers } => {
                    s.cipher = ciphers
                        .iter()
                        .filter_map(|w| Cipher::from_wire_id(w.0))
                        .find(|c| self.cfg.ciphers.contains(c));
                    let chosen = s.cipher.map_or(WireCipher(0), |c| WireCipher(c.wire_id()));
                    s.out_ctx.push(NegotiateContext::Encryption {
                        ciphers: vec![chosen],
                    });
                }
                NegotiateContext::Signing { algorithms } => {
                    if let Some(a) = self.choose_signing(algorithms, req.capabilities) {
                        s.signing = a;
                    }
                    s.out_ctx.push(NegotiateContext::Signing {
                        algorithms: vec![WireSigning(s.signing.wire_id())],
                    });
                }
                // SMB2_COMPRESSION_CAPABILITIES: answered when compression is configured,
                // with the common algorithms in the server's order (NONE alone if none).
                NegotiateContext::Compression { flags, algorithms }
                    if !self.cfg.compression.is_empty() =>
                {
                    s.compression = Compression::settle(&self.cfg.compression, algorithms, *flags);
                    let (flags, algorithms) = s.compression.response();
                    s.out_ctx
                        .push(NegotiateContext::Compression { flags, algorithms });
                }
                NegotiateContext::Transport { flags }
                    if self.transport == Transport::Quic
                        && self.cfg.accept_transport_security
                        && flags & transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY != 0 =>
                {
                    s.transport_security = true;
                    s.out_ctx.push(NegotiateContext::Transport {
                        flags: transport_flags::ACCEPT_TRANSPORT_LEVEL_SECURITY,
                    });
                }
                _ => {}
            }
        }
        self.settle_posix(&req.contexts, &mut s)?;
        // docs/multistream.md 3.3: answered only over QUIC, when offered and possible; a
        // context we cannot take is ignored, never a reason to fail the NEGOTIATE.
        if self.transport == Transport::Quic
            && self.data_stream_limit > 0
            && let Some(m) = MultiStream::find(&req.contexts)
            && m.acceptable_request()
        {
            s.data_streams = m.streams.min(self.data_stream_limit);
        }
        Ok(s)
    }

    /// SMB2_POSIX_EXTENSIONS_AVAILABLE (POSIX-SMB2; Samba smb2_negotiate_context_process_posix):
    /// answered with the tag when one of the client's tags is it and the server has the
    /// extensions; data that is not whole tags fails the NEGOTIATE (INVALID_PARAMETER).
    fn settle_posix(
        &self,
        contexts: &[NegotiateContext<'_>],
        s: &mut Settled,
    ) -> Result<(), NtStatus> {
        if !self.cfg.posix_extensions {
            return Ok(());
        }
        for c in contexts {
            if let NegotiateContext::Other { context_type, data } = c
                && *context_type == posix::NEGOTIATE_CONTEXT
                && posix::negotiate_asks(data).map_err(|_| NtStatus::INVALID_PARAMETER)?
                && !s.posix
            {
                s.posix = true;
                s.out_ctx.push(NegotiateContext::Other {
                    context_type: posix::NEGOTIATE_CONTEXT,
                    data: &posix::TAG,
                });
            }
        }
        Ok(())
    }

    /// MS-SMB2 3.3.5.4 (SMB2_SIGNING_CAPABILITIES): the first of the client's algorithms the
    /// server allows, but AES-CMAC before AES-GMAC where a session set up here may get more
    /// channels (multichannel offered: 3.3.5.4, 3.3.5.5). Every binding signs its legs with
    /// the session's key from MessageId 1 on (3.2.4.1.1, 3.3.4.1.1), so under AES-GMAC a
    /// second binding would repeat the first one's nonces (3.1.4.1); AES-CMAC has none
    /// (issue 42, docs/security.md).
    fn choose_signing(
        &self,
        offered: &[WireSigning],
        client_caps: u32,
    ) -> Option<SigningAlgorithm> {
        let mut allowed = offered
            .iter()
            .filter_map(|w| SigningAlgorithm::from_wire_id(w.0))
            .filter(|a| self.cfg.signing.contains(a));
        let first = allowed.next()?;
        let may_bind = self.multichannel() && client_caps & capabilities::MULTI_CHANNEL != 0;
        if first == SigningAlgorithm::AesGmac
            && may_bind
            && allowed.any(|a| a == SigningAlgorithm::AesCmac)
        {
            return Some(SigningAlgorithm::AesCmac);
        }
        Some(first)
    }

    /// The capabilities NEGOTIATE answers with (before ENCRYPTION, settled with the cipher):
    /// leasing, multichannel for a 3.x client that asks where it is on, and persistent
    /// handles on 3.x where a share is continuously available (MS-SMB2 3.3.5.4).
    /// VALIDATE_NEGOTIATE_INFO compares against the same value.
    fn offered_caps(&self, dialect: Dialect, client_caps: u32) -> u32 {
        let mut caps = self.lease_caps(dialect, client_caps);
        if dialect.is_smb3() && self.cfg.persistent_handles {
            caps |= capabilities::PERSISTENT_HANDLES;
        }
        if dialect.is_smb3()
            && self.multichannel()
            && client_caps & capabilities::MULTI_CHANNEL != 0
        {
            caps |= capabilities::MULTI_CHANNEL;
        }
        caps
    }

    /// MS-SMB2 3.3.5.4: leasing from 2.1 on; directory leasing for a 3.x client that asks for
    /// it (as Samba's "smb3 directory leases" and Windows Server do).
    fn lease_caps(&self, dialect: Dialect, client_caps: u32) -> u32 {
        let mut caps = 0;
        if dialect.0 >= 0x0210 {
            caps |= capabilities::LARGE_MTU | capabilities::LEASING;
        }
        if dialect.is_smb3()
            && self.cfg.directory_leases
            && client_caps & capabilities::DIRECTORY_LEASING != 0
        {
            caps |= capabilities::DIRECTORY_LEASING;
        }
        caps
    }

    fn enter_negotiated(
        &mut self,
        dialect: Dialect,
        client: ClientOffer,
        cipher: Option<Cipher>,
        signing: Option<SigningAlgorithm>,
        transport_security: bool,
        preauth: PreauthHash,
    ) {
        let small = dialect == Dialect::SMB2_0_2;
        let lim = &self.cfg.limits;
        let size = |v: u32| if small { v.min(65536) } else { v };
        let mut server_caps = self.offered_caps(dialect, client.capabilities);
        if dialect.is_smb3() && dialect != Dialect::SMB3_1_1 && cipher.is_some() {
            server_caps |= capabilities::ENCRYPTION;
        }
        let mut sec_mode = security_mode::SIGNING_ENABLED;
        if self.cfg.require_signing {
            sec_mode |= security_mode::SIGNING_REQUIRED;
        }
        let view = ConnView {
            id: self.id,
            dialect,
            client_guid: client.guid,
            client_capabilities: client.capabilities,
            client_security_mode: client.security_mode,
            server_capabilities: server_caps,
            server_security_mode: sec_mode,
            client_dialects: client.dialects,
            max_read_size: size(lim.max_read),
            max_write_size: size(lim.max_write),
            max_transact_size: size(lim.max_transact),
            transport_security,
            posix: false,
            peer: self.peer.clone(),
            transport: self.transport,
        };
        let signing = signing.unwrap_or(if dialect.is_smb3() {
            SigningAlgorithm::AesCmac
        } else {
            SigningAlgorithm::HmacSha256
        });
        self.state = ConnState::Negotiated(Box::new(Negotiated {
            view,
            signing,
            cipher,
            preauth,
            data_streams: 0,
            compression: smbq_compress::Compression::default(),
        }));
    }
}

/// MS-SMB2 3.3.5.4: a context type the server knows may come once (unknown ones are
/// ignored), else INVALID_PARAMETER.
fn each_context_once(contexts: &[NegotiateContext<'_>]) -> Result<(), NtStatus> {
    let mut seen = Vec::new();
    for c in contexts {
        let t = c.context_type();
        if t != NegotiateContextType::CONTEXTTYPE_RESERVED
            && !matches!(c, NegotiateContext::Other { .. })
        {
            if seen.contains(&t) {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            seen.push(t);
        }
    }
    Ok(())
}

/// What NEGOTIATE settles besides the dialect.
struct Settled {
    out_ctx: Vec<NegotiateContext<'static>>,
    cipher: Option<Cipher>,
    signing: SigningAlgorithm,
    transport_security: bool,
    /// Data streams to grant (the response context is added by the caller).
    data_streams: u16,
    /// Connection.CompressionIds and SupportsChainedCompression.
    compression: Compression,
    /// The SMB3 POSIX extensions were asked for and granted (smbq_wire::posix).
    posix: bool,
}

/// What the client's NEGOTIATE said about itself (MS-SMB2 3.3.5.4), kept for
/// FSCTL_VALIDATE_NEGOTIATE_INFO and the connection's view.
struct ClientOffer {
    guid: [u8; 16],
    capabilities: u32,
    security_mode: u16,
    dialects: Vec<Dialect>,
}
