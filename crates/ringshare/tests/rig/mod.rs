//! A rig for hostile-client, fault and durability tests against the real binary: a
//! `ringshare serve` with any number of users, a chosen share directory and extra global
//! options (restartable on the same share), and a blocking raw SMB2 connection that logs on with
//! the client crate and then sends hand-made frames with whatever ids, offsets and lengths a test
//! wants.
#![allow(dead_code)] // each test file uses a different part of this module

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ringshare_client::{ClientConn, ClientOptions, Event};
use ringshare_wire::codec::HEADER_LEN;
use ringshare_wire::consts::{Command, Dialect, HeaderFlags};
use ringshare_wire::framing;
use ringshare_wire::header::{Header, HeaderId};
use ringshare_wire::{FileId, NtStatus};

use crate::common::{
    add_user, chown_tree, free_port, listens_on, ringshare_bin, TempDir, START_ATTEMPTS_MAX,
};

#[path = "../../../cluster/tests/support/stop.rs"]
mod stop;
#[allow(unused_imports)] // Not every test binary that has the rig stops a process.
pub use stop::{continue_process, stop_process};

/// How long a raw read waits for the server.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub const GENERIC_READ: u32 = 0x8000_0000;
pub const GENERIC_WRITE: u32 = 0x4000_0000;
pub const GENERIC_ALL: u32 = 0x1000_0000;
pub const DELETE: u32 = 0x0001_0000;
pub const FILE_LIST_DIRECTORY: u32 = 0x0000_0001;
pub const FILE_READ_ATTRIBUTES: u32 = 0x0000_0080;
pub const FILE_DIRECTORY_FILE: u32 = 0x0000_0001;
pub const FILE_NON_DIRECTORY_FILE: u32 = 0x0000_0040;
/// CreateDisposition values.
pub const FILE_OPEN: u32 = 1;
pub const FILE_CREATE: u32 = 2;
pub const FILE_OPEN_IF: u32 = 3;
pub const FILE_OVERWRITE_IF: u32 = 5;

/// One account of a [`Rig`].
pub const USER_A: (&str, &str) = ("rsalice", "Alice-Pass-1");
pub const USER_B: (&str, &str) = ("rsbob", "Bob-Pass-2");
pub const SHARE: &str = "share";

/// A `ringshare serve` on a private port: users [`USER_A`] and [`USER_B`], one share.
pub struct Rig {
    pub port: u16,
    /// The address it listens on (loopback unless started [`Rig::start_at`]).
    pub host: String,
    /// The network namespace (under /run/netns) it runs in, if not this one.
    netns: Option<String>,
    pub share_dir: PathBuf,
    /// More `serve` arguments (`--threads 1`).
    pub args: Vec<String>,
    /// The binary to run instead of this build's (another release's: scripts/cluster-upgrade.sh).
    pub bin: Option<PathBuf>,
    conf: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    tmp: TempDir,
}

impl Rig {
    /// A server over a fresh share directory.
    pub fn start(tag: &str, extra_global: &str) -> Rig {
        let tmp = TempDir::new(tag);
        let share = tmp.path().join("share");
        std::fs::create_dir_all(&share).expect("create share");
        Rig::start_on(tmp, share, extra_global)
    }

    /// A server over `share_dir` (which must exist); `tmp` holds its configuration and log.
    pub fn start_on(tmp: TempDir, share_dir: PathBuf, extra_global: &str) -> Rig {
        Rig::start_on_with(tmp, share_dir, extra_global, &[])
    }

    /// [`Rig::start_on`] with more `serve` arguments (`--threads 1`).
    pub fn start_on_with(
        tmp: TempDir,
        share_dir: PathBuf,
        extra_global: &str,
        args: &[&str],
    ) -> Rig {
        Rig::start_at(
            tmp,
            share_dir,
            extra_global,
            args,
            ("127.0.0.1", None),
            None,
        )
    }

