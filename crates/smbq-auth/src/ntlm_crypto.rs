//! NTLMv2 key and response computations (MS-NLMP 3.3.2, 3.4.5) and NTLMSSP message integrity
//! with extended session security (MS-NLMP 3.4.4.2), used here for SPNEGO's mechListMIC.

use hmac::{Hmac, Mac};
use md4::Md4;
use md5::{Digest, Md5};
use rc4::{KeyInit, Rc4, StreamCipher, consts::U16};
use zeroize::Zeroizing;

use crate::ntlm_msg::flags;

type HmacMd5 = Hmac<Md5>;

/// UTF-16LE, the `UNICODE()` of MS-NLMP section 6.
pub(crate) fn unicode(s: &str) -> Vec<u8> {
    smbq_wire::cursor::utf16le_encode(s)
}

/// MS-NLMP 3.3.1 NTOWFv1: MD4(UNICODE(Passwd)), the "NT hash".
pub fn nt_hash(password: &str) -> [u8; 16] {
    let pw = Zeroizing::new(unicode(password));
    Md4::digest(pw.as_slice()).into()
}

pub(crate) fn hmac_md5(key: &[u8], parts: &[&[u8]]) -> [u8; 16] {
    // HMAC takes keys of any length, so this cannot fail.
    let Ok(mut mac) = <HmacMd5 as Mac>::new_from_slice(key) else {
        return [0; 16];
    };
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// Windows upper-cases per UTF-16 code unit (RtlUpcaseUnicodeString); characters whose
/// uppercase is longer (e.g. U+00DF) stay as they are rather than growing the name.
fn upcase(s: &str) -> String {
    s.chars()
        .map(|c| {
            let mut up = c.to_uppercase();
            match (up.next(), up.next()) {
                (Some(u), None) => u,
                _ => c,
            }
        })
        .collect()
}

/// MS-NLMP 3.3.2 NTOWFv2 = HMAC_MD5(NT hash, UNICODE(Uppercase(User) + UserDom)).
pub(crate) fn ntowfv2(nt_hash: &[u8; 16], user: &str, domain: &str) -> Zeroizing<[u8; 16]> {
    let mut who = unicode(&upcase(user));
    who.extend_from_slice(&unicode(domain));
    Zeroizing::new(hmac_md5(nt_hash, &[&who]))
}

/// MS-NLMP 2.2.2.7 NTLMv2_CLIENT_CHALLENGE ("temp" in 3.3.2), including the trailing Z(4).
pub(crate) fn client_blob(
    timestamp: u64,
    client_challenge: &[u8; 8],
    target_info: &[u8],
) -> Vec<u8> {
    let mut t = Vec::with_capacity(32 + target_info.len());
    t.extend_from_slice(&[1, 1, 0, 0, 0, 0, 0, 0]);
    t.extend_from_slice(&timestamp.to_le_bytes());
    t.extend_from_slice(client_challenge);
    t.extend_from_slice(&[0; 4]);
    t.extend_from_slice(target_info);
    t.extend_from_slice(&[0; 4]);
    t
}

/// Offset of the AV pairs inside the client blob (MS-NLMP 2.2.2.7).
pub(crate) const BLOB_AV_OFFSET: usize = 28;

/// MS-NLMP 3.3.2 NTProofStr = HMAC_MD5(ResponseKeyNT, ServerChallenge || temp).
pub(crate) fn nt_proof(
    response_key: &[u8; 16],
    server_challenge: &[u8; 8],
    blob: &[u8],
) -> [u8; 16] {
    hmac_md5(response_key, &[server_challenge, blob])
}

/// MS-NLMP 3.3.2 LmChallengeResponse (LMv2) = HMAC_MD5(ResponseKeyLM, SC || CC) || CC.
pub(crate) fn lmv2_response(
    response_key: &[u8; 16],
    server_challenge: &[u8; 8],
    client_challenge: &[u8; 8],
) -> [u8; 24] {
    let mac = hmac_md5(response_key, &[server_challenge, client_challenge]);
    let mut out = [0u8; 24];
    for (o, b) in out.iter_mut().zip(mac.iter().chain(client_challenge)) {
        *o = *b;
    }
    out
}

/// MS-NLMP 3.3.2 SessionBaseKey = HMAC_MD5(ResponseKeyNT, NTProofStr); for NTLMv2 it is also
/// the KeyExchangeKey (MS-NLMP 3.4.5.1).
pub(crate) fn session_base_key(
    response_key: &[u8; 16],
    nt_proof: &[u8; 16],
) -> Zeroizing<[u8; 16]> {
    Zeroizing::new(hmac_md5(response_key, &[nt_proof]))
}

/// RC4 with a 16-byte key over `data` in place (MS-NLMP section 6, RC4K).
pub(crate) fn rc4k(key: &[u8; 16], data: &mut [u8]) {
    let mut c = Rc4::<U16>::new(key.into());
    c.apply_keystream(data);
}

/// Constant-time equality, so a proof comparison leaks no prefix length.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn md5_concat(a: &[u8], b: &[u8]) -> Zeroizing<[u8; 16]> {
    let mut h = Md5::new();
    h.update(a);
    h.update(b);
    Zeroizing::new(h.finalize().into())
}

