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

mod body;
pub mod cursor;
pub mod error;
pub mod file_id;
pub mod header;
pub mod ntstatus;
#[doc(hidden)]
pub mod open_enum;

// Session and connection level messages.
pub mod cancel;
pub mod change_notify;
pub mod compression;
pub mod copychunk;
pub mod echo;
pub mod error_response;
pub mod ioctl;
pub mod logoff;
pub mod multi_stream;
pub mod negotiate;
pub mod oplock_break;
pub mod session_setup;
pub mod smb1_negotiate;
pub mod transform;
pub mod tree_connect;

// File messages.
pub mod close;
pub mod create;
pub mod create_context;
pub mod flush;
pub mod lock;
pub mod posix;
pub mod query_directory;
pub mod query_info;
pub mod read;
pub mod set_info;
pub mod write;

// MS-FSCC and MS-DTYP structures.
pub mod filetime;
pub mod fscc;
pub mod security;

pub use cursor::{Reader, Writer};
pub use error::DecodeError;
pub use file_id::FileId;
pub use header::{Command, Dialect, HEADER_LEN, Header};
pub use ntstatus::NtStatus;
