//! Client side: SPNEGO + NTLMv2 initiator (MS-NLMP 3.1.5, RFC 4178 section 3.1).

use rand::RngCore;
use smbq_wire::cursor::Writer;
use zeroize::Zeroizing;

use crate::ntlm_crypto::{
    Direction, Sealer, client_blob, lmv2_response, message_mic, nt_hash, nt_proof, ntowfv2, rc4k,
    session_base_key, unicode,
};
use crate::ntlm_msg::{
    AuthenticateFields, MIC_OFFSET, av, av_value, decode_challenge, encode_authenticate,
    encode_negotiate, flags, parse_av_pairs, put_av,
};
use crate::spnego::{self, NegState, NegotiationToken, OID_NTLMSSP};
use crate::{AuthError, MAX_TOKEN_LEN};

/// What the client authenticates with. `Debug` is deliberately not derived (it holds a hash).
#[derive(Clone)]
pub struct Credentials {
    pub user: String,
    pub domain: String,
    pub workstation: String,
    /// `None` for an anonymous logon.
    nt_hash: Option<Zeroizing<[u8; 16]>>,
}

impl Credentials {
    pub fn with_password(user: &str, domain: &str, password: &str, workstation: &str) -> Self {
        Self::with_nt_hash(user, domain, nt_hash(password), workstation)
    }

    pub fn with_nt_hash(user: &str, domain: &str, nt_hash: [u8; 16], workstation: &str) -> Self {
        Self {
            user: user.to_owned(),
            domain: domain.to_owned(),
            workstation: workstation.to_owned(),
            nt_hash: Some(Zeroizing::new(nt_hash)),
        }
    }

    /// MS-NLMP 3.1.5.1.2 anonymous: empty user, Z(1) LM response, empty NT response.
    pub fn anonymous() -> Self {
        Self {
            user: String::new(),
            domain: String::new(),
            workstation: String::new(),
            nt_hash: None,
        }
    }
}

enum State {
    Initial,
    SentNegotiate { negotiate: Vec<u8> },
    SentAuthenticate { server_keys: Option<Box<Sealer>> },
    Finished,
}

/// One client-side SESSION_SETUP exchange.
pub struct Initiator {
    creds: Credentials,
    client_challenge: [u8; 8],
    random_session_key: Zeroizing<[u8; 16]>,
    now_filetime: u64,
    raw: bool,
    state: State,
}

/// Flags we ask for in NEGOTIATE (MS-NLMP 2.2.2.5); the server's CHALLENGE narrows them.
const CLIENT_FLAGS: u32 = flags::UNICODE
    | flags::REQUEST_TARGET
    | flags::SIGN
    | flags::SEAL
    | flags::NTLM
    | flags::ALWAYS_SIGN
    | flags::EXTENDED_SESSIONSECURITY
    | flags::TARGET_INFO
    | flags::VERSION
    | flags::NEG_128
    | flags::KEY_EXCH
    | flags::NEG_56;

impl Initiator {
    /// Draws the client challenge and the random session key from `rng`.
    pub fn new(creds: Credentials, rng: &mut impl RngCore, now_filetime: u64) -> Self {
        let mut cc = [0u8; 8];
        rng.fill_bytes(&mut cc);
        let mut key = Zeroizing::new([0u8; 16]);
        rng.fill_bytes(&mut key[..]);
        Self::with_randomness(creds, cc, *key, now_filetime)
    }

    /// Deterministic construction (tests): the client challenge and the random session key.
    pub fn with_randomness(
        creds: Credentials,
        client_challenge: [u8; 8],
        random_session_key: [u8; 16],
        now_filetime: u64,
    ) -> Self {
        Self {
            creds,
            client_challenge,
            random_session_key: Zeroizing::new(random_session_key),
            now_filetime,
            raw: false,
            state: State::Initial,
        }
    }

    /// Speak raw NTLMSSP instead of SPNEGO-wrapped tokens (call before [`Self::first_token`]).
    pub fn raw_ntlmssp(mut self) -> Self {
        self.raw = true;
        self
    }