/// Which side's keys: the client signs/seals with the client-to-server keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    ClientToServer,
    ServerToClient,
}

/// MS-NLMP 3.4.5.2 SIGNKEY with extended session security.
fn sign_key(exported: &[u8; 16], dir: Direction) -> Zeroizing<[u8; 16]> {
    let magic: &[u8] = match dir {
        Direction::ClientToServer => {
            b"session key to client-to-server signing key magic constant\0"
        }
        Direction::ServerToClient => {
            b"session key to server-to-client signing key magic constant\0"
        }
    };
    md5_concat(exported, magic)
}

/// MS-NLMP 3.4.5.3 SEALKEY with extended session security (key weakened per 128/56 flags).
fn seal_key(exported: &[u8; 16], neg_flags: u32, dir: Direction) -> Zeroizing<[u8; 16]> {
    let magic: &[u8] = match dir {
        Direction::ClientToServer => {
            b"session key to client-to-server sealing key magic constant\0"
        }
        Direction::ServerToClient => {
            b"session key to server-to-client sealing key magic constant\0"
        }
    };
    let len = if neg_flags & flags::NEG_128 != 0 {
        16
    } else if neg_flags & flags::NEG_56 != 0 {
        7
    } else {
        5
    };
    md5_concat(exported.get(..len).unwrap_or(exported), magic)
}

/// One direction's NTLMSSP signing state (MS-NLMP 3.4.4.2): signing key, the RC4 sealing handle
/// that persists across messages, and the sequence number.
pub(crate) struct Sealer {
    sign_key: Zeroizing<[u8; 16]>,
    handle: Rc4<U16>,
    seq: u32,
    key_exch: bool,
}

impl Sealer {
    pub(crate) fn new(exported: &[u8; 16], neg_flags: u32, dir: Direction) -> Self {
        let seal = seal_key(exported, neg_flags, dir);
        Self {
            sign_key: sign_key(exported, dir),
            handle: Rc4::<U16>::new((&*seal).into()),
            seq: 0,
            key_exch: neg_flags & flags::KEY_EXCH != 0,
        }
    }

    /// MAC() with extended session security: NTLMSSP_MESSAGE_SIGNATURE (MS-NLMP 2.2.2.9.2).
    /// The caller must already have run any sealing of this message through the same handle.
    fn mac(&mut self, message: &[u8]) -> [u8; 16] {
        let seq = self.seq.to_le_bytes();
        let full = hmac_md5(&*self.sign_key, &[&seq, message]);
        let mut checksum = [0u8; 8];
        checksum.copy_from_slice(full.get(..8).unwrap_or(&[0; 8]));
        if self.key_exch {
            self.handle.apply_keystream(&mut checksum);
        }
        self.seq = self.seq.wrapping_add(1);
        let mut sig = [0u8; 16];
        sig[..4].copy_from_slice(&1u32.to_le_bytes());
        sig[4..12].copy_from_slice(&checksum);
        sig[12..].copy_from_slice(&seq);
        sig
    }

