//! A user-space link emulator for the benchmark: this machine's kernel has no netem, so
//! delay, loss and a rate limit are applied in this process instead.
//!
//! [`Link::start`] creates two network namespaces, A and B, each holding one TUN device with a
//! point-to-point address ([`ADDR_A`], [`ADDR_B`]). Every packet one side sends comes out of
//! its TUN device here, goes through that direction's [`LinkSettings`] (MTU, one-way delay,
//! random loss, a rate limit behind a drop-tail buffer) and is written into the other side's
//! device. Client and server then run in the two namespaces, via [`command_in`] for
//! programs or [`in_namespace`] for sockets made in this process.
//!
//! Needs root, `/dev/net/tun` and iproute2. Namespaces are named after the pid; a link's
//! namespaces are deleted when it stops or drops, and those of a crashed run on the next start.

#![forbid(unsafe_code)]

mod link;
mod namespace;
mod pump;
mod settings;
mod shaper;
mod stats;

pub use link::{ADDR_A, ADDR_B, Link};
pub use namespace::{command_in, in_namespace};
pub use settings::{DEFAULT_MTU, LinkSettings, MIN_MTU};
pub use stats::{DirectionStats, LinkStats};
