//! Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread"): on a share
//! whose calls may wait on a network, the kernel watches that let CHANGE_NOTIFY and directory
//! leases see other programs' changes are added in file system jobs: `inotify_add_watch` on
//! CephFS or FUSE checks permission, which may ask the server, and a WATCH_TREE watcher's walk
//! opens and lists every directory below. Nothing waits for them; the answers are those of a
//! local share, where the watches are added at once.

use crate::support;

use ringshare_core::notify_kernel::mask;
use ringshare_vfs::Share;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::CreateResponse;
use ringshare_wire::{FileId, NtStatus};
use support::caching::*;
use support::fuse::*;
use support::*;

/// FILE_DIRECTORY_FILE.
const DIRECTORY: u32 = 0x1;
/// FILE_NOTIFY_CHANGE_FILE_NAME | DIR_NAME.
const NAMES: u32 = 0x3;

/// Directory `name` made by `c` (closed again).
fn mkdir(c: &mut Client, name: &str) {
    let d = c.create(name, READ, D::CREATE, DIRECTORY).expect("mkdir");
    assert_eq!(c.close(d).status(), NtStatus::SUCCESS);
}

/// Directory `name` opened by `c`.
fn open_dir(c: &mut Client, name: &str) -> FileId {
    c.create(name, READ, D::OPEN, DIRECTORY).expect("open dir")
}

/// A CHANGE_NOTIFY for names on `d` (WATCH_TREE with `tree`): what came back at once.
fn notify(c: &mut Client, d: FileId, tree: bool) -> Vec<Resp> {
    let mut m = c.change_notify_msg(d, NAMES, tree, 4096);
    c.sign(&mut m);
    c.send_frame(m)
}

/// [`kernel_reports`], then what the client was answered.
fn kernel_reports_answered(c: &mut Client, wd: i32, mask: u32, name: &str) -> Vec<Resp> {
    kernel_reports(c, wd, mask, name);
    c.pump()
}

fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Whether `rs` holds a CHANGE_NOTIFY's SUCCESS naming `name`.
fn names(rs: &[Resp], name: &str) -> bool {
    let n = utf16(name);
    rs.iter().any(|r| {
        r.status() == NtStatus::SUCCESS && r.msg.windows(n.len()).any(|w| w == n.as_slice())
    })
}

/// The CHANGE_NOTIFY's jobs held and run to the end: the file system calls made on the I/O
/// thread meanwhile, and the answers.
fn armed(c: &mut Client, calls: &Calls, d: FileId, tree: bool) -> (Vec<&'static str>, Vec<Resp>) {
    calls.on_io_thread();
    c.hold_lookups = true;
    let mut rs = notify(c, d, tree);
    let (more, _) = c.run_held_jobs_to_the_end();
    rs.extend(more);
    (calls.on_io_thread(), rs)
}

#[test]
fn a_change_notify_on_an_offloaded_share_adds_its_kernel_watch_in_a_job_and_hears_another_program()
{
    let (mut c, calls, watches) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    let d = open_dir(&mut c, "d");
    let (io, rs) = armed(&mut c, &calls, d, false);
    assert_eq!(io, Vec::<&str>::new(), "no call on the I/O thread");
    assert!(
        rs.iter().all(|r| r.status() == NtStatus::PENDING),
        "the request waits for changes: {rs:?}"
    );
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch: {:?}", watches.live());
    };
    let rs = kernel_reports_answered(&mut c, wd, mask::CREATE, "theirs.txt");
    assert!(names(&rs, "theirs.txt"), "reported: {rs:?}");

    // The local twin adds it on the I/O thread, at once, and hears the same.
    let (mut c, calls, watches) = fuse_client_watching(false);
    mkdir(&mut c, "d");
    let d = open_dir(&mut c, "d");
    let (io, _) = armed(&mut c, &calls, d, false);
    assert!(io.contains(&"watch_adds"), "on the I/O thread: {io:?}");
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch: {:?}", watches.live());
    };
    let rs = kernel_reports_answered(&mut c, wd, mask::CREATE, "theirs.txt");
    assert!(names(&rs, "theirs.txt"), "reported: {rs:?}");
}

