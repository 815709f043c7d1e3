//! Framework rules: related compounds, async replies (CHANGE_NOTIFY, CANCEL), credits.

use crate::support;

use ringshare_wire::consts::{Command, CreateDisposition as D, HeaderFlags};
use ringshare_wire::{FileId, NtStatus};
use support::*;

const FILE_DIRECTORY_FILE: u32 = 0x1;

fn notify_msg(c: &mut Client, f: FileId) -> Vec<u8> {
    c.change_notify_msg(f, 0x3, false, 4096)
}

/// Make the directory `name` and leave a CHANGE_NOTIFY waiting on it: its
/// handle and the interim response.
fn watching(c: &mut Client, name: &str) -> (FileId, Resp) {
    let d = c
        .create(name, GENERIC_READ, D::CREATE, FILE_DIRECTORY_FILE)
        .unwrap();
    let m = notify_msg(c, d);
    let interim = c.send_frame(m).remove(0);
    assert_eq!(interim.status(), NtStatus::PENDING);
    (d, interim)
}

#[test]
fn related_members_echo_the_session_and_tree_ids_the_client_sent() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let m1 = c.create_msg(
        tree,
        "echo-ids",
        GENERIC_READ | GENERIC_WRITE,
        SHARE_ALL,
        D::OPEN_IF,
        0,
    );
    let mut m2 = c.close_msg(FileId::ANY, 0);
    m2[36..40].copy_from_slice(&u32::MAX.to_le_bytes());
    m2[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
    let rs = c.compound(vec![m1, m2], true);
    assert_eq!(rs[1].status(), NtStatus::SUCCESS);
    assert_eq!(rs[1].hdr.session_id, u64::MAX);
    assert_eq!(rs[1].hdr.tree_id(), Some(u32::MAX));
    assert_eq!(rs[0].hdr.session_id, c.session_id);
}

#[test]
fn a_failed_write_in_a_related_chain_does_not_fail_the_read_after_it() {
    let mut c = Client::new();
    c.put_file("r6", b"sixty-four");
    let tree = c.tree_id;
    let m1 = c.create_msg(tree, "r6", GENERIC_READ, SHARE_ALL, D::OPEN, 0);
    let m2 = c.read_msg(FileId::ANY, 0, 1);
    let m3 = c.message(Command::WRITE, tree, |o| {
        write_body(o, FileId::ANY, 0, b"x")
    });
    let m4 = c.read_msg(FileId::ANY, 0, 1);
    let m5 = c.close_msg(FileId::ANY, 0);
    let st: Vec<NtStatus> = c
        .compound(vec![m1, m2, m3, m4, m5], true)
        .iter()
        .map(Resp::status)
        .collect();
    assert_eq!(
        st,
        [
            NtStatus::SUCCESS,
            NtStatus::SUCCESS,
            NtStatus::ACCESS_DENIED,
            NtStatus::SUCCESS,
            NtStatus::SUCCESS
        ]
    );
}

#[test]
fn an_unknown_command_after_a_failed_read_in_a_chain_is_invalid_parameter() {
    let mut c = Client::new();
    c.put_file("empty", b"");
    let f = c.create("empty", GENERIC_READ, D::OPEN, 0).unwrap();
    let m1 = c.read_msg(f, 0, 1);
    let tree = c.tree_id;
    let mut m2 = c.message(Command::ECHO, tree, empty_body);
    m2[12..14].copy_from_slice(&0xFFu16.to_le_bytes());
    let rs = c.compound(vec![m1, m2], true);
    assert_eq!(rs[0].status(), NtStatus::END_OF_FILE);
    assert_eq!(rs[1].status(), NtStatus::INVALID_PARAMETER);
}

#[test]
fn change_notify_stays_pending_until_cancelled() {
    let mut c = Client::new();
    let (_, interim) = watching(&mut c, "watched");
    assert!(interim.hdr.is_async());
    assert!(c.tick(60_000).is_empty(), "nothing completes it by itself");
    let fin = c.cancel_async(&interim);
    assert_eq!(fin.len(), 1);
    assert_eq!(fin[0].status(), NtStatus::CANCELLED);
    assert_eq!(fin[0].hdr.async_id(), interim.hdr.async_id());
}

