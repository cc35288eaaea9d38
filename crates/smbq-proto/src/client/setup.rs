//! SESSION_SETUP from the client's side: NTLMv2 in SPNEGO, the 3.1.1 preauth hash over the
//! exact bytes exchanged, key derivation, and the check of the final response's signature
//! (MS-SMB2 3.2.4.2.3, 3.2.5.3, 3.2.5.3.1).

use std::sync::Arc;

use rand::RngCore;
use smbq_auth::{Credentials, Initiator, KerberosInitiator};
use smbq_crypto::{PreauthHash, Role, Signer, derive_keys, derive_signing_key};
use smbq_wire::session_setup::{
    SessionSetupRequest, SessionSetupResponse, flags as setup_flags, security_mode, session_flags,
};
use smbq_wire::{Dialect, Header, NtStatus, Writer};

use super::{ClientError, Negotiated, SessionCrypto};

/// What to do after a SESSION_SETUP response.
#[derive(Debug)]
pub enum SetupStep {
    /// Send another leg with this security token, on `session_id`.
    Continue { session_id: u64, token: Vec<u8> },
    /// The session is established.
    Done {
        crypto: SessionCrypto,
        session_flags: u16,
    },
}

/// The mechanism a SESSION_SETUP speaks.
enum Mech {
    Ntlm(Initiator),
    Kerberos(KerberosInitiator),
}

/// One SESSION_SETUP exchange in progress.
pub struct SessionSetup {
    initiator: Mech,
    negotiated: Negotiated,
    preauth: PreauthHash,
    session_key: Option<zeroize::Zeroizing<Vec<u8>>>,
    signing_required: bool,
    nonce_prefix: [u8; 4],
    /// PreviousSessionId (MS-SMB2 2.2.5): the session this one replaces after a reconnect.
    previous_session_id: u64,
    /// Binding this connection to an established session (MS-SMB2 3.2.4.2.3 with
    /// SMB2_SESSION_FLAG_BINDING): its keys sign the legs, and the channel's come from them.
    binding: Option<Arc<SessionCrypto>>,
}

impl SessionSetup {
    /// Names the session this one replaces (MS-SMB2 3.2.4.2.3: a client reconnecting after
    /// its connection broke), so the server ends it and keeps its durable opens for us.
    pub fn replacing(mut self, previous_session_id: u64) -> Self {
        self.previous_session_id = previous_session_id;
        self
    }

    /// Binds this connection to `session` (multichannel, MS-SMB2 3.2.4.2.3): the legs carry
    /// SMB2_SESSION_FLAG_BINDING and the session's signature, and the result is a channel
    /// whose signing key comes from this authentication and this connection's preauth hash.
    /// The credentials must be the session's user's.
    pub fn binding(mut self, session: Arc<SessionCrypto>) -> Self {
        self.binding = Some(session);
        self
    }

    /// `conn_preauth` is the connection's hash after NEGOTIATE (3.1.1 only; ignored otherwise).
    pub fn new(
        creds: Credentials,
        negotiated: Negotiated,
        conn_preauth: &PreauthHash,
        signing_required: bool,
        rng: &mut impl RngCore,
        now_filetime: u64,
    ) -> Self {
        let ntlm = Mech::Ntlm(Initiator::new(creds, rng, now_filetime));
        Self::with_mech(ntlm, negotiated, conn_preauth, signing_required, rng)
    }

    /// A Kerberos logon whose AP-REQ is already made (MS-SMB2 3.2.4.2.3 with MS-SPNG).
    pub fn kerberos(
        krb: KerberosInitiator,
        negotiated: Negotiated,
        conn_preauth: &PreauthHash,
        signing_required: bool,
        rng: &mut impl RngCore,
    ) -> Self {
        let mech = Mech::Kerberos(krb);
        Self::with_mech(mech, negotiated, conn_preauth, signing_required, rng)
    }

    fn with_mech(
        initiator: Mech,
        negotiated: Negotiated,
        conn_preauth: &PreauthHash,
        signing_required: bool,
        rng: &mut impl RngCore,
    ) -> Self {
        let mut nonce_prefix = [0u8; 4];
        rng.fill_bytes(&mut nonce_prefix);
        Self {
            initiator,
            negotiated,
            preauth: conn_preauth.clone(),
            session_key: None,
            signing_required,
            nonce_prefix,
            previous_session_id: 0,
            binding: None,
        }
    }

    /// The first leg's security token.
    pub fn first_token(&mut self) -> Vec<u8> {
        match &mut self.initiator {
            Mech::Ntlm(i) => i.first_token(),
            Mech::Kerberos(k) => k.first_token(),
        }
    }

    /// The SESSION_SETUP request carrying `token` under `header`; a binding's is signed with
    /// the session's key (so its SessionId must be the session's).
    pub fn request(&self, header: &Header, token: &[u8]) -> Vec<u8> {
        let req = SessionSetupRequest {
            flags: if self.binding.is_some() {
                setup_flags::BINDING
            } else {
                0
            },
            security_mode: if self.signing_required {
                security_mode::SIGNING_ENABLED | security_mode::SIGNING_REQUIRED
            } else {
                security_mode::SIGNING_ENABLED
            },
            security_buffer: token,
            previous_session_id: self.previous_session_id,
            ..Default::default()
        };
        let mut w = Writer::new();
        header.encode(&mut w);
        req.encode(&mut w);
        let mut m = w.into_vec();
        if let Some(session) = &self.binding {
            // A key the session was set up with signs; it cannot fail for a whole message.
            let _ = session.sign(&mut m);
        }
        m
    }

