//! CREATE on a share whose calls may wait on a network (issue 33, step 5; FUSE, CephFS: `fs
//! calls off io thread = auto`): its file system part (the name's lookup, the open or creation,
//! the stat, the access check, a new file's set-up; an overwrite's truncation after admission)
//! is made in file system jobs ([`ringshare_core::fsjob`]), the CREATE parked meanwhile, and
//! what the server's shared state decides stays on the I/O thread (docs/cluster-internals.md,
//! "Built so far"). The share is the FUSE-like in-memory share of support/fuse.rs.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{RelPath, Share};
use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

/// What a CREATE sent with the jobs it asks held came to ([`create_with_jobs_held`]).
struct HeldCreate {
    /// The jobs it asked first, and the file system calls made before they ran.
    jobs: usize,
    calls_before: usize,
    /// Its answer, once they ran.
    answer: Resp,
    /// The jobs asked after (an open not kept, let go on the pool), still held.
    later: Vec<ringshare_core::LookupRequest>,
}

/// A CREATE of `name` (`disposition`, ShareAccess `share`, CreateOptions `options`, for read
/// and write) on `c`'s tree, with the file system jobs it asks held: see [`HeldCreate`].
fn create_with_jobs_held(
    c: &mut Client,
    calls: &Calls,
    name: &str,
    (disposition, share, options): (D, u32, u32),
) -> HeldCreate {
    let was = calls.made();
    c.hold_lookups = true;
    let tree = c.tree_id;
    let m = c.create_msg(tree, name, 0x0012_019f, share, disposition, options);
    let (_, early) = send_signed(c, m);
    assert!(early.is_empty(), "nothing answered before its job ran");
    let calls_before = calls.made() - was;
    let held = std::mem::take(&mut c.held_lookups);
    let jobs = held.len();
    // The CREATE runs again with its job's answer inside `complete_lookup`, on the I/O thread:
    // it makes no call there either.
    let (_, after) = run_counting(c, held, &|| calls.made());
    assert_eq!(after, 0, "no file system call when the CREATE runs again");
    let mut answers = c.pump();
    assert_eq!(answers.len(), 1, "one answer");
    let later = std::mem::take(&mut c.held_lookups);
    c.hold_lookups = false;
    HeldCreate {
        jobs,
        calls_before,
        answer: answers.remove(0),
        later,
    }
}

/// The CreateAction, EndOfFile and FileAttributes of a CREATE's answer.
fn created(r: &Resp) -> (u32, u64, u32) {
    let cr = ringshare_wire::create::CreateResponse::decode(&r.msg).expect("create response");
    (cr.create_action.0, cr.end_of_file, cr.file_attributes.0)
}

/// Step 5 of issue 33: on a share whose calls may wait on a network, a CREATE of an existing
/// file makes its file system calls (the name's lookup, the open, the stat, the access check)
/// in one file system job: none is made before it ran, and the answer comes after it, with
/// what the job found (FILE_OPENED and the file's size).
#[test]
fn a_create_of_an_existing_file_on_a_share_that_may_wait_on_a_network_opens_it_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let data = b"opened in a job";
    c.put_file("existing", data);
    let h = create_with_jobs_held(&mut c, &calls, "EXISTING", (D::OPEN, SHARE_ALL, 0));
    assert_eq!(
        (h.jobs, h.calls_before),
        (1, 0),
        "one job, no call before it"
    );
    assert_eq!(h.answer.status(), NtStatus::SUCCESS);
    let (action, eof, _) = created(&h.answer);
    assert_eq!(
        (action, eof),
        (1, data.len() as u64),
        "FILE_OPENED, its size"
    );
    assert!(h.later.is_empty(), "no other job");
}

/// Step 5: a CREATE that makes a new file makes it in its job, with what a new file is given
/// (its attributes here); FILE_CREATED is answered after it, and the file is there.
#[test]
fn a_create_of_a_new_file_on_a_share_that_may_wait_on_a_network_makes_it_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let tree = c.tree_id;
    let was = calls.made();
    c.hold_lookups = true;
    // FILE_ATTRIBUTE_HIDDEN (2) asked for the new file.
    let m = c.create_msg_ctx(tree, "new", 0x0012_019f, SHARE_ALL, D::CREATE, 0, 2, vec![]);
    let (_, early) = send_signed(&mut c, m);
    assert!(early.is_empty(), "nothing answered before its job ran");
    assert_eq!(calls.made(), was, "no file system call before the job ran");
    assert!(
        c.mem
            .stat(
                &ringshare_vfs::server_who(),
                &RelPath::from_components(["new"]).unwrap()
            )
            .is_err(),
        "not made before the job ran"
    );
    let held = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "one job");
    c.run_jobs(held);
    let answers = c.pump();
    c.hold_lookups = false;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let (action, eof, attrs) = created(&answers[0]);
    assert_eq!((action, eof), (2, 0), "FILE_CREATED, empty");
    assert_ne!(attrs & 2, 0, "HIDDEN, given in the job");
    assert!(c
        .mem
        .stat(
            &ringshare_vfs::server_who(),
            &RelPath::from_components(["new"]).unwrap()
        )
        .is_ok());
}

