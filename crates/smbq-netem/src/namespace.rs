//! Network namespaces made with iproute2: creation, removal, sweeping the ones a crashed run
//! left behind, and running a command or code inside one.

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// Where `ip netns add` bind-mounts the namespaces it names.
const NETNS_DIR: &str = "/run/netns";

/// Prefix of every namespace this crate creates; the pid follows, so a sweep can tell which
/// ones belong to dead processes.
pub(crate) const PREFIX: &str = "smbq-netem-";

/// Runs `program` inside namespace `ns` (`ip netns exec NS program`); add its arguments to the
/// returned command. For the benchmark driver, to start a server or client on one side.
pub fn command_in(ns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]);
    cmd
}

/// Runs `f` on a fresh thread that has entered namespace `ns`, and returns its result. Sockets
/// created in `f` belong to `ns` for their whole life, wherever they are used afterwards: a
/// listener or a connected socket made here can be handed to tokio (`from_std`) and driven from
/// any thread. Blocks the caller until `f` returns, so keep `f` short (bind, connect).
pub fn in_namespace<T, F>(ns: &str, f: F) -> io::Result<T>
where
    T: Send,
    F: FnOnce() -> io::Result<T> + Send,
{
    let handle = std::fs::File::open(netns_path(ns)?)?;
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                // setns(2) with CLONE_NEWNET moves only the calling thread, which is why this
                // runs on a thread of its own that ends with `f`.
                move_into_link_name_space(handle.as_fd(), Some(LinkNameSpaceType::Network))?;
                f()
            })
            .join()
            .map_err(|_| io::Error::other("namespace worker panicked"))?
    })
}

fn netns_path(ns: &str) -> io::Result<PathBuf> {
    // A name is one path component under /run/netns; anything else could escape it.
    let plain =
        !ns.is_empty() && ns != "." && ns != ".." && !ns.contains('/') && !ns.contains('\0');
    if !plain {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad namespace name",
        ));
    }
    Ok(Path::new(NETNS_DIR).join(ns))
}

/// Runs `ip ARGS`, turning a non-zero exit into an error carrying its stderr.
pub(crate) async fn ip(args: &[&str]) -> io::Result<()> {
    let out = tokio::process::Command::new("ip")
        .args(args)
        .output()
        .await?;
    check(args, &out)
}

fn ip_blocking(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    check(args, &out)
}

fn check(args: &[&str], out: &std::process::Output) -> io::Result<()> {
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "`ip {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

/// A namespace this process created; deleted on drop.
#[derive(Debug)]
pub(crate) struct Namespace {
    name: String,
    armed: bool,
}

impl Namespace {
    /// Creates namespace `name`, deleting a leftover of the same name first (a pid reused
    /// after a crash would otherwise make `ip netns add` fail).
    pub(crate) async fn create(name: String) -> io::Result<Self> {
        if netns_path(&name)?.exists() {
            let _ = ip(&["netns", "del", &name]).await;
        }
        ip(&["netns", "add", &name]).await?;
        Ok(Self { name, armed: true })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) async fn delete(mut self) -> io::Result<()> {
        self.armed = false;
        ip(&["netns", "del", &self.name]).await
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        if self.armed
            && let Err(e) = ip_blocking(&["netns", "del", &self.name])
        {
            tracing::warn!(ns = %self.name, error = %e, "could not delete namespace");
        }
    }
}

/// Deletes the namespaces of earlier runs whose process is gone (killed before it could clean
/// up). Namespaces of live processes, other test binaries running now, are left alone.
pub(crate) async fn sweep_stale() {
    let Ok(entries) = std::fs::read_dir(NETNS_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            tracing::info!(ns = %name, "deleting namespace left by a dead run");
            let _ = ip(&["netns", "del", &name]).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_names_cannot_escape_the_netns_dir() {
        for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert!(netns_path(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            netns_path("smbq-netem-1-0-a").unwrap(),
            Path::new("/run/netns/smbq-netem-1-0-a")
        );
    }

    #[test]
    fn command_in_wraps_with_ip_netns_exec() {
        let mut cmd = command_in("ns1", "true");
        cmd.arg("x");
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(cmd.get_program(), "ip");
        assert_eq!(args, ["netns", "exec", "ns1", "true", "x"]);
    }
}
