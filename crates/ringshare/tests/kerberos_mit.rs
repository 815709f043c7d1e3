//! Kerberos against a real MIT KDC started by the test (krb5-kdc in a temp dir, realm RS.TEST,
//! principal `cifs/fs.rs.test`, a keytab written by `kadmin.local ktadd`): Debian's smbclient
//! logs on with `--use-kerberos=required` over each dialect, signed and encrypted with each
//! cipher; a keytab without the ticket's kvno refuses the logon with LOGON_FAILURE and a log
//! line; a rotated keytab is read again by the running server. A bare client
//! (tests/py/krb5_raw.py, MIT GSS through python3-gssapi) sends what smbclient will not: the same
//! AP-REQ twice (refused the second time), an authenticator 10 minutes ahead (clock skew), a
//! ticket that ended before the server's now (the server's clock moved with libfaketime), and a
//! request after the ticket's end (NETWORK_SESSION_EXPIRED). With `cifs/` given an RC4-HMAC key
//! only, its tickets are refused by default with the log line and log on once a reload sets
//! `kerberos encryption types = all`, from smbclient (Samba's Heimdal) and from MIT GSS with an
//! RC4 session key and subkey (MIT needs `allow_rc4` in the KDC's krb5.conf to issue those).
//!
//! Needs root (the server acts as the Unix account `rsinterop`), krb5-kdc, krb5-admin-server,
//! krb5-user, python3-gssapi and faketime; skipped with a message otherwise.

mod common;
mod twin;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

use common::kdc::*;

fn tools_or_skip(test: &str) -> bool {
    root_and_commands_or_skip(
        test,
        &[
            ("krb5kdc", "krb5-kdc"),
            ("kadmin.local", "krb5-admin-server"),
            ("kinit", "krb5-user"),
            ("smbclient", "smbclient"),
        ],
    )
}

