//! Helpers for the interop tests: a `ringshare serve` process on a private loopback port with its
//! own temporary share, configuration and smbpasswd file, and a bounded `smbclient` runner.
//!
//! Everything lives in one temporary directory per server, removed on drop. The server is stopped
//! on drop with SIGTERM, then SIGKILL when it is still there after [`STOP_GRACE`].
#![allow(dead_code)] // each test file uses a different part of this module

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, Pid, Signal};

pub mod kdc;
pub mod py;

/// How long a server gets to accept connections after it was started.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server gets to exit after SIGTERM before it is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(5);
/// Default limit for one smbclient run.
pub const SMBCLIENT_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times a server start is retried with a new port when the port was taken meanwhile.
pub const START_ATTEMPTS_MAX: usize = 3;

/// The account the tests log in with.
pub const USER: &str = "rsinterop";
/// Its password.
pub const PASSWORD: &str = "Interop-Pass-1";
/// The share every configuration exports.
pub const SHARE: &str = "share";

/// The ringshare binary cargo built for these tests.
pub fn ringshare_bin() -> &'static str {
    env!("CARGO_BIN_EXE_ringshare")
}

/// uid and gid of the account `nobody` (Debian's).
pub const NOBODY: u32 = 65534;

/// How a test's server process is started.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RunAs {
    /// As this test process.
    Process,
    /// As this process, in a mount namespace with an empty tmpfs on /var/lib.
    PrivateVarLib,
    /// As the account `nobody`, without groups (needs root).
    Nobody,
}

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh, empty directory whose name contains `tag`, this process's id and a counter.
    pub fn new(tag: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), tag)
    }

    /// The same under `base`.
    pub fn new_in(base: &Path, tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = base.join(format!(
            "ringshare-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
///
/// Chosen below the kernel's ephemeral range (`ip_local_port_range`), where
/// the outgoing connections of everything else running (etcd clients,
/// smbclient, other tests) take their local ports: a port of that range
/// found free here may be some connection's by the time a server binds it
/// (seen: a cluster node's `cluster address` "already in use"). Free for
/// both TCP and UDP (QUIC listens on the SMB port number).
pub fn free_port() -> u16 {
    use std::hash::BuildHasher;
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicU64, Ordering};
    static TRIES: AtomicU64 = AtomicU64::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const FROM: u16 = 10_000;
    if low > FROM + 1000 {
        let seed = std::collections::hash_map::RandomState::new();
        for _ in 0..1000 {
            let n = seed.hash_one((std::process::id(), TRIES.fetch_add(1, Ordering::Relaxed)));
            let port = FROM + (n % u64::from(low - FROM)) as u16;
            let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, port));
            let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, port));
            if tcp.is_ok() && udp.is_ok() {
                return port;
            }
        }
    }
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// Whether `smbclient` can be run. When it cannot: with the `CI` environment variable set this
/// panics (CI must have it: `apt-get install -y smbclient`); otherwise it prints a loud note and
/// returns false, and the caller returns early.
pub fn smbclient_or_skip(test: &str) -> bool {
    tool_or_skip("smbclient", "smbclient", test)
}

/// Whether Samba's `pdbedit` (Debian's samba) can be run; like [`smbclient_or_skip`].
pub fn pdbedit_or_skip(test: &str) -> bool {
    tool_or_skip("pdbedit", "samba", test)
}

/// Whether `smbtorture` (Debian's samba-testsuite) can be run; like [`smbclient_or_skip`].
pub fn smbtorture_or_skip(test: &str) -> bool {
    tool_or_skip("smbtorture", "samba-testsuite", test)
}

/// Whether `fail2ban-regex` (Debian's fail2ban) can be run; like [`smbclient_or_skip`].
pub fn fail2ban_regex_or_skip(test: &str) -> bool {
    tool_or_skip("fail2ban-regex", "fail2ban", test)
}

/// Whether every (program, Debian package) of `tools` is on PATH, as root: otherwise the test
/// is skipped with a line saying what to install, and under CI (where scripts/install-deps.sh
/// installs them all) it fails instead.
pub fn root_and_commands_or_skip(test: &str, tools: &[(&str, &str)]) -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("\n!!!!!!!! SKIPPED {test}: needs root !!!!!!!!\n");
        return false;
    }
    for (tool, package) in tools {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if found {
            continue;
        }
        if std::env::var_os("CI").is_some() {
            panic!(
                "{tool} is not installed but CI is set: apt-get install -y {package} (test {test})"
            );
        }
        eprintln!(
            "\n!!!!!!!! SKIPPED {test}: {tool} not found (apt-get install -y {package}) !!!!!!!!\n"
        );
        return false;
    }
    true
}

