//! Directory leases ([MS-SMB2] 3.3.5.9.11, 3.3.4.7; Samba 4.22's `smb3
//! directory leases`): R or RH on a directory, for clients that negotiated
//! SMB2_GLOBAL_CAP_DIRECTORY_LEASING, broken to nothing without waiting when
//! something inside the directory changes, except the lease whose key the
//! changing open sent as its ParentLeaseKey.

use crate::support;

use std::sync::Arc;

use ringshare_core::notify_kernel::{mask, KernelWatch};
use ringshare_core::SigningPolicy;
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::posix::PosixShare;
use ringshare_wire::consts::{Capabilities, CreateDisposition as D, LeaseBreakFlags, LeaseFlags};
use ringshare_wire::create::{
    tag, ContextTag, CreateContext, CreateResponse, DurableHandleRequestV2, Lease,
};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::negotiate::NegotiateResponse;
use ringshare_wire::{FileId, NtStatus};
use support::caching::*;
use support::fuse::kernel_reports;
use support::*;

/// FILE_DIRECTORY_FILE.
const DIRECTORY: u32 = 0x1;

/// Two clients of one server that offer directory leasing, and a directory
/// `d` in the share.
fn pair() -> (Client, Client) {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let mut a = Client::leasing_dirs(server.clone(), mem.clone(), [1; 16]);
    let b = Client::leasing_dirs(server, mem, [2; 16]);
    let d = a.create("d", READ, D::CREATE, DIRECTORY).expect("mkdir d");
    assert_eq!(a.close(d).status(), NtStatus::SUCCESS);
    (a, b)
}

fn open(c: &mut Client, name: &str, access: u32, disp: D, lease: Option<Lease>) -> Resp {
    let m = c.create_msg_caching(name, access, 7, disp, LEASE, lease);
    let mut rs = c.send_frame(m);
    assert_eq!(rs.len(), 1, "one response: {rs:?}");
    rs.remove(0)
}

fn file_id(r: &Resp) -> FileId {
    assert_eq!(r.status(), NtStatus::SUCCESS, "create");
    CreateResponse::decode(&r.msg).expect("create").file_id
}

/// A version-2 lease request naming parent lease key `parent` repeated.
fn lease_with_parent(key: u8, state: u32, parent: u8) -> Lease {
    let mut l = lease_v2(key, state);
    l.flags = LeaseFlags::PARENT_LEASE_KEY_SET;
    if let Some(v) = l.v2.as_mut() {
        v.parent_key = [parent; 16];
    }
    l
}

/// `c` holds an RH lease of key `key` on directory `d` (its handle stays open).
fn lease_dir(c: &mut Client, key: u8) -> FileId {
    let r = open(c, "d", READ, D::OPEN, Some(lease_v2(key, R | H)));
    assert_eq!(granted_lease(&r).state.0, R | H);
    file_id(&r)
}

/// The one lease break `c` was sent: (key, from, to, acknowledgment required).
fn one_break(c: &mut Client) -> ([u8; 16], u32, u32, bool) {
    let got = c.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    let ack = n.flags.contains(LeaseBreakFlags::ACK_REQUIRED);
    (
        n.lease_key,
        n.current_lease_state.0,
        n.new_lease_state.0,
        ack,
    )
}

#[test]
fn a_directory_lease_is_read_and_handle_caching_never_write_caching() {
    let (mut a, _) = pair();
    for (asked, granted) in [(R | W | H, R | H), (R | W, R), (R | H, R | H), (R, R)] {
        let r = open(&mut a, "d", READ, D::OPEN, Some(lease_v2(7, asked)));
        assert_eq!(granted_lease(&r).state.0, granted, "asked {asked}");
        assert_eq!(a.close(file_id(&r)).status(), NtStatus::SUCCESS);
    }
}

#[test]
fn a_client_that_does_not_offer_directory_leasing_gets_no_directory_lease() {
    let mem = MemShare::new();
    let server = server(&mem, SigningPolicy::IfRequired);
    let mut a = Client::on(server, mem, Options::default());
    let d = a.create("d", READ, D::CREATE, DIRECTORY).expect("mkdir d");
    a.close(d);
    let r = open(&mut a, "d", READ, D::OPEN, Some(lease_v2(1, R | H)));
    let cr = CreateResponse::decode(&r.msg).expect("create");
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(
        !cr.contexts
            .iter()
            .any(|c| c.tag() == ContextTag::RequestLease),
        "no lease context in the answer"
    );
}

#[test]
fn directory_leasing_is_offered_to_clients_that_ask_unless_turned_off() {
    let caps = |on: bool| {
        let mem = MemShare::new();
        let server = server_with(&mem, |c| c.directory_leases = on);
        let mut c = Client::fresh(
            server,
            mem,
            ringshare_wire::consts::Dialect::SMB3_1_1,
            [3; 16],
        );
        c.offer = Capabilities::DIRECTORY_LEASING;
        let r = c.negotiate_adding(ringshare_wire::consts::Dialect::SMB3_1_1, Vec::new());
        NegotiateResponse::decode(&r.msg)
            .expect("negotiate")
            .capabilities
    };
    assert!(caps(true).contains(Capabilities::DIRECTORY_LEASING));
    assert!(!caps(false).contains(Capabilities::DIRECTORY_LEASING));
}

