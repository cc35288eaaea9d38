//! Connecting: NEGOTIATE (optionally after an SMB1 multi-protocol NEGOTIATE) and logging in.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::RngCore;
use smbq_auth::Credentials;
use smbq_crypto::PreauthHash;
use smbq_proto::client::{
    ClientConfig, Negotiated, SessionSetup, SetupStep, negotiate_request, parse_negotiate_response,
    smb1_negotiate_request,
};
use smbq_transport::{Connection, TransportKind};
use smbq_wire::session_setup::session_flags;
use smbq_wire::{Command, Dialect, Header};

use crate::conn::{Outgoing, Protect, Shared};
use crate::session::Session;
use crate::{Error, ProtocolError};

/// An SMB connection to one server.
#[derive(Clone)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
    negotiated: Arc<Negotiated>,
    preauth: PreauthHash,
}

/// Seconds since the Unix epoch as a FILETIME (MS-DTYP 2.3.3).
pub(crate) fn now_filetime() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() + 11_644_473_600) * 10_000_000 + u64::from(d.subsec_nanos() / 100)
}

impl Client {
    /// Negotiates on a fresh transport connection. Over QUIC, transport-level security is
    /// offered (MS-SMB2 2.2.3.1.5) unless the config turned it off explicitly.
    pub async fn connect(conn: Connection, mut config: ClientConfig) -> Result<Self, Error> {
        if conn.kind == TransportKind::Tcp {
            config.transport_security = false;
        }
        if config.client_guid == [0; 16] {
            rand::thread_rng().fill_bytes(&mut config.client_guid);
        }
        let shared = Shared::start(conn, config);
        let cfg = shared.config.clone();
        if cfg.smb1_first {
            let resp = shared.call_smb1(smb1_negotiate_request()).await?;
            let n = parse_negotiate_response(&cfg_with_wildcard(&cfg), &resp.msg)?;
            if n.dialect != Dialect::WILDCARD {
                // Only SMB 2.002 was acceptable to the server: negotiation is over
                // (MS-SMB2 3.2.5.2).
                shared.set_negotiated(n.clone());
                return Ok(Self {
                    shared,
                    negotiated: Arc::new(n),
                    preauth: PreauthHash::new(),
                });
            }
        }
        let mut salt = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut salt);
        // The header is filled by `call`; NEGOTIATE's body does not depend on the message id,
        // but the preauth hash covers the exact bytes, so build and send them ourselves.
        let (negotiated, preauth) = negotiate(&shared, &cfg, &salt).await?;
        shared.set_negotiated(negotiated.clone());
        Ok(Self {
            shared,
            negotiated: Arc::new(negotiated),
            preauth,
        })
    }

    pub fn negotiated(&self) -> Negotiated {
        (*self.negotiated).clone()
    }

    /// The name used in `\\\\server\\share` paths (the peer's address unless set).
    pub fn server_name(&self) -> String {
        self.shared.server_name.lock().clone()
    }

    pub fn set_server_name(&self, name: &str) {
        *self.shared.server_name.lock() = name.to_string();
    }

    /// Ends the connection cleanly: the stream is shut after every queued request, and this
    /// returns once the server closed its side (or after `timeout`). Log off sessions first.
    pub async fn close(&self, timeout: std::time::Duration) {
        self.shared.close(timeout).await;
    }

    /// Why the connection ended, once it has.
    pub fn closed_reason(&self) -> Option<String> {
        self.shared.is_dead()
    }

    pub fn transport(&self) -> TransportKind {
        self.shared.kind
    }

    /// Data streams open on this connection (smbq's multi-stream extension over QUIC,
    /// docs/multistream.md); they open as requests need them, up to the number granted in
    /// [`Self::negotiated`].
    pub async fn data_streams(&self) -> usize {
        self.shared.data_streams().await
    }

    /// Frames sent on this connection so far (requests, compounds, acknowledgments and
    /// cancels each count once): what a caller counting round trips compares.
    pub fn frames_sent(&self) -> u64 {
        self.shared.frames_sent()
    }

    /// NTLMv2 through SPNEGO (MS-SMB2 3.2.4.2.3). An empty user logs on anonymously.
    pub async fn login(&self, user: &str, domain: &str, password: &str) -> Result<Session, Error> {
        self.login_replacing(user, domain, password, 0).await
    }

    /// Logs on again after a broken connection, naming the session it replaces
    /// (PreviousSessionId, MS-SMB2 3.2.4.2.3): the server ends that session and keeps its
    /// durable opens for [`Tree::reclaim`](crate::Tree::reclaim).
    pub async fn login_replacing(
        &self,
        user: &str,
        domain: &str,
        password: &str,
        previous_session_id: u64,
    ) -> Result<Session, Error> {
        let creds = if user.is_empty() {
            Credentials::anonymous()
        } else {
            Credentials::with_password(user, domain, password, &self.shared.config.workstation)
        };
        let neg = self.negotiated();
        // The thread-local RNG must not live across an await, or `login` could not be
        // spawned on a multi-thread runtime.
        let setup = {
            let mut rng = rand::thread_rng();
            SessionSetup::new(
                creds,
                neg.clone(),
                &self.preauth,
                self.shared.config.signing_required,
                &mut rng,
                now_filetime(),
            )
            .replacing(previous_session_id)
        };
        self.run_setup(setup).await
    }

    /// Kerberos through SPNEGO (MS-SMB2 3.2.4.2.3, MS-SPNG): a ticket for `cifs/HOST` from the
    /// user's credential cache (`kinit`; KRB5CCNAME), HOST being the name given to
    /// [`Self::set_server_name`]. The server's AP-REP is checked, so it proves its identity.
    /// Getting the service ticket may take a round trip to the KDC, on a blocking thread.
    pub async fn login_kerberos(&self, previous_session_id: u64) -> Result<Session, Error> {
        let host = self.server_name();
        let (ctx, ap_req) =
            tokio::task::spawn_blocking(move || smbq_gss::Initiating::start("cifs", &host))
                .await
                .map_err(|e| Error::NoKerberos(e.to_string()))?
                .map_err(|e| Error::NoKerberos(e.to_string()))?;
        let krb = smbq_auth::KerberosInitiator::new(ap_req, Box::new(Mit(ctx)));
        let setup = {
            let mut rng = rand::thread_rng();
            SessionSetup::kerberos(
                krb,
                self.negotiated(),
                &self.preauth,
                self.shared.config.signing_required,
                &mut rng,
            )
            .replacing(previous_session_id)
        };
        self.run_setup(setup).await
    }

    /// Binds this connection to `session`, established on another connection of the same
    /// server (multichannel, MS-SMB2 3.2.4.2.3): the same user authenticates again, and the
    /// result is the session on this connection (a channel), with its own signing key. Both
    /// connections must have negotiated the same dialect, signing algorithm and cipher, and
    /// the server must offer multichannel.
    pub async fn bind(
        &self,
        session: &Session,
        user: &str,
        domain: &str,
        password: &str,
    ) -> Result<Session, Error> {
        if !self.negotiated().multichannel() {
            return Err(ProtocolError::Unsupported(
                "the server does not offer multichannel on this connection",
            )
            .into());
        }
        let creds =
            Credentials::with_password(user, domain, password, &self.shared.config.workstation);
        let setup = {
            let mut rng = rand::thread_rng();
            SessionSetup::new(
                creds,
                self.negotiated(),
                &self.preauth,
                self.shared.config.signing_required,
                &mut rng,
                now_filetime(),
            )
            .binding(session.crypto.clone())
        };
        self.setup_on(setup, session.id()).await
    }

    async fn run_setup(&self, setup: SessionSetup) -> Result<Session, Error> {
        self.setup_on(setup, 0).await
    }

    /// Runs a SESSION_SETUP exchange that starts on `session_id` (0: a new session).
    async fn setup_on(&self, mut setup: SessionSetup, session_id: u64) -> Result<Session, Error> {
        let neg = self.negotiated();
        let mut token = setup.first_token();
        let mut session_id = session_id;
        loop {
            let resp = self
                .shared
                .call_recorded(Command::SESSION_SETUP, session_id, |h| {
                    let m = setup.request(h, &token)?;
                    setup.sent(&m);
                    Ok(m)
                })
                .await?;
            match setup.on_response(&resp.msg)? {
                SetupStep::Continue {
                    session_id: id,
                    token: next,
                } => {
                    session_id = id;
                    token = next;
                }
                SetupStep::Done {
                    crypto,
                    session_flags: f,
                } => {
                    let crypto = Arc::new(crypto);
                    self.shared.add_session(crypto.clone());
                    let encrypt_data = f & session_flags::ENCRYPT_DATA != 0;
                    let anonymous = f & (session_flags::IS_NULL | session_flags::IS_GUEST) != 0;
                    return Session::new(self.clone(), crypto, encrypt_data, anonymous, &neg);
                }
            }
        }
    }

    pub(crate) async fn call(
        &self,
        out: Outgoing,
        protect: Protect,
    ) -> Result<smbq_proto::client::Incoming, Error> {
        self.shared.call(out, protect).await
    }
}

