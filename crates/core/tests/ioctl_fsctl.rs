//! FSCTLs served by IOCTL ([MS-SMB2] 3.3.5.15): server-side copy, sparse
//! files, allocated ranges, compression; driven through a whole connection.

use crate::support;

use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::ioctl::{
    FileAllocatedRangeBuffer, FileZeroDataInformation, IoctlResponse, SrvCopychunkResponse,
    SrvRequestResumeKeyResponse,
};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const IS_FSCTL: u32 = 1;
const FSCTL_SRV_REQUEST_RESUME_KEY: u32 = 0x0014_0078;
const FSCTL_SRV_COPYCHUNK: u32 = 0x0014_40F2;
const FSCTL_SRV_COPYCHUNK_WRITE: u32 = 0x0014_80F2;
const FSCTL_SET_SPARSE: u32 = 0x0009_00C4;
const FSCTL_SET_ZERO_DATA: u32 = 0x0009_80C8;
const FSCTL_QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
const FSCTL_GET_COMPRESSION: u32 = 0x0009_003C;
const FSCTL_SET_COMPRESSION: u32 = 0x0009_C040;

const FILE_READ_DATA: u32 = 0x1;
const FILE_WRITE_DATA: u32 = 0x2;
const FILE_WRITE_EA: u32 = 0x10;
const FILE_EXECUTE: u32 = 0x20;
const FILE_WRITE_ATTRIBUTES: u32 = 0x100;
const SYNCHRONIZE: u32 = 0x0010_0000;
const ATTR_SPARSE_FILE: u32 = 0x200;
const DIRECTORY_FILE: u32 = 0x1;

fn output(r: &Resp) -> Vec<u8> {
    IoctlResponse::decode(&r.msg)
        .expect("an IOCTL response body")
        .output
        .to_vec()
}

fn open(c: &mut Client, name: &str, access: u32) -> FileId {
    c.create(name, access, CreateDisposition::OPEN_IF, 0)
        .expect("open")
}

fn resume_key(c: &mut Client, f: FileId) -> [u8; 24] {
    let r = c.ioctl(f, FSCTL_SRV_REQUEST_RESUME_KEY, &[], 32, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = output(&r);
    assert_eq!(out.len(), 32);
    SrvRequestResumeKeyResponse::decode(&out)
        .unwrap()
        .resume_key
}

fn copy(
    c: &mut Client,
    dst: FileId,
    ctl: u32,
    input: &[u8],
) -> (NtStatus, Option<SrvCopychunkResponse>) {
    let r = c.ioctl(dst, ctl, input, 12, IS_FSCTL);
    let out = IoctlResponse::decode(&r.msg)
        .ok()
        .and_then(|i| SrvCopychunkResponse::decode(i.output).ok());
    (r.status(), out)
}

fn read_all(c: &mut Client, f: FileId, len: u32) -> Vec<u8> {
    let r = c.read(f, 0, len);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    read_data(&r)
}

/// Source "src" with `len` pattern bytes and an empty destination "dst", both
/// opened for everything.
fn src_and_dst(c: &mut Client, len: usize) -> (FileId, FileId) {
    c.put_file("src", &pattern(len, 0));
    c.put_file("dst", b"");
    let src = open(c, "src", GENERIC_ALL);
    let dst = open(c, "dst", GENERIC_ALL);
    (src, dst)
}

fn attributes(c: &mut Client, f: FileId) -> u32 {
    let r = c.query_info(f, 1, 4, 0, 40);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let b = output_buffer(&r);
    u32::from_le_bytes(b[32..36].try_into().unwrap())
}

fn ranges(c: &mut Client, f: FileId, off: i64, len: i64) -> Result<Vec<(i64, i64)>, NtStatus> {
    let mut input = Vec::new();
    FileAllocatedRangeBuffer {
        file_offset: off,
        length: len,
    }
    .encode(&mut input);
    let r = c.ioctl(f, FSCTL_QUERY_ALLOCATED_RANGES, &input, 1024, IS_FSCTL);
    if r.status() != NtStatus::SUCCESS {
        return Err(r.status());
    }
    Ok(FileAllocatedRangeBuffer::decode_list(&output(&r))
        .unwrap()
        .into_iter()
        .map(|a| (a.file_offset, a.length))
        .collect())
}

fn zero(c: &mut Client, f: FileId, off: i64, beyond: i64) -> NtStatus {
    let mut input = Vec::new();
    FileZeroDataInformation {
        file_offset: off,
        beyond_final_zero: beyond,
    }
    .encode(&mut input);
    c.ioctl(f, FSCTL_SET_ZERO_DATA, &input, 0, IS_FSCTL)
        .status()
}

#[test]
fn resume_key_is_32_bytes_and_differs_between_opens() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 10);
    let a = resume_key(&mut c, src);
    assert_eq!(resume_key(&mut c, src), a, "stable for one open");
    assert_ne!(resume_key(&mut c, dst), a);
    let r = c.ioctl(src, FSCTL_SRV_REQUEST_RESUME_KEY, &[], 24, IS_FSCTL);
    assert_eq!(
        r.status(),
        NtStatus::INVALID_PARAMETER,
        "no room for the key"
    );
}

