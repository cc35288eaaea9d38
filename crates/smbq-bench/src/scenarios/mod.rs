//! The five measured scenarios of the benchmark issue, one module each, and the crypto
//! micro-benchmark.

pub mod crypto;
pub mod fio;
pub mod interactive;
pub mod loss;
pub mod raw;
pub mod setup;
pub mod sweep;
