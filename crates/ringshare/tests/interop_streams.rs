//! Named data streams (SMB alternate data streams) end to end, and on disk in the format of
//! Samba's `vfs_streams_xattr`: one xattr per stream on the file's inode,
//! `user.DosStream.NAME:$DATA`, holding the data and one NUL byte.
//!
//! - python's smbprotocol (`tests/py/smbprotocol_streams.py`, see `common/py.rs`) writes a
//!   `Zone.Identifier` stream through ringshare; Samba's `smbclient allinfo` lists it and the
//!   xattr is on disk;
//! - a private Debian `smbd` (`vfs objects = streams_xattr acl_xattr`) writes streams (a small
//!   text one, a binary one, one whose name has spaces and mixed case, an empty one) with
//!   `smbclient put`; ringshare then serves the same directory with the same share section, and
//!   every stream reads back byte for byte and is listed alike, and the reverse.
//!
//! The share lives under /dev/shm when its tmpfs takes a 60,000-byte xattr (ext4 without
//! `ea_inode` keeps about 4 KiB of xattrs per inode, so the binary stream is then 3,000 bytes).
//! The Samba tests need root (accounts, smbd); without root, smbclient or smbd they are skipped
//! with a loud note, and fail under `CI`.

mod common;
mod twin;

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::py::{python, run_bounded, script, skipped};
use common::{
    ensure_unix_account, smbclient_or_skip, Server, ServerConfig, SmbOutput, TempDir, PASSWORD,
    USER,
};
use twin::{Net, Running};

/// Limit for the python script.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);
/// Limit for one smbclient run against a twin server.
const SMBCLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// The stream Windows puts on downloaded files, and what it holds.
const ZONE_STREAM: &str = "Zone.Identifier";
const ZONE_DATA: &str = "[ZoneTransfer]\r\nZoneId=3\r\n";
/// Samba's prefix of a stream's xattr name (`vfs_streams_xattr`, `streams_xattr:prefix`).
const XATTR_PREFIX: &str = "user.DosStream.";
/// Size of the binary stream when the share is on a tmpfs that takes it (stream limit 65,535).
const BIG_ON_TMPFS: usize = 60_000;
/// Size of the binary stream otherwise (ext4 without ea_inode: ~4 KiB of xattrs per inode,
/// with Samba's `security.NTACL` and `user.DOSATTRIB` besides).
const BIG_ON_DISK: usize = 3_000;

/// The lines of `allinfo` that list streams (`stream: [NAME], SIZE bytes`), in its order.
fn stream_lines(allinfo: &str) -> Vec<String> {
    allinfo
        .lines()
        .filter(|l| l.starts_with("stream: "))
        .map(str::to_string)
        .collect()
}

/// The stream xattrs of `path` on disk: name (with [`XATTR_PREFIX`]) to value.
fn stream_xattrs(path: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut names = vec![0u8; 64 * 1024];
    let n = rustix::fs::listxattr(path, &mut names[..])
        .unwrap_or_else(|e| panic!("listxattr {}: {e}", path.display()));
    let mut out = BTreeMap::new();
    for name in names[..n].split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        if !name.starts_with(XATTR_PREFIX) {
            continue;
        }
        let mut value = vec![0u8; 70 * 1024];
        let len = rustix::fs::getxattr(path, name.as_str(), &mut value[..])
            .unwrap_or_else(|e| panic!("getxattr {} {name}: {e}", path.display()));
        value.truncate(len);
        out.insert(name, value);
    }
    out
}

/// The xattr `vfs_streams_xattr` keeps stream `name` holding `data` in: name and value.
fn xattr_of(name: &str, data: &[u8]) -> (String, Vec<u8>) {
    let mut value = data.to_vec();
    value.push(0);
    (format!("{XATTR_PREFIX}{name}:$DATA"), value)
}

/// Shows a value briefly for an assertion message: its length and first bytes.
fn brief(map: &BTreeMap<String, Vec<u8>>) -> String {
    map.iter()
        .map(|(k, v)| {
            let head: Vec<u8> = v.iter().copied().take(40).collect();
            format!("  {k}: {} bytes, starting {:?}\n", v.len(), head)
        })
        .collect()
}

