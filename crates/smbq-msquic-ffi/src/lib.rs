//! The only unsafe code in smbq, kept to what the msquic crate cannot offer safely:
//!
//! - **Sends.** MsQuic reads a send's buffers until it reports SEND_COMPLETE, after the call
//!   returned. [`OwnedStream`] keeps every send's chunks in a table owned by the stream's own
//!   callback until that event, so they outlive MsQuic's use whatever the caller does.
//! - **Handles the peer gives away.** A NEW_CONNECTION or PEER_STREAM_STARTED event hands the
//!   application a handle it must close. [`adopt_new_connection`] and [`OwnedStream::adopt`]
//!   take the event itself, so a handle is adopted at most once and only from those events.
//! - **The server's certificate.** With portable certificates MsQuic passes the leaf as a
//!   `QUIC_BUFFER` of DER behind an untyped pointer. Only [`ClientConfig`] sets that flag and
//!   only [`connect`] installs the callback that reads it, so the pointer's type is known.
//!
//! Everything else (settings, listeners, configurations) is the msquic crate's own safe API,
//! re-exported as [`msquic`] so callers name the same types.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use tokio::sync::oneshot;

pub use msquic;
use msquic::{
    BufferRef, Configuration, Connection, ConnectionEvent, ConnectionRef, CredentialConfig,
    CredentialFlags, ListenerEvent, Registration, SendFlags, Settings, Status, StatusCode, Stream,
    StreamEvent, StreamOpenFlags, StreamRef, StreamShutdownFlags, StreamStartFlags,
};

// The library entry point, from the libmsquic.a the msquic crate links (its own declaration is
// private to it).
#[allow(unsafe_code)]
unsafe extern "C" {
    fn MsQuicOpenVersion(version: u32, api: *mut *const c_void) -> u32;
}

/// Takes one more reference on the MsQuic library, never given back, so that the msquic
/// crate's process-exit destructor (its MsQuicClose) does not tear the library down while a
/// registration is still closing on another thread or a connection is still open: MsQuic
/// asserts on that. At exit the kernel reclaims what the library holds.
/// Returns MsQuic's status if the open failed (the first registration then fails too).
pub fn hold_library_open() -> Result<(), u32> {
    static HELD: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let status = *HELD.get_or_init(|| {
        let mut table: *const c_void = std::ptr::null();
        // SAFETY: MsQuicOpenVersion writes one pointer to `table` (a valid, writable local)
        // and returns a status; version 2 is the API table the msquic crate also opens. The
        // table it allocates is deliberately never closed.
        #[allow(unsafe_code)]
        unsafe {
            MsQuicOpenVersion(2, &mut table)
        }
    });
    if status == 0 { Ok(()) } else { Err(status) }
}

/// Gives every partition of the MsQuic library the stateless reset key `key` (RFC 9000 10.3;
/// QUIC_PARAM_GLOBAL_STATELESS_RESET_KEY), in place of the random one each process draws: a
/// restarted server then derives the same reset token for a connection id as the process
/// before it did, so that process's clients hear a stateless reset at their next packet. It
/// is a library-wide setting and takes effect once a registration exists (MsQuic answers
/// INVALID_STATE before its lazy initialization).
pub fn set_stateless_reset_key(key: &[u8; 32]) -> Result<(), Status> {
    const _: () = assert!(msquic::ffi::QUIC_STATELESS_RESET_KEY_LENGTH == 32);
    // SAFETY: a global parameter takes a null handle; MsQuic reads exactly `BufferLength`
    // (32, QUIC_STATELESS_RESET_KEY_LENGTH) bytes from `key`, a valid array of that size, and
    // copies them into its partitions before returning.
    #[allow(unsafe_code)]
    unsafe {
        msquic::Api::set_param(
            std::ptr::null_mut(),
            msquic::ffi::QUIC_PARAM_GLOBAL_STATELESS_RESET_KEY,
            key.len() as u32,
            key.as_ptr() as *const c_void,
        )
    }
}

/// What a stream's handler returns: `Ok` for success, or a status such as PENDING.
pub type HandlerResult = Result<(), Status>;

/// One send's buffers: the chunks own the bytes, `refs` points into them for MsQuic. Moving
/// the entry moves neither the chunks' heap bytes nor the boxed `refs`.
struct Pending {
    _chunks: Vec<Bytes>,
    _refs: Box<[BufferRef]>,
    done: oneshot::Sender<bool>,
}

// SAFETY: `BufferRef` is a pointer and a length into `_chunks`, which `Pending` owns and which
// are immutable `Bytes` (Send + Sync); nothing reads through the pointers but MsQuic.
#[allow(unsafe_code)]
unsafe impl Send for Pending {}

/// Sends in flight on one stream, by the id passed to MsQuic as the send's context.
#[derive(Default)]
struct Sends {
    next: AtomicUsize,
    pending: Mutex<HashMap<usize, Pending>>,
}

