//! `[kerberos]`: Kerberos logons (MS-SPNG, RFC 4121) verified by MIT's GSS-API library with
//! the server's keytab, and the mapping from client principals to accounts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use smbq_auth::{Accounts, AuthError, Identity, Kerberos, KerberosLogon};
use smbq_gss::{AcceptorCred, GssError};
use smbq_wire::NtStatus;

/// `[kerberos]`: off unless `keytab` is set.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KerberosConfig {
    /// The service keys, e.g. "/etc/smbq/smb.keytab" (`kadmin ktadd` / `ktpass` output).
    pub keytab: Option<PathBuf>,
    /// The realm whose users log on as the account of the same name (`alice@REALM` is
    /// `alice`). Users of other realms need a `map` entry.
    pub realm: Option<String>,
    /// Service principals a ticket may name, e.g. ["cifs/files.example.com@EXAMPLE.COM"];
    /// empty accepts any principal whose key is in the keytab.
    #[serde(default)]
    pub principals: Vec<String>,
    /// "refuse" (default): a principal with no account fails with STATUS_LOGON_FAILURE;
    /// "guest": it gets a guest session.
    pub unknown: Option<String>,
    /// Accept NTLM as well (default true); false makes Kerberos the only way in.
    pub ntlm: Option<bool>,
    /// Client principal to account, e.g. { "bob@PARTNER.ORG" = "alice" }.
    #[serde(default)]
    pub map: BTreeMap<String, String>,
}

/// What to do with a principal that maps to no account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unknown {
    Refuse,
    Guest,
}

/// The configured acceptor: MIT's credential for the keytab plus the account mapping.
pub struct MitKerberos {
    cred: AcceptorCred,
    realm: Option<String>,
    principals: Vec<String>,
    unknown: Unknown,
    map: BTreeMap<String, String>,
    accounts: Arc<dyn Accounts>,
}

impl std::fmt::Debug for MitKerberos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MitKerberos")
            .field("realm", &self.realm)
            .field("principals", &self.principals)
            .finish_non_exhaustive()
    }
}

impl KerberosConfig {
    pub fn ntlm(&self) -> bool {
        self.ntlm.unwrap_or(true)
    }

    /// Checks the section without loading anything, so a bad value fails at start or reload.
    pub fn validate(&self) -> Result<(), String> {
        self.unknown_policy()?;
        if self.keytab.is_none() && (self.realm.is_some() || !self.principals.is_empty()) {
            return Err("[kerberos] needs `keytab` (the service keys) to be turned on".into());
        }
        if self.keytab.is_none() && self.ntlm == Some(false) {
            return Err("[kerberos] ntlm = false without a keytab would refuse every logon".into());
        }
        Ok(())
    }

    fn unknown_policy(&self) -> Result<Unknown, String> {
        match self.unknown.as_deref() {
            None | Some("refuse") => Ok(Unknown::Refuse),
            Some("guest") => Ok(Unknown::Guest),
            Some(other) => Err(format!(
                "[kerberos] unknown = {other:?}: expected \"refuse\" or \"guest\""
            )),
        }
    }

    /// The acceptor, or `None` when no keytab is configured. `state_dir` holds the replay
    /// cache, so a restart still refuses an authenticator seen in the last minutes.
    pub fn acceptor(
        &self,
        state_dir: &Path,
        accounts: Arc<dyn Accounts>,
    ) -> Result<Option<Arc<MitKerberos>>, String> {
        self.validate()?;
        let Some(keytab) = &self.keytab else {
            return Ok(None);
        };
        std::fs::File::open(keytab)
            .map_err(|e| format!("[kerberos] keytab {}: {e}", keytab.display()))?;
        let rcache = state_dir.join("krb5.rcache2");
        let cred = AcceptorCred::from_keytab(keytab, Some(&rcache))
            .map_err(|e| format!("[kerberos] keytab {}: {e}", keytab.display()))?;
        Ok(Some(Arc::new(MitKerberos {
            cred,
            realm: self.realm.clone(),
            principals: self.principals.clone(),
            unknown: self.unknown_policy()?,
            map: self.map.clone(),
            accounts,
        })))
    }
}

impl MitKerberos {
    /// The account a client principal logs on as, if any (`map` first, then the realm rule).
    fn account_for(&self, principal: &str) -> Option<String> {
        if let Some(a) = self.map.get(principal) {
            return Some(a.clone());
        }
        let (user, realm) = principal.rsplit_once('@')?;
        (self.realm.as_deref() == Some(realm) && !user.contains('/')).then(|| user.to_owned())
    }
}

