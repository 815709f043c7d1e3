//! The write time clients see while a file is open ([MS-FSA] delayed
//! write-time updates, as Windows and Samba show them): a write shows two
//! seconds after a handle's first write, at once on FLUSH or SET_INFO, and
//! at close; listings and getinfo agree.

use crate::support;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::create::CloseResponse;
use ringshare_wire::fscc::{decode_dir_entries, FileBasicInformation, FileInfoClass, FileTime};
use ringshare_wire::header::Header;
use ringshare_wire::{FileId, NtStatus};
use support::*;

const INFO_FILE: u8 = 1;
const DIR: u32 = 1;

fn write_time(c: &mut Client, f: FileId) -> FileTime {
    FileBasicInformation::decode(&output_buffer(&c.query_info(f, INFO_FILE, 4, 0, 1024)))
        .unwrap()
        .last_write_time
}

fn listed_write_time(c: &mut Client, dir: FileId, name: &str) -> FileTime {
    let r = c.query_directory(dir, 0x25, 1, name, 65536);
    assert_eq!(r.status(), NtStatus::SUCCESS);
    decode_dir_entries(FileInfoClass(0x25), &output_buffer(&r))
        .unwrap()
        .into_iter()
        .find(|e| e.name == name)
        .expect("listed")
        .last_write_time
}

fn close_postquery(c: &mut Client, f: FileId) -> FileTime {
    let mut m = c.close_msg(f, 1);
    c.sign(&mut m);
    let r = c.send_frame(m).remove(0);
    let _: &Header = &r.hdr;
    FileTime(CloseResponse::decode(&r.msg).unwrap().last_write_time)
}

#[test]
fn a_write_shows_in_the_write_time_two_seconds_later_and_close_keeps_that_value() {
    let mut c = Client::new();
    c.put_file("w", b"");
    let d = c.create("", GENERIC_READ, D::OPEN, DIR).unwrap();
    let f = c
        .create("w", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    let before = write_time(&mut c, f);
    c.now.filetime += 10_000_000;
    c.write(f, 0, b"data");
    assert_eq!(write_time(&mut c, f), before, "not at the write");
    assert_eq!(
        listed_write_time(&mut c, d, "w"),
        before,
        "the listing agrees"
    );
    let t = c.tree_id;
    let mut m = c.create_msg(t, "w", GENERIC_READ, SHARE_ALL, D::OPEN, 0);
    c.sign(&mut m);
    let rs = c.send_frame(m);
    let r = ringshare_wire::create::CreateResponse::decode(&rs[0].msg).unwrap();
    assert_eq!(
        FileTime(r.last_write_time),
        before,
        "another open's CREATE agrees"
    );
    c.close(r.file_id);
    c.tick(2100);
    let shown = write_time(&mut c, f);
    assert!(shown > before, "two seconds later");
    assert_eq!(listed_write_time(&mut c, d, "w"), shown);
    c.write(f, 4, b"more");
    assert_eq!(
        write_time(&mut c, f),
        shown,
        "a second write of the handle waits for its close"
    );
    c.now.filetime += 50_000_000;
    let closed = close_postquery(&mut c, f);
    assert!(closed > shown, "the close shows the second write");
    let g = c.create("w", GENERIC_READ, D::OPEN, 0).unwrap();
    assert_eq!(write_time(&mut c, g), closed, "and the disk keeps it");
}

#[test]
fn flush_of_a_written_handle_shows_the_write_at_once_and_close_keeps_it() {
    let mut c = Client::new();
    c.put_file("fl", b"");
    let f = c
        .create("fl", GENERIC_READ | GENERIC_WRITE, D::OPEN, 0)
        .unwrap();
    let before = write_time(&mut c, f);
    c.now.filetime += 10_000_000;
    c.write(f, 0, b"x");
    assert_eq!(write_time(&mut c, f), before);
    assert_eq!(c.flush(f).status(), NtStatus::SUCCESS);
    let flushed = write_time(&mut c, f);
    assert!(flushed > before);
    assert_eq!(close_postquery(&mut c, f), flushed);
}

#[test]
fn a_write_time_set_by_a_client_sticks_over_later_writes_until_close() {
    let mut c = Client::new();
    c.put_file("st", b"");
    let f = c.create("st", GENERIC_ALL, D::OPEN, 0).unwrap();
    let when = FileTime(FileTime::UNIX_EPOCH.0 + 10_000_000 * 86_400);
    let mut buf = Vec::new();
    FileBasicInformation {
        last_write_time: when,
        ..Default::default()
    }
    .encode(&mut buf);
    assert_eq!(
        c.set_info(f, INFO_FILE, 4, &buf).status(),
        NtStatus::SUCCESS
    );
    c.write(f, 0, b"after");
    c.tick(3000);
    assert_eq!(write_time(&mut c, f), when);
    assert_eq!(close_postquery(&mut c, f), when);
}