#[test]
fn a_watch_tree_on_an_offloaded_share_walks_and_watches_below_in_a_job() {
    let (mut c, calls, watches) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    mkdir(&mut c, "d\\sub");
    let d = open_dir(&mut c, "d");
    let (io, _) = armed(&mut c, &calls, d, true);
    assert_eq!(io, Vec::<&str>::new(), "no call on the I/O thread");
    let [top, sub] = watches.live()[..] else {
        panic!("d's and d\\sub's kernel watches: {:?}", watches.live());
    };
    let rs = kernel_reports_answered(&mut c, sub, mask::CREATE, "deep.txt");
    assert!(names(&rs, "sub\\deep.txt"), "reported: {rs:?}");

    // A directory another program makes below: watched in a job too, posted by the connection
    // that next acts (here the one the report answers; the driver's worker 0 after the
    // kernel's events otherwise).
    armed(&mut c, &calls, d, true);
    let opts = ringshare_vfs::OpenOptions {
        mode: ringshare_vfs::OpenMode::CreateNew,
        directory: true,
        create_mode: 0o755,
        ..ringshare_vfs::OpenOptions::read_existing()
    };
    let new = ringshare_vfs::RelPath::from_components(["d", "new"]).unwrap();
    let who = ringshare_vfs::server_who();
    ringshare_vfs::Share::open(&c.mem, &who, &new, &opts).expect("another program's mkdir");
    let rs = kernel_reports_answered(&mut c, top, mask::CREATE | mask::ISDIR, "new");
    assert!(names(&rs, "new"), "reported: {rs:?}");
    assert_eq!(
        calls.on_io_thread(),
        Vec::<&str>::new(),
        "no call on the I/O thread"
    );
    assert_eq!(watches.live().len(), 3, "d\\new watched too");
}

/// With `c` holding its lookups: every held job runs, and those they lead to, except the jobs
/// whose `what` is `what`, which are held and returned, with what `c` was answered meanwhile.
fn hold_only(c: &mut Client, what: &str) -> (Vec<ringshare_core::LookupRequest>, Vec<Resp>) {
    let of_what = |r: &ringshare_core::LookupRequest| matches!(&r.ask, ringshare_core::Lookup::Fs(j) if j.what == what);
    let (mut held, mut answered) = (Vec::new(), Vec::new());
    for _ in 0..8 {
        let (wait, run): (Vec<_>, Vec<_>) = std::mem::take(&mut c.held_lookups)
            .into_iter()
            .partition(of_what);
        held.extend(wait);
        if run.is_empty() {
            break;
        }
        c.run_any(run);
        answered.extend(c.pump());
    }
    (held, answered)
}

/// `c` asks an RH lease of key `key` on directory `d`: the CREATE's answer.
fn lease_dir(c: &mut Client, key: u8) -> Resp {
    let m = c.create_msg_caching("d", READ, 7, D::OPEN, LEASE, Some(lease_v2(key, R | H)));
    let mut rs = c.send_frame(m);
    assert_eq!(rs.len(), 1, "one response: {rs:?}");
    rs.remove(0)
}

#[test]
fn a_directory_leases_grant_on_an_offloaded_share_adds_its_kernel_watch_in_a_job() {
    let (mut c, calls, watches) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    calls.on_io_thread();
    let r = lease_dir(&mut c, 1);
    assert_eq!(granted_lease(&r).state.0, R | H);
    assert_eq!(
        calls.on_io_thread(),
        Vec::<&str>::new(),
        "no call on the I/O thread"
    );
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch: {:?}", watches.live());
    };
    kernel_reports(&mut c, wd, mask::CREATE, "theirs.txt");
    let got = c.breaks();
    assert_eq!(got.len(), 1, "the lease breaks: {got:?}");

    // The local twin: on the I/O thread.
    let (mut c, calls, watches) = fuse_client_watching(false);
    mkdir(&mut c, "d");
    calls.on_io_thread();
    lease_dir(&mut c, 1);
    assert!(calls.on_io_thread().contains(&"watch_adds"));
    assert_eq!(watches.live().len(), 1);
}