    /// [`Rig::start_on_with`] listening on `host`, run in the network
    /// namespace `netns` (a name under /run/netns) when given, running the binary `bin`
    /// ([`Rig::bin`]) when given.
    pub fn start_at(
        tmp: TempDir,
        share_dir: PathBuf,
        extra_global: &str,
        args: &[&str],
        (host, netns): (&str, Option<&str>),
        bin: Option<&Path>,
    ) -> Rig {
        let conf = tmp.path().join("ringshare.conf");
        let passwd = tmp.path().join("smbpasswd");
        let (conf_path, share_path) = (conf.clone(), share_dir.clone());
        let write_conf = move |port: u16| {
            let text = format!(
                "[global]\n\tlisten = {host}:{port}\n\tsmb passwd file = {}\n\
                 \tlog level = 1\n{extra_global}\n[{SHARE}]\n\tpath = {}\n\tread only = no\n",
                passwd.display(),
                share_path.display()
            );
            std::fs::write(&conf_path, text).expect("write conf");
        };
        let port = free_port();
        write_conf(port);
        for (user, pass) in [USER_A, USER_B] {
            add_user(&conf, user, pass);
        }
        // A server run as root acts as the users: the files the test put
        // there are USER_A's, and both users may create files in the share.
        if let Ok(Some(a)) = nix::unistd::User::from_name(USER_A.0) {
            chown_tree(&share_dir, a.uid.as_raw());
        }
        let _ = std::fs::set_permissions(&share_dir, std::fs::Permissions::from_mode(0o777));
        let log = tmp.path().join("serve.log");
        let mut rig = Rig {
            port,
            host: host.to_string(),
            netns: netns.map(str::to_string),
            share_dir,
            args: args.iter().map(|a| a.to_string()).collect(),
            bin: bin.map(Path::to_path_buf),
            conf,
            log,
            child: None,
            tmp,
        };
        // Another process may take the port between its probe and the server's bind: then
        // again with a new one.
        for attempt in 1.. {
            match rig.try_spawn() {
                Ok(()) => break,
                Err(why) if why.contains("in use") && attempt < START_ATTEMPTS_MAX => {
                    rig.port = free_port();
                    write_conf(rig.port);
                }
                Err(why) => panic!("{why}"),
            }
        }
        rig
    }

    /// Start the process (again) with the same configuration and port.
    pub fn spawn(&mut self) {
        if let Err(why) = self.try_spawn() {
            panic!("{why}");
        }
    }

    /// [`Rig::spawn`], saying why the server did not start listening.
    fn try_spawn(&mut self) -> Result<(), String> {
        assert!(self.child.is_none(), "server already running");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open log");
        let err = out.try_clone().expect("dup log");
        // nsenter joins the namespace and execs the server (same pid).
        let bin = self
            .bin
            .clone()
            .unwrap_or_else(|| PathBuf::from(ringshare_bin()));
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Process::new("nsenter");
                c.arg(format!("--net=/run/netns/{ns}")).arg(&bin);
                c
            }
            None => Process::new(&bin),
        };
        let mut child = cmd
            .arg("serve")
            .arg("--config")
            .arg(&self.conf)
            .args(&self.args)
            .env("HOME", self.tmp.path())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn ringshare serve");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "ringshare serve exited with {status}:\n{}",
                    self.log()
                ));
            }
            // The listener must be this server's, not another test's on the same port.
            if TcpStream::connect((self.host.as_str(), self.port)).is_ok()
                && listens_on(child.id(), self.port)
            {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("server did not listen:\n{}", self.log()));
            }
            thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
        Ok(())
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The directory holding its configuration and log.
    pub fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// The server's configuration file.
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The file the server's standard output and error go to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Send `signal` and wait at most `limit` for the exit; `None` when it did not exit.
    pub fn signal_and_wait(&mut self, signal: i32, limit: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let pid = rustix::process::Pid::from_child(child);
        let sig = match signal {
            libc::SIGKILL => rustix::process::Signal::KILL,
            libc::SIGTERM => rustix::process::Signal::TERM,
            libc::SIGINT => rustix::process::Signal::INT,
            other => panic!("unsupported signal {other}"),
        };
        let _ = rustix::process::kill_process(pid, sig);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// Peak resident set size of the server in KiB (VmHWM).
    pub fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmHWM:")
    }

    /// Current resident set size of the server in KiB (VmRSS).
    pub fn rss_kib(&self) -> u64 {
        proc_status_kib(self.pid(), "VmRSS:")
    }

    /// A logged-on raw connection as `user`.
    pub fn login(&self, user: (&str, &str)) -> Raw {
        Raw::login_at(&self.host, self.port, user, Dialect::SMB3_1_1)
    }

    /// Panics unless a fresh client can log on, create, write, read back and close.
    pub fn still_serves(&self, step: &str) {
        let mut c = self.login(USER_A);
        let name = format!("alive-{}.txt", c.next_mid);
        let f = c
            .create(&name, GENERIC_READ | GENERIC_WRITE, FILE_OVERWRITE_IF, 0)
            .unwrap_or_else(|s| panic!("{step}: create on a fresh connection: {s:?}"));
        c.write(f, 0, b"alive").expect("write");
        assert_eq!(c.read(f, 0, 5).expect("read"), b"alive", "{step}");
        c.close(f).expect("close");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if self.child.is_some()
            && self
                .signal_and_wait(libc::SIGTERM, Duration::from_secs(5))
                .is_none()
        {
            let _ = self.signal_and_wait(libc::SIGKILL, Duration::from_secs(5));
        }
    }
}