/// The NTSTATUS Windows answers for a refused AP-REQ. Windows' own mapping of Kerberos errors,
/// as Samba mirrors it (lib/krb5_wrap/krb5_errs.c): clock skew and a ticket not yet valid are
/// STATUS_TIME_DIFFERENCE_AT_DC, so a client knows to fix its clock; an expired or modified
/// ticket, a wrong key, a replay or a wrong service are STATUS_LOGON_FAILURE.
fn status_for(e: &GssError) -> NtStatus {
    match e.kerberos_error() {
        // KRB_AP_ERR_TKT_NYV, KRB_AP_ERR_SKEW (RFC 4120 section 7.5.9).
        Some(33 | 37) => NtStatus::TIME_DIFFERENCE_AT_DC,
        _ => NtStatus::LOGON_FAILURE,
    }
}

impl Kerberos for MitKerberos {
    fn accept(&self, token: &[u8]) -> Result<KerberosLogon, AuthError> {
        let refused = |principal: &str, status, reason: String| AuthError::Kerberos {
            principal: principal.to_owned(),
            status,
            reason,
        };
        // MIT reads the keytab and locks and writes the replay cache here, holding the
        // credential's lock: on tokio's multi-thread runtime the worker hands its other
        // connections to its peers first.
        let accept = || self.cred.accept(token);
        let accepted = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(accept)
            }
            _ => accept(),
        };
        let a = accepted.map_err(|e| refused("", status_for(&e), e.message.clone()))?;
        if !self.principals.is_empty() && !self.principals.contains(&a.service) {
            return Err(refused(
                &a.client,
                NtStatus::LOGON_FAILURE,
                format!(
                    "the ticket is for {}, not a configured principal",
                    a.service
                ),
            ));
        }
        let known = self
            .account_for(&a.client)
            .filter(|name| self.accounts.nt_hash(name).is_some());
        let identity = match (known, self.unknown) {
            (Some(user), _) => Identity {
                user,
                domain: a
                    .client
                    .rsplit_once('@')
                    .map(|(_, r)| r.to_owned())
                    .unwrap_or_default(),
                is_guest: false,
                is_anonymous: false,
            },
            (None, Unknown::Guest) => Identity {
                user: a.client.clone(),
                domain: String::new(),
                is_guest: true,
                is_anonymous: false,
            },
            (None, Unknown::Refuse) => {
                return Err(refused(
                    &a.client,
                    NtStatus::LOGON_FAILURE,
                    "no account for this principal (add one, or a [kerberos] map entry)".into(),
                ));
            }
        };
        Ok(KerberosLogon {
            identity,
            reply: a.reply,
            session_key: a.session_key,
            valid_for: a.lifetime,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(toml_text: &str) -> KerberosConfig {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn section_is_checked() {
        assert!(cfg("").validate().is_ok());
        assert!(
            cfg("realm = \"R\"").validate().is_err(),
            "realm without keytab"
        );
        assert!(
            cfg("ntlm = false").validate().is_err(),
            "nothing left to log on with"
        );
        assert!(
            cfg("keytab = \"/k\"\nunknown = \"maybe\"")
                .validate()
                .is_err()
        );
        assert!(
            cfg("keytab = \"/k\"\nunknown = \"guest\"")
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn missing_keytab_is_reported_with_its_path() {
        let c = cfg("keytab = \"/nonexistent/smb.keytab\"");
        let accounts: Arc<dyn Accounts> = Arc::new(|_: &str| None);
        let err = c.acceptor(Path::new("/tmp"), accounts).unwrap_err();
        assert!(err.contains("/nonexistent/smb.keytab"), "{err}");
    }

    #[test]
    fn status_follows_windows_mapping() {
        let e = |n: i32| GssError {
            major: 0x000d_0000,
            minor: (-1_765_328_384i32 + n) as u32,
            message: String::new(),
        };
        assert_eq!(status_for(&e(37)), NtStatus::TIME_DIFFERENCE_AT_DC);
        assert_eq!(status_for(&e(33)), NtStatus::TIME_DIFFERENCE_AT_DC);
        assert_eq!(status_for(&e(32)), NtStatus::LOGON_FAILURE, "expired");
        assert_eq!(status_for(&e(34)), NtStatus::LOGON_FAILURE, "replay");
        assert_eq!(status_for(&e(31)), NtStatus::LOGON_FAILURE, "bad integrity");
    }
}
