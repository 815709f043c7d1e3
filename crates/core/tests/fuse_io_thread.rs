//! Issue 33's rule for file systems on a network, over a client's whole day: on a share whose
//! calls may wait on a network (FUSE, CephFS: `fs calls off io thread = auto`) no request makes
//! a file system call on the I/O thread. Every call the FUSE-like share of support/fuse.rs
//! counts is checked against where it was made: in a lookup's or file system job's run or the
//! ring's I/O (what the driver's pool and io_uring's workers run), or elsewhere, the I/O
//! thread ([`Calls::on_io_thread`]). Each step names what it does; the test lists every step
//! that made a call on the I/O thread and the kinds of the calls.

use crate::support;

use ringshare_wire::consts::CreateDisposition as D;
use ringshare_wire::NtStatus;
use support::fuse::*;
use support::*;

const DIRECTORY_FILE: u32 = 0x1;
const DELETE_ON_CLOSE: u32 = 0x1000;
const READ_WRITE_DELETE: u32 = 0x0012_019f | 0x0001_0000;
const INFO_FILE: u8 = 1;
const INFO_FS: u8 = 2;
const INFO_SECURITY: u8 = 3;
const FILE_BASIC: u8 = 4;
const FILE_STANDARD: u8 = 5;
const FILE_ALL: u8 = 18;
const FILE_STREAM: u8 = 22;
const FILE_END_OF_FILE: u8 = 20;
const FILE_DISPOSITION: u8 = 13;
const FILE_RENAME: u8 = 10;
const FILE_LINK: u8 = 11;
const FS_VOLUME: u8 = 1;
const FS_SIZE: u8 = 3;
const FS_ATTRIBUTE: u8 = 5;
const FS_FULL_SIZE: u8 = 7;
const FILE_ID_BOTH_DIRECTORY: u8 = 37;
const OWNER_GROUP_DACL: u32 = 7;
const IS_FSCTL: u32 = 1;
const FSCTL_SET_SPARSE: u32 = 0x0009_00C4;
const FSCTL_QUERY_ALLOCATED_RANGES: u32 = 0x0009_40CF;
const LOCK_EXCLUSIVE_NOW: u32 = 0x2 | 0x10;
const UNLOCK: u32 = 0x4;
/// FILE_LIST_DIRECTORY, FILE_READ_ATTRIBUTES, SYNCHRONIZE, READ_CONTROL.
const LIST: u32 = 0x0012_0089;

const BATCH: u8 = 9;
const REPLAY_OPERATION: u32 = 0x2000_0000;
const DURABLE_CREATE_GUID: [u8; 16] = [0x5a; 16];

/// The steps that made calls on the I/O thread, with the kinds of the calls.
#[derive(Default)]
struct Audit {
    found: Vec<String>,
}

impl Audit {
    /// `step` ran: the calls it made on the I/O thread, if any, are noted.
    fn after(&mut self, calls: &Calls, step: &str) {
        let made = calls.on_io_thread();
        if !made.is_empty() {
            self.found.push(format!("{step}: {made:?}"));
        }
    }
}

/// `r`'s status, which must be `want`.
fn expect(r: &Resp, want: NtStatus, step: &str) {
    assert_eq!(r.status(), want, "{step}");
}

/// The FileBasicInformation that sets the last write time only.
fn write_time_only() -> Vec<u8> {
    let mut b = vec![0u8; 40];
    b[16..24].copy_from_slice(&0x01DC_0000_0000_0000u64.to_le_bytes());
    b
}

/// A range of 16 bytes (FILE_ALLOCATED_RANGE_BUFFER).
fn range(a: i64, b: i64) -> Vec<u8> {
    let mut v = a.to_le_bytes().to_vec();
    v.extend_from_slice(&b.to_le_bytes());
    v
}

