//! Structured decode errors. The engine maps them to a protocol violation (disconnect) or to an
//! NTSTATUS reply (usually STATUS_INVALID_PARAMETER).

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("truncated: need {need} bytes, have {have}")]
    Truncated { need: usize, have: usize },
    #[error("bad StructureSize: expected {expected}, got {got}")]
    StructureSize { expected: u16, got: u16 },
    #[error("offset {offset} + length {len} outside message of {total} bytes")]
    BadOffset {
        offset: usize,
        len: usize,
        total: usize,
    },
    #[error("bad protocol id")]
    BadProtocolId,
    #[error("invalid UTF-16 string")]
    BadString,
    #[error("invalid value in field {field}")]
    InvalidField { field: &'static str },
    #[error("length {len} exceeds limit {limit} in {field}")]
    TooLong {
        field: &'static str,
        len: usize,
        limit: usize,
    },
}
