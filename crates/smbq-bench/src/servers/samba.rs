//! A private Samba smbd (Debian's samba package) for the smbq-versus-Samba comparison, set up
//! the way tests/interop/samba_server.py does: its own smb.conf, every directory Samba writes
//! inside the scratch directory, a tdbsam passdb, a dedicated Unix account owning the share,
//! `server smb encrypt = required`. The system configuration is never touched.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::process::Signal;

use super::{log_tail, wait_tcp};
use crate::net::Net;
use crate::sys;

pub const SMBD: &str = "/usr/sbin/smbd";
const PDBEDIT: &str = "pdbedit";
/// The Unix and Samba account the share belongs to.
pub const USER: &str = "smbqbench";

pub struct Samba {
    child: Child,
    pub addr: SocketAddr,
    conf: PathBuf,
    log: PathBuf,
    pub user: String,
    pub password: String,
}

/// uid and gid of `name`, creating a locked system account when it is missing.
pub fn ensure_unix_user(name: &str) -> Result<(u32, u32), String> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, name]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if let (Some(u), Some(g)) = (id("-u"), id("-g")) {
        return Ok((u, g));
    }
    let nologin = if Path::new("/usr/sbin/nologin").exists() {
        "/usr/sbin/nologin"
    } else {
        "/bin/false"
    };
    let out = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--user-group",
            "--shell",
            nologin,
            name,
        ])
        .output()
        .map_err(|e| format!("useradd: {e}"))?;
    match (id("-u"), id("-g")) {
        (Some(u), Some(g)) => Ok((u, g)),
        _ => Err(format!(
            "useradd {name} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

pub fn available() -> bool {
    Path::new(SMBD).exists()
}

pub fn version() -> Option<String> {
    sys::command_line_output(SMBD, &["--version"])
}

impl Samba {
    /// Starts smbd on side B exporting `share` (which must belong to [`USER`]) as "share".
    pub fn start(
        net: &Net,
        work: &Path,
        share: &Path,
        port: u16,
        password: &str,
    ) -> Result<Self, String> {
        if !available() {
            return Err("smbd not found: install Debian's samba package".into());
        }
        let base = work.join("samba");
        let dirs = [
            "lock",
            "state",
            "cache",
            "pid",
            "private",
            "ncalrpc",
            "binddns",
            "log",
            "usershares",
        ];
        for d in dirs {
            let p = base.join(d);
            std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let mode = if d == "private" || d == "binddns" {
                0o700
            } else {
                0o755
            };
            rustix::fs::chmod(&p, rustix::fs::Mode::from_raw_mode(mode))
                .map_err(|e| format!("{}: {e}", p.display()))?;
        }
        let ip = net.server_ip();
        let d = |n: &str| base.join(n).display().to_string();
        let global = [
            "server role = standalone server".to_string(),
            "workgroup = SMBQBENCH".into(),
            "netbios name = SMBQSAMBA".into(),
            format!("smb ports = {port}"),
            format!("interfaces = {ip}"),
            "bind interfaces only = yes".into(),
            "disable netbios = yes".into(),
            "server min protocol = SMB2_02".into(),
            "server smb encrypt = required".into(),
            format!(
                "passdb backend = tdbsam:{}",
                base.join("private/passdb.tdb").display()
            ),
            format!("lock directory = {}", d("lock")),
            format!("state directory = {}", d("state")),
            format!("cache directory = {}", d("cache")),
            format!("pid directory = {}", d("pid")),
            format!("private dir = {}", d("private")),
            format!("ncalrpc dir = {}", d("ncalrpc")),
            format!("binddns dir = {}", d("binddns")),
            format!("usershare path = {}", d("usershares")),
            format!(
                "smb passwd file = {}",
                base.join("private/smbpasswd").display()
            ),
            format!("log file = {}", base.join("log/log.%m").display()),
            "max log size = 0".into(),
            "log level = 0".into(),
            "map to guest = never".into(),
            "load printers = no".into(),
            "printing = bsd".into(),
            "printcap name = /dev/null".into(),
            "disable spoolss = yes".into(),
            "unix password sync = no".into(),
            "obey pam restrictions = no".into(),
        ];
        let mut conf_text = String::from("[global]\n");
        for l in &global {
            conf_text.push_str(&format!("\t{l}\n"));
        }
        conf_text.push_str(&format!(
            "\n[share]\n\tpath = {}\n\tread only = no\n\tvalid users = {USER}\n",
            share.display()
        ));
        let conf = base.join("smb.conf");
        std::fs::write(&conf, conf_text).map_err(|e| e.to_string())?;

        // pdbedit -t reads the new password twice from stdin.
        let mut p = Command::new(PDBEDIT)
            .arg("-s")
            .arg(&conf)
            .args(["-a", "-t", "-u", USER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("pdbedit: {e}"))?;
        if let Some(mut stdin) = p.stdin.take() {
            let _ = write!(stdin, "{password}\n{password}\n");
        }
        let out = p.wait_with_output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!(
                "pdbedit -a {USER} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }

        let log = base.join("smbd.out");
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let log_err = log_file.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = net.command_b(SMBD);
        cmd.arg("-s")
            .arg(&conf)
            .args(["--foreground", "--no-process-group", "--debug-stdout"])
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        // Its own process group, so stopping it reaches every smbd it forks.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().map_err(|e| format!("smbd: {e}"))?;
        let addr = SocketAddr::new(ip, port);
        if let Err(e) = wait_tcp(net, addr, &mut child, Duration::from_secs(30)) {
            let tail = log_tail(&log, 20);
            let mut s = Self {
                child,
                addr,
                conf,
                log,
                user: USER.into(),
                password: password.into(),
            };
            s.kill();
            return Err(format!("smbd {e}:\n{tail}"));
        }
        Ok(Self {
            child,
            addr,
            conf,
            log,
            user: USER.into(),
            password: password.into(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// smbd and every process it forked (one smbd per connection does the work).
    pub fn cpu(&self) -> f64 {
        sys::tree_cpu(self.pid())
    }

    pub fn rss_kib(&self) -> (u64, u64) {
        sys::tree_rss_kib(self.pid())
    }

    pub fn log_tail(&self) -> String {
        log_tail(&self.log, 20)
    }

    fn kill(&mut self) {
        sys::stop_child(&mut self.child, Duration::from_secs(10), true);
        // samba-dcerpcd and rpcd_* make themselves session leaders; they carry our config
        // path on their command line.
        let needle = self.conf.display().to_string();
        for sig in [Signal::TERM, Signal::KILL] {
            let left = sys::processes_with_arg(&needle);
            if left.is_empty() {
                return;
            }
            for pid in left {
                sys::signal(pid, sig, false);
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    pub fn stop(self) {
        // Drop does the work.
    }
}

impl Drop for Samba {
    /// Stops smbd and its children on every path (after `stop` only the scan remains).
    fn drop(&mut self) {
        self.kill();
    }
}
