//! SESSION_SETUP (MS-SMB2 3.3.5.5): a new session's first authentication, a valid session's
//! re-authentication, the keys a first authentication installs (3.3.5.5.3) and what it settles
//! for channels bound later (`establish`). Binding itself is `binding.rs`.

use std::sync::Arc;

use bytes::Bytes;
use smbq_auth::{AcceptStep, Acceptor, AcceptorConfig, AuthError};
use smbq_crypto::{Cipher, PreauthHash, Role, Signer, SigningAlgorithm, derive_keys};
use smbq_wire::negotiate::{capabilities, security_mode};
use smbq_wire::session_setup::{SessionSetupRequest, SessionSetupResponse, session_flags};
use smbq_wire::{Dialect, Header, NtStatus, Writer};

use super::{Action, ConnState, ERROR_BODY, Env, ServerConnection, Transport};
use crate::config::EngineConfig;
use crate::error::Violation;
use crate::nonces::NonceLedger;
use crate::session::{Exchange, Session, SessionState};
use crate::sessions::Established;

impl ServerConnection {
    /// MS-SMB2 3.3.5.5. Builds and returns the response frame at once: its exact bytes feed
    /// the preauth hash. The steps: what the negotiation allows, which session the request is
    /// for (new, in progress, or valid and re-authenticating), one acceptor step, then the
    /// continuation, the established session, or the failure.
    // Long: the steps above in order, and the acceptor step's note on disk IO.
    pub(super) fn session_setup(
        &mut self,
        hdr: &Header,
        msg: &[u8],
        encrypted: bool,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Bytes, Violation> {
        let p = self.setup_params()?;
        let mut rhdr = hdr.clone();
        rhdr.credits = self.credits.grant(hdr.credits.max(1));

        let req = match SessionSetupRequest::decode(msg) {
            Ok(r) => r,
            Err(_) => return self.plain_response(&rhdr, NtStatus::INVALID_PARAMETER, &ERROR_BODY),
        };
        // MS-SMB2 3.3.5.5 (RejectUnencryptedAccess): a client that cannot encrypt is refused
        // before authenticating, so it cannot use the server to test passwords.
        if self.cfg.encrypt_required && !p.transport_security && !p.client_can_encrypt {
            return self.plain_response(&rhdr, NtStatus::ACCESS_DENIED, &ERROR_BODY);
        }
        let found = if req.is_binding() {
            self.bind_session_id(hdr, msg, env, &p)
        } else {
            self.setup_session_id(hdr, msg, encrypted, env, &p)
        };
        let session_id = match found {
            Ok(id) => id,
            Err(status) => return self.setup_refused(hdr, msg, &rhdr, status),
        };
        rhdr.session_id = session_id;

        let acceptor_cfg = self.acceptor_config();
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return self.plain_response(&rhdr, NtStatus::USER_SESSION_DELETED, &ERROR_BODY);
        };
        let reauth = session.is_valid();
        let binding = session.is_binding();
        let Exchange { acceptor, preauth } = session.exchange_or(|| Exchange {
            acceptor: Box::new(new_acceptor(acceptor_cfg, env)),
            preauth: p.conn_preauth.clone(),
        });
        if p.dialect == Dialect::SMB3_1_1 {
            preauth.update(msg);
        }
        // The engine's one synchronous disk IO, on the connection loop's worker (documented in
        // docs/ARCHITECTURE.md, smbq-proto). Bound: `env.accounts` (`LiveAccounts`) `stat`s the
        // account file at most once a second server-wide, plus once per check in progress for
        // an unknown name, and reads it only when it changed; a Kerberos AP-REQ has MIT read
        // the keytab and lock and write the replay cache, once per step (`block_in_place` on a
        // multi-thread runtime).
        let step = acceptor.step(req.security_buffer, env.accounts);
        let hash = *preauth.value();
        match step {
            Ok(AcceptStep::Continue(token)) => {
                self.setup_continue(&rhdr, p.dialect, binding, &token)
            }
            Ok(AcceptStep::Done {
                token,
                identity,
                session_key,
                valid_for,
                mechanism,
            }) => {
                let done = Authenticated {
                    token,
                    identity,
                    session_key,
                    valid_for,
                    mechanism,
                    hash,
                    reauth,
                    request_signed: hdr.is_signed(),
                    security_mode: req.security_mode,
                    previous_session_id: req.previous_session_id,
                };
                if binding {
                    self.bind_done(&rhdr, &p, done, env, actions)
                } else {
                    self.setup_done(&rhdr, &p, done, env, actions)
                }
            }
            Err(e) => self.setup_failed(&rhdr, e, reauth, binding, actions),
        }
    }

