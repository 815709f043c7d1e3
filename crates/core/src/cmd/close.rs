//! [MS-SMB2] 3.3.5.10 Receiving an SMB2 CLOSE Request.
//!
//! The open leaves its session and its file's share-mode table, its byte-range
//! locks are released, and a pending delete happens when the last open of the
//! file goes (see [`crate::opens::close_open`]). Blocked locks on other
//! connections are retried on their timer and see the freed ranges then.

use ringshare_wire::consts::{CloseFlags, FileAttributes};
use ringshare_wire::create::{CloseRequest, CloseResponse};
use ringshare_wire::NtStatus;

use crate::cmd::{Handled, LookupCont};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo;
use crate::opens;
use crate::server::lock;

/// CLOSE: its reply, after a persistent open's record is removed away from the I/O thread
/// ([`crate::cluster::ca::take_forget`]; the reply waits for it, the thread does not).
pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let cr = CloseRequest::decode(req.msg).map_err(|e| e.status())?;
    let volatile = handles::find(core, req, cr.file_id)?.id;
    let server = core.server.clone();
    let sref = core.session_or_deleted(req.session_id)?;
    let open = lock(&sref)
        .opens
        .remove(&volatile)
        .ok_or(NtStatus::FILE_CLOSED)?;
    let want = cr.flags.contains(CloseFlags::POSTQUERY_ATTRIB);
    let forget = crate::cluster::ca::take_forget(&server.node, &open);
    let closed = (open.persistent_id, open.id);
    // A written handle's write time is settled (and written to the disk)
    // before the attributes are read for the reply.
    crate::writetime::closing(&open, core.now);
    let attr = opens::close_open(&server, open, want);
    let mut resp = CloseResponse::default();
    if let Some(a) = attr.filter(|_| want) {
        let [c, la, lw, ch] = fileinfo::times(&a);
        let (eof, alloc) = fileinfo::sizes(&a);
        resp = CloseResponse {
            flags: CloseFlags::POSTQUERY_ATTRIB,
            creation_time: c.0,
            last_access_time: la.0,
            last_write_time: lw.0,
            change_time: ch.0,
            allocation_size: alloc,
            end_of_file: eof,
            file_attributes: FileAttributes(fileinfo::attributes(&a)),
        };
    }
    let mut body = Vec::with_capacity(60);
    resp.encode(&mut body);
    let reply = Reply::ok(body);
    Ok(match forget {
        Some(ask) => Handled::lookup(
            crate::lookup::Lookup::Cluster(ask),
            LookupCont::Answer {
                reply,
                closed: Some(closed),
            },
        ),
        None => Handled::Reply(reply),
    })
}
