//! Block cloning: FSCTL_DUPLICATE_EXTENTS_TO_FILE(_EX) ([MS-SMB2] 3.3.5.15,
//! [MS-FSA] 2.1.5.10.4/5) through a whole connection, on the in-memory
//! backend made to clone blocks (it copies, with the kernel's checks of a
//! clone). The answers are Samba 4.22's with `vfs objects = btrfs`.

use crate::support;

use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::dup_extents::{DuplicateExtents, DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const IS_FSCTL: u32 = 1;
const DUP: u32 = 0x0009_8344;
const DUP_EX: u32 = 0x0009_83E8;
const FSCTL_SET_SPARSE: u32 = 0x0009_00C4;
const FILE_READ_DATA: u32 = 0x1;
const FILE_WRITE_DATA: u32 = 0x2;
const SYNCHRONIZE: u32 = 0x0010_0000;
const BLOCK_REFCOUNTING: u32 = 0x0800_0000;
const BLOCK: u64 = 4096;

/// A client of a server whose share clones blocks (or not).
fn client(clones: bool) -> Client {
    let mem = MemShare::new().with_block_cloning(clones);
    let server = server(&mem, Options::default().signing);
    Client::on(server, mem, Options::default())
}

fn open(c: &mut Client, name: &str, access: u32) -> FileId {
    c.create(name, access, CreateDisposition::OPEN_IF, 0)
        .expect("open")
}

/// "src" holding `src_len` pattern bytes, "dst" holding `dst_len` zeros.
fn files(c: &mut Client, src_len: usize, dst_len: usize) -> (FileId, FileId) {
    c.put_file("src", &pattern(src_len, 0));
    c.put_file("dst", &vec![0; dst_len]);
    (open(c, "src", GENERIC_ALL), open(c, "dst", GENERIC_ALL))
}

fn input(src: FileId, s: u64, t: u64, n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    DuplicateExtents {
        source: src,
        source_offset: s,
        target_offset: t,
        byte_count: n,
        flags: 0,
    }
    .encode(&mut b);
    b
}

fn dup(c: &mut Client, dst: FileId, src: FileId, s: u64, t: u64, n: u64) -> NtStatus {
    c.ioctl(dst, DUP, &input(src, s, t, n), 0, IS_FSCTL)
        .status()
}

fn contents(c: &mut Client, f: FileId, len: u32) -> Vec<u8> {
    let r = c.read(f, 0, len);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    read_data(&r)
}

fn size(c: &mut Client, f: FileId) -> u64 {
    // FileStandardInformation: EndOfFile at 8.
    let r = c.query_info(f, 1, 5, 0, 24);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    u64::from_le_bytes(output_buffer(&r)[8..16].try_into().unwrap())
}

fn fs_attributes(c: &mut Client, f: FileId) -> u32 {
    let r = c.query_info(f, 2, 5, 0, 1024);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    u32::from_le_bytes(output_buffer(&r)[0..4].try_into().unwrap())
}

#[test]
fn a_clone_makes_the_target_range_hold_the_source_bytes() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, 4 * BLOCK as usize, 4 * BLOCK as usize);
    assert_eq!(
        dup(&mut c, dst, src, BLOCK, 2 * BLOCK, BLOCK),
        NtStatus::SUCCESS
    );
    let got = contents(&mut c, dst, 4 * BLOCK as u32);
    let b = BLOCK as usize;
    assert_eq!(&got[..2 * b], &vec![0; 2 * b][..]);
    assert_eq!(&got[2 * b..3 * b], &pattern(b, b)[..]);
    assert_eq!(&got[3 * b..], &vec![0; b][..]);
}

#[test]
fn the_file_system_reports_block_refcounting_only_where_it_clones() {
    let mut c = client(true);
    let (src, _) = files(&mut c, 10, 0);
    assert_ne!(fs_attributes(&mut c, src) & BLOCK_REFCOUNTING, 0);
    let mut c = client(false);
    let (src, _) = files(&mut c, 10, 0);
    assert_eq!(fs_attributes(&mut c, src) & BLOCK_REFCOUNTING, 0);
}

#[test]
fn a_share_that_does_not_clone_answers_invalid_device_request() {
    let mut c = client(false);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    assert_eq!(
        dup(&mut c, dst, src, 0, 0, BLOCK),
        NtStatus::INVALID_DEVICE_REQUEST
    );
}

