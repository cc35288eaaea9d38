//! Exit codes a script can rely on, and the one-line error every failing command prints.
//! The numbers are part of the CLI's public interface: add, never renumber.

use smbq_client::{Error, describe, status_name};
use smbq_wire::NtStatus;

/// Why a client command failed, as its exit status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Local files, protocol violations, anything without a better number.
    Other = 1,
    /// Bad arguments (clap uses 2 for its own parse errors too).
    Usage = 2,
    /// The server refused the credentials, or none could be had.
    Auth = 3,
    /// No such file or directory.
    NotFound = 4,
    AccessDenied = 5,
    /// The transport could not connect, or the connection was lost or stalled.
    Connection = 6,
    /// SMB over QUIC: the server's certificate is not trusted, or not the pinned one.
    Trust = 7,
    /// Any other NTSTATUS from the server (exists, not empty, in use, disk full, ...).
    Server = 8,
    /// The share does not exist: a configuration problem rather than a missing file.
    NoShare = 9,
    /// Ctrl-C (128 + SIGINT, as shells report it).
    Interrupted = 130,
}

impl Code {
    pub fn as_u8(self) -> u8 {
        self as u8
    }
}

/// Shown at the end of `smbq --help`.
pub const EXIT_CODES_HELP: &str = "\
Client commands (ls stat cat get put rm mkdir rmdir mv cp shares) take
smb://[DOMAIN;][USER@]HOST[:PORT]/SHARE[/PATH][?tcp-port=N&quic-port=N]. Without USER@ they log
on as the local user name (--anonymous: a null session). They race SMB over QUIC (port 443)
and TCP (port 445): QUIC first, TCP after 250 ms or as soon as QUIC fails; the first to connect
wins and is remembered per server (~/.cache/smbq/transports). A QUIC certificate that is not
trusted is an error, never a fallback. :PORT is used for both transports; --tcp-port and
--quic-port set one; --transport pins one.
Password: --credentials FILE (username =, password =, domain = lines), else $SMBQ_PASSWORD,
else a prompt on the terminal.

Exit status of client commands:
  0    success
  1    other error (local files, protocol errors)
  2    bad arguments
  3    authentication failed (NT_STATUS_LOGON_FAILURE, ...) or no password available
  4    file or directory not found (NT_STATUS_OBJECT_NAME_NOT_FOUND,
       NT_STATUS_OBJECT_PATH_NOT_FOUND)
  5    access denied (NT_STATUS_ACCESS_DENIED; QUIC: client certificate required or refused)
  6    connection failed, lost or stalled
  7    QUIC: server certificate not trusted, or not the pinned one
  8    any other NTSTATUS from the server (exists, not empty, in use, disk full, ...)
  9    no such share (NT_STATUS_BAD_NETWORK_NAME)
  130  interrupted (Ctrl-C); a partial transfer is kept as NAME.part for --continue";

/// The exit code an NTSTATUS maps to.
pub fn status_code(s: NtStatus) -> Code {
    match s {
        NtStatus::LOGON_FAILURE
        | NtStatus::WRONG_PASSWORD
        | NtStatus::ACCOUNT_DISABLED
        | NtStatus::ACCOUNT_RESTRICTION
        | NtStatus::PASSWORD_EXPIRED => Code::Auth,
        NtStatus::OBJECT_NAME_NOT_FOUND
        | NtStatus::OBJECT_PATH_NOT_FOUND
        | NtStatus::NO_SUCH_FILE => Code::NotFound,
        NtStatus::BAD_NETWORK_NAME => Code::NoShare,
        NtStatus::ACCESS_DENIED | NtStatus::PRIVILEGE_NOT_HELD => Code::AccessDenied,
        // The server tore the session or share down under us: as good as a lost connection.
        NtStatus::NETWORK_NAME_DELETED | NtStatus::USER_SESSION_DELETED => Code::Connection,
        _ => Code::Server,
    }
}

