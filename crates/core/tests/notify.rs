//! CHANGE_NOTIFY ([MS-SMB2] 3.3.5.19): what watchers of a directory are told
//! when clients change it, and how requests, buffers and endings behave.

use crate::support;

use ringshare_wire::consts::{Command, CreateDisposition as D};
use ringshare_wire::fscc::{decode_notify_chain, FileRenameInformation};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const DIR: u32 = 0x1;
const DELETE_ON_CLOSE: u32 = 0x1000;
const ALL: u32 = 0xFFF;
const NAME: u32 = 0x3;
const ADDED: u32 = 1;
const REMOVED: u32 = 2;
const MODIFIED: u32 = 3;
const OLD_NAME: u32 = 4;
const NEW_NAME: u32 = 5;

fn two_clients() -> (Client, Client) {
    let a = Client::new();
    let b = Client::on(a.server.clone(), a.mem.clone(), Options::default());
    (a, b)
}

fn notify_msg(c: &mut Client, f: FileId, filter: u32, tree: bool, len: u32) -> Vec<u8> {
    let mut m = c.change_notify_msg(f, filter, tree, len);
    c.sign(&mut m);
    m
}

/// Send a CHANGE_NOTIFY; returns what came back at once (an interim, or
/// the final answer when changes were waiting).
fn notify(c: &mut Client, f: FileId, filter: u32, tree: bool, len: u32) -> Resp {
    let m = notify_msg(c, f, filter, tree, len);
    let mut rs = c.send_frame(m);
    assert_eq!(rs.len(), 1, "one response: {rs:?}");
    rs.remove(0)
}

/// A request that must wait: its interim.
fn pending(c: &mut Client, f: FileId, filter: u32, tree: bool, len: u32) -> Resp {
    let r = notify(c, f, filter, tree, len);
    assert_eq!(r.status(), NtStatus::PENDING, "went async");
    r
}

/// The final answer to a waiting request, from the responses `rs`.
fn final_of(rs: &[Resp], interim: &Resp) -> Resp {
    rs.iter()
        .find(|r| r.hdr.message_id == interim.hdr.message_id && r.status() != NtStatus::PENDING)
        .cloned()
        .unwrap_or_else(|| panic!("no answer to the CHANGE_NOTIFY among {rs:?}"))
}

fn changes(r: &Resp) -> Vec<(u32, String)> {
    assert_eq!(r.status(), NtStatus::SUCCESS, "{r:?}");
    decode_notify_chain(&output_buffer(r))
        .expect("well-formed FILE_NOTIFY_INFORMATION")
        .into_iter()
        .map(|c| (c.action, c.file_name))
        .collect()
}

fn ch(action: u32, name: &str) -> (u32, String) {
    (action, name.to_string())
}

fn mkdir(c: &mut Client, name: &str) {
    let d = c.create(name, GENERIC_ALL, D::CREATE, DIR).unwrap();
    assert_eq!(c.close(d).status(), NtStatus::SUCCESS);
}

fn delete(c: &mut Client, name: &str, options: u32) {
    let f = c
        .create(
            name,
            DELETE | GENERIC_READ,
            D::OPEN,
            DELETE_ON_CLOSE | options,
        )
        .unwrap();
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}

fn rename(c: &mut Client, name: &str, to: &str) {
    let f = c.create(name, GENERIC_READ | DELETE, D::OPEN, 0).unwrap();
    let mut b = Vec::new();
    FileRenameInformation {
        replace_if_exists: false,
        root_directory: 0,
        file_name: to.into(),
    }
    .encode(&mut b);
    assert_eq!(c.set_info(f, 1, 10, &b).status(), NtStatus::SUCCESS);
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}

/// Make a directory on `c`'s own connection; every response that came back
/// (the answers of `c`'s waiting requests among them).
fn mkdir_seeing(c: &mut Client, name: &str) -> Vec<Resp> {
    let t = c.tree_id;
    let mut m = c.create_msg(t, name, GENERIC_ALL, SHARE_ALL, D::CREATE, DIR);
    c.sign(&mut m);
    let mut rs = c.send_frame(m);
    let f = ringshare_wire::create::CreateResponse::decode(&rs[0].msg)
        .expect("created")
        .file_id;
    let mut m = c.close_msg(f, 0);
    c.sign(&mut m);
    rs.extend(c.send_frame(m));
    rs
}

