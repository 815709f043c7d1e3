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
use crate::fsjob::{FsDone, FsJob};
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
        let ran = job_answer(core);
        if crate::cmd::io_check::stream_io_applies(&open) {
            return stream_flush(core, &open, ran);
        }
        if ran.is_none() {
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

/// The answer of this FLUSH's job, when it runs again after it ([`FsJob::write_time`]: a
/// failure there was logged, the fsync goes on).
fn job_answer(core: &mut ConnCore) -> Option<FsDone> {
    match core.domain_answer.take() {
        Some(crate::lookup::DomainAnswer::Fs(done, _)) => Some(done),
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// A named stream's FLUSH on a share whose calls may wait on a network
/// ([`crate::cmd::io_check::stream_io_applies`]): a stream has no descriptor for the ring, so
/// its fsync (of the file that holds it) was made on the I/O thread by the driver; here the
/// write time a written handle shows now (booked on the first run, as for a file) and the
/// fsync are one job of the open's order, and the FLUSH is answered with how the fsync ended.
fn stream_flush(
    core: &mut ConnCore,
    open: &std::sync::Arc<crate::state::Open>,
    ran: Option<FsDone>,
) -> Result<Handled, NtStatus> {
    match ran {
        Some(FsDone::Changed(_, r)) => r.map(|()| Handled::Reply(Reply::ok(body()))),
        Some(FsDone::Done(r)) => Err(r.err().map_or(NtStatus::INTERNAL_ERROR, status_of)),
        Some(_) => Err(NtStatus::INTERNAL_ERROR),
        None => {
            let t = crate::writetime::immediate_booked(open, core.now);
            let node = std::sync::Arc::clone(&open.node);
            let (who, order, share) = crate::cmd::job_of_open(open);
            let what = "the write time and fsync of a named stream's FLUSH";
            core.ids_wanted = Some(crate::lookup::Lookup::Fs(FsJob::change(
                who,
                order,
                share,
                what,
                move || {
                    crate::fsjob::keep_write_time(node.as_ref(), t);
                    (0, node.sync().map_err(status_of))
                },
            )));
            Err(crate::cmd::ids::ASK_IDS)
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