    /// The answer to a SESSION_SETUP that names no session it may go on with (`status` says
    /// why).
    fn setup_refused(
        &self,
        hdr: &Header,
        msg: &[u8],
        rhdr: &Header,
        status: NtStatus,
    ) -> Result<Bytes, Violation> {
        // A signed request is answered signed where a key for its session exists (MS-SMB2
        // 3.3.4.1.1; Samba signs these too, and its client drops a connection whose
        // answer to a signed request is not).
        // A key of another connection's session signs only an answer to a request that
        // proved it holds that key: else anyone could have answers of their choosing signed
        // with someone else's key (and, with GMAC, nonces reused under it).
        if hdr.is_signed()
            && (self.sessions.contains_key(&hdr.session_id) || self.signed_foreign(hdr, msg))
        {
            return self.bind_refused(rhdr, status);
        }
        self.plain_response(rhdr, status, &ERROR_BODY)
    }

    /// The acceptor wants another leg: MORE_PROCESSING_REQUIRED with its token, whose exact
    /// bytes go into the session's preauth hash (3.1.1).
    fn setup_continue(
        &mut self,
        rhdr: &Header,
        dialect: Dialect,
        binding: bool,
        token: &[u8],
    ) -> Result<Bytes, Violation> {
        let session_id = rhdr.session_id;
        let body = encode_session_setup(0, token);
        // A binding's legs are signed with the session's key, as the request was
        // (MS-SMB2 3.3.4.1.1; Samba signs them, and its client checks them), under a
        // nonce no other message of that key had (crate::nonces).
        let frame = self.build_single(rhdr, NtStatus::MORE_PROCESSING_REQUIRED, &body, binding)?;
        if binding && !self.binding_answer_fresh(session_id, &frame) {
            return self.unbind_unsigned(rhdr);
        }
        if dialect == Dialect::SMB3_1_1
            && let Some(x) = self
                .sessions
                .get_mut(&session_id)
                .and_then(Session::exchange)
        {
            x.preauth.update(frame.get(4..).unwrap_or_default());
        }
        Ok(frame)
    }

    /// What SESSION_SETUP needs from the negotiation.
    fn setup_params(&self) -> Result<SetupParams, Violation> {
        let ConnState::Negotiated(neg) = &self.state else {
            return Err(Violation::NotNegotiated);
        };
        let dialect = neg.view.dialect;
        let cipher = neg.cipher;
        let client_caps = neg.view.client_capabilities;
        Ok(SetupParams {
            dialect,
            signing: neg.signing,
            cipher,
            transport_security: neg.view.transport_security,
            client_can_encrypt: dialect.is_smb3()
                && cipher.is_some()
                && (dialect == Dialect::SMB3_1_1 || client_caps & capabilities::ENCRYPTION != 0),
            conn_preauth: neg.preauth.clone(),
        })
    }

    pub(super) fn acceptor_config(&self) -> AcceptorConfig {
        AcceptorConfig {
            netbios_domain: self.cfg.server_name.to_uppercase(),
            netbios_computer: self.cfg.server_name.to_uppercase(),
            dns_domain: self.cfg.server_name.to_lowercase(),
            dns_computer: self.cfg.server_name.to_lowercase(),
            allow_guest: self.cfg.guest_ok,
            allow_anonymous: self.cfg.anonymous_ok,
            kerberos: self.cfg.kerberos.clone(),
            ntlm: self.ntlm(),
        }
    }

    /// Whether NTLM is accepted on this connection: `ntlm`, and over QUIC `ntlm_quic` too.
    pub(super) fn ntlm(&self) -> bool {
        self.cfg.ntlm && (self.transport != Transport::Quic || self.cfg.ntlm_quic)
    }