fn watch(c: &mut Client, name: &str) -> FileId {
    c.create(name, GENERIC_READ, D::OPEN_IF, DIR).unwrap()
}

#[test]
fn a_file_another_client_creates_is_reported_added_to_the_waiting_request() {
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "w");
    let interim = pending(&mut a, d, ALL, false, 4096);
    b.put_file("w\\new.txt", b"");
    let r = final_of(&a.pump(), &interim);
    assert_eq!(changes(&r), vec![ch(ADDED, "new.txt")]);
    assert_eq!(
        r.hdr.credits, 0,
        "the final reply of an async request grants none"
    );
}

#[test]
fn a_written_file_is_reported_modified_when_its_handle_closes_not_at_each_write() {
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "w");
    let interim = pending(&mut a, d, ALL, false, 65536);
    let f = b
        .create("w\\f", GENERIC_READ | GENERIC_WRITE, D::CREATE, 0)
        .unwrap();
    assert_eq!(
        changes(&final_of(&a.pump(), &interim)),
        vec![ch(ADDED, "f")]
    );
    for i in 0..5 {
        b.write(f, i * 10, b"0123456789");
    }
    let interim = pending(&mut a, d, ALL, false, 65536);
    assert!(a.pump().is_empty(), "writes alone report nothing");
    b.close(f);
    assert_eq!(
        changes(&final_of(&a.pump(), &interim)),
        vec![ch(MODIFIED, "f")]
    );
}

#[test]
fn the_valid_req_sequence_gives_added_then_enum_dir_then_removed_added_modified() {
    // smbtorture smb2.notify.valid-req, on one connection.
    let mut a = Client::new();
    let d = watch(&mut a, "v");
    let interim = pending(&mut a, d, ALL, false, 65536);
    let t = a.tree_id;
    let mut m = a.create_msg(
        t,
        "v\\f",
        GENERIC_READ | GENERIC_WRITE,
        SHARE_ALL,
        D::OVERWRITE_IF,
        0,
    );
    a.sign(&mut m);
    let rs = a.send_frame(m);
    assert_eq!(rs.len(), 2, "the CREATE's reply, then the answer: {rs:?}");
    assert_eq!(changes(&final_of(&rs, &interim)), vec![ch(ADDED, "f")]);
    let f = ringshare_wire::create::CreateResponse::decode(&rs[0].msg)
        .unwrap()
        .file_id;
    a.write(f, 0, b"x");
    a.close(f);
    // The MODIFIED of the close is buffered; a zero-byte buffer cannot hold it.
    let r = notify(&mut a, d, ALL, false, 0);
    assert_eq!(r.status(), NtStatus::NOTIFY_ENUM_DIR);
    // Delete and make it again while no request waits: all three buffered.
    delete(&mut a, "v\\f", 0);
    a.put_file("v\\f", b"y");
    let r = notify(&mut a, d, ALL, false, 65536);
    assert_eq!(
        changes(&r),
        vec![ch(REMOVED, "f"), ch(ADDED, "f"), ch(MODIFIED, "f")],
        "answered at once, without an interim"
    );
}

#[test]
fn the_first_requests_buffer_size_stays_the_watchs_capacity() {
    let mut a = Client::new();
    let d = watch(&mut a, "one");
    let interim = pending(&mut a, d, ALL, false, 1);
    let r = final_of(&mkdir_seeing(&mut a, "one\\x"), &interim);
    assert_eq!(r.status(), NtStatus::NOTIFY_ENUM_DIR);
    mkdir(&mut a, "one\\y");
    let r = notify(&mut a, d, ALL, false, 65536);
    assert_eq!(
        r.status(),
        NtStatus::NOTIFY_ENUM_DIR,
        "if the first gets ENUM_DIR, all do"
    );
}

#[test]
fn changes_before_the_first_request_are_not_reported_and_later_ones_are_buffered() {
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "b");
    mkdir(&mut b, "b\\before");
    let interim = pending(&mut a, d, NAME, false, 4096);
    let fin = a.cancel_async(&interim);
    assert_eq!(fin[0].status(), NtStatus::CANCELLED);
    for n in ["b\\d1", "b\\d2"] {
        mkdir(&mut b, n);
    }
    delete(&mut b, "b\\d1", DIR);
    // The later request's filter (LAST_WRITE only) is ignored: the first stays.
    let r = notify(&mut a, d, 0x10, false, 4096);
    assert_eq!(
        changes(&r),
        vec![ch(ADDED, "d1"), ch(ADDED, "d2"), ch(REMOVED, "d1")]
    );
}

