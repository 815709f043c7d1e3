//! Named data streams over SMB2 ([MS-FSCC] 2.1.4, 2.4.43; [MS-FSA] 2.1.5.1.2.1):
//! `file:stream` opened, made, read, written, listed, deleted; own share modes;
//! the file kept while its streams are open; the 64 KiB limit of one stream.

use crate::support;

use std::sync::Arc;

use ringshare_vfs::memory::MemShare;
use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::fscc::FileStreamInformation;
use ringshare_wire::{FileId, NtStatus};
use support::*;

const INFO_FILE: u8 = 1;
const CLASS_STREAM: u8 = 22;
const CLASS_ALL: u8 = 18;
const DIRECTORY_FILE: u32 = 0x1;
const DELETE_ON_CLOSE: u32 = 0x1000;
const RW: u32 = GENERIC_READ | GENERIC_WRITE;

fn streams_of(c: &mut Client, f: FileId) -> Vec<(String, u64)> {
    let r = c.query_info(f, INFO_FILE, CLASS_STREAM, 0, 4096);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let mut v: Vec<(String, u64)> = FileStreamInformation::decode(&output_buffer(&r))
        .expect("stream information")
        .entries
        .into_iter()
        .map(|e| (e.stream_name, e.stream_size))
        .collect();
    v.sort();
    v
}

fn open(c: &mut Client, name: &str, access: u32, share: u32, d: D) -> Result<FileId, NtStatus> {
    let tree = c.tree_id;
    c.create_on(tree, name, access, share, d, 0)
}

fn put_stream(c: &mut Client, name: &str, data: &[u8]) {
    let f = open(c, name, RW, SHARE_ALL, D::OVERWRITE_IF).expect("create the stream");
    if !data.is_empty() {
        assert_eq!(c.write(f, 0, data).status(), NtStatus::SUCCESS);
    }
    assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
}

#[test]
fn a_stream_is_made_with_its_file_written_read_back_and_listed() {
    let mut c = Client::new();
    put_stream(
        &mut c,
        "f.txt:Zone.Identifier",
        b"[ZoneTransfer]\r\nZoneId=3\r\n",
    );
    let f = open(
        &mut c,
        "f.txt:zone.identifier:$DATA",
        GENERIC_READ,
        SHARE_ALL,
        D::OPEN,
    )
    .expect("the stream opens under any case");
    let r = c.read(f, 0, 100);
    assert_eq!(read_data(&r), b"[ZoneTransfer]\r\nZoneId=3\r\n");
    assert_eq!(
        streams_of(&mut c, f),
        [
            ("::$DATA".to_string(), 0),
            (":Zone.Identifier:$DATA".to_string(), 26)
        ]
    );
    c.close(f);
    let base = open(&mut c, "f.txt", GENERIC_READ, SHARE_ALL, D::OPEN).expect("the file");
    assert_eq!(streams_of(&mut c, base).len(), 2);
    let r = c.read(base, 0, 100);
    assert_eq!(
        r.status(),
        NtStatus::END_OF_FILE,
        "the file's own data is empty"
    );
}

