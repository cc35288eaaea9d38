//! Owners of the handles and buffers MIT's library allocates: each releases what it holds on
//! drop, so every early return releases them too.

use std::ptr;

use zeroize::Zeroizing;

use crate::api::{
    Api, BufferDesc, BufferSetDesc, Handle, KeyValueElement, KeyValueSet, OidDesc, OidSetDesc,
};
use crate::{ERROR_MASK, GssError, INDEFINITE, MECH_KRB5};

/// What kind of GSS-API handle an [`Owned`] holds, and how it is given back.
pub(crate) trait Kind {
    /// Releases `raw` (non-null), once.
    fn release(api: &'static Api, raw: &mut Handle);
}

/// A handle MIT allocated (`gss_cred_id_t`, `gss_ctx_id_t`, `gss_name_t`), released on drop.
pub(crate) struct Owned<K: Kind> {
    api: &'static Api,
    raw: Handle,
    kind: std::marker::PhantomData<K>,
}

impl<K: Kind> Owned<K> {
    pub fn null(api: &'static Api) -> Self {
        Self {
            api,
            raw: ptr::null_mut(),
            kind: std::marker::PhantomData,
        }
    }
    /// Where MIT writes the handle.
    pub fn out(&mut self) -> *mut Handle {
        &mut self.raw
    }
    pub fn raw(&self) -> Handle {
        self.raw
    }
    pub fn api(&self) -> &'static Api {
        self.api
    }
}

impl<K: Kind> Drop for Owned<K> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            K::release(self.api, &mut self.raw);
        }
    }
}

pub(crate) struct CredKind;
pub(crate) struct ContextKind;
pub(crate) struct NameKind;

/// A credential handle.
pub(crate) type Cred = Owned<CredKind>;
/// A security context handle, used by one thread at a time.
pub(crate) type Context = Owned<ContextKind>;
/// A name handle.
pub(crate) type Name = Owned<NameKind>;

impl Kind for CredKind {
    fn release(api: &'static Api, raw: &mut Handle) {
        let mut minor = 0;
        // SAFETY: `raw` came from gss_acquire_cred_from and Owned releases it exactly once.
        #[allow(unsafe_code)]
        unsafe {
            (api.release_cred)(&mut minor, raw);
        }
    }
}

impl Kind for ContextKind {
    fn release(api: &'static Api, raw: &mut Handle) {
        let mut minor = 0;
        // SAFETY: `raw` came from gss_accept/init_sec_context and is deleted exactly once; a
        // null output token is allowed (RFC 2744 section 5.9).
        #[allow(unsafe_code)]
        unsafe {
            (api.delete_sec_context)(&mut minor, raw, ptr::null_mut());
        }
    }
}

impl Kind for NameKind {
    fn release(api: &'static Api, raw: &mut Handle) {
        let mut minor = 0;
        // SAFETY: `raw` came from MIT (accept, inquire_context, import_name) and is released
        // exactly once.
        #[allow(unsafe_code)]
        unsafe {
            (api.release_name)(&mut minor, raw);
        }
    }
}

// SAFETY: MIT's krb5 credential handles lock themselves (a mutex in krb5_gss_cred_id_rec), so
// one may be used for accepting from several threads at once and released from any thread.
#[allow(unsafe_code)]
unsafe impl Send for Owned<CredKind> {}
// SAFETY: as above: concurrent gss_accept_sec_context calls on one acceptor credential are
// what MIT's mechanism is built for.
#[allow(unsafe_code)]
unsafe impl Sync for Owned<CredKind> {}

impl Owned<CredKind> {
    /// `gss_acquire_cred_from` for the Kerberos mechanism, any principal, from the cred store
    /// `store` (name, value) pairs (MIT 1.11+: "keytab", "rcache", "ccache"; none: the
    /// defaults). `usage` is GSS_C_INITIATE (1) or GSS_C_ACCEPT (2). Returns the credential
    /// and the seconds it stays valid.
    pub fn acquire(
        api: &'static Api,
        usage: i32,
        store: &[(&std::ffi::CStr, &std::ffi::CStr)],
    ) -> Result<(Self, u32), GssError> {
        let mut elements: Vec<KeyValueElement> = store
            .iter()
            .map(|(k, v)| KeyValueElement {
                key: k.as_ptr(),
                value: v.as_ptr(),
            })
            .collect();
        let store = KeyValueSet {
            count: elements.len() as u32,
            elements: elements.as_mut_ptr(),
        };
        // Kerberos only: with every mechanism, MIT would hand a token to whatever mechanism
        // it names (an NTLM plugin in /etc/gss/mech.d, say), and `ntlm = false` would depend
        // on that mechanism failing.
        let mut krb5 = OidDesc {
            length: MECH_KRB5.len() as u32,
            elements: MECH_KRB5.as_ptr().cast_mut().cast(),
        };
        let mut mechs = OidSetDesc {
            count: 1,
            elements: &mut krb5,
        };
        let mut cred = Self::null(api);
        let (mut minor, mut time_rec) = (0u32, 0u32);
        // SAFETY: every pointer is valid for the call and only read: `store` with the C
        // strings its elements point to (borrowed from the caller) and `mechs` with the static
        // OID live until this function returns; a null name means any principal; the handle
        // is written to `cred`, whose guard releases it; `time_rec` is a writable local and a
        // null actual-mechs output is allowed.
        #[allow(unsafe_code)]
        let major = unsafe {
            (api.acquire_cred_from)(
                &mut minor,
                ptr::null_mut(),
                INDEFINITE,
                &mut mechs,
                usage,
                &store,
                cred.out(),
                ptr::null_mut(),
                &mut time_rec,
            )
        };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(api, major, minor));
        }
        Ok((cred, time_rec))
    }
}