#[test]
fn copychunk_copies_each_chunk_and_reports_the_totals() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 8192);
    let key = resume_key(&mut c, src);
    // Two chunks: the second one appends the first half again.
    let input = copychunk_input(key, &[(0, 0, 4096), (0, 4096, 4096)]);
    let (st, resp) = copy(&mut c, dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(
        resp.unwrap(),
        SrvCopychunkResponse {
            chunks_written: 2,
            chunk_bytes_written: 0,
            total_bytes_written: 8192
        }
    );
    let got = read_all(&mut c, dst, 8192);
    assert_eq!(&got[..4096], &pattern(4096, 0)[..]);
    assert_eq!(&got[4096..], &pattern(4096, 0)[..]);
}

#[test]
fn copychunk_within_one_file_behaves_as_read_then_write() {
    let mut c = Client::new();
    let (src, _dst) = src_and_dst(&mut c, 4096);
    let key = resume_key(&mut c, src);
    let input = copychunk_input(key, &[(0, 2040, 2048)]);
    let (st, _) = copy(&mut c, src, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::SUCCESS);
    let got = read_all(&mut c, src, 4096);
    assert_eq!(&got[2040..4088], &pattern(2048, 0)[..]);
}

#[test]
fn copychunk_over_the_limits_answers_invalid_parameter_carrying_the_limits() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 4096);
    let key = resume_key(&mut c, src);
    let limits = SrvCopychunkResponse {
        chunks_written: 256,
        chunk_bytes_written: 1 << 20,
        total_bytes_written: 16 << 20,
    };
    for chunks in [
        vec![(0, 0, u32::MAX)],
        vec![(0, 0, 0)],
        vec![(0, 0, 1 << 20); 17],
        vec![(0, 0, 1); 257],
    ] {
        let (st, resp) = copy(
            &mut c,
            dst,
            FSCTL_SRV_COPYCHUNK,
            &copychunk_input(key, &chunks),
        );
        assert_eq!(st, NtStatus::INVALID_PARAMETER, "{} chunks", chunks.len());
        assert_eq!(resp, Some(limits));
    }
    let r = c.read(dst, 0, 10);
    assert_eq!(r.status(), NtStatus::END_OF_FILE, "nothing was written");
}

#[test]
fn copychunk_with_an_unknown_key_is_object_name_not_found() {
    let mut c = Client::new();
    let (_src, dst) = src_and_dst(&mut c, 4096);
    let input = copychunk_input(*b"deadbeefdeadbeefdeadbeef", &[(0, 0, 4096)]);
    assert_eq!(
        copy(&mut c, dst, FSCTL_SRV_COPYCHUNK, &input).0,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
}

#[test]
fn copychunk_of_a_closed_source_is_object_name_not_found() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 4096);
    let key = resume_key(&mut c, src);
    assert_eq!(c.close(src).status(), NtStatus::SUCCESS);
    let input = copychunk_input(key, &[(0, 0, 4096)]);
    assert_eq!(
        copy(&mut c, dst, FSCTL_SRV_COPYCHUNK, &input).0,
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
}

