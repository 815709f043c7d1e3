//! What an administrator does to a running server: `ringshare status`
//! (who has what open) and `ringshare reload` / SIGHUP (shares and users
//! changed without a restart), against the real binary with Debian's
//! smbclient and python's smbprotocol as clients.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::py::{python, script, skipped};
use common::{ringshare_bin, smbclient_or_skip, Server, ServerConfig, PASSWORD, USER};
use rustix::process::{kill_process, Pid, Signal};

/// `ringshare ARGS…`, waited for.
fn ringshare(args: &[&str]) -> Output {
    Command::new(ringshare_bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ringshare")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn status_json(server: &Server) -> serde_json::Value {
    let socket = server.control_socket();
    let o = ringshare(&["status", "--json", "--socket", socket.to_str().unwrap()]);
    assert!(o.status.success(), "ringshare status --json: {}", text(&o));
    serde_json::from_slice(&o.stdout).expect("status --json prints JSON")
}

/// Wait until `cond` holds, at most `limit`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    cond()
}

/// `ringshare reload` through the server's control socket, which must succeed: its summary.
fn reload_ok(server: &Server) -> String {
    let socket = server.control_socket();
    let o = ringshare(&["reload", "--socket", socket.to_str().unwrap()]);
    assert!(o.status.success(), "reload: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn sighup(server: &Server) {
    let pid = Pid::from_raw(server.pid().expect("server runs") as i32).unwrap();
    kill_process(pid, Signal::HUP).expect("send SIGHUP");
}

#[test]
fn status_lists_a_smbclient_session_and_a_python_clients_open_file_with_its_lease_and_lock() {
    let test = "status lists sessions and open files";
    if !smbclient_or_skip(test) || skipped(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |_| {});
    let mut sc = server.client().spawn_reading_stdin();
    sc.send("ls");
    assert!(
        sc.wait_for("blocks available", Duration::from_secs(20)),
        "smbclient did not list the share: {}",
        sc.output()
    );
    let key = "00112233445566778899aabbccddeeff";
    let mut py = Command::new(python())
        .arg(script("smbprotocol_hold.py"))
        .args(["--port", &server.port.to_string()])
        .args(["--user", USER, "--password", PASSWORD])
        .args(["--share", &server.share, "--name", "held.txt"])
        .args(["--lease-key", key])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start python");
    let mut lines = BufReader::new(py.stdout.take().unwrap()).lines();
    let held = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(
        held.starts_with("HELD "),
        "python did not hold the file: {held:?}"
    );

    let st = status_json(&server);
    let sessions = st["sessions"].as_array().unwrap();
    let ours = sessions.iter().filter(|s| s["user"] == USER).count();
    assert!(
        ours >= 2,
        "two sessions of {USER} (smbclient, python): {st:#}"
    );
    assert!(
        st["connections"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["client"].as_str().unwrap_or("").starts_with("127.0.0.1:"))
            .count()
            >= 2,
        "{st:#}"
    );
    let open = st["opens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["path"] == "held.txt")
        .unwrap_or_else(|| panic!("held.txt is not among the opens: {st:#}"));
    assert_eq!(open["share"], server.share.as_str());
    assert_eq!(open["oplock"], "lease", "{open:#}");
    assert_eq!(open["lease"]["key"], key, "{open:#}");
    assert_eq!(open["lease"]["state"], "RWH", "{open:#}");
    assert_eq!(open["durable"], "durable-v2", "{open:#}");
    let volatile: u64 = held.split(' ').nth(2).unwrap().parse().unwrap();
    assert_eq!(open["file_id"][1], volatile, "{open:#}");
    let lock = st["locks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["path"] == "held.txt")
        .unwrap_or_else(|| panic!("no lock on held.txt: {st:#}"));
    assert_eq!(lock["exclusive"], true);
    assert_eq!(
        (lock["offset"].as_u64(), lock["length"].as_u64()),
        (Some(0), Some(100))
    );
    assert_eq!(lock["open"], volatile);

    // The same at a glance.
    let socket = server.control_socket();
    let o = ringshare(&["status", "--socket", socket.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("held.txt") && t.contains(&format!("lease RWH {key}")),
        "{t}"
    );
    assert!(t.contains(USER) && t.contains("3.1.1"), "{t}");

    drop(py.stdin.take());
    assert_eq!(lines.next().and_then(Result::ok).as_deref(), Some("OK"));
    let _ = py.wait();
    assert!(
        eventually(Duration::from_secs(10), || {
            let st = status_json(&server);
            st["opens"]
                .as_array()
                .unwrap()
                .iter()
                .all(|o| o["path"] != "held.txt")
                && st["locks"].as_array().unwrap().is_empty()
        }),
        "the closed file is still listed: {:#}",
        status_json(&server)
    );
    let _ = sc.finish(Duration::from_secs(10));
}

#[test]
fn status_is_refused_to_other_users() {
    let test = "status is refused to other users";
    if !rustix::process::geteuid().is_root() {
        eprintln!("\n!!!!!!!! SKIPPED {test}: needs root to run a command as nobody !!!!!!!!\n");
        return;
    }
    let server = Server::start(&ServerConfig::default(), |_| {});
    let socket = server.control_socket();
    // The socket's directory lets others through; the socket itself does not.
    let dir = socket.parent().unwrap();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(ringshare_bin())
        .args(["status", "--socket", socket.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .expect("run setpriv");
    let t = text(&o);
    assert!(!o.status.success(), "nobody got the status: {t}");
    assert!(t.contains("Permission denied"), "{t}");
    assert!(ringshare(&["status", "--socket", socket.to_str().unwrap()])
        .status
        .success());
}

#[test]
fn sighup_adds_a_share_that_smbclient_lists_while_another_transfer_runs_on() {
    let test = "SIGHUP adds a share during a transfer";
    if !smbclient_or_skip(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |dir| {
        let f = std::fs::File::create(dir.join("big")).unwrap();
        f.set_len(256 << 20).unwrap();
    });
    let extra = server.share_dir.parent().unwrap().join("added");
    std::fs::create_dir_all(&extra).unwrap();
    common::give_share_to_user(&extra, &server.passwd_file(), USER);
    let mut sc = server.client().spawn_reading_stdin();
    // Transfers go on, one after another, before, during and after the
    // reload, on one connection.
    for _ in 0..4 {
        sc.send("get big /dev/null");
    }
    assert!(
        sc.wait_for("getting file", Duration::from_secs(20)),
        "the transfer did not start: {}",
        sc.output()
    );
    let mut conf = std::fs::OpenOptions::new()
        .append(true)
        .open(server.conf())
        .unwrap();
    write!(
        conf,
        "\n[added]\n\tpath = {}\n\tread only = no\n",
        extra.display()
    )
    .unwrap();
    drop(conf);
    sighup(&server);
    let mut gets = 4;
    let listed = eventually(Duration::from_secs(20), || {
        sc.send("get big /dev/null");
        gets += 1;
        server.client().run("").stdout.contains("added")
    });
    assert!(listed, "the new share is not listed: {}", server.log());
    server
        .client()
        .share_name("added")
        .run("put /etc/hostname hello")
        .expect_ok("write to the new share");
    assert!(extra.join("hello").exists());
    sc.send("get big /dev/null");
    gets += 1;
    assert!(
        sc.finish(Duration::from_secs(60))
            .is_some_and(|s| s.success()),
        "{}",
        sc.output()
    );
    let out = sc.output();
    assert!(
        !out.contains("NT_STATUS_"),
        "the transfer saw an error: {out}"
    );
    assert_eq!(out.matches("getting file").count(), gets, "{out}");
    assert!(
        server.log().contains("shares added: added"),
        "{}",
        server.log()
    );
}

#[test]
fn a_bad_configuration_on_reload_is_refused_with_its_line_and_the_old_shares_keep_working() {
    let test = "a bad configuration is refused";
    if !smbclient_or_skip(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |dir| {
        std::fs::write(dir.join("kept.txt"), "still here\n").unwrap();
    });
    let conf = server.conf();
    let good = std::fs::read_to_string(&conf).unwrap();
    let line = good.lines().count() + 2;
    std::fs::write(&conf, format!("{good}\n[broken\n")).unwrap();
    let socket = server.control_socket();
    let o = ringshare(&["reload", "--socket", socket.to_str().unwrap()]);
    let t = text(&o);
    assert!(!o.status.success(), "a bad configuration was taken: {t}");
    let at = format!("{}:{line}:", conf.display());
    assert!(t.contains(&at), "the refusal names {at}: {t}");
    server
        .client()
        .run("get kept.txt -")
        .expect_ok("the old share after a refused reload")
        .expect_contains("old share's content", "still here");
    // SIGHUP is refused the same way: logged, nothing changed.
    sighup(&server);
    assert!(
        eventually(Duration::from_secs(10), || server
            .log()
            .contains("reload refused")),
        "{}",
        server.log()
    );
    server
        .client()
        .run("ls")
        .expect_ok("the old share after SIGHUP");
}

#[test]
fn a_removed_share_disconnects_its_clients_and_a_read_only_change_applies_to_new_opens() {
    let test = "a reload removes and changes shares";
    if !smbclient_or_skip(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |_| {});
    let second = server.share_dir.parent().unwrap().join("second");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("f"), "x").unwrap();
    common::give_share_to_user(&second, &server.passwd_file(), USER);
    let conf = server.conf();
    let original = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &conf,
        format!(
            "{original}\n[second]\n\tpath = {}\n\tread only = no\n",
            second.display()
        ),
    )
    .unwrap();
    assert!(reload_ok(&server).contains("shares added: second"));

    let mut on_second = server.client().share_name("second").spawn_reading_stdin();
    on_second.send("open f");
    assert!(
        on_second.wait_for("open file", Duration::from_secs(20)),
        "{}",
        on_second.output()
    );
    let mut on_first = server.client().spawn_reading_stdin();
    on_first.send("put /etc/hostname before");
    assert!(
        eventually(Duration::from_secs(20), || server
            .share_dir
            .join("before")
            .exists()),
        "{}",
        on_first.output()
    );
    let st = status_json(&server);
    assert!(
        st["opens"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["share"] == "second"),
        "{st:#}"
    );

    // [second] goes, the first share becomes read-only.
    std::fs::write(&conf, original.replace("read only = no", "read only = yes")).unwrap();
    let summary = reload_ok(&server);
    assert!(
        summary.contains("removed: second") && summary.contains("changed: share"),
        "{summary}"
    );
    on_second.send("ls");
    on_first.send("put /etc/hostname after");
    on_first.send("get before -");
    let _ = on_second.finish(Duration::from_secs(20));
    let _ = on_first.finish(Duration::from_secs(20));
    let second_out = on_second.output();
    assert!(
        second_out.contains("NT_STATUS_NETWORK_NAME_DELETED"),
        "a request on the removed share: {second_out}"
    );
    let first_out = on_first.output();
    assert!(
        first_out.contains("NT_STATUS_ACCESS_DENIED opening remote file \\after"),
        "a write after the share became read-only: {first_out}"
    );
    assert!(!server.share_dir.join("after").exists());
    let st = status_json(&server);
    assert!(
        st["opens"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["share"] != "second"),
        "the removed share's open was not closed: {st:#}"
    );
    assert!(
        st["tree_connects"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["share"] != "second"),
        "{st:#}"
    );
}

#[test]
fn a_reload_changes_the_log_level() {
    let test = "a reload changes the log level";
    if !smbclient_or_skip(test) {
        return;
    }
    let server = Server::start(&ServerConfig::default(), |_| {});
    let conf = server.conf();
    let original = std::fs::read_to_string(&conf).unwrap();
    assert!(original.contains("log level = 2"));
    // Log level 1: notable events only, no per-connection debug lines.
    std::fs::write(&conf, original.replace("log level = 2", "log level = 1")).unwrap();
    let out = reload_ok(&server);
    assert!(
        out.contains("log level: 1"),
        "reload said:\n{out}\nlog:\n{}",
        server.log()
    );
    let before = server.log().matches("connection accepted").count();
    server.client().run("ls").expect_ok("ls at log level 1");
    assert_eq!(
        server.log().matches("connection accepted").count(),
        before,
        "a debug line at log level 1"
    );
    // Back to 2: they are logged again.
    std::fs::write(&conf, &original).unwrap();
    let out = reload_ok(&server);
    assert!(out.contains("log level: 2"), "reload said:\n{out}");
    server.client().run("ls").expect_ok("ls at log level 2");
    assert!(
        eventually(Duration::from_secs(5), || server
            .log()
            .matches("connection accepted")
            .count()
            > before),
        "no debug line after going back to log level 2:\n{}",
        server.log()
    );
}

#[test]
fn members_of_the_control_group_may_ask_for_status() {
    let test = "the control group may ask for status";
    if !rustix::process::geteuid().is_root() {
        eprintln!("\n!!!!!!!! SKIPPED {test}: needs root to add a group !!!!!!!!\n");
        return;
    }
    let added = Command::new("groupadd")
        .args(["-f", "-r", "rsctl"])
        .status()
        .expect("run groupadd");
    assert!(added.success(), "groupadd rsctl");
    let server = Server::start(
        &ServerConfig {
            extra_global: "\tcontrol group = rsctl\n",
            ..ServerConfig::default()
        },
        |_| {},
    );
    let socket = server.control_socket();
    let dir = socket.parent().unwrap();
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&socket).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o660, "the group may connect");
    let as_nobody_in = |group: &str| {
        Command::new("setpriv")
            .args([
                "--reuid=nobody",
                &format!("--regid={group}"),
                "--clear-groups",
            ])
            .arg(ringshare_bin())
            .args(["status", "--json", "--socket", socket.to_str().unwrap()])
            .stdin(Stdio::null())
            .output()
            .expect("run setpriv")
    };
    let member = as_nobody_in("rsctl");
    assert!(
        member.status.success(),
        "a member was refused: {}",
        text(&member)
    );
    let _: serde_json::Value = serde_json::from_slice(&member.stdout).expect("JSON");
    let outsider = as_nobody_in("nogroup");
    assert!(
        !outsider.status.success(),
        "an outsider got the status: {}",
        text(&outsider)
    );
}

#[test]
fn a_reload_lets_a_new_user_log_on_and_refuses_a_removed_one() {
    let test = "a reload adds and removes users";
    if !smbclient_or_skip(test) {
        return;
    }
    const NEW: &str = "rsreloaded";
    const NEW_PASSWORD: &str = "Reloaded-Pass-1";
    let server = Server::start(&ServerConfig::default(), |_| {});
    common::add_user(&server.conf(), NEW, NEW_PASSWORD);
    let as_new = || server.client().user(NEW, NEW_PASSWORD).run("ls");
    // Not known to the running server until it reads its users again.
    as_new().expect_status("before the reload", "NT_STATUS_LOGON_FAILURE");
    assert!(reload_ok(&server).contains("users: 2"));
    as_new().expect_ok("after the reload");
    let del = ringshare(&[
        "user",
        "del",
        NEW,
        "--config",
        server.conf().to_str().unwrap(),
    ]);
    assert!(del.status.success(), "{}", text(&del));
    assert!(reload_ok(&server).contains("users: 1"));
    as_new().expect_status("after removal and reload", "NT_STATUS_LOGON_FAILURE");
    server
        .client()
        .run("ls")
        .expect_ok("the other user still logs on");
}

#[test]
fn a_reload_names_the_global_options_that_need_a_restart() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let conf = server.conf();
    let original = std::fs::read_to_string(&conf).unwrap();
    assert!(original.contains("server signing = auto") && original.contains("log level = 2"));
    std::fs::write(
        &conf,
        original
            .replace("server signing = auto", "server signing = mandatory")
            .replace("log level = 2", "log level = 1"),
    )
    .unwrap();
    let summary = reload_ok(&server);
    let restart = summary
        .lines()
        .find(|l| l.starts_with("changed, and applied at the next restart only:"))
        .unwrap_or_else(|| panic!("no restart line: {summary}"));
    // The log level is applied at once, so it is not among them.
    assert_eq!(
        restart, "changed, and applied at the next restart only: server signing",
        "{summary}"
    );
    assert!(summary.contains("log level: 1"), "{summary}");
    // Nothing changed: nothing to name.
    assert!(!reload_ok(&server).contains("next restart"));
}
