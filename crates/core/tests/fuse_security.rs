//! Issue 33, step 4 (docs/cluster-internals.md, "File system calls off the I/O thread"): on a
//! share whose calls may wait on a network, a QUERY_INFO of the security descriptor reads the
//! file's attributes and descriptor (the stored one, or one made from its POSIX ACL) in a file
//! system job of the open's order, away from the I/O thread; with an id source, the source is
//! asked after the job, and the descriptor read again in a second job. On a local share
//! nothing changes: no job, the calls made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_core::sidcache::Xid;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::security::{SecurityDescriptor, Sid};
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

const INFO_SECURITY: u8 = 3;
const OWNER_GROUP_DACL: u32 = 1 | 2 | 4;
const READ_CONTROL: u32 = 0x0002_0000;
const FILE_READ_DATA: u32 = 0x0000_0001;

/// What a QUERY_INFO security held on its jobs came to: the lookups it asked in turn ("job",
/// "ids"), the file system calls made on the I/O thread (before, between and after them), and
/// its answers.
struct Held {
    kinds: Vec<&'static str>,
    on_io_thread: usize,
    answers: Vec<Resp>,
}

fn query_security_held(c: &mut Client, calls: &Calls, f: FileId) -> Held {
    c.hold_lookups = true;
    let mut m = c.query_info_additional_msg(f, (INFO_SECURITY, 0, OWNER_GROUP_DACL), 65536);
    c.sign(&mut m);
    let mut was = calls.all();
    let mut answers = c.send_frame(m);
    let (mut kinds, mut on_io_thread) = (Vec::new(), 0);
    while !c.held_lookups.is_empty() {
        assert!(kinds.len() < 6, "asked without end: {kinds:?}");
        on_io_thread += calls.all() - was;
        let held = std::mem::take(&mut c.held_lookups);
        for r in &held {
            kinds.push(match &r.ask {
                ringshare_core::Lookup::Fs(_) => "job",
                ringshare_core::Lookup::Ids { .. } => "ids",
                _ => "other",
            });
        }
        // Handed back, each answer runs the request again at once, on the I/O thread.
        on_io_thread += run_counting(c, held, &|| calls.all()).1;
        was = calls.all();
        answers.extend(c.pump());
    }
    on_io_thread += calls.all() - was;
    c.hold_lookups = false;
    Held {
        kinds,
        on_io_thread,
        answers,
    }
}

/// The descriptor a file `name` holding `x` shows a client that opened it for READ_CONTROL, on a
/// share whose calls may wait on a network (`remote`) or not, its reads failing when
/// `fail_reads`: the query's lookups and calls made on the I/O thread, and its answer.
fn descriptor_of_a_new_file(remote: bool, fail_reads: bool) -> Held {
    let (mut c, calls) = fuse_client(remote);
    c.put_file("shown.txt", b"x");
    let f = c
        .create("shown.txt", READ_CONTROL | FILE_READ_DATA, D::OPEN, 0)
        .expect("open");
    calls.fail_reads.store(fail_reads, Ordering::SeqCst);
    query_security_held(&mut c, &calls, f)
}

#[test]
fn a_query_of_the_security_descriptor_on_a_share_that_may_wait_on_a_network_reads_it_in_a_job() {
    let remote = descriptor_of_a_new_file(true, false);
    assert_eq!(remote.kinds, ["job"], "one job");
    assert_eq!(
        remote.on_io_thread, 0,
        "no file system call on the I/O thread"
    );
    assert_eq!(remote.answers.len(), 1, "answered once");
    assert_eq!(remote.answers[0].status(), NtStatus::SUCCESS);
    let local = descriptor_of_a_new_file(false, false);
    assert_eq!(local.answers[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        remote.answers[0].body(),
        local.answers[0].body(),
        "the same descriptor as a local share's"
    );
    let body = ringshare_wire::info::QueryInfoResponse::decode(&remote.answers[0].msg).unwrap();
    let sd = SecurityDescriptor::decode(body.buffer).expect("a descriptor");
    assert!(
        sd.owner.is_some() && sd.dacl.is_some(),
        "owner and DACL shown"
    );
}

#[test]
fn a_security_descriptor_read_the_back_end_fails_is_answered_with_its_status() {
    let remote = descriptor_of_a_new_file(true, true);
    assert_eq!(remote.kinds, ["job"]);
    assert_eq!(
        remote.on_io_thread, 0,
        "no file system call on the I/O thread"
    );
    assert_eq!(remote.answers.len(), 1);
    assert_eq!(remote.answers[0].status(), NtStatus::IO_DEVICE_ERROR);
    let local = descriptor_of_a_new_file(false, true);
    assert_eq!(
        local.answers[0].status(),
        NtStatus::IO_DEVICE_ERROR,
        "as on a local share"
    );
}

#[test]
fn a_query_of_the_security_descriptor_on_a_local_share_asks_no_job() {
    let local = descriptor_of_a_new_file(false, false);
    assert!(local.kinds.is_empty(), "no job");
    assert!(local.on_io_thread > 0, "the reads made at once");
    assert_eq!(local.answers.len(), 1);
}

/// An id source as winbind answers with idmap `ad` for the Engineers' group; it counts what it
/// is asked.
#[derive(Default)]
struct TestIds {
    asked: std::sync::Mutex<Vec<String>>,
    /// It fails every question (winbind not answering).
    fails: std::sync::atomic::AtomicBool,
}

const ENGINEERS: &str = "S-1-5-21-1-2-3-1106";
const ENGINEERS_GID: u32 = 200_106;

impl ringshare_core::sidcache::IdSource for TestIds {
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        let mut asked = self.asked.lock().unwrap();
        asked.extend(sids.iter().map(|s| s.to_string()));
        Ok(sids.iter().map(|_| None).collect())
    }

    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        let mut asked = self.asked.lock().unwrap();
        asked.extend(ids.iter().map(|x| format!("{x:?}")));
        if self.fails.load(Ordering::SeqCst) {
            return Err("winbind is not answering".into());
        }
        Ok(ids
            .iter()
            .map(|x| (*x == Xid::Gid(ENGINEERS_GID)).then(|| ENGINEERS.parse().unwrap()))
            .collect())
    }
}

