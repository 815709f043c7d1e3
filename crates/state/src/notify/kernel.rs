//! Changes made on the disk by other programs, for CHANGE_NOTIFY watchers
//! ([`crate::notify`], of which this is the kernel part).
//!
//! The driver owns an inotify descriptor and implements [`KernelWatch`]; the
//! core asks for one kernel watch per watched directory (shared by all its
//! watchers, and by its leases when it is a leased directory:
//! [`crate::dirlease`]; dropped with the last) and is handed the events the driver read
//! ([`ServerState::kernel_events`]). Events are held [`HOLD_MS`] before they
//! are reported, and an event for a name ringshare itself changed in that
//! directory shortly before (an "echo" of its own change, which it reported
//! already) is dropped: an own change marks the name; a mark lives until
//! [`ECHO_MS`] after the first event it hides (or after the sweep that
//! first sees it, for a change the kernel reported nothing of). Another
//! program changing the same name within that window is not reported
//! (docs/limits.md). A WATCH_TREE watcher also kernel-watches the
//! directories below its own ([`TREE_DIRS_MAX`] at most), found when it is
//! made and as new ones are reported.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::notify::{self, filter, Change};
use crate::server::{lock, FileKey, ServerState};
pub use crate::watch::Kernel;
use crate::watch::{DirAt, KDir, Registry};

pub use crate::watch::{KernelEvent, KernelWatch};

/// inotify mask bits (the kernel's ABI, linux/inotify.h).
pub mod mask {
    pub const MODIFY: u32 = 0x0000_0002;
    pub const ATTRIB: u32 = 0x0000_0004;
    pub(crate) const MOVED_FROM: u32 = 0x0000_0040;
    pub const MOVED_TO: u32 = 0x0000_0080;
    pub const CREATE: u32 = 0x0000_0100;
    pub const DELETE: u32 = 0x0000_0200;
    pub(crate) const DELETE_SELF: u32 = 0x0000_0400;
    pub(crate) const MOVE_SELF: u32 = 0x0000_0800;
    pub(crate) const Q_OVERFLOW: u32 = 0x0000_4000;
    pub(crate) const IGNORED: u32 = 0x0000_8000;
    pub const ISDIR: u32 = 0x4000_0000;
    /// What a watch asks for. Writes are seen as they happen (MODIFY), not
    /// at the close of every descriptor opened for writing (CLOSE_WRITE):
    /// a client that opens files read-write and closes them unwritten costs
    /// no event (bench/notify-overhead).
    pub const WATCHED: u32 =
        MODIFY | ATTRIB | MOVED_FROM | MOVED_TO | CREATE | DELETE | DELETE_SELF | MOVE_SELF;
}

/// How long events wait before they are reported (so that ringshare's own
/// change, made just before, has marked its name).
pub const HOLD_MS: u64 = 100;
/// How long a mark of an own change hides the kernel's events for that name.
pub const ECHO_MS: u64 = 2000;
/// Directories below its own one WATCH_TREE watcher kernel-watches at most.
pub const TREE_DIRS_MAX: usize = 4096;
/// Marks kept server-wide; past it an own change is not marked (its kernel
/// echo may then be reported too).
const ECHO_MAX: usize = 262_144;
/// How often unmatched marks are stamped and expired ones dropped.
const SWEEP_MS: u64 = 1000;
/// Events held at once; past it they are dropped and every watcher gets
/// NOTIFY_ENUM_DIR.
const HELD_MAX: usize = 65536;

impl ServerState {
    /// Let the core watch directories through the kernel (the driver calls
    /// this once, at start; `kernel change notify = no` leaves it out).
    pub fn set_kernel_watch(&self, watch: Arc<dyn KernelWatch>) {
        lock(&self.notify.kernel).watch = Some(watch);
    }

    /// Events the driver read; reported from [`ServerState::kernel_tick`]
    /// once held for [`HOLD_MS`].
    pub fn kernel_events(&self, now_ms: u64, events: Vec<KernelEvent>) {
        let overflow = {
            let mut k = lock(&self.notify.kernel);
            for e in events {
                k.held.push_back((now_ms + HOLD_MS, e));
            }
            let over = k.held.len() > HELD_MAX;
            if over {
                k.held.clear();
            }
            over
        };
        if overflow {
            tracing::warn!(
                "more than {HELD_MAX} disk changes waiting; watchers are told to re-read"
            );
            notify::overflow_all(self);
        }
        self.kernel_tick(now_ms);
    }

    /// When held events are due (the driver's worker 0 wakes then).
    pub fn kernel_deadline(&self) -> Option<u64> {
        if self.notify.kernel_dirs.load(Ordering::Acquire) == 0 {
            return None;
        }
        lock(&self.notify.kernel).held.front().map(|(t, _)| *t)
    }

