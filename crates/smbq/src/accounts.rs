//! The account database: one `NAME:NTHASH` line per user (NT hash = MD4 of the UTF-16LE
//! password, MS-NLMP 3.3.1), kept with mode 0600 and replaced atomically.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use smbq_auth::Accounts;

#[derive(Debug, Clone, Default)]
pub struct AccountFile {
    path: PathBuf,
    /// Lower-cased name -> (name as given, NT hash).
    users: BTreeMap<String, (String, [u8; 16])>,
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
                    format!("{}:{}: expected NAME:NTHASH", path.display(), n + 1),
                )
            };
            let (name, hash) = line.rsplit_once(':').ok_or_else(bad)?;
            let bytes = hex::decode(hash).map_err(|_| bad())?;
            let hash: [u8; 16] = bytes.try_into().map_err(|_| bad())?;
            if name.is_empty() {
                return Err(bad());
            }
            db.users
                .insert(name.to_lowercase(), (name.to_string(), hash));
        }
        Ok(db)
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.users.values().map(|(n, _)| n.as_str())
    }

    pub fn set_password(&mut self, name: &str, password: &str) -> io::Result<()> {
        if name.is_empty() || name.contains([':', '\n', '\\', '/', '@']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "user names may not be empty or contain : \\ / @ or newlines",
            ));
        }
        self.users.insert(
            name.to_lowercase(),
            (name.to_string(), smbq_auth::nt_hash(password)),
        );
        Ok(())
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
            "# smbq accounts: NAME:NT-HASH (MD4 of the UTF-16LE password). Manage with `smbq user`."
        )?;
        for (name, hash) in self.users.values() {
            writeln!(f, "{name}:{}", hex::encode(hash))?;
        }
        f.sync_all()?;
        fs::rename(&tmp, &self.path)
    }
}

impl Accounts for AccountFile {
    fn nt_hash(&self, user: &str) -> Option<[u8; 16]> {
        self.users.get(&user.to_lowercase()).map(|(_, h)| *h)
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
}
