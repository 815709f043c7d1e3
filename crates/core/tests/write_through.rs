//! WRITEs that go through to stable storage: on a continuously available share, with
//! SMB2_WRITEFLAG_WRITE_THROUGH, or through a FILE_WRITE_THROUGH open. The write and then its
//! fsync are two I/O requests the driver completes (on the ring); the WRITE is answered only
//! once the fsync completed, and an error of either step is the client's answer. Here the test
//! plays the driver and holds every I/O request until it completes it.

use crate::support;

use ringshare_core::{IoDone, IoOp, IoRequest, Output};
use ringshare_vfs::memory::MemShare;
use ringshare_vfs::FsError;
use ringshare_wire::consts::{Command, CreateDisposition};
use ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET;
use ringshare_wire::header::{self, Header};
use ringshare_wire::{FileId, NtStatus};
use support::*;

/// FILE_WRITE_THROUGH in CreateOptions and in FileModeInformation.
const FILE_WRITE_THROUGH: u32 = 0x2;
/// FileModeInformation's class (SMB2_0_INFO_FILE).
const FILE_MODE_INFORMATION: u8 = 16;
/// The WRITE's Flags field in a message (header + body offset 44).
const WRITE_FLAGS_AT: usize = 64 + 44;
const SMB2_WRITEFLAG_WRITE_THROUGH: u32 = 1;

fn client(ca: bool) -> Client {
    let mem = MemShare::new();
    let server = server_with(&mem, |c| {
        std::sync::Arc::get_mut(&mut c.shares[0])
            .unwrap()
            .continuous_availability = ca;
    });
    Client::on(server, mem, Options::default())
}

fn open(c: &mut Client, options: u32) -> FileId {
    c.create(
        "f.bin",
        GENERIC_READ | GENERIC_WRITE,
        CreateDisposition::OVERWRITE_IF,
        0x40 | options,
    )
    .unwrap()
}

fn write_msg(c: &mut Client, f: FileId, offset: u64, data: &[u8], flags: u32) -> Vec<u8> {
    let tree = c.tree_id;
    let mut m = c.message(Command::WRITE, tree, |o| write_body(o, f, offset, data));
    m[WRITE_FLAGS_AT..WRITE_FLAGS_AT + 4].copy_from_slice(&flags.to_le_bytes());
    c.charge(&mut m, data.len());
    c.sign(&mut m);
    m
}

/// Every response in a frame.
fn parse(frame: &[u8]) -> Vec<Resp> {
    header::split_compound(&frame[4..])
        .map(|m| {
            let m = m.unwrap();
            Resp {
                hdr: Header::decode(m).unwrap(),
                msg: m.to_vec(),
            }
        })
        .collect()
}

/// What the connection asked for so far: the frames it sent (as responses) and the file I/O
/// it waits for, held.
fn outputs(c: &mut Client) -> (Vec<Resp>, Vec<IoRequest>) {
    let (mut sent, mut io) = (Vec::new(), Vec::new());
    while let Some(o) = c.conn.poll_output() {
        match o {
            Output::Send(parts) => sent.extend(parse(&parts.concat())),
            Output::Io(r) => io.push(r),
            Output::Lookup(r) => {
                let done = r.run();
                c.conn.complete_lookup(c.now, r.id, done);
            }
            other => panic!("unexpected output {other:?}"),
        }
    }
    (sent, io)
}

fn send(c: &mut Client, frame: Vec<u8>) -> (Vec<Resp>, Vec<IoRequest>) {
    c.conn.receive(c.now, frame);
    outputs(c)
}

/// Completes `r` as the driver would, with `done`, or run through the node when `None`.
fn complete(c: &mut Client, r: IoRequest, done: Option<IoDone>) -> (Vec<Resp>, Vec<IoRequest>) {
    let done = done.unwrap_or_else(|| r.run_blocking());
    c.conn.complete_io(c.now, r.id, done);
    outputs(c)
}

