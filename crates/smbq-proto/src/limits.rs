//! Every limit the engine and the server enforce, in one value from config. Exceeding one gives
//! a specific NTSTATUS or a disconnect, never an allocation sized from the wire.

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame accepted before a session is authenticated (NEGOTIATE, SESSION_SETUP).
    pub preauth_frame: u32,
    /// Largest frame accepted afterwards: max write + headers, plus a transform header.
    pub frame: u32,
    pub max_read: u32,
    pub max_write: u32,
    pub max_transact: u32,
    /// Credits a client may hold outstanding on one connection.
    pub max_credits: u16,
    /// Messages in one compound chain.
    pub max_compound: usize,
    /// Requests running at once on one connection.
    pub max_in_flight: usize,
    pub max_sessions_per_connection: usize,
    pub max_opens_per_session: usize,
    pub max_trees_per_session: usize,
    pub max_connections: usize,
    /// Connections without a session are dropped this many seconds after they were accepted,
    /// however much they trickle.
    pub unauthenticated_idle_secs: u64,
    /// Bytes of responses one connection may have waiting to be sent plus the payload its
    /// running requests may produce (each counted at its CreditCharge times 64 KiB). At this
    /// point the server stops reading that connection and stops granting it credits.
    pub max_pending_bytes: usize,
    /// Connections (TCP and QUIC together) from one address (IPv6: one /64).
    pub max_connections_per_ip: usize,
    /// The last this many connection slots go only to addresses holding fewer than
    /// [`RESERVE_PER_IP`](Self::RESERVE_PER_IP) connections, so one address cannot take them.
    pub reserved_connections: usize,
    /// Durable opens kept for clients whose connection broke (MS-SMB2 3.3.7.1), in all and
    /// per user; past these a lost connection's opens are closed as if not durable.
    pub max_durable_opens: usize,
    pub max_durable_opens_per_user: usize,
    /// How long a disconnected durable open waits for its client: durable v1 opens and v2
    /// requests with Timeout 0 get the default, v2 requests at most the maximum.
    pub durable_timeout_secs: u64,
    pub max_durable_timeout_secs: u64,
}

impl Limits {
    /// Connections an address may already hold and still get one of the reserved slots.
    pub const RESERVE_PER_IP: usize = 4;
}

impl Default for Limits {
    fn default() -> Self {
        const MIB: u32 = 1024 * 1024;
        Self {
            preauth_frame: 64 * 1024,
            frame: 8 * MIB + 64 * 1024,
            max_read: 8 * MIB,
            max_write: 8 * MIB,
            max_transact: 8 * MIB,
            max_credits: 8192,
            max_compound: 64,
            max_in_flight: 512,
            max_sessions_per_connection: 64,
            max_opens_per_session: 16384,
            max_trees_per_session: 256,
            max_connections: 4096,
            unauthenticated_idle_secs: 60,
            max_pending_bytes: 64 * MIB as usize,
            max_connections_per_ip: 128,
            reserved_connections: 256,
            max_durable_opens: 16384,
            max_durable_opens_per_user: 4096,
            durable_timeout_secs: 60,
            max_durable_timeout_secs: 300,
        }
    }
}
