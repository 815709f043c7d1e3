//! Which READs the core hands to the driver as send-file frames (data spliced
//! from the file, never in user memory) and which it reads into a buffer.

use crate::support;

use std::path::PathBuf;
use std::sync::Arc;

use ringshare_core::{Output, SigningPolicy};
use ringshare_vfs::posix::PosixShare;
use ringshare_wire::consts::{Command, CreateDisposition, Dialect};
use ringshare_wire::header::Header;
use ringshare_wire::{framing, NtStatus};
use support::*;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("rs-sendfile-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 253) as u8).collect()
}

/// A logged-on client of a server whose shares live in a real directory,
/// holding `f.bin` with 100 000 bytes.
fn client(dir: &TempDir, signing: SigningPolicy, send_file: bool) -> Client {
    std::fs::write(dir.0.join("f.bin"), data(100_000)).unwrap();
    let backend = Arc::new(PosixShare::new(&dir.0).unwrap());
    let opts = Options {
        signing,
        // The harness signs requests itself only with the SMB 2.x key (HMAC);
        // 2.1 rather than 2.0.2 so that READs may be longer than 64 KiB.
        dialect: if signing == SigningPolicy::Required {
            Dialect::SMB2_1
        } else {
            Dialect::SMB3_1_1
        },
    };
    let server = server_on(backend, opts.signing);
    let mut c = Client::on(server, ringshare_vfs::memory::MemShare::new(), opts);
    c.conn.set_send_file(send_file);
    c
}

/// Sends `msg` alone in a frame and returns what the core queued.
fn outputs(c: &mut Client, mut msg: Vec<u8>) -> Vec<Output> {
    c.sign(&mut msg);
    c.conn.receive(c.now, msg);
    std::iter::from_fn(|| c.conn.poll_output()).collect()
}

/// Completes the file I/O among `outs` and lets the connection finish.
fn finish_io(c: &mut Client, outs: Vec<Output>) {
    for o in outs {
        if let Output::Io(req) = o {
            let done = req.run_blocking();
            c.conn.complete_io(c.now, req.id, done);
        }
    }
    c.pump();
}

fn open_read_only(c: &mut Client) -> ringshare_wire::FileId {
    c.create("f.bin", GENERIC_READ, CreateDisposition::OPEN, 0)
        .expect("open f.bin")
}

#[test]
fn unsigned_read_alone_in_its_frame_becomes_a_send_file_frame_sized_to_the_data() {
    let dir = TempDir::new("alone");
    let mut c = client(&dir, SigningPolicy::IfRequired, true);
    let f = open_read_only(&mut c);
    let msg = c.read_msg(f, 50_000, 131_072);
    let out = outputs(&mut c, msg);
    let [Output::SendFile(sf)] = out.as_slice() else {
        panic!("expected one send-file frame, got {out:?}");
    };
    assert_eq!(
        (sf.offset, sf.len),
        (50_000, 50_000),
        "clamped to the end of file"
    );
    let frame_len = framing::frame_len(sf.head[..4].try_into().unwrap()).unwrap();
    assert_eq!(
        frame_len,
        sf.head.len() - 4 + sf.len,
        "transport length counts the file bytes"
    );
    let hdr = Header::decode(&sf.head[4..]).unwrap();
    assert_eq!(
        (hdr.command, hdr.status),
        (Command::READ, NtStatus::SUCCESS)
    );
    assert!(!hdr.is_signed());
    let bytes = sf.to_bytes();
    let resp = Resp {
        hdr,
        msg: bytes[4..].to_vec(),
    };
    assert_eq!(read_data(&resp), data(100_000)[50_000..]);
}

#[test]
fn read_is_read_into_memory_while_any_open_of_the_file_can_write() {
    let dir = TempDir::new("writer");
    let mut c = client(&dir, SigningPolicy::IfRequired, true);
    let f = open_read_only(&mut c);
    let w = c
        .create("f.bin", GENERIC_WRITE, CreateDisposition::OPEN, 0)
        .unwrap();
    let msg = c.read_msg(f, 0, 65_537);
    let out = outputs(&mut c, msg);
    assert!(matches!(out.as_slice(), [Output::Io(_)]), "{out:?}");
    // Once the writer closes, reads splice again.
    finish_io(&mut c, out);
    assert_eq!(c.close(w).status(), NtStatus::SUCCESS);
    let msg = c.read_msg(f, 0, 65_537);
    let out = outputs(&mut c, msg);
    assert!(matches!(out.as_slice(), [Output::SendFile(_)]), "{out:?}");
}

#[test]
fn signed_read_is_read_into_memory_so_it_can_be_signed() {
    let dir = TempDir::new("signed");
    let mut c = client(&dir, SigningPolicy::Required, true);
    assert!(c.signing.is_some());
    let f = open_read_only(&mut c);
    let msg = c.read_msg(f, 0, 131_072);
    let out = outputs(&mut c, msg);
    assert!(matches!(out.as_slice(), [Output::Io(_)]), "{out:?}");
}

#[test]
fn read_is_read_into_memory_unless_the_driver_turned_send_file_on() {
    let dir = TempDir::new("off");
    let mut c = client(&dir, SigningPolicy::IfRequired, false);
    let f = open_read_only(&mut c);
    let msg = c.read_msg(f, 0, 131_072);
    let out = outputs(&mut c, msg);
    assert!(matches!(out.as_slice(), [Output::Io(_)]), "{out:?}");
}

#[test]
fn read_inside_a_compound_is_read_into_memory() {
    let dir = TempDir::new("compound");
    let mut c = client(&dir, SigningPolicy::IfRequired, true);
    let f = open_read_only(&mut c);
    let a = c.read_msg(f, 0, 100);
    let b = c.read_msg(f, 100, 100);
    let rs = c.compound(vec![a, b], false);
    assert_eq!(rs.len(), 2);
    for r in &rs {
        assert_eq!(r.status(), NtStatus::SUCCESS);
    }
    assert_eq!(read_data(&rs[1]), data(200)[100..]);
}

#[test]
fn send_file_read_at_or_past_the_end_fails_with_end_of_file_and_honours_minimum_count() {
    let dir = TempDir::new("eof");
    let mut c = client(&dir, SigningPolicy::IfRequired, true);
    let f = open_read_only(&mut c);
    let r = c.read(f, 100_000, 65_537);
    assert_eq!(r.status(), NtStatus::END_OF_FILE);
    let tree = c.tree_id;
    let mut msg = c.message(Command::READ, tree, |o| {
        read_body(o, f, 99_990, 131_072, 50)
    });
    c.charge(&mut msg, 131_072);
    let rs = c.send_frame(msg);
    assert_eq!(
        rs[0].status(),
        NtStatus::END_OF_FILE,
        "10 bytes < MinimumCount 50"
    );
}

#[test]
fn reads_up_to_64_kib_are_read_into_memory_and_longer_ones_spliced() {
    let dir = TempDir::new("small");
    let mut c = client(&dir, SigningPolicy::IfRequired, true);
    let f = open_read_only(&mut c);
    for len in [4096, 65_536] {
        let msg = c.read_msg(f, 0, len);
        let out = outputs(&mut c, msg);
        assert!(matches!(out.as_slice(), [Output::Io(_)]), "{len}: {out:?}");
        finish_io(&mut c, out);
    }
    let msg = c.read_msg(f, 0, 65_537);
    let out = outputs(&mut c, msg);
    assert!(matches!(out.as_slice(), [Output::SendFile(_)]), "{out:?}");
}
