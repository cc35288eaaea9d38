//! Server side: SPNEGO + NTLMv2 acceptor (MS-NLMP 3.2.5, RFC 4178 section 3.2).

use smbq_wire::cursor::{Writer, utf16le_decode};
use zeroize::Zeroizing;

use crate::kerberos::{Kerberos, is_krb5};
use crate::ntlm_crypto::{
    BLOB_AV_OFFSET, Direction, Sealer, ct_eq, message_mic, nt_proof, ntowfv2, rc4k,
    session_base_key, unicode,
};
use crate::ntlm_msg::{
    self, Authenticate, MIC_OFFSET, av, av_value, decode_authenticate, decode_negotiate,
    encode_challenge, flags, parse_av_pairs, put_av,
};
use crate::spnego::{self, NegState, NegTokenResp, NegotiationToken, OID_NTLMSSP};
use crate::{Accounts, AuthError, Identity, MAX_TOKEN_LEN};

/// Names the server reports in the CHALLENGE target info (MS-NLMP 2.2.2.1).
#[derive(Clone, Debug)]
pub struct AcceptorConfig {
    pub netbios_domain: String,
    pub netbios_computer: String,
    pub dns_domain: String,
    pub dns_computer: String,
    /// Map unknown users to guest instead of failing.
    pub allow_guest: bool,
    /// Accept anonymous (null session) logons, as Windows and Samba do by default; the server
    /// limits what such a session may reach (IPC$ and guest shares).
    pub allow_anonymous: bool,
    /// Kerberos, when a keytab is configured: chosen when it is the client's first mechanism
    /// (RFC 4178 section 3.2, so no mechListMIC is needed).
    pub kerberos: Option<std::sync::Arc<dyn Kerberos>>,
    /// Accept NTLMSSP; false leaves Kerberos as the only mechanism.
    pub ntlm: bool,
}

/// What to send back in the SESSION_SETUP response.
pub enum AcceptStep {
    /// Reply `STATUS_MORE_PROCESSING_REQUIRED` with this security buffer.
    Continue(Vec<u8>),
    /// Reply success with this security buffer (empty for raw NTLMSSP).
    /// `session_key` is the NTLM ExportedSessionKey (16 bytes) or the whole Kerberos GSS key
    /// (MS-SMB2 3.3.5.5.3: 16 bytes are the SessionKey, AES-256 ciphers derive from all of
    /// it, as `smbq_crypto::derive_keys` does); all zeros for guest, which has no key both
    /// sides share; for anonymous the key of a null logon (zeros, or the client's random key
    /// under KEY_EXCH), which protects nothing but which clients may sign with.
    Done {
        token: Vec<u8>,
        identity: Identity,
        session_key: Zeroizing<Vec<u8>>,
        /// How long the credential stays valid (a Kerberos ticket's remaining life); `None`
        /// for NTLM, which does not expire.
        valid_for: Option<std::time::Duration>,
        mechanism: Mechanism,
    },
}

/// How a session authenticated, for the audit log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Ntlm,
    Kerberos,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Self::Ntlm => "ntlm",
            Self::Kerberos => "kerberos",
        }
    }
}

/// Hand-written so the session key never reaches a log.
impl std::fmt::Debug for AcceptStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Continue(t) => f.debug_tuple("Continue").field(&t.len()).finish(),
            Self::Done {
                token, identity, ..
            } => f
                .debug_struct("Done")
                .field("token_len", &token.len())
                .field("identity", identity)
                .finish_non_exhaustive(),
        }
    }
}

#[derive(Debug)]
enum Framing {
    /// NTLMSSP without SPNEGO (some clients send this).
    Raw,
    Spnego {
        /// The client's DER MechTypeList, which mechListMIC covers.
        mech_types_der: Vec<u8>,
        /// RFC 4178 section 5: a MIC exchange is mandatory when NTLM was not the client's first choice.
        mic_required: bool,
    },
}

enum State {
    Start,
    /// Kerberos was selected without an optimistic token; the AP-REQ comes next.
    ExpectKerberos {
        mech: Vec<u8>,
    },
    ExpectNegotiate,
    ExpectAuthenticate {
        negotiate: Vec<u8>,
        challenge: Vec<u8>,
        challenge_flags: u32,
    },
    Finished,
}

/// One SESSION_SETUP exchange on the server. Any error leaves it finished; start a new one.
pub struct Acceptor {
    cfg: AcceptorConfig,
    server_challenge: [u8; 8],
    now_filetime: u64,
    framing: Framing,
    state: State,
}

