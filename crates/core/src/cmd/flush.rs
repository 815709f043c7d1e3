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
use crate::fsjob::FsJob;
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
    // On a share whose calls may wait on a network, the write time a written handle shows now
    // is written in a file system job of the open's order (on FUSE a SETATTR, which waits for
    // a WRITE under way on the file); the FLUSH parks and runs again with its answer, then its
    // fsync goes on the ring as elsewhere (held behind it, the open's later requests wait for
    // both). The time is booked here, on the first run.
    if open.share.offloaded() {
        if !job_ran(core) {
            if let Some(t) = crate::writetime::immediate_booked(&open, core.now) {
                core.ids_wanted = Some(crate::lookup::Lookup::Fs(FsJob::write_time(
                    std::sync::Arc::clone(&open.node),
                    crate::fsjob::order_of(open.id),
                    crate::fsjob::share_key(&open.share.name),
                    t,
                )));
                return Err(crate::cmd::ids::ASK_IDS);
            }
        }
    } else {
        crate::writetime::immediate(&open, core.now);
    }
    Ok(Handled::Io {
        node: open.node.clone(),
        op: IoOp::Sync,
        cont: Cont::Flush(FlushCont {}),
    })
}

/// Whether this FLUSH runs again after its write time's job ([`FsJob::write_time`]; a failure
/// there was logged: the fsync goes on).
fn job_ran(core: &mut ConnCore) -> bool {
    match core.domain_answer.take() {
        Some(crate::lookup::DomainAnswer::Fs(..)) => true,
        other => {
            core.domain_answer = other;
            false
        }
    }
}

pub(crate) fn finish(_core: &mut ConnCore, _c: FlushCont, done: IoDone) -> Result<Reply, NtStatus> {
    match done {
        IoDone::Sync(Ok(())) => Ok(Reply::ok(body())),
        IoDone::Sync(Err(e)) => Err(status_of(e)),
        _ => Err(NtStatus::INTERNAL_ERROR),
    }
}
