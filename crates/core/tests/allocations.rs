//! Heap allocations the core makes per READ on the hot path, counted by a
//! counting global allocator (this test binary only). A warmed-up connection
//! answers a READ without allocating: bodies and frame heads come from its
//! spare buffers, which the driver refills with the frames it has sent
//! (`Connection::recycle`, and the frames WRITEs were written from) and
//! draws request frames from (`Connection::spare_buf`); this test plays
//! that part of the driver.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use ringshare_core::{IoOp, Output, SigningPolicy};
use ringshare_engine::alloc_count::{count, CountingAllocator};
use ringshare_vfs::posix::PosixShare;
use ringshare_wire::consts::{Command, CreateDisposition, Dialect};
use ringshare_wire::NtStatus;
use support::*;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

const FILE_LEN: usize = 2 << 20;

fn client_on_dir(name: &str, signing: SigningPolicy) -> (Client, PathBuf) {
    let dir = std::env::temp_dir().join(format!("rs-alloc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.bin"), vec![7u8; FILE_LEN]).unwrap();
    let server = server_on(Arc::new(PosixShare::new(&dir).unwrap()), signing);
    let c = Client::on(
        server,
        ringshare_vfs::memory::MemShare::new(),
        Options {
            signing,
            // The harness signs requests itself only with an SMB 2.x key
            // (HMAC); 2.1 has multi-credit READs.
            dialect: if signing == SigningPolicy::Required {
                Dialect::SMB2_1
            } else {
                Dialect::SMB3_1_1
            },
        },
    );
    (c, dir)
}

/// The status of the (single-message) reply a frame carries.
fn status_of(frame: &[u8]) -> NtStatus {
    NtStatus(u32::from_le_bytes(frame[12..16].try_into().unwrap()))
}

/// Median allocations of the core for one READ of `len` bytes, over `n`
/// READs; every READ must succeed and carry `len` bytes.
fn allocs_per_read(c: &mut Client, len: u32, n: usize) -> u64 {
    let f = c
        .create("f.bin", GENERIC_READ, CreateDisposition::OPEN, 0)
        .unwrap();
    allocs_per_request(c, len, n, |c, i| {
        c.read_msg(f, (i * 4096 % (FILE_LEN / 2)) as u64, len)
    })
}

/// The same for WRITEs of `len` bytes.
fn allocs_per_write(c: &mut Client, len: u32, n: usize) -> u64 {
    let f = c
        .create(
            "f.bin",
            GENERIC_READ | GENERIC_WRITE,
            CreateDisposition::OPEN,
            0,
        )
        .unwrap();
    let data = vec![5u8; len as usize];
    allocs_per_request(c, len, n, |c, i| {
        let tree = c.tree_id;
        let offset = (i * 4096 % (FILE_LEN / 2)) as u64;
        c.message(Command::WRITE, tree, |o| write_body(o, f, offset, &data))
    })
}

/// Median allocations of the core for one request (`make(client, i)`
/// builds the i-th) moving `len` bytes, over `n` requests; every one must
/// succeed.
fn allocs_per_request(
    c: &mut Client,
    len: u32,
    n: usize,
    mut make: impl FnMut(&mut Client, usize) -> Vec<u8>,
) -> u64 {
    let mut counts = Vec::with_capacity(n);
    let mut outs: Vec<Output> = Vec::with_capacity(8);
    let mut more: Vec<Output> = Vec::with_capacity(8);
    for i in 0..n {
        let mut msg = make(c, i);
        c.charge(&mut msg, len as usize);
        c.sign(&mut msg);
        // The driver cuts a small frame into a buffer the connection had
        // spare; a large one is received into a buffer of its own pool.
        let frame = if msg.len() <= 64 * 1024 {
            let mut frame = c.conn.spare_buf(msg.len());
            frame.extend_from_slice(&msg);
            frame
        } else {
            msg
        };
        let ((), mut total) = count(|| {
            c.conn.receive(c.now, frame);
            while let Some(o) = c.conn.poll_output() {
                outs.push(o);
            }
        });
        for o in outs.drain(..) {
            match o {
                Output::Io(req) => {
                    let done = req.run_blocking(); // the driver's part: not counted
                    let ((), a) = count(|| {
                        c.conn.complete_io(c.now, req.id, done);
                        while let Some(o) = c.conn.poll_output() {
                            more.push(o);
                        }
                    });
                    total += a;
                    // The driver hands back the frame a WRITE was written from.
                    if let IoOp::Write { buf, .. } = req.op {
                        c.conn.recycle(buf);
                    }
                }
                o => more.push(o),
            }
        }
        assert_eq!(more.len(), 1, "one reply per request");
        for o in more.drain(..) {
            // The driver sends the frame, then hands its buffers back.
            let sent: Vec<Vec<u8>> = match o {
                Output::Send(frame) => frame.into_parts().collect(),
                Output::SendFile(sf) => {
                    assert_eq!(sf.len, len as usize);
                    vec![sf.head]
                }
                other => panic!("unexpected output {other:?}"),
            };
            assert_eq!(status_of(&sent[0]), NtStatus::SUCCESS, "request {i} failed");
            for b in sent {
                c.conn.recycle(b);
            }
        }
        counts.push(total);
    }
    counts.sort_unstable();
    counts[n / 2]
}

#[test]
fn a_spliced_read_allocates_nothing_in_the_core() {
    let (mut c, dir) = client_on_dir("splice", SigningPolicy::IfRequired);
    c.conn.set_send_file(true);
    let a = allocs_per_read(&mut c, 1 << 20, 64);
    println!("allocations per spliced 1 MiB READ: {a}");
    assert_eq!(a, 0, "allocations per READ");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_4k_read_into_memory_allocates_nothing_in_the_core() {
    let (mut c, dir) = client_on_dir("copy", SigningPolicy::IfRequired);
    let a = allocs_per_read(&mut c, 4096, 64);
    println!("allocations per 4 KiB READ (read into memory): {a}");
    assert_eq!(a, 0, "allocations per READ");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_1m_read_into_memory_allocates_nothing_in_the_core() {
    let (mut c, dir) = client_on_dir("copy1m", SigningPolicy::IfRequired);
    let a = allocs_per_read(&mut c, 1 << 20, 64);
    println!("allocations per 1 MiB READ (read into memory): {a}");
    assert_eq!(a, 0, "allocations per READ");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_signed_1m_read_allocates_nothing_in_the_core() {
    let (mut c, dir) = client_on_dir("signed", SigningPolicy::Required);
    assert!(c.signing.is_some(), "the session signs");
    let a = allocs_per_read(&mut c, 1 << 20, 64);
    println!("allocations per signed 1 MiB READ: {a}");
    assert_eq!(a, 0, "allocations per READ");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_4k_write_allocates_nothing_in_the_core() {
    let (mut c, dir) = client_on_dir("write4k", SigningPolicy::IfRequired);
    let a = allocs_per_write(&mut c, 4096, 64);
    println!("allocations per 4 KiB WRITE: {a}");
    assert_eq!(a, 0, "allocations per WRITE");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_1m_write_received_into_memory_allocates_nothing_in_the_core() {
    let (mut c, dir) = client_on_dir("write1m", SigningPolicy::IfRequired);
    let a = allocs_per_write(&mut c, 1 << 20, 64);
    println!("allocations per 1 MiB WRITE (received into memory): {a}");
    assert_eq!(a, 0, "allocations per WRITE");
    let _ = std::fs::remove_dir_all(dir);
}
