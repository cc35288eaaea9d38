//! The `smb` crate as a client: connect over QUIC (or TCP), then one file operation.

use std::future::Future;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::{StreamExt, TryStreamExt, stream};
use sha2::{Digest, Sha256};
use smb::connection::EncryptionMode;
use smb::transport::{QuicCertValidationOptions, QuicConfig, TransportConfig};
use smb::{
    Client, ClientConfig, ConnectionConfig, DirAccessMask, Directory, FileAccessMask,
    FileCreateArgs, FileDispositionInformation, FileFullDirectoryInformation, UncPath,
};

use crate::SmbArgs;

type Res<T> = Result<T, String>;

/// Runs one step under the per-step timeout, naming it in the error.
async fn step<T, E: std::fmt::Display>(
    args: &SmbArgs,
    what: &str,
    f: impl Future<Output = Result<T, E>>,
) -> Res<T> {
    step_for(args.step(), what, f).await
}

async fn step_for<T, E: std::fmt::Display>(
    limit: Duration,
    what: &str,
    f: impl Future<Output = Result<T, E>>,
) -> Res<T> {
    let _watch = crate::watchdog::arm(limit, what);
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => Err(format!("{what}: timed out after {}s", limit.as_secs())),
    }
}

fn config(args: &SmbArgs) -> Res<ClientConfig> {
    let encryption_mode = match args.encrypt.as_str() {
        "allowed" => EncryptionMode::Allowed,
        "required" => EncryptionMode::Required,
        "disabled" => EncryptionMode::Disabled,
        other => {
            return Err(format!(
                "--encrypt {other}: expected allowed|required|disabled"
            ));
        }
    };
    let transport = if args.tcp {
        TransportConfig::Tcp
    } else {
        let ca = args
            .ca
            .as_ref()
            .ok_or("--ca is required for QUIC (the smb crate has no way to skip verification)")?;
        // The crate silently skips an unreadable root and then fails with UnknownIssuer.
        std::fs::metadata(ca).map_err(|e| format!("--ca {}: {e}", ca.display()))?;
        TransportConfig::Quic(QuicConfig {
            local_address: None,
            cert_validation: QuicCertValidationOptions::CustomRootCerts(vec![
                ca.display().to_string(),
            ]),
        })
    };
    let (min_dialect, smb2_only) = if args.multi_protocol {
        (None, false)
    } else {
        (Some(smb::Dialect::Smb0311), true)
    };
    Ok(ClientConfig {
        dfs: false,
        connection: ConnectionConfig {
            port: Some(args.port),
            timeout: Some(args.step()),
            min_dialect,
            smb2_only_negotiate: smb2_only,
            encryption_mode,
            transport,
            compression_enabled: args.compress,
            ..Default::default()
        },
        ..Default::default()
    })
}

fn share_path(args: &SmbArgs) -> Res<UncPath> {
    UncPath::from_str(&format!(r"\\{}\{}", args.server, args.share))
        .map_err(|e| format!("UNC path: {e}"))
}

fn remote_path(p: &str) -> String {
    p.trim_start_matches(['/', '\\']).replace('/', "\\")
}

/// smb 0.12.1 sends the last SESSION_SETUP before installing the channel that verifies its
/// signed reply; a fast server answers first and the crate fails with this. A client race, so
/// the connection is simply retried (and said so on stderr).
/// The crate logs the reason ("no channel is set up") but returns only the phase. A real signing
/// bug fails every attempt, so the retries cannot hide one.
const SETUP_RACE: &str = "SignVerify";

async fn connect(args: &SmbArgs) -> Res<(Client, UncPath)> {
    let share = share_path(args)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let client = Client::new(config(args)?);
        let started = Instant::now();
        let r = step(
            args,
            "connect",
            client.share_connect(&share, &args.user, args.password.clone()),
        )
        .await;
        match r {
            Ok(()) => {
                let transport = if args.tcp { "tcp" } else { "quic" };
                eprintln!(
                    "connected over {transport} to {share} in {:.3}s",
                    started.elapsed().as_secs_f64()
                );
                return Ok((client, share));
            }
            Err(e) if e.contains(SETUP_RACE) && attempt < 5 => {
                eprintln!("session setup lost the smb crate's signing race; retrying ({e})");
            }
            Err(e) => return Err(e),
        }
    }
}

/// LOGOFF and close; the caller exits the process right after either way.
async fn finish(args: &SmbArgs, client: &Client) -> Res<()> {
    step(args, "close client", client.close()).await
}

