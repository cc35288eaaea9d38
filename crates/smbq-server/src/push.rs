//! Unsolicited server-to-client messages (oplock and lease breaks, MS-SMB2 3.3.4.6/3.3.4.7):
//! the server hands a body to the owning connection's task, which frames it through the engine.

use smbq_wire::Command;

/// One notification for the connection that holds the open.
#[derive(Debug, Clone)]
pub struct Push {
    /// The session the notification concerns: it decides whether the message is encrypted.
    pub session_id: u64,
    pub command: Command,
    /// The encoded body (e.g. a 24-byte OPLOCK_BREAK notification).
    pub body: Vec<u8>,
}

pub type PushSender = tokio::sync::mpsc::UnboundedSender<Push>;
