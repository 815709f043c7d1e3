//! [MS-SMB2] 3.3.5.17 Receiving an SMB2 ECHO Request.
use ringshare_wire::{NtStatus, WriteExt};

use crate::exchange::{ConnCore, Reply, Req};

pub(crate) fn handle(core: &mut ConnCore, _req: &Req<'_>) -> Result<Reply, NtStatus> {
    // ECHO response: StructureSize 4, Reserved; in a reused buffer.
    let mut body = core.spare.take(4);
    body.put_u16(4);
    body.put_u16(0);
    Ok(Reply::ok(body))
}
