//! The file system pool ([`Lookup::Fs`]): its jobs run as their user, those about one open in
//! the order asked, and a connection's jobs of one share are bounded.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringshare_core::fsjob::{FsDone, FsJob};
use ringshare_core::{Lookup, LookupDone, LookupRequest};
use ringshare_engine::{Ring, RingConfig};

use super::*;

/// A worker's inbox with a ring to wake (kept with it).
fn inbox_of_a_ring() -> (Ring, Arc<Inbox>) {
    let ring = Ring::new(RingConfig {
        entries: 8,
        recv_bufs: 0,
        fixed_files: 0,
        ..RingConfig::default()
    })
    .expect("a ring");
    let inbox = inbox(ring.waker());
    (ring, inbox)
}

/// The answers in `inbox` once `n` came (or 10 s passed), by request id.
fn answers(inbox: &Inbox, n: usize) -> Vec<(u64, LookupDone)> {
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(10);
    while got.len() < n && Instant::now() < until {
        let mut batch = Vec::new();
        if inbox.take_into(&mut batch) {
            got.extend(batch.into_iter().map(|(_, _, id, done)| (id, done)));
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    got
}

fn job(
    order: u64,
    who: Option<ringshare_vfs::Who>,
    run: impl Fn() + Send + Sync + 'static,
) -> Lookup {
    Lookup::Fs(FsJob::new(
        who,
        order,
        7,
        "a test job",
        Box::new(move || {
            run();
            FsDone::Done(Ok(()))
        }),
    ))
}

/// A question of connection `slot`/`gen` of the I/O thread whose inbox is `inbox`: a job of
/// share `share` about the open of order `order` that does nothing.
fn question(inbox: &Arc<Inbox>, (slot, gen): (u32, u32), share: u64, order: u64) -> Question {
    let req = LookupRequest {
        id: 0,
        ask: Lookup::Fs(FsJob::new(
            None,
            order,
            share,
            "a test job",
            Box::new(|| FsDone::Done(Ok(()))),
        )),
    };
    Question::new(req, slot, gen, Arc::clone(inbox))
}

/// A job acts as the user it was asked for: the file it makes is theirs (root only: the pool's
/// thread switches its credentials, as the server's do).
#[test]
fn a_file_system_job_runs_as_its_user_and_the_file_it_makes_is_theirs() {
    if !rustix::process::geteuid().is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "needs root (CI runs as root)"
        );
        eprintln!("\n!!!!!!!! SKIPPED: needs root !!!!!!!!\n");
        return;
    }
    ringshare_engine::creds::enable().expect("root can switch credentials");
    let dir = std::env::temp_dir().join(format!("ringshare-fs-pool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let pool = LookupPool::start();
    let (_ring, inbox) = inbox_of_a_ring();
    let user = ringshare_engine::creds::intern(ringshare_engine::creds::Creds::new(
        59311,
        59312,
        vec![59312],
    ));
    let (theirs, servers) = (dir.join("theirs"), dir.join("servers"));
    let t = theirs.clone();
    let ask = job(1, Some(user), move || {
        std::fs::write(&t, b"x").unwrap();
    });
    pool.ask(LookupRequest { id: 1, ask }, 0, 0, &inbox);
    let s = servers.clone();
    let ask = job(2, None, move || {
        std::fs::write(&s, b"x").unwrap();
    });
    pool.ask(LookupRequest { id: 2, ask }, 0, 0, &inbox);
    let got = answers(&inbox, 2);
    assert_eq!(got.len(), 2, "both answered");
    let m = std::fs::metadata(&theirs).expect("the user's job made its file");
    assert_eq!((m.uid(), m.gid()), (59311, 59312), "made as the user");
    let m = std::fs::metadata(&servers).expect("the server's job made its file");
    assert_eq!((m.uid(), m.gid()), (0, 0), "made as the server");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two jobs about one open run one after another in the order asked, though the first is slow
/// and threads are free; a job about another open is not held up by them.
#[test]
fn two_file_system_jobs_about_one_open_run_in_the_order_asked() {
    let pool = LookupPool::start();
    let (_ring, inbox) = inbox_of_a_ring();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mark = |n: u32, pause: u64| {
        let seen = Arc::clone(&seen);
        move || {
            crate::lock(&seen).push((n, "start"));
            std::thread::sleep(Duration::from_millis(pause));
            crate::lock(&seen).push((n, "end"));
        }
    };
    pool.ask(
        LookupRequest {
            id: 1,
            ask: job(5, None, mark(1, 300)),
        },
        3,
        0,
        &inbox,
    );
    pool.ask(
        LookupRequest {
            id: 2,
            ask: job(5, None, mark(2, 0)),
        },
        3,
        0,
        &inbox,
    );
    pool.ask(
        LookupRequest {
            id: 3,
            ask: job(6, None, mark(3, 0)),
        },
        3,
        0,
        &inbox,
    );
    assert_eq!(answers(&inbox, 3).len(), 3);
    let seen = crate::lock(&seen).clone();
    let at = |e: (u32, &str)| seen.iter().position(|s| *s == e).unwrap();
    assert!(
        at((1, "end")) < at((2, "start")),
        "the second waited: {seen:?}"
    );
    assert!(
        at((3, "end")) < at((1, "end")),
        "another open's went on: {seen:?}"
    );
}

/// At most [`FS_JOBS_PER_SHARE_AND_CONNECTION`] jobs of one share and connection run at once
/// (a stuck file holds only those threads); another connection's jobs of that share, and the
/// connection's jobs of another share, are taken meanwhile.
#[test]
fn a_connections_file_system_jobs_of_one_share_are_bounded() {
    let (_ring, inbox) = inbox_of_a_ring();
    let q = |slot: u32, share: u64, order: u64| question(&inbox, (slot, 0), share, order);
    let mut w = Waiting::default();
    for i in 0..10 {
        w.push(q(1, 7, 100 + i));
    }
    w.push(q(2, 7, 1));
    w.push(q(1, 8, 2));
    let mut taken = Vec::new();
    while let Some(t) = w.take() {
        taken.push(t);
    }
    let of = |slot, share| {
        taken
            .iter()
            .filter(|t| t.slot == slot && matches!(&t.req.ask, Lookup::Fs(j) if j.share == share))
            .count()
    };
    assert_eq!(of(1, 7), FS_JOBS_PER_SHARE_AND_CONNECTION);
    assert_eq!((of(2, 7), of(1, 8)), (1, 1));
    assert!(w.done(&taken.remove(0)), "one ends: the next may go");
    assert!(w.take().is_some());
    assert!(w.take().is_none());
}

/// Slot numbers are each I/O thread's own and are used again by later connections: a
/// connection in slot 1 of another thread, or a later one in slot 1 of the same thread (while
/// the first one's jobs still run, on a file system that does not answer), is not held by the
/// first one's bound, nor by its open's order.
#[test]
fn a_connection_of_another_io_thread_or_a_later_one_in_its_slot_has_a_bound_of_its_own() {
    let ((_r1, one), (_r2, two)) = (inbox_of_a_ring(), inbox_of_a_ring());
    let q = |inbox: &Arc<Inbox>, gen: u32, order: u64| question(inbox, (1, gen), 7, order);
    let mut w = Waiting::default();
    for i in 0..FS_JOBS_PER_SHARE_AND_CONNECTION as u64 {
        w.push(q(&one, 0, 100 + i));
    }
    // Held by nothing of the first connection's: another thread's slot 1 (same open id as
    // one of the first's), and the first thread's slot 1 used again.
    w.push(q(&two, 0, 100));
    w.push(q(&one, 1, 100));
    let mut taken = 0;
    while w.take().is_some() {
        taken += 1;
    }
    assert_eq!(taken, FS_JOBS_PER_SHARE_AND_CONNECTION + 2);
}

/// Issue 33's review (session 50): kernel watches' jobs (nobody's: queued by any request or
/// the kernel's events) are posted by whichever connection comes next. They do not count
/// against that connection's bound of jobs of their share: its own job of the share is taken
/// beside them. Nobody's jobs of a share have one bound for the node, whoever posted them.
#[test]
fn kernel_watch_jobs_a_connection_posts_do_not_hold_back_its_own_jobs_of_that_share() {
    let (_ring, inbox) = inbox_of_a_ring();
    let nobodys = |slot: u32, order: u64| {
        let mut q = question(&inbox, (slot, 0), 7, order);
        if let Lookup::Fs(j) = &mut q.req.ask {
            j.nobodys = true;
        }
        Question::new(q.req, slot, 0, Arc::clone(&inbox))
    };
    let mut w = Waiting::default();
    for i in 0..10 {
        w.push(nobodys(1 + (i % 2) as u32, 0));
    }
    w.push(question(&inbox, (1, 0), 7, 5));
    let mut taken = Vec::new();
    while let Some(t) = w.take() {
        taken.push(t);
    }
    let theirs = |t: &Question| matches!(&t.req.ask, Lookup::Fs(j) if j.nobodys);
    assert_eq!(
        taken.iter().filter(|t| theirs(t)).count(),
        FS_JOBS_PER_SHARE_AND_CONNECTION,
        "nobody's jobs of share 7, posted by two connections, share one bound"
    );
    assert_eq!(
        taken.iter().filter(|t| !theirs(t)).count(),
        1,
        "connection 1's own job of share 7 is taken beside them"
    );
    // One of nobody's ends: the next of them may go.
    let first = taken.iter().position(theirs).unwrap();
    assert!(w.done(&taken.remove(first)));
    assert!(w.take().is_some_and(|t| theirs(&t)));
}

/// Whether the write end of the pipe `reader` reads from is closed (the reader sees its end).
fn writer_closed(reader: &std::io::PipeReader) -> bool {
    let mut fds = [rustix::event::PollFd::new(
        reader,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    rustix::event::poll(&mut fds, Some(&zero)).unwrap() == 1
        && fds[0].revents().contains(rustix::event::PollFlags::HUP)
}

/// A last-close job for `fd` (a pipe's write end standing for a file's descriptor), asked.
fn ask_last_close(pool: &LookupPool, inbox: &Arc<Inbox>, fd: Arc<std::os::fd::OwnedFd>) {
    let mut job = FsJob::new(
        None,
        9,
        7,
        "a test last close",
        Box::new(|| FsDone::Closed(None)),
    );
    job.closes = Some(fd);
    let ask = Lookup::Fs(job);
    pool.ask(LookupRequest { id: 1, ask }, 3, 0, inbox);
}

/// The review of steps 3-4, finding B: a CLOSE's job makes the descriptor's last close on the
/// pool before its answer when nothing else holds it; when something else does (a WRITE that
/// asked no job on the ring, a READ's reply a client is slow to take), the job is answered
/// after a short wait and the closer's thread makes the last close once the other holder lets
/// it go (not that holder, on the I/O thread, and no pool thread sleeps meanwhile). Shown
/// with a pipe's write end as the descriptor: its reader sees the end once it is closed.
#[test]
fn a_last_close_is_made_on_the_pool_or_by_the_closer_once_other_holders_let_it_go() {
    let pool = LookupPool::start();
    let (_ring, inbox) = inbox_of_a_ring();
    // Nothing else holds it: closed before the answer.
    let (reader, writer) = std::io::pipe().unwrap();
    ask_last_close(&pool, &inbox, Arc::new(std::os::fd::OwnedFd::from(writer)));
    assert_eq!(answers(&inbox, 1).len(), 1, "answered");
    assert!(writer_closed(&reader), "closed before the answer");
    // An I/O on the ring holds it: answered, not closed while held.
    let (reader, writer) = std::io::pipe().unwrap();
    let fd = Arc::new(std::os::fd::OwnedFd::from(writer));
    let io_on_the_ring = Arc::clone(&fd);
    let started = Instant::now();
    ask_last_close(&pool, &inbox, fd);
    assert_eq!(answers(&inbox, 1).len(), 1, "answered while it is held");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no pool thread waited for the holder: {:?}",
        started.elapsed()
    );
    std::thread::sleep(Duration::from_millis(50));
    assert!(!writer_closed(&reader), "not closed while the I/O holds it");
    assert_eq!(
        Arc::strong_count(&io_on_the_ring),
        2,
        "the closer holds it too: the last close is the closer's, not the I/O's"
    );
    drop(io_on_the_ring);
    let until = Instant::now() + Duration::from_secs(5);
    while !writer_closed(&reader) {
        assert!(
            Instant::now() < until,
            "the closer closed it once the I/O let it go"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The review of steps 3-4, finding G: READs' jobs of one open (their size checks on FUSE) are
/// not ordered in the pool: a slow one does not hold the next, as their I/O does not. The
/// connection still holds what is not a READ behind them.
#[test]
fn two_reads_jobs_about_one_open_run_side_by_side() {
    let pool = LookupPool::start();
    let (_ring, inbox) = inbox_of_a_ring();
    let seen = Arc::new(Mutex::new(Vec::new()));
    for (id, pause) in [(1u32, 300u64), (2, 0)] {
        let seen = Arc::clone(&seen);
        let Lookup::Fs(mut j) = job(5, None, move || {
            crate::lock(&seen).push((id, "start"));
            std::thread::sleep(Duration::from_millis(pause));
            crate::lock(&seen).push((id, "end"));
        }) else {
            unreachable!()
        };
        j.among_reads = true;
        pool.ask(
            LookupRequest {
                id: u64::from(id),
                ask: Lookup::Fs(j),
            },
            3,
            0,
            &inbox,
        );
    }
    assert_eq!(answers(&inbox, 2).len(), 2);
    let seen = crate::lock(&seen).clone();
    let at = |e: (u32, &str)| seen.iter().position(|s| *s == e).unwrap();
    assert!(
        at((2, "end")) < at((1, "end")),
        "the second did not wait for the first: {seen:?}"
    );
}

/// A connection that floods a share with jobs does not hold another connection's behind its
/// own: the connections take turns (issue 33: on CephFS the flood test's CREATEs would each be
/// a job; the local clients' jobs must still be taken at once). The same for calls to a
/// stopped node's files and to a live node's.
#[test]
fn a_connection_flooding_the_pool_takes_turns_with_another() {
    let (_ring, inbox) = inbox_of_a_ring();
    let q = |slot: u32, order: u64| question(&inbox, (slot, 0), 7, order);
    let mut w = Waiting::default();
    for i in 0..1000 {
        w.push(q(1, 100 + i));
    }
    w.push(q(2, 1));
    let first: Vec<u32> = (0..2).map(|_| w.take().expect("a job").slot).collect();
    assert_eq!(first, [1, 2], "the second connection's job is taken second");
}
