//! Session, tree-connect and open tables. Ids carry a generation, so a stale id (closed,
//! disconnected, or from another session) never reaches a newer object in the same slot.

pub mod channel_seq;
pub mod lock_seq;
pub mod open;
pub mod session;
pub mod slab;
pub mod tree;

pub use open::{FileOpen, Open, OpenKind};
pub use session::SessionState;
pub use slab::GenSlab;
pub use tree::Tree;
