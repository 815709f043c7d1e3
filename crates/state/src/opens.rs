//! Closing an open ([MS-SMB2] 3.3.5.10 and the close steps of logoff, tree disconnect and
//! connection loss). Finding one from a request's FileId is `crate::exchange::handles` (crates/core).
//!
//! Closing removes the open's share-mode entry and byte-range locks from its
//! [`FileEntry`]; when the last open of a file whose delete is pending goes,
//! the file is removed at the path the entry holds now (renames keep it current).

mod removal;

use std::sync::Arc;

use ringshare_vfs::FileAttr;

pub use removal::closed_open_in_job;

use crate::lookup::Lookup;
use crate::notify;
use crate::server::{lock, ServerState};
use crate::state::{Open, Session};

/// Close one open (already removed from its session). Returns the file's
/// attributes as they were just before the close, when `want_attr`.
///
/// For a thread that may wait: a persistent open's record is removed here, and the close of a
/// file homed on another node is a call made here. An I/O thread closes with [`close_posted`].
pub fn close_open(server: &ServerState, open: Arc<Open>, want_attr: bool) -> Option<FileAttr> {
    let mut c = closing(server, open, want_attr);
    if let Some(forget) = c.forget.take() {
        let _ = (forget.run)();
    }
    close_here(server, c)
}

/// The close decided on this node (the file's entry told, then what follows the close).
fn close_here(server: &ServerState, c: Closing) -> Option<FileAttr> {
    let closed = decided(server, &c);
    closed_open(server, c, closed)
}

/// The file's entry told that `c`'s open closes (its delete-on-close too).
fn decided(server: &ServerState, c: &Closing) -> crate::decide::Closed {
    let o = &c.open;
    crate::decide::close(server, o.key, &o.entry, o.id, c.delete_on_close, &o.who)
}

/// [`close_open`] on a thread that may not wait for etcd (one deciding another request at the
/// file's home): the removal of the open's record, if it is persistent, is returned, to be
/// asked away from it; the rest of the close happens now.
#[must_use = "the removal of a persistent open's record is to be asked"]
pub fn close_record_posted(
    server: &ServerState,
    open: Arc<Open>,
) -> Option<crate::lookup::ClusterAsk> {
    let mut c = closing(server, open, false);
    let forget = c.forget.take();
    close_here(server, c);
    forget
}

/// An open on its way out: what its close asks of the file's entry (its share-mode entry
/// removed, and delete-on-close), and what it does after ([`closed_open`]).
pub struct Closing {
    pub open: Arc<Open>,
    attr: Option<FileAttr>,
    pub delete_on_close: bool,
    except: Option<[u8; 16]>,
    on_close: u32,
    /// A persistent open's record, removed after (`ClusterHooks::open_closed`): asked by the
    /// caller, away from the I/O thread.
    pub forget: Option<crate::lookup::ClusterAsk>,
}

impl Closing {
    /// The file's attributes from before the close, read elsewhere (a file system job on an
    /// offloaded share), given back with the answer ([`closed_open`]).
    pub fn read_before(&mut self, attr: Option<FileAttr>) {
        self.attr = attr;
    }
}

/// [`close_open`]'s steps before the file's entry is told: its watch, its replay record,
/// its persistent record (the cluster's hook) go.
pub fn closing(server: &ServerState, open: Arc<Open>, want_attr: bool) -> Closing {
    tracing::trace!(
        id = open.id,
        access = open.access,
        share_access = open.share_access,
        "close"
    );
    let attr = if want_attr {
        open.node.stat().ok()
    } else {
        None
    };
    let forget = server
        .node
        .hooks()
        .and_then(|h| h.open_closed(&server.node, &open));
    let (create_guid, on_close, watch) = {
        let mut st = lock(&open.state);
        (st.create_guid, st.notify_on_close, st.watch.take())
    };
    if let Some(w) = watch {
        notify::end(server, &w, ringshare_wire::NtStatus::NOTIFY_CLEANUP);
    }
    if let Some(g) = create_guid {
        lock(&server.files.durables).forget(g, open.id);
    }
    let delete_on_close = lock(&open.state).delete_on_close;
    let except = dir_lease_kept(&open, delete_on_close);
    Closing {
        open,
        attr,
        delete_on_close,
        except,
        on_close,
        forget,
    }
}

