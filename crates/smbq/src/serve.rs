//! `smbq serve`: builds the typed configuration from the TOML file and flags, prepares the
//! state directory (server GUID, accounts, certificate), binds the TCP and QUIC listeners,
//! prints the ready line, and runs until SIGINT/SIGTERM (SIGHUP reloads certificates).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::Rng;
use smbq_proto::EngineConfig;
use smbq_server::{EncryptPolicy, ServerConfig, ShareConfig};

use crate::accounts::AccountFile;
use crate::config::{FileConfig, parse_encrypt};
use crate::quic_setup;

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Directory shared as "share" (created if missing).
    path: Option<PathBuf>,
    /// TOML configuration file; flags override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on (default: all addresses).
    #[arg(long)]
    listen: Option<IpAddr>,
    /// TCP port (default 445; 0 = TCP off).
    #[arg(long)]
    tcp_port: Option<u16>,
    /// UDP port for SMB over QUIC (default 443; 0 = QUIC off).
    #[arg(long)]
    quic_port: Option<u16>,
    /// More shares, NAME=DIR (read-write).
    #[arg(long = "share", value_name = "NAME=DIR")]
    shares: Vec<String>,
    /// Account database (default: STATE_DIR/users).
    #[arg(long)]
    users: Option<PathBuf>,
    /// State directory for generated files: server GUID, accounts, cert.pem/key.pem (default ./.smbq).
    #[arg(long)]
    state_dir: Option<PathBuf>,
    /// PEM certificate chain for QUIC (default: a self-signed one generated in the state dir).
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key for QUIC.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// SMB3 encryption policy: required | desired | off.
    #[arg(long)]
    encrypt: Option<String>,
}

pub fn default_state_dir() -> PathBuf {
    PathBuf::from(".smbq")
}

