//! MIT Kerberos for smbq, through the system's GSS-API library (`libgssapi_krb5.so.2`, Debian
//! package `libgssapi-krb5-2`), loaded with `dlopen` the first time Kerberos is configured.
//!
//! Why MIT and not a Rust implementation of the protocol: the acceptor is where a file server's
//! Kerberos security lives (ticket decryption with the keytab's keys, authenticator checks,
//! clock skew, the replay cache, every enctype a KDC may issue), and MIT's library is the one
//! every Linux service already trusts for it. Why load it at run time: building smbq needs no
//! Kerberos headers (nor bindgen and libclang, as the `libgssapi` crate's build does), and a
//! server without `[kerberos]` never touches the library. The safe `libgssapi` binding was not
//! enough either: it has no way to read the SSPI session key SMB derives its keys from
//! (MS-SMB2 3.3.5.5.3), which is `gss_inquire_sec_context_by_oid` on the context handle.
//!
//! This crate is the only place these calls are made; each `unsafe` block says why it holds.
//! Handles are owned by small guards that release them on drop, so no error path leaks one.

mod api;
mod handle;
mod initiator;

pub use initiator::{Initiating, have_ticket};

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::time::Duration;

use zeroize::Zeroizing;

use api::{Api, BufferDesc, OidDesc};
use handle::{Buffer, Context, Cred, Name};

/// `GSS_C_ACCEPT` (RFC 2744 section 3.5).
const CRED_ACCEPT: i32 = 2;
/// `GSS_C_INDEFINITE`.
const INDEFINITE: u32 = u32::MAX;
/// `GSS_S_CONTINUE_NEEDED`, a supplementary bit of the major status.
const CONTINUE_NEEDED: u32 = 1;
/// The calling- and routine-error fields of a major status; any bit set is a failure.
const ERROR_MASK: u32 = 0xffff_0000;
/// `ERROR_TABLE_BASE_krb5`: MIT reports protocol error N (RFC 4120 section 7.5.9) as this + N.
const KRB5_ERROR_BASE: i32 = -1_765_328_384;
/// `GSS_C_INQ_SSPI_SESSION_KEY`, 1.2.840.113554.1.2.2.5.5: the key SSPI calls the session key
/// (the acceptor subkey if one was sent, else the initiator subkey, else the ticket's key).
/// The Kerberos V5 mechanism, 1.2.840.113554.1.2.2.
pub(crate) const MECH_KRB5: [u8; 9] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02];
/// `GSS_C_ANON_FLAG`: the initiator is anonymous (an anonymous PKINIT ticket).
const ANON_FLAG: u32 = 64;
const INQ_SSPI_SESSION_KEY: [u8; 11] = [
    0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x02, 0x05, 0x05,
];

/// A failed GSS-API call: its major and minor status and MIT's text for both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GssError {
    pub major: u32,
    pub minor: u32,
    pub message: String,
}

impl GssError {
    pub(crate) fn new(api: &'static Api, major: u32, minor: u32) -> Self {
        Self {
            major,
            minor,
            message: api.status_text(major, minor),
        }
    }

    pub(crate) fn other(message: impl Into<String>) -> Self {
        Self {
            major: 0,
            minor: 0,
            message: message.into(),
        }
    }

    /// The Kerberos protocol error number (RFC 4120 section 7.5.9) behind this failure, such as
    /// 37 (KRB_AP_ERR_SKEW) or 34 (KRB_AP_ERR_REPEAT), when MIT reported one.
    pub fn kerberos_error(&self) -> Option<u32> {
        let code = (self.minor as i32).wrapping_sub(KRB5_ERROR_BASE);
        u32::try_from(code).ok().filter(|c| *c < 128)
    }
}

impl std::fmt::Display for GssError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GssError {}

/// Whether the system's GSS-API library can be loaded; the error says what to install.
pub fn available() -> Result<(), GssError> {
    Api::get().map(|_| ())
}

/// The server's long-term Kerberos credential: the keys of a keytab, and the replay cache
/// every acceptance through it checks and updates (RFC 4120 section 3.2.3).
pub struct AcceptorCred {
    cred: Cred,
}

impl std::fmt::Debug for AcceptorCred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcceptorCred").finish_non_exhaustive()
    }
}

