//! File system jobs (issue 33; docs/cluster-internals.md, "File system calls off the I/O
//! thread"): a share whose file system may wait on a network or another process
//! ([`crate::config::ShareDef::offloaded`]: FUSE, NFS, CephFS) has the calls a request makes
//! to it asked as a [`crate::lookup::Lookup::Fs`] instead of made on the I/O thread. The
//! request parks while a thread of the driver's file system pool runs the job, as the
//! request's user, and runs again with the answer ([`FsDone`]) at hand, as a request that
//! asks the id source does.
//!
//! The pool runs jobs of one order (an open's) one after another in the order they were
//! asked, and at most a few of one share and one connection at once, so that one stuck file
//! or share holds only its share of the pool's threads.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use ringshare_vfs::{FileAttr, FsResult, Node, OfdLock, SetTimes, UnixNanos, Who};
use ringshare_wire::NtStatus;

/// A job for the file system pool.
pub struct FsJob {
    /// Whom it acts as (the request's user: the credentials its node was opened with);
    /// `None`: the server.
    pub who: Option<Who>,
    /// Jobs of one order (an open's: [`order_of`]) run one after another, in the order they
    /// were asked; 0: none.
    pub order: u64,
    /// The share it is about ([`share_key`]): a connection's jobs about one share are bounded.
    pub share: u64,
    /// What it does, for the log.
    pub what: &'static str,
    /// The calls, made on a pool thread acting as `who`.
    pub run: Box<dyn Fn() -> FsDone + Send + Sync>,
    /// The descriptor whose last close the job makes ([`FsJob::last_close`]): after the calls
    /// the pool waits until nothing else holds it (an I/O or a READ's reply on its way out,
    /// which would otherwise close it where they end, on the I/O thread), a bounded time, and
    /// lets it go there, before the answer is posted.
    pub closes: Option<Arc<OwnedFd>>,
    /// A READ's job: the connection holds what is not a READ behind it and it behind what is
    /// not a READ ([`FsJob::order`]'s requests), so the pool need not order it after the open's
    /// other READs' jobs (they run side by side, as the READs' I/O does).
    pub among_reads: bool,
    /// Nobody's: a kernel watch's job (crate::notify::kernel), queued by one connection's
    /// request or the kernel's events and posted by whichever connection or worker comes next.
    /// The pool bounds such jobs per share for the whole node, not with the jobs of the
    /// connection that happened to post them.
    pub nobodys: bool,
}

/// What a [`FsJob`] found.
#[derive(Debug, Clone)]
pub enum FsDone {
    /// A READ's or WRITE's checks ([`IoFacts`]).
    Io(IoFacts),
    /// A job that answers only whether it worked.
    Done(FsResult<()>),
    /// A CLOSE's attributes read before its close ([`FsJob::close_attributes`]), or its last
    /// close made ([`FsJob::last_close`]: the attributes from before it, when asked).
    Closed(Option<FsResult<FileAttr>>),
    /// A request's answer made in the job (a QUERY_INFO's: [`FsJob::answer`]): its status and
    /// body, or the status it failed with.
    Reply(Result<(NtStatus, Vec<u8>), NtStatus>),
    /// What the job made for the request to go on with (a CREATE's open: crates/core's
    /// cmd/create/offload.rs), taken once when it runs again ([`Carried::take`]).
    Made(Carried),
    /// A change the request decided and the job made ([`FsJob::change`]: a SET_INFO's): the
    /// CompletionFilter bits of what it changed (watchers hear of these only), and how it
    /// ended.
    Changed(u32, Result<(), NtStatus>),
}

/// A job's own result for its request ([`FsDone::Made`]), of a type only the request knows:
/// taken once. What it holds may hold a file open: one nobody took is let go on the pool
/// ([`FsJob::let_go`]), not where the answer is dropped.
#[derive(Clone)]
pub struct Carried {
    value: Arc<std::sync::Mutex<Option<Box<dyn std::any::Any + Send>>>>,
    /// It holds an open file (a node), whose last close must not be made on the I/O thread.
    pub holds_files: bool,
}

impl Carried {
    /// `value`, which holds an open file when `holds_files`.
    pub fn new<T: Send + 'static>(value: T, holds_files: bool) -> Carried {
        Carried {
            value: Arc::new(std::sync::Mutex::new(Some(Box::new(value)))),
            holds_files,
        }
    }

    /// The value, when it is a `T` and nobody took it yet.
    pub fn take<T: 'static>(&self) -> Option<T> {
        let mut v = self
            .value
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match v.take()?.downcast::<T>() {
            Ok(t) => Some(*t),
            Err(other) => {
                *v = Some(other);
                None
            }
        }
    }
}