impl Sends {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// SEND_COMPLETE: the context is only compared as a number, never dereferenced.
    fn complete(&self, context: *const c_void, cancelled: bool) {
        if let Some(p) = self.table().remove(&(context as usize)) {
            let _ = p.done.send(cancelled);
        }
    }
}

/// A stream smbq owns: closed (StreamClose, which first completes or cancels every send) when
/// dropped, and only then are the sends' buffers freed.
pub struct OwnedStream {
    // Field order matters: the stream closes before `sends` can be dropped.
    stream: Stream,
    sends: Arc<Sends>,
}

impl std::fmt::Debug for OwnedStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedStream").finish_non_exhaustive()
    }
}

/// Wraps a stream handler so SEND_COMPLETE releases the send's buffers before anything else.
fn with_sends<F>(
    sends: Arc<Sends>,
    mut handler: F,
) -> impl FnMut(StreamRef, StreamEvent) -> HandlerResult
where
    F: FnMut(StreamRef, StreamEvent) -> HandlerResult + Send + 'static,
{
    move |stream, event| match event {
        StreamEvent::SendComplete {
            cancelled,
            client_context,
        } => {
            sends.complete(client_context, cancelled);
            Ok(())
        }
        other => handler(stream, other),
    }
}

impl OwnedStream {
    /// Takes the stream a PEER_STREAM_STARTED event gives the application and installs
    /// `handler` for its events (SEND_COMPLETE is handled here). Any other event comes back.
    pub fn adopt<'a, F>(event: ConnectionEvent<'a>, handler: F) -> Result<Self, ConnectionEvent<'a>>
    where
        F: FnMut(StreamRef, StreamEvent) -> HandlerResult + Send + 'static,
    {
        let ConnectionEvent::PeerStreamStarted { stream, .. } = event else {
            return Err(event);
        };
        // SAFETY: PEER_STREAM_STARTED transfers the stream handle to the application, which
        // must close it; the event is consumed here, so the handle is adopted once.
        #[allow(unsafe_code)]
        let stream = unsafe { Stream::from_raw(stream.as_raw()) };
        let sends = Arc::new(Sends::default());
        stream.set_callback_handler(with_sends(sends.clone(), handler));
        Ok(Self { stream, sends })
    }

    /// Opens a bidirectional stream on `conn`; it reaches the peer with its first bytes.
    pub fn open<F>(conn: &Connection, handler: F) -> Result<Self, Status>
    where
        F: FnMut(StreamRef, StreamEvent) -> HandlerResult + Send + 'static,
    {
        let sends = Arc::new(Sends::default());
        let stream = Stream::open(
            conn,
            StreamOpenFlags::NONE,
            with_sends(sends.clone(), handler),
        )?;
        stream.start(StreamStartFlags::NONE)?;
        Ok(Self { stream, sends })
    }

    /// Queues `chunks` (FIN after them when `fin`); the receiver says whether MsQuic cancelled
    /// the send (`true`) or took it (`false`). The chunks are held until then.
    pub fn send(&self, chunks: Vec<Bytes>, fin: bool) -> Result<oneshot::Receiver<bool>, Status> {
        let refs: Box<[BufferRef]> = chunks.iter().map(|c| BufferRef::from(&c[..])).collect();
        let (done, wait) = oneshot::channel();
        let id = self.sends.next.fetch_add(1, Ordering::Relaxed);
        let flags = if fin { SendFlags::FIN } else { SendFlags::NONE };
        // The table is locked across the call so a SEND_COMPLETE on a MsQuic thread, which
        // takes the same lock, cannot look for the entry before it is there.
        let mut table = self.sends.table();
        let refs_ptr: &[BufferRef] = &refs;
        // SAFETY: the buffers are `chunks`' bytes, moved into the table entry for `id` below
        // and kept there until SEND_COMPLETE with context `id` removes it. That event is
        // handled by this stream's callback (`with_sends`), which holds the table; the table
        // outlives the stream handle (field order, and the callback is dropped only after
        // StreamClose, which completes every send first). On failure MsQuic keeps nothing.
        #[allow(unsafe_code)]
        let sent = unsafe { self.stream.send(refs_ptr, flags, id as *const c_void) };
        sent?;
        table.insert(
            id,
            Pending {
                _chunks: chunks,
                _refs: refs,
                done,
            },
        );
        Ok(wait)
    }

    pub fn shutdown(&self, flags: StreamShutdownFlags, code: u64) -> Result<(), Status> {
        self.stream.shutdown(flags, code)
    }

    /// Ends a receive the handler answered with PENDING: `n` bytes were consumed.
    pub fn receive_complete(&self, n: u64) {
        self.stream.receive_complete(n);
    }
}