    /// Report the held events that are due, and break the leases of the
    /// leased directories they changed.
    pub fn kernel_tick(&self, now_ms: u64) {
        let Mapped {
            batches,
            overflow,
            ended,
            touched,
        } = {
            let mut k = lock(&self.notify.kernel);
            if k.held.front().is_none_or(|(t, _)| *t > now_ms) {
                return;
            }
            if now_ms >= k.next_sweep_ms {
                k.next_sweep_ms = now_ms + SWEEP_MS;
                let mut marks = 0;
                for d in k.dirs.values_mut() {
                    for until in d.echo.values_mut() {
                        until.get_or_insert(now_ms + ECHO_MS);
                    }
                    d.echo.retain(|_, until| until.is_some_and(|t| t >= now_ms));
                    marks += d.echo.len();
                }
                k.marks = marks;
            }
            let mut due = Vec::new();
            while k.held.front().is_some_and(|(t, _)| *t <= now_ms) {
                if let Some((_, e)) = k.held.pop_front() {
                    due.push(e);
                }
            }
            let r = map_events(&mut k, due, now_ms);
            self.notify
                .kernel_dirs
                .store(k.dirs.len(), Ordering::Release);
            r
        };
        break_dir_leases(self, &touched, overflow, now_ms);
        if overflow {
            notify::overflow_all(self);
        }
        for at in ended {
            notify::overflow_dir(self, &at.0, &at.1);
        }
        for (root, changes) in batches {
            let list: Vec<Change<'_>> = changes
                .iter()
                .map(|(action, f, path)| Change {
                    action: *action,
                    filter: *f,
                    path,
                    stream: None,
                })
                .collect();
            notify::report_at(self, root, &list, false);
        }
    }
}

/// The kernel reported changes in the directories whose watches are held
/// by `watches` (or lost changes: `all`): their leases break to nothing,
/// every one (another program's change is nobody's own).
fn break_dir_leases(server: &ServerState, watches: &[u64], all: bool, now_ms: u64) {
    if watches.is_empty() && !all {
        return;
    }
    let mut breaks = Vec::new();
    for entry in server.files.dirs_watched_by(watches, all) {
        let mut e = lock(&entry);
        if e.is_dir {
            crate::files::oplock::break_dir_leases(&mut e, None, Some(now_ms), &mut breaks);
        }
    }
    server.send_breaks(breaks);
}

/// Changes of one share root: (action, filter, path).
type Batch = (FileKey, Vec<(u32, u32, ringshare_vfs::RelPath)>);

/// What due kernel events come to.
#[derive(Default)]
struct Mapped {
    /// The changes, by share root.
    batches: Vec<Batch>,
    /// The kernel's queue overflowed: changes were lost.
    overflow: bool,
    /// Directories that went away or moved.
    ended: Vec<DirAt>,
    /// The ids holding the kernel watches of the directories something
    /// changed in (or that ended): the leased directories among them break
    /// their leases ([`break_dir_leases`]).
    touched: Vec<u64>,
}

/// Turn due kernel events into changes.
fn map_events(k: &mut Kernel, due: Vec<KernelEvent>, now_ms: u64) -> Mapped {
    let mut out: Vec<Batch> = Vec::new();
    let mut overflow = false;
    let mut ended = Vec::new();
    let mut touched: Vec<u64> = Vec::new();
    let mut i = 0;
    while i < due.len() {
        let e = &due[i];
        i += 1;
        if e.mask & mask::Q_OVERFLOW != 0 {
            overflow = true;
            continue;
        }
        if e.mask & mask::IGNORED != 0 {
            // The directory is gone (or unmounted): so is what was kept for it.
            if let Some(list) = k.by_wd.remove(&e.wd) {
                for at in list {
                    remove_dir(k, &at);
                }
            }
            continue;
        }
        let Some(list) = k.by_wd.get(&e.wd) else {
            continue;
        };
        if e.mask & (mask::DELETE_SELF | mask::MOVE_SELF) != 0 {
            for at in list {
                touched.extend(k.dirs.get(at).map_or(&[][..], |d| &d.refs[..]));
            }
            ended.extend(list.iter().cloned());
            continue;
        }
        let Some(name) = e.name.as_deref() else {
            continue;
        };
        let is_move = e.mask & (mask::MOVED_FROM | mask::MOVED_TO) != 0;
        // The common case, an echo of ringshare's own change: dropped
        // before anything is built.
        if !is_move {
            let dirs = &mut k.dirs;
            let all_echoed = list.iter().all(|at| {
                dirs.get_mut(at)
                    .and_then(|d| d.echo.get_mut(name))
                    .is_some_and(|until| *until.get_or_insert(now_ms + ECHO_MS) >= now_ms)
            });
            if all_echoed {
                continue;
            }
        }
        let list = list.clone();
        let name = name.to_owned();
        let f = notify::name_filter(e.mask & mask::ISDIR != 0);
        // A move within the watched directories: MOVED_FROM then MOVED_TO
        // with the same cookie.
        let pair = (e.mask & mask::MOVED_FROM != 0)
            .then(|| due.get(i))
            .flatten()
            .filter(|n| n.mask & mask::MOVED_TO != 0 && n.cookie == e.cookie)
            .cloned();
        let mut changes: Vec<(DirAt, u32, u32, String)> = Vec::new();
        for at in &list {
            if let Some(to) = &pair {
                let same = to.wd == e.wd;
                changes.push((
                    at.clone(),
                    if same {
                        notify::OLD_NAME
                    } else {
                        notify::REMOVED
                    },
                    f,
                    name.clone(),
                ));
                if let (Some(to_list), Some(to_name)) = (k.by_wd.get(&to.wd), &to.name) {
                    for to_at in to_list.iter().filter(|t| t.0 == at.0) {
                        let action = if same {
                            notify::NEW_NAME
                        } else {
                            notify::ADDED
                        };
                        changes.push((to_at.clone(), action, f, to_name.clone()));
                    }
                }
                continue;
            }
            let (action, fl) = if e.mask & mask::CREATE != 0 || e.mask & mask::MOVED_TO != 0 {
                (notify::ADDED, f)
            } else if e.mask & (mask::DELETE | mask::MOVED_FROM) != 0 {
                (notify::REMOVED, f)
            } else if e.mask & mask::MODIFY != 0 {
                (notify::MODIFIED, filter::LAST_WRITE | filter::SIZE)
            } else if e.mask & mask::ATTRIB != 0 {
                let f = filter::ATTRIBUTES
                    | filter::LAST_WRITE
                    | filter::LAST_ACCESS
                    | filter::CREATION
                    | filter::EA
                    | filter::SECURITY;
                (notify::MODIFIED, f)
            } else {
                continue;
            };
            changes.push((at.clone(), action, fl, name.clone()));
        }
        if pair.is_some() {
            i += 1;
        }
        for (at, action, fl, name) in changes {
            let echoed = k
                .dirs
                .get_mut(&at)
                .and_then(|d| d.echo.get_mut(&name))
                .is_some_and(|until| *until.get_or_insert(now_ms + ECHO_MS) >= now_ms);
            if echoed {
                continue;
            }
            touched.extend(k.dirs.get(&at).map_or(&[][..], |d| &d.refs[..]));
            let mut parts = at.1.clone();
            parts.push(name);
            let Ok(path) = ringshare_vfs::RelPath::from_components(parts) else {
                continue;
            };
            match out.iter_mut().find(|(r, _)| *r == at.0) {
                Some((_, v)) => v.push((action, fl, path)),
                None => out.push((at.0, vec![(action, fl, path)])),
            }
        }
    }
    touched.sort_unstable();
    touched.dedup();
    Mapped {
        batches: out,
        overflow,
        ended,
        touched,
    }
}

