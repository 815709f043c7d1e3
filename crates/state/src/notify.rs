//! Change notification ([MS-SMB2] 3.3.5.19 and the "algorithm for change
//! notifications in an object store" of 3.3.1; [MS-FSA] 2.1.5.11 and 2.1.4.1
//! for what is reported).
//!
//! A directory open becomes a [`Watcher`] at its first CHANGE_NOTIFY: that
//! request's CompletionFilter, WATCH_TREE flag and OutputBufferLength stay the
//! watcher's for its life (later requests' are ignored, as on Windows and
//! Samba). Operations that change the namespace or a file call [`report`]
//! after they succeeded, with the share-relative path of what changed; each
//! watcher on that path's parent (or, with WATCH_TREE, on any ancestor) whose
//! filter matches gets a FILE_NOTIFY_INFORMATION record in its buffer, named
//! relative to its directory. Requests wait in the watcher's FIFO; the oldest
//! is answered as soon as its watcher has changes (or an ending status), with
//! everything buffered; a buffer that outgrew the watcher's capacity or that
//! does not fit the request is dropped and answered NOTIFY_ENUM_DIR.
//!
//! Watchers are found by (share root, directory path): the share root's
//! FileKey, so that every tree connect to the same directory (template shares
//! make one `ShareDef` per connect) shares them. The registry is one
//! `RwLock`, read by producers and written when a watcher comes or goes;
//! producers look at an atomic count first, so nothing is locked when nobody
//! watches. Lock order: registry → a watcher's state → mailboxes; no file
//! entry lock is held when [`report`] runs.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ringshare_vfs::RelPath;
use ringshare_wire::fscc::{notify_record_len, push_notify_record};
use ringshare_wire::NtStatus;

pub mod kernel;

use crate::limits;
use crate::server::{lock, FileKey, Mail, NodeState, Notice, ServerState, ShareDef};
use crate::watch::{Dirs, Records, WatchState};
pub use crate::watch::{Registry, Watcher};

/// FILE_NOTIFY_CHANGE_* bits ([MS-SMB2] 2.2.35 CompletionFilter).
pub mod filter {
    pub const FILE_NAME: u32 = 0x001;
    pub const DIR_NAME: u32 = 0x002;
    pub const ATTRIBUTES: u32 = 0x004;
    pub const SIZE: u32 = 0x008;
    pub const LAST_WRITE: u32 = 0x010;
    pub const LAST_ACCESS: u32 = 0x020;
    pub const CREATION: u32 = 0x040;
    pub const EA: u32 = 0x080;
    pub const SECURITY: u32 = 0x100;
    pub const STREAM_NAME: u32 = 0x200;
    pub const STREAM_SIZE: u32 = 0x400;
    pub const STREAM_WRITE: u32 = 0x800;
}

/// FILE_ACTION_ADDED_STREAM, REMOVED_STREAM, MODIFIED_STREAM ([MS-FSCC]
/// 2.7.1): a named stream was made, removed, written or resized.
pub const ADDED_STREAM: u32 = 6;
pub const REMOVED_STREAM: u32 = 7;
pub const MODIFIED_STREAM: u32 = 8;

pub use ringshare_wire::fscc::{
    FILE_ACTION_ADDED as ADDED, FILE_ACTION_MODIFIED as MODIFIED, FILE_ACTION_REMOVED as REMOVED,
    FILE_ACTION_RENAMED_NEW_NAME as NEW_NAME, FILE_ACTION_RENAMED_OLD_NAME as OLD_NAME,
};

/// FILE_NAME or DIR_NAME, as the thing that changed is a file or a directory.
pub fn name_filter(is_dir: bool) -> u32 {
    if is_dir {
        filter::DIR_NAME
    } else {
        filter::FILE_NAME
    }
}

pub use crate::watch::Change;

/// Tell watchers of a named stream's change.
pub fn stream_changed(
    server: &ServerState,
    share: &ShareDef,
    path: &RelPath,
    stream: &str,
    action: u32,
    filter: u32,
) {
    let c = Change {
        action,
        filter,
        path,
        stream: Some(stream),
    };
    report(server, share, &[c]);
}

/// What a request waiting on a watcher gets now.
pub enum Answer {
    /// The FILE_NOTIFY_INFORMATION chain.
    Changes(Vec<u8>),
    /// NOTIFY_ENUM_DIR, NOTIFY_CLEANUP or DELETE_PENDING, no data.
    Status(NtStatus),
}

