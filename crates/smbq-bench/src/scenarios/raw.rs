//! Scenario 1, raw baselines (the thesis's iPerf and SecNetPerf): one TCP connection and one
//! QUIC connection over the same link, bulk data each way, with nothing of SMB on top. Both
//! use smbq-transport's own listeners and connectors, so QUIC runs on the same stack, settings
//! and TLS cipher (AES-128-GCM first) as `smbq serve`, with the server's own certificate.
//!
//! The wire protocol is one request of 9 bytes (direction, then the duration in milliseconds,
//! big-endian), then data. Upload: the client sends until the time is up and closes its
//! side; the server answers with the byte count it received. Download: the server sends until
//! the time is up and closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use smbq_transport::tcp::TcpListener;
use smbq_transport::{
    CertEntry, CertStore, ClientAuth, Connection, QuicConnector, QuicSettings, QuicStack,
    TlsSettings,
};

use crate::net::{CLIENT_THREADS, Net, SERVER_THREADS};
use crate::progress::Progress;
use crate::servers::smbq::SmbqServer;
use crate::stats::Summary;
use crate::sys;
use crate::{Ctx, Scale};

/// What one write hands the transport.
const CHUNK: usize = 1 << 20;
/// Chunks per `write_chunks` call.
const BATCH: usize = 4;
const UPLOAD: u8 = b'U';
const DOWNLOAD: u8 = b'D';

/// The raw transports: TCP, QUIC on quinn, QUIC on MsQuic.
pub const TRANSPORTS: [&str; 3] = ["tcp", "quic", "quic-msquic"];

