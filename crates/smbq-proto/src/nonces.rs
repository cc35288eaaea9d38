//! One AES-GMAC key and nonce sign one message (issue 42).
//!
//! An AES-GMAC signature's nonce is the message's MessageId and two role bits (MS-SMB2
//! 3.1.4.1). Two different messages signed under one key with one nonce give away the GHASH
//! key, and with it signatures of anything under that key. Within one connection the sequence
//! window never lets a MessageId repeat. Session.SigningKey, though, also signs on connections
//! other than the session's own: a binding's SESSION_SETUP requests (MS-SMB2 3.2.4.1.1) and
//! the non-SUCCESS responses to them (3.3.4.1.1, 3.2.5.1.3). Every binding connection starts
//! at MessageId 1, so a second binding would sign new messages under the first one's nonces.
//!
//! A [`NonceLedger`] keeps the nonces Session.SigningKey has signed on binding connections,
//! with the signature each carried, and knows from which MessageId on the session's first
//! connection (whose Channel.SigningKey is Session.SigningKey, 3.3.5.5.3) signs everything.
//! Server and client record each binding message they sign or accept under the session's key,
//! and do not send a message whose nonce is taken by another message. Keys of other
//! algorithms have no nonce: the ledger lets everything through for them.

use std::sync::Mutex;

use smbq_crypto::{SIGNATURE, SigningAlgorithm, gmac_nonce_of};

/// How many binding messages one session key may sign: each binding takes two or three
/// nonces, and one binding exhausts the low MessageIds a second one would reuse anyway.
const CAPACITY: usize = 64;

/// Why a message may not be signed (or accepted) under the session's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceRefused {
    /// Another message was signed under this nonce already.
    Reused,
    /// The session's first connection signs every MessageId from here on under this key.
    FirstChannel,
    /// The ledger is full.
    Full,
    /// Shorter than a signed SMB2 header.
    Malformed,
}

/// The nonces one AES-GMAC session key has signed outside its first connection.
#[derive(Debug)]
pub struct NonceLedger {
    gmac: bool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The first connection's MessageIds from here on are all this key's.
    first_channel_from: Option<u64>,
    /// Nonce and signature of every message recorded.
    seen: Vec<([u8; 12], [u8; 16])>,
}

