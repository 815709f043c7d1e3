//! Issue 33 (docs/cluster-internals.md, "File system calls off the I/O thread"; session 49): on
//! an `acl_xattr` share whose calls may wait on a network, of a domain member with an id source,
//! a CREATE of a new file that inherits its parent's NT ACL asks the id source about the domain
//! SIDs the parent's inheritable ACEs name before the file is made, as on a local share, but
//! reads the parent's descriptor in its file system job: the job answers the SIDs to ask about
//! without making the file, the source is asked, and a second job makes the file. No file
//! system call is made on the I/O thread; the file gets the same POSIX entries as on a local
//! share, and a failing source fails the CREATE as there.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ringshare_acl::posix::AclTag;
use ringshare_core::domain::DomainMember;
use ringshare_core::sidcache::{IdSource, Xid, POSITIVE_MS};
use ringshare_wire::consts::{AccessMask, Command, CreateDisposition as D, SecurityInformation};
use ringshare_wire::security::{Ace, Acl, SecurityDescriptor, Sid, SE_DACL_PRESENT};
use ringshare_wire::{FileId, NtStatus};
use support::fuse::*;
use support::*;

const READ_CONTROL: u32 = 0x0002_0000;
const WRITE_DAC: u32 = 0x0004_0000;
const INFO_SECURITY: u8 = 3;
const DACL: u32 = 4;
const SALES: &str = "S-1-5-21-1-2-3-1105";
const SALES_GID: u32 = 200_105;

/// An id source as winbind with autorid answers for Sales; it counts what it is asked and can
/// fail.
#[derive(Default)]
struct TestIds {
    asked: Mutex<Vec<String>>,
    fail: AtomicBool,
}

impl IdSource for TestIds {
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        let mut asked = self.asked.lock().unwrap();
        asked.extend(sids.iter().map(|s| s.to_string()));
        if self.fail.load(Ordering::SeqCst) {
            return Err("winbindd: no answer in time".into());
        }
        Ok(sids
            .iter()
            .map(|s| match s.to_string().as_str() {
                SALES => Some(Xid::Both(SALES_GID)),
                ENGINEERS => Some(Xid::Gid(200_106)),
                _ => None,
            })
            .collect())
    }

    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        Ok(ids.iter().map(|_| None).collect())
    }
}

/// A client of a FUSE-like share (`remote`: its calls may wait on a network) of a member of RSAD
/// whose id source is `ids`, with folder `sales` whose DACL gives Sales (and Everyone) what is
/// made in it, the source's answer for Sales expired since.
fn member_with_sales_folder(remote: bool, ids: &Arc<TestIds>) -> (Client, Arc<Calls>) {
    let source = Arc::clone(ids);
    let (mut c, calls) = fuse_client_with(remote, move |share| {
        let server = server_on(share, ringshare_core::SigningPolicy::IfRequired);
        server.logons.set_domain(Some(DomainMember {
            workgroup: "RSAD".into(),
            separator: '\\',
            default_domain: false,
            rid_ranges: Vec::new(),
            id_ranges: vec![(200_000, 2_999_999)],
        }));
        server.logons.set_id_source(Some(source));
        server
    });
    let d = c
        .create("sales", READ_CONTROL | WRITE_DAC, D::CREATE, 0x1)
        .expect("the folder");
    let inherited = |s: &str| Ace::allow(s.parse().unwrap(), AccessMask(0x001f_01ff), 0x3);
    let sd = SecurityDescriptor {
        control: SE_DACL_PRESENT,
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl {
            revision: 2,
            aces: vec![inherited(SALES), inherited("S-1-1-0")],
        }),
    };
    let sd = sd.to_bytes(SecurityInformation::DACL).unwrap();
    assert_eq!(set_dacl(&mut c, d, &sd).status(), NtStatus::SUCCESS);
    c.close(d);
    ids.asked.lock().unwrap().clear();
    c.tick(POSITIVE_MS + 1);
    (c, calls)
}

