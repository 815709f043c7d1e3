//! The driver: runs SMB connections (the sans-I/O core) on io_uring rings.
//!
//! One worker per core. Each owns a ring and its own SO_REUSEPORT listener, so
//! the kernel spreads new connections across cores and no thread carries all
//! the work. A connection lives on the ring that accepted it. Per loop
//! iteration the worker makes one `io_uring_enter` that submits everything
//! queued and waits for the next completion or timer.
//!
//! Receiving: small frames are cut out of a 64 KiB receive buffer; a frame
//! larger than that (an 8 MiB WRITE) gets a buffer of exactly its size and
//! the rest of it is received straight into it, so the payload lands once and
//! is written to the file from there.
//!
//! Sending: frames queue per connection in order. Consecutive in-memory
//! frames go out in one `sendmsg`; an unsigned READ response whose data the
//! core left in the file ([`Output::SendFile`]) goes out with
//! [`Ring::send_file`]: its header, then the file pages spliced through a
//! pipe, never copied into user memory.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ringshare_core::idmap::IdMap;
use ringshare_core::metrics::Metrics;
use ringshare_core::{Connection, IoDone, IoOp, IoRequest, Now, Output, SendFile, Transport};
use ringshare_engine::{net, Completion, CpuKeep, Ring, RingConfig, SharedFd};
use ringshare_vfs::{FsError, Who};

pub mod kernel_notify;
mod peer;
use peer::{is_local, peer_name};
mod clock;
use clock::now;
pub use clock::OsEntropy;
mod home_calls;
mod inline_io;
mod inline_send;
mod lookups;
pub use lookups::LookupPool;
mod quic;
pub use quic::{QuicListen, QuicShared};
mod shared;
pub use shared::Shared;
mod bufpool;
mod file_io;
mod mailbox;
mod recv;
mod send;
mod timers;
mod write_pipes;
use bufpool::{give_back, read_buf, BufPool};
use inline_io::{in_place, run_here};
use send::file_item;
use write_pipes::{
    detach_write, drop_unheld_payload, keep_pipes, piece_len, read_exact_into, Pipe, PipedWrite,
};

use crate::config::ZerocopySend;
use ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET;
use ringshare_wire::framing;