/// [`close_open`]'s steps after the file's entry (here or at its home) took the close
/// (`closed`): a delete pending on the file's last open happens, a stream's file lets it go,
/// watchers hear of what changed. The file's attributes from before, when asked. On a share
/// whose calls are made away from the I/O thread the calls of a close that removes its file
/// or is a stream's are a job instead ([`closed_open_in_job`]).
pub fn closed_open(
    server: &ServerState,
    c: Closing,
    closed: crate::decide::Closed,
) -> Option<FileAttr> {
    let Closing {
        open,
        attr,
        except,
        on_close,
        ..
    } = c;
    let crate::decide::Closed {
        remove,
        last_open,
        path,
        is_dir,
        newly_pending,
    } = closed;
    if newly_pending && is_dir {
        notify::dir_delete_pending(server, &open.share, &path, open.key);
    }
    let share = Arc::clone(&open.share);
    let who = Arc::clone(&open.who);
    let mut key = open.key;
    let stream = open.stream.as_ref().map(|s| {
        let (name, now) = lock(&s.now).clone();
        key = now;
        (name, Arc::clone(&s.file_entry), s.afp)
    });
    // fruit: an AfpInfo placeholder nothing was stored in goes at its last
    // close; a resource fork that holds data is not deleted (macOS).
    let removal = stream.as_ref().and_then(|(name, _, afp)| {
        let fruit = open.share.fruit.as_deref();
        crate::fruit::afp::at_close(fruit, open.node.as_ref(), name, *afp, remove, last_open)
    });
    let id = open.id;
    // Let the backend close the file before it is removed (a request on
    // another channel may still hold the open for a moment; its I/O finishes
    // on the node it holds).
    drop(open);
    if let Some((name, file_entry, _)) = stream {
        let path = lock(&file_entry).path.clone();
        stream_closed(server, (&share, &who), (&path, &name), removal, on_close);
        // The stream's invisible open of its file goes with it; the file
        // goes too when its delete was pending on this alone.
        let (remove, path, is_dir) = left_the_file(server, &file_entry, id, false);
        if remove {
            remove_file(server, &share, &who, &path, is_dir, None);
        }
        server.files.drop_if_unused(key);
        server.files.drop_if_unused(key.base());
        return attr;
    }
    file_closed(
        server,
        (&share, &who),
        (&path, is_dir),
        (remove, except),
        on_close,
    );
    server.files.drop_if_unused(key);
    attr
}

/// A stream's close after its node was let go: stream `name` of the file at `path` removed
/// (`removal`: [`crate::fruit::afp::at_close`]'s answer) or, written, reported modified;
/// watchers told.
fn stream_closed(
    server: &ServerState,
    (share, who): (&Arc<crate::server::ShareDef>, &ringshare_vfs::Who),
    (path, name): (&ringshare_vfs::RelPath, &str),
    removal: Option<crate::fruit::afp::Removal>,
    on_close: u32,
) {
    let change = if let Some(how) = removal {
        remove_stream(share, who, path, name, how)
            .then_some((notify::REMOVED_STREAM, notify::filter::STREAM_NAME))
    } else {
        // Written: one MODIFIED_STREAM at the close, as files.
        let f = notify::filter::STREAM_SIZE | notify::filter::STREAM_WRITE;
        (on_close != 0).then_some((notify::MODIFIED_STREAM, f))
    };
    if let Some((action, filter)) = change {
        notify::stream_changed(server, share, path, name, action, filter);
    }
}

