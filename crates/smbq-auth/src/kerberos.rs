//! Kerberos inside SPNEGO (MS-SPNG 3.3.5, RFC 4121): what the acceptor needs from a Kerberos
//! implementation. Verifying an AP-REQ (keytab, replay cache, clocks) is not done here; the
//! server plugs in MIT's GSS-API library (crate `smbq-gss`) behind [`Kerberos`].

use std::time::Duration;

use zeroize::Zeroizing;

use crate::{AuthError, Identity};

/// DER contents of OID 1.2.840.113554.1.2.2 (Kerberos V5, RFC 4121 section 1).
pub(crate) const OID_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// DER contents of OID 1.2.840.48018.1.2.2, the Kerberos OID Windows 2000 mis-encoded and
/// every Windows client still offers first (MS-SPNG 3.1.5.2); it names the same mechanism.
pub(crate) const OID_MS_KRB5: &[u8] = &[0x2a, 0x86, 0x48, 0x82, 0xf7, 0x12, 0x01, 0x02, 0x02];

pub(crate) fn is_krb5(oid: &[u8]) -> bool {
    oid == OID_KRB5 || oid == OID_MS_KRB5
}

/// A verified Kerberos logon.
pub struct KerberosLogon {
    /// The account the client principal maps to.
    pub identity: Identity,
    /// The GSS-API AP-REP token (mutual authentication), empty if the client asked for none.
    pub reply: Vec<u8>,
    /// The whole GSS session key (MS-SMB2 3.3.5.5.3: its first 16 bytes are the SMB
    /// SessionKey; AES-256 ciphers derive their keys from all of it).
    pub session_key: Zeroizing<Vec<u8>>,
    /// Time left on the ticket; the SMB session expires with it (MS-SMB2 3.3.5.5.3).
    pub valid_for: Duration,
}

/// Accepts a Kerberos GSS-API initial context token (the AP-REQ) and maps its client
/// principal to an account. Errors carry the NTSTATUS to answer with
/// ([`AuthError::Kerberos`]).
pub trait Kerberos: Send + Sync + std::fmt::Debug {
    fn accept(&self, token: &[u8]) -> Result<KerberosLogon, AuthError>;
}

/// The client's half of a Kerberos exchange after its AP-REQ went out: checks the server's
/// AP-REP and yields the GSS session key (implemented over MIT's library by the client).
pub trait KerberosCompletion: Send {
    fn complete(self: Box<Self>, ap_rep: &[u8]) -> Result<Zeroizing<Vec<u8>>, AuthError>;
}

/// Client-side Kerberos in SPNEGO: a NegTokenInit offering Kerberos alone with the AP-REQ as
/// its optimistic token (so the server needs no mechListMIC), then the server's AP-REP.
pub struct KerberosInitiator {
    ap_req: Vec<u8>,
    pending: Option<Box<dyn KerberosCompletion>>,
}

impl KerberosInitiator {
    pub fn new(ap_req: Vec<u8>, pending: Box<dyn KerberosCompletion>) -> Self {
        Self {
            ap_req,
            pending: Some(pending),
        }
    }

    pub fn first_token(&self) -> Vec<u8> {
        let mechs = crate::der::tlv(
            crate::der::TAG_SEQUENCE,
            &crate::der::tlv(crate::der::TAG_OID, OID_KRB5),
        );
        crate::spnego::encode_init(&mechs, &self.ap_req)
    }

    /// The server's final token: accept-completed with the AP-REP, which must verify. Returns
    /// the whole GSS session key.
    pub fn finish(&mut self, server_token: &[u8]) -> Result<Zeroizing<Vec<u8>>, AuthError> {
        let pending = self.pending.take().ok_or(AuthError::OutOfSequence)?;
        if server_token.len() > crate::MAX_TOKEN_LEN {
            return Err(AuthError::TooLarge(server_token.len()));
        }
        let crate::spnego::NegotiationToken::Resp(resp) = crate::spnego::decode(server_token)?
        else {
            return Err(AuthError::InvalidToken("SPNEGO: expected NegTokenResp"));
        };
        if resp.neg_state != Some(crate::spnego::NegState::AcceptCompleted) {
            return Err(AuthError::InvalidToken("SPNEGO: exchange not completed"));
        }
        if resp.supported_mech.is_some_and(|m| !is_krb5(m)) {
            return Err(AuthError::NoCommonMechanism);
        }
        let ap_rep = resp
            .response_token
            .ok_or(AuthError::InvalidToken("SPNEGO: no AP-REP from the server"))?;
        let key = pending.complete(ap_rep)?;
        if key.len() < 16 {
            return Err(AuthError::InvalidToken(
                "Kerberos: session key shorter than 16 bytes",
            ));
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kerberos_oids_are_recognised() {
        assert!(is_krb5(OID_KRB5));
        assert!(is_krb5(OID_MS_KRB5));
        assert!(!is_krb5(crate::spnego::OID_NTLMSSP));
    }
}
