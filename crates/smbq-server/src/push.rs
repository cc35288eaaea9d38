//! Messages the server sends to a connection's task outside any request: unsolicited
//! notifications (oplock and lease breaks, MS-SMB2 3.3.4.6/3.3.4.7), which the task frames
//! through its engine.

use smbq_wire::Command;

#[derive(Debug, Clone)]
pub enum Push {
    /// A notification for the connection that holds the open.
    Notification {
        /// The session the notification concerns: it decides whether it is encrypted.
        session_id: u64,
        command: Command,
        /// The encoded body (e.g. a 24-byte OPLOCK_BREAK notification).
        body: Vec<u8>,
    },
}

pub type PushSender = tokio::sync::mpsc::UnboundedSender<Push>;
