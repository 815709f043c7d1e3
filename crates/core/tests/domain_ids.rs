//! Domain SIDs that no rid range maps (idmap `ad`, `autorid`, …) are asked of the id source
//! (winbind in the binary; a test source here) away from the I/O thread: the request that needs
//! them parks, the answer is kept for a while, and the descriptor becomes the POSIX ACL the
//! kernel enforces. A file's ids in the other backends' ranges read back as their SIDs the same
//! way.

use crate::support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ringshare_acl::posix::AclTag;
use ringshare_core::domain::DomainMember;
use ringshare_core::sidcache::{IdSource, Xid, NEGATIVE_MS, POSITIVE_MS};
use ringshare_core::Lookup;
use ringshare_vfs::{DefaultAcl, PosixAcl};
use ringshare_wire::consts::{AccessMask, Command, CreateDisposition as D, SecurityInformation};
use ringshare_wire::create::CreateContext;
use ringshare_wire::security::{Ace, Acl, SecurityDescriptor, Sid, SE_DACL_PRESENT};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const READ_CONTROL: u32 = 0x0002_0000;
const WRITE_DAC: u32 = 0x0004_0000;
const INFO_SECURITY: u8 = 3;
const DACL: u32 = 4;
const OWNER_GROUP_DACL: u32 = 7;

const SALES: &str = "S-1-5-21-1-2-3-1105";
const ENGINEERS: &str = "S-1-5-21-1-2-3-1106";
const NOBODY: &str = "S-1-5-21-1-2-3-4321";
const SALES_GID: u32 = 200_105;
const ENGINEERS_GID: u32 = 200_106;

fn sid(s: &str) -> Sid {
    s.parse().unwrap()
}

/// An id source as winbind with `idmap config * : backend = autorid` (Sales: one id for
/// both) and `ad` (Engineers: a gid only) answers; it counts what it is asked and can fail.
#[derive(Default)]
struct TestIds {
    asked: Mutex<Vec<String>>,
    fail: AtomicBool,
}

impl IdSource for TestIds {
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String> {
        self.asked
            .lock()
            .unwrap()
            .extend(sids.iter().map(|s| s.to_string()));
        if self.fail.load(Ordering::Relaxed) {
            return Err("winbindd: no answer in time".into());
        }
        Ok(sids
            .iter()
            .map(|s| match s.to_string().as_str() {
                SALES => Some(Xid::Both(SALES_GID)),
                ENGINEERS => Some(Xid::Gid(ENGINEERS_GID)),
                _ => None,
            })
            .collect())
    }

    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String> {
        self.asked
            .lock()
            .unwrap()
            .extend(ids.iter().map(|x| format!("{x:?}")));
        Ok(ids
            .iter()
            .map(|x| match x {
                Xid::Gid(ENGINEERS_GID) => Some(sid(ENGINEERS)),
                _ => None,
            })
            .collect())
    }
}

impl TestIds {
    fn asked(&self) -> Vec<String> {
        std::mem::take(&mut *self.asked.lock().unwrap())
    }
}

/// A member of RSAD without rid ranges (its ids in 200000-2999999 come from winbind), logged on
/// as alice, whose lookups wait until the test answers them.
fn member() -> (Client, Arc<TestIds>) {
    let mem = ringshare_vfs::memory::MemShare::new();
    let server = server(&mem, ringshare_core::SigningPolicy::IfRequired);
    server.logons.set_domain(Some(DomainMember {
        workgroup: "RSAD".into(),
        separator: '\\',
        default_domain: false,
        rid_ranges: Vec::new(),
        id_ranges: vec![(200_000, 2_999_999)],
    }));
    let ids = Arc::new(TestIds::default());
    server.logons.set_id_source(Some(ids.clone()));
    let mut c = Client::on(server, mem, Options::default());
    c.hold_lookups = true;
    (c, ids)
}

fn dacl_of(aces: &[(&str, u32)]) -> SecurityDescriptor {
    SecurityDescriptor {
        control: SE_DACL_PRESENT,
        rm_control: 0,
        owner: None,
        group: None,
        sacl: None,
        dacl: Some(Acl {
            revision: 2,
            aces: aces
                .iter()
                .map(|(s, m)| Ace::allow(sid(s), AccessMask(*m), 0))
                .collect(),
        }),
    }
}