/// A client's day on a FUSE-like share (`remote`: its calls may wait on a network): the steps
/// that made calls on the I/O thread, with their kinds.
fn day(remote: bool) -> Vec<String> {
    let (mut c, calls) = fuse_client(remote);
    let mut a = Audit::default();
    // Setting up (tree connect) is not a request about files.
    calls.on_io_thread();

    let d = c.create("d", READ_WRITE_DELETE, D::CREATE, DIRECTORY_FILE);
    let d = d.expect("mkdir");
    a.after(&calls, "CREATE of a new directory");
    expect(&c.close(d), NtStatus::SUCCESS, "close d");
    a.after(&calls, "CLOSE of a new directory");
    let f = c
        .create("d\\f", READ_WRITE_DELETE, D::CREATE, 0)
        .expect("f");
    a.after(&calls, "CREATE of a new file");
    expect(&c.write(f, 0, &[7u8; 8192]), NtStatus::SUCCESS, "write");
    a.after(&calls, "WRITE");
    expect(&c.read(f, 0, 4096), NtStatus::SUCCESS, "read");
    a.after(&calls, "READ");
    expect(&c.flush(f), NtStatus::SUCCESS, "flush");
    a.after(&calls, "FLUSH");
    for (class, name) in [
        (FILE_BASIC, "QUERY_INFO FileBasicInformation"),
        (FILE_STANDARD, "QUERY_INFO FileStandardInformation"),
        (FILE_ALL, "QUERY_INFO FileAllInformation"),
        (FILE_STREAM, "QUERY_INFO FileStreamInformation"),
    ] {
        expect(
            &c.query_info(f, INFO_FILE, class, 0, 4096),
            NtStatus::SUCCESS,
            name,
        );
        a.after(&calls, name);
    }
    for (class, name) in [
        (FS_VOLUME, "QUERY_INFO FileFsVolumeInformation"),
        (FS_SIZE, "QUERY_INFO FileFsSizeInformation"),
        (FS_ATTRIBUTE, "QUERY_INFO FileFsAttributeInformation"),
        (FS_FULL_SIZE, "QUERY_INFO FileFsFullSizeInformation"),
    ] {
        expect(
            &c.query_info(f, INFO_FS, class, 0, 4096),
            NtStatus::SUCCESS,
            name,
        );
        a.after(&calls, name);
    }
    let r = c.query_info(f, INFO_SECURITY, 0, OWNER_GROUP_DACL, 4096);
    expect(&r, NtStatus::SUCCESS, "security");
    a.after(&calls, "QUERY_INFO security");
    let r = c.set_info(f, INFO_FILE, FILE_BASIC, &write_time_only());
    expect(&r, NtStatus::SUCCESS, "times");
    a.after(&calls, "SET_INFO FileBasicInformation");
    let r = c.set_info(f, INFO_FILE, FILE_END_OF_FILE, &16384u64.to_le_bytes());
    expect(&r, NtStatus::SUCCESS, "end of file");
    a.after(&calls, "SET_INFO FileEndOfFileInformation");
    expect(
        &c.lock(f, &[(0, 10, LOCK_EXCLUSIVE_NOW)]),
        NtStatus::SUCCESS,
        "lock",
    );
    a.after(&calls, "LOCK");
    expect(&c.lock(f, &[(0, 10, UNLOCK)]), NtStatus::SUCCESS, "unlock");
    a.after(&calls, "LOCK (unlock)");
    let r = c.ioctl(f, FSCTL_SET_SPARSE, &[], 0, IS_FSCTL);
    expect(&r, NtStatus::SUCCESS, "sparse");
    a.after(&calls, "FSCTL_SET_SPARSE");
    let r = c.ioctl(
        f,
        FSCTL_QUERY_ALLOCATED_RANGES,
        &range(0, 16384),
        4096,
        IS_FSCTL,
    );
    expect(&r, NtStatus::SUCCESS, "ranges");
    a.after(&calls, "FSCTL_QUERY_ALLOCATED_RANGES");
    let d = c.create("d", LIST, D::OPEN, DIRECTORY_FILE).expect("d");
    a.after(&calls, "CREATE of an existing directory");
    let r = c.query_directory(d, FILE_ID_BOTH_DIRECTORY, 0, "*", 65536);
    expect(&r, NtStatus::SUCCESS, "listing");
    a.after(&calls, "QUERY_DIRECTORY");
    expect(&c.close(d), NtStatus::SUCCESS, "close d");
    a.after(&calls, "CLOSE of a directory");
    let r = c.set_info(f, INFO_FILE, FILE_RENAME, &rename_info("d\\g", false));
    expect(&r, NtStatus::SUCCESS, "rename");
    a.after(&calls, "SET_INFO FileRenameInformation");
    // The in-memory share makes no hard links (ACCESS_DENIED): the request's calls are made
    // all the same.
    c.set_info(f, INFO_FILE, FILE_LINK, &rename_info("d\\h", false));
    a.after(&calls, "SET_INFO FileLinkInformation");
    expect(&c.close(f), NtStatus::SUCCESS, "close");
    a.after(&calls, "CLOSE");

    let s = c.create("d\\g:s", READ_WRITE_DELETE, D::CREATE, 0);
    let s = s.expect("a named stream");
    a.after(&calls, "CREATE of a named stream");
    expect(
        &c.write(s, 0, b"stream data"),
        NtStatus::SUCCESS,
        "stream write",
    );
    a.after(&calls, "WRITE of a named stream");
    expect(&c.read(s, 0, 64), NtStatus::SUCCESS, "stream read");
    a.after(&calls, "READ of a named stream");
    let r = c.set_info(s, INFO_FILE, FILE_RENAME, &rename_info(":s2", false));
    expect(&r, NtStatus::SUCCESS, "stream rename");
    a.after(&calls, "SET_INFO FileRenameInformation of a named stream");
    let r = c.set_info(s, INFO_FILE, FILE_RENAME, &rename_info(":s", false));
    expect(&r, NtStatus::SUCCESS, "stream renamed back");
    expect(&c.close(s), NtStatus::SUCCESS, "stream close");
    a.after(&calls, "CLOSE of a named stream");
    let s = c.create("d\\g:s", READ_WRITE_DELETE, D::OPEN, DELETE_ON_CLOSE);
    let s = s.expect("the stream, to delete");
    a.after(&calls, "CREATE of a named stream, delete on close");
    expect(&c.close(s), NtStatus::SUCCESS, "stream removed");
    a.after(&calls, "CLOSE that removes a named stream");

    let g = c.create("d\\g", READ_WRITE_DELETE, D::OPEN, DELETE_ON_CLOSE);
    let g = g.expect("g, to delete");
    a.after(&calls, "CREATE of an existing file, delete on close");
    expect(&c.close(g), NtStatus::SUCCESS, "g removed");
    a.after(&calls, "CLOSE that removes a file");
    let e = c
        .create("d\\e", READ_WRITE_DELETE, D::CREATE, 0)
        .expect("e");
    let r = c.set_info(e, INFO_FILE, FILE_DISPOSITION, &[1]);
    expect(&r, NtStatus::SUCCESS, "disposition");
    a.after(&calls, "SET_INFO FileDispositionInformation");
    expect(&c.close(e), NtStatus::SUCCESS, "e removed");
    a.after(&calls, "CLOSE after a delete disposition");
    let d = c.create("d", LIST, D::OPEN, DIRECTORY_FILE).expect("d");
    let r = c.query_directory(d, FILE_ID_BOTH_DIRECTORY, 0x1, "*", 65536);
    expect(&r, NtStatus::SUCCESS, "listing again");
    a.after(&calls, "QUERY_DIRECTORY (restart)");
    expect(&c.close(d), NtStatus::SUCCESS, "close d");
    a.after(&calls, "CLOSE of a directory");

    // A durable open, kept when its connection goes: taken back by another connection (a
    // DH2C reconnect), whose replay of the open's CREATE is answered from it.
    let dur = c.create_msg_caching_ctx(
        "dur",
        READ_WRITE_DELETE,
        7,
        D::OPEN_IF,
        BATCH,
        dh2q_with(DURABLE_CREATE_GUID, 0),
    );
    let (_, r) = send_signed(&mut c, dur);
    let r = if r.is_empty() { c.pump() } else { r };
    expect(&r[0], NtStatus::SUCCESS, "durable open");
    let dur = ringshare_wire::create::CreateResponse::decode(&r[0].msg)
        .unwrap()
        .file_id;
    a.after(&calls, "CREATE of a durable open");

    // The connection ends with files open: one written, one to delete.
    let w = c
        .create("kept", READ_WRITE_DELETE, D::CREATE, 0)
        .expect("kept");
    expect(&c.write(w, 0, b"written"), NtStatus::SUCCESS, "write kept");
    let x = c.create("gone", READ_WRITE_DELETE, D::CREATE, DELETE_ON_CLOSE);
    x.expect("gone");
    a.after(&calls, "CREATEs before the end");
    c.conn.shutdown(c.now);
    c.pump();
    a.after(&calls, "the connection's end with files open");
    let who = ringshare_vfs::server_who();
    let at = |n: &str| ringshare_vfs::RelPath::from_components([n]).unwrap();
    use ringshare_vfs::Share;
    assert!(c.mem.stat(&who, &at("kept")).is_ok(), "kept is kept");
    assert!(
        c.mem.stat(&who, &at("gone")).is_err(),
        "the delete-on-close file went at the connection's end"
    );

    let mut b = Client::on(
        std::sync::Arc::clone(&c.server),
        c.mem.clone(),
        Options::default(),
    );
    calls.on_io_thread();
    let m = b.create_msg_caching_ctx(
        "dur",
        READ_WRITE_DELETE,
        7,
        D::OPEN,
        BATCH,
        dh2c_with(dur, DURABLE_CREATE_GUID),
    );
    let (_, r) = send_signed(&mut b, m);
    let r = if r.is_empty() { b.pump() } else { r };
    expect(&r[0], NtStatus::SUCCESS, "durable reconnect");
    a.after(&calls, "CREATE reconnecting a durable open");
    let mut m = b.create_msg_caching_ctx(
        "dur",
        READ_WRITE_DELETE,
        7,
        D::OPEN_IF,
        BATCH,
        dh2q_with(DURABLE_CREATE_GUID, 0),
    );
    let flags = u32::from_le_bytes(m[16..20].try_into().unwrap()) | REPLAY_OPERATION;
    m[16..20].copy_from_slice(&flags.to_le_bytes());
    let (_, r) = send_signed(&mut b, m);
    let r = if r.is_empty() { b.pump() } else { r };
    expect(&r[0], NtStatus::SUCCESS, "replay");
    a.after(&calls, "CREATE replaying a durable open's CREATE");
    expect(
        &b.close(dur),
        NtStatus::SUCCESS,
        "close the reconnected open",
    );

    a.found
}

