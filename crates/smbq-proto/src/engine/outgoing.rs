//! Responses out (MS-SMB2 3.3.4.1): single responses (the engine's own answers), interim
//! responses, unsolicited notifications and the frame of a finished chain: credits granted,
//! compounds joined and padded (3.3.4.1.3), messages signed (large ones in one pooled buffer)
//! lone responses compressed when asked and it pays (3.1.4.4), and frames sealed in a
//! TRANSFORM_HEADER (3.3.4.1.4) when the session calls for it.

use bytes::Bytes;
use smbq_crypto::Signer;
use smbq_wire::header::flags;
use smbq_wire::{Command, HEADER_LEN, Header, NtStatus, Writer};

use super::{Completed, ConnState, ERROR_BODY, ServerConnection};
use crate::error::Violation;
use crate::framing::frame_header;
use crate::observe::CompressionEvent;
use crate::request::Response;

impl ServerConnection {
    /// A single unsigned, unencrypted response whose header fields (credits included) are set.
    pub(super) fn plain_response(
        &self,
        rhdr: &Header,
        status: NtStatus,
        body: &[u8],
    ) -> Result<Bytes, Violation> {
        self.build_single(rhdr, status, body, false)
    }

    pub(super) fn build_single(
        &self,
        rhdr: &Header,
        status: NtStatus,
        body: &[u8],
        sign: bool,
    ) -> Result<Bytes, Violation> {
        let signer = self
            .sessions
            .get(&rhdr.session_id)
            .and_then(|s| s.signer.as_ref());
        self.build_signed(rhdr, status, body, sign.then_some(signer).flatten())
    }

    /// A single response signed with `signer`, if any.
    pub(super) fn build_signed(
        &self,
        rhdr: &Header,
        status: NtStatus,
        body: &[u8],
        signer: Option<&Signer>,
    ) -> Result<Bytes, Violation> {
        let sign = signer.is_some();
        self.cfg
            .observer
            .response(rhdr.command, status, rhdr.credits);
        let mut h = rhdr.clone();
        h.status = status;
        h.flags = flags::SERVER_TO_REDIR | if sign { flags::SIGNED } else { 0 };
        h.next_command = 0;
        h.async_id = None;
        h.signature = [0; 16];
        let mut out = Vec::with_capacity(4 + HEADER_LEN + body.len());
        out.extend_from_slice(&[0; 4]);
        let mut w = Writer::with_capacity(HEADER_LEN);
        h.encode(&mut w);
        out.extend_from_slice(w.as_slice());
        out.extend_from_slice(body);
        let len = out.len() - 4;
        if let Some(p) = out.get_mut(..4) {
            p.copy_from_slice(&frame_header(len))
        }
        if let Some(signer) = signer
            && let Some(m) = out.get_mut(4..)
        {
            signer.sign(m).map_err(|_| Violation::Internal("signing"))?;
        }
        Ok(Bytes::from(out))
    }

    /// Sends STATUS_PENDING for a request that will complete later (MS-SMB2 3.3.4.2) and
    /// returns the async id its final response must carry.
    pub(super) fn interim(&mut self, req_hdr: &Header, encrypted: bool) -> (u64, Vec<Bytes>) {
        let async_id = self.next_async_id;
        self.next_async_id += 1;
        let mut h = req_hdr.clone();
        h.credits = self.credits.grant(req_hdr.credits);
        h.async_id = Some(async_id);
        let c = Completed {
            header: h,
            response: Response::error(NtStatus::PENDING),
            async_id: Some(async_id),
            foreign_signed: false,
        };
        let frames = self.build_frame(std::slice::from_ref(&c), encrypted, true);
        (async_id, frames)
    }

    pub(super) fn notification_frame(
        &mut self,
        session_id: u64,
        command: Command,
        body: &[u8],
    ) -> Vec<Bytes> {
        let h = Header {
            command,
            flags: flags::SERVER_TO_REDIR,
            message_id: u64::MAX,
            ..Default::default()
        };
        let mut w = Writer::with_capacity(HEADER_LEN + body.len());
        h.encode(&mut w);
        w.bytes(body);
        let m = w.into_vec();
        let total = m.len();
        let encrypt = self
            .sessions
            .get(&session_id)
            .is_some_and(|s| s.encrypt_data && s.encryptor.is_some());
        if encrypt {
            // Never plaintext where the session requires encryption: a notification that
            // cannot be sealed is not sent.
            return self
                .seal(session_id, &[(m, None)], total)
                .into_iter()
                .collect();
        }
        let mut out = Vec::with_capacity(4 + total);
        out.extend_from_slice(&frame_header(total));
        out.extend_from_slice(&m);
        vec![Bytes::from(out)]
    }