    fn is_311(&self) -> bool {
        self.negotiated.dialect == Dialect::SMB3_1_1
    }

    /// Records a request exactly as sent (MS-SMB2 3.2.4.2.3: the preauth hash covers it).
    pub fn sent(&mut self, msg: &[u8]) {
        if self.is_311() {
            self.preauth.update(msg);
        }
    }

    /// Takes a SESSION_SETUP response (the whole message as received, decrypted if needed).
    pub fn on_response(&mut self, msg: &[u8]) -> Result<SetupStep, ClientError> {
        let header = Header::decode(msg)?;
        match header.status {
            NtStatus::MORE_PROCESSING_REQUIRED => {
                if self.is_311() {
                    self.preauth.update(msg);
                }
                let r = SessionSetupResponse::decode(msg)?;
                let Mech::Ntlm(initiator) = &mut self.initiator else {
                    return Err(ClientError::Auth(
                        "Kerberos: the server asked for a second leg".into(),
                    ));
                };
                let (token, key) = initiator
                    .step(r.security_buffer)
                    .map_err(|e| ClientError::Auth(e.to_string()))?;
                self.session_key = Some(zeroize::Zeroizing::new(key.to_vec()));
                Ok(SetupStep::Continue {
                    session_id: header.session_id,
                    token,
                })
            }
            NtStatus::SUCCESS => {
                let r = SessionSetupResponse::decode(msg)?;
                let auth = |e: smbq_auth::AuthError| ClientError::Auth(e.to_string());
                match &mut self.initiator {
                    Mech::Ntlm(i) => i.finish(r.security_buffer).map_err(auth)?,
                    Mech::Kerberos(k) => {
                        self.session_key = Some(k.finish(r.security_buffer).map_err(auth)?);
                    }
                }
                let anonymous =
                    r.session_flags & (session_flags::IS_NULL | session_flags::IS_GUEST) != 0;
                let key = self
                    .session_key
                    .take()
                    .ok_or_else(|| ClientError::protocol("SUCCESS before the challenge"))?;
                if let Some(session) = &self.binding {
                    let crypto = self.channel(session, &key, msg, &header)?;
                    return Ok(SetupStep::Done {
                        crypto,
                        session_flags: r.session_flags,
                    });
                }
                let crypto = if anonymous {
                    // Guest and null sessions have no usable key (MS-SMB2 3.2.5.3.1).
                    SessionCrypto::new(header.session_id, None, None, None, self.nonce_prefix)
                } else {
                    self.derive(header.session_id, &key, msg, &header)?
                };
                Ok(SetupStep::Done {
                    crypto,
                    session_flags: r.session_flags,
                })
            }
            status => Err(ClientError::Status {
                op: "SESSION_SETUP",
                status,
            }),
        }
    }

    /// A binding's keys (MS-SMB2 3.2.5.3.1): the channel's signing key, which must verify the
    /// final response, and the session's sealing keys.
    fn channel(
        &self,
        session: &SessionCrypto,
        key: &[u8],
        final_msg: &[u8],
        header: &Header,
    ) -> Result<SessionCrypto, ClientError> {
        let n = &self.negotiated;
        let hash = self.is_311().then_some(self.preauth.value());
        let k = derive_signing_key(n.dialect.0, key, hash)
            .map_err(|e| ClientError::Auth(format!("key derivation: {e}")))?;
        let signer = Signer::new(n.signing, &k[..])
            .map_err(|e| ClientError::Auth(format!("signing key: {e}")))?;
        if !header.is_signed() || !signer.verify(final_msg) {
            return Err(ClientError::Integrity(
                "final binding response is not signed with the channel's key",
            ));
        }
        Ok(session.channel(signer))
    }

    fn derive(
        &self,
        session_id: u64,
        key: &[u8],
        final_msg: &[u8],
        header: &Header,
    ) -> Result<SessionCrypto, ClientError> {
        let n = &self.negotiated;
        let keys = derive_keys(
            n.dialect.0,
            Role::Client,
            key,
            self.is_311().then_some(self.preauth.value()),
            n.cipher,
        )
        .map_err(|e| ClientError::Auth(format!("key derivation: {e}")))?;
        let signer = Signer::new(n.signing, keys.signing_key())
            .map_err(|e| ClientError::Auth(format!("signing key: {e}")))?;
        // The final response is signed when signing is on for the session; 3.1.1 always signs
        // it (MS-SMB2 3.3.5.5.3), which is what proves the server derived the same keys.
        if header.is_signed() {
            if !signer.verify(final_msg) {
                return Err(ClientError::Integrity(
                    "final SESSION_SETUP response signature",
                ));
            }
        } else if self.is_311() || self.signing_required {
            return Err(ClientError::Integrity(
                "final SESSION_SETUP response is not signed",
            ));
        }
        Ok(SessionCrypto::new(
            session_id,
            Some(signer),
            keys.encryptor(),
            keys.decryptor(),
            self.nonce_prefix,
        ))
    }
}
