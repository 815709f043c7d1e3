//! [MS-SMB2] 3.3.5.17 Receiving an SMB2 ECHO Request.
use ringshare_wire::{NtStatus, WriteExt};

use crate::conn::{Reply, Req};

pub(crate) fn handle(_req: &Req<'_>) -> Result<Reply, NtStatus> {
    // ECHO response: StructureSize 4, Reserved.
    let mut body = Vec::with_capacity(4);
    body.put_u16(4);
    body.put_u16(0);
    Ok(Reply::ok(body))
}