/// Step 5: a CREATE refused by the share modes after its job (another open shares nothing) is
/// answered SHARING_VIOLATION, and the file the job opened is let go in a job of its own, not
/// on the I/O thread (on FUSE its last close is a FLUSH the closing thread waits for).
#[test]
fn a_create_refused_by_share_modes_after_its_job_lets_its_file_go_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let tree = c.tree_id;
    c.create_on(tree, "held", 0x0012_019f, 0, D::CREATE, 0)
        .expect("an open that shares nothing");
    let dropped = calls.dropped.load(Ordering::SeqCst);
    let h = create_with_jobs_held(&mut c, &calls, "held", (D::OPEN, SHARE_ALL, 0));
    assert_eq!(
        (h.jobs, h.calls_before),
        (1, 0),
        "one job, no call before it"
    );
    assert_eq!(h.answer.status(), NtStatus::SHARING_VIOLATION);
    assert_eq!(
        calls.dropped.load(Ordering::SeqCst),
        dropped,
        "the file the job opened is not let go on the I/O thread"
    );
    assert_eq!(h.later.len(), 1, "a job lets it go");
    c.run_jobs(h.later);
    assert_eq!(calls.dropped.load(Ordering::SeqCst), dropped + 1, "let go");
}

/// Step 5: a directory's CREATE (FILE_DIRECTORY_FILE) is made in its job too, and answered
/// after it as a directory.
#[test]
fn a_directorys_create_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    let h = create_with_jobs_held(&mut c, &calls, "dir", (D::CREATE, SHARE_ALL, 1));
    assert_eq!(
        (h.jobs, h.calls_before),
        (1, 0),
        "one job, no call before it"
    );
    assert_eq!(h.answer.status(), NtStatus::SUCCESS);
    let (action, _, attrs) = created(&h.answer);
    assert_eq!(action, 2, "FILE_CREATED");
    assert_ne!(attrs & 0x10, 0, "a directory");
    let h = create_with_jobs_held(&mut c, &calls, "dir", (D::OPEN, SHARE_ALL, 1));
    assert_eq!((h.jobs, h.calls_before), (1, 0), "opened again: one job");
    assert_eq!(created(&h.answer).0, 1, "FILE_OPENED");
}

/// On a share whose calls are made on the I/O thread a CREATE asks no job: the file is opened
/// and answered at once, as before step 5.
#[test]
fn a_create_on_a_local_share_asks_no_job() {
    let (mut c, calls) = fuse_client(false);
    let was = calls.made();
    c.hold_lookups = true;
    let f = c.create("local", 0x0012_019f, D::CREATE, 0);
    assert!(f.is_ok(), "answered at once");
    assert!(c.held_lookups.is_empty(), "no job");
    assert!(calls.made() > was, "its calls made at once");
}

/// Step 5 and the order rule: a related compound [CREATE, READ, CLOSE] on a share whose calls
/// may wait on a network runs its later members after the CREATE's job, on the open it made:
/// nothing is answered and no file system call made before the job ran; then the READ reads
/// the file and the CLOSE closes it.
#[test]
fn a_related_compound_after_a_create_whose_job_is_out_runs_on_the_open_it_made() {
    let (mut c, calls) = fuse_client(true);
    let data = b"read in the compound";
    c.put_file("compounded", data);
    let related = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };
    let tree = c.tree_id;
    let create = c.create_msg(tree, "compounded", 0x0012_019f, SHARE_ALL, D::OPEN, 0);
    let read = c.read_msg(related, 0, 64);
    let close = c.close_msg(related, 0);
    let was = calls.made();
    c.hold_lookups = true;
    let mut answers = c.compound(vec![create, read, close], true);
    assert!(
        answers.is_empty(),
        "nothing answered before the CREATE's job ran"
    );
    assert_eq!(calls.made(), was, "no file system call before it ran");
    answers.extend(c.run_held_jobs_to_the_end().0);
    let statuses: Vec<_> = answers.iter().map(|r| r.status()).collect();
    assert_eq!(statuses, [NtStatus::SUCCESS; 3], "CREATE, READ, CLOSE");
    let body = answers[1].body();
    let (off, len) = (body[2] as usize - 64, body[4] as usize);
    assert_eq!(&body[off..off + len], data, "the READ read the file");
}

