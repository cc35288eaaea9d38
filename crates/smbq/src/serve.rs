//! `smbq serve`: builds the typed configuration from the TOML file and flags, prepares the
//! state directory (server GUID, certificate), binds the TCP and QUIC listeners, creates the
//! first account on a fresh install, prints the ready line and the `smbq: try:` commands,
//! and runs until SIGINT/SIGTERM (SIGHUP reloads certificates and accounts).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::Rng;
use smbq_proto::EngineConfig;
use smbq_server::{EncryptPolicy, ServerConfig, ShareConfig};

use crate::accounts::{AccountFile, LiveAccounts};
use crate::config::{FileConfig, parse_encrypt};
use crate::quic_setup;

#[derive(clap::Args, Clone)]
pub struct ServeArgs {
    /// Directory shared as "share" (created if missing). Optional with --config or --share.
    path: Option<PathBuf>,
    /// TOML configuration file; flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on (default: all addresses).
    #[arg(long)]
    listen: Option<IpAddr>,
    /// TCP port (default 445, which needs root or CAP_NET_BIND_SERVICE; 0 = TCP off).
    #[arg(long, value_name = "PORT")]
    tcp_port: Option<u16>,
    /// UDP port for SMB over QUIC (default 443; 0 = QUIC off). If the default cannot be
    /// bound, the server runs TCP only and says so; an explicit port must bind.
    #[arg(long, value_name = "PORT")]
    quic_port: Option<u16>,
    /// More shares, NAME=DIR (read-write).
    #[arg(long = "share", value_name = "NAME=DIR")]
    shares: Vec<String>,
    /// Account database, `NAME:NTHASH` lines, mode 0600 (default: STATE_DIR/users). Changes
    /// (`smbq user add|del`) reach the running server within a second.
    #[arg(long, value_name = "FILE")]
    users: Option<PathBuf>,
    /// State directory for generated files: server GUID, accounts, cert.pem/key.pem (default ./.smbq).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// PEM certificate chain for QUIC (default: a self-signed one generated in the state dir).
    #[arg(long, value_name = "FILE", requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key for QUIC.
    #[arg(long, value_name = "FILE", requires = "cert")]
    key: Option<PathBuf>,
    /// SMB3 encryption: `required` (every session and share encrypted; clients that cannot
    /// are refused), `desired` (encrypted when the client can), or `off` (the default: only
    /// shares with `encrypt = true` are). SMB over QUIC is always inside TLS 1.3.
    #[arg(long, value_name = "POLICY")]
    encrypt: Option<String>,
    /// QUIC implementation, overriding `[quic] stack`: quinn (the default) or msquic
    /// (Microsoft's MsQuic, in builds with the msquic feature).
    #[arg(long, value_name = "STACK")]
    quic_stack: Option<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics, overriding `[metrics] listen`
    /// (off by default; keep it on a loopback or management address).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
    /// Log as `text` (the default) or `json` (one object per line), overriding `[log] format`.
    #[arg(long, value_name = "FORMAT")]
    log_format: Option<String>,
    /// Serve as one node of a cluster whose open state is in etcd at these endpoints
    /// (`http://HOST:PORT`, comma-separated), overriding `[cluster] etcd`; needs --node.
    /// Builds with the `cluster` feature only (docs/cluster.md).
    #[arg(long, value_name = "URL[,URL...]")]
    cluster: Option<String>,
    /// This node's name in the cluster, overriding `[cluster] node`.
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
}

/// `smbq serve --help`, after the flags: what the first start does and how to drive it.
pub const AFTER_HELP: &str = "\
First start: when the account database is empty (and only once both listeners are up), one
account is created: $SMBQ_USER (default `smbq`) with the password in $SMBQ_PASSWORD, or a
random password printed once on stderr. The server then prints `smbq: listening ...` on
stdout and `smbq: try: ...` commands that work as printed.

Signals: SIGHUP re-reads the configuration (shares), the account file and the QUIC\ncertificates (also `smbq status --reload`); SIGINT/SIGTERM stop.
Environment: SMBQ_LOG (tracing filter, e.g. `info` or `smbq_server=debug`), SSLKEYLOGFILE
(TLS secrets for decrypting captures; a warning is printed).";

pub fn default_state_dir() -> PathBuf {
    PathBuf::from(".smbq")
}

/// The server GUID is stable across restarts (clients remember it for reconnects).
fn server_guid(state_dir: &Path) -> Result<[u8; 16], String> {
    kept_random(&state_dir.join("server-guid"))
}

/// The QUIC stateless reset key, kept so a restarted server resets the connections of the one
/// before it (QuicSettings::reset_key).
fn reset_key(state_dir: &Path) -> Result<[u8; 32], String> {
    kept_random(&state_dir.join("quic-reset-key"))
}

/// N random bytes made once and kept, in hex, in the owner-only file `p` (read back at every
/// start; made anew when missing or unreadable).
fn kept_random<const N: usize>(p: &Path) -> Result<[u8; N], String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if let Ok(text) = std::fs::read_to_string(p)
        && let Ok(b) = hex::decode(text.trim())
        && let Ok(k) = <[u8; N]>::try_from(b)
    {
        return Ok(k);
    }
    let mut k = [0u8; N];
    rand::thread_rng().fill(&mut k[..]);
    let _ = std::fs::remove_file(p);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(p)
        .map_err(|e| format!("{}: {e}", p.display()))?;
    f.write_all(hex::encode(k).as_bytes())
        .map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(k)
}

fn random_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    use rand::seq::SliceRandom;
    let mut rng = rand::thread_rng();
    (0..16)
        .filter_map(|_| ALPHABET.choose(&mut rng).map(|b| char::from(*b)))
        .collect()
}

