//! Issue 33, step 6 (docs/cluster-internals.md, "File system calls off the I/O thread"): on a
//! share whose calls may wait on a network, a SET_INFO's change (times, DOS attributes, end of
//! file, allocation, EAs, a security descriptor) and a FLUSH's write time are made in a file
//! system job, away from the I/O thread; the request parks meanwhile and is answered as before
//! once the job ran, watchers told only of a change the job made. On a local share nothing
//! changes: no job, the calls made at once.

use crate::support;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ringshare_core::sidcache::Xid;
use ringshare_wire::consts::AccessMask;
use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::fscc::FileTime;
use ringshare_wire::security::{Ace, Acl, SecurityDescriptor, Sid, SE_DACL_PRESENT};
use ringshare_wire::{FileId, NtStatus, WriteExt};
use support::fuse::*;
use support::*;

const INFO_FILE: u8 = 1;
const INFO_SECURITY: u8 = 3;
const BASIC: u8 = 4;
const STANDARD: u8 = 5;
const FULL_EA: u8 = 15;
const ALLOCATION: u8 = 19;
const END_OF_FILE: u8 = 20;
const DACL_SECURITY_INFORMATION: u32 = 4;
const READ_CONTROL: u32 = 0x0002_0000;
const WRITE_DAC: u32 = 0x0004_0000;
const FILE_READ_DATA: u32 = 0x1;
const HIDDEN: u32 = 0x2;
const DIRECTORY: u32 = 0x1;
/// FILE_NOTIFY_CHANGE_ATTRIBUTES | SIZE | LAST_WRITE | EA | SECURITY.
const WATCHED: u32 = 0x4 | 0x8 | 0x10 | 0x80 | 0x100;
/// A LastWriteTime a client sets (2019-04-11).
const SET_TIME: u64 = 132_000_000_000_000_000;

const DATA: &[u8] = b"ten bytes!";

/// FileBasicInformation setting the LastWriteTime to `write_time` (0: kept) and the attributes
/// to `attributes` (0: kept).
fn basic(write_time: u64, attributes: u32) -> Vec<u8> {
    let mut b = Vec::new();
    for t in [0, 0, write_time, 0] {
        b.put_u64(t);
    }
    b.put_u32(attributes);
    b.put_u32(0);
    b
}

/// One FILE_FULL_EA_INFORMATION entry.
fn ea(name: &str, value: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.put_u32(0);
    b.put_u8(0);
    b.put_u8(name.len() as u8);
    b.put_u16(value.len() as u16);
    b.put_bytes(name.as_bytes());
    b.put_u8(0);
    b.put_bytes(value);
    b
}

/// A descriptor with an empty DACL (nobody is granted anything).
fn empty_dacl() -> Vec<u8> {
    SecurityDescriptor {
        control: SE_DACL_PRESENT,
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl {
            revision: 2,
            aces: vec![],
        }),
    }
    .to_bytes(ringshare_wire::consts::SecurityInformation::DACL)
    .unwrap()
}

/// A SET_INFO of a security descriptor's DACL, not sent.
fn set_dacl_msg(c: &mut Client, f: FileId, sd: &[u8]) -> Vec<u8> {
    let tree = c.tree_id;
    c.message(Command::SET_INFO, tree, |o| {
        o.put_u16(33);
        o.put_u8(INFO_SECURITY);
        o.put_u8(0);
        o.put_u32(sd.len() as u32);
        o.put_u16(96);
        o.put_u16(0);
        o.put_u32(DACL_SECURITY_INFORMATION);
        f.write(o);
        o.put_bytes(sd);
    })
}

/// What a request sent with the file system jobs held came to.
struct Held {
    /// The jobs it asked.
    jobs: usize,
    /// The file system calls made before they ran (on the I/O thread).
    before_jobs: usize,
    /// The answers, once the jobs (and any they led to) ran.
    answers: Vec<Resp>,
}

