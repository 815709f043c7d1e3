//! Directory leases ([MS-SMB2] 3.3.1.4, 3.3.4.7, 3.3.5.9.11; Samba 4.22's
//! `smb3 directory leases`): a client caches a directory's listing and its
//! entries' metadata while it holds an R or RH lease on the directory. Any
//! change inside the directory (an entry made, removed, renamed in or out,
//! linked, its attributes, times or size set, a stream added) breaks those
//! leases to nothing, except the lease whose key the changing open sent as
//! its ParentLeaseKey (that client made the change and knows of it). The
//! changing request does not wait for the acknowledgment.
//!
//! The directories that hold leases are listed in the file table
//! (`FileTable::note_dir_lease`); a change with none listed costs one atomic
//! load. A change is matched to its directory by share name and path, as the
//! directory's entry records them (renames keep them current).
//!
//! Changes other programs make on the disk break them too: a leased
//! directory has a kernel watch ([`crate::notify::kernel`], the one
//! CHANGE_NOTIFY uses, shared with its watchers) from its first lease to
//! its last, and the kernel's events for it break its leases as a change
//! through SMB does (`crate::notify::kernel`'s `break_dir_leases`). ringshare's own changes mark their
//! names there, as they do for CHANGE_NOTIFY, so their kernel echo breaks
//! nothing: the lease a change through SMB spared (its ParentLeaseKey's)
//! stays; the others were broken already.

use std::sync::Arc;

use ringshare_vfs::RelPath;

use crate::files::oplock::{self, LeaseId};
use crate::files::FileKey;
use crate::notify::kernel;
use crate::server::{lock, ServerState, ShareDef};
use crate::state::Open;

/// The entry at `path` of share `share` was made, removed or changed: break
/// the leases on its directory but `except`'s. `now_ms`: see
/// [`oplock::break_dir_leases`].
pub fn entry_changed(
    server: &ServerState,
    share: &str,
    path: &RelPath,
    except: Option<[u8; 16]>,
    now_ms: Option<u64>,
) {
    let Some(dir) = path.parent() else {
        return;
    };
    dir_changed(server, share, &dir, except, now_ms);
}

/// Something inside directory `dir` of share `share` changed: break its
/// leases but `except`'s. On a cluster node the change is also sent to the
/// nodes that want changes (among them the homes of leased directories:
/// a directory's leases are decided by its home, as a file's are).
pub fn dir_changed(
    server: &ServerState,
    share: &str,
    dir: &RelPath,
    except: Option<[u8; 16]>,
    now_ms: Option<u64>,
) {
    dir_changed_here(server, share, dir, except, now_ms);
    if server.notify.remote() {
        if let Some(h) = server.node.hooks() {
            h.dir_changed(&server.node, share, dir, except);
        }
    }
}

/// [`dir_changed`] for the leases of this node's table only: a change made
/// through another node arrives here.
pub fn dir_changed_here(
    server: &ServerState,
    share: &str,
    dir: &RelPath,
    except: Option<[u8; 16]>,
    now_ms: Option<u64>,
) {
    let leased = server.files.leased_dirs();
    if leased.is_empty() {
        return;
    }
    let mut breaks = Vec::new();
    for (_, entry) in leased {
        let mut e = lock(&entry);
        if e.is_dir && e.path == *dir && e.share == share {
            oplock::break_dir_leases(&mut e, except, now_ms, &mut breaks);
        }
    }
    server.send_breaks(breaks);
}

/// The ParentLeaseKey `open`'s lease names, if any: the directory lease a
/// change through it leaves alone.
pub fn parent_key(open: &Open) -> Option<[u8; 16]> {
    let e = lock(&open.entry);
    oplock::parent_key_of(&e, open.id)
}

/// A lease was granted on directory `key` (its table entry `entry`) of `share` at `path`, open
/// as `dir`: the directory gets its kernel watch (with its first lease; none when the driver
/// watches nothing: `kernel change notify = no`). On an offloaded share the watch is added in a
/// file system job, not here under the lease list's lock: the list holds the watch's id at
/// once, and the job keeps the watch only while it still does; the job watches the directory
/// where the entry says it is when the job runs (a rename meanwhile moved it).
pub fn watch(
    server: &ServerState,
    share: &Arc<ShareDef>,
    (path, entry): (&RelPath, &Arc<std::sync::Mutex<crate::files::FileEntry>>),
    key: FileKey,
    dir: &Arc<dyn ringshare_vfs::Node>,
) {
    if share.offloaded() {
        let mut id = None;
        server.files.watch_dir_lease(key, || {
            id = kernel::lease_id(&server.notify);
            id
        });
        if let Some(id) = id {
            let leases = server.files.dir_lease_list();
            kernel::lease_in_job(&server.notify, &leases, (share, entry), (key, id), dir);
        }
        return;
    }
    let Some(root) = crate::notify::root_key(share) else {
        return;
    };
    let at = (root, path.components().to_vec());
    server.files.watch_dir_lease(key, || {
        kernel::add_lease_ref(&server.notify, &at, Some(dir.as_ref()))
    });
}

impl ServerState {
    /// Lease `id` left file `key` with the last open that named it (a
    /// close, a durable open's expiry, a withdrawn CREATE, a hand-over to
    /// another node): a directory whose last lease it was leaves the list
    /// of leased directories, and lets go of its kernel watch.
    pub fn lease_left(&self, id: LeaseId, key: FileKey) {
        if let Some(watch) = self.files.forget_lease(id, key) {
            self.dir_unlisted(watch);
        }
    }

    /// Directory `key` is no longer this node's to decide for (its home is
    /// another node now): its leases are another node's to break.
    pub fn dir_moved(&self, key: FileKey) {
        if let Some(watch) = self.files.unlist_dir(key) {
            self.dir_unlisted(watch);
        }
    }

    /// A directory left the list of leased directories: its kernel watch
    /// (if it had one) goes; without listed directories or watchers the
    /// other nodes are told that this node no longer wants their changes.
    fn dir_unlisted(&self, watch: Option<u64>) {
        if let Some(watch) = watch {
            kernel::drop_lease_ref(&self.notify, watch);
        }
        if !self.files.any_dir_leased() {
            crate::notify::tell_wants(self);
        }
    }

    /// Directory `key`, whose leases this node took over as its new home,
    /// is listed: the other nodes are told (and have noted, before this
    /// returns) that this node wants their changes, so that a change made
    /// through them breaks its leases. (A lease granted here lists its
    /// directory in `crate::decide`, with the entry locked.)
    pub fn dir_listed(&self, key: FileKey) {
        if self.files.note_dir_lease(key) {
            crate::notify::tell_wants(self);
        }
    }
}