/// libfaketime, to run a process with its clock moved.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// The environment that moves a process's wall clock by `secs` (its monotonic clock stays).
fn clock_moved_by(secs: i64) -> Vec<(String, String)> {
    vec![
        ("LD_PRELOAD".into(), LIBFAKETIME.into()),
        ("FAKETIME".into(), format!("{secs:+}")),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

fn raw_tools_or_skip(test: &str) -> bool {
    if !tools_or_skip(test) {
        return false;
    }
    let gssapi = Command::new("/usr/bin/python3")
        .args(["-c", "import gssapi"])
        .status()
        .is_ok_and(|s| s.success());
    if !gssapi || !Path::new(LIBFAKETIME).exists() {
        eprintln!(
            "\n!!!!!!!! SKIPPED {test}: needs python3-gssapi and faketime \
             (apt-get install -y python3-gssapi faketime) !!!!!!!!\n"
        );
        return false;
    }
    true
}

/// Run tests/py/krb5_raw.py against the server with `kdc`'s tickets; its output lines.
fn raw_client(kdc: &Kdc, server: &Server, clock: &[(String, String)], args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/krb5_raw.py");
    let mut c = Command::new("/usr/bin/python3");
    kdc.env(&mut c)
        .arg(script)
        .args(["127.0.0.1", &server.port.to_string(), "cifs@fs.rs.test"])
        .args(args)
        .envs(clock.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    let out = c.output().expect("run krb5_raw.py");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const LOGON_FAILURE: &str = "c000006d";

/// The bare client's SESSION_SETUP `leg` was refused with LOGON_FAILURE, and the server's log
/// says `why`.
fn assert_refused(out: &str, server: &Server, leg: &str, why: &str) {
    assert!(
        out.contains(&format!("{leg} {LOGON_FAILURE}")),
        "{leg} not refused: {out}\n{}",
        server.log()
    );
    assert!(
        server.log().contains(why),
        "no {why:?} in the log:\n{}",
        server.log()
    );
}

fn kerberos_server(kdc: &Kdc) -> Server {
    kerberos_server_with(kdc, Vec::new())
}

fn kerberos_server_with(kdc: &Kdc, env: Vec<(String, String)>) -> Server {
    kerberos_server_sections(kdc, env, "")
}

/// [`kerberos_server_with`], with more share `sections` before the test share.
fn kerberos_server_sections(kdc: &Kdc, env: Vec<(String, String)>, sections: &str) -> Server {
    let extra: &'static str = Box::leak(
        format!(
            "\trealm = {REALM}\n\tkerberos method = dedicated keytab\n\
             \tdedicated keytab file = {}\n{sections}",
            kdc.keytab().display()
        )
        .into_boxed_str(),
    );
    Server::start(
        &ServerConfig {
            extra_global: extra,
            env,
            ..Default::default()
        },
        |_| {},
    )
}

/// smbclient to //fs.rs.test/share (at 127.0.0.1) with the ticket cache of `kdc`.
fn smbclient_krb(
    kdc: &Kdc,
    server: &Server,
    dialect: &str,
    extra: &[&str],
    cmds: &str,
) -> (bool, String) {
    let mut c = Command::new("smbclient");
    kdc.env(&mut c)
        // smbclient will not use Kerberos towards "localhost" or an address: the server is
        // named fs.rs.test and reached at 127.0.0.1.
        .arg(format!("//fs.rs.test/{}", server.share))
        .args(["-I", "127.0.0.1"])
        .arg("-s")
        .arg(server.client_conf())
        .args(["-p", &server.port.to_string(), "-d", "1", "-t", "30"])
        .arg("--use-kerberos=required")
        .args([
            "-m",
            dialect,
            &format!("--option=client min protocol={dialect}"),
        ])
        .args(extra)
        .args(["-c", cmds])
        .current_dir(&server.scratch)
        .stdin(Stdio::null());
    let out = c.output().expect("run smbclient");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && !text.contains("NT_STATUS_"), text)
}

#[test]
fn smbclient_logs_on_with_a_kerberos_ticket_over_every_dialect_signed_and_encrypted() {
    if !tools_or_skip(
        "smbclient_logs_on_with_a_kerberos_ticket_over_every_dialect_signed_and_encrypted",
    ) {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit();
    let server = kerberos_server(&kdc);
    std::fs::write(server.scratch.join("up.txt"), b"kerberos payload\n").unwrap();
    let runs: &[(&str, &[&str])] = &[
        ("SMB2_10", &["--client-protection=sign"]),
        ("SMB3_00", &["--client-protection=sign"]),
        ("SMB3_00", &["--client-protection=encrypt"]),
        ("SMB3_11", &["--client-protection=sign"]),
        (
            "SMB3_11",
            &[
                "--client-protection=encrypt",
                "--option=client smb3 encryption algorithms=AES-128-CCM",
            ],
        ),
        (
            "SMB3_11",
            &[
                "--client-protection=encrypt",
                "--option=client smb3 encryption algorithms=AES-128-GCM",
            ],
        ),
        (
            "SMB3_11",
            &[
                "--client-protection=encrypt",
                "--option=client smb3 encryption algorithms=AES-256-CCM",
            ],
        ),
        (
            "SMB3_11",
            &[
                "--client-protection=encrypt",
                "--option=client smb3 encryption algorithms=AES-256-GCM",
            ],
        ),
    ];
    for (i, (dialect, extra)) in runs.iter().enumerate() {
        let name = format!("k{i}.txt");
        let (ok, out) = smbclient_krb(
            &kdc,
            &server,
            dialect,
            extra,
            &format!("put up.txt {name}; get {name} back{i}.txt; ls"),
        );
        assert!(
            ok,
            "{dialect} {extra:?}: {out}\n--- server log ---\n{}",
            server.log()
        );
        assert!(
            out.contains(&name),
            "{dialect} {extra:?}: no {name} in ls: {out}"
        );
        assert_eq!(
            std::fs::read(server.scratch.join(format!("back{i}.txt"))).unwrap(),
            b"kerberos payload\n"
        );
    }
    // The files belong to the ticket's user, as the kernel made them for its account.
    let uid = std::os::unix::fs::MetadataExt::uid(
        &std::fs::metadata(server.share_dir.join("k0.txt")).unwrap(),
    );
    let want = Command::new("id").args(["-u", USER]).output().unwrap();
    assert_eq!(
        uid.to_string(),
        String::from_utf8_lossy(&want.stdout).trim()
    );
    let log = server.log();
    assert!(log.contains("Kerberos logon"), "{log}");
    assert!(log.contains(&format!("{USER}@{REALM}")), "{log}");
    kdc.kdestroy();
}

#[test]
fn a_ticket_of_a_key_version_the_keytab_lacks_is_refused_until_the_rotated_keytab_is_read() {
    if !tools_or_skip(
        "a_ticket_of_a_key_version_the_keytab_lacks_is_refused_until_the_rotated_keytab_is_read",
    ) {
        return;
    }
    let kdc = Kdc::start();
    // The service key changes (kvno + 1) but the server's keytab does not have it yet.
    let rotated = kdc.dir.path().join("rotated.keytab");
    kdc.ktadd(&rotated);
    kdc.kinit();
    let server = kerberos_server(&kdc);
    let (ok, out) = smbclient_krb(&kdc, &server, "SMB3_11", &[], "ls");
    assert!(!ok, "logged on with a ticket the keytab cannot open: {out}");
    assert!(out.contains("NT_STATUS_LOGON_FAILURE"), "{out}");
    let log = server.log();
    assert!(
        log.contains("no key in the keytab for cifs/fs.rs.test@RS.TEST"),
        "no log line naming the missing key:\n{log}"
    );
    // Rotation as `net ads changetrustpw` does it: the new kvno is added beside the old.
    let mut merged = std::fs::read(kdc.keytab()).unwrap();
    merged.extend_from_slice(&std::fs::read(&rotated).unwrap()[2..]);
    let tmp = kdc.dir.path().join("merged.tmp");
    std::fs::write(&tmp, merged).unwrap();
    std::fs::rename(&tmp, kdc.keytab()).unwrap();
    let start = Instant::now();
    loop {
        let (ok, out) = smbclient_krb(&kdc, &server, "SMB3_11", &[], "ls");
        if ok {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the rotated keytab was not read: {out}\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(server.log().contains("changed and was read again"));
    kdc.kdestroy();
}

#[test]
fn an_rc4_ticket_is_refused_by_default_and_logs_on_once_a_reload_allows_rc4() {
    if !tools_or_skip("an_rc4_ticket_is_refused_by_default_and_logs_on_once_a_reload_allows_rc4") {
        return;
    }
    let kdc = Kdc::start();
    kdc.make_service_rc4_only(false);
    kdc.kinit();
    // The keytab still holds the AES keys of the earlier kvno, so the server starts.
    let server = kerberos_server(&kdc);
    std::fs::write(server.scratch.join("up.txt"), b"rc4 payload\n").unwrap();
    let (ok, out) = smbclient_krb(&kdc, &server, "SMB3_11", &[], "ls");
    assert!(!ok, "an RC4 ticket logged on by default: {out}");
    assert!(out.contains("NT_STATUS_LOGON_FAILURE"), "{out}");
    let klist = kdc.run("klist", &["-e"]);
    assert!(
        klist.contains("aes256-cts-hmac-sha1-96, DEPRECATED:arcfour-hmac"),
        "not an RC4 ticket with an AES session key: {klist}"
    );
    let log = server.log();
    assert!(
        log.contains(
            "LOGON_FAILURE: Kerberos ticket refused: ticket encrypted with RC4-HMAC (enctype \
             23), which this server does not accept; give the service account AES keys"
        ),
        "no log line refusing the RC4 ticket:\n{log}"
    );
    // `kerberos encryption types = all`, applied by a reload.
    let conf = std::fs::read_to_string(server.conf()).unwrap();
    let all = conf.replacen(
        "[global]\n",
        "[global]\n\tkerberos encryption types = all\n",
        1,
    );
    std::fs::write(server.conf(), all).unwrap();
    let out = Command::new(ringshare_bin())
        .args(["reload", "--socket"])
        .arg(server.control_socket())
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "reload: {summary}");
    assert!(!summary.contains("next restart only"), "{summary}");
    assert!(
        summary.contains("AES and RC4-HMAC tickets accepted"),
        "{summary}"
    );
    // An RC4 ticket with an AES-256 session key (MIT's default), then one whose session key is
    // RC4 too: both log on, signed and encrypted.
    for (round, rc4_session) in [(0, false), (1, true)] {
        if rc4_session {
            kdc.admin("setstr cifs/fs.rs.test session_enctypes rc4-hmac");
            kdc.kdestroy();
            kdc.kinit();
        }
        for (i, extra) in [
            &["--client-protection=sign"][..],
            &[
                "--client-protection=encrypt",
                "--option=client smb3 encryption algorithms=AES-256-GCM",
            ],
        ]
        .iter()
        .enumerate()
        {
            let name = format!("rc4-{round}-{i}.txt");
            let (ok, out) = smbclient_krb(
                &kdc,
                &server,
                "SMB3_11",
                extra,
                &format!("put up.txt {name}; get {name} back-{name}; ls"),
            );
            assert!(ok, "{extra:?}: {out}\n--- server log ---\n{}", server.log());
            assert_eq!(
                std::fs::read(server.scratch.join(format!("back-{name}"))).unwrap(),
                b"rc4 payload\n"
            );
        }
        let klist = kdc.run("klist", &["-e"]);
        let want = if rc4_session {
            "DEPRECATED:arcfour-hmac, DEPRECATED:arcfour-hmac"
        } else {
            "aes256-cts-hmac-sha1-96, DEPRECATED:arcfour-hmac"
        };
        assert!(klist.contains(want), "{want} not in {klist}");
    }
    kdc.kdestroy();
}

#[test]
fn a_replayed_ap_req_is_refused_on_another_connection_with_a_log_line() {
    if !raw_tools_or_skip("a_replayed_ap_req_is_refused_on_another_connection_with_a_log_line") {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit();
    let server = kerberos_server(&kdc);
    let out = raw_client(&kdc, &server, &[], &["--replay"]);
    assert!(
        out.contains("setup1 00000000"),
        "the first use failed: {out}\n{}",
        server.log()
    );
    assert_refused(&out, &server, "setup2", "replayed authenticator");
}

#[test]
fn an_authenticator_made_ten_minutes_ahead_is_refused_as_clock_skew() {
    if !raw_tools_or_skip("an_authenticator_made_ten_minutes_ahead_is_refused_as_clock_skew") {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit();
    // The service ticket is fetched with the right time; the client then runs 10 minutes
    // ahead.
    kdc.run("kvno", &["cifs/fs.rs.test"]);
    let server = kerberos_server(&kdc);
    let out = raw_client(&kdc, &server, &clock_moved_by(600), &[]);
    assert_refused(&out, &server, "setup1", "clocks out of step");
}

#[test]
fn a_ticket_that_ended_before_the_servers_now_is_refused_as_expired() {
    if !raw_tools_or_skip("a_ticket_that_ended_before_the_servers_now_is_refused_as_expired") {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit_for(Some("120s"));
    // The server's clock is 1000 s ahead: the 2-minute ticket ended 880 s before its now.
    let server = kerberos_server_with(&kdc, clock_moved_by(1000));
    let out = raw_client(&kdc, &server, &[], &[]);
    assert_refused(&out, &server, "setup1", "ticket expired");
}

#[test]
fn a_kerberos_session_ends_with_its_ticket_as_network_session_expired() {
    if !raw_tools_or_skip("a_kerberos_session_ends_with_its_ticket_as_network_session_expired") {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit_for(Some("120s"));
    // The server is 110 s ahead: the ticket has 10 s left when the session is set up.
    let server = kerberos_server_with(&kdc, clock_moved_by(110));
    let out = raw_client(&kdc, &server, &[], &["--wait", "14"]);
    assert!(out.contains("setup1 00000000"), "{out}\n{}", server.log());
    assert!(
        out.contains("tree c000035c"),
        "not NETWORK_SESSION_EXPIRED: {out}"
    );
}

/// The tests smbtorture passed, and those it did not (with why).
type Outcome = (Vec<String>, Vec<String>);

/// smbtorture `SUITE` over Kerberos against `port` (the name fs.rs.test is made to point at
/// 127.0.0.1 in a private mount namespace, since smbtorture cannot be given an address): the
/// names of the tests that passed, and of those that did not (with why).
fn torture_over_kerberos(
    kdc: &Kdc,
    hosts: &Path,
    client_conf: &Path,
    port: u16,
    share: &str,
    tests: &[String],
) -> Outcome {
    let mut c = where_fs_rs_test_resolves(kdc, hosts, "timeout");
    c.args(["600", "smbtorture"])
        .arg("-s")
        .arg(client_conf)
        .arg(format!("//fs.rs.test/{share}"))
        .args(["-p", &port.to_string()])
        .arg(format!("-U{USER}%{PASSWORD}"))
        .args(["--use-kerberos=required", "--target=samba3"])
        .args(tests)
        .stdin(Stdio::null());
    let out = c.output().expect("run smbtorture");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let (mut passed, mut other) = (Vec::new(), Vec::new());
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(t) = l.strip_prefix("success: ") {
            passed.push(t.to_string());
        } else if let Some(t) = l.strip_prefix("failure: ").or(l.strip_prefix("error: ")) {
            let why = lines.get(i + 1).unwrap_or(&"");
            other.push(format!("{} {why}", t.trim_end_matches(" [")));
        }
    }
    assert!(
        !passed.is_empty() || !other.is_empty(),
        "smbtorture {tests:?} ran no test:\n{text}"
    );
    (passed, other)
}

#[test]
fn smbtorture_over_kerberos_passes_every_session_and_connect_test_samba_passes() {
    let test = "smbtorture_over_kerberos_passes_every_session_and_connect_test_samba_passes";
    if !tools_or_skip(test) || !smbtorture_or_skip(test) {
        return;
    }
    let kdc = Kdc::start();
    // Samba 4.17 as a standalone server refuses every ticket with a PAC ("Unexpected PAC ... in
    // standalone mode"), even MIT's minimal one: the service's tickets carry none here, so that
    // both servers answer the same tickets (ringshare takes them with or without).
    kdc.admin("modprinc +no_auth_data_required cifs/fs.rs.test");
    // smbtorture takes the user's ticket-granting ticket from the cache.
    kdc.kinit();
    // smb2.session.expire2s/e wait for a change notification on the share's root that must not
    // come: they get a share of their own, on both servers.
    let samba_dir = TempDir::new("krb5-samba");
    let (share, quiet, rs_quiet) = (
        samba_dir.path().join("share"),
        samba_dir.path().join("quiet"),
        samba_dir.path().join("rs-quiet"),
    );
    for d in [&share, &quiet, &rs_quiet] {
        std::fs::create_dir_all(d).unwrap();
        chown_tree(d, twin::uid(USER));
    }
    let quiet_section =
        |path: &Path| format!("\n[quiet]\n\tpath = {}\n\tread only = no\n", path.display());
    let rs = kerberos_server_sections(&kdc, Vec::new(), &quiet_section(&rs_quiet));
    let samba = twin::start_samba(
        &samba_dir.path().join("smbd"),
        twin::Net::Loopback,
        &format!(
            "\trealm = {REALM}\n\tkerberos method = dedicated keytab\n\
             \tdedicated keytab file = {}\n\tserver multi channel support = yes\n",
            kdc.keytab().display()
        ),
        &format!(
            "[share]\n\tpath = {}\n\tread only = no\n{}",
            share.display(),
            quiet_section(&quiet)
        ),
        &[USER],
    );
    let hosts = kdc.hosts_file();
    // The expire tests sleep (10-20 s each): they run beside the others, each group against each
    // server at once.
    let listed = Command::new("smbtorture")
        .args(["--list", "smb2.session"])
        .output()
        .unwrap();
    let session: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("smb2.session."))
        .map(|l| format!("smb2.session.{}", l.split('.').next().unwrap_or(l)))
        .collect();
    assert!(
        session.len() > 50,
        "smbtorture --list smb2.session: {session:?}"
    );
    let (slow, quick): (Vec<String>, Vec<String>) =
        session.into_iter().partition(|t| t.contains(".expire"));
    let (notify, slow): (Vec<String>, Vec<String>) =
        slow.into_iter().partition(|t| t.contains(".expire2"));
    // Each other expire test on its own (they mostly sleep), the rest in one run, smb2.connect
    // too; (share, tests).
    let mut groups: Vec<(&str, Vec<String>)> = vec![("quiet", notify), ("share", quick)];
    groups.extend(slow.into_iter().map(|t| ("share", vec![t])));
    groups.push(("share", vec!["smb2.connect".to_string()]));
    let results: Vec<(Outcome, Outcome)> = std::thread::scope(|s| {
        let runs: Vec<_> = groups
            .iter()
            .map(|(sh, g)| {
                let (kdc, hosts, conf) = (&kdc, &hosts, rs.client_conf());
                (
                    s.spawn(move || torture_over_kerberos(kdc, hosts, conf, rs.port, sh, g)),
                    s.spawn(move || torture_over_kerberos(kdc, hosts, conf, samba.port, sh, g)),
                )
            })
            .collect();
        runs.into_iter()
            .map(|(a, b)| (a.join().unwrap(), b.join().unwrap()))
            .collect()
    });
    let (mut rs_ok, mut rs_bad): Outcome = Default::default();
    let (mut smbd_ok, mut smbd_bad): Outcome = Default::default();
    for ((a_ok, a_bad), (b_ok, b_bad)) in results {
        rs_ok.extend(a_ok);
        rs_bad.extend(a_bad);
        smbd_ok.extend(b_ok);
        smbd_bad.extend(b_bad);
    }
    let report = format!(
        "smb2.session and smb2.connect: ringshare {} passed, {} not; Samba {} passed, {} not\n  \
         ringshare not: {:?}\n  Samba not: {:?}\n",
        rs_ok.len(),
        rs_bad.len(),
        smbd_ok.len(),
        smbd_bad.len(),
        rs_bad,
        smbd_bad
    );
    // The reference must have run: a rig that logs on to neither server proves nothing.
    assert!(
        smbd_ok.len() * 2 > smbd_ok.len() + smbd_bad.len() && smbd_ok.contains(&"connect".into()),
        "Samba passed too little over Kerberos: the rig is broken\n{report}"
    );
    let missing: Vec<&String> = smbd_ok.iter().filter(|t| !rs_ok.contains(t)).collect();
    eprintln!("{report}");
    assert!(
        missing.is_empty(),
        "Samba passes over Kerberos and ringshare does not: {missing:?}\n{report}\n\
         --- ringshare log ---\n{}",
        rs.log()
    );
}

#[test]
fn a_server_whose_keytab_cannot_be_read_does_not_start_and_says_why() {
    let tmp = TempDir::new("krb5-nokeytab");
    std::fs::create_dir(tmp.path().join("data")).unwrap();
    let conf = tmp.path().join("smb.conf");
    let missing = tmp.path().join("missing.keytab");
    std::fs::write(
        &conf,
        format!(
            "[global]\n\tlisten = 127.0.0.1:{}\n\tsmb passwd file = {}\n\
             \tkerberos method = dedicated keytab\n\tdedicated keytab file = {}\n\
             [data]\n\tpath = {}\n",
            free_port(),
            tmp.path().join("smbpasswd").display(),
            missing.display(),
            tmp.path().join("data").display()
        ),
    )
    .unwrap();
    std::fs::write(tmp.path().join("smbpasswd"), "").unwrap();
    let mut child = Command::new(ringshare_bin())
        .args(["serve", "--config"])
        .arg(&conf)
        .env("HOME", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_within(&mut child, Duration::from_secs(20)).expect("serve did not exit");
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!status.success(), "started without its keytab: {text}");
    assert!(
        text.contains(&format!("cannot read the keytab {}", missing.display())),
        "{text}"
    );
}

#[test]
fn python_smbprotocol_round_trips_files_over_kerberos_signed_and_encrypted() {
    let test = "python_smbprotocol_round_trips_files_over_kerberos_signed_and_encrypted";
    if !raw_tools_or_skip(test) || common::py::skipped(test) {
        return;
    }
    let py = common::py::python_with_gssapi();
    let kdc = Kdc::start();
    kdc.kinit();
    let server = kerberos_server(&kdc);
    let runs: &[&[&str]] = &[
        &["--dialect", "3.1.1", "--cipher", "aes-256-gcm"],
        &["--dialect", "3.1.1", "--cipher", "aes-128-ccm"],
        &["--dialect", "3.1.1", "--signing", "aes-gmac"],
        &["--dialect", "3.0.2"],
        &["--dialect", "2.1"],
    ];
    smbprotocol_round_trips(&kdc, &server, py, None, runs);
    assert!(server.log().contains("Kerberos logon"), "{}", server.log());
}

/// python smbprotocol's round trip (smbprotocol_roundtrip.py) over Kerberos to `server`, once
/// per entry of `runs` (its dialect, cipher and signing arguments), with the client's krb5.conf
/// `client_conf` when given.
fn smbprotocol_round_trips(
    kdc: &Kdc,
    server: &Server,
    py: &Path,
    client_conf: Option<&Path>,
    runs: &[&[&str]],
) {
    let hosts = kdc.hosts_file();
    for args in runs {
        let mut c = where_fs_rs_test_resolves(kdc, &hosts, py);
        if let Some(conf) = client_conf {
            c.env("KRB5_CONFIG", conf);
        }
        c.arg(common::py::script("smbprotocol_roundtrip.py"))
            .args(["--server", "fs.rs.test", "--kerberos", "--port"])
            .arg(server.port.to_string())
            .args(["--user", "-", "--password", "-", "--share", &server.share])
            .arg("--share-dir")
            .arg(&server.share_dir)
            .args(*args);
        let (ok, out) = common::py::run_bounded(&mut c, Duration::from_secs(180));
        assert!(ok, "{args:?}: {out}\n--- server log ---\n{}", server.log());
    }
}

#[test]
fn mit_gss_logs_on_with_an_rc4_ticket_session_key_and_subkey_when_rc4_is_allowed() {
    // MIT's initiator ignores an acceptor subkey of its own subkey's enctype when that is RC4
    // and keeps its own: signing and encryption work only if the server's session key is that
    // subkey too (the AP-REP gives it back).
    let test = "mit_gss_logs_on_with_an_rc4_ticket_session_key_and_subkey_when_rc4_is_allowed";
    if !raw_tools_or_skip(test) || common::py::skipped(test) {
        return;
    }
    let py = common::py::python_with_gssapi();
    let kdc = Kdc::start();
    kdc.make_service_rc4_only(true);
    // A client whose subkey is RC4 (MIT takes its first permitted enctype for the subkey).
    let client_conf = kdc.dir.path().join("krb5-rc4-client.conf");
    let conf = std::fs::read_to_string(kdc.dir.path().join("krb5.conf")).unwrap();
    let conf = conf.replacen(
        "[libdefaults]\n",
        "[libdefaults]\n permitted_enctypes = arcfour-hmac aes256-cts-hmac-sha1-96\n",
        1,
    );
    std::fs::write(&client_conf, conf).unwrap();
    kdc.kinit();
    let server = kerberos_server_sections(&kdc, Vec::new(), "\tkerberos encryption types = all\n");
    let runs: &[&[&str]] = &[
        &["--dialect", "3.1.1", "--cipher", "aes-128-gcm"],
        &["--dialect", "3.1.1", "--signing", "aes-cmac"],
        &["--dialect", "2.1"],
    ];
    smbprotocol_round_trips(&kdc, &server, py, Some(&client_conf), runs);
    let klist = kdc.run("klist", &["-e"]);
    assert!(
        klist.contains("DEPRECATED:arcfour-hmac, DEPRECATED:arcfour-hmac"),
        "not an RC4 ticket with an RC4 session key: {klist}"
    );
    assert!(server.log().contains("enctype 23)"), "{}", server.log());
}

#[test]
fn kerberos_turned_on_by_a_reload_lets_a_ticket_log_on() {
    if !tools_or_skip("kerberos_turned_on_by_a_reload_lets_a_ticket_log_on") {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit();
    let server = Server::start(&ServerConfig::default(), |_| {});
    let (ok, out) = smbclient_krb(&kdc, &server, "SMB3_11", &[], "ls");
    assert!(
        !ok,
        "a ticket logged on to a server without a keytab: {out}"
    );
    let conf = std::fs::read_to_string(server.conf()).unwrap();
    let with_kerberos = conf.replacen(
        "[global]\n",
        &format!(
            "[global]\n\trealm = {REALM}\n\tkerberos method = dedicated keytab\n\
             \tdedicated keytab file = {}\n",
            kdc.keytab().display()
        ),
        1,
    );
    std::fs::write(server.conf(), with_kerberos).unwrap();
    let out = Command::new(ringshare_bin())
        .args(["reload", "--socket"])
        .arg(server.control_socket())
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "reload: {summary}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(summary.contains("Kerberos: realm RS.TEST"), "{summary}");
    let (ok, out) = smbclient_krb(&kdc, &server, "SMB3_11", &[], "ls");
    assert!(ok, "{out}\n{}", server.log());
}

#[test]
fn an_ap_req_made_from_an_mit_credential_cache_is_accepted_by_mit_gss() {
    use ringshare_auth::krb5::{ccache, initiator};
    let test = "an_ap_req_made_from_an_mit_credential_cache_is_accepted_by_mit_gss";
    if !raw_tools_or_skip(test) {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit();
    kdc.run("kvno", &["cifs/fs.rs.test"]);
    // ringshare's own client side: the service ticket from the cache, an AP-REQ of its own.
    let (_, creds) = ccache::parse(&std::fs::read(kdc.dir.path().join("ccache")).unwrap()).unwrap();
    let cred = creds
        .iter()
        .find(|c| c.server.0 == ["cifs", "fs.rs.test"])
        .unwrap_or_else(|| panic!("no service ticket in {creds:?}"));
    assert_eq!(cred.client.0, [USER]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let params = initiator::AuthenticatorParams {
        client: cred.client.0.clone(),
        realm: cred.client.1.clone(),
        ctime: now,
        cusec: 4242,
        subkey: Some((cred.key.0, vec![0x5a; cred.key.1.len()])),
        seq: 1,
        bindings: [0; 16],
        gss_flags: 0x2 | 0x20,
        mutual: true,
    };
    let token = initiator::ap_req(&cred.ticket, (cred.key.0, &cred.key.1), &params).unwrap();
    // MIT's acceptor takes it, and its AP-REP carries the key both sides then hold.
    let mut c = Command::new("/usr/bin/python3");
    kdc.env(&mut c)
        .env("KRB5_KTNAME", kdc.keytab())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/krb5_accept.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    writeln!(child.stdin.take().unwrap(), "{}", hex(&token)).unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "MIT refused the AP-REQ: {text}");
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name}: {text}"))
            .to_string()
    };
    assert_eq!(field("client"), format!("{USER}@{REALM}"));
    let ap_rep = unhex(&field("ap-rep"));
    let (subkey, ctime) = initiator::read_ap_rep((cred.key.0, &cred.key.1), &ap_rep).unwrap();
    assert_eq!(ctime, now);
    assert_eq!(hex(&subkey.unwrap().1), field("key"));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

#[test]
fn ringshares_own_client_logs_on_with_a_ticket_from_the_credential_cache() {
    if !tools_or_skip("ringshares_own_client_logs_on_with_a_ticket_from_the_credential_cache") {
        return;
    }
    let kdc = Kdc::start();
    kdc.kinit();
    let server = kerberos_server(&kdc);
    // A service ticket for cifs/fs.rs.test in the cache, as `kvno` gets it.
    kdc.run("kvno", &["cifs/fs.rs.test"]);
    let target = format!("//fs.rs.test:{}/{}", server.port, server.share);
    let out = where_fs_rs_test_resolves(&kdc, &kdc.hosts_file(), ringshare_bin())
        .args(["bench", &target, "-U", "ignored%", "logon", "--kerberos"])
        .args(["--connections", "2", "--duration", "1s"])
        .output()
        .expect("run ringshare bench");
    let text = output_text(&out);
    assert!(out.status.success(), "{text}\n{}", server.log());
    assert!(
        text.contains("Kerberos (ticket for cifs/fs.rs.test)"),
        "{text}"
    );
    assert!(text.contains("errors 0"), "{text}");
    let logons = server.log().matches("Kerberos logon").count();
    assert!(
        logons >= 2,
        "the server logged {logons} Kerberos logons:\n{text}"
    );
}

/// MIT's IAKerb initiator (tests/py/iakerb_init.py) as a [`TokenSource`]: each server token is
/// written to it, each of its tokens read back; it knows the realm's name and the user's
/// password, no KDC.
struct MitIakerb {
    child: Child,
    out: std::io::BufReader<std::process::ChildStdout>,
    key: Option<Vec<u8>>,
    /// Tokens it made.
    tokens: usize,
}

impl MitIakerb {
    /// The initiator for `principal`, with a krb5.conf in `dir` that names `realm` for
    /// fs.rs.test and no KDC at all.
    fn start(dir: &Path, principal: &str, realm: &str) -> MitIakerb {
        MitIakerb::start_with(dir, principal, realm, PASSWORD)
    }

    /// [`MitIakerb::start`] with another `password`.
    fn start_with(dir: &Path, principal: &str, realm: &str, password: &str) -> MitIakerb {
        let conf = dir.join(format!("krb5-iakerb-{realm}.conf"));
        std::fs::write(
            &conf,
            format!(
                "[libdefaults]\n default_realm = {realm}\n dns_lookup_realm = false\n \
                 dns_lookup_kdc = false\n rdns = false\n dns_canonicalize_hostname = false\n\
                 [domain_realm]\n fs.rs.test = {realm}\n"
            ),
        )
        .unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/iakerb_init.py");
        let mut child = Command::new("/usr/bin/python3")
            .arg(script)
            .args([principal, password, "cifs@fs.rs.test"])
            .env("KRB5_CONFIG", &conf)
            .env("KRB5CCNAME", "MEMORY:iakerb")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start iakerb_init.py");
        let out = std::io::BufReader::new(child.stdout.take().unwrap());
        MitIakerb {
            child,
            out,
            key: None,
            tokens: 0,
        }
    }

    fn line(&mut self) -> String {
        use std::io::BufRead;
        let mut l = String::new();
        self.out
            .read_line(&mut l)
            .expect("read from iakerb_init.py");
        l.trim().to_string()
    }
}

impl Drop for MitIakerb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ringshare_auth::gss::TokenSource for MitIakerb {
    fn step(
        &mut self,
        server_token: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, ringshare_auth::AuthError> {
        if let Some(t) = server_token {
            use std::io::Write;
            let stdin = self.child.stdin.as_mut().unwrap();
            writeln!(stdin, "{}", hex(t)).expect("write to iakerb_init.py");
        }
        let line = self.line();
        if line == "done" {
            let key = self.line();
            self.key = key.strip_prefix("key ").map(unhex);
            return Ok(None);
        }
        if line.is_empty() || line.starts_with("error") {
            return Err(ringshare_auth::AuthError::Kerberos(format!(
                "MIT's initiator: {line}"
            )));
        }
        self.tokens += 1;
        Ok(Some(unhex(&line)))
    }

    fn session_key(&self) -> Option<Vec<u8>> {
        self.key.clone()
    }
}

/// Log on to `server` through ringshare's client with the tokens `mit` makes, over SMB 3.1.1
/// signed, and connect to its share: Ok once the tree is connected, or the client's error.
fn iakerb_logon(
    server: &Server,
    mit: &std::sync::Arc<std::sync::Mutex<MitIakerb>>,
) -> Result<(), String> {
    use ringshare_client::{ClientConn, ClientOptions, Event};
    use std::io::{Read, Write};
    let relay: std::sync::Arc<std::sync::Mutex<dyn ringshare_auth::gss::TokenSource>> = mit.clone();
    let mut conn = ClientConn::new(ClientOptions {
        share_unc: format!("\\\\fs.rs.test\\{}", server.share),
        dialects: vec![ringshare_wire::consts::Dialect::SMB3_1_1],
        sign: true,
        relay: Some(ringshare_auth::gss::Relay(relay)),
        ..ClientOptions::default()
    });
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let (mut out, mut events) = (Vec::new(), Vec::new());
    loop {
        conn.take_output(&mut out);
        sock.write_all(&out).map_err(|e| e.to_string())?;
        let mut head = [0u8; 4];
        sock.read_exact(&mut head).map_err(|e| e.to_string())?;
        let mut frame = vec![0u8; u32::from_be_bytes(head) as usize & 0xff_ffff];
        sock.read_exact(&mut frame).map_err(|e| e.to_string())?;
        events.clear();
        conn.receive(&mut frame, &mut events)
            .map_err(|e| format!("{e:?}"))?;
        if events.contains(&Event::Ready) {
            return Ok(());
        }
    }
}

fn iakerb_tools_or_skip(test: &str) -> bool {
    if !tools_or_skip(test) {
        return false;
    }
    let gssapi = Command::new("/usr/bin/python3")
        .args(["-c", "import ctypes; ctypes.CDLL('libgssapi_krb5.so.2')"])
        .status()
        .is_ok_and(|s| s.success());
    if !gssapi {
        eprintln!("\n!!!!!!!! SKIPPED {test}: needs python3 and libgssapi-krb5-2 !!!!!!!!\n");
    }
    gssapi
}

#[test]
fn mits_iakerb_initiator_with_only_a_password_logs_on_through_the_server_which_relays_to_the_kdc() {
    if !iakerb_tools_or_skip(
        "mits_iakerb_initiator_with_only_a_password_logs_on_through_the_server_which_relays_to_the_kdc",
    ) {
        return;
    }
    let kdc = Kdc::start();
    // As Active Directory does: the first AS-REQ is answered PREAUTH_REQUIRED.
    kdc.admin(&format!("modprinc +requires_preauth {USER}"));
    let krb5_conf = kdc.dir.path().join("krb5.conf").display().to_string();
    let server = kerberos_server_with(&kdc, vec![("KRB5_CONFIG".into(), krb5_conf)]);
    let mit = std::sync::Arc::new(std::sync::Mutex::new(MitIakerb::start(
        kdc.dir.path(),
        &format!("{USER}@{REALM}"),
        REALM,
    )));
    let logon = iakerb_logon(&server, &mit);
    let log = server.log();
    assert_eq!(logon, Ok(()), "{log}");
    let mit = mit.lock().unwrap();
    assert_eq!(
        mit.tokens, 4,
        "AS-REQ, AS-REQ with pre-authentication, TGS-REQ, AP-REQ"
    );
    assert!(
        mit.key.as_ref().is_some_and(|k| k.len() == 32),
        "no AES-256 session key from MIT's initiator"
    );
    assert!(
        log.contains("Kerberos logon") && log.contains(&format!("{USER}@{REALM}")),
        "{log}"
    );
    // The KDC saw the requests, from the server.
    let kdc_log = std::fs::read_to_string(kdc.dir.path().join("kdc.log")).unwrap();
    assert!(
        kdc_log.contains("AS_REQ") && kdc_log.contains("TGS_REQ"),
        "{kdc_log}"
    );
    assert!(
        kdc_log.contains("PREAUTH_REQUIRED")
            || kdc_log.contains("Additional pre-authentication required"),
        "{kdc_log}"
    );
}

#[test]
fn an_iakerb_client_asking_for_another_realms_kdc_is_refused_and_nothing_is_relayed() {
    if !iakerb_tools_or_skip(
        "an_iakerb_client_asking_for_another_realms_kdc_is_refused_and_nothing_is_relayed",
    ) {
        return;
    }
    let kdc = Kdc::start();
    let krb5_conf = kdc.dir.path().join("krb5.conf").display().to_string();
    let server = kerberos_server_with(&kdc, vec![("KRB5_CONFIG".into(), krb5_conf)]);
    let mit = std::sync::Arc::new(std::sync::Mutex::new(MitIakerb::start(
        kdc.dir.path(),
        &format!("{USER}@ELSEWHERE.TEST"),
        "ELSEWHERE.TEST",
    )));
    let logon = iakerb_logon(&server, &mit);
    assert!(
        logon.as_ref().is_err_and(|e| e.contains("LOGON_FAILURE")),
        "{logon:?}"
    );
    let log = server.log();
    assert!(
        log.contains("a KDC of realm \"ELSEWHERE.TEST\"; only its own realm RS.TEST is relayed"),
        "{log}"
    );
    assert!(
        log.contains("authentication failed from 127.0.0.1"),
        "{log}"
    );
    let kdc_log = std::fs::read_to_string(kdc.dir.path().join("kdc.log")).unwrap_or_default();
    assert!(!kdc_log.contains("AS_REQ"), "{kdc_log}");
}

/// A standalone server with the built-in KDC (`local kdc = yes`, realm FS from `netbios name`):
/// no krb5kdc runs, the user was added with `ringshare user add`, and `import` imported.
fn local_kdc_server(import: Option<PathBuf>) -> Server {
    Server::start(
        &ServerConfig {
            extra_global: "\tnetbios name = FS\n\tlocal kdc = yes\n\tfailed logon backoff = 1\n",
            import_users: import,
            ..Default::default()
        },
        |_| {},
    )
}

/// MIT's IAKerb initiator for `user@FS` with `password` logs on to `server`.
fn local_kdc_logon(server: &Server, user: &str, password: &str) -> (Result<(), String>, usize) {
    let dir = TempDir::new("iakerb-local");
    let mit = std::sync::Arc::new(std::sync::Mutex::new(MitIakerb::start_with(
        dir.path(),
        &format!("{user}@FS"),
        "FS",
        password,
    )));
    let logon = iakerb_logon(server, &mit);
    let tokens = mit.lock().unwrap().tokens;
    (logon, tokens)
}

#[test]
fn a_local_user_gets_a_ticket_through_iakerb_without_a_kdc() {
    if !iakerb_tools_or_skip("a_local_user_gets_a_ticket_through_iakerb_without_a_kdc") {
        return;
    }
    let server = local_kdc_server(None);
    let (logon, tokens) = local_kdc_logon(&server, USER, PASSWORD);
    let log = server.log();
    assert_eq!(logon, Ok(()), "{log}");
    assert_eq!(
        tokens, 4,
        "AS-REQ, AS-REQ with pre-authentication, TGS-REQ, AP-REQ"
    );
    assert!(log.contains("local KDC: realm FS"), "{log}");
    assert!(
        log.contains("Kerberos logon") && log.contains(&format!("{USER}@FS")),
        "{log}"
    );
    // A second logon works the same (the KDC's keys and the replay cache hold).
    let (again, _) = local_kdc_logon(&server, USER, PASSWORD);
    assert_eq!(again, Ok(()), "{}", server.log());
}

#[test]
fn a_wrong_password_at_the_local_kdc_is_a_failed_logon_with_its_log_line() {
    if !iakerb_tools_or_skip(
        "a_wrong_password_at_the_local_kdc_is_a_failed_logon_with_its_log_line",
    ) {
        return;
    }
    let server = local_kdc_server(None);
    let (logon, _) = local_kdc_logon(&server, USER, "Not-The-Password");
    assert!(
        logon.as_ref().is_err_and(|e| e.contains("LOGON_FAILURE")),
        "{logon:?}"
    );
    let log = server.log();
    assert!(
        log.contains("authentication failed from 127.0.0.1")
            && log.contains(&format!(
                "wrong password for {USER}@FS (pre-authentication failed)"
            )),
        "{log}"
    );
    // An unknown user too; the failure before counts toward `failed logon backoff = 1` as an
    // NTLM failure does: this answer waits half a second at least.
    let t = Instant::now();
    let (logon, _) = local_kdc_logon(&server, "nobody-here", PASSWORD);
    let took = t.elapsed();
    assert!(logon.is_err(), "{logon:?}");
    let log = server.log();
    assert!(log.contains("unknown user nobody-here@FS"), "{log}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
}

#[test]
fn a_user_imported_without_aes_keys_is_told_to_set_the_password_again() {
    if !iakerb_tools_or_skip("a_user_imported_without_aes_keys_is_told_to_set_the_password_again") {
        return;
    }
    let tmp = TempDir::new("iakerb-import");
    let listing = tmp.path().join("users.txt");
    std::fs::write(
        &listing,
        format!(
            "rsimported:1500:{}:8846F7EAEE8FB117AD06BDD830B7586C:[U          ]:LCT-6563A1B2:\n",
            "X".repeat(32)
        ),
    )
    .unwrap();
    let server = local_kdc_server(Some(listing));
    let (logon, _) = local_kdc_logon(&server, "rsimported", "password");
    assert!(logon.is_err(), "{logon:?}");
    let log = server.log();
    assert!(
        log.contains("has no AES Kerberos keys") && log.contains("ringshare user add rsimported"),
        "{log}"
    );
}

#[test]
fn a_reload_turns_the_local_kdc_on_and_off() {
    if !iakerb_tools_or_skip("a_reload_turns_the_local_kdc_on_and_off") {
        return;
    }
    let server = Server::start(
        &ServerConfig {
            extra_global: "\tnetbios name = FS\n",
            ..Default::default()
        },
        |_| {},
    );
    let (logon, _) = local_kdc_logon(&server, USER, PASSWORD);
    assert!(logon.is_err(), "{logon:?}");
    let reload = |local: &str| {
        let conf = std::fs::read_to_string(server.conf()).unwrap();
        let conf = conf.replace("\tlocal kdc = yes\n", "").replacen(
            "[global]\n",
            &format!("[global]\n\tlocal kdc = {local}\n"),
            1,
        );
        std::fs::write(server.conf(), conf).unwrap();
        let out = Command::new(ringshare_bin())
            .args(["reload", "--socket"])
            .arg(server.control_socket())
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let summary = reload("yes");
    assert!(
        summary.contains("Kerberos: realm FS, built-in KDC"),
        "{summary}"
    );
    let (logon, _) = local_kdc_logon(&server, USER, PASSWORD);
    assert_eq!(logon, Ok(()), "{}", server.log());
    reload("no");
    let (logon, _) = local_kdc_logon(&server, USER, PASSWORD);
    assert!(logon.is_err(), "{logon:?}");
}

/// smbtorture binds IPC$'s srvsvc pipe with DCE-style Kerberos (auth type 16, Debian's Samba
/// over MIT GSS) at packet integrity and at privacy, with a ticket for host/fs.rs.test: the
/// BIND's AP-REQ is answered with an AP-REP, the AUTH3's AP-REP is checked, and every request and
/// response carries an RFC 4121 MIC or a DCE-style Wrap token (a bind_nak on main).
#[test]
fn smbtorture_binds_a_pipe_with_dce_style_kerberos_signed_and_sealed() {
    let test = "smbtorture_binds_a_pipe_with_dce_style_kerberos_signed_and_sealed";
    if !tools_or_skip(test) || !smbtorture_or_skip(test) {
        return;
    }
    let kdc = Kdc::start();
    // Samba's DCE/RPC client asks for a ticket to host/NAME.
    kdc.admin("addprinc -randkey host/fs.rs.test");
    kdc.admin(&format!(
        "ktadd -k {} host/fs.rs.test",
        kdc.keytab().display()
    ));
    kdc.kinit();
    let server = kerberos_server(&kdc);
    let hosts = kdc.hosts_file();
    let t = Instant::now();
    for protection in ["sign", "seal"] {
        let mut c = where_fs_rs_test_resolves(&kdc, &hosts, "timeout");
        c.args(["60", "smbtorture"])
            .arg("-s")
            .arg(server.client_conf())
            .arg(format!("ncacn_np:fs.rs.test[krb5,{protection}]"))
            .arg(format!("--option=smb ports={}", server.port))
            .arg(format!("-U{USER}%{PASSWORD}"))
            .args(["--use-kerberos=required", "-d", "3"])
            .arg("rpc.srvsvc.srvsvc (admin access).NetSrvGetInfo")
            .stdin(Stdio::null());
        let out = c.output().expect("run smbtorture");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            text.lines().any(|l| l.starts_with("success: ")) && !text.contains("failure: "),
            "[{protection}] {text}\n{}",
            server.log()
        );
        // The association was Kerberos, at integrity (5) or privacy (6).
        let level = if protection == "sign" { 5 } else { 6 };
        let line =
            format!("association authenticated (Kerberos) user={USER}@{REALM} level={level}");
        assert!(
            server.log().contains(&line),
            "no {line:?}:\n{}",
            server.log()
        );
    }
    eprintln!(
        "[{test}] srvsvc signed and sealed over Kerberos in {:?}",
        t.elapsed()
    );
}