/// A watcher of the directory at `at` wants the kernel watch (made with the
/// first). False when there is none (no kernel watching, a backend without
/// descriptors, or the kernel refused). The system call is made under the
/// lock: for a local share only (an offloaded one's: [`add_off_lock`]).
pub(crate) fn add_ref(
    hub: &Registry,
    at: &DirAt,
    dir: Option<&dyn ringshare_vfs::Node>,
    wid: u64,
) -> bool {
    let mut k = lock(&hub.kernel);
    let Some(watch) = k.watch.clone() else {
        return false;
    };
    if let Some(d) = k.dirs.get_mut(at) {
        if !d.refs.contains(&wid) {
            d.refs.push(wid);
        }
        return true;
    }
    let Some(dir) = dir else {
        return false;
    };
    let Some(wd) = watch.add(dir) else {
        return false;
    };
    insert_dir(&hub.kernel_dirs, &mut k, at, wd, wid);
    true
}

/// Keep the directory at `at`, watched as `wd`, for `id`.
fn insert_dir(count: &AtomicUsize, k: &mut Kernel, at: &DirAt, wd: i32, id: u64) {
    k.dirs.insert(
        at.clone(),
        KDir {
            wd: Some(wd),
            refs: vec![id],
            echo: HashMap::new(),
        },
    );
    k.by_wd.entry(wd).or_default().push(at.clone());
    k.unwatch_later.retain(|w| *w != wd);
    count.fetch_add(1, Ordering::AcqRel);
}

/// What a file system job adding kernel watches holds of the registry.
#[derive(Clone)]
struct Hub {
    kernel: Arc<Mutex<Kernel>>,
    dirs: Arc<AtomicUsize>,
}

impl Hub {
    fn of(hub: &Registry) -> Hub {
        Hub {
            kernel: Arc::clone(&hub.kernel),
            dirs: Arc::clone(&hub.kernel_dirs),
        }
    }
}

/// Who a watch added off the lock is kept for ([`add_off_lock`]).
enum Keep<'a> {
    /// A watcher (its id): while it is live (`Kernel::root_of`).
    Watcher,
    /// A leased directory (its key) whose watch the id holds in the file
    /// table's list: while the list still says so.
    Lease(&'a Mutex<Vec<(FileKey, Option<u64>)>>, FileKey),
}

/// The kernel watch of the directory at `at`, open as `dir`, for `id`, on an
/// offloaded share (in a file system job): the system call (on a network file
/// system a permission check that may ask the server) is made with no lock
/// held, then what it returned is kept if `keep`'s owner still wants it. Two
/// adds of one directory get the same watch descriptor: one that finds the
/// directory kept meanwhile only adds its id; a descriptor no directory uses
/// goes once no add is under way ([`unwatch_unused`]). True when kept.
fn add_off_lock(
    hub: &Hub,
    at: &DirAt,
    dir: &dyn ringshare_vfs::Node,
    id: u64,
    keep: Keep<'_>,
) -> bool {
    // The directory's watch found at the first look may go before the second (its last other
    // holder let go): the owner, still wanting one, looks and adds again (the review of
    // session 50, K2), a few times at most.
    for _ in 0..4 {
        if let Some(kept) = add_once(hub, at, dir, id, &keep) {
            return kept;
        }
    }
    false
}