async fn max_io(args: &SmbArgs, client: &Client, read: bool) -> Res<usize> {
    let conn = step(args, "connection", client.get_connection(&args.server)).await?;
    let info = conn
        .conn_info()
        .ok_or("connection has no negotiated state")?;
    let n = if read {
        info.negotiation.max_read_size
    } else {
        info.negotiation.max_write_size
    };
    // Bounded so a bogus negotiated size cannot make the tool allocate gigabytes per request.
    Ok((n as usize).clamp(4096, 8 << 20))
}

/// How long the directory stream may go quiet before the query is restarted. smb 0.12.1's
/// `QueryDirectoryStream` can lose a wakeup between batches (`notify_waiters` before the fetch
/// loop waits) and then stalls forever; it is a client bug, so the listing is simply retried.
const DIR_STALL: Duration = Duration::from_secs(2);

pub async fn ls(args: &SmbArgs, dir: &str) -> Res<()> {
    let (client, share) = connect(args).await?;
    let path = share.clone().with_path(&remote_path(dir));
    let mut attempt = 0;
    let entries = loop {
        attempt += 1;
        match list_once(args, &client, &path).await? {
            Some(entries) => break entries,
            None if attempt < 4 => eprintln!("directory stream stalled (smb crate); retrying"),
            None => return Err("query directory: stream stalled 4 times".into()),
        }
    };
    for e in &entries {
        let kind = if e.file_attributes.directory() {
            "D"
        } else {
            "F"
        };
        println!("{}\t{}\t{kind}", e.file_name, e.end_of_file);
    }
    finish(args, &client).await
}

/// One open/query/close of a directory; `None` when the crate's stream stalled.
async fn list_once(
    args: &SmbArgs,
    client: &Client,
    path: &UncPath,
) -> Res<Option<Vec<FileFullDirectoryInformation>>> {
    let access = DirAccessMask::new()
        .with_list_directory(true)
        .with_synchronize(true);
    let open = FileCreateArgs::make_open_existing(access.into());
    let res = step(args, "open directory", client.create_file(path, &open)).await?;
    let dir = Arc::new(
        res.as_dir()
            .is_some()
            .then(|| res.unwrap_dir())
            .ok_or("not a directory")?,
    );
    let mut entries = Vec::new();
    let stalled = {
        let mut stream = step(
            args,
            "query directory",
            Directory::query::<FileFullDirectoryInformation>(&dir, "*"),
        )
        .await?;
        loop {
            // Polling right after the fetch loop's last send is what loses the wakeup;
            // a short pause lets that loop reach its wait first.
            tokio::time::sleep(Duration::from_millis(20)).await;
            match tokio::time::timeout(DIR_STALL, stream.next()).await {
                Ok(Some(Ok(e))) => entries.push(e),
                Ok(Some(Err(e))) => return Err(format!("query directory: {e}")),
                Ok(None) => break false,
                Err(_) => break true,
            }
        }
    };
    step(args, "close directory", dir.close()).await?;
    Ok((!stalled).then_some(entries))
}

fn report(verb: &str, bytes: u64, started: Instant, sha: &str) {
    let secs = started.elapsed().as_secs_f64();
    let mib = bytes as f64 / (1024.0 * 1024.0);
    println!(
        "{verb} bytes={bytes} secs={secs:.3} mib_per_s={:.1} sha256={sha}",
        mib / secs.max(1e-9)
    );
}

fn sha256_file(path: &Path) -> Res<String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

fn chunks(len: u64, chunk: usize) -> impl Iterator<Item = (u64, usize)> {
    let chunk = chunk as u64;
    (0..len.div_ceil(chunk)).map(move |i| {
        let off = i * chunk;
        (off, (len - off).min(chunk) as usize)
    })
}