/// The server GUID is stable across restarts (clients remember it for reconnects).
fn server_guid(state_dir: &Path) -> Result<[u8; 16], String> {
    let p = state_dir.join("server-guid");
    if let Ok(text) = std::fs::read_to_string(&p)
        && let Ok(b) = hex::decode(text.trim())
        && let Ok(g) = <[u8; 16]>::try_from(b)
    {
        return Ok(g);
    }
    let g: [u8; 16] = rand::thread_rng().r#gen();
    std::fs::write(&p, hex::encode(g)).map_err(|e| format!("{}: {e}", p.display()))?;
    Ok(g)
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
    let file = match &args.config {
        Some(p) => FileConfig::load(p)?,
        None => FileConfig::default(),
    };
    // A bad setting fails the start before anything is written (accounts, certificate).
    file.quic.validate()?;
    let state_dir = args
        .state_dir
        .clone()
        .or(file.state_dir.clone())
        .unwrap_or_else(default_state_dir);
    std::fs::create_dir_all(&state_dir).map_err(|e| format!("{}: {e}", state_dir.display()))?;
    let users_path = args
        .users
        .clone()
        .or(file.users.clone())
        .unwrap_or_else(|| state_dir.join("users"));

    let mut shares: Vec<ShareConfig> = file.shares();
    let mut add_share = |name: &str, dir: PathBuf| -> Result<(), String> {
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
        });
        Ok(())
    };
    if let Some(p) = &args.path {
        add_share("share", p.clone())?;
    }
    for s in &args.shares {
        let (name, dir) = s
            .split_once('=')
            .ok_or_else(|| format!("--share {s:?}: expected NAME=DIR"))?;
        if name.is_empty() || name.eq_ignore_ascii_case("IPC$") {
            return Err(format!("--share {s:?}: invalid share name"));
        }
        add_share(name, PathBuf::from(dir))?;
    }
    if shares.is_empty() {
        return Err(
            "nothing to share: give a PATH, --share NAME=DIR, or [share.NAME] in --config".into(),
        );
    }

    let encrypt = match args.encrypt.as_deref().or(file.encrypt.as_deref()) {
        Some(s) => parse_encrypt(s)?,
        None => EncryptPolicy::Off,
    };

    // A fresh install gets one account so the server is usable at once.
    let mut accounts =
        AccountFile::load(&users_path).map_err(|e| format!("{}: {e}", users_path.display()))?;
    if accounts.is_empty() {
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
    }

    let server_name: String = file
        .server_name
        .clone()
        .unwrap_or_else(crate::cert_cmd::host_name);
    let limits = file.limits();
    let guid = server_guid(&state_dir)?;
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
    };
    let engine_cfg = EngineConfig::new(limits, guid, &server_name)
        .require_signing(file.require_signing)
        .encrypt(
            matches!(encrypt, EncryptPolicy::Required),
            matches!(encrypt, EncryptPolicy::Desired),
        )
        .guest_ok(file.guest_ok)
        .anonymous_ok(file.anonymous_ok.unwrap_or(true));

    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
    let tcp_port = args.tcp_port.or(file.tcp_port).unwrap_or(445);
    let quic_port_set = args.quic_port.or(file.quic_port());
    let quic_port = quic_port_set.unwrap_or(443);
    if tcp_port == 0 && quic_port == 0 {
        return Err(
            "TCP and QUIC are both off (--tcp-port 0 --quic-port 0): nothing to listen on".into(),
        );
    }
    let mut engine_cfg = engine_cfg;
    engine_cfg.accept_transport_security = file.quic.transport_security.unwrap_or(true);

    // Everything QUIC needs from files is read before the runtime starts, so a bad
    // certificate or setting fails the start with one clear line.
    let quic = if quic_port == 0 {
        if args.cert.is_some() {
            eprintln!("smbq: --cert/--key ignored: QUIC is off");
        }
        None
    } else {
        let flag = args.cert.clone().zip(args.key.clone());
        let sources = file.quic.cert_sources(flag, &state_dir);
        let spec = crate::cert_cmd::self_signed_spec(&file, Some(listen), Vec::new());
        let entries = quic_setup::load_entries(&sources, &state_dir, &spec, true)?;
        let store = smbq_transport::CertStore::new(entries)
            .map_err(|e| format!("QUIC certificate: {e}"))?;
        let tls = smbq_transport::TlsSettings {
            certs: store.clone(),
            client_auth: quic_setup::client_auth(&file.quic)?,
            keylog: quic_setup::keylog(&file.quic)?,
        };
        Some(QuicPlan {
            addr: SocketAddr::new(listen, quic_port),
            explicit: quic_port_set.is_some(),
            tls,
            settings: quic_setup::settings(&file.quic),
            store,
            sources,
            spec,
        })
    };

    init_tracing();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("smbq")
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        // Registered before the ready line: from then on SIGHUP reloads instead of killing.
        let hup = signal(SignalKind::hangup()).ok();
        let server =
            smbq_server::Server::new(server_cfg).map_err(|e| format!("starting server: {e}"))?;
        let shutdown = tokio_util_cancel();
        let runtime =
            smbq_server::conn::Runtime::new(server, Arc::new(engine_cfg), Arc::new(accounts));
        let mut tasks = Vec::new();
        let mut ready = String::from("smbq: listening");

        // Pooled data buffers unused for a while go back to the allocator (smbq_buf), so an
        // idle server does not keep the memory of its last burst. Detached: ends with the
        // runtime.
        tokio::spawn(async {
            let mut tick = tokio::time::interval(smbq_buf::IDLE);
            loop {
                tick.tick().await;
                smbq_buf::trim_idle();
            }
        });

        let mut tcp_local = None;
        if tcp_port != 0 {
            let addr = SocketAddr::new(listen, tcp_port);
            let listener = smbq_transport::tcp::TcpListener::bind(addr)
                .map_err(|e| format!("listening on tcp {addr}: {e}"))?;
            let local = listener.local_addr().map_err(|e| e.to_string())?;
            tasks.push(tokio::spawn(smbq_server::conn::serve_tcp(
                listener,
                runtime.clone(),
                shutdown.clone(),
            )));
            ready.push_str(&format!(" tcp={local}"));
            tcp_local = Some(local);
        }

        let mut quic_listener = None;
        if let Some(plan) = quic {
            match smbq_transport::QuicListener::bind(plan.addr, plan.tls, plan.settings) {
                Ok(l) => {
                    let l = Arc::new(l);
                    let local = l.local_addr().map_err(|e| e.to_string())?;
                    quic_setup::print_fingerprints(&plan.store, false);
                    tasks.push(tokio::spawn(quic_setup::serve_quic(
                        l.clone(),
                        runtime.clone(),
                        shutdown.clone(),
                    )));
                    tasks.push(tokio::spawn(quic_setup::watch_certs(
                        plan.store,
                        plan.sources,
                        state_dir.clone(),
                        plan.spec,
                        hup,
                        shutdown.clone(),
                    )));
                    ready.push_str(&format!(" quic={local}"));
                    quic_listener = Some(l);
                }
                // The default port (443) may be taken or privileged; a server that was not
                // asked for QUIC explicitly still serves TCP.
                Err(e) if !plan.explicit && tcp_local.is_some() => {
                    eprintln!(
                        "smbq: QUIC off: cannot listen on udp {}: {e} (set --quic-port)",
                        plan.addr
                    );
                }
                Err(e) => return Err(format!("listening on quic (udp) {}: {e}", plan.addr)),
            }
        }

        println!("{ready}");
        if let Some(local) = tcp_local {
            let shown = if listen.is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                listen.to_string()
            };
            eprintln!(
                "smbq: try: smbclient //{shown}/share -p {} -U <user> -c ls",
                local.port()
            );
        }
        wait_for_signal().await;
        tracing::info!("shutting down");
        shutdown.cancel();
        if let Some(l) = &quic_listener {
            l.shutdown().await;
        }
        for task in tasks {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
        }
        Ok::<(), String>(())
    })
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

fn tokio_util_cancel() -> smbq_server::conn::Shutdown {
    smbq_server::conn::Shutdown::new()
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers we can only run until killed.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("SMBQ_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only for a terminal: logs written to files stay greppable.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}
