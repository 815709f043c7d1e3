//! The SMB3 POSIX extensions (`smb3 unix extensions`): NEGOTIATE answers their context only
//! under the option and for 3.1.1, a bad context is INVALID_PARAMETER, a POSIX CREATE makes the
//! file with the mode it gives and answers its POSIX information, and FILE_POSIX_INFORMATION
//! and the POSIX listing class are for POSIX opens only (INVALID_LEVEL otherwise), as Samba 4.22
//! answers (compared with it in crates/ringshare/tests/posix.rs).

use crate::support;

use ringshare_vfs::memory::MemShare;
use ringshare_wire::codec::decode_output_buffer_response;
use ringshare_wire::consts::{CreateDisposition as D, Dialect, NegotiateContextType};
use ringshare_wire::create::{tag, ContextTag, CreateContext, CreateResponse};
use ringshare_wire::fscc::dir_info::decode_dir_entries;
use ringshare_wire::fscc::FileInfoClass;
use ringshare_wire::negotiate::NegotiateResponse;
use ringshare_wire::posix::{FilePosixInfo, PosixCc};
use ringshare_wire::NtStatus;
use support::posix::*;
use support::*;

const DIRECTORY: u32 = 0x1;

/// A 3.1.1 client of a server with the option `on` that offered the extensions; whether the
/// server answered their context.
fn client(on: bool) -> (Client, bool) {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| c.posix_extensions = on);
    offering(server, mem, 7)
}

fn posix_create(c: &mut Client, name: &str, mode: &[u8], options: u32) -> Resp {
    let tree = c.tree_id;
    let ctx = vec![CreateContext::new(tag::POSIX, mode.to_vec())];
    let mut m = c.create_msg_ctx(tree, name, 0x1F01FF, 7, D::OPEN_IF, options, 0, ctx);
    c.sign(&mut m);
    c.send_frame(m).remove(0)
}

#[test]
fn negotiate_answers_the_posix_context_only_under_smb3_unix_extensions() {
    assert!(client(true).1);
    assert!(!client(false).1);
}

#[test]
fn a_posix_negotiate_context_of_a_bad_length_is_invalid_parameter() {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| c.posix_extensions = true);
    let mut c = Client::fresh(server, mem, Dialect::SMB3_1_1, [7; 16]);
    let (_, r) = c.negotiate_offering_with(vec![Dialect::SMB3_1_1], vec![posix_offer(b"01234")]);
    assert_eq!(r.status(), NtStatus::INVALID_PARAMETER);
    // An unknown variant is no error, only not agreed to.
    let mem = MemShare::new();
    let server = server_with(&mem, |c| c.posix_extensions = true);
    let mut c = Client::fresh(server, mem, Dialect::SMB3_1_1, [7; 16]);
    let r = c.negotiate_adding(Dialect::SMB3_1_1, vec![posix_offer(&[0x30; 16])]);
    let ctxs = NegotiateResponse::decode(&r.msg).unwrap().contexts;
    assert!(!ctxs
        .iter()
        .any(|x| x.context_type() == NegotiateContextType::POSIX_EXTENSIONS_AVAILABLE));
}

#[test]
fn a_posix_create_makes_the_file_with_its_mode_and_answers_its_posix_information() {
    let (mut c, _) = client(true);
    let r = posix_create(&mut c, "f", &0o640u32.to_le_bytes(), 0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let resp = CreateResponse::decode(&r.msg).unwrap();
    let cc = resp
        .contexts
        .iter()
        .find(|x| x.tag() == ContextTag::Posix)
        .expect("a POSIX context in the answer");
    let cc = PosixCc::decode(&cc.data).unwrap();
    assert_eq!((cc.mode, cc.nlinks), (0o640, 1));
    // FILE_POSIX_INFORMATION on the POSIX open.
    let q = c.query_info(resp.file_id, 1, FileInfoClass::POSIX.0, 0, 4096);
    assert_eq!(q.status(), NtStatus::SUCCESS);
    let info = FilePosixInfo::decode(decode_output_buffer_response(&q.msg).unwrap()).unwrap();
    assert_eq!(info.cc, cc);
    c.close(resp.file_id);
    // A directory: its type in bits 12-15 of the mode.
    let d = posix_create(&mut c, "d", &0o750u32.to_le_bytes(), DIRECTORY);
    let resp = CreateResponse::decode(&d.msg).unwrap();
    let cc = PosixCc::decode(&resp.contexts[0].data).unwrap();
    assert_eq!(cc.mode, 0o10750);
    // The POSIX listing class on the POSIX open of the directory.
    let l = c.query_directory(resp.file_id, FileInfoClass::POSIX.0, 0, "*", 65536);
    assert_eq!(l.status(), NtStatus::SUCCESS);
    let entries = decode_dir_entries(
        FileInfoClass::POSIX,
        decode_output_buffer_response(&l.msg).unwrap(),
    )
    .unwrap();
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, [".", ".."]);
    assert_eq!(entries[0].posix.as_ref().unwrap().cc.mode, 0o10750);
}