impl std::fmt::Debug for Carried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Carried(holds files: {})", self.holds_files)
    }
}

/// What a READ or WRITE asks its file's file system before its I/O: whether a POSIX lock of
/// another open file description is in the way ([`Node::posix_locked`]), the file's size
/// ([`Node::size`]), and for a file's first WRITE its modification time before it (the write
/// time shown until the update: crates/core's writetime); `None` where it was not asked. A
/// named stream's READ or WRITE has its I/O made in the same job once the lock probe found
/// nothing in the way (`io`: [`FsJob::io_facts_then`]).
#[derive(Debug, Clone, Default)]
pub struct IoFacts {
    pub locked: Option<FsResult<bool>>,
    pub size: Option<FsResult<u64>>,
    pub mtime: Option<FsResult<UnixNanos>>,
    pub io: Option<Carried>,
}

/// A lock probe: its kind and range ([`Node::posix_locked`]).
pub type LockProbe = (OfdLock, i64, i64);

impl FsJob {
    /// A job of `order` about `share`, acting as `who`, that makes `run`'s calls.
    pub fn new(
        who: Option<Who>,
        order: u64,
        share: u64,
        what: &'static str,
        run: Box<dyn Fn() -> FsDone + Send + Sync>,
    ) -> FsJob {
        FsJob {
            who,
            order,
            share,
            what,
            run,
            closes: None,
            among_reads: false,
            nobodys: false,
        }
    }

    /// The checks of a READ or WRITE of `node`: the lock probe `lock` and, when `size`, the
    /// file's size, when `mtime` its modification time.
    pub fn io_facts(
        node: Arc<dyn Node>,
        order: u64,
        share: u64,
        lock: Option<LockProbe>,
        (size, mtime): (bool, bool),
    ) -> FsJob {
        FsJob::new(
            node.who().cloned(),
            order,
            share,
            "the checks of a READ or WRITE",
            once(move || {
                FsDone::Io(IoFacts {
                    locked: lock.map(|(k, s, l)| node.posix_locked(k, s, l)),
                    size: size.then(|| node.size()),
                    mtime: mtime.then(|| node.stat_without_dos().map(|a| a.mtime)),
                    io: None,
                })
            }),
        )
    }

    /// [`FsJob::io_facts`] without the size, then the I/O itself (`io`) unless the lock probe
    /// found a lock in the way: a named stream's READ or WRITE, whose data no ring operation
    /// reads or writes (the POSIX backend keeps it in an extended attribute), so that neither
    /// the checks' calls nor the I/O's are made on the I/O thread.
    pub fn io_facts_then(
        node: Arc<dyn Node>,
        (order, share): (u64, u64),
        lock: Option<LockProbe>,
        mtime: bool,
        io: impl FnOnce() -> Carried + Send + 'static,
    ) -> FsJob {
        FsJob::new(
            node.who().cloned(),
            order,
            share,
            "a named stream's READ or WRITE",
            once(move || {
                let locked = lock.map(|(k, s, l)| node.posix_locked(k, s, l));
                let mtime = mtime.then(|| node.stat_without_dos().map(|a| a.mtime));
                let io = (!matches!(locked, Some(Ok(true)))).then(io);
                FsDone::Io(IoFacts {
                    locked,
                    size: None,
                    mtime,
                    io,
                })
            }),
        )
    }

    /// A CLOSE's end of `node`: its attributes when `stat` (a CLOSE that asked for them), then
    /// the node let go here, so that the descriptor's last close (on FUSE a FLUSH request the
    /// closing thread waits for) is made on the pool, not on the I/O thread. What else holds
    /// the descriptor then (a WRITE that asked no job still on the ring, a READ's reply being
    /// sent from the file, an I/O of another channel) is waited for first ([`FsJob::closes`];
    /// the review of steps 3-4, finding B).
    pub fn last_close(node: Arc<dyn Node>, order: u64, share: u64, stat: bool) -> FsJob {
        let closes = node.fd_to_hold();
        let mut job = FsJob::new(
            node.who().cloned(),
            order,
            share,
            "the last close of a CLOSE",
            once(move || {
                let attr = stat.then(|| node.stat());
                drop(node);
                FsDone::Closed(attr)
            }),
        );
        job.closes = closes;
        job
    }

