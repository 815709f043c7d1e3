//! Backend failures reach the client as the right NTSTATUS, in-process over the memory backend
//! with injected faults: read, write, create, rename, delete, query directory, set info, flush
//! and a full disk. Each fault is used up once; the next request on the same connection works.
use crate::support;

use ringshare_vfs::memory::{FaultOp, MemShare};
use ringshare_vfs::{FsError, RelPath};
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::fscc::{decode_dir_entries, FileInfoClass};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const FILE_INFO: u8 = 1;
const FILE_RENAME_INFORMATION: u8 = 10;
const FILE_DISPOSITION_INFORMATION: u8 = 13;
const FILE_END_OF_FILE_INFORMATION: u8 = 20;
const FILE_BASIC_INFORMATION: u8 = 4;
const FILE_NAMES_INFORMATION: u8 = 0x0C;
const FILE_DIRECTORY_FILE: u32 = 1;
const FILE_LIST_DIRECTORY: u32 = 1;

fn path(p: &str) -> Option<RelPath> {
    Some(RelPath::from_components(p.split('/')).expect("path"))
}

fn open_rw(c: &mut Client, name: &str) -> FileId {
    c.create(name, GENERIC_READ | GENERIC_WRITE | DELETE, D::OPEN_IF, 0)
        .expect("open")
}

#[test]
fn a_read_that_fails_with_an_io_error_is_io_device_error_and_the_next_read_works() {
    let mut c = Client::new();
    c.put_file("r.txt", b"payload");
    let f = open_rw(&mut c, "r.txt");
    c.mem
        .inject_fault(FaultOp::Read, path("r.txt"), FsError::Io, 1);
    assert_eq!(c.read(f, 0, 100).status(), NtStatus::IO_DEVICE_ERROR);
    let r = c.read(f, 0, 100);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&r), b"payload");
}

#[test]
fn a_write_that_fails_is_disk_full_for_no_space_and_io_device_error_for_io() {
    let mut c = Client::new();
    let f = open_rw(&mut c, "w.txt");
    c.mem
        .inject_fault(FaultOp::Write, path("w.txt"), FsError::NoSpace, 1);
    assert_eq!(c.write(f, 0, b"abc").status(), NtStatus::DISK_FULL);
    c.mem
        .inject_fault(FaultOp::Write, path("w.txt"), FsError::Io, 1);
    assert_eq!(c.write(f, 0, b"abc").status(), NtStatus::IO_DEVICE_ERROR);
    c.mem
        .inject_fault(FaultOp::Write, None, FsError::ReadOnly, 1);
    assert_eq!(
        c.write(f, 0, b"abc").status(),
        NtStatus::MEDIA_WRITE_PROTECTED
    );
    assert_eq!(c.write(f, 0, b"abc").status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&c.read(f, 0, 10)), b"abc");
}

#[test]
fn writes_past_the_backend_capacity_are_disk_full_and_leave_earlier_data() {
    let mem = MemShare::new().with_capacity_bytes(64 * 1024);
    let srv = server(&mem, ringshare_core::SigningPolicy::IfRequired);
    let mut c = Client::on(srv, mem, Options::default());
    let f = open_rw(&mut c, "big.bin");
    assert_eq!(c.write(f, 0, &[1u8; 32 * 1024]).status(), NtStatus::SUCCESS);
    assert_eq!(
        c.write(f, 32 * 1024, &[2u8; 64 * 1024]).status(),
        NtStatus::DISK_FULL
    );
    let r = c.read(f, 0, 32 * 1024);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(read_data(&r).iter().all(|&b| b == 1));
    // Extending the file by SET_INFO past the capacity is DISK_FULL too.
    let eof = (1u64 << 20).to_le_bytes();
    assert_eq!(
        c.set_info(f, FILE_INFO, FILE_END_OF_FILE_INFORMATION, &eof)
            .status(),
        NtStatus::DISK_FULL
    );
}

