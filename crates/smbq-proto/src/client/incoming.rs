//! Splitting a received (decrypted) frame into its messages (MS-SMB2 3.2.5.1.9).

use bytes::Bytes;
use smbq_wire::{HEADER_LEN, Header};

use super::{ClientError, ProtocolError};

/// Most messages one response frame may hold; more is a hostile server.
const MAX_COMPOUND: usize = 256;

/// One response message.
#[derive(Clone, Debug)]
pub struct Incoming {
    pub header: Header,
    /// The whole message, header included; for a non-last compound element, up to
    /// NextCommand (padding included, as signed).
    pub msg: Bytes,
    /// It arrived inside a transform header.
    pub encrypted: bool,
}

/// Splits `plain` by NextCommand. Every offset is checked: a NextCommand that is not
/// 8-aligned, points backwards, or leaves less than a header is a protocol error.
pub fn split_compound(plain: Bytes, encrypted: bool) -> Result<Vec<Incoming>, ClientError> {
    let mut out = Vec::new();
    let mut rest = plain;
    loop {
        if out.len() == MAX_COMPOUND {
            return Err(ProtocolError::TooLarge("too many messages in one frame").into());
        }
        let header = Header::decode(&rest)?;
        if !header.is_response() {
            return Err(ProtocolError::Violation("a request arrived from the server").into());
        }
        let next = header.next_command as usize;
        if next == 0 {
            out.push(Incoming {
                header,
                msg: rest,
                encrypted,
            });
            return Ok(out);
        }
        if !next.is_multiple_of(8) || next < HEADER_LEN || next > rest.len() {
            return Err(ProtocolError::NextCommand {
                next,
                frame: rest.len(),
            }
            .into());
        }
        let msg = rest.split_to(next);
        out.push(Incoming {
            header,
            msg,
            encrypted,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smbq_wire::header::flags;
    use smbq_wire::{Command, Writer};

    fn msg(next: u32, extra: usize) -> Vec<u8> {
        let h = Header {
            command: Command::ECHO,
            flags: flags::SERVER_TO_REDIR,
            next_command: next,
            ..Default::default()
        };
        let mut w = Writer::new();
        h.encode(&mut w);
        w.zeros(extra);
        w.into_vec()
    }

    #[test]
    fn splits_aligned_compound_and_keeps_padding() {
        let mut f = msg(72, 8);
        f.extend(msg(0, 4));
        let parts = split_compound(Bytes::from(f), false).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].msg.len(), 72);
        assert_eq!(parts[1].msg.len(), 68);
    }

    #[test]
    fn refuses_misaligned_short_and_outside_offsets() {
        for next in [70u32, 8, 4096] {
            let mut f = msg(next, 8);
            f.extend(msg(0, 4));
            let e = split_compound(Bytes::from(f), false).expect_err("refused");
            assert!(
                matches!(
                    e,
                    ClientError::Protocol(ProtocolError::NextCommand { next: n, frame: 140 })
                        if n == next as usize
                ),
                "{next}: {e:?}"
            );
        }
    }

    #[test]
    fn refuses_requests_and_truncation_at_every_length() {
        let mut req = msg(0, 0);
        req[16] = 0;
        let e = split_compound(Bytes::from(req), false).expect_err("a request");
        assert!(
            matches!(e, ClientError::Protocol(ProtocolError::Violation(_))),
            "{e:?}"
        );
        let e = split_compound(Bytes::from(msg(0, 0)).slice(..10), false).expect_err("short");
        assert!(
            matches!(e, ClientError::Protocol(ProtocolError::Malformed(_))),
            "{e:?}"
        );
        assert!(e.to_string().contains("malformed response"), "{e}");
        let mut f = msg(72, 8);
        f.extend(msg(0, 4));
        for n in 0..f.len() {
            let _ = split_compound(Bytes::copy_from_slice(&f[..n]), false);
        }
    }
}
