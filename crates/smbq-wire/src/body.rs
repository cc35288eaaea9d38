//! Two body layouts many SMB2 messages share, written once:
//!
//! - a body of StructureSize and reserved bytes only ([`empty_body!`]): ECHO, LOGOFF, CANCEL,
//!   TREE_DISCONNECT, the FLUSH and LOCK responses (StructureSize 4 and a reserved u16) and the
//!   SET_INFO response (StructureSize 2);
//! - the output-buffer body of the QUERY_DIRECTORY, QUERY_INFO and CHANGE_NOTIFY responses
//!   (MS-SMB2 2.2.34, 2.2.38, 2.2.36): StructureSize 9, a u16 offset counted from the header,
//!   a u32 length, then the buffer ([`decode_output_buffer`], [`encode_output_buffer`]).
//!
//! Offsets and lengths read here are checked once, by [`Reader::variable_buffer`] or
//! [`Reader::slice_at`].

use crate::cursor::{Reader, Writer, len32, to_usize};
use crate::error::DecodeError;
use crate::header::HEADER_LEN;

/// Checks a body of StructureSize `structure_size` followed by `reserved` ignored bytes.
pub(crate) fn decode_empty(
    msg: &[u8],
    structure_size: u16,
    reserved: usize,
) -> Result<(), DecodeError> {
    Reader::body(msg, structure_size)?.skip(reserved)
}

/// Writes StructureSize `structure_size` and `reserved` zero bytes.
pub(crate) fn encode_empty(w: &mut Writer, structure_size: u16, reserved: usize) {
    w.u16(structure_size).zeros(reserved);
}

/// Defines a message whose body is StructureSize and reserved bytes only: a unit struct with
/// `STRUCTURE_SIZE`, `decode(msg)` (the whole message, header included) and `encode(w)`.
macro_rules! empty_body {
    ($(#[$doc:meta])* $name:ident { structure_size: $size:expr, reserved: $reserved:expr $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
        pub struct $name;

        impl $name {
            pub const STRUCTURE_SIZE: u16 = $size;

            pub fn decode(msg: &[u8]) -> Result<Self, $crate::error::DecodeError> {
                $crate::body::decode_empty(msg, Self::STRUCTURE_SIZE, $reserved).map(|()| Self)
            }

            pub fn encode(&self, w: &mut $crate::cursor::Writer) {
                $crate::body::encode_empty(w, Self::STRUCTURE_SIZE, $reserved);
            }
        }
    };
}
pub(crate) use empty_body;

/// StructureSize of the output-buffer body (MS-SMB2 2.2.34, 2.2.36, 2.2.38).
pub(crate) const OUTPUT_BUFFER_STRUCTURE_SIZE: u16 = 9;
/// Where the output buffer starts, counted from the header (0x48).
pub(crate) const OUTPUT_BUFFER_OFFSET: usize = HEADER_LEN + 8;

/// How a decoded offset/length pair must lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Inside the message and, when not empty, at or after the fixed part
    /// ([`Reader::variable_buffer`]).
    AfterFixedPart,
    /// Anywhere inside the message ([`Reader::slice_at`]).
    InsideMessage,
}

/// Decodes an output-buffer body: StructureSize 9, OutputBufferOffset (u16), OutputBufferLength
/// (u32), and returns the buffer, borrowed from `msg` and checked once as `placement` says.
pub(crate) fn decode_output_buffer(msg: &[u8], placement: Placement) -> Result<&[u8], DecodeError> {
    let mut r = Reader::body(msg, OUTPUT_BUFFER_STRUCTURE_SIZE)?;
    let offset = usize::from(r.u16()?);
    let len = to_usize(r.u32()?);
    match placement {
        Placement::AfterFixedPart => r.variable_buffer(offset, len),
        Placement::InsideMessage => r.slice_at(offset, len),
    }
}

/// Writes an output-buffer body with the buffer at 0x48 (one zero byte if it is empty).
pub(crate) fn encode_output_buffer(w: &mut Writer, buffer: &[u8]) {
    w.u16(OUTPUT_BUFFER_STRUCTURE_SIZE)
        .u16(OUTPUT_BUFFER_OFFSET as u16)
        .u32(len32(buffer.len()))
        .buffer(buffer);
}

