//! WRITEs whose payload the driver receives apart from the header (spliced
//! from the socket into a pipe, then into the file): which frames qualify,
//! and that such a WRITE goes through every check a whole one does.

use crate::support;

use ringshare_core::{IoDone, IoOp, Output};
use ringshare_wire::consts::{Command, CreateDisposition, HeaderFlags};
use ringshare_wire::file::WRITE_REQUEST_DATA_OFFSET;
use ringshare_wire::{FileId, NtStatus};
use support::*;

/// The smallest payload the core lets the driver receive apart.
const LEN: usize = ringshare_core::WRITE_SPLICE_LEN_MIN;

fn payload() -> Vec<u8> {
    (0..LEN).map(|i| (i * 13 % 251) as u8).collect()
}

fn client_with_file(splice: bool) -> (Client, FileId) {
    let mut c = Client::new();
    c.conn.set_send_file(splice);
    c.put_file("f.bin", b"");
    let f = c
        .create(
            "f.bin",
            GENERIC_READ | GENERIC_WRITE,
            CreateDisposition::OPEN,
            0,
        )
        .unwrap();
    (c, f)
}

/// A whole WRITE message of `data` at `offset` (header + body + data).
fn write_msg(c: &mut Client, f: FileId, offset: u64, data: &[u8]) -> Vec<u8> {
    let tree = c.tree_id;
    let mut msg = c.message(Command::WRITE, tree, |o| write_body(o, f, offset, data));
    // CreditCharge: one credit per 64 KiB ([MS-SMB2] 3.1.5.2).
    let charge = data.len().div_ceil(65536).max(1) as u16;
    msg[6..8].copy_from_slice(&charge.to_le_bytes());
    c.next_mid += u64::from(charge) - 1;
    msg
}

/// Receives the head of `msg` apart from its payload, as the driver does, and
/// plays the driver for the I/O the core asks for: the payload is written
/// through the node. Returns the responses and whether the core asked to write.
fn send_detached(c: &mut Client, msg: &[u8], data: &[u8]) -> (Vec<Resp>, bool) {
    let head = msg[..WRITE_REQUEST_DATA_OFFSET].to_vec();
    c.conn.receive_detached(c.now, head, data.len());
    let mut asked = false;
    let outs: Vec<Output> = std::iter::from_fn(|| c.conn.poll_output()).collect();
    for o in outs {
        match o {
            Output::Io(req) => match req.op {
                IoOp::WriteReceived { offset, len } => {
                    asked = true;
                    assert_eq!(len, data.len());
                    let n = req.node.write_at(data, offset);
                    c.conn.complete_io(c.now, req.id, IoDone::Write(n));
                }
                _ => panic!("unexpected I/O {:?}", req.op),
            },
            Output::Send(parts) => {
                // Put it back for pump() to parse.
                let frame = parts.concat();
                return (parse(&frame), asked);
            }
            other => panic!("unexpected output {other:?}"),
        }
    }
    (c.pump(), asked)
}

fn parse(frame: &[u8]) -> Vec<Resp> {
    let hdr = ringshare_wire::header::Header::decode(&frame[4..]).unwrap();
    vec![Resp {
        hdr,
        msg: frame[4..].to_vec(),
    }]
}

#[test]
fn an_unsigned_sole_write_of_256_kib_may_be_received_apart_and_lands_in_the_file() {
    let (mut c, f) = client_with_file(true);
    let data = payload();
    let msg = write_msg(&mut c, f, 4096, &data);
    assert_eq!(
        c.conn
            .detachable_write(&msg[..WRITE_REQUEST_DATA_OFFSET], msg.len()),
        Some(LEN)
    );
    let (resps, asked) = send_detached(&mut c, &msg, &data);
    assert!(asked, "the core asks the driver to write the payload");
    assert_eq!(resps.len(), 1);
    assert_eq!(resps[0].status(), NtStatus::SUCCESS);
    // WRITE response: StructureSize 17, reserved, Count.
    let count = u32::from_le_bytes(resps[0].body()[4..8].try_into().unwrap());
    assert_eq!(count as usize, LEN);
    // Read back in 64 KiB pieces (one credit each).
    for (i, piece) in data.chunks(65536).enumerate() {
        let r = c.read(f, 4096 + (i * 65536) as u64, 65536);
        assert_eq!(r.status(), NtStatus::SUCCESS);
        assert!(read_data(&r) == piece, "piece {i} differs");
    }
}

