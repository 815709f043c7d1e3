//! Behaviour only the in-memory backend has: fault injection, capacity, a deterministic clock.

use crate::common;

use common::*;
use ringshare_vfs::memory::{FaultOp, MemShare, MEM_CLOCK_START_NS, MEM_CLOCK_TICK_NS};
use ringshare_vfs::{FsError, Node, OpenMode, OpenOptions, Share};

/// Run `op` once against `share`, returning its error if any.
fn run(op: FaultOp, share: &MemShare, node: &dyn Node, dir: &dyn Node) -> Result<(), FsError> {
    let mut buf = [0u8; 4];
    match op {
        FaultOp::Open => share
            .open(
                &ringshare_vfs::server_who(),
                &p("d/f"),
                &OpenOptions::read_existing(),
            )
            .map(drop),
        FaultOp::Read => node.read_at(&mut buf, 0).map(drop),
        FaultOp::Write => node.write_at(b"w", 0).map(drop),
        FaultOp::Sync => node.sync(),
        FaultOp::SetLen => node.set_len(1),
        FaultOp::Rename => share
            .rename(&ringshare_vfs::server_who(), &p("d/f"), &p("d/g"), false)
            .and_then(|()| share.rename(&ringshare_vfs::server_who(), &p("d/g"), &p("d/f"), false)),
        FaultOp::Unlink => {
            drop(write_file(share, "d/tmp", b""));
            share.unlink(&ringshare_vfs::server_who(), &p("d/tmp"))
        }
        FaultOp::ReadDir => dir.read_dir().map(drop),
        FaultOp::Stat => share
            .stat(&ringshare_vfs::server_who(), &p("d/f"))
            .map(drop),
        FaultOp::OpenStream => node
            .open_stream("s", OpenMode::OpenOrCreate, true)
            .map(drop),
    }
}

#[test]
fn injected_fault_fires_exactly_times_then_clears_for_every_op() {
    for op in [
        FaultOp::Open,
        FaultOp::Read,
        FaultOp::Write,
        FaultOp::Sync,
        FaultOp::SetLen,
        FaultOp::Rename,
        FaultOp::Unlink,
        FaultOp::ReadDir,
        FaultOp::Stat,
        FaultOp::OpenStream,
    ] {
        let share = MemShare::new();
        mkdir(&share, "d");
        let node = write_file(&share, "d/f", b"data");
        let dir = open(&share, "d", dir_opts(OpenMode::Existing))
            .unwrap()
            .node;
        run(op, &share, node.as_ref(), dir.as_ref()).unwrap();
        share.inject_fault(op, None, FsError::Io, 3);
        for i in 0..3 {
            assert_eq!(
                run(op, &share, node.as_ref(), dir.as_ref()),
                Err(FsError::Io),
                "{op:?} #{i}"
            );
        }
        run(op, &share, node.as_ref(), dir.as_ref())
            .unwrap_or_else(|e| panic!("{op:?} after: {e:?}"));
    }
}

#[test]
fn fault_with_a_path_prefix_hits_only_paths_beneath_it() {
    let share = MemShare::new();
    mkdir(&share, "a");
    mkdir(&share, "ab");
    drop(write_file(&share, "a/x", b"1"));
    drop(write_file(&share, "ab/x", b"1"));
    share.inject_fault(FaultOp::Stat, Some(p("a")), FsError::AccessDenied, 1);
    share
        .stat(&ringshare_vfs::server_who(), &p("ab/x"))
        .unwrap();
    assert_eq!(
        share
            .stat(&ringshare_vfs::server_who(), &p("a/x"))
            .unwrap_err(),
        FsError::AccessDenied
    );
    share.stat(&ringshare_vfs::server_who(), &p("a/x")).unwrap();
}

#[test]
fn node_faults_match_the_path_the_node_was_opened_with() {
    let share = MemShare::new();
    let keep = write_file(&share, "keep", b"k");
    let hit = write_file(&share, "hit", b"h");
    share.inject_fault(FaultOp::Write, Some(p("hit")), FsError::NoSpace, 1);
    keep.write_at(b"K", 0).unwrap();
    assert_eq!(hit.write_at(b"H", 0).unwrap_err(), FsError::NoSpace);
    hit.write_at(b"H", 0).unwrap();
}

#[test]
fn zero_times_injects_nothing_and_clear_faults_removes_pending_ones() {
    let share = MemShare::new();
    drop(write_file(&share, "f", b""));
    share.inject_fault(FaultOp::Stat, None, FsError::Io, 0);
    share.stat(&ringshare_vfs::server_who(), &p("f")).unwrap();
    share.inject_fault(FaultOp::Stat, None, FsError::Io, 5);
    share.clear_faults();
    share.stat(&ringshare_vfs::server_who(), &p("f")).unwrap();
}

#[test]
fn writes_past_the_capacity_give_no_space() {
    let share = MemShare::new().with_capacity_bytes(10);
    let n = write_file(&share, "a", b"12345678");
    assert_eq!(n.write_at(b"abcd", 8).unwrap_err(), FsError::NoSpace);
    assert_eq!(n.stat().unwrap().size, 8, "a refused write changes nothing");
    assert_eq!(n.write_at(b"ab", 8).unwrap(), 2);
    assert_eq!(
        n.write_at(b"XY", 0).unwrap(),
        2,
        "overwriting needs no space"
    );
    assert_eq!(n.set_len(11).unwrap_err(), FsError::NoSpace);
    let m = open(&share, "b", file_opts(OpenMode::CreateNew))
        .unwrap()
        .node;
    assert_eq!(m.write_at(b"x", 0).unwrap_err(), FsError::NoSpace);
    assert_eq!(n.write_at(b"x", u64::MAX).unwrap_err(), FsError::NoSpace);
    assert_eq!(share.statfs().unwrap().free_blocks, 0);
}

