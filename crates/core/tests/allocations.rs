//! Heap allocations the core makes per READ on the hot path, counted by a
//! counting global allocator (this test binary only). The counts are bounds
//! that must not grow; docs/architecture.md says where the remaining ones are.

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use ringshare_core::{Output, SigningPolicy};
use ringshare_engine::alloc_count::{count, CountingAllocator};
use ringshare_vfs::posix::PosixShare;
use ringshare_wire::consts::CreateDisposition;
use support::*;

#[global_allocator]
static ALLOC: CountingAllocator = CountingAllocator;

fn client_on_dir(name: &str) -> (Client, PathBuf) {
    let dir = std::env::temp_dir().join(format!("rs-alloc-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("f.bin"), vec![7u8; 1 << 20]).unwrap();
    let server = server_on(
        Arc::new(PosixShare::new(&dir).unwrap()),
        SigningPolicy::IfRequired,
    );
    let c = Client::on(
        server,
        ringshare_vfs::memory::MemShare::new(),
        Options::default(),
    );
    (c, dir)
}

/// Median allocations of the core for one READ, over `n` READs.
fn allocs_per_read(c: &mut Client, len: u32, n: usize) -> u64 {
    let f = c
        .create("f.bin", GENERIC_READ, CreateDisposition::OPEN, 0)
        .unwrap();
    let mut counts = Vec::with_capacity(n);
    for i in 0..n {
        let msg = c.read_msg(f, (i as u64 * 4096) % (1 << 19), len);
        let (outs, a) = count(|| {
            c.conn.receive(c.now, msg);
            let mut outs = Vec::with_capacity(4);
            while let Some(o) = c.conn.poll_output() {
                outs.push(o);
            }
            outs
        });
        let mut total = a;
        for o in outs {
            if let Output::Io(req) = o {
                let done = req.run_blocking(); // the driver's part: not counted
                let (outs, a) = count(|| {
                    c.conn.complete_io(c.now, req.id, done);
                    let mut outs = Vec::with_capacity(4);
                    while let Some(o) = c.conn.poll_output() {
                        outs.push(o);
                    }
                    outs
                });
                total += a;
                drop(outs);
            }
        }
        counts.push(total);
    }
    counts.sort_unstable();
    counts[n / 2]
}

#[test]
fn a_spliced_read_costs_the_core_a_bounded_number_of_allocations() {
    let (mut c, dir) = client_on_dir("splice");
    c.conn.set_send_file(true);
    let a = allocs_per_read(&mut c, 1 << 20, 64);
    println!("allocations per spliced 1 MiB READ: {a}");
    assert!(a <= ALLOCS_SPLICED_READ_MAX, "{a} allocations per READ");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_4k_read_into_memory_costs_the_core_a_bounded_number_of_allocations() {
    let (mut c, dir) = client_on_dir("copy");
    let a = allocs_per_read(&mut c, 4096, 64);
    println!("allocations per 4 KiB READ (read into memory): {a}");
    assert!(a <= ALLOCS_COPIED_READ_MAX, "{a} allocations per READ");
    let _ = std::fs::remove_dir_all(dir);
}

/// The reply body, the frame buffer and the list of its parts (measured: 4).
const ALLOCS_SPLICED_READ_MAX: u64 = 4;
/// The same plus the parked continuation (measured: 5).
const ALLOCS_COPIED_READ_MAX: u64 = 5;