#[test]
fn smbclient_allinfo_lists_a_stream_written_through_python_smbprotocol() {
    let test = "smbclient_allinfo_lists_a_stream_written_through_python_smbprotocol";
    if skipped(test) || !smbclient_or_skip(test) {
        return;
    }
    let py = python();
    let server = Server::start(&ServerConfig::default(), |_| {});
    let content = "downloaded from somewhere\n";
    let mut cmd = Command::new(py);
    cmd.arg(script("smbprotocol_streams.py"))
        .args(["--port", &server.port.to_string()])
        .args(["--user", USER, "--password", PASSWORD])
        .args(["--share", &server.share])
        .args(["--file", "f.txt", "--content", content])
        .args(["--stream", ZONE_STREAM, "--stream-data", ZONE_DATA]);
    let (ok, out) = run_bounded(&mut cmd, SCRIPT_TIMEOUT);
    assert!(
        ok && out.lines().any(|l| l == "OK"),
        "{test}: smbprotocol run failed:\n{out}\n--- server log ---\n{}",
        server.log()
    );

    let info = server.client().run("allinfo f.txt");
    info.expect_ok("allinfo f.txt");
    assert_eq!(
        stream_lines(&info.stdout),
        [
            format!("stream: [::$DATA], {} bytes", content.len()),
            format!("stream: [:{ZONE_STREAM}:$DATA], {} bytes", ZONE_DATA.len()),
        ],
        "allinfo f.txt lists the unnamed stream, then {ZONE_STREAM}\n{info}"
    );
    assert_eq!(ZONE_DATA.len(), 26);

    let on_disk = server.share_dir.join("f.txt");
    assert_eq!(
        fs::read(&on_disk).expect("read f.txt on disk"),
        content.as_bytes(),
        "f.txt's content on disk"
    );
    let want = BTreeMap::from([xattr_of(ZONE_STREAM, ZONE_DATA.as_bytes())]);
    let got = stream_xattrs(&on_disk);
    assert_eq!(
        got,
        want,
        "f.txt's stream xattrs on disk:\n{}wanted:\n{}",
        brief(&got),
        brief(&want)
    );
}

/// Which server writes the streams, and which reads them back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Samba,
    Ringshare,
}

/// A share directory for the Samba tests, the servers' state directories and local files:
/// on /dev/shm when it takes a large xattr. Returns it and the binary stream's size.
fn workspace(tag: &str) -> (TempDir, usize) {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        let tmp = TempDir::new_in(shm, tag);
        let probe = tmp.path().join("probe");
        File::create(&probe).expect("create xattr probe");
        let fits = rustix::fs::setxattr(
            &probe,
            "user.ringshare-probe",
            &vec![7u8; BIG_ON_TMPFS + 1],
            rustix::fs::XattrFlags::empty(),
        )
        .is_ok();
        let _ = fs::remove_file(&probe);
        if fits {
            return (tmp, BIG_ON_TMPFS);
        }
    }
    (TempDir::new(tag), BIG_ON_DISK)
}

/// `len` bytes of a fixed pseudo-random sequence (xorshift64*), every byte value likely.
fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The file the streams are put on, and its content.
const FILE: &str = "f.bin";
const FILE_DATA: &[u8] = b"the unnamed stream\n";

/// The streams written: name and data.
fn streams(big: usize) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("note", b"a small text stream\r\nline two\r\n".to_vec()),
        ("blob", pseudo_random(big, 0x5eed_0f57_12ea_4501)),
        (
            "Mixed Case Stream",
            b"a stream whose name has spaces and capitals\n".to_vec(),
        ),
        ("Empty", Vec::new()),
    ]
}

/// What `allinfo FILE` should list, sorted.
fn expected_listing(streams: &[(&str, Vec<u8>)]) -> Vec<String> {
    let mut lines: Vec<String> = streams
        .iter()
        .map(|(name, data)| format!("stream: [:{name}:$DATA], {} bytes", data.len()))
        .chain([format!("stream: [::$DATA], {} bytes", FILE_DATA.len())])
        .collect();
    lines.sort();
    lines
}

/// The same share section for both servers, as `scripts/lib/servers.sh` writes it.
fn section(share: &Path) -> String {
    format!(
        "[share]\n\tpath = {}\n\tread only = no\n\tvfs objects = streams_xattr acl_xattr\n",
        share.display()
    )
}

fn start(kind: Kind, base: &Path, share: &Path) -> Running {
    let sections = section(share);
    match kind {
        Kind::Samba => twin::start_samba(base, Net::Loopback, "", &sections, &[USER]),
        Kind::Ringshare => twin::start_ringshare(base, Net::Loopback, "", &sections, &[USER]),
    }
}