pub fn run(args: ServeArgs) -> Result<(), String> {
    let startup = Startup::build(&args)?;
    crate::logging::init(startup.log_format, startup.file.log.level.as_deref());
    crate::fd_limit::raise(&startup.server_cfg.limits);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("smbq")
        .build()
        .map_err(|e| e.to_string())?;
    let r = rt.block_on(serve(startup));
    // Tasks still alive when serve returned (a QUIC connection being torn down) drop with the
    // runtime, and with them the last reference to an MsQuic registration, which then closes
    // on a thread of its own: wait for those too, or the exit panics under it (seen in CI).
    drop(rt);
    smbq_transport::QuicStack::MsQuic.wait_for_closes(std::time::Duration::from_secs(5));
    r
}

/// Everything the running server needs, built from the flags and files before the runtime
/// starts.
struct Startup {
    state_dir: PathBuf,
    users_path: PathBuf,
    server_cfg: ServerConfig,
    engine_cfg: EngineConfig,
    listen: IpAddr,
    /// 0: TCP off.
    tcp_port: u16,
    quic: Option<QuicPlan>,
    /// The share the `smbq: try:` lines name.
    hint_share: String,
    /// Where `/metrics` is served, if anywhere.
    metrics: Option<SocketAddr>,
    log_format: crate::logging::Format,
    /// The cluster this server is a node of, if any (crate::cluster).
    cluster: Option<crate::cluster::Plan>,
    /// What a reload starts from (crate::reload).
    args: ServeArgs,
    file: FileConfig,
}

impl Startup {
    /// The steps run in the order of their effects: checks that can fail the start come
    /// before what they guard, and no account is written here (see `first_account`).
    fn build(args: &ServeArgs) -> Result<Self, String> {
        let file = load_config(args)?;
        let listen = args
            .listen
            .or(file.listen)
            .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
        let tcp_port = args.tcp_port.or(file.tcp_port).unwrap_or(445);
        let quic_port_set = args.quic_port.or(file.quic_port());
        let quic_port = quic_port_set.unwrap_or(443);
        if tcp_port == 0 && quic_port == 0 {
            return Err(
                "TCP and QUIC are both off (--tcp-port 0 --quic-port 0): nothing to listen on"
                    .into(),
            );
        }
        let shares = share_configs(args, &file)?;
        let encrypt = match args.encrypt.as_deref().or(file.encrypt.as_deref()) {
            Some(s) => parse_encrypt(s)?,
            None => EncryptPolicy::Off,
        };
        file.compression.algorithms()?;
        // Only a start whose arguments hold up creates the state directory.
        let state_dir = prepare_state_dir(args, &file)?;
        let users_path = args
            .users
            .clone()
            .or(file.users.clone())
            .unwrap_or_else(|| state_dir.join("users"));
        // Read (not written) before anything binds: a broken file fails the start. A fresh
        // install's first account is created only once the listeners are up, so a start that
        // fails (port in use) leaves no account behind whose password nobody saw.
        AccountFile::load(&users_path).map_err(|e| format!("{}: {e}", users_path.display()))?;
        let hint_share = hint_share(&shares);
        let guid = server_guid(&state_dir)?;
        let (mut server_cfg, engine_cfg) = server_configs(&file, guid, shares, encrypt);
        let quic_addr = SocketAddr::new(listen, quic_port);
        let quic = quic_plan(args, &file, &state_dir, quic_addr, quic_port_set.is_some())?;
        let cluster =
            crate::cluster::plan(args.cluster.as_deref(), args.node.as_deref(), &file.cluster)?;
        if let Some(plan) = &cluster {
            server_cfg.node_tag = crate::cluster::node_tag(&plan.node);
        }
        Ok(Self {
            state_dir,
            users_path,
            server_cfg,
            engine_cfg,
            listen,
            tcp_port,
            quic,
            hint_share,
            metrics: args.metrics_listen.or(file.metrics.listen),
            log_format: match args.log_format.as_deref().or(file.log.format.as_deref()) {
                Some(f) => crate::logging::parse_format(f)?,
                None => crate::logging::Format::Text,
            },
            cluster,
            args: args.clone(),
            file,
        })
    }
}

/// The TOML file (if any), checked: a bad setting fails the start before anything is written
/// (accounts, certificate).
pub(crate) fn load_config(args: &ServeArgs) -> Result<FileConfig, String> {
    let mut file = match &args.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    if let Some(stack) = &args.quic_stack {
        file.quic.stack = Some(stack.clone());
    }
    file.quic.validate()?;
    quic_logon_possible(&file)?;
    if let Some(l) = &file.log.level {
        crate::logging::parse_level(l)?;
    }
    if let Some(f) = &file.log.format {
        crate::logging::parse_format(f)?;
    }
    Ok(file)
}

/// `[quic] ntlm = false` leaves Kerberos as the only logon over QUIC, which needs a keytab.
fn quic_logon_possible(file: &FileConfig) -> Result<(), String> {
    if file.quic.ntlm == Some(false) && file.kerberos.keytab.is_none() {
        return Err(
            "[quic] ntlm = false needs [kerberos] keytab: without it no logon could succeed over QUIC"
                .into(),
        );
    }
    Ok(())
}