/// What the listener learns of a new connection, owned.
#[derive(Clone, Debug)]
pub struct NewConnection {
    pub remote: Option<std::net::SocketAddr>,
    pub local: Option<std::net::SocketAddr>,
    /// SNI, as sent (may be empty).
    pub server_name: String,
}

/// Takes the connection a NEW_CONNECTION event gives the application. The caller must set its
/// callback handler and configuration before its listener callback returns (MsQuic's rule).
pub fn adopt_new_connection(event: ListenerEvent<'_>) -> Option<(Connection, NewConnection)> {
    let ListenerEvent::NewConnection { info, connection } = event else {
        return None;
    };
    let new = NewConnection {
        remote: info.remote_address.as_socket(),
        local: info.local_address.as_socket(),
        server_name: String::from_utf8_lossy(info.server_name).into_owned(),
    };
    Some((take_connection(connection), new))
}

fn take_connection(connection: ConnectionRef) -> Connection {
    // SAFETY: NEW_CONNECTION transfers the handle to the application, which must close it;
    // the event (and so its only ConnectionRef) is consumed by the caller.
    #[allow(unsafe_code)]
    unsafe {
        Connection::from_raw(connection.as_raw())
    }
}

/// A client configuration whose credential asks MsQuic to hand the server's leaf certificate
/// to [`connect`]'s verifier as DER and to leave judging it to that verifier.
pub struct ClientConfig(Configuration);

impl ClientConfig {
    pub fn new(
        reg: &Registration,
        alpn: &[BufferRef],
        settings: &Settings,
    ) -> Result<Self, Status> {
        let config = Configuration::open(reg, alpn, Some(settings))?;
        let cred = CredentialConfig::new_client().set_credential_flags(
            CredentialFlags::CLIENT
                | CredentialFlags::NO_CERTIFICATE_VALIDATION
                | CredentialFlags::INDICATE_CERTIFICATE_RECEIVED
                | CredentialFlags::USE_PORTABLE_CERTIFICATES,
        );
        config.load_credential(&cred)?;
        Ok(Self(config))
    }
}

/// Opens and starts a client connection to `remote`, naming `server_name` in SNI (MsQuic
/// resolves nothing: the address is set before the start). `verify` gets the server's leaf
/// certificate (DER) during the handshake; an `Err` fails the handshake with bad_certificate.
/// Every other event goes to `handler`.
pub fn connect<F, V>(
    reg: &Registration,
    config: &ClientConfig,
    remote: std::net::SocketAddr,
    server_name: &str,
    mut handler: F,
    mut verify: V,
) -> Result<Connection, Status>
where
    F: FnMut(ConnectionRef, ConnectionEvent) -> HandlerResult + Send + 'static,
    V: FnMut(&[u8]) -> Result<(), ()> + Send + 'static,
{
    let conn = Connection::open(reg, move |c, event| match event {
        ConnectionEvent::PeerCertificateReceived { certificate, .. } => {
            let der = leaf_der(certificate);
            match der.map(&mut verify) {
                Some(Ok(())) => Ok(()),
                _ => Err(Status::new(StatusCode::QUIC_STATUS_BAD_CERTIFICATE)),
            }
        }
        other => handler(c, other),
    })?;
    let addr = msquic::Addr::from(remote);
    // SAFETY: QUIC_PARAM_CONN_REMOTE_ADDRESS takes a QUIC_ADDR (the `Addr` union of
    // sockaddr_in/sockaddr_in6) of exactly its size; MsQuic copies it before returning.
    #[allow(unsafe_code)]
    let set = unsafe {
        msquic::Api::set_param(
            conn.as_raw(),
            msquic::ffi::QUIC_PARAM_CONN_REMOTE_ADDRESS,
            std::mem::size_of::<msquic::Addr>() as u32,
            &addr as *const msquic::Addr as *const c_void,
        )
    };
    set?;
    conn.start(&config.0, server_name, remote.port())?;
    Ok(conn)
}

/// The leaf certificate of a PEER_CERTIFICATE_RECEIVED event on a [`ClientConfig`] connection.
fn leaf_der<'a>(certificate: *mut c_void) -> Option<&'a [u8]> {
    if certificate.is_null() {
        return None;
    }
    // SAFETY: connections started by `connect` use a `ClientConfig`, whose credential has
    // USE_PORTABLE_CERTIFICATES: MsQuic then passes a valid QUIC_BUFFER holding the DER leaf,
    // alive for the duration of the callback, which is as long as the slice is used (the
    // verifier gets it by reference inside the callback).
    #[allow(unsafe_code)]
    let buffer = unsafe { &*(certificate as *const msquic::ffi::QUIC_BUFFER) };
    if buffer.Buffer.is_null() {
        return None;
    }
    // SAFETY: as above; `Length` bytes at `Buffer` are the certificate.
    #[allow(unsafe_code)]
    let der = unsafe { std::slice::from_raw_parts(buffer.Buffer, buffer.Length as usize) };
    Some(der)
}
