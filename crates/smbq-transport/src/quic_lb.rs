//! Connection ids a QUIC-LB load balancer can route (draft-ietf-quic-load-balancers-19,
//! section 5.2, the plaintext CID algorithm): every connection id this server issues carries
//! its server id, so a load balancer in front of several smbq cluster nodes (docs/cluster.md)
//! sends each packet to the node that has the connection, also after the client's address
//! changed.
//!
//! ```text
//! first octet: config rotation (3 bits) | connection id length - 1 (5 bits)
//! server id:   1 to 11 bytes, as configured
//! nonce:       8 bytes: 4 random, then 4 of a keyed hash of everything before them
//! ```
//!
//! The hash lets [`validate`](ConnectionIdGenerator::validate) tell this server's ids from
//! others (quinn answers a stateless reset only for those), as quinn's own keyed generator
//! does. quinn only: MsQuic has its own generator.

use std::time::Duration;

use quinn_proto::{ConnectionId, ConnectionIdGenerator, InvalidCid};

/// Bytes of nonce after the server id: 4 random, 4 of the keyed hash.
const NONCE: usize = 8;
/// The longest connection id QUIC allows (RFC 9000 17.2).
const MAX_CID: usize = 20;
/// The longest server id that leaves room for the first octet and the nonce.
pub const MAX_SERVER_ID: usize = MAX_CID - 1 - NONCE;
/// Config rotation 0b111 marks ids a load balancer cannot route (the draft's fallback).
pub const MAX_CONFIG_ROTATION: u8 = 6;

/// A node's QUIC-LB settings (`[quic] lb_server_id`, `lb_config_rotation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuicLb {
    pub config_rotation: u8,
    pub server_id: Vec<u8>,
}

impl QuicLb {
    /// Checks the bounds above.
    pub fn new(config_rotation: u8, server_id: Vec<u8>) -> Result<QuicLb, String> {
        if config_rotation > MAX_CONFIG_ROTATION {
            return Err(format!(
                "QUIC-LB config rotation {config_rotation}: 0 to {MAX_CONFIG_ROTATION}"
            ));
        }
        if server_id.is_empty() || server_id.len() > MAX_SERVER_ID {
            return Err(format!(
                "QUIC-LB server id of {} bytes: 1 to {MAX_SERVER_ID}",
                server_id.len()
            ));
        }
        Ok(QuicLb {
            config_rotation,
            server_id,
        })
    }

    fn cid_len(&self) -> usize {
        1 + self.server_id.len() + NONCE
    }

    /// The server id a load balancer reads from `cid` under this configuration, if its first
    /// octet says this configuration.
    pub fn server_id_of<'a>(&self, cid: &'a [u8]) -> Option<&'a [u8]> {
        let first = *cid.first()?;
        if first >> 5 != self.config_rotation {
            return None;
        }
        cid.get(1..1 + self.server_id.len())
    }
}

/// Issues QUIC-LB connection ids (see the module docs).
pub struct LbCidGenerator {
    lb: QuicLb,
    key: [u8; 32],
}

impl LbCidGenerator {
    /// `key` keys the hash in each id; keep it across restarts (it is derived from the
    /// stateless reset key) so a restarted server still recognizes its ids.
    pub fn new(lb: QuicLb, key: [u8; 32]) -> LbCidGenerator {
        LbCidGenerator { lb, key }
    }

    /// The first 4 bytes of HMAC-SHA256 under the key over `head`.
    fn tag(&self, head: &[u8]) -> [u8; 4] {
        use hmac::Mac;
        let mut tag = [0u8; 4];
        if let Ok(mut m) = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.key) {
            m.update(head);
            for (t, b) in tag.iter_mut().zip(m.finalize().into_bytes()) {
                *t = b;
            }
        }
        tag
    }
}

impl ConnectionIdGenerator for LbCidGenerator {
    fn generate_cid(&mut self) -> ConnectionId {
        let len = self.lb.cid_len();
        let mut cid = Vec::with_capacity(len);
        // Length self-description: the low five bits are the length minus one.
        cid.push((self.lb.config_rotation << 5) | (len as u8 - 1));
        cid.extend_from_slice(&self.lb.server_id);
        let random: [u8; 4] = rand::random();
        cid.extend_from_slice(&random);
        let tag = self.tag(&cid);
        cid.extend_from_slice(&tag);
        ConnectionId::new(&cid)
    }

    fn validate(&self, cid: &ConnectionId) -> Result<(), InvalidCid> {
        let len = self.lb.cid_len();
        let (head, tag) = cid.split_at_checked(len - 4).ok_or(InvalidCid)?;
        let ours = cid.len() == len
            && self.lb.server_id_of(cid) == Some(&self.lb.server_id[..])
            && self.tag(head) == tag;
        if ours { Ok(()) } else { Err(InvalidCid) }
    }

    fn cid_len(&self) -> usize {
        self.lb.cid_len()
    }

    fn cid_lifetime(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn ids_carry_the_server_id_where_a_load_balancer_reads_it() {
        let lb = QuicLb::new(2, vec![0x0a, 0x0b, 0x0c]).unwrap();
        let mut g = LbCidGenerator::new(lb.clone(), [7; 32]);
        let a = g.generate_cid();
        let b = g.generate_cid();
        assert_eq!(a.len(), 1 + 3 + 8);
        assert_eq!(g.cid_len(), a.len());
        // First octet: config rotation 2, length 12 self-described as 11.
        assert_eq!(a[0], (2 << 5) | 11);
        assert_eq!(lb.server_id_of(&a), Some(&[0x0a, 0x0b, 0x0c][..]));
        assert_ne!(a, b, "the nonce differs");
        assert!(g.validate(&a).is_ok() && g.validate(&b).is_ok());
    }

    #[test]
    fn ids_of_another_server_or_key_or_garbage_are_not_ours() {
        let mut ours = LbCidGenerator::new(QuicLb::new(0, vec![1]).unwrap(), [1; 32]);
        let mut other_node = LbCidGenerator::new(QuicLb::new(0, vec![2]).unwrap(), [1; 32]);
        let mut other_key = LbCidGenerator::new(QuicLb::new(0, vec![1]).unwrap(), [9; 32]);
        assert!(ours.validate(&other_node.generate_cid()).is_err());
        assert!(ours.validate(&other_key.generate_cid()).is_err());
        let mut bent = ours.generate_cid().to_vec();
        bent[5] ^= 1;
        assert!(ours.validate(&ConnectionId::new(&bent)).is_err());
        assert!(ours.validate(&ConnectionId::new(&[0u8; 4])).is_err());
        assert!(ours.validate(&ConnectionId::new(&[])).is_err());
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(
            QuicLb::new(7, vec![1]).is_err(),
            "0b111 is the unroutable marker"
        );
        assert!(QuicLb::new(0, vec![]).is_err());
        assert!(QuicLb::new(0, vec![0; MAX_SERVER_ID + 1]).is_err());
        assert!(QuicLb::new(6, vec![0; MAX_SERVER_ID]).is_ok());
    }
}