#[test]
fn a_second_handle_sees_only_changes_after_its_own_first_request() {
    let (mut a, mut b) = two_clients();
    let h1 = watch(&mut a, "two");
    let i1 = pending(&mut a, h1, NAME, false, 4096);
    a.cancel_async(&i1);
    for i in 0..10 {
        b.put_file(&format!("two\\test{i}.txt"), b"");
    }
    let h2 = watch(&mut a, "two");
    let i2 = pending(&mut a, h2, NAME, false, 4096);
    let r = notify(&mut a, h1, NAME, false, 4096);
    let got = changes(&r);
    assert_eq!(got.len(), 10);
    assert_eq!(got[0], ch(ADDED, "test0.txt"));
    delete(&mut b, "two\\test0.txt", 0);
    let rs = a.pump();
    assert_eq!(changes(&final_of(&rs, &i2)), vec![ch(REMOVED, "test0.txt")]);
    let r = notify(&mut a, h1, NAME, false, 4096);
    assert_eq!(changes(&r), vec![ch(REMOVED, "test0.txt")]);
}

#[test]
fn two_waiting_requests_on_one_handle_are_answered_oldest_first() {
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "fifo");
    let i1 = pending(&mut a, d, NAME, false, 4096);
    let i2 = pending(&mut a, d, NAME, false, 4096);
    mkdir(&mut b, "fifo\\one");
    let rs = a.pump();
    assert_eq!(changes(&final_of(&rs, &i1)), vec![ch(ADDED, "one")]);
    assert!(rs.iter().all(|r| r.hdr.message_id != i2.hdr.message_id));
    mkdir(&mut b, "fifo\\two");
    assert_eq!(changes(&final_of(&a.pump(), &i2)), vec![ch(ADDED, "two")]);
}

#[test]
fn a_rename_in_one_directory_is_old_name_then_new_name_and_across_directories_removed_then_added() {
    let (mut a, mut b) = two_clients();
    mkdir(&mut b, "r");
    mkdir(&mut b, "r\\sub");
    b.put_file("r\\sub\\f", b"");
    let d = watch(&mut a, "r");
    let interim = pending(&mut a, d, NAME, true, 4096);
    rename(&mut b, "r\\sub\\f", "r\\sub\\g");
    let r = final_of(&a.pump(), &interim);
    assert_eq!(
        changes(&r),
        vec![ch(OLD_NAME, "sub\\f"), ch(NEW_NAME, "sub\\g")]
    );
    rename(&mut b, "r\\sub\\g", "r\\g");
    let r = notify(&mut a, d, NAME, true, 4096);
    // The renamed file's close also reports it MODIFIED, which NAME does not ask for.
    assert_eq!(changes(&r), vec![ch(REMOVED, "sub\\g"), ch(ADDED, "g")]);
}

#[test]
fn a_watch_without_watch_tree_ignores_changes_deeper_down() {
    let (mut a, mut b) = two_clients();
    mkdir(&mut b, "flat");
    mkdir(&mut b, "flat\\sub");
    let d = watch(&mut a, "flat");
    let deep = watch(&mut a, "");
    let interim = pending(&mut a, d, NAME, false, 4096);
    let di = pending(&mut a, deep, NAME, true, 4096);
    mkdir(&mut b, "flat\\sub\\deeper");
    let rs = a.pump();
    assert_eq!(
        changes(&final_of(&rs, &di)),
        vec![ch(ADDED, "flat\\sub\\deeper")]
    );
    assert!(rs
        .iter()
        .all(|r| r.hdr.message_id != interim.hdr.message_id));
    mkdir(&mut b, "flat\\direct");
    assert_eq!(
        changes(&final_of(&a.pump(), &interim)),
        vec![ch(ADDED, "direct")]
    );
}