#[test]
fn unlinking_frees_space_once_the_last_node_closes() {
    let share = MemShare::new().with_capacity_bytes(10);
    let n = write_file(&share, "a", b"1234567890");
    share.unlink(&ringshare_vfs::server_who(), &p("a")).unwrap();
    assert_eq!(share.used_bytes(), 10, "still open");
    drop(n);
    assert_eq!(share.used_bytes(), 0);
    drop(write_file(&share, "b", b"123456"));
    drop(write_file(&share, "c", b"1234"));
    share
        .rename(&ringshare_vfs::server_who(), &p("c"), &p("b"), true)
        .unwrap();
    assert_eq!(share.used_bytes(), 4, "the replaced file is freed");
}

#[test]
fn stream_bytes_count_against_the_capacity_and_come_back_when_freed() {
    let share = MemShare::new().with_capacity_bytes(100);
    let f = write_file(&share, "f", b"0123456789");
    let s = f.open_stream("s", OpenMode::CreateNew, true).unwrap().node;
    s.write_at(&[1; 50], 0).unwrap();
    assert_eq!(share.used_bytes(), 60);
    assert_eq!(s.write_at(&[2; 41], 50), Err(FsError::NoSpace));
    assert_eq!(s.set_len(91), Err(FsError::NoSpace));
    assert_eq!(s.size().unwrap(), 50, "a refused write changes nothing");
    s.write_at(&[2; 40], 50).unwrap();
    assert_eq!(share.used_bytes(), 100);
    // Truncating, removing and replacing give the bytes back.
    drop(f.open_stream("s", OpenMode::Truncate, true).unwrap());
    assert_eq!(share.used_bytes(), 10);
    let t = f.open_stream("t", OpenMode::CreateNew, true).unwrap().node;
    t.write_at(&[3; 30], 0).unwrap();
    s.write_at(&[4; 20], 0).unwrap();
    assert_eq!(share.used_bytes(), 60);
    f.rename_stream("t", "S", true).unwrap();
    assert_eq!(share.used_bytes(), 40, "the replaced stream is freed");
    f.remove_stream("S").unwrap();
    assert_eq!(share.used_bytes(), 10);
    assert_eq!(s.write_at(&[5; 5], 0), Err(FsError::NotFound), "replaced");
    drop((s, t));
    // A stream open after its file is unlinked holds its bytes until closed.
    let s = f.open_stream("u", OpenMode::CreateNew, true).unwrap().node;
    s.write_at(&[6; 7], 0).unwrap();
    drop(f);
    share.unlink(&ringshare_vfs::server_who(), &p("f")).unwrap();
    assert_eq!(share.used_bytes(), 17);
    drop(s);
    assert_eq!(share.used_bytes(), 0);
    drop(write_file(&share, "g", b""));
    let g = open(&share, "g", file_opts(OpenMode::Existing))
        .unwrap()
        .node;
    let gs = g.open_stream("x", OpenMode::CreateNew, true).unwrap().node;
    gs.write_at(&[7; 9], 0).unwrap();
    drop((g, gs));
    drop(write_file(&share, "h", b"1"));
    share
        .rename(&ringshare_vfs::server_who(), &p("h"), &p("g"), true)
        .unwrap();
    assert_eq!(share.used_bytes(), 1, "a replaced file's streams are freed");
    share.unlink(&ringshare_vfs::server_who(), &p("g")).unwrap();
    assert_eq!(share.used_bytes(), 0);
}

#[test]
fn clock_is_deterministic_and_settable() {
    let make = || {
        let share = MemShare::new();
        let n = write_file(&share, "f", b"x");
        (n.stat().unwrap(), share)
    };
    let (a, _s1) = make();
    let (b, share) = make();
    assert_eq!(a, b);
    assert_eq!(a.btime, Some(MEM_CLOCK_START_NS + MEM_CLOCK_TICK_NS));
    assert!(a.mtime > a.btime.unwrap());
    share.set_clock(42);
    assert_eq!(share.clock(), 42);
    let n = open(&share, "g", file_opts(OpenMode::CreateNew))
        .unwrap()
        .node;
    assert_eq!(n.stat().unwrap().btime, Some(42));
    let other = MemShare::with_clock(-5);
    drop(write_file(&other, "f", b""));
    assert_eq!(
        other
            .stat(&ringshare_vfs::server_who(), &p("f"))
            .unwrap()
            .btime,
        Some(-5 + MEM_CLOCK_TICK_NS)
    );
}

#[test]
fn memory_nodes_have_no_fd() {
    let share = MemShare::new();
    let n = write_file(&share, "f", b"x");
    assert!(n.fd().is_none());
}

#[test]
fn clones_share_one_tree() {
    let a = MemShare::new();
    let b = a.clone();
    drop(write_file(&a, "f", b"shared"));
    assert_eq!(read_file(&b, "f"), b"shared");
}
