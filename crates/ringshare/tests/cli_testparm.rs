//! `ringshare testparm`: the binary on Debian's stock smb.conf, on the configurations the tests
//! serve with, on refused files, and on its own output.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{ringshare_bin, Server, ServerConfig, TempDir, NOBODY};
use ringshare::config;

/// Debian's stock smb.conf as samba-common installs it (copied to /etc/samba/smb.conf on a
/// fresh install).
const DEBIAN_STOCK: &str = "/usr/share/samba/smb.conf";

/// The settings of that file, checked in for machines without Samba.
fn debian_copy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debian12-smb.conf")
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// `ringshare testparm ARGS` with HOME and XDG_STATE_HOME in `home`; as root, run as `nobody`
/// (no groups): testparm needs no privilege.
fn testparm(home: &Path, args: &[&Path]) -> Run {
    let root = rustix::process::geteuid().is_root();
    let mut cmd = if root {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"))
            .args(["--clear-groups", "--", ringshare_bin()]);
        c
    } else {
        Command::new(ringshare_bin())
    };
    let out: Output = cmd
        .arg("testparm")
        .args(args)
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join("state"))
        .stdin(Stdio::null())
        .output()
        .expect("run ringshare testparm");
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The 1-based number of the first line of `text` whose setting is `key` (`key =`).
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.split_once('=')
                .is_some_and(|(k, _)| k.trim() == key && !l.trim_start().starts_with(['#', ';']))
        })
        .map(|i| i + 1)
        .unwrap_or_else(|| panic!("no '{key}' in the file"))
}

/// What testparm must say of Debian's stock file, copied into a fresh directory.
fn check_debian_file(original: &Path) {
    let tmp = TempDir::new("testparm-debian");
    let conf = tmp.path().join("smb.conf");
    std::fs::copy(original, &conf).expect("copy the smb.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    let run = testparm(tmp.path(), &[&conf]);
    let (err, out) = (&run.stderr, &run.stdout);
    let at = |key: &str| {
        format!(
            "{}:{}: '{key}' ignored: ",
            conf.display(),
            line_of(&text, key)
        )
    };
    for key in [
        "log file",
        "max log size",
        "logging",
        "panic action",
        "obey pam restrictions",
        "unix password sync",
        "passwd program",
        "passwd chat",
        "pam password change",
        "usershare allow guests",
    ] {
        assert!(err.contains(&at(key)), "{key} not listed:\n{err}");
    }
    assert!(err.contains("ringshare logs to standard error"), "{err}");
    assert!(err.contains("section [printers] is not supported"), "{err}");
    assert!(err.contains("section [print$] is not supported"), "{err}");
    assert!(
        err.contains(&format!(
            "{}:{}: 'printable' in [printers] ignored",
            conf.display(),
            line_of(&text, "printable")
        )),
        "{err}"
    );
    assert!(
        !err.contains("'server role'"),
        "supported, not listed:\n{err}"
    );
    assert!(
        !err.contains("'map to guest'"),
        "supported, not listed:\n{err}"
    );
    // The only share section is [homes], which `serve` serves as Samba does.
    assert!(run.ok, "{err}");
    // The effective settings, defaults included.
    for line in [
        "[global]",
        "\tworkgroup = WORKGROUP",
        "\tmap to guest = bad user",
        "\tserver min protocol = SMB2_02",
        "\tserver max protocol = SMB3_11",
        "\tserver signing = default",
        "\tlisten = 0.0.0.0:445",
        "\tuse sendfile = yes",
        "\tdeadtime = 15",
        "\twsd = yes",
        "[homes]",
        "\tpath = %H",
        "\tcomment = Home Directories",
        "\tbrowseable = no",
        "\tread only = yes",
        "\tcreate mask = 0700",
        "\tdirectory mask = 0700",
        "\tvalid users = %S",
        "\tvfs objects = streams_xattr",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} missing:\n{out}");
    }
    assert!(
        !out.contains("[printers]") && !out.contains("[print$]"),
        "{out}"
    );
    assert!(
        !tmp.path().join("state").exists(),
        "testparm wrote the default smbpasswd file (or its directory)"
    );

    // With a share added, the same file is accepted.
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let more = format!("{text}\n[data]\n   path = {}\n", data.display());
    std::fs::write(&conf, more).unwrap();
    let run = testparm(tmp.path(), &[&conf]);
    assert!(run.ok, "{}", run.stderr);
    assert!(run
        .stdout
        .contains(&format!("[data]\n\tpath = {}\n", data.display())));
    assert!(run.stderr.contains("1 share and [homes]"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_dir(&data).unwrap().count(),
        0,
        "nothing made in the share"
    );
}

#[test]
fn testparm_lists_what_ringshare_ignores_in_debians_stock_smb_conf_and_shows_its_homes() {
    if Path::new(DEBIAN_STOCK).exists() {
        check_debian_file(Path::new(DEBIAN_STOCK));
    } else {
        eprintln!(
            "{DEBIAN_STOCK} is missing (samba-common not installed); the checked-in copy only"
        );
    }
    check_debian_file(&debian_copy());
}

#[test]
fn the_checked_in_copy_of_debians_smb_conf_holds_the_stock_files_settings() {
    let Ok(stock) = std::fs::read_to_string(DEBIAN_STOCK) else {
        eprintln!("SKIPPED: {DEBIAN_STOCK} is missing (apt-get install -y samba-common)");
        return;
    };
    let settings = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with(['#', ';']))
            .map(String::from)
            .collect()
    };
    let copy = std::fs::read_to_string(debian_copy()).unwrap();
    assert_eq!(settings(&copy), settings(&stock));
}