/// A finished command's standard output and error, as text.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tool_or_skip(tool: &str, package: &str, test: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if found {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{tool} is not installed but CI is set: install it with \
             `apt-get install -y {package}` (test {test})"
        );
    }
    eprintln!(
        "\n!!!!!!!! SKIPPED {test}: {tool} not found (apt-get install -y {package}) !!!!!!!!\n"
    );
    false
}

/// How a server is configured.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `guest ok` of the share.
    pub guest_ok: bool,
    /// `map to guest`: "never" or "bad user".
    pub map_to_guest: &'static str,
    /// `server signing`: "auto", "mandatory" or "disabled".
    pub signing: &'static str,
    /// `server min protocol`.
    pub min_protocol: &'static str,
    /// `server max protocol`.
    pub max_protocol: &'static str,
    /// `server smb encrypt`: "if_required" (default), "desired", "required", "off".
    pub encrypt: &'static str,
    /// Where the share and the server's files go (default: the system temp dir).
    pub base_dir: Option<&'static str>,
    /// More `[global]` lines, each ending in a newline.
    pub extra_global: &'static str,
    /// More users (name, password) besides [`USER`], each with its Unix account.
    pub extra_users: &'static [(&'static str, &'static str)],
    /// A `pdbedit -L -w` listing given to `ringshare user import` before the server starts.
    pub import_users: Option<PathBuf>,
    /// Environment variables of the server process (e.g. libfaketime's, to move its clock).
    pub env: Vec<(String, String)>,
    /// SMB over QUIC too, on the UDP port of the same number as the TCP one.
    pub quic: bool,
    /// `serve --threads N` (default: one per CPU).
    pub threads: Option<u32>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            guest_ok: false,
            map_to_guest: "never",
            signing: "auto",
            min_protocol: "SMB2_02",
            max_protocol: "SMB3_11",
            encrypt: "if_required",
            base_dir: None,
            extra_global: "",
            extra_users: &[],
            import_users: None,
            env: Vec::new(),
            quic: false,
            threads: None,
        }
    }
}

/// A running `ringshare serve`, stopped on drop.
pub struct Server {
    /// 127.0.0.1 port it listens on.
    pub port: u16,
    /// The share's directory on disk.
    pub share_dir: PathBuf,
    /// The share's name.
    pub share: String,
    /// Scratch space for client-side files (uploads, downloads), next to the share.
    pub scratch: PathBuf,
    log: PathBuf,
    client_conf: PathBuf,
    child: Option<Child>,
    runs: AtomicUsize,
    // Last, so that it is removed after the server stopped.
    tmp: TempDir,
}