    /// A CLOSE's attributes (POSTQUERY_ATTRIB), read before the close is decided, as on the
    /// I/O thread elsewhere: the CLOSE runs again with them and then lets the node go in
    /// [`FsJob::last_close`]. A written handle's write time the CLOSE settled (`write_time`) is
    /// written to the file first (on FUSE a SETATTR, which waits for a WRITE under way on the
    /// file: step 6), so that the disk has it before the close is decided and told to watchers;
    /// the attributes are read only when `stat` (the job may be asked for the time alone).
    pub fn close_attributes(
        node: Arc<dyn Node>,
        order: u64,
        share: u64,
        stat: bool,
        write_time: Option<UnixNanos>,
    ) -> FsJob {
        FsJob::new(
            node.who().cloned(),
            order,
            share,
            "the write time and attributes of a CLOSE",
            once(move || {
                keep_write_time(node.as_ref(), write_time);
                FsDone::Closed(stat.then(|| node.stat()))
            }),
        )
    }

    /// A request answered in the job: `answer` reads what it needs of the file system (a
    /// QUERY_INFO's stat, extended attributes or statfs) and makes the answer; the request
    /// runs again and sends it. `answer` must read only what a request may read from any
    /// thread (the server's shared tables, under their locks).
    pub fn answer(
        who: Option<Who>,
        order: u64,
        share: u64,
        what: &'static str,
        answer: impl FnOnce() -> Result<(NtStatus, Vec<u8>), NtStatus> + Send + 'static,
    ) -> FsJob {
        FsJob::new(
            who,
            order,
            share,
            what,
            once(move || FsDone::Reply(answer())),
        )
    }

    /// A change decided on the I/O thread (a SET_INFO's times, size, allocation, attributes,
    /// EAs or descriptor), made by `calls` on the pool: they answer the CompletionFilter bits
    /// of what they changed and how they ended ([`FsDone::Changed`]); the request goes on with
    /// that on the I/O thread (tells watchers, answers).
    pub fn change(
        who: Option<Who>,
        order: u64,
        share: u64,
        what: &'static str,
        calls: impl FnOnce() -> (u32, Result<(), NtStatus>) + Send + 'static,
    ) -> FsJob {
        FsJob::new(
            who,
            order,
            share,
            what,
            once(move || {
                let (made, r) = calls();
                FsDone::Changed(made, r)
            }),
        )
    }

    /// A FLUSH's write time (`t`, the update a written handle shows now) written to `node`'s
    /// file (on FUSE a SETATTR, which waits for a WRITE under way on the file); the FLUSH's
    /// fsync follows on the ring. A failure is logged, not answered, as on the I/O thread.
    pub fn write_time(node: Arc<dyn Node>, order: u64, share: u64, t: UnixNanos) -> FsJob {
        FsJob::new(
            node.who().cloned(),
            order,
            share,
            "the write time of a FLUSH",
            once(move || {
                keep_write_time(node.as_ref(), Some(t));
                FsDone::Done(Ok(()))
            }),
        )
    }

    /// A job whose calls tell themselves what they changed (a close's removal of its file or
    /// stream: crates/state's opens/removal.rs), so that it is told also when nobody waits for
    /// the job; it answers only that it ran ([`FsDone::Done`]).
    pub fn telling(
        who: Option<Who>,
        order: u64,
        share: u64,
        what: &'static str,
        calls: impl FnOnce() + Send + 'static,
    ) -> FsJob {
        FsJob::new(
            who,
            order,
            share,
            what,
            once(move || {
                calls();
                FsDone::Done(Ok(()))
            }),
        )
    }

    /// A job whose calls make what the request goes on with (`calls`: a CREATE's open, taken
    /// when it runs again: [`FsDone::Made`]).
    pub fn answer_made(
        who: Option<Who>,
        order: u64,
        share: u64,
        what: &'static str,
        calls: impl FnOnce() -> Carried + Send + 'static,
    ) -> FsJob {
        FsJob::new(who, order, share, what, once(move || FsDone::Made(calls())))
    }

    /// What `made` holds (a CREATE's open that was not kept: a share-mode conflict, a lease
    /// break to wait for, its connection gone; a LOCK's POSIX locks taken and not used, given
    /// back where they are dropped) let go on the pool, so that the descriptor's last close (a
    /// FLUSH on FUSE) or the give-back is not made on the I/O thread; nobody waits for it.
    pub fn let_go(made: Carried, share: u64) -> FsJob {
        FsJob::new(
            None,
            0,
            share,
            "letting go of what a job made",
            once(move || {
                let v = made
                    .value
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                drop(v);
                FsDone::Done(Ok(()))
            }),
        )
    }