/// One look, add and install of [`add_off_lock`]: whether kept, or `None` when the owner still
/// wants a watch that went between the looks (nothing added: look again).
fn add_once(
    hub: &Hub,
    at: &DirAt,
    dir: &dyn ringshare_vfs::Node,
    id: u64,
    keep: &Keep<'_>,
) -> Option<bool> {
    let watch = {
        let mut k = lock(&hub.kernel);
        let Some(watch) = k.watch.clone() else {
            return Some(false);
        };
        if k.dirs.contains_key(at) {
            None
        } else {
            k.adding += 1;
            Some(watch)
        }
    };
    let got = watch.map(|w| w.add(dir));
    // The lease list's lock comes before the kernel table's (as in `watch_dir_lease`).
    let leases = match keep {
        Keep::Lease(list, key) => Some((lock(list), *key)),
        Keep::Watcher => None,
    };
    let mut k = lock(&hub.kernel);
    if got.is_some() {
        k.adding -= 1;
    }
    let wanted = match &leases {
        Some((list, key)) => list.iter().any(|(k, w)| k == key && *w == Some(id)),
        None => k.root_of.contains_key(&id),
    };
    if wanted && got.is_none() && !k.dirs.contains_key(at) {
        return None;
    }
    let wd = got.flatten();
    let kept = wanted
        && match k.dirs.get_mut(at) {
            Some(d) => {
                if !d.refs.contains(&id) {
                    d.refs.push(id);
                }
                true
            }
            None => wd.is_some_and(|wd| {
                insert_dir(&hub.dirs, &mut k, at, wd, id);
                true
            }),
        };
    unwatch_unused(&mut k, wd);
    Some(kept)
}

/// `wd` (an add's answer, when there is one) goes when no directory uses
/// it; it and the descriptors left for later go once no add is under way
/// (one under way may have been handed the same descriptor).
fn unwatch_unused(k: &mut Kernel, wd: Option<i32>) {
    if let Some(wd) = wd {
        if !k.by_wd.contains_key(&wd) && !k.unwatch_later.contains(&wd) {
            k.unwatch_later.push(wd);
        }
    }
    if k.adding > 0 || k.unwatch_later.is_empty() {
        return;
    }
    for wd in std::mem::take(&mut k.unwatch_later) {
        if !k.by_wd.contains_key(&wd) {
            if let Some(w) = &k.watch {
                w.remove(wd);
            }
        }
    }
}

/// Watcher `wid` ends: it lets go of every kernel watch it asked for.
pub(crate) fn drop_refs(hub: &Registry, wid: u64) {
    let mut k = lock(&hub.kernel);
    k.tree_counts.remove(&wid);
    k.tree_whos.remove(&wid);
    // Once per watcher, however often it is let go.
    if let Some(root) = k.root_of.remove(&wid) {
        if let Some(r) = k.roots.get_mut(&root) {
            r.1 -= 1;
            if r.1 == 0 {
                k.roots.remove(&root);
            }
        }
    }
    let_go(hub, &mut k, wid);
}

/// A leased directory's kernel watch, for the lease holders of the
/// directory at `at` open as `dir` ([`crate::dirlease`]): the id it is held
/// by, or none (no kernel watching, no descriptor, or the kernel refused).
/// Local shares only (an offloaded one's: [`lease_in_job`]).
pub(crate) fn add_lease_ref(
    hub: &Registry,
    at: &DirAt,
    dir: Option<&dyn ringshare_vfs::Node>,
) -> Option<u64> {
    let id = hub.next_id.fetch_add(1, Ordering::Relaxed);
    add_ref(hub, at, dir, id).then_some(id)
}

/// An id for a leased directory's watch to be added in a job
/// ([`lease_in_job`]), when the driver watches directories at all.
pub(crate) fn lease_id(hub: &Registry) -> Option<u64> {
    lock(&hub.kernel).watch.as_ref()?;
    Some(hub.next_id.fetch_add(1, Ordering::Relaxed))
}

/// On an offloaded share, the kernel watch of leased directory `key`, open as
/// `dir` in share `share` at the path its table entry `entry` has when the job
/// runs, added in a file system job for `id`
/// (which the file table's list `leases` holds for it: [`lease_id`]); kept
/// only while the list still does (its last lease may go meanwhile). The
/// share root's identity is read in the job too, when not known yet. A watch
/// not added leaves the list's entry without one, for the next grant.
pub(crate) fn lease_in_job(
    hub: &Registry,
    leases: &crate::server::table::LeasedDirs,
    (share, entry): (
        &Arc<crate::server::ShareDef>,
        &Arc<Mutex<crate::files::FileEntry>>,
    ),
    (key, id): (FileKey, u64),
    dir: &Arc<dyn ringshare_vfs::Node>,
) {
    let (h, leases) = (Hub::of(hub), Arc::clone(leases));
    let (share, dir, entry) = (Arc::clone(share), Arc::clone(dir), Arc::clone(entry));
    let job = crate::fsjob::FsJob::telling(
        dir.who().cloned(),
        0,
        crate::fsjob::share_key(&share.name),
        "a leased directory's kernel watch",
        move || {
            // Where the directory is when the job runs: a rename while the job waited moved
            // the entry (the review of session 50, K3, as a CHANGE_NOTIFY's job does).
            let path = lock(&entry).path.components().to_vec();
            let kept = crate::notify::root_key(&share).is_some_and(|root| {
                let keep = Keep::Lease(&leases, key);
                add_off_lock(&h, &(root, path), dir.as_ref(), id, keep)
            });
            if !kept {
                // The kernel refused (inotify's limit) or the root could not be read: the
                // directory, still leased, is listed without a watch again, so that its next
                // grant tries once more, as on a local share.
                let mut list = lock(&leases);
                if let Some((_, w)) = list.iter_mut().find(|(k, w)| *k == key && *w == Some(id)) {
                    *w = None;
                }
            }
        },
    );
    post(hub, job);
}

