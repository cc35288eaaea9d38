//! Where the user name, domain and password come from. Never the command line: a credentials
//! file (smbclient's `-A` format), `$SMBQ_PASSWORD`, or a prompt on the terminal.

use std::path::Path;

use super::exit::{CliError, Code};

/// What a credentials file holds; absent keys stay `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialsFile {
    pub username: Option<String>,
    pub password: Option<String>,
    pub domain: Option<String>,
}

/// A credentials file is a few lines; anything bigger is the wrong file.
const MAX_CREDENTIALS_BYTES: u64 = 64 * 1024;

/// Parses smbclient's authentication file: `username = NAME`, `password = SECRET`,
/// `domain = DOMAIN`; blank lines and lines starting with `#` or `;` are comments. As in
/// Samba, the value starts after the spaces following `=` and runs to the end of the line, so
/// a password may contain (even end in) spaces. `username = DOMAIN\user` and `user@realm`
/// forms are split as smbclient does for the former.
pub fn parse_credentials(text: &str) -> Result<CredentialsFile, String> {
    let mut c = CredentialsFile::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        let (key, value) = trimmed
            .split_once('=')
            .ok_or_else(|| format!("line {}: expected KEY = VALUE", n + 1))?;
        let value = value.trim_start_matches([' ', '\t']);
        match key.trim().to_ascii_lowercase().as_str() {
            "username" | "user" => {
                let v = value.trim_end();
                match v.split_once('\\') {
                    Some((d, u)) => {
                        c.domain = Some(d.to_string());
                        c.username = Some(u.to_string());
                    }
                    None => c.username = Some(v.to_string()),
                }
            }
            "password" => c.password = Some(value.to_string()),
            "domain" | "workgroup" => c.domain = Some(value.trim_end().to_string()),
            // smbclient ignores keys it does not know; so do we.
            _ => {}
        }
    }
    Ok(c)
}

pub fn load_credentials(path: &Path) -> Result<CredentialsFile, CliError> {
    let err = |e: String| CliError::other(format!("credentials file {}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    if meta.len() > MAX_CREDENTIALS_BYTES {
        return Err(err("too large to be a credentials file".into()));
    }
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "smbq: warning: {} is readable by other users; chmod 600 it",
                path.display()
            );
        }
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    parse_credentials(&text).map_err(err)
}

/// Who to log on as, and from where the password may come.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// Empty: anonymous.
    pub user: String,
    pub domain: String,
    /// Known without asking (credentials file or environment).
    pub password: Option<String>,
    /// The user is the local login name, because nothing named one.
    pub local: bool,
}

/// The local login name, as smbclient and ssh default to it: `$USER`, `$LOGNAME`, else the
/// passwd entry of the real user id.
pub fn local_user() -> Option<String> {
    let env = ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|u| !u.is_empty() && !u.contains([':', '\\', '/', '@']));
    env.or_else(|| {
        let uid = rustix::process::getuid().as_raw().to_string();
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        passwd.lines().find_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let _pw = f.next()?;
            (f.next()? == uid && !name.is_empty()).then(|| name.to_string())
        })
    })
}

/// Puts the sources together: the URL's user and domain win over the file's, and without
/// either the local login name is used (anonymous only when asked for); the file's password
/// is used when the file names no user or the same user; then `$SMBQ_PASSWORD`.
pub fn identity(
    url_user: Option<&str>,
    url_domain: Option<&str>,
    file: Option<&CredentialsFile>,
    env_password: Option<String>,
    anonymous: bool,
) -> Identity {
    identity_with(
        url_user,
        url_domain,
        file,
        env_password,
        anonymous,
        local_user,
    )
}

fn identity_with(
    url_user: Option<&str>,
    url_domain: Option<&str>,
    file: Option<&CredentialsFile>,
    env_password: Option<String>,
    anonymous: bool,
    local: impl FnOnce() -> Option<String>,
) -> Identity {
    if anonymous {
        return Identity::default();
    }
    let file_user = file.and_then(|f| f.username.as_deref());
    let named = url_user.or(file_user).map(str::to_string);
    let is_local = named.is_none();
    let user = named.or_else(local).unwrap_or_default();
    let domain = url_domain
        .or(file.and_then(|f| f.domain.as_deref()))
        .unwrap_or_default()
        .to_string();
    let file_password = file.and_then(|f| {
        let same = file_user.is_none_or(|fu| fu.eq_ignore_ascii_case(&user));
        if same { f.password.clone() } else { None }
    });
    Identity {
        password: file_password.or(env_password),
        local: is_local && !user.is_empty(),
        user,
        domain,
    }
}

