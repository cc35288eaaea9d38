//! The client role of an SMB2/3 connection, sans-IO: what a client must compute and check
//! (negotiate offer and answer, SESSION_SETUP legs with the preauth hash, key derivation,
//! signing, sealing, opening and splitting responses). The async client in `smbq-client`
//! owns the sockets, message ids and credits; everything here is deterministic given its input.

mod config;
mod incoming;
mod negotiate;
mod session;
mod setup;

pub use config::{ClientConfig, EncryptionPolicy};
pub use incoming::{Incoming, split_compound};
pub use negotiate::{
    Negotiated, negotiate_request, parse_negotiate_response, smb1_negotiate_request,
};
pub use session::SessionCrypto;
pub use setup::{SessionSetup, SetupStep};

use smbq_crypto::CryptoError;
use smbq_wire::{Dialect, NtStatus};

/// Why a client-side step failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error status.
    #[error("{op}: server returned {status:?}")]
    Status { op: &'static str, status: NtStatus },
    /// The server sent something the protocol does not allow.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// A signature or an AEAD tag did not verify.
    #[error("integrity check failed: {0}")]
    Integrity(&'static str),
    /// Authentication failed on the client's side (bad challenge, unsupported mechanism).
    #[error("authentication: {0}")]
    Auth(#[from] AuthError),
}

impl From<smbq_wire::DecodeError> for ClientError {
    fn from(e: smbq_wire::DecodeError) -> Self {
        Self::Protocol(ProtocolError::Malformed(e))
    }
}

/// What was wrong with what the server sent, or why the client would not go on. Shared with
/// `smbq-client`, whose `Error::Protocol` carries it too, so a caller can match on it.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// A message (or a structure in it) does not decode.
    #[error("malformed response: {0}")]
    Malformed(smbq_wire::DecodeError),
    /// The server broke a rule of the protocol; the text says which.
    #[error("{0}")]
    Violation(&'static str),
    /// A compressed response that was refused (MS-SMB2 3.2.5.1.1.2).
    #[error("{0}")]
    Compression(smbq_compress::DecompressError),
    /// A compound's NextCommand is unaligned, points backwards or past the frame.
    #[error("bad NextCommand {next} in a frame of {frame}")]
    NextCommand { next: usize, frame: usize },
    /// NEGOTIATE chose a dialect the client did not offer.
    #[error("server chose dialect {0:?}, which was not offered")]
    DialectNotOffered(Dialect),
    /// Something exceeds a limit of the protocol, of the negotiation or of this client.
    #[error("{0}")]
    TooLarge(&'static str),
    /// A response (or a header to build a request on) that should be there is not.
    #[error("{0}")]
    Missing(&'static str),
    /// A WRITE answered with fewer bytes than it was given.
    #[error("short write: {written} of {asked} bytes")]
    ShortWrite { written: u64, asked: u64 },
    /// A server-side copy (copychunk) copied fewer bytes than asked.
    #[error("server copied less than asked: {copied} of {asked} bytes")]
    ShortCopy { copied: u64, asked: u64 },
    /// A READ answered with more bytes than it asked for.
    #[error("READ returned more than asked: {got} of {asked} bytes")]
    ReadOverrun { got: usize, asked: u32 },
    /// What the session or share needs and the connection cannot give (multichannel not
    /// offered, encryption required without a cipher), or a request the client refuses.
    #[error("{0}")]
    Unsupported(&'static str),
    /// The share requires encryption and no cipher was negotiated.
    #[error("share {0} requires encryption but no cipher was negotiated")]
    ShareNeedsEncryption(String),
    /// A file read whole is larger than the caller's limit.
    #[error("{path} is larger than {max} bytes")]
    FileTooLarge { path: String, max: usize },
    /// The server listed a name that cannot be one path component (`/`, `\`, `..`, ...).
    #[error("server listed an impossible name {0:?}")]
    BadName(String),
}

/// Why the client could not authenticate or derive the session's keys.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The NTLM or Kerberos initiator refused the server's token.
    #[error("{0}")]
    Mechanism(#[from] smbq_auth::AuthError),
    /// Kerberos is one leg; the server asked for another.
    #[error("Kerberos: the server asked for a second leg")]
    KerberosSecondLeg,
    /// The session's keys could not be derived (MS-SMB2 3.2.5.3.1).
    #[error("key derivation: {0}")]
    KeyDerivation(#[source] CryptoError),
    /// The signing key does not fit the negotiated signing algorithm.
    #[error("signing key: {0}")]
    SigningKey(#[source] CryptoError),
}
