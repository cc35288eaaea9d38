//! MS-FSCC structures carried inside SMB2 QUERY_INFO, SET_INFO and QUERY_DIRECTORY buffers:
//! file attributes, access masks, information class codes, the per-class encoders/decoders,
//! directory enumeration entries, and the DOS wildcard matcher.

pub mod access;
pub mod attributes;
mod chain;
pub mod dir_info;
pub mod file_info;
mod fixed;
pub mod fs_info;
pub mod info_class;
pub mod reparse;
pub mod wildcard;

pub use info_class::{FileInfoClass, FsInfoClass};