/// A file system job for the pool, posted by the next request of any
/// connection or by the driver's worker 0 ([`ServerState::take_kernel_jobs`]), which the
/// waker wakes: a job queued where no request or event follows (a peer's forwarded change, a
/// job's report of a new directory on an idle server) is not left waiting (the review of
/// session 50, K1).
fn post(hub: &Registry, mut job: crate::fsjob::FsJob) {
    job.nobodys = true;
    {
        let mut k = lock(&hub.kernel);
        k.jobs.push(job);
        hub.kernel_jobs.store(k.jobs.len(), Ordering::Release);
    }
    let wake = lock(&hub.kernel_waker).clone();
    if let Some(wake) = wake {
        wake();
    }
}

impl ServerState {
    /// What wakes the driver's workers when a kernel watch's job is queued
    /// ([`ServerState::take_kernel_jobs`]); the driver sets it once, at start.
    pub fn set_kernel_jobs_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        *lock(&self.notify.kernel_waker) = Some(wake);
    }

    /// The file system jobs that add kernel watches on offloaded shares, to
    /// be handed to the pool, nobody waiting for them (a connection after a
    /// request, the driver's worker 0 after the kernel's events).
    pub fn take_kernel_jobs(&self) -> Vec<crate::fsjob::FsJob> {
        if !self.kernel_jobs_waiting() {
            return Vec::new();
        }
        let mut k = lock(&self.notify.kernel);
        self.notify.kernel_jobs.store(0, Ordering::Release);
        std::mem::take(&mut k.jobs)
    }

    /// Whether [`ServerState::take_kernel_jobs`] has any (a quick look).
    pub fn kernel_jobs_waiting(&self) -> bool {
        self.notify.kernel_jobs.load(Ordering::Acquire) != 0
    }
}

/// The kernel watch a leased directory held by `id` goes (its last lease went).
pub(crate) fn drop_lease_ref(hub: &Registry, id: u64) {
    let_go(hub, &mut lock(&hub.kernel), id);
}

/// `id` lets go of every kernel watch it held; a watch nobody holds goes.
fn let_go(hub: &Registry, k: &mut Kernel, id: u64) {
    let gone: Vec<DirAt> = k
        .dirs
        .iter_mut()
        .filter_map(|(at, d)| {
            d.refs.retain(|w| *w != id);
            d.refs.is_empty().then(|| at.clone())
        })
        .collect();
    for at in gone {
        forget_dir(hub, k, &at);
    }
}

/// Remember the share of `root` while watcher `wid` uses it.
pub(crate) fn use_root(hub: &Registry, root: FileKey, share: &crate::server::ShareDef, wid: u64) {
    let mut k = lock(&hub.kernel);
    if k.root_of.insert(wid, root).is_some() {
        return;
    }
    let offloaded = share
        .offloaded()
        .then(|| crate::fsjob::share_key(&share.name));
    k.roots
        .entry(root)
        .or_insert_with(|| (Arc::clone(&share.backend), 0, offloaded))
        .1 += 1;
}

/// Kernel-watch the directories below `top` for WATCH_TREE watcher `wid`,
/// breadth first, up to [`TREE_DIRS_MAX`]. The walk, and every later
/// directory opened for the watcher, runs as `who`, the watcher's user: a
/// directory that user may not read is not walked or watched.
pub fn watch_tree(
    hub: &Registry,
    root: FileKey,
    top: &[String],
    wid: u64,
    who: &ringshare_vfs::Who,
) {
    lock(&hub.kernel).tree_whos.insert(wid, Arc::clone(who));
    let Some(share) = kernel_share(&hub.kernel, root) else {
        return;
    };
    walk(share.as_ref(), top, who, |dir, opened| {
        watch_subdir(hub, root, dir, opened, wid)
    });
}

/// The directories below `top`, breadth first, each opened as `who` and
/// handed to `watch` (which answers false to end the walk).
fn walk(
    share: &dyn ringshare_vfs::Share,
    top: &[String],
    who: &ringshare_vfs::Who,
    mut watch: impl FnMut(&[String], &ringshare_vfs::Opened) -> bool,
) {
    let mut queue = std::collections::VecDeque::from([top.to_vec()]);
    let mut first = true;
    while let Some(dir) = queue.pop_front() {
        let Ok(path) = ringshare_vfs::RelPath::from_components(dir.clone()) else {
            continue;
        };
        let Ok(opened) = share.open(who, &path, &open_dir()) else {
            continue;
        };
        // The top directory is watched through the watcher's own open.
        if !std::mem::take(&mut first) && !watch(&dir, &opened) {
            return;
        }
        let Ok(entries) = opened.node.read_dir() else {
            continue;
        };
        for e in entries.into_iter().filter(|e| e.attr.is_dir()) {
            let mut p = dir.clone();
            p.push(e.name);
            queue.push_back(p);
        }
    }
}

