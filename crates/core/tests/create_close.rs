//! CREATE and CLOSE over the in-memory share.
use crate::support;

use ringshare_vfs::{RelPath, Share};
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::consts::{Command, CreateAction};
use ringshare_wire::create::{CloseResponse, CreateResponse};
use ringshare_wire::NtStatus;
use support::*;

const NON_DIR: u32 = 0x40;
const DIR: u32 = 0x01;
const DELETE_ON_CLOSE: u32 = 0x1000;

fn exists(c: &Client, name: &str) -> bool {
    c.mem
        .stat(
            &ringshare_vfs::server_who(),
            &RelPath::from_components(name.split('/')).unwrap(),
        )
        .is_ok()
}

#[test]
fn create_makes_a_new_file_and_reports_created_then_opened() {
    let mut c = Client::new();
    let mut m = c.create_msg(
        c.tree_id,
        "new.txt",
        GENERIC_ALL,
        SHARE_ALL,
        D::CREATE,
        NON_DIR,
    );
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    assert_eq!(cr.create_action, CreateAction::CREATED);
    assert_eq!(
        cr.file_attributes.0, 0x20,
        "a new file without stored attributes is ARCHIVE"
    );
    assert_eq!(c.close(cr.file_id).status(), NtStatus::SUCCESS);
    let mut m = c.create_msg(c.tree_id, "new.txt", GENERIC_READ, SHARE_ALL, D::OPEN_IF, 0);
    c.sign(&mut m);
    let r2 = c.send_frame(m).remove(0);
    let cr2 = CreateResponse::decode(&r2.msg).unwrap();
    assert_eq!(cr2.create_action, CreateAction::OPENED);
}

#[test]
fn create_of_existing_file_with_create_disposition_is_object_name_collision() {
    let mut c = Client::new();
    c.put_file("a.txt", b"x");
    assert_eq!(
        c.create("a.txt", GENERIC_READ, D::CREATE, 0),
        Err(NtStatus::OBJECT_NAME_COLLISION)
    );
}

