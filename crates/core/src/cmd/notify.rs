//! [MS-SMB2] 3.3.5.19 CHANGE_NOTIFY and 3.3.5.22 OPLOCK_BREAK acknowledgments.
//!
//! ringshare does not watch directories yet: CHANGE_NOTIFY is refused with
//! STATUS_NOT_SUPPORTED. No oplocks or leases are granted, so a break
//! acknowledgment refers to nothing and is answered as [MS-SMB2] 3.3.5.22.1
//! says for an unknown open.
use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Handled, Reply, Req};

pub(crate) fn handle(_core: &mut ConnCore, _req: &Req<'_>) -> Result<Handled, NtStatus> {
    Err(NtStatus::NOT_SUPPORTED)
}

pub(crate) fn oplock_break(_core: &mut ConnCore, _req: &Req<'_>) -> Result<Reply, NtStatus> {
    // No oplock was granted, so no break can be acknowledged.
    Err(NtStatus::INVALID_OPLOCK_PROTOCOL)
}