/// On an offloaded share, watcher `open`'s kernel watch of its directory at
/// `top` (and, for WATCH_TREE, the walk below it: [`watch_tree`]) added in
/// a file system job acting as the watcher's user, kept only while the
/// watcher lives. The CHANGE_NOTIFY does not wait for it: changes other
/// programs make before the job ran are not reported (docs/limits.md).
pub(crate) fn watch_in_job(
    hub: &Registry,
    root: FileKey,
    tree: bool,
    w: &Arc<crate::watch::Watcher>,
    open: &crate::state::Open,
) {
    let wid = w.id;
    let share = {
        let mut k = lock(&hub.kernel);
        if tree {
            k.tree_whos.insert(wid, Arc::clone(&open.who));
        }
        match (&k.watch, k.roots.get(&root)) {
            (Some(_), Some((share, _, _))) => Arc::clone(share),
            _ => return,
        }
    };
    let (h, dir, who) = (Hub::of(hub), Arc::clone(&open.node), Arc::clone(&open.who));
    let w = Arc::clone(w);
    let job = crate::fsjob::FsJob::telling(
        Some(Arc::clone(&who)),
        0,
        crate::fsjob::share_key(&open.share.name),
        "a CHANGE_NOTIFY's kernel watches",
        move || {
            // Where the directory is when the job runs: a rename while the job waited moved
            // the watcher, not a watch not yet made (the review of session 50, K3).
            let top = lock(&w.state).path.clone();
            let kept = add_off_lock(&h, &(root, top.clone()), dir.as_ref(), wid, Keep::Watcher);
            // The directory's node goes here, on the pool, when it is the last holder.
            drop(dir);
            if kept && tree {
                walk(share.as_ref(), &top, &who, |path, opened| {
                    subdir_in_job(&h, root, path, opened, wid)
                });
            }
        },
    );
    post(hub, job);
}

fn open_dir() -> ringshare_vfs::OpenOptions {
    ringshare_vfs::OpenOptions {
        directory: true,
        ..ringshare_vfs::OpenOptions::read_existing()
    }
}

/// The share of `root` when the driver watches directories and a watcher
/// watches there.
fn kernel_share(kernel: &Mutex<Kernel>, root: FileKey) -> Option<Arc<dyn ringshare_vfs::Share>> {
    root_share(kernel, root).map(|(s, _)| s)
}

/// [`kernel_share`], with the share's key for file system jobs when it is
/// offloaded.
#[allow(clippy::type_complexity)]
fn root_share(
    kernel: &Mutex<Kernel>,
    root: FileKey,
) -> Option<(Arc<dyn ringshare_vfs::Share>, Option<u64>)> {
    let k = lock(kernel);
    k.watch.as_ref()?;
    k.roots.get(&root).map(|(s, _, off)| (Arc::clone(s), *off))
}

/// A directory appeared at `path` below WATCH_TREE watchers `wids`: it is
/// kernel-watched for them (each up to [`TREE_DIRS_MAX`] directories),
/// opened as each watcher's user; on an offloaded share in a file system
/// job per watcher (this may run on the I/O thread: a request's report, the
/// kernel's events read on worker 0).
pub(crate) fn dir_appeared(hub: &Registry, root: FileKey, path: &[String], wids: &[u64]) {
    let Some((share, offloaded)) = root_share(&hub.kernel, root) else {
        return;
    };
    let Ok(rel) = ringshare_vfs::RelPath::from_components(path.to_vec()) else {
        return;
    };
    for &wid in wids {
        let Some(who) = lock(&hub.kernel).tree_whos.get(&wid).cloned() else {
            continue;
        };
        let Some(share_key) = offloaded else {
            if let Ok(opened) = share.open(&who, &rel, &open_dir()) {
                watch_subdir(hub, root, path, &opened, wid);
            }
            continue;
        };
        let (h, share, rel) = (Hub::of(hub), Arc::clone(&share), rel.clone());
        let job = crate::fsjob::FsJob::telling(
            Some(Arc::clone(&who)),
            0,
            share_key,
            "a new directory's kernel watch",
            move || {
                if let Ok(opened) = share.open(&who, &rel, &open_dir()) {
                    subdir_in_job(&h, root, rel.components(), &opened, wid);
                }
            },
        );
        post(hub, job);
    }
}

/// Count one more directory below WATCH_TREE watcher `wid`'s own; false
/// once it has [`TREE_DIRS_MAX`] of them.
fn count_subdir(k: &mut Kernel, wid: u64) -> bool {
    let n = k.tree_counts.entry(wid).or_default();
    if *n >= TREE_DIRS_MAX {
        if !k.tree_warned {
            k.tree_warned = true;
            tracing::warn!(
                "a WATCH_TREE change notification covers more than {TREE_DIRS_MAX} directories; \
                 changes other programs make in the rest are not reported"
            );
        }
        return false;
    }
    *n += 1;
    true
}

/// Kernel-watch the directory open as `opened` at `path` for WATCH_TREE
/// watcher `wid`; false once the watcher has [`TREE_DIRS_MAX`] of them.
fn watch_subdir(
    hub: &Registry,
    root: FileKey,
    path: &[String],
    opened: &ringshare_vfs::Opened,
    wid: u64,
) -> bool {
    if !count_subdir(&mut lock(&hub.kernel), wid) {
        return false;
    }
    add_ref(hub, &(root, path.to_vec()), Some(opened.node.as_ref()), wid);
    true
}

/// [`watch_subdir`] in a file system job (the add off the lock); false also
/// once the watcher ended (the walk stops).
fn subdir_in_job(
    hub: &Hub,
    root: FileKey,
    path: &[String],
    opened: &ringshare_vfs::Opened,
    wid: u64,
) -> bool {
    {
        let mut k = lock(&hub.kernel);
        if !k.root_of.contains_key(&wid) || !count_subdir(&mut k, wid) {
            return false;
        }
    }
    let at = (root, path.to_vec());
    add_off_lock(hub, &at, opened.node.as_ref(), wid, Keep::Watcher);
    true
}

