//! Server-side copy (`Node::copy_range`), hole punching (`Node::punch_hole`) and
//! allocated-range queries (`Node::allocated_ranges`) on both backends.

use crate::common;

use common::*;
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{FsError, Node, OpenMode, OpenOptions, Share};

/// Bytes whose value tells their offset (mod 251), so a misplaced copy shows.
fn pattern(len: usize, from: usize) -> Vec<u8> {
    (from..from + len).map(|i| (i % 251) as u8).collect()
}

fn both(test: impl Fn(&dyn Share)) {
    test(&MemShare::new());
    let dir = TempDir::new("copy");
    test(&PosixShare::new(dir.path()).expect("posix share"));
}

#[test]
fn copy_range_copies_between_files_at_offsets() {
    both(|share| {
        let src = write_file(share, "src", &pattern(10_000, 0));
        let dst = write_file(share, "dst", b"");
        assert_eq!(
            dst.copy_range(src.as_ref(), 1000, 4096, 3000).unwrap(),
            3000
        );
        let got = read_all(dst.as_ref());
        assert_eq!(got.len(), 4096 + 3000);
        assert!(
            got[..4096].iter().all(|b| *b == 0),
            "gap before the copy is zeros"
        );
        assert_eq!(&got[4096..], &pattern(3000, 1000)[..]);
    });
}

#[test]
fn copy_range_stops_at_the_end_of_the_source() {
    both(|share| {
        let src = write_file(share, "src", &pattern(100, 0));
        let dst = write_file(share, "dst", b"");
        assert_eq!(dst.copy_range(src.as_ref(), 60, 0, 1000).unwrap(), 40);
        assert_eq!(read_all(dst.as_ref()), pattern(40, 60));
    });
}

#[test]
fn copy_range_within_one_file_reads_an_overlapping_piece_before_writing_it() {
    both(|share| {
        let f = write_file(share, "f", &pattern(4096, 0));
        // Source 0..2048 and target 2040..4088 overlap by 8 bytes.
        assert_eq!(f.copy_range(f.as_ref(), 0, 2040, 2048).unwrap(), 2048);
        let got = read_all(f.as_ref());
        assert_eq!(&got[..2040], &pattern(2040, 0)[..]);
        assert_eq!(&got[2040..4088], &pattern(2048, 0)[..]);
        assert_eq!(&got[4088..], &pattern(8, 4088)[..]);
    });
}

#[test]
fn copy_range_into_a_read_only_open_is_refused() {
    both(|share| {
        let src = write_file(share, "src", &pattern(10, 0));
        drop(write_file(share, "dst", b"old"));
        let dst = share
            .open(
                &ringshare_vfs::server_who(),
                &p("dst"),
                &OpenOptions::read_existing(),
            )
            .unwrap()
            .node;
        let e = dst.copy_range(src.as_ref(), 0, 0, 10).unwrap_err();
        assert!(
            matches!(e, FsError::AccessDenied | FsError::ReadOnly),
            "{e:?}"
        );
        assert_eq!(read_all(dst.as_ref()), b"old");
    });
}

#[test]
fn punch_hole_zeros_the_range_and_keeps_the_size() {
    both(|share| {
        let f = write_file(share, "f", &pattern(3 * 65536, 0));
        f.punch_hole(65536, 65536).unwrap();
        // Past the end of file: nothing happens, the size stays.
        f.punch_hole(3 * 65536, 4096).unwrap();
        let got = read_all(f.as_ref());
        assert_eq!(got.len(), 3 * 65536);
        assert_eq!(&got[..65536], &pattern(65536, 0)[..]);
        assert!(got[65536..131072].iter().all(|b| *b == 0));
        assert_eq!(&got[131072..], &pattern(65536, 131072)[..]);
    });
}

#[test]
fn allocated_ranges_are_clipped_to_the_request_and_the_end_of_file() {
    both(|share| {
        let f = write_file(share, "f", &pattern(8192, 0));
        assert_eq!(f.allocated_ranges(0, 0).unwrap(), vec![]);
        assert_eq!(f.allocated_ranges(8192, 100).unwrap(), vec![]);
        assert_eq!(f.allocated_ranges(1, 8191).unwrap(), vec![(1, 8191)]);
        assert_eq!(f.allocated_ranges(100, 1 << 40).unwrap(), vec![(100, 8092)]);
        assert_eq!(f.allocated_ranges(10, u64::MAX).unwrap(), vec![(10, 8182)]);
    });
}

#[test]
fn posix_allocated_ranges_skip_punched_holes_on_tmpfs() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = shm.join(format!("ringshare-vfs-holes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let share = PosixShare::new(&dir).unwrap();
    let f = share
        .open(
            &ringshare_vfs::server_who(),
            &p("f"),
            &file_opts(OpenMode::TruncateOrCreate),
        )
        .unwrap()
        .node;
    f.write_at(&pattern(4 * 65536, 0), 0).unwrap();
    f.punch_hole(0, 65536).unwrap();
    f.punch_hole(2 * 65536, 65536).unwrap();
    let ranges = f.allocated_ranges(0, 4 * 65536).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(ranges, vec![(65536, 65536), (3 * 65536, 65536)]);
}

#[test]
fn memory_backend_reports_one_range_covering_the_data() {
    let share = MemShare::new();
    let f = write_file(&share, "f", &pattern(1000, 0));
    f.punch_hole(0, 500).unwrap();
    assert_eq!(f.allocated_ranges(0, 1000).unwrap(), vec![(0, 1000)]);
    assert!(read_all(f.as_ref())[..500].iter().all(|b| *b == 0));
}

/// A node that only has the trait's defaults, to check them on their own.
#[test]
fn default_methods_work_through_read_and_write_only() {
    let share = MemShare::new();
    let src = write_file(&share, "src", &pattern(3_000_000, 0));
    let dst = write_file(&share, "dst", b"");
    // More than one 1 MiB buffer's worth.
    assert_eq!(
        ringshare_vfs::copy_through_buffer(dst.as_ref(), src.as_ref(), 5, 0, 2_500_000).unwrap(),
        2_500_000
    );
    assert_eq!(read_all(dst.as_ref()), pattern(2_500_000, 5));
    ringshare_vfs::write_zeros(dst.as_ref(), 2_000_000, 1_000_000).unwrap();
    let got = read_all(dst.as_ref());
    assert_eq!(got.len(), 2_500_000);
    assert!(got[2_000_000..].iter().all(|b| *b == 0));
    let _: &dyn Node = dst.as_ref();
}
