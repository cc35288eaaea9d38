//! `smb://[DOMAIN;]USER@HOST[:PORT]/SHARE[/PATH][?tcp-port=N&quic-port=N]` (the smb URI of
//! the IETF draft draft-crhertel-smb-url, as smbclient and GVfs read it): IPv6 literals in
//! brackets, percent-escapes in the user, domain, share and path. `:PORT` is the port of both
//! transports; the query (the draft's `?param=value` form) sets one transport's port, for
//! servers whose QUIC and TCP listen on different ports. `?` cannot appear in an SMB name
//! (MS-FSCC 2.1.5.1), so it always starts the query. A password in the URL is refused:
//! command lines show up in `ps` and shell histories.

/// A parsed smb:// URL. Everything is percent-decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmbUrl {
    /// What was given, for messages.
    pub raw: String,
    pub domain: Option<String>,
    pub user: Option<String>,
    /// Host name or IP address, without IPv6 brackets.
    pub host: String,
    pub port: Option<u16>,
    /// `?tcp-port=N`: the TCP port, over `port`.
    pub tcp_port: Option<u16>,
    /// `?quic-port=N`: the QUIC (UDP) port, over `port`.
    pub quic_port: Option<u16>,
    pub share: Option<String>,
    /// Share-relative path, components joined by `/`, no leading or trailing separator; empty
    /// for the share root. `.` and `..` are resolved, never above the share root.
    pub path: String,
    /// The URL ended in `/` (a directory meant as a destination).
    pub trailing_slash: bool,
}

fn bad(raw: &str, why: &str) -> String {
    format!(
        "{raw}: {why} (expected smb://[DOMAIN;][USER@]HOST[:PORT]/SHARE[/PATH][?tcp-port=N&quic-port=N])"
    )
}

fn parse_port(raw: &str, p: &str) -> Result<u16, String> {
    match p.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(bad(raw, &format!("bad port {p:?}"))),
    }
}

/// `tcp-port=N&quic-port=N` (either, any order); anything else is refused rather than
/// ignored, so a typo does not silently connect to the wrong port.
fn parse_query(raw: &str, q: &str) -> Result<(Option<u16>, Option<u16>), String> {
    let (mut tcp, mut quic) = (None, None);
    for kv in q.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad(raw, &format!("{kv:?}: expected NAME=VALUE after ?")))?;
        match k.to_ascii_lowercase().as_str() {
            "tcp-port" | "tcp_port" => tcp = Some(parse_port(raw, v)?),
            "quic-port" | "quic_port" => quic = Some(parse_port(raw, v)?),
            _ => {
                return Err(bad(
                    raw,
                    &format!("unknown parameter {k:?} (known: tcp-port, quic-port)"),
                ));
            }
        }
    }
    Ok((tcp, quic))
}

/// Decodes `%XX` escapes; the result must be UTF-8.
pub fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        if c == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-escape in {s:?} (write % as %25)"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

/// A name SMB can carry as one path component (MS-FSCC 2.1.5: no separators, no NUL).
fn check_component(c: &str) -> Result<(), String> {
    if c.contains(['/', '\\', '\0']) {
        return Err(format!("{c:?}: a name cannot contain / or \\ or NUL"));
    }
    Ok(())
}

fn parse_host_port(raw: &str, hp: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = hp.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or_else(|| bad(raw, "unclosed [ in the host"))?;
        let host = rest.get(..end).unwrap_or_default();
        let after = rest.get(end + 1..).unwrap_or_default();
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| bad(raw, "junk after ]"))?,
            ),
        };
        let host = percent_decode(host).map_err(|e| bad(raw, &e))?;
        if host.parse::<std::net::Ipv6Addr>().is_err() && !host.contains('%') {
            return Err(bad(raw, "brackets hold an IPv6 address"));
        }
        (host, port)
    } else {
        match hp.split_once(':') {
            Some((h, p)) => {
                if p.contains(':') {
                    return Err(bad(raw, "put an IPv6 address in brackets: [::1]"));
                }
                (h.to_string(), Some(p))
            }
            None => (hp.to_string(), None),
        }
    };
    if host.is_empty() {
        return Err(bad(raw, "no host"));
    }
    if host.contains(['@', '/', ' ']) {
        return Err(bad(raw, "bad host"));
    }
    let port = port.map(|p| parse_port(raw, p)).transpose()?;
    Ok((host, port))
}

