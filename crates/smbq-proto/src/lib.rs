//! One SMB2/3 connection as a sans-IO state machine (no sockets, no clock of its own): framing,
//! the credit window, compound split/join, NEGOTIATE and SESSION_SETUP, signing, encryption and
//! the preauth integrity hash. The server and the client are built on it.
#![forbid(unsafe_code)]

pub mod client;
pub mod config;
pub mod credits;
pub mod engine;
pub mod error;
pub mod framing;
pub mod limits;
pub mod nonces;
pub mod observe;
pub mod request;
mod session;
pub mod sessions;
pub mod transform;
pub mod transport;

pub use config::EngineConfig;
pub use error::Violation;
pub use limits::Limits;
pub use request::{ConnView, Request, Response, SessionView};
pub use sessions::{SessionRecord, SessionTable};