    /// Builds the response frame for a finished chain: credits granted, compound joined and
    /// padded, each message signed as needed, the whole frame encrypted when required.
    pub(super) fn finish(&mut self, items: &[Completed], encrypted: bool) -> Vec<Bytes> {
        let frames = self.build_frame(items, encrypted, false);
        for c in items {
            if c.header.command == Command::LOGOFF && c.response.status == NtStatus::SUCCESS {
                self.sessions.remove(&c.header.session_id);
            }
        }
        frames
    }

    fn build_frame(&mut self, items: &[Completed], encrypted: bool, interim: bool) -> Vec<Bytes> {
        let n = items.len();
        let mut msgs: Vec<(Vec<u8>, Option<Bytes>)> = Vec::with_capacity(n);
        let mut encrypt_session = None;
        for (i, c) in items.iter().enumerate() {
            let session = self.sessions.get(&c.header.session_id);
            let enc =
                session.is_some_and(|s| s.encryptor.is_some() && (encrypted || s.encrypt_data));
            if enc {
                encrypt_session = Some(c.header.session_id);
            }
            // USER_SESSION_DELETED (the session ended under the request) is signed only when
            // the request was: Samba signs it with the ended session's key, and its client
            // drops a connection whose answer to a signed request is unsigned.
            let sign = !enc
                && (c.foreign_signed
                    || session.is_some_and(|s| {
                        s.signer.is_some()
                            && (c.header.is_signed()
                                || s.signing_required
                                    && c.response.status != NtStatus::USER_SESSION_DELETED)
                    }));
            let credits = if interim {
                c.header.credits
            } else if c.async_id.is_some() {
                0
            } else {
                self.credits.grant(c.header.credits)
            };
            if !interim {
                self.cfg
                    .observer
                    .response(c.header.command, c.response.status, credits);
            }
            msgs.push(self.encode_message(c, credits, sign, (n > 1).then_some(i + 1 == n)));
        }
        if !interim
            && items.iter().any(|c| c.response.compress)
            && let Some(m) = self.compress(&msgs, items)
        {
            msgs = vec![(m, None)];
        }
        let total: usize = msgs
            .iter()
            .map(|(m, d)| m.len() + d.as_ref().map_or(0, |d| d.len()))
            .sum();
        // Fails closed: a response that cannot be sealed (or whose request came sealed and
        // whose session's keys are gone) is not sent, rather than sent in the clear; the client
        // times the request out.
        match encrypt_session {
            Some(sid) => self.seal(sid, &msgs, total).into_iter().collect(),
            None if encrypted => Vec::new(),
            None => join_frame(msgs, total),
        }
    }

    /// One response message: header, body (or the ERROR body), data, signed when `sign`.
    /// `in_compound` is `Some(last)` inside a compound: padded to 8 and linked (MS-SMB2
    /// 3.3.4.1.3), data included. Returns the message and a data segment sent as it is.
    fn encode_message(
        &self,
        c: &Completed,
        credits: u16,
        sign: bool,
        in_compound: Option<bool>,
    ) -> (Vec<u8>, Option<Bytes>) {
        let (req, r) = (&c.header, &c.response);
        let mut h = Header {
            credit_charge: req.credit_charge,
            status: r.status,
            command: req.command,
            credits,
            flags: flags::SERVER_TO_REDIR
                | (req.flags & flags::RELATED_OPERATIONS)
                | (req.flags & flags::PRIORITY_MASK)
                | if sign { flags::SIGNED } else { 0 },
            next_command: 0,
            message_id: req.message_id,
            async_id: c.async_id,
            tree_id: r.tree_id.unwrap_or(req.tree_id),
            session_id: req.session_id,
            signature: [0; 16],
        };
        if c.async_id.is_some() {
            h.flags |= flags::ASYNC_COMMAND;
        }
        let mut w = Writer::with_capacity(HEADER_LEN + r.body.len() + 8);
        h.encode(&mut w);
        let error_body = r.body.is_empty() && r.status != NtStatus::SUCCESS;
        w.bytes(if error_body { &ERROR_BODY } else { &r.body });
        let mut m = w.into_vec();
        let data = if error_body { None } else { r.data.clone() };
        if let Some(last) = in_compound {
            // Windows pads the last response of a compound too (smbtorture
            // compound-padding); a lone response is not padded.
            let total = m.len() + data.as_ref().map_or(0, |d| d.len());
            let padded = total.div_ceil(8) * 8;
            if let Some(d) = &data {
                m.extend_from_slice(d);
            }
            m.resize(padded, 0);
            let next = if last { 0 } else { padded as u32 };
            let at = smbq_wire::header::NEXT_COMMAND_OFFSET;
            if let Some(f) = m.get_mut(at..at + 4) {
                f.copy_from_slice(&next.to_le_bytes())
            }
            if sign {
                self.sign_into(req.session_id, &mut m);
            }
            return (m, None);
        }
        match (&data, sign) {
            (Some(d), true) => {
                // Signed over header, body and data in one piece (one copy of the data, into
                // a pooled buffer), then sent as its own segment.
                let mut whole = smbq_buf::take(m.len() + d.len());
                whole.extend_from_slice(&m);
                whole.extend_from_slice(d);
                self.sign_into(req.session_id, whole.as_mut_slice());
                (Vec::new(), Some(whole.freeze()))
            }
            (None, true) => {
                self.sign_into(req.session_id, &mut m);
                (m, None)
            }
            (_, false) => (m, data),
        }
    }