/// `[DOMAIN;]USER` (the part before `@`), percent-decoded: (domain, user), an empty domain
/// counting as none.
fn parse_userinfo(raw: &str, ui: &str) -> Result<(Option<String>, Option<String>), String> {
    if ui.contains(':') {
        return Err(bad(
            raw,
            "no passwords in URLs (they show in ps); use $SMBQ_PASSWORD, --credentials or the prompt",
        ));
    }
    let (d, u) = match ui.split_once(';') {
        Some((d, u)) => (Some(d), u),
        None => (None, ui),
    };
    let mut domain = None;
    if let Some(d) = d {
        let d = percent_decode(d).map_err(|e| bad(raw, &e))?;
        if !d.is_empty() {
            domain = Some(d);
        }
    }
    let u = percent_decode(u).map_err(|e| bad(raw, &e))?;
    if u.is_empty() {
        return Err(bad(raw, "empty user name before @"));
    }
    Ok((domain, Some(u)))
}

/// `SHARE/PATH` as its percent-decoded components, `.` and `..` resolved; the first is the
/// share.
fn parse_path(raw: &str, path: &str) -> Result<Vec<String>, String> {
    let mut parts: Vec<String> = Vec::new();
    for seg in path.split('/') {
        let seg = percent_decode(seg).map_err(|e| bad(raw, &e))?;
        match seg.as_str() {
            "" | "." => {}
            ".." => {
                // Never past the share root: the share itself is not a directory one
                // can leave.
                if parts.len() <= 1 {
                    return Err(bad(raw, ".. goes above the share"));
                }
                parts.pop();
            }
            _ => {
                check_component(&seg).map_err(|e| bad(raw, &e))?;
                parts.push(seg);
            }
        }
    }
    Ok(parts)
}

impl SmbUrl {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let rest = raw
            .get(..6)
            .filter(|s| s.eq_ignore_ascii_case("smb://"))
            .and_then(|_| raw.get(6..))
            .ok_or_else(|| bad(raw, "not an smb:// URL"))?;
        let (rest, (tcp_port, quic_port)) = match rest.split_once('?') {
            Some((r, q)) => (r, parse_query(raw, q)?),
            None => (rest, (None, None)),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (
                rest.get(..i).unwrap_or_default(),
                rest.get(i + 1..).unwrap_or_default(),
            ),
            None => (rest, ""),
        };
        let (userinfo, hostport) = match authority.rfind('@') {
            Some(i) => (
                Some(authority.get(..i).unwrap_or_default()),
                authority.get(i + 1..).unwrap_or_default(),
            ),
            None => (None, authority),
        };
        let (domain, user) = match userinfo {
            Some(ui) => parse_userinfo(raw, ui)?,
            None => (None, None),
        };
        let (host, port) = parse_host_port(raw, hostport)?;
        let mut it = parse_path(raw, path)?.into_iter();
        let share = it.next();
        let path = it.collect::<Vec<_>>().join("/");
        Ok(Self {
            raw: raw.to_string(),
            domain,
            user,
            host,
            port,
            tcp_port,
            quic_port,
            share,
            path,
            trailing_slash: rest.ends_with('/'),
        })
    }

    /// The share, or an error naming the URL.
    pub fn require_share(&self) -> Result<&str, String> {
        self.share.as_deref().ok_or_else(|| {
            "no share in the URL (expected smb://USER@HOST[:PORT]/SHARE[/PATH])".into()
        })
    }

    /// The last path component, or the share name at the share root.
    pub fn basename(&self) -> &str {
        match self.path.rsplit_once('/') {
            Some((_, b)) => b,
            None if !self.path.is_empty() => &self.path,
            None => self.share.as_deref().unwrap_or_default(),
        }
    }

    /// Same server and share (host and share compared case-insensitively, as SMB does).
    pub fn same_share(&self, other: &SmbUrl) -> bool {
        self.host.eq_ignore_ascii_case(&other.host)
            && self.port == other.port
            && match (&self.share, &other.share) {
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => false,
            }
    }

    /// `smb://HOST[:PORT]/SHARE/PATH` of another path on the same share, for messages
    /// (not percent-encoded: it is read by people).
    pub fn display_path(&self, path: &str) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        let share = self.share.as_deref().unwrap_or_default();
        if path.is_empty() {
            format!("smb://{host}{port}/{share}")
        } else {
            format!("smb://{host}{port}/{share}/{path}")
        }
    }

    /// `host`, `host:port` or `[v6]:port`, for messages.
    pub fn host_for_display(&self, port: u16) -> String {
        if self.host.contains(':') {
            format!("[{}]:{port}", self.host)
        } else {
            format!("{}:{port}", self.host)
        }
    }
}