/// The server's own log, for messages: smbd's log file, ringshare's output.
fn server_log(server: &Running) -> String {
    let path = match server.name {
        "samba" => server.conf.with_file_name("log").join("log.smbd"),
        _ => server.log.clone(),
    };
    let text = fs::read_to_string(&path).unwrap_or_else(|e| format!("({}: {e})", path.display()));
    let tail: Vec<&str> = text.lines().rev().take(60).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// `smbclient //127.0.0.1/share -c CMDS` against `server` as [`USER`], run in `cwd` (relative
/// local paths of `get` and `put` are there), its output kept in `logs`.
fn smbclient(server: &Running, conf: &Path, cwd: &Path, logs: &Path, cmds: &str) -> SmbOutput {
    let out_path = logs.join("smbclient.out");
    let err_path = logs.join("smbclient.err");
    let mut cmd = server.command("smbclient");
    cmd.arg("//127.0.0.1/share")
        .arg("-s")
        .arg(conf)
        .arg("-p")
        .arg(server.port.to_string())
        .args(["--use-kerberos=off", "-d", "1", "-t", "30", "-U"])
        .arg(format!("{USER}%{}", twin::PASS))
        .args(["-c", cmds]);
    let args: Vec<String> = cmd
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut child = cmd
        .current_dir(cwd)
        .env("HOME", logs)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("smbclient stdout file"))
        .stderr(File::create(&err_path).expect("smbclient stderr file"))
        .spawn()
        .expect("spawn smbclient");
    let Some(status) = common::wait_within(&mut child, SMBCLIENT_TIMEOUT) else {
        panic!(
            "smbclient {args:?} ran longer than {SMBCLIENT_TIMEOUT:?}\nstdout:\n{}\n\
             stderr:\n{}\n--- {} log ---\n{}",
            fs::read_to_string(&out_path).unwrap_or_default(),
            fs::read_to_string(&err_path).unwrap_or_default(),
            server.name,
            server_log(server)
        );
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    SmbOutput {
        args,
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

fn failure(test: &str, what: &str, out: &SmbOutput, server: &Running) -> String {
    format!(
        "{test}: {what} through {}\n{out}\n--- {} log ---\n{}",
        server.name,
        server.name,
        server_log(server)
    )
}

/// `allinfo FILE` through `server` lists the unnamed stream and each of `streams` with its
/// size; ringshare lists the unnamed stream first, as Windows does (Samba 4.17 lists it after
/// the named ones: `vfs_default` appends it to what `vfs_streams_xattr` found). Returns the
/// stream lines in the server's order.
fn check_listing(
    test: &str,
    server: &Running,
    kind: Kind,
    conf: &Path,
    local: &Path,
    logs: &Path,
    streams: &[(&str, Vec<u8>)],
) -> Vec<String> {
    let info = smbclient(server, conf, local, logs, &format!("allinfo {FILE}"));
    assert!(
        info.status.success() && info.nt_status().is_none(),
        "{}",
        failure(test, "allinfo", &info, server)
    );
    let listing = stream_lines(&info.stdout);
    let mut sorted = listing.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        expected_listing(streams),
        "{}",
        failure(test, "allinfo lists the streams", &info, server)
    );
    if kind == Kind::Ringshare {
        assert_eq!(
            listing.first(),
            Some(&format!("stream: [::$DATA], {} bytes", FILE_DATA.len())),
            "{}",
            failure(
                test,
                "allinfo lists the unnamed stream first",
                &info,
                server
            )
        );
    }
    listing
}

/// `writer` puts FILE and its streams, then stops; `reader` serves the same directory and every
/// stream must read back byte for byte (also under its name in other case, as both servers
/// compare stream names without case) and be listed as the writer listed it.
fn streams_cross_over(test: &str, writer: Kind, reader: Kind) {
    if !twin::root_and_tools_or_skip(test, &["smbclient", "smbd", "smbpasswd"]) {
        return;
    }
    ensure_unix_account(USER);
    let (tmp, big) = workspace("streams");
    let root = tmp.path();
    let share = root.join("share");
    let local = root.join("local");
    let logs = root.join("logs");
    for d in [&share, &local, &logs] {
        fs::create_dir_all(d).expect("create dir");
    }
    common::chown_tree(&share, twin::uid(USER));
    let conf = twin::client_conf(&root.join("client"));
    let streams = streams(big);
    eprintln!(
        "{test}: share {}, binary stream of {big} bytes",
        share.display()
    );

    // The writer.
    fs::write(local.join("file.in"), FILE_DATA).expect("write local file");
    let mut cmds = format!("put file.in {FILE}");
    for (i, (name, data)) in streams.iter().enumerate() {
        fs::write(local.join(format!("stream{i}.in")), data).expect("write local stream");
        cmds.push_str(&format!("; put stream{i}.in \"{FILE}:{name}\""));
    }
    let server = start(writer, &root.join(format!("{writer:?}")), &share);
    let put = smbclient(&server, &conf, &local, &logs, &cmds);
    let failed = |what: &str, out: &SmbOutput, server: &Running| failure(test, what, out, server);
    assert!(
        put.status.success() && put.nt_status().is_none(),
        "{}",
        failed("put the file and its streams", &put, &server)
    );
    let file_on_disk = share.join(FILE);
    let want_xattrs: BTreeMap<String, Vec<u8>> =
        streams.iter().map(|(n, d)| xattr_of(n, d)).collect();
    let got_xattrs = stream_xattrs(&file_on_disk);
    assert!(
        got_xattrs == want_xattrs,
        "{test}: {writer:?} stored the streams of {FILE} on disk as\n{}wanted (vfs_streams_xattr):\n{}",
        brief(&got_xattrs),
        brief(&want_xattrs)
    );
    let written_listing = check_listing(test, &server, writer, &conf, &local, &logs, &streams);
    drop(server);

    // The reader, over the same directory.
    let server = start(reader, &root.join(format!("{reader:?}")), &share);
    let mut cmds = format!("get {FILE} file.out");
    for (i, (name, _)) in streams.iter().enumerate() {
        cmds.push_str(&format!("; get \"{FILE}:{name}\" stream{i}.out"));
    }
    let (other_case, other_data) = (
        "mIXED cASE sTREAM",
        &streams
            .iter()
            .find(|(n, _)| *n == "Mixed Case Stream")
            .expect("the mixed case stream")
            .1,
    );
    cmds.push_str(&format!("; get \"{FILE}:{other_case}\" other-case.out"));
    let get = smbclient(&server, &conf, &local, &logs, &cmds);
    assert!(
        get.status.success() && get.nt_status().is_none(),
        "{}",
        failed("get the file and its streams", &get, &server)
    );
    let read = |name: &str| fs::read(local.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        read("file.out") == FILE_DATA,
        "{test}: {FILE} read through {reader:?} differs"
    );
    for (i, (name, data)) in streams.iter().enumerate() {
        let got = read(&format!("stream{i}.out"));
        let first_difference = got.iter().zip(data.iter()).position(|(a, b)| a != b);
        assert!(
            got == *data,
            "{test}: {FILE}:{name} written through {writer:?} reads back through {reader:?} as \
             {} bytes, wrote {}; first difference at {first_difference:?}",
            got.len(),
            data.len()
        );
    }
    assert!(
        read("other-case.out") == **other_data,
        "{test}: {FILE}:{other_case} (in other case) read through {reader:?} differs from \
         what was written as {FILE}:Mixed Case Stream"
    );
    let read_listing = check_listing(test, &server, reader, &conf, &local, &logs, &streams);
    let named = |listing: &[String]| -> Vec<String> {
        listing
            .iter()
            .filter(|l| !l.starts_with("stream: [::$DATA]"))
            .cloned()
            .collect()
    };
    assert_eq!(
        named(&read_listing),
        named(&written_listing),
        "{test}: {reader:?} lists the named streams in another order than {writer:?}"
    );
    let got_xattrs = stream_xattrs(&file_on_disk);
    assert!(
        got_xattrs == want_xattrs,
        "{test}: after reading through {reader:?}, the stream xattrs of {FILE} are\n{}",
        brief(&got_xattrs)
    );
}

#[test]
fn streams_written_through_samba_read_back_byte_identical_through_ringshare() {
    streams_cross_over(
        "streams_written_through_samba_read_back_byte_identical_through_ringshare",
        Kind::Samba,
        Kind::Ringshare,
    );
}

#[test]
fn streams_written_through_ringshare_read_back_byte_identical_through_samba() {
    streams_cross_over(
        "streams_written_through_ringshare_read_back_byte_identical_through_samba",
        Kind::Ringshare,
        Kind::Samba,
    );
}