#[test]
fn a_leased_directory_whose_watch_the_kernel_refused_gets_one_at_its_next_grant() {
    for offloaded in [true, false] {
        let (mut c, _calls, watches) = fuse_client_watching(offloaded);
        mkdir(&mut c, "d");
        // Past inotify's limit: the lease is granted all the same, without a watch.
        watches
            .refuse
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let r = lease_dir(&mut c, 1);
        assert_eq!(granted_lease(&r).state.0, R | H);
        assert_eq!(watches.live(), Vec::<i32>::new(), "offloaded {offloaded}");
        // Room again: the directory's next lease (the first still held) adds the watch.
        watches
            .refuse
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let r = lease_dir(&mut c, 2);
        assert_eq!(granted_lease(&r).state.0, R | H);
        let [wd] = watches.live()[..] else {
            panic!(
                "one kernel watch (offloaded {offloaded}): {:?}",
                watches.live()
            );
        };
        kernel_reports(&mut c, wd, mask::CREATE, "theirs.txt");
        let got = c.breaks();
        assert!(
            !got.is_empty(),
            "another program's change breaks the leases"
        );
    }
}

#[test]
fn a_watcher_or_lease_that_ends_while_its_job_is_out_leaves_no_kernel_watch() {
    let (mut c, calls, watches) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    mkdir(&mut c, "d\\sub");
    let d = open_dir(&mut c, "d");
    calls.on_io_thread();
    c.hold_lookups = true;
    notify(&mut c, d, true);
    // The share root's identity, then the watches' job, held.
    let held = std::mem::take(&mut c.held_lookups);
    c.run_jobs(held);
    c.pump();
    assert!(!c.held_lookups.is_empty(), "the watches' job is out");
    // The handle closes meanwhile (NOTIFY_CLEANUP), then the job runs.
    let m = c.close_msg(d, 0);
    c.send_frame(m);
    c.run_held_jobs_to_the_end();
    assert_eq!(watches.live(), Vec::<i32>::new(), "no watch left");
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());

    // A directory lease whose handle closes while its watch's job is out: the CREATE's own
    // jobs run until it is answered; its watch's job is then held.
    c.hold_lookups = true;
    let m = c.create_msg_caching("d", READ, 7, D::OPEN, LEASE, Some(lease_v2(2, R | H)));
    let mut rs = c.send_frame(m);
    while !rs.iter().any(|r| r.status() != NtStatus::PENDING) {
        assert!(!c.held_lookups.is_empty(), "the CREATE waits for a job");
        let held = std::mem::take(&mut c.held_lookups);
        c.run_jobs(held);
        rs.extend(c.pump());
    }
    let r = rs.iter().find(|r| r.status() != NtStatus::PENDING).unwrap();
    assert_eq!(granted_lease(r).state.0, R | H);
    let f = CreateResponse::decode(&r.msg).expect("create").file_id;
    assert!(!c.held_lookups.is_empty(), "the watch's job is out");
    let m = c.close_msg(f, 0);
    c.send_frame(m);
    c.run_held_jobs_to_the_end();
    assert_eq!(watches.live(), Vec::<i32>::new(), "no watch left");
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());
}

/// (Session 50, left by the kernel watches' branch.) A change through a share nobody watches,
/// while a watcher of another share of the server is armed, looked up that share's root's
/// identity on the I/O thread (a stat, once per share) to match it against watchers. On a
/// share whose calls may wait on a network only a root already known is used: a share nobody
/// watched has no watcher to tell, and the change is still reported to the watched share's.
#[test]
fn a_change_through_an_unwatched_offloaded_share_reads_nothing_on_the_io_thread() {
    let (mut c, calls, _) = fuse_client_watching_with(true, |cfg| {
        let ro = cfg.shares.iter_mut().find(|s| s.name == "ro").unwrap();
        std::sync::Arc::get_mut(ro).unwrap().read_only = false;
    });
    mkdir(&mut c, "d");
    let d = open_dir(&mut c, "d");
    let (io, _) = armed(&mut c, &calls, d, false);
    assert_eq!(io, Vec::<&str>::new(), "armed without calls here");
    let watched = c.tree_id;
    c.tree_id = c.ro_tree_id;
    calls.on_io_thread();
    let f = c.create("elsewhere.txt", READ, D::CREATE, 0).expect("made");
    assert_eq!(
        calls.on_io_thread(),
        Vec::<&str>::new(),
        "no call on the I/O thread for the unwatched share's change"
    );
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    c.tree_id = watched;
    let m = c.create_msg_caching("d\\here.txt", READ, 7, D::CREATE, 0, None);
    let mut rs = c.send_frame(m);
    rs.extend(c.pump());
    assert!(
        names(&rs, "here.txt"),
        "the watched share's change is told: {rs:?}"
    );
}

