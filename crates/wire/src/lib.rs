//! SMB2/3 wire codec for ringshare.
//!
//! **Invariant:** this crate knows nothing about connections, sessions, shares or files,
//! and names no other ringshare crate: a message is bytes in, a typed value out.
//!
//! Everything here is pure: bytes in, typed values out, and back. Decoding goes
//! through the bounds-checked [`codec::Reader`]; offset/length pairs are followed
//! only through it, so no decoder can index out of bounds or panic on hostile
//! input. Protocol constants live here once, each with the spec section that
//! defines it.
#![forbid(unsafe_code)]

pub mod codec;
pub mod compression;
pub mod consts;
pub mod create;
pub mod dir;
pub mod dup_extents;
pub mod file;
pub mod framing;
pub mod fscc;
pub mod header;
pub mod info;
pub mod ioctl;
pub mod lock;
pub mod misc;
pub mod negotiate;
pub mod posix;
pub mod security;
pub mod session;
pub mod smb1;
pub mod snapshot;
pub mod status;
pub mod transform;
pub mod tree;
pub mod utf16;

pub use codec::{Reader, WireError, WriteExt};
pub use create::FileId;
pub use status::NtStatus;