impl Owned<NameKind> {
    /// The name as text, e.g. `alice@SMBQ.TEST`.
    pub fn display(&self) -> Result<String, GssError> {
        if self.raw.is_null() {
            return Err(GssError::other("Kerberos: the context names no principal"));
        }
        let mut out = Buffer::empty(self.api);
        let mut minor = 0;
        // SAFETY: `raw` is a valid name from MIT; the output buffer goes to a guard; a null
        // output name type is allowed.
        #[allow(unsafe_code)]
        let major =
            unsafe { (self.api.display_name)(&mut minor, self.raw, out.out(), ptr::null_mut()) };
        if major & ERROR_MASK != 0 {
            return Err(GssError::new(self.api, major, minor));
        }
        String::from_utf8(out.to_vec())
            .map_err(|_| GssError::other("Kerberos: a principal name is not UTF-8"))
    }
}

/// An output buffer MIT allocated (`gss_buffer_desc`).
pub(crate) struct Buffer {
    api: &'static Api,
    desc: BufferDesc,
}

impl Buffer {
    pub fn empty(api: &'static Api) -> Self {
        Self {
            api,
            desc: BufferDesc {
                length: 0,
                value: ptr::null_mut(),
            },
        }
    }
    pub fn out(&mut self) -> *mut BufferDesc {
        &mut self.desc
    }
    pub fn to_vec(&self) -> Vec<u8> {
        bytes(&self.desc).to_vec()
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if !self.desc.value.is_null() {
            let mut minor = 0;
            // SAFETY: the buffer was filled by MIT and is released exactly once.
            #[allow(unsafe_code)]
            unsafe {
                (self.api.release_buffer)(&mut minor, &mut self.desc);
            }
        }
    }
}

/// A buffer set MIT allocated (`gss_buffer_set_t`), as inquire-by-OID returns.
pub(crate) struct BufferSet {
    api: &'static Api,
    raw: *mut BufferSetDesc,
}

impl BufferSet {
    pub fn null(api: &'static Api) -> Self {
        Self {
            api,
            raw: ptr::null_mut(),
        }
    }
    pub fn out(&mut self) -> *mut *mut BufferSetDesc {
        &mut self.raw
    }

    /// A copy of the first buffer, wiped when dropped (it holds key material).
    pub fn first(&self) -> Option<Zeroizing<Vec<u8>>> {
        if self.raw.is_null() {
            return None;
        }
        // SAFETY: a non-null set from MIT points at a valid gss_buffer_set_desc whose
        // `elements` array holds `count` buffers; only the first is read, when count > 0.
        #[allow(unsafe_code)]
        let first = unsafe {
            let set = &*self.raw;
            if set.count == 0 || set.elements.is_null() {
                return None;
            }
            &*set.elements
        };
        Some(Zeroizing::new(bytes(first).to_vec()))
    }
}

impl Drop for BufferSet {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            let mut minor = 0;
            // SAFETY: the set came from MIT and is released exactly once (MIT zeroes nothing,
            // but the copy we keep is wiped by Zeroizing).
            #[allow(unsafe_code)]
            unsafe {
                (self.api.release_buffer_set)(&mut minor, &mut self.raw);
            }
        }
    }
}

/// The bytes of a buffer MIT filled.
fn bytes(desc: &BufferDesc) -> &[u8] {
    if desc.value.is_null() || desc.length == 0 {
        return &[];
    }
    // SAFETY: MIT sets `value` to an allocation of `length` readable bytes, which stays valid
    // until the buffer is released, and the borrow of `desc` keeps that from happening first.
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts(desc.value.cast::<u8>(), desc.length)
    }
}
