//! Session binding (MS-SMB2 3.3.5.5 with SMB2_SESSION_FLAG_BINDING, 3.3.5.5.2, 3.3.5.5.3):
//! a second connection joins a session established on another, as a multichannel client
//! does. The channel authenticates again as the same user and gets a signing key of its own;
//! sealing keys, trees and opens stay the session's.
//!
//! The checks run in the order Windows and Samba apply them, which is what decides the status
//! when several fail (smbtorture smb2.session.bind_negative_*): the signing algorithms first,
//! then the dialect family, multichannel itself, the signature, the dialect and the cipher,
//! then this connection's own channel, the user and the channel count. A client GUID other
//! than the session's is accepted, as Windows does (smbtorture expects every `..d` variant,
//! a new client GUID, to behave like its `..s` twin).

use std::sync::Arc;

use bytes::Bytes;
use smbq_auth::Identity;
use smbq_crypto::{SigningAlgorithm, derive_signing_key};
use smbq_wire::session_setup::session_flags;
use smbq_wire::{Dialect, Header, NtStatus};

use super::session_setup::{Authenticated, SetupParams, encode_session_setup, new_acceptor};
use super::{Action, ERROR_BODY, Env, ServerConnection};
use crate::error::Violation;
use crate::session::{Session, SessionState};
use crate::sessions::{Established, MAX_CHANNELS};
use crate::transport::Transport;

/// GMAC and later algorithms pin a session's signing algorithm: a channel must use the same
/// one (Samba's smbd_smb2_session_setup_send; smbtorture bind_negative_smb3sign*).
fn pins(alg: SigningAlgorithm) -> bool {
    alg == SigningAlgorithm::AesGmac
}

impl ServerConnection {
    /// Whether this connection offers multichannel (SMB2_GLOBAL_CAP_MULTI_CHANNEL): by
    /// transport, as configured (on over TCP, off over QUIC by default; Windows does not bind
    /// QUIC channels).
    pub(super) fn multichannel(&self) -> bool {
        match self.transport {
            Transport::Tcp => self.cfg.multichannel_tcp,
            Transport::Quic => self.cfg.multichannel_quic,
        }
    }

