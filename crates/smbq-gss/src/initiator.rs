//! The client side: an AP-REQ for `cifs/HOST` from the user's credential cache (`kinit`,
//! KRB5CCNAME), and the check of the server's AP-REP (mutual authentication).

use std::ffi::c_void;
use std::ptr;

use zeroize::Zeroizing;

use crate::api::{Api, BufferDesc, OidDesc};
use crate::handle::{Buffer, Context, Cred, Name};
use crate::{CONTINUE_NEEDED, ERROR_MASK, GssError, MECH_KRB5};

/// `GSS_C_NT_HOSTBASED_SERVICE`, 1.2.840.113554.1.2.1.4: names like `cifs@files.example.com`.
const NT_HOSTBASED_SERVICE: [u8; 10] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x12, 0x01, 0x02, 0x01, 0x04];
/// GSS_C_MUTUAL_FLAG | GSS_C_REPLAY_FLAG | GSS_C_SEQUENCE_FLAG | GSS_C_CONF_FLAG |
/// GSS_C_INTEG_FLAG, what Windows and Samba ask for an SMB session.
const REQ_FLAGS: u32 = 2 | 4 | 8 | 16 | 32;
/// `GSS_C_INITIATE`.
const CRED_INITIATE: i32 = 1;

fn oid(bytes: &'static [u8]) -> OidDesc {
    OidDesc {
        length: bytes.len() as u32,
        elements: bytes.as_ptr().cast_mut().cast::<c_void>(),
    }
}

/// Whether the default credential cache holds an initial ticket that has not expired.
pub fn have_ticket() -> bool {
    let Ok(api) = Api::get() else {
        return false;
    };
    // The defaults (the KRB5CCNAME cache). MIT acquires a credential from an expired TGT
    // too, with no time left on it.
    Cred::acquire(api, CRED_INITIATE, &[]).is_ok_and(|(_, time_left)| time_left > 0)
}

/// A client context between its AP-REQ and the server's AP-REP.
pub struct Initiating {
    ctx: Context,
    target: Name,
}

impl std::fmt::Debug for Initiating {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Initiating").finish_non_exhaustive()
    }
}

// SAFETY: the context and name are used by one thread at a time (the owner of `Initiating`);
// MIT's handles are plain heap objects with no thread affinity, so moving them is sound.
#[allow(unsafe_code)]
unsafe impl Send for Initiating {}

impl Initiating {
    /// Starts a context for `service@host` (e.g. `cifs`, `files.example.com`): the GSS-API
    /// initial context token (the AP-REQ), fetching a service ticket from the KDC if the
    /// cache has none yet, so this may block for a network round trip.
    pub fn start(service: &str, host: &str) -> Result<(Self, Vec<u8>), GssError> {
        let api = Api::get()?;
        let text = format!("{service}@{host}");
        let mut name_buf = BufferDesc {
            length: text.len(),
            value: text.as_ptr().cast_mut().cast(),
        };
        let mut name_type = oid(&NT_HOSTBASED_SERVICE);
        let mut target = Name::null(api);
        let mut minor = 0;
        // SAFETY: `name_buf` points at `text`, alive for the call and only read; the name
        // type is a static OID MIT only reads; the output name goes to a guard.
        #[allow(unsafe_code)]
        let major =
            unsafe { (api.import_name)(&mut minor, &mut name_buf, &mut name_type, target.out()) };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(api, major, minor));
        }
        let mut me = Self {
            ctx: Context::null(api),
            target,
        };
        let token = me.step(&[])?;
        Ok((me, token))
    }

    /// Checks the server's AP-REP and returns the SSPI session key both sides now share.
    pub fn complete(mut self, reply: &[u8]) -> Result<Zeroizing<Vec<u8>>, GssError> {
        if reply.is_empty() {
            return Err(GssError::other(
                "Kerberos: the server sent no AP-REP, so it did not prove who it is",
            ));
        }
        let more = self.step(reply)?;
        if !more.is_empty() {
            return Err(GssError::other("Kerberos: the exchange did not complete"));
        }
        self.ctx.session_key()
    }

    fn step(&mut self, input: &[u8]) -> Result<Vec<u8>, GssError> {
        let api = self.ctx.api();
        let mut mech = oid(&MECH_KRB5);
        let mut input = BufferDesc {
            length: input.len(),
            value: input.as_ptr().cast_mut().cast(),
        };
        let mut out = Buffer::empty(api);
        let (mut minor, mut flags, mut time) = (0u32, 0u32, 0u32);
        // SAFETY: default credential (null: the KRB5CCNAME cache); the context handle is the
        // guard's, null on the first call as RFC 2744 requires; target name from import_name;
        // `input` points at a slice alive for the call and only read; the output token goes to
        // a guard; null channel bindings and actual-mech output are allowed.
        #[allow(unsafe_code)]
        let major = unsafe {
            (api.init_sec_context)(
                &mut minor,
                ptr::null_mut(),
                self.ctx.out(),
                self.target.raw(),
                &mut mech,
                REQ_FLAGS,
                0,
                ptr::null_mut(),
                &mut input,
                ptr::null_mut(),
                out.out(),
                &mut flags,
                &mut time,
            )
        };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(api, major, minor));
        }
        let token = out.to_vec();
        if major & CONTINUE_NEEDED == 0 && token.is_empty() && flags & 2 == 0 {
            return Err(GssError::other(
                "Kerberos: mutual authentication was not granted",
            ));
        }
        Ok(token)
    }
}