/// The state directory, created if missing.
fn prepare_state_dir(args: &ServeArgs, file: &FileConfig) -> Result<PathBuf, String> {
    let state_dir = args
        .state_dir
        .clone()
        .or(file.state_dir.clone())
        .unwrap_or_else(default_state_dir);
    std::fs::create_dir_all(&state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
    Ok(state_dir)
}

/// The config file's shares, then PATH as "share", then each --share; a later one replaces an
/// earlier one of the same name. Missing directories are created.
pub(crate) fn share_configs(
    args: &ServeArgs,
    file: &FileConfig,
) -> Result<Vec<ShareConfig>, String> {
    let mut shares: Vec<ShareConfig> = file.shares();
    if let Some(p) = &args.path {
        add_share(&mut shares, "share", p.clone(), file)?;
    }
    for s in &args.shares {
        let (name, dir) = s
            .split_once('=')
            .ok_or_else(|| format!("--share {s:?}: expected NAME=DIR"))?;
        if name.is_empty() || name.eq_ignore_ascii_case("IPC$") {
            return Err(format!("--share {s:?}: invalid share name"));
        }
        add_share(&mut shares, name, PathBuf::from(dir), file)?;
    }
    if shares.is_empty() {
        return Err(
            "nothing to share: give a PATH, --share NAME=DIR, or [share.NAME] in --config".into(),
        );
    }
    Ok(shares)
}

/// Adds a read-write share `name` of `dir` (created if missing), replacing one of that name.
fn add_share(
    shares: &mut Vec<ShareConfig>,
    name: &str,
    dir: PathBuf,
    file: &FileConfig,
) -> Result<(), String> {
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    shares.retain(|s| !s.name.eq_ignore_ascii_case(name));
    shares.push(ShareConfig {
        name: name.to_string(),
        path: dir,
        comment: String::new(),
        read_only: false,
        allowed_users: None,
        no_access_users: Vec::new(),
        encrypt: false,
        guest_ok: false,
        acl_flag_inherited_canonicalization: true,
        access_based_enumeration: false,
        compress_data: false,
        continuous_availability: false,
        posix_extensions: file.posix_extensions(),
    });
    Ok(())
}

/// The share the `smbq: try:` lines name: "share" when there is one, else the first.
fn hint_share(shares: &[ShareConfig]) -> String {
    shares
        .iter()
        .find(|s| s.name.eq_ignore_ascii_case("share"))
        .or(shares.first())
        .map(|s| s.name.clone())
        .unwrap_or_else(|| "share".into())
}

/// The server's and the connection engine's configuration.
fn server_configs(
    file: &FileConfig,
    guid: [u8; 16],
    shares: Vec<ShareConfig>,
    encrypt: EncryptPolicy,
) -> (ServerConfig, EngineConfig) {
    let server_name: String = file
        .server_name
        .clone()
        .unwrap_or_else(crate::cert_cmd::host_name);
    let limits = file.limits();
    let server_cfg = ServerConfig {
        server_name: server_name.clone(),
        server_guid: guid,
        shares,
        encrypt,
        guest_ok: file.guest_ok,
        access_based_share_enum: file.access_based_share_enum.unwrap_or(true),
        limits: limits.clone(),
        refuse_hardlinks: file.refuse_hardlinks.unwrap_or(true),
        logon: file.logon(),
        interfaces: smbq_server::InterfacePolicy {
            listen: file.listen.filter(|a| !a.is_unspecified()),
            rss_capable: file.rss_capable.unwrap_or(false),
        },
        restrict_named_pipes_quic: file.quic.restrict_named_pipes.unwrap_or(true),
        node_tag: 0,
    };
    let mut engine_cfg = EngineConfig::new(limits, guid, &server_name)
        .require_signing(file.require_signing)
        .encrypt(
            matches!(encrypt, EncryptPolicy::Required),
            matches!(encrypt, EncryptPolicy::Desired),
        )
        .guest_ok(file.guest_ok)
        .anonymous_ok(file.anonymous_ok.unwrap_or(true));
    engine_cfg.accept_transport_security = file.quic.transport_security.unwrap_or(true);
    engine_cfg.directory_leases = file.directory_leases.unwrap_or(true);
    // Read at start: a continuously available share added by a reload is offered to
    // connections made after the next restart.
    engine_cfg.persistent_handles = server_cfg.shares.iter().any(|s| s.continuous_availability);
    engine_cfg.multichannel_tcp = file.multichannel.unwrap_or(true);
    engine_cfg.multichannel_quic = file.quic.multichannel.unwrap_or(false);
    // Checked when the start was planned.
    engine_cfg.compression = file.compression.algorithms().unwrap_or_default();
    if let Some(n) = file.compression.min_size {
        engine_cfg.compress_min_size = n;
    }
    engine_cfg.compress_adaptive = file.compression.adaptive.unwrap_or(true);
    // The negotiate context is answered when some share can use it; each CREATE then asks
    // its own share (Samba: the global `smb3 unix extensions`, then the share's).
    engine_cfg.posix_extensions = server_cfg.shares.iter().any(|s| s.posix_extensions);
    (server_cfg, engine_cfg)
}

/// The QUIC listener to start at `addr` (port 0: none). Everything QUIC needs from files is
/// read here, before the runtime starts, so a bad certificate or setting fails the start
/// with one clear line.
fn quic_plan(
    args: &ServeArgs,
    file: &FileConfig,
    state_dir: &Path,
    addr: SocketAddr,
    explicit: bool,
) -> Result<Option<QuicPlan>, String> {
    if addr.port() == 0 {
        if args.cert.is_some() {
            eprintln!("smbq: --cert/--key ignored: QUIC is off");
        }
        return Ok(None);
    }
    let flag = args.cert.clone().zip(args.key.clone());
    let sources = file.quic.cert_sources(flag, state_dir);
    let spec = crate::cert_cmd::self_signed_spec(file, Some(addr.ip()), Vec::new());
    let entries = quic_setup::load_entries(&sources, state_dir, &spec, true)?;
    let store =
        smbq_transport::CertStore::new(entries).map_err(|e| format!("QUIC certificate: {e}"))?;
    let tls = smbq_transport::TlsSettings {
        certs: store.clone(),
        client_auth: quic_setup::client_auth(&file.quic)?,
        keylog: quic_setup::keylog(&file.quic)?,
        session_tickets: file.quic.session_tickets.unwrap_or(false),
    };
    Ok(Some(QuicPlan {
        addr,
        explicit,
        tls,
        settings: smbq_transport::QuicSettings {
            reset_key: Some(reset_key(state_dir)?),
            ..quic_setup::settings(&file.quic)
        },
        store,
        sources,
        spec,
    }))
}

/// Runs the server until SIGINT/SIGTERM. The order is part of the contract: signals are
/// registered before the ready line, both listeners are bound before the first account is
/// created, and the ready line comes once every accept task runs. One function of about 115
/// lines on purpose: that order is checked by reading it top to bottom, each step one call.
async fn serve(s: Startup) -> Result<(), String> {
    let signals = Signals::register();
    let ca = s
        .server_cfg
        .shares
        .iter()
        .any(|c| c.continuous_availability);
    let node = match &s.cluster {
        Some(plan) => Some(crate::cluster::Node::join(plan, &s.server_cfg.shares).await?),
        None => None,
    };
    let server = match &node {
        Some(n) => smbq_server::Server::with_state(s.server_cfg, n.open_state()),
        None => smbq_server::Server::new(s.server_cfg),
    }
    .map_err(|e| format!("starting server: {e}"))?;
    if let Some(n) = &node {
        n.deliver_to(&server);
    }
    match (&node, ca) {
        // A cluster node keeps persistent handles in etcd, where any node takes them over,
        // and hands parked durable opens to other nodes (docs/cluster.md).
        (Some(n), _) => n.hold_opens(&server).await?,
        (None, false) => {}
        (None, true) => {
            // Persistent handles outlive the process (docs/features.md): the opens of the
            // last run are held again for their clients before anyone can connect.
            let path = s.state_dir.join("persistent-handles.redb");
            server
                .open_persistent_store(&path)
                .map_err(|e| format!("persistent handles' store {}: {e}", path.display()))?;
        }
    }
    let mut tasks = Tasks {
        shutdown: smbq_server::conn::Shutdown::new(),
        handles: Vec::new(),
    };
    spawn_buffer_trim();
    let kdc_proxy = s.file.kdc_proxy.settings(s.listen)?;
    let proxy_certs = s.quic.as_ref().map(|q| q.store.clone());
    let listeners = bind_listeners(s.listen, s.tcp_port, s.quic)?;
    start_kdc_proxy(kdc_proxy, proxy_certs, &mut tasks).await?;

    let created = first_account(&s.users_path)?;
    let accounts = Arc::new(
        LiveAccounts::load(&s.users_path)
            .map_err(|e| format!("{}: {e}", s.users_path.display()))?,
    );
    unix_identities(&s.file, &server, &accounts)?;
    let mut engine_cfg = s.engine_cfg;
    authentication(&mut engine_cfg, &s.file, &s.state_dir, &accounts)?;
    if let Some(addr) = s.metrics {
        start_metrics(addr, &server, &mut engine_cfg, &mut tasks).await?;
    }
    let runtime =
        smbq_server::conn::Runtime::new(server.clone(), Arc::new(engine_cfg), accounts.clone());
    let reloader = Arc::new(crate::reload::Reloader::new(
        s.args,
        s.file,
        server.clone(),
        runtime.clone(),
    ));
    tasks.spawn(crate::reload::on_sighup(
        reloader.clone(),
        signals.hup_config,
        tasks.shutdown.clone(),
    ));
    start_admin(&s.state_dir, server, reloader, &mut tasks)?;
    let watch = watch_accounts(
        accounts.clone(),
        signals.hup_accounts,
        tasks.shutdown.clone(),
    );
    tasks.spawn(watch);
    let tcp_local = listeners
        .tcp
        .map(|(listener, local)| start_tcp(listener, local, &runtime, &mut tasks));
    let quic = listeners
        .quic
        .map(|q| start_quic(q, &runtime, &s.state_dir, signals.hup_certs, &mut tasks));

    let hint = Hint {
        host: hint_host(s.listen),
        user: created.or_else(|| accounts.first_name()),
        share: s.hint_share,
        tcp_port: tcp_local.map(|l| l.port()),
        quic: quic
            .as_ref()
            .and_then(|q| q.fingerprint.map(|fp| (q.local.port(), fp))),
    };
    print_ready(tcp_local, quic.as_ref().map(|q| q.local), &hint);
    // systemd's Type=notify: ready once every listener accepts (a no-op without systemd).
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    let lost = async {
        match &node {
            Some(n) => n.lost().await,
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        () = wait_for_signal(signals.stop) => Ok(()),
        // Other nodes may now grant what this node's opens held: stop serving them.
        () = lost => Err("the cluster node's etcd lease expired; stopping".to_string()),
    };
    tracing::info!("shutting down");
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    tasks.stop(quic.map(|q| q.listener)).await;
    if let Some(n) = &node {
        n.leave().await;
    }
    // The listener's MsQuic registration closes on a thread of its own; exiting under it
    // would panic in the msquic crate's exit handler.
    smbq_transport::QuicStack::MsQuic.wait_for_closes(std::time::Duration::from_secs(5));
    outcome
}

/// The KDC proxy (MS-KKDCP), when `[kdc_proxy]` is on: bound after the SMB listeners, served
/// with the QUIC certificate.
async fn start_kdc_proxy(
    settings: Option<crate::kdc_proxy::Settings>,
    certs: Option<Arc<smbq_transport::CertStore>>,
    tasks: &mut Tasks,
) -> Result<(), String> {
    let Some(settings) = settings else {
        return Ok(());
    };
    let certs =
        certs.ok_or("[kdc_proxy] serves HTTPS with the SMB over QUIC certificate: turn QUIC on")?;
    let listener = crate::kdc_proxy::bind(settings.listen).await?;
    if let Ok(local) = listener.local_addr() {
        eprintln!("smbq: KDC proxy at https://{local}/KdcProxy");
    }
    tasks.spawn(crate::kdc_proxy::serve(
        listener,
        settings,
        certs,
        tasks.shutdown.clone(),
    ));
    Ok(())
}

/// Per-user Unix identities, when the configuration maps accounts to Unix users.
fn unix_identities(
    file: &FileConfig,
    server: &Arc<smbq_server::Server>,
    accounts: &Arc<LiveAccounts>,
) -> Result<(), String> {
    if let Some(p) = crate::unix_users::policy(file, accounts.clone())? {
        eprintln!(
            "smbq: per-user Unix identities on {}",
            if p.default_on {
                "every share"
            } else {
                "the shares that ask"
            }
        );
        server.set_unix_identity(p);
    }
    Ok(())
}

/// Kerberos (from the keytab) and NTLM, as the engine accepts them.
fn authentication(
    engine_cfg: &mut EngineConfig,
    file: &FileConfig,
    state_dir: &Path,
    accounts: &Arc<LiveAccounts>,
) -> Result<(), String> {
    engine_cfg.kerberos = file
        .kerberos
        .acceptor(state_dir, accounts.clone())?
        .map(|k| -> Arc<dyn smbq_auth::Kerberos> { k });
    engine_cfg.ntlm = file.kerberos.ntlm();
    engine_cfg.ntlm_quic = file.quic.ntlm.unwrap_or(true);
    if let Some(k) = &file.kerberos.keytab {
        let realm = file.kerberos.realm.as_deref().unwrap_or("(map only)");
        eprintln!(
            "smbq: Kerberos on: keytab {}, realm {realm}, NTLM {}",
            k.display(),
            if engine_cfg.ntlm {
                "also accepted"
            } else {
                "off"
            }
        );
    }
    Ok(())
}

/// `/metrics` at `addr`: the observer the engine and server report to, its HTTP listener and
/// the RTT sampler.
async fn start_metrics(
    addr: SocketAddr,
    server: &Arc<smbq_server::Server>,
    engine_cfg: &mut EngineConfig,
    tasks: &mut Tasks,
) -> Result<(), String> {
    let (metrics, registry) = crate::metrics::Metrics::new(server.clone());
    engine_cfg.observer = metrics.clone();
    server.set_observer(metrics.clone());
    let listener = crate::metrics::http::bind(addr).await?;
    if let Ok(local) = listener.local_addr() {
        eprintln!("smbq: metrics at http://{local}/metrics");
    }
    tasks.spawn(crate::metrics::http::serve(
        listener,
        Arc::new(registry),
        tasks.shutdown.clone(),
    ));
    tasks.spawn(metrics.sample_rtts(server.clone(), tasks.shutdown.clone()));
    Ok(())
}

/// The admin socket in the state directory (`smbq status`, `smbq reload`).
fn start_admin(
    state_dir: &Path,
    server: Arc<smbq_server::Server>,
    reloader: Arc<crate::reload::Reloader>,
    tasks: &mut Tasks,
) -> Result<(), String> {
    let admin_path = crate::admin::socket_path(state_dir);
    let admin = crate::admin::listener::bind(&admin_path)?;
    tasks.spawn(crate::admin::listener::serve(
        admin,
        admin_path,
        server,
        reloader,
        tasks.shutdown.clone(),
    ));
    Ok(())
}

/// The signal streams the server acts on.
struct Signals {
    hup_certs: Option<tokio::signal::unix::Signal>,
    hup_accounts: Option<tokio::signal::unix::Signal>,
    hup_config: Option<tokio::signal::unix::Signal>,
    /// SIGTERM, SIGINT.
    stop: (
        std::io::Result<tokio::signal::unix::Signal>,
        std::io::Result<tokio::signal::unix::Signal>,
    ),
}

impl Signals {
    /// Registered before the ready line: from then on SIGHUP reloads instead of killing (its
    /// default action). Each reloader gets its own stream; tokio wakes them all. SIGTERM/SIGINT
    /// too: one sent as soon as the ready line shows (a supervisor, a test) must shut down
    /// cleanly, not kill the process by default action.
    fn register() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let hup_certs = signal(SignalKind::hangup()).ok();
        let hup_accounts = signal(SignalKind::hangup()).ok();
        let hup_config = signal(SignalKind::hangup()).ok();
        let stop = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        );
        Self {
            hup_certs,
            hup_accounts,
            hup_config,
            stop,
        }
    }
}

