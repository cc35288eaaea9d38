//! The account database: one `NAME:NTHASH` line per user (NT hash = MD4 of the UTF-16LE
//! password, MS-NLMP 3.3.1), or `NAME:NTHASH:UNIXUSER` for an account that acts on disk as
//! another Unix user than its own name (`unix_identity = "per-user"`), kept with mode 0600 and replaced atomically; and the live view a
//! running server logs on against, which follows changes to the file (issue 15).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use smbq_auth::Accounts;

use crate::file_stamp::{Stamp, stamp};

/// How stale a running server's known accounts may be: `smbq user del`, or a new password,
/// counts for logons this much after it (a new account counts at once, see `LiveAccounts`).
pub const ACCOUNTS_POLL: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Default)]
pub struct AccountFile {
    path: PathBuf,
    /// Lower-cased name -> (name as given, NT hash, Unix user if not the same name).
    users: BTreeMap<String, (String, [u8; 16], Option<String>)>,
}

impl AccountFile {
    /// Loads `path`; a missing file is an empty database.
    pub fn load(path: &Path) -> io::Result<Self> {
        let mut db = Self {
            path: path.to_path_buf(),
            users: BTreeMap::new(),
        };
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(db),
            Err(e) => return Err(e),
        };
        if let Ok(meta) = fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path = %path.display(), "account file is readable by others; run chmod 600");
        }
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}:{}: expected NAME:NTHASH[:UNIXUSER]",
                        path.display(),
                        n + 1
                    ),
                )
            };
            let mut parts = line.splitn(3, ':');
            let (name, hash) = (parts.next().ok_or_else(bad)?, parts.next().ok_or_else(bad)?);
            let unix = parts.next().filter(|u| !u.is_empty()).map(str::to_string);
            let bytes = hex::decode(hash).map_err(|_| bad())?;
            let hash: [u8; 16] = bytes.try_into().map_err(|_| bad())?;
            if name.is_empty() {
                return Err(bad());
            }
            db.users
                .insert(name.to_lowercase(), (name.to_string(), hash, unix));
        }
        Ok(db)
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.users.values().map(|(n, ..)| n.as_str())
    }

    pub fn set_password(&mut self, name: &str, password: &str) -> io::Result<()> {
        if name.is_empty() || name.contains([':', '\n', '\\', '/', '@']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "user names may not be empty or contain : \\ / @ or newlines",
            ));
        }
        let unix = self
            .users
            .remove(&name.to_lowercase())
            .and_then(|(.., u)| u);
        self.users.insert(
            name.to_lowercase(),
            (name.to_string(), smbq_auth::nt_hash(password), unix),
        );
        Ok(())
    }

    /// Maps an existing account to a Unix user (`None`: the user of the same name).
    pub fn set_unix_user(&mut self, name: &str, unix: Option<&str>) -> io::Result<()> {
        if unix.is_some_and(|u| u.is_empty() || u.contains([':', '\n', '/'])) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a Unix user name may not be empty or contain : / or newlines",
            ));
        }
        let entry = self
            .users
            .get_mut(&name.to_lowercase())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no user {name}")))?;
        entry.2 = unix.filter(|u| *u != entry.0).map(str::to_string);
        Ok(())
    }

    /// The Unix user an account acts as on a per-user share: its own name unless mapped.
    pub fn unix_user(&self, name: &str) -> Option<String> {
        self.users
            .get(&name.to_lowercase())
            .map(|(n, _, u)| u.clone().unwrap_or_else(|| n.clone()))
    }

    /// Returns whether the user existed.
    pub fn remove(&mut self, name: &str) -> bool {
        self.users.remove(&name.to_lowercase()).is_some()
    }

    /// Writes to a 0600 temporary file in the same directory, then renames over the old file.
    pub fn save(&self) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let tmp = self.path.with_extension("tmp");
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        writeln!(
            f,
            "# smbq accounts: NAME:NT-HASH[:UNIX-USER] (MD4 of the UTF-16LE password). Manage with `smbq user`."
        )?;
        for (name, hash, unix) in self.users.values() {
            match unix {
                Some(u) => writeln!(f, "{name}:{}:{u}", hex::encode(hash))?,
                None => writeln!(f, "{name}:{}", hex::encode(hash))?,
            }
        }
        f.sync_all()?;
        give_to_dir_owner(&f, self.path.parent())?;
        fs::rename(&tmp, &self.path)
    }
}