    /// GSS_GetMIC (MS-NLMP 3.4.4): the signature over `message`.
    pub(crate) fn sign(&mut self, message: &[u8]) -> [u8; 16] {
        self.mac(message)
    }

    /// GSS_VerifyMIC (MS-NLMP 3.4.4): recompute and compare in constant time.
    pub(crate) fn verify(&mut self, message: &[u8], signature: &[u8]) -> bool {
        ct_eq(&self.mac(message), signature)
    }

    /// GSS_WrapEx (MS-NLMP 3.4.3): seals in place and returns the signature.
    #[cfg(test)]
    pub(crate) fn seal(&mut self, message: &mut [u8]) -> [u8; 16] {
        let plain = message.to_vec();
        self.handle.apply_keystream(message);
        self.mac(&plain)
    }
}

/// MS-NLMP 3.1.5.1.2 / 3.2.5.1.2 MIC = HMAC_MD5(ExportedSessionKey, NEGOTIATE || CHALLENGE ||
/// AUTHENTICATE), with the AUTHENTICATE's MIC field zeroed.
pub(crate) fn message_mic(exported: &[u8; 16], neg: &[u8], chal: &[u8], auth: &[u8]) -> [u8; 16] {
    hmac_md5(exported, &[neg, chal, auth])
}

#[cfg(test)]
mod tests {
    //! Published vectors from MS-NLMP section 4.2 (inputs from 4.2.1: User "User", UserDom
    //! "Domain", Passwd "Password", ServerChallenge 0123456789abcdef, ClientChallenge aa*8,
    //! Time 0, RandomSessionKey 55*16). The byte values were cross-checked against the copies in
    //! gss-ntlmssp's tests/ntlmssptest.c, which quotes the same sections.
    use super::*;