/// A related compound whose CREATE overwrites an existing file (two jobs: the open, then the
/// truncation) writes and reads on the open it made once both ran, in order: the WRITE after the
/// truncation, the READ after the WRITE.
#[test]
fn a_related_compound_after_a_create_that_overwrites_writes_after_the_truncation() {
    let (mut c, calls) = fuse_client(true);
    c.put_file("overwritten", b"the old bytes, longer than the new");
    let related = FileId {
        persistent: u64::MAX,
        volatile: u64::MAX,
    };
    let tree = c.tree_id;
    let create = c.create_msg(tree, "overwritten", 0x0012_019f, SHARE_ALL, D::OVERWRITE, 0);
    let write = c.message(Command::WRITE, tree, |o| write_body(o, related, 0, b"new"));
    let read = c.read_msg(related, 0, 64);
    let close = c.close_msg(related, 0);
    c.hold_lookups = true;
    let early = c.compound(vec![create, write, read, close], true);
    assert!(early.is_empty(), "nothing answered before the jobs ran");
    let (answers, jobs) = c.run_held_jobs_to_the_end();
    assert!(
        jobs >= 2,
        "the open's and the truncation's jobs, at least: {jobs}"
    );
    assert_eq!(calls.sizes_set.load(Ordering::SeqCst), 1, "truncated once");
    let statuses: Vec<_> = answers.iter().map(|r| r.status()).collect();
    assert_eq!(
        statuses,
        [NtStatus::SUCCESS; 4],
        "CREATE, WRITE, READ, CLOSE"
    );
    let (action, _, _) = created(&answers[0]);
    assert_eq!(action, 3, "FILE_OVERWRITTEN");
    let body = answers[2].body();
    let (off, len) = (body[2] as usize - 64, body[4] as usize);
    assert_eq!(&body[off..off + len], b"new", "only what the WRITE wrote");
}

/// Step 5: a CREATE whose connection ends while its job is out does not let the file the job
/// opened go on the I/O thread when the job's answer comes: a job of its own lets it go.
#[test]
fn a_create_whose_connection_ends_while_its_job_is_out_lets_its_file_go_in_a_job() {
    let (mut c, calls) = fuse_client(true);
    c.put_file("abandoned", b"x");
    c.hold_lookups = true;
    let tree = c.tree_id;
    let m = c.create_msg(tree, "abandoned", 0x0012_019f, SHARE_ALL, D::OPEN, 0);
    let (_, early) = send_signed(&mut c, m);
    assert!(early.is_empty());
    let held = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "the CREATE's job");
    c.conn.shutdown(c.now);
    let dropped = calls.dropped.load(Ordering::SeqCst);
    c.run_jobs(held);
    c.pump();
    assert_eq!(
        calls.dropped.load(Ordering::SeqCst),
        dropped,
        "not let go where the answer came"
    );
    let later = std::mem::take(&mut c.held_lookups);
    assert_eq!(later.len(), 1, "a job lets it go");
    c.run_jobs(later);
    assert_eq!(calls.dropped.load(Ordering::SeqCst), dropped + 1, "let go");
}

/// Step 5: a CREATE that overwrites an existing file (OVERWRITE) on a share whose calls may wait
/// on a network opens it in a job and, once its open holds its place in the file's entry (a
/// refused open never changes the file), truncates it in a second job: nothing is truncated
/// before that job ran, and FILE_OVERWRITTEN with an empty file is answered after it.
#[test]
fn an_overwrite_on_a_share_that_may_wait_on_a_network_truncates_the_file_in_a_second_job() {
    let (mut c, calls) = fuse_client(true);
    c.put_file("overwritten", b"to be overwritten");
    let was = calls.made();
    c.hold_lookups = true;
    let tree = c.tree_id;
    let m = c.create_msg(tree, "overwritten", 0x0012_019f, SHARE_ALL, D::OVERWRITE, 0);
    let (_, early) = send_signed(&mut c, m);
    assert!(early.is_empty());
    assert_eq!(
        calls.made(),
        was,
        "no file system call before the first job ran"
    );
    let held = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "the open's job");
    c.run_jobs(held);
    assert!(
        c.pump().is_empty(),
        "not answered before the overwrite's job ran"
    );
    assert_eq!(
        calls.sizes_set.load(Ordering::SeqCst),
        0,
        "not truncated yet"
    );
    let held = std::mem::take(&mut c.held_lookups);
    assert_eq!(held.len(), 1, "the overwrite's job");
    c.run_jobs(held);
    let answers = c.pump();
    c.hold_lookups = false;
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let (action, eof, _) = created(&answers[0]);
    assert_eq!((action, eof), (3, 0), "FILE_OVERWRITTEN, empty");
    assert_eq!(
        calls.sizes_set.load(Ordering::SeqCst),
        1,
        "truncated by the job"
    );
}

