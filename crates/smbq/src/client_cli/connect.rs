//! From a URL to a logged-on session: name resolution, QUIC and TCP raced (`race`, with what
//! won last time from `remember`), NEGOTIATE, SESSION_SETUP, TREE_CONNECT. Connections,
//! sessions and trees are reused across the URLs of one command line.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use smbq_client::{Client, Session, Tree};
use smbq_transport::rustls::pki_types::CertificateDer;
use smbq_transport::{
    Connection, QuicClientConfig, QuicConnectError, QuicConnector, QuicSettings, ServerTrust,
    connect_tcp,
};

use super::args::{ConnArgs, Transport};
use super::exit::{CliError, Code};
use super::password::{CredentialsFile, identity, load_credentials, prompt};
use super::race::{Lost, Won, race};
use super::remember::{Memory, Winner, head_start};
use super::url::SmbUrl;
use super::watchdog;
use crate::cert;

pub const DEFAULT_TCP_PORT: u16 = 445;
pub const DEFAULT_QUIC_PORT: u16 = 443;
/// How long an exiting client waits for the server to close each connection after the
/// client ended its stream.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// One logged-on user on one server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SessionKey {
    host: String,
    /// TCP and QUIC ports.
    ports: (u16, u16),
    user: String,
    domain: String,
}

/// Everything the QUIC client needs from files, read once.
struct QuicFiles {
    trust: ServerTrust,
    client_cert: Option<cert::LoadedCert>,
}

pub struct Connector {
    args: ConnArgs,
    creds: Option<CredentialsFile>,
    quic: Option<QuicFiles>,
    sessions: HashMap<SessionKey, Session>,
    /// Passwords typed at the prompt, so each is asked once.
    prompted: HashMap<SessionKey, String>,
    /// Whether the credential cache holds a ticket, once looked at.
    have_ticket: Option<bool>,
    trees: HashMap<(SessionKey, String), Tree>,
    warned_insecure: bool,
    /// One ClientGuid for every connection this run makes: a durable open's lease belongs to
    /// its client's GUID, so a reconnect must present the same one to reclaim it.
    client_guid: [u8; 16],
    /// Connections bound to a session as extra channels (`--channels`), closed at the end.
    channel_clients: Vec<Client>,
}

impl Connector {
    pub fn new(args: ConnArgs) -> Result<Self, CliError> {
        let creds = args
            .credentials
            .as_deref()
            .map(load_credentials)
            .transpose()?;
        let quic = if args.transport == Some(Transport::Tcp) {
            None
        } else {
            Some(quic_files(&args)?)
        };
        Ok(Self {
            args,
            creds,
            quic,
            sessions: HashMap::new(),
            prompted: HashMap::new(),
            have_ticket: None,
            trees: HashMap::new(),
            warned_insecure: false,
            client_guid: rand::random(),
            channel_clients: Vec::new(),
        })
    }

    pub fn args(&self) -> &ConnArgs {
        &self.args
    }

    /// TCP and QUIC ports: the URL's `?tcp-port=`/`?quic-port=`, else the flags, else the
    /// URL's `:PORT` (both), else 445 and 443.
    fn ports(&self, url: &SmbUrl) -> (u16, u16) {
        let tcp = url.tcp_port.or(self.args.tcp_port).or(url.port);
        let quic = url.quic_port.or(self.args.quic_port).or(url.port);
        (
            tcp.unwrap_or(DEFAULT_TCP_PORT),
            quic.unwrap_or(DEFAULT_QUIC_PORT),
        )
    }

    fn key(&self, url: &SmbUrl) -> (SessionKey, super::password::Identity) {
        let id = identity(
            url.user.as_deref(),
            url.domain.as_deref(),
            self.creds.as_ref(),
            std::env::var("SMBQ_PASSWORD").ok(),
            self.args.anonymous,
        );
        let key = SessionKey {
            host: url.host.to_ascii_lowercase(),
            ports: self.ports(url),
            user: id.user.to_lowercase(),
            domain: id.domain.to_lowercase(),
        };
        (key, id)
    }