    /// Run it here, waiting (the pool's threads, which act as [`FsJob::who`] first; tests).
    pub fn run(&self) -> FsDone {
        (self.run)()
    }
}

/// `calls` as a job's [`FsJob::run`], run once: what they hold (an open, its node) goes when
/// they end, on the pool thread and before the answer is posted, not when the job is dropped
/// after it (the descriptor's last close is then made before the request runs again, and
/// never by the I/O thread because a job still held the node). Run again (nothing does), it
/// answers that it could not.
fn once(calls: impl FnOnce() -> FsDone + Send + 'static) -> Box<dyn Fn() -> FsDone + Send + Sync> {
    let calls = std::sync::Mutex::new(Some(calls));
    Box::new(move || {
        let calls = calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        calls.map_or(FsDone::Done(Err(ringshare_vfs::FsError::Busy)), |f| f())
    })
}

/// Write a write time clients were shown (`t`, when there is one) to the file: the disk agrees
/// once the file is closed (crates/core's writetime). A failure is logged, not answered.
pub fn keep_write_time(node: &dyn Node, t: Option<UnixNanos>) {
    if let Some(t) = t {
        let times = SetTimes {
            atime: None,
            mtime: Some(t),
            btime: None,
        };
        if let Err(e) = node.set_times(&times) {
            tracing::debug!("keeping the write time: {e}");
        }
    }
}

/// The key of share `name` ([`FsJob::share`]).
pub fn share_key(name: &str) -> u64 {
    use std::hash::Hasher;
    // Asked on every READ and WRITE of an offloaded share: the name's letters are lowered as
    // they are hashed, not copied first.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for b in name.bytes() {
        h.write_u8(b.to_ascii_lowercase());
    }
    h.finish()
}

/// The order of an open's jobs ([`FsJob::order`]): its volatile id, never 0.
pub fn order_of(open_id: u64) -> u64 {
    open_id.max(1)
}

impl std::fmt::Debug for FsJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (order {})", self.what, self.order)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding B's fix: a CLOSE's last-close job holds the descriptor of the node it lets go (the
    /// pool closes it once it is the last holder), taken without making it ready for I/O; a
    /// stat-only open holds none. A real file: the in-memory backend has no descriptor.
    #[test]
    fn a_last_close_job_holds_its_nodes_descriptor() {
        use ringshare_vfs::{OpenOptions, RelPath, Share};
        let dir = std::env::temp_dir().join(format!("ringshare-fsjob-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), b"abc").unwrap();
        let share = ringshare_vfs::posix::PosixShare::new(&dir).unwrap();
        let path = RelPath::from_components(["f"]).unwrap();
        let who = ringshare_vfs::server_who();
        let node = share
            .open(&who, &path, &OpenOptions::read_existing())
            .unwrap()
            .node;
        let fd = node.fd_to_hold().expect("a descriptor");
        let job = FsJob::last_close(Arc::clone(&node), 1, 0, false);
        assert!(
            job.closes.as_ref().is_some_and(|c| Arc::ptr_eq(c, &fd)),
            "the job holds the node's descriptor"
        );
        drop((job, node));
        assert_eq!(Arc::strong_count(&fd), 1, "nothing else holds it");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The review of steps 3-4, a smaller finding: what a job's calls hold (a QUERY_INFO's
    /// open, and through it the node) goes when they end, on the pool thread and before the
    /// answer is posted, not when the job itself is dropped after it (then a CLOSE run in
    /// between did not hold the last reference, and the descriptor's last close came later,
    /// wherever the job was dropped).
    #[test]
    fn what_a_jobs_calls_hold_goes_when_they_end_not_with_the_job() {
        let open = Arc::new("an open");
        let held = Arc::clone(&open);
        let job = FsJob::answer(None, 1, 0, "a QUERY_INFO", move || {
            Ok((NtStatus::SUCCESS, held.as_bytes().to_vec()))
        });
        assert_eq!(Arc::strong_count(&open), 2, "held by the job's calls");
        let FsDone::Reply(Ok((_, body))) = job.run() else {
            panic!("an answer");
        };
        assert_eq!(body, b"an open");
        assert_eq!(Arc::strong_count(&open), 1, "let go when they ended");
        assert!(
            matches!(job.run(), FsDone::Done(Err(_))),
            "run again, it says it could not"
        );
        drop(job);
    }
}