/// The SMB1 reply may carry the 0x02FF wildcard, which the offer does not list.
fn cfg_with_wildcard(cfg: &ClientConfig) -> ClientConfig {
    let mut c = cfg.clone();
    c.dialects.push(Dialect::WILDCARD);
    c.dialects.push(Dialect::SMB2_0_2);
    c
}

async fn negotiate(
    shared: &Shared,
    cfg: &ClientConfig,
    salt: &[u8; 32],
) -> Result<(Negotiated, PreauthHash), Error> {
    let mut sent = Vec::new();
    let resp = shared
        .call_recorded(Command::NEGOTIATE, 0, |h: &Header| {
            let m = negotiate_request(cfg, h, salt);
            sent = m.clone();
            Ok(m)
        })
        .await?;
    let n = parse_negotiate_response(cfg, &resp.msg)?;
    let mut preauth = PreauthHash::new();
    if n.dialect == Dialect::SMB3_1_1 {
        preauth.update(&sent);
        preauth.update(&resp.msg);
    }
    if cfg.transport_security && shared.kind == TransportKind::Quic && !n.transport_security {
        tracing::debug!(
            "server did not accept transport-level security; SMB3 encryption rules apply"
        );
    }
    Ok((n, preauth))
}

/// MIT's client context behind smbq-auth's Kerberos initiator.
struct Mit(smbq_gss::Initiating);

impl smbq_auth::KerberosCompletion for Mit {
    fn complete(
        self: Box<Self>,
        ap_rep: &[u8],
    ) -> Result<zeroize::Zeroizing<Vec<u8>>, smbq_auth::AuthError> {
        self.0
            .complete(ap_rep)
            .map_err(|e| smbq_auth::AuthError::Kerberos {
                principal: String::new(),
                status: smbq_wire::NtStatus::LOGON_FAILURE,
                reason: e.message,
            })
    }
}