/// `msg` signed and sent with the file system jobs held ([`Held`]).
fn with_jobs_held(c: &mut Client, calls: &Calls, mut msg: Vec<u8>) -> Held {
    let was = calls.all();
    c.hold_lookups = true;
    c.sign(&mut msg);
    let mut answers = c.send_frame(msg);
    let before_jobs = calls.all() - was;
    let (later, jobs) = c.run_held_jobs_to_the_end();
    answers.extend(later);
    Held {
        jobs,
        before_jobs,
        answers,
    }
}

/// A client on a share whose calls may wait on a network (`remote`) or not, holding file `f`
/// written with [`DATA`].
fn client_with_file(remote: bool) -> (Client, Arc<Calls>, FileId) {
    let (mut c, calls) = fuse_client(remote);
    let f = file_holding(&mut c, "f", DATA);
    (c, calls, f)
}

/// The SET_INFO (file class `class`, buffer `buf`) on a share that may wait on a network: one
/// job, no file system call before it ran, answered SUCCESS as on a local share.
fn set_in_a_job(class: u8, buf: &[u8]) -> Client {
    let (mut c, calls, f) = client_with_file(true);
    let m = c.set_info_msg(f, INFO_FILE, class, buf);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        (h.jobs, h.before_jobs),
        (1, 0),
        "class {class}: one job, no file system call before it ran"
    );
    assert_eq!(h.answers.len(), 1, "answered once");
    let (mut local, _, lf) = client_with_file(false);
    let as_before = local.set_info(lf, INFO_FILE, class, buf).status();
    assert_eq!(
        h.answers[0].status(),
        as_before,
        "answered as on a local share"
    );
    assert_eq!(as_before, NtStatus::SUCCESS);
    c
}

#[test]
fn a_set_info_end_of_file_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    let c = set_in_a_job(END_OF_FILE, &4u64.to_le_bytes());
    let attr = c.server_node(&["f"]).stat().unwrap();
    assert_eq!(attr.size, 4, "the job cut the file");
}

#[test]
fn a_set_info_of_times_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    let c = set_in_a_job(BASIC, &basic(SET_TIME, 0));
    let attr = c.server_node(&["f"]).stat().unwrap();
    assert_eq!(
        attr.mtime,
        FileTime(SET_TIME).to_unix_nanos(),
        "the time the job set"
    );
}

#[test]
fn a_set_info_of_dos_attributes_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    let c = set_in_a_job(BASIC, &basic(0, HIDDEN));
    let attr = c.server_node(&["f"]).stat().unwrap();
    assert!(
        attr.dos_attributes.is_some_and(|a| a & HIDDEN != 0),
        "the job stored HIDDEN: {:?}",
        attr.dos_attributes
    );
}

#[test]
fn a_set_info_allocation_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    // A smaller allocation cuts the file ([MS-FSA] 2.1.5.14.1): its stat too is the job's.
    let c = set_in_a_job(ALLOCATION, &3u64.to_le_bytes());
    let attr = c.server_node(&["f"]).stat().unwrap();
    assert_eq!(attr.size, 3, "the job cut the file");
}

#[test]
fn a_set_info_of_eas_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    let c = set_in_a_job(FULL_EA, &ea("COLOUR", b"blue"));
    let eas = c.server_node(&["f"]).list_eas().unwrap();
    assert!(
        eas.contains(&("COLOUR".to_string(), b"blue".to_vec())),
        "the job stored the EA: {eas:?}"
    );
}

#[test]
fn a_set_info_of_a_security_descriptor_on_a_share_that_may_wait_on_a_network_is_made_in_a_job() {
    let (mut c, calls, _) = client_with_file(true);
    let f = c.create("f", READ_CONTROL | WRITE_DAC, D::OPEN, 0).unwrap();
    let m = set_dacl_msg(&mut c, f, &empty_dacl());
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        (h.jobs, h.before_jobs),
        (1, 0),
        "one job, nothing before it"
    );
    assert_eq!(h.answers.len(), 1);
    assert_eq!(h.answers[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        c.create("f", FILE_READ_DATA, D::OPEN, 0).err(),
        Some(NtStatus::ACCESS_DENIED),
        "the empty DACL the job stored is enforced"
    );
}

