//! (in progress)
use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Handled, Reply, Req};

pub(crate) struct PendingLock {
    pub retry_at_ms: u64,
}

pub(crate) fn handle(_core: &mut ConnCore, _req: &Req<'_>) -> Result<Handled, NtStatus> {
    Err(NtStatus::NOT_SUPPORTED)
}

pub(crate) fn poll(_core: &mut ConnCore, _session_id: u64, _p: &mut PendingLock) -> Option<Result<Reply, NtStatus>> {
    Some(Err(NtStatus::NOT_SUPPORTED))
}

pub(crate) fn cancel(_core: &mut ConnCore, _session_id: u64, _p: &PendingLock) {}
