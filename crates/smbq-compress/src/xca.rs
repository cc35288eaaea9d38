//! MS-XCA's algorithms, from smbq-xca. Not wired yet: until they are, `AVAILABLE` is false and
//! neither side offers or accepts them.

use crate::algorithm::{Algorithm, Corrupt};

pub(crate) const AVAILABLE: bool = false;

pub(crate) fn compress(_a: Algorithm, _input: &[u8], _out: &mut Vec<u8>) {}

pub(crate) fn decompress(
    _a: Algorithm,
    _input: &[u8],
    _out: &mut Vec<u8>,
    _len: usize,
) -> Result<(), Corrupt> {
    Err(Corrupt)
}
