//! A declarative form for the many fixed-size, all-integer information classes, so each one is
//! its field list (in wire order) and nothing else to get wrong.

use crate::cursor::{Reader, Writer};
use crate::error::DecodeError;

/// A little-endian scalar field of a fixed-size class.
pub(crate) trait Field: Sized {
    fn put(&self, w: &mut Writer);
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

impl Field for u8 {
    fn put(&self, w: &mut Writer) {
        w.u8(*self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u8()
    }
}
impl Field for u16 {
    fn put(&self, w: &mut Writer) {
        w.u16(*self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u16()
    }
}
impl Field for u32 {
    fn put(&self, w: &mut Writer) {
        w.u32(*self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u32()
    }
}
impl Field for u64 {
    fn put(&self, w: &mut Writer) {
        w.u64(*self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u64()
    }
}
/// MS-FSCC 2.1.8 BOOLEAN: one byte, any non-zero value is TRUE.
impl Field for bool {
    fn put(&self, w: &mut Writer) {
        w.u8(u8::from(*self));
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(r.u8()? != 0)
    }
}
/// `buf` must hold at least `min` bytes; a shorter SET_INFO buffer is the handler's
/// STATUS_INFO_LENGTH_MISMATCH.
pub(crate) fn need(buf: &[u8], min: usize) -> Result<(), DecodeError> {
    if buf.len() < min {
        return Err(DecodeError::Truncated {
            need: min,
            have: buf.len(),
        });
    }
    Ok(())
}

/// Declares a fixed-size class: the struct, `LEN`/`MIN_LEN`, `encode`, `decode`, `to_bytes`.
/// `reserved` is the count of trailing zero bytes the spec puts after the fields.
macro_rules! fixed_class {
    (
        $(#[$meta:meta])*
        $name:ident, len = $len:expr, reserved = $res:expr,
        { $($(#[$fmeta:meta])* $field:ident : $ty:ty),* $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $name {
            /// Exact encoded size.
            pub const LEN: usize = $len;
            /// Smallest buffer `decode` accepts (the handler answers a shorter SET_INFO buffer
            /// with STATUS_INFO_LENGTH_MISMATCH).
            pub const MIN_LEN: usize = $len;

            pub fn encode(&self, w: &mut $crate::cursor::Writer) {
                $($crate::fscc::fixed::Field::put(&self.$field, w);)*
                w.zeros($res);
            }

            /// Decodes the first `LEN` bytes of `buf`; extra bytes are ignored, as Windows does
            /// for SET_INFO buffers longer than the class.
            pub fn decode(buf: &[u8]) -> Result<Self, $crate::error::DecodeError> {
                $crate::fscc::fixed::need(buf, Self::LEN)?;
                let mut r = $crate::cursor::Reader::new(buf);
                Ok(Self { $($field: $crate::fscc::fixed::Field::get(&mut r)?,)* })
            }

            pub fn to_bytes(&self) -> Vec<u8> {
                let mut w = $crate::cursor::Writer::with_capacity(Self::LEN);
                self.encode(&mut w);
                w.into_vec()
            }
        }
    };
}
pub(crate) use fixed_class;
