//! FNV-1a, 64 bits (draft-eastlake-fnv): the one stable, non-cryptographic hash the server
//! names things by where the name must be the same in every process and every release
//! (named streams' identities, users' RIDs, a cluster's volume ids in smbq-cluster). Never for
//! anything a client could attack by choosing colliding names.

const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(OFFSET_BASIS, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    #[test]
    fn the_reference_test_vectors() {
        // From the FNV reference implementation's test suite (64-bit FNV-1a).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