#[test]
fn a_create_inside_a_leased_directory_breaks_its_lease_to_none() {
    let (mut a, mut b) = pair();
    lease_dir(&mut a, 1);
    let r = open(&mut b, "d\\new.txt", ALL, D::CREATE, None);
    assert_eq!(r.status(), NtStatus::SUCCESS, "the create does not wait");
    assert_eq!(one_break(&mut a), ([1; 16], R | H, 0, true));
    assert_eq!(a.ack_lease(1, 0).status(), NtStatus::SUCCESS);
    // An open of what is there changes nothing inside.
    let again = open(&mut b, "d\\new.txt", READ, D::OPEN, None);
    assert_eq!(again.status(), NtStatus::SUCCESS);
    lease_dir(&mut a, 1);
    let again = open(&mut b, "d\\new.txt", READ, D::OPEN, None);
    assert_eq!(again.status(), NtStatus::SUCCESS);
    assert!(a.breaks().is_empty(), "no break for an open of an entry");
}

#[test]
fn the_opener_whose_parent_lease_key_matches_keeps_its_directory_lease() {
    let (mut a, mut b) = pair();
    lease_dir(&mut a, 1);
    lease_dir(&mut b, 2);
    let r = open(
        &mut a,
        "d\\mine.txt",
        ALL,
        D::CREATE,
        Some(lease_with_parent(3, R, 1)),
    );
    let l = granted_lease(&r);
    assert_eq!(l.v2.expect("v2").parent_key, [1; 16]);
    assert!(l.flags.contains(LeaseFlags::PARENT_LEASE_KEY_SET));
    assert!(
        a.breaks().is_empty(),
        "the creator's own directory lease stays"
    );
    assert_eq!(one_break(&mut b), ([2; 16], R | H, 0, true));
}

#[test]
fn a_rename_between_directories_breaks_both_but_the_renamers_parent() {
    let (mut a, mut b) = pair();
    let e = a.create("e", READ, D::CREATE, DIRECTORY).expect("mkdir e");
    a.close(e);
    b.put_file("d\\f.txt", b"x");
    lease_dir(&mut a, 1);
    let r = open(&mut a, "e", READ, D::OPEN, Some(lease_v2(2, R | H)));
    assert_eq!(granted_lease(&r).state.0, R | H);
    // The renamer names the source directory's lease as its parent's.
    let f = file_id(&open(
        &mut b,
        "d\\f.txt",
        ALL,
        D::OPEN,
        Some(lease_with_parent(5, R, 1)),
    ));
    let info = rename_info("e\\f.txt", false);
    assert_eq!(b.set_info(f, 1, 10, &info).status(), NtStatus::SUCCESS);
    assert_eq!(one_break(&mut a), ([2; 16], R | H, 0, true));
}

#[test]
fn a_delete_breaks_the_directory_lease_at_the_last_close_not_before() {
    let (mut a, mut b) = pair();
    b.put_file("d\\gone.txt", b"x");
    lease_dir(&mut a, 1);
    let f = b.create("d\\gone.txt", ALL, D::OPEN, 0).expect("open");
    let g = b.create("d\\gone.txt", READ, D::OPEN, 0).expect("open");
    assert_eq!(b.set_info(f, 1, 13, &[1]).status(), NtStatus::SUCCESS);
    assert_eq!(b.close(f).status(), NtStatus::SUCCESS);
    assert!(a.breaks().is_empty(), "still there while an open is left");
    assert_eq!(b.close(g).status(), NtStatus::SUCCESS);
    assert_eq!(one_break(&mut a), ([1; 16], R | H, 0, true));
}

#[test]
fn another_open_of_the_directory_keeps_its_lease() {
    let (mut a, mut b) = pair();
    lease_dir(&mut a, 1);
    let r = open(&mut b, "d", READ, D::OPEN, Some(lease_v2(2, R | H)));
    assert_eq!(granted_lease(&r).state.0, R | H);
    assert!(a.breaks().is_empty());
}

// ---- Changes other programs make on the disk (the kernel's watch) ----

/// The driver's kernel watch, as the core sees it: the watch descriptors
/// live now (an add is one more, a remove one fewer).
#[derive(Default)]
struct Watches {
    live: std::sync::Mutex<Vec<i32>>,
    next: std::sync::atomic::AtomicI32,
}

impl KernelWatch for Watches {
    fn add(&self, _dir: &dyn ringshare_vfs::Node) -> Option<i32> {
        let wd = 1 + self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.live.lock().unwrap().push(wd);
        Some(wd)
    }
    fn remove(&self, wd: i32) {
        self.live.lock().unwrap().retain(|w| *w != wd);
    }
}