/// The review of session 50, K1: a kernel watch's job queued where no request or event of the
/// I/O thread follows (a peer's forwarded change, a job's report on an idle server) waited until
/// some connection's next request or worker 0's next timer. Queuing one now wakes the driver
/// (the waker it sets), whose worker 0 posts it on that turn.
#[test]
fn a_new_directorys_watch_queued_wakes_the_driver_to_post_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (mut c, calls, _) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    let d = open_dir(&mut c, "d");
    let (io, _) = armed(&mut c, &calls, d, true);
    assert_eq!(io, Vec::<&str>::new());
    let woken = std::sync::Arc::new(AtomicUsize::new(0));
    let w = std::sync::Arc::clone(&woken);
    c.server.set_kernel_jobs_waker(std::sync::Arc::new(move || {
        w.fetch_add(1, Ordering::SeqCst);
    }));
    mkdir(&mut c, "d\\new");
    assert!(
        woken.load(Ordering::SeqCst) >= 1,
        "the new directory's watch queued, and the driver woken"
    );
}

/// The review of session 50, K3: a watched directory renamed while its watch's job waited was
/// watched under its old path (the job's path was the one it was asked with), so another
/// program's changes in it matched no watcher. The job takes the watcher's path when it runs.
#[test]
fn a_directory_renamed_while_its_watchs_job_waits_is_watched_where_it_is() {
    let (mut c, calls, watches) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    let d = open_dir(&mut c, "d");
    c.hold_lookups = true;
    let early = notify(&mut c, d, false);
    assert!(early.iter().all(|r| r.status() == NtStatus::PENDING));
    // Jobs before it (the share root's identity) run; the watch's waits.
    let (held, _) = hold_only(&mut c, "a CHANGE_NOTIFY's kernel watches");
    assert_eq!(held.len(), 1, "the watch's job, held");
    c.hold_lookups = false;
    let mut b = Client::on(
        std::sync::Arc::clone(&c.server),
        c.mem.clone(),
        Options::default(),
    );
    let moved = b
        .create("d", 0x0011_0080 | 0x0001_0000, D::OPEN, DIRECTORY)
        .expect("d, to rename");
    let r = b.set_info(moved, 1, 10, &rename_info("e", false));
    assert_eq!(r.status(), NtStatus::SUCCESS, "renamed while the job waits");
    c.run_any(held);
    c.pump();
    let _ = calls.on_io_thread();
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch: {:?}", watches.live());
    };
    let rs = kernel_reports_answered(&mut c, wd, mask::CREATE, "theirs.txt");
    assert!(
        names(&rs, "theirs.txt"),
        "reported at its new place: {rs:?}"
    );
}

