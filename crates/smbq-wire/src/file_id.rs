//! SMB2_FILEID (MS-SMB2 2.2.14.1): a persistent and a volatile 64-bit part.

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FileId {
    pub persistent: u64,
    pub volatile: u64,
}

impl FileId {
    /// All-ones id: in a related compound it means "the file opened by the previous request"
    /// (MS-SMB2 3.3.5.2.7.2).
    pub const RELATED: Self = Self {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };

    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            persistent: r.u64()?,
            volatile: r.u64()?,
        })
    }
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.persistent).u64(self.volatile);
    }
}