#[test]
fn a_short_or_malformed_buffer_is_invalid_parameter() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let full = input(src, 0, 0, BLOCK);
    for cut in [0, 16, 39] {
        let r = c.ioctl(dst, DUP, &full[..cut], 0, IS_FSCTL);
        assert_eq!(r.status(), NtStatus::INVALID_PARAMETER, "{cut} bytes");
    }
    let mut ex = Vec::new();
    let d = DuplicateExtents::decode(&full).unwrap();
    d.encode_ex(&mut ex);
    ex[0] = 0x20; // StructureSize
    let r = c.ioctl(dst, DUP_EX, &ex, 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    let mut ex = Vec::new();
    DuplicateExtents { flags: 4, ..d }.encode_ex(&mut ex);
    let r = c.ioctl(dst, DUP_EX, &ex, 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER, "unknown flag");
}

#[test]
fn the_ex_form_with_source_atomic_clones_as_the_plain_one_does() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let mut ex = Vec::new();
    DuplicateExtents {
        source: src,
        source_offset: 0,
        target_offset: 0,
        byte_count: BLOCK,
        flags: DUPLICATE_EXTENTS_DATA_EX_SOURCE_ATOMIC,
    }
    .encode_ex(&mut ex);
    let r = c.ioctl(dst, DUP_EX, &ex, 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(
        contents(&mut c, dst, BLOCK as u32),
        pattern(BLOCK as usize, 0)
    );
}

#[test]
fn a_closed_target_is_file_closed_and_a_closed_or_unknown_source_is_invalid_handle() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let gone = open(&mut c, "gone", GENERIC_ALL);
    assert_eq!(c.close(gone).status(), NtStatus::SUCCESS);
    assert_eq!(dup(&mut c, gone, src, 0, 0, BLOCK), NtStatus::FILE_CLOSED);
    assert_eq!(
        dup(&mut c, dst, gone, 0, 0, BLOCK),
        NtStatus::INVALID_HANDLE
    );
    let bogus = FileId {
        persistent: 77,
        volatile: 99,
    };
    assert_eq!(
        dup(&mut c, dst, bogus, 0, 0, BLOCK),
        NtStatus::INVALID_HANDLE
    );
}

#[test]
fn a_source_opened_on_another_tree_is_invalid_handle() {
    let mut c = client(true);
    let (_, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let tree2 = c.tree_connect("share");
    let src = c
        .create_on(tree2, "src", GENERIC_ALL, 7, CreateDisposition::OPEN, 0)
        .unwrap();
    assert_eq!(dup(&mut c, dst, src, 0, 0, BLOCK), NtStatus::INVALID_HANDLE);
}

#[test]
fn a_clone_needs_read_on_the_source_and_write_on_the_target() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let src_write_only = open(&mut c, "src", FILE_WRITE_DATA | SYNCHRONIZE);
    let dst_read_only = open(&mut c, "dst", FILE_READ_DATA | SYNCHRONIZE);
    assert_eq!(
        dup(&mut c, dst, src_write_only, 0, 0, BLOCK),
        NtStatus::ACCESS_DENIED
    );
    assert_eq!(
        dup(&mut c, dst_read_only, src, 0, 0, BLOCK),
        NtStatus::ACCESS_DENIED
    );
    let dst_write_only = open(&mut c, "dst", FILE_WRITE_DATA | SYNCHRONIZE);
    assert_eq!(
        dup(&mut c, dst_write_only, src, 0, 0, BLOCK),
        NtStatus::SUCCESS
    );
}

#[test]
fn a_source_range_past_the_source_end_is_not_supported_and_changes_nothing() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, 2 * BLOCK as usize);
    assert_eq!(
        dup(&mut c, dst, src, 0, 0, 2 * BLOCK),
        NtStatus::NOT_SUPPORTED
    );
    assert_eq!(size(&mut c, src), BLOCK);
    assert_eq!(size(&mut c, dst), 2 * BLOCK);
}

