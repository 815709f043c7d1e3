//! Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread"): on a share
//! whose calls may wait on a network, a durable reconnect (DH2C) and a replayed CREATE (DH2Q
//! with REPLAY_OPERATION) read their open's file's attributes in a file system job, the CREATE
//! parked meanwhile: on CephFS a dead node's capabilities can hold that getattr until the node
//! is evicted, and every other client of the I/O thread would wait with it. The answers are
//! those of a local share, where the stat is made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::{CreateContext, CreateResponse};
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

const BATCH: u8 = 9;
const READ_WRITE: u32 = 0x0012_019f;
const SHARE_ALL: u32 = 7;
const REPLAY_OPERATION: u32 = 0x2000_0000;
const PERSISTENT: u32 = 0x2;
const GUID: [u8; 16] = [0x33; 16];
const STAT_JOB: &str = "the attributes of a reconnected or replayed open";

fn dh2q(flags: u32) -> Vec<CreateContext<'static>> {
    dh2q_with(GUID, flags)
}

fn dh2c(f: FileId) -> Vec<CreateContext<'static>> {
    dh2c_with(f, GUID)
}

/// What a held lookup is, in the words of its job.
fn what(r: &ringshare_core::LookupRequest) -> &'static str {
    match &r.ask {
        ringshare_core::Lookup::Fs(j) => j.what,
        _ => "not a file system job",
    }
}

/// A CREATE of `name` with `contexts` (REPLAY_OPERATION when `replay`), sent and run to its
/// answer, the jobs it asks run as the pool would.
fn create(c: &mut Client, name: &str, contexts: Vec<CreateContext<'static>>, replay: bool) -> Resp {
    let m = create_msg(c, name, contexts, replay);
    let (_, r) = send_signed(c, m);
    let mut r = if r.is_empty() { c.pump() } else { r };
    r.remove(0)
}

fn create_msg(
    c: &mut Client,
    name: &str,
    contexts: Vec<CreateContext<'static>>,
    replay: bool,
) -> Vec<u8> {
    let mut m = c.create_msg_caching_ctx(name, READ_WRITE, SHARE_ALL, D::OPEN_IF, BATCH, contexts);
    if replay {
        let flags = u32::from_le_bytes(m[16..20].try_into().unwrap()) | REPLAY_OPERATION;
        m[16..20].copy_from_slice(&flags.to_le_bytes());
    }
    m
}

/// A durable open of file "f" holding `data` (persistent when `persistent`), left when its
/// connection goes; the server, the share and the open's FileId.
fn parked_open(c: &mut Client, data: &[u8], persistent: bool) -> FileId {
    let flags = if persistent { PERSISTENT } else { 0 };
    let r = create(c, "f", dh2q(flags), false);
    assert_eq!(r.status(), NtStatus::SUCCESS, "the durable open");
    let f = CreateResponse::decode(&r.msg).unwrap().file_id;
    assert_eq!(c.write(f, 0, data).status(), NtStatus::SUCCESS);
    c.conn.shutdown(c.now);
    c.pump();
    f
}

/// Another connection of `c`'s server, its jobs held.
fn another(c: &Client) -> Client {
    let mut b = Client::on(Arc::clone(&c.server), c.mem.clone(), Options::default());
    b.hold_lookups = true;
    b
}

/// `msg` sent with the jobs held: nothing is answered and no file's attributes are read before
/// the jobs run; the jobs held, by what they are.
fn sent_held(b: &mut Client, calls: &Calls, msg: Vec<u8>) -> Vec<&'static str> {
    calls.on_io_thread();
    let (_, early) = send_signed(b, msg);
    assert!(early.is_empty(), "answered before its job: {early:?}");
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new(), "no call here");
    b.held_lookups.iter().map(what).collect()
}

#[test]
fn a_durable_reconnect_is_answered_once_a_job_has_read_its_files_attributes() {
    let (mut a, calls) = fuse_client(true);
    let f = parked_open(&mut a, b"hello", false);
    let mut b = another(&a);
    let m = create_msg(&mut b, "f", dh2c(f), false);
    assert_eq!(sent_held(&mut b, &calls, m), [STAT_JOB]);
    let (answers, _) = b.run_held_jobs_to_the_end();
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&answers[0].msg).unwrap();
    assert_eq!(cr.file_id, f, "the open it had");
    assert_eq!(cr.end_of_file, 5, "the file's size, read in the job");
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());
    let r = b.read(f, 0, 5);
    assert_eq!(r.status(), NtStatus::SUCCESS, "the reconnected open reads");
}

#[test]
fn a_reconnect_whose_connection_goes_while_its_attributes_are_read_leaves_the_open_for_the_next() {
    let (mut a, calls) = fuse_client(true);
    let f = parked_open(&mut a, b"kept data", false);
    let mut b = another(&a);
    let m = create_msg(&mut b, "f", dh2c(f), false);
    assert_eq!(sent_held(&mut b, &calls, m), [STAT_JOB]);
    let held = std::mem::take(&mut b.held_lookups);
    b.conn.shutdown(b.now);
    b.pump();
    b.run_any(held);
    assert!(b.pump().is_empty(), "nobody to answer");
    let mut c = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    let r = create(&mut c, "f", dh2c(f), false);
    assert_eq!(
        r.status(),
        NtStatus::SUCCESS,
        "parked again, taken back by the next"
    );
    let r = c.read(f, 0, 9);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&r), b"kept data");
}

