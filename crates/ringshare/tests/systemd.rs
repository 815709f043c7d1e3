//! Running under systemd: readiness and stop notifications (`Type=notify`), log lines the
//! journal files under their level, and `log level` with Samba's meaning. systemd itself is
//! stood in for by what it hands the server: a notification socket in `NOTIFY_SOCKET`, and a
//! `JOURNAL_STREAM` naming the server's standard error.

mod common;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{free_port, ringshare_bin, wait_within, TempDir};
use rustix::process::{kill_process, Pid, Signal};

/// systemd's side of the notification protocol: a datagram socket in a private directory.
struct NotifySocket {
    sock: UnixDatagram,
    path: PathBuf,
}

impl NotifySocket {
    fn bind(dir: &Path) -> NotifySocket {
        let path = dir.join("notify.sock");
        let sock = UnixDatagram::bind(&path).expect("bind the notification socket");
        NotifySocket { sock, path }
    }

    /// The next message, or None when none comes within `limit`.
    fn next(&self, limit: Duration) -> Option<String> {
        self.sock.set_read_timeout(Some(limit)).unwrap();
        let mut buf = [0u8; 4096];
        let n = self.sock.recv(&mut buf).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }
}

/// A configuration with one share, listening on 127.0.0.1:`port`.
fn write_config(dir: &Path, port: u16) -> PathBuf {
    let share = dir.join("share");
    std::fs::create_dir_all(&share).unwrap();
    let conf = dir.join("smb.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nlisten = 127.0.0.1:{port}\nsmb passwd file = {}\nlog level = 1\n\
             multicast dns register = no\ncontrol socket = {}\n[share]\npath = {}\nread only = no\n",
            dir.join("smbpasswd").display(),
            dir.join("control.sock").display(),
            share.display()
        ),
    )
    .unwrap();
    conf
}

fn serve_notifying(conf: &Path, notify: &NotifySocket, log: &Path) -> Child {
    let out = std::fs::File::create(log).unwrap();
    Command::new(ringshare_bin())
        .args(["serve", "--threads", "1", "--config"])
        .arg(conf)
        .env("NOTIFY_SOCKET", &notify.path)
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn ringshare serve")
}

fn stop(child: &mut Child) {
    let _ = kill_process(Pid::from_child(child), Signal::TERM);
    wait_within(child, common::STOP_GRACE);
}