pub fn proc_status_kib(pid: u32, key: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// What came back for a raw request.
#[derive(Debug)]
pub enum Outcome {
    /// The final response: header and the whole message (header included).
    Reply(Header, Vec<u8>),
    /// The server closed the connection (or reset it).
    Closed,
    /// Nothing within [`READ_TIMEOUT`].
    Silent,
}

impl Outcome {
    pub fn status(&self) -> Option<NtStatus> {
        match self {
            Outcome::Reply(h, _) => Some(h.status),
            _ => None,
        }
    }

    /// Panics unless this is an error status or a dropped connection.
    pub fn expect_refused(&self, what: &str) {
        match self {
            Outcome::Reply(h, _) if !h.status.is_success() => {}
            Outcome::Closed => {}
            other => {
                panic!("{what}: expected an error status or a dropped connection, got {other:?}")
            }
        }
    }
}

/// A blocking SMB2 connection: the client crate logs on, then frames are hand-made.
pub struct Raw {
    pub sock: TcpStream,
    pub session_id: u64,
    pub tree_id: u32,
    /// Next message id to use.
    pub next_mid: u64,
    /// Credits granted and not yet spent.
    pub credits: u64,
    pub dialect: Dialect,
}

impl Raw {
    /// A TCP connection with nothing sent.
    pub fn connect(port: u16) -> TcpStream {
        Raw::connect_at("127.0.0.1", port)
    }

    /// [`Raw::connect`] to `host`.
    pub fn connect_at(host: &str, port: u16) -> TcpStream {
        let s = TcpStream::connect((host, port)).expect("connect");
        s.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        s
    }

    /// Negotiate, log on as `user` and connect to [`SHARE`].
    pub fn login(port: u16, user: (&str, &str), dialect: Dialect) -> Raw {
        Raw::login_at("127.0.0.1", port, user, dialect)
    }

    /// [`Raw::login`] to a server listening on `host`.
    pub fn login_at(host: &str, port: u16, user: (&str, &str), dialect: Dialect) -> Raw {
        let mut sock = Raw::connect_at(host, port);
        let mut conn = ClientConn::new(ClientOptions {
            user: user.0.into(),
            password: user.1.into(),
            share_unc: format!("\\\\{host}\\{SHARE}"),
            dialects: vec![dialect],
            credits_target: 256,
            seed: u64::from(port) ^ 0xA11CE,
            ..ClientOptions::default()
        });
        let mut out = Vec::new();
        let mut events = Vec::new();
        let mut echo_mid = None;
        loop {
            conn.take_output(&mut out);
            if !out.is_empty() {
                sock.write_all(&out).expect("send");
            }
            let Some(mut frame) = read_frame(&mut sock).expect("server closed during logon") else {
                panic!("server silent during logon");
            };
            events.clear();
            conn.receive(&mut frame, &mut events)
                .unwrap_or_else(|e| panic!("logon as {}: {e:?}", user.0));
            for ev in &events {
                match ev {
                    Event::Ready => echo_mid = Some(conn.echo(1).expect("echo")),
                    Event::Done { tag: 1, .. } => {
                        return Raw {
                            sock,
                            session_id: conn.session_id(),
                            tree_id: conn.tree_id(),
                            next_mid: echo_mid.expect("echo sent") + 1,
                            credits: u64::from(conn.credits_available()),
                            dialect,
                        };
                    }
                    Event::Done { result, .. } => panic!("logon: {result:?}"),
                    Event::LeaseBreak { .. } => {}
                }
            }
        }
    }

    /// A request header for `cmd` on this connection's session and tree with the next message id.
    pub fn header(&mut self, cmd: Command) -> Header {
        let mut h = Header::request(cmd, self.next_mid);
        h.credits = 1;
        h.credit_charge = 1;
        h.session_id = self.session_id;
        h.id = HeaderId::Sync {
            process_id: 0xFEFF,
            tree_id: self.tree_id,
        };
        self.next_mid += 1;
        self.credits = self.credits.saturating_sub(1);
        h
    }

    /// Ask for credits with ECHOs until `want` are granted.
    pub fn gather_credits(&mut self, want: u64) {
        for _ in 0..64 {
            if self.credits >= want {
                return;
            }
            let mut h = self.header(Command::ECHO);
            h.credits = 512;
            match self.call_with(&h, &[4, 0, 0, 0]) {
                Outcome::Reply(h, _) => assert_eq!(h.status, NtStatus::SUCCESS),
                other => panic!("echo: {other:?}"),
            }
        }
        panic!("only {} credits granted, wanted {want}", self.credits);
    }

    /// One message: `hdr` then `body`.
    pub fn message(hdr: &Header, body: &[u8]) -> Vec<u8> {
        let mut m = Vec::with_capacity(HEADER_LEN + body.len());
        hdr.encode(&mut m);
        m.extend_from_slice(body);
        m
    }

    /// Send `payload` behind a direct-TCP header.
    pub fn send_frame(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let mut f = Vec::with_capacity(4 + payload.len());
        framing::put_frame_header(&mut f, payload.len());
        f.extend_from_slice(payload);
        self.sock.write_all(&f)
    }

    /// Read frames until the final response to `mid` (interim PENDING replies skipped).
    pub fn wait_for(&mut self, mid: u64) -> Outcome {
        loop {
            match read_frame(&mut self.sock) {
                Err(()) => return Outcome::Closed,
                Ok(None) => return Outcome::Silent,
                Ok(Some(frame)) => {
                    for (h, m) in split_responses(&frame) {
                        self.credits += u64::from(h.credits);
                        if h.message_id == mid && !(h.status == NtStatus::PENDING && h.is_async()) {
                            return Outcome::Reply(h, m);
                        }
                    }
                }
            }
        }
    }

    /// Send one request for `cmd` with `body` and wait for its response.
    pub fn call(&mut self, cmd: Command, body: &[u8]) -> Outcome {
        let hdr = self.header(cmd);
        self.call_with(&hdr, body)
    }

    /// Like [`Raw::call`] for a request that moves `payload` bytes: the credit charge covers it
    /// ([MS-SMB2] 3.3.5.2.5) and asks for as many credits back.
    pub fn call_sized(&mut self, cmd: Command, body: &[u8], payload: usize) -> Outcome {
        let charge = payload.div_ceil(65536).max(1) as u16;
        let mut hdr = self.header(cmd);
        hdr.credit_charge = charge;
        hdr.credits = charge;
        self.next_mid += u64::from(charge) - 1;
        self.credits = self.credits.saturating_sub(u64::from(charge) - 1);
        self.call_with(&hdr, body)
    }

    /// Send one request with a caller-made header.
    pub fn call_with(&mut self, hdr: &Header, body: &[u8]) -> Outcome {
        if self.send_frame(&Raw::message(hdr, body)).is_err() {
            return Outcome::Closed;
        }
        self.wait_for(hdr.message_id)
    }

    pub fn create(
        &mut self,
        name: &str,
        access: u32,
        disposition: u32,
        options: u32,
    ) -> Result<FileId, Outcome> {
        let body = create_body(&utf16(name), access, disposition, options);
        self.create_raw(&body)
    }

    pub fn create_raw(&mut self, body: &[u8]) -> Result<FileId, Outcome> {
        match self.call(Command::CREATE, body) {
            Outcome::Reply(h, m) if h.status.is_success() => {
                // FileId at body offset 64 of the CREATE response.
                let at = HEADER_LEN + 64;
                Ok(FileId {
                    persistent: le64(&m[at..]),
                    volatile: le64(&m[at + 8..]),
                })
            }
            other => Err(other),
        }
    }

    pub fn write(&mut self, f: FileId, offset: u64, data: &[u8]) -> Result<u32, Outcome> {
        match self.call_sized(Command::WRITE, &write_body(f, offset, data), data.len()) {
            Outcome::Reply(h, m) if h.status.is_success() => Ok(le32(&m[HEADER_LEN + 4..])),
            other => Err(other),
        }
    }

    pub fn read(&mut self, f: FileId, offset: u64, len: u32) -> Result<Vec<u8>, Outcome> {
        match self.call_sized(Command::READ, &read_body(f, offset, len), len as usize) {
            Outcome::Reply(h, m) if h.status.is_success() => {
                let off = usize::from(m[HEADER_LEN + 2]);
                let n = le32(&m[HEADER_LEN + 4..]) as usize;
                Ok(m[off..off + n].to_vec())
            }
            other => Err(other),
        }
    }

    pub fn flush(&mut self, f: FileId) -> Outcome {
        let mut b = vec![24, 0, 0, 0, 0, 0, 0, 0];
        put_file_id(&mut b, f);
        self.call(Command::FLUSH, &b)
    }

    pub fn close(&mut self, f: FileId) -> Result<(), Outcome> {
        let mut b = vec![24, 0, 0, 0, 0, 0, 0, 0];
        put_file_id(&mut b, f);
        match self.call(Command::CLOSE, &b) {
            Outcome::Reply(h, _) if h.status.is_success() => Ok(()),
            other => Err(other),
        }
    }

    /// QUERY_DIRECTORY FileNamesInformation (0x0C) of `dir` with `pattern`; the names found.
    pub fn list(&mut self, dir: FileId, pattern: &str) -> Result<Vec<String>, Outcome> {
        let mut names = Vec::new();
        let mut restart = true;
        loop {
            let body = query_directory_body(dir, 0x0C, restart, &utf16(pattern), 65536);
            restart = false;
            match self.call(Command::QUERY_DIRECTORY, &body) {
                Outcome::Reply(h, m) if h.status.is_success() => {
                    let off =
                        usize::from(u16::from_le_bytes([m[HEADER_LEN + 2], m[HEADER_LEN + 3]]));
                    let len = le32(&m[HEADER_LEN + 4..]) as usize;
                    let buf = &m[off..off + len];
                    let mut at = 0;
                    loop {
                        let next = le32(&buf[at..]) as usize;
                        let n = le32(&buf[at + 8..]) as usize;
                        let units: Vec<u16> = buf[at + 12..at + 12 + n]
                            .chunks_exact(2)
                            .map(|c| u16::from_le_bytes([c[0], c[1]]))
                            .collect();
                        names.push(String::from_utf16_lossy(&units));
                        if next == 0 {
                            break;
                        }
                        at += next;
                    }
                }
                Outcome::Reply(h, _) if h.status == NtStatus::NO_MORE_FILES => return Ok(names),
                other => return Err(other),
            }
        }
    }
}

/// One frame's payload; `Ok(None)` on timeout, `Err` when the connection closed or reset.
pub fn read_frame(sock: &mut TcpStream) -> Result<Option<Vec<u8>>, ()> {
    let mut hdr = [0u8; 4];
    match read_full(sock, &mut hdr) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(()) => return Err(()),
    }
    let len = framing::frame_len(hdr).map_err(|_| ())?;
    let mut buf = vec![0u8; len];
    match read_full(sock, &mut buf) {
        Ok(true) => Ok(Some(buf)),
        Ok(false) => Ok(None),
        Err(()) => Err(()),
    }
}