#[test]
fn attributes_set_on_the_watched_directory_itself_go_to_its_parents_watchers_not_its_own() {
    let (mut a, mut b) = two_clients();
    mkdir(&mut b, "base");
    b.put_file("base\\tname1", b"");
    let d = watch(&mut a, "base");
    let interim = pending(&mut a, d, 0x4, true, 4096);
    // FileBasicInformation with only FileAttributes = HIDDEN.
    let mut basic = vec![0u8; 40];
    basic[32..36].copy_from_slice(&0x2u32.to_le_bytes());
    let own = b.create("base", GENERIC_ALL, D::OPEN, DIR).unwrap();
    assert_eq!(b.set_info(own, 1, 4, &basic).status(), NtStatus::SUCCESS);
    b.close(own);
    assert!(a.pump().is_empty(), "its own change is its parent's news");
    let f = b.create("base\\tname1", GENERIC_ALL, D::OPEN, 0).unwrap();
    assert_eq!(b.set_info(f, 1, 4, &basic).status(), NtStatus::SUCCESS);
    assert_eq!(
        changes(&final_of(&a.pump(), &interim)),
        vec![ch(MODIFIED, "tname1")]
    );
    b.close(f);
}

#[test]
fn a_filter_that_does_not_match_leaves_the_request_waiting() {
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "m");
    let interim = pending(&mut a, d, 0x1, false, 4096);
    mkdir(&mut b, "m\\adir");
    assert!(a.pump().is_empty(), "DIR_NAME is not FILE_NAME");
    b.put_file("m\\afile", b"");
    assert_eq!(
        changes(&final_of(&a.pump(), &interim)),
        vec![ch(ADDED, "afile")]
    );
}

#[test]
fn more_changes_than_the_buffer_holds_give_notify_enum_dir() {
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "o");
    let interim = pending(&mut a, d, NAME, true, 1000);
    a.cancel_async(&interim);
    for i in 0..100 {
        mkdir(&mut b, &format!("o\\dir{i}"));
    }
    let r = notify(&mut a, d, NAME, true, 1000);
    assert_eq!(r.status(), NtStatus::NOTIFY_ENUM_DIR);
    mkdir(&mut b, "o\\after");
    let r = notify(&mut a, d, NAME, true, 1000);
    assert_eq!(
        changes(&r),
        vec![ch(ADDED, "after")],
        "the buffer starts again"
    );
}

#[test]
fn a_flood_of_changes_keeps_bounded_memory_and_ends_in_one_enum_dir() {
    let (mut a, mut b) = two_clients();
    let server = a.server.clone();
    let d = watch(&mut a, "flood");
    let interim = pending(&mut a, d, ALL, true, 8 * 1024 * 1024);
    a.cancel_async(&interim);
    let mut most = 0;
    for i in 0..3000 {
        let n = format!("flood\\a-rather-long-name-to-fill-the-buffer-{i:06}");
        b.put_file(&n, b"z");
        most = most.max(server.notify_buffered_bytes());
    }
    assert!(
        most <= 64 * 1024,
        "at most 64 KiB kept for one handle, saw {most}"
    );
    let r = notify(&mut a, d, ALL, true, 8 * 1024 * 1024);
    assert_eq!(r.status(), NtStatus::NOTIFY_ENUM_DIR);
    assert_eq!(server.notify_buffered_bytes(), 0);
}

#[test]
fn closing_the_handle_answers_its_waiting_request_with_notify_cleanup_and_forgets_the_watch() {
    let mut a = Client::new();
    let server = a.server.clone();
    let d = watch(&mut a, "c");
    let interim = pending(&mut a, d, NAME, false, 4096);
    assert_eq!(server.notify_watchers(), 1);
    let m = a.close_msg(d, 0);
    let mut m = m;
    a.sign(&mut m);
    let rs = a.send_frame(m);
    assert_eq!(final_of(&rs, &interim).status(), NtStatus::NOTIFY_CLEANUP);
    assert_eq!(server.notify_watchers(), 0);
}

#[test]
fn tree_disconnect_logoff_and_a_dropped_connection_leave_no_watch_behind() {
    let (mut a, mut b) = two_clients();
    let server = a.server.clone();
    let d = watch(&mut a, "t");
    pending(&mut a, d, NAME, false, 4096);
    let e = watch(&mut b, "t");
    pending(&mut b, e, NAME, false, 4096);
    assert_eq!(server.notify_watchers(), 2);
    let tree = a.tree_id;
    let rs = a.call_all(Command::TREE_DISCONNECT, tree, empty_body);
    assert!(rs.iter().any(|r| r.status() == NtStatus::NOTIFY_CLEANUP));
    assert_eq!(server.notify_watchers(), 1);
    let now = b.now;
    b.conn.shutdown(now);
    assert_eq!(server.notify_watchers(), 0);
    // Changes with nobody watching cost nothing and reach nobody.
    let mut c = Client::on(server.clone(), a.mem.clone(), Options::default());
    mkdir(&mut c, "t\\later");
    assert_eq!(server.notify_buffered_bytes(), 0);
}