/// Forget what was kept for the directory at `at` (its marks, its place in
/// its watchers' WATCH_TREE counts); its watch descriptor is the caller's.
fn remove_dir(k: &mut Kernel, at: &DirAt) -> Option<KDir> {
    let d = k.dirs.remove(at)?;
    k.marks = k.marks.saturating_sub(d.echo.len());
    for w in &d.refs {
        if let Some(n) = k.tree_counts.get_mut(w) {
            *n = n.saturating_sub(1);
        }
    }
    Some(d)
}

/// Drop the kernel watch of a directory nobody asks for any more.
fn forget_dir(hub: &Registry, k: &mut Kernel, at: &DirAt) {
    let Some(wd) = remove_dir(k, at).map(|d| d.wd) else {
        return;
    };
    hub.kernel_dirs.fetch_sub(1, Ordering::AcqRel);
    if let Some(wd) = wd {
        let last = k.by_wd.get_mut(&wd).is_none_or(|l| {
            l.retain(|x| x != at);
            l.is_empty()
        });
        if last {
            k.by_wd.remove(&wd);
            // An add under way in a job may have been handed this descriptor.
            if k.adding > 0 {
                k.unwatch_later.push(wd);
            } else if let Some(w) = k.watch.clone() {
                w.remove(wd);
            }
        }
    }
}

/// ringshare changed `name` in the directory at `at`: the kernel's events
/// for it are its own echo.
pub fn mark(hub: &Registry, root: FileKey, parent: &[String], name: &str) {
    let mut guard = lock(&hub.kernel);
    let k = &mut *guard;
    let full = k.marks >= ECHO_MAX;
    // A few kernel-watched directories (the usual case) are scanned, which
    // spares building a key for every close.
    let d = if k.dirs.len() <= 16 {
        k.dirs
            .iter_mut()
            .find(|((r, p), _)| *r == root && p.as_slice() == parent)
            .map(|(_, d)| d)
    } else {
        k.dirs.get_mut(&(root, parent.to_vec()))
    };
    if let Some(d) = d {
        if let Some(until) = d.echo.get_mut(name) {
            *until = None;
        } else if !full {
            d.echo.insert(name.to_owned(), None);
            k.marks += 1;
        }
    }
}