impl Server {
    /// `ringshare serve --config` with `cfg`, user [`USER`] added through `ringshare user add`.
    /// `setup` runs on the share directory before the server starts.
    pub fn start(cfg: &ServerConfig, setup: impl FnOnce(&Path)) -> Server {
        let tmp = match cfg.base_dir {
            Some(base) => TempDir::new_in(Path::new(base), "interop"),
            None => TempDir::new("interop"),
        };
        let share_dir = tmp.path().join("share");
        std::fs::create_dir_all(&share_dir).expect("create share dir");
        setup(&share_dir);
        let threads = cfg.threads;
        let passwd = tmp.path().join("smbpasswd");
        let conf = tmp.path().join("ringshare.conf");
        let control = tmp.path().join("control.sock");
        // The port goes into the file, so the file is rewritten for each attempt.
        let write_conf = |port: u16| {
            let text = format!(
                "[global]\n\
                 \tlisten = 127.0.0.1:{port}\n\
                 \tsmb passwd file = {passwd}\n\
                 \tserver signing = {signing}\n\
                 \tserver min protocol = {min}\n\
                 \tserver max protocol = {max}\n\
                 \tmap to guest = {guest}\n\
                 \tserver smb encrypt = {encrypt}\n\
                 \tlog level = 2\n\
                 \tcontrol socket = {control}\n\
                 {quic}{extra}\
                 \n\
                 [{SHARE}]\n\
                 \tpath = {share}\n\
                 \tread only = no\n\
                 \tcomment = ringshare interop share\n\
                 \tguest ok = {guest_ok}\n",
                passwd = passwd.display(),
                signing = cfg.signing,
                encrypt = cfg.encrypt,
                min = cfg.min_protocol,
                max = cfg.max_protocol,
                guest = cfg.map_to_guest,
                share = share_dir.display(),
                guest_ok = if cfg.guest_ok { "yes" } else { "no" },
                extra = cfg.extra_global,
                control = control.display(),
                quic = if cfg.quic {
                    format!("\tserver smb transports = tcp, quic:{port}\n")
                } else {
                    String::new()
                },
            );
            std::fs::write(&conf, text).expect("write ringshare.conf");
        };
        write_conf(free_port());
        add_user(&conf, USER, PASSWORD);
        for (name, password) in cfg.extra_users {
            add_user(&conf, name, password);
        }
        if let Some(listing) = &cfg.import_users {
            import_users(&conf, listing);
        }
        give_share_to_user(&share_dir, &passwd, USER);
        Server::spawn(
            tmp,
            share_dir.clone(),
            SHARE.to_string(),
            RunAs::Process,
            &cfg.env,
            |port| {
                write_conf(port);
                let mut args = vec![
                    "serve".into(),
                    "--config".into(),
                    conf.display().to_string(),
                ];
                if let Some(n) = threads {
                    args.extend(["--threads".into(), n.to_string()]);
                }
                args
            },
        )
    }

    /// The quick form, `ringshare serve DIR --listen 127.0.0.1:PORT --guest`; the share is named
    /// after DIR's last component, `share_name`.
    pub fn start_quick_guest(share_name: &str, setup: impl FnOnce(&Path)) -> Server {
        Server::start_quick(share_name, true, setup)
    }

    /// The quick form, `ringshare serve DIR --listen 127.0.0.1:PORT` (with `--guest` when
    /// `guest`); the share is named after DIR's last component, `share_name`. Without users
    /// in its default user file, the server creates the first one and prints its password
    /// ([`Server::first_user_password`]).
    pub fn start_quick(share_name: &str, guest: bool, setup: impl FnOnce(&Path)) -> Server {
        // As root the quick form keeps its users in /var/lib/ringshare/smbpasswd: the server then
        // runs in a mount namespace of its own with an empty tmpfs on /var/lib, so that the test
        // neither reads nor leaves a file there.
        let how = if !guest && rustix::process::geteuid().is_root() {
            RunAs::PrivateVarLib
        } else {
            RunAs::Process
        };
        Server::quick(share_name, guest, how, setup)
    }

    /// The quick form (not guest) run by root as the account `nobody` (setpriv): a server that
    /// is not root. Its user file is under its private HOME, which `nobody` may write.
    pub fn start_quick_as_nobody(share_name: &str, setup: impl FnOnce(&Path)) -> Server {
        Server::quick(share_name, false, RunAs::Nobody, setup)
    }

