//! The transport a connection runs over, apart from the engine so the modules the engine uses
//! (`request`, `observe`) can name it without importing the engine.

/// Which transport carries the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    Quic,
}