/// Longest user or domain name we look up; Windows limits are far lower.
const MAX_NAME_BYTES: usize = 1024;

/// Outcome of checking an AUTHENTICATE message.
struct Verified {
    identity: Identity,
    session_key: Zeroizing<[u8; 16]>,
    /// Signing state for the mechListMIC; `None` when no key is shared (guest, anonymous).
    keys: Option<(Sealer, Sealer)>,
}

impl Acceptor {
    /// `server_challenge` must come from a CSPRNG; `now_filetime` goes into MsvAvTimestamp.
    pub fn new(cfg: AcceptorConfig, server_challenge: [u8; 8], now_filetime: u64) -> Self {
        Self {
            cfg,
            server_challenge,
            now_filetime,
            framing: Framing::Raw,
            state: State::Start,
        }
    }

    /// Feeds one SESSION_SETUP security buffer: an SPNEGO NegTokenInit (first leg), a
    /// NegTokenResp (later legs), or raw NTLMSSP. Replies use the framing the client chose.
    pub fn step(&mut self, token: &[u8], accounts: &dyn Accounts) -> Result<AcceptStep, AuthError> {
        let state = std::mem::replace(&mut self.state, State::Finished);
        let result = self.step_inner(state, token, accounts);
        if result.is_err() {
            self.state = State::Finished;
        }
        result
    }

