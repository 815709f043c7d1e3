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
use crate::fsjob::{FsDone, FsJob};
use crate::opens;
use crate::server::lock;

/// CLOSE: its reply, after the file's home (a file homed on another node) took the close and a
/// persistent open's record is removed, each away from the I/O thread (the reply waits for
/// them, the thread does not: [`crate::arbiter::close_or_ask`],
/// [`crate::cluster::ca::take_forget`]).
pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Handled, NtStatus> {
    let cr = CloseRequest::decode(req.msg).map_err(|e| e.status())?;
    let found = handles::find(core, req, cr.file_id)?;
    let want = cr.flags.contains(CloseFlags::POSTQUERY_ATTRIB);
    // On a share whose calls are made away from the I/O thread the attributes asked for are
    // read in a file system job before the close is decided (as [`opens::closing`] reads them
    // elsewhere: from the file as its open leaves it), and a written handle's write time is
    // settled and written to the file in it (on FUSE a SETATTR, which waits for a WRITE under
    // way), so that the disk has it before the close is told to watchers and the file's entry
    // goes; the CLOSE parks meanwhile and runs again with them. The descriptor is let go in
    // another job once the close is made ([`finish`]).
    let offloaded = found.share.offloaded();
    let read_before = if offloaded {
        match read_attributes(core) {
            Some(attr) => Some(attr),
            None => {
                // Settled once, here, on the first run.
                let write_time = crate::writetime::closing_time(&found, core.now);
                if want || write_time.is_some() {
                    core.ids_wanted = Some(crate::lookup::Lookup::Fs(FsJob::close_attributes(
                        std::sync::Arc::clone(&found.node),
                        crate::fsjob::order_of(found.id),
                        crate::fsjob::share_key(&found.share.name),
                        want,
                        write_time,
                    )));
                    return Err(crate::cmd::ids::ASK_IDS);
                }
                None
            }
        }
    } else {
        None
    };
    let volatile = found.id;
    drop(found);
    let server = core.server.clone();
    let sref = core.session_or_deleted(req.session_id)?;
    let open = lock(&sref)
        .opens
        .remove(&volatile)
        .ok_or(NtStatus::FILE_CLOSED)?;
    let forget = crate::cluster::ca::take_forget(&server.node, &open);
    let ids = (open.persistent_id, open.id);
    // A written handle's write time is settled (and written to the disk) before the
    // attributes are read for the reply (above, in a job, on an offloaded share).
    if !offloaded {
        crate::writetime::closing(&open, core.now);
    }
    let mut closing = opens::closing(&server, open, want && !offloaded);
    if let Some(attr) = read_before {
        closing.read_before(attr);
    }
    let o = &closing.open;
    let (key, entry, owner, who) = (o.key, &o.entry, o.id, &o.who);
    match crate::arbiter::close_or_ask(&server, key, entry, owner, closing.delete_on_close, who) {
        Decision::Made(closed) => Ok(finish(&server, closing, closed, want, forget, ids)),
        Decision::Ask(ask, home) => Ok(Handled::lookup(
            crate::lookup::Lookup::Home(ask),
            LookupCont::Close(Box::new(AtHome {
                waits: Waits::Home { closing, home },
                want,
                forget,
                ids,
            })),
        )),
    }
}

