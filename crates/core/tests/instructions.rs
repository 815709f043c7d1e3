//! Work loads for counting the core's instructions per request with callgrind
//! (`bench/instructions`): instructions, unlike seconds, do not depend on what
//! else the machine runs, so a change to the request path can be judged on a
//! shared, busy machine (issue 34). Ignored in a plain `cargo test`: they only
//! run requests, and bench/instructions reads the counts.

mod support;

use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::NtStatus;
use support::*;

const NON_DIRECTORY_FILE: u32 = 0x40;
const FILE_STANDARD_INFORMATION: u8 = 5;

/// Cycles to run: `RS_CYCLES`, or a few when run as a plain test.
fn cycles() -> usize {
    std::env::var("RS_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

/// The metadata row of bench/compare through the core on the in-memory backend:
/// CREATE (open-if, read/write, non-directory) of an existing file, QUERY_INFO
/// FileStandardInformation, CLOSE, over eight files in turn.
#[test]
#[ignore]
fn metadata_cycles_for_callgrind() {
    // The in-memory backend: valgrind 3.19 (Debian 12's) does not know openat2,
    // which the POSIX backend opens every file with; the backend's own
    // instructions are in the count, the kernel's are not.
    let mut c = Client::new();
    let names: Vec<String> = (0..8).map(|k| format!("rsmeta-{k}")).collect();
    for n in &names {
        c.put_file(n, b"x");
    }
    for i in 0..cycles() {
        let f = c
            .create(
                &names[i % names.len()],
                GENERIC_READ | GENERIC_WRITE,
                CreateDisposition::OPEN_IF,
                NON_DIRECTORY_FILE,
            )
            .expect("create");
        let q = c.query_info(f, 1, FILE_STANDARD_INFORMATION, 0, 4096);
        assert_eq!(q.status(), NtStatus::SUCCESS);
        assert_eq!(c.close(f).status(), NtStatus::SUCCESS);
    }
}

/// ECHO, the bare request path.
#[test]
#[ignore]
fn echo_for_callgrind() {
    let mut c = Client::with(Options::default());
    for _ in 0..cycles() * 3 {
        let r = c.call(ringshare_wire::consts::Command::ECHO, 0, empty_body);
        assert_eq!(r.status(), NtStatus::SUCCESS);
    }
}