impl Registry {
    /// True when some directory is watched, here or (on a cluster node) on
    /// another node, or kernel-watched (a leased directory's watch: own
    /// changes mark their names there): producers check this first.
    pub fn active(&self) -> bool {
        self.armed.load(Ordering::Acquire) != 0
            || self.remote.load(Ordering::Acquire) != 0
            || self.kernel_dirs.load(Ordering::Acquire) != 0
    }

    /// True when some directory is watched through this node.
    pub fn local(&self) -> bool {
        self.armed.load(Ordering::Acquire) != 0
    }

    /// True when some other cluster node wants this node's changes (it has
    /// watchers, or is the home of leased directories).
    pub fn remote(&self) -> bool {
        self.remote.load(Ordering::Acquire) != 0
    }

    /// How many other cluster nodes want this node's changes.
    pub fn set_remote(&self, nodes: usize) {
        self.remote.store(nodes, Ordering::Release);
    }

    fn dirs_read(&self) -> std::sync::RwLockReadGuard<'_, Dirs> {
        self.dirs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn dirs_write(&self) -> std::sync::RwLockWriteGuard<'_, Dirs> {
        self.dirs.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The identity of a share's root directory (stat once, then kept).
pub fn root_key(share: &ShareDef) -> Option<FileKey> {
    share
        .root_key
        .get_or_init(|| {
            share
                .backend
                .stat(&ringshare_vfs::server_who(), &RelPath::root())
                .ok()
                .map(|a| FileKey::of(&a))
        })
        .as_ref()
        .copied()
}

/// [`root_key`] where a change is reported, marked or moved (on any thread): on a share whose
/// calls may wait on a network, only when it is known already, never read here (issue 33: a
/// watcher's or a leased directory's job reads it first, so a share nobody watched has nothing
/// to report, mark or move); elsewhere read at once, as before.
pub fn root_key_known(share: &ShareDef) -> Option<FileKey> {
    if share.offloaded() {
        return share.root_key.get().copied().flatten();
    }
    root_key(share)
}

/// Make the watcher of a directory open at its first CHANGE_NOTIFY.
/// INSUFFICIENT_RESOURCES past [`limits::NOTIFY_WATCHERS_MAX`].
pub fn arm(
    server: &ServerState,
    open: &crate::state::Open,
    filter: u32,
    tree: bool,
    output_len: u32,
) -> Result<Arc<Watcher>, NtStatus> {
    let reg = &server.notify;
    let path = {
        let st = lock(&open.state);
        if let Some(w) = &st.watch {
            return Ok(Arc::clone(w));
        }
        st.path.components().to_vec()
    };
    let root = root_key(&open.share).ok_or(NtStatus::NOT_SUPPORTED)?;
    let w = Arc::new(Watcher {
        id: reg.next_id.fetch_add(1, Ordering::Relaxed),
        dir: open.key,
        root,
        filter,
        tree,
        capacity: (output_len as usize).min(limits::NOTIFY_BUFFER_BYTES_MAX),
        state: Mutex::new(WatchState {
            path: path.clone(),
            ..WatchState::default()
        }),
    });
    let mut dirs = reg.dirs_write();
    {
        // Two requests on one handle at once (two channels): one watcher.
        let mut st = lock(&open.state);
        if let Some(w) = &st.watch {
            return Ok(Arc::clone(w));
        }
        if reg.armed.load(Ordering::Acquire) >= limits::NOTIFY_WATCHERS_MAX {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        st.watch = Some(Arc::clone(&w));
    }
    dirs.entry(root)
        .or_default()
        .entry(path.clone())
        .or_default()
        .push(Arc::clone(&w));
    let first = reg.armed.fetch_add(1, Ordering::AcqRel) == 0;
    drop(dirs);
    if first {
        tell_wants(server);
    }
    // Changes other programs make there (and below it, for WATCH_TREE),
    // through the kernel; on an offloaded share the watches are added in a
    // file system job (the request does not wait for it).
    kernel::use_root(&server.notify, root, &open.share, w.id);
    if open.share.offloaded() {
        kernel::watch_in_job(&server.notify, root, tree, &w, open);
    } else {
        let dir = Some(open.node.as_ref());
        kernel::add_ref(&server.notify, &(root, path.clone()), dir, w.id);
        if tree {
            kernel::watch_tree(&server.notify, root, &path, w.id, &open.who);
        }
    }
    if lock(&w.state).end.is_some() {
        // Ended meanwhile (closed on another channel): let go again.
        kernel::drop_refs(&server.notify, w.id);
    }
    Ok(w)
}

/// On a cluster node, tell the other nodes whether this node wants the
/// changes made through them (it has CHANGE_NOTIFY watchers, or is the home
/// of leased directories: `crate::dirlease`), when that is not what they
/// were last told. Told in order (one telling at a time), and what is told
/// is what holds when it is told: a watcher that ended while its first
/// telling was under way is told next. Returns once the others noted a
/// `true` (or were posted it, for a node that did not answer).
pub fn tell_wants(server: &ServerState) {
    let Some(h) = server.node.hooks() else {
        return;
    };
    let mut told = lock(&server.node.told_wants);
    let wants = server.notify.local() || server.files.any_dir_leased();
    if *told != wants {
        *told = wants;
        h.watching(&server.node, wants);
    }
}

/// Whether the other nodes were last told that this node wants their
/// changes (a node that joins is told so).
pub fn wants(node: &NodeState) -> bool {
    *lock(&node.told_wants)
}

/// The watch of a directory open ends (the open is closed, parked as
/// durable, or its directory is about to be deleted): waiting requests and
/// any later one get `status`. The first ending wins.
pub fn end(server: &ServerState, w: &Arc<Watcher>, status: NtStatus) {
    let reg = &server.notify;
    let mut tell = None;
    let mut last = false;
    {
        let mut dirs = reg.dirs_write();
        let mut st = lock(&w.state);
        if st.end.is_some() {
            return;
        }
        st.end = Some(status);
        release(reg, &mut st);
        if let Some(by_path) = dirs.get_mut(&w.root) {
            if let Some(list) = by_path.get_mut(&st.path) {
                let before = list.len();
                list.retain(|x| !Arc::ptr_eq(x, w));
                if list.len() != before && reg.armed.fetch_sub(1, Ordering::AcqRel) == 1 {
                    last = true;
                }
                if list.is_empty() {
                    by_path.remove(&st.path);
                }
            }
            if by_path.is_empty() {
                dirs.remove(&w.root);
            }
        }
        if !st.told {
            tell = st.pending.front().copied();
            st.told = tell.is_some();
        }
    }
    kernel::drop_refs(&server.notify, w.id);
    if last {
        tell_wants(server);
    }
    if let Some(head) = tell {
        wake(&server.mail, w, head);
    }
}

/// The open `open` is going away (closed or parked): end its watch with
/// NOTIFY_CLEANUP.
pub(crate) fn end_open(server: &ServerState, open: &crate::state::Open) {
    let w = lock(&open.state).watch.take();
    if let Some(w) = w {
        end(server, &w, NtStatus::NOTIFY_CLEANUP);
    }
}

/// The directory `dir` of share `share` at `path` is to be deleted: its
/// watchers' requests end with DELETE_PENDING ([MS-SMB2] has no word on it;
/// Windows and Samba answer so, smbtorture smb2.notify.rmdir1..4).
pub fn dir_delete_pending(server: &ServerState, share: &ShareDef, path: &RelPath, dir: FileKey) {
    if !server.notify.local() {
        return;
    }
    let Some(root) = root_key_known(share) else {
        return;
    };
    for w in watchers_at(&server.notify, &root, path.components()) {
        if w.dir == dir {
            end(server, &w, NtStatus::DELETE_PENDING);
        }
    }
}

/// The watchers of the directory at `path` under share root `root`.
fn watchers_at(reg: &Registry, root: &FileKey, path: &[String]) -> Vec<Arc<Watcher>> {
    reg.dirs_read()
        .get(root)
        .and_then(|m| m.get(path))
        .cloned()
        .unwrap_or_default()
}

/// Give back the bytes a watcher's buffer holds.
fn release(reg: &Registry, st: &mut WatchState) {
    reg.buffered.fetch_sub(st.buf.len(), Ordering::AcqRel);
    st.buf = Vec::new();
    st.last = None;
}

/// Tell the connection of a waiting request to look; a connection that is
/// gone loses its requests and the next one is told.
fn wake(mail: &Mail, w: &Watcher, mut head: (u64, u64)) {
    loop {
        if mail.post(head.0, Notice::Notify { async_id: head.1 }) {
            return;
        }
        let mut st = lock(&w.state);
        st.pending.retain(|p| *p != head);
        match st.pending.front().copied() {
            Some(next) => head = next,
            None => {
                st.told = false;
                return;
            }
        }
    }
}

/// A request on `w` went async with id `async_id` on connection `conn_id`:
/// queue it. If it is at the head and the watcher has news, its connection is
/// told (the request was answered at once otherwise).
pub fn queue(mail: &Mail, w: &Arc<Watcher>, conn_id: u64, async_id: u64) {
    let tell = {
        let mut st = lock(&w.state);
        st.pending.push_back((conn_id, async_id));
        let head = st.pending.front().copied();
        (st.has_news() && !st.told && head == Some((conn_id, async_id))).then(|| {
            st.told = true;
            (conn_id, async_id)
        })
    };
    if let Some(head) = tell {
        wake(mail, w, head);
    }
}

/// A request that has not gone async yet: answered now when no earlier
/// request waits and there is news.
pub fn answer_now(reg: &Registry, w: &Watcher, max_len: u32) -> Option<Answer> {
    let mut st = lock(&w.state);
    if !st.pending.is_empty() || !st.has_news() {
        return None;
    }
    Some(take(reg, w, &mut st, max_len))
}

/// Poll a waiting request: `Some` when it is at the head of its watcher's
/// queue and there is news (it leaves the queue).
pub fn poll(
    server: &ServerState,
    w: &Arc<Watcher>,
    conn_id: u64,
    async_id: u64,
    max_len: u32,
) -> Option<Answer> {
    let (answer, tell) = {
        let mut st = lock(&w.state);
        if st.pending.front() != Some(&(conn_id, async_id)) {
            return None;
        }
        if !st.has_news() {
            st.told = false;
            return None;
        }
        st.pending.pop_front();
        st.told = false;
        let answer = take(&server.notify, w, &mut st, max_len);
        // An ended watch answers every waiting request.
        let tell = (st.has_news() && !st.pending.is_empty()).then(|| {
            st.told = true;
            st.pending[0]
        });
        (answer, tell)
    };
    if let Some(head) = tell {
        wake(&server.mail, w, head);
    }
    Some(answer)
}

/// A waiting request was cancelled (or its connection is closing): it leaves
/// the queue; buffered changes stay for the next request.
pub fn unqueue(mail: &Mail, w: &Arc<Watcher>, conn_id: u64, async_id: u64) {
    let tell = {
        let mut st = lock(&w.state);
        let was_head = st.pending.front() == Some(&(conn_id, async_id));
        st.pending.retain(|p| *p != (conn_id, async_id));
        if was_head {
            st.told = false;
        }
        let next = st
            .pending
            .front()
            .copied()
            .filter(|_| was_head && st.has_news());
        st.told |= next.is_some();
        next
    };
    if let Some(head) = tell {
        wake(mail, w, head);
    }
}

/// Move out what a request gets: the end status, NOTIFY_ENUM_DIR when
/// changes were lost or do not fit `max_len` (or the first request's
/// length), else the buffered chain.
fn take(reg: &Registry, w: &Watcher, st: &mut WatchState, max_len: u32) -> Answer {
    if let Some(s) = st.end {
        return Answer::Status(s);
    }
    let fits = st.buf.len() <= (max_len as usize).min(w.capacity);
    if st.overflow || !fits {
        st.overflow = false;
        release(reg, st);
        return Answer::Status(NtStatus::NOTIFY_ENUM_DIR);
    }
    let buf = std::mem::take(&mut st.buf);
    reg.buffered.fetch_sub(buf.len(), Ordering::AcqRel);
    st.last = None;
    Answer::Changes(buf)
}

/// Report changes made through the server (after they happened, with no
/// file entry locked). The changes of one call land together in each
/// watcher's buffer (a rename's OLD_NAME and NEW_NAME are never split).
pub fn report(server: &ServerState, share: &ShareDef, changes: &[Change<'_>]) {
    if let Some(h) = server.node.hooks() {
        h.changes(&server.node, share, changes);
    }
    let reg = &server.notify;
    if !reg.local() && reg.kernel_dirs.load(Ordering::Acquire) == 0 {
        return;
    }
    if let Some(root) = root_key_known(share) {
        report_at(server, root, changes, true);
    }
}

/// Report changes under the share root `root`; `own`: made by ringshare
/// (the kernel's events for those names are then its echo).
pub fn report_at(server: &ServerState, root: FileKey, changes: &[Change<'_>], own: bool) {
    let reg = &server.notify;
    if own && reg.kernel_dirs.load(Ordering::Acquire) != 0 {
        for c in changes {
            mark(reg, root, c.path);
        }
    }
    let mut wakes: Vec<(Arc<Watcher>, (u64, u64))> = Vec::new();
    // New directories below WATCH_TREE watchers, to be kernel-watched.
    let mut appeared: Vec<(Vec<String>, Vec<u64>)> = Vec::new();
    {
        let dirs = reg.dirs_read();
        let Some(by_path) = dirs.get(&root) else {
            return;
        };
        // Each watcher with the records it gets, in order.
        let mut hits: Vec<(&Arc<Watcher>, Records)> = Vec::new();
        for c in changes {
            let parts = c.path.components();
            let new_dir =
                c.filter == filter::DIR_NAME && (c.action == ADDED || c.action == NEW_NAME);
            if new_dir && reg.kernel_dirs.load(Ordering::Acquire) != 0 {
                let wids: Vec<u64> = (0..parts.len())
                    .filter_map(|d| by_path.get(&parts[..d]))
                    .flatten()
                    .filter(|w| w.tree)
                    .map(|w| w.id)
                    .collect();
                if !wids.is_empty() {
                    appeared.push((parts.to_vec(), wids));
                }
            }
            for depth in (0..parts.len()).rev() {
                let Some(list) = by_path.get(&parts[..depth]) else {
                    continue;
                };
                let direct = depth + 1 == parts.len();
                for w in list {
                    if w.filter & c.filter == 0 || !(direct || w.tree) {
                        continue;
                    }
                    let mut name = parts[depth..].join("\\");
                    if let Some(s) = c.stream {
                        name = format!("{name}:{s}");
                    }
                    match hits.iter_mut().find(|(x, _)| Arc::ptr_eq(x, w)) {
                        Some((_, recs)) => recs.push((c.action, name)),
                        None => hits.push((w, vec![(c.action, name)])),
                    }
                }
            }
        }
        for (w, recs) in hits {
            let mut st = lock(&w.state);
            if st.end.is_some() {
                continue;
            }
            for (action, name) in recs {
                append(reg, w, &mut st, action, &name);
            }
            if st.has_news() && !st.told {
                if let Some(head) = st.pending.front().copied() {
                    st.told = true;
                    wakes.push((Arc::clone(w), head));
                }
            }
        }
    }
    for (w, head) in wakes {
        wake(&server.mail, &w, head);
    }
    for (path, wids) in appeared {
        kernel::dir_appeared(&server.notify, root, &path, &wids);
    }
}

/// Note that ringshare changed `path` (see [`crate::notify::kernel`]).
fn mark(reg: &crate::watch::Registry, root: FileKey, path: &RelPath) {
    let parts = path.components();
    if let Some((name, parent)) = parts.split_last() {
        kernel::mark(reg, root, parent, name);
    }
}

/// How often an open that keeps writing marks its file again for the
/// kernel's echo ([`crate::notify::kernel`]; a mark outlives its last use by
/// ECHO_MS, 2 s).
const WRITE_MARK_EVERY_MS: u64 = 1000;

/// `open` wrote (it reports that at its close): the kernel's MODIFY events
/// for its file are not news. Marked at the first write and again every
/// second while writes go on, so a long copy is never reported twice.
pub fn wrote(
    reg: &crate::watch::Registry,
    open: &crate::state::Open,
    st: &mut crate::state::OpenState,
    now_ms: u64,
) {
    if reg.kernel_dirs.load(Ordering::Acquire) == 0
        || (st.kernel_marked_ms != 0 && now_ms < st.kernel_marked_ms + WRITE_MARK_EVERY_MS)
    {
        return;
    }
    st.kernel_marked_ms = now_ms.max(1);
    if let Some(root) = root_key_known(&open.share) {
        mark(reg, root, &st.path);
    }
}

/// Every watcher's changes were lost (the kernel's queue overflowed): each
/// next answer is NOTIFY_ENUM_DIR.
pub(crate) fn overflow_all(server: &ServerState) {
    let all: Vec<Arc<Watcher>> = server
        .notify
        .dirs_read()
        .values()
        .flat_map(|m| m.values().flatten().cloned())
        .collect();
    overflow(server, &all);
}

/// The watchers of the directory at `path` lost track of it (another
/// program deleted or moved it): NOTIFY_ENUM_DIR.
pub(crate) fn overflow_dir(server: &ServerState, root: &FileKey, path: &[String]) {
    overflow(server, &watchers_at(&server.notify, root, path));
}

fn overflow(server: &ServerState, list: &[Arc<Watcher>]) {
    for w in list {
        let tell = {
            let mut st = lock(&w.state);
            if st.end.is_some() {
                continue;
            }
            release(&server.notify, &mut st);
            st.overflow = true;
            let head = st.pending.front().copied().filter(|_| !st.told);
            st.told |= head.is_some();
            head
        };
        if let Some(head) = tell {
            wake(&server.mail, w, head);
        }
    }
}

/// Add one record to a watcher's buffer, or drop the buffer when it would
/// outgrow the watcher's capacity or the server's.
fn append(reg: &Registry, w: &Watcher, st: &mut WatchState, action: u32, name: &str) {
    if st.overflow {
        return;
    }
    if matches!(&st.last, Some((_, a, n)) if *a == action && n == name) {
        return;
    }
    let len = notify_record_len(name);
    let server_full =
        reg.buffered.load(Ordering::Acquire) + len > limits::NOTIFY_BUFFERED_BYTES_MAX;
    if st.buf.len() + len > w.capacity || server_full {
        release(reg, st);
        st.overflow = true;
        return;
    }
    let at = push_notify_record(&mut st.buf, st.last.as_ref().map(|l| l.0), action, name);
    reg.buffered.fetch_add(len, Ordering::AcqRel);
    st.last = Some((at, action, name.to_owned()));
}

/// A directory was renamed from `from` to `to`: watchers on it and below it
/// follow it.
pub(crate) fn dir_renamed(
    reg: &crate::watch::Registry,
    share: &ShareDef,
    from: &RelPath,
    to: &RelPath,
) {
    if !reg.active() {
        return;
    }
    let Some(root) = root_key_known(share) else {
        return;
    };
    if reg.kernel_dirs.load(Ordering::Acquire) != 0 {
        kernel::moved(reg, root, from.components(), to.components());
    }
    let mut dirs = reg.dirs_write();
    let Some(by_path) = dirs.get_mut(&root) else {
        return;
    };
    let old = from.components();
    let moved: Vec<Vec<String>> = by_path
        .keys()
        .filter(|k| k.starts_with(old))
        .cloned()
        .collect();
    for k in moved {
        if let Some(list) = by_path.remove(&k) {
            let mut new = to.components().to_vec();
            new.extend_from_slice(&k[old.len()..]);
            for w in &list {
                lock(&w.state).path = new.clone();
            }
            by_path.entry(new).or_default().extend(list);
        }
    }
}

impl ServerState {
    /// Directory handles watched by CHANGE_NOTIFY now.
    pub fn notify_watchers(&self) -> usize {
        self.notify.armed.load(Ordering::Acquire)
    }

    /// Bytes of changes buffered for them now.
    pub fn notify_buffered_bytes(&self) -> usize {
        self.notify.buffered.load(Ordering::Acquire)
    }
}

/// The file of `open` changed (MODIFIED with these CompletionFilter bits),
/// reported at its current path.
pub fn modified(server: &ServerState, open: &crate::state::Open, filter: u32) {
    if filter == 0 || !server.notify.active() {
        return;
    }
    let path = lock(&open.entry).path.clone();
    // A stream's size is the stream's; everything else is its file's.
    let name = open.stream.as_ref().map(|s| s.name());
    let (filter, stream_filter) = match name {
        Some(_) if filter & filter::SIZE != 0 => (filter & !filter::SIZE, filter::STREAM_SIZE),
        _ => (filter, 0),
    };
    let mut cs = Vec::with_capacity(2);
    if filter != 0 {
        cs.push(Change {
            action: MODIFIED,
            filter,
            path: &path,
            stream: None,
        });
    }
    if stream_filter != 0 {
        cs.push(Change {
            action: MODIFIED_STREAM,
            filter: stream_filter,
            path: &path,
            stream: name.as_deref(),
        });
    }
    report(server, &open.share, &cs);
}

/// `from` was renamed to `to`: OLD_NAME and NEW_NAME in one directory,
/// REMOVED and ADDED across directories; watchers of a renamed directory
/// (and below it) follow it.
pub fn renamed(server: &ServerState, share: &ShareDef, from: &RelPath, to: &RelPath, is_dir: bool) {
    if !server.notify.active() {
        return;
    }
    let f = name_filter(is_dir);
    let (a, b) = if from.parent() == to.parent() {
        (OLD_NAME, NEW_NAME)
    } else {
        (REMOVED, ADDED)
    };
    report(
        server,
        share,
        &[
            Change {
                action: a,
                filter: f,
                path: from,
                stream: None,
            },
            Change {
                action: b,
                filter: f,
                path: to,
                stream: None,
            },
        ],
    );
    if is_dir {
        dir_renamed(&server.notify, share, from, to);
    }
}