#[test]
fn the_server_tells_systemd_it_is_ready_after_binding_and_when_stopping() {
    let tmp = TempDir::new("sd-notify");
    let notify = NotifySocket::bind(tmp.path());

    // Not ready before its sockets listen: a server that cannot bind its port never says so.
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let conf = write_config(tmp.path(), taken.local_addr().unwrap().port());
    let log = tmp.path().join("busy.log");
    let mut child = serve_notifying(&conf, &notify, &log);
    let status = wait_within(&mut child, Duration::from_secs(20));
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}\n{output}");
    assert!(output.contains("cannot listen on"), "{output}");
    assert_eq!(notify.next(Duration::from_millis(200)), None);
    drop(taken);

    let port = free_port();
    let conf = write_config(tmp.path(), port);
    let log = tmp.path().join("serve.log");
    let mut child = serve_notifying(&conf, &notify, &log);

    let ready = notify.next(Duration::from_secs(20));
    let Some(ready) = ready else {
        stop(&mut child);
        panic!(
            "no READY=1 within 20 s; server output:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(
        ready
            .lines()
            .any(|l| l.starts_with("STATUS=serving 1 share(s) on 127.0.0.1:")),
        "{ready:?}"
    );
    // Ready means listening: a client connecting right now gets in.
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let connected = TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    assert!(
        connected.is_ok(),
        "READY=1 came before the port listened: {connected:?}"
    );
    drop(connected);

    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let stopping = notify.next(Duration::from_secs(10));
    let status = wait_within(&mut child, Duration::from_secs(10));
    assert!(
        stopping
            .as_deref()
            .is_some_and(|m| m.lines().any(|l| l == "STOPPING=1")),
        "after SIGTERM: {stopping:?}"
    );
    assert!(
        status.is_some_and(|s| s.success()),
        "exit after SIGTERM: {status:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(notify.next(Duration::from_millis(200)), None);
}

#[test]
fn a_configured_server_without_users_makes_none_and_says_how_to_add_one() {
    // Its output goes to the journal under systemd: no password may be printed there.
    let tmp = TempDir::new("sd-nousers");
    let notify = NotifySocket::bind(tmp.path());
    let conf = write_config(tmp.path(), free_port());
    let log = tmp.path().join("serve.log");
    let mut child = serve_notifying(&conf, &notify, &log);
    let ready = notify.next(Duration::from_secs(20));
    stop(&mut child);
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(ready.is_some_and(|m| m.contains("READY=1")), "{output}");
    assert!(!output.contains("created user"), "{output}");
    assert!(
        output.contains("no users in") && output.contains("ringshare user add NAME --config"),
        "{output}"
    );
    let passwd = std::fs::read_to_string(tmp.path().join("smbpasswd")).unwrap_or_default();
    assert!(passwd.trim().is_empty(), "a user was made: {passwd}");
}

#[test]
fn a_reload_tells_systemd_it_is_reloading_then_ready_again() {
    let tmp = TempDir::new("sd-reload");
    let notify = NotifySocket::bind(tmp.path());
    let conf = write_config(tmp.path(), free_port());
    let log = tmp.path().join("serve.log");
    let mut child = serve_notifying(&conf, &notify, &log);
    let ready = notify.next(Duration::from_secs(20));
    assert!(
        ready.as_deref().is_some_and(|m| m.contains("READY=1")),
        "{ready:?}\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    kill_process(Pid::from_child(&child), Signal::HUP).unwrap();
    let reloading = notify.next(Duration::from_secs(10)).unwrap_or_default();
    let again = notify.next(Duration::from_secs(10)).unwrap_or_default();
    stop(&mut child);
    assert!(
        reloading.lines().any(|l| l == "RELOADING=1")
            && reloading.lines().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading:?}"
    );
    assert!(
        again.lines().any(|l| l == "READY=1")
            && again.contains("STATUS=serving; configuration reloaded"),
        "{again:?}"
    );
}

/// Runs `serve --config` on a configuration that stops start-up right after its warnings (no
/// share), with `log level` `level`, stderr going to a file, and `JOURNAL_STREAM` set to what
/// `journal_stream` makes of that file's metadata (None: unset). Returns stderr.
fn stderr_of_a_failed_start(
    level: u32,
    journal_stream: impl Fn(&std::fs::Metadata) -> Option<String>,
) -> String {
    let tmp = TempDir::new("sd-journal");
    let conf = tmp.path().join("smb.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nfrobnicate = yes\nlog level = {level}\nsmb passwd file = {}\n",
            tmp.path().join("smbpasswd").display()
        ),
    )
    .unwrap();
    let err_path = tmp.path().join("stderr");
    let err = std::fs::File::create(&err_path).unwrap();
    let mut cmd = Command::new(ringshare_bin());
    cmd.args(["serve", "--config"])
        .arg(&conf)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("RINGSHARE_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Some(v) = journal_stream(&err.metadata().unwrap()) {
        cmd.env("JOURNAL_STREAM", v);
    }
    let mut child = cmd.stderr(err).spawn().unwrap();
    let status = wait_within(&mut child, Duration::from_secs(20));
    let text = std::fs::read_to_string(&err_path).unwrap();
    assert!(status.is_some_and(|s| !s.success()), "{status:?}: {text}");
    assert!(text.contains("no shares configured"), "{text}");
    text
}

fn dev_ino(m: &std::fs::Metadata) -> Option<String> {
    Some(format!("{}:{}", m.dev(), m.ino()))
}