impl AcceptorCred {
    /// Acquires an acceptor credential for every principal in `keytab`, with its replay cache
    /// in the file `rcache` (MIT's `file2` type) or MIT's default (`KRB5RCACHEDIR`, else
    /// `/var/tmp`) when `None`. Which principal a client may name is checked per ticket by the
    /// caller ([`Accepted::service`]).
    pub fn from_keytab(keytab: &Path, rcache: Option<&Path>) -> Result<Self, GssError> {
        let api = Api::get()?;
        let keytab = c_path("FILE:", keytab)?;
        let rcache = rcache.map(|p| c_path("file2:", p)).transpose()?;
        let mut store = vec![(c"keytab", keytab.as_c_str())];
        if let Some(r) = &rcache {
            store.push((c"rcache", r.as_c_str()));
        }
        let (cred, _) = Cred::acquire(api, CRED_ACCEPT, &store)?;
        Ok(Self { cred })
    }

    /// Accepts one Kerberos GSS-API initial context token (RFC 4121 section 4.1: the AP-REQ
    /// framed with the krb5 mechanism OID), as a SPNEGO mechToken carries it. Kerberos needs
    /// one leg on the acceptor side; a mechanism asking for more (DCE style, user-to-user) is
    /// refused.
    pub fn accept(&self, token: &[u8]) -> Result<Accepted, GssError> {
        let api = self.cred.api();
        let mut ctx = Context::null(api);
        let mut client = Name::null(api);
        let mut reply = Buffer::empty(api);
        let mut input = BufferDesc {
            length: token.len(),
            value: token.as_ptr().cast_mut().cast(),
        };
        let (mut minor, mut flags, mut lifetime) = (0u32, 0u32, 0u32);
        // SAFETY: `input` points at `token`, which outlives the call and which MIT only reads
        // (RFC 2744 input buffers are const in practice; the pointer is not kept). The context,
        // source name and output token are written to guards that release them; null channel
        // bindings, mech type and delegated-credential outputs are allowed by RFC 2744.
        #[allow(unsafe_code)]
        let major = unsafe {
            (api.accept_sec_context)(
                &mut minor,
                ctx.out(),
                self.cred.raw(),
                &mut input,
                ptr::null_mut(),
                client.out(),
                ptr::null_mut(),
                reply.out(),
                &mut flags,
                &mut lifetime,
                ptr::null_mut(),
            )
        };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(api, major, minor));
        }
        if major & CONTINUE_NEEDED != 0 {
            return Err(GssError::other(
                "Kerberos: the client asked for more than one leg (DCE style or user-to-user), \
                 which SMB does not use",
            ));
        }
        if flags & ANON_FLAG != 0 {
            return Err(GssError::other(
                "Kerberos: anonymous tickets are not accepted",
            ));
        }
        let service = ctx.target_name()?;
        Ok(Accepted {
            client: client.display()?,
            service,
            reply: reply.to_vec(),
            session_key: ctx.session_key()?,
            lifetime: Duration::from_secs(u64::from(lifetime)),
            flags,
        })
    }
}

/// A verified AP-REQ.
pub struct Accepted {
    /// The client principal, `user@REALM`.
    pub client: String,
    /// The service principal the ticket was issued for, `cifs/host@REALM`.
    pub service: String,
    /// The AP-REP (mutual authentication) to send back; empty if the client did not ask.
    pub reply: Vec<u8>,
    /// The SSPI session key (MS-SMB2 3.3.5.5.3 takes its first 16 bytes).
    pub session_key: Zeroizing<Vec<u8>>,
    /// How long the ticket stays valid: the SMB session expires with it (MS-SMB2 3.3.5.5.3).
    pub lifetime: Duration,
    /// The context flags (RFC 2744 `ret_flags`), e.g. 2 = mutual authentication.
    pub flags: u32,
}

impl std::fmt::Debug for Accepted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepted")
            .field("client", &self.client)
            .field("service", &self.service)
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

fn c_path(prefix: &str, path: &Path) -> Result<CString, GssError> {
    let mut bytes = prefix.as_bytes().to_vec();
    bytes.extend_from_slice(path.as_os_str().as_bytes());
    CString::new(bytes).map_err(|_| GssError::other("a Kerberos file path contains a NUL byte"))
}