/// `Ok(false)` on a timeout before the first byte.
fn read_full(sock: &mut TcpStream, buf: &mut [u8]) -> Result<bool, ()> {
    let mut got = 0;
    while got < buf.len() {
        match sock.read(&mut buf[got..]) {
            Ok(0) => return Err(()),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if got == 0 {
                    return Ok(false);
                }
                return Err(());
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(()),
        }
    }
    Ok(true)
}

/// Whether the server closes `sock` within [`READ_TIMEOUT`] (frames it sends meanwhile are read
/// and dropped).
pub fn closes(sock: &mut TcpStream) -> bool {
    loop {
        match read_frame(sock) {
            Err(()) => return true,
            Ok(None) => return false,
            Ok(Some(_)) => {}
        }
    }
}

/// The messages of a response frame (a compound is split on NextCommand).
pub fn split_responses(frame: &[u8]) -> Vec<(Header, Vec<u8>)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + HEADER_LEN <= frame.len() {
        let Ok(h) = Header::decode(&frame[pos..]) else {
            break;
        };
        let next = h.next_command as usize;
        let end = if next == 0 {
            frame.len()
        } else {
            (pos + next).min(frame.len())
        };
        out.push((h, frame[pos..end].to_vec()));
        if next == 0 {
            break;
        }
        pos = end;
    }
    out
}