/// Pooled data buffers unused for a while go back to the allocator (smbq_buf), so an idle
/// server does not keep the memory of its last burst. Detached: ends with the runtime.
fn spawn_buffer_trim() {
    tokio::spawn(async {
        let mut tick = tokio::time::interval(smbq_buf::IDLE);
        loop {
            tick.tick().await;
            smbq_buf::trim_idle();
        }
    });
}

/// The listeners, bound; a port that is off has none.
struct Listeners {
    tcp: Option<(smbq_transport::tcp::TcpListener, SocketAddr)>,
    quic: Option<BoundQuic>,
}

/// A bound QUIC listener and what its certificate reloader needs.
struct BoundQuic {
    listener: Arc<dyn smbq_transport::QuicAcceptor>,
    local: SocketAddr,
    store: Arc<smbq_transport::CertStore>,
    sources: Vec<crate::quic_config::CertSource>,
    spec: crate::cert::SelfSignedSpec,
}

/// Both listeners are bound before anything is written or served: connections wait in the
/// kernel's queues until the accept tasks start.
fn bind_listeners(
    listen: IpAddr,
    tcp_port: u16,
    quic: Option<QuicPlan>,
) -> Result<Listeners, String> {
    let mut tcp = None;
    if tcp_port != 0 {
        let addr = SocketAddr::new(listen, tcp_port);
        let listener = smbq_transport::tcp::TcpListener::bind(addr)
            .map_err(|e| format!("listening on tcp {addr}: {e}"))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        tcp = Some((listener, local));
    }
    let Some(plan) = quic else {
        return Ok(Listeners { tcp, quic: None });
    };
    let QuicPlan {
        addr,
        explicit,
        tls,
        settings,
        store,
        sources,
        spec,
    } = plan;
    let quic = match settings.stack.listen(addr, tls, settings.clone()) {
        Ok(l) => {
            let local = l.local_addr().map_err(|e| e.to_string())?;
            Some(BoundQuic {
                listener: l,
                local,
                store,
                sources,
                spec,
            })
        }
        // The default port (443) may be taken or privileged; a server that was not asked for
        // QUIC explicitly still serves TCP.
        Err(e) if !explicit && tcp.is_some() => {
            eprintln!("smbq: QUIC off: cannot listen on udp {addr}: {e} (set --quic-port)");
            None
        }
        Err(e) => return Err(format!("listening on quic (udp) {addr}: {e}")),
    };
    Ok(Listeners { tcp, quic })
}