/// The invisible open of its file that stream open `id` held leaves the file's entry (the
/// waiters for it woken): whether the file goes now (its delete was pending on this alone),
/// its path and kind. With `mark`, a file that goes is marked as being removed by a job
/// ([`crate::server::FileEntry::removing`]), in the same step.
fn left_the_file(
    server: &ServerState,
    file_entry: &std::sync::Mutex<crate::server::FileEntry>,
    id: u64,
    mark: bool,
) -> (bool, ringshare_vfs::RelPath, bool) {
    let mut wakes = Vec::new();
    let left = {
        let mut e = lock(file_entry);
        e.opens.retain(|s| s.owner != id);
        e.streams.retain(|(o, _)| *o != id);
        crate::files::oplock::wake_waiters(&mut e, &mut wakes);
        let remove = e.removable();
        e.removing |= remove && mark;
        (remove, e.path.clone(), e.is_dir)
    };
    server.send_breaks(wakes);
    left
}

/// A file's (not a stream's) close after its node was let go: the file at `path` removed when
/// `remove` (watchers told, the leases of its directory broken but `except`'s), or reported
/// modified when the open changed it (`on_close`).
fn file_closed(
    server: &ServerState,
    (share, who): (&Arc<crate::server::ShareDef>, &ringshare_vfs::Who),
    (path, is_dir): (&ringshare_vfs::RelPath, bool),
    (remove, except): (bool, Option<[u8; 16]>),
    on_close: u32,
) {
    if remove {
        remove_file(server, share, who, path, is_dir, except);
    } else if on_close != 0 {
        notify::report(
            server,
            share,
            &[notify::Change {
                action: notify::MODIFIED,
                filter: on_close,
                path,
                stream: None,
            }],
        );
    }
}

/// The directory lease a removal by this close would leave alone: the
/// ParentLeaseKey of the closing open's lease, when the open that made the
/// delete pending named the same (this one, with `delete_on_close`); else
/// none, and every lease on the directory breaks (Samba 4.22, smbtorture
/// smb2.dirlease.unlink_*).
fn dir_lease_kept(open: &Open, delete_on_close: bool) -> Option<[u8; 16]> {
    let e = lock(&open.entry);
    let closer = crate::files::oplock::parent_key_of(&e, open.id)?;
    (delete_on_close || e.delete_parent_key == Some(closer)).then_some(closer)
}

/// Remove the file or directory at `path` (its delete was pending and its
/// last open closed), tell watchers and break the leases on its directory
/// but `except`'s.
pub fn remove_file(
    server: &ServerState,
    share: &Arc<crate::server::ShareDef>,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
    is_dir: bool,
    except: Option<[u8; 16]>,
) {
    let r = if is_dir {
        share.backend.rmdir(who, path)
    } else {
        share.backend.unlink(who, path)
    };
    // fruit: the file's AppleDouble `._` file (its resource fork) goes with it.
    if r.is_ok() && !is_dir && crate::fruit::keeps_appledouble(share) {
        if let Some(ad) = crate::fruit::adouble::sidecar(path) {
            let _ = share.backend.unlink(who, &ad);
        }
    }
    match r {
        Ok(()) => {
            server.files.name_changed(&share.name, path);
            notify::report(
                server,
                share,
                &[notify::Change {
                    action: notify::REMOVED,
                    filter: notify::name_filter(is_dir),
                    path,
                    stream: None,
                }],
            );
            crate::dirlease::entry_changed(server, &share.name, path, except, None);
        }
        Err(e) => {
            tracing::debug!(path = %path.to_slash_path(), "delete on close failed: {e}")
        }
    }
}

/// Remove named stream `name` of the file at `path` (its delete was
/// pending and its last open closed); true when it was removed.
fn remove_stream(
    share: &crate::server::ShareDef,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
    name: &str,
    how: crate::fruit::afp::Removal,
) -> bool {
    let mut opts = ringshare_vfs::OpenOptions::read_existing();
    opts.read = false;
    let r = share
        .backend
        .open(who, path, &opts)
        .and_then(|f| match how {
            crate::fruit::afp::Removal::Stream => f.node.remove_stream(name),
            crate::fruit::afp::Removal::Netatalk => f.node.set_netatalk_metadata(None),
            crate::fruit::afp::Removal::AppleDouble => match crate::fruit::adouble::sidecar(path) {
                Some(ad) => share.backend.unlink(who, &ad),
                None => Ok(()),
            },
        });
    if let Err(e) = &r {
        tracing::debug!(path = %path.to_slash_path(), stream = name, "delete on close failed: {e}");
    }
    r.is_ok()
}

