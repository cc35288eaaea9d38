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

use super::{AuthError, ClientError, Negotiated, ProtocolError, SessionCrypto};

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
    /// the session's key (so its SessionId must be the session's), and refused where that
    /// key's nonces are spent (see [`Self::sign_binding`]).
    pub fn request(&self, header: &Header, token: &[u8]) -> Result<Vec<u8>, ClientError> {
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
            // An NTLM NEGOTIATE leg is answered with a challenge, signed with the session's
            // key; the last leg with STATUS_SUCCESS, signed with the channel's.
            let challenge = matches!(self.initiator, Mech::Ntlm(_)) && self.session_key.is_none();
            sign_binding(session, header, &mut m, challenge)?;
        }
        Ok(m)
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
                if let Some(session) = &self.binding {
                    check_binding_answer(session, &header, msg)?;
                }
                if self.is_311() {
                    self.preauth.update(msg);
                }
                let r = SessionSetupResponse::decode(msg)?;
                let Mech::Ntlm(initiator) = &mut self.initiator else {
                    return Err(AuthError::KerberosSecondLeg.into());
                };
                let (token, key) = initiator.step(r.security_buffer).map_err(AuthError::from)?;
                self.session_key = Some(zeroize::Zeroizing::new(key.to_vec()));
                Ok(SetupStep::Continue {
                    session_id: header.session_id,
                    token,
                })
            }
            NtStatus::SUCCESS => {
                let r = SessionSetupResponse::decode(msg)?;
                let auth = AuthError::Mechanism;
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
                    .ok_or(ProtocolError::Violation("SUCCESS before the challenge"))?;
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
        let k = derive_signing_key(n.dialect.0, key, hash).map_err(AuthError::KeyDerivation)?;
        let signer = Signer::new(n.signing, &k[..]).map_err(AuthError::SigningKey)?;
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
        .map_err(AuthError::KeyDerivation)?;
        let signer = Signer::new(n.signing, keys.signing_key()).map_err(AuthError::SigningKey)?;
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
        let crypto = SessionCrypto::new(
            session_id,
            Some(signer),
            keys.encryptor(),
            keys.decryptor(),
            self.nonce_prefix,
        );
        // This connection's Channel.SigningKey is Session.SigningKey (MS-SMB2 3.2.5.3.1): it
        // signs every MessageId from here on, which bindings must leave alone.
        if header.is_signed() {
            let _ = crypto.nonces().record(final_msg);
        }
        crypto
            .nonces()
            .first_channel_from(header.message_id.saturating_add(1));
        Ok(crypto)
    }
}

/// Signs a binding leg with Session.SigningKey (MS-SMB2 3.2.4.1.1), unless that would spend an
/// AES-GMAC nonce of the key a second time (crate::nonces): the leg's own (MessageId, client)
/// and, for a leg answered with a `challenge` (STATUS_MORE_PROCESSING_REQUIRED, signed with
/// Session.SigningKey too, 3.3.4.1.1), the (MessageId, server) of that answer. Every binding
/// connection starts at MessageId 1, so under AES-GMAC a session is bound once with NTLM.
fn sign_binding(
    session: &SessionCrypto,
    header: &Header,
    msg: &mut [u8],
    challenge: bool,
) -> Result<(), ClientError> {
    const SPENT: ClientError = ClientError::Integrity(
        "binding again would sign under an AES-GMAC nonce the session's key has used \
         (MS-SMB2 3.1.4.1); offer AES-CMAC to bind more channels",
    );
    if challenge && !session.nonces().is_free(header.message_id, true) {
        return Err(SPENT);
    }
    session.sign(msg)?;
    session.nonces().record(msg).map_err(|_| SPENT)
}

