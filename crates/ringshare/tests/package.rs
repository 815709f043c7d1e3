//! The Debian package (scripts/build-deb.sh): built, installed with dpkg, its unit verified by
//! systemd-analyze, the installed server run as its unit runs it (the unit's capability bounding
//! set, no new privileges, a notification socket), then removed and purged without a trace.
//!
//! It installs a system package, so it runs only where that is wanted: with `CI` set (CI runs
//! as root in a throwaway container) or `RINGSHARE_TEST_PACKAGE=1`; and only as root. It
//! packages the test build (`build-deb.sh --profile dev`, the binary cargo built for these
//! tests): what it checks is the packaging, and a release build of its own took CI 3-4 minutes.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, SystemTime};

use common::{ensure_unix_account, wait_within, TempDir};
use rustix::process::{kill_process, Pid, Signal};

const TEST: &str = "the_package_installs_verifies_and_removes_cleanly";
const BIN: &str = "/usr/sbin/ringshare";
const CONF: &str = "/etc/ringshare/smb.conf";
const UNIT: &str = "/lib/systemd/system/ringshare.service";
const STATE: &str = "/var/lib/ringshare";
/// The SMB user the real run logs on as, and another account owning files it touches.
const USER: &str = "rspkguser";
const OTHER: &str = "rspkgother";
const PASSWORD: &str = "Package-Pass-1";

fn skip(why: &str) {
    eprintln!("\n!!!!!!!! SKIPPED {TEST}: {why} !!!!!!!!\n");
}

fn run(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn run_ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        text(&out)
    );
    text(&out)
}

fn tool_present(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn installed() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "ringshare"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("installed"))
}

/// Purges the package however the test ends, so that no run leaves it installed.
struct Purge;

impl Drop for Purge {
    fn drop(&mut self) {
        if installed() || Path::new(CONF).exists() {
            let _ = Command::new("dpkg")
                .args(["-P", "ringshare"])
                .stdout(Stdio::null())
                .status();
        }
    }
}