#[test]
fn copychunk_checks_read_on_the_source_and_write_and_read_on_the_destination() {
    let mut c = Client::new();
    c.put_file("src", &pattern(4096, 0));
    c.put_file("dst", b"");
    let all_src = open(&mut c, "src", GENERIC_ALL);
    let all_dst = open(&mut c, "dst", GENERIC_ALL);
    let write_only_src = open(&mut c, "src", GENERIC_WRITE);
    let read_exec_dst = open(&mut c, "dst", FILE_READ_DATA | FILE_EXECUTE | SYNCHRONIZE);
    let write_exec_dst = open(&mut c, "dst", FILE_WRITE_DATA | FILE_EXECUTE | SYNCHRONIZE);

    let key = resume_key(&mut c, write_only_src);
    let input = copychunk_input(key, &[(0, 0, 4096)]);
    let (st, _) = copy(&mut c, all_dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::ACCESS_DENIED, "source not readable");
    let exec_only_src = open(&mut c, "src", FILE_EXECUTE | FILE_READ_ATTRIBUTES);
    let key = resume_key(&mut c, exec_only_src);
    let input = copychunk_input(key, &[(0, 0, 4096)]);
    let (st, _) = copy(&mut c, all_dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::SUCCESS, "execute is enough on the source");

    let key = resume_key(&mut c, all_src);
    let input = copychunk_input(key, &[(0, 0, 4096)]);
    let (st, _) = copy(&mut c, read_exec_dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::ACCESS_DENIED, "destination not writable");
    let (st, _) = copy(&mut c, write_exec_dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(
        st,
        NtStatus::ACCESS_DENIED,
        "COPYCHUNK reads the destination too"
    );
    let (st, resp) = copy(&mut c, write_exec_dst, FSCTL_SRV_COPYCHUNK_WRITE, &input);
    assert_eq!(st, NtStatus::SUCCESS, "COPYCHUNK_WRITE does not");
    assert_eq!(resp.unwrap().total_bytes_written, 4096);
}

#[test]
fn copychunk_past_the_source_end_is_invalid_view_size_after_the_chunks_before_it() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 8192);
    let key = resume_key(&mut c, src);
    let input = copychunk_input(key, &[(0, 0, 4096), (4096, 4096, 8192)]);
    let (st, resp) = copy(&mut c, dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::INVALID_VIEW_SIZE);
    assert_eq!(
        resp.unwrap(),
        SrvCopychunkResponse {
            chunks_written: 1,
            chunk_bytes_written: 0,
            total_bytes_written: 4096
        }
    );
    assert_eq!(read_all(&mut c, dst, 8192), pattern(4096, 0));
}

#[test]
fn copychunk_over_a_range_another_open_locked_is_a_lock_conflict_with_a_response() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 4096);
    let other = open(&mut c, "src", GENERIC_ALL);
    // Exclusive lock (flags 2) on the source range by another open.
    assert_eq!(c.lock(other, &[(0, 4096, 2)]).status(), NtStatus::SUCCESS);
    let key = resume_key(&mut c, src);
    let input = copychunk_input(key, &[(0, 0, 4096)]);
    let (st, resp) = copy(&mut c, dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::FILE_LOCK_CONFLICT);
    assert_eq!(resp, Some(SrvCopychunkResponse::default()));
    // Unlock (flags 4): the same copy now goes through.
    assert_eq!(c.lock(other, &[(0, 4096, 4)]).status(), NtStatus::SUCCESS);
    let (st, resp) = copy(&mut c, dst, FSCTL_SRV_COPYCHUNK, &input);
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(resp.unwrap().chunks_written, 1);
}

#[test]
fn copychunk_finds_a_source_opened_on_another_tree_of_the_session() {
    let mut c = Client::new();
    c.put_file("src", &pattern(4096, 0));
    let tree2 = c.tree_connect("share");
    let src = c
        .create_on(
            tree2,
            "src",
            GENERIC_ALL,
            SHARE_ALL,
            CreateDisposition::OPEN,
            0,
        )
        .unwrap();
    let r = c.call(ringshare_wire::consts::Command::IOCTL, tree2, |o| {
        use ringshare_wire::WriteExt;
        o.put_u16(57);
        o.put_u16(0);
        o.put_u32(FSCTL_SRV_REQUEST_RESUME_KEY);
        src.write(o);
        o.put_u32(0);
        o.put_u32(0);
        o.put_u32(0);
        o.put_u32(0);
        o.put_u32(0);
        o.put_u32(32);
        o.put_u32(IS_FSCTL);
        o.put_u32(0);
        o.put_u8(0);
    });
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let key = SrvRequestResumeKeyResponse::decode(&output(&r))
        .unwrap()
        .resume_key;
    c.put_file("dst", b"");
    let dst = open(&mut c, "dst", GENERIC_ALL);
    let (st, _) = copy(
        &mut c,
        dst,
        FSCTL_SRV_COPYCHUNK,
        &copychunk_input(key, &[(0, 0, 4096)]),
    );
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(read_all(&mut c, dst, 4096), pattern(4096, 0));
}