/// The review of step 5, finding 1b: a CREATE whose tree is disconnected while its overwrite's
/// job is out is not installed under the gone tree (out of every request's reach, holding its
/// share modes until the session ends): it fails NETWORK_NAME_DELETED and its file is let go
/// in a job; the file can be opened sharing nothing afterwards.
#[test]
fn a_create_whose_tree_is_disconnected_while_its_job_is_out_holds_nothing_after() {
    let (mut c, calls) = fuse_client(true);
    c.put_file("orphan", b"to be overwritten");
    let (old_tree, new_tree) = (c.tree_id, c.tree_connect("share"));
    c.tree_id = old_tree;
    c.hold_lookups = true;
    let m = c.create_msg(old_tree, "orphan", 0x0012_019f, 0, D::OVERWRITE, 0);
    let (_, early) = send_signed(&mut c, m);
    assert!(early.is_empty());
    let held = std::mem::take(&mut c.held_lookups);
    c.run_jobs(held);
    assert!(c.pump().is_empty(), "waits for the overwrite's job");
    let overwrite = std::mem::take(&mut c.held_lookups);
    assert_eq!(overwrite.len(), 1, "the overwrite's job");
    let gone = c.call(Command::TREE_DISCONNECT, old_tree, empty_body);
    assert_eq!(gone.status(), NtStatus::SUCCESS);
    c.run_jobs(overwrite);
    let answers = c.pump();
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::NETWORK_NAME_DELETED]
    );
    let dropped = calls.dropped.load(Ordering::SeqCst);
    let later = std::mem::take(&mut c.held_lookups);
    c.hold_lookups = false;
    c.run_any(later);
    c.pump();
    assert!(
        calls.dropped.load(Ordering::SeqCst) > dropped,
        "its file let go by a job"
    );
    c.tree_id = new_tree;
    let again = c.create("orphan", 0x0012_019f, D::OPEN, 0);
    assert!(again.is_ok(), "no open left holding the file: {again:?}");
}

/// The review of step 5, finding 1a: a CREATE that waited for a break and runs again is past
/// cancelling once its existing file's overwrite is under way in a file system job: a CANCEL
/// then gets no CANCELLED (which would say the file was left alone while the job truncates it,
/// the open out of the file's entry meanwhile); the CREATE is answered with the job's outcome.
#[test]
fn a_cancel_while_a_creates_overwrite_job_is_out_does_not_say_cancelled() {
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), true));
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let mut a = Client::on(Arc::clone(&server), mem.clone(), Options::default());
    let mut b = Client::on(server, mem, Options::default());
    a.put_file("held", b"held under a batch oplock");
    let m = a.create_msg_caching("held", 0x0012_019f, SHARE_ALL, D::OPEN, 9, None);
    let (_, r) = send_signed(&mut a, m);
    let r = if r.is_empty() { a.pump() } else { r };
    let fa = ringshare_wire::create::CreateResponse::decode(&r[0].msg)
        .expect("A's create")
        .file_id;
    let m = b.create_msg_caching("held", 0x0012_019f, SHARE_ALL, D::OVERWRITE_IF, 0, None);
    let (_, mut interim) = send_signed(&mut b, m);
    if interim.is_empty() {
        interim = b.pump();
    }
    assert_eq!(
        interim[0].status(),
        NtStatus::PENDING,
        "B waits for A's break"
    );
    assert!(!a.breaks().is_empty(), "A is told to break");
    b.hold_lookups = true;
    let ack = ringshare_wire::misc::OplockBreak::Oplock {
        oplock_level: ringshare_wire::consts::OplockLevel(0),
        file_id: fa,
    };
    let tree = a.tree_id;
    a.call(Command::OPLOCK_BREAK, tree, |o| ack.encode(o));
    assert!(b.tick(0).is_empty(), "B runs again and asks its job");
    let held = std::mem::take(&mut b.held_lookups);
    assert_eq!(held.len(), 1, "the open's job");
    b.run_jobs(held);
    assert!(b.pump().is_empty(), "waits for the overwrite's job");
    let overwrite = std::mem::take(&mut b.held_lookups);
    assert_eq!(overwrite.len(), 1, "the overwrite's job");
    let early = b.cancel_async(&interim[0]);
    assert!(
        early.is_empty(),
        "no CANCELLED while the overwrite is under way: {:?}",
        early.iter().map(|r| r.status()).collect::<Vec<_>>()
    );
    b.run_jobs(overwrite);
    let answers = b.pump();
    b.hold_lookups = false;
    assert_eq!(
        answers.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SUCCESS],
        "answered with the overwrite's outcome"
    );
}

/// Two clients of one FUSE-like share; `b` holds `kept`'s OVERWRITE_IF (sharing nothing)
/// admitted, its overwrite's job out (returned, not run).
fn overwrite_job_out() -> (Client, Client, Vec<ringshare_core::LookupRequest>) {
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), true));
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let mut b = Client::on(Arc::clone(&server), mem.clone(), Options::default());
    let c = Client::on(server, mem, Options::default());
    b.put_file("kept", b"to be overwritten");
    b.hold_lookups = true;
    let tree = b.tree_id;
    let m = b.create_msg(tree, "kept", 0x0012_019f, 0, D::OVERWRITE_IF, 0);
    let (_, early) = send_signed(&mut b, m);
    assert!(early.is_empty(), "waits for its job");
    let held = std::mem::take(&mut b.held_lookups);
    b.run_jobs(held);
    assert!(b.pump().is_empty(), "waits for the overwrite's job");
    let overwrite = std::mem::take(&mut b.held_lookups);
    assert_eq!(overwrite.len(), 1, "the overwrite's job");
    (b, c, overwrite)
}