fn dacl(aces: &[(&str, u32)]) -> Vec<u8> {
    dacl_of(aces).to_bytes(SecurityInformation::DACL).unwrap()
}

/// SET_INFO security of `f` with `sd`: its responses (none while it waits).
fn set_dacl(c: &mut Client, f: FileId, sd: &[u8]) -> Vec<Resp> {
    let tree = c.tree_id;
    c.call_all(Command::SET_INFO, tree, |o| {
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

/// Answer the held lookups (as the driver's lookup threads do): what they asked, and the
/// responses that follow.
fn answer(c: &mut Client) -> (Vec<Lookup>, Vec<Resp>) {
    let mut asked = Vec::new();
    for req in std::mem::take(&mut c.held_lookups) {
        let done = req.run();
        c.conn.complete_lookup(c.now, req.id, done);
        asked.push(req.ask);
    }
    (asked, c.pump())
}

/// The named entries of the POSIX access ACL of share path `path`.
fn named_entries(c: &Client, path: &[&str]) -> Vec<AclTag> {
    let acl = c
        .server_node(path)
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

/// A CREATE of `name` with `contexts` (GENERIC_READ | GENERIC_WRITE, CREATE): its responses,
/// none while it waits.
fn create_waiting(c: &mut Client, name: &str, contexts: Vec<CreateContext<'static>>) -> Vec<Resp> {
    let tree = c.tree_id;
    let mut m = c.create_msg_ctx(
        tree,
        name,
        GENERIC_READ | GENERIC_WRITE,
        SHARE_ALL,
        D::CREATE,
        0,
        0,
        contexts,
    );
    c.sign(&mut m);
    c.send_frame(m)
}

#[test]
fn a_domain_group_ace_becomes_a_posix_acl_entry_after_asking_the_id_source() {
    let (mut c, ids) = member();
    let f = c
        .create("sales.txt", READ_CONTROL | WRITE_DAC, D::CREATE, 0)
        .unwrap();
    let sd = dacl(&[(SALES, 0x0012_0089), (ENGINEERS, 0x0012_0089)]);
    assert!(
        set_dacl(&mut c, f, &sd).is_empty(),
        "answered before the id source was asked"
    );
    assert!(ids.asked().is_empty(), "not asked on the I/O thread");
    // The connection goes on meanwhile.
    let tree = c.tree_id;
    let echo = c.call_all(Command::ECHO, tree, empty_body);
    assert_eq!(echo[0].status(), NtStatus::SUCCESS);
    let (asked, rs) = answer(&mut c);
    let [Lookup::Ids {
        sids, ids: xids, ..
    }] = asked.as_slice()
    else {
        panic!("one lookup of ids")
    };
    assert_eq!(sids, &[sid(SALES), sid(ENGINEERS)]);
    assert!(xids.is_empty());
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    // autorid gives one id that is both (a user: and a group: entry, as Samba writes);
    // ad a gid only.
    let named = named_entries(&c, &["sales.txt"]);
    for t in [
        AclTag::User(SALES_GID),
        AclTag::Group(SALES_GID),
        AclTag::Group(ENGINEERS_GID),
    ] {
        assert!(named.contains(&t), "{t:?} in {named:?}");
    }
    assert!(!named.contains(&AclTag::User(ENGINEERS_GID)), "{named:?}");
    // The answer is kept: the same SIDs again ask nothing.
    ids.asked();
    let again = set_dacl(&mut c, f, &sd);
    assert_eq!(again[0].status(), NtStatus::SUCCESS);
    assert!(c.held_lookups.is_empty() && ids.asked().is_empty());
}

#[test]
fn a_sid_the_source_does_not_map_gets_no_posix_entry_and_is_asked_again_after_a_while() {
    let (mut c, ids) = member();
    let f = c
        .create("nobody.txt", READ_CONTROL | WRITE_DAC, D::CREATE, 0)
        .unwrap();
    let sd = dacl(&[(NOBODY, 0x0012_0089)]);
    assert!(set_dacl(&mut c, f, &sd).is_empty());
    let (_, rs) = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS, "kept in the NT ACL only");
    assert!(named_entries(&c, &["nobody.txt"]).is_empty());
    assert_eq!(ids.asked(), [NOBODY]);
    assert_eq!(set_dacl(&mut c, f, &sd)[0].status(), NtStatus::SUCCESS);
    assert!(ids.asked().is_empty(), "no id, remembered");
    c.tick(NEGATIVE_MS);
    assert!(set_dacl(&mut c, f, &sd).is_empty(), "asked again");
    answer(&mut c);
    assert_eq!(ids.asked(), [NOBODY]);
}

#[test]
fn a_failing_id_source_fails_the_request_with_a_status_and_is_asked_again_next_time() {
    let (mut c, ids) = member();
    let f = c
        .create("x.txt", READ_CONTROL | WRITE_DAC, D::CREATE, 0)
        .unwrap();
    ids.fail.store(true, Ordering::Relaxed);
    let sd = dacl(&[(SALES, 0x0012_0089)]);
    assert!(set_dacl(&mut c, f, &sd).is_empty());
    let (_, rs) = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::NONE_MAPPED);
    assert!(named_entries(&c, &["x.txt"]).is_empty(), "nothing changed");
    ids.fail.store(false, Ordering::Relaxed);
    assert!(set_dacl(&mut c, f, &sd).is_empty(), "a failure is not kept");
    let (_, rs) = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    assert!(named_entries(&c, &["x.txt"]).contains(&AclTag::Group(SALES_GID)));
}

#[test]
fn a_create_with_a_descriptor_naming_a_domain_group_waits_for_the_id_source() {
    let (mut c, _ids) = member();
    let sd = dacl_of(&[(SALES, 0x001f_01ff)])
        .to_bytes(SecurityInformation::DACL)
        .unwrap();
    let waits = create_waiting(&mut c, "new.txt", vec![CreateContext::new(b"SecD", sd)]);
    assert!(waits.is_empty(), "waits for the id source");
    assert!(
        !c.server_sees(&["new.txt"]),
        "nothing created before the answer"
    );
    let (_, rs) = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    assert!(named_entries(&c, &["new.txt"]).contains(&AclTag::Group(SALES_GID)));
}

#[test]
fn a_files_ids_in_an_idmap_range_read_back_as_the_sids_the_id_source_names() {
    let (mut c, ids) = member();
    c.put_file("eng.txt", b"x");
    // A POSIX ACL set outside (setfacl -m g:200106:r), without an NT ACL.
    let node = c.server_node(&["eng.txt"]);
    let mut acl = PosixAcl::from_mode(0o640);
    acl.entries.push(ringshare_acl::posix::AclEntry::new(
        AclTag::Group(ENGINEERS_GID),
        4,
    ));
    acl.entries
        .push(ringshare_acl::posix::AclEntry::new(AclTag::Mask, 4));
    node.set_posix_acls(&acl, DefaultAcl::Keep, true).unwrap();
    let f = c.create("eng.txt", READ_CONTROL, D::OPEN, 0).unwrap();
    let query = |c: &mut Client| {
        let tree = c.tree_id;
        c.call_all(Command::QUERY_INFO, tree, |o| {
            o.extend_from_slice(&41u16.to_le_bytes());
            o.push(INFO_SECURITY);
            o.push(0);
            o.extend_from_slice(&65536u32.to_le_bytes());
            o.extend_from_slice(&[0; 8]);
            o.extend_from_slice(&OWNER_GROUP_DACL.to_le_bytes());
            o.extend_from_slice(&0u32.to_le_bytes());
            f.write(o);
            o.push(0);
        })
    };
    assert!(query(&mut c).is_empty(), "waits for the id source");
    let (asked, rs) = answer(&mut c);
    let [Lookup::Ids { ids: xids, .. }] = asked.as_slice() else {
        panic!("one lookup of ids")
    };
    assert_eq!(
        xids,
        &[Xid::Gid(ENGINEERS_GID)],
        "alice's uid 1000 is no domain id"
    );
    let shown = |r: &Resp| {
        let body = ringshare_wire::info::QueryInfoResponse::decode(&r.msg).unwrap();
        let sd = SecurityDescriptor::decode(body.buffer).unwrap();
        sd.dacl
            .unwrap()
            .aces
            .iter()
            .filter_map(|a| a.sid().map(|s| s.to_string()))
            .collect::<Vec<_>>()
    };
    assert!(
        shown(&rs[0]).contains(&ENGINEERS.to_string()),
        "{:?}",
        shown(&rs[0])
    );
    assert_eq!(ids.asked(), [format!("{:?}", Xid::Gid(ENGINEERS_GID))]);
    // Known now: answered at once.
    let rs = query(&mut c);
    assert!(shown(&rs[0]).contains(&ENGINEERS.to_string()));
    assert!(ids.asked().is_empty());
}

#[test]
fn a_files_group_in_an_idmap_range_is_kept_as_its_domain_sid_when_a_dacl_is_set() {
    let (mut c, _ids) = member();
    c.put_file("team.txt", b"x");
    let node = c.server_node(&["team.txt"]);
    // chgrp to the domain group Engineers' gid, as winbind gave it.
    node.chown(None, Some(ENGINEERS_GID), true).unwrap();
    let f = c
        .create("team.txt", READ_CONTROL | WRITE_DAC, D::OPEN, 0)
        .unwrap();
    assert!(set_dacl(&mut c, f, &dacl(&[(SALES, 0x0012_0089)])).is_empty());
    let (asked, rs) = answer(&mut c);
    let [Lookup::Ids {
        sids, ids: xids, ..
    }] = asked.as_slice()
    else {
        panic!("one lookup of ids")
    };
    assert_eq!(sids, &[sid(SALES)]);
    assert_eq!(xids, &[Xid::Gid(ENGINEERS_GID)], "the file's group");
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    let tree = c.tree_id;
    let rs = c.call_all(Command::QUERY_INFO, tree, |o| {
        o.extend_from_slice(&41u16.to_le_bytes());
        o.push(INFO_SECURITY);
        o.push(0);
        o.extend_from_slice(&65536u32.to_le_bytes());
        o.extend_from_slice(&[0; 8]);
        o.extend_from_slice(&OWNER_GROUP_DACL.to_le_bytes());
        o.extend_from_slice(&0u32.to_le_bytes());
        f.write(o);
        o.push(0);
    });
    let body = ringshare_wire::info::QueryInfoResponse::decode(&rs[0].msg).unwrap();
    let sd = SecurityDescriptor::decode(body.buffer).unwrap();
    assert_eq!(sd.group, Some(sid(ENGINEERS)), "as Samba shows it");
}

#[test]
fn a_new_file_inheriting_a_domain_group_ace_waits_for_the_id_source_once_its_answer_expired() {
    // A Windows admin gave DOMAIN\Sales a folder, inherited by what is made in it; a week
    // later (or after a restart) the answer for Sales is no longer kept: a new file there
    // waits for the id source before it is made, and gets Sales' POSIX entry.
    let (mut c, ids) = member();
    let d = c
        .create("sales", READ_CONTROL | WRITE_DAC, D::CREATE, 0x1)
        .unwrap();
    let inherited = |s: &str| Ace::allow(sid(s), AccessMask(0x001f_01ff), 0x3);
    let mut sd = dacl_of(&[]);
    sd.dacl.as_mut().unwrap().aces = vec![inherited(SALES), inherited("S-1-1-0")];
    let sd = sd.to_bytes(SecurityInformation::DACL).unwrap();
    assert!(set_dacl(&mut c, d, &sd).is_empty());
    let (_, rs) = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    assert_eq!(ids.asked(), [SALES]);
    c.tick(POSITIVE_MS + 1);
    let waits = create_waiting(&mut c, "sales\\new.txt", Vec::new());
    assert!(waits.is_empty(), "waits for the id source");
    assert!(
        !c.server_sees(&["sales", "new.txt"]),
        "nothing created before the answer"
    );
    let (_, rs) = answer(&mut c);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    assert_eq!(ids.asked(), [SALES], "asked again");
    let named = named_entries(&c, &["sales", "new.txt"]);
    assert!(named.contains(&AclTag::Group(SALES_GID)), "{named:?}");
}