#[test]
fn testparm_accepts_the_configuration_the_interop_tests_serve_with_and_names_no_line() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    // Server::start writes its configuration next to the share directory.
    let conf = server.share_dir.parent().unwrap().join("ringshare.conf");
    let tmp = TempDir::new("testparm-interop");
    let run = testparm(tmp.path(), &[&conf]);
    assert!(run.ok, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("1 share; 0 lines ringshare does not act on"),
        "{}",
        run.stderr
    );
    let expected = format!(
        "[share]\n\tpath = {}\n\tcomment = ringshare interop share\n\tread only = no\n",
        server.share_dir.display()
    );
    assert!(run.stdout.contains(&expected), "{}", run.stdout);
    assert!(run
        .stdout
        .contains(&format!("\tlisten = 127.0.0.1:{}\n", server.port)));
    assert!(run.stdout.contains("\tlog level = 2\n"), "{}", run.stdout);
}

#[test]
fn testparm_output_loads_back_to_the_same_settings() {
    let tmp = TempDir::new("testparm-round-trip");
    let dir = tmp.path();
    for d in ["data", "mac", "acl"] {
        std::fs::create_dir(dir.join(d)).unwrap();
    }
    let conf = dir.join("smb.conf");
    std::fs::write(
        &conf,
        "[global]\n\
         workgroup = office\n\
         server string = Office files\n\
         listen = 127.0.0.1:4450, [::1]:4450\n\
         interfaces = lo eth0\n\
         server min protocol = SMB3\n\
         server signing = mandatory\n\
         server smb encrypt = desired\n\
         map to guest = bad user\n\
         smb passwd file = users/smbpasswd\n\
         deadtime = 0\n\
         smb2 max read = 1M\n\
         zerocopy send = no\n\
         log level = 3 auth:5\n\
         realm = example.com\n\
         kerberos method = dedicated keytab\n\
         dedicated keytab file = FILE:krb5.keytab\n\
         kerberos encryption types = all\n\
         read only = no\n\
         valid users = alice, \"Domain Users\" @staff\n\
         [data]\n\
         path = data\n\
         comment = The data; kept\n\
         force user = alice\n\
         force group = +staff\n\
         create mask = 0640\n\
         inherit owner = unix only\n\
         smb encrypt = required\n\
         durable handles = no\n\
         posix locking = no\n\
         [mac]\n\
         path = mac\n\
         vfs objects = catia fruit streams_xattr\n\
         fruit:time machine = yes\n\
         fruit:time machine max size = 2T\n\
         fruit:metadata = stream\n\
         [acl]\n\
         path = acl\n\
         vfs objects = acl_xattr\n\
         guest ok = yes\n\
         browseable = no\n\
         [homes]\n\
         read only = yes\n",
    )
    .unwrap();
    let run = testparm(dir, &[&conf]);
    assert!(run.ok, "{}", run.stderr);
    // catia is the one thing ringshare does not act on here.
    assert!(
        run.stderr.contains(&format!(
            "{}:33: vfs module 'catia' ignored",
            conf.display()
        )),
        "{}",
        run.stderr
    );
    let printed = dir.join("printed.conf");
    std::fs::write(&printed, &run.stdout).unwrap();
    let original = config::load(&conf).unwrap();
    let back = config::load(&printed).unwrap_or_else(|e| panic!("{e}\n{}", run.stdout));
    assert_eq!(back.global, original.global);
    assert_eq!(back.shares, original.shares);
    assert_eq!(back.homes, original.homes);
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
    assert!(back.ignored.is_empty(), "{:?}", back.ignored);
    assert!(
        run.stdout
            .contains("\tvalid users = alice \"Domain Users\" @staff\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\tposix locking = no\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\trealm = EXAMPLE.COM\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("\tkerberos encryption types = all\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(&format!(
            "\t# Kerberos: on, keytab {}\n",
            dir.join("krb5.keytab").display()
        )),
        "{}",
        run.stdout
    );
}

#[test]
fn testparm_refuses_what_serve_refuses_with_file_and_line() {
    let tmp = TempDir::new("testparm-refused");
    std::fs::create_dir(tmp.path().join("data")).unwrap();
    let conf = tmp.path().join("smb.conf");
    std::fs::write(
        &conf,
        "[global]\n  workgroup = x\n  hosts allow = 10.0.0.0/8\n[data]\n  path = data\n",
    )
    .unwrap();
    let run = testparm(tmp.path(), &[&conf]);
    assert!(!run.ok);
    assert!(
        run.stderr.contains(&format!(
            "ringshare testparm: {}:3: option 'hosts allow' host filtering is not supported",
            conf.display()
        )),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);

    std::fs::write(&conf, "[data]\n  path = missing\n").unwrap();
    let run = testparm(tmp.path(), &[&conf]);
    assert!(!run.ok);
    assert!(run.stderr.contains(":2: path "), "{}", run.stderr);
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);

    std::fs::write(
        &conf,
        "[global]\n  kerberos method = magic\n[data]\n  path = data\n",
    )
    .unwrap();
    let run = testparm(tmp.path(), &[&conf]);
    assert!(!run.ok);
    assert!(
        run.stderr.contains(":2: 'kerberos method' is one of"),
        "{}",
        run.stderr
    );

    let run = testparm(tmp.path(), &[&tmp.path().join("nope.conf")]);
    assert!(!run.ok);
    assert!(
        run.stderr.contains("cannot read configuration file"),
        "{}",
        run.stderr
    );
}
