//! The five measured scenarios of the benchmark issue, one module each, the later ones
//! (`interactive`, `compression`, `ca`, `cluster`), and the crypto micro-benchmark.

pub mod ca;
pub mod cluster;
pub mod compression;
pub mod crypto;
pub mod fio;
pub mod get;
pub mod interactive;
pub mod loss;
pub mod raw;
pub mod setup;
pub mod sweep;