#[test]
fn a_reconnect_whose_files_attributes_cannot_be_read_fails_and_its_open_is_closed() {
    let (mut a, calls) = fuse_client(true);
    let f = parked_open(&mut a, b"x", false);
    let mut b = another(&a);
    calls.fail_stats.store(true, Ordering::SeqCst);
    let m = create_msg(&mut b, "f", dh2c(f), false);
    assert_eq!(sent_held(&mut b, &calls, m), [STAT_JOB]);
    let (answers, _) = b.run_held_jobs_to_the_end();
    assert_eq!(answers.len(), 1);
    assert_ne!(answers[0].status(), NtStatus::SUCCESS, "the job's failure");
    calls.fail_stats.store(false, Ordering::SeqCst);
    let r = create(&mut b, "f", dh2c(f), false);
    assert_eq!(
        r.status(),
        NtStatus::OBJECT_NAME_NOT_FOUND,
        "the open closed: nothing to reconnect"
    );
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());
}

#[test]
fn a_replayed_create_is_answered_from_its_open_once_a_job_has_read_its_attributes() {
    let (mut a, calls) = fuse_client(true);
    a.put_file("f", b"four");
    let r = create(&mut a, "f", dh2q(0), false);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let f = CreateResponse::decode(&r.msg).unwrap().file_id;
    // (A WRITE would end the open's eligibility for replay: [MS-SMB2] 3.3.5.2.10.)
    a.hold_lookups = true;
    let m = create_msg(&mut a, "f", dh2q(0), true);
    assert_eq!(sent_held(&mut a, &calls, m), [STAT_JOB]);
    let (answers, _) = a.run_held_jobs_to_the_end();
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&answers[0].msg).unwrap();
    assert_eq!((cr.file_id, cr.end_of_file), (f, 4), "the same open");
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());
}

#[test]
fn a_replay_of_a_parked_persistent_opens_create_brings_it_back_once_its_attributes_are_read() {
    let (mut a, calls) = fuse_client_with(true, |share| {
        let mut cfg = config_on(share, ringshare_core::SigningPolicy::IfRequired);
        Arc::get_mut(&mut cfg.shares[0])
            .unwrap()
            .continuous_availability = true;
        server_from(cfg)
    });
    let f = parked_open(&mut a, b"persist", true);
    let mut b = another(&a);
    let m = create_msg(&mut b, "f", dh2q(PERSISTENT), true);
    assert_eq!(
        sent_held(&mut b, &calls, m),
        [STAT_JOB],
        "the parked open's attributes, before it joins"
    );
    let (answers, jobs) = b.run_held_jobs_to_the_end();
    assert_eq!(jobs, 2, "then the replay's own");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&answers[0].msg).unwrap();
    assert_eq!(
        (cr.file_id, cr.end_of_file),
        (f, 7),
        "the parked open, back"
    );
    assert_eq!(calls.on_io_thread(), Vec::<&str>::new());
    let r = b.read(f, 0, 7);
    assert_eq!(read_data(&r), b"persist");
}

/// Review of session 50: a LOGOFF while a reconnect's job reads its open's attributes. On a
/// local share the reconnect is answered first and the LOGOFF then parks the open again
/// (durable opens outlive a LOGOFF, as on Samba: smbtorture smb2.durable-open.reopen4); a
/// reconnect parked on its takeover keeps it so too (cluster_takeover
/// a_reconnect_parked_across_a_logoff_leaves_the_open_for_the_next). Here the open must not be
/// closed either: its client reconnects it on its next session.
#[test]
fn a_logoff_while_a_reconnects_attributes_are_read_leaves_the_open_for_the_next() {
    let (mut a, calls) = fuse_client(true);
    let f = parked_open(&mut a, b"kept data", false);
    let mut b = another(&a);
    let m = create_msg(&mut b, "f", dh2c(f), false);
    assert_eq!(sent_held(&mut b, &calls, m), [STAT_JOB]);
    let logoff = b.call(ringshare_wire::consts::Command::LOGOFF, 0, empty_body);
    assert_eq!(logoff.status(), NtStatus::SUCCESS);
    let (answers, _) = b.run_held_jobs_to_the_end();
    assert!(
        answers.iter().all(|r| r.status() != NtStatus::SUCCESS),
        "no open for an ended session"
    );
    assert_eq!(a.server.parked_durables(), 1, "parked again, not closed");
    let mut c = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    let r = create(&mut c, "f", dh2c(f), false);
    assert_eq!(r.status(), NtStatus::SUCCESS, "taken back by the next");
    assert_eq!(read_data(&c.read(f, 0, 9)), b"kept data");
}

/// [`a_logoff_while_a_reconnects_attributes_are_read_leaves_the_open_for_the_next`]'s
/// local twin: reconnected at once, then the LOGOFF parks it again.
#[test]
fn on_a_local_share_a_logoff_after_a_reconnect_leaves_the_open_for_the_next() {
    let (mut a, _) = fuse_client(false);
    let f = parked_open(&mut a, b"kept data", false);
    let mut b = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    assert_eq!(
        create(&mut b, "f", dh2c(f), false).status(),
        NtStatus::SUCCESS
    );
    let logoff = b.call(ringshare_wire::consts::Command::LOGOFF, 0, empty_body);
    assert_eq!(logoff.status(), NtStatus::SUCCESS);
    assert_eq!(a.server.parked_durables(), 1, "parked again, not closed");
    let mut c = Client::on(Arc::clone(&a.server), a.mem.clone(), Options::default());
    assert_eq!(
        create(&mut c, "f", dh2c(f), false).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(read_data(&c.read(f, 0, 9)), b"kept data");
}