#[test]
fn under_the_journal_each_log_line_starts_with_its_syslog_priority() {
    let text = stderr_of_a_failed_start(1, dev_ino);
    let warning = text
        .lines()
        .find(|l| l.contains("unknown option 'frobnicate' ignored"))
        .unwrap_or_else(|| panic!("no warning in {text:?}"));
    assert!(warning.starts_with("<4>WARN "), "{warning:?}");
    let info = text
        .lines()
        .find(|l| l.contains("open-file limit"))
        .unwrap_or_else(|| panic!("no info line in {text:?}"));
    assert!(info.starts_with("<6>INFO "), "{info:?}");
    // The error that stops the server is one too.
    assert!(
        text.lines()
            .any(|l| l == "<3>ringshare: no shares configured"),
        "{text:?}"
    );

    // JOURNAL_STREAM inherited by a program whose stderr goes elsewhere (here: off by one
    // inode), and no JOURNAL_STREAM at all: plain lines.
    let other = |m: &std::fs::Metadata| Some(format!("{}:{}", m.dev(), m.ino() + 1));
    for text in [
        stderr_of_a_failed_start(1, other),
        stderr_of_a_failed_start(1, |_| None),
    ] {
        let warning = text
            .lines()
            .find(|l| l.contains("unknown option 'frobnicate' ignored"))
            .unwrap_or_else(|| panic!("no warning in {text:?}"));
        assert!(!warning.starts_with('<'), "{warning:?}");
        assert!(warning.contains("WARN"), "{warning:?}");
        assert!(
            text.lines().any(|l| l == "ringshare: no shares configured"),
            "{text:?}"
        );
    }
}

#[test]
fn log_level_0_logs_only_errors_and_warnings_as_in_samba_and_1_adds_notable_events() {
    let quiet = stderr_of_a_failed_start(0, dev_ino);
    assert!(
        quiet.contains("<4>WARN ") && quiet.contains("frobnicate"),
        "{quiet:?}"
    );
    assert!(
        !quiet.contains("<6>"),
        "info lines at log level 0: {quiet:?}"
    );
    let day_to_day = stderr_of_a_failed_start(1, dev_ino);
    assert!(day_to_day.contains("<6>INFO "), "{day_to_day:?}");
    assert!(
        !day_to_day.contains("<7>"),
        "debug lines at log level 1: {day_to_day:?}"
    );
}

/// `serve` on 127.0.0.1:`port` (its files in `dir`, `extra` added to `[global]`) until it exits
/// (20 s at most): its exit status and what it printed.
fn serve_until_exit(
    dir: &Path,
    port: u16,
    extra: &str,
) -> (Option<std::process::ExitStatus>, String) {
    std::fs::create_dir_all(dir).unwrap();
    let conf = write_config(dir, port);
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        text.replacen("[global]\n", &format!("[global]\n{extra}"), 1),
    )
    .unwrap();
    let notify = NotifySocket::bind(dir);
    let log = dir.join("serve.log");
    let mut child = serve_notifying(&conf, &notify, &log);
    let status = wait_within(&mut child, Duration::from_secs(20));
    if status.is_none() {
        stop(&mut child);
    }
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn a_server_does_not_start_on_a_port_another_server_listens_on_and_says_so() {
    use ringshare_engine::net;
    let tmp = TempDir::new("port-taken");
    // Another server's listener, as a ringshare's is (SO_REUSEPORT, this user): a second
    // listener with SO_REUSEPORT would join it and share its clients.
    let other = net::listen_reuseport(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 16).unwrap();
    let port = net::local_addr(&other).unwrap().port();
    let (status, output) = serve_until_exit(&tmp.path().join("tcp"), port, "");
    assert!(status.is_some_and(|s| !s.success()), "{status:?}\n{output}");
    assert!(
        output.contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && output.contains("listens there already"),
        "{output}"
    );
    drop(other);

    // The same for SMB over QUIC's UDP port.
    let port = free_port();
    let udp = net::udp_bind_reuseport(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).unwrap();
    let quic = format!("server smb transports = tcp, quic:{port}\n");
    let (status, output) = serve_until_exit(&tmp.path().join("udp"), port, &quic);
    assert!(status.is_some_and(|s| !s.success()), "{status:?}\n{output}");
    assert!(
        output.contains("cannot listen for QUIC") && output.contains("listens there already"),
        "{output}"
    );
    drop(udp);
}