fn only(mut io: Vec<IoRequest>) -> IoRequest {
    assert_eq!(io.len(), 1, "one I/O request: {io:?}");
    io.remove(0)
}

fn count(r: &Resp) -> u32 {
    u32::from_le_bytes(r.body()[4..8].try_into().unwrap())
}

/// Sends a WRITE of `data` and completes its write: the responses then and what it asks next.
fn written(c: &mut Client, f: FileId, data: &[u8], flags: u32) -> (Vec<Resp>, Option<IoRequest>) {
    let m = write_msg(c, f, 0, data, flags);
    let (sent, io) = send(c, m);
    assert!(sent.is_empty(), "nothing answered before the write is done");
    let w = only(io);
    assert!(matches!(w.op, IoOp::Write { .. }), "the write first: {w:?}");
    let (sent, io) = complete(c, w, None);
    (sent, io.into_iter().next())
}

#[test]
fn a_write_on_a_continuously_available_share_is_answered_only_once_its_fsync_completes() {
    let mut c = client(true);
    let f = open(&mut c, 0);
    let (sent, sync) = written(&mut c, f, b"on stable storage", 0);
    assert!(sent.is_empty(), "answered before the fsync completed");
    let sync = sync.expect("an fsync asked after the write");
    assert!(matches!(sync.op, IoOp::Sync), "{sync:?}");
    // Another request of the connection is answered meanwhile.
    let q = c.query_info_msg(f, 1, 5, 24);
    let (sent, io) = send(&mut c, q);
    assert!(io.is_empty());
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].hdr.command, Command::QUERY_INFO);
    let (sent, io) = complete(&mut c, sync, Some(IoDone::Sync(Ok(()))));
    assert!(io.is_empty());
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].hdr.command, Command::WRITE);
    assert_eq!(sent[0].status(), NtStatus::SUCCESS);
    assert_eq!(count(&sent[0]) as usize, b"on stable storage".len());
    let r = c.read(f, 0, 64);
    assert_eq!(read_data(&r), b"on stable storage");
}

#[test]
fn an_fsync_that_fails_after_a_write_through_is_the_clients_answer() {
    let mut c = client(true);
    let f = open(&mut c, 0);
    for (e, status) in [
        (FsError::Io, NtStatus::IO_DEVICE_ERROR),
        (FsError::NoSpace, NtStatus::DISK_FULL),
    ] {
        let (_, sync) = written(&mut c, f, b"lost", 0);
        let (sent, io) = complete(&mut c, sync.unwrap(), Some(IoDone::Sync(Err(e))));
        assert!(io.is_empty());
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].status(), status);
    }
    // A write that fails asks no fsync.
    let m = write_msg(&mut c, f, 0, b"x", 0);
    let (_, io) = send(&mut c, m);
    let (sent, io) = complete(&mut c, only(io), Some(IoDone::Write(Err(FsError::NoSpace))));
    assert!(io.is_empty());
    assert_eq!(sent[0].status(), NtStatus::DISK_FULL);
}

#[test]
fn a_write_through_flag_or_open_on_any_share_is_synced_and_a_plain_write_is_not() {
    let mut c = client(false);
    let f = open(&mut c, 0);
    let (sent, sync) = written(&mut c, f, b"plain", 0);
    assert!(sync.is_none(), "a plain write asks no fsync");
    assert_eq!(sent[0].status(), NtStatus::SUCCESS);
    // SMB2_WRITEFLAG_WRITE_THROUGH.
    let (sent, sync) = written(&mut c, f, b"flag", SMB2_WRITEFLAG_WRITE_THROUGH);
    assert!(sent.is_empty());
    let (sent, _) = complete(&mut c, sync.expect("an fsync"), None);
    assert_eq!(sent[0].status(), NtStatus::SUCCESS);
    c.close(f);
    // An open made with FILE_WRITE_THROUGH.
    let g = open(&mut c, FILE_WRITE_THROUGH);
    let (sent, sync) = written(&mut c, g, b"open", 0);
    assert!(sent.is_empty());
    let (sent, _) = complete(&mut c, sync.expect("an fsync"), None);
    assert_eq!(sent[0].status(), NtStatus::SUCCESS);
    c.close(g);
    // FILE_WRITE_THROUGH set on an open with FileModeInformation.
    let h = open(&mut c, 0);
    let r = c.set_info(
        h,
        1,
        FILE_MODE_INFORMATION,
        &FILE_WRITE_THROUGH.to_le_bytes(),
    );
    assert_eq!(r.status(), NtStatus::SUCCESS);
    let (sent, sync) = written(&mut c, h, b"mode", 0);
    assert!(sent.is_empty());
    assert!(sync.is_some_and(|s| matches!(s.op, IoOp::Sync)));
}