    /// MS-SMB2 3.1.4.4 for a frame holding a response the handler marked
    /// (`Response::compress`), on a connection that negotiated compression: after signing
    /// (the signature covers the message as the client will see it once decompressed),
    /// before sealing. The first SMB2 header stays uncompressed, and a lone response's body
    /// too when its data travels apart from it (a READ's); a compound is compressed whole
    /// (one copy to join it). None when it is too short, compression is off, or it does not
    /// pay.
    fn compress(
        &mut self,
        msgs: &[(Vec<u8>, Option<Bytes>)],
        items: &[Completed],
    ) -> Option<Vec<u8>> {
        let ConnState::Negotiated(n) = &self.state else {
            return None;
        };
        let total: usize = msgs
            .iter()
            .map(|(m, d)| m.len() + d.as_ref().map_or(0, |d| d.len()))
            .sum();
        if !n.compression.is_on() || total < self.cfg.compress_min_size.max(HEADER_LEN + 1) {
            return None;
        }
        let joined;
        let (prefix, data): (&[u8], &[u8]) = match (msgs, items) {
            ([(m, Some(d))], [c]) if m.is_empty() => {
                d.split_at_checked(HEADER_LEN + c.response.body.len())?
            }
            ([(m, Some(d))], [_]) => (m.as_slice(), d.as_ref()),
            ([(m, None)], [_]) => m.split_at_checked(HEADER_LEN)?,
            _ => {
                let mut all = Vec::with_capacity(total);
                for (m, d) in msgs {
                    all.extend_from_slice(m);
                    if let Some(d) = d {
                        all.extend_from_slice(d);
                    }
                }
                joined = all;
                joined.split_at_checked(HEADER_LEN)?
            }
        };
        // The algorithm that moves the most on this link, if any beats sending it as it is
        // (smbq_compress::pace).
        let a = self
            .pace
            .pick(&n.compression, self.cfg.compress_adaptive, data)?;
        let started = std::time::Instant::now();
        let c = n.compression.compress_with(a, prefix, data);
        let took = started.elapsed();
        self.pace
            .record(a, prefix.len(), data.len(), c.as_ref(), took);
        let c = c?;
        self.cfg.observer.compression(&CompressionEvent {
            sent: true,
            algorithm: Some(c.algorithm),
            wire_bytes: c.message.len() as u64,
            plain_bytes: total as u64,
        });
        Some(c.message)
    }

    fn sign_into(&self, session_id: u64, m: &mut [u8]) {
        // Signing cannot fail for a key accepted at construction.
        if let Some(s) = self
            .sessions
            .get(&session_id)
            .and_then(|s| s.signer.as_ref())
        {
            let _ = s.sign(m);
        } else if let Some(k) = self.known_signer(session_id) {
            let _ = k.sign(m);
        }
    }

    /// Wraps the messages in a TRANSFORM_HEADER (MS-SMB2 3.3.4.1.4), encrypting in place.
    fn seal(
        &mut self,
        session_id: u64,
        msgs: &[(Vec<u8>, Option<Bytes>)],
        total: usize,
    ) -> Option<Bytes> {
        let th_len = smbq_crypto::TRANSFORM_HEADER_LEN;
        let enc = self.sessions.get(&session_id)?.encryptor.as_ref()?;
        // One copy of the data, into a pooled buffer that is sealed in place.
        let mut buf = smbq_buf::take(4 + th_len + total);
        buf.extend_from_slice(&frame_header(th_len + total));
        buf.extend_from_slice(&[0u8; smbq_crypto::TRANSFORM_HEADER_LEN]);
        for (m, d) in msgs {
            buf.extend_from_slice(m);
            if let Some(d) = d {
                buf.extend_from_slice(d);
            }
        }
        enc.seal_reserved(session_id, buf.as_mut_slice().get_mut(4..)?)
            .ok()?;
        Some(buf.freeze())
    }
}

/// The frame of unsealed messages: headers and bodies joined, data segments sent as they are.
fn join_frame(msgs: Vec<(Vec<u8>, Option<Bytes>)>, total: usize) -> Vec<Bytes> {
    let heads: usize = msgs.iter().map(|(m, _)| m.len()).sum();
    let mut head = Vec::with_capacity(4 + heads);
    head.extend_from_slice(&frame_header(total));
    let mut out = Vec::new();
    for (m, d) in msgs {
        head.extend_from_slice(&m);
        if let Some(d) = d {
            out.push(Bytes::from(std::mem::take(&mut head)));
            out.push(d);
        }
    }
    if !head.is_empty() {
        out.push(Bytes::from(head));
    }
    out
}
