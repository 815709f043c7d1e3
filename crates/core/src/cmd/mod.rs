//! One module per SMB2 command, each opening with the [MS-SMB2] section it
//! implements. A module exposes `handle(core, req)`; commands that need file
//! I/O also expose a continuation type and `finish`.

use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Reply};

pub(crate) mod close;
pub(crate) mod create;
pub(crate) mod echo;
pub(crate) mod flush;
pub(crate) mod ids;
pub(crate) mod ioctl;
pub(crate) mod lock;
pub(crate) mod logon_user;
pub(crate) mod negotiate;
pub(crate) mod notify;
pub(crate) mod oplock_break;
pub(crate) mod pipe;
pub(crate) mod query_directory;
pub(crate) mod query_info;
pub(crate) mod read;
pub(crate) mod session_setup;
pub(crate) mod set_info;
pub(crate) mod stream;
pub(crate) mod tree;
pub(crate) mod write;

/// Work of a request that went async.
pub(crate) enum AsyncWork {
    /// A blocking byte-range lock, retried until granted, cancelled or closed.
    Lock(lock::PendingLock),
    /// CHANGE_NOTIFY: waits for a change, the end of its watch, or a cancel.
    Notify(notify::PendingNotify),
    /// CREATE waiting for other clients to acknowledge oplock or lease breaks.
    Create(create::PendingCreate),
}

impl AsyncWork {
    /// When to poll next (monotonic ms); `None` = only on cancel/close.
    pub fn deadline_ms(&self) -> Option<u64> {
        match self {
            AsyncWork::Lock(p) => Some(p.retry_at_ms),
            AsyncWork::Notify(_) => None,
            AsyncWork::Create(p) => Some(p.retry_at_ms),
        }
    }
}

/// Try again: `Some` when the operation finished (successfully or not).
pub(crate) fn poll_async(
    core: &mut ConnCore,
    session_id: u64,
    work: &mut AsyncWork,
) -> Option<Result<Reply, NtStatus>> {
    match work {
        AsyncWork::Lock(p) => lock::poll(core, session_id, p),
        AsyncWork::Notify(p) => notify::poll(core, p),
        AsyncWork::Create(p) => create::poll(core, session_id, p),
    }
}

/// The operation was cancelled: undo what it holds.
pub(crate) fn cancel_async(core: &mut ConnCore, session_id: u64, work: &AsyncWork) {
    match work {
        AsyncWork::Lock(p) => lock::cancel(core, session_id, p),
        AsyncWork::Notify(p) => notify::cancel(core, p),
        AsyncWork::Create(_) => {}
    }
}