#[test]
fn writes_that_cannot_be_received_apart_are_left_whole() {
    let (mut c, f) = client_with_file(true);
    let data = payload();
    let msg = write_msg(&mut c, f, 0, &data);
    let head = &msg[..WRITE_REQUEST_DATA_OFFSET];
    // Splicing off (`use sendfile = no`).
    let (mut off, f2) = client_with_file(false);
    let msg2 = write_msg(&mut off, f2, 0, &data);
    assert_eq!(
        off.conn
            .detachable_write(&msg2[..WRITE_REQUEST_DATA_OFFSET], msg2.len()),
        None
    );
    // Smaller than 256 KiB.
    let small = write_msg(&mut c, f, 0, &data[..LEN - 1]);
    assert_eq!(
        c.conn
            .detachable_write(&small[..WRITE_REQUEST_DATA_OFFSET], small.len()),
        None
    );
    // A frame length that does not match the declared payload.
    assert_eq!(c.conn.detachable_write(head, msg.len() + 8), None);
    // Signed: the signature covers the payload, which must be checked first.
    let mut signed = head.to_vec();
    let flags = u32::from_le_bytes(signed[16..20].try_into().unwrap()) | HeaderFlags::SIGNED.0;
    signed[16..20].copy_from_slice(&flags.to_le_bytes());
    assert_eq!(c.conn.detachable_write(&signed, msg.len()), None);
    // Part of a compound.
    let mut chained = head.to_vec();
    chained[20..24].copy_from_slice(&(msg.len() as u32).to_le_bytes());
    assert_eq!(c.conn.detachable_write(&chained, msg.len()), None);
    // Not a WRITE.
    let read = c.read_msg(f, 0, LEN as u32);
    let mut padded = read.clone();
    padded.resize(WRITE_REQUEST_DATA_OFFSET, 0);
    assert_eq!(c.conn.detachable_write(&padded, msg.len()), None);
    // A head that is not exactly the fixed part.
    assert_eq!(c.conn.detachable_write(&msg[..100], msg.len()), None);
}

#[test]
fn a_detached_write_on_a_read_only_open_is_refused_and_nothing_is_written() {
    let (mut c, _) = client_with_file(true);
    let ro = c
        .create("f.bin", GENERIC_READ, CreateDisposition::OPEN, 0)
        .unwrap();
    let data = payload();
    let msg = write_msg(&mut c, ro, 0, &data);
    assert!(c
        .conn
        .detachable_write(&msg[..WRITE_REQUEST_DATA_OFFSET], msg.len())
        .is_some());
    let (resps, asked) = send_detached(&mut c, &msg, &data);
    assert!(!asked, "nothing may be written through a read-only open");
    assert_eq!(resps.len(), 1);
    assert_eq!(resps[0].status(), NtStatus::ACCESS_DENIED);
    let r = c.read(ro, 0, 65536);
    assert_eq!(r.status(), NtStatus::END_OF_FILE);
}

#[test]
fn a_detached_write_whose_length_disagrees_with_the_payload_is_invalid() {
    let (mut c, f) = client_with_file(true);
    let data = payload();
    let msg = write_msg(&mut c, f, 0, &data);
    let head = msg[..WRITE_REQUEST_DATA_OFFSET].to_vec();
    c.conn.receive_detached(c.now, head, LEN - 1);
    let outs: Vec<Output> = std::iter::from_fn(|| c.conn.poll_output()).collect();
    assert!(outs.iter().all(|o| !matches!(o, Output::Io(_))));
    let Some(Output::Send(parts)) = outs.into_iter().next() else {
        panic!("a reply")
    };
    assert_eq!(
        parse(&parts.concat())[0].status(),
        NtStatus::INVALID_PARAMETER
    );
}