    fn step_inner(
        &mut self,
        state: State,
        token: &[u8],
        accounts: &dyn Accounts,
    ) -> Result<AcceptStep, AuthError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::TooLarge(token.len()));
        }
        match state {
            State::Start if ntlm_msg::is_ntlmssp(token) => {
                if !self.cfg.ntlm {
                    return Err(AuthError::NtlmBlocked);
                }
                self.framing = Framing::Raw;
                self.on_negotiate(token).map(AcceptStep::Continue)
            }
            State::Start => {
                let NegotiationToken::Init(init) = spnego::decode(token)? else {
                    return Err(AuthError::InvalidToken("SPNEGO: expected NegTokenInit"));
                };
                if let Some(krb) = self.cfg.kerberos.clone()
                    && let Some(first) = init.mech_types.first()
                    && is_krb5(first)
                {
                    let mech = first.to_vec();
                    return match init.mech_token {
                        Some(t) => on_kerberos(&*krb, &mech, t),
                        None => {
                            let resp = spnego::encode_resp(
                                Some(NegState::AcceptIncomplete),
                                Some(&mech),
                                None,
                                None,
                            );
                            self.state = State::ExpectKerberos { mech };
                            Ok(AcceptStep::Continue(resp))
                        }
                    };
                }
                if !self.cfg.ntlm {
                    return Err(if init.mech_types.contains(&OID_NTLMSSP) {
                        AuthError::NtlmBlocked
                    } else {
                        AuthError::NoCommonMechanism
                    });
                }
                let pos = init
                    .mech_types
                    .iter()
                    .position(|m| *m == OID_NTLMSSP)
                    .ok_or(AuthError::NoCommonMechanism)?;
                self.framing = Framing::Spnego {
                    mech_types_der: init.mech_types_der.to_vec(),
                    mic_required: pos != 0,
                };
                match init.mech_token {
                    // The optimistic token is ours only if NTLM is the client's first choice.
                    Some(t) if pos == 0 => {
                        let challenge = self.on_negotiate(t)?;
                        Ok(AcceptStep::Continue(spnego::encode_resp(
                            Some(NegState::AcceptIncomplete),
                            Some(OID_NTLMSSP),
                            Some(&challenge),
                            None,
                        )))
                    }
                    _ => {
                        // RFC 4178 section 4.2.2: select NTLM, ask for the MIC if it was not first.
                        self.state = State::ExpectNegotiate;
                        let st = if pos == 0 {
                            NegState::AcceptIncomplete
                        } else {
                            NegState::RequestMic
                        };
                        Ok(AcceptStep::Continue(spnego::encode_resp(
                            Some(st),
                            Some(OID_NTLMSSP),
                            None,
                            None,
                        )))
                    }
                }
            }
            State::ExpectKerberos { mech } => {
                let krb = self.cfg.kerberos.clone().ok_or(AuthError::OutOfSequence)?;
                let t = decode_resp(token)?
                    .response_token
                    .ok_or(AuthError::InvalidToken("SPNEGO: no responseToken"))?;
                on_kerberos(&*krb, &mech, t)
            }
            State::ExpectNegotiate => {
                let resp = decode_resp(token)?;
                let t = resp
                    .response_token
                    .ok_or(AuthError::InvalidToken("SPNEGO: no responseToken"))?;
                let challenge = self.on_negotiate(t)?;
                Ok(AcceptStep::Continue(spnego::encode_resp(
                    Some(NegState::AcceptIncomplete),
                    None,
                    Some(&challenge),
                    None,
                )))
            }
            State::ExpectAuthenticate {
                negotiate,
                challenge,
                challenge_flags,
            } => {
                let (auth_msg, client_mic) = match &self.framing {
                    Framing::Raw => (token, None),
                    Framing::Spnego { .. } => {
                        let resp = decode_resp(token)?;
                        let t = resp
                            .response_token
                            .ok_or(AuthError::InvalidToken("SPNEGO: no responseToken"))?;
                        (t, resp.mech_list_mic)
                    }
                };
                let v = self.on_authenticate(
                    auth_msg,
                    &negotiate,
                    &challenge,
                    challenge_flags,
                    accounts,
                )?;
                let token = match &self.framing {
                    Framing::Raw => Vec::new(),
                    Framing::Spnego {
                        mech_types_der,
                        mic_required,
                    } => {
                        let server_mic =
                            mech_list_mic(mech_types_der, *mic_required, client_mic, v.keys)?;
                        spnego::encode_resp(
                            Some(NegState::AcceptCompleted),
                            None,
                            None,
                            server_mic.as_ref().map(|m| &m[..]),
                        )
                    }
                };
                Ok(AcceptStep::Done {
                    token,
                    identity: v.identity,
                    session_key: Zeroizing::new(v.session_key.to_vec()),
                    valid_for: None,
                    mechanism: Mechanism::Ntlm,
                })
            }
            State::Finished => Err(AuthError::OutOfSequence),
        }
    }

    /// MS-NLMP 3.2.5.1.1: answer a NEGOTIATE with a CHALLENGE.
    fn on_negotiate(&mut self, msg: &[u8]) -> Result<Vec<u8>, AuthError> {
        let client = decode_negotiate(msg)?;
        let f = challenge_flags(client);
        let target_name = encode_string(&self.cfg.netbios_computer, f);
        let mut ti = Writer::new();
        put_av(
            &mut ti,
            av::NB_DOMAIN_NAME,
            &unicode(&self.cfg.netbios_domain),
        );
        put_av(
            &mut ti,
            av::NB_COMPUTER_NAME,
            &unicode(&self.cfg.netbios_computer),
        );
        put_av(&mut ti, av::DNS_DOMAIN_NAME, &unicode(&self.cfg.dns_domain));
        put_av(
            &mut ti,
            av::DNS_COMPUTER_NAME,
            &unicode(&self.cfg.dns_computer),
        );
        put_av(&mut ti, av::TIMESTAMP, &self.now_filetime.to_le_bytes());
        put_av(&mut ti, av::EOL, &[]);
        let challenge = encode_challenge(f, &target_name, &self.server_challenge, ti.as_slice());
        self.state = State::ExpectAuthenticate {
            negotiate: msg.to_vec(),
            challenge: challenge.clone(),
            challenge_flags: f,
        };
        Ok(challenge)
    }

    /// MS-NLMP 3.2.5.1.2: verify an AUTHENTICATE (NTLMv2 only).
    fn on_authenticate(
        &self,
        msg: &[u8],
        negotiate: &[u8],
        challenge: &[u8],
        challenge_flags: u32,
        accounts: &dyn Accounts,
    ) -> Result<Verified, AuthError> {
        let a = decode_authenticate(msg)?;
        let neg = challenge_flags & a.flags;
        let user = decode_string(a.user, challenge_flags)?;
        let domain = decode_string(a.domain, challenge_flags)?;
        let fail = |user: &str| AuthError::LogonFailure {
            user: user.to_owned(),
        };

        // MS-NLMP 3.2.5.1.2: anonymous is an empty user with empty NT and empty or Z(1) LM response.
        if user.is_empty() && a.nt_response.is_empty() && matches!(a.lm_response, [] | [0]) {
            if !self.cfg.allow_anonymous {
                return Err(fail(""));
            }
            return Ok(Verified {
                session_key: anonymous_key(&a, neg),
                ..no_key(Identity {
                    user: String::new(),
                    domain: String::new(),
                    is_guest: false,
                    is_anonymous: true,
                })
            });
        }
        // 24 bytes is an NTLMv1/LM response (MS-NLMP 2.2.2.6); we accept NTLMv2 only.
        if a.nt_response.len() <= 24 {
            return Err(fail(&user));
        }
        let (proof, blob) = a
            .nt_response
            .split_at_checked(16)
            .ok_or(AuthError::InvalidToken("NTLMv2 response too short"))?;
        // MS-NLMP 2.2.2.7: RespType and HiRespType are 1.
        if !blob.starts_with(&[1, 1]) {
            return Err(AuthError::InvalidToken("NTLMv2 response: bad RespType"));
        }
        let client_av = parse_av_pairs(
            blob.get(BLOB_AV_OFFSET..)
                .ok_or(AuthError::InvalidToken("NTLMv2 response too short"))?,
        )?;

        let Some(hash) = accounts.nt_hash(&user) else {
            if self.cfg.allow_guest {
                return Ok(no_key(Identity {
                    user,
                    domain,
                    is_guest: true,
                    is_anonymous: false,
                }));
            }
            return Err(fail(&user));
        };
        let hash = Zeroizing::new(hash);

        // Clients differ in which domain they fold into NTOWFv2: try the one sent, its
        // upper-case form, and none (Samba's order).
        let upper = domain.to_uppercase();
        let mut found = None;
        for d in [domain.as_str(), upper.as_str(), ""] {
            let key = ntowfv2(&hash, &user, d);
            let expect = nt_proof(&key, &self.server_challenge, blob);
            if ct_eq(&expect, proof) {
                found = Some((key, expect));
                break;
            }
        }
        let (key, proof) = found.ok_or_else(|| fail(&user))?;

        // MS-NLMP 3.4.5.1: for NTLMv2 the KeyExchangeKey is the SessionBaseKey.
        let kx = session_base_key(&key, &proof);
        let session_key = exported_key(&a, neg, &kx)?;

        let av_flags = av_value(&client_av, av::FLAGS)
            .and_then(|v| <[u8; 4]>::try_from(v).ok())
            .map_or(0, u32::from_le_bytes);
        if av_flags & av::FLAG_MIC_PRESENT != 0 {
            verify_message_mic(&session_key, negotiate, challenge, msg).map_err(|_| fail(&user))?;
        }

        let keys = (
            Sealer::new(&session_key, neg, Direction::ClientToServer),
            Sealer::new(&session_key, neg, Direction::ServerToClient),
        );
        Ok(Verified {
            identity: Identity {
                user,
                domain,
                is_guest: false,
                is_anonymous: false,
            },
            session_key,
            keys: Some(keys),
        })
    }
}