/// Receive buffer for small frames.
const RECV_BUF_LEN: usize = 64 * 1024;
/// Frames larger than this are received into a buffer of their own.
const DIRECT_FRAME_MIN: usize = RECV_BUF_LEN;
/// Buffers of at least this size are kept for reuse (READ data, large frames).
const POOL_BUF_MIN: usize = 64 * 1024;
/// Bytes of idle buffers one worker keeps at most.
const POOL_BYTES_MAX: usize = 64 * 1024 * 1024;
/// How long a listener rests after accept failed for lack of resources (EMFILE…).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
/// Frames coalesced into one sendmsg at most.
const SEND_BATCH_PARTS_MAX: usize = 512;
/// Bytes of READ buffers one connection may hold at once (reading, waiting to
/// be sent or being sent), beyond its first two buffers; further READs wait
/// for one of them to go out. A client asks for up to its credits' worth of
/// READs at once, but the socket drains them one by one: without this, 16 x 1
/// MiB buffers cycle through memory and every copy, hash and cipher pass
/// misses the CPU cache. Measured (1 MiB reads, `ringshare bench seq-read
/// --sign` / `--encrypt`): 2-3 buffers best, server 0.59 / 0.71 s/GiB against
/// 0.79 / 0.87 unbounded; 6: 0.73 / 0.83. Small READs (64 KiB x 32 fit the
/// cache anyway) are not held back.
const READ_BYTES_HELD_MAX: usize = 3 * 1024 * 1024 + 512 * 1024;
/// A WRITE payload goes into its pipes in splices of at least this much (or
/// all that is left); the socket is polled until that much is queued. Also
/// the share of the payload each pipe takes: the default
/// `/proc/sys/fs/pipe-max-size`, so any user may make such pipes. (One pipe
/// of a whole 8 MiB payload, with pipe-max-size raised, had made `smbclient
/// put` dearer: 1.62 vs 0.90 server s/GiB; 1 MiB pipes make it cheaper.)
const PIPE_STEP: usize = 1024 * 1024;
/// READs and WRITEs of at most this many bytes on a file kept in memory
/// (tmpfs: `Node::in_memory`) are done in the ring's thread, and so are
/// larger WRITEs from memory within the file's size (`inline_io::in_place`).
/// io_uring cannot read or write tmpfs without blocking, so it hands every
/// such request to a kernel worker thread, a thread hop each. Measured
/// (`ringshare bench`, server CPU s/GiB, hop vs in place, two runs each): 4
/// KiB random qd32 1.54-1.62 vs 1.25-1.27; 16 KiB 0.85 vs 0.65; signed 64 KiB
/// 0.69-0.70 vs 0.60-0.61; signed 128 KiB 0.63 vs 0.58-0.62; signed 256 KiB
/// 0.61-0.63 vs 0.62-0.65; signed 1 MiB 0.56-0.59 vs 0.68-0.71 (the worker
/// copies on the other core while this one hashes the previous READ). A
/// large WRITE over pages the file has is a plain copy from a frame just
/// received into a pooled buffer still in this core's cache, which the
/// worker missed, at a wake-up and a switch per WRITE (1 MiB overwrites in
/// copy mode: 0.22 -> 0.15-0.18 s/GiB, docs/benchmarks.md, session 43).
const INLINE_IO_LEN_MAX: usize = 128 * 1024;
/// In-memory replies of at least this many bytes (signed or encrypted READ
/// data) may go out with `SEND_ZC` (`zerocopy send`); smaller ones cost more
/// in page pinning and notifications than the copy they save.
const ZC_SEND_MIN: usize = 64 * 1024;
/// A WRITE frame up to its payload: transport header, SMB2 header, WRITE fixed part.
const WRITE_HEAD_LEN: usize = 4 + WRITE_REQUEST_DATA_OFFSET;
/// The largest WRITE payload spliced (in pipes of `PIPE_STEP` each).
const WRITE_SPLICE_LEN_MAX: usize = 8 * 1024 * 1024;
/// Small frames one connection may feed to the core per loop turn while others feed theirs
/// too (the turn before fed frames of more than one connection); the rest wait in its receive
/// buffer for the next turn, with no receive armed meanwhile (TCP holds the peer back). A
/// connection with a thousand requests in flight (a flood of requests refused at once and
/// asked again at once) fed all that had come in one turn, and a client with one request in
/// flight on the same I/O thread got one answer per such turn (issue 33). Measured (the flood
/// test's local clients on a crowded thread, their rate against theirs before the flood): no
/// bound 0.003-0.026, 64 0.02-0.04, 8 0.04-0.11, 2 0.078-0.2 (docs/cluster-internals.md,
/// "Step 6").
const FRAMES_PER_TURN_SHARED: u32 = 2;
/// The same with no other connection feeding frames: above the usual queue depths (32), so
/// that one client's burst is fed in one turn. (With 8 for every connection, a single
/// connection's echo QD32 cost 16% more server CPU a request: its burst took 4 turns and 4
/// sends.)
const FRAMES_PER_TURN_ALONE: u32 = 64;
/// Empty WRITE-payload pipes a worker keeps for reuse.
const PIPES_KEPT_MAX: usize = 32;
/// Emptied pipe lists of spliced WRITEs kept per I/O thread for reuse.
const PIPE_LISTS_KEPT_MAX: usize = 16;
/// WRITE-payload pipes a worker has at most (idle or holding payloads; two
/// descriptors each): a payload that would need more is received into
/// memory, so peers that start large WRITEs and stall cannot use up the
/// process's descriptors (each 8 MiB payload takes 8 pipes).
const PIPES_LIVE_MAX: usize = 128;

const KIND_ACCEPT: u64 = 1;
const KIND_RECV: u64 = 2;
const KIND_SEND: u64 = 3;
const KIND_IO: u64 = 4;
const KIND_TIMER: u64 = 5;
/// Worker 0: the inotify descriptor is readable.
const KIND_NOTIFY: u64 = 6;

/// Makes this thread act as `who` (`None`: the server) for the calls that follow: the file
/// system calls an I/O or lookup thread makes itself run as the ring's operations do, under
/// the requester's credentials or the server's.
fn act_for(who: Option<&Who>) -> std::io::Result<()> {
    match who {
        Some(w) => ringshare_engine::creds::act_as(w),
        None => ringshare_engine::creds::act_as_server(),
    }
}

fn token(kind: u64, gen: u32, slot: u32) -> u64 {
    (kind << 56) | (u64::from(gen & 0x00FF_FFFF) << 32) | u64::from(slot)
}

fn token_parts(t: u64) -> (u64, u32, u32) {
    (t >> 56, ((t >> 32) & 0x00FF_FFFF) as u32, t as u32)
}

/// Receive state of a connection.
enum Rx {
    /// Accumulating small frames in `buf`.
    Small,
    /// Receiving the rest of one large frame into a buffer of its exact size.
    Large { frame: Vec<u8>, len: usize },
    /// Splicing the payload of a WRITE from the socket into `pipes` (the core
    /// allowed it: `Connection::detachable_write`): pipe `i` takes payload
    /// bytes `i * PIPE_STEP ..` up to `PIPE_STEP` of them. `head` is the
    /// message up to the payload, `len` the payload's length, `rest` the bytes
    /// not yet in a pipe. Each splice moves only bytes already queued in the
    /// socket (`moving`, 0 while a poll waits for more), so no io_uring
    /// worker ever waits on the peer; `waited`: a poll was needed.
    Pipe {
        head: Vec<u8>,
        len: usize,
        rest: usize,
        pipes: Vec<Pipe>,
        moving: usize,
        waited: bool,
    },
}