#[test]
fn copychunk_with_no_room_for_the_response_is_invalid_parameter() {
    let mut c = Client::new();
    let (src, dst) = src_and_dst(&mut c, 4096);
    let key = resume_key(&mut c, src);
    let input = copychunk_input(key, &[(0, 0, 4096)]);
    let r = c.ioctl(dst, FSCTL_SRV_COPYCHUNK, &input, 11, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn set_sparse_sets_and_clears_the_attribute_and_an_empty_buffer_means_set() {
    let mut c = Client::new();
    c.put_file("f", b"x");
    let f = open(&mut c, "f", GENERIC_ALL);
    assert_eq!(attributes(&mut c, f) & ATTR_SPARSE_FILE, 0);
    let set =
        |c: &mut Client, input: &[u8]| c.ioctl(f, FSCTL_SET_SPARSE, input, 0, IS_FSCTL).status();
    assert_eq!(set(&mut c, &[0xFF]), NtStatus::SUCCESS);
    assert_ne!(attributes(&mut c, f) & ATTR_SPARSE_FILE, 0);
    assert_eq!(
        set(&mut c, &[0; 100]),
        NtStatus::SUCCESS,
        "oversize buffer, first byte clears"
    );
    assert_eq!(attributes(&mut c, f) & ATTR_SPARSE_FILE, 0);
    assert_eq!(set(&mut c, &[]), NtStatus::SUCCESS);
    assert_eq!(set(&mut c, &[]), NtStatus::SUCCESS, "does not toggle");
    assert_ne!(attributes(&mut c, f) & ATTR_SPARSE_FILE, 0);
}

#[test]
fn set_sparse_needs_a_write_right_and_a_file() {
    let mut c = Client::new();
    c.put_file("f", b"x");
    let ea_only = open(&mut c, "f", FILE_WRITE_EA);
    let r = c.ioctl(ea_only, FSCTL_SET_SPARSE, &[1], 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    let attr_only = open(&mut c, "f", FILE_WRITE_ATTRIBUTES);
    let r = c.ioctl(attr_only, FSCTL_SET_SPARSE, &[1], 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let d = c
        .create("d", GENERIC_ALL, CreateDisposition::CREATE, DIRECTORY_FILE)
        .unwrap();
    let r = c.ioctl(d, FSCTL_SET_SPARSE, &[1], 0, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn zero_data_zeroes_inside_the_file_and_never_changes_its_size() {
    let mut c = Client::new();
    c.put_file("f", &pattern(8192, 0));
    let f = open(&mut c, "f", GENERIC_ALL);
    assert_eq!(zero(&mut c, f, 1000, 3000), NtStatus::SUCCESS);
    assert_eq!(
        zero(&mut c, f, 8192, 9000),
        NtStatus::SUCCESS,
        "past the end"
    );
    assert_eq!(
        zero(&mut c, f, 4095, 4095),
        NtStatus::SUCCESS,
        "empty range"
    );
    assert_eq!(zero(&mut c, f, 4096, 4095), NtStatus::INVALID_PARAMETER);
    assert_eq!(zero(&mut c, f, -1, 4095), NtStatus::INVALID_PARAMETER);
    let got = read_all(&mut c, f, 10_000);
    assert_eq!(got.len(), 8192);
    assert_eq!(&got[..1000], &pattern(1000, 0)[..]);
    assert!(got[1000..3000].iter().all(|b| *b == 0));
    assert_eq!(&got[3000..], &pattern(5192, 3000)[..]);
}

#[test]
fn zero_data_needs_write_data_and_respects_locks() {
    let mut c = Client::new();
    c.put_file("f", &pattern(8192, 0));
    let f = open(&mut c, "f", GENERIC_ALL);
    let attr_only = open(&mut c, "f", FILE_WRITE_ATTRIBUTES);
    assert_eq!(zero(&mut c, attr_only, 0, 4096), NtStatus::ACCESS_DENIED);
    let other = open(&mut c, "f", GENERIC_ALL);
    assert_eq!(c.lock(other, &[(0, 4096, 2)]).status(), NtStatus::SUCCESS);
    assert_eq!(zero(&mut c, f, 0, 4096), NtStatus::FILE_LOCK_CONFLICT);
    assert_eq!(zero(&mut c, f, 4096, 8192), NtStatus::SUCCESS);
}

#[test]
fn allocated_ranges_of_a_file_cover_the_request_up_to_the_end_of_file() {
    let mut c = Client::new();
    c.put_file("f", b"");
    let f = open(&mut c, "f", GENERIC_ALL);
    for half in [0, 65_536] {
        let r = c.write(f, half as u64, &pattern(65_536, half));
        assert_eq!(r.status(), NtStatus::SUCCESS);
    }
    assert_eq!(ranges(&mut c, f, 0, 131_071), Ok(vec![(0, 131_071)]));
    assert_eq!(ranges(&mut c, f, 0, 131_073), Ok(vec![(0, 131_072)]));
    assert_eq!(ranges(&mut c, f, 1, 131_072), Ok(vec![(1, 131_071)]));
    assert_eq!(ranges(&mut c, f, 0, 0), Ok(vec![]));
    assert_eq!(ranges(&mut c, f, 131_072, 10), Ok(vec![]));
    assert_eq!(ranges(&mut c, f, 512, -1), Err(NtStatus::INVALID_PARAMETER));
    // The sparse flag changes nothing for a backend without holes.
    assert_eq!(
        c.ioctl(f, FSCTL_SET_SPARSE, &[], 0, IS_FSCTL).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(ranges(&mut c, f, 10, 100), Ok(vec![(10, 100)]));
}

#[test]
fn allocated_ranges_check_the_buffers_and_read_access() {
    let mut c = Client::new();
    c.put_file("f", b"");
    let f = open(&mut c, "f", GENERIC_ALL);
    let mut q = Vec::new();
    FileAllocatedRangeBuffer {
        file_offset: 0,
        length: 1024,
    }
    .encode(&mut q);
    let qar = |c: &mut Client, f, input: &[u8], max| {
        c.ioctl(f, FSCTL_QUERY_ALLOCATED_RANGES, input, max, IS_FSCTL)
    };
    assert_eq!(
        qar(&mut c, f, &q, 0).status(),
        NtStatus::SUCCESS,
        "nothing to report"
    );
    assert_eq!(c.write(f, 0, &[1; 1024]).status(), NtStatus::SUCCESS);
    assert_eq!(qar(&mut c, f, &q, 0).status(), NtStatus::BUFFER_TOO_SMALL);
    let doubled = [q.clone(), q.clone()].concat();
    assert_eq!(qar(&mut c, f, &doubled, 1024).status(), NtStatus::SUCCESS);
    assert_eq!(
        qar(&mut c, f, &[], 1024).status(),
        NtStatus::INVALID_PARAMETER
    );
    let attr_only = open(&mut c, "f", FILE_READ_ATTRIBUTES);
    assert_eq!(
        qar(&mut c, attr_only, &q, 1024).status(),
        NtStatus::ACCESS_DENIED
    );
}

#[test]
fn compression_is_reported_off_and_only_off_can_be_set() {
    let mut c = Client::new();
    c.put_file("f", b"");
    let f = open(&mut c, "f", GENERIC_ALL);
    let r = c.ioctl(f, FSCTL_GET_COMPRESSION, &[], 2, IS_FSCTL);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(output(&r), [0, 0]);
    let set = |c: &mut Client, fmt: u16| {
        c.ioctl(f, FSCTL_SET_COMPRESSION, &fmt.to_le_bytes(), 0, IS_FSCTL)
            .status()
    };
    assert_eq!(set(&mut c, 0), NtStatus::SUCCESS);
    assert_eq!(set(&mut c, 1), NtStatus::NOT_SUPPORTED);
    assert_eq!(set(&mut c, 2), NtStatus::NOT_SUPPORTED);
    assert_eq!(set(&mut c, 0x42), NtStatus::INVALID_PARAMETER);
}

#[test]
fn the_file_system_reports_sparse_file_support() {
    let mut c = Client::new();
    c.put_file("f", b"");
    let f = open(&mut c, "f", GENERIC_READ);
    let r = c.query_info(f, 2, 5, 0, 1024);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let b = output_buffer(&r);
    let flags = u32::from_le_bytes(b[0..4].try_into().unwrap());
    assert_ne!(flags & 0x40, 0, "FILE_SUPPORTS_SPARSE_FILES");
}
