//! `CpuKeep` (`pin cpus = auto`): a thread that streams keeps to its CPU with the io-wq workers
//! that run its splices, and is free again once no stream began for a while.

mod support;

use std::os::fd::OwnedFd;
use std::sync::Arc;

use ringshare_engine::{CpuKeep, Ring, RingConfig};
use support::wait_for;

/// `Cpus_allowed_list` of thread `tid` of this process.
fn cpus_of(tid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    line.trim().to_owned()
}

/// The io-wq workers of thread `tid` (the kernel names them `iou-wrk-TID`).
fn workers_of(tid: i32) -> Vec<i32> {
    let name = format!("iou-wrk-{tid}");
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|t: &i32| {
            std::fs::read_to_string(format!("/proc/self/task/{t}/comm"))
                .is_ok_and(|c| c.trim() == name)
        })
        .collect()
}

/// A splice of a few file bytes into a pipe: always run by an io-wq worker.
fn splice_on_a_worker(ring: &mut Ring, token: u64) {
    let path = std::env::temp_dir().join(format!("rs-keep-{}-{token}", std::process::id()));
    std::fs::write(&path, b"some file bytes").unwrap();
    let file: Arc<OwnedFd> = Arc::new(std::fs::File::open(&path).unwrap().into());
    std::fs::remove_file(&path).unwrap();
    let (_read, write) = rustix::pipe::pipe().unwrap();
    let write = Arc::new(write);
    ring.splice(&file, Some(0), &write, None, 15, None, token);
    assert_eq!(wait_for(ring, token).result.unwrap(), 15);
}

#[test]
fn a_thread_holding_its_cpu_runs_there_with_its_io_workers_and_is_free_again_after() {
    let Some(mut keep) = CpuKeep::for_thread(1, 100) else {
        eprintln!("this process may run on one CPU only: nothing to keep");
        return;
    };
    let me = rustix::thread::gettid().as_raw_nonzero().get();
    let free = cpus_of(me);
    let home = keep.home().to_string();
    let mut ring = Ring::new(RingConfig::default()).unwrap();
    splice_on_a_worker(&mut ring, 1);
    let before = workers_of(me);
    assert!(!before.is_empty(), "the splice ran on no io-wq worker");

    keep.hold(&mut ring, 1_000).unwrap();
    assert!(keep.is_held());
    assert_eq!(cpus_of(me), home, "the thread keeps to its CPU");
    splice_on_a_worker(&mut ring, 2);
    for w in workers_of(me) {
        assert_eq!(
            cpus_of(w),
            home,
            "worker {w} (started before the hold: {before:?})"
        );
    }

    keep.hold(&mut ring, 1_050).unwrap();
    assert_eq!(keep.ends_at(), Some(1_150));
    keep.let_go_if_idle(&mut ring, 1_149).unwrap();
    assert!(keep.is_held(), "a stream began 99 ms ago: the hold lasts");
    assert_eq!(cpus_of(me), home);

    keep.let_go_if_idle(&mut ring, 1_150).unwrap();
    assert!(!keep.is_held());
    assert_eq!(keep.ends_at(), None);
    assert_eq!(cpus_of(me), free, "the thread is free again");
    splice_on_a_worker(&mut ring, 3);
    for w in workers_of(me) {
        assert_eq!(cpus_of(w), free, "worker {w} is free again");
    }
}