/// One-leg Kerberos (MS-SPNG 3.3.5.1): the AP-REQ is verified, the AP-REP goes back with
/// accept-completed and the mechanism OID the client named first (Windows' or the real one).
fn on_kerberos(krb: &dyn Kerberos, mech: &[u8], ap_req: &[u8]) -> Result<AcceptStep, AuthError> {
    let logon = krb.accept(ap_req)?;
    let reply = (!logon.reply.is_empty()).then_some(&logon.reply[..]);
    Ok(AcceptStep::Done {
        token: spnego::encode_resp(Some(NegState::AcceptCompleted), Some(mech), reply, None),
        identity: logon.identity,
        session_key: logon.session_key,
        valid_for: Some(logon.valid_for),
        mechanism: Mechanism::Kerberos,
    })
}

fn decode_resp(token: &[u8]) -> Result<NegTokenResp<'_>, AuthError> {
    match spnego::decode(token)? {
        NegotiationToken::Resp(r) if r.neg_state == Some(NegState::Reject) => {
            Err(AuthError::Rejected)
        }
        NegotiationToken::Resp(r) => Ok(r),
        NegotiationToken::Init(_) => Err(AuthError::InvalidToken("SPNEGO: expected NegTokenResp")),
    }
}

fn no_key(identity: Identity) -> Verified {
    Verified {
        identity,
        session_key: Zeroizing::new([0; 16]),
        keys: None,
    }
}

/// An anonymous logon's session key: its SessionBaseKey and KeyExchangeKey are 16 zero bytes,
/// and with KEY_EXCH the client's random key arrives encrypted under them, as Samba's client
/// sends it (MS-NLMP 3.2.5.1.2; what smbtorture smb2.session.anon-signing1 and
/// anon-encryption2 sign and encrypt with). A malformed EncryptedRandomSessionKey leaves the
/// zero key: the logon is anonymous either way, and nothing is protected by the key.
fn anonymous_key(a: &Authenticate<'_>, neg: u32) -> Zeroizing<[u8; 16]> {
    exported_key(a, neg, &[0; 16]).unwrap_or_else(|_| Zeroizing::new([0; 16]))
}

