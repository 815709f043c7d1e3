//! A KDC for RS.TEST (MIT krb5-kdc in a temp dir, realm RS.TEST, principal `cifs/fs.rs.test`,
//! a keytab written by `kadmin.local ktadd`) for the tests that log on with Kerberos, and a
//! runner for clients that cannot be given an address (fs.rs.test resolves in a private mount
//! namespace).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::*;

pub const REALM: &str = "RS.TEST";

/// A KDC for RS.TEST on a free loopback port, its service's keys in [`Kdc::keytab`]; stopped on
/// drop.
pub struct Kdc {
    pub dir: TempDir,
    child: Child,
}

impl Drop for Kdc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Kdc {
    pub fn start() -> Kdc {
        let dir = TempDir::new("krb5");
        Self::write_confs(dir.path(), free_port());
        std::fs::write(dir.path().join("kadm5.acl"), "").unwrap();
        let mut kdc = Kdc {
            child: Command::new("true").spawn().unwrap(),
            dir,
        };
        kdc.run(
            "kdb5_util",
            &["create", "-s", "-r", REALM, "-P", "master-pw-1"],
        );
        kdc.admin(&format!("addprinc -pw {PASSWORD} {USER}"));
        kdc.admin("addprinc -randkey cifs/fs.rs.test");
        let _ = kdc.child.wait();
        // Another test may take the port between its choice and the KDC's bind: then the KDC
        // exits, and it is started again on another.
        for attempt in 0.. {
            let port = free_port();
            Self::write_confs(kdc.dir.path(), port);
            kdc.child = kdc
                .env(&mut Command::new("krb5kdc"))
                .args(["-n", "-r", REALM])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start krb5kdc");
            if kdc.listening(port) {
                break;
            }
            let _ = kdc.child.kill();
            let _ = kdc.child.wait();
            assert!(attempt < 5, "krb5kdc did not start");
        }
        kdc.ktadd(&kdc.keytab());
        kdc
    }

    /// Whether the KDC answers on `port` within 10 s (false when it exited).
    pub fn listening(&mut self, port: u16) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return false;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// krb5.conf and kdc.conf for a KDC on `port`.
    pub fn write_confs(dir: &Path, port: u16) {
        let d = dir.display().to_string();
        std::fs::write(
            dir.join("krb5.conf"),
            format!(
                "[libdefaults]\n default_realm = {REALM}\n dns_lookup_realm = false\n \
                 dns_lookup_kdc = false\n rdns = false\n dns_canonicalize_hostname = false\n \
                 udp_preference_limit = 1\n \
                 allow_rc4 = true\n\
                 [realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n\
                 [domain_realm]\n fs.rs.test = {REALM}\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("kdc.conf"),
            format!(
                "[kdcdefaults]\n kdc_ports = {port}\n kdc_tcp_ports = {port}\n\
                 [realms]\n {REALM} = {{\n  database_name = {d}/principal\n  \
                 key_stash_file = {d}/stash\n  acl_file = {d}/kadm5.acl\n  max_life = 10h\n  \
                 supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n }}\n\
                 [logging]\n kdc = FILE:{d}/kdc.log\n"
            ),
        )
        .unwrap();
    }

    /// Make `cifs/fs.rs.test` an account with an RC4-HMAC key only, as an old domain's
    /// computer account: its tickets are then RC4-encrypted, their session keys too when
    /// `rc4_session` (MIT 1.20 issues RC4 session keys only with `allow_rc4`, set in
    /// krb5.conf, and for a service whose `session_enctypes` says so; otherwise AES-256). The
    /// new key (the next kvno) is added to the keytab beside the AES keys already there.
    pub fn make_service_rc4_only(&self, rc4_session: bool) {
        self.admin("cpw -randkey -e rc4-hmac:normal cifs/fs.rs.test");
        if rc4_session {
            self.admin("setstr cifs/fs.rs.test session_enctypes rc4-hmac");
        }
        self.admin(&format!(
            "ktadd -k {} -norandkey cifs/fs.rs.test",
            self.keytab().display()
        ));
    }

    /// A copy of /etc/hosts that also names fs.rs.test (for tools that take no address).
    pub fn hosts_file(&self) -> PathBuf {
        self.hosts_file_for("127.0.0.1")
    }

    /// A copy of /etc/hosts in which fs.rs.test is `ip`.
    pub fn hosts_file_for(&self, ip: &str) -> PathBuf {
        let hosts = self.dir.path().join("hosts");
        let mut text = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        text.push_str(&format!("\n{ip} fs.rs.test\n"));
        std::fs::write(&hosts, text).unwrap();
        hosts
    }

    pub fn env<'a>(&self, c: &'a mut Command) -> &'a mut Command {
        c.env("KRB5_CONFIG", self.dir.path().join("krb5.conf"))
            .env("KRB5_KDC_PROFILE", self.dir.path().join("kdc.conf"))
            .env(
                "KRB5CCNAME",
                format!("FILE:{}/ccache", self.dir.path().display()),
            )
    }

    pub fn run(&self, prog: &str, args: &[&str]) -> String {
        let out = self
            .env(&mut Command::new(prog))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {prog}: {e}"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{prog} {args:?} failed: {text}");
        text
    }

    pub fn admin(&self, query: &str) -> String {
        self.run("kadmin.local", &["-r", REALM, "-q", query])
    }

    /// Write the service's current keys into `keytab` (a new kvno each time).
    pub fn ktadd(&self, keytab: &Path) {
        self.admin(&format!("ktadd -k {} cifs/fs.rs.test", keytab.display()));
    }

    pub fn kinit(&self) {
        self.kinit_for(None)
    }

    /// kinit, for a ticket lifetime of `life` (e.g. "120s") when given.
    pub fn kinit_for(&self, life: Option<&str>) {
        let mut child = self
            .env(&mut Command::new("kinit"))
            .args(life.map(|l| vec!["-l", l]).unwrap_or_default())
            .arg(USER)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        writeln!(child.stdin.take().unwrap(), "{PASSWORD}").unwrap();
        assert!(child.wait().unwrap().success(), "kinit failed");
    }

    pub fn kdestroy(&self) {
        let _ = self.env(&mut Command::new("kdestroy")).status();
    }

    pub fn keytab(&self) -> PathBuf {
        self.dir.path().join("smb.keytab")
    }
}

/// `program`, with `kdc`'s environment, in a private mount namespace whose /etc/hosts is `hosts`
/// ([`Kdc::hosts_file`]: fs.rs.test is 127.0.0.1), for clients that cannot be given an address.
pub fn where_fs_rs_test_resolves(
    kdc: &Kdc,
    hosts: &Path,
    program: impl AsRef<std::ffi::OsStr>,
) -> Command {
    let mut c = Command::new("unshare");
    kdc.env(&mut c)
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount --bind {} /etc/hosts && exec \"$0\" \"$@\"",
            hosts.display()
        ))
        .arg(program);
    c
}
