//! Frames in (MS-SMB2 3.3.5.2): a TRANSFORM frame opened (3.3.5.2.1.1), a large signed
//! message verified in place, then each message of the compound in turn: bounds and alignment
//! (3.3.5.2.7), related-chain inheritance (3.3.5.2.7.2), the credit charge (3.3.5.2.3,
//! 3.3.5.2.5), the chain rules, and the session's signature and encryption checks (3.3.5.2.4,
//! 3.3.5.2.9). What passes becomes a request for the server; what fails, an answered item.

use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use smbq_compress::DecompressError;
use smbq_wire::transform::TransformHeader;

use crate::observe::CompressionEvent;
use smbq_wire::{Command, HEADER_LEN, Header, NtStatus};

use super::{Action, ChainItem, Completed, ConnState, Env, ServerConnection, StreamId, malformed};
use crate::error::Violation;
use crate::request::{Request, Response, SessionView};
use crate::session::Session;

impl ServerConnection {
    /// A signed request over 4 KiB alone in its frame (a WRITE's data), when the frame owns
    /// its buffer: its signature is checked here, in place (the Signature field zeroed while
    /// the MAC runs, then put back), instead of through a copy of the whole message in
    /// `check_session_security`, which is given the verdict.
    pub(super) fn verify_large_in_place(&self, frame: Bytes) -> (Bytes, Option<bool>) {
        crate::framing::verify_large_in_place(
            frame,
            |sid| self.sessions.get(&sid).and_then(|s| s.signer.as_ref()),
            |signer, buf| signer.verify_in_place(buf),
        )
    }

    /// Opens a TRANSFORM frame (MS-SMB2 3.3.5.2.1.1) in place when the frame owns its buffer
    /// alone (the deframer hands large frames out that way), else through one copy.
    pub(super) fn decrypt(&mut self, frame: Bytes) -> Result<(Bytes, u64), Violation> {
        if !matches!(&self.state, ConnState::Negotiated(n) if n.view.dialect.is_smb3()) {
            return Err(Violation::DecryptFailed);
        }
        // On a constrained connection (no authenticated session yet) only an anonymous session
        // could have keys, and those anyone can derive: nothing is opened, the connection goes,
        // as on Windows and Samba (smbtorture smb2.session.anon-encryption1).
        if self.constrained {
            return Err(Violation::DecryptFailed);
        }
        let th = TransformHeader::decode(&frame).map_err(|e| malformed("transform header", e))?;
        let hdr_len = smbq_crypto::TRANSFORM_HEADER_LEN;
        if frame.len() < hdr_len
            || th.original_message_size as usize != frame.len() - hdr_len
            || th.flags != 1
        {
            return Err(Violation::DecryptFailed);
        }
        let session = self
            .sessions
            .get(&th.session_id)
            .ok_or(Violation::DecryptFailed)?;
        let dec = session.decryptor.as_ref().ok_or(Violation::DecryptFailed)?;
        let aad: [u8; 32] = frame
            .get(smbq_crypto::TRANSFORM_AAD)
            .and_then(|a| a.try_into().ok())
            .ok_or(Violation::DecryptFailed)?;
        let nonce = th
            .nonce
            .get(..dec.cipher().nonce_len())
            .ok_or(Violation::DecryptFailed)?;
        let mut buf = match frame.try_into_mut() {
            Ok(mut whole) => {
                whole.advance(hdr_len);
                whole
            }
            Err(shared) => BytesMut::from(shared.get(hdr_len..).unwrap_or_default()),
        };
        dec.open_in_place(nonce, &aad, &mut buf, &th.signature)
            .map_err(|_| Violation::DecryptFailed)?;
        Ok((buf.freeze(), th.session_id))
    }