/// A FLUSH of a written handle writes the write time it shows now (on FUSE a SETATTR) in a
/// job, then its fsync goes on the ring as before.
#[test]
fn a_flushs_write_time_on_a_share_that_may_wait_on_a_network_is_written_in_a_job() {
    let (mut c, calls, f) = client_with_file(true);
    let times = calls.times_set.load(Ordering::SeqCst);
    let m = c.flush_msg(f);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(
        (h.jobs, h.before_jobs),
        (1, 0),
        "one job, no time set on the I/O thread"
    );
    assert_eq!(h.answers.len(), 1);
    assert_eq!(h.answers[0].status(), NtStatus::SUCCESS);
    assert_eq!(
        calls.times_set.load(Ordering::SeqCst) - times,
        1,
        "the job wrote it"
    );
}

/// A change the back end refuses: the SET_INFO answers its status, as on the I/O thread, and
/// watchers hear nothing; the same change made tells them.
#[test]
fn a_set_info_whose_job_fails_answers_its_status_and_tells_no_watcher() {
    let (mut c, calls) = fuse_client(true);
    let d = c.create("d", GENERIC_ALL, D::CREATE, DIRECTORY).unwrap();
    let f = file_holding(&mut c, "d\\f", DATA);
    let mut watch = c.change_notify_msg(d, WATCHED, false, 4096);
    c.sign(&mut watch);
    let interim = c.send_frame(watch);
    assert_eq!(interim.len(), 1);
    assert_eq!(interim[0].status(), NtStatus::PENDING, "the watch waits");
    let watch_id = interim[0].hdr.message_id;
    for (class, buf) in [
        (END_OF_FILE, 4u64.to_le_bytes().to_vec()),
        (BASIC, basic(SET_TIME, HIDDEN)),
        (ALLOCATION, 3u64.to_le_bytes().to_vec()),
        (FULL_EA, ea("COLOUR", b"blue")),
    ] {
        calls.refuse.store(true, Ordering::SeqCst);
        let m = c.set_info_msg(f, INFO_FILE, class, &buf);
        let h = with_jobs_held(&mut c, &calls, m);
        calls.refuse.store(false, Ordering::SeqCst);
        assert_eq!(h.jobs, 1, "class {class}: a job");
        assert_eq!(
            h.answers.len(),
            1,
            "class {class}: the SET_INFO's answer alone, no watcher told: {:?}",
            h.answers
        );
        assert_eq!(
            h.answers[0].status(),
            NtStatus::ACCESS_DENIED,
            "class {class}"
        );
    }
    assert_eq!(
        c.server_node(&["d", "f"]).stat().unwrap().size,
        DATA.len() as u64
    );
    // Made, the change tells the watcher.
    let m = c.set_info_msg(f, INFO_FILE, END_OF_FILE, &4u64.to_le_bytes());
    let h = with_jobs_held(&mut c, &calls, m);
    assert!(
        h.answers
            .iter()
            .any(|r| r.hdr.message_id == watch_id && r.status() == NtStatus::SUCCESS),
        "the watcher told of the size the job set: {:?}",
        h.answers
    );
}

/// The order rule: the open's requests sent after a SET_INFO of its end of file (a QUERY_INFO,
/// a READ) wait for its job and see its change.
#[test]
fn an_opens_requests_after_a_set_info_wait_for_its_job() {
    let (mut c, calls, f) = client_with_file(true);
    c.hold_lookups = true;
    let mut set = c.set_info_msg(f, INFO_FILE, END_OF_FILE, &4u64.to_le_bytes());
    c.sign(&mut set);
    let set_id = ringshare_wire::header::Header::decode(&set)
        .unwrap()
        .message_id;
    let mut answers = c.send_frame(set);
    let mut query = c.query_info_msg(f, INFO_FILE, STANDARD, 4096);
    c.sign(&mut query);
    answers.extend(c.send_frame(query));
    let mut read = c.read_msg(f, 0, 64);
    c.sign(&mut read);
    answers.extend(c.send_frame(read));
    assert!(answers.is_empty(), "nothing answered: {answers:?}");
    assert_eq!(c.held_lookups.len(), 1, "only the SET_INFO's job asked");
    assert_eq!(
        calls.sizes_set.load(Ordering::SeqCst),
        0,
        "the file not cut yet"
    );
    answers.extend(c.run_held_jobs_to_the_end().0);
    assert_eq!(answers.len(), 3, "all three answered: {answers:?}");
    assert_eq!(answers[0].hdr.message_id, set_id, "the SET_INFO first");
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let eof = u64::from_le_bytes(answers[1].body()[16..24].try_into().unwrap());
    assert_eq!(eof, 4, "the QUERY_INFO sees the size the job set");
    assert_eq!(read_data(&answers[2]), &DATA[..4], "the READ too");
}