#[test]
fn a_stream_handle_is_named_with_its_stream() {
    let mut c = Client::new();
    put_stream(&mut c, "n:s1", b"x");
    let f = open(&mut c, "n:s1:$DATA", GENERIC_READ, SHARE_ALL, D::OPEN).unwrap();
    let r = c.query_info(f, INFO_FILE, CLASS_ALL, 0, 512);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let out = output_buffer(&r);
    // FileAllInformation: 96 bytes of fixed parts, then the name's length and the name.
    let name: Vec<u16> = out[100..]
        .chunks(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(String::from_utf16(&name).unwrap(), "\\n:s1");
}

#[test]
fn opening_a_missing_stream_or_making_one_twice_fails_as_for_files() {
    let mut c = Client::new();
    c.put_file("g", b"data");
    assert_eq!(
        open(&mut c, "g:nope", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    assert_eq!(
        open(&mut c, "missing:s", RW, SHARE_ALL, D::OPEN),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    put_stream(&mut c, "g:s", b"");
    assert_eq!(
        open(&mut c, "g:S", RW, SHARE_ALL, D::CREATE),
        Err(NtStatus::OBJECT_NAME_COLLISION)
    );
}

#[test]
fn each_stream_has_its_own_share_modes_and_the_file_stays_openable() {
    let mut c = Client::new();
    let a = open(&mut c, "h:one", RW, 0, D::CREATE).unwrap();
    let b = open(&mut c, "h:two", RW, 0, D::CREATE).expect("another stream with no sharing");
    assert_eq!(
        open(&mut c, "h:one", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::SHARING_VIOLATION)
    );
    let base = open(&mut c, "h", RW, 0, D::OPEN).expect("the file itself, no sharing");
    for f in [a, b, base] {
        c.close(f);
    }
}

#[test]
fn a_directory_has_streams_but_no_default_stream() {
    let mut c = Client::new();
    let d = c
        .create("dir", GENERIC_READ, D::CREATE, DIRECTORY_FILE)
        .unwrap();
    c.close(d);
    let tree = c.tree_id;
    assert_eq!(
        c.create_on(tree, "dir:s", RW, SHARE_ALL, D::CREATE, DIRECTORY_FILE),
        Err(NtStatus::NOT_A_DIRECTORY)
    );
    assert_eq!(
        c.create_on(
            tree,
            "dir::$DATA",
            GENERIC_READ,
            SHARE_ALL,
            D::OPEN,
            DIRECTORY_FILE
        ),
        Err(NtStatus::NOT_A_DIRECTORY)
    );
    assert_eq!(
        open(&mut c, "dir::$DATA", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::FILE_IS_A_DIRECTORY)
    );
    put_stream(&mut c, "dir:s", b"on a directory");
    let d = c
        .create("dir", GENERIC_READ, D::OPEN, DIRECTORY_FILE)
        .unwrap();
    assert_eq!(
        streams_of(&mut c, d),
        [(":s:$DATA".to_string(), 14)],
        "no ::$DATA for a directory"
    );
}

#[test]
fn delete_on_close_of_a_stream_removes_the_stream_alone() {
    let mut c = Client::new();
    c.put_file("k", b"file data");
    put_stream(&mut c, "k:s", b"stream");
    let s = c
        .create("k:s", RW | DELETE, D::OPEN, DELETE_ON_CLOSE)
        .unwrap();
    c.close(s);
    assert_eq!(
        open(&mut c, "k:s", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
    let f = open(&mut c, "k", GENERIC_READ, SHARE_ALL, D::OPEN).unwrap();
    assert_eq!(read_data(&c.read(f, 0, 100)), b"file data");
    assert_eq!(streams_of(&mut c, f), [("::$DATA".to_string(), 9)]);
}

#[test]
fn a_file_is_not_deleted_under_a_stream_open_that_does_not_share_delete() {
    let mut c = Client::new();
    let s = open(&mut c, "m:s", RW, SHARE_READ_WRITE, D::CREATE).unwrap();
    assert_eq!(
        c.create("m", DELETE, D::OPEN, DELETE_ON_CLOSE),
        Err(NtStatus::SHARING_VIOLATION)
    );
    c.close(s);
    let s = open(&mut c, "m:s", RW, SHARE_ALL, D::OPEN).unwrap();
    assert_eq!(c.write(s, 0, b"still here").status(), NtStatus::SUCCESS);
    let f = c.create("m", DELETE, D::OPEN, DELETE_ON_CLOSE).unwrap();
    c.close(f);
    // The file waits for its stream's open; its names answer DELETE_PENDING.
    assert_eq!(
        open(&mut c, "m", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::DELETE_PENDING)
    );
    assert_eq!(
        open(&mut c, "m:s", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::DELETE_PENDING)
    );
    assert_eq!(read_data(&c.read(s, 0, 100)), b"still here");
    c.close(s);
    assert_eq!(
        open(&mut c, "m", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::OBJECT_NAME_NOT_FOUND)
    );
}

#[test]
fn a_file_with_an_open_stream_keeps_its_name() {
    let mut c = Client::new();
    let s = open(&mut c, "r:s", RW, SHARE_ALL, D::CREATE).unwrap();
    let f = c.create("r", DELETE, D::OPEN, 0).unwrap();
    let r = c.set_info(f, INFO_FILE, 10, &rename_info("r2", false));
    assert_eq!(r.status(), NtStatus::ACCESS_DENIED);
    c.close(s);
    let r = c.set_info(f, INFO_FILE, 10, &rename_info("r2", false));
    assert_eq!(r.status(), NtStatus::SUCCESS);
}

#[test]
fn overwriting_a_file_drops_its_streams_but_opening_it_keeps_them() {
    let mut c = Client::new();
    put_stream(&mut c, "o:s", b"abc");
    let f = open(&mut c, "o", RW, SHARE_ALL, D::OPEN).unwrap();
    assert_eq!(streams_of(&mut c, f).len(), 2);
    c.close(f);
    let f = open(&mut c, "o", RW, SHARE_ALL, D::OVERWRITE_IF).unwrap();
    assert_eq!(streams_of(&mut c, f), [("::$DATA".to_string(), 0)]);
}

#[test]
fn a_stream_holds_at_most_65535_bytes() {
    let mut c = Client::new();
    let s = open(&mut c, "big:s", RW, SHARE_ALL, D::CREATE).unwrap();
    assert_eq!(c.write(s, 65534, b"x").status(), NtStatus::SUCCESS);
    assert_eq!(
        c.write(s, 65535, b"y").status(),
        NtStatus::FILE_SYSTEM_LIMITATION
    );
    assert_eq!(
        c.write(s, 65000, &[7u8; 600]).status(),
        NtStatus::FILE_SYSTEM_LIMITATION
    );
    assert_eq!(streams_of(&mut c, s)[1], (":s:$DATA".to_string(), 65535));
}

#[test]
fn any_colon_is_an_invalid_name_on_a_share_without_streams() {
    let mem = MemShare::new();
    let server = server_with(&mem, |cfg| {
        for s in &mut cfg.shares {
            Arc::get_mut(s).unwrap().streams = false;
        }
    });
    let mut c = Client::on(server, mem, Options::default());
    c.put_file("x", b"");
    for n in ["x::$DATA", "x::foooooooooooo", "x:stream", "x:stream:$DATA"] {
        assert_eq!(
            open(&mut c, n, GENERIC_READ, SHARE_ALL, D::OPEN),
            Err(NtStatus::OBJECT_NAME_INVALID),
            "{n}"
        );
    }
}

const SHARE_READ_WRITE: u32 = 3;

#[test]
fn a_stream_is_renamed_within_its_file() {
    let mut c = Client::new();
    put_stream(&mut c, "q:one", b"first");
    put_stream(&mut c, "q:two", b"");
    let s = c.create("q:one", RW | DELETE, D::OPEN, 0).unwrap();
    let r = c.set_info(s, INFO_FILE, 10, &rename_info(":two:$DATA", false));
    assert_eq!(r.status(), NtStatus::OBJECT_NAME_COLLISION);
    let r = c.set_info(s, INFO_FILE, 10, &rename_info("q:three", false));
    assert_eq!(
        r.status(),
        NtStatus::SHARING_VIOLATION,
        "a target with a file part"
    );
    let r = c.set_info(s, INFO_FILE, 10, &rename_info(":three", false));
    assert_eq!(r.status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&c.read(s, 0, 10)), b"first", "the handle follows");
    c.close(s);
    let f = open(&mut c, "q", GENERIC_READ, SHARE_ALL, D::OPEN).unwrap();
    assert_eq!(
        streams_of(&mut c, f),
        [
            ("::$DATA".to_string(), 0),
            (":three:$DATA".to_string(), 5),
            (":two:$DATA".to_string(), 0)
        ]
    );
    // The new name is the stream's for share modes too.
    let a = open(&mut c, "q:three", RW, 0, D::OPEN).unwrap();
    assert_eq!(
        open(&mut c, "q:THREE", GENERIC_READ, SHARE_ALL, D::OPEN),
        Err(NtStatus::SHARING_VIOLATION)
    );
    c.close(a);
}

#[test]
fn renaming_a_stream_onto_an_empty_one_replaces_it() {
    let mut c = Client::new();
    put_stream(&mut c, "p:Stream One", b"");
    put_stream(&mut c, "p:Second Stream", b"2");
    let s = c
        .create("p:Second Stream", RW | DELETE, D::OPEN, 0)
        .unwrap();
    let r = c.set_info(s, INFO_FILE, 10, &rename_info(":Stream One", true));
    assert_eq!(r.status(), NtStatus::SUCCESS);
    c.close(s);
    let f = open(&mut c, "p", GENERIC_READ, SHARE_ALL, D::OPEN).unwrap();
    assert_eq!(
        streams_of(&mut c, f),
        [
            ("::$DATA".to_string(), 0),
            (":Stream One:$DATA".to_string(), 1)
        ]
    );
}

#[test]
fn a_stream_read_last_in_a_related_compound_is_padded_like_a_file_read() {
    let mut c = Client::new();
    c.put_file("cp", b"abc");
    put_stream(&mut c, "cp:s", b"abc");
    for name in ["cp", "cp:s"] {
        let tree = c.tree_id;
        let create = c.create_msg(tree, name, GENERIC_READ, SHARE_ALL, D::OPEN, 0);
        let read = c.read_msg(FileId::ANY, 0, 3);
        let rs = c.compound(vec![create, read], true);
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[1].status(), NtStatus::SUCCESS, "{name}");
        assert_eq!(
            rs[1].body().len(),
            24,
            "{name}: the READ's body padded to 8 bytes"
        );
    }
}
