//! ringshare's io_uring engine: one [`Ring`] per core, owned-buffer
//! operations, and the start-up helpers around it. It knows nothing about SMB.
//!
//! This is the only crate of ringshare allowed `unsafe`; every block says why
//! it is sound in a `// SAFETY:` comment. The one promise that matters, "the
//! kernel's pointers stay valid until the completion", is kept in one place:
//! see the module documentation of `ring` and `Ring::push_sqe`.
//!
//! # Driving a ring
//!
//! ```no_run
//! use std::sync::Arc;
//! use ringshare_engine::{net, Ring, RingConfig};
//!
//! const TOKEN_ACCEPT: u64 = 1;
//! # fn main() -> std::io::Result<()> {
//! let listener = Arc::new(net::listen_reuseport("127.0.0.1:4450".parse().unwrap(), 128)?);
//! let mut ring = Ring::new(RingConfig::default())?;
//! ring.accept_multishot(&listener, TOKEN_ACCEPT);
//! loop {
//!     ring.submit_and_wait(1, None)?; // one io_uring_enter: submit all, wait for one
//!     while let Some(mut c) = ring.next_completion() {
//!         if c.is_wake() { return Ok(()); }
//!         if c.user_data == TOKEN_ACCEPT {
//!             if let Some(conn) = c.take_fd() { /* ring.recv(&Arc::new(conn), buf, token) */ }
//!         }
//!     }
//! }
//! # }
//! ```
//!
//! # Ownership rules
//!
//! - **Buffers**: every operation takes its buffer (`Vec<u8>`, or `Vec<Vec<u8>>`
//!   for `send_vectored`) by value and hands it back in the [`Completion`],
//!   success or failure. The caller never lends memory to the kernel.
//! - **File descriptors**: operations on an fd take a [`SharedFd`]
//!   (`Arc<OwnedFd>`) and the ring keeps a clone until the operation's final
//!   completion. Dropping your `Arc` early is therefore safe: the fd stays
//!   open (and its number is not reused) until the kernel is done, then
//!   closes when the last clone goes. [`Ring::close`] takes an `OwnedFd` by
//!   value and closes it in the ring. Accepted connections come back as
//!   `OwnedFd` in [`Completion::fd`].
//! - **Tokens**: each operation carries a caller-chosen `u64` (`user_data`),
//!   e.g. connection id and operation kind. The engine's own `user_data`
//!   values are internal; only [`Ring::WAKE_TOKEN`] (`u64::MAX`) is reserved.
//! - **Sockets** stay in blocking mode: io_uring polls them itself.
//! - **Threads**: a `Ring` is not `Send`; create it on the thread that runs
//!   it (see [`runtime::run_per_core`]). A [`Waker`] is `Send + Sync`.
//! - **Full submission queue**: the ring submits what is queued and retries;
//!   if the kernel still has no room, the SQE is parked in order and pushed
//!   by the next `submit_and_wait`. No operation is ever dropped.
//! - **Drop**: dropping a ring cancels everything in flight and waits (2 s at
//!   most) for the completions; buffers the kernel never gave back are leaked
//!   rather than freed (counted by [`leaked_ops`]).

pub mod alloc_count;
mod bufring;
mod completion;
pub mod creds;
mod files;
mod keep;
pub mod net;
mod op;
mod personality;
mod pipe;
pub mod probe;
mod ring;
pub mod runtime;
mod setup;
mod slab;
pub mod sys;
pub mod udp;

use std::os::fd::OwnedFd;
use std::sync::Arc;

pub use completion::Completion;
pub use creds::Creds;
pub use keep::CpuKeep;
pub use personality::PERSONALITIES_MAX;
pub use pipe::size_pipe;
pub use ring::{leaked_ops, OpKey, Ring, RingConfig, RingSetup, RingStats, SplicePipe, Waker};

/// An fd shared between its owner and the operations in flight on it.
pub type SharedFd = Arc<OwnedFd>;
