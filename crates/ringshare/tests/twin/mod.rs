//! Two servers configured alike: ringshare and Debian's Samba `smbd`, each serving the same share
//! sections for the same Unix accounts, so that a test asks both the same questions and compares
//! the answers. Root only (accounts are made with useradd, removed on drop).
//!
//! A server runs either on a free loopback port, or (`Net::Own`) in a network namespace of its
//! own (`unshare -n`) on port 445, for the Samba tools that cannot be told another port
//! (`smbcacls`); commands then run inside it through `nsenter`.
#![allow(dead_code)] // each test file uses a different part of this module

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, ringshare_bin, ACCOUNT_CHANGES};

/// The password every account gets on both servers.
pub const PASS: &str = "Twin-Pass-1";

pub fn run(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn must(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Root and the tools, or a loud skip (a failure under `CI`).
pub fn root_and_tools_or_skip(test: &str, tools: &[&str]) -> bool {
    let root = rustix::process::geteuid().is_root();
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| !run("which", &[t]))
        .collect();
    if root && missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs root and {missing:?} (Debian samba, smbclient, acl)"
    );
    eprintln!("\n!!!!!!!! SKIPPED {test}: needs root and {missing:?} !!!!!!!!\n");
    false
}

/// Unix accounts and groups of a test, removed on drop.
pub struct Accounts {
    users: Vec<String>,
    groups: Vec<String>,
}