    fn quick(share_name: &str, guest: bool, how: RunAs, setup: impl FnOnce(&Path)) -> Server {
        let tmp = TempDir::new("interop-quick");
        let share_dir = tmp.path().join(share_name);
        std::fs::create_dir_all(&share_dir).expect("create share dir");
        setup(&share_dir);
        if how == RunAs::Nobody {
            let state = tmp.path().join("state");
            std::fs::create_dir_all(&state).expect("create state dir");
            chown_tree(&state, NOBODY);
            chown_tree(&share_dir, NOBODY);
        }
        let dir = share_dir.display().to_string();
        Server::spawn(tmp, share_dir, share_name.to_string(), how, &[], |port| {
            let mut args = vec![
                "serve".into(),
                dir.clone(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
            ];
            if guest {
                args.push("--guest".into());
            }
            args
        })
    }

    /// The password the quick form printed for the first user it created
    /// (`created user 'ringshare' with password 'PW'`).
    pub fn first_user_password(&self) -> Option<String> {
        let log = self.log();
        let rest = &log[log.find("with password '")? + "with password '".len()..];
        Some(rest[..rest.find('\'')?].to_string())
    }

    fn spawn(
        tmp: TempDir,
        share_dir: PathBuf,
        share: String,
        how: RunAs,
        env: &[(String, String)],
        mut args_for_port: impl FnMut(u16) -> Vec<String>,
    ) -> Server {
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir_all(&scratch).expect("create scratch dir");
        let client_conf = write_client_conf(tmp.path());
        let log = tmp.path().join("serve.log");
        let mut failure = String::new();
        for _ in 0..START_ATTEMPTS_MAX {
            // Another process may take the port between this probe and the server's bind; the
            // loop then tries again with a new one.
            let port = free_port();
            let args = args_for_port(port);
            let out = File::create(&log).expect("create serve.log");
            let err = out.try_clone().expect("dup serve.log");
            let mut cmd = match how {
                RunAs::Process => Command::new(ringshare_bin()),
                RunAs::PrivateVarLib => {
                    let mut c = Command::new("unshare");
                    c.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
                        .arg(
                            "mount -t tmpfs -o mode=0755 ringshare-test /var/lib && exec \"$0\" \"$@\"",
                        )
                        .arg(ringshare_bin());
                    c
                }
                RunAs::Nobody => {
                    let mut c = Command::new("setpriv");
                    c.arg(format!("--reuid={NOBODY}"))
                        .arg(format!("--regid={NOBODY}"))
                        .args(["--clear-groups", "--"])
                        .arg(ringshare_bin());
                    c
                }
            };
            let mut child = cmd
                .args(&args)
                .envs(env.iter().map(|(k, v)| (k, v)))
                // A private HOME keeps the quick form's default user file out of the real one.
                .env("HOME", tmp.path())
                .env("XDG_STATE_HOME", tmp.path().join("state"))
                // Its own process group: a signal the server sends to its group stays there.
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .expect("spawn ringshare serve");
            match wait_listening(&mut child, port) {
                Ok(()) => {
                    return Server {
                        port,
                        share_dir,
                        share,
                        scratch,
                        log,
                        client_conf,
                        child: Some(child),
                        runs: AtomicUsize::new(0),
                        tmp,
                    }
                }
                Err(why) => {
                    stop_child(&mut child);
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    failure = format!("{why}\n--- ringshare {args:?} output ---\n{text}");
                    if !text.contains("in use") {
                        break;
                    }
                }
            }
        }
        panic!("ringshare serve did not start: {failure}");
    }

    /// The server process's pid, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// What the server printed so far (stdout and stderr, interleaved).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(no log: {e})"))
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGTERM, then SIGKILL after [`STOP_GRACE`]; returns how it exited.
    pub fn stop(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        stop_child(&mut child)
    }

    /// The server's configuration file (servers made by [`Server::start`]).
    pub fn conf(&self) -> PathBuf {
        self.tmp.path().join("ringshare.conf")
    }

    /// Its smbpasswd file (servers made by [`Server::start`]).
    pub fn passwd_file(&self) -> PathBuf {
        self.tmp.path().join("smbpasswd")
    }

    /// Its control socket (servers made by [`Server::start`]).
    pub fn control_socket(&self) -> PathBuf {
        self.tmp.path().join("control.sock")
    }

    /// The private smb.conf the Samba client tools are run with (`-s`).
    pub fn client_conf(&self) -> &Path {
        &self.client_conf
    }

    /// A client for this server's share, logged in as [`USER`].
    pub fn client(&self) -> Smbclient<'_> {
        Smbclient {
            server: self,
            share: self.share.clone(),
            credentials: Credentials::User(USER.to_string(), PASSWORD.to_string()),
            dialect: None,
            protection: Protection::Default,
            debug_level: 1,
            timeout: SMBCLIENT_TIMEOUT,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits until 127.0.0.1:`port` accepts a connection, at most [`START_TIMEOUT`]; fails early when
/// the process exits.
fn wait_listening(child: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "ringshare serve exited with {status} before listening"
            ));
        }
        // The listener must be the child's: another test's server may have taken the port
        // between the probe and the child's bind (the child then exits "in use", and this
        // test would talk to the other server: seen as a missing control socket).
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            && listens_on(child.id(), port)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "127.0.0.1:{port} did not accept connections within {START_TIMEOUT:?}"
            ));
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Whether process `pid` holds a socket listening on TCP port `port` (IPv4 or IPv6), read
/// from /proc/PID/net/tcp{,6} (the socket's inode, in the process's network namespace) and
/// /proc/PID/fd (the process's sockets).
pub fn listens_on(pid: u32, port: u16) -> bool {
    let mut inodes = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let listening = *state == "0A";
            let on_port = local
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok())
                == Some(port);
            if listening && on_port {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .any(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
}

/// Waits for `child` to exit, for at most `limit`: how it exited, or `None`
/// when it ran longer (it is killed then) or cannot be waited for.
pub fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// SIGTERM, then SIGKILL after [`STOP_GRACE`]; returns how the process exited.
fn stop_child(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let _ = kill_process(Pid::from_child(child), Signal::TERM);
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// A server shared by the tests of one process: [`shared`] hands out the running one, or starts a
/// new one; the last holder to drop it stops it, so no server outlives the test binary.
pub struct SharedServer {
    slot: Mutex<Weak<Server>>,
}

impl SharedServer {
    /// An empty slot, for a `static`.
    pub const fn new() -> SharedServer {
        SharedServer {
            slot: Mutex::new(Weak::new()),
        }
    }

    /// The running server, or a new one from `start`.
    pub fn get(&self, start: impl FnOnce() -> Server) -> Arc<Server> {
        let mut slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(server) = slot.upgrade() {
            return server;
        }
        let server = Arc::new(start());
        *slot = Arc::downgrade(&server);
        server
    }
}

/// Runs `ringshare user add NAME --password-stdin --config CONF`.
pub fn add_user(conf: &Path, name: &str, password: &str) {
    ensure_unix_account(name);
    let mut child = Command::new(ringshare_bin())
        .args(["user", "add", name, "--password-stdin", "--config"])
        .arg(conf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ringshare user add");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = writeln!(stdin, "{password}\n{password}");
    }
    let out = child.wait_with_output().expect("ringshare user add");
    assert!(
        out.status.success(),
        "ringshare user add {name} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `ringshare user import LISTING --config CONF`.
pub fn import_users(conf: &Path, listing: &Path) {
    let out = Command::new(ringshare_bin())
        .args(["user", "import"])
        .arg(listing)
        .arg("--config")
        .arg(conf)
        .stdin(Stdio::null())
        .output()
        .expect("run ringshare user import");
    assert!(
        out.status.success(),
        "ringshare user import failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Held while a test adds or removes Unix accounts (here and in twin's `Accounts`): `useradd`
/// and `userdel` of tests running at once in one binary would meet on the password file's lock.
pub static ACCOUNT_CHANGES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// As root (CI runs as root), makes sure the Unix account `name` exists, as a server run as root
/// acts as each user's own account and refuses users without one (as Samba does). It is
/// created with `useradd -M -N -s /usr/sbin/nologin` (no home, no login) and left in place:
/// tests running at the same time share it. Without root, nothing: the server then acts as the
/// account it runs as.
pub fn ensure_unix_account(name: &str) {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    for _ in 0..50 {
        let changing = ACCOUNT_CHANGES.lock().unwrap_or_else(|p| p.into_inner());
        let known = Command::new("id")
            .args(["-u", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if known {
            return;
        }
        let made = Command::new("useradd")
            .args(["-M", "-N", "-s", "/usr/sbin/nologin", name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run useradd");
        // 9: it exists (made meanwhile by another test); other failures
        // (the passwd file locked by another program) are tried again.
        if made.success() || made.code() == Some(9) {
            return;
        }
        drop(changing);
        thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("could not create the Unix account {name} with useradd");
}

/// Makes the share directory and everything in it owned by the uid `user` got in the smbpasswd
/// file (the uid of its Unix account), so that a server that acts as the user can write there.
/// Best effort: without root the chown fails and the files stay ours, which is also the server's.
pub fn give_share_to_user(share_dir: &Path, passwd: &Path, user: &str) {
    let Ok(text) = std::fs::read_to_string(passwd) else {
        return;
    };
    let uid = text.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(user))
            .then(|| fields.next()?.parse::<u32>().ok())
            .flatten()
    });
    if let Some(uid) = uid {
        chown_tree(share_dir, uid);
    }
}

/// `chown -R uid` of `dir` and what it holds (not following symlinks).
pub fn chown_tree(dir: &Path, uid: u32) {
    let _ = std::os::unix::fs::lchown(dir, Some(uid), None);
    if dir.is_symlink() {
        return;
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            chown_tree(&e.path(), uid);
        }
    }
}

/// A private client configuration, so that /etc/samba/smb.conf cannot change what smbclient does.
fn write_client_conf(dir: &Path) -> PathBuf {
    let client = dir.join("client");
    for sub in ["lock", "state", "cache", "private", "log", "ncalrpc"] {
        std::fs::create_dir_all(client.join(sub)).expect("create client dirs");
    }
    let conf = client.join("smb.conf");
    let text = format!(
        "[global]\n\
         \tlock directory = {d}/lock\n\
         \tstate directory = {d}/state\n\
         \tcache directory = {d}/cache\n\
         \tprivate dir = {d}/private\n\
         \tncalrpc dir = {d}/ncalrpc\n\
         \tlog file = {d}/log/log.%m\n\
         \tclient min protocol = SMB2_02\n",
        d = client.display()
    );
    std::fs::write(&conf, text).expect("write client smb.conf");
    conf
}

/// Who smbclient logs in as.
#[derive(Debug, Clone)]
pub enum Credentials {
    /// `-U NAME%PASSWORD`.
    User(String, String),
    /// `-N`: no password, an anonymous login.
    Anonymous,
}

/// `--client-protection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Not given: smbclient's default.
    Default,
    /// `sign`: every message after session setup signed; fails when the server does not sign.
    Sign,
    /// `off`: the client does not ask for signing.
    Off,
    /// `encrypt`, restricted to one cipher (`client smb3 encryption algorithms`) unless
    /// empty: fails when the server cannot encrypt.
    Encrypt(&'static str),
}

/// One smbclient invocation being put together.
pub struct Smbclient<'a> {
    server: &'a Server,
    share: String,
    credentials: Credentials,
    dialect: Option<&'static str>,
    protection: Protection,
    debug_level: u8,
    timeout: Duration,
}

impl Smbclient<'_> {
    /// Log in as `user` with `password`.
    /// Connect to this share of the server instead of its default one.
    pub fn share_name(mut self, share: &str) -> Self {
        self.share = share.to_string();
        self
    }

    pub fn user(mut self, user: &str, password: &str) -> Self {
        self.credentials = Credentials::User(user.to_string(), password.to_string());
        self
    }

    /// Log in anonymously (`-N`).
    pub fn anonymous(mut self) -> Self {
        self.credentials = Credentials::Anonymous;
        self
    }

    /// Pin the dialect: `-m D` and `client min protocol = D`, so that only D can be negotiated.
    pub fn dialect(mut self, dialect: &'static str) -> Self {
        self.dialect = Some(dialect);
        self
    }

    /// `--client-protection`.
    pub fn protection(mut self, protection: Protection) -> Self {
        self.protection = protection;
        self
    }

    /// `-d N`; level 5 prints the negotiated dialect and each signed message.
    pub fn debug_level(mut self, level: u8) -> Self {
        self.debug_level = level;
        self
    }

    /// Limit for this run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs `smbclient //127.0.0.1/SHARE -c CMDS` (or `smbclient -L 127.0.0.1` when `cmds` is
    /// empty) in the server's scratch directory (relative
    /// local paths in `get`/`put` are there). Panics when it runs longer than the timeout.
    pub fn run(self, cmds: &str) -> SmbOutput {
        let (mut child, args, out_path, err_path) = self.spawn_child(cmds, Mode::Run);
        let Some(status) = wait_within(&mut child, self.timeout) else {
            panic!(
                "smbclient {args:?} ran longer than {:?}\nstdout:\n{}\nstderr:\n{}\n\
                 --- server log ---\n{}",
                self.timeout,
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                std::fs::read_to_string(&err_path).unwrap_or_default(),
                self.server.log()
            );
        };
        let read =
            |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
        let output = SmbOutput {
            args,
            status,
            stdout: read(&out_path),
            stderr: read(&err_path),
        };
        let _ = std::fs::remove_file(&out_path);
        let _ = std::fs::remove_file(&err_path);
        output
    }

    /// Start `smbclient -c CMDS` and leave it running (a command that does not
    /// end by itself, like `notify`); killed when the result is dropped.
    pub fn spawn(self, cmds: &str) -> RunningSmbclient {
        let (child, _, out, _) = self.spawn_child(cmds, Mode::Spawn);
        RunningSmbclient {
            child,
            out,
            stdin: None,
        }
    }

    /// Start smbclient on the share reading its commands from standard input
    /// ([`RunningSmbclient::send`]): one session the test drives step by step.
    pub fn spawn_reading_stdin(self) -> RunningSmbclient {
        let (mut child, _, out, _) = self.spawn_child("", Mode::Stdin);
        let stdin = child.stdin.take();
        RunningSmbclient { child, out, stdin }
    }

    /// `Spawn` and `Stdin`: its output is written line by line (through
    /// coreutils' `stdbuf`), for reading while it runs.
    fn spawn_child(&self, cmds: &str, mode: Mode) -> (Child, Vec<String>, PathBuf, PathBuf) {
        let line_buffered = mode != Mode::Run;
        let n = self.server.runs.fetch_add(1, Ordering::Relaxed);
        let out_path = self.server.tmp.path().join(format!("smbclient-{n}.out"));
        let err_path = self.server.tmp.path().join(format!("smbclient-{n}.err"));
        let mut cmd = if line_buffered {
            let mut c = Command::new("stdbuf");
            c.arg("-oL").arg("smbclient");
            c
        } else {
            Command::new("smbclient")
        };
        if cmds.is_empty() && mode != Mode::Stdin {
            // No commands: list the server's shares (`-L`).
            cmd.arg("-L").arg("127.0.0.1");
        } else {
            cmd.arg(format!("//127.0.0.1/{}", self.share));
        }
        cmd.arg("-s")
            .arg(&self.server.client_conf)
            .arg("-p")
            .arg(self.server.port.to_string())
            .arg("-d")
            .arg(self.debug_level.to_string())
            .arg("-t")
            .arg(self.timeout.as_secs().max(1).to_string());
        // NTLM only: no Kerberos attempt, whose failure prints an NT_STATUS_ at debug level 5.
        cmd.arg("--use-kerberos=off");
        match &self.credentials {
            Credentials::User(user, password) => {
                cmd.arg("-U").arg(format!("{user}%{password}"));
            }
            Credentials::Anonymous => {
                cmd.arg("-N");
            }
        }
        if let Some(d) = self.dialect {
            cmd.arg("-m")
                .arg(d)
                .arg(format!("--option=client min protocol={d}"));
        }
        match self.protection {
            Protection::Default => {}
            Protection::Sign => {
                cmd.arg("--client-protection=sign");
            }
            Protection::Off => {
                cmd.arg("--client-protection=off");
            }
            Protection::Encrypt(cipher) => {
                cmd.arg("--client-protection=encrypt");
                if !cipher.is_empty() {
                    cmd.arg(format!(
                        "--option=client smb3 encryption algorithms={cipher}"
                    ));
                }
            }
        }
        if !cmds.is_empty() {
            cmd.arg("-c").arg(cmds);
        }
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let out = File::create(&out_path).expect("smbclient stdout file");
        // Driven step by step, its messages (`getting file`… go to stderr)
        // are read with its output, in one file.
        let err = if mode == Mode::Stdin {
            out.try_clone()
        } else {
            File::create(&err_path)
        };
        let child = cmd
            .current_dir(&self.server.scratch)
            .env("HOME", self.server.tmp.path())
            .stdin(if mode == Mode::Stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(out)
            .stderr(err.expect("smbclient stderr file"))
            .spawn()
            .expect("spawn smbclient");
        (child, args, out_path, err_path)
    }
}

/// How smbclient is started.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `-c CMDS` (or `-L`), waited for.
    Run,
    /// `-c CMDS`, left running.
    Spawn,
    /// Commands from standard input, left running.
    Stdin,
}

/// An smbclient left running by [`Smbclient::spawn`] or
/// [`Smbclient::spawn_reading_stdin`].
pub struct RunningSmbclient {
    child: Child,
    out: PathBuf,
    stdin: Option<std::process::ChildStdin>,
}

impl RunningSmbclient {
    /// Give it one command line (started with [`Smbclient::spawn_reading_stdin`]).
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("started reading standard input");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("write to smbclient");
    }

    /// Close its standard input (it then ends) and wait for it at most
    /// `limit`: how it exited, `None` when it did not.
    pub fn finish(&mut self, limit: Duration) -> Option<ExitStatus> {
        self.stdin = None;
        wait_within(&mut self.child, limit)
    }

    /// Wait until its output contains `needle` (true), or `limit` passed (false).
    pub fn wait_for(&self, needle: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.output().contains(needle) {
                return true;
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// What it printed so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.out).unwrap_or_default()).into_owned()
    }
}

impl Drop for RunningSmbclient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one smbclient run printed.
pub struct SmbOutput {
    /// Its arguments, for messages.
    pub args: Vec<String>,
    /// How it exited.
    pub status: ExitStatus,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// smbclient 4.22's `allinfo` asks for the file's snapshots (FSCTL_SRV_ENUMERATE_SNAPSHOTS) and,
/// on a share without them, prints `NT_STATUS_INVALID_DEVICE_REQUEST` and this on standard error
/// and goes on (4.17 said nothing); Samba without `vfs objects = shadow_copy2` answers so, as
/// ringshare does.
pub const SNAPSHOT_QUERY_LINE: &str = " getting shadow copy data for ";

impl SmbOutput {
    /// Standard output and standard error together.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// The first `NT_STATUS_...` word printed, if any. smbclient can exit 0 after a failed
    /// command, so this, not the exit code, says whether a command failed. The line smbclient
    /// 4.22's `allinfo` prints for a share without Previous Versions is not a failure
    /// ([`SNAPSHOT_QUERY_LINE`]).
    pub fn nt_status(&self) -> Option<String> {
        let all: String = self
            .all()
            .lines()
            .filter(|l| !l.contains(SNAPSHOT_QUERY_LINE))
            .collect::<Vec<_>>()
            .join("\n");
        let at = all.find("NT_STATUS_")?;
        let word: String = all[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        Some(word)
    }

    /// Panics (with `step` and everything printed) unless the run exited 0 and printed no
    /// NT_STATUS_ error.
    pub fn expect_ok(&self, step: &str) -> &Self {
        assert!(
            self.status.success() && self.nt_status().is_none(),
            "{step}: smbclient failed ({}, {:?})\n{self}",
            self.status,
            self.nt_status()
        );
        self
    }

    /// Like [`SmbOutput::expect_ok`], but lines that start with one of `allowed` do not count as
    /// failures (for an error the protocol documents as a normal answer).
    pub fn expect_ok_allowing(&self, step: &str, allowed: &[&str]) -> &Self {
        let failed: Vec<&str> = self
            .stdout
            .lines()
            .chain(self.stderr.lines())
            .filter(|l| l.contains("NT_STATUS_") && !l.contains(SNAPSHOT_QUERY_LINE))
            .filter(|l| !allowed.iter().any(|a| l.starts_with(a)))
            .collect();
        assert!(
            self.status.success() && failed.is_empty(),
            "{step}: smbclient failed ({}, {failed:?})\n{self}",
            self.status
        );
        self
    }

    /// Panics unless the output names `status` (e.g. "NT_STATUS_LOGON_FAILURE").
    pub fn expect_status(&self, step: &str, status: &str) -> &Self {
        assert!(
            self.all().contains(status),
            "{step}: expected {status}, got {:?}\n{self}",
            self.nt_status()
        );
        self
    }

    /// Panics unless the output contains `needle`.
    pub fn expect_contains(&self, step: &str, needle: &str) -> &Self {
        assert!(
            self.all().contains(needle),
            "{step}: expected output to contain {needle:?}\n{self}"
        );
        self
    }
}

impl fmt::Display for SmbOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--- smbclient {:?} ({}) ---\nstdout:\n{}\nstderr:\n{}",
            self.args, self.status, self.stdout, self.stderr
        )
    }
}

/// `ringshare bench` on `share` with `credentials` (USER%PASS): (success, stdout + stderr).
pub fn bench_as(server: &Server, share: &str, credentials: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ringshare"))
        .arg("bench")
        .arg(format!("//127.0.0.1:{}/{share}", server.port))
        .arg("-U")
        .arg(credentials)
        .args(args)
        .output()
        .expect("run ringshare bench");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// `ringshare bench` on [`SHARE`] as [`USER`]: (success, stdout + stderr).
pub fn bench(server: &Server, args: &[&str]) -> (bool, String) {
    bench_as(server, SHARE, &format!("{USER}%{PASSWORD}"), args)
}