/// The attributes a CLOSE's file system job read ([`FsJob::close_attributes`]), when it asked
/// one and runs again: `Some(None)` when they could not be read (answered without them, as a
/// failed stat elsewhere).
fn read_attributes(core: &mut ConnCore) -> Option<Option<FileAttr>> {
    match core.domain_answer.take() {
        Some(crate::lookup::DomainAnswer::Fs(FsDone::Closed(attr), _)) => {
            Some(attr.and_then(Result::ok))
        }
        Some(crate::lookup::DomainAnswer::Fs(..)) => Some(None),
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// The close is taken (`closed`): it finishes ([`opens::closed_open`]) and the CLOSE is
/// answered. On a share whose calls are made away from the I/O thread
/// ([`crate::config::ShareDef::offloaded`]: FUSE, CephFS), the open's node is handed to a file
/// system job that lets it go, so that the descriptor's last close (a FLUSH request on FUSE,
/// which the closing thread waits for) is made on the pool; the CLOSE parks until it is done
/// and is answered with the attributes read before the close ([`handle`]). A close that
/// removes its file, or a stream's, has all its calls (the last close, `fruit`'s look at the
/// stream, the removal) made in one job, which tells watchers and directory leases itself
/// ([`opens::closed_open_in_job`]); the CLOSE is answered after it, as a local share answers
/// once the removal is made. Elsewhere nothing changes: the calls made here.
fn finish(
    server: &std::sync::Arc<crate::server::ServerState>,
    closing: opens::Closing,
    closed: crate::arbiter::Closed,
    want: bool,
    forget: Option<crate::lookup::ClusterAsk>,
    ids: (u64, u64),
) -> Handled {
    let o = &closing.open;
    if !o.share.offloaded() {
        let attr = opens::closed_open(server, closing, closed);
        return answer(attr, want, forget, ids);
    }
    let (attr, job) = if closed.remove || o.stream.is_some() {
        opens::closed_open_in_job(server, closing, closed)
    } else {
        let job = last_close(&closing);
        (opens::closed_open(server, closing, closed), job)
    };
    Handled::lookup(
        crate::lookup::Lookup::Fs(job),
        LookupCont::Close(Box::new(AtHome {
            waits: Waits::LastClose(attr),
            want,
            forget,
            ids,
        })),
    )
}

/// The file system job that lets `c`'s open's node go, so that the descriptor's last close is
/// made on the pool ([`finish`], [`abandon`]).
fn last_close(c: &opens::Closing) -> FsJob {
    let o = &c.open;
    FsJob::last_close(
        std::sync::Arc::clone(&o.node),
        crate::fsjob::order_of(o.id),
        crate::fsjob::share_key(&o.share.name),
        false,
    )
}

/// A parked CLOSE ([`answered`]).
pub(crate) struct AtHome {
    waits: Waits,
    /// POSTQUERY_ATTRIB.
    want: bool,
    /// The persistent open's record, removed after.
    forget: Option<crate::lookup::ClusterAsk>,
    /// The open's FileId.
    pub ids: (u64, u64),
}

/// What a parked CLOSE waits for.
#[allow(clippy::large_enum_variant)] // in a boxed [`AtHome`]; moved once
enum Waits {
    /// The file's home to take the close.
    Home {
        closing: opens::Closing,
        home: HomeClose,
    },
    /// The file system job that lets the node go, or that makes a removal's or a stream's close
    /// ([`finish`]), with the attributes read before the close.
    LastClose(Option<FileAttr>),
}

/// A parked CLOSE's answer is in (`done`): the file's home took the close (one that did not
/// answer has the close sent again until a home takes it, as before), and the close finishes;
/// or its last close was made. The CLOSE is answered, or parks again (for its last close, or
/// its persistent open's record).
pub(crate) fn answered(
    core: &ConnCore,
    fin: AtHome,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    let server = &core.server;
    match fin.waits {
        Waits::Home { closing, home } => {
            let closed = crate::arbiter::close_answered(server, home, done.home());
            Ok(finish(
                server, closing, closed, fin.want, fin.forget, fin.ids,
            ))
        }
        Waits::LastClose(attr) => Ok(answer(attr, fin.want, fin.forget, fin.ids)),
    }
}

/// A parked CLOSE whose connection went before its answer came: a close the home has not
/// taken is sent again until a home takes it (a last close under way ends on the pool), and
/// the persistent open's record goes all the same (asked after the request,
/// [`ConnCore::cluster_posts`]).
pub(crate) fn abandon(core: &mut ConnCore, fin: AtHome) {
    if let Waits::Home { home, closing } = fin.waits {
        home.withdraw(&core.server.node);
        // On an offloaded share the descriptor's last close (a FUSE flush) is made on the
        // pool, nobody waiting, not where `closing` is dropped (here, on the I/O thread): the
        // job holds the node once `closing` lets it go, and runs after, asked with the posts.
        // A stream's node too.
        if closing.open.share.offloaded() {
            core.cluster_posts
                .push(crate::lookup::Lookup::Fs(last_close(&closing)));
        }
    }
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