/// K3 for a directory lease: the lease's watch job waits while its holder renames the
/// directory; the job lists the watch at the directory's new name, where a CHANGE_NOTIFY on it
/// then finds and shares it, and another program's change there is reported and breaks the
/// lease.
#[test]
fn a_leased_directory_renamed_while_its_watchs_job_waits_is_watched_where_it_is() {
    let (mut c, _calls, watches) = fuse_client_watching(true);
    mkdir(&mut c, "d");
    c.hold_lookups = true;
    let m = c.create_msg_caching(
        "d",
        READ | DELETE,
        7,
        D::OPEN,
        LEASE,
        Some(lease_v2(1, R | H)),
    );
    // The CREATE's own jobs run until it is answered; the watch's job waits.
    let mut rs = c.send_frame(m);
    let (held, answered) = hold_only(&mut c, "a leased directory's kernel watch");
    rs.extend(answered);
    let r = rs
        .iter()
        .find(|r| r.status() != NtStatus::PENDING)
        .expect("the CREATE is answered");
    assert_eq!(granted_lease(r).state.0, R | H);
    let f = CreateResponse::decode(&r.msg).expect("create").file_id;
    assert_eq!(held.len(), 1, "the watch's job, held");
    c.hold_lookups = false;
    let r = c.set_info(f, 1, 10, &rename_info("e", false));
    assert_eq!(r.status(), NtStatus::SUCCESS, "renamed while the job waits");
    c.run_any(held);
    c.pump();
    let _ = c.breaks();
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch: {:?}", watches.live());
    };
    // A CHANGE_NOTIFY on the directory at its new name finds the lease's watch there and
    // shares it (before, the watch was listed at the old name and a second one was added).
    let e = open_dir(&mut c, "e");
    let early = notify(&mut c, e, false);
    assert!(early.iter().all(|r| r.status() == NtStatus::PENDING));
    assert_eq!(watches.live(), vec![wd], "one watch for the directory");
    let rs = kernel_reports_answered(&mut c, wd, mask::CREATE, "theirs.txt");
    assert!(names(&rs, "theirs.txt"), "reported at its new name: {rs:?}");
    let breaks = rs
        .iter()
        .filter(|r| r.hdr.command == ringshare_wire::consts::Command::OPLOCK_BREAK)
        .count();
    assert_eq!(breaks, 1, "and the lease breaks: {rs:?}");
}

/// The kernel hands out one watch descriptor per directory, whatever the path it was asked
/// by (inotify_add_watch on an inode already watched answers with its descriptor). A directory
/// another program moved is still listed at its old path (nothing told the server), and a
/// CHANGE_NOTIFY at its new name is handed the same descriptor: two places share it. The
/// watcher at the old path ending leaves the descriptor to the other (whose changes are still
/// reported); the last one ending removes it. (docs/cluster-internals.md, "Kernel watches in
/// jobs": before, the tests' watches gave a new descriptor per add, so this sharing was shown
/// only by `notify::kernel`'s unit test.)
#[test]
fn a_kernel_watch_two_paths_share_stays_until_the_last_watcher_of_either_goes() {
    let (mut c, calls, watches) = fuse_client_watching(true);
    watches
        .per_inode
        .store(true, std::sync::atomic::Ordering::SeqCst);
    mkdir(&mut c, "d");
    let d = open_dir(&mut c, "d");
    let (_, early) = armed(&mut c, &calls, d, false);
    assert!(early.iter().all(|r| r.status() == NtStatus::PENDING));
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch: {:?}", watches.live());
    };
    // Another program moves the directory (the share's file system, not through the server).
    let path = |n: &str| ringshare_vfs::RelPath::from_components([n]).expect("path");
    c.mem
        .rename(&ringshare_vfs::server_who(), &path("d"), &path("e"), false)
        .expect("moved by another program");
    let e = open_dir(&mut c, "e");
    let (_, early) = armed(&mut c, &calls, e, false);
    assert!(early.iter().all(|r| r.status() == NtStatus::PENDING));
    assert_eq!(watches.live(), vec![wd], "the kernel's one descriptor");
    // The watcher at the old path goes: the descriptor stays for the one at the new name.
    let m = c.close_msg(d, 0);
    c.send_frame(m);
    c.run_held_jobs_to_the_end();
    assert_eq!(
        watches.live(),
        vec![wd],
        "still watched for the other watcher"
    );
    let rs = kernel_reports_answered(&mut c, wd, mask::CREATE, "theirs.txt");
    assert!(names(&rs, "theirs.txt"), "still reported: {rs:?}");
    // The last watcher goes: so does the descriptor.
    let m = c.close_msg(e, 0);
    c.send_frame(m);
    c.run_held_jobs_to_the_end();
    assert_eq!(watches.live(), Vec::<i32>::new(), "no watch left");
}