/// Root editing the accounts of a server that runs as its own user (the Debian package's
/// `smbq`, owner of /var/lib/smbq): the file goes to the directory's owner, or that server
/// could no longer read it. Nobody else can give files away, and nothing changes for them.
fn give_to_dir_owner(f: &fs::File, dir: Option<&Path>) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let dir = dir
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let meta = fs::metadata(dir)?;
    if meta.uid() == 0 {
        return Ok(());
    }
    let owner = rustix::fs::Uid::from_raw(meta.uid());
    let group = rustix::fs::Gid::from_raw(meta.gid());
    rustix::fs::fchown(f, Some(owner), Some(group)).map_err(io::Error::from)
}

impl Accounts for AccountFile {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.users.get(&user.to_lowercase()).map(|(_, h, _)| *h)
    }
}

/// The accounts of a running server. A logon looks at the file's stamp (one `stat`) at most
/// once per [`ACCOUNTS_POLL`], and whenever it asks for a name not known (an account may just
/// have been added: `smbq user add bob && smbclient -U bob` must not depend on whether some
/// other logon came within the last second), and re-reads the file when the stamp changed.
/// So a new account counts at once and a removed one or a new password within a second,
/// without a signal or a timer task; SIGHUP forces a re-read ([`LiveAccounts::reload`]). A
/// file that cannot be read or parsed keeps the accounts in use: a half-edited file must not
/// lock everyone out. Sessions already set up are not touched.
#[derive(Debug)]
pub struct LiveAccounts {
    path: PathBuf,
    current: RwLock<AccountFile>,
    checked: Mutex<Checked>,
}

#[derive(Debug)]
struct Checked {
    at: Instant,
    /// The stamp of the file last read (or last found unreadable, so a broken file is
    /// reported once, not at every logon).
    stamp: Stamp,
}

/// What a reload did, for the log line.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    Unchanged,
    Loaded { users: usize },
    Kept { error: String, users: usize },
}