/// `SEND_ZC` on one connection.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Zc {
    Off,
    /// Used until a completion says the kernel copied (then `Off`).
    Auto,
    /// Used always (`zerocopy send = yes`).
    Forced,
}

/// Something queued to go out on a connection, in order.
enum SendItem {
    Bytes(Vec<u8>),
    /// `head`, then `len` bytes of the file from `offset`.
    File {
        head: Vec<u8>,
        file: SharedFd,
        offset: u64,
        len: usize,
        /// Who reads the file (the open's user).
        who: Option<Who>,
        /// Whether the ring's thread splices it itself ([`inline_send`]).
        here: inline_send::Here,
    },
}

struct Conn {
    gen: u32,
    fd: SharedFd,
    conn: Connection,
    buf: Vec<u8>,
    rx: Rx,
    recv_armed: bool,
    /// The receive armed is a multishot one (into the ring's provided
    /// buffers), and whether it was asked to end (a large frame begins, or
    /// the connection is closing): a large frame is received into its own
    /// buffer or a pipe only once it has ended.
    multishot: bool,
    multishot_ending: bool,
    /// The last frame begun was a large one (a WRITE, its payload received
    /// apart): the next receive is a single one, not a multishot, so that
    /// a stream of large WRITEs is not taken through the provided buffers
    /// (a multishot receive goes on filling them, up to a whole payload,
    /// until its cancellation reaches the kernel).
    last_frame_large: bool,
    /// Small frames fed to the core in loop turn `fed_turn` ([`FRAMES_PER_TURN_SHARED`]).
    fed: u32,
    fed_turn: u64,
    /// Frames wait in `buf` for the next turn (listed in the worker's `held`); no receive is
    /// armed until they are fed.
    held: bool,
    /// Whether large replies go out with `SEND_ZC`.
    zc: Zc,
    send_queue: VecDeque<SendItem>,
    sending: bool,
    /// Its deadline in the worker's [`timers::Timers`], and whether it is marked to be read
    /// again ([`Worker::mark_timers`]).
    timer: Option<u64>,
    timer_marked: bool,
    /// Listed in the worker's `flush_due`: its queued replies go out when the
    /// current batch of completions has been handled.
    flush_listed: bool,
    /// File bytes the send in flight must deliver (a `send_file`), if any.
    sending_file: Option<usize>,
    /// The send in flight is a READ reply the ring's thread splices itself, waiting for the
    /// socket to take more ([`inline_send`]).
    inline: Option<inline_send::InlineSend>,
    /// When the send in flight started (monotonic ms).
    send_since: u64,
    /// The send in flight while it is quiet ([`Ring::quietly`]): its end wakes the loop only
    /// once [`Ring::need`] is told that something waits for it (`send::need_send_end`).
    send_quiet: Option<ringshare_engine::OpKey>,
    closing: bool,
    io_in_flight: usize,
    /// READs into buffers in the ring now: how many, and their bytes.
    reads_in_flight: usize,
    read_bytes_in_flight: usize,
    /// Bytes of the send in flight.
    sending_bytes: usize,
    /// The (empty) list the last batch of parts was sent in, for the next.
    spare_parts: Vec<Vec<u8>>,
    /// READs waiting for buffer room ([`READ_BYTES_HELD_MAX`]).
    reads_waiting: VecDeque<IoRequest>,
    /// The pipes holding a WRITE payload while the core looks at the WRITE, and
    /// while it waits for its file's home (`Connection::holds_payload`); its
    /// `IoOp::WriteReceived` takes them, else they are dropped with their bytes.
    pipe_loaded: Option<Vec<Pipe>>,
}

/// A file operation in the ring.
struct PendingIo {
    slot: u32,
    gen: u32,
    core_id: u64,
    kind: IoKind,
    /// A large READ counted in its connection's `reads_in_flight`: its length.
    held_len: usize,
    /// The pipes a spliced WRITE payload is written from, one after the other.
    pipes: Option<PipedWrite>,
}

#[derive(Clone, Copy)]
enum IoKind {
    Read,
    Write,
    Sync,
}