#[test]
fn a_create_that_fails_in_the_backend_gets_the_mapped_status() {
    let mut c = Client::new();
    for (err, want) in [
        (FsError::Io, NtStatus::IO_DEVICE_ERROR),
        (FsError::AccessDenied, NtStatus::ACCESS_DENIED),
        (FsError::NoSpace, NtStatus::DISK_FULL),
        (FsError::Busy, NtStatus::SHARING_VIOLATION),
    ] {
        c.mem.inject_fault(FaultOp::Open, path("c.txt"), err, 1);
        assert_eq!(
            c.create("c.txt", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0),
            Err(want),
            "{err:?}"
        );
    }
    assert!(c
        .create("c.txt", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .is_ok());
}

#[test]
fn a_rename_that_fails_in_the_backend_gets_the_mapped_status_and_keeps_the_old_name() {
    let mut c = Client::new();
    c.put_file("old.txt", b"x");
    let f = open_rw(&mut c, "old.txt");
    for (err, want) in [
        (FsError::Io, NtStatus::IO_DEVICE_ERROR),
        (FsError::AccessDenied, NtStatus::ACCESS_DENIED),
        (FsError::CrossDevice, NtStatus::NOT_SAME_DEVICE),
    ] {
        c.mem.inject_fault(FaultOp::Rename, path("old.txt"), err, 1);
        let r = c.set_info(
            f,
            FILE_INFO,
            FILE_RENAME_INFORMATION,
            &rename_info("new.txt", false),
        );
        assert_eq!(r.status(), want, "{err:?}");
    }
    assert!(c.create("new.txt", GENERIC_READ, D::OPEN, 0).is_err());
    let r = c.set_info(
        f,
        FILE_INFO,
        FILE_RENAME_INFORMATION,
        &rename_info("new.txt", false),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    c.close(f);
    assert!(c.create("new.txt", GENERIC_READ, D::OPEN, 0).is_ok());
}

#[test]
fn a_delete_that_fails_in_the_backend_is_reported_and_the_file_stays() {
    let mut c = Client::new();
    c.put_file("gone.txt", b"x");
    let f = open_rw(&mut c, "gone.txt");
    assert_eq!(
        c.set_info(f, FILE_INFO, FILE_DISPOSITION_INFORMATION, &[1])
            .status(),
        NtStatus::SUCCESS
    );
    c.mem
        .inject_fault(FaultOp::Unlink, path("gone.txt"), FsError::Io, 1);
    // The handle is closed either way ([MS-SMB2] 3.3.5.10 removes the Open).
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    // The file was not deleted, and nothing pretends it was: it can be opened again.
    let g = c
        .create("gone.txt", GENERIC_READ | DELETE, D::OPEN, 0)
        .expect("the file whose unlink failed is still there");
    // And a delete that works removes it.
    assert_eq!(
        c.set_info(g, FILE_INFO, FILE_DISPOSITION_INFORMATION, &[1])
            .status(),
        NtStatus::SUCCESS
    );
    assert_eq!(c.close(g).status(), NtStatus::SUCCESS);
    assert_eq!(
        c.create("gone.txt", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

#[test]
fn a_directory_listing_that_fails_in_the_backend_is_io_device_error_and_a_retry_lists() {
    let mut c = Client::new();
    c.put_file("d1.txt", b"x");
    let d = c
        .create("", FILE_LIST_DIRECTORY, D::OPEN, FILE_DIRECTORY_FILE)
        .expect("open root");
    c.mem.inject_fault(FaultOp::ReadDir, None, FsError::Io, 1);
    let r = c.query_directory(d, FILE_NAMES_INFORMATION, 1, "*", 65536);
    assert_eq!(r.status(), NtStatus::IO_DEVICE_ERROR);
    let r = c.query_directory(d, FILE_NAMES_INFORMATION, 1, "*", 65536);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let names = output_buffer(&r);
    let want: Vec<u8> = "d1.txt"
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    assert!(names.windows(want.len()).any(|w| w == want));
}

#[test]
fn an_entry_that_cannot_be_described_ends_the_page_and_fails_the_next_query() {
    let mut c = Client::new();
    for name in ["a", "b", "c"] {
        c.put_file(name, b"x");
    }
    let d = c
        .create("", FILE_LIST_DIRECTORY, D::OPEN, FILE_DIRECTORY_FILE)
        .expect("open root");
    // Entries are described when they are returned: "b" fails twice.
    c.mem.inject_fault(FaultOp::Stat, path("b"), FsError::Io, 2);
    let names = |r: &Resp| -> Vec<String> {
        decode_dir_entries(FileInfoClass(FILE_NAMES_INFORMATION), &output_buffer(r))
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect()
    };
    let r = c.query_directory(d, FILE_NAMES_INFORMATION, 0, "*", 65536);
    assert_eq!(names(&r), [".", "..", "a"], "the page stops before b");
    let r = c.query_directory(d, FILE_NAMES_INFORMATION, 0, "*", 65536);
    assert_eq!(r.status(), NtStatus::IO_DEVICE_ERROR);
    let r = c.query_directory(d, FILE_NAMES_INFORMATION, 0, "*", 65536);
    assert_eq!(names(&r), ["b", "c"], "nothing was skipped");
    let r = c.query_directory(d, FILE_NAMES_INFORMATION, 0, "*", 65536);
    assert_eq!(r.status(), NtStatus::NO_MORE_FILES);
}

#[test]
fn set_info_that_fails_in_the_backend_gets_the_mapped_status() {
    let mut c = Client::new();
    let f = open_rw(&mut c, "s.txt");
    let eof = 4096u64.to_le_bytes();
    for (err, want) in [
        (FsError::Io, NtStatus::IO_DEVICE_ERROR),
        (FsError::NoSpace, NtStatus::DISK_FULL),
        (FsError::ReadOnly, NtStatus::MEDIA_WRITE_PROTECTED),
    ] {
        c.mem.inject_fault(FaultOp::SetLen, path("s.txt"), err, 1);
        let r = c.set_info(f, FILE_INFO, FILE_END_OF_FILE_INFORMATION, &eof);
        assert_eq!(r.status(), want, "{err:?}");
    }
    let r = c.set_info(f, FILE_INFO, FILE_END_OF_FILE_INFORMATION, &eof);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    // Basic information on a file whose stat fails.
    c.mem
        .inject_fault(FaultOp::Stat, path("s.txt"), FsError::Io, 1);
    let r = c.query_info(f, FILE_INFO, FILE_BASIC_INFORMATION, 0, 40);
    assert_eq!(r.status(), NtStatus::IO_DEVICE_ERROR);
    let r = c.query_info(f, FILE_INFO, FILE_BASIC_INFORMATION, 0, 40);
    assert_eq!(r.status(), NtStatus::SUCCESS);
}

#[test]
fn a_flush_whose_sync_fails_is_io_device_error_not_success() {
    let mut c = Client::new();
    let f = open_rw(&mut c, "f.txt");
    assert_eq!(c.write(f, 0, b"data").status(), NtStatus::SUCCESS);
    c.mem
        .inject_fault(FaultOp::Sync, path("f.txt"), FsError::Io, 1);
    assert_eq!(c.flush(f).status(), NtStatus::IO_DEVICE_ERROR);
    assert_eq!(c.flush(f).status(), NtStatus::SUCCESS);
}

/// A CREATE sent alone: its interim response, if any, and the final one once it came.
fn create_waiting(c: &mut Client, name: &str) -> Vec<Resp> {
    let tree = c.tree_id;
    let mut m = c.create_msg(
        tree,
        name,
        GENERIC_READ | GENERIC_WRITE,
        SHARE_ALL,
        D::OPEN_IF,
        0,
    );
    c.sign(&mut m);
    c.send_frame(m)
}

#[test]
fn a_create_that_meets_a_local_kernel_lease_waits_until_the_holder_gives_it_up() {
    let mut c = Client::new();
    c.put_file("leased.txt", b"x");
    // The local holder gives its lease up after the open's third try.
    c.mem
        .inject_fault(FaultOp::Open, path("leased.txt"), FsError::LeaseHeld, 3);
    let first = create_waiting(&mut c, "leased.txt");
    assert!(
        first.iter().all(|r| r.status() == NtStatus::PENDING),
        "no answer yet but an interim one: {:?}",
        first.iter().map(|r| r.status()).collect::<Vec<_>>()
    );
    // Meanwhile other requests are served.
    assert!(c
        .create("other.txt", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .is_ok());
    // Tried again every second: the second and third tries meet the lease, the fourth goes
    // through.
    assert!(
        c.tick(1_000).is_empty(),
        "the second try meets the lease too"
    );
    assert!(
        c.tick(1_000).is_empty(),
        "the third try meets the lease too"
    );
    let done = c.tick(1_000);
    assert_eq!(
        done.iter().map(|r| r.status()).collect::<Vec<_>>(),
        vec![NtStatus::SUCCESS],
        "the fourth try's open goes through"
    );
}

#[test]
fn a_create_that_meets_a_local_kernel_lease_for_seventy_seconds_is_a_sharing_violation() {
    let mut c = Client::new();
    c.put_file("leased.txt", b"x");
    c.mem
        .inject_fault(FaultOp::Open, path("leased.txt"), FsError::LeaseHeld, 1_000);
    create_waiting(&mut c, "leased.txt");
    for _ in 0..69 {
        assert!(c.tick(1_000).is_empty(), "still waiting");
    }
    let done = c.tick(1_000);
    assert_eq!(
        done.iter().map(|r| r.status()).collect::<Vec<_>>(),
        vec![NtStatus::SHARING_VIOLATION]
    );
    c.mem.clear_faults();
    assert!(c
        .create("leased.txt", GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .is_ok());
}
