//! SMB2/3 wire codec (MS-SMB2 section 2.2, MS-FSCC section 2): every message in both directions,
//! headers, transform header, negotiate and create contexts, FSCC information classes,
//! NTSTATUS. No IO, no async, no logging.
//!
//! Conventions used by every message module:
//! - `decode(msg: &'a [u8])` takes the whole SMB2 message *including* its 64-byte header, because
//!   offsets on the wire count from the header's first byte; variable parts borrow from `msg`.
//! - `encode(&self, w: &mut Writer)` writes the body only; it assumes the body starts at
//!   [`header::HEADER_LEN`] from the header, which is true for every message in a compound too.
#![forbid(unsafe_code)]

pub mod cursor;
pub mod error;
pub mod header;
pub mod ntstatus;
#[doc(hidden)]
pub mod open_enum;

pub use cursor::{Reader, Writer};
pub use error::DecodeError;
pub use header::{Command, Dialect, Header, HEADER_LEN};
pub use ntstatus::NtStatus;
