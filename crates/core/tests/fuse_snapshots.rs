//! Previous Versions on a share whose calls may wait on a network (issue 33; FUSE, CephFS: `fs
//! calls off io thread = auto`): a CREATE naming a snapshot makes the snapshot's view (its
//! directory listed when the token must be found among its entries, the view's root opened:
//! on the POSIX backend a statx, an fstatfs and the probes of what the snapshot's file system
//! can do) in the CREATE's file system job, not on the I/O thread, and
//! FSCTL_SRV_ENUMERATE_SNAPSHOTS lists the snapshot directories in a job of the open's order.
//! The answers are a local share's. The share is the FUSE-like in-memory share of
//! support/fuse.rs, its `.snapshots` laid out as snapper does.

use crate::support;

use std::sync::Arc;

use ringshare_core::shadow::ShadowCopy;
use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::ioctl::IoctlResponse;
use ringshare_wire::NtStatus;
use support::fuse::*;
use support::*;

const FSCTL_SRV_ENUMERATE_SNAPSHOTS: u32 = 0x0014_4064;
const IS_FSCTL: u32 = 1;
const DIRECTORY_FILE: u32 = 0x1;
const OLD: &str = "@GMT-2026.11.01-10.00.00";
const NEWER: &str = "@GMT-2026.11.02-10.00.00";
/// FileBasicInformation, of QUERY_INFO's SMB2_0_INFO_FILE.
const FILE_BASIC_INFORMATION: u8 = 4;

/// A client of a FUSE-like share (`remote`: its calls may wait on a network) with
/// `shadow_copy2` settings `shadow`, whose `.snapshots` holds two snapshots of `f.txt`.
fn client_with(remote: bool, shadow: ShadowCopy) -> (Client, Arc<Calls>) {
    let mem = MemShare::new();
    make_file(&mem, "f.txt", b"now");
    make_file(&mem, &format!(".snapshots/{OLD}/f.txt"), b"old one");
    make_file(&mem, &format!(".snapshots/{NEWER}/f.txt"), b"newer one");
    fuse_client_on(mem, remote, |share| {
        let mut config = config_on(share, ringshare_core::SigningPolicy::IfRequired);
        for s in &mut config.shares {
            Arc::get_mut(s).unwrap().shadow = Some(Arc::new(shadow.clone()));
        }
        server_from(config)
    })
}

fn client(remote: bool) -> (Client, Arc<Calls>) {
    client_with(remote, ShadowCopy::default())
}

/// What a request sent with the file system jobs it asks held came to.
struct Held {
    /// The file system calls made on the I/O thread (before its jobs ran and while it ran again
    /// with their answers), and in its jobs.
    on_io_thread: usize,
    in_jobs: usize,
    jobs: usize,
    answer: Resp,
}

/// `msg` sent by `c` with the jobs it asks held, then run a round at a time until it is
/// answered: see [`Held`].
fn with_jobs_held(c: &mut Client, calls: &Calls, msg: Vec<u8>) -> Held {
    c.hold_lookups = true;
    let before = calls.all();
    let (_, mut out) = send_signed(c, msg);
    let (mut on_io_thread, mut in_jobs, mut jobs) = (calls.all() - before, 0, 0);
    while out.is_empty() {
        let held = std::mem::take(&mut c.held_lookups);
        assert!(!held.is_empty() && jobs < 4, "answered after its jobs");
        assert!(
            held.iter()
                .all(|r| matches!(r.ask, ringshare_core::Lookup::Fs(_))),
            "file system jobs"
        );
        jobs += held.len();
        let (jobs_calls, io_thread) = run_counting(c, held, &|| calls.all());
        in_jobs += jobs_calls;
        on_io_thread += io_thread;
        let before = calls.all();
        out = c.pump();
        on_io_thread += calls.all() - before;
    }
    c.hold_lookups = false;
    assert_eq!(out.len(), 1, "answered once");
    Held {
        on_io_thread,
        in_jobs,
        jobs,
        answer: out.remove(0),
    }
}

/// A CREATE of `name` for `access`, sent with its jobs held.
fn create_held(c: &mut Client, calls: &Calls, name: &str, access: u32) -> Held {
    let tree = c.tree_id;
    let m = c.create_msg(tree, name, access, SHARE_ALL, D::OPEN, 0);
    with_jobs_held(c, calls, m)
}

/// The FileId a CREATE's answer gives.
fn file_id(r: &Resp) -> ringshare_wire::FileId {
    ringshare_wire::create::CreateResponse::decode(&r.msg)
        .expect("create response")
        .file_id
}

/// What the snapshot's `f.txt` holds, read through open `f`.
fn contents(c: &mut Client, f: ringshare_wire::FileId) -> Vec<u8> {
    let r = c.read(f, 0, 100);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    read_data(&r)
}