    /// The password for `id` on `host`: known, asked for earlier, or asked for now.
    fn password(
        &mut self,
        key: &SessionKey,
        id: &super::password::Identity,
        host: &str,
    ) -> Result<String, CliError> {
        if id.user.is_empty() {
            return Ok(String::new());
        }
        if let Some(p) = id.password.as_ref().or(self.prompted.get(key)) {
            return Ok(p.clone());
        }
        let p = prompt(&id.user, host)?;
        self.prompted.insert(key.clone(), p.clone());
        Ok(p)
    }

    /// Whether to log on with Kerberos: asked for, or guessed because no password is known and
    /// the credential cache holds a ticket (looked at once).
    fn kerberos(&mut self, id: &super::password::Identity) -> bool {
        if self.args.kerberos {
            return true;
        }
        // A guess only when the URL names no user: the cache's principal is then the user.
        if id.user.is_empty() || id.password.is_some() || !id.local {
            return false;
        }
        *self.have_ticket.get_or_insert_with(smbq_gss::have_ticket)
    }

    /// Asks for every password the URLs will need, before any connection is made and
    /// before Ctrl-C is handled by the command (so it still ends a prompt at once).
    pub fn ask_passwords<'a>(
        &mut self,
        urls: impl IntoIterator<Item = &'a SmbUrl>,
    ) -> Result<(), CliError> {
        for u in urls {
            let (key, id) = self.key(u);
            if !self.kerberos(&id) {
                self.password(&key, &id, &u.host)?;
            }
        }
        Ok(())
    }

    /// A logged-on session to the URL's server (reused when already open).
    pub async fn session(&mut self, url: &SmbUrl) -> Result<Session, CliError> {
        let (key, _) = self.key(url);
        if let Some(s) = self.sessions.get(&key)
            && s.client().closed_reason().is_none()
        {
            return Ok(s.clone());
        }
        self.log_on(url, 0).await
    }

    /// The URL's share on a new connection after the old one broke: logs on again naming
    /// `previous_session_id` (MS-SMB2 PreviousSessionId), so the server keeps that session's
    /// durable opens for `Tree::reclaim`.
    pub async fn reconnect(
        &mut self,
        url: &SmbUrl,
        previous_session_id: u64,
    ) -> Result<Tree, CliError> {
        let (key, _) = self.key(url);
        self.sessions.remove(&key);
        self.trees.retain(|(k, _), _| *k != key);
        self.log_on(url, previous_session_id).await?;
        self.tree(url).await
    }

    /// Connects and logs on (replacing `previous_session_id` when not 0).
    async fn log_on(
        &mut self,
        url: &SmbUrl,
        previous_session_id: u64,
    ) -> Result<Session, CliError> {
        let (key, id) = self.key(url);
        let kerberos = self.kerberos(&id);
        let password = if kerberos {
            None
        } else {
            Some(self.password(&key, &id, &url.host)?)
        };
        watchdog::touch();
        let conn = self.transport(url).await?;
        watchdog::touch();
        let mut config = self.args.client_config_for(conn.kind);
        config.client_guid = self.client_guid;
        let client = Client::connect(conn, config).await?;
        // TREE_CONNECT paths name the server as the user did (\\HOST\share), not its address.
        client.set_server_name(&url.host);
        watchdog::touch();
        let session = match password {
            Some(p) => {
                client
                    .login_replacing(&id.user, &id.domain, &p, previous_session_id)
                    .await
            }
            None => match client.login_kerberos(previous_session_id).await {
                // Kerberos was a guess from a ticket in the cache. NTLM is tried only when no
                // AP-REQ could be made or the server refused the ticket: never after the
                // server failed to prove itself (a bad AP-REP or signature), where a password
                // response would go to an impostor.
                Err(e)
                    if !self.args.kerberos
                        && (matches!(e, smbq_client::Error::NoKerberos(_))
                            || e.status() == Some(smbq_wire::NtStatus::LOGON_FAILURE)) =>
                {
                    tracing::debug!(error = %e, "Kerberos logon failed; asking for a password");
                    let p = self.password(&key, &id, &url.host)?;
                    client
                        .login_replacing(&id.user, &id.domain, &p, previous_session_id)
                        .await
                }
                other => other,
            },
        };
        let session = session
            .map_err(|e| {
                let mut e = CliError::from(e);
                if id.local && e.code == Code::Auth {
                    e.message = format!(
                        "{} (as {}, the local user name, since the URL names no user: write smb://USER@{}/... or use --anonymous)",
                        e.message, id.user, url.host
                    );
                }
                e
            })?;
        watchdog::touch();
        tracing::debug!(
            dialect = ?client.negotiated().dialect,
            transport = ?client.transport(),
            encrypts = session.encrypts(),
            signs = session.signs(),
            "logged on"
        );
        self.sessions.insert(key, session.clone());
        Ok(session)
    }

    /// The URL's share, connected (reused when already connected).
    pub async fn tree(&mut self, url: &SmbUrl) -> Result<Tree, CliError> {
        let share = url.require_share().map_err(CliError::usage)?.to_string();
        let (key, _) = self.key(url);
        let tk = (key, share.to_ascii_lowercase());
        if let Some(t) = self.trees.get(&tk)
            && t.session().client().closed_reason().is_none()
        {
            return Ok(t.clone());
        }
        let session = self.session(url).await?;
        let mut tree = session.tree_connect(&share).await?;
        watchdog::touch();
        if self.args.channels > 1 {
            tree = self.add_channels(url, tree).await?;
        }
        self.trees.insert(tk, tree.clone());
        Ok(tree)
    }

    /// `--channels N`: binds the tree's session to N-1 more connections to the same server, of
    /// the first one's transport (MS-SMB2 3.2.4.2.3 multichannel), and spreads the tree's READs
    /// and WRITEs over all of them. Over QUIC each channel is a QUIC connection of its own, so
    /// its packet work runs on its own core (issue 40; the server must allow it with `[quic]
    /// multichannel`). Where it cannot (Kerberos, anonymous, a server without multichannel)
    /// the one connection goes on alone, with a note; a channel that fails to bind is left out.
    async fn add_channels(&mut self, url: &SmbUrl, tree: Tree) -> Result<Tree, CliError> {
        let session = tree.session().clone();
        let client = session.client().clone();
        let (key, id) = self.key(url);
        let why_not = if !client.negotiated().multichannel() {
            Some("the server does not offer multichannel")
        } else if session.is_anonymous() || id.user.is_empty() {
            Some("an anonymous or guest session cannot be bound")
        } else if self.kerberos(&id) {
            Some("binding with Kerberos is not supported yet")
        } else {
            None
        };
        if let Some(why) = why_not {
            if !self.args.quiet {
                eprintln!("smbq: one connection only, no more channels: {why}");
            }
            return Ok(tree);
        }
        let password = self.password(&key, &id, &url.host)?;
        let addrs = match self.args.ip {
            Some(ip) => vec![ip],
            None => resolve(&url.host).await?,
        };
        let (tcp_port, quic_port) = self.ports(url);
        let quic = client.transport() == smbq_transport::TransportKind::Quic;
        let mut channels = Vec::new();
        for _ in 1..self.args.channels {
            let conn = if quic {
                self.quic(url, &addrs, quic_port)
                    .await
                    .map_err(|e| quic_error(url, quic_port, e))?
            } else {
                self.tcp(url, &addrs, tcp_port).await?
            };
            let mut config = self.args.client_config_for(conn.kind);
            config.client_guid = self.client_guid;
            let extra = Client::connect(conn, config).await?;
            extra.set_server_name(&url.host);
            match extra.bind(&session, &id.user, &id.domain, &password).await {
                Ok(ch) => {
                    channels.push(ch);
                    self.channel_clients.push(extra);
                }
                Err(e) => {
                    if !self.args.quiet {
                        eprintln!("smbq: a channel could not be bound, going on without it: {e}");
                    }
                    extra.close(CLOSE_GRACE).await;
                }
            }
            watchdog::touch();
        }
        tracing::debug!(channels = 1 + channels.len(), "multichannel");
        Ok(tree.with_channels(channels)?)
    }

    /// Logs every session off (best effort, briefly): the server frees its state at once
    /// instead of when the connection times out.
    pub async fn close(self) {
        drop(self.trees);
        for c in self.channel_clients {
            c.close(CLOSE_GRACE).await;
        }
        for s in self.sessions.into_values() {
            let _ = tokio::time::timeout(Duration::from_secs(2), s.logoff()).await;
            // The client ends its stream and waits for the server's close: on QUIC that close
            // must be received while the runtime still runs, or the server holds the
            // connection until its idle timeout.
            s.client().close(CLOSE_GRACE).await;
        }
    }

    /// How long a broken transfer keeps trying to reconnect (`--reconnect-for`).
    pub fn reconnect_for(&self) -> Duration {
        secs(self.args.reconnect_for).unwrap_or(Duration::ZERO)
    }

    fn connect_timeout(&self) -> Duration {
        secs(self.args.connect_timeout).unwrap_or(Duration::from_secs(10))
    }

    /// QUIC, TCP, or both raced.
    async fn transport(&mut self, url: &SmbUrl) -> Result<Connection, CliError> {
        let addrs = match self.args.ip {
            Some(ip) => vec![ip],
            None => resolve(&url.host).await?,
        };
        let (tcp_port, quic_port) = self.ports(url);
        if self.args.transport != Some(Transport::Tcp) {
            self.warn_insecure();
        }
        match self.args.transport {
            Some(Transport::Tcp) => self.tcp(url, &addrs, tcp_port).await,
            Some(Transport::Quic) => self
                .quic(url, &addrs, quic_port)
                .await
                .map_err(|e| quic_error(url, quic_port, e)),
            None => self.race(url, &addrs, tcp_port, quic_port).await,
        }
    }

    async fn race(
        &self,
        url: &SmbUrl,
        addrs: &[IpAddr],
        tcp_port: u16,
        quic_port: u16,
    ) -> Result<Connection, CliError> {
        let memory = Memory::open();
        let last = memory.recall(&url.host, tcp_port, quic_port);
        let head = head_start(last);
        let quic = self.quic(url, addrs, quic_port);
        let tcp = self.tcp(url, addrs, tcp_port);
        let tcp_at = url.host_for_display(tcp_port);
        let won = race(quic, tcp, head, is_trust_error).await;
        let (conn, winner) = match won {
            Ok(Won::Quic(c)) => (c, Some(Winner::Quic)),
            Ok(Won::Tcp { conn, quic }) => {
                // Evidence against QUIC: it failed, or it had its full head start. TCP winning
                // a race it started with no delay says nothing, and re-recording it would keep
                // the memory from ever expiring.
                let evidence = quic.is_some() || last != Some(Winner::Tcp);
                // Said once per server (until it is forgotten), not on every command.
                if !self.args.quiet && last != Some(Winner::Tcp) {
                    let why = match quic {
                        Some(e) => quic_error(url, quic_port, e).message,
                        None => format!(
                            "QUIC {}: no answer within {} ms",
                            url.host_for_display(quic_port),
                            head.as_millis()
                        ),
                    };
                    eprintln!(
                        "smbq: {why}; using TCP {tcp_at} (remembered for an hour; --transport quic insists on QUIC)"
                    );
                }
                (conn, evidence.then_some(Winner::Tcp))
            }
            // No fallback on a certificate the client does not trust: an attacker who can
            // answer QUIC with a bad certificate could otherwise choose the transport, and a
            // misconfigured trust setting would go unnoticed. A refused or silent QUIC port
            // says nothing about the server's identity; a bad certificate does.
            Err(Lost::Fatal(e)) => return Err(quic_error(url, quic_port, e)),
            Err(Lost::Both(q, t)) => {
                let quic_reason = quic_error(url, quic_port, q).message;
                return Err(CliError::new(
                    t.code,
                    format!("{quic_reason}; {}", t.message),
                ));
            }
        };
        if let Some(w) = winner {
            memory.record(&url.host, tcp_port, quic_port, w);
        }
        Ok(conn)
    }

    fn warn_insecure(&mut self) {
        let insecure = self
            .quic
            .as_ref()
            .is_some_and(|f| matches!(f.trust, ServerTrust::Insecure));
        if insecure && !self.warned_insecure {
            self.warned_insecure = true;
            eprintln!(
                "smbq: WARNING: --insecure: the server's certificate is NOT verified; anyone on the network path can pose as the server and read or change this session"
            );
        }
    }

    async fn tcp(&self, url: &SmbUrl, addrs: &[IpAddr], port: u16) -> Result<Connection, CliError> {
        let mut last = None;
        for ip in addrs {
            let addr = SocketAddr::new(*ip, port);
            match tokio::time::timeout(self.connect_timeout(), connect_tcp(addr)).await {
                Ok(Ok(c)) => return Ok(c),
                Ok(Err(e)) => last = Some(e.to_string()),
                Err(_) => last = Some("timed out".into()),
            }
        }
        Err(CliError::new(
            Code::Connection,
            format!(
                "TCP {}: {}",
                url.host_for_display(port),
                last.unwrap_or_else(|| "no address".into())
            ),
        ))
    }

    /// Races a handshake to every address of the host (one UDP socket per address family)
    /// and keeps the first that completes, so an unreachable IPv6 address does not cost the
    /// whole timeout before IPv4 is tried.
    async fn quic(
        &self,
        url: &SmbUrl,
        addrs: &[IpAddr],
        port: u16,
    ) -> Result<Connection, QuicConnectError> {
        let Some(files) = &self.quic else {
            return Err(QuicConnectError::Other("QUIC is off".into()));
        };
        let keylog = keylog().map_err(QuicConnectError::Io)?;
        let stack = self.args.quic_stack.unwrap_or_default();
        let mut clients: Vec<(bool, Arc<dyn QuicConnector>)> = Vec::new();
        for v6 in [false, true] {
            if !addrs.iter().any(|a| a.is_ipv6() == v6) {
                continue;
            }
            let cfg = QuicClientConfig {
                trust: files.trust.clone(),
                client_cert: files
                    .client_cert
                    .as_ref()
                    .map(|c| (c.chain.clone(), c.key.clone_key())),
                settings: QuicSettings {
                    mtu_upper_bound: self
                        .args
                        .quic_mtu
                        .unwrap_or(QuicSettings::default().mtu_upper_bound),
                    stack,
                    ..QuicSettings::default()
                },
                keylog: keylog.clone(),
            };
            let bind: SocketAddr = if v6 {
                (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
            } else {
                (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
            };
            clients.push((v6, stack.client(cfg, bind)?));
        }
        let timeout = self.connect_timeout();
        let mut set = tokio::task::JoinSet::new();
        for ip in addrs {
            let Some((_, client)) = clients.iter().find(|(v6, _)| *v6 == ip.is_ipv6()) else {
                continue;
            };
            let client = client.clone();
            let addr = SocketAddr::new(*ip, port);
            let name = url.host.clone();
            set.spawn(async move {
                match tokio::time::timeout(timeout, client.connect(addr, &name)).await {
                    Ok(r) => r,
                    Err(_) => Err(QuicConnectError::Timeout),
                }
            });
        }
        let mut best: Option<QuicConnectError> = None;
        while let Some(r) = set.join_next().await {
            match r {
                Ok(Ok(conn)) => return Ok(conn),
                Ok(Err(e)) => {
                    if best.as_ref().is_none_or(|b| rank(&e) > rank(b)) {
                        best = Some(e);
                    }
                }
                Err(e) => best = best.or(Some(QuicConnectError::Other(e.to_string()))),
            }
        }
        Err(best.unwrap_or_else(|| QuicConnectError::Other("no address".into())))
    }
}

/// Which failure says most about the server, when several addresses failed differently.
fn rank(e: &QuicConnectError) -> u8 {
    match e {
        QuicConnectError::PinMismatch { .. } | QuicConnectError::CertificateUntrusted(_) => 4,
        QuicConnectError::Refused(_) => 3,
        QuicConnectError::Io(_) | QuicConnectError::Other(_) => 2,
        QuicConnectError::Timeout => 1,
    }
}

pub fn is_trust_error(e: &QuicConnectError) -> bool {
    matches!(
        e,
        QuicConnectError::PinMismatch { .. } | QuicConnectError::CertificateUntrusted(_)
    )
}

/// The message and exit code of a failed QUIC connect, with the hint that fixes it.
pub fn quic_error(url: &SmbUrl, port: u16, e: QuicConnectError) -> CliError {
    let at = url.host_for_display(port);
    match e {
        QuicConnectError::CertificateUntrusted(why) => CliError::new(
            Code::Trust,
            format!(
                "QUIC {at}: server certificate not trusted ({why}); trust it with --ca FILE or --pin sha256:HEX (`smbq cert show` on the server prints it)"
            ),
        ),
        e @ QuicConnectError::PinMismatch { .. } => CliError::new(
            Code::Trust,
            format!(
                "QUIC {at}: {e}; the server is not the one pinned (or its certificate changed)"
            ),
        ),
        QuicConnectError::Refused(why) => {
            // TLS alerts about the client's certificate (RFC 8446 6.2) are access control:
            // the server wants one, or not this one.
            let about_client_cert = why.contains("Certificate") || why.contains("AccessDenied");
            if about_client_cert {
                CliError::new(
                    Code::AccessDenied,
                    format!(
                        "QUIC {at}: refused by the server: {why} (it may require a client certificate: --client-cert FILE --client-key FILE)"
                    ),
                )
            } else {
                CliError::new(
                    Code::Connection,
                    format!("QUIC {at}: refused by the server: {why}"),
                )
            }
        }
        // No system roots to verify against is a trust problem, not a network one.
        QuicConnectError::Io(io) if io.kind() == io::ErrorKind::NotFound => {
            CliError::new(Code::Trust, format!("QUIC {at}: {io}"))
        }
        QuicConnectError::Timeout => CliError::new(
            Code::Connection,
            format!("QUIC {at}: no answer (handshake timed out)"),
        ),
        e @ (QuicConnectError::Io(_) | QuicConnectError::Other(_)) => {
            CliError::new(Code::Connection, format!("QUIC {at}: {e}"))
        }
    }
}

fn secs(s: f64) -> Option<Duration> {
    (s.is_finite() && s > 0.0).then(|| Duration::from_secs_f64(s.min(1e9)))
}

/// The stall timeout, if any.
pub fn stall_timeout(args: &ConnArgs) -> Option<Duration> {
    secs(args.timeout)
}

async fn resolve(host: &str) -> Result<Vec<IpAddr>, CliError> {
    let fail =
        |why: String| CliError::new(Code::Connection, format!("cannot resolve {host}: {why}"));
    let found = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut ips: Vec<IpAddr> = Vec::new();
    for a in found {
        if !ips.contains(&a.ip()) {
            ips.push(a.ip());
        }
    }
    if ips.is_empty() {
        return Err(fail("no addresses".into()));
    }
    Ok(ips)
}

fn quic_files(args: &ConnArgs) -> Result<QuicFiles, CliError> {
    let trust = if let Some(ca) = &args.ca {
        let cas: Vec<CertificateDer<'static>> =
            cert::load_certs(ca).map_err(|e| CliError::other(format!("--ca: {e}")))?;
        ServerTrust::CaCerts(cas)
    } else if let Some(pin) = args.pin {
        ServerTrust::Pin(pin)
    } else if args.insecure {
        ServerTrust::Insecure
    } else {
        ServerTrust::SystemRoots
    };
    let client_cert = match (&args.client_cert, &args.client_key) {
        (Some(c), Some(k)) => Some(
            cert::load(&cert::CertPaths {
                cert: c.clone(),
                key: k.clone(),
            })
            .map_err(|e| CliError::other(format!("client certificate: {e}")))?,
        ),
        _ => None,
    };
    Ok(QuicFiles { trust, client_cert })
}

/// TLS secrets to `$SSLKEYLOGFILE` for decrypting captures, said loudly.
fn keylog() -> io::Result<Option<Arc<dyn smbq_transport::rustls::KeyLog>>> {
    let Some(path) = std::env::var_os("SSLKEYLOGFILE").filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let path = std::path::PathBuf::from(path);
    let k = crate::keylog::KeyLogFile::open(&path)?;
    eprintln!(
        "smbq: WARNING: writing TLS secrets to {} (SSLKEYLOGFILE)",
        path.display()
    );
    Ok(Some(Arc::new(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> SmbUrl {
        SmbUrl::parse("smb://u@srv/share").unwrap()
    }

    #[test]
    fn certificate_errors_are_exit_7_and_not_fallen_back_from() {
        let pin = QuicConnectError::PinMismatch {
            expected: "aa".into(),
            got: "bb".into(),
        };
        assert!(is_trust_error(&pin));
        let e = quic_error(&url(), 443, pin);
        assert_eq!(e.code, Code::Trust);
        assert!(e.message.contains("srv:443"), "{}", e.message);
        let e = quic_error(
            &url(),
            443,
            QuicConnectError::CertificateUntrusted("UnknownIssuer".into()),
        );
        assert_eq!(e.code, Code::Trust);
        assert!(e.message.contains("--pin"), "{}", e.message);
    }

    #[test]
    fn network_errors_are_exit_6_and_fall_back() {
        for e in [
            QuicConnectError::Timeout,
            QuicConnectError::Refused("closed with code 2: busy".into()),
            QuicConnectError::Io(io::Error::other("unreachable")),
        ] {
            assert!(!is_trust_error(&e));
            assert_eq!(quic_error(&url(), 443, e).code, Code::Connection);
        }
        // A refused client certificate is access control, and says what to do.
        let refused = QuicConnectError::Refused("TLS alert CertificateRequired".into());
        assert!(!is_trust_error(&refused));
        let e = quic_error(&url(), 443, refused);
        assert_eq!(e.code, Code::AccessDenied);
        assert!(e.message.contains("--client-cert"), "{}", e.message);
    }

    #[test]
    fn ranking_prefers_certificate_verdicts() {
        assert!(
            rank(&QuicConnectError::CertificateUntrusted(String::new()))
                > rank(&QuicConnectError::Timeout)
        );
        assert!(rank(&QuicConnectError::Refused(String::new())) > rank(&QuicConnectError::Timeout));
    }

    #[test]
    fn timeouts() {
        assert_eq!(secs(0.0), None);
        assert_eq!(secs(-1.0), None);
        assert_eq!(secs(f64::NAN), None);
        assert_eq!(secs(1.5), Some(Duration::from_millis(1500)));
    }
}