    /// The session a SESSION_SETUP is for: a new one (SessionId 0), or one in progress or
    /// valid on this connection; a status to answer with when there is none.
    fn setup_session_id(
        &mut self,
        hdr: &Header,
        msg: &[u8],
        encrypted: bool,
        env: &mut Env<'_>,
        p: &SetupParams,
    ) -> Result<u64, NtStatus> {
        if hdr.session_id == 0 {
            if self.sessions.len() >= self.cfg.limits.max_sessions_per_connection {
                return Err(NtStatus::INSUFFICIENT_RESOURCES);
            }
            let id = (env.new_session_id)();
            let acceptor = new_acceptor(self.acceptor_config(), env);
            // A repeated id would join another connection's session: refused, never shared.
            let record = self
                .table
                .create(id)
                .ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
            self.sessions
                .insert(id, Session::new(record, acceptor, p.conn_preauth.clone()));
            return Ok(id);
        }
        let s = self
            .sessions
            .get(&hdr.session_id)
            .filter(|s| !s.record.has_ended())
            .ok_or(NtStatus::USER_SESSION_DELETED)?;
        // A binding goes on with the BINDING flag only (MS-SMB2 3.3.5.5.2).
        if s.is_binding() {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        // Re-authentication (MS-SMB2 3.3.5.5.2): a signed request is checked with the current
        // key; keys stay as they are.
        if s.is_valid()
            && hdr.is_signed()
            && !encrypted
            && !s.signer.as_ref().is_some_and(|k| k.verify(msg))
        {
            return Err(NtStatus::ACCESS_DENIED);
        }
        // MS-SMB2 3.3.5.2.4: a session that requires signing takes no unsigned
        // re-authentication either (smbtorture bind_negative_smb3signCtoH, phase 3).
        if s.is_valid() && !hdr.is_signed() && !encrypted && s.signing_required {
            return Err(NtStatus::ACCESS_DENIED);
        }
        Ok(hdr.session_id)
    }

    /// The acceptor said yes: keys (first authentication only), flags, the signed final
    /// response, and the session announced to the shell (MS-SMB2 3.3.5.5.3).
    // Long: 3.3.5.5.3 in order on one borrowed session; its parts share most of `Authenticated`.
    fn setup_done(
        &mut self,
        rhdr: &Header,
        p: &SetupParams,
        done: Authenticated,
        env: &mut Env<'_>,
        actions: &mut Vec<Action>,
    ) -> Result<Bytes, Violation> {
        let Authenticated {
            token,
            identity,
            session_key,
            valid_for,
            mechanism,
            hash,
            reauth,
            request_signed,
            security_mode: client_security_mode,
            previous_session_id,
        } = done;
        let session_id = rhdr.session_id;
        let (dialect, signing_algo) = (p.dialect, p.signing);
        let (transport_security, client_can_encrypt) = (p.transport_security, p.client_can_encrypt);
        let is_guest = identity.is_guest || identity.is_anonymous;
        if self.cfg.encrypt_required
            && !transport_security
            && (!client_can_encrypt || is_guest)
            && !reauth
        {
            // MS-SMB2 3.3.5.5.3: RejectUnencryptedAccess.
            self.forget_unannounced(session_id);
            return self.plain_response(rhdr, NtStatus::ACCESS_DENIED, &ERROR_BODY);
        }
        // A re-authentication keeps the first one's keys (MS-SMB2 3.3.5.5.3): a session first
        // set up anonymously has public ones, so it may not become anyone's but anonymous
        // (Samba refuses a re-authentication as another user too). A user's session may go
        // anonymous and back (smbtorture smb2.session.reauth2): its keys are the user's.
        let public_keys = self
            .sessions
            .get(&session_id)
            .is_some_and(|s| s.public_keys);
        if reauth && public_keys && !identity.is_anonymous {
            let e = AuthError::LogonFailure {
                user: identity.user.clone(),
            };
            return self.setup_failed(rhdr, e, reauth, false, actions);
        }
        let user = identity.user.clone();
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return Err(Violation::Internal("session vanished during SESSION_SETUP"));
        };
        let mut flags = 0u16;
        if identity.is_anonymous {
            flags |= session_flags::IS_NULL;
        } else if identity.is_guest {
            flags |= session_flags::IS_GUEST;
        }
        // Keys come from the first authentication only; a re-authentication keeps them.
        if !reauth && !identity.is_guest {
            if identity.is_anonymous {
                // An anonymous session's key is that of the null logon (zeros, or the client's
                // random key under NTLM KEY_EXCH, smbq_auth): its keys verify a signed request
                // and open an encrypted one once the connection is no longer constrained, as
                // on Windows and Samba (smbtorture smb2.session.anon-signing1/2,
                // anon-encryption2). They protect nothing, so signing is never required,
                // nothing is encrypted unasked, and no channel binds.
                install_keys(session, &self.cfg, p, &session_key[..], &hash, env)?;
                session.encrypt_data = false;
                session.public_keys = true;
            } else {
                install_keys(session, &self.cfg, p, &session_key[..], &hash, env)?;
                session.signing_required = self.cfg.require_signing
                    || u16::from(client_security_mode) & security_mode::SIGNING_REQUIRED != 0;
                establish(session, p);
                // MS-SMB2 3.3.5.5.3: the connection is no longer constrained.
                self.constrained = false;
            }
        }
        // The connection it was set up on is its first channel (MS-SMB2 3.3.5.5.3).
        session.record.add_channel(self.id);
        // A first authentication or a re-authentication, done; a Kerberos ticket's end is the
        // session's (MS-SMB2 3.3.5.5.3), a re-authentication moves it.
        session.state = SessionState::Valid { reauth: None };
        session.expires_at = valid_for.map(|d| env.at + d);
        let identity = Arc::new(identity);
        session.record.set_owner(identity.clone());
        session.identity = Some(identity);
        if session.encrypt_data {
            flags |= session_flags::ENCRYPT_DATA;
        }
        // MS-SMB2 3.3.5.5.3: the final response of a 3.x non-guest session is signed
        // (the client checks it to prove the key); for 2.x when the client signed.
        let sign = !is_guest && (dialect.is_smb3() || request_signed || session.signing_required);
        let encrypt_required = session.encrypt_data;
        let signs = session.signer.is_some();
        let can_seal = session.encryptor.as_ref().map(|e| e.cipher());
        let body = encode_session_setup(flags, &token);
        let frame = self.build_single(rhdr, NtStatus::SUCCESS, &body, sign)?;
        if !reauth && sign {
            self.first_channel_nonces(rhdr, &frame);
        }
        actions.push(Action::SessionStarted {
            session_id,
            bound: false,
            previous_session_id,
            user,
            mechanism,
            dialect,
            signing: signs.then_some(signing_algo),
            cipher: can_seal,
            encrypt_required,
        });
        Ok(frame)
    }