/// A directory moved from `from` to `to` (paths under one root): its kernel
/// watches (and those below it) follow.
pub fn moved(hub: &Registry, root: FileKey, from: &[String], to: &[String]) {
    let mut k = lock(&hub.kernel);
    let keys: Vec<DirAt> = k
        .dirs
        .keys()
        .filter(|(r, p)| *r == root && p.starts_with(from))
        .cloned()
        .collect();
    for old in keys {
        let mut new = to.to_vec();
        new.extend_from_slice(&old.1[from.len()..]);
        let new = (root, new);
        if let Some(d) = k.dirs.remove(&old) {
            if let Some(wd) = d.wd {
                if let Some(l) = k.by_wd.get_mut(&wd) {
                    for x in l.iter_mut().filter(|x| **x == old) {
                        *x = new.clone();
                    }
                }
            }
            k.dirs.insert(new, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(wd: i32, mask: u32, cookie: u32, name: &str) -> KernelEvent {
        KernelEvent {
            wd,
            mask,
            cookie,
            name: Some(name.into()),
        }
    }

    fn kernel_with(dirs: &[(i32, &[&str])]) -> Kernel {
        let mut k = Kernel::default();
        for (wd, p) in dirs {
            let at = (
                FileKey {
                    dev: 1,
                    ino: 1,
                    stream: 0,
                },
                p.iter().map(|s| s.to_string()).collect(),
            );
            k.dirs.insert(
                at.clone(),
                KDir {
                    wd: Some(*wd),
                    refs: vec![1],
                    echo: HashMap::new(),
                },
            );
            k.by_wd.entry(*wd).or_default().push(at);
        }
        k
    }

    /// Mark `name` in directory `d` of [`kernel_with`] as ringshare's own.
    fn mark_echo(k: &mut Kernel, name: &str) {
        let at = (
            FileKey {
                dev: 1,
                ino: 1,
                stream: 0,
            },
            vec!["d".to_string()],
        );
        k.dirs.get_mut(&at).unwrap().echo.insert(name.into(), None);
    }

    fn actions(b: &[Batch]) -> Vec<(u32, String)> {
        b.iter()
            .flat_map(|(_, v)| v.iter().map(|(a, _, p)| (*a, p.to_slash_path())))
            .collect()
    }

    #[test]
    fn a_move_in_one_directory_pairs_into_old_and_new_names() {
        let mut k = kernel_with(&[(1, &["d"])]);
        let Mapped {
            batches: b,
            overflow: over,
            ..
        } = map_events(
            &mut k,
            vec![
                ev(1, mask::MOVED_FROM, 7, "a"),
                ev(1, mask::MOVED_TO, 7, "b"),
            ],
            0,
        );
        assert!(!over);
        let got = actions(&b);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, notify::OLD_NAME);
        assert!(got[0].1.ends_with("d/a"), "{got:?}");
        assert_eq!(got[1].0, notify::NEW_NAME);
    }

    #[test]
    fn a_move_between_watched_directories_is_removed_then_added() {
        let mut k = kernel_with(&[(1, &["x"]), (2, &["y"])]);
        let b = map_events(
            &mut k,
            vec![
                ev(1, mask::MOVED_FROM, 9, "f"),
                ev(2, mask::MOVED_TO, 9, "f"),
            ],
            0,
        )
        .batches;
        let got = actions(&b);
        assert_eq!(got[0].0, notify::REMOVED);
        assert_eq!(got[1].0, notify::ADDED);
        assert!(got[1].1.ends_with("y/f"));
    }

    #[test]
    fn names_ringshare_changed_itself_are_not_reported_again_but_others_are() {
        let mut k = kernel_with(&[(1, &["d"])]);
        mark_echo(&mut k, "mine");
        let b = map_events(
            &mut k,
            vec![
                ev(1, mask::CREATE, 0, "mine"),
                ev(1, mask::CREATE, 0, "theirs"),
            ],
            0,
        )
        .batches;
        let got = actions(&b);
        assert_eq!(got.len(), 1);
        assert!(got[0].1.ends_with("d/theirs"));
    }

    #[test]
    fn a_write_by_another_program_is_modified_and_ringshares_own_is_its_echo() {
        let mut k = kernel_with(&[(1, &["d"])]);
        mark_echo(&mut k, "ours");
        let b = map_events(
            &mut k,
            vec![
                ev(1, mask::MODIFY, 0, "ours"),
                ev(1, mask::MODIFY, 0, "theirs"),
            ],
            0,
        )
        .batches;
        let got = actions(&b);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, notify::MODIFIED);
        assert!(got[0].1.ends_with("d/theirs"));
    }

    #[test]
    fn a_kernel_queue_overflow_and_a_removed_directory_are_flagged() {
        let mut k = kernel_with(&[(1, &["d"])]);
        let Mapped {
            overflow: over,
            ended,
            ..
        } = map_events(
            &mut k,
            vec![
                KernelEvent {
                    wd: -1,
                    mask: mask::Q_OVERFLOW,
                    cookie: 0,
                    name: None,
                },
                KernelEvent {
                    wd: 1,
                    mask: mask::DELETE_SELF,
                    cookie: 0,
                    name: None,
                },
            ],
            0,
        );
        assert!(over);
        assert_eq!(ended.len(), 1);
    }

    #[test]
    fn a_mark_hides_events_for_two_seconds_after_the_first_it_hides_then_lets_them_through() {
        let mut k = kernel_with(&[(1, &["d"])]);
        mark_echo(&mut k, "n");
        let seen = |k: &mut Kernel, t: u64| {
            actions(&map_events(k, vec![ev(1, mask::ATTRIB, 0, "n")], t).batches).len()
        };
        assert_eq!(seen(&mut k, 10_000), 0);
        assert_eq!(seen(&mut k, 10_000 + ECHO_MS), 0);
        assert_eq!(seen(&mut k, 10_001 + ECHO_MS), 1);
    }

    /// A kernel watch that, as inotify does for one inode, hands out one descriptor.
    #[derive(Default)]
    struct OneWd(Mutex<Vec<i32>>);

    impl KernelWatch for OneWd {
        fn add(&self, _dir: &dyn ringshare_vfs::Node) -> Option<i32> {
            Some(5)
        }
        fn remove(&self, wd: i32) {
            self.0.lock().unwrap().push(wd);
        }
    }

    #[test]
    fn a_lease_watch_added_while_the_directorys_last_watcher_lets_go_is_kept() {
        use ringshare_vfs::Share;
        let hub = Registry::default();
        let w = Arc::new(OneWd::default());
        lock(&hub.kernel).watch = Some(w.clone());
        let root = FileKey {
            dev: 1,
            ino: 1,
            stream: 0,
        };
        let at: DirAt = (root, vec!["d".to_string()]);
        // Watcher 1 holds the directory's kernel watch (wd 5).
        lock(&hub.kernel).root_of.insert(1, root);
        insert_dir(&hub.kernel_dirs, &mut lock(&hub.kernel), &at, 5, 1);
        // Lease watch id 2 is listed for the leased directory `key` (as dirlease::watch does).
        let key = FileKey {
            dev: 1,
            ino: 2,
            stream: 0,
        };
        let list: crate::server::table::LeasedDirs = Arc::new(Mutex::new(vec![(key, Some(2))]));
        let share = ringshare_vfs::memory::MemShare::new();
        let dir = share
            .open(
                &ringshare_vfs::server_who(),
                &ringshare_vfs::RelPath::root(),
                &open_dir(),
            )
            .unwrap()
            .node;
        // The job's second look waits for the list's lock, which the test holds.
        let held = list.lock().unwrap();
        let job = {
            let (h, at, list, dir) = (
                Hub::of(&hub),
                at.clone(),
                Arc::clone(&list),
                Arc::clone(&dir),
            );
            std::thread::spawn(move || {
                add_off_lock(&h, &at, dir.as_ref(), 2, Keep::Lease(&list, key))
            })
        };
        // Let the job make its first look (the directory is watched: no add).
        std::thread::sleep(std::time::Duration::from_millis(200));
        // Watcher 1 ends: the directory's watch goes (wd 5 removed: no add is under way).
        drop_refs(&hub, 1);
        drop(held);
        let kept = job.join().unwrap();
        let k = lock(&hub.kernel);
        assert!(kept, "the lease still wants its watch");
        assert_eq!(k.dirs.get(&at).map(|d| d.refs.clone()), Some(vec![2]));
        assert!(k.by_wd.contains_key(&5));
    }
}
