//! [MS-SMB2] 3.3.5.19 Receiving an SMB2 CHANGE_NOTIFY Request.
//!
//! The first request on a directory handle makes its watcher
//! ([`crate::notify`]); a request that finds changes buffered (and no older
//! request waiting) is answered at once, in its compound; otherwise it goes
//! async and is answered when a change comes, when the handle is closed
//! (NOTIFY_CLEANUP), when the directory is to be deleted (DELETE_PENDING), or
//! when the client cancels it.

use std::sync::Arc;

use ringshare_wire::misc::ChangeNotifyRequest;
use ringshare_wire::NtStatus;

use crate::cmd::AsyncWork;
use crate::cmd::Handled;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::notify::{self, Answer, Watcher};

/// FILE_LIST_DIRECTORY: the access CHANGE_NOTIFY needs on the directory.
const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;

/// A CHANGE_NOTIFY waiting on one directory open.
pub(crate) struct PendingNotify {
    /// FileId.Volatile of the directory open.
    pub open_id: u64,
    pub watcher: Arc<Watcher>,
    /// This request's OutputBufferLength.
    pub max_len: u32,
    /// Its async id, once it went async.
    pub async_id: u64,
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let n = ChangeNotifyRequest::decode(req.msg).map_err(|e| e.status())?;
    if n.output_buffer_length > handles::io_sizes(core).trans {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    handles::check_credit_charge(core, req, u64::from(n.output_buffer_length))?;
    let open = handles::find(core, req, n.file_id)?;
    if !open.share.change_notify {
        return Err(NtStatus::NOT_IMPLEMENTED);
    }
    if !open.is_dir {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if open.access & FILE_LIST_DIRECTORY == 0 {
        return Err(NtStatus::ACCESS_DENIED);
    }
    // Asked of the directory's home (another node) away from the I/O thread: cmd/pending.rs.
    if crate::cmd::pending::delete_pending(core, &open)? {
        return Err(NtStatus::DELETE_PENDING);
    }
    if root_unknown(core, &open) {
        return Err(crate::cmd::ids::ASK_IDS);
    }
    let watcher = notify::arm(
        &core.server,
        &open,
        n.completion_filter.0,
        n.flags.0 & ringshare_wire::consts::ChangeNotifyFlags::WATCH_TREE.0 != 0,
        n.output_buffer_length,
    )?;
    if let Some(a) = notify::answer_now(&core.server.notify, &watcher, n.output_buffer_length) {
        return answer(a).map(Handled::Reply);
    }
    Ok(Handled::Async(Box::new(AsyncWork::Notify(PendingNotify {
        open_id: open.id,
        watcher,
        max_len: n.output_buffer_length,
        async_id: 0,
    }))))
}

/// On an offloaded share, the first watcher of a share asks the identity of its root (a stat,
/// kept for the share: [`notify::root_key`]) in a file system job: true when it asked (the
/// request parks and runs again, the identity known: [`crate::cmd::ids::parked`]).
fn root_unknown(core: &mut ConnCore, open: &Arc<crate::state::Open>) -> bool {
    if !open.share.offloaded() || open.share.root_key.get().is_some() {
        return false;
    }
    if let Some(crate::lookup::DomainAnswer::Fs(..)) = core.domain_answer {
        // Asked, and the job ran: what it read (or could not) is kept in the share.
        return false;
    }
    let (who, order, share_key) = crate::cmd::job_of_open(open);
    let share = Arc::clone(&open.share);
    let job = crate::fsjob::FsJob::telling(who, order, share_key, "a share root's identity", {
        move || {
            notify::root_key(&share);
        }
    });
    core.ids_wanted = Some(crate::lookup::Lookup::Fs(job));
    true
}

/// The request went async as `async_id`: it joins its watcher's queue.
pub(crate) fn queued(core: &ConnCore, p: &mut PendingNotify, async_id: u64) {
    p.async_id = async_id;
    notify::queue(&core.server.mail, &p.watcher, core.conn_id, async_id);
}

/// Answered when it is the oldest request on its watcher and there is news.
pub(crate) fn poll(core: &ConnCore, p: &PendingNotify) -> Option<Result<Reply, NtStatus>> {
    notify::poll(
        &core.server,
        &p.watcher,
        core.conn_id,
        p.async_id,
        p.max_len,
    )
    .map(answer)
}

/// Cancelled (or answered some other way): it leaves the queue.
pub(crate) fn cancel(core: &ConnCore, p: &PendingNotify) {
    notify::unqueue(&core.server.mail, &p.watcher, core.conn_id, p.async_id);
}

fn answer(a: Answer) -> Result<Reply, NtStatus> {
    match a {
        Answer::Changes(buf) => {
            let mut body = Vec::with_capacity(8 + buf.len());
            ringshare_wire::misc::ChangeNotifyResponse { buffer: &buf }.encode(&mut body);
            Ok(Reply::ok(body))
        }
        Answer::Status(s) => Ok(Reply::with_status(s, Vec::new())),
    }
}
