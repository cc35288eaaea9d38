//! What the client connects to: one server over one transport with one security setting,
//! always driven by the same client (smbq-client), so differences are the server's and the
//! transport's.

use std::net::SocketAddr;
use std::sync::Arc;

use smbq_client::{Client, ClientConfig, Session, Tree};
use smbq_transport::{QuicClientConfig, QuicConnector, QuicSettings, QuicStack, ServerTrust};

/// The server/transport/security combinations the study compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Target {
    /// smbq over QUIC: TLS 1.3 protects the transport, SMB3 encryption is skipped
    /// (MS-SMB2 2.2.3.1.5 transport-level security).
    #[serde(rename = "smbq-quic")]
    SmbqQuic,
    /// smbq over QUIC on MsQuic (server and client), otherwise as `SmbqQuic` (issue 11
    /// item 7: the QUIC library of the Fusion prototype the thesis measured).
    #[serde(rename = "smbq-msquic")]
    SmbqMsQuic,
    /// smbq over TCP with SMB3 encryption (AES-128-GCM).
    #[serde(rename = "smbq-tcp-enc")]
    SmbqTcpEnc,
    /// smbq over TCP with SMB3 encryption, the session bound to a second TCP connection
    /// (multichannel) and READ/WRITE spread over both (issue 16; S1 only).
    #[serde(rename = "smbq-tcp-enc-2ch")]
    SmbqTcpEnc2Ch,
    /// smbq over TCP without encryption (signed).
    #[serde(rename = "smbq-tcp-plain")]
    SmbqTcpPlain,
    /// Samba smbd over TCP with encryption required.
    #[serde(rename = "samba-tcp-enc")]
    SambaTcpEnc,
}

impl Target {
    pub const ALL: [Target; 6] = [
        Target::SmbqQuic,
        Target::SmbqMsQuic,
        Target::SmbqTcpEnc,
        Target::SmbqTcpEnc2Ch,
        Target::SmbqTcpPlain,
        Target::SambaTcpEnc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::SmbqQuic => "smbq-quic",
            Target::SmbqMsQuic => "smbq-msquic",
            Target::SmbqTcpEnc => "smbq-tcp-enc",
            Target::SmbqTcpEnc2Ch => "smbq-tcp-enc-2ch",
            Target::SmbqTcpPlain => "smbq-tcp-plain",
            Target::SambaTcpEnc => "samba-tcp-enc",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Target::SmbqQuic => "smbq QUIC",
            Target::SmbqMsQuic => "smbq QUIC (MsQuic)",
            Target::SmbqTcpEnc => "smbq TCP+enc",
            Target::SmbqTcpEnc2Ch => "smbq TCP+enc, 2 channels",
            Target::SmbqTcpPlain => "smbq TCP plain",
            Target::SambaTcpEnc => "Samba TCP+enc",
        }
    }

    /// Whether the target runs over QUIC.
    pub fn is_quic(self) -> bool {
        matches!(self, Target::SmbqQuic | Target::SmbqMsQuic)
    }

    /// Whether the SMB3 layer must encrypt (QUIC relies on TLS instead).
    pub fn expects_smb_encryption(self) -> bool {
        matches!(
            self,
            Target::SmbqTcpEnc | Target::SmbqTcpEnc2Ch | Target::SambaTcpEnc
        )
    }

    /// Whether the target runs only the S1 job (the multichannel row issue 16 asks for).
    pub fn s1_only(self) -> bool {
        self == Target::SmbqTcpEnc2Ch
    }
}

/// How to reach one target. Cheap to clone; usable from any client-runtime task.
#[derive(Clone)]
pub struct Endpoint {
    pub target: Target,
    pub addr: SocketAddr,
    pub user: String,
    pub password: String,
    pub share: String,
    quic: Option<Arc<dyn QuicConnector>>,
    /// Data streams asked for over QUIC (docs/multistream.md); 0: one stream, as Windows.
    data_streams: u16,
    /// TCP connections the session is bound to (multichannel); 1: one, as without.
    channels: u16,
    /// Compression algorithms offered (docs/compression.md); empty: none, as by default.
    compression: Vec<smbq_compress::Algorithm>,
}

/// The client configuration every target gets: the library defaults, plus transport-level
/// security offered on QUIC as Windows does, and one stream per connection as Windows uses
/// (smbq's data streams only where a scenario asks for them, [`Endpoint::with_data_streams`]).
pub fn client_config(quic: bool) -> ClientConfig {
    ClientConfig {
        transport_security: quic,
        data_streams: 0,
        ..ClientConfig::default()
    }
}

impl Endpoint {
    pub fn tcp(target: Target, addr: SocketAddr, user: &str, password: &str) -> Self {
        Self {
            target,
            addr,
            user: user.into(),
            password: password.into(),
            share: "share".into(),
            quic: None,
            data_streams: 0,
            channels: 1,
            compression: Vec::new(),
        }
    }

