//! Building valid SMB2 requests with the smbq-wire encoders (MS-SMB2 2.2).

use smbq_wire::negotiate::{
    Cipher, HashAlgorithm, NegotiateContext, NegotiateRequest, SigningAlgorithm, capabilities,
    security_mode,
};
use smbq_wire::session_setup::SessionSetupRequest;
use smbq_wire::{Command, Dialect, HEADER_LEN, Header, Writer};

/// Credits every built request asks for, so a fuzzed stream after the prefix has room.
pub const CREDITS: u16 = 256;

/// A sync request header.
pub fn header(command: Command, message_id: u64, session_id: u64, tree_id: u32) -> Header {
    Header {
        credit_charge: 1,
        command,
        credits: CREDITS,
        message_id,
        tree_id,
        session_id,
        ..Default::default()
    }
}

/// `h` followed by the body `body` writes.
pub fn message(h: &Header, body: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::with_capacity(HEADER_LEN + 64);
    h.encode(&mut w);
    body(&mut w);
    w.into_vec()
}

/// Direct-TCP framing (MS-SMB2 2.1): 0x00 then a 24-bit big-endian length.
pub fn frame(msg: &[u8]) -> Vec<u8> {
    let mut out = smbq_proto::framing::frame_header(msg.len()).to_vec();
    out.extend_from_slice(msg);
    out
}

/// Joins whole messages into one compound (MS-SMB2 3.2.4.1.4): each but the last padded to
/// 8 bytes with NextCommand patched to its padded length.
pub fn compound(msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut m = m.clone();
        if i + 1 != msgs.len() {
            m.resize(m.len().next_multiple_of(8), 0);
            let next = u32::try_from(m.len()).expect("small message");
            m.get_mut(20..24)
                .expect("header")
                .copy_from_slice(&next.to_le_bytes());
        }
        out.extend_from_slice(&m);
    }
    out
}

pub const CLIENT_GUID: [u8; 16] = *b"smbq-fuzz-client";
pub const SALT: [u8; 32] = [0x5a; 32];

/// An SMB 3.1.1 NEGOTIATE request (also offering 2.0.2 to 3.0.2) with preauth, encryption
/// and signing contexts, as Windows sends.
pub fn negotiate(message_id: u64) -> Vec<u8> {
    let req = NegotiateRequest {
        security_mode: security_mode::SIGNING_ENABLED,
        capabilities: capabilities::DFS
            | capabilities::LEASING
            | capabilities::LARGE_MTU
            | capabilities::ENCRYPTION,
        client_guid: CLIENT_GUID,
        dialects: vec![
            Dialect::SMB2_0_2,
            Dialect::SMB2_1,
            Dialect::SMB3_0,
            Dialect::SMB3_0_2,
            Dialect::SMB3_1_1,
        ],
        contexts: vec![
            NegotiateContext::PreauthIntegrity {
                hash_algorithms: vec![HashAlgorithm::SHA512],
                salt: &SALT,
            },
            NegotiateContext::Encryption {
                ciphers: vec![Cipher::AES_128_GCM, Cipher::AES_128_CCM],
            },
            NegotiateContext::Signing {
                algorithms: vec![SigningAlgorithm::AES_CMAC, SigningAlgorithm::HMAC_SHA256],
            },
        ],
    };
    message(&header(Command::NEGOTIATE, message_id, 0, 0), |w| {
        req.encode(w)
    })
}

/// A SESSION_SETUP request carrying `token`.
pub fn session_setup(message_id: u64, session_id: u64, token: &[u8]) -> Vec<u8> {
    let req = SessionSetupRequest {
        security_mode: 1,
        security_buffer: token,
        ..Default::default()
    };
    message(
        &header(Command::SESSION_SETUP, message_id, session_id, 0),
        |w| req.encode(w),
    )
}