    /// Decompresses a compressed message (MS-SMB2 3.3.5.2.1.2) before anything else looks at
    /// it. Only on a connection that negotiated compression; the declared size is held to
    /// the spec's limit (256 + the header + the largest of MaxRead/MaxWrite/MaxTransact) and
    /// to the frame limit of the moment, so before a session is set up it stays as small as
    /// any pre-authentication frame.
    pub(super) fn decompress(&self, msg: &[u8]) -> Result<Bytes, Violation> {
        let ConnState::Negotiated(n) = &self.state else {
            return Err(Violation::Compression(DecompressError::NotNegotiated));
        };
        let v = &n.view;
        let spec = 256
            + smbq_wire::compression::UNCHAINED_HEADER_LEN
            + v.max_read_size
                .max(v.max_write_size)
                .max(v.max_transact_size) as usize;
        let limit = spec.min(self.frame_limit() as usize);
        let plain = n
            .compression
            .decompress(msg, limit)
            .map_err(Violation::Compression)?;
        self.cfg.observer.compression(&CompressionEvent {
            sent: false,
            algorithm: None,
            wire_bytes: msg.len() as u64,
            plain_bytes: plain.len() as u64,
        });
        Ok(Bytes::from(plain))
    }

    /// The messages of one SMB2 frame in turn (a compound, MS-SMB2 3.3.5.2.7): each bounded,
    /// related to the one before and validated; then the chain's requests start.
    pub(super) fn on_messages(
        &mut self,
        frame: Bytes,
        encrypted: bool,
        transform_session: Option<u64>,
        checked: Option<bool>,
        env: &mut Env<'_>,
    ) -> Result<Vec<Action>, Violation> {
        let mut actions = Vec::new();
        let mut items = Vec::new();
        let mut offset = 0usize;
        let mut prev: Option<Header> = None;
        let mut count = 0usize;
        loop {
            count += 1;
            if count > self.cfg.limits.max_compound {
                return Err(Violation::CompoundTooLong);
            }
            let rest = frame
                .get(offset..)
                .ok_or(Violation::BadCompound("offset past the frame"))?;
            let mut hdr = Header::decode(rest).map_err(|e| malformed("SMB2 header", e))?;
            if hdr.is_response() {
                return Err(Violation::UnexpectedResponse);
            }
            let next = hdr.next_command as usize;
            let end = message_end(frame.len(), offset, next)?;
            let msg = frame.slice(offset..end);

            // MS-SMB2 3.3.5.2.7.2: a related request inherits the session and tree of the
            // previous one in the chain.
            if hdr.is_related()
                && let Some(p) = &prev
            {
                hdr.session_id = p.session_id;
                if hdr.tree_id == 0xFFFF_FFFF || hdr.tree_id == 0 {
                    hdr.tree_id = p.tree_id;
                }
            }
            // MS-SMB2 3.3.5.2.7.2 (as Windows and Samba behave): a related request after one
            // whose session could not be found cannot inherit a session at all.
            let orphaned = hdr.is_related()
                && prev.as_ref().is_some_and(|p| {
                    !self
                        .sessions
                        .get(&p.session_id)
                        .is_some_and(Session::is_valid)
                });
            let at = InChain {
                encrypted,
                transform_session,
                first: prev.is_none(),
                orphaned,
                checked,
            };
            if let Some(item) = self.on_message(hdr.clone(), msg, at, env, &mut actions)? {
                items.push(item);
            }
            prev = Some(hdr);
            if next == 0 {
                break;
            }
            // MS-SMB2 3.3.5.2.7: each message in a compound starts 8-byte aligned.
            if !next.is_multiple_of(8) {
                return Err(Violation::BadCompound("message not 8-byte aligned"));
            }
            offset = end;
        }
        // Actions so far (session events) come before the chain's requests.
        self.actions.extend(actions.drain(..));
        if !items.is_empty() {
            self.start_chain(self.rx_stream, items, encrypted, env.at);
        }
        Ok(actions)
    }

