//! [MS-SMB2] 3.3.5.11 Receiving an SMB2 FLUSH Request.
//!
//! A flush needs write access (FILE_WRITE_DATA or FILE_APPEND_DATA); a
//! directory has nothing to flush and succeeds at once.

use ringshare_wire::file::{FlushRequest, FlushResponse};
use ringshare_wire::NtStatus;

use crate::cmd::{Cont, Handled};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::access;
use crate::fsmap::status_of;
use crate::io::{IoDone, IoOp};

pub(crate) struct FlushCont {}

fn body() -> Vec<u8> {
    let mut b = Vec::with_capacity(4);
    FlushResponse.encode(&mut b);
    b
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let fr = FlushRequest::decode(req.msg).map_err(|e| e.status())?;
    let open = handles::find(core, req, fr.file_id)?;
    if open.is_dir {
        return Ok(Handled::Reply(Reply::ok(body())));
    }
    if !access::can_write(open.access) {
        return Err(NtStatus::ACCESS_DENIED);
    }
    crate::writetime::immediate(&open, core.now);
    Ok(Handled::Io {
        node: open.node.clone(),
        op: IoOp::Sync,
        cont: Cont::Flush(FlushCont {}),
    })
}

pub(crate) fn finish(_core: &mut ConnCore, _c: FlushCont, done: IoDone) -> Result<Reply, NtStatus> {
    match done {
        IoDone::Sync(Ok(())) => Ok(Reply::ok(body())),
        IoDone::Sync(Err(e)) => Err(status_of(e)),
        _ => Err(NtStatus::INTERNAL_ERROR),
    }
}