/// Starts accepting TCP connections on `listener`, bound to `local`; returns `local`.
fn start_tcp(
    listener: smbq_transport::tcp::TcpListener,
    local: SocketAddr,
    runtime: &Arc<smbq_server::conn::Runtime>,
    tasks: &mut Tasks,
) -> SocketAddr {
    tasks.spawn(smbq_server::conn::serve_tcp(
        listener,
        runtime.clone(),
        tasks.shutdown.clone(),
    ));
    local
}

/// A QUIC listener accepting connections.
struct StartedQuic {
    listener: Arc<dyn smbq_transport::QuicAcceptor>,
    local: SocketAddr,
    /// The certificate served by default, for the `smbq: try:` line.
    fingerprint: Option<[u8; 32]>,
}

/// Prints the UDP buffer note and the certificate fingerprints, then starts accepting QUIC
/// connections and watching the certificate files.
fn start_quic(
    q: BoundQuic,
    runtime: &Arc<smbq_server::conn::Runtime>,
    state_dir: &Path,
    hup: Option<tokio::signal::unix::Signal>,
    tasks: &mut Tasks,
) -> StartedQuic {
    if let Some(note) = udp_buffer_note(state_dir, q.listener.udp_buffers()) {
        eprintln!("{note}");
    }
    quic_setup::print_fingerprints(&q.store, false);
    let fingerprint = q.store.fingerprints().first().copied();
    tasks.spawn(quic_setup::serve_quic(
        q.listener.clone(),
        runtime.clone(),
        tasks.shutdown.clone(),
    ));
    tasks.spawn(quic_setup::watch_certs(
        q.store,
        q.sources,
        state_dir.to_path_buf(),
        q.spec,
        hup,
        tasks.shutdown.clone(),
    ));
    StartedQuic {
        listener: q.listener,
        local: q.local,
        fingerprint,
    }
}