#[test]
fn a_directory_set_to_be_deleted_answers_its_watchers_with_delete_pending() {
    let (mut a, mut b) = two_clients();
    mkdir(&mut b, "gone");
    let d = a
        .create_on(a.tree_id, "gone", GENERIC_READ, SHARE_ALL, D::OPEN, DIR)
        .unwrap();
    let interim = pending(&mut a, d, NAME, false, 4096);
    let h = b
        .create("gone", DELETE | GENERIC_READ, D::OPEN, DIR)
        .unwrap();
    let mut disp = vec![1u8];
    disp.resize(4, 0);
    assert_eq!(b.set_info(h, 1, 13, &disp).status(), NtStatus::SUCCESS);
    assert_eq!(
        final_of(&a.pump(), &interim).status(),
        NtStatus::DELETE_PENDING
    );
    let r = notify(&mut a, d, NAME, false, 4096);
    assert_eq!(r.status(), NtStatus::DELETE_PENDING);
    b.close(h);
}

#[test]
fn a_directory_deleted_on_close_while_watched_answers_delete_pending() {
    let (mut a, mut b) = two_clients();
    mkdir(&mut b, "doc");
    let d = watch(&mut a, "doc");
    let interim = pending(&mut a, d, NAME, false, 4096);
    delete(&mut b, "doc", DIR);
    assert_eq!(
        final_of(&a.pump(), &interim).status(),
        NtStatus::DELETE_PENDING
    );
}

#[test]
fn a_buffer_one_byte_over_max_transact_is_invalid_parameter_not_a_dropped_connection() {
    let mut a = Client::new();
    let d = watch(&mut a, "big");
    let r = notify(&mut a, d, ALL, false, 8 * 1024 * 1024 + 1);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    assert!(!a.closed);
    let r = notify(&mut a, d, ALL, false, 8 * 1024 * 1024);
    assert_eq!(r.status(), NtStatus::PENDING);
}

#[test]
fn a_share_with_change_notify_off_answers_not_implemented() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let server = server_with(&mem, |c| {
        for s in &mut c.shares {
            std::sync::Arc::get_mut(s).unwrap().change_notify = false;
        }
    });
    let mut a = Client::on(server, mem, Options::default());
    let d = watch(&mut a, "off");
    let r = notify(&mut a, d, NAME, true, 4096);
    assert_eq!(r.status(), NtStatus::NOT_IMPLEMENTED);
    assert_eq!(a.server.notify_watchers(), 0);
}

#[test]
fn a_stream_made_written_renamed_and_removed_is_reported_with_stream_actions() {
    const ADDED_STREAM: u32 = 6;
    const REMOVED_STREAM: u32 = 7;
    const MODIFIED_STREAM: u32 = 8;
    let (mut a, mut b) = two_clients();
    let d = watch(&mut a, "st");
    let interim = pending(&mut a, d, ALL, false, 4096);
    a.cancel_async(&interim);
    let s = b
        .create(
            "st\\f:one",
            GENERIC_READ | GENERIC_WRITE | DELETE,
            D::CREATE,
            0,
        )
        .unwrap();
    assert_eq!(b.write(s, 0, b"data").status(), NtStatus::SUCCESS);
    let mut rename = Vec::new();
    FileRenameInformation {
        replace_if_exists: false,
        root_directory: 0,
        file_name: ":two".into(),
    }
    .encode(&mut rename);
    assert_eq!(b.set_info(s, 1, 10, &rename).status(), NtStatus::SUCCESS);
    b.close(s);
    delete(&mut b, "st\\f:two", 0);
    let r = notify(&mut a, d, ALL, false, 4096);
    assert_eq!(
        changes(&r),
        vec![
            ch(ADDED, "f"),
            ch(ADDED_STREAM, "f:one"),
            ch(REMOVED_STREAM, "f:one"),
            ch(ADDED_STREAM, "f:two"),
            ch(MODIFIED_STREAM, "f:two"),
            ch(REMOVED_STREAM, "f:two"),
        ]
    );
}
