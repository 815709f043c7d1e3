//! Every limit of the server core, in one place, units last in the names.
//!
//! Configuration may lower these, never raise them. The compile-time checks at
//! the bottom keep them consistent with each other.

/// Largest READ, WRITE or TRANSACT payload we advertise and accept (8 MiB).
pub const IO_SIZE_MAX: u32 = 8 * 1024 * 1024;
/// Smallest MaxReadSize / MaxWriteSize / MaxTransactSize configuration may
/// set (64 KiB, what SMB 2.0.2 uses).
pub(crate) const IO_SIZE_MIN: u32 = 64 * 1024;
/// Largest direct-TCP frame we accept: an 8 MiB write plus headers and a compound's slack.
pub const PDU_SIZE_MAX: usize = IO_SIZE_MAX as usize + 64 * 1024;
/// Largest frame accepted before a session is established (NEGOTIATE/SESSION_SETUP).
pub const PDU_SIZE_UNAUTH_MAX: usize = 64 * 1024;
/// Commands in one compound request.
pub const COMPOUND_COMMANDS_MAX: usize = 64;
/// Credits the server lets a client hold at once (the sequence window size).
pub const CREDITS_MAX: u16 = 8192;
/// Credits granted per response at most.
pub const CREDITS_GRANT_PER_RESPONSE_MAX: u16 = CREDITS_MAX;
/// Credit charge the largest payload needs (8 MiB / 64 KiB); a request may
/// be charged more (the credit window bounds it).
pub(crate) const CREDIT_CHARGE_MAX: u16 = (IO_SIZE_MAX / 65536) as u16;
/// Sessions per connection.
pub const SESSIONS_PER_CONNECTION_MAX: usize = 64;
/// Channels (connections) bound to one session (multichannel).
pub const CHANNELS_PER_SESSION_MAX: usize = 32;
/// Tree connects per session.
pub const TREES_PER_SESSION_MAX: usize = 256;
/// Opens per session.
pub const OPENS_PER_SESSION_MAX: usize = 16384;
/// Named pipes open at once per session.
pub const PIPES_PER_SESSION_MAX: usize = 64;
/// Byte-range locks held by one open.
pub const LOCKS_PER_OPEN_MAX: usize = 4096;
/// Lock elements in one LOCK request.
pub const LOCK_ELEMENTS_MAX: usize = 1024;
/// Outstanding async operations (blocking locks, change notify) per connection.
pub const ASYNC_OPS_PER_CONNECTION_MAX: usize = 512;
/// Characters in one path name component.
pub(crate) const NAME_CHARS_MAX: usize = 255;
/// Characters in one path.
pub(crate) const PATH_CHARS_MAX: usize = 32767;
/// Durable opens kept after their connection went, server-wide; past it the
/// one nearest its timeout is closed (with a log line).
pub(crate) const DISCONNECTED_OPENS_MAX: usize = ringshare_files::parked::OPENS_MAX;
/// Directory handles watched by CHANGE_NOTIFY, server-wide; past it a new
/// watch gets INSUFFICIENT_RESOURCES.
pub(crate) const NOTIFY_WATCHERS_MAX: usize = 65536;
/// Bytes of changes one watched handle keeps between requests (or its first
/// request's OutputBufferLength if smaller); past it they are dropped and
/// the next request gets NOTIFY_ENUM_DIR.
pub(crate) const NOTIFY_BUFFER_BYTES_MAX: usize = 64 * 1024;
/// Bytes of changes kept by all watched handles together; the handle whose
/// change would cross it drops its buffer (NOTIFY_ENUM_DIR).
pub(crate) const NOTIFY_BUFFERED_BYTES_MAX: usize = 64 * 1024 * 1024;
/// How often a blocked lock is retried, in milliseconds.
pub const BLOCKING_LOCK_RETRY_MS: u64 = 10;

const _: () = assert!(PDU_SIZE_MAX > IO_SIZE_MAX as usize);
const _: () = assert!(CREDIT_CHARGE_MAX as u32 * 65536 == IO_SIZE_MAX);
const _: () = assert!(CREDITS_GRANT_PER_RESPONSE_MAX <= CREDITS_MAX);
const _: () = assert!(PDU_SIZE_UNAUTH_MAX < PDU_SIZE_MAX);