struct Worker {
    index: usize,
    /// `pin cpus = auto`: this thread's hold on its CPU while it sends spliced READ data.
    keep: Option<CpuKeep>,
    ring: Ring,
    shared: Arc<Shared>,
    conns: Vec<Option<Conn>>,
    gens: Vec<u32>,
    free: Vec<u32>,
    ios: IdMap<u64, PendingIo>,
    next_io: u64,
    listeners: Vec<SharedFd>,
    pool: BufPool,
    /// Empty pipes for spliced WRITE payloads.
    pipes: Vec<Pipe>,
    /// WRITE-payload pipes of this worker alive now (idle or holding a
    /// payload), each two descriptors.
    pipes_live: Rc<Cell<usize>>,
    /// Emptied lists of a spliced WRITE's pipes, for the next ones.
    pipe_lists: Vec<Vec<Pipe>>,
    /// The largest pipe this process may make (learnt from the first refusal).
    pipe_size_max: usize,
    /// Large WRITE payloads spliced at once / spliced after a wait / received
    /// into memory after all (TCP woke the wait early, or the pipe filled up;
    /// logged at exit, for tuning).
    writes_spliced: [u64; 3],
    /// Payload bytes of spliced WRITEs that had been received into memory
    /// before their splice began (copied into the pipe; logged at exit).
    write_prefix_bytes: u64,
    /// Multishot receive completions that brought bytes, and multishot
    /// receives ended because every provided buffer was in use (logged at exit).
    multishot_arrivals: u64,
    recv_bufs_exhausted: u64,
    /// `SEND_ZC` sends, and those the kernel copied anyway (logged at exit).
    zc_sends: [u64; 2],
    /// The bells of this worker's connections' mailboxes: (slot, generation) of each that got
    /// mail when it had none (rung by the posting thread), and the list they are taken into.
    bells: Arc<mailbox::Mailbox<(u32, u32)>>,
    rung: Vec<(u32, u32)>,
    /// The time, taken once per loop iteration (after the wait, and again
    /// for the timers): what every completion of the iteration is handled at
    /// (each reading cost two clock reads per request before).
    clock: Now,
    /// Worker 0, under a stream of disk changes: when to read them next.
    inotify_read_at: Option<u64>,
    /// This ring's request counters, when metrics are on.
    metrics: Option<Arc<Metrics>>,
    /// Answers of the lookup pool for this ring's connections.
    inbox: Arc<lookups::Inbox>,
    /// Connections with replies to send once this loop iteration has handled
    /// every completion that came (see [`Worker::flush_due`]).
    flush_due: Vec<u32>,
    /// The connections' deadlines, in order.
    timers: timers::Timers,
    /// Loop turns so far, and the connections whose frames wait for the next one
    /// ([`FRAMES_PER_TURN_SHARED`]).
    turns: u64,
    /// Connections that fed frames to the core in this turn, and in the turn before.
    feeders: u32,
    feeders_before: u32,
    held: Vec<u32>,
    /// Turns in which a connection had frames held back (logged at exit).
    held_turns: u64,
    /// With `server smb transports` naming quic: SMB over QUIC.
    quic: Option<quic::QuicSide>,
    /// On a cluster node (unless `cluster ring calls = no`): calls to files' homes on other
    /// nodes carried on this ring.
    home: Option<home_calls::HomeCalls>,
}

/// Run one worker until the server stops.
pub fn run_worker(
    index: usize,
    shared: Arc<Shared>,
    first_listeners: Option<Vec<OwnedFd>>,
) -> io::Result<()> {
    new_worker(index, shared, first_listeners)?.run()
}

/// An I/O thread's ring. `RINGSHARE_NO_DEFER_TASKRUN` (any value) sets it up without
/// `DEFER_TASKRUN`, for measuring: a spliced READ reply's linked splices then run on one
/// io-wq worker (without the ring's thread between them), which costs seq-read less CPU but
/// a queue-depth-1 call to a file's home more (docs/benchmarks.md, session 66).
fn io_ring_config(shared: &Shared) -> RingConfig {
    let defaults = RingConfig::default();
    RingConfig {
        splice_chunk: shared.splice_chunk,
        defer_taskrun: std::env::var_os("RINGSHARE_NO_DEFER_TASKRUN").is_none(),
        recv_bufs: if shared.multishot_receive {
            defaults.recv_bufs
        } else {
            0
        },
        // `RINGSHARE_NO_FIXED_FILES` (any value): sockets are not registered,
        // for measuring what registering them saves.
        fixed_files: if std::env::var_os("RINGSHARE_NO_FIXED_FILES").is_some() {
            0
        } else {
            defaults.fixed_files
        },
        ..defaults
    }
}