#[test]
fn a_target_range_past_the_target_end_is_cut_to_it_and_the_target_does_not_grow() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, 4 * BLOCK as usize, BLOCK as usize);
    assert_eq!(dup(&mut c, dst, src, 0, 0, 4 * BLOCK), NtStatus::SUCCESS);
    assert_eq!(size(&mut c, dst), BLOCK);
    assert_eq!(
        contents(&mut c, dst, BLOCK as u32),
        pattern(BLOCK as usize, 0)
    );
    // Into an empty target: nothing to do.
    c.put_file("empty", b"");
    let empty = open(&mut c, "empty", GENERIC_ALL);
    assert_eq!(dup(&mut c, empty, src, 0, 0, BLOCK), NtStatus::SUCCESS);
    assert_eq!(size(&mut c, empty), 0);
    // A target offset past its end.
    assert_eq!(
        dup(&mut c, dst, src, 0, 2 * BLOCK, BLOCK),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn a_zero_length_clone_succeeds_and_changes_nothing() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, 0);
    assert_eq!(dup(&mut c, dst, src, 0, 0, 0), NtStatus::SUCCESS);
    assert_eq!(size(&mut c, dst), 0);
}

#[test]
fn offsets_that_wrap_are_invalid_parameter() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    assert_eq!(
        dup(&mut c, dst, src, u64::MAX - 10, 0, BLOCK),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        dup(&mut c, dst, src, 0, u64::MAX - 10, BLOCK),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn ranges_not_aligned_to_the_cluster_size_are_invalid_parameter() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, 4 * BLOCK as usize, 4 * BLOCK as usize);
    assert_eq!(
        dup(&mut c, dst, src, 512, 0, BLOCK),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        dup(&mut c, dst, src, 0, 512, BLOCK),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        dup(&mut c, dst, src, 0, 0, BLOCK + 1),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn overlapping_ranges_of_one_file_are_not_supported_and_disjoint_ones_clone() {
    let mut c = client(true);
    let (src, _) = files(&mut c, 4 * BLOCK as usize, 0);
    let same = open(&mut c, "src", GENERIC_ALL);
    assert_eq!(
        dup(&mut c, same, src, 0, BLOCK, 2 * BLOCK),
        NtStatus::NOT_SUPPORTED
    );
    assert_eq!(
        dup(&mut c, same, src, 0, 2 * BLOCK, 2 * BLOCK),
        NtStatus::SUCCESS
    );
    let got = contents(&mut c, src, 4 * BLOCK as u32);
    let b = 2 * BLOCK as usize;
    assert_eq!(&got[b..], &pattern(b, 0)[..]);
}

#[test]
fn a_sparse_source_into_a_non_sparse_target_is_not_supported() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let r = c.ioctl(src, FSCTL_SET_SPARSE, &[], 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(dup(&mut c, dst, src, 0, 0, BLOCK), NtStatus::NOT_SUPPORTED);
    let r = c.ioctl(dst, FSCTL_SET_SPARSE, &[], 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(dup(&mut c, dst, src, 0, 0, BLOCK), NtStatus::SUCCESS);
}

#[test]
fn a_byte_range_lock_does_not_stop_a_clone_as_on_refs_and_samba() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let other_src = open(&mut c, "src", GENERIC_ALL);
    let other_dst = open(&mut c, "dst", GENERIC_ALL);
    // Exclusive locks (flags 2) by other opens on both ranges.
    assert_eq!(
        c.lock(other_src, &[(0, BLOCK, 2)]).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        c.lock(other_dst, &[(0, BLOCK, 2)]).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        c.write(dst, 0, b"x").status(),
        NtStatus::FILE_LOCK_CONFLICT,
        "the lock holds against writes"
    );
    assert_eq!(dup(&mut c, dst, src, 0, 0, BLOCK), NtStatus::SUCCESS);
    assert_eq!(
        contents(&mut c, other_dst, BLOCK as u32),
        pattern(BLOCK as usize, 0)
    );
}

#[test]
fn a_directory_on_either_side_is_access_denied() {
    let mut c = client(true);
    let (src, dst) = files(&mut c, BLOCK as usize, BLOCK as usize);
    let dir = c
        .create("d", GENERIC_ALL, CreateDisposition::OPEN_IF, 1)
        .unwrap();
    // The in-memory backend gives a directory one block of size.
    assert_eq!(dup(&mut c, dst, dir, 0, 0, BLOCK), NtStatus::ACCESS_DENIED);
    assert_eq!(dup(&mut c, dir, src, 0, 0, BLOCK), NtStatus::ACCESS_DENIED);
}