/// On a share whose calls are made on the I/O thread a SET_INFO and a FLUSH ask no job.
#[test]
fn a_set_info_on_a_local_share_asks_no_job() {
    let (mut c, calls, f) = client_with_file(false);
    for (class, buf) in [
        (END_OF_FILE, 4u64.to_le_bytes().to_vec()),
        (BASIC, basic(SET_TIME, HIDDEN)),
        (ALLOCATION, 3u64.to_le_bytes().to_vec()),
        (FULL_EA, ea("COLOUR", b"blue")),
    ] {
        let m = c.set_info_msg(f, INFO_FILE, class, &buf);
        let h = with_jobs_held(&mut c, &calls, m);
        assert_eq!(h.jobs, 0, "class {class}: no job");
        assert!(h.before_jobs > 0, "class {class}: the change made at once");
        assert_eq!(h.answers.len(), 1);
        assert_eq!(h.answers[0].status(), NtStatus::SUCCESS);
    }
    let s = c.create("f", READ_CONTROL | WRITE_DAC, D::OPEN, 0).unwrap();
    let m = set_dacl_msg(&mut c, s, &empty_dacl());
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.answers[0].status()), (0, NtStatus::SUCCESS));
    assert!(h.before_jobs > 0, "the descriptor set at once");
    // A written handle whose time no client set.
    let g = file_holding(&mut c, "g", DATA);
    let m = c.flush_msg(g);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.jobs, h.answers[0].status()), (0, NtStatus::SUCCESS));
    assert!(h.before_jobs > 0, "the FLUSH's write time set at once");
}

/// An id source as winbind answers (idmap `autorid` for Sales, `ad` for the Engineers' group);
/// it counts what it is asked.
#[derive(Default)]
struct TestIds {
    asked: std::sync::Mutex<Vec<String>>,
}

const SALES: &str = "S-1-5-21-1-2-3-1105";
const ENGINEERS: &str = "S-1-5-21-1-2-3-1106";
const SALES_GID: u32 = 200_105;
const ENGINEERS_GID: u32 = 200_106;

impl ringshare_core::sidcache::IdSource for TestIds {
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        let mut asked = self.asked.lock().unwrap();
        asked.extend(sids.iter().map(|s| s.to_string()));
        Ok(sids
            .iter()
            .map(|s| (s.to_string() == SALES).then_some(Xid::Both(SALES_GID)))
            .collect())
    }

    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        let mut asked = self.asked.lock().unwrap();
        asked.extend(ids.iter().map(|x| format!("{x:?}")));
        Ok(ids
            .iter()
            .map(|x| (*x == Xid::Gid(ENGINEERS_GID)).then(|| ENGINEERS.parse().unwrap()))
            .collect())
    }
}