/// The ready line on stdout (what scripts and supervisors wait for), then the `smbq: try:`
/// lines on stderr.
fn print_ready(tcp: Option<SocketAddr>, quic: Option<SocketAddr>, hint: &Hint) {
    println!("{}", ready_line(tcp, quic));
    for line in hint.lines() {
        eprintln!("smbq: try: {line}");
    }
}

/// `smbq: listening tcp=ADDR quic=ADDR`, naming the transports that listen.
fn ready_line(tcp: Option<SocketAddr>, quic: Option<SocketAddr>) -> String {
    let mut ready = String::from("smbq: listening");
    if let Some(local) = tcp {
        ready.push_str(&format!(" tcp={local}"));
    }
    if let Some(local) = quic {
        ready.push_str(&format!(" quic={local}"));
    }
    ready
}

/// The server's long-running tasks and the token that stops them.
struct Tasks {
    shutdown: smbq_server::conn::Shutdown,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

impl Tasks {
    fn spawn(&mut self, task: impl Future<Output = ()> + Send + 'static) {
        self.handles.push(tokio::spawn(task));
    }

    /// Cancels the tasks, closes the QUIC endpoint (telling clients) and gives each task up
    /// to 5 s to finish.
    async fn stop(self, quic: Option<Arc<dyn smbq_transport::QuicAcceptor>>) {
        self.shutdown.cancel();
        if let Some(l) = &quic {
            l.shutdown().await;
        }
        for task in self.handles {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
    }
}

/// A fresh install gets one account so the server is usable at once: `smbq` (or
/// $SMBQ_USER), with $SMBQ_PASSWORD or a random password printed here, the only time it is
/// shown. Returns the name created, if any. Re-reads the file: another `smbq user add` may
/// have filled it since the start checked it.
fn first_account(users_path: &Path) -> Result<Option<String>, String> {
    let mut accounts =
        AccountFile::load(users_path).map_err(|e| format!("{}: {e}", users_path.display()))?;
    if !accounts.is_empty() {
        return Ok(None);
    }
    let user = std::env::var("SMBQ_USER").unwrap_or_else(|_| "smbq".into());
    let (password, generated) = match std::env::var("SMBQ_PASSWORD") {
        Ok(p) if !p.is_empty() => (p, false),
        _ => (random_password(), true),
    };
    accounts
        .set_password(&user, &password)
        .map_err(|e| e.to_string())?;
    accounts
        .save()
        .map_err(|e| format!("{}: {e}", users_path.display()))?;
    if generated {
        eprintln!("smbq: created account '{user}' with password: {password}");
    } else {
        eprintln!("smbq: created account '{user}' with the password from SMBQ_PASSWORD");
    }
    eprintln!(
        "smbq: (stored as an NT hash in {}; manage with `smbq user add|del|list`)",
        users_path.display()
    );
    Ok(Some(user))
}

/// SIGHUP re-reads the account file even when it looks unchanged (a lookup notices changes
/// by itself, see `LiveAccounts`).
async fn watch_accounts(
    accounts: Arc<LiveAccounts>,
    hup: Option<tokio::signal::unix::Signal>,
    shutdown: smbq_server::conn::Shutdown,
) {
    each_sighup(hup, shutdown, || {
        let r = accounts.reload(true);
        accounts.log(&r, "SIGHUP");
        std::future::ready(())
    })
    .await;
}

/// Runs `on_hup` for each SIGHUP until shutdown; every reloader has its own signal stream.
pub(crate) async fn each_sighup<F, Fut>(
    hup: Option<tokio::signal::unix::Signal>,
    shutdown: smbq_server::conn::Shutdown,
    mut on_hup: F,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(mut hup) = hup else {
        return;
    };
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            got = hup.recv() => {
                if got.is_none() {
                    return;
                }
                on_hup().await;
            }
        }
    }
}