impl Context {
    fn target_name(&self) -> Result<String, GssError> {
        let api = self.api();
        let mut target = Name::null(api);
        let mut minor = 0;
        // SAFETY: the context is complete (accept returned COMPLETE); only the target-name
        // output is requested, written to a guard that releases it; the other outputs are
        // null, which RFC 2744 allows for gss_inquire_context.
        #[allow(unsafe_code)]
        let major = unsafe {
            (api.inquire_context)(
                &mut minor,
                self.raw(),
                ptr::null_mut(),
                target.out(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(api, major, minor));
        }
        target.display()
    }

    pub(crate) fn session_key(&self) -> Result<Zeroizing<Vec<u8>>, GssError> {
        let api = self.api();
        let mut oid = OidDesc {
            length: INQ_SSPI_SESSION_KEY.len() as u32,
            elements: INQ_SSPI_SESSION_KEY.as_ptr().cast_mut().cast(),
        };
        let mut set = handle::BufferSet::null(api);
        let mut minor = 0;
        // SAFETY: the context is complete; `oid` points at a static OID MIT only reads; the
        // buffer set is written to a guard that releases it.
        #[allow(unsafe_code)]
        let major = unsafe {
            (api.inquire_sec_context_by_oid)(&mut minor, self.raw(), &mut oid, set.out())
        };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(api, major, minor));
        }
        set.first()
            .filter(|k| !k.is_empty())
            .ok_or_else(|| GssError::other("Kerberos: the context has no session key"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kerberos_error_numbers_come_from_mit_minor_codes() {
        let skew = GssError {
            major: 0x000d_0000,
            minor: (KRB5_ERROR_BASE + 37) as u32,
            message: String::new(),
        };
        assert_eq!(skew.kerberos_error(), Some(37));
        let not_krb5 = GssError {
            major: 0x000d_0000,
            minor: 2,
            message: String::new(),
        };
        assert_eq!(not_krb5.kerberos_error(), None);
    }

    #[test]
    fn a_missing_keytab_is_an_error_not_a_crash() {
        // The library is on every machine the test suite runs on (test.sh installs it).
        let err = AcceptorCred::from_keytab(Path::new("/nonexistent/smbq.keytab"), None);
        let err = match err {
            Ok(_) => panic!("a keytab that does not exist gave a credential"),
            Err(e) => e,
        };
        assert!(err.major & ERROR_MASK != 0, "{err:?}");
    }

    #[test]
    fn garbage_tokens_are_refused() {
        let dir = std::env::temp_dir().join(format!("smbq-gss-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let keytab = dir.join("one.keytab");
        std::fs::write(&keytab, keytab_with_one_key()).unwrap();
        let cred = AcceptorCred::from_keytab(&keytab, Some(&dir.join("rc"))).unwrap();
        for token in [
            &b""[..],
            b"\x60\x03\x06\x01\x00",
            b"not a token at all",
            &[0u8; 4096],
        ] {
            assert!(cred.accept(token).is_err(), "{token:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A keytab (MIT file format version 0x0502) holding one AES-256 key for
    /// cifs/localhost@SMBQ.TEST, so that acquiring an acceptor credential succeeds.
    fn keytab_with_one_key() -> Vec<u8> {
        let mut entry = Vec::new();
        entry.extend_from_slice(&2u16.to_be_bytes()); // components
        for s in ["SMBQ.TEST", "cifs", "localhost"] {
            entry.extend_from_slice(&(s.len() as u16).to_be_bytes());
            entry.extend_from_slice(s.as_bytes());
        }
        entry.extend_from_slice(&1u32.to_be_bytes()); // KRB5_NT_PRINCIPAL
        entry.extend_from_slice(&0u32.to_be_bytes()); // timestamp
        entry.push(1); // kvno
        entry.extend_from_slice(&18u16.to_be_bytes()); // aes256-cts-hmac-sha1-96
        entry.extend_from_slice(&32u16.to_be_bytes());
        entry.extend_from_slice(&[0x11; 32]);
        let mut file = vec![0x05, 0x02];
        file.extend_from_slice(&(entry.len() as i32).to_be_bytes());
        file.extend_from_slice(&entry);
        file
    }
}
