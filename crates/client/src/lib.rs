//! A sans-I/O SMB 2/3 client connection, the core of `ringshare bench`.
//!
//! **Invariant:** this crate knows nothing of the server's core: it shares only the wire,
//! auth, crypto and compression crates with it, and does no I/O.
//!
//! [`ClientConn`] mirrors the server's `Connection`: it opens no socket and
//! reads no clock. The driver moves bytes: [`ClientConn::take_output`] hands
//! over the frames to send (direct-TCP framed, signed or encrypted), and
//! [`ClientConn::receive`] takes one received frame payload and yields
//! [`Event`]s. Negotiate, session setup (SPNEGO/NTLMv2) and tree connect run by
//! themselves after [`ClientConn::new`]; [`Event::Ready`] says the tree is
//! connected. Requests are pipelined up to the credits the server granted.
#![forbid(unsafe_code)]

pub mod conn;
pub mod credits;
pub mod durable;
pub mod error;

pub use conn::{ChannelBinding, ClientConn, ClientOptions, Event, Gap, Reply, READ_HEAD_LEN};
pub use error::{ClientError, SmbError};