/// SET_INFO security of `f` with `sd` (its lookups answered as they come).
fn set_dacl(c: &mut Client, f: FileId, sd: &[u8]) -> Resp {
    let tree = c.tree_id;
    c.call(Command::SET_INFO, tree, |o| {
        o.extend_from_slice(&33u16.to_le_bytes());
        o.push(INFO_SECURITY);
        o.push(0);
        o.extend_from_slice(&(sd.len() as u32).to_le_bytes());
        o.extend_from_slice(&96u16.to_le_bytes());
        o.extend_from_slice(&0u16.to_le_bytes());
        o.extend_from_slice(&DACL.to_le_bytes());
        f.write(o);
        o.extend_from_slice(sd);
    })
}

/// What a CREATE of `sales\new.txt` held on its lookups came to: what it asked in turn ("job",
/// "ids"), the file system calls made on the I/O thread (before, between and after them), its
/// answer's status, and the named entries of the new file's POSIX ACL.
struct Held {
    kinds: Vec<&'static str>,
    on_io_thread: usize,
    status: NtStatus,
    named: Vec<AclTag>,
}

fn create_held(c: &mut Client, calls: &Calls) -> Held {
    c.hold_lookups = true;
    let tree = c.tree_id;
    let access = GENERIC_READ | GENERIC_WRITE;
    let mut m = c.create_msg(tree, "sales\\new.txt", access, SHARE_ALL, D::CREATE, 0);
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
        on_io_thread += run_counting(c, held, &|| calls.all()).1;
        was = calls.all();
        answers.extend(c.pump());
    }
    on_io_thread += calls.all() - was;
    c.hold_lookups = false;
    assert_eq!(answers.len(), 1, "one answer");
    let status = answers[0].status();
    let named = match status {
        NtStatus::SUCCESS => {
            let acl = c
                .server_node(&["sales", "new.txt"])
                .posix_acls()
                .unwrap()
                .access
                .unwrap_or_default();
            acl.entries
                .iter()
                .map(|e| e.tag)
                .filter(|t| t.is_named())
                .collect()
        }
        _ => Vec::new(),
    };
    Held {
        kinds,
        on_io_thread,
        status,
        named,
    }
}

/// The parent's descriptor is read in a job, the id source asked about Sales, the file made in
/// a second job with Sales' POSIX entry: no file system call on the I/O thread, the file as a
/// local share makes it (where the source is asked before the file is made, no job).
#[test]
fn a_new_file_inheriting_a_domain_sid_asks_the_id_source_between_two_jobs() {
    let ids = Arc::new(TestIds::default());
    let (mut c, calls) = member_with_sales_folder(true, &ids);
    let remote = create_held(&mut c, &calls);
    assert_eq!(remote.kinds, ["job", "ids", "job"], "read, ask, make");
    assert_eq!(
        remote.on_io_thread, 0,
        "no file system call on the I/O thread"
    );
    assert_eq!(remote.status, NtStatus::SUCCESS);
    assert!(
        remote.named.contains(&AclTag::Group(SALES_GID)),
        "{:?}",
        remote.named
    );
    assert_eq!(*ids.asked.lock().unwrap(), [SALES], "asked once");
    let ids = Arc::new(TestIds::default());
    let (mut c, calls) = member_with_sales_folder(false, &ids);
    let local = create_held(&mut c, &calls);
    assert_eq!(local.kinds, ["ids"], "asked, no job");
    assert_eq!(
        (local.status, local.named),
        (remote.status, remote.named),
        "as on a local share"
    );
}

/// Once the source's answer is kept, a new file there is one job, nothing asked.
#[test]
fn a_new_file_whose_inherited_sids_are_known_is_made_in_one_job() {
    let ids = Arc::new(TestIds::default());
    let (mut c, calls) = member_with_sales_folder(true, &ids);
    assert_eq!(create_held(&mut c, &calls).status, NtStatus::SUCCESS);
    ids.asked.lock().unwrap().clear();
    let held = {
        let tree = c.tree_id;
        let m = c.create_msg(
            tree,
            "sales\\third.txt",
            GENERIC_READ,
            SHARE_ALL,
            D::CREATE,
            0,
        );
        c.hold_lookups = true;
        let (_, early) = send_signed(&mut c, m);
        assert!(early.is_empty());
        let held = std::mem::take(&mut c.held_lookups);
        let n = held.len();
        c.run_any(held);
        let answers = c.pump();
        c.hold_lookups = false;
        assert!(c.held_lookups.is_empty());
        (n, answers[0].status())
    };
    assert_eq!(held, (1, NtStatus::SUCCESS), "one job");
    assert!(ids.asked.lock().unwrap().is_empty(), "nothing asked");
}