/// What `c`'s exclusive open of `kept` answers.
fn exclusive_open_of_kept(c: &mut Client) -> Vec<NtStatus> {
    let tree = c.tree_id;
    let m = c.create_msg(tree, "kept", 0x0012_019f, 0, D::OPEN, 0);
    let (_, r) = send_signed(c, m);
    let r = if r.is_empty() { c.pump() } else { r };
    r.iter().map(|r| r.status()).collect()
}

/// A client `b` of a FUSE-like share holding `a` ("first"), another `c` of the same server,
/// and `b`'s delete-on-close OPEN of `a` whose job ran but whose answer is not delivered yet
/// (what happens meanwhile is the test's): the answers, for [`delivered`].
fn job_ran_not_delivered() -> (Client, Client, Vec<(u64, ringshare_core::LookupDone)>) {
    let (mut b, _) = fuse_client(true);
    let c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    b.put_file("a", b"first");
    b.hold_lookups = true;
    let tree = b.tree_id;
    let delete_on_close = 0x1000;
    let m = b.create_msg(tree, "a", 0x0013_019f, SHARE_ALL, D::OPEN, delete_on_close);
    let (_, early) = send_signed(&mut b, m);
    assert!(early.is_empty(), "waits for its job");
    let held = std::mem::take(&mut b.held_lookups);
    assert_eq!(held.len(), 1, "its job");
    let done = held.into_iter().map(|r| (r.id, r.run())).collect();
    (b, c, done)
}

/// `done` delivered to `b`, the jobs asked again (`again`: how many) run: the CREATE's FileId.
fn delivered(b: &mut Client, done: Vec<(u64, ringshare_core::LookupDone)>, again: usize) -> FileId {
    for (id, d) in done {
        b.conn.complete_lookup(b.now, id, d);
    }
    let mut answers = b.pump();
    let asked = std::mem::take(&mut b.held_lookups);
    assert_eq!(asked.len(), again, "jobs asked again");
    if answers.is_empty() {
        b.run_jobs(asked);
        answers = b.pump();
    }
    b.hold_lookups = false;
    assert_eq!(answers.len(), 1);
    ringshare_wire::create::CreateResponse::decode(&answers[0].msg)
        .expect("b's create")
        .file_id
}

/// The review of step 5, finding 1a's rest: a CREATE abandoned (a LOGOFF, its connection's
/// end) while its existing file's overwrite job is out keeps its place in the file's entry
/// until the job ended, so no other client is let in to a file the job still truncates; once
/// the job ended the file is free again.
#[test]
fn an_open_abandoned_while_its_overwrite_job_is_out_holds_the_file_until_the_job_ended() {
    for how in ["LOGOFF", "the connection's end"] {
        let (mut b, mut c, overwrite) = overwrite_job_out();
        match how {
            "LOGOFF" => {
                assert_eq!(
                    b.call(Command::LOGOFF, 0, empty_body).status(),
                    NtStatus::SUCCESS
                );
            }
            _ => b.conn.shutdown(b.now),
        }
        assert_eq!(
            exclusive_open_of_kept(&mut c),
            [NtStatus::SHARING_VIOLATION],
            "{how}: the file is still held while its overwrite is under way"
        );
        b.run_jobs(overwrite);
        b.pump();
        assert_eq!(
            exclusive_open_of_kept(&mut c),
            [NtStatus::SUCCESS],
            "{how}: free once the job ended"
        );
    }
}

/// The review of step 5, finding 1d: a CREATE whose job opened a file by a name that another
/// client then renamed away (the rename's open closed, and a new file made at the name) before
/// the CREATE joined the file's entry looks the name up again: its open is of the file now at
/// the name, so its delete on close removes that file, not another one under a name its own
/// file left.
#[test]
fn a_create_whose_name_was_renamed_away_while_its_job_was_out_opens_what_is_at_the_name() {
    let (mut b, mut c, done) = job_ran_not_delivered();
    // Meanwhile another client renames the file away and makes a new one at its name.
    let f = c.create("a", 0x0013_019f, D::OPEN, 0).expect("c opens a");
    assert_eq!(
        support::posix::rename(&mut c, f, "b", false),
        NtStatus::SUCCESS
    );
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    c.put_file("a", b"second");
    // The name looked up again, and the file it found first let go.
    let fb = delivered(&mut b, done, 2);
    assert_eq!(
        read_data(&b.read(fb, 0, 64)),
        b"second",
        "b's open is of the file now at the name"
    );
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
    let moved = c
        .create("b", 0x0012_019f, D::OPEN, 0)
        .expect("the renamed file is left alone");
    assert_eq!(read_data(&c.read(moved, 0, 64)), b"first");
    assert!(
        c.create("a", 0x0012_019f, D::OPEN, 0).is_err(),
        "a was deleted on close"
    );
}

