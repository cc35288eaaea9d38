//! The GSS-API entry points smbq uses (RFC 2744 C bindings, MIT's `gssapi.h` layout), looked
//! up once in `libgssapi_krb5.so.2` and kept for the life of the process.

use std::ffi::{c_char, c_int, c_void};
use std::sync::OnceLock;

use crate::GssError;

pub(crate) type Handle = *mut c_void;

#[repr(C)]
pub(crate) struct BufferDesc {
    pub length: usize,
    pub value: *mut c_void,
}

#[repr(C)]
pub(crate) struct OidDesc {
    pub length: u32,
    pub elements: *mut c_void,
}

#[repr(C)]
pub(crate) struct OidSetDesc {
    pub count: usize,
    pub elements: *mut OidDesc,
}

#[repr(C)]
pub(crate) struct BufferSetDesc {
    pub count: usize,
    pub elements: *mut BufferDesc,
}

#[repr(C)]
pub(crate) struct KeyValueElement {
    pub key: *const c_char,
    pub value: *const c_char,
}

#[repr(C)]
pub(crate) struct KeyValueSet {
    pub count: u32,
    pub elements: *mut KeyValueElement,
}

type AcquireCredFrom = unsafe extern "C" fn(
    *mut u32,
    Handle,
    u32,
    *mut OidSetDesc,
    c_int,
    *const KeyValueSet,
    *mut Handle,
    *mut *mut c_void,
    *mut u32,
) -> u32;
type AcceptSecContext = unsafe extern "C" fn(
    *mut u32,
    *mut Handle,
    Handle,
    *mut BufferDesc,
    *mut c_void,
    *mut Handle,
    *mut *mut OidDesc,
    *mut BufferDesc,
    *mut u32,
    *mut u32,
    *mut Handle,
) -> u32;
type InquireContext = unsafe extern "C" fn(
    *mut u32,
    Handle,
    *mut Handle,
    *mut Handle,
    *mut u32,
    *mut *mut OidDesc,
    *mut u32,
    *mut c_int,
    *mut c_int,
) -> u32;
type ImportName = unsafe extern "C" fn(*mut u32, *mut BufferDesc, *mut OidDesc, *mut Handle) -> u32;
type InitSecContext = unsafe extern "C" fn(
    *mut u32,
    Handle,
    *mut Handle,
    Handle,
    *mut OidDesc,
    u32,
    u32,
    *mut c_void,
    *mut BufferDesc,
    *mut *mut OidDesc,
    *mut BufferDesc,
    *mut u32,
    *mut u32,
) -> u32;
type DisplayName =
    unsafe extern "C" fn(*mut u32, Handle, *mut BufferDesc, *mut *mut OidDesc) -> u32;
type ReleaseHandle = unsafe extern "C" fn(*mut u32, *mut Handle) -> u32;
type ReleaseBuffer = unsafe extern "C" fn(*mut u32, *mut BufferDesc) -> u32;
type InquireByOid =
    unsafe extern "C" fn(*mut u32, Handle, *mut OidDesc, *mut *mut BufferSetDesc) -> u32;
type ReleaseBufferSet = unsafe extern "C" fn(*mut u32, *mut *mut BufferSetDesc) -> u32;
type DeleteSecContext = unsafe extern "C" fn(*mut u32, *mut Handle, *mut BufferDesc) -> u32;
type DisplayStatus =
    unsafe extern "C" fn(*mut u32, u32, c_int, *mut OidDesc, *mut u32, *mut BufferDesc) -> u32;

pub(crate) struct Api {
    pub acquire_cred_from: AcquireCredFrom,
    pub accept_sec_context: AcceptSecContext,
    pub inquire_context: InquireContext,
    pub import_name: ImportName,
    pub init_sec_context: InitSecContext,
    pub display_name: DisplayName,
    pub release_name: ReleaseHandle,
    pub release_cred: ReleaseHandle,
    pub release_buffer: ReleaseBuffer,
    pub inquire_sec_context_by_oid: InquireByOid,
    pub release_buffer_set: ReleaseBufferSet,
    pub delete_sec_context: DeleteSecContext,
    pub display_status: DisplayStatus,
    /// Never unloaded: the function pointers above point into it.
    _library: libloading::Library,
}