pub async fn put(args: &SmbArgs, local: &Path, remote: &str) -> Res<()> {
    let src = std::fs::File::open(local).map_err(|e| format!("{}: {e}", local.display()))?;
    let len = src
        .metadata()
        .map_err(|e| format!("{}: {e}", local.display()))?
        .len();
    let (client, share) = connect(args).await?;
    let chunk = max_io(args, &client, false).await?;
    let open = FileCreateArgs::make_overwrite(Default::default(), Default::default());
    let res = step(
        args,
        "create remote file",
        client.create_file(&share.clone().with_path(&remote_path(remote)), &open),
    )
    .await?;
    let file = res
        .as_file()
        .is_some()
        .then(|| res.unwrap_file())
        .ok_or("not a file")?;
    let started = Instant::now();
    let file = &file;
    let src = &src;
    stream::iter(chunks(len, chunk))
        .map(|(off, n)| async move {
            let mut buf = vec![0u8; n];
            src.read_exact_at(&mut buf, off)
                .map_err(|e| format!("read {}: {e}", local.display()))?;
            let buf: Arc<[u8]> = buf.into();
            let mut done = 0usize;
            while done < n {
                let piece: Arc<[u8]> = buf[done..].into();
                let w = step(
                    args,
                    &format!("write at {}", off + done as u64),
                    file.write_block_zc(piece, off + done as u64, None),
                )
                .await?;
                if w == 0 {
                    return Err(format!(
                        "write at {}: server wrote 0 bytes",
                        off + done as u64
                    ));
                }
                done += w;
            }
            Ok::<(), String>(())
        })
        .buffer_unordered(args.depth.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    step(args, "flush", file.flush()).await?;
    step(args, "close file", file.close()).await?;
    let sha = sha256_file(local)?;
    report("put", len, started, &sha);
    finish(args, &client).await
}

pub async fn get(args: &SmbArgs, remote: &str, local: &Path) -> Res<()> {
    let (client, share) = connect(args).await?;
    let chunk = max_io(args, &client, true).await?;
    let open = FileCreateArgs::make_open_existing(FileAccessMask::new().with_generic_read(true));
    let res = step(
        args,
        "open remote file",
        client.create_file(&share.clone().with_path(&remote_path(remote)), &open),
    )
    .await?;
    let file = res
        .as_file()
        .is_some()
        .then(|| res.unwrap_file())
        .ok_or("not a file")?;
    let len = step(args, "file size", smb::GetLen::get_len(&file)).await?;
    let dst = std::fs::File::create(local).map_err(|e| format!("{}: {e}", local.display()))?;
    dst.set_len(len)
        .map_err(|e| format!("{}: {e}", local.display()))?;
    let started = Instant::now();
    let file = &file;
    let dst = &dst;
    stream::iter(chunks(len, chunk))
        .map(|(off, n)| async move {
            let mut buf = vec![0u8; n];
            let mut done = 0usize;
            while done < n {
                let at = off + done as u64;
                let r = step(
                    args,
                    &format!("read at {at}"),
                    file.read_block(&mut buf[done..], at, None, false),
                )
                .await?;
                if r == 0 {
                    return Err(format!("read at {at}: unexpected end of file"));
                }
                done += r;
            }
            dst.write_all_at(&buf, off)
                .map_err(|e| format!("write {}: {e}", local.display()))
        })
        .buffer_unordered(args.depth.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    step(args, "close file", file.close()).await?;
    dst.sync_all()
        .map_err(|e| format!("{}: {e}", local.display()))?;
    let sha = sha256_file(local)?;
    report("get", len, started, &sha);
    finish(args, &client).await
}

pub async fn rm(args: &SmbArgs, remote: &str) -> Res<()> {
    let (client, share) = connect(args).await?;
    let open = FileCreateArgs::make_open_existing(
        FileAccessMask::new()
            .with_delete(true)
            .with_file_read_attributes(true),
    );
    let res = step(
        args,
        "open for delete",
        client.create_file(&share.clone().with_path(&remote_path(remote)), &open),
    )
    .await?;
    let handle: &smb::ResourceHandle = match &res {
        smb::Resource::File(f) => f,
        smb::Resource::Directory(d) => d,
        smb::Resource::Pipe(_) => return Err(format!("{remote}: is a pipe")),
    };
    step(
        args,
        "set delete-on-close",
        handle.set_info(FileDispositionInformation {
            delete_pending: true.into(),
        }),
    )
    .await?;
    step(args, "close", handle.close()).await?;
    println!("removed {remote}");
    finish(args, &client).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_file_exactly() {
        let c: Vec<_> = chunks(10, 4).collect();
        assert_eq!(c, vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(chunks(0, 4).count(), 0);
        assert_eq!(chunks(8, 4).collect::<Vec<_>>(), vec![(0, 4), (4, 4)]);
    }

    #[test]
    fn remote_paths_use_backslashes_relative_to_the_share() {
        assert_eq!(remote_path("/a/b.txt"), r"a\b.txt");
        assert_eq!(remote_path(""), "");
    }
}
