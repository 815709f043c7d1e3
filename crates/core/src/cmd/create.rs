//! [MS-SMB2] create (in progress)
use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Reply, Req};

pub(crate) fn handle(_core: &mut ConnCore, _req: &Req<'_>) -> Result<Reply, NtStatus> {
    Err(NtStatus::NOT_SUPPORTED)
}