    /// The acceptor said no: the session goes, a valid one being re-authenticated included
    /// (MS-SMB2 3.3.5.5.3).
    fn setup_failed(
        &mut self,
        rhdr: &Header,
        e: AuthError,
        reauth: bool,
        binding: bool,
        actions: &mut Vec<Action>,
    ) -> Result<Bytes, Violation> {
        let session_id = rhdr.session_id;
        // A failed or missing mechListMIC and a peer's reject have always been answered as
        // malformed exchanges here; every other error answers what it says it is.
        let status = match &e {
            AuthError::MechListMic | AuthError::Rejected => NtStatus::INVALID_PARAMETER,
            e => e.nt_status(),
        };
        let failed = match e {
            AuthError::LogonFailure { user } => Some((user, String::new())),
            AuthError::Kerberos {
                principal, reason, ..
            } => Some((principal, reason)),
            e @ AuthError::NtlmBlocked => Some((String::new(), e.to_string())),
            _ => None,
        };
        if binding {
            // Only the channel goes; the session stays on its other connections.
            if let Some((user, reason)) = failed {
                actions.push(Action::AuthFailed { user, reason });
            }
            return self.unbind(rhdr, status);
        }
        // MS-SMB2 3.3.5.5.3: a failed authentication removes the session, a valid
        // one being re-authenticated included.
        if reauth {
            // The server ends it (and its record) when it closes the session's opens.
            self.drop_session(session_id);
            actions.push(Action::SessionEnded { session_id });
        } else {
            self.forget_unannounced(session_id);
        }
        if let Some((user, reason)) = failed {
            actions.push(Action::AuthFailed { user, reason });
        }
        self.plain_response(rhdr, status, &ERROR_BODY)
    }