/// Step 5 and a local program's kernel lease: a CREATE whose job's open meets the lease waits,
/// tried again every second (each try a job), and is refused SHARING_VIOLATION once it has
/// waited 70 s since it first met it, as on a local share. (Without the wait's start kept while
/// each try's job was out, the wait began again at every try and never ended.)
#[test]
fn a_create_whose_job_meets_a_local_kernel_lease_for_seventy_seconds_is_a_sharing_violation() {
    let (mut c, _) = fuse_client(true);
    c.put_file("leased", b"x");
    let leased = RelPath::from_components(["leased"]).ok();
    c.mem.inject_fault(
        ringshare_vfs::memory::FaultOp::Open,
        leased,
        ringshare_vfs::FsError::LeaseHeld,
        1_000,
    );
    let tree = c.tree_id;
    let m = c.create_msg(tree, "leased", 0x0012_019f, SHARE_ALL, D::OPEN_IF, 0);
    let (_, first) = send_signed(&mut c, m);
    assert_eq!(
        first.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::PENDING],
        "it waits"
    );
    for _ in 0..69 {
        assert!(c.tick(1_000).is_empty(), "still waiting");
    }
    let done = c.tick(1_000);
    assert_eq!(
        done.iter().map(|r| r.status()).collect::<Vec<_>>(),
        [NtStatus::SHARING_VIOLATION]
    );
}

/// The review of session 46, finding 4: an open abandoned while its overwrite job is out is left in the file's entry by
/// the job when it ends, and also when the job is dropped without running (the driver drops a
/// job it cannot act as the user for: crates/ringshare/src/driver/lookups.rs); before, the file
/// stayed held (SHARING_VIOLATION) for good. Here the job is dropped as the driver drops it.
#[test]
fn an_open_abandoned_while_its_overwrite_job_is_out_leaves_the_file_when_the_job_is_dropped_unrun()
{
    let (mut b, mut c, overwrite) = overwrite_job_out();
    b.conn.shutdown(b.now);
    b.pump();
    // The driver could not act as the job's user: it answers without running the calls, and
    // the job (its closure) is dropped.
    drop(overwrite);
    assert_eq!(
        exclusive_open_of_kept(&mut c),
        [NtStatus::SUCCESS],
        "nothing holds the file any more"
    );
}

/// The review of session 46, finding 3: `create::offload::stale` counted renames only. A file deleted (its last open closed
/// with delete on close) and a new file made at its name between a CREATE's job and its
/// admission: the CREATE's open was of the deleted file, joined a new entry under the name, and
/// its own delete on close then removed the new file. Removals are counted too now: it looks
/// the name up again and opens the new file.
#[test]
fn a_create_whose_file_was_deleted_and_made_again_while_its_job_was_out_opens_the_new_file() {
    let (mut b, mut c, done) = job_ran_not_delivered();
    // Meanwhile another client deletes the file and makes a new one at its name.
    let delete_on_close = 0x1000;
    let f = c
        .create("a", 0x0013_019f, D::OPEN, delete_on_close)
        .expect("c opens a");
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    assert!(c.create("a", 0x0012_019f, D::OPEN, 0).is_err(), "a deleted");
    c.put_file("a", b"second");
    let fb = delivered(&mut b, done, 2);
    assert_eq!(
        read_data(&b.read(fb, 0, 64)),
        b"second",
        "b's open is of the file now at the name"
    );
    assert_eq!(b.close(fb).status(), NtStatus::SUCCESS);
}

/// The review of session 46, finding 5: `stale` compared one node-wide count, so a rename of
/// any unrelated file through the node while a CREATE's job was out made the CREATE let its
/// open go and run its job again (Office saves are renames). The counts are by path now.
#[test]
fn a_rename_of_another_file_does_not_make_a_create_look_its_name_up_again() {
    let (mut b, _) = fuse_client(true);
    let mut c = Client::on(Arc::clone(&b.server), b.mem.clone(), Options::default());
    b.put_file("a", b"first");
    c.put_file("x", b"other");
    b.hold_lookups = true;
    let tree = b.tree_id;
    let m = b.create_msg(tree, "a", 0x0012_019f, SHARE_ALL, D::OPEN, 0);
    let (_, early) = send_signed(&mut b, m);
    assert!(early.is_empty());
    let held = std::mem::take(&mut b.held_lookups);
    let done: Vec<_> = held.into_iter().map(|r| (r.id, r.run())).collect();
    let f = c.create("x", 0x0013_019f, D::OPEN, 0).expect("c opens x");
    assert_eq!(
        support::posix::rename(&mut c, f, "y", false),
        NtStatus::SUCCESS
    );
    for (id, d) in done {
        b.conn.complete_lookup(b.now, id, d);
    }
    let answers = b.pump();
    let again = std::mem::take(&mut b.held_lookups);
    b.hold_lookups = false;
    assert!(
        answers.len() == 1 && again.is_empty(),
        "a rename of another file does not make the CREATE look its name up again: {} answers, \
         {} lookups asked after",
        answers.len(),
        again.len()
    );
}

