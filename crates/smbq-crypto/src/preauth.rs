//! The SMB 3.1.1 preauth integrity hash (MS-SMB2 3.2.5.2, 3.3.5.4, 3.3.5.5):
//! H(0) = 64 zero bytes, H(n) = SHA-512(H(n-1) || message), over NEGOTIATE and the
//! SESSION_SETUP exchange, each message whole as sent (header included, no transport
//! framing). SHA-512 is the only HashAlgorithm defined (MS-SMB2 2.2.3.1.1).

use sha2::{Digest, Sha512};

#[derive(Clone, PartialEq, Eq)]
pub struct PreauthHash([u8; 64]);

impl PreauthHash {
    /// The starting value: all zeros.
    pub fn new() -> Self {
        Self([0u8; 64])
    }

    /// Chains one message into the hash.
    pub fn update(&mut self, msg: &[u8]) {
        let mut h = Sha512::new();
        h.update(self.0);
        h.update(msg);
        self.0.copy_from_slice(&h.finalize());
    }

    /// A copy advanced by `msg`, for forking a session's hash off the connection's.
    pub fn chained(&self, msg: &[u8]) -> Self {
        let mut next = self.clone();
        next.update(msg);
        next
    }

    pub fn value(&self) -> &[u8; 64] {
        &self.0
    }
}

impl Default for PreauthHash {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for PreauthHash {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PreauthHash(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_is_sha512_of_previous_and_message() {
        let mut h = PreauthHash::new();
        assert_eq!(h.value(), &[0u8; 64]);
        h.update(b"abc");
        let mut input = vec![0u8; 64];
        input.extend_from_slice(b"abc");
        assert_eq!(h.value().as_slice(), Sha512::digest(&input).as_slice());
        let forked = h.chained(b"def");
        let mut input2 = h.value().to_vec();
        input2.extend_from_slice(b"def");
        assert_eq!(
            forked.value().as_slice(),
            Sha512::digest(&input2).as_slice()
        );
        assert_ne!(forked, h);
    }
}