#[test]
fn open_of_a_missing_file_is_object_name_not_found_and_of_a_missing_directory_path_not_found() {
    let mut c = Client::new();
    assert_eq!(
        c.create("nope.txt", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    assert_eq!(
        c.create("nodir\\x.txt", GENERIC_READ, D::OPEN_IF, 0),
        Err(NtStatus::OBJECT_PATH_NOT_FOUND)
    );
}

#[test]
fn names_are_found_case_insensitively() {
    let mut c = Client::new();
    let d = c.create("Docs", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.close(d);
    c.put_file("Docs\\Report.TXT", b"hello");
    let f = c
        .create("docs\\report.txt", GENERIC_READ, D::OPEN, 0)
        .unwrap();
    assert_eq!(read_data(&c.read(f, 0, 5)), b"hello");
}

#[test]
fn directory_and_non_directory_options_are_enforced() {
    let mut c = Client::new();
    c.put_file("f", b"");
    let d = c.create("d", GENERIC_ALL, D::CREATE, DIR).unwrap();
    c.close(d);
    assert_eq!(
        c.create("f", GENERIC_READ, D::OPEN, DIR),
        Err(NtStatus::NOT_A_DIRECTORY)
    );
    assert_eq!(
        c.create("d", GENERIC_READ, D::OPEN, NON_DIR),
        Err(NtStatus::FILE_IS_A_DIRECTORY)
    );
    assert_eq!(
        c.create("x", GENERIC_READ, D::OPEN, DIR | NON_DIR),
        Err(NtStatus::INVALID_PARAMETER)
    );
    assert_eq!(
        c.create("y", GENERIC_ALL, D::OVERWRITE_IF, DIR),
        Err(NtStatus::INVALID_PARAMETER)
    );
}

#[test]
fn overwrite_truncates_and_reports_overwritten() {
    let mut c = Client::new();
    c.put_file("t", b"0123456789");
    let mut m = c.create_msg(c.tree_id, "t", GENERIC_ALL, SHARE_ALL, D::OVERWRITE, 0);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    assert_eq!(cr.create_action, CreateAction::OVERWRITTEN);
    assert_eq!(cr.end_of_file, 0);
}

#[test]
fn a_second_open_without_share_read_is_a_sharing_violation_and_does_not_truncate() {
    let mut c = Client::new();
    c.put_file("s", b"keep");
    let tree = c.tree_id;
    let _f = c.create_on(tree, "s", GENERIC_READ, 0, D::OPEN, 0).unwrap();
    assert_eq!(
        c.create_on(tree, "s", GENERIC_READ, SHARE_ALL, D::OPEN, 0),
        Err(NtStatus::SHARING_VIOLATION)
    );
    assert_eq!(
        c.create_on(tree, "s", GENERIC_ALL, SHARE_ALL, D::OVERWRITE_IF, 0),
        Err(NtStatus::SHARING_VIOLATION)
    );
    assert_eq!(
        c.mem
            .stat(
                &ringshare_vfs::server_who(),
                &RelPath::from_components(["s"]).unwrap()
            )
            .unwrap()
            .size,
        4
    );
    // Attribute-only opens take no part in share modes.
    assert!(c
        .create_on(tree, "s", FILE_READ_ATTRIBUTES, 0, D::OPEN, 0)
        .is_ok());
}

#[test]
fn an_overwriting_open_that_asks_only_to_read_needs_the_others_share_write() {
    // smbtorture 4.22 smb2.acls.OVERWRITE_READ_ONLY_FILE: the truncation writes the file.
    const FILE_READ_DATA: u32 = 1;
    for disposition in [D::SUPERSEDE, D::OVERWRITE, D::OVERWRITE_IF] {
        let mut c = Client::new();
        c.put_file("r", b"keep");
        let tree = c.tree_id;
        let _reader = c
            .create_on(tree, "r", FILE_READ_DATA, SHARE_READ_ONLY, D::OPEN, 0)
            .unwrap();
        assert_eq!(
            c.create_on(tree, "r", FILE_READ_DATA, SHARE_ALL, disposition, 0),
            Err(NtStatus::SHARING_VIOLATION),
            "{disposition:?}"
        );
        let size = c
            .mem
            .stat(
                &ringshare_vfs::server_who(),
                &RelPath::from_components(["r"]).unwrap(),
            )
            .unwrap()
            .size;
        assert_eq!(size, 4, "{disposition:?} truncated the file");
        // A plain open for reading is let in beside the reader.
        assert!(c
            .create_on(tree, "r", FILE_READ_DATA, SHARE_ALL, D::OPEN, 0)
            .is_ok());
    }
}

#[test]
fn a_file_is_opened_and_deleted_by_the_short_name_the_server_gave_it() {
    // smbtorture 4.22 smb2.name-mangling.mangle; [MS-FSCC] 2.1.5.2.1.
    let mut c = Client::new();
    let long = "a quite long file name.document";
    c.put_file(long, b"by any name");
    let tree = c.tree_id;
    let f = c
        .create_on(tree, long, GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .unwrap();
    let r = c.query_info(f, 1, 21, 0, 1024); // FileAlternateNameInformation
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let buf = output_buffer(&r);
    let len = u32::from_le_bytes(buf[0..4].try_into().unwrap()) as usize;
    let short = String::from_utf16(
        &buf[4..4 + len]
            .chunks(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert!(short.contains('~'), "{short}");
    c.close(f);

    // Opened by its short name, in either case, it is the same file.
    for name in [short.clone(), short.to_lowercase()] {
        let g = c.create_on(tree, &name, GENERIC_READ, SHARE_ALL, D::OPEN, 0);
        assert!(g.is_ok(), "{name}: {g:?}");
        c.close(g.unwrap());
    }
    // Deleted by it, the long name goes.
    let d = c
        .create_on(tree, &short, DELETE, SHARE_ALL, D::OPEN, DELETE_ON_CLOSE)
        .unwrap();
    c.close(d);
    assert!(!c.server_sees(&[long]));
    // Then the short name is free: a CREATE makes a file of that very name.
    let n = c
        .create_on(tree, &short, GENERIC_ALL, SHARE_ALL, D::CREATE, 0)
        .unwrap();
    c.close(n);
    assert!(c.server_sees(&[short.as_str()]));
    // A name that only looks like a short name is not found.
    assert_eq!(
        c.create_on(tree, "NOPE~ZZZ.DOC", GENERIC_READ, SHARE_ALL, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

#[test]
fn share_modes_apply_across_connections() {
    let mut a = Client::new();
    a.put_file("x", b"1");
    let server = {
        // The second client shares the first one's server through the same share.
        let mem = a.mem.clone();
        (
            support::server(&mem, ringshare_core::SigningPolicy::IfRequired),
            mem,
        )
    };
    // Separate servers would not see each other; use one server for both.
    let mut b1 = Client::on(server.0.clone(), server.1.clone(), Options::default());
    let mut b2 = Client::on(server.0, server.1, Options::default());
    let t1 = b1.tree_id;
    let t2 = b2.tree_id;
    let _f = b1
        .create_on(t1, "x", GENERIC_WRITE, SHARE_READ_ONLY, D::OPEN, 0)
        .unwrap();
    assert_eq!(
        b2.create_on(t2, "x", GENERIC_WRITE, SHARE_ALL, D::OPEN, 0),
        Err(NtStatus::SHARING_VIOLATION)
    );
    assert!(b2
        .create_on(t2, "x", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .is_ok());
}
const SHARE_READ_ONLY: u32 = 1;

#[test]
fn read_only_share_refuses_creation_and_write_access() {
    let mut c = Client::new();
    c.put_file("r", b"data");
    let ro = c.ro_tree_id;
    assert_eq!(
        c.create_on(ro, "new", GENERIC_READ, SHARE_ALL, D::CREATE, 0),
        Err(NtStatus::ACCESS_DENIED)
    );
    assert_eq!(
        c.create_on(ro, "r", GENERIC_WRITE, SHARE_ALL, D::OPEN, 0),
        Err(NtStatus::ACCESS_DENIED)
    );
    assert_eq!(
        c.create_on(
            ro,
            "r",
            GENERIC_READ | DELETE,
            SHARE_ALL,
            D::OPEN,
            DELETE_ON_CLOSE
        ),
        Err(NtStatus::ACCESS_DENIED)
    );
    assert!(c
        .create_on(ro, "r", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .is_ok());
}

#[test]
fn delete_on_close_without_delete_access_is_invalid_parameter() {
    let mut c = Client::new();
    assert_eq!(
        c.create(
            "z",
            GENERIC_READ | GENERIC_WRITE,
            D::CREATE,
            DELETE_ON_CLOSE
        ),
        Err(NtStatus::INVALID_PARAMETER)
    );
}

#[test]
fn delete_on_close_removes_the_file_when_the_last_handle_closes() {
    let mut c = Client::new();
    c.put_file("gone", b"bye");
    let a = c.create("gone", GENERIC_READ, D::OPEN, 0).unwrap();
    let b = c
        .create("gone", GENERIC_READ | DELETE, D::OPEN, DELETE_ON_CLOSE)
        .unwrap();
    assert_eq!(c.close(b).status(), NtStatus::SUCCESS);
    assert!(exists(&c, "gone"), "another handle is still open");
    assert_eq!(
        c.create("gone", GENERIC_READ, D::OPEN, 0),
        Err(NtStatus::DELETE_PENDING)
    );
    assert_eq!(c.close(a).status(), NtStatus::SUCCESS);
    assert!(!exists(&c, "gone"));
}

#[test]
fn delete_on_close_of_a_read_only_file_is_cannot_delete() {
    let mut c = Client::new();
    let tree = c.tree_id;
    let mut m = c.create_msg_ctx(
        tree,
        "ro.txt",
        GENERIC_ALL,
        SHARE_ALL,
        D::CREATE,
        0,
        0x1,
        Vec::new(),
    );
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    assert_eq!(cr.file_attributes.0 & 1, 1, "READONLY stored at create");
    c.close(cr.file_id);
    // Opening it again reports it too.
    let mut m = c.create_msg_ctx(
        tree,
        "ro.txt",
        GENERIC_READ,
        SHARE_ALL,
        D::OPEN,
        0,
        0,
        Vec::new(),
    );
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    assert_eq!(cr.file_attributes.0 & 1, 1, "READONLY reported on open");
    c.close(cr.file_id);
    assert_eq!(
        c.create("ro.txt", GENERIC_READ | DELETE, D::OPEN, DELETE_ON_CLOSE),
        Err(NtStatus::CANNOT_DELETE)
    );
    assert_eq!(
        c.create("ro.txt", GENERIC_WRITE, D::OPEN, 0),
        Err(NtStatus::ACCESS_DENIED)
    );
}

#[test]
fn close_with_postquery_attrib_returns_the_attributes() {
    let mut c = Client::new();
    c.put_file("p", b"12345");
    let f = c.create("p", GENERIC_READ, D::OPEN, 0).unwrap();
    let mut m = c.close_msg(f, 1);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    let cr = CloseResponse::decode(&r.msg).unwrap();
    assert_eq!(cr.flags.0, 1);
    assert_eq!(cr.end_of_file, 5);
    assert_eq!(cr.file_attributes.0, 0x20);
    // The handle is gone now.
    assert_eq!(c.close(f).status(), NtStatus::FILE_CLOSED);
}

#[test]
fn create_answers_maximal_access_and_on_disk_id_contexts() {
    use ringshare_wire::create::{decode_maximal_access_response, tag, CreateContext};
    let mut c = Client::new();
    let tree = c.tree_id;
    let ctx = vec![
        CreateContext::new(tag::QUERY_MAXIMAL_ACCESS, Vec::new()),
        CreateContext::new(tag::QUERY_ON_DISK_ID, Vec::new()),
        CreateContext::new(b"XXXX", vec![1, 2]),
    ];
    let mut m = c.create_msg_ctx(tree, "ctx", GENERIC_ALL, SHARE_ALL, D::CREATE, 0, 0, ctx);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let cr = CreateResponse::decode(&r.msg).unwrap();
    assert_eq!(cr.contexts.len(), 2);
    let (st, mask) = decode_maximal_access_response(&cr.contexts[0].data).unwrap();
    assert_eq!(st, NtStatus::SUCCESS);
    assert_eq!(mask.0, 0x001F_01FF);
    assert_eq!(cr.contexts[1].name, tag::QUERY_ON_DISK_ID);
    assert_eq!(cr.contexts[1].data.len(), 32);
}

#[test]
fn a_file_id_of_another_tree_is_file_closed() {
    let mut c = Client::new();
    c.put_file("o", b"1");
    let ro = c.ro_tree_id;
    let f = c
        .create_on(ro, "o", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .unwrap();
    // The close goes to the writable tree.
    assert_eq!(c.close(f).status(), NtStatus::FILE_CLOSED);
    let r = c.call(Command::CLOSE, ro, |o| {
        ringshare_wire::create::CloseRequest {
            flags: Default::default(),
            file_id: f,
        }
        .encode(o)
    });
    assert_eq!(r.status(), NtStatus::SUCCESS);
}

#[test]
fn tree_disconnect_closes_its_opens_and_runs_delete_on_close() {
    let mut c = Client::new();
    c.put_file("td", b"1");
    c.create("td", GENERIC_READ | DELETE, D::OPEN, DELETE_ON_CLOSE)
        .unwrap();
    let tree = c.tree_id;
    let r = c.call(Command::TREE_DISCONNECT, tree, |o| {
        ringshare_wire::tree::TreeDisconnectRequest.encode(o)
    });
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert!(!exists(&c, "td"));
}

#[test]
fn ipc_create_opens_the_rpc_pipes_and_refuses_other_names() {
    let mut c = Client::new();
    let ipc = c.tree_connect("IPC$");
    assert!(c
        .create_on(ipc, "srvsvc", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .is_ok());
    assert!(c
        .create_on(ipc, "wkssvc", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .is_ok());
    assert!(c
        .create_on(ipc, "lsarpc", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .is_ok());
    assert!(c
        .create_on(ipc, "samr", GENERIC_READ, SHARE_ALL, D::OPEN, 0)
        .is_ok());
    assert_eq!(
        c.create_on(ipc, "spoolss", GENERIC_READ, SHARE_ALL, D::OPEN, 0),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}