#[test]
fn a_create_in_a_snapshot_on_a_share_that_may_wait_on_a_network_makes_the_view_in_its_job() {
    let (mut c, calls) = client(true);
    let access = GENERIC_READ | GENERIC_WRITE;
    let h = create_held(&mut c, &calls, &format!("{OLD}\\f.txt"), access);
    assert_eq!(h.answer.status(), NtStatus::SUCCESS);
    assert_eq!(h.on_io_thread, 0, "no file system call on the I/O thread");
    assert_eq!(h.jobs, 1, "one job: the view and the open");
    // The view's root opened and the file opened and looked at through it.
    assert!(h.in_jobs >= 2, "the view and the open made in the job");
    let f = file_id(&h.answer);
    assert_eq!(contents(&mut c, f), b"old one", "the snapshot's file");
    // The open is the view's: granted for writing and read-only, as on a local share.
    assert_eq!(
        c.write(f, 0, b"x").status(),
        NtStatus::MEDIA_WRITE_PROTECTED
    );
    c.close(f);
    let h = create_held(&mut c, &calls, &format!("{NEWER}\\f.txt"), GENERIC_READ);
    let f = file_id(&h.answer);
    assert_eq!(contents(&mut c, f), b"newer one");
}

#[test]
fn a_snapshot_create_answers_as_on_a_local_share_after_its_job() {
    for name in [
        format!("{OLD}\\f.txt"),
        // No such snapshot: OBJECT_PATH_NOT_FOUND, found by the view's job.
        "@GMT-2020.01.01-00.00.00\\f.txt".to_string(),
        format!("{OLD}\\missing.txt"),
        format!("{OLD}\\..\\..\\f.txt"),
        OLD.to_string(),
    ] {
        let answers: Vec<NtStatus> = [false, true]
            .into_iter()
            .map(|remote| {
                let (mut c, calls) = client(remote);
                let h = create_held(&mut c, &calls, &name, GENERIC_READ);
                match remote {
                    true => assert_eq!(h.on_io_thread, 0, "{name}: no call on the I/O thread"),
                    false => assert_eq!(h.jobs, 0, "{name}: no job on a local share"),
                }
                h.answer.status()
            })
            .collect();
        assert_eq!(answers[0], answers[1], "{name}: as on a local share");
    }
}

#[test]
fn on_a_local_share_a_snapshot_create_and_the_listing_of_snapshots_ask_no_job() {
    let (mut c, calls) = client(false);
    let h = create_held(&mut c, &calls, &format!("{OLD}\\f.txt"), GENERIC_READ);
    assert_eq!((h.answer.status(), h.jobs), (NtStatus::SUCCESS, 0));
    let root = c.create("", GENERIC_READ, D::OPEN, DIRECTORY_FILE).unwrap();
    let m = c.ioctl_msg(root, FSCTL_SRV_ENUMERATE_SNAPSHOTS, &[], 65536, IS_FSCTL);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!((h.answer.status(), h.jobs), (NtStatus::SUCCESS, 0));
}

/// The snapshot array a listing on a share (`remote` or not) answers, with its jobs' figures.
fn enumerated(remote: bool, shadow: ShadowCopy, max_out: u32) -> (Held, Vec<u8>) {
    let (mut c, calls) = client_with(remote, shadow);
    let root = c.create("", GENERIC_READ, D::OPEN, DIRECTORY_FILE).unwrap();
    let m = c.ioctl_msg(root, FSCTL_SRV_ENUMERATE_SNAPSHOTS, &[], max_out, IS_FSCTL);
    let h = with_jobs_held(&mut c, &calls, m);
    let out = match h.answer.status() {
        NtStatus::SUCCESS => IoctlResponse::decode(&h.answer.msg)
            .unwrap()
            .output
            .to_vec(),
        _ => Vec::new(),
    };
    (h, out)
}

#[test]
fn snapshots_are_listed_in_a_job_on_a_share_that_may_wait_on_a_network() {
    for max_out in [65536, 16, 40] {
        let (h, out) = enumerated(true, ShadowCopy::default(), max_out);
        assert_eq!(h.on_io_thread, 0, "no file system call on the I/O thread");
        assert_eq!(h.jobs, 1, "one job");
        assert!(h.in_jobs > 0, "the snapshot directory listed in it");
        let (local, local_out) = enumerated(false, ShadowCopy::default(), max_out);
        assert_eq!(
            (h.answer.status(), out),
            (local.answer.status(), local_out),
            "{max_out}: as on a local share"
        );
    }
}

#[test]
fn with_snapdirseverywhere_a_snapshots_files_are_asked_in_jobs_too() {
    let everywhere = ShadowCopy {
        everywhere: true,
        ..ShadowCopy::default()
    };
    let (h, out) = enumerated(true, everywhere.clone(), 65536);
    assert_eq!((h.on_io_thread, h.jobs), (0, 1), "listed in a job");
    assert_eq!(out, enumerated(false, everywhere.clone(), 65536).1);
    let (mut c, calls) = client_with(true, everywhere);
    let h = create_held(&mut c, &calls, &format!("{OLD}\\f.txt"), GENERIC_READ);
    assert_eq!((h.answer.status(), h.on_io_thread), (NtStatus::SUCCESS, 0));
    let f = file_id(&h.answer);
    // The open's share is the snapshot's view, whose calls may wait on a network as the
    // share's may: its QUERY_INFO is answered in a job, as the share's files' are.
    let m = c.query_info_msg(f, 1, FILE_BASIC_INFORMATION, 1024);
    let h = with_jobs_held(&mut c, &calls, m);
    assert_eq!(h.answer.status(), NtStatus::SUCCESS);
    assert_eq!((h.on_io_thread, h.jobs), (0, 1), "asked in a job");
    assert_eq!(contents(&mut c, f), b"old one");
}
