//! (in progress)
use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Handled, Reply, Req};
use crate::io::IoDone;

pub(crate) struct FlushCont {}

pub(crate) fn handle(_core: &mut ConnCore, _req: &Req<'_>) -> Result<Handled, NtStatus> {
    Err(NtStatus::NOT_SUPPORTED)
}

pub(crate) fn finish(_core: &mut ConnCore, _c: FlushCont, _done: IoDone) -> Result<Reply, NtStatus> {
    Err(NtStatus::NOT_SUPPORTED)
}