/// A source that fails: the CREATE fails as on a local share (NONE_MAPPED), nothing made.
#[test]
fn a_new_file_whose_id_source_fails_is_refused_as_locally() {
    let mut seen = Vec::new();
    for remote in [true, false] {
        let ids = Arc::new(TestIds::default());
        let (mut c, calls) = member_with_sales_folder(remote, &ids);
        ids.fail.store(true, Ordering::SeqCst);
        let h = create_held(&mut c, &calls);
        if remote {
            assert_eq!(h.kinds, ["job", "ids"], "read, ask");
            assert_eq!(h.on_io_thread, 0);
        }
        seen.push((h.status, c.server_sees(&["sales", "new.txt"])));
    }
    assert_eq!(seen[0], seen[1], "as on a local share");
    assert_eq!(seen[0], (NtStatus::NONE_MAPPED, false));
}

const ENGINEERS: &str = "S-1-5-21-1-2-3-1106";

/// A CREATE of `sales\given.txt` with a SecD context giving it the Engineers' group and no
/// DACL (so it inherits the folder's), its lookups held as [`create_held`] holds them.
fn create_with_group_held(c: &mut Client, calls: &Calls) -> (Vec<&'static str>, usize, NtStatus) {
    let sd = SecurityDescriptor {
        control: 0,
        rm_control: 0,
        owner: None,
        group: Some(ENGINEERS.parse().unwrap()),
        sacl: None,
        dacl: None,
    };
    let sd = sd.to_bytes(SecurityInformation::GROUP).unwrap();
    let ctx = vec![ringshare_wire::create::CreateContext::new(b"SecD", sd)];
    c.hold_lookups = true;
    let tree = c.tree_id;
    let access = GENERIC_READ | GENERIC_WRITE;
    let mut m = c.create_msg_ctx(
        tree,
        "sales\\given.txt",
        access,
        SHARE_ALL,
        D::CREATE,
        0,
        0,
        ctx,
    );
    c.sign(&mut m);
    let mut was = calls.all();
    let mut answers = c.send_frame(m);
    let (mut kinds, mut on_io_thread) = (Vec::new(), 0);
    while !c.held_lookups.is_empty() {
        assert!(kinds.len() < 8, "asked without end: {kinds:?}");
        on_io_thread += calls.all() - was;
        let held = std::mem::take(&mut c.held_lookups);
        for r in &held {
            kinds.push(match &r.ask {
                ringshare_core::Lookup::Fs(_) => "job",
                ringshare_core::Lookup::Ids { .. } => "ids",
                _ => "other",
            });
        }
        on_io_thread += run_counting(c, held, &|| calls.all()).1;
        was = calls.all();
        answers.extend(c.pump());
    }
    on_io_thread += calls.all() - was;
    c.hold_lookups = false;
    assert_eq!(answers.len(), 1, "one answer");
    (kinds, on_io_thread, answers[0].status())
}

/// A SecD context naming a domain group the id source was not asked about, without a DACL:
/// the context's group is asked about first (before the job, as on a local share), then the
/// job asks about the inherited Sales, then a job makes the file: both questions asked, in the
/// local share's order, and no file system call on the I/O thread.
#[test]
fn a_create_with_a_secd_group_that_inherits_asks_both_questions_in_the_local_order() {
    let mut seen = Vec::new();
    for remote in [true, false] {
        let ids = Arc::new(TestIds::default());
        let (mut c, calls) = member_with_sales_folder(remote, &ids);
        let (kinds, on_io_thread, status) = create_with_group_held(&mut c, &calls);
        if remote {
            assert_eq!(kinds, ["ids", "job", "ids", "job"]);
            assert_eq!(on_io_thread, 0, "no file system call on the I/O thread");
        } else {
            assert_eq!(kinds, ["ids", "ids"]);
        }
        let asked = std::mem::take(&mut *ids.asked.lock().unwrap());
        seen.push((status, asked));
    }
    assert_eq!(seen[0], seen[1], "as on a local share");
    assert_eq!(seen[0].0, NtStatus::SUCCESS);
}
