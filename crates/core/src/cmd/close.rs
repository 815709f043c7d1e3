//! [MS-SMB2] 3.3.5.10 Receiving an SMB2 CLOSE Request.
//!
//! The open leaves its session and its file's share-mode table, its byte-range
//! locks are released, and a pending delete happens when the last open of the
//! file goes (see [`crate::opens::close_open`]). Blocked locks on other
//! connections are retried on their timer and see the freed ranges then.

use ringshare_vfs::FileAttr;
use ringshare_wire::consts::{CloseFlags, FileAttributes};
use ringshare_wire::create::{CloseRequest, CloseResponse};
use ringshare_wire::NtStatus;

use crate::arbiter::Decision;
use crate::cluster::HomeClose;
use crate::cmd::{Handled, LookupCont};
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::fileinfo;
use crate::opens;
use crate::server::lock;

/// CLOSE: its reply, after the file's home (a file homed on another node) took the close and a
/// persistent open's record is removed, each away from the I/O thread (the reply waits for
/// them, the thread does not: [`crate::arbiter::close_or_ask`],
/// [`crate::cluster::ca::take_forget`]).
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
    let ids = (open.persistent_id, open.id);
    // A written handle's write time is settled (and written to the disk)
    // before the attributes are read for the reply.
    crate::writetime::closing(&open, core.now);
    let closing = opens::closing(&server, open, want);
    let o = &closing.open;
    let (key, entry, owner, who) = (o.key, &o.entry, o.id, &o.who);
    match crate::arbiter::close_or_ask(&server, key, entry, owner, closing.delete_on_close, who) {
        Decision::Made(closed) => {
            let attr = opens::closed_open(&server, closing, closed);
            Ok(answer(attr, want, forget, ids))
        }
        Decision::Ask(ask, home) => Ok(Handled::lookup(
            crate::lookup::Lookup::Home(ask),
            LookupCont::Close(Box::new(AtHome {
                closing,
                home,
                want,
                forget,
                ids,
            })),
        )),
    }
}

/// A CLOSE parked while the file's home takes the close ([`answered`]).
pub(crate) struct AtHome {
    closing: opens::Closing,
    home: HomeClose,
    /// POSTQUERY_ATTRIB.
    want: bool,
    /// The persistent open's record, removed after.
    forget: Option<crate::lookup::ClusterAsk>,
    /// The open's FileId.
    pub ids: (u64, u64),
}

/// The file's home answered a parked CLOSE (`done`; one that did not answer has the close
/// sent again until a home takes it, as before): the close finishes and the CLOSE is
/// answered, or parks again for its persistent open's record.
pub(crate) fn answered(
    core: &ConnCore,
    fin: AtHome,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    let server = &core.server;
    let closed = crate::arbiter::close_answered(server, fin.home, done.home());
    let attr = opens::closed_open(server, fin.closing, closed);
    Ok(answer(attr, fin.want, fin.forget, fin.ids))
}

/// A parked CLOSE whose connection went before the home's answer came: the close is sent
/// again until a home takes it, and the persistent open's record goes all the same (asked
/// after the request, [`ConnCore::cluster_posts`]).
pub(crate) fn abandon(core: &mut ConnCore, fin: AtHome) {
    fin.home.withdraw(&core.server.node);
    core.cluster_posts
        .extend(fin.forget.map(crate::lookup::Lookup::Cluster));
}

/// The CLOSE's answer (with the file's attributes from before the close, when asked), once
/// the persistent open's record is removed when it has one.
fn answer(
    attr: Option<FileAttr>,
    want: bool,
    forget: Option<crate::lookup::ClusterAsk>,
    closed: (u64, u64),
) -> Handled {
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
    match forget {
        Some(ask) => Handled::lookup(
            crate::lookup::Lookup::Cluster(ask),
            LookupCont::Answer {
                reply,
                closed: Some(closed),
            },
        ),
        None => Handled::Reply(reply),
    }
}