/// Take every open of a session for which `pick` is true out of it (under
/// the session's lock), to be closed with [`close_all`] after the lock is
/// released: a close may ask a file's home on another node, or etcd.
pub fn take_where(session: &mut Session, pick: impl Fn(&Open) -> bool) -> Vec<Arc<Open>> {
    let ids: Vec<u64> = session
        .opens
        .iter()
        .filter(|(_, o)| pick(o))
        .map(|(id, _)| *id)
        .collect();
    ids.into_iter()
        .filter_map(|id| session.opens.remove(&id))
        .collect()
}

/// Close opens taken out of their session ([`take_where`]) by a logoff, a tree disconnect or
/// the end of a session or connection, whose closes nobody waits for: what they ask of the
/// cluster is returned, to be asked away from the I/O thread ([`close_posted`]); the rest of
/// each close happens now.
#[must_use = "the closes' questions to the cluster are to be asked"]
pub fn close_all(server: &Arc<ServerState>, opens: Vec<Arc<Open>>) -> Vec<Lookup> {
    opens
        .into_iter()
        .flat_map(|open| close_posted(server, open))
        .collect()
}

/// [`close_all`] for one open: what its close asks of the cluster, returned to be asked away
/// from the I/O thread, nobody waiting for the answers. The removal of a persistent open's
/// record ([`Lookup::Cluster`], carried after what was asked of the cluster's store before it,
/// on one thread in order); an open of a file homed on another node is closed there by a call
/// ([`Lookup::Home`], [`crate::server::ClusterHooks::close_posted`]) which finishes the close
/// when the home took it. The others close now.
#[must_use = "the close's questions to the cluster are to be asked"]
pub fn close_posted(server: &Arc<ServerState>, open: Arc<Open>) -> Vec<Lookup> {
    let mut c = closing(server, open, false);
    let mut asks: Vec<Lookup> = c.forget.take().map(Lookup::Cluster).into_iter().collect();
    let o = Arc::clone(&c.open);
    if let (Ok(Some(node)), Some(h)) = (
        crate::decide::home(&server.node, o.key),
        server.node.hooks(),
    ) {
        let (s, delete_on_close) = (Arc::clone(server), c.delete_on_close);
        let then: Box<dyn FnOnce(crate::link::Closed) + Send> = Box::new(move |closed| {
            closed_open(&s, c, closed);
        });
        let (key, entry, who) = (o.key, &o.entry, &o.who);
        let then = (o.share.offloaded(), then);
        let home = h.close_posted(server, node, key, entry, o.id, delete_on_close, who, then);
        asks.extend(home.map(Lookup::Home));
        return asks;
    }
    drop(o);
    asks.extend(close_here_posted(server, c));
    asks
}

/// [`close_here`] for a close nobody waits for ([`close_posted`]: a logoff, a tree disconnect, a
/// connection's end, an expired durable open). On a share whose calls are made away from the
/// I/O thread ([`crate::config::ShareDef::offloaded`]: FUSE, CephFS, NFS) the descriptor's last
/// close (on FUSE a FLUSH the closing thread waits for) is returned as a file system job, made on
/// the pool: the job holds the node while the close is made here (issue 33, step 6); a close
/// that removes its file, or a stream's, has all its calls in the job, which tells watchers and
/// directory leases itself ([`closed_open_in_job`]). Not, for now, for a file homed on another
/// node (its close finishes when the home answers).
fn close_here_posted(server: &Arc<ServerState>, c: Closing) -> Option<Lookup> {
    let closed = decided(server, &c);
    let o = &c.open;
    if !o.share.offloaded() {
        closed_open(server, c, closed);
        return None;
    }
    if closed.remove || o.stream.is_some() {
        return Some(Lookup::Fs(closed_open_in_job(server, c, closed).1));
    }
    let job = Lookup::Fs(crate::fsjob::FsJob::last_close(
        Arc::clone(&o.node),
        crate::fsjob::order_of(o.id),
        crate::fsjob::share_key(&o.share.name),
        false,
    ));
    closed_open(server, c, closed);
    Some(job)
}
