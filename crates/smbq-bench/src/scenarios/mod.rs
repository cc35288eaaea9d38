//! The five measured scenarios of the benchmark issue, one module each.

pub mod fio;
pub mod loss;
pub mod raw;
pub mod setup;
pub mod sweep;