/// The exit code a client-library error maps to.
pub fn error_code(e: &Error) -> Code {
    match e {
        Error::Status { status, .. } => status_code(*status),
        Error::Auth(_) | Error::NoKerberos(_) => Code::Auth,
        Error::Disconnected(_) | Error::Timeout(_) | Error::Io(_) => Code::Connection,
        // A local file's failure: the command line's own files, "other" as documented.
        Error::Protocol(_)
        | Error::Rpc { .. }
        | Error::Integrity(_)
        | Error::Local { .. }
        | Error::Task { .. } => Code::Other,
    }
}

/// What a client-library error says, without the operation name (the command line already
/// says what was attempted): `NT_STATUS_OBJECT_NAME_NOT_FOUND (no such file or directory)`.
pub fn error_text(e: &Error) -> String {
    match e {
        Error::Status { status, .. } => format!("{} ({})", status_name(*status), describe(*status)),
        other => other.to_string(),
    }
}

/// A failed command: its exit code and the line printed after `smbq: `.
#[derive(Debug)]
pub struct CliError {
    pub code: Code,
    pub message: String,
    /// The message already names the command and URL.
    located: bool,
    /// Already printed (commands on several URLs report each failure as it happens).
    pub reported: bool,
}

impl CliError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            located: false,
            reported: false,
        }
    }

    /// A failure whose lines were printed already; only the exit code is left.
    pub fn reported(code: Code) -> Self {
        Self {
            reported: true,
            ..Self::new(code, String::new())
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Code::Usage, message)
    }

    pub fn other(message: impl Into<String>) -> Self {
        Self::new(Code::Other, message)
    }

    /// Prefixes `cmd target: ` once, so nested helpers can all add context safely.
    pub fn at(mut self, cmd: &str, target: &str) -> Self {
        if !self.located {
            self.message = format!("{cmd} {target}: {}", self.message);
            self.located = true;
        }
        self
    }

    /// Appends a note (for example where partial data was left).
    pub fn note(mut self, note: &str) -> Self {
        self.message = format!("{}; {note}", self.message);
        self
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        Self::new(error_code(&e), error_text(&e))
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // One line, whatever a server or the OS put in the text.
        let one_line: String = self
            .message
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        write!(f, "smbq: {one_line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_client::{AuthError, ProtocolError};

    #[test]
    fn statuses_map_to_documented_codes() {
        assert_eq!(status_code(NtStatus::LOGON_FAILURE), Code::Auth);
        assert_eq!(status_code(NtStatus::WRONG_PASSWORD), Code::Auth);
        assert_eq!(status_code(NtStatus::OBJECT_NAME_NOT_FOUND), Code::NotFound);
        assert_eq!(status_code(NtStatus::OBJECT_PATH_NOT_FOUND), Code::NotFound);
        assert_eq!(status_code(NtStatus::BAD_NETWORK_NAME), Code::NoShare);
        assert_eq!(status_code(NtStatus::ACCESS_DENIED), Code::AccessDenied);
        assert_eq!(status_code(NtStatus::OBJECT_NAME_COLLISION), Code::Server);
        assert_eq!(status_code(NtStatus::DIRECTORY_NOT_EMPTY), Code::Server);
        assert_eq!(status_code(NtStatus(0xC0FF_EE00)), Code::Server);
    }

    #[test]
    fn client_errors_map_to_codes() {
        assert_eq!(
            error_code(&Error::Disconnected("reset".into())),
            Code::Connection
        );
        assert_eq!(error_code(&Error::Timeout("read")), Code::Connection);
        let auth = AuthError::Mechanism(smbq_auth::AuthError::Rejected);
        assert_eq!(error_code(&Error::Auth(auth)), Code::Auth);
        let auth = AuthError::KeyDerivation(smbq_crypto::CryptoError::MissingPreauthHash);
        assert_eq!(error_code(&Error::Auth(auth)), Code::Auth);
        assert_eq!(
            error_code(&Error::NoKerberos("no ticket".into())),
            Code::Auth
        );
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(error_code(&Error::Io(io)), Code::Connection);
        let short = ProtocolError::ShortWrite {
            written: 1,
            asked: 2,
        };
        assert_eq!(error_code(&Error::Protocol(short)), Code::Other);
        let overrun = ProtocolError::ReadOverrun { got: 3, asked: 2 };
        assert_eq!(error_code(&Error::Protocol(overrun)), Code::Other);
        let malformed =
            ProtocolError::Malformed(smbq_wire::DecodeError::Truncated { need: 64, have: 0 });
        assert_eq!(error_code(&Error::Protocol(malformed)), Code::Other);
        assert_eq!(error_code(&Error::Integrity("signature")), Code::Other);
        let rpc = Error::Rpc {
            op: "srvsvc bind",
            source: smbq_client::RpcClientError::Protocol("fragmented bind_ack"),
        };
        assert!(
            rpc.to_string().starts_with("protocol error: srvsvc bind: "),
            "{rpc}"
        );
        assert_eq!(error_code(&rpc), Code::Other);
        let local = Error::Local {
            what: "local write",
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        assert_eq!(error_code(&local), Code::Other);
        assert_eq!(
            error_code(&Error::Task {
                what: "read",
                source: cancelled()
            }),
            Code::Other
        );
        let e = Error::Status {
            op: "CREATE",
            status: NtStatus::ACCESS_DENIED,
        };
        assert_eq!(error_code(&e), Code::AccessDenied);
    }

    /// A JoinError as a parallel transfer sees one: its task aborted.
    fn cancelled() -> tokio::task::JoinError {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let task = tokio::spawn(std::future::pending::<()>());
            task.abort();
            task.await.expect_err("aborted")
        })
    }

    #[test]
    fn messages_keep_what_scripts_and_people_look_for() {
        let short = Error::from(ProtocolError::ShortWrite {
            written: 4096,
            asked: 8192,
        });
        assert_eq!(
            short.to_string(),
            "protocol error: short write: 4096 of 8192 bytes"
        );
        let bad = Error::from(smbq_wire::DecodeError::Truncated { need: 64, have: 0 });
        assert!(
            bad.to_string()
                .starts_with("protocol error: malformed response: ")
        );
        let auth = Error::Auth(AuthError::Mechanism(smbq_auth::AuthError::Rejected));
        assert!(auth.to_string().starts_with("authentication failed: "));
        let task = Error::Task {
            what: "write",
            source: cancelled(),
        };
        assert!(task.to_string().starts_with("write task failed: "));
        let local = Error::Local {
            what: "local write",
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        };
        assert!(local.to_string().starts_with("local write: "));
    }

    #[test]
    fn codes_are_the_documented_numbers() {
        let all = [
            (Code::Other, 1),
            (Code::Usage, 2),
            (Code::Auth, 3),
            (Code::NotFound, 4),
            (Code::AccessDenied, 5),
            (Code::Connection, 6),
            (Code::Trust, 7),
            (Code::Server, 8),
            (Code::Interrupted, 130),
        ];
        for (c, n) in all {
            assert_eq!(c.as_u8(), n);
            assert!(
                EXIT_CODES_HELP.contains(&format!("\n  {n} ")),
                "{n} undocumented"
            );
        }
    }

    #[test]
    fn message_names_the_status_and_its_meaning_without_the_op() {
        let e: CliError = Error::Status {
            op: "CREATE",
            status: NtStatus::OBJECT_NAME_NOT_FOUND,
        }
        .into();
        let line = e
            .at("get", "smb://u@h/share/x")
            .at("ignored", "twice")
            .to_string();
        assert_eq!(
            line,
            "smbq: get smb://u@h/share/x: NT_STATUS_OBJECT_NAME_NOT_FOUND (no such file or directory)"
        );
    }

    #[test]
    fn message_stays_on_one_line() {
        let e = CliError::other("bad\nthing\r");
        assert_eq!(e.to_string(), "smbq: bad thing ");
    }
}