    fn on_message(
        &mut self,
        hdr: Header,
        msg: Bytes,
        at: InChain,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Option<ChainItem>, Violation> {
        self.check_stream(&hdr)?;
        if hdr.command == Command::CANCEL {
            if !matches!(self.state, ConnState::Negotiated(_)) {
                return Err(Violation::NotNegotiated);
            }
            // MS-SMB2 3.3.5.16: no credits, no response. Earlier actions of this frame first.
            self.actions.extend(actions.drain(..));
            self.on_cancel(&hdr);
            return Ok(None);
        }
        let (charge, multi_credit) = self.charge(&hdr)?;
        if hdr.command == Command::NEGOTIATE {
            self.on_negotiate_message(&hdr, &msg, env)?;
            return Ok(None);
        }
        if !matches!(self.state, ConnState::Negotiated(_)) {
            return Err(Violation::NotNegotiated);
        }
        if let Some(status) = chain_rules(&hdr, &msg, &at, charge, multi_credit)? {
            return Ok(Some(answered(&hdr, status)));
        }
        self.on_session_message(hdr, msg, &at, env, actions)
    }

    /// docs/multistream.md 5.1 and 8: a data stream exists only after a grant, and never
    /// carries the control-only requests.
    fn check_stream(&self, hdr: &Header) -> Result<(), Violation> {
        if self.rx_stream == StreamId::CONTROL {
            return Ok(());
        }
        if self.granted_data_streams() == 0 {
            return Err(Violation::DataStreamNotGranted);
        }
        if smbq_wire::multi_stream::CONTROL_ONLY.contains(&hdr.command) {
            return Err(Violation::ControlOnly(hdr.command));
        }
        Ok(())
    }

    /// Takes the message's credits from the window (MS-SMB2 3.3.5.2.3, 3.3.5.2.5): its charge,
    /// and whether the dialect charges multiple credits.
    fn charge(&mut self, hdr: &Header) -> Result<(u16, bool), Violation> {
        let multi_credit = match &self.state {
            ConnState::Negotiated(n) => n.view.dialect.0 >= 0x0210,
            ConnState::ExpectNegotiate { .. } => false,
        };
        let charge = if multi_credit {
            hdr.credit_charge.max(1)
        } else {
            1
        };
        if !self.credits.consume(hdr.message_id, charge) {
            return Err(Violation::BadMessageId(hdr.message_id));
        }
        Ok((charge, multi_credit))
    }

    /// A message past the connection-level rules: SESSION_SETUP, ECHO and LOGOFF are the
    /// engine's; everything else goes to the server once its session checks out.
    fn on_session_message(
        &mut self,
        hdr: Header,
        msg: Bytes,
        at: &InChain,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Option<ChainItem>, Violation> {
        let (encrypted, checked) = (at.encrypted, at.checked);
        if hdr.command == Command::SESSION_SETUP {
            let frame = self.session_setup(&hdr, &msg, encrypted, env, actions)?;
            self.transmit(self.rx_stream, vec![frame]);
            return Ok(None);
        }
        let needs_session = hdr.command != Command::ECHO;
        let status =
            self.check_session_security(&hdr, &msg, encrypted, needs_session, checked, env.at);
        if status != NtStatus::SUCCESS {
            let mut item = answered(&hdr, status);
            // A session of another connection, named here with its key (a channel not bound,
            // smbtorture smb2.session.bind2): the answer is signed with that key, as Samba
            // signs it, once the request proved it holds the key.
            if let ChainItem::Answered(c) = &mut item {
                c.foreign_signed = hdr.is_signed()
                    && !encrypted
                    && !self.sessions.contains_key(&hdr.session_id)
                    && self.signed_foreign(&hdr, &msg);
            }
            return Ok(Some(item));
        }
        match hdr.command {
            // MS-SMB2 2.2.28 (ECHO) and 2.2.8 (LOGOFF): StructureSize 4, Reserved.
            Command::ECHO => return Ok(Some(answered_ok(hdr, vec![4, 0, 0, 0]))),
            Command::LOGOFF => {
                // The response is signed with the session's key, so the session is removed
                // only after the response is built (in finish).
                actions.push(Action::SessionEnded {
                    session_id: hdr.session_id,
                });
                return Ok(Some(answered_ok(hdr, vec![4, 0, 0, 0])));
            }
            _ => {}
        }
        let view = self.sessions.get(&hdr.session_id).and_then(|s| {
            Some(SessionView {
                id: s.id,
                identity: s.identity.clone()?,
                encrypt_data: s.encrypt_data,
                // An anonymous logon's keys are public (session_setup.rs): they do not make
                // the session one that can reach a share requiring encryption.
                can_encrypt: s.encryptor.is_some() && !s.public_keys,
            })
        });
        Ok(Some(ChainItem::Run(Box::new(Request {
            header: hdr,
            msg,
            session: view,
            encrypted,
            related_file_id: None,
            async_id: None,
        }))))
    }

    /// Session lookup, signature and encryption checks (MS-SMB2 3.3.5.2.4, 3.3.5.2.9).
    fn check_session_security(
        &self,
        hdr: &Header,
        msg: &[u8],
        encrypted: bool,
        session_needed: bool,
        checked: Option<bool>,
        now: Instant,
    ) -> NtStatus {
        if hdr.session_id == 0 {
            return if session_needed {
                NtStatus::USER_SESSION_DELETED
            } else {
                NtStatus::SUCCESS
            };
        }
        let Some(s) = self.sessions.get(&hdr.session_id) else {
            return NtStatus::USER_SESSION_DELETED;
        };
        if !s.is_valid() {
            return NtStatus::USER_SESSION_DELETED;
        }
        // MS-SMB2 3.3.5.2.9: an expired session still logs off, closes and unlocks what it
        // holds; anything else waits for a re-authentication (SESSION_SETUP takes another
        // path).
        let expired = s.expires_at.is_some_and(|t| now >= t)
            && !matches!(
                hdr.command,
                Command::LOGOFF | Command::CLOSE | Command::LOCK
            );
        let expired_status = if expired {
            NtStatus::NETWORK_SESSION_EXPIRED
        } else {
            NtStatus::SUCCESS
        };
        if encrypted {
            return expired_status;
        }
        if s.encrypt_data {
            return NtStatus::ACCESS_DENIED;
        }
        if hdr.is_signed() {
            match &s.signer {
                Some(signer) if checked.unwrap_or_else(|| signer.verify(msg)) => {}
                // A guest session has no key: a signed request cannot be checked.
                _ => return NtStatus::ACCESS_DENIED,
            }
        } else if s.signing_required {
            return NtStatus::ACCESS_DENIED;
        }
        expired_status
    }

    /// Whether `msg` names a session this connection has no channel of (see `known_signer`)
    /// and is signed with its key.
    pub(super) fn signed_foreign(&self, hdr: &Header, msg: &[u8]) -> bool {
        self.known_signer(hdr.session_id)
            .is_some_and(|k| k.verify(msg))
    }
}

/// Where the message at `offset` ends, by its NextCommand (`next`; 0 for the frame's last):
/// within the frame, and past a whole header when another message follows.
fn message_end(frame_len: usize, offset: usize, next: usize) -> Result<usize, Violation> {
    let end = if next == 0 {
        frame_len
    } else {
        offset
            .checked_add(next)
            .ok_or(Violation::BadCompound("NextCommand overflows"))?
    };
    if end > frame_len || (next != 0 && next < HEADER_LEN) {
        return Err(Violation::BadCompound("NextCommand outside the frame"));
    }
    Ok(end)
}

/// The rules a message of a negotiated connection must meet before its session is looked at:
/// a status to answer it with, or a violation that costs the connection.
fn chain_rules(
    hdr: &Header,
    msg: &[u8],
    at: &InChain,
    charge: u16,
    multi_credit: bool,
) -> Result<Option<NtStatus>, Violation> {
    // MS-SMB2 3.3.5.2.7.2: the first request of a chain cannot be related.
    if (at.first && hdr.is_related()) || at.orphaned {
        return Ok(Some(NtStatus::INVALID_PARAMETER));
    }
    // MS-SMB2 3.3.5.2: a command code we do not know.
    if hdr.command.0 > Command::OPLOCK_BREAK.0 {
        return Ok(Some(NtStatus::INVALID_PARAMETER));
    }
    // MS-SMB2 3.3.5.2.5: the charge must cover the payload.
    if multi_credit
        && let Some(need) = payload_credits(hdr.command, msg)
        && u32::from(charge) < need
    {
        return Ok(Some(NtStatus::INVALID_PARAMETER));
    }
    // MS-SMB2 3.3.5.2.1.1: every message in an encrypted frame belongs to its session.
    if at.encrypted && at.transform_session.is_some_and(|s| s != hdr.session_id) {
        return Err(Violation::DecryptFailed);
    }
    Ok(None)
}

fn answered(hdr: &Header, status: NtStatus) -> ChainItem {
    ChainItem::Answered(Completed {
        header: hdr.clone(),
        response: Response::error(status),
        async_id: None,
        foreign_signed: false,
    })
}

fn answered_ok(header: Header, body: Vec<u8>) -> ChainItem {
    ChainItem::Answered(Completed {
        header,
        response: Response::ok(body),
        async_id: None,
        foreign_signed: false,
    })
}

/// Credits a request must be charged for its payload (MS-SMB2 3.3.5.2.5), from fixed offsets
/// of the request body. `None` for commands without a large payload.
fn payload_credits(cmd: Command, msg: &[u8]) -> Option<u32> {
    let u32_at = |off: usize| -> Option<u32> {
        let b: [u8; 4] = msg
            .get(HEADER_LEN + off..HEADER_LEN + off + 4)?
            .try_into()
            .ok()?;
        Some(u32::from_le_bytes(b))
    };
    let size = match cmd {
        Command::READ | Command::WRITE => u32_at(4)?,
        Command::QUERY_DIRECTORY => u32_at(28)?,
        Command::CHANGE_NOTIFY => u32_at(4)?,
        Command::QUERY_INFO => u32_at(4)?.max(u32_at(12)?),
        Command::SET_INFO => u32_at(4)?,
        Command::IOCTL => u32_at(28)?.max(u32_at(44)?),
        _ => return None,
    };
    Some(if size == 0 { 1 } else { (size - 1) / 65536 + 1 })
}

/// Where a message sits in its frame, for the rules that depend on it.
#[derive(Clone, Copy)]
struct InChain {
    /// The frame came in an SMB2 TRANSFORM_HEADER (MS-SMB2 3.3.5.2.1.1).
    encrypted: bool,
    /// The session that TRANSFORM_HEADER named: every message inside must belong to it.
    transform_session: Option<u64>,
    /// First message of its chain (MS-SMB2 3.3.5.2.7.2: it cannot be related).
    first: bool,
    /// Related to a message whose session was not found: it cannot inherit one.
    orphaned: bool,
    /// The signature verdict `verify_large_in_place` reached for this (single) message.
    checked: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_credit_rule() {
        let mut msg = vec![0u8; HEADER_LEN + 49];
        msg[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&(65536u32 * 2 + 1).to_le_bytes());
        assert_eq!(payload_credits(Command::READ, &msg), Some(3));
        msg[HEADER_LEN + 4..HEADER_LEN + 8].copy_from_slice(&65536u32.to_le_bytes());
        assert_eq!(payload_credits(Command::READ, &msg), Some(1));
        assert_eq!(payload_credits(Command::CLOSE, &msg), None);
    }

    #[test]
    fn message_end_rule() {
        assert_eq!(message_end(200, 0, 0).ok(), Some(200));
        assert_eq!(message_end(200, 64, 0).ok(), Some(200));
        assert_eq!(message_end(200, 0, 72).ok(), Some(72));
        assert_eq!(message_end(200, 72, 128).ok(), Some(200));
        assert!(message_end(200, 72, 136).is_err());
        assert!(message_end(200, 0, HEADER_LEN - 8).is_err());
        assert!(message_end(200, usize::MAX - 8, 72).is_err());
    }
}