/// A security change on a server with an id source, on a share that may wait on a network:
/// the file's descriptor (whose ids the source is asked about) is read in a job first, then the
/// id source is asked, then the change is made in a second job; no file system call is made
/// on the I/O thread between them, and the DACL's domain group becomes the POSIX ACL's entry.
#[test]
fn a_security_change_with_an_id_source_reads_the_descriptor_in_a_job_first() {
    let ids = Arc::new(TestIds::default());
    let source = Arc::clone(&ids);
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
    // The file's group is the Engineers' gid, as winbind gave it: its SID is asked about.
    c.server_node(&["team.txt"])
        .chown(None, Some(ENGINEERS_GID), true)
        .unwrap();
    let f = c
        .create("team.txt", READ_CONTROL | WRITE_DAC, D::OPEN, 0)
        .unwrap();
    let sd = SecurityDescriptor {
        control: SE_DACL_PRESENT,
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl {
            revision: 2,
            aces: vec![Ace::allow(
                SALES.parse().unwrap(),
                AccessMask(0x0012_0089),
                0,
            )],
        }),
    }
    .to_bytes(ringshare_wire::consts::SecurityInformation::DACL)
    .unwrap();
    c.hold_lookups = true;
    let mut m = set_dacl_msg(&mut c, f, &sd);
    c.sign(&mut m);
    let mut answers = c.send_frame(m);
    let mut kinds = Vec::new();
    let mut on_io_thread = 0;
    let mut was = calls.all();
    while !c.held_lookups.is_empty() {
        on_io_thread += calls.all() - was;
        let held = std::mem::take(&mut c.held_lookups);
        for r in &held {
            kinds.push(match &r.ask {
                ringshare_core::Lookup::Fs(_) => "job",
                ringshare_core::Lookup::Ids { .. } => "ids",
                _ => "other",
            });
        }
        c.run_any(held);
        was = calls.all();
        answers.extend(c.pump());
    }
    on_io_thread += calls.all() - was;
    c.hold_lookups = false;
    assert_eq!(kinds, ["job", "ids", "job"], "read, ask, change");
    assert_eq!(on_io_thread, 0, "no file system call on the I/O thread");
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].status(), NtStatus::SUCCESS);
    let asked = std::mem::take(&mut *ids.asked.lock().unwrap());
    assert_eq!(
        asked,
        [SALES.to_string(), format!("{:?}", Xid::Gid(ENGINEERS_GID))],
        "the DACL's SID and the file's group, as on the I/O thread"
    );
    let acl = c.server_node(&["team.txt"]).posix_acls().unwrap().access;
    let named: Vec<_> = acl
        .unwrap_or_default()
        .entries
        .iter()
        .map(|e| e.tag)
        .collect();
    assert!(
        named.contains(&ringshare_acl::posix::AclTag::Group(SALES_GID)),
        "the change the job made: {named:?}"
    );
}

/// The review of session 46, finding 8: a FileBasicInformation whose times were set and whose
/// DOS attributes the back end then refused keeps the write time the client set fixed (a later
/// WRITE and the CLOSE do not move it), on a share that may wait on a network as on a local one.
#[test]
fn a_write_time_set_before_refused_attributes_stays_fixed_after_a_write() {
    for remote in [false, true] {
        let (mut c, calls) = fuse_client(remote);
        let f = file_holding(&mut c, "t", DATA);
        calls.refuse_attributes.store(true, Ordering::SeqCst);
        let r = c.set_info(f, INFO_FILE, BASIC, &basic(SET_TIME, HIDDEN));
        calls.refuse_attributes.store(false, Ordering::SeqCst);
        assert_eq!(r.status(), NtStatus::ACCESS_DENIED, "remote {remote}");
        assert_eq!(c.write(f, 0, b"more").status(), NtStatus::SUCCESS);
        assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
        assert_eq!(
            c.server_node(&["t"]).stat().unwrap().mtime,
            FileTime(SET_TIME).to_unix_nanos(),
            "remote {remote}: the write time the client set"
        );
    }
}

/// The review of session 46, finding 8's rest: a FileBasicInformation that changes nothing (no
/// time, no attributes) on a handle that wrote nothing asks no job and is answered at once.
#[test]
fn a_set_info_of_times_that_changes_nothing_asks_no_job() {
    let (mut c, _) = fuse_client(true);
    let f = c
        .create("still", GENERIC_ALL, D::OVERWRITE_IF, 0)
        .expect("create");
    c.hold_lookups = true;
    let r = c.set_info(f, INFO_FILE, BASIC, &basic(0, 0));
    c.hold_lookups = false;
    assert_eq!(r.status(), NtStatus::SUCCESS, "answered at once");
    assert!(c.held_lookups.is_empty(), "no job");
}