    fn neg_flags(&self) -> u32 {
        if self.creds.nt_hash.is_none() {
            CLIENT_FLAGS | flags::ANONYMOUS
        } else {
            CLIENT_FLAGS
        }
    }

    /// The SESSION_SETUP security buffer of the first leg: NegTokenInit carrying NEGOTIATE.
    pub fn first_token(&mut self) -> Vec<u8> {
        let negotiate = encode_negotiate(self.neg_flags());
        let token = if self.raw {
            negotiate.clone()
        } else {
            spnego::encode_init(&spnego::ntlm_mech_types_der(), &negotiate)
        };
        self.state = State::SentNegotiate { negotiate };
        token
    }

    /// Takes the server's CHALLENGE token; returns the AUTHENTICATE token and the session key.
    pub fn step(
        &mut self,
        server_token: &[u8],
    ) -> Result<(Vec<u8>, Zeroizing<[u8; 16]>), AuthError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let State::SentNegotiate { negotiate } = state else {
            return Err(AuthError::OutOfSequence);
        };
        if server_token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::TooLarge(server_token.len()));
        }
        let challenge = if self.raw {
            server_token
        } else {
            let resp = match spnego::decode(server_token)? {
                NegotiationToken::Resp(r) => r,
                NegotiationToken::Init(_) => {
                    return Err(AuthError::InvalidToken("SPNEGO: expected NegTokenResp"));
                }
            };
            if resp.neg_state == Some(NegState::Reject) {
                return Err(AuthError::Rejected);
            }
            if resp.supported_mech.is_some_and(|m| m != OID_NTLMSSP) {
                return Err(AuthError::NoCommonMechanism);
            }
            resp.response_token
                .ok_or(AuthError::InvalidToken("SPNEGO: no responseToken"))?
        };
        let (auth, key, mut client_keys, server_keys) = self.authenticate(&negotiate, challenge)?;
        let token = if self.raw {
            auth
        } else {
            // RFC 4178 section 5: protect the mechanism list whenever the keys allow it.
            let mic = client_keys
                .as_mut()
                .map(|k| k.sign(&spnego::ntlm_mech_types_der()));
            spnego::encode_resp(None, None, Some(&auth), mic.as_ref().map(|m| &m[..]))
        };
        self.state = State::SentAuthenticate {
            server_keys: server_keys.map(Box::new),
        };
        Ok((token, key))
    }

    /// MS-NLMP 3.1.5.1.2: build the AUTHENTICATE message.
    #[allow(clippy::type_complexity)]
    fn authenticate(
        &self,
        negotiate: &[u8],
        challenge_msg: &[u8],
    ) -> Result<(Vec<u8>, Zeroizing<[u8; 16]>, Option<Sealer>, Option<Sealer>), AuthError> {
        let c = decode_challenge(challenge_msg)?;
        if c.flags & flags::UNICODE == 0 {
            return Err(AuthError::InvalidToken(
                "NTLMSSP: server did not accept UNICODE",
            ));
        }
        let neg = c.flags & self.neg_flags();
        let workstation = unicode(&self.creds.workstation);

        let Some(hash) = &self.creds.nt_hash else {
            let auth = encode_authenticate(&AuthenticateFields {
                lm_response: &[0],
                nt_response: &[],
                domain: &[],
                user: &[],
                workstation: &workstation,
                encrypted_session_key: &[],
                flags: (neg | flags::ANONYMOUS) & !flags::KEY_EXCH,
                with_mic: false,
            });
            return Ok((auth, Zeroizing::new([0; 16]), None, None));
        };

        let server_av = parse_av_pairs(c.target_info)?;
        // MS-NLMP 3.1.5.1.2: use the server's MsvAvTimestamp if present; it also obliges a MIC.
        let server_time = av_value(&server_av, av::TIMESTAMP)
            .and_then(|v| <[u8; 8]>::try_from(v).ok())
            .map(u64::from_le_bytes);
        let timestamp = server_time.unwrap_or(self.now_filetime);
        let with_mic = server_time.is_some();
        let target_info = if with_mic {
            let mut w = Writer::new();
            for (id, v) in server_av.iter().filter(|(id, _)| *id != av::FLAGS) {
                put_av(&mut w, *id, v);
            }
            put_av(&mut w, av::FLAGS, &av::FLAG_MIC_PRESENT.to_le_bytes());
            put_av(&mut w, av::EOL, &[]);
            w.into_vec()
        } else {
            c.target_info.to_vec()
        };

        let key = ntowfv2(hash, &self.creds.user, &self.creds.domain);
        let blob = client_blob(timestamp, &self.client_challenge, &target_info);
        let proof = nt_proof(&key, &c.server_challenge, &blob);
        let mut nt_response = proof.to_vec();
        nt_response.extend_from_slice(&blob);
        // MS-NLMP 3.1.5.1.2: with a server timestamp the LM response is Z(24).
        let lm_response = if with_mic {
            [0u8; 24]
        } else {
            lmv2_response(&key, &c.server_challenge, &self.client_challenge)
        };
        let kx = session_base_key(&key, &proof);
        let (exported, encrypted) = if neg & flags::KEY_EXCH != 0 {
            let mut enc = *self.random_session_key;
            rc4k(&kx, &mut enc);
            (self.random_session_key.clone(), enc.to_vec())
        } else {
            (kx, Vec::new())
        };

        let mut auth = encode_authenticate(&AuthenticateFields {
            lm_response: &lm_response,
            nt_response: &nt_response,
            domain: &unicode(&self.creds.domain),
            user: &unicode(&self.creds.user),
            workstation: &workstation,
            encrypted_session_key: &encrypted,
            flags: neg,
            with_mic,
        });
        if with_mic {
            let mic = message_mic(&exported, negotiate, challenge_msg, &auth);
            if let Some(field) = auth.get_mut(MIC_OFFSET..MIC_OFFSET + 16) {
                field.copy_from_slice(&mic);
            }
        }
        let client_keys = Sealer::new(&exported, neg, Direction::ClientToServer);
        let server_keys = Sealer::new(&exported, neg, Direction::ServerToClient);
        Ok((auth, exported, Some(client_keys), Some(server_keys)))
    }

    /// Checks the server's final token (the SESSION_SETUP success response): negState must be
    /// accept-completed, and a mechListMIC, if present, must verify. A missing server MIC is
    /// tolerated: with NTLM as the only mechanism offered there is no downgrade to detect.
    pub fn finish(&mut self, server_token: &[u8]) -> Result<(), AuthError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let State::SentAuthenticate { server_keys } = state else {
            return Err(AuthError::OutOfSequence);
        };
        if self.raw {
            return Ok(());
        }
        if server_token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::TooLarge(server_token.len()));
        }
        let resp = match spnego::decode(server_token)? {
            NegotiationToken::Resp(r) => r,
            NegotiationToken::Init(_) => {
                return Err(AuthError::InvalidToken("SPNEGO: expected NegTokenResp"));
            }
        };
        match resp.neg_state {
            Some(NegState::AcceptCompleted) => {}
            Some(NegState::Reject) => return Err(AuthError::Rejected),
            _ => return Err(AuthError::InvalidToken("SPNEGO: exchange not completed")),
        }
        if let (Some(mic), Some(mut keys)) = (resp.mech_list_mic, server_keys)
            && !keys.verify(&spnego::ntlm_mech_types_der(), mic)
        {
            return Err(AuthError::MechListMic);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ntlm_msg;

    #[test]
    fn first_token_is_spnego_init_with_ntlm_negotiate() {
        let mut i = Initiator::with_randomness(
            Credentials::with_password("u", "d", "p", "w"),
            [1; 8],
            [2; 16],
            0,
        );
        let t = i.first_token();
        let NegotiationToken::Init(init) = spnego::decode(&t).unwrap() else {
            panic!()
        };
        assert_eq!(init.mech_types, vec![OID_NTLMSSP]);
        let neg = init.mech_token.unwrap();
        assert_eq!(ntlm_msg::decode_negotiate(neg).unwrap(), CLIENT_FLAGS);
    }

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s.replace([' ', '\n'], "")).unwrap()
    }

    /// MS-NLMP 4.2.4.3 CHALLENGE_MESSAGE (no MsvAvTimestamp, so no MIC and an LMv2 response).
    const CHALLENGE_4_2_4_3: &str = "
        4e544c4d53535000 02000000 0c000c00 38000000 33828ae2 0123456789abcdef
        0000000000000000 24002400 44000000 060070170000000f
        530065007200760065007200
        02000c0044006f006d00610069006e00 01000c00530065007200760065007200 00000000";

    #[test]
    fn authenticate_matches_published_ntlmv2_example_4_2_4() {
        // Inputs of MS-NLMP 4.2.1: ClientChallenge aa*8, RandomSessionKey 55*16, Time 0.
        let creds = Credentials::with_password("User", "Domain", "Password", "COMPUTER");
        let mut i = Initiator::with_randomness(creds, [0xaa; 8], [0x55; 16], 0).raw_ntlmssp();
        i.first_token();
        let chal = h(CHALLENGE_4_2_4_3);
        assert_eq!(chal.len(), 0x68);
        let (auth, key) = i.step(&chal).unwrap();
        assert_eq!(*key, [0x55; 16]);
        let a = ntlm_msg::decode_authenticate(&auth).unwrap();
        // 4.2.4.2.1 LMv2 response, 4.2.4.2.2 NTLMv2 response, 4.2.4.2.3 encrypted session key.
        assert_eq!(
            a.lm_response,
            h("86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa")
        );
        assert_eq!(
            a.nt_response,
            h(
                "68cd0ab851e51c96aabc927bebef6a1c 0101000000000000 0000000000000000
               aaaaaaaaaaaaaaaa 00000000 02000c0044006f006d00610069006e00
               01000c00530065007200760065007200 00000000 00000000"
            )
        );
        assert_eq!(
            a.encrypted_session_key,
            h("c5dad2544fc9799094ce1ce90bc9d03e")
        );
        assert_eq!(a.user, unicode("User"));
        assert_eq!(a.domain, unicode("Domain"));
        assert_eq!(
            auth.len(),
            72 + 12 + 8 + 16 + 24 + 84 + 16,
            "no MIC field without a timestamp"
        );
    }

    #[test]
    fn timestamp_in_challenge_adds_mic_and_zero_lm() {
        let creds = Credentials::with_password("User", "Domain", "Password", "W");
        let mut i = Initiator::with_randomness(creds, [0xaa; 8], [0x55; 16], 99).raw_ntlmssp();
        let neg = i.first_token();
        let mut ti = Writer::new();
        put_av(&mut ti, av::NB_COMPUTER_NAME, &unicode("S"));
        put_av(&mut ti, av::TIMESTAMP, &1234u64.to_le_bytes());
        put_av(&mut ti, av::EOL, &[]);
        let chal = ntlm_msg::encode_challenge(CLIENT_FLAGS, &[], &[1; 8], ti.as_slice());
        let (auth, key) = i.step(&chal).unwrap();
        let a = ntlm_msg::decode_authenticate(&auth).unwrap();
        assert_eq!(a.lm_response, [0; 24]);
        // Blob timestamp is the server's, not our clock.
        assert_eq!(&a.nt_response[24..32], &1234u64.to_le_bytes());
        let pairs = parse_av_pairs(&a.nt_response[16 + 28..]).unwrap();
        assert_eq!(av_value(&pairs, av::FLAGS), Some(&2u32.to_le_bytes()[..]));
        let mut zeroed = auth.clone();
        zeroed[MIC_OFFSET..MIC_OFFSET + 16].fill(0);
        assert_eq!(
            &auth[MIC_OFFSET..MIC_OFFSET + 16],
            message_mic(&key, &neg, &chal, &zeroed)
        );
    }

    #[test]
    fn out_of_sequence_calls_fail() {
        let mut i = Initiator::with_randomness(Credentials::anonymous(), [1; 8], [2; 16], 0);
        assert_eq!(i.step(&[]).unwrap_err(), AuthError::OutOfSequence);
        assert_eq!(i.finish(&[]).unwrap_err(), AuthError::OutOfSequence);
    }
}