    fn h(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).unwrap()
    }

    const SC: [u8; 8] = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
    const CC: [u8; 8] = [0xaa; 8];
    /// MS-NLMP 4.2.4.1: the AV pairs used as ServerName (NbDomainName "Domain",
    /// NbComputerName "Server", EOL).
    const TARGET_INFO: &str =
        "02000c0044006f006d00610069006e00 01000c005300650072007600650072000000 0000";

    #[test]
    fn nt_hash_vector_4_2_2_1_2() {
        assert_eq!(
            nt_hash("Password").to_vec(),
            h("a4f49c406510bdcab6824ee7c30fd852")
        );
    }

    #[test]
    fn ntowfv2_vector_4_2_4_1_1() {
        let k = ntowfv2(&nt_hash("Password"), "User", "Domain");
        assert_eq!(k.to_vec(), h("0c868a403bfd7a93a3001ef22ef02e3f"));
        // Only the user is upper-cased.
        assert_eq!(*ntowfv2(&nt_hash("Password"), "user", "Domain"), *k);
        assert_ne!(*ntowfv2(&nt_hash("Password"), "User", "DOMAIN"), *k);
    }

    #[test]
    fn ntlmv2_response_and_keys_4_2_4() {
        let k = ntowfv2(&nt_hash("Password"), "User", "Domain");
        let blob = client_blob(0, &CC, &h(TARGET_INFO));
        let proof = nt_proof(&k, &SC, &blob);
        // 4.2.4.2.2 NTLMv2 Response (NTProofStr || temp).
        let mut nt = proof.to_vec();
        nt.extend_from_slice(&blob);
        assert_eq!(
            nt,
            h(
                "68cd0ab851e51c96aabc927bebef6a1c 0101000000000000 0000000000000000 aaaaaaaaaaaaaaaa \
               00000000 02000c0044006f006d00610069006e00 01000c00530065007200760065007200 \
               00000000 00000000"
            )
        );
        // 4.2.4.2.1 LMv2 Response.
        assert_eq!(
            lmv2_response(&k, &SC, &CC).to_vec(),
            h("86c35097ac9cec102554764a57cccc19aaaaaaaaaaaaaaaa")
        );
        // 4.2.4.1.2 Session Base Key.
        let sbk = session_base_key(&k, &proof);
        assert_eq!(sbk.to_vec(), h("8de40ccadbc14a82f15cb0ad0de95ca3"));
        // 4.2.4.2.3 Encrypted Session Key: RC4(KeyExchangeKey = SessionBaseKey, RandomSessionKey).
        let mut key = [0x55u8; 16];
        rc4k(&sbk, &mut key);
        assert_eq!(key.to_vec(), h("c5dad2544fc9799094ce1ce90bc9d03e"));
    }

    #[test]
    fn gss_wrapex_ntlmv2_4_2_4_4() {
        // Flags of 4.2.4: 128-bit, KEY_EXCH, ESS; ExportedSessionKey = RandomSessionKey.
        let f = flags::NEG_128 | flags::NEG_56 | flags::KEY_EXCH | flags::EXTENDED_SESSIONSECURITY;
        let exported = [0x55u8; 16];
        assert_eq!(
            seal_key(&exported, f, Direction::ClientToServer).to_vec(),
            h("59f600973cc4960a25480a7c196e4c58")
        );
        assert_eq!(
            sign_key(&exported, Direction::ClientToServer).to_vec(),
            h("4788dc861b4782f35d43fd98fe1a2d39")
        );
        let mut msg = unicode("Plaintext");
        let sig = Sealer::new(&exported, f, Direction::ClientToServer).seal(&mut msg);
        assert_eq!(msg, h("54e50165bf1936dc996020c1811b0f06fb5f"));
        assert_eq!(sig.to_vec(), h("010000007fb38ec5c55d497600000000"));
    }

    #[test]
    fn gss_wrapex_ess_without_key_exch_4_2_3_4() {
        // 4.2.3.4: NTLMv1 with client challenge; 56-bit sealing key, no RC4 over the checksum.
        let f = flags::NEG_56 | flags::EXTENDED_SESSIONSECURITY | flags::SIGN | flags::SEAL;
        let mut exported = [0u8; 16];
        exported.copy_from_slice(&h("eb93429a8bd952f8b89c55b87f475edc"));
        assert_eq!(
            seal_key(&exported, f, Direction::ClientToServer).to_vec(),
            h("04dd7f014d8504d265a25cc86a3a7c06")
        );
        assert_eq!(
            sign_key(&exported, Direction::ClientToServer).to_vec(),
            h("60e799be5c72fc92922ae8ebe961fb8d")
        );
        let mut msg = unicode("Plaintext");
        let sig = Sealer::new(&exported, f, Direction::ClientToServer).seal(&mut msg);
        assert_eq!(msg, h("a02372f6530273f3aa1eb90190ce5200c99d"));
        assert_eq!(sig.to_vec(), h("01000000ff2aeb52f681793a00000000"));
    }

    #[test]
    fn sign_verify_round_trip_and_sequence() {
        let f = flags::NEG_128 | flags::KEY_EXCH | flags::EXTENDED_SESSIONSECURITY;
        let k = [9u8; 16];
        let mut tx = Sealer::new(&k, f, Direction::ServerToClient);
        let mut rx = Sealer::new(&k, f, Direction::ServerToClient);
        let s0 = tx.sign(b"one");
        let s1 = tx.sign(b"two");
        assert_eq!(&s1[12..], &1u32.to_le_bytes());
        assert!(rx.verify(b"one", &s0));
        assert!(rx.verify(b"two", &s1));
        // Other direction's keys do not verify.
        let mut wrong = Sealer::new(&k, f, Direction::ClientToServer);
        assert!(!wrong.verify(b"one", &s0));
    }

    #[test]
    fn ct_eq_basics() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"ab"));
    }
}