pub fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

pub fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

pub fn utf16(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
}

pub fn put_file_id(b: &mut Vec<u8>, f: FileId) {
    b.extend_from_slice(&f.persistent.to_le_bytes());
    b.extend_from_slice(&f.volatile.to_le_bytes());
}

/// CREATE body ([MS-SMB2] 2.2.13) with `name` (UTF-16LE bytes as given) at offset 120.
pub fn create_body(name: &[u8], access: u32, disposition: u32, options: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(56 + name.len().max(8));
    b.extend_from_slice(&57u16.to_le_bytes());
    b.push(0); // SecurityFlags
    b.push(0); // RequestedOplockLevel
    b.extend_from_slice(&2u32.to_le_bytes()); // Impersonation
    b.extend_from_slice(&[0u8; 16]); // SmbCreateFlags, Reserved
    b.extend_from_slice(&access.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes()); // FileAttributes
    b.extend_from_slice(&7u32.to_le_bytes()); // ShareAccess
    b.extend_from_slice(&disposition.to_le_bytes());
    b.extend_from_slice(&options.to_le_bytes());
    b.extend_from_slice(&((HEADER_LEN + 56) as u16).to_le_bytes());
    b.extend_from_slice(&(name.len().min(0xFFFF) as u16).to_le_bytes());
    b.extend_from_slice(&[0u8; 8]); // CreateContextsOffset, Length
    b.extend_from_slice(name);
    if name.is_empty() {
        b.push(0); // the Buffer is at least one byte
    }
    b
}