/// A worker with its ring, its listeners armed.
fn new_worker(
    index: usize,
    shared: Arc<Shared>,
    first_listeners: Option<Vec<OwnedFd>>,
) -> io::Result<Worker> {
    // Counted only in test binaries that install the counting allocator.
    ringshare_engine::alloc_count::enroll_thread();
    let ring = Ring::new(io_ring_config(&shared))?;
    if shared.multishot_receive && !ring.has_recv_bufs() && index == 0 {
        tracing::info!("this kernel has no io_uring provided-buffer rings (Linux 5.19); receiving with one buffer per connection");
    }
    crate::lock(&shared.wakers).push(ring.waker());
    let inbox = lookups::inbox(ring.waker());
    // Unbounded: a mailbox rings once until its connection takes its mail, so the list holds
    // about one entry per connection at most.
    let bells = Arc::new(mailbox::Mailbox::new(usize::MAX));
    bells.set_waker(ring.waker());
    let home = shared.peers.as_ref().map(|p| {
        let dialed = Arc::new(mailbox::Mailbox::new(usize::MAX));
        dialed.set_waker(ring.waker());
        home_calls::HomeCalls::new(p.clone(), p.node(), shared.home_calls_per_peer, dialed)
    });
    let listeners = match first_listeners {
        Some(l) => l,
        None => shared
            .listen
            .iter()
            .map(|a| net::listen_reuseport(*a, 1024))
            .collect::<io::Result<Vec<_>>>()?,
    };
    let mut w = Worker {
        index,
        keep: if shared.keep_cpus {
            CpuKeep::for_thread(index, send::KEEP_CPU_MS)
        } else {
            None
        },
        ring,
        shared,
        conns: Vec::new(),
        gens: Vec::new(),
        free: Vec::new(),
        ios: IdMap::default(),
        next_io: 1,
        listeners: listeners.into_iter().map(Arc::new).collect(),
        pool: BufPool::default(),
        pipes: Vec::new(),
        pipes_live: Rc::new(Cell::new(0)),
        pipe_lists: Vec::new(),
        pipe_size_max: usize::MAX,
        writes_spliced: [0; 3],
        write_prefix_bytes: 0,
        multishot_arrivals: 0,
        recv_bufs_exhausted: 0,
        zc_sends: [0; 2],
        bells,
        rung: Vec::new(),
        clock: Now::default(),
        inotify_read_at: None,
        metrics: None,
        inbox,
        flush_due: Vec::new(),
        timers: timers::Timers::default(),
        turns: 0,
        feeders: 0,
        feeders_before: 0,
        held: Vec::new(),
        held_turns: 0,
        quic: None,
        home,
    };
    if let Some(all) = &w.shared.ring_metrics {
        let m = Arc::new(Metrics::new(clock::mono_us));
        crate::lock(all).push(m.clone());
        w.metrics = Some(m);
    }
    w.clock = now(w.shared.started);
    for (i, l) in w.listeners.iter().enumerate() {
        w.ring.accept_multishot(l, token(KIND_ACCEPT, 0, i as u32));
    }
    if let (0, Some(ino)) = (index, &w.shared.inotify) {
        w.ring.poll_readable(ino.fd(), token(KIND_NOTIFY, 0, 0));
    }
    let listen = w
        .shared
        .quic
        .as_ref()
        .and_then(|q| q.take(index, w.ring.waker()));
    if let Some(l) = listen {
        let q = quic::QuicSide::new(l);
        q.arm(&mut w.ring);
        w.quic = Some(q);
    }
    Ok(w)
}

impl Worker {
    fn run(&mut self) -> io::Result<()> {
        loop {
            if self.shared.stopping.load(Ordering::SeqCst) {
                self.shutdown();
                return Ok(());
            }
            self.turn()?;
        }
    }

    /// One iteration of the loop: wait for completions (or the next timer) and handle them.
    fn turn(&mut self) -> io::Result<()> {
        self.settle_timers();
        let timeout = self.next_timeout();
        // Frames held back from the last turn are fed now: no waiting for more.
        let wait = usize::from(self.held.is_empty());
        self.ring.submit_and_wait(wait, timeout)?;
        self.clock = now(self.shared.started);
        self.turns += 1;
        self.feeders_before = std::mem::take(&mut self.feeders);
        self.feed_held();
        if let Some(m) = &self.metrics {
            let s = self.ring.stats();
            m.publish_ring(s.submits, s.sqes, s.cqes);
        }
        while let Some(c) = self.ring.next_completion() {
            if c.is_wake() {
                continue;
            }
            self.on_completion(c);
        }
        self.clock = now(self.shared.started);
        self.answer_lookups();
        self.home_dialed();
        self.fire_timers();
        self.deliver_mail();
        self.quic_mail();
        self.flush_due();
        Ok(())
    }

