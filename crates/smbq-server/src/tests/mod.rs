//! Handler tests through `Server::handle`, on a temporary directory served by `PosixVfs`,
//! with requests built by the smbq-wire encoders.
#![allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::expect_used)]

mod channel_tests;
mod copychunk_tests;
mod create_tests;
mod dir_tests;
mod durable_tests;
mod file_id_tests;
mod harness;
mod info_tests;
mod io_tests;
mod lock_tests;
mod meta_tests;
mod notify_tests;
mod oplock_tests;
mod persistent_tests;
mod posix_tests;
mod reload_tests;
mod reparse_tests;
mod rights_tests;
mod security_tests;
mod set_info_tests;
mod sparse_tests;
mod stable_tests;
mod status_tests;
mod stream_tests;
mod tree_tests;
mod truncate_tests;