#[test]
fn closing_the_directory_completes_its_change_notify_with_notify_cleanup() {
    let mut c = Client::new();
    let (d, _) = watching(&mut c, "watched2");
    let m = c.close_msg(d, 0);
    let rs = c.send_frame(m);
    let statuses: Vec<NtStatus> = rs.iter().map(Resp::status).collect();
    assert!(statuses.contains(&NtStatus::SUCCESS), "{statuses:?}");
    assert!(statuses.contains(&NtStatus::NOTIFY_CLEANUP), "{statuses:?}");
}

#[test]
fn change_notify_on_a_file_is_invalid_parameter() {
    let mut c = Client::new();
    c.put_file("plain", b"");
    let f = c.create("plain", GENERIC_READ, D::OPEN, 0).unwrap();
    let m = notify_msg(&mut c, f);
    assert_eq!(
        c.send_frame(m).remove(0).status(),
        NtStatus::INVALID_PARAMETER
    );
}

#[test]
fn an_async_request_in_the_middle_of_a_compound_fails_with_internal_error() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let m1 = c.create_msg(
        tree,
        "interim2",
        GENERIC_READ,
        SHARE_ALL,
        D::CREATE,
        FILE_DIRECTORY_FILE,
    );
    let m2 = notify_msg(&mut c, FileId::ANY);
    let m3 = c.close_msg(FileId::ANY, 0);
    let st: Vec<NtStatus> = c
        .compound(vec![m1, m2, m3], true)
        .iter()
        .map(Resp::status)
        .collect();
    assert_eq!(
        st,
        [
            NtStatus::SUCCESS,
            NtStatus::INTERNAL_ERROR,
            NtStatus::SUCCESS
        ]
    );
}

#[test]
fn a_client_asking_for_many_credits_may_hold_up_to_8192() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let mut m = c.message(Command::ECHO, tree, empty_body);
    m[14..16].copy_from_slice(&8192u16.to_le_bytes());
    let r = c.send_frame(m).remove(0);
    assert!(r.hdr.credits > 512, "granted {}", r.hdr.credits);
}

#[test]
fn a_failed_unrelated_member_drops_the_file_id_later_related_members_would_use() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let m1 = c.create_msg(tree, "inv3", GENERIC_READ, SHARE_ALL, D::OPEN_IF, 0);
    let m2 = c.close_msg(FileId::ANY, 0);
    let mut m3 = c.close_msg(FileId::ANY, 0);
    let flags =
        u32::from_le_bytes([m3[16], m3[17], m3[18], m3[19]]) | HeaderFlags::RELATED_OPERATIONS.0;
    m3[16..20].copy_from_slice(&flags.to_le_bytes());
    // m1, m2 unrelated; m3 related: it must not find m1's handle.
    let st: Vec<NtStatus> = c
        .compound(vec![m1, m2, m3], false)
        .iter()
        .map(Resp::status)
        .collect();
    assert_eq!(
        st,
        [
            NtStatus::SUCCESS,
            NtStatus::FILE_CLOSED,
            NtStatus::FILE_CLOSED
        ]
    );
}