    /// The session a binding SESSION_SETUP joins, after MS-SMB2 3.3.5.5's binding checks; the
    /// status to answer with when one fails. A new binding gets this connection's channel in
    /// the Binding state; a later leg continues it.
    pub(super) fn bind_session_id(
        &mut self,
        hdr: &Header,
        msg: &[u8],
        env: &mut Env<'_>,
        p: &SetupParams,
    ) -> Result<u64, NtStatus> {
        let id = hdr.session_id;
        if id == 0 {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        // A channel of this session on this connection already: its own key checks the
        // request (MS-SMB2 3.3.5.2.4); a binding in progress goes on, a finished one is not
        // bound twice.
        if let Some(s) = self.sessions.get(&id).filter(|s| !s.record.has_ended()) {
            if hdr.is_signed() {
                if !s.signer.as_ref().is_some_and(|k| k.verify(msg)) {
                    return Err(NtStatus::ACCESS_DENIED);
                }
            } else if s.signing_required && !s.is_binding() {
                return Err(NtStatus::ACCESS_DENIED);
            } else {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            return if s.is_binding() {
                Ok(id)
            } else {
                Err(NtStatus::REQUEST_NOT_ACCEPTED)
            };
        }
        let rec = self.table.get(id).ok_or(NtStatus::USER_SESSION_DELETED)?;
        let Some(est) = rec.established().cloned() else {
            // Guest and anonymous sessions have no key to bind with; a session still being
            // set up has none yet, so its binding request cannot be signed.
            let guest = rec.owner().is_some_and(|o| o.is_guest || o.is_anonymous);
            return Err(if guest {
                NtStatus::NOT_SUPPORTED
            } else {
                NtStatus::INVALID_PARAMETER
            });
        };
        if pins(est.signing) && p.signing != est.signing {
            return Err(NtStatus::REQUEST_OUT_OF_SEQUENCE);
        }
        if pins(p.signing) && p.signing != est.signing {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        // MS-SMB2 3.3.5.5: binding needs a 3.x dialect and multichannel on this connection.
        if !p.dialect.is_smb3() || !self.multichannel() {
            return Err(NtStatus::REQUEST_NOT_ACCEPTED);
        }
        // MS-SMB2 3.3.5.5.2: the binding request is signed with Session.SigningKey.
        if !hdr.is_signed() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if !est.signer.verify(msg) {
            return Err(NtStatus::ACCESS_DENIED);
        }
        // MS-SMB2 3.3.5.5.2: the same dialect, and (3.1.1) the same cipher, as the session's
        // connection.
        if p.dialect != est.dialect || p.cipher != est.cipher {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        if rec.channel_count() >= MAX_CHANNELS
            || self.sessions.len() >= self.cfg.limits.max_sessions_per_connection
        {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        let acceptor = new_acceptor(self.acceptor_config(), env);
        let channel = Session::binding(rec, &est, acceptor, p.conn_preauth.clone());
        self.sessions.insert(id, channel);
        Ok(id)
    }

    /// The binding's authentication succeeded: the same user as the session's (MS-SMB2
    /// 3.3.5.5.3, else STATUS_ACCESS_DENIED), then the channel's signing key from this
    /// authentication's session key and, for 3.1.1, this connection's preauth hash; the final
    /// response is signed with it.
    pub(super) fn bind_done(
        &mut self,
        rhdr: &Header,
        p: &SetupParams,
        done: Authenticated,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Bytes, Violation> {
        let session_id = rhdr.session_id;
        let Some(channel) = self.sessions.get(&session_id) else {
            return Err(Violation::Internal("channel vanished during binding"));
        };
        let owner = channel.record.owner().cloned();
        let same_user = owner
            .as_deref()
            .is_some_and(|o| same_user(o, &done.identity));
        if !same_user {
            return self.unbind(rhdr, NtStatus::ACCESS_DENIED);
        }
        if done.session_key.is_empty() {
            return self.unbind(rhdr, NtStatus::NOT_SUPPORTED);
        }
        let hash = (p.dialect == Dialect::SMB3_1_1).then_some(&done.hash);
        let key = derive_signing_key(p.dialect.0, &done.session_key, hash)
            .map_err(|e| Violation::KeyDerivation(e.to_string()))?;
        let Ok(signer) = smbq_crypto::Signer::new(p.signing, &key[..]) else {
            return self.unbind(rhdr, NtStatus::NOT_SUPPORTED);
        };
        let Some(channel) = self.sessions.get_mut(&session_id) else {
            return Err(Violation::Internal("channel vanished during binding"));
        };
        if !channel.record.add_channel(self.id) {
            return self.unbind(rhdr, NtStatus::INSUFFICIENT_RESOURCES);
        }
        channel.signer = Some(signer);
        // A channel of an authenticated session: the connection is no longer constrained.
        self.constrained = false;
        // MS-SMB2 3.3.5.5.3: encryption as this connection calls for it too (a session set up
        // over QUIC under TLS needs none, a TCP channel bound to it does).
        channel.encrypt_data |= !p.transport_security
            && p.client_can_encrypt
            && (self.cfg.encrypt_required || self.cfg.encrypt_desired);
        channel.state = SessionState::Valid { reauth: None };
        channel.identity = owner;
        channel.expires_at = done.valid_for.map(|d| env.at + d);
        let encrypt_required = channel.encrypt_data;
        let cipher = channel.encryptor.as_ref().map(|e| e.cipher());
        let flags = if encrypt_required {
            session_flags::ENCRYPT_DATA
        } else {
            0
        };
        let body = encode_session_setup(flags, &done.token);
        let frame = self.build_single(rhdr, NtStatus::SUCCESS, &body, true)?;
        actions.push(Action::SessionStarted {
            session_id,
            bound: true,
            previous_session_id: 0,
            user: done.identity.user.clone(),
            mechanism: done.mechanism,
            dialect: p.dialect,
            signing: Some(p.signing),
            cipher,
            encrypt_required,
        });
        Ok(frame)
    }

    /// The session's first connection answered its setup with `frame`, signed with
    /// Session.SigningKey, which is this connection's Channel.SigningKey from now on (MS-SMB2
    /// 3.3.5.5.3): binding answers may reuse neither that nonce nor any MessageId from here on.
    pub(super) fn first_channel_nonces(&self, rhdr: &Header, frame: &[u8]) {
        if let Some(est) = self.established(rhdr.session_id) {
            // A fresh ledger: the first message recorded cannot be refused.
            let _ = est.nonces.record(frame.get(4..).unwrap_or_default());
            est.nonces
                .first_channel_from(rhdr.message_id.saturating_add(1));
        }
    }

    /// Whether `frame`, a binding's MORE_PROCESSING answer signed with Session.SigningKey
    /// (MS-SMB2 3.3.4.1.1), may go: under AES-GMAC its nonce (MessageId and role, 3.1.4.1)
    /// must not have signed another message of that key. A second NTLM binding starts at the
    /// MessageId the first one did, so its answer cannot go (issue 42; crate::nonces).
    pub(super) fn binding_answer_fresh(&self, session_id: u64, frame: &[u8]) -> bool {
        self.established(session_id).is_none_or(|est| {
            est.nonces
                .record(frame.get(4..).unwrap_or_default())
                .is_ok()
        })
    }

    /// Ends a binding whose answer could not be signed (`binding_answer_fresh`): only this
    /// connection's channel goes, answered unsigned, since no nonce is left to sign it with.
    pub(super) fn unbind_unsigned(&mut self, rhdr: &Header) -> Result<Bytes, Violation> {
        self.sessions.remove(&rhdr.session_id);
        self.plain_response(rhdr, NtStatus::INSUFFICIENT_RESOURCES, &ERROR_BODY)
    }

    fn established(&self, session_id: u64) -> Option<Arc<Established>> {
        self.table.get(session_id)?.established().cloned()
    }

    /// A binding that failed leaves the session as it was: only this connection's channel
    /// goes (Samba's smbXsrv_session_remove_channel; smbtorture bind_invalid_auth).
    pub(super) fn unbind(&mut self, rhdr: &Header, status: NtStatus) -> Result<Bytes, Violation> {
        self.sessions.remove(&rhdr.session_id);
        self.bind_refused(rhdr, status)
    }

    /// The error answer to a signed binding request: signed, as Samba and Windows sign it,
    /// with this connection's key for the session if it has a valid one, else the session's
    /// own (MS-SMB2 3.3.4.1.1); smbtorture's client refuses an unsigned answer to a signed
    /// request. Unsigned when the session has no key (or no longer exists).
    pub(super) fn bind_refused(&self, rhdr: &Header, status: NtStatus) -> Result<Bytes, Violation> {
        let id = rhdr.session_id;
        let signer = match self.sessions.get(&id) {
            Some(s) => s.signer.clone(),
            None => self
                .table
                .get(id)
                .and_then(|r| r.established().map(|e| e.signer.clone())),
        };
        let frame = self.build_signed(rhdr, status, &ERROR_BODY, signer.as_ref())?;
        // Signed as MS-SMB2 3.3.4.1.1 says and as Samba's and Windows' clients require, even
        // where the session's key signed another message at this nonce: only a client that
        // holds the key can ask for it (docs/security.md). Its nonce is kept all the same, so
        // no binding answer reuses it.
        let session_key = self.sessions.get(&id).is_none_or(|s| s.is_binding());
        if let Some(est) = self.established(id)
            && signer.is_some()
            && session_key
        {
            let _ = est.nonces.record(frame.get(4..).unwrap_or_default());
        }
        Ok(frame)
    }
}

/// MS-SMB2 3.3.5.5.3: a channel authenticates as the session's own user. Accounts are local
/// and named by user alone, as in `SessionRecord::may_be_replaced_by`.
fn same_user(owner: &Identity, who: &Identity) -> bool {
    !who.is_guest
        && !who.is_anonymous
        && !owner.is_guest
        && !owner.is_anonymous
        && owner.user.to_lowercase() == who.user.to_lowercase()
}