/// A binding's MORE_PROCESSING answer: signed with Session.SigningKey (MS-SMB2 3.2.5.1.3)
/// under a nonce that signed nothing else; else the binding stops before the next leg.
fn check_binding_answer(
    session: &SessionCrypto,
    header: &Header,
    msg: &[u8],
) -> Result<(), ClientError> {
    if !header.is_signed() || !session.verify(msg) {
        return Err(ClientError::Integrity(
            "binding answer not signed with the session's key",
        ));
    }
    session.nonces().record(msg).map_err(|_| {
        ClientError::Integrity("the server signed a binding answer under a used AES-GMAC nonce")
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use smbq_crypto::SigningAlgorithm;
    use smbq_wire::Command;
    use smbq_wire::header::flags;

    /// A session whose own SESSION_SETUP ended at MessageId 2 on its first connection.
    fn session(algorithm: SigningAlgorithm) -> SessionCrypto {
        let signer = Signer::new(algorithm, &[5; 16]).unwrap();
        let s = SessionCrypto::new(9, Some(signer), None, None, [0; 4]);
        s.nonces().first_channel_from(3);
        s
    }

    fn message(message_id: u64, from_server: bool, body: &[u8]) -> (Header, Vec<u8>) {
        let h = Header {
            command: Command::SESSION_SETUP,
            message_id,
            session_id: 9,
            flags: if from_server {
                flags::SERVER_TO_REDIR
            } else {
                0
            },
            status: if from_server {
                NtStatus::MORE_PROCESSING_REQUIRED
            } else {
                NtStatus::SUCCESS
            },
            ..Header::default()
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        let mut m = w.into_vec();
        m.extend_from_slice(body);
        (h, m)
    }

    /// One binding's signed messages under the session's key: leg 1, its challenge, leg 2.
    fn one_binding(s: &SessionCrypto, challenge: &[u8]) -> Result<(), ClientError> {
        let (h, mut leg1) = message(1, false, b"negotiate");
        sign_binding(s, &h, &mut leg1, true)?;
        let (_, mut answer) = message(1, true, challenge);
        s.sign(&mut answer)?;
        check_binding_answer(s, &Header::decode(&answer).unwrap(), &answer)?;
        // Answered with STATUS_SUCCESS under the channel's key: (2, server) is the first
        // connection's, and need not be free.
        let (h, mut leg2) = message(2, false, challenge);
        sign_binding(s, &h, &mut leg2, false)
    }

    #[test]
    fn under_gmac_a_session_is_bound_once() {
        let s = session(SigningAlgorithm::AesGmac);
        one_binding(&s, b"challenge 1").unwrap();
        // The same first leg again would be the same message, but its answer would not.
        let (h, mut leg1) = message(1, false, b"negotiate");
        assert!(matches!(
            sign_binding(&s, &h, &mut leg1, true),
            Err(ClientError::Integrity(_))
        ));
        assert_eq!(&leg1[48..64], &[0; 16], "nothing was signed");
    }

    #[test]
    fn a_second_challenge_under_a_used_nonce_stops_the_binding() {
        let s = session(SigningAlgorithm::AesGmac);
        one_binding(&s, b"challenge 1").unwrap();
        let (_, mut other) = message(1, true, b"challenge 2");
        s.sign(&mut other).unwrap();
        let h = Header::decode(&other).unwrap();
        assert!(check_binding_answer(&s, &h, &other).is_err());
        // An answer not signed with the session's key stops it too.
        let (h, unsigned) = message(1, true, b"challenge 1");
        assert!(check_binding_answer(&s, &h, &unsigned).is_err());
    }

    #[test]
    fn the_first_connections_message_ids_are_not_used_for_binding() {
        let s = session(SigningAlgorithm::AesGmac);
        let (h, mut leg) = message(3, false, b"negotiate");
        assert!(sign_binding(&s, &h, &mut leg, false).is_err());
    }

    #[test]
    fn under_cmac_a_session_binds_again() {
        let s = session(SigningAlgorithm::AesCmac);
        one_binding(&s, b"challenge 1").unwrap();
        one_binding(&s, b"challenge 2").unwrap();
    }
}
