//! READ, WRITE, FLUSH, LOCK, compounds, signing and IOCTL.
use crate::support;

use std::sync::Arc;

use ringshare_core::{IoSizes, SigningPolicy};
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::{RelPath, Share};
use ringshare_wire::consts::{Command, CreateDisposition as D, Dialect};
use ringshare_wire::create::CreateResponse;
use ringshare_wire::{FileId, NtStatus};
use support::*;

const SHARED: u32 = 1;
const EXCLUSIVE: u32 = 2;
const UNLOCK: u32 = 4;
const FAIL_IMMEDIATELY: u32 = 0x10;

fn open_rw(c: &mut Client, name: &str) -> FileId {
    c.create(name, GENERIC_READ | GENERIC_WRITE, D::OPEN_IF, 0)
        .unwrap()
}

#[test]
fn write_then_read_returns_the_data_after_the_body() {
    let mut c = Client::new();
    let f = open_rw(&mut c, "rw");
    let w = c.write(f, 3, b"abc");
    assert_eq!(w.status(), NtStatus::SUCCESS);
    assert_eq!(u32::from_le_bytes(w.body()[4..8].try_into().unwrap()), 3);
    let r = c.read(f, 0, 100);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(r.body()[2], 0x50, "DataOffset");
    assert_eq!(read_data(&r), b"\0\0\0abc");
}