impl LiveAccounts {
    /// Loads `path` (missing = no accounts), failing on a file that does not parse: at start
    /// there are no older accounts to fall back on.
    pub fn load(path: &Path) -> io::Result<Self> {
        // Stamped before reading: a change racing the read then shows as a new stamp.
        let stamp = stamp(path);
        let file = AccountFile::load(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            current: RwLock::new(file),
            checked: Mutex::new(Checked {
                at: Instant::now(),
                stamp,
            }),
        })
    }

    fn len(&self) -> usize {
        self.read().len()
    }

    /// Some account name, for the example command printed at start.
    pub fn first_name(&self) -> Option<String> {
        self.read().names().next().map(str::to_string)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, AccountFile> {
        // A panic elsewhere while holding the lock leaves a complete AccountFile behind
        // (it is only ever replaced whole), so the poison flag carries no meaning here.
        self.current.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Re-reads the file if its stamp changed since the last read, or always with `force`.
    pub fn reload(&self, force: bool) -> Reload {
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        self.reload_locked(&mut checked, force)
    }

    fn reload_locked(&self, checked: &mut Checked, force: bool) -> Reload {
        checked.at = Instant::now();
        let now = stamp(&self.path);
        if !force && now == checked.stamp {
            return Reload::Unchanged;
        }
        checked.stamp = now;
        // smbq writes a header line even with no accounts, so an empty file is one being
        // written in place (truncated, not yet filled): it must not log everyone out.
        if now.is_some_and(|(_, len, _)| len == 0) {
            return Reload::Kept {
                error: "the file is empty".into(),
                users: self.len(),
            };
        }
        match AccountFile::load(&self.path) {
            Ok(file) => {
                let users = file.len();
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = file;
                Reload::Loaded { users }
            }
            Err(e) => Reload::Kept {
                error: e.to_string(),
                users: self.len(),
            },
        }
    }

    /// The check a logon makes. A routine one is skipped within [`ACCOUNTS_POLL`] of the
    /// last and while another logon is checking (that one's result serves both); one for an
    /// unknown name waits for a check in progress, which may be reading that very name, and
    /// costs a `stat` at most: only a changed stamp reads the file.
    fn refresh(&self, unknown_name: bool) {
        let asked = Instant::now();
        let mut checked = if unknown_name {
            let c = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
            // Logons that queued behind one check are served by it: a flood of unknown names
            // costs one `stat` per check in progress, not one per logon.
            if c.at >= asked {
                return;
            }
            c
        } else {
            match self.checked.try_lock() {
                Ok(c) if c.at.elapsed() >= ACCOUNTS_POLL => c,
                _ => return,
            }
        };
        let r = self.reload_locked(&mut checked, false);
        drop(checked);
        self.log(&r, "account file changed");
    }

    pub fn log(&self, r: &Reload, why: &str) {
        let path = self.path.display();
        match r {
            Reload::Unchanged => {}
            Reload::Loaded { users: 0 } => {
                tracing::warn!(reason = why, path = %path, "accounts reloaded: none left, every logon fails");
            }
            Reload::Loaded { users } => {
                tracing::info!(reason = why, path = %path, users, "accounts reloaded");
            }
            Reload::Kept { error, users } => tracing::warn!(
                reason = why,
                path = %path,
                error = %error,
                users,
                "account file not reloaded; keeping the accounts in use"
            ),
        }
    }
}

impl LiveAccounts {
    /// The Unix user an account acts as on per-user shares (crate::unix_users).
    pub fn unix_user(&self, name: &str) -> Option<String> {
        self.refresh(false);
        self.read().unix_user(name)
    }
}

impl Accounts for LiveAccounts {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.refresh(false);
        if let Some(hash) = self.read().nt_hash(user) {
            return Some(hash);
        }
        self.refresh(true);
        self.read().nt_hash(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_round_trip_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users");
        let mut db = AccountFile::load(&p).unwrap();
        assert!(db.is_empty());
        db.set_password("Alice", "Password").unwrap();
        db.save().unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let db = AccountFile::load(&p).unwrap();
        // MS-NLMP 4.2.1: NTOWFv1("Password") = a4f49c406510bdcab6824ee7c30fd852
        assert_eq!(
            hex::encode(db.nt_hash("alice").unwrap()),
            "a4f49c406510bdcab6824ee7c30fd852"
        );
        assert!(!fs::read_to_string(&p).unwrap().contains("Password"));
    }

    #[test]
    fn rejects_bad_names_and_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users");
        let mut db = AccountFile::load(&p).unwrap();
        assert!(db.set_password("a:b", "x").is_err());
        fs::write(&p, "bob:zz\n").unwrap();
        assert!(AccountFile::load(&p).is_err());
    }

    fn save_users(p: &Path, users: &[(&str, &str)]) {
        let mut db = AccountFile::load(p).unwrap();
        for (u, pw) in users {
            db.set_password(u, pw).unwrap();
        }
        db.save().unwrap();
    }

    /// Lets the next lookup check the file without waiting ACCOUNTS_POLL.
    fn age(live: &LiveAccounts) {
        let mut c = live.checked.lock().unwrap();
        c.at = Instant::now().checked_sub(ACCOUNTS_POLL * 2).unwrap();
    }

    #[test]
    fn live_accounts_follow_the_file_at_the_next_lookup() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users");
        save_users(&p, &[("bob", "pw")]);
        let live = LiveAccounts::load(&p).unwrap();
        assert!(live.nt_hash("alice").is_none());

        // A name not known makes the lookup check the file at once.
        save_users(&p, &[("alice", "pw")]);
        assert_eq!(live.nt_hash("ALICE"), Some(smbq_auth::nt_hash("pw")));

        // A known one within ACCOUNTS_POLL of the last check: the file is not looked at.
        save_users(&p, &[("alice", "new")]);
        assert_eq!(live.nt_hash("alice"), Some(smbq_auth::nt_hash("pw")));
        age(&live);
        assert_eq!(live.nt_hash("alice"), Some(smbq_auth::nt_hash("new")));

        let mut db = AccountFile::load(&p).unwrap();
        assert!(db.remove("alice"));
        db.save().unwrap();
        age(&live);
        assert!(live.nt_hash("alice").is_none());
        assert!(live.nt_hash("bob").is_some());
    }

    #[test]
    fn a_broken_or_empty_file_keeps_the_accounts_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("users");
        save_users(&p, &[("bob", "pw")]);
        let live = LiveAccounts::load(&p).unwrap();

        fs::write(&p, "bob:not-a-hash\n").unwrap();
        assert!(matches!(live.reload(false), Reload::Kept { users: 1, .. }));
        assert!(live.nt_hash("bob").is_some());
        // Reported once: the same broken file is not re-read at every check.
        assert_eq!(live.reload(false), Reload::Unchanged);

        fs::write(&p, "").unwrap();
        assert!(matches!(live.reload(false), Reload::Kept { users: 1, .. }));
        assert!(live.nt_hash("bob").is_some());

        save_users(&p, &[("carol", "pw")]);
        assert_eq!(live.reload(false), Reload::Loaded { users: 1 });
        assert!(live.nt_hash("carol").is_some());
        assert!(live.nt_hash("bob").is_none());
        // SIGHUP re-reads an unchanged file too.
        assert_eq!(live.reload(true), Reload::Loaded { users: 1 });
    }
}