impl Watches {
    fn live(&self) -> Vec<i32> {
        self.live.lock().unwrap().clone()
    }
}

struct Disk(std::path::PathBuf);

impl Drop for Disk {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two clients of a server whose share is a real directory holding `d`,
/// with kernel watches `Watches`.
fn pair_on_disk(name: &str) -> (Client, Client, Arc<Watches>, Disk) {
    let p = std::env::temp_dir().join(format!("rs-dirlease-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(p.join("d")).unwrap();
    let disk = Disk(p);
    let backend = Arc::new(PosixShare::new(&disk.0).unwrap());
    let server = server_on(backend, SigningPolicy::IfRequired);
    let watches = Arc::new(Watches::default());
    server.set_kernel_watch(watches.clone());
    let a = Client::leasing_dirs(server.clone(), MemShare::new(), [1; 16]);
    let b = Client::leasing_dirs(server, MemShare::new(), [2; 16]);
    (a, b, watches, disk)
}

#[test]
fn a_change_another_program_makes_in_a_leased_directory_breaks_its_lease_to_none() {
    for m in [
        mask::CREATE,
        mask::DELETE,
        mask::ATTRIB,
        mask::MODIFY,
        mask::MOVED_TO,
    ] {
        let (mut a, _b, watches, _disk) = pair_on_disk(&format!("other-{m}"));
        let d = lease_dir(&mut a, 1);
        let [wd] = watches.live()[..] else {
            panic!(
                "one kernel watch for the leased directory: {:?}",
                watches.live()
            );
        };
        kernel_reports(&mut a, wd, m, "theirs.txt");
        assert_eq!(one_break(&mut a), ([1; 16], R | H, 0, true), "mask {m:#x}");
        assert_eq!(a.close(d).status(), NtStatus::SUCCESS);
        assert!(watches.live().is_empty(), "the watch goes with the lease");
    }
}

#[test]
fn the_kernel_echo_of_a_change_through_smb_keeps_the_parent_lease_key_holders_lease() {
    let (mut a, mut b, watches, _disk) = pair_on_disk("echo");
    lease_dir(&mut a, 1);
    lease_dir(&mut b, 2);
    let [wd] = watches.live()[..] else {
        panic!("one kernel watch, shared: {:?}", watches.live());
    };
    let r = open(
        &mut a,
        "d\\mine.txt",
        ALL,
        D::CREATE,
        Some(lease_with_parent(3, R, 1)),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(one_break(&mut b), ([2; 16], R | H, 0, true));
    // What the kernel saw of that create is ringshare's own change.
    kernel_reports(&mut a, wd, mask::CREATE, "mine.txt");
    kernel_reports(&mut a, wd, mask::ATTRIB, "mine.txt");
    assert!(a.breaks().is_empty(), "the creator's lease stays");
    assert!(b.breaks().is_empty(), "no second break");
    // Another program's change is nobody's own.
    kernel_reports(&mut a, wd, mask::CREATE, "theirs.txt");
    assert_eq!(one_break(&mut a), ([1; 16], R | H, 0, true));
}

#[test]
fn a_leased_directory_keeps_no_kernel_watch_or_entry_once_its_durable_open_expired() {
    let (mut a, _b, watches, _disk) = pair_on_disk("durable");
    let contexts = vec![
        CreateContext::new(tag::REQUEST_LEASE, lease_v2(1, R | H).encode()),
        CreateContext::new(
            tag::DURABLE_HANDLE_REQUEST_V2,
            DurableHandleRequestV2 {
                timeout: 30_000,
                flags: 0,
                create_guid: [9; 16],
            }
            .encode(),
        ),
    ];
    let tree = a.tree_id;
    let mut m = a.create_msg_ctx(tree, "d", READ, 7, D::OPEN, DIRECTORY, 0, contexts);
    m[64 + 3] = 0xFF; // RequestedOplockLevel: a lease
    let r = a.send_frame(m).remove(0);
    assert_eq!(granted_lease(&r).state.0, R | H);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    assert!(
        cr.contexts
            .iter()
            .any(|c| c.tag() == ContextTag::DurableHandleRequestV2),
        "a durable directory open"
    );
    assert_eq!(watches.live().len(), 1);
    a.conn.shutdown(a.now);
    let server = a.server.clone();
    assert_eq!(server.parked_durables(), 1);
    assert!(server.files.any_dir_leased(), "kept while the open is");
    assert_eq!(watches.live().len(), 1);
    assert!(server.expire_durables(a.now.mono_ms + 30_000).is_empty());
    assert_eq!(server.parked_durables(), 0);
    assert!(!server.files.any_dir_leased(), "no leased directory listed");
    assert_eq!(server.files.dir_lease_watches(), 0);
    assert!(watches.live().is_empty(), "no kernel watch left");
}