/// With an id source, a descriptor naming a gid of the domain's idmap range: the descriptor is
/// read in a job, the source asked about the gid, the descriptor read again in a second job
/// (its group now the domain SID), and the source not asked again; no file system call on the
/// I/O thread between them.
/// A client of an offloaded share on a domain member whose id source is `ids`, and the open
/// (READ_CONTROL) of a file whose group is the Engineers' gid.
fn member_with_engineers_file(ids: &Arc<TestIds>) -> (Client, Arc<Calls>, FileId) {
    let source = Arc::clone(ids);
    let (mut c, calls) = fuse_client_with(true, move |share| {
        let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
        server
            .logons
            .set_domain(Some(ringshare_core::domain::DomainMember {
                workgroup: "RSAD".into(),
                separator: '\\',
                default_domain: false,
                rid_ranges: Vec::new(),
                id_ranges: vec![(200_000, 2_999_999)],
            }));
        server.logons.set_id_source(Some(source));
        server
    });
    c.put_file("team.txt", b"x");
    c.server_node(&["team.txt"])
        .chown(None, Some(ENGINEERS_GID), true)
        .unwrap();
    let f = c.create("team.txt", READ_CONTROL, D::OPEN, 0).unwrap();
    (c, calls, f)
}

#[test]
fn a_query_of_a_descriptor_naming_a_domain_gid_asks_the_id_source_between_two_jobs() {
    let ids = Arc::new(TestIds::default());
    let (mut c, calls, f) = member_with_engineers_file(&ids);
    let held = query_security_held(&mut c, &calls, f);
    assert_eq!(held.kinds, ["job", "ids", "job"], "read, ask, read again");
    assert_eq!(
        held.on_io_thread, 0,
        "no file system call on the I/O thread"
    );
    assert_eq!(held.answers.len(), 1);
    assert_eq!(held.answers[0].status(), NtStatus::SUCCESS);
    let body = ringshare_wire::info::QueryInfoResponse::decode(&held.answers[0].msg).unwrap();
    let sd = SecurityDescriptor::decode(body.buffer).unwrap();
    assert_eq!(
        sd.group.map(|s| s.to_string()),
        Some(ENGINEERS.to_string()),
        "the group as the id source named it"
    );
    let asked = std::mem::take(&mut *ids.asked.lock().unwrap());
    assert_eq!(
        asked,
        [format!("{:?}", Xid::Gid(ENGINEERS_GID))],
        "asked once"
    );
    // Known now: one job, no question.
    let held = query_security_held(&mut c, &calls, f);
    assert_eq!(held.kinds, ["job"]);
    assert!(ids.asked.lock().unwrap().is_empty());
}

/// An id source that fails: the descriptor read again after its answer shows the gid as a Unix
/// SID, as on a local share, and the source is asked once (not again after the second job).
#[test]
fn a_query_whose_id_source_fails_is_answered_after_the_second_job_without_asking_again() {
    let ids = Arc::new(TestIds::default());
    ids.fails.store(true, Ordering::SeqCst);
    let (mut c, calls, f) = member_with_engineers_file(&ids);
    let held = query_security_held(&mut c, &calls, f);
    assert_eq!(held.kinds, ["job", "ids", "job"], "read, ask, read again");
    assert_eq!(
        held.on_io_thread, 0,
        "no file system call on the I/O thread"
    );
    assert_eq!(held.answers.len(), 1);
    assert_eq!(held.answers[0].status(), NtStatus::SUCCESS);
    let body = ringshare_wire::info::QueryInfoResponse::decode(&held.answers[0].msg).unwrap();
    let sd = SecurityDescriptor::decode(body.buffer).unwrap();
    assert_eq!(
        sd.group.map(|s| s.to_string()),
        Some(format!("S-1-22-2-{ENGINEERS_GID}")),
        "the gid as a Unix SID"
    );
    assert_eq!(ids.asked.lock().unwrap().len(), 1, "asked once");
}