/// Two clients of one FUSE-like share holding "leased"; `b`'s OVERWRITE_IF of it with lease
/// key 1 (RWH) admitted, its overwrite's job out (returned, not run); what the share was asked.
fn leased_overwrite_out() -> (
    Client,
    Client,
    Vec<ringshare_core::LookupRequest>,
    Arc<Calls>,
) {
    use support::caching::{H, LEASE, R, W};
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), true));
    let calls = Arc::clone(&share.1);
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let mut b = Client::on(Arc::clone(&server), mem.clone(), Options::default());
    let c = Client::on(server, mem, Options::default());
    b.put_file("leased", b"to be overwritten");
    b.hold_lookups = true;
    let lease = Some(lease_v2(1, R | W | H));
    let m = b.create_msg_caching(
        "leased",
        0x0012_019f,
        SHARE_ALL,
        D::OVERWRITE_IF,
        LEASE,
        lease,
    );
    let (_, early) = send_signed(&mut b, m);
    assert!(early.is_empty(), "waits for its job");
    let held = std::mem::take(&mut b.held_lookups);
    b.run_jobs(held);
    assert!(b.pump().is_empty(), "waits for the overwrite's job");
    let overwrite = std::mem::take(&mut b.held_lookups);
    assert_eq!(overwrite.len(), 1, "the overwrite's job");
    (b, c, overwrite, calls)
}

/// `c`'s open of `name` for reading with an R lease of key `key`, which waits (PENDING) for a
/// break of another client's lease.
fn open_waiting_for_a_break(c: &mut Client, name: &str, key: u8) {
    use support::caching::{LEASE, R, READ};
    let lease = Some(lease_v2(key, R));
    let m = c.create_msg_caching(name, READ, SHARE_ALL, D::OPEN, LEASE, lease);
    let (_, first) = send_signed(c, m);
    let waits: Vec<NtStatus> = first.iter().map(|r| r.status()).collect();
    assert_eq!(
        waits,
        [NtStatus::PENDING],
        "waits for the other client's break"
    );
}

/// Issue 33, 1g: a lease granted at admission to a CREATE whose overwrite's job is still out is
/// not broken in a notification before the CREATE's own answer: its client does not know the
/// lease yet and ignores a break for an unknown lease key ([MS-SMB2] 3.2.5.19.2), so it would
/// never acknowledge it and the other client's open would wait for the break's timeout. The
/// break goes out after the answer, and acknowledged it lets the other open in.
#[test]
fn a_break_of_a_lease_whose_create_is_not_answered_yet_goes_out_after_the_answer() {
    use support::caching::{H, R, W};
    let (mut b, mut c, overwrite, _) = leased_overwrite_out();
    open_waiting_for_a_break(&mut c, "leased", 2);
    assert!(
        b.pump().is_empty(),
        "no break for a lease whose CREATE is not answered yet"
    );

    b.run_jobs(overwrite);
    let sent = b.pump();
    b.hold_lookups = false;
    let commands: Vec<Command> = sent.iter().map(|r| r.hdr.command).collect();
    assert_eq!(
        commands,
        [Command::CREATE, Command::OPLOCK_BREAK],
        "the answer first, then the break"
    );
    assert_eq!(granted_lease(&sent[0]).state.0, R | W | H);
    assert_eq!(b.ack_lease(1, R | H).status(), NtStatus::SUCCESS);
    let opened: Vec<NtStatus> = c.pump().iter().map(|r| r.status()).collect();
    assert_eq!(
        opened,
        [NtStatus::SUCCESS],
        "c's open once the break is acknowledged"
    );
}

/// 1g's hold is of the lease its unanswered CREATE asks for only: a break of another lease of
/// the same client goes out at once while that CREATE's overwrite job is out.
#[test]
fn a_break_of_another_lease_goes_out_while_a_create_is_not_answered_yet() {
    use support::caching::{H, LEASE, R, READ, W};
    let (mut b, mut c, overwrite, _) = leased_overwrite_out();
    b.hold_lookups = false;
    b.put_file("other", b"other");
    let m = b.create_msg_caching(
        "other",
        READ,
        SHARE_ALL,
        D::OPEN,
        LEASE,
        Some(lease_v2(3, R | W | H)),
    );
    let (_, r) = send_signed(&mut b, m);
    let r = if r.is_empty() { b.pump() } else { r };
    assert_eq!(
        granted_lease(&r[0]).state.0,
        R | W | H,
        "b holds a lease of other"
    );
    open_waiting_for_a_break(&mut c, "other", 4);
    let breaks = b.breaks();
    assert_eq!(breaks.len(), 1, "the break of other's lease, at once");
    let ringshare_wire::misc::OplockBreak::LeaseBreakNotification(n) = &breaks[0] else {
        panic!("a lease break");
    };
    assert_eq!(n.lease_key, [3; 16]);
    b.hold_lookups = true;
    b.run_jobs(overwrite);
    let answers: Vec<Command> = b.pump().iter().map(|r| r.hdr.command).collect();
    assert_eq!(
        answers,
        [Command::CREATE],
        "leased's answer, no other break"
    );
}