impl Accounts {
    /// `groups` first, then each user (with its own group and `member_of`, home `homes/NAME`,
    /// 0700, when `homes` is given).
    pub fn create(groups: &[&str], users: &[(&str, &[&str])], homes: Option<&Path>) -> Accounts {
        let a = Accounts {
            users: users.iter().map(|(u, _)| u.to_string()).collect(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
        let _changing = ACCOUNT_CHANGES.lock().unwrap_or_else(|p| p.into_inner());
        a.remove_now();
        for g in groups {
            must("groupadd", &[g]);
        }
        for (name, member_of) in users {
            let home = homes.map(|h| h.join(name).display().to_string());
            let mut args = vec!["-M", "-U", "-s", "/usr/sbin/nologin"];
            if let Some(h) = &home {
                args.extend(["-d", h.as_str()]);
            }
            let joined = member_of.join(",");
            if !member_of.is_empty() {
                args.extend(["-G", joined.as_str()]);
            }
            args.push(name);
            must("useradd", &args);
            if let Some(h) = &home {
                fs::create_dir_all(h).unwrap();
                must("chown", &[&format!("{name}:{name}"), h]);
                fs::set_permissions(h, fs::Permissions::from_mode(0o700)).unwrap();
            }
        }
        a
    }

    fn remove(&self) {
        let _changing = ACCOUNT_CHANGES.lock().unwrap_or_else(|p| p.into_inner());
        self.remove_now();
    }

    /// [`Accounts::remove`] with [`ACCOUNT_CHANGES`] held by the caller.
    fn remove_now(&self) {
        for u in &self.users {
            run("userdel", &[u]);
        }
        for g in &self.groups {
            run("groupdel", &[g]);
        }
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        self.remove();
    }
}

pub fn uid(name: &str) -> u32 {
    nix::unistd::User::from_name(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no account {name}"))
        .uid
        .as_raw()
}

pub fn gid(name: &str) -> u32 {
    nix::unistd::Group::from_name(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no group {name}"))
        .gid
        .as_raw()
}

/// A file (holding "secret") or directory made as root with an owner, group and mode.
pub fn make(path: &Path, owner: &str, group: &str, mode: u32, dir: bool) {
    if dir {
        fs::create_dir_all(path).unwrap();
    } else {
        fs::write(path, b"secret\n").unwrap();
    }
    std::os::unix::fs::chown(path, Some(uid(owner)), Some(gid(group))).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// `TMP/KIND` (`samba` or `ringshare`), made searchable by everyone: where one server's tree is.
pub fn server_root(tmp: &Path, kind: &str) -> PathBuf {
    let root = tmp.join(kind);
    fs::create_dir_all(&root).unwrap();
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// `owner:group mode` of a path on disk.
pub fn who_owns(path: &Path) -> String {
    let m = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let user = nix::unistd::User::from_uid(m.uid().into())
        .ok()
        .flatten()
        .map_or(m.uid().to_string(), |u| u.name);
    let group = nix::unistd::Group::from_gid(m.gid().into())
        .ok()
        .flatten()
        .map_or(m.gid().to_string(), |g| g.name);
    format!("{user}:{group} {:o}", m.mode() & 0o7777)
}

/// `getfacl` of a path, numeric, without the file name line.
pub fn getfacl(path: &Path) -> String {
    let out = Command::new("getfacl")
        .args(["-n", "-p"])
        .arg(path)
        .output()
        .expect("getfacl");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("# file:") && !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where a server listens.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Net {
    /// A free port on the host's loopback.
    Loopback,
    /// Port 445 in a network namespace of its own.
    Own,
}

/// A running server of either kind, stopped on drop.
pub struct Running {
    pub name: &'static str,
    pub port: u16,
    pub net: Net,
    child: Child,
    pub log: PathBuf,
    /// Samba only: its smb.conf (for pdbedit).
    pub conf: PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.child);
        // smbd forks a child per connection: end the whole group.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        let _ = self.child.kill();
        let _ = self.child.wait();
        end_rpc_helpers(&self.conf);
    }
}

/// Samba 4.22's smbd starts its RPC helpers (samba-dcerpcd and the rpcd_* it runs) on demand,
/// in a session of their own: ending smbd's group leaves them running. Ends every process
/// started with `--configfile=CONF`.
fn end_rpc_helpers(conf: &Path) {
    let arg = format!("--configfile={}", conf.display());
    let Ok(procs) = fs::read_dir("/proc") else {
        return;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = fs::read(p.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
    }
}

impl Running {
    /// `cmd args` run where the server's network is.
    pub fn command(&self, cmd: &str) -> Command {
        match self.net {
            Net::Loopback => Command::new(cmd),
            Net::Own => {
                let mut c = Command::new("nsenter");
                c.args(["-t", &self.child.id().to_string(), "-n", cmd]);
                c
            }
        }
    }

    fn wait(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!(
                    "{} exited with {s}: {}",
                    self.name,
                    fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            let up = self
                .command("bash")
                .args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{}", self.port)])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if up {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{}: nothing listens on port {}", self.name, self.port);
    }

    /// `smbclient //127.0.0.1/SHARE -U USER%PASS -c CMDS`: `OK` or the NT status it printed.
    pub fn smbclient(&self, user: &str, share: &str, cmds: &str, client_conf: &Path) -> String {
        let out = self
            .command("smbclient")
            .arg(format!("//127.0.0.1/{share}"))
            .args(["-s", client_conf.to_str().unwrap(), "-p"])
            .arg(self.port.to_string())
            .args(["--use-kerberos=off", "-t", "30", "-U"])
            .arg(format!("{user}%{PASS}"))
            .args(["-c", cmds])
            .output()
            .expect("run smbclient");
        status_of(&out)
    }

    /// `smbcacls //127.0.0.1/SHARE FILE ARGS --numeric` as `user` (needs `Net::Own`).
    pub fn smbcacls(&self, user: &str, share: &str, file: &str, args: &[&str]) -> Output {
        assert!(self.net == Net::Own, "smbcacls reaches only port 445");
        self.command("smbcacls")
            .arg(format!("//127.0.0.1/{share}"))
            .arg(file)
            .args(["--use-kerberos=off", "--numeric", "-U"])
            .arg(format!("{user}%{PASS}"))
            .args(args)
            .output()
            .expect("run smbcacls")
    }
}

/// `OK`, or the first NT status a Samba tool printed.
pub fn status_of(out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match text
        .split_whitespace()
        .find(|w| w.starts_with("NT_STATUS_"))
    {
        Some(status) => status
            .trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .to_string(),
        None if out.status.success() => "OK".to_string(),
        None => format!("exit {}", out.status),
    }
}

thread_local! {
    /// Environment variables the servers this thread starts get ([`with_server_env`]).
    static SERVER_ENV: std::cell::RefCell<Vec<(String, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with `env` set for every server it starts (e.g. `TZ`, which both servers read
/// for `shadow:localtime`), without changing the test process's own environment.
pub fn with_server_env<T>(env: &[(&str, &str)], f: impl FnOnce() -> T) -> T {
    let set = env.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    SERVER_ENV.with(|e| *e.borrow_mut() = set.collect());
    let out = f();
    SERVER_ENV.with(|e| e.borrow_mut().clear());
    out
}

fn spawn(net: Net, program: &str, args: &[&str], log: &Path) -> Child {
    let out = fs::File::create(log).unwrap();
    let mut c = match net {
        Net::Loopback => {
            let mut c = Command::new(program);
            c.args(args);
            c
        }
        Net::Own => {
            let mut c = Command::new("unshare");
            c.args([
                "-n",
                "sh",
                "-c",
                "ip link set lo up && exec \"$0\" \"$@\"",
                program,
            ]);
            c.args(args);
            c
        }
    };
    SERVER_ENV.with(|e| c.envs(e.borrow().iter().map(|(k, v)| (k, v))));
    c.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn feed_passwords(mut cmd: Command, what: &str) {
    let mut c = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    c.stdin
        .as_mut()
        .unwrap()
        .write_all(format!("{PASS}\n{PASS}\n").as_bytes())
        .unwrap();
    assert!(c.wait().unwrap().success(), "{what}");
}

/// `ringshare serve --config` with `global` lines and `shares` sections, `users` added.
pub fn start_ringshare(
    base: &Path,
    net: Net,
    global: &str,
    shares: &str,
    users: &[&str],
) -> Running {
    fs::create_dir_all(base).unwrap();
    let port = if net == Net::Own { 445 } else { free_port() };
    let conf = base.join("ringshare.conf");
    fs::write(
        &conf,
        format!(
            "[global]\n\tlisten = 127.0.0.1:{port}\n\tsmb passwd file = {}/smbpasswd\n\
             \tlog level = 1\n{global}\n{shares}",
            base.display(),
        ),
    )
    .unwrap();
    for user in users {
        let mut c = Command::new(ringshare_bin());
        c.args(["user", "add", user, "--password-stdin", "--config"])
            .arg(&conf);
        feed_passwords(c, &format!("ringshare user add {user}"));
    }
    let log = base.join("serve.log");
    let conf_s = conf.display().to_string();
    let child = spawn(net, ringshare_bin(), &["serve", "--config", &conf_s], &log);
    let mut r = Running {
        name: "ringshare",
        port,
        net,
        child,
        log,
        conf,
    };
    r.wait();
    r
}

/// A private `smbd` with `global` lines and `shares` sections, `users` in its own passdb.
pub fn start_samba(base: &Path, net: Net, global: &str, shares: &str, users: &[&str]) -> Running {
    let port = if net == Net::Own { 445 } else { free_port() };
    for d in [
        "private", "lock", "state", "cache", "pid", "ncalrpc", "log", "bind-dns",
    ] {
        fs::create_dir_all(base.join(d)).unwrap();
    }
    let b = base.display();
    let conf = base.join("smb.conf");
    fs::write(
        &conf,
        format!(
            "[global]\n\tnetbios name = RSTWIN\n\tserver role = standalone server\n\
             \tsecurity = user\n\
             \tpassdb backend = tdbsam:{b}/private/passdb.tdb\n\tprivate dir = {b}/private\n\
             \tlock directory = {b}/lock\n\tstate directory = {b}/state\n\
             \tcache directory = {b}/cache\n\tpid directory = {b}/pid\n\
             \tncalrpc dir = {b}/ncalrpc\n\tbinddns dir = {b}/bind-dns\n\
             \tlog file = {b}/log/log.smbd\n\tlog level = 1\n\tsmb ports = {port}\n\
             \tinterfaces = 127.0.0.1\n\tbind interfaces only = yes\n\tdisable netbios = yes\n\
             \tload printers = no\n\tprinting = bsd\n\tprintcap name = /dev/null\n\
             \tdisable spoolss = yes\n\tusershare path =\n{global}\n{shares}",
        ),
    )
    .unwrap();
    for user in users {
        let mut c = Command::new("smbpasswd");
        c.args(["-c", conf.to_str().unwrap(), "-a", "-s", user]);
        feed_passwords(c, &format!("smbpasswd -a {user}"));
    }
    let log = base.join("log/smbd.stdout");
    let conf_s = conf.display().to_string();
    let child = spawn(
        net,
        "smbd",
        &[
            "--foreground",
            "--no-process-group",
            "--configfile",
            &conf_s,
        ],
        &log,
    );
    let mut r = Running {
        name: "samba",
        port,
        net,
        child,
        log,
        conf,
    };
    r.wait();
    r
}

/// The SID Samba's passdb gives `user` (Samba shows its own accounts by these, not by
/// S-1-22-1-uid as ringshare does).
pub fn samba_sid(samba: &Running, user: &str) -> Option<String> {
    let out = Command::new("pdbedit")
        .args(["-s", samba.conf.to_str().unwrap(), "-v", "-u", user])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("User SID:").map(|s| s.trim().to_string()))
}

/// A private client configuration, so that /etc/samba/smb.conf does not matter.
pub fn client_conf(dir: &Path) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    let p = dir.join("client.conf");
    fs::write(
        &p,
        format!(
            "[global]\n\tclient min protocol = SMB2_02\n\tlock directory = {0}\n\
             \tstate directory = {0}\n\tcache directory = {0}\n\tprivate dir = {0}\n",
            dir.display()
        ),
    )
    .unwrap();
    p
}

/// A btrfs file system on a loop device, mounted; unmounted and detached on drop.
pub struct Btrfs {
    pub mnt: PathBuf,
    dev: String,
}

impl Btrfs {
    pub fn new(dir: &Path) -> Btrfs {
        let img = dir.join("img");
        must("truncate", &["-s", "256M", img.to_str().unwrap()]);
        must("mkfs.btrfs", &["-q", img.to_str().unwrap()]);
        let out = Command::new("losetup")
            .args(["-f", "--show", img.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup: {out:?}");
        let dev = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mnt = dir.join("mnt");
        fs::create_dir_all(&mnt).unwrap();
        let b = Btrfs { mnt, dev };
        must("mount", &[&b.dev, b.mnt.to_str().unwrap()]);
        b
    }
}

impl Drop for Btrfs {
    fn drop(&mut self) {
        run("umount", &[self.mnt.to_str().unwrap()]);
        run("losetup", &["-d", &self.dev]);
    }
}