/// The URL argument's help: the form, and what an omitted part means.
pub const URL_HELP: &str = "smb://[DOMAIN;][USER@]HOST[:PORT]/SHARE[/PATH][?tcp-port=N&quic-port=N]. \
No USER: the local user name (--anonymous for a null session). :PORT is both transports' \
port (default 445 TCP, 443 QUIC); ?tcp-port/?quic-port set one. Escape spaces and % as %20, %25";

/// The URL argument's help when only the server matters.
pub const SERVER_URL_HELP: &str = "smb://[DOMAIN;][USER@]HOST[:PORT] (a share or path, if given, is ignored); as for the other commands";

/// clap value parser.
pub fn parse_url(s: &str) -> Result<SmbUrl, String> {
    SmbUrl::parse(s)
}

/// A share-relative path given on the command line (for `mv`): `/`-separated, decoded as
/// given (no percent-escapes), `.`/`..` resolved within the share.
pub fn parse_share_path(s: &str) -> Result<String, String> {
    let mut parts: Vec<&str> = Vec::new();
    for seg in s.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!("{s}: .. goes above the share"));
                }
            }
            _ => {
                check_component(seg)?;
                parts.push(seg);
            }
        }
    }
    if parts.is_empty() {
        return Err(format!("{s:?}: empty path"));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> SmbUrl {
        SmbUrl::parse(s).unwrap()
    }

    #[test]
    fn full_url() {
        let u = p("smb://alice@files.example.com:8443/docs/a/b.txt");
        assert_eq!(u.user.as_deref(), Some("alice"));
        assert_eq!(u.domain, None);
        assert_eq!(u.host, "files.example.com");
        assert_eq!(u.port, Some(8443));
        assert_eq!(u.share.as_deref(), Some("docs"));
        assert_eq!(u.path, "a/b.txt");
        assert!(!u.trailing_slash);
        assert_eq!(u.basename(), "b.txt");
    }

    #[test]
    fn query_sets_one_transport_port() {
        let u = p("smb://alice@h:4450/docs/a.txt?quic-port=4443");
        assert_eq!(
            (u.port, u.tcp_port, u.quic_port),
            (Some(4450), None, Some(4443))
        );
        assert_eq!(u.path, "a.txt");
        let u = p("smb://h/docs/?tcp-port=1445&quic-port=8443");
        assert_eq!(
            (u.port, u.tcp_port, u.quic_port),
            (None, Some(1445), Some(8443))
        );
        assert!(u.trailing_slash);
        assert_eq!(u.share.as_deref(), Some("docs"));
        assert!(SmbUrl::parse("smb://h/docs?quic-port=0").is_err());
        assert!(SmbUrl::parse("smb://h/docs?udp=1").is_err());
        assert!(SmbUrl::parse("smb://h/docs?quic-port").is_err());
    }

    #[test]
    fn percent_escapes_decode() {
        let u = p("smb://CORP;bob%20smith@host/my%20share/%E2%82%ACuro%23/");
        assert_eq!(u.domain.as_deref(), Some("CORP"));
        assert_eq!(u.user.as_deref(), Some("bob smith"));
        assert_eq!(u.share.as_deref(), Some("my share"));
        assert_eq!(u.path, "€uro#");
        assert!(u.trailing_slash);
    }

    #[test]
    fn escaped_separator_is_refused() {
        assert!(SmbUrl::parse("smb://h/s/a%2Fb").is_err());
        assert!(SmbUrl::parse("smb://h/s/a%5Cb").is_err());
        assert!(SmbUrl::parse("smb://h/s/a%00b").is_err());
    }

    #[test]
    fn ipv6_hosts() {
        let u = p("smb://u@[::1]:4450/share");
        assert_eq!(u.host, "::1");
        assert_eq!(u.port, Some(4450));
        assert_eq!(u.path, "");
        assert_eq!(u.host_for_display(4450), "[::1]:4450");
        let u = p("smb://u@[fe80::1%25eth0]/s");
        assert_eq!(u.host, "fe80::1%eth0");
        assert_eq!(u.port, None);
        assert!(SmbUrl::parse("smb://u@::1/share").is_err());
        assert!(SmbUrl::parse("smb://u@[::1/share").is_err());
        assert!(SmbUrl::parse("smb://u@[::1]x/share").is_err());
        assert!(SmbUrl::parse("smb://u@[nothost]/share").is_err());
    }

    #[test]
    fn no_user_no_share() {
        let u = p("smb://host");
        assert_eq!(u.user, None);
        assert_eq!(u.share, None);
        assert!(u.require_share().is_err());
        let u = p("smb://u@host:445/");
        assert_eq!(u.share, None);
        assert_eq!(u.port, Some(445));
    }

    #[test]
    fn dots_resolve_within_the_share() {
        let u = p("smb://h/s/a/./b/../c//d");
        assert_eq!(u.path, "a/c/d");
        assert_eq!(u.basename(), "d");
        let u = p("smb://h/s/a/..");
        assert_eq!(u.path, "");
        assert_eq!(u.basename(), "s");
        assert!(SmbUrl::parse("smb://h/s/..").is_err());
        assert!(SmbUrl::parse("smb://h/s/a/../../x").is_err());
    }

    #[test]
    fn bad_urls() {
        for s in [
            "",
            "smb:/host/share",
            "http://host/share",
            "smb://",
            "smb:///share",
            "smb://u@/share",
            "smb://@host/share",
            "smb://u:secret@host/share",
            "smb://host:0/share",
            "smb://host:70000/share",
            "smb://host:abc/share",
            "smb://host:/share",
            "smb://h/s/100%",
            "smb://h/s/%zz",
            "smb://h/s/%ff",
        ] {
            assert!(SmbUrl::parse(s).is_err(), "{s:?} accepted");
        }
    }

    #[test]
    fn error_names_the_url_and_the_form() {
        let e = SmbUrl::parse("smb://u:pw@h/s").unwrap_err();
        assert!(e.starts_with("smb://u:pw@h/s: no passwords"), "{e}");
        assert!(e.contains("smb://[DOMAIN;][USER@]HOST"), "{e}");
    }

    #[test]
    fn user_with_at_sign_uses_last_at() {
        let u = p("smb://a%40b@host/s");
        assert_eq!(u.user.as_deref(), Some("a@b"));
        let u = p("smb://a@b@host/s");
        assert_eq!(u.user.as_deref(), Some("a@b"));
        assert_eq!(u.host, "host");
    }

    #[test]
    fn same_share_ignores_case_of_host_and_share() {
        assert!(p("smb://u@Host/Share/a").same_share(&p("smb://v@host/share/b")));
        assert!(!p("smb://u@host/share/a").same_share(&p("smb://u@host/other/a")));
        assert!(!p("smb://u@host:1/share").same_share(&p("smb://u@host/share")));
    }

    #[test]
    fn display_paths() {
        let u = p("smb://u@[::1]:4450/share/a");
        assert_eq!(
            u.display_path("a/b.part"),
            "smb://[::1]:4450/share/a/b.part"
        );
        let u = p("smb://u@h/share");
        assert_eq!(u.display_path(""), "smb://h/share");
    }

    #[test]
    fn share_paths() {
        assert_eq!(parse_share_path("/a/b/").unwrap(), "a/b");
        assert_eq!(parse_share_path("a\\b\\..\\c").unwrap(), "a/c");
        assert!(parse_share_path("..").is_err());
        assert!(parse_share_path("/").is_err());
    }
}