/// MS-NLMP 3.2.5.1.2: with KEY_EXCH the client's random key arrives RC4-encrypted.
fn exported_key(
    a: &Authenticate<'_>,
    neg: u32,
    kx: &[u8; 16],
) -> Result<Zeroizing<[u8; 16]>, AuthError> {
    if neg & flags::KEY_EXCH == 0 {
        return Ok(Zeroizing::new(*kx));
    }
    let enc: [u8; 16] = a.encrypted_session_key.try_into().map_err(|_| {
        AuthError::InvalidToken("NTLMSSP: EncryptedRandomSessionKey is not 16 bytes")
    })?;
    let mut key = Zeroizing::new(enc);
    rc4k(kx, &mut key[..]);
    Ok(key)
}

/// MS-NLMP 3.2.5.1.2: the MIC covers all three messages with its own field zeroed.
fn verify_message_mic(
    key: &[u8; 16],
    negotiate: &[u8],
    challenge: &[u8],
    auth: &[u8],
) -> Result<(), ()> {
    let mic = auth.get(MIC_OFFSET..MIC_OFFSET + 16).ok_or(())?;
    let mut zeroed = auth.to_vec();
    zeroed
        .get_mut(MIC_OFFSET..MIC_OFFSET + 16)
        .ok_or(())?
        .fill(0);
    if ct_eq(&message_mic(key, negotiate, challenge, &zeroed), mic) {
        Ok(())
    } else {
        Err(())
    }
}

/// RFC 4178 section 5 / MS-SPNG 3.3.5.1: verify the client's mechListMIC (client-to-server keys,
/// sequence 0) and answer with ours (server-to-client keys). With no shared key (guest,
/// anonymous) nothing can be signed, and none is sent.
fn mech_list_mic(
    mech_types_der: &[u8],
    mic_required: bool,
    client_mic: Option<&[u8]>,
    keys: Option<(Sealer, Sealer)>,
) -> Result<Option<[u8; 16]>, AuthError> {
    let Some((mut client, mut server)) = keys else {
        return Ok(None);
    };
    match client_mic {
        Some(mic) if client.verify(mech_types_der, mic) => Ok(Some(server.sign(mech_types_der))),
        Some(_) => Err(AuthError::MechListMic),
        None if mic_required => Err(AuthError::MechListMic),
        None => Ok(None),
    }
}

/// MS-NLMP 3.2.5.1.1: the CHALLENGE's flags, mirroring what the client asked for.
fn challenge_flags(client: u32) -> u32 {
    let mirrored = flags::SIGN
        | flags::SEAL
        | flags::ALWAYS_SIGN
        | flags::KEY_EXCH
        | flags::NEG_128
        | flags::NEG_56
        | flags::VERSION
        | flags::REQUEST_TARGET;
    let charset = if client & flags::UNICODE == 0 && client & flags::OEM != 0 {
        flags::OEM
    } else {
        flags::UNICODE
    };
    // Always extended session security (our signing keys assume it) and target info (NTLMv2).
    (client & mirrored)
        | charset
        | flags::NTLM
        | flags::EXTENDED_SESSIONSECURITY
        | flags::TARGET_INFO
        | flags::TARGET_TYPE_SERVER
}

/// Strings in NTLM messages are UTF-16LE when UNICODE was negotiated, else OEM (MS-NLMP 2.2).
fn encode_string(s: &str, neg: u32) -> Vec<u8> {
    if neg & flags::UNICODE != 0 {
        unicode(s)
    } else {
        s.chars()
            .map(|c| if c.is_ascii() { c as u8 } else { b'?' })
            .collect()
    }
}

fn decode_string(b: &[u8], neg: u32) -> Result<String, AuthError> {
    if b.len() > MAX_NAME_BYTES {
        return Err(AuthError::InvalidToken("NTLMSSP: name too long"));
    }
    if neg & flags::UNICODE != 0 {
        Ok(utf16le_decode(b)?)
    } else if b.is_ascii() {
        Ok(b.iter().map(|&c| char::from(c)).collect())
    } else {
        Err(AuthError::InvalidToken("NTLMSSP: non-ASCII OEM string"))
    }
}

#[cfg(test)]
#[path = "acceptor_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "acceptor_krb_tests.rs"]
mod krb_tests;