#[test]
fn a_write_received_apart_on_a_continuously_available_share_waits_for_its_fsync() {
    let mut c = client(true);
    c.conn.set_send_file(true);
    let f = open(&mut c, 0);
    let data: Vec<u8> = (0..ringshare_core::WRITE_SPLICE_LEN_MIN)
        .map(|i| (i % 251) as u8)
        .collect();
    let tree = c.tree_id;
    let mut m = c.message(Command::WRITE, tree, |o| write_body(o, f, 0, &data));
    c.charge(&mut m, data.len());
    let head = m[..WRITE_REQUEST_DATA_OFFSET].to_vec();
    assert!(c.conn.detachable_write(&head, m.len()).is_some());
    c.conn.receive_detached(c.now, head, data.len());
    let (sent, io) = outputs(&mut c);
    assert!(sent.is_empty());
    let w = only(io);
    assert!(matches!(w.op, IoOp::WriteReceived { .. }), "{w:?}");
    let n = w.node.write_at(&data, 0);
    let (sent, io) = complete(&mut c, w, Some(IoDone::Write(n)));
    assert!(sent.is_empty(), "answered before the fsync");
    let sync = only(io);
    assert!(matches!(sync.op, IoOp::Sync), "{sync:?}");
    let (sent, io) = complete(&mut c, sync, Some(IoDone::Sync(Ok(()))));
    assert!(io.is_empty());
    assert_eq!(sent[0].status(), NtStatus::SUCCESS);
    assert_eq!(count(&sent[0]) as usize, data.len());
}

#[test]
fn a_compound_with_a_write_through_runs_its_next_request_once_the_fsync_completed() {
    let mut c = client(true);
    let f = open(&mut c, 0);
    let tree = c.tree_id;
    let mut w = c.message(Command::WRITE, tree, |o| write_body(o, f, 0, b"first"));
    let mut r = c.read_msg(f, 0, 16);
    let padded = w.len().next_multiple_of(8);
    w.resize(padded, 0);
    header::patch_next_command(&mut w, 0, padded as u32);
    c.sign(&mut w);
    c.sign(&mut r);
    let framed = [w, r].concat();
    let (sent, io) = send(&mut c, framed);
    assert!(sent.is_empty());
    let (sent, io) = complete(&mut c, only(io), None);
    assert!(sent.is_empty());
    let sync = only(io);
    assert!(
        matches!(sync.op, IoOp::Sync),
        "the READ waits for the fsync: {sync:?}"
    );
    let (sent, io) = complete(&mut c, sync, Some(IoDone::Sync(Ok(()))));
    // The READ's own I/O, then one frame with both answers.
    let (mut sent, io) = match io.into_iter().next() {
        Some(read) => {
            assert!(sent.is_empty());
            complete(&mut c, read, None)
        }
        None => (sent, Vec::new()),
    };
    assert!(io.is_empty());
    assert_eq!(sent.len(), 2);
    let read = sent.pop().unwrap();
    assert_eq!(sent[0].status(), NtStatus::SUCCESS);
    assert_eq!(read.status(), NtStatus::SUCCESS);
    assert_eq!(read_data(&read), b"first");
}
