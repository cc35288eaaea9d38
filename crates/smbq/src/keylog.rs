//! TLS key logging in the NSS key-log format, so a packet capture of SMB over QUIC can be
//! decrypted (`tshark -o tls.keylog_file:FILE`). Server-side secrets decrypt the whole
//! connection; Windows and smb-rs clients write none (shared/reference/smb-over-quic.md §8).

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Appends `LABEL <client_random hex> <secret hex>` lines to a file created with mode 0600.
pub struct KeyLogFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl KeyLogFile {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }
}

/// One NSS key-log line (https://nss-crypto.org/reference/security/nss/legacy/key_log_format/).
pub fn format_line(label: &str, client_random: &[u8], secret: &[u8]) -> String {
    let mut line =
        String::with_capacity(label.len() + 2 + 2 * (client_random.len() + secret.len()) + 1);
    line.push_str(label);
    line.push(' ');
    for b in client_random {
        let _ = write!(line, "{b:02x}");
    }
    line.push(' ');
    for b in secret {
        let _ = write!(line, "{b:02x}");
    }
    line.push('\n');
    line
}

impl std::fmt::Debug for KeyLogFile {
    // Never print secrets, only where they go.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyLogFile")
            .field("path", &self.path)
            .finish()
    }
}

impl rustls::KeyLog for KeyLogFile {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let line = format_line(label, client_random, secret);
        // One write per line under the lock keeps lines whole; a failed write loses only
        // debugging data, so it is reported once per failure and otherwise ignored.
        if let Ok(mut f) = self.file.lock()
            && let Err(e) = f.write_all(line.as_bytes())
        {
            tracing::warn!(path = %self.path.display(), error = %e, "writing the TLS key log failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::KeyLog;

    #[test]
    fn appends_nss_lines_to_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keys.log");
        std::fs::write(&p, "EXISTING line\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        let k = KeyLogFile::open(&p).unwrap();
        k.log(
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            &[0x01, 0xab],
            &[0xff, 0x00, 0x10],
        );
        k.log("SERVER_TRAFFIC_SECRET_0", &[0x02], &[0x03]);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text,
            "EXISTING line\nCLIENT_HANDSHAKE_TRAFFIC_SECRET 01ab ff0010\nSERVER_TRAFFIC_SECRET_0 02 03\n"
        );
        let fresh = dir.path().join("new.log");
        KeyLogFile::open(&fresh).unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(!format!("{k:?}").contains("ff0010"));
    }
}