    /// Drops a session the server never heard of (its first authentication did not succeed):
    /// its record goes with it. A session announced with [`Action::SessionStarted`] is ended by
    /// the server instead, after its opens are closed.
    fn forget_unannounced(&mut self, session_id: u64) {
        self.sessions.remove(&session_id);
        self.table.end(session_id);
    }
}

pub(super) fn encode_session_setup(flags: u16, token: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    SessionSetupResponse {
        session_flags: flags,
        security_buffer: token,
    }
    .encode(&mut w);
    w.into_vec()
}

/// What a session's first authentication settled, for the channels bound to it later
/// (MS-SMB2 3.3.5.5.3): a session without a signing key (guest, anonymous) has none.
fn establish(session: &mut Session, p: &SetupParams) {
    if let Some(signer) = session.signer.clone() {
        session.record.set_established(Arc::new(Established {
            dialect: p.dialect,
            signing: p.signing,
            cipher: p.cipher,
            nonces: Arc::new(NonceLedger::new(signer.algorithm())),
            signer,
            encryptor: session.encryptor.clone(),
            decryptor: session.decryptor.clone(),
            signing_required: session.signing_required,
            encrypt_data: session.encrypt_data,
        }));
    }
}

/// A first authentication's keys (MS-SMB2 3.3.5.5.3): signing, sealing both ways, and whether
/// the session must be encrypted.
fn install_keys(
    session: &mut Session,
    cfg: &EngineConfig,
    p: &SetupParams,
    session_key: &[u8],
    hash: &[u8; 64],
    env: &mut Env<'_>,
) -> Result<(), Violation> {
    let keys = derive_keys(
        p.dialect.0,
        Role::Server,
        session_key,
        (p.dialect == Dialect::SMB3_1_1).then_some(hash),
        // Keys exist even under transport-level security: the client may still encrypt (the
        // Rust smb crate does); only the requirement goes.
        p.cipher,
    )
    .map_err(|e| Violation::KeyDerivation(e.to_string()))?;
    session.signer = Signer::new(p.signing, keys.signing_key()).ok();
    let mut prefix = [0u8; 4];
    env.rng.fill_bytes(&mut prefix);
    session.encryptor = keys
        .encryptor()
        .map(|e| Arc::new(crate::transform::TransformSealer::new(e, prefix)));
    session.decryptor = keys.decryptor();
    session.encrypt_data = !p.transport_security
        && p.client_can_encrypt
        && (cfg.encrypt_required || cfg.encrypt_desired);
    Ok(())
}

/// What SESSION_SETUP needs from the negotiation, copied out once.
pub(super) struct SetupParams {
    pub(super) dialect: Dialect,
    pub(super) signing: SigningAlgorithm,
    pub(super) cipher: Option<Cipher>,
    pub(super) transport_security: bool,
    /// MS-SMB2 3.3.5.5: 3.x with a cipher, and for 3.0/3.0.2 the ENCRYPTION capability.
    pub(super) client_can_encrypt: bool,
    /// The connection's preauth hash after NEGOTIATE; every session's starts from it.
    pub(super) conn_preauth: PreauthHash,
}

/// What a finished acceptor exchange produced.
pub(super) struct Authenticated {
    pub(super) token: Vec<u8>,
    pub(super) identity: smbq_auth::Identity,
    pub(super) session_key: zeroize::Zeroizing<Vec<u8>>,
    /// A Kerberos ticket's remaining life; `None` for NTLM.
    pub(super) valid_for: Option<std::time::Duration>,
    pub(super) mechanism: smbq_auth::Mechanism,
    /// The session's preauth hash over every SESSION_SETUP request and response so far.
    pub(super) hash: [u8; 64],
    pub(super) reauth: bool,
    /// From the request: whether it was signed, its SecurityMode, its PreviousSessionId.
    pub(super) request_signed: bool,
    pub(super) security_mode: u8,
    pub(super) previous_session_id: u64,
}

pub(super) fn new_acceptor(cfg: AcceptorConfig, env: &mut Env<'_>) -> Acceptor {
    let mut challenge = [0u8; 8];
    env.rng.fill_bytes(&mut challenge);
    Acceptor::new(cfg, challenge, env.now)
}