#[test]
fn the_package_installs_verifies_and_removes_cleanly() {
    if std::env::var_os("CI").is_none() && std::env::var_os("RINGSHARE_TEST_PACKAGE").is_none() {
        skip("it installs a system package: set RINGSHARE_TEST_PACKAGE=1 (CI sets CI=true)");
        return;
    }
    if !rustix::process::geteuid().is_root() {
        skip("dpkg -i needs root (CI runs as root)");
        return;
    }
    for tool in [
        "dpkg-deb",
        "dpkg-shlibdeps",
        "systemd-analyze",
        "setpriv",
        "unshare",
        "nsenter",
        "ip",
        "smbclient",
        "smbcacls",
        "getfattr",
    ] {
        assert!(
            tool_present(tool),
            "{tool} is missing: scripts/install-deps.sh --test installs it"
        );
    }
    // Purging removes /var/lib/ringshare: never someone's real users file.
    assert!(
        !installed() && !Path::new(CONF).exists() && !Path::new(STATE).exists(),
        "ringshare is installed here or {STATE} exists: this test would replace and purge them"
    );

    let tmp = TempDir::new("package");
    let out_dir = tmp.path().join("out");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let build = run(Command::new(workspace.join("scripts/build-deb.sh"))
        .arg("--out")
        .arg(&out_dir)
        .args(["--profile", "dev"]));
    let built = text(&build);
    assert!(
        build.status.success(),
        "build-deb.sh: {}\n{built}",
        build.status
    );
    let stdout = String::from_utf8_lossy(&build.stdout);
    let deb = PathBuf::from(stdout.lines().last().expect("the script prints the .deb"));
    let arch = run_ok(Command::new("dpkg").arg("--print-architecture"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        deb,
        out_dir.join(format!("ringshare_{version}_{}.deb", arch.trim())),
        "{built}"
    );
    let info = run_ok(Command::new("dpkg-deb").arg("--info").arg(&deb));
    assert!(info.contains("Depends: libc6 (>= "), "{info}");

    let _purge = Purge;
    let install = run_ok(Command::new("dpkg").arg("-i").arg(&deb));
    // A fresh install does not start a server that has nothing to share.
    assert!(
        install.contains("systemctl enable --now ringshare"),
        "{install}"
    );
    let files: Vec<PathBuf> = run_ok(Command::new("dpkg").args(["-L", "ringshare"]))
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .collect();
    for f in [
        BIN,
        CONF,
        UNIT,
        "/usr/share/doc/ringshare/copyright",
        "/usr/share/doc/ringshare/README.md.gz",
    ] {
        assert!(files.contains(&PathBuf::from(f)), "{f} not in {files:?}");
    }
    let conffiles = run_ok(Command::new("dpkg-query").args(["-W", "-f=${Conffiles}", "ringshare"]));
    assert!(conffiles.contains(CONF), "{conffiles}");
    assert_eq!(
        run_ok(Command::new(BIN).arg("--version")).trim(),
        format!("ringshare {version}")
    );
    let bin_mode = std::fs::metadata(BIN).unwrap().permissions().mode();
    assert_eq!(bin_mode & 0o7777, 0o755);

    // The unit: systemd's own checks, warnings included (it works without systemd running;
    // it also checks that the ExecStart binary exists).
    let verify = run(Command::new("systemd-analyze").args(["verify", UNIT]));
    assert!(
        verify.status.success() && text(&verify).trim().is_empty(),
        "systemd-analyze verify {UNIT}: {}\n{}",
        verify.status,
        text(&verify)
    );

    default_configuration_is_valid_and_shares_nothing();

    // Installing again (the upgrade path of the maintainer scripts) keeps an edited conffile.
    let mut edited = std::fs::read_to_string(CONF).unwrap();
    edited.push_str("# edited by the admin\n");
    std::fs::write(CONF, &edited).unwrap();
    let again = run_ok(
        Command::new("dpkg")
            .args(["-i", "--force-confold"])
            .arg(&deb),
    );
    assert!(!again.contains("systemctl enable --now"), "{again}");
    assert_eq!(std::fs::read_to_string(CONF).unwrap(), edited);
    the_installed_server_runs_as_its_unit_runs_it(&tmp);

    // Remove: everything but the conffile goes; purge: that too, and the state directory.
    run_ok(Command::new("dpkg").args(["-r", "ringshare"]));
    for f in &files {
        if f != Path::new(CONF) {
            assert!(!f.exists(), "{} is left after dpkg -r", f.display());
        }
    }
    assert!(Path::new(CONF).exists(), "dpkg -r keeps the conffile");
    std::fs::create_dir_all(STATE).unwrap();
    std::fs::write(Path::new(STATE).join("smbpasswd"), "").unwrap();
    run_ok(Command::new("dpkg").args(["-P", "ringshare"]));
    for gone in [CONF, "/etc/ringshare", STATE] {
        assert!(!Path::new(gone).exists(), "{gone} is left after dpkg -P");
    }
    assert!(!installed(), "dpkg still knows ringshare after -P");
    let helper_state = Path::new("/var/lib/systemd/deb-systemd-helper-enabled");
    if let Ok(entries) = std::fs::read_dir(helper_state) {
        let left: Vec<_> = entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("ringshare"))
            .collect();
        assert!(left.is_empty(), "{left:?} is left after dpkg -P");
    }
}

/// The shipped configuration parses without a warning and shares nothing (the server refuses
/// to start); its commented example parses cleanly once uncommented.
fn default_configuration_is_valid_and_shares_nothing() {
    let out = run(Command::new(BIN).args(["serve", "--config", CONF]));
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("no shares configured"), "{said}");
    assert!(!said.contains("WARN"), "{said}");
    assert!(!Path::new(STATE).exists(), "a refused start wrote {STATE}");

    let tmp = TempDir::new("package-example");
    let shipped = std::fs::read_to_string(CONF).unwrap();
    let example: String = shipped
        .lines()
        .map(|l| l.strip_prefix(';').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("/srv/ringshare/shared", &tmp.path().display().to_string());
    let file = tmp.path().join("smb.conf");
    std::fs::write(&file, example).unwrap();
    let cfg = ringshare::config::load(&file).expect("the uncommented example parses");
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.shares
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["shared"]
    );
    assert!(cfg.homes.is_some());
    assert_eq!(
        cfg.global.smb_passwd_file,
        PathBuf::from("/var/lib/ringshare/smbpasswd")
    );
}

fn uid_of(name: &str) -> u32 {
    run_ok(Command::new("id").args(["-u", name]))
        .trim()
        .parse()
        .unwrap()
}