/// The QUIC stack of a raw transport (None: TCP).
fn stack_of(transport: &str) -> Option<QuicStack> {
    match transport {
        "quic" => Some(QuicStack::Quinn),
        "quic-msquic" => Some(QuicStack::MsQuic),
        _ => None,
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RawRow {
    /// "tcp", "quic" (quinn) or "quic-msquic". MsQuic rows carry no CPU figures: both ends
    /// run in this process on MsQuic's shared worker threads, so their CPU cannot be split.
    pub transport: &'static str,
    /// "upload" (client to server) or "download".
    pub direction: &'static str,
    pub mb_s: Summary,
    pub client_cpu_s_per_gb: Summary,
    pub server_cpu_s_per_gb: Summary,
    pub seconds_per_run: f64,
}

fn payload() -> Bytes {
    let mut b = vec![0u8; CHUNK];
    rand::Rng::fill(&mut rand::thread_rng(), b.as_mut_slice());
    Bytes::from(b)
}

async fn read_exact(conn: &mut Connection, buf: &mut BytesMut, n: usize) -> std::io::Result<()> {
    while buf.len() < n {
        match conn.reader.read_chunk().await? {
            Some(c) => buf.extend_from_slice(&c),
            None => return Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }
    Ok(())
}

async fn send_for(conn: &mut Connection, data: &Bytes, until: Instant) -> std::io::Result<u64> {
    let mut sent = 0u64;
    while Instant::now() < until {
        let mut chunks: Vec<Bytes> = (0..BATCH).map(|_| data.clone()).collect();
        conn.writer.write_chunks(&mut chunks).await?;
        sent += (BATCH * data.len()) as u64;
    }
    Ok(sent)
}

/// Serves one raw connection.
async fn serve(mut conn: Connection, data: Bytes) -> std::io::Result<()> {
    let mut head = BytesMut::new();
    read_exact(&mut conn, &mut head, 9).await?;
    let mode = head.first().copied().unwrap_or(0);
    let ms = head
        .get(1..9)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .unwrap_or(0)
        .min(3_600_000);
    match mode {
        UPLOAD => {
            let mut got = (head.len() - 9) as u64;
            while let Some(c) = conn.reader.read_chunk().await? {
                got += c.len() as u64;
            }
            let mut reply = [Bytes::copy_from_slice(&got.to_be_bytes())];
            conn.writer.write_chunks(&mut reply).await?;
            conn.writer.shutdown().await
        }
        DOWNLOAD => {
            send_for(&mut conn, &data, Instant::now() + Duration::from_millis(ms)).await?;
            conn.writer.shutdown().await?;
            // Dropping the connection now would bound the wait for the data still in flight;
            // the client closes its side once it has everything.
            while conn.reader.read_chunk().await?.is_some() {}
            Ok(())
        }
        _ => Err(std::io::ErrorKind::InvalidData.into()),
    }
}

/// One client run: returns (bytes moved, seconds).
async fn client_run(
    mut conn: Connection,
    upload: bool,
    dur: Duration,
    data: Bytes,
) -> Result<(u64, f64), String> {
    let mut head = vec![if upload { UPLOAD } else { DOWNLOAD }];
    head.extend_from_slice(&(dur.as_millis() as u64).to_be_bytes());
    let start = Instant::now();
    conn.writer
        .write_chunks(&mut [Bytes::from(head)])
        .await
        .map_err(|e| e.to_string())?;
    if upload {
        send_for(&mut conn, &data, start + dur)
            .await
            .map_err(|e| e.to_string())?;
        conn.writer.shutdown().await.map_err(|e| e.to_string())?;
        let mut reply = BytesMut::new();
        read_exact(&mut conn, &mut reply, 8)
            .await
            .map_err(|e| format!("upload reply: {e}"))?;
        let got = reply
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
            .unwrap_or(0);
        Ok((got, start.elapsed().as_secs_f64()))
    } else {
        let mut got = 0u64;
        while let Some(c) = conn.reader.read_chunk().await.map_err(|e| e.to_string())? {
            got += c.len() as u64;
        }
        let took = start.elapsed().as_secs_f64();
        let _ = conn.writer.shutdown().await;
        Ok((got, took))
    }
}

struct RawServers {
    tcp: SocketAddr,
    /// One QUIC listener per stack measured.
    quic: Vec<(QuicStack, SocketAddr)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn start_servers(
    net: &Net,
    smbq: &SmbqServer,
    tcp_port: u16,
    quic_ports: Vec<(QuicStack, u16)>,
    settings: QuicSettings,
) -> Result<RawServers, String> {
    let ip = net.server_ip();
    let chain = smbq.cert_chain.clone();
    let key = smbq.key()?;
    let data = payload();
    net.server_rt
        .block_on(net.server_rt.spawn(async move {
            let tcp =
                TcpListener::bind(SocketAddr::new(ip, tcp_port)).map_err(|e| e.to_string())?;
            let certs = CertStore::new(vec![CertEntry {
                names: Vec::new(),
                chain,
                key,
            }])
            .map_err(|e| e.to_string())?;
            let tls = TlsSettings {
                certs,
                client_auth: ClientAuth::Off,
                keylog: None,
                session_tickets: false,
            };
            let tcp_addr = tcp.local_addr().map_err(|e| e.to_string())?;
            let d1 = data.clone();
            let mut tasks = vec![tokio::spawn(async move {
                while let Ok(c) = tcp.accept().await {
                    let d = d1.clone();
                    tokio::spawn(async move {
                        if let Err(e) = serve(c, d).await {
                            tracing::debug!(error = %e, "raw tcp");
                        }
                    });
                }
            })];
            let mut quic_addrs = Vec::new();
            for (stack, port) in quic_ports {
                let quic = stack
                    .listen(
                        SocketAddr::new(ip, port),
                        tls.clone(),
                        QuicSettings {
                            stack,
                            ..settings.clone()
                        },
                    )
                    .map_err(|e| format!("raw QUIC listener ({stack}): {e}"))?;
                quic_addrs.push((stack, quic.local_addr().map_err(|e| e.to_string())?));
                let data = data.clone();
                tasks.push(tokio::spawn(async move {
                    while let Some(c) = quic.accept().await {
                        let Ok(c) = c else { continue };
                        let d = data.clone();
                        tokio::spawn(async move {
                            if let Err(e) = serve(c, d).await {
                                tracing::debug!(error = %e, "raw quic");
                            }
                        });
                    }
                }));
            }
            Ok::<_, String>(RawServers {
                tcp: tcp_addr,
                quic: quic_addrs,
                tasks,
            })
        }))
        .map_err(|e| format!("raw server task: {e}"))?
}

pub fn run(ctx: &mut Ctx) -> Result<Vec<RawRow>, String> {
    let net = ctx.net(None)?;
    let result = run_on(ctx, &net);
    ctx.stop_net(net);
    result
}

fn run_on(ctx: &mut Ctx, net: &Net) -> Result<Vec<RawRow>, String> {
    let smbq = ctx.start_smbq(net, true, "raw")?;
    let stacks = ctx.quic_stacks();
    let tp = ctx.ports.take(net);
    let quic_ports: Vec<(QuicStack, u16)> =
        stacks.iter().map(|&s| (s, ctx.ports.take(net))).collect();
    let servers = start_servers(net, &smbq, tp, quic_ports, ctx.quic_settings());
    let servers = match servers {
        Ok(s) => s,
        Err(e) => {
            let _ = smbq.stop();
            return Err(e);
        }
    };
    let dur = Duration::from_secs_f64(match ctx.scale {
        Scale::Quick => 1.5,
        Scale::Full => 10.0,
    });
    let repeats = ctx.repeats();
    let pin = smbq.pin;
    let tcp_addr = servers.tcp;
    let quic_settings = ctx.quic_settings();
    let mut clients: Vec<(QuicStack, SocketAddr, Arc<dyn QuicConnector>)> = Vec::new();
    for &(stack, addr) in &servers.quic {
        let settings = QuicSettings {
            stack,
            ..quic_settings.clone()
        };
        let client = net.on_client(async move {
            let bind: SocketAddr = "0.0.0.0:0".parse().map_err(|_| "bind")?;
            let cfg = smbq_transport::QuicClientConfig {
                settings,
                ..smbq_transport::QuicClientConfig::new(smbq_transport::ServerTrust::Pin(pin))
            };
            stack.client(cfg, bind).map_err(|e| e.to_string())
        })??;
        clients.push((stack, addr, client));
    }
    let combos: Vec<(&'static str, bool)> = TRANSPORTS
        .into_iter()
        .filter(|t| stack_of(t).is_none_or(|s| stacks.contains(&s)))
        .flat_map(|t| [(t, true), (t, false)])
        .collect();
    let mut prog = Progress::new("raw", combos.len() * repeats);
    let mut samples: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![Default::default(); combos.len()];
    let data = payload();
    let mut failure = None;
    'outer: for r in 0..repeats {
        for (i, &(transport, upload)) in combos.iter().enumerate() {
            let dir = if upload { "upload" } else { "download" };
            prog.step(&format!("{transport} {dir} (repeat {})", r + 1));
            let quic = stack_of(transport).and_then(|stack| {
                clients
                    .iter()
                    .find(|c| c.0 == stack)
                    .map(|c| (c.1, c.2.clone()))
            });
            let d = data.clone();
            let c0 = sys::threads_cpu(CLIENT_THREADS);
            let s0 = sys::threads_cpu(SERVER_THREADS);
            let res = net.on_client(async move {
                let conn = match quic {
                    None => smbq_transport::connect_tcp(tcp_addr)
                        .await
                        .map_err(|e| e.to_string())?,
                    Some((addr, qc)) => qc
                        .connect(addr, &addr.ip().to_string())
                        .await
                        .map_err(|e| e.to_string())?,
                };
                client_run(conn, upload, dur, d).await
            });
            let c1 = sys::threads_cpu(CLIENT_THREADS);
            let s1 = sys::threads_cpu(SERVER_THREADS);
            match res.and_then(|r| r) {
                Ok((bytes, secs)) if bytes > 0 && secs > 0.0 => {
                    let gb = bytes as f64 / 1e9;
                    let s = samples.get_mut(i).ok_or("index")?;
                    s.0.push(bytes as f64 / 1e6 / secs);
                    // MsQuic's threads serve both ends here: no split (see RawRow).
                    if stack_of(transport) != Some(QuicStack::MsQuic) {
                        s.1.push((c1 - c0) / gb);
                        s.2.push((s1 - s0) / gb);
                    }
                }
                Ok(_) => {
                    failure = Some(format!("raw {transport} {dir}: nothing moved"));
                    break 'outer;
                }
                Err(e) => {
                    failure = Some(format!("raw {transport} {dir}: {e}"));
                    break 'outer;
                }
            }
        }
    }
    for t in &servers.tasks {
        t.abort();
    }
    drop(clients);
    prog.finish();
    smbq.stop()?;
    if let Some(f) = failure {
        return Err(f);
    }
    Ok(combos
        .iter()
        .zip(samples)
        .map(|(&(transport, upload), (mb, c, s))| RawRow {
            transport,
            direction: if upload { "upload" } else { "download" },
            mb_s: Summary::of(&mb),
            client_cpu_s_per_gb: Summary::of(&c),
            server_cpu_s_per_gb: Summary::of(&s),
            seconds_per_run: dur.as_secs_f64(),
        })
        .collect())
}