#[test]
fn posix_information_on_a_non_posix_open_is_invalid_level() {
    let (mut c, _) = client(true);
    let f = c.create("plain", 0x1F01FF, D::CREATE, 0).unwrap();
    let q = c.query_info(f, 1, FileInfoClass::POSIX.0, 0, 4096);
    assert_eq!(q.status(), NtStatus::INVALID_LEVEL);
    let d = c.create("dir", 0x1F01FF, D::CREATE, DIRECTORY).unwrap();
    let l = c.query_directory(d, FileInfoClass::POSIX.0, 0, "*", 65536);
    assert_eq!(l.status(), NtStatus::INVALID_LEVEL);
}

#[test]
fn a_posix_create_context_of_a_bad_length_is_invalid_parameter() {
    let (mut c, _) = client(true);
    for bad in [&b""[..], b"000", b"00000"] {
        let r = posix_create(&mut c, "f", bad, 0);
        assert_eq!(r.status(), NtStatus::INVALID_PARAMETER, "{bad:?}");
    }
}

#[test]
fn without_the_negotiated_extensions_the_posix_context_is_ignored() {
    let (mut c, _) = client(false);
    let r = posix_create(&mut c, "f", b"00000", 0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let resp = CreateResponse::decode(&r.msg).unwrap();
    assert!(resp.contexts.iter().all(|x| x.tag() != ContextTag::Posix));
}

#[test]
fn a_posix_open_matches_names_case_sensitively() {
    let (mut c, _) = client(true);
    let f = c.create("File.txt", 0x1F01FF, D::CREATE, 0).unwrap();
    c.close(f);
    let tree = c.tree_id;
    let ctx = vec![CreateContext::new(tag::POSIX, vec![0; 4])];
    let mut m = c.create_msg_ctx(tree, "file.TXT", 0x120089, 7, D::OPEN, 0, 0, ctx);
    c.sign(&mut m);
    assert_eq!(
        c.send_frame(m).remove(0).status(),
        NtStatus::OBJECT_NAME_NOT_FOUND
    );
    // Without the context the same name is found in another case.
    assert!(c.create("file.TXT", 0x120089, D::OPEN, 0).is_ok());
}

#[test]
fn a_posix_name_may_hold_what_a_windows_name_may_not_and_is_listed() {
    let (mut c, _) = client(true);
    let r = posix_create(&mut c, "a<b?:c\\d ", &0o644u32.to_le_bytes(), 0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    c.close(CreateResponse::decode(&r.msg).unwrap().file_id);
    assert_eq!(
        c.create("a<b?", 0x120089, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_INVALID)
    );
    let tree = c.tree_id;
    let ctx = vec![CreateContext::new(tag::POSIX, vec![0; 4])];
    let mut m = c.create_msg_ctx(tree, "", 0x120089, 7, D::OPEN, DIRECTORY, 0, ctx);
    c.sign(&mut m);
    let d = c.send_frame(m).remove(0);
    assert_eq!(d.status(), NtStatus::SUCCESS);
    let d = CreateResponse::decode(&d.msg).unwrap().file_id;
    let l = c.query_directory(d, FileInfoClass::POSIX.0, 0, "*", 65536);
    let entries = decode_dir_entries(
        FileInfoClass::POSIX,
        decode_output_buffer_response(&l.msg).unwrap(),
    )
    .unwrap();
    assert!(
        entries.iter().any(|e| e.name == "a<b?:c\\d "),
        "{entries:?}"
    );
    let root = entries.iter().find(|e| e.name == "..").unwrap();
    assert_eq!((root.file_id, root.posix.as_ref().unwrap().device), (0, 0));
}

#[test]
fn a_delete_pending_file_goes_at_the_close_that_leaves_only_posix_opens() {
    let (mut c, _) = client(true);
    // A Windows open sets it; a POSIX open remains: the Windows close removes the file.
    let w = c.create("doc", 0x110080, D::CREATE, 0).unwrap();
    let p = posix_open(&mut c, "doc", D::OPEN);
    set_delete_on_close(&mut c, w);
    c.close(w);
    assert!(!listed(&mut c, "doc"));
    // The name is free; the POSIX open's close leaves the new file alone.
    let n = c.create("doc", 0x80, D::CREATE, 0).unwrap();
    c.close(n);
    set_delete_on_close(&mut c, p);
    c.close(p);
    assert!(listed(&mut c, "doc"));
    // Two POSIX opens: the deleter's close removes it at once.
    let p1 = posix_open(&mut c, "pdoc", D::CREATE);
    let p2 = posix_open(&mut c, "pdoc", D::OPEN);
    set_delete_on_close(&mut c, p1);
    c.close(p1);
    assert!(!listed(&mut c, "pdoc"));
    c.close(p2);
}

#[test]
fn a_windows_open_keeps_a_file_a_posix_open_deleted_until_it_closes() {
    let (mut c, _) = client(true);
    let p = posix_open(&mut c, "wdoc", D::CREATE);
    let w = c.create("wdoc", 0x80, D::OPEN, 0).unwrap();
    set_delete_on_close(&mut c, p);
    c.close(p);
    assert_eq!(
        c.create("wdoc", 0x80, D::OPEN, 0),
        Err(NtStatus::DELETE_PENDING)
    );
    c.close(w);
    assert!(!listed(&mut c, "wdoc"));
}

#[test]
fn a_posix_rename_may_take_a_name_differing_only_in_case_from_another() {
    let (mut c, _) = client(true);
    for n in ["rc", "other", "win"] {
        let f = c.create(n, 0x80, D::CREATE, 0).unwrap();
        c.close(f);
    }
    let w = c.create("win", 0x110080, D::OPEN, 0).unwrap();
    assert_eq!(
        rename(&mut c, w, "RC", false),
        NtStatus::OBJECT_NAME_COLLISION
    );
    let p = posix_open(&mut c, "other", D::OPEN);
    assert_eq!(rename(&mut c, p, "RC", false), NtStatus::SUCCESS);
    c.close(p);
    // Both names are there, each its own file.
    let f = posix_open(&mut c, "rc", D::OPEN);
    c.close(f);
    let f = posix_open(&mut c, "RC", D::OPEN);
    c.close(f);
    assert!(!listed(&mut c, "other"));
}

#[test]
fn a_posix_open_of_a_directory_renames_it_over_posix_opens_below_which_follow_it() {
    let (mut c, _) = client(true);
    let f = c.create("d", 0x80, D::CREATE, DIRECTORY).unwrap();
    c.close(f);
    let f = c.create("d\\f", 0x80, D::CREATE, 0).unwrap();
    c.close(f);
    let pd = posix_open(&mut c, "d", D::OPEN);
    // A Windows open below keeps the name.
    let w = c.create("d\\f", 0x80, D::OPEN, 0).unwrap();
    assert_eq!(rename(&mut c, pd, "d2", false), NtStatus::ACCESS_DENIED);
    c.close(w);
    // A POSIX open below does not, for a POSIX open of the directory only.
    let pf = posix_open(&mut c, "d/f", D::OPEN);
    let wd = c.create("d", 0x110080, D::OPEN, 0).unwrap();
    assert_eq!(rename(&mut c, wd, "d2", false), NtStatus::ACCESS_DENIED);
    c.close(wd);
    assert_eq!(rename(&mut c, pd, "d2", false), NtStatus::SUCCESS);
    c.close(pd);
    // The open below is where its file is now: its delete-on-close removes it there.
    set_delete_on_close(&mut c, pf);
    c.close(pf);
    assert!(!listed(&mut c, "d2\\f"));
}

#[test]
fn a_file_only_posix_opens_hold_may_be_replaced_by_a_rename() {
    let (mut c, _) = client(true);
    for n in ["src", "dst"] {
        let f = c.create(n, 0x80, D::CREATE, 0).unwrap();
        c.close(f);
    }
    let s = c.create("src", 0x110080, D::OPEN, 0).unwrap();
    let w = c.create("dst", 0x80, D::OPEN, 0).unwrap();
    assert_eq!(rename(&mut c, s, "dst", true), NtStatus::ACCESS_DENIED);
    c.close(w);
    let p = posix_open(&mut c, "dst", D::OPEN);
    assert_eq!(rename(&mut c, s, "dst", true), NtStatus::SUCCESS);
    c.close(s);
    // The replaced file's POSIX open removes nothing by the name it had.
    set_delete_on_close(&mut c, p);
    c.close(p);
    assert!(listed(&mut c, "dst"));
}

#[test]
fn a_posix_open_gets_the_file_system_s_posix_information_and_others_invalid_info_class() {
    use ringshare_wire::posix::FsPosixInfo;
    const FILESYSTEM: u8 = 2;
    let (mut c, _) = client(true);
    let tree = c.tree_id;
    let ctx = vec![CreateContext::new(tag::POSIX, vec![0; 4])];
    let mut m = c.create_msg_ctx(tree, "", 0x120089, 7, D::OPEN, DIRECTORY, 0, ctx);
    c.sign(&mut m);
    let p = CreateResponse::decode(&c.send_frame(m).remove(0).msg)
        .unwrap()
        .file_id;
    let q = c.query_info(p, FILESYSTEM, 100, 0, 4096);
    assert_eq!(q.status(), NtStatus::SUCCESS);
    let out = decode_output_buffer_response(&q.msg).unwrap();
    assert_eq!(out.len(), FsPosixInfo::SIZE);
    let info = FsPosixInfo::decode(out).unwrap();
    // MemShare's figures: 4 KiB blocks, 2^20 file nodes, some in use.
    assert_eq!((info.block_size, info.optimal_transfer_size), (4096, 4096));
    assert_eq!(info.total_file_nodes, 1 << 20);
    assert!(info.free_file_nodes < info.total_file_nodes && info.free_file_nodes > 0);
    assert_eq!(info.blocks_available, info.user_blocks_available);
    let w = c.create("", 0x80, D::OPEN, 0).unwrap();
    let q = c.query_info(w, FILESYSTEM, 100, 0, 4096);
    assert_eq!(q.status(), NtStatus::INVALID_INFO_CLASS);
}

/// Two 3.1.1 clients (client guids 1 and 2) of one server with the extensions on, both
/// having offered them.
fn posix_pair() -> (Client, Client) {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| c.posix_extensions = true);
    let client = |guid: u8| offering(server.clone(), mem.clone(), guid).0;
    (client(1), client(2))
}

#[test]
fn a_rename_replacing_a_file_breaks_the_handle_leases_of_its_posix_opens_first() {
    use ringshare_wire::misc::OplockBreak;
    const R: u32 = 1;
    const H: u32 = 2;
    let (mut a, mut b) = posix_pair();
    for n in ["src", "dst"] {
        let f = a.create(n, 0x80, D::CREATE, 0).unwrap();
        a.close(f);
    }
    // b holds dst through a POSIX open with an RH lease.
    let tree = b.tree_id;
    let ctx = vec![
        CreateContext::new(tag::POSIX, 0o600u32.to_le_bytes().to_vec()),
        CreateContext::new(tag::REQUEST_LEASE, lease_v2(9, R | H).encode()),
    ];
    let req = ringshare_wire::create::CreateRequest {
        security_flags: 0,
        requested_oplock_level: ringshare_wire::consts::OplockLevel(0xFF),
        impersonation_level: ringshare_wire::consts::ImpersonationLevel::IMPERSONATION,
        smb_create_flags: 0,
        desired_access: ringshare_wire::consts::AccessMask(0x120089),
        file_attributes: ringshare_wire::consts::FileAttributes(0),
        share_access: ringshare_wire::consts::ShareAccess(7),
        create_disposition: D::OPEN,
        create_options: ringshare_wire::consts::CreateOptions(0),
        name: "dst".to_string(),
        contexts: ctx,
    };
    let m = b.message(ringshare_wire::consts::Command::CREATE, tree, |o| {
        req.encode(o)
    });
    let r = b.send_frame(m).remove(0);
    assert_eq!(granted_lease(&r).state.0, R | H);
    let held = CreateResponse::decode(&r.msg).unwrap().file_id;
    // a's rename over it waits until b gives up caching its handle (Samba 4.22's
    // rename_dst_check), then replaces the file b still holds.
    let s = a.create("src", 0x110080, D::OPEN, 0).unwrap();
    let m = a.set_info_msg(s, 1, 10, &rename_info("dst", true));
    assert_eq!(
        a.send_frame(m)[0].status(),
        NtStatus::PENDING,
        "the rename waits"
    );
    let got = b.breaks();
    let [OplockBreak::LeaseBreakNotification(n)] = got.as_slice() else {
        panic!("one lease break: {got:?}");
    };
    assert_eq!((n.current_lease_state.0, n.new_lease_state.0), (R | H, R));
    assert_eq!(b.ack_lease(9, R).status(), NtStatus::SUCCESS);
    let fin = a.tick(10);
    assert_eq!(fin.len(), 1);
    assert_eq!(
        fin[0].status(),
        NtStatus::SUCCESS,
        "replaced over the POSIX open"
    );
    a.close(s);
    b.close(held);
    assert!(!listed(&mut a, "src"));
}