    /// The same endpoint with its session bound to `n` TCP connections, READs and WRITEs
    /// spread over them (`Client::bind`, `Tree::with_channels`).
    pub fn with_channels(mut self, n: u16) -> Self {
        self.channels = n.max(1);
        self
    }

    /// The same endpoint, asking an smbq server for `n` data streams over QUIC.
    pub fn with_data_streams(mut self, n: u16) -> Self {
        self.data_streams = n;
        self
    }

    /// The same endpoint, offering these compression algorithms in this order (chained; the
    /// client then compresses WRITEs and asks for compressed READs); empty: none.
    pub fn with_compression(mut self, algorithms: Vec<smbq_compress::Algorithm>) -> Self {
        self.compression = algorithms;
        self
    }

    /// A QUIC endpoint on the stack `settings.stack` names (target `SmbqQuic` for quinn,
    /// `SmbqMsQuic` for MsQuic); must be made on the client runtime (the UDP socket belongs to
    /// the namespace of the thread that creates it). Trusts exactly the pinned certificate.
    pub fn quic(
        addr: SocketAddr,
        pin: [u8; 32],
        settings: QuicSettings,
        user: &str,
        password: &str,
    ) -> Result<Self, String> {
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0".parse().map_err(|_| "bind address")?
        } else {
            "[::]:0".parse().map_err(|_| "bind address")?
        };
        let stack = settings.stack;
        let cfg = QuicClientConfig {
            settings,
            ..QuicClientConfig::new(ServerTrust::Pin(pin))
        };
        let client = stack
            .client(cfg, bind)
            .map_err(|e| format!("QUIC client ({stack}): {e}"))?;
        Ok(Self {
            target: match stack {
                QuicStack::Quinn => Target::SmbqQuic,
                QuicStack::MsQuic => Target::SmbqMsQuic,
            },
            addr,
            user: user.into(),
            password: password.into(),
            share: "share".into(),
            quic: Some(client),
            data_streams: 0,
            channels: 1,
            compression: Vec::new(),
        })
    }

    /// Transport connect + NEGOTIATE.
    pub async fn connect(&self) -> Result<Client, String> {
        let conn = match &self.quic {
            Some(q) => q
                .connect(self.addr, &self.addr.ip().to_string())
                .await
                .map_err(|e| e.to_string())?,
            None => smbq_transport::connect_tcp(self.addr)
                .await
                .map_err(|e| format!("TCP connect {}: {e}", self.addr))?,
        };
        let cfg = ClientConfig {
            data_streams: self.data_streams,
            // Only a session that gets more channels asks for multichannel.
            multichannel: self.channels > 1,
            compression: self.compression.clone(),
            ..client_config(self.quic.is_some())
        };
        Client::connect(conn, cfg)
            .await
            .map_err(|e| format!("negotiate with {}: {e}", self.target.name()))
    }

    /// Connect, negotiate, session setup, tree connect.
    pub async fn open_tree(&self) -> Result<Tree, String> {
        let client = self.connect().await?;
        let (user, password, name) = (self.user.clone(), self.password.clone(), self.target.name());
        // `Client::login` holds a thread-local RNG across an await, so its future is not Send
        // and cannot be spawned on the multi-thread runtime; it runs on a blocking thread
        // (same runtime, same namespace) instead. The extra hop costs microseconds.
        let session: Session = tokio::task::spawn_blocking(move || {
            tokio::runtime::Handle::current()
                .block_on(async move { client.login(&user, "", &password).await })
        })
        .await
        .map_err(|e| format!("login task: {e}"))?
        .map_err(|e| format!("login to {name}: {e}"))?;
        let tree = session
            .tree_connect(&self.share)
            .await
            .map_err(|e| format!("tree connect on {}: {e}", self.target.name()))?;
        if self.channels <= 1 {
            return Ok(tree);
        }
        let mut channels = Vec::new();
        for _ in 1..self.channels {
            let extra = self.connect().await?;
            let ch = extra
                .bind(&session, &self.user, "", &self.password)
                .await
                .map_err(|e| format!("bind a channel on {}: {e}", self.target.name()))?;
            channels.push(ch);
        }
        tree.with_channels(channels)
            .map_err(|e| format!("channels on {}: {e}", self.target.name()))
    }
}

/// Checks a tree's protection against what the target promises, so a misconfigured run
/// (say, an "encrypted" target that is not) fails instead of reporting wrong numbers.
pub fn check_protection(target: Target, tree: &Tree) -> Result<(), String> {
    let enc = tree.encrypts();
    if enc != target.expects_smb_encryption() {
        return Err(format!(
            "{}: SMB3 encryption is {} but the target expects it {}",
            target.name(),
            if enc { "on" } else { "off" },
            if target.expects_smb_encryption() {
                "on"
            } else {
                "off"
            }
        ));
    }
    Ok(())
}