/// An overwrite whose job fails (the back end refuses the truncation) answers the CREATE with
/// the failure, before anything else, and takes its open out of the file's entry: an open that
/// waited for the break of the lease it was granted at admission goes on with no
/// acknowledgment, the file keeps its bytes, and its node is let go in a job.
#[test]
fn an_overwrite_whose_job_fails_answers_the_failure_and_lets_the_file_go() {
    let (mut b, mut c, overwrite, calls) = leased_overwrite_out();
    open_waiting_for_a_break(&mut c, "leased", 2);
    assert!(
        b.pump().is_empty(),
        "the break held for the CREATE's answer"
    );
    calls.refuse.store(true, Ordering::SeqCst);
    b.run_jobs(overwrite);
    let sent = b.pump();
    calls.refuse.store(false, Ordering::SeqCst);
    assert_eq!(
        sent.len(),
        1,
        "no break of a lease b never got (review of session 47, 5)"
    );
    assert_eq!(sent[0].hdr.command, Command::CREATE, "answered first");
    assert_eq!(
        sent[0].status(),
        NtStatus::ACCESS_DENIED,
        "the truncation's failure"
    );
    let let_go = std::mem::take(&mut b.held_lookups);
    assert_eq!(let_go.len(), 1, "its node let go in a job");
    let dropped = calls.dropped.load(Ordering::SeqCst);
    b.run_jobs(let_go);
    assert!(
        calls.dropped.load(Ordering::SeqCst) > dropped,
        "let go by the job"
    );
    b.hold_lookups = false;
    let opened = c.pump();
    let statuses: Vec<NtStatus> = opened.iter().map(|r| r.status()).collect();
    assert_eq!(
        statuses,
        [NtStatus::SUCCESS],
        "c's open, with no acknowledgment"
    );
    let (_, eof, _) = created(&opened[0]);
    assert_eq!(eof, 17, "not truncated");
}

/// Clients `b` and `c` of one FUSE-like share; `b` holds an answered open of "x" (oplock
/// `level`, or lease key 1 RWH for a lease) and has a second CREATE out (of `second`, asking
/// oplock `second_level`, or lease `second_key`), its first job held (not run).
fn answered_then_second_out(
    level: u8,
    (second, second_level, second_key): (&str, u8, Option<u8>),
) -> (Client, Client, Vec<ringshare_core::LookupRequest>) {
    use support::caching::{H, LEASE, R, READ, W};
    let mem = MemShare::new();
    let share = Arc::new(FuseShare::new(mem.clone(), true));
    let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
    let mut b = Client::on(Arc::clone(&server), mem.clone(), Options::default());
    let c = Client::on(server, mem, Options::default());
    b.put_file("x", b"x bytes");
    b.put_file("y", b"y bytes");
    let lease = (level == LEASE).then(|| lease_v2(1, R | W | H));
    let m = b.create_msg_caching("x", READ, SHARE_ALL, D::OPEN, level, lease);
    let (_, r) = send_signed(&mut b, m);
    let r = if r.is_empty() { b.pump() } else { r };
    assert_eq!(r[0].status(), NtStatus::SUCCESS, "b's open of x");
    b.hold_lookups = true;
    let lease = second_key.map(|k| lease_v2(k, R | W | H));
    let m = b.create_msg_caching(second, READ, SHARE_ALL, D::OPEN, second_level, lease);
    let (_, early) = send_signed(&mut b, m);
    assert!(early.is_empty(), "b's second CREATE waits for its job");
    let held = std::mem::take(&mut b.held_lookups);
    assert!(!held.is_empty(), "its job out");
    (b, c, held)
}

/// The review of session 47, finding 2: a CREATE not yet admitted holds no break. An oplock
/// break of an open answered before goes out at once while another file's CREATE asking an
/// oplock waits for its job (before, every oplock break of the session was held behind it, up
/// to the break's timeout on a stalled file system).
#[test]
fn an_oplock_break_of_an_answered_open_is_not_held_by_another_files_create() {
    const BATCH: u8 = 9;
    let (mut b, mut c, held) = answered_then_second_out(BATCH, ("y", BATCH, None));
    let m = c.create_msg_caching("x", support::caching::READ, SHARE_ALL, D::OPEN, 0, None);
    let (_, first) = send_signed(&mut c, m);
    assert_eq!(
        first[0].status(),
        NtStatus::PENDING,
        "c waits for b's break"
    );
    assert_eq!(b.breaks().len(), 1, "x's break at once: b knows its FileId");
    b.run_jobs(held);
}

/// Finding 2 for leases: a second open of "x" with the lease key b already holds, waiting for
/// its job before admission, does not hold the break of that lease.
#[test]
fn a_lease_break_of_a_known_lease_is_not_held_by_a_second_open_with_its_key() {
    use support::caching::LEASE;
    let (mut b, mut c, held) = answered_then_second_out(LEASE, ("x", LEASE, Some(1)));
    open_waiting_for_a_break(&mut c, "x", 2);
    assert_eq!(b.breaks().len(), 1, "lease 1's break at once: b knows it");
    b.run_jobs(held);
}