#[test]
fn a_handle_with_append_access_only_writes_where_the_request_says() {
    // smbtorture 4.22 smb2.rw.append: Windows and Samba 4.22 write at the
    // offset, not at the end of the file.
    const FILE_APPEND_DATA: u32 = 0x4;
    const SYNCHRONIZE: u32 = 0x0010_0000;
    let mut c = Client::new();
    c.put_file("log", b"x");
    let f = c
        .create("log", FILE_APPEND_DATA | SYNCHRONIZE, D::OPEN, 0)
        .unwrap();
    assert_eq!(c.write(f, 0, b"y").status(), NtStatus::SUCCESS);
    assert_eq!(c.write(f, 4, b"z").status(), NtStatus::SUCCESS);
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    let f = c.create("log", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(read_data(&c.read(f, 0, 100)), b"y\0\0\0z");
}

#[test]
fn read_past_end_of_file_is_end_of_file() {
    let mut c = Client::new();
    c.put_file("short", b"12");
    let f = c.create("short", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(c.read(f, 2, 10).status(), NtStatus::END_OF_FILE);
    assert_eq!(c.read(f, 1000, 10).status(), NtStatus::END_OF_FILE);
    let tree = c.tree_id;
    let r = c.call(Command::READ, tree, |o| read_body(o, f, 0, 10, 5));
    assert_eq!(
        r.status(),
        NtStatus::END_OF_FILE,
        "fewer bytes than MinimumCount"
    );
}

#[test]
fn read_without_read_access_is_access_denied_and_of_a_directory_invalid_device_request() {
    let mut c = Client::new();
    c.put_file("w", b"1");
    let f = c.create("w", GENERIC_WRITE, D::OPEN, 0).unwrap();
    assert_eq!(c.read(f, 0, 1).status(), NtStatus::ACCESS_DENIED);
    let d = c.create("", GENERIC_READ, D::OPEN, 1).unwrap();
    assert_eq!(c.read(d, 0, 1).status(), NtStatus::INVALID_DEVICE_REQUEST);
}

#[test]
fn read_larger_than_the_credit_charge_covers_is_invalid_parameter() {
    let mut c = Client::new();
    c.put_file("big", b"1");
    let f = c.create("big", GENERIC_READ, D::OPEN, 0).unwrap();
    // CreditCharge 1 covers 64 KiB.
    let tree = c.tree_id;
    let r = c.call(Command::READ, tree, |o| read_body(o, f, 0, 65537, 0));
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn configured_max_read_write_and_trans_sizes_are_enforced() {
    let mem = MemShare::new();
    let mut config = config_on(Arc::new(mem.clone()), SigningPolicy::IfRequired);
    config.io_sizes = IoSizes::new(128 << 10, 256 << 10, 64 << 10);
    let mut c = Client::on(server_from(config), mem, Options::default());
    c.put_file("big", &[7; 256 << 10]);
    let f = c
        .create("big", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    assert_eq!(c.read(f, 0, 128 << 10).status(), NtStatus::SUCCESS);
    assert_eq!(
        c.read(f, 0, (128 << 10) + 1).status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(c.write(f, 0, &[1; 256 << 10]).status(), NtStatus::SUCCESS);
    assert_eq!(
        c.write(f, 0, &[1; (256 << 10) + 1]).status(),
        NtStatus::INVALID_PARAMETER
    );
    let d = c.create("", 0x0012_0089, D::OPEN, 1).unwrap();
    assert_eq!(
        c.query_directory(d, 37, 0, "*", 64 << 10).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(
        c.query_directory(d, 37, 0, "*", (64 << 10) + 1).status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn read_larger_than_max_read_size_on_smb_2_0_2_is_invalid_parameter() {
    let mut c = Client::with(Options {
        dialect: Dialect::SMB2_0_2,
        signing: SigningPolicy::IfRequired,
    });
    c.put_file("big", b"1");
    let f = c.create("big", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(c.read(f, 0, 65537).status(), NtStatus::INVALID_PARAMETER);
    assert_eq!(read_data(&c.read(f, 0, 65536)), b"1");
}

#[test]
fn write_to_read_only_share_is_access_denied() {
    let mut c = Client::new();
    c.put_file("ro", b"1");
    let ro = c.ro_tree_id;
    let f = c
        .create_on(ro, "ro", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .unwrap();
    let r = c.call(Command::WRITE, ro, |o| write_body(o, f, 0, b"x"));
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
}

#[test]
fn write_at_all_ones_offset_is_invalid_parameter_like_windows_and_samba() {
    let mut c = Client::new();
    c.put_file("log", b"one");
    let f = open_rw(&mut c, "log");
    assert_eq!(
        c.write(f, u64::MAX, b"two").status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(read_data(&c.read(f, 0, 100)), b"one");
}

#[test]
fn io_past_i64_max_or_the_largest_file_is_invalid_parameter() {
    const MAX_FILE: u64 = 0x0FFF_FFFF_0000;
    let mut c = Client::new();
    let f = open_rw(&mut c, "edge");
    let max = i64::MAX as u64;
    assert_eq!(c.read(f, max - 1, 1).status(), NtStatus::END_OF_FILE);
    assert_eq!(c.read(f, max, 0).status(), NtStatus::SUCCESS);
    assert_eq!(c.read(f, max, 1).status(), NtStatus::INVALID_PARAMETER);
    assert_eq!(c.read(f, max + 1, 0).status(), NtStatus::INVALID_PARAMETER);
    assert_eq!(c.write(f, max, b"").status(), NtStatus::SUCCESS);
    assert_eq!(c.write(f, max, b"x").status(), NtStatus::INVALID_PARAMETER);
    assert_eq!(
        c.write(f, max + 1, b"").status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        c.write(f, MAX_FILE, b"x").status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(c.write(f, MAX_FILE, b"").status(), NtStatus::SUCCESS);
}

#[test]
fn flush_needs_write_access_but_a_directory_flushes() {
    let mut c = Client::new();
    c.put_file("fl", b"1");
    let r = c.create("fl", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(c.flush(r).status(), NtStatus::ACCESS_DENIED);
    let w = open_rw(&mut c, "fl");
    assert_eq!(c.flush(w).status(), NtStatus::SUCCESS);
    let d = c.create("", GENERIC_READ, D::OPEN, 1).unwrap();
    assert_eq!(c.flush(d).status(), NtStatus::SUCCESS);
}

#[test]
fn an_unknown_file_id_is_file_closed() {
    let mut c = Client::new();
    let bogus = FileId {
        persistent: 77,
        volatile: 77,
    };
    assert_eq!(c.read(bogus, 0, 1).status(), NtStatus::FILE_CLOSED);
    assert_eq!(c.write(bogus, 0, b"1").status(), NtStatus::FILE_CLOSED);
    assert_eq!(c.close(bogus).status(), NtStatus::FILE_CLOSED);
}

#[test]
fn exclusive_lock_blocks_read_from_another_open() {
    let mut c = Client::new();
    c.put_file("locked", b"0123456789");
    let a = open_rw(&mut c, "locked");
    let b = open_rw(&mut c, "locked");
    assert_eq!(
        c.lock(a, &[(0, 5, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::SUCCESS
    );
    assert_eq!(c.read(b, 0, 3).status(), NtStatus::FILE_LOCK_CONFLICT);
    assert_eq!(c.write(b, 4, b"x").status(), NtStatus::FILE_LOCK_CONFLICT);
    assert_eq!(read_data(&c.read(b, 5, 5)), b"56789", "outside the range");
    assert_eq!(read_data(&c.read(a, 0, 3)), b"012", "the owner still reads");
    assert_eq!(c.lock(a, &[(0, 5, UNLOCK)]).status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&c.read(b, 0, 3)), b"012");
}

#[test]
fn lock_flag_rules_follow_the_spec() {
    let mut c = Client::new();
    c.put_file("lk", b"");
    let a = open_rw(&mut c, "lk");
    assert_eq!(
        c.lock(a, &[(0, 1, UNLOCK)]).status(),
        NtStatus::RANGE_NOT_LOCKED
    );
    assert_eq!(
        c.lock(a, &[(0, 1, SHARED | EXCLUSIVE)]).status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        c.lock(a, &[(0, 1, EXCLUSIVE), (5, 1, EXCLUSIVE)]).status(),
        NtStatus::INVALID_PARAMETER,
        "several elements must all fail immediately"
    );
    // Unlock elements are processed in order; a lock element among them is invalid.
    assert_eq!(c.lock(a, &[(0, 1, EXCLUSIVE)]).status(), NtStatus::SUCCESS);
    assert_eq!(
        c.lock(a, &[(0, 1, UNLOCK), (5, 1, EXCLUSIVE)]).status(),
        NtStatus::INVALID_PARAMETER
    );
    assert_eq!(
        c.lock(a, &[(u64::MAX, 2, EXCLUSIVE | FAIL_IMMEDIATELY)])
            .status(),
        NtStatus(0xC000_01A1),
        "INVALID_LOCK_RANGE"
    );
}

#[test]
fn a_failed_multi_element_lock_rolls_back_the_ranges_it_took() {
    let mut c = Client::new();
    c.put_file("lk", b"");
    let a = open_rw(&mut c, "lk");
    let b = open_rw(&mut c, "lk");
    assert_eq!(
        c.lock(b, &[(10, 1, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::SUCCESS
    );
    let r = c.lock(
        a,
        &[
            (0, 1, EXCLUSIVE | FAIL_IMMEDIATELY),
            (10, 1, EXCLUSIVE | FAIL_IMMEDIATELY),
        ],
    );
    assert_eq!(r.status(), NtStatus::LOCK_NOT_GRANTED);
    // a's first range was given back: b can lock it.
    assert_eq!(
        c.lock(b, &[(0, 1, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::SUCCESS
    );
}

#[test]
fn a_blocking_lock_goes_pending_and_is_granted_after_the_holder_unlocks() {
    let mut c = Client::new();
    c.put_file("bl", b"");
    let a = open_rw(&mut c, "bl");
    let b = open_rw(&mut c, "bl");
    assert_eq!(c.lock(a, &[(0, 10, EXCLUSIVE)]).status(), NtStatus::SUCCESS);
    let interim = c.lock(b, &[(0, 10, EXCLUSIVE)]);
    assert_eq!(interim.status(), NtStatus::PENDING);
    assert!(interim.hdr.is_async());
    assert!(c.tick(20).is_empty(), "still blocked");
    assert_eq!(c.lock(a, &[(0, 10, UNLOCK)]).status(), NtStatus::SUCCESS);
    let done = c.tick(20);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].status(), NtStatus::SUCCESS);
    assert_eq!(done[0].hdr.async_id(), interim.hdr.async_id());
    // Now b holds it.
    assert_eq!(
        c.lock(a, &[(0, 10, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::LOCK_NOT_GRANTED
    );
}

#[test]
fn closing_a_handle_releases_its_locks() {
    let mut c = Client::new();
    c.put_file("cl", b"abc");
    let a = open_rw(&mut c, "cl");
    let b = open_rw(&mut c, "cl");
    assert_eq!(
        c.lock(a, &[(0, 3, EXCLUSIVE | FAIL_IMMEDIATELY)]).status(),
        NtStatus::SUCCESS
    );
    c.close(a);
    assert_eq!(read_data(&c.read(b, 0, 3)), b"abc");
}

#[test]
fn compound_create_read_close_returns_three_responses() {
    let mut c = Client::new();
    c.put_file("cmp", b"compound!");
    let tree = c.tree_id;
    let m1 = c.create_msg(tree, "cmp", GENERIC_READ, SHARE_ALL, D::OPEN, 0);
    let m2 = c.read_msg(FileId::ANY, 0, 64);
    let m3 = c.close_msg(FileId::ANY, 0);
    let rs = c.compound(vec![m1, m2, m3], true);
    assert_eq!(rs.len(), 3);
    assert_eq!(rs[0].status(), NtStatus::SUCCESS);
    assert_eq!(rs[1].status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&rs[1]), b"compound!");
    assert_eq!(rs[2].status(), NtStatus::SUCCESS);
    let fid = CreateResponse::decode(&rs[0].msg).unwrap().file_id;
    assert_eq!(
        c.close(fid).status(),
        NtStatus::FILE_CLOSED,
        "the compound closed it"
    );
}

#[test]
fn compound_create_write_close_writes_the_payload() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let m1 = c.create_msg(
        tree,
        "cw",
        GENERIC_READ | GENERIC_WRITE,
        SHARE_ALL,
        D::CREATE,
        0,
    );
    let m2 = c.message(Command::WRITE, tree, |o| {
        write_body(o, FileId::ANY, 0, b"payload")
    });
    let m3 = c.close_msg(FileId::ANY, 0);
    let rs = c.compound(vec![m1, m2, m3], true);
    assert!(
        rs.iter().all(|r| r.status() == NtStatus::SUCCESS),
        "{:?}",
        rs.iter().map(|r| r.status()).collect::<Vec<_>>()
    );
    let f = c.create("cw", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(read_data(&c.read(f, 0, 64)), b"payload");
    assert_eq!(
        c.mem
            .stat(
                &ringshare_vfs::server_who(),
                &RelPath::from_components(["cw"]).unwrap()
            )
            .unwrap()
            .size,
        7
    );
}

#[test]
fn a_related_compound_after_a_failed_create_fails_the_same_way() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let m1 = c.create_msg(tree, "missing", GENERIC_READ, SHARE_ALL, D::OPEN, 0);
    let m2 = c.read_msg(FileId::ANY, 0, 64);
    let rs = c.compound(vec![m1, m2], true);
    assert_eq!(rs[0].status(), NtStatus::OBJECT_NAME_NOT_FOUND);
    assert_eq!(rs[1].status(), NtStatus::OBJECT_NAME_NOT_FOUND);
}

#[test]
fn signed_session_rejects_a_request_with_a_bad_signature() {
    let mut c = Client::with(Options {
        dialect: Dialect::SMB2_0_2,
        signing: SigningPolicy::Required,
    });
    assert!(c.signing.is_some());
    c.put_file("s", b"signed");
    let f = c.create("s", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(
        read_data(&c.read(f, 0, 6)),
        b"signed",
        "well-signed requests work"
    );
    let mut m = c.read_msg(f, 0, 6);
    c.sign(&mut m);
    m[60] ^= 0xFF;
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
}

#[test]
fn an_unsigned_request_is_refused_on_a_session_that_requires_signing_and_taken_on_one_that_does_not(
) {
    for (signing, status) in [
        (SigningPolicy::Required, NtStatus::ACCESS_DENIED),
        (SigningPolicy::IfRequired, NtStatus::SUCCESS),
    ] {
        let mut c = Client::with(Options {
            dialect: Dialect::SMB2_0_2,
            signing,
        });
        c.put_file("u", b"plain");
        let f = c.create("u", GENERIC_READ, D::OPEN, 0).unwrap();
        let m = c.read_msg(f, 0, 5);
        let r = c.send_frame(m).remove(0);
        assert_eq!(r.status(), status, "{signing:?}");
    }
}

#[test]
fn ioctl_without_the_fsctl_flag_is_not_supported_and_unknown_fs_controls_invalid_device_request() {
    let mut c = Client::new();
    c.put_file("io", b"");
    let f = c.create("io", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(
        c.ioctl(f, 0x0009_00A8, &[], 1024, 0).status(),
        NtStatus::NOT_SUPPORTED
    );
    assert_eq!(
        c.ioctl(f, 0x0009_00A8, &[], 1024, 1).status(),
        NtStatus::NOT_A_REPARSE_POINT
    );
    assert_eq!(
        c.ioctl(f, 0x0009_0064, &[], 1024, 1).status(),
        NtStatus::INVALID_DEVICE_REQUEST
    );
    assert_eq!(
        c.ioctl(FileId::ANY, 0x0014_01FC, &[], 1024, 1).status(),
        NtStatus::NOT_SUPPORTED
    );
}

fn validate_input(caps: u32, guid: [u8; 16], mode: u16, dialects: &[u16]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&caps.to_le_bytes());
    v.extend_from_slice(&guid);
    v.extend_from_slice(&mode.to_le_bytes());
    v.extend_from_slice(&(dialects.len() as u16).to_le_bytes());
    for d in dialects {
        v.extend_from_slice(&d.to_le_bytes());
    }
    v
}

#[test]
fn validate_negotiate_info_echoes_the_negotiation_and_a_mismatch_drops_the_connection() {
    let mut c = Client::with(Options {
        dialect: Dialect::SMB3_0_2,
        signing: SigningPolicy::IfRequired,
    });
    let good = validate_input(0, [9; 16], 1, &[0x0302]);
    let r = c.ioctl(FileId::ANY, 0x0014_0204, &good, 24, 1);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let body = r.body();
    let out_off = u32::from_le_bytes(body[32..36].try_into().unwrap()) as usize;
    let out_len = u32::from_le_bytes(body[36..40].try_into().unwrap()) as usize;
    assert_eq!(out_len, 24);
    let out = &r.msg[out_off..out_off + out_len];
    assert_eq!(&out[4..20], &[7u8; 16], "server guid");
    assert_eq!(u16::from_le_bytes([out[22], out[23]]), 0x0302);
    assert!(!c.closed);
    let bad = validate_input(0, [8; 16], 1, &[0x0302]);
    c.ioctl(FileId::ANY, 0x0014_0204, &bad, 24, 1);
    assert!(c.closed, "a mismatch closes the connection");
}

#[test]
fn reads_and_writes_move_the_position_to_where_they_ended() {
    let position = |c: &mut Client, f: FileId| {
        let r = c.query_info(f, 1, 14, 0, 8); // FilePositionInformation
        assert_eq!(r.status(), NtStatus::SUCCESS);
        u64::from_le_bytes(output_buffer(&r)[..8].try_into().unwrap())
    };
    let mut c = Client::new();
    let f = open_rw(&mut c, "pos");
    assert_eq!(position(&mut c, f), 0);
    assert_eq!(c.write(f, 0, b"0123456789abc").status(), NtStatus::SUCCESS);
    assert_eq!(position(&mut c, f), 13);
    let r = c.read(f, 2, 5);
    assert_eq!(read_data(&r), b"23456");
    assert_eq!(position(&mut c, f), 7);
    // A short read stops where the data ends.
    c.read(f, 10, 100);
    assert_eq!(position(&mut c, f), 13);
    // A failed read leaves the position alone.
    assert_eq!(c.read(f, 50, 1).status(), NtStatus::END_OF_FILE);
    assert_eq!(position(&mut c, f), 13);
}