/// Defines a message with the output-buffer body: a struct with one borrowed `&[u8]` field,
/// `STRUCTURE_SIZE`, `decode(msg)` (checked as the [`Placement`] given says) and `encode(w)`.
macro_rules! output_buffer_body {
    ($(#[$doc:meta])* $name:ident { $(#[$fdoc:meta])* $field:ident, placement: $placement:ident $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Default)]
        pub struct $name<'a> {
            $(#[$fdoc])*
            pub $field: &'a [u8],
        }

        impl<'a> $name<'a> {
            pub const STRUCTURE_SIZE: u16 = $crate::body::OUTPUT_BUFFER_STRUCTURE_SIZE;

            /// Decodes a whole message; the buffer is borrowed from it.
            pub fn decode(msg: &'a [u8]) -> Result<Self, $crate::error::DecodeError> {
                let $field =
                    $crate::body::decode_output_buffer(msg, $crate::body::Placement::$placement)?;
                Ok(Self { $field })
            }

            /// Writes the body with the buffer at 0x48 (one zero byte if it is empty).
            pub fn encode(&self, w: &mut $crate::cursor::Writer) {
                $crate::body::encode_output_buffer(w, self.$field);
            }
        }
    };
}
pub(crate) use output_buffer_body;

/// A whole message for the decoders' tests: a zeroed 64-byte header, then `body`.
#[cfg(test)]
pub(crate) fn test_message(body: &[u8]) -> Vec<u8> {
    let mut m = vec![0u8; HEADER_LEN];
    m.extend_from_slice(body);
    m
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn with_header(body: &[u8]) -> Vec<u8> {
        test_message(body)
    }

    type Decode = fn(&[u8]) -> Result<(), DecodeError>;
    type Encode = fn(&mut Writer);

    /// Every message defined with [`empty_body!`]: its encoder and decoder.
    fn empty_bodies() -> Vec<(&'static str, u16, Encode, Decode)> {
        use crate::cancel::CancelRequest;
        use crate::echo::{EchoRequest, EchoResponse};
        use crate::flush::FlushResponse;
        use crate::lock::LockResponse;
        use crate::logoff::{LogoffRequest, LogoffResponse};
        use crate::set_info::SetInfoResponse;
        use crate::tree_connect::{TreeDisconnectRequest, TreeDisconnectResponse};
        macro_rules! row {
            ($t:ident) => {
                (
                    stringify!($t),
                    $t::STRUCTURE_SIZE,
                    (|w| $t.encode(w)) as Encode,
                    (|m| $t::decode(m).map(|d| assert_eq!(d, $t))) as Decode,
                )
            };
        }
        vec![
            row!(EchoRequest),
            row!(EchoResponse),
            row!(LogoffRequest),
            row!(LogoffResponse),
            row!(CancelRequest),
            row!(TreeDisconnectRequest),
            row!(TreeDisconnectResponse),
            row!(FlushResponse),
            row!(LockResponse),
            row!(SetInfoResponse),
        ]
    }

    #[test]
    fn empty_bodies_round_trip_and_hand_assembled() {
        for (name, size, encode, decode) in empty_bodies() {
            let mut w = Writer::new();
            encode(&mut w);
            let expect: &[u8] = if size == 4 { &[4, 0, 0, 0] } else { &[2, 0] };
            assert_eq!(w.as_slice(), expect, "{name}");
            decode(&with_header(w.as_slice())).unwrap();
        }
    }

    #[test]
    fn empty_bodies_reject_wrong_size_and_truncation() {
        for (name, size, _, decode) in empty_bodies() {
            let mut body = vec![8, 0, 0, 0];
            assert_eq!(
                decode(&with_header(&body)),
                Err(DecodeError::StructureSize {
                    expected: size,
                    got: 8
                }),
                "{name}"
            );
            body[0] = size as u8;
            body.truncate(usize::from(size) - 1);
            assert!(
                matches!(
                    decode(&with_header(&body)),
                    Err(DecodeError::Truncated { .. })
                ),
                "{name}"
            );
        }
    }

    #[test]
    fn output_buffer_round_trip_and_checks() {
        let data = [0x11u8; 40];
        let mut w = Writer::new();
        encode_output_buffer(&mut w, &data);
        assert_eq!(&w.as_slice()[..8], &[9, 0, 0x48, 0, 40, 0, 0, 0]);
        let m = with_header(w.as_slice());
        for placement in [Placement::AfterFixedPart, Placement::InsideMessage] {
            assert_eq!(decode_output_buffer(&m, placement).unwrap(), &data);
        }
        let mut w = Writer::new();
        encode_output_buffer(&mut w, &[]);
        assert_eq!(w.as_slice(), &[9, 0, 0x48, 0, 0, 0, 0, 0, 0]);
        let empty = with_header(w.as_slice());
        assert!(
            decode_output_buffer(&empty, Placement::AfterFixedPart)
                .unwrap()
                .is_empty()
        );
        // An offset inside the fixed part: only the stricter placement refuses it.
        let mut inside = m.clone();
        inside[HEADER_LEN + 2] = 0x40;
        assert!(matches!(
            decode_output_buffer(&inside, Placement::AfterFixedPart),
            Err(DecodeError::BadOffset { offset: 0x40, .. })
        ));
        assert!(decode_output_buffer(&inside, Placement::InsideMessage).is_ok());
        // A length past the end of the message.
        let mut long = m.clone();
        long[HEADER_LEN + 4] = 41;
        for placement in [Placement::AfterFixedPart, Placement::InsideMessage] {
            assert!(matches!(
                decode_output_buffer(&long, placement),
                Err(DecodeError::BadOffset { len: 41, .. })
            ));
        }
    }
}