/// WRITE body ([MS-SMB2] 2.2.21), data at offset 112.
pub fn write_body(f: FileId, offset: u64, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(48 + data.len());
    b.extend_from_slice(&49u16.to_le_bytes());
    b.extend_from_slice(&((HEADER_LEN + 48) as u16).to_le_bytes());
    b.extend_from_slice(&(data.len() as u32).to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    put_file_id(&mut b, f);
    b.extend_from_slice(&[0u8; 16]); // Channel, Remaining, ChannelInfo offset/len, Flags
    b.extend_from_slice(data);
    b
}

/// READ body ([MS-SMB2] 2.2.19).
pub fn read_body(f: FileId, offset: u64, len: u32) -> Vec<u8> {
    let mut b = Vec::with_capacity(49);
    b.extend_from_slice(&49u16.to_le_bytes());
    b.push(0x50);
    b.push(0);
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&offset.to_le_bytes());
    put_file_id(&mut b, f);
    b.extend_from_slice(&[0u8; 16]); // MinimumCount, Channel, Remaining, ChannelInfo
    b.push(0);
    b
}

/// QUERY_DIRECTORY body ([MS-SMB2] 2.2.33), pattern at offset 96.
pub fn query_directory_body(
    dir: FileId,
    class: u8,
    restart: bool,
    pattern: &[u8],
    out_len: u32,
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&33u16.to_le_bytes());
    b.push(class);
    b.push(if restart { 1 } else { 0 });
    b.extend_from_slice(&0u32.to_le_bytes());
    put_file_id(&mut b, dir);
    b.extend_from_slice(&((HEADER_LEN + 32) as u16).to_le_bytes());
    b.extend_from_slice(&(pattern.len() as u16).to_le_bytes());
    b.extend_from_slice(&out_len.to_le_bytes());
    b.extend_from_slice(pattern);
    if pattern.is_empty() {
        b.push(0);
    }
    b
}

/// Set RELATED_OPERATIONS on a header.
pub fn related(mut h: Header) -> Header {
    h.flags.insert(HeaderFlags::RELATED_OPERATIONS);
    h
}

/// Does the directory tree at `dir` contain `needle` in any file name or content?
pub fn tree_contains(dir: &Path, needle: &[u8]) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    rd.flatten().any(|e| {
        let p = e.path();
        if p.is_dir() {
            tree_contains(&p, needle)
        } else {
            std::fs::read(&p)
                .map(|d| d.windows(needle.len()).any(|w| w == needle))
                .unwrap_or(false)
        }
    })
}