/// The unit's `CapabilityBoundingSet=` as setpriv's `--bounding-set` argument.
fn unit_bounding_set() -> String {
    let unit = std::fs::read_to_string(UNIT).unwrap();
    let caps: Vec<String> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .flat_map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert!(!caps.is_empty(), "no CapabilityBoundingSet= in {UNIT}");
    assert!(unit.contains("\nNoNewPrivileges=yes\n"));
    format!("-all,{}", caps.join(","))
}

/// The server as systemd starts it: the installed binary, root with the unit's bounding set
/// and no new privileges, `NOTIFY_SOCKET` set; here in a network namespace of its own, so that
/// it takes port 445 (CAP_NET_BIND_SERVICE) and smbcacls, which knows no other port, reaches
/// it. A real user then logs on and works; each step needs one of the unit's capabilities.
fn the_installed_server_runs_as_its_unit_runs_it(tmp: &TempDir) {
    ensure_unix_account(USER);
    ensure_unix_account(OTHER);
    let (user, other) = (uid_of(USER), uid_of(OTHER));
    let base = tmp.path().join("run");
    let dir = |name: &str, owner: u32, mode: u32| {
        let d = base.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(owner), None).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    };
    let file = |path: PathBuf, owner: u32, mode: u32| {
        std::fs::write(&path, "x\n").unwrap();
        std::os::unix::fs::chown(&path, Some(owner), None).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    dir("", 0, 0o755);
    let files = dir("files", user, 0o755);
    let inherit = dir("inherit", other, 0o777);
    let ntacl = dir("ntacl", user, 0o755);
    let read_only = file(files.join("read-only.txt"), user, 0o444);
    let others = file(files.join("others.txt"), other, 0o666);
    let acl_file = file(ntacl.join("acl.txt"), user, 0o666);
    let conf = base.join("smb.conf");
    std::fs::write(
        &conf,
        format!(
            "[global]\nlisten = 127.0.0.1:445\nsmb passwd file = {}\nlog level = 1\n\
             multicast dns register = no\ncontrol socket = {}\n\
             [files]\npath = {}\nread only = no\n\
             [inherit]\npath = {}\nread only = no\ninherit owner = yes\n\
             [ntacl]\npath = {}\nread only = no\nvfs objects = acl_xattr\n",
            base.join("smbpasswd").display(),
            base.join("control.sock").display(),
            files.display(),
            inherit.display(),
            ntacl.display()
        ),
    )
    .unwrap();
    let mut add = Command::new(BIN)
        .args(["user", "add", USER, "--password-stdin", "--config"])
        .arg(&conf)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = add.stdin.take().unwrap();
        writeln!(stdin, "{PASSWORD}\n{PASSWORD}").unwrap();
    }
    let added = add.wait_with_output().unwrap();
    assert!(added.status.success(), "{}", text(&added));

    let notify_path = base.join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let log = base.join("serve.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut server = Command::new("unshare")
        .args([
            "-n",
            "sh",
            "-c",
            "ip link set lo up && exec \"$0\" \"$@\"",
            "setpriv",
        ])
        .arg(format!("--bounding-set={}", unit_bounding_set()))
        .args(["--no-new-privs", "--", BIN, "serve", "--config"])
        .arg(&conf)
        .env("NOTIFY_SOCKET", &notify_path)
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let server_log = || std::fs::read_to_string(&log).unwrap_or_default();
    let mut buf = [0u8; 4096];
    let ready = notify.recv(&mut buf).map(|n| buf[..n].to_vec());
    let Ok(ready) = ready else {
        stop(&mut server);
        panic!("no READY=1 from the installed server:\n{}", server_log());
    };
    let ready = String::from_utf8_lossy(&ready).into_owned();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
        let status = std::fs::read_to_string(format!("/proc/{}/status", server.id())).unwrap();
        let bounding = status
            .lines()
            .find_map(|l| l.strip_prefix("CapBnd:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap();
        // CAP_SETUID (7) kept, CAP_SYS_MODULE (16) and CAP_SYS_PTRACE (19) gone.
        assert_eq!(
            bounding & (1 << 7 | 1 << 16 | 1 << 19),
            1 << 7,
            "{bounding:x}"
        );
        let client_conf = base.join("client.conf");
        std::fs::write(&client_conf, "[global]\n\tclient min protocol = SMB2_02\n").unwrap();
        let smb = |tool: &str, share: &str| {
            let mut c = Command::new("nsenter");
            c.args(["-t", &server.id().to_string(), "-n", tool])
                .arg(format!("//127.0.0.1/{share}"))
                .arg("-s")
                .arg(&client_conf)
                .args(["--use-kerberos=off", "-U", &format!("{USER}%{PASSWORD}")]);
            c
        };
        let upload = base.join("upload.txt");
        std::fs::write(&upload, "from the client\n").unwrap();
        // CAP_SETUID/CAP_SETGID: the write is the user's.
        run_ok(smb("smbclient", "files").arg("-c").arg(format!(
            "put {} new.txt; setmode read-only.txt +h; \
             utimes others.txt -1 -1 \"2020:01:01-00:00:00\" -1",
            upload.display()
        )));
        let new = std::fs::metadata(files.join("new.txt")).expect("the upload arrived");
        assert_eq!(new.uid(), user, "the uploaded file belongs to the user");
        // CAP_DAC_OVERRIDE: the owner of a mode 0444 file sets its DOS attributes.
        let attrs = run_ok(
            Command::new("getfattr")
                .args(["-n", "user.DOSATTRIB"])
                .arg(&read_only),
        );
        assert!(attrs.contains("user.DOSATTRIB"), "{attrs}");
        // CAP_FOWNER: times of another account's file, for an open granted
        // FILE_WRITE_ATTRIBUTES.
        let mtime = std::fs::metadata(&others).unwrap().modified().unwrap();
        let y2020 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800);
        assert_eq!(mtime, y2020, "{}", server_log());
        // CAP_CHOWN: `inherit owner`.
        run_ok(
            smb("smbclient", "inherit")
                .arg("-c")
                .arg(format!("put {} given.txt", upload.display())),
        );
        let given = std::fs::metadata(inherit.join("given.txt")).unwrap();
        assert_eq!(given.uid(), other, "inherit owner gives the file away");
        // CAP_SYS_ADMIN: `acl_xattr` keeps the NT ACL in security.NTACL.
        let acl = format!(
            "ACL:S-1-22-1-{other}:DENIED/0x0/READ,ACL:S-1-22-1-{user}:ALLOWED/0x0/FULL,\
             ACL:S-1-1-0:ALLOWED/0x0/READ"
        );
        run_ok(smb("smbcacls", "ntacl").args(["--numeric", "acl.txt", "--set", &acl]));
        let stored = run_ok(
            Command::new("getfattr")
                .args(["-n", "security.NTACL"])
                .arg(&acl_file),
        );
        assert!(stored.contains("security.NTACL"), "{stored}");
        // The unit's ExecReload and an admin's status, with the installed binary:
        // RELOADING=1, then READY=1.
        let socket = base.join("control.sock");
        let reloaded = run_ok(Command::new(BIN).arg("reload").arg("--socket").arg(&socket));
        assert!(reloaded.contains("shares added: none"), "{reloaded}");
        let mut msgs = String::new();
        for _ in 0..2 {
            if let Ok(n) = notify.recv(&mut buf) {
                msgs.push_str(&String::from_utf8_lossy(&buf[..n]));
                msgs.push('\n');
            }
        }
        assert!(
            msgs.contains("RELOADING=1") && msgs.contains("READY=1"),
            "{msgs:?}"
        );
        let st = run_ok(Command::new(BIN).arg("status").arg("--socket").arg(&socket));
        assert!(st.contains("connection(s)"), "{st}");
    }));
    let pid = Pid::from_child(&server);
    let _ = kill_process(pid, Signal::TERM);
    let stopping = notify.recv(&mut buf).map(|n| buf[..n].to_vec());
    let status = wait_within(&mut server, Duration::from_secs(10));
    if let Err(e) = result {
        eprintln!("--- server output ---\n{}", server_log());
        std::panic::resume_unwind(e);
    }
    let stopping = String::from_utf8_lossy(&stopping.unwrap_or_default()).into_owned();
    assert!(stopping.lines().any(|l| l == "STOPPING=1"), "{stopping:?}");
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        server_log()
    );
}

fn stop(child: &mut Child) {
    let _ = kill_process(Pid::from_child(child), Signal::TERM);
    wait_within(child, common::STOP_GRACE);
}