/// Marker in the state directory: the UDP buffer note was shown for these values.
const UDP_NOTE_MARKER: &str = "udp-buffers-noted";

/// The kernel's UDP buffer limits are a machine setting that a stock kernel always hits, so
/// the note (with the one command that fixes it) is shown once per state directory, and again
/// only when the values change; repeats go to the debug log. Returns the line to print.
fn udp_buffer_note(state_dir: &Path, b: smbq_transport::UdpBuffers) -> Option<String> {
    if !b.capped() {
        return None;
    }
    let marker = state_dir.join(UDP_NOTE_MARKER);
    let seen = format!("want={} rcvbuf={} sndbuf={}\n", b.want, b.rcvbuf, b.sndbuf);
    if std::fs::read_to_string(&marker).is_ok_and(|t| t == seen) {
        tracing::debug!(
            want = b.want,
            rcvbuf = b.rcvbuf,
            sndbuf = b.sndbuf,
            "kernel caps the UDP socket buffers (noted before); {}",
            b.sysctl_fix()
        );
        return None;
    }
    // Without the marker the note just comes again next start.
    if let Err(e) = std::fs::write(&marker, &seen) {
        tracing::debug!(path = %marker.display(), error = %e, "cannot write the UDP note marker");
    }
    Some(format!(
        "smbq: note: the kernel granted {} UDP socket buffers of the {} QUIC asks for, which \
         slows QUIC transfers; to lift the limit, as root: {} (shown once)",
        size_text(b.rcvbuf.min(b.sndbuf)),
        size_text(b.want),
        b.sysctl_fix()
    ))
}

fn size_text(n: usize) -> String {
    const MIB: usize = 1 << 20;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB", n / MIB)
    } else if n >= MIB {
        format!("{:.1} MiB", n as f64 / MIB as f64)
    } else {
        format!("{} KiB", n / 1024)
    }
}

/// What the `smbq: try:` lines are built from: commands that work as printed against the
/// server just started (a password prompt aside).
struct Hint {
    host: IpAddr,
    user: Option<String>,
    share: String,
    tcp_port: Option<u16>,
    /// QUIC port and the fingerprint of the certificate served by default.
    quic: Option<(u16, [u8; 32])>,
}

/// Where a client on this machine reaches the server: loopback for a wildcard listener.
fn hint_host(listen: IpAddr) -> IpAddr {
    if listen.is_unspecified() {
        IpAddr::from([127, 0, 0, 1])
    } else {
        listen
    }
}

impl Hint {
    fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        // Both smbclient's UNC and the smb URL take IPv6 literals in brackets.
        let host = match self.host {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => format!("[{a}]"),
        };
        if let Some(port) = self.tcp_port {
            let user = self.user.as_deref().map_or("<user>".into(), shell_word);
            let unc = shell_word(&format!("//{host}/{}", self.share));
            out.push(format!("smbclient {unc} -p {port} -U {user} -c ls"));
        }
        if let Some((quic_port, fp)) = self.quic {
            let mut flags = String::new();
            // The URL's :PORT is both transports' port; different ones need the flags.
            let port = match self.tcp_port {
                None => {
                    flags.push_str(" --transport quic");
                    (quic_port != 443).then_some(quic_port)
                }
                Some(t) if t == quic_port => Some(t),
                Some(445) if quic_port == 443 => None,
                Some(t) => {
                    flags.push_str(&format!(" --tcp-port {t} --quic-port {quic_port}"));
                    None
                }
            };
            let user = self.user.as_deref().map(url_escape);
            let url = format!(
                "smb://{}{host}{}/{}",
                user.map(|u| format!("{u}@")).unwrap_or_default(),
                port.map(|p| format!(":{p}")).unwrap_or_default(),
                url_escape(&self.share)
            );
            out.push(format!(
                "smbq ls {}{flags} --pin {}",
                shell_word(&url),
                crate::cert::format_fingerprint(&fp)
            ));
        }
        out
    }
}