    /// Feeds the frames held back in the last turn, up to each connection's budget for this
    /// one, and receives on where they are all fed.
    fn feed_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        self.held_turns += 1;
        let held = std::mem::take(&mut self.held);
        for &slot in &held {
            let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
                continue;
            };
            if !c.held {
                continue;
            }
            c.held = false;
            let gen = c.gen;
            self.cut_frames(slot, gen, self.clock);
        }
    }

    /// Sends what the connections queued during this iteration: every
    /// request that arrived with the completions of one wait is answered
    /// before the replies go out, in as few sends as the queue allows,
    /// instead of the first reply of a burst alone and the rest after it.
    /// (The early flush: nothing waits past the end of the batch.)
    fn flush_due(&mut self) {
        let mut due = std::mem::take(&mut self.flush_due);
        for &slot in &due {
            if let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) {
                c.flush_listed = false;
            }
            self.flush_sends(slot);
            self.need_send_end(slot);
            // A send left in flight has a stall limit.
            if self
                .conns
                .get(slot as usize)
                .and_then(Option::as_ref)
                .is_some_and(|c| c.sending)
            {
                self.mark_timers(slot);
            }
        }
        due.clear();
        self.flush_due = due;
    }

    /// Let connections that got notices from other connections send them: those whose
    /// mailboxes rang their bells, and no other (a busy thread keeps thousands of idle
    /// connections; a notice for one of them must not make it look at all of them).
    fn deliver_mail(&mut self) {
        let mut rung = std::mem::take(&mut self.rung);
        if self.bells.take_into(&mut rung) {
            let t = self.clock;
            for &(slot, gen) in &rung {
                // Gone since it rang, or rang twice and already done.
                let Some(c) = self.conn_mut(slot, gen).filter(|c| c.conn.has_mail()) else {
                    continue;
                };
                c.conn.handle_mail(t);
                self.drain(slot);
            }
            rung.clear();
        }
        self.rung = rung;
    }

    fn next_timeout(&self) -> Option<Duration> {
        let now_ms = self.clock.mono_ms;
        // Worker 0 also runs the scavenger of disconnected durable opens (and the log limits).
        let server = &self.shared.server;
        let scavenge = (self.index == 0)
            .then(|| {
                let (read, logs) = (self.inotify_read_at, server.log_limit_deadline());
                let (d, k) = (server.durables_deadline(), server.kernel_deadline());
                [d, k, read, logs]
            })
            .into_iter()
            .flatten()
            .flatten();
        let next = self
            .timers
            .first()
            .into_iter()
            .chain(scavenge)
            .chain(self.quic.as_ref().and_then(|q| q.deadline_ms(now_ms)))
            .chain(self.home.as_ref().and_then(|h| h.deadline()))
            .chain(self.keep.as_ref().and_then(CpuKeep::ends_at))
            .min()?;
        Some(Duration::from_millis(next.saturating_sub(now_ms).max(1)))
    }

    fn fire_timers(&mut self) {
        self.quic_timers();
        self.home_timers();
        let t = self.clock;
        self.let_cpu_go(t.mono_ms);
        if self.index == 0 {
            // Closes nothing (one look at the table) when none is due. What the closes ask of
            // the cluster (a persistent open's record removed, the close at a file's home) is
            // carried by the lookup threads, no connection waiting: an answer finds no
            // connection at slot u32::MAX and is dropped.
            for ask in self.shared.server.expire_durables(t.mono_ms) {
                let req = ringshare_core::LookupRequest { id: 0, ask };
                self.ask_lookup(Box::new(req), u32::MAX, 0);
            }
            self.shared.server.kernel_tick(t.mono_ms);
            self.shared.server.log_limit_tick(t.mono_ms);
            if self.inotify_read_at.is_some_and(|at| at <= t.mono_ms) {
                self.read_disk_changes();
            }
            self.post_kernel_jobs();
        }
        self.fire_conn_timers();
    }

    /// Worker 0: read what the inotify descriptor holds
    /// ([`kernel_notify::Inotify::read_into`]).
    fn read_disk_changes(&mut self) {
        if let Some(ino) = self.shared.inotify.clone() {
            let poll = token(KIND_NOTIFY, 0, 0);
            let now = self.clock.mono_ms;
            self.inotify_read_at = ino.read_into(&mut self.ring, &self.shared.server, now, poll);
            self.post_kernel_jobs();
        }
    }

    /// Worker 0: kernel watches of new directories on offloaded shares, found in the events
    /// reported, are added in file system jobs, nobody waiting (an answer finds no connection
    /// at slot u32::MAX and is dropped).
    fn post_kernel_jobs(&mut self) {
        for job in self.shared.server.take_kernel_jobs() {
            let ask = ringshare_core::Lookup::Fs(job);
            let req = ringshare_core::LookupRequest { id: 0, ask };
            self.ask_lookup(Box::new(req), u32::MAX, 0);
        }
    }

    fn on_completion(&mut self, mut c: Completion) {
        let (kind, gen, slot) = token_parts(c.user_data);
        match kind {
            KIND_ACCEPT => {
                if let Some(fd) = c.take_fd() {
                    self.accept(fd);
                }
                if !c.more && !self.shared.stopping.load(Ordering::SeqCst) {
                    match &c.result {
                        // Out of descriptors (or memory): accepting again at once would
                        // fail again at once. Wait, then re-arm from the timer.
                        Err(e) => {
                            tracing::warn!(
                                "accept stopped ({e}); retrying in {} ms",
                                ACCEPT_RETRY.as_millis()
                            );
                            self.ring.timeout(ACCEPT_RETRY, token(KIND_TIMER, 0, slot));
                        }
                        Ok(_) => self.rearm_accept(slot),
                    }
                }
            }
            KIND_RECV => self.on_recv(slot, gen, c),
            KIND_SEND => self.on_send(slot, gen, c),
            KIND_IO => self.on_io(c),
            KIND_NOTIFY => self.read_disk_changes(),
            quic::KIND_QUIC_UDP..=quic::KIND_QUIC_SEND => self.on_quic(kind, slot, c),
            home_calls::KIND_HOME_SEND | home_calls::KIND_HOME_RECV => self.on_home(kind, slot, c),
            KIND_TIMER if !self.shared.stopping.load(Ordering::SeqCst) => {
                self.rearm_accept(slot);
            }
            _ => {}
        }
    }

    fn rearm_accept(&mut self, index: u32) {
        if let Some(l) = self.listeners.get(index as usize) {
            let l = l.clone();
            self.ring.accept_multishot(&l, token(KIND_ACCEPT, 0, index));
        }
    }

    fn accept(&mut self, fd: OwnedFd) {
        if !self.take_place() {
            let max = self.shared.max_connections;
            peer::refused(&self.shared.server, &fd, max, self.clock.mono_ms);
            return;
        }
        let _ = net::set_nodelay(&fd, true);
        let peer = peer_name(&fd);
        self.admit_counted(fd, peer, Transport::Tcp);
    }

    /// A connection over QUIC (the far end of its stream's socket pair),
    /// counted against `max connections` like an accepted one; false if refused.
    fn admit(&mut self, fd: OwnedFd, peer: String, transport: Transport) -> bool {
        if !self.take_place() {
            let max = self.shared.max_connections;
            tracing::warn!(%peer, "connection refused: max connections ({max}) reached");
            return false;
        }
        self.admit_counted(fd, peer, transport);
        true
    }

    /// Counts a new connection in, unless `max connections` are there already.
    fn take_place(&self) -> bool {
        let max = self.shared.max_connections;
        let count = self.shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
        if max > 0 && count > max {
            self.shared.connections.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Starts serving a connection already counted.
    fn admit_counted(&mut self, fd: OwnedFd, peer: String, transport: Transport) {
        let zc = match self.shared.zerocopy_send {
            ZerocopySend::No => Zc::Off,
            ZerocopySend::Yes => Zc::Forced,
            // Within this host the kernel copies into the receiving socket anyway.
            ZerocopySend::Auto if transport == Transport::Quic || is_local(&fd) => Zc::Off,
            ZerocopySend::Auto => Zc::Auto,
        };
        tracing::debug!(worker = self.index, %peer, "connection accepted");
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.conns.push(None);
                self.gens.push(0);
                (self.conns.len() - 1) as u32
            }
        };
        let gen = self.gens[slot as usize].wrapping_add(1) & 0x00FF_FFFF;
        self.gens[slot as usize] = gen;
        let fd: SharedFd = Arc::new(fd);
        // Operations on the socket then name its slot in the ring's file table.
        self.ring.register_fd(&fd);
        let mut conn = Connection::new(self.shared.server.clone(), peer, Box::new(OsEntropy));
        let bells = Arc::clone(&self.bells);
        conn.set_mail_bell(Box::new(move || {
            bells.post((slot, gen));
        }));
        conn.set_send_file(self.shared.send_file);
        if transport != Transport::Tcp {
            conn.set_transport(transport);
        }
        if let Some(m) = &self.metrics {
            conn.set_metrics(m.clone());
        }
        conn.accepted(self.clock);
        self.conns[slot as usize] = Some(Conn {
            gen,
            fd,
            conn,
            buf: Vec::new(),
            rx: Rx::Small,
            recv_armed: false,
            multishot: false,
            multishot_ending: false,
            last_frame_large: false,
            fed: 0,
            fed_turn: 0,
            held: false,
            zc,
            send_queue: VecDeque::new(),
            sending: false,
            timer: None,
            timer_marked: false,
            flush_listed: false,
            sending_file: None,
            inline: None,
            send_since: 0,
            send_quiet: None,
            closing: false,
            io_in_flight: 0,
            reads_in_flight: 0,
            read_bytes_in_flight: 0,
            sending_bytes: 0,
            spare_parts: Vec::new(),
            reads_waiting: VecDeque::new(),
            pipe_loaded: None,
        });
        // Its handshake limit.
        self.mark_timers(slot);
        self.arm_recv(slot);
    }

    fn conn_mut(&mut self, slot: u32, gen: u32) -> Option<&mut Conn> {
        conn_in(&mut self.conns, slot, gen)
    }

    /// Act on everything the core queued for a connection: its file I/O
    /// starts now, its replies go out at the end of the iteration.
    fn drain(&mut self, slot: u32) {
        self.take_outputs(slot);
        self.start_reads(slot);
        if let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) {
            if !c.flush_listed {
                c.flush_listed = true;
                self.flush_due.push(slot);
            }
        }
        self.mark_timers(slot);
    }

    /// Moves what the core queued into the connection's send queue and its
    /// waiting READs, and starts its other I/O. (READs that complete at once
    /// queue more: taken in the same loop.)
    fn take_outputs(&mut self, slot: u32) {
        loop {
            let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
                return;
            };
            let Some(out) = c.conn.poll_output() else {
                break;
            };
            match out {
                Output::Send(parts) => c.send_queue.extend(parts.into_parts().map(SendItem::Bytes)),
                Output::SendFile(sf) => c.send_queue.push_back(file_item(sf)),
                Output::Io(req) if matches!(req.op, IoOp::Read { len, .. } if len >= POOL_BUF_MIN) =>
                {
                    c.reads_waiting.push_back(req);
                }
                Output::Io(req) => self.start_io(slot, req),
                Output::Lookup(req) => {
                    let gen = c.gen;
                    self.ask_lookup(req, slot, gen);
                }
                Output::Close => {
                    c.closing = true;
                    end_multishot(&mut self.ring, c, slot);
                }
            }
        }
    }

    /// Start waiting READs while the connection holds fewer than
    /// [`READ_BYTES_HELD_MAX`] bytes of buffers (or fewer than two).
    fn start_reads(&mut self, slot: u32) {
        loop {
            let Some(c) = self.conns.get_mut(slot as usize).and_then(Option::as_mut) else {
                return;
            };
            let (mut count, mut bytes) = (c.reads_in_flight, c.read_bytes_in_flight);
            for i in &c.send_queue {
                if let SendItem::Bytes(b) = i {
                    if b.len() >= POOL_BUF_MIN {
                        count += 1;
                        bytes += b.len();
                    }
                }
            }
            if c.sending_bytes >= POOL_BUF_MIN {
                count += 1;
                bytes += c.sending_bytes;
            }
            let next = match c.reads_waiting.front() {
                Some(IoRequest {
                    op: IoOp::Read { len, .. },
                    ..
                }) => *len,
                Some(_) => 0,
                None => return,
            };
            if count >= 2 && bytes + next > READ_BYTES_HELD_MAX {
                return;
            }
            let Some(req) = c.reads_waiting.pop_front() else {
                return;
            };
            self.start_io(slot, req);
            // A READ done at once (tmpfs) has its reply queued in the core
            // now: into the send queue with it, where the next round counts it.
            self.take_outputs(slot);
        }
    }

    fn close(&mut self, slot: u32) {
        let Some(mut c) = self.conns.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        self.forget_timer(slot, &c);
        c.conn.shutdown(self.clock);
        // What the core still asks of the cluster's store as the connection goes (the record
        // of a persistent open whose CLOSE was waiting for the file's home, removed) is asked
        // all the same: its answer finds no connection and is dropped.
        while let Some(out) = c.conn.poll_output() {
            if let Output::Lookup(req) = out {
                self.ask_lookup(req, slot, c.gen);
            }
        }
        // Ops still in the ring hold their own fd clones; their completions
        // find a different generation (or nothing) and are ignored.
        self.ring.cancel(token(KIND_RECV, c.gen, slot));
        self.ring.cancel(token(KIND_SEND, c.gen, slot));
        self.ring.unregister_fd(&c.fd);
        self.free.push(slot);
        self.shared.connections.fetch_sub(1, Ordering::SeqCst);
        tracing::debug!(worker = self.index, "connection closed");
    }

    fn shutdown(&mut self) {
        for slot in 0..self.conns.len() as u32 {
            self.close(slot);
        }
        self.home_shutdown();
        if self.zc_sends[0] > 0 {
            tracing::debug!(
                worker = self.index,
                "zero-copy sends: {}, copied by the kernel: {}",
                self.zc_sends[0],
                self.zc_sends[1]
            );
        }
        if self.held_turns > 0 {
            tracing::debug!(
                worker = self.index,
                "loop turns that fed frames held back from the turn before: {} of {}",
                self.held_turns,
                self.turns
            );
        }
        if self.multishot_arrivals > 0 {
            tracing::debug!(
                worker = self.index,
                "multishot receives: {} arrivals; re-armed {} times after running out of provided buffers",
                self.multishot_arrivals,
                self.recv_bufs_exhausted
            );
        }
        if let Some(q) = self.quic.as_ref() {
            let lost = self
                .shared
                .quic
                .as_ref()
                .map_or(0, |s| s.mail_dropped(self.index));
            tracing::debug!(
                worker = self.index,
                "QUIC datagrams the socket did not take: {}; handed to other workers: {}; \
                 for this worker's connections but dropped (its queue full): {lost}",
                q.send_drops(),
                q.forwarded
            );
        }
        if ringshare_engine::creds::enabled() {
            tracing::info!(
                worker = self.index,
                "acting as users: {} credential switches; {} io_uring personalities left",
                ringshare_engine::creds::thread_switches(),
                self.ring.personality_count()
            );
        }
        let [now, waited, fell_back] = self.writes_spliced;
        if now + waited + fell_back > 0 {
            tracing::debug!(
                worker = self.index,
                "WRITE payloads spliced: {now} at once, {waited} after waiting; {fell_back} received into memory after all; payload bytes received before their splice: {}",
                self.write_prefix_bytes
            );
        }
    }
}

/// Asks the connection's multishot receive, if one is armed, to end (once).
fn end_multishot(ring: &mut Ring, c: &mut Conn, slot: u32) {
    if c.multishot && !c.multishot_ending {
        c.multishot_ending = true;
        ring.cancel(token(KIND_RECV, c.gen, slot));
    }
}

/// The connection in `slot` if it is still generation `gen`.
fn conn_in(conns: &mut [Option<Conn>], slot: u32, gen: u32) -> Option<&mut Conn> {
    conns
        .get_mut(slot as usize)?
        .as_mut()
        .filter(|c| c.gen == gen)
}