impl NonceLedger {
    /// A ledger for a key of `algorithm`; only AES-GMAC keys have nonces to keep.
    pub fn new(algorithm: SigningAlgorithm) -> Self {
        Self {
            gmac: algorithm == SigningAlgorithm::AesGmac,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while holding it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session's first connection signs every MessageId from `message_id` on (it was set
    /// up at the MessageIds below): binding messages may use none of them.
    pub fn first_channel_from(&self, message_id: u64) {
        self.state().first_channel_from = Some(message_id);
    }

    /// Records `msg`, a whole message signed under this ledger's key (Signature in place),
    /// or refuses it when its nonce was taken by another message or belongs to the first
    /// connection. The same message recorded twice (a resend) is let through.
    pub fn record(&self, msg: &[u8]) -> Result<(), NonceRefused> {
        if !self.gmac {
            return Ok(());
        }
        let nonce = gmac_nonce_of(msg).ok_or(NonceRefused::Malformed)?;
        let tag: [u8; 16] = msg
            .get(SIGNATURE)
            .and_then(|s| s.try_into().ok())
            .ok_or(NonceRefused::Malformed)?;
        let mut st = self.state();
        if st
            .first_channel_from
            .is_some_and(|from| message_id(&nonce) >= from)
        {
            return Err(NonceRefused::FirstChannel);
        }
        match st.seen.iter().find(|(n, _)| *n == nonce) {
            Some((_, t)) if *t == tag => Ok(()),
            Some(_) => Err(NonceRefused::Reused),
            None if st.seen.len() >= CAPACITY => Err(NonceRefused::Full),
            None => {
                st.seen.push((nonce, tag));
                Ok(())
            }
        }
    }

    /// Whether a message from the server (`from_server`) or the client at `message_id` could
    /// still be signed under this key: nothing recorded under that nonce, and not the first
    /// connection's.
    pub fn is_free(&self, message_id: u64, from_server: bool) -> bool {
        if !self.gmac {
            return true;
        }
        let st = self.state();
        if st.first_channel_from.is_some_and(|from| message_id >= from) {
            return false;
        }
        let mut nonce = [0u8; 12];
        let (id, bits) = nonce.split_at_mut(8);
        id.copy_from_slice(&message_id.to_le_bytes());
        bits.copy_from_slice(&u32::from(from_server).to_le_bytes());
        !st.seen.iter().any(|(n, _)| *n == nonce)
    }
}

fn message_id(nonce: &[u8; 12]) -> u64 {
    let mut id = [0u8; 8];
    id.copy_from_slice(nonce.first_chunk::<8>().unwrap_or(&[0; 8]));
    u64::from_le_bytes(id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use smbq_crypto::Signer;
    use smbq_wire::{Command, Header, NtStatus, Writer, header::flags};

    fn signed(signer: &Signer, message_id: u64, from_server: bool, body: &[u8]) -> Vec<u8> {
        let h = Header {
            command: Command::SESSION_SETUP,
            message_id,
            session_id: 7,
            flags: flags::SIGNED
                | if from_server {
                    flags::SERVER_TO_REDIR
                } else {
                    0
                },
            status: NtStatus::MORE_PROCESSING_REQUIRED,
            ..Header::default()
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        let mut m = w.into_vec();
        m.extend_from_slice(body);
        signer.sign(&mut m).unwrap();
        m
    }

    fn gmac() -> Signer {
        Signer::new(SigningAlgorithm::AesGmac, &[9; 16]).unwrap()
    }

    #[test]
    fn a_second_message_under_a_used_nonce_is_refused() {
        let (k, ledger) = (gmac(), NonceLedger::new(SigningAlgorithm::AesGmac));
        let first = signed(&k, 1, true, b"challenge one");
        assert_eq!(ledger.record(&first), Ok(()));
        // The same message again (a resend) gives the same signature: nothing leaks.
        assert_eq!(ledger.record(&first), Ok(()));
        let second = signed(&k, 1, true, b"challenge two");
        assert_eq!(ledger.record(&second), Err(NonceRefused::Reused));
        assert!(!ledger.is_free(1, true));
    }

    #[test]
    fn role_and_message_id_make_the_nonce() {
        let (k, ledger) = (gmac(), NonceLedger::new(SigningAlgorithm::AesGmac));
        assert_eq!(ledger.record(&signed(&k, 1, true, b"a")), Ok(()));
        assert!(ledger.is_free(1, false));
        assert_eq!(ledger.record(&signed(&k, 1, false, b"b")), Ok(()));
        assert!(ledger.is_free(2, false) && ledger.is_free(2, true));
        assert_eq!(ledger.record(&signed(&k, 2, false, b"c")), Ok(()));
        assert!(!ledger.is_free(2, false));
    }

    #[test]
    fn the_first_connections_message_ids_are_not_for_bindings() {
        let (k, ledger) = (gmac(), NonceLedger::new(SigningAlgorithm::AesGmac));
        ledger.first_channel_from(3);
        assert!(ledger.is_free(2, true));
        assert!(!ledger.is_free(3, false) && !ledger.is_free(9, true));
        assert_eq!(
            ledger.record(&signed(&k, 3, false, b"x")),
            Err(NonceRefused::FirstChannel)
        );
    }

    #[test]
    fn cmac_and_hmac_keys_have_no_nonce() {
        let k = Signer::new(SigningAlgorithm::AesCmac, &[9; 16]).unwrap();
        let ledger = NonceLedger::new(SigningAlgorithm::AesCmac);
        ledger.first_channel_from(1);
        assert_eq!(ledger.record(&signed(&k, 1, true, b"one")), Ok(()));
        assert_eq!(ledger.record(&signed(&k, 1, true, b"two")), Ok(()));
        assert!(ledger.is_free(1, true));
    }

    #[test]
    fn a_full_ledger_refuses_new_nonces_and_short_messages_are_refused() {
        let (k, ledger) = (gmac(), NonceLedger::new(SigningAlgorithm::AesGmac));
        for id in 0..CAPACITY as u64 {
            assert_eq!(ledger.record(&signed(&k, id, true, b"m")), Ok(()));
        }
        let more = signed(&k, CAPACITY as u64, true, b"m");
        assert_eq!(ledger.record(&more), Err(NonceRefused::Full));
        assert_eq!(ledger.record(&more[..40]), Err(NonceRefused::Malformed));
    }
}