/// `s` as one shell word: as is when it holds nothing a shell would interpret (`[` `]` of an
/// IPv6 literal would be a glob).
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "%+,-./:=@_".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Percent-escapes everything but RFC 3986's unreserved characters.
fn url_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A QUIC listener to start, built from files before the runtime runs.
struct QuicPlan {
    addr: SocketAddr,
    /// The port was given (flag or config), so failing to bind it is an error.
    explicit: bool,
    tls: smbq_transport::TlsSettings,
    settings: smbq_transport::QuicSettings,
    store: Arc<smbq_transport::CertStore>,
    sources: Vec<crate::quic_config::CertSource>,
    spec: crate::cert::SelfSignedSpec,
}

async fn wait_for_signal(
    stop: (
        std::io::Result<tokio::signal::unix::Signal>,
        std::io::Result<tokio::signal::unix::Signal>,
    ),
) {
    let (Ok(mut term), Ok(mut int)) = stop else {
        // Without signal handlers we can only run until killed.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kerberos_only_quic_needs_a_keytab() {
        let cfg = |t: &str| -> FileConfig { toml::from_str(t).unwrap() };
        assert!(quic_logon_possible(&cfg("[quic]\nntlm = false\n")).is_err());
        assert!(quic_logon_possible(&cfg("[quic]\nntlm = true\n")).is_ok());
        let with_keytab = "[quic]\nntlm = false\n[kerberos]\nkeytab = \"/etc/smbq.keytab\"\n";
        assert!(quic_logon_possible(&cfg(with_keytab)).is_ok());
    }

    fn hint(tcp: Option<u16>, quic: Option<u16>) -> Hint {
        Hint {
            host: hint_host(IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            user: Some("smbq".into()),
            share: "share".into(),
            tcp_port: tcp,
            quic: quic.map(|q| (q, [0xab; 32])),
        }
    }

    #[test]
    fn try_lines_name_the_user_port_and_share() {
        let pin = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(
            hint(Some(4450), None).lines(),
            ["smbclient //127.0.0.1/share -p 4450 -U smbq -c ls"]
        );
        assert_eq!(
            hint(Some(4450), Some(4450)).lines()[1],
            format!("smbq ls smb://smbq@127.0.0.1:4450/share --pin {pin}")
        );
        assert_eq!(
            hint(Some(445), Some(443)).lines()[1],
            format!("smbq ls smb://smbq@127.0.0.1/share --pin {pin}")
        );
        assert_eq!(
            hint(Some(4450), Some(4443)).lines()[1],
            format!(
                "smbq ls smb://smbq@127.0.0.1/share --tcp-port 4450 --quic-port 4443 --pin {pin}"
            )
        );
        assert_eq!(
            hint(None, Some(4443)).lines(),
            [format!(
                "smbq ls smb://smbq@127.0.0.1:4443/share --transport quic --pin {pin}"
            )]
        );
    }

    #[test]
    fn ready_line_names_the_transports_that_listen() {
        let tcp: SocketAddr = "[::]:4450".parse().unwrap();
        let quic: SocketAddr = "[::]:4443".parse().unwrap();
        assert_eq!(
            ready_line(Some(tcp), Some(quic)),
            "smbq: listening tcp=[::]:4450 quic=[::]:4443"
        );
        assert_eq!(
            ready_line(None, Some(quic)),
            "smbq: listening quic=[::]:4443"
        );
        assert_eq!(ready_line(Some(tcp), None), "smbq: listening tcp=[::]:4450");
    }

    #[test]
    fn try_lines_quote_what_a_shell_would_split() {
        let h = Hint {
            host: IpAddr::from([10, 0, 0, 1]),
            user: Some("o'neil".into()),
            share: "my files".into(),
            tcp_port: Some(445),
            quic: Some((443, [0; 32])),
        };
        let lines = h.lines();
        let v6 = Hint {
            host: "::1".parse().unwrap(),
            ..hint(Some(4450), None)
        };
        assert_eq!(
            v6.lines(),
            ["smbclient '//[::1]/share' -p 4450 -U smbq -c ls"]
        );
        assert_eq!(
            lines[0],
            "smbclient '//10.0.0.1/my files' -p 445 -U 'o'\\''neil' -c ls"
        );
        assert!(
            lines[1].starts_with("smbq ls smb://o%27neil@10.0.0.1/my%20files --pin"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn udp_note_is_shown_once_per_state_dir_and_values() {
        let dir = tempfile::tempdir().unwrap();
        let capped = smbq_transport::UdpBuffers {
            want: 16 << 20,
            rcvbuf: 8 << 20,
            sndbuf: 8 << 20,
        };
        let note = udp_buffer_note(dir.path(), capped).unwrap();
        assert!(note.contains("granted 8 MiB"), "{note}");
        assert!(
            note.contains("sysctl -w net.core.rmem_max=16777216 net.core.wmem_max=16777216"),
            "{note}"
        );
        assert_eq!(udp_buffer_note(dir.path(), capped), None);
        // A different limit is news again.
        let lower = smbq_transport::UdpBuffers {
            rcvbuf: 416 << 10,
            ..capped
        };
        assert!(udp_buffer_note(dir.path(), lower).is_some());
        assert_eq!(udp_buffer_note(dir.path(), lower), None);
        let fine = smbq_transport::UdpBuffers {
            rcvbuf: 32 << 20,
            sndbuf: 32 << 20,
            ..capped
        };
        assert_eq!(udp_buffer_note(dir.path(), fine), None);
    }
}