const LIBRARY: &str = "libgssapi_krb5.so.2";

impl Api {
    /// The loaded library, or why it could not be loaded (with the package to install).
    pub fn get() -> Result<&'static Api, GssError> {
        static API: OnceLock<Result<Api, String>> = OnceLock::new();
        API.get_or_init(Self::load)
            .as_ref()
            .map_err(|e| GssError::other(e.clone()))
    }

    fn load() -> Result<Api, String> {
        let missing = |e: libloading::Error| {
            format!(
                "Kerberos needs MIT's GSS-API library {LIBRARY} (Debian: apt install libgssapi-krb5-2): {e}"
            )
        };
        // SAFETY: loading MIT's libgssapi_krb5 runs its initialisers, which only set up its own
        // state (error tables, mutexes); it has no constructor with preconditions on us.
        #[allow(unsafe_code)]
        let library = unsafe { libloading::Library::new(LIBRARY) }.map_err(missing)?;
        macro_rules! symbol {
            ($name:literal) => {{
                // SAFETY: the symbol is the RFC 2744 / MIT function of that name, and the type
                // it is read as is that function's C signature, as declared in MIT's gssapi.h
                // (and gssapi_ext.h for the cred store, gssapi_ext.h for inquire-by-OID). The
                // pointer stays valid because `library` is stored beside it and never dropped
                // while the process runs (the `Api` lives in a static).
                #[allow(unsafe_code)]
                let f = unsafe { *library.get($name).map_err(missing)? };
                f
            }};
        }
        Ok(Api {
            acquire_cred_from: symbol!(b"gss_acquire_cred_from"),
            accept_sec_context: symbol!(b"gss_accept_sec_context"),
            inquire_context: symbol!(b"gss_inquire_context"),
            import_name: symbol!(b"gss_import_name"),
            init_sec_context: symbol!(b"gss_init_sec_context"),
            display_name: symbol!(b"gss_display_name"),
            release_name: symbol!(b"gss_release_name"),
            release_cred: symbol!(b"gss_release_cred"),
            release_buffer: symbol!(b"gss_release_buffer"),
            inquire_sec_context_by_oid: symbol!(b"gss_inquire_sec_context_by_oid"),
            release_buffer_set: symbol!(b"gss_release_buffer_set"),
            delete_sec_context: symbol!(b"gss_delete_sec_context"),
            display_status: symbol!(b"gss_display_status"),
            _library: library,
        })
    }

    /// MIT's text for a major and minor status, e.g. "Unspecified GSS failure. Minor code may
    /// provide more information: Request is a replay".
    pub fn status_text(&'static self, major: u32, minor: u32) -> String {
        let mut parts = Vec::new();
        // GSS_C_GSS_CODE = 1, GSS_C_MECH_CODE = 2 (RFC 2744 section 5.11).
        for (status, kind) in [(major, 1), (minor, 2)] {
            if status == 0 {
                continue;
            }
            let mut context = 0u32;
            // A status has a few messages at most; the bound keeps a broken library from
            // looping us forever.
            for _ in 0..8 {
                let mut out = crate::handle::Buffer::empty(self);
                let mut m = 0;
                // SAFETY: `out` is a guard for the output buffer, released on drop; a null mech
                // OID means the default (krb5) mechanism; `context` is the RFC 2744 iteration
                // cookie, started at zero as required.
                #[allow(unsafe_code)]
                let r = unsafe {
                    (self.display_status)(
                        &mut m,
                        status,
                        kind,
                        std::ptr::null_mut(),
                        &mut context,
                        out.out(),
                    )
                };
                if r & crate::ERROR_MASK != 0 {
                    break;
                }
                parts.push(String::from_utf8_lossy(&out.to_vec()).into_owned());
                if context == 0 {
                    break;
                }
            }
        }
        if parts.is_empty() {
            format!("GSS-API major {major:#x}, minor {minor}")
        } else {
            parts.join(": ")
        }
    }
}