/// Asks on the terminal (not stdin, which may carry data), without echo.
pub fn prompt(user: &str, host: &str) -> Result<String, CliError> {
    rpassword::prompt_password(format!("Password for {user}@{host}: ")).map_err(|e| {
        CliError::new(
            Code::Auth,
            format!(
                "no password for {user}: set SMBQ_PASSWORD or use --credentials FILE (no terminal to ask on: {e})"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smbclient_format() {
        let c = parse_credentials(
            "# comment\n\n username = alice\npassword =  p@ss word \r\ndomain= CORP \n; more\nfoo = bar\n",
        )
        .unwrap();
        assert_eq!(c.username.as_deref(), Some("alice"));
        // Trailing spaces are part of a password, as Samba reads it.
        assert_eq!(c.password.as_deref(), Some("p@ss word "));
        assert_eq!(c.domain.as_deref(), Some("CORP"));
    }

    #[test]
    fn domain_in_username_and_equals_in_password() {
        let c = parse_credentials("username = CORP\\bob\npassword = a=b=c\n").unwrap();
        assert_eq!(c.username.as_deref(), Some("bob"));
        assert_eq!(c.domain.as_deref(), Some("CORP"));
        assert_eq!(c.password.as_deref(), Some("a=b=c"));
    }

    #[test]
    fn empty_password_is_a_password() {
        let c = parse_credentials("password =\n").unwrap();
        assert_eq!(c.password.as_deref(), Some(""));
    }

    #[test]
    fn garbage_line_is_an_error() {
        let e = parse_credentials("username = a\nthis is not a setting\n").unwrap_err();
        assert!(e.starts_with("line 2"), "{e}");
    }

    fn id(
        url_user: Option<&str>,
        url_domain: Option<&str>,
        file: Option<&CredentialsFile>,
        env: Option<&str>,
    ) -> Identity {
        let env = env.map(str::to_string);
        identity_with(url_user, url_domain, file, env, false, || Some("me".into()))
    }

    #[test]
    fn precedence() {
        let file = CredentialsFile {
            username: Some("alice".into()),
            password: Some("filepw".into()),
            domain: Some("FILEDOM".into()),
        };
        // URL names nobody: the file's user, domain and password.
        let i = id(None, None, Some(&file), Some("envpw"));
        assert_eq!((i.user.as_str(), i.local), ("alice", false));
        assert_eq!(i.domain, "FILEDOM");
        assert_eq!(i.password.as_deref(), Some("filepw"));
        // Same user in the URL (any case): the file's password still applies.
        let i = id(Some("ALICE"), Some("URLDOM"), Some(&file), None);
        assert_eq!(i.domain, "URLDOM");
        assert_eq!(i.password.as_deref(), Some("filepw"));
        // Another user: the file's password is not theirs.
        let i = id(Some("bob"), None, Some(&file), Some("envpw"));
        assert_eq!(i.user, "bob");
        assert_eq!(i.password.as_deref(), Some("envpw"));
        let i = id(Some("bob"), None, Some(&file), None);
        assert_eq!(i.password, None);
    }

    #[test]
    fn nobody_named_is_the_local_user_and_anonymous_is_asked_for() {
        let i = id(None, None, None, Some("pw"));
        assert_eq!((i.user.as_str(), i.local), ("me", true));
        assert_eq!(i.password.as_deref(), Some("pw"));
        let file = CredentialsFile {
            username: Some("alice".into()),
            ..Default::default()
        };
        let anon = identity_with(None, None, Some(&file), Some("pw".into()), true, || {
            Some("me".into())
        });
        assert_eq!(anon, Identity::default());
        // No local name at all (no $USER, no passwd entry): anonymous, as before.
        let none = identity_with(None, None, None, None, false, || None);
        assert_eq!(none, Identity::default());
    }

    #[test]
    fn file_without_user_lends_its_password() {
        let file = CredentialsFile {
            password: Some("pw".into()),
            ..Default::default()
        };
        let i = id(Some("carol"), None, Some(&file), Some("env"));
        assert_eq!(i.password.as_deref(), Some("pw"));
    }
}