#[test]
fn a_related_member_after_one_with_an_unknown_session_is_invalid_parameter() {
    let mut c = Client::new();
    let mut m1 = c.close_msg(
        FileId {
            persistent: 1,
            volatile: 1,
        },
        0,
    );
    m1[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
    let mut m2 = c.close_msg(FileId::ANY, 0);
    let flags =
        u32::from_le_bytes([m2[16], m2[17], m2[18], m2[19]]) | HeaderFlags::RELATED_OPERATIONS.0;
    m2[16..20].copy_from_slice(&flags.to_le_bytes());
    let st: Vec<NtStatus> = c
        .compound(vec![m1, m2], false)
        .iter()
        .map(Resp::status)
        .collect();
    assert_eq!(
        st,
        [NtStatus::USER_SESSION_DELETED, NtStatus::INVALID_PARAMETER]
    );
}

#[test]
fn logoff_grants_a_lock_waiting_on_a_handle_of_the_same_session_before_closing_it() {
    const EXCLUSIVE: u32 = 2;
    let mut c = Client::new();
    c.put_file("cancel-logoff", &[0u8; 200]);
    let h1 = c
        .create("cancel-logoff", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    let h2 = c
        .create("cancel-logoff", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        c.lock(h1, &[(100, 10, EXCLUSIVE)]).status(),
        NtStatus::SUCCESS
    );
    let interim = c.lock(h2, &[(100, 10, EXCLUSIVE)]);
    assert_eq!(interim.status(), NtStatus::PENDING);
    let tree = c.tree_id;
    let m = c.message(Command::LOGOFF, tree, empty_body);
    let rs = c.send_frame(m);
    let waiting = rs
        .iter()
        .find(|r| r.hdr.command == Command::LOCK)
        .expect("the waiting lock is answered");
    assert_eq!(waiting.status(), NtStatus::SUCCESS);
    assert_eq!(waiting.hdr.async_id(), interim.hdr.async_id());
    assert!(rs
        .iter()
        .any(|r| r.hdr.command == Command::LOGOFF && r.status() == NtStatus::SUCCESS));
}

#[test]
fn a_tree_disconnect_completes_the_trees_change_notify_with_notify_cleanup_first() {
    let mut c = Client::new();
    let (_, interim) = watching(&mut c, "watched-tdis");
    let tree = c.tree_id;
    let rs = c.call_all(Command::TREE_DISCONNECT, tree, empty_body);
    let got: Vec<(Command, NtStatus)> = rs.iter().map(|r| (r.hdr.command, r.status())).collect();
    assert_eq!(
        got,
        vec![
            (Command::CHANGE_NOTIFY, NtStatus::NOTIFY_CLEANUP),
            (Command::TREE_DISCONNECT, NtStatus::SUCCESS)
        ]
    );
    assert_eq!(rs[0].hdr.async_id(), interim.hdr.async_id());
}

#[test]
fn a_logoff_completes_the_sessions_change_notifies_with_notify_cleanup_first() {
    let mut c = Client::new();
    let d = c
        .create(
            "watched-logoff",
            GENERIC_READ,
            D::CREATE,
            FILE_DIRECTORY_FILE,
        )
        .unwrap();
    let m = notify_msg(&mut c, d);
    assert_eq!(c.send_frame(m).remove(0).status(), NtStatus::PENDING);
    let rs = c.call_all(Command::LOGOFF, 0, empty_body);
    let got: Vec<(Command, NtStatus)> = rs.iter().map(|r| (r.hdr.command, r.status())).collect();
    assert_eq!(
        got,
        vec![
            (Command::CHANGE_NOTIFY, NtStatus::NOTIFY_CLEANUP),
            (Command::LOGOFF, NtStatus::SUCCESS)
        ]
    );
}

#[test]
fn a_tree_disconnect_leaves_another_trees_change_notify_waiting() {
    let mut c = Client::new();
    let d = c
        .create(
            "watched-other",
            GENERIC_READ,
            D::CREATE,
            FILE_DIRECTORY_FILE,
        )
        .unwrap();
    let m = notify_msg(&mut c, d);
    assert_eq!(c.send_frame(m).remove(0).status(), NtStatus::PENDING);
    let ro = c.ro_tree_id;
    let rs = c.call_all(Command::TREE_DISCONNECT, ro, empty_body);
    let got: Vec<(Command, NtStatus)> = rs.iter().map(|r| (r.hdr.command, r.status())).collect();
    assert_eq!(got, vec![(Command::TREE_DISCONNECT, NtStatus::SUCCESS)]);
}

#[test]
fn a_failed_re_authentication_completes_the_sessions_change_notifies() {
    let mut c = Client::new();
    let (_, interim) = watching(&mut c, "watched-reauth");
    // A re-authentication with a wrong password: the session ends.
    let mut seen = Vec::new();
    let status = c.log_on_seeing("alice", "wrong", 0, &mut seen);
    assert_eq!(status, NtStatus::LOGON_FAILURE);
    let cleanup = seen
        .iter()
        .find(|r| r.hdr.command == Command::CHANGE_NOTIFY)
        .expect("the waiting CHANGE_NOTIFY answered");
    assert_eq!(cleanup.status(), NtStatus::NOTIFY_CLEANUP);
    assert_eq!(cleanup.hdr.async_id(), interim.hdr.async_id());
}

#[test]
fn a_new_session_ending_the_previous_one_completes_its_change_notifies() {
    let mem = ringshare_vfs::memory::MemShare::new();
    let server = server(&mem, ringshare_core::SigningPolicy::IfRequired);
    let mut a = Client::on(server.clone(), mem.clone(), Options::default());
    let (_, interim) = watching(&mut a, "watched-prev");
    // The same user reconnects on a new connection naming A's session.
    let mut b = Client::negotiated(
        server,
        mem,
        ringshare_wire::consts::Dialect::SMB3_1_1,
        [9; 16],
    );
    b.session_setup_after(a.session_id);
    let rs = a.pump();
    let got: Vec<(Command, NtStatus)> = rs.iter().map(|r| (r.hdr.command, r.status())).collect();
    assert_eq!(
        got,
        vec![(Command::CHANGE_NOTIFY, NtStatus::NOTIFY_CLEANUP)]
    );
    assert_eq!(rs[0].hdr.async_id(), interim.hdr.async_id());
}

#[test]
fn a_new_session_on_the_same_connection_ending_the_previous_one_completes_its_change_notifies() {
    let mut c = Client::new();
    let (_, interim) = watching(&mut c, "watched-prev-same");
    let previous = c.session_id;
    c.session_id = 0;
    c.signing = None;
    let mut seen = Vec::new();
    assert_eq!(
        c.log_on_seeing("alice", "secret", previous, &mut seen),
        NtStatus::SUCCESS
    );
    let cleanup = seen
        .iter()
        .find(|r| r.hdr.command == Command::CHANGE_NOTIFY)
        .expect("the waiting CHANGE_NOTIFY answered");
    assert_eq!(cleanup.status(), NtStatus::NOTIFY_CLEANUP);
    assert_eq!(cleanup.hdr.async_id(), interim.hdr.async_id());
}

#[test]
fn a_related_member_works_on_the_file_the_member_before_it_named() {
    // [MS-SMB2] 3.3.5.2.7.2; smbtorture 4.22 smb2.compound_async.flush_close and flush_flush.
    let mut c = Client::new();
    c.put_file("flushed", b"data");
    let f = c.create("flushed", GENERIC_ALL, D::OPEN, 0).unwrap();
    let m1 = c.flush_msg(f);
    let m2 = c.flush_msg(FileId::ANY);
    let rs = c.compound(vec![m1, m2], true);
    let got: Vec<_> = rs.iter().map(|r| r.status()).collect();
    assert_eq!(got, [NtStatus::SUCCESS, NtStatus::SUCCESS], "flush, flush");

    let m1 = c.flush_msg(f);
    let m2 = c.close_msg(FileId::ANY, 0);
    let rs = c.compound(vec![m1, m2], true);
    let got: Vec<_> = rs.iter().map(|r| r.status()).collect();
    assert_eq!(got, [NtStatus::SUCCESS, NtStatus::SUCCESS], "flush, close");
    assert_eq!(
        c.flush(f).status(),
        NtStatus::FILE_CLOSED,
        "the close closed it"
    );
    // A failed member's FileId is used all the same: the related CLOSE fails as it did.
    let m1 = c.flush_msg(f);
    let m2 = c.close_msg(FileId::ANY, 0);
    let rs = c.compound(vec![m1, m2], true);
    let got: Vec<_> = rs.iter().map(|r| r.status()).collect();
    assert_eq!(got, [NtStatus::FILE_CLOSED, NtStatus::FILE_CLOSED]);
}