/// No step made a call on the I/O thread.
fn none_found(found: &[String]) {
    assert!(
        found.is_empty(),
        "steps that made calls on the I/O thread:\n{}",
        found.join("\n")
    );
}

/// Each of `steps` made calls on the I/O thread.
fn each_found(found: &[String], steps: &[&str]) {
    for step in steps {
        assert!(
            found.iter().any(|f| f.starts_with(&format!("{step}:"))),
            "{step} on the I/O thread: {found:#?}"
        );
    }
}

#[test]
fn a_clients_day_on_a_share_that_may_wait_on_a_network_makes_no_call_on_the_io_thread() {
    none_found(&day(true));
}

/// The audit sees the I/O thread's calls: on a local share every step makes its calls there.
#[test]
fn on_a_local_share_the_same_day_makes_its_calls_on_the_io_thread() {
    let steps = [
        "CREATE of a new file",
        "CREATE reconnecting a durable open",
        "CREATE replaying a durable open's CREATE",
        "QUERY_INFO FileAllInformation",
        "SET_INFO FileRenameInformation",
        "CLOSE that removes a file",
        "the connection's end with files open",
    ];
    each_found(&day(false), &steps);
}

/// A second, rarer day (session 50): the information classes, FSCTLs and listings a client
/// asks less often. Each step's calls on the I/O thread, whatever it answers. It found one: a
/// server-side copy into a file not yet written through its open read the file's modification
/// time (the write time's base) on the I/O thread after the copy's job.
fn rarer_day(remote: bool) -> Vec<String> {
    let (mut c, calls) = fuse_client(remote);
    let mut a = Audit::default();
    let d = c.create("d", READ_WRITE_DELETE, D::CREATE, DIRECTORY_FILE);
    let d = d.expect("mkdir");
    expect(&c.close(d), NtStatus::SUCCESS, "close d");
    let f = c
        .create("d\\f", READ_WRITE_DELETE, D::CREATE, 0)
        .expect("f");
    let g = c
        .create("d\\g", READ_WRITE_DELETE, D::CREATE, 0)
        .expect("g");
    expect(&c.write(f, 0, &[7u8; 8192]), NtStatus::SUCCESS, "write");
    calls.on_io_thread();
    for class in [6u8, 7, 8, 14, 16, 17, 21, 28, 34, 35, 48, 59] {
        c.query_info(f, INFO_FILE, class, 0, 4096);
        a.after(&calls, &format!("QUERY_INFO file class {class}"));
    }
    for class in [4u8, 6, 8, 11] {
        c.query_info(f, INFO_FS, class, 0, 4096);
        a.after(&calls, &format!("QUERY_INFO fs class {class}"));
    }
    // FILE_FULL_EA_INFORMATION: "X" = "1".
    let ea = [0u8, 0, 0, 0, 0, 1, 1, 0, b'X', 0, b'1'];
    c.set_info(f, INFO_FILE, 15, &ea);
    a.after(&calls, "SET_INFO FileFullEaInformation");
    c.query_info(f, INFO_FILE, 15, 0, 4096);
    a.after(&calls, "QUERY_INFO FileFullEaInformation");
    for (class, body) in [
        (14u8, 0u64.to_le_bytes().to_vec()),
        (16, 0u32.to_le_bytes().to_vec()),
        (19, 16384u64.to_le_bytes().to_vec()),
        (39, 8192u64.to_le_bytes().to_vec()),
    ] {
        c.set_info(f, INFO_FILE, class, &body);
        a.after(&calls, &format!("SET_INFO file class {class}"));
    }
    for (ctl, input, name) in [
        (0x0009_80C8u32, range(0, 4096), "FSCTL_SET_ZERO_DATA"),
        (0x0009_00A8, Vec::new(), "FSCTL_GET_REPARSE_POINT"),
        (0x0009_00C0, Vec::new(), "FSCTL_CREATE_OR_GET_OBJECT_ID"),
        (0x0009_027C, Vec::new(), "FSCTL_GET_INTEGRITY_INFORMATION"),
        (0x0009_003C, Vec::new(), "FSCTL_GET_COMPRESSION"),
        (0x0014_0078, Vec::new(), "FSCTL_SRV_REQUEST_RESUME_KEY"),
    ] {
        c.ioctl(f, ctl, &input, 4096, IS_FSCTL);
        a.after(&calls, name);
    }
    let r = c.ioctl(f, 0x0014_0078, &[], 32, IS_FSCTL);
    if r.status() == NtStatus::SUCCESS {
        let out = ringshare_wire::ioctl::IoctlResponse::decode(&r.msg).unwrap();
        let key: [u8; 24] = out.output[..24].try_into().unwrap();
        calls.on_io_thread();
        c.ioctl(
            g,
            0x0014_40F2,
            &copychunk_input(key, &[(0, 0, 4096)]),
            4096,
            IS_FSCTL,
        );
        a.after(&calls, "FSCTL_SRV_COPYCHUNK");
    }
    let d = c.create("d", LIST, D::OPEN, DIRECTORY_FILE).expect("d");
    calls.on_io_thread();
    for class in [1u8, 2, 3, 12, 38, 60] {
        c.query_directory(d, class, 0x1, "*", 65536);
        a.after(&calls, &format!("QUERY_DIRECTORY class {class}"));
    }
    expect(&c.close(d), NtStatus::SUCCESS, "close d");
    a.after(&calls, "CLOSE of a directory");
    let lock_shared = 0x1 | 0x10;
    c.lock(f, &[(0, 10, lock_shared)]);
    a.after(&calls, "LOCK shared");
    a.found
}

#[test]
fn a_rarer_day_on_a_share_that_may_wait_on_a_network_makes_no_call_on_the_io_thread() {
    none_found(&rarer_day(true));
}

/// The audit sees the rarer day's calls on a local share.
#[test]
fn on_a_local_share_the_rarer_day_makes_its_calls_on_the_io_thread() {
    let steps = [
        "QUERY_INFO file class 34",
        "SET_INFO FileFullEaInformation",
        "FSCTL_SRV_COPYCHUNK",
        "QUERY_DIRECTORY class 60",
    ];
    each_found(&rarer_day(false), &steps);
}
