//! OpenSSH's sshd on side B and scp from side A: the baseline of the loss/delay study (Debian
//! openssh-server and openssh-client). Host and client keys are generated into the scratch
//! directory; the daemon runs with a private config and never touches the system's.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{log_tail, wait_tcp};
use crate::net::Net;
use crate::sys;

pub const SSHD: &str = "/usr/sbin/sshd";
/// AES-128-GCM, the cipher smbq's TLS and SMB3 encryption use, so the comparison is one of
/// protocols, not ciphers.
pub const CIPHER: &str = "aes128-gcm@openssh.com";

pub struct Sshd {
    child: Child,
    pub addr: SocketAddr,
    client_key: PathBuf,
    log: PathBuf,
}

pub fn available() -> bool {
    Path::new(SSHD).exists() && which("scp") && which("ssh-keygen")
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).exists()))
}

pub fn version() -> Option<String> {
    sys::command_line_output("ssh", &["-V"])
}

fn keygen(path: &Path) -> Result<(), String> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "smbq-bench", "-f"])
        .arg(path)
        .output()
        .map_err(|e| format!("ssh-keygen: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ssh-keygen failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Sshd {
    pub fn start(net: &Net, work: &Path, port: u16) -> Result<Self, String> {
        if !available() {
            return Err("sshd/scp not found: install openssh-server and openssh-client".into());
        }
        let dir = work.join("ssh");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let host_key = dir.join("host_ed25519");
        let client_key = dir.join("client_ed25519");
        for k in [&host_key, &client_key] {
            if !k.exists() {
                keygen(k)?;
            }
        }
        let authorized = dir.join("authorized_keys");
        std::fs::copy(client_key.with_extension("pub"), &authorized).map_err(|e| e.to_string())?;
        // sshd refuses to start without its privilege-separation directory.
        std::fs::create_dir_all("/run/sshd").map_err(|e| format!("/run/sshd: {e}"))?;
        let ip = net.server_ip();
        let config = dir.join("sshd_config");
        let text = format!(
            "Port {port}\nListenAddress {ip}\nHostKey {}\nPermitRootLogin prohibit-password\n\
             AuthorizedKeysFile {}\nStrictModes no\nPidFile {}\nUsePAM no\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             Subsystem sftp internal-sftp\nLogLevel ERROR\n",
            host_key.display(),
            authorized.display(),
            dir.join("sshd.pid").display()
        );
        std::fs::write(&config, text).map_err(|e| e.to_string())?;
        let log = dir.join("sshd.log");
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let mut cmd = net.command_b(SSHD);
        cmd.args(["-D", "-e", "-f"])
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file);
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| format!("sshd: {e}"))?;
        let addr = SocketAddr::new(ip, port);
        if let Err(e) = wait_tcp(net, addr, &mut child, Duration::from_secs(20)) {
            sys::stop_child(&mut child, Duration::from_secs(2), true);
            return Err(format!("sshd {e}:\n{}", log_tail(&log, 20)));
        }
        Ok(Self {
            child,
            addr,
            client_key,
            log,
        })
    }

    /// Copies `remote` paths (absolute, on side B, no spaces) into `dest` with one scp run
    /// from side A over one SSH connection, files in turn as scp does; returns the wall time
    /// including the SSH handshake. The paths go in one remote argument: legacy scp opens a
    /// connection per source argument, but passes one argument's words to a single remote
    /// `scp -f`.
    pub fn scp_download(
        &self,
        net: &Net,
        remote: &[String],
        dest: &Path,
        limit: Duration,
    ) -> Result<Option<Duration>, String> {
        let mut cmd = net.command_a("scp");
        // -O: the classic SCP protocol the paper measured, not SFTP.
        cmd.args(["-O", "-q", "-B", "-F", "/dev/null"])
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args(["-o", "LogLevel=ERROR", "-c", CIPHER, "-i"])
            .arg(&self.client_key)
            .args(["-P", &self.addr.port().to_string()]);
        cmd.arg(format!("root@{}:{}", self.addr.ip(), remote.join(" ")));
        cmd.arg(dest)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let start = Instant::now();
        let mut child = cmd.spawn().map_err(|e| format!("scp: {e}"))?;
        // scp's stderr is a few lines at most; it is read after exit.
        let status = loop {
            if let Some(status) = child.try_wait().map_err(|e| format!("scp: {e}"))? {
                break status;
            }
            if start.elapsed() >= limit {
                sys::stop_child(&mut child, Duration::from_secs(2), false);
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let took = start.elapsed();
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut err);
            }
            return Err(format!(
                "scp failed ({status}): {}\nsshd log:\n{}",
                err.trim(),
                log_tail(&self.log, 10)
            ));
        }
        Ok(Some(took))
    }

    pub fn stop(self) {
        // Drop does the work.
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        sys::stop_child(&mut self.child, Duration::from_secs(5), true);
    }
}
