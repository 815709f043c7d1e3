//! ringshare as a member of a real Active Directory domain, beside Samba's smbd joined the same
//! way, asked the same questions (tests/ad/rig.sh: a Samba AD DC in a network namespace, the
//! member joined with `net ads join`, winbind for NSS with idmap rid, the keytab written by
//! Samba's `sync machine password to keytab`; both servers read the same smb.conf).
//!
//! - a domain user's ticket writes a file owned by the uid winbind maps them to;
//! - an ACE for a domain group, set with smbcacls by the file's owner, lets a member of the
//!   group read and denies a user outside it, and reads back as it was set;
//! - a domain user logs on over NTLM by address (no ticket to be had), checked by the domain
//!   through winbind, acts as the same account and is held to the same ACE; a wrong password is
//!   refused;
//! - a local smbpasswd user logs on (NTLM) beside the domain users;
//! - while a domain user's NTLM logon waits on a stopped winbindd, a client already logged on
//!   is answered as always (ringshare runs one I/O thread here: the domain's check and NSS are
//!   asked away from it);
//! - `net ads changetrustpw` rotates the machine password: the keytab gets a new key version,
//!   and tickets issued before and after it both work;
//! - the member's second configuration (`rig.sh autorid`: `idmap config * : backend =
//!   autorid`, no arithmetic ringshare could do itself; the daemons restarted): an ACE for a
//!   domain group set with smbcacls becomes the same POSIX ACL entries on both servers (ringshare
//!   asks winbindd over its socket), so the kernel itself lets a member read and denies a
//!   non-member; over SMB the member reads and the non-member is denied on both, with tickets
//!   and over NTLM (whose token's domain SIDs ringshare asks winbind for);
//! - a second member without winbind (`rig.sh sssd`: joined with `adcli join`, sssd answering
//!   NSS with `ldap_id_mapping`, ringshare with no idmap config, so its id source is sssd): a
//!   domain user's ticket writes a file owned by sssd's uid for them, and an ACE for a domain
//!   group set with smbcacls becomes a POSIX ACL entry for sssd's gid of the group (asked of
//!   sssd's NSS responder), so the kernel lets a member read and denies a non-member;
//!   `smbcacls --numeric` shows the SIDs back; Samba's smbd on the same kind of member (its
//!   winbindd with `idmap config * : backend = sss`, sssd's idmap module) writes the same
//!   group entries and shows the same descriptor.
//! - on both members, ACL editors get the domain's names from lsarpc as from Samba's smbd:
//!   `rpcclient lookupsids` / `lookupnames` and `smbcacls` without `--numeric` answer alike
//!   (`RSAD\rsproj (2)`, an unknown RID unmapped).
//!
//! Needs root, samba-ad-dc, winbind, libnss-winbind, smbclient, krb5-user, sssd-common,
//! sssd-ldap, adcli and libnss-sss; skipped with a message otherwise. About 45 s, most of it
//! provisioning the domain.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

const RIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/ad/rig.sh");

/// The two servers, by the name clients reach them at and the directory they share.
const SERVERS: [(&str, &str, &str); 2] = [
    ("samba", "rsmember.ad.rs.test", "samba-share"),
    ("ringshare", "rsalt.ad.rs.test", "ringshare-share"),
];

struct Rig {
    dir: TempDir,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if std::env::var_os("KEEP_AD_RIG").is_some() {
            // The rig stays up for a look (KEEP_AD_RIG=1 cargo test --test ad_member; then
            // tests/ad/rig.sh down DIR).
            eprintln!("rig kept up: {}", self.dir.path().display());
            let dir = std::mem::replace(&mut self.dir, TempDir::new("ad-rig-spare"));
            std::mem::forget(dir);
            return;
        }
        let _ = Command::new("bash")
            .arg(RIG)
            .arg("down")
            .arg(self.dir.path())
            .status();
    }
}

fn tools_or_skip(test: &str) -> bool {
    let nss_winbind = [
        "/lib/x86_64-linux-gnu/libnss_winbind.so.2",
        "/lib/libnss_winbind.so.2",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    let nss_sss = [
        "/lib/x86_64-linux-gnu/libnss_sss.so.2",
        "/lib/libnss_sss.so.2",
    ]
    .iter()
    .any(|p| Path::new(p).exists());
    if !nss_sss {
        if std::env::var_os("CI").is_some() {
            panic!("libnss_sss is not installed but CI is set: apt-get install -y libnss-sss");
        }
        eprintln!("\n!!!!!!!! SKIPPED {test}: libnss_sss not found (apt-get install -y libnss-sss) !!!!!!!!\n");
        return false;
    }
    if !nss_winbind {
        if std::env::var_os("CI").is_some() {
            panic!(
                "libnss_winbind is not installed but CI is set: apt-get install -y libnss-winbind"
            );
        }
        eprintln!("\n!!!!!!!! SKIPPED {test}: libnss_winbind not found (apt-get install -y libnss-winbind) !!!!!!!!\n");
        return false;
    }
    root_and_commands_or_skip(
        test,
        &[
            ("samba", "samba-ad-dc"),
            ("winbindd", "winbind"),
            ("ntlm_auth", "winbind"),
            ("smbclient", "smbclient"),
            ("smbcacls", "smbclient"),
            ("kinit", "krb5-user"),
            ("ip", "iproute2"),
            ("getfacl", "acl"),
            ("sssd", "sssd-common"),
            ("adcli", "adcli"),
        ],
    )
}

fn text(o: &Output) -> String {
    output_text(o)
}

impl Rig {
    fn up() -> Rig {
        let rig = Rig {
            dir: TempDir::new("ad-rig"),
        };
        let out = Command::new("bash")
            .arg(RIG)
            .arg("up")
            .arg(rig.dir.path())
            .arg(ringshare_bin())
            .stdin(Stdio::null())
            .output()
            .expect("run rig.sh up");
        assert!(out.status.success(), "rig.sh up failed:\n{}", text(&out));
        rig
    }

    /// `rig.sh STEP DIR RINGSHARE_BIN`, which must succeed.
    fn step(&self, step: &str) {
        let out = Command::new("bash")
            .arg(RIG)
            .arg(step)
            .arg(self.dir.path())
            .arg(ringshare_bin())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run rig.sh {step}: {e}"));
        assert!(
            out.status.success(),
            "rig.sh {step} failed:\n{}",
            text(&out)
        );
    }

    /// The member's second configuration: idmap autorid (tests/ad/rig.sh autorid).
    fn autorid(&self) {
        self.step("autorid");
    }

    /// The second member, with sssd and no winbind (tests/ad/rig.sh sssd).
    fn sssd(&self) {
        self.step("sssd");
    }

    /// `sh -c script` where the sssd member's tools work (its NSS is sssd's).
    fn sssd_member(&self, script: &str) -> Output {
        Command::new("bash")
            .arg(RIG)
            .arg("sssd-member")
            .arg(self.dir.path())
            .args(["sh", "-c", script])
            .env("KRB5_CONFIG", self.path("krb5.conf"))
            .stdin(Stdio::null())
            .output()
            .expect("run a command beside the sssd member")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `sh -c script` where the member's tools work; KRB5CCNAME, when given, is USER's ccache.
    fn member(&self, ccache_of: Option<&str>, script: &str) -> Output {
        self.member_command(ccache_of, script)
            .output()
            .expect("run a command beside the member")
    }

    /// The command [`Rig::member`] runs.
    fn member_command(&self, ccache_of: Option<&str>, script: &str) -> Command {
        let mut c = Command::new("bash");
        c.arg(RIG)
            .arg("member")
            .arg(self.dir.path())
            .args(["sh", "-c", script])
            .env("KRB5_CONFIG", self.path("krb5.conf"))
            .stdin(Stdio::null());
        if let Some(user) = ccache_of {
            c.env("KRB5CCNAME", self.path(&format!("{user}.cc")));
        }
        c
    }

    /// smbclient with USER's ticket against HOST; its output.
    fn smbclient(&self, user: &str, host: &str, commands: &str) -> String {
        let script =
            format!("smbclient //{host}/share --use-kerberos=required -c '{commands}' 2>&1");
        text(&self.member(Some(user), &script))
    }

    /// The end of ringshare's log, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.path("ringshare.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn kinit(&self, user: &str, password: &str) {
        let script = format!("echo '{password}' | kinit {user}@AD.RS.TEST >/dev/null");
        let out = self.member(Some(user), &script);
        assert!(out.status.success(), "kinit {user}: {}", text(&out));
    }

    /// The SID winbind names for `name` (`wbinfo -n`), empty if none.
    fn sid_of(&self, name: &str) -> String {
        let out = text(&self.member(None, &format!("wbinfo -n '{name}'")));
        out.split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    fn domain_sid(&self) -> String {
        let out = self.member(None, "wbinfo -n 'RSAD\\rsalice'");
        let t = text(&out);
        let sid = t.split_whitespace().next().unwrap_or_default();
        let (domain, _) = sid.rsplit_once('-').expect("a SID from wbinfo");
        domain.to_string()
    }

    fn uid_gid(&self, name: &str) -> (u32, u32) {
        Rig::ids_in(&self.member(None, &format!("getent passwd '{name}'")), name)
    }

    /// The uid and primary gid the sssd member's NSS gives `name`.
    fn sssd_uid_gid(&self, name: &str) -> (u32, u32) {
        Rig::ids_in(&self.sssd_member(&format!("getent passwd '{name}'")), name)
    }

    /// The uid and gid of `getent passwd`'s line in `out`.
    fn ids_in(out: &Output, name: &str) -> (u32, u32) {
        let t = text(out);
        let f: Vec<&str> = t.trim().split(':').collect();
        assert!(f.len() > 3, "getent passwd {name}: {t}");
        (f[2].parse().unwrap(), f[3].parse().unwrap())
    }

    fn keytab_kvnos(&self) -> Vec<u32> {
        let out = Command::new("klist")
            .arg("-k")
            .arg(self.path("member/krb5.keytab"))
            .output()
            .expect("klist -k");
        let mut v: Vec<u32> = text(&out)
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn owner_of(path: &Path) -> (u32, u32) {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (m.uid(), m.gid())
}

#[test]
fn a_domain_member_answers_domain_users_as_samba_joined_the_same_way_does() {
    if !tools_or_skip("a_domain_member_answers_domain_users_as_samba_joined_the_same_way_does") {
        return;
    }
    let rig = Rig::up();
    a_domain_users_ticket_writes_a_file_owned_by_their_mapped_uid(&rig);
    an_ace_for_a_domain_group_grants_a_member_and_denies_a_non_member(&rig);
    acl_editors_get_the_domains_names_as_from_samba(&rig, &SERVERS, "secret.txt");
    a_domain_user_over_ntlm_is_checked_by_the_domain_and_acts_as_the_same_account(&rig);
    a_local_smbpasswd_user_logs_on_beside_domain_users(&rig);
    a_stopped_winbindd_delays_only_the_logons_that_need_it(&rig);
    a_rotated_machine_password_keeps_old_and_new_tickets_working(&rig);
    rig.autorid();
    with_autorid_an_ace_for_a_domain_group_is_the_same_posix_acl_on_both_servers(&rig);
    rig.sssd();
    an_sssd_member_gives_domain_sids_in_acls_the_ids_sssd_gives(&rig);
    acl_editors_get_the_domains_names_as_from_samba(&rig, &SSSD_SERVERS, "sssd.txt");
    let log = std::fs::read_to_string(rig.path("ringshare.log")).unwrap_or_default();
    assert!(
        log.contains("domain_user=\"RSAD\\\\rsalice\""),
        "ringshare's log names the domain user of a Kerberos logon:\n{log}"
    );
}

fn a_domain_users_ticket_writes_a_file_owned_by_their_mapped_uid(rig: &Rig) {
    let alice = rig.uid_gid("RSAD\\rsalice");
    assert!(
        alice.0 >= 100_000,
        "idmap rid maps RSAD\\rsalice: {alice:?}"
    );
    for (server, host, share) in SERVERS {
        let out = rig.smbclient("rsalice", host, "put /etc/hostname owned.txt");
        assert!(out.contains("putting file"), "{server}: {out}");
        assert_eq!(
            owner_of(&rig.path(share).join("owned.txt")),
            alice,
            "{server}: the file belongs to RSAD\\rsalice's uid and primary gid"
        );
    }
}

fn an_ace_for_a_domain_group_grants_a_member_and_denies_a_non_member(rig: &Rig) {
    let dom = rig.domain_sid();
    let proj = rig.sid_of("RSAD\\rsproj");
    assert!(proj.starts_with(&dom), "wbinfo -n RSAD\\rsproj: {proj}");
    let alice = format!("{dom}-{}", rig.uid_gid("RSAD\\rsalice").0 - 100_000);
    std::fs::write(rig.path("secret.txt"), "for rsproj only\n").unwrap();
    let mut shown = Vec::new();
    for (server, host, _) in SERVERS {
        let put = format!("put {} secret.txt", rig.path("secret.txt").display());
        assert!(
            rig.smbclient("rsalice", host, &put)
                .contains("putting file"),
            "{server}"
        );
        let set = format!(
            "smbcacls //{host}/share secret.txt --use-kerberos=required \
             --set 'ACL:{alice}:ALLOWED/0x0/FULL,ACL:{proj}:ALLOWED/0x0/READ' 2>&1"
        );
        let out = rig.member(Some("rsalice"), &set);
        assert!(
            out.status.success(),
            "{server}: smbcacls --set: {}",
            text(&out)
        );
        let get =
            format!("smbcacls //{host}/share secret.txt --use-kerberos=required --numeric 2>&1");
        shown.push(text(&rig.member(Some("rsalice"), &get)));
        let carol = rig.smbclient("rscarol", host, "get secret.txt /dev/stdout");
        assert!(
            carol.contains("for rsproj only"),
            "{server}: rscarol (in rsproj) reads: {carol}"
        );
        let bob = rig.smbclient("rsbob", host, "get secret.txt /dev/stdout");
        assert!(
            bob.contains("NT_STATUS_ACCESS_DENIED") && !bob.contains("for rsproj only"),
            "{server}: rsbob (not in rsproj) is denied: {bob}"
        );
    }
    assert!(shown[1].contains(&proj), "the ACE reads back: {}", shown[1]);
    assert_eq!(shown[0], shown[1], "both servers show the descriptor alike");
}

/// What an ACL editor asks a member's lsarpc pipe, asked of Samba's smbd and ringshare on
/// the same member (`servers`): `rpcclient lookupsids` of a domain user, a domain group and a
/// RID the domain does not have, `lookupnames` of the user and the group (qualified, bare and
/// as a UPN), and `smbcacls` without `--numeric` on `file` (whose ACL holds an ACE for the
/// domain group). The answers are the same, and name the accounts (`RSAD\rsproj (2)`).
fn acl_editors_get_the_domains_names_as_from_samba(
    rig: &Rig,
    servers: &[(&str, &str, &str)],
    file: &str,
) {
    let dom = rig.domain_sid();
    let (alice, proj) = (rig.sid_of("RSAD\\rsalice"), rig.sid_of("RSAD\\rsproj"));
    let mut answers = Vec::new();
    for (server, host, _) in servers {
        let script = format!(
            "rpcclient {host} --use-kerberos=required -c 'lookupsids {alice} {proj} {dom}-9999 \
             {dom}; lookupnames RSAD\\\\rsalice RSAD\\\\rsproj rsalice rsalice@AD.RS.TEST \
             RSAD\\\\nosuch' 2>&1; smbcacls //{host}/share {file} --use-kerberos=required 2>&1"
        );
        let out = text(&rig.member(Some("rsalice"), &script));
        for named in [
            format!("{alice} RSAD\\rsalice (1)"),
            format!("{proj} RSAD\\rsproj (2)"),
            format!("{dom}-9999 *unknown*\\*unknown* (8)"),
            format!("{dom} RSAD (3)"),
            format!("RSAD\\rsproj {proj} (Domain Group: 2)"),
            format!("rsalice {alice} (User: 1)"),
            format!("rsalice@AD.RS.TEST {alice} (User: 1)"),
            "RSAD\\nosuch S-0-0 (UNKNOWN: 8)".to_string(),
            "OWNER:RSAD\\rsalice".to_string(),
            "ACL:RSAD\\rsproj:ALLOWED/0x0/READ".to_string(),
        ] {
            assert!(out.contains(&named), "{server}: {named:?} in\n{out}");
        }
        answers.push(out);
    }
    assert_eq!(
        answers[0], answers[1],
        "both servers name the domain's SIDs alike"
    );
}

/// The two servers by address: a client reaching them so gets no Kerberos ticket.
const BY_ADDRESS: [(&str, &str, &str); 2] = [
    ("samba", "127.0.0.3", "samba-share"),
    ("ringshare", "127.0.0.4", "ringshare-share"),
];

fn ntlm(rig: &Rig, ip: &str, user: &str, password: &str, commands: &str) -> String {
    let script = format!(
        "smbclient //{ip}/share -U 'RSAD\\{user}%{password}' --use-kerberos=off -c '{commands}' 2>&1"
    );
    text(&rig.member(None, &script))
}

fn a_domain_user_over_ntlm_is_checked_by_the_domain_and_acts_as_the_same_account(rig: &Rig) {
    let alice = rig.uid_gid("RSAD\\rsalice");
    for (server, ip, share) in BY_ADDRESS {
        let out = ntlm(
            rig,
            ip,
            "rsalice",
            "Al1ce!pass",
            "put /etc/hostname by-ntlm.txt",
        );
        assert!(
            out.contains("putting file"),
            "{server}: {out}\n{}",
            rig.log_tail()
        );
        assert_eq!(
            owner_of(&rig.path(share).join("by-ntlm.txt")),
            alice,
            "{server}"
        );
        let carol = ntlm(
            rig,
            ip,
            "rscarol",
            "C4rol!pass",
            "get secret.txt /dev/stdout",
        );
        assert!(
            carol.contains("for rsproj only"),
            "{server}: rscarol over NTLM: {carol}"
        );
        let bob = ntlm(rig, ip, "rsbob", "B0b!pass", "get secret.txt /dev/stdout");
        assert!(
            bob.contains("NT_STATUS_ACCESS_DENIED") && !bob.contains("for rsproj only"),
            "{server}: rsbob over NTLM: {bob}"
        );
        let wrong = ntlm(rig, ip, "rsalice", "not-her-password", "ls");
        assert!(
            wrong.contains("NT_STATUS_LOGON_FAILURE"),
            "{server}: {wrong}"
        );
    }
    let log = std::fs::read_to_string(rig.path("ringshare.log")).unwrap_or_default();
    assert!(
        log.lines()
            .any(|l| l.contains("rsalice") && l.contains("the domain refused it")),
        "ringshare logs whom the domain refused:\n{log}"
    );
}

fn a_local_smbpasswd_user_logs_on_beside_domain_users(rig: &Rig) {
    let (name, pass) = ("rslocal", "L0cal-pass-1");
    add_user(&rig.path("ringshare.conf"), name, pass);
    let reload = Command::new(ringshare_bin())
        .args(["reload", "--config"])
        .arg(rig.path("ringshare.conf"))
        .output()
        .expect("ringshare reload");
    assert!(reload.status.success(), "reload: {}", text(&reload));
    let samba_add = format!(
        "(echo '{pass}'; echo '{pass}') | smbpasswd -c {} -s -a {name} >/dev/null 2>&1",
        rig.path("member/smb.conf").display()
    );
    assert!(
        rig.member(None, &samba_add).status.success(),
        "smbpasswd -a"
    );
    for (server, ip) in [("samba", "127.0.0.3"), ("ringshare", "127.0.0.4")] {
        let script = format!(
            "smbclient //{ip}/share -U 'RSMEMBER\\{name}%{pass}' -c 'put /etc/hostname local.txt' 2>&1"
        );
        let out = text(&rig.member(None, &script));
        assert!(
            out.contains("putting file"),
            "{server}: a local user over NTLM: {out}"
        );
    }
}

/// Every winbindd process of the rig stopped (SIGSTOP) while this lives, continued (SIGCONT)
/// when it goes, whatever happened meanwhile.
struct StoppedWinbindd(String);

impl StoppedWinbindd {
    fn new(rig: &Rig) -> StoppedWinbindd {
        // The daemon itself (its command line starts with its name), not the wrapper that
        // started it.
        let pattern = format!("^winbindd .*{}", rig.path("member/smb.conf").display());
        let ok = Command::new("pkill")
            .args(["-STOP", "-f", &pattern])
            .status()
            .expect("pkill")
            .success();
        assert!(ok, "no winbindd process matched {pattern:?}");
        StoppedWinbindd(pattern)
    }
}

impl Drop for StoppedWinbindd {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-CONT", "-f", &self.0])
            .status();
    }
}

/// `sh -c script` beside the member ([`Rig::member`]), in a thread of its own.
fn in_background(rig: &Rig, script: String) -> std::thread::JoinHandle<std::io::Result<Output>> {
    let mut c = rig.member_command(None, &script);
    std::thread::spawn(move || c.output())
}

/// While a domain user's logon waits on a stopped winbindd, a client already logged on goes on
/// being answered: ringshare's own client sends ECHOs for 5 s through the one I/O thread. (A
/// new logon waits too, a local user's included: NSS's getgrouplist asks winbind for their
/// groups. Samba's smbd, a process per connection, is not asked here: its logons alone took
/// 7-8 s in this rig.)
fn a_stopped_winbindd_delays_only_the_logons_that_need_it(rig: &Rig) {
    let bench = format!(
        "timeout 60 {} bench //127.0.0.4/share -U 'RSMEMBER\\rslocal%L0cal-pass-1' echo \
         --duration 5s --queue-depth 4 2>&1",
        ringshare_bin()
    );
    let started = std::time::Instant::now();
    let echoes = in_background(rig, bench);
    // ringshare's logons take milliseconds: this one is over, its ECHOs are going.
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let stopped = StoppedWinbindd::new(rig);
    let domain_logon = in_background(
        rig,
        "timeout 60 smbclient //127.0.0.4/share -U 'RSAD\\rsalice%Al1ce!pass' \
         --use-kerberos=off -c ls 2>&1"
            .to_string(),
    );
    let out = echoes.join().expect("thread").expect("ringshare bench");
    let took = started.elapsed();
    drop(stopped);
    let domain_logon = domain_logon.join().expect("thread").expect("smbclient");
    eprintln!("5 s of ECHOs while a domain logon waited on a stopped winbindd: {took:?}");
    assert!(out.status.success(), "ringshare bench: {}", text(&out));
    assert!(
        took < std::time::Duration::from_secs(8),
        "5 s of ECHOs took {took:?}: the I/O thread waited with the domain logon\n{}\n{}",
        text(&out),
        rig.log_tail()
    );
    // Answered once winbindd went on: never left hanging.
    assert!(
        domain_logon.status.code().is_some_and(|c| c != 124),
        "the waiting domain logon hung: {}",
        text(&domain_logon)
    );
    let out = ntlm(rig, "127.0.0.4", "rsalice", "Al1ce!pass", "ls");
    assert!(
        out.contains("blocks of size"),
        "after winbindd went on: {out}"
    );
}

fn a_rotated_machine_password_keeps_old_and_new_tickets_working(rig: &Rig) {
    let before = rig.keytab_kvnos();
    // rscarol's ccache holds service tickets from before the change.
    let out = rig.member(
        None,
        &format!(
            "net ads changetrustpw -s {} 2>&1",
            rig.path("member/smb.conf").display()
        ),
    );
    assert!(
        out.status.success(),
        "net ads changetrustpw: {}",
        text(&out)
    );
    let after = rig.keytab_kvnos();
    let newest = *after.last().expect("keys");
    assert!(
        newest > *before.last().expect("keys") && after.contains(&(newest - 1)),
        "the keytab gains a key version and keeps the old one: {before:?} → {after:?}"
    );
    // ringshare reads a changed keytab within 2 s.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    for (server, host, _) in SERVERS {
        let old = rig.smbclient("rscarol", host, "ls");
        assert!(
            old.contains("blocks available"),
            "{server}: a ticket from before: {old}"
        );
    }
    rig.kinit("rsalice", "Al1ce!pass");
    for (server, host, _) in SERVERS {
        let new = rig.smbclient("rsalice", host, "ls");
        assert!(
            new.contains("blocks available"),
            "{server}: a ticket from after: {new}"
        );
    }
    let log = std::fs::read_to_string(rig.path("ringshare.log")).unwrap_or_default();
    for kvno in [newest - 1, newest] {
        assert!(
            log.contains(&format!("kvno {kvno} enctype")),
            "ringshare accepted a ticket of key version {kvno}:\n{log}"
        );
    }
}

/// The entries of `id` and `other::` among a file's POSIX ACL entries.
fn of_id(entries: &[String], id: u32) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.contains(&format!(":{id}:")) || e.starts_with("other:"))
        .cloned()
        .collect()
}

/// rsalice puts secret.txt on HOST as `name` and sets its ACL with smbcacls: full control for
/// her (`alice`), read for the group `proj`. The output of both, failing if either failed.
fn put_with_group_ace(rig: &Rig, host: &str, name: &str, alice: &str, proj: &str) -> Output {
    let script = format!(
        "smbclient //{host}/share --use-kerberos=required -c 'put {} {name}' 2>&1 | \
         grep -q 'putting file' || {{ echo 'smbclient put {name} failed'; exit 1; }}; \
         smbcacls //{host}/share {name} --use-kerberos=required \
         --set 'ACL:{alice}:ALLOWED/0x0/FULL,ACL:{proj}:ALLOWED/0x0/READ' 2>&1",
        rig.path("secret.txt").display()
    );
    rig.member(Some("rsalice"), &script)
}

/// The named entries (`user:ID:perms`, `group:ID:perms`) and `other::` of a file's POSIX ACL.
fn posix_entries(path: &Path) -> Vec<String> {
    let out = Command::new("getfacl")
        .args(["-n", "-c"])
        .arg(path)
        .output()
        .expect("getfacl");
    text(&out)
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split(':').collect();
            f.len() == 3 && (!f[1].is_empty() || f[0] == "other")
        })
        .map(str::to_string)
        .collect()
}

/// Whether `user` (by name, with the groups NSS gives them) may read `path` by the kernel's
/// own check: the POSIX ACL alone decides, no server in between.
fn kernel_lets_read(rig: &Rig, user: &str, path: &Path) -> bool {
    let (uid, gid) = rig.uid_gid(user);
    rig.member(None, &read_as(uid, gid, path)).status.success()
}

/// A script that reads `path` as `uid` and `gid` with the groups NSS gives that user.
fn read_as(uid: u32, gid: u32, path: &Path) -> String {
    format!(
        "setpriv --reuid={uid} --regid={gid} --init-groups cat {} >/dev/null 2>&1",
        path.display()
    )
}

fn with_autorid_an_ace_for_a_domain_group_is_the_same_posix_acl_on_both_servers(rig: &Rig) {
    let dom = rig.domain_sid();
    let (proj, alice) = (rig.sid_of("RSAD\\rsproj"), rig.sid_of("RSAD\\rsalice"));
    assert!(
        proj.starts_with(&dom) && alice.starts_with(&dom),
        "{proj} {alice}"
    );
    let proj_gid = text(&rig.member(None, &format!("wbinfo --sid-to-gid={proj}")));
    let proj_gid: u32 = proj_gid.trim().parse().expect("wbinfo --sid-to-gid");
    assert!(
        proj_gid >= 1_000_000,
        "autorid maps RSAD\\rsproj to {proj_gid}, outside any rid range"
    );
    let mut shown = Vec::new();
    let mut acls = Vec::new();
    for (server, host, share) in SERVERS {
        let out = put_with_group_ace(rig, host, "autorid.txt", &alice, &proj);
        assert!(
            out.status.success(),
            "{server}: {}\n{}",
            text(&out),
            rig.log_tail()
        );
        let file = rig.path(share).join("autorid.txt");
        let entries = posix_entries(&file);
        assert!(
            entries
                .iter()
                .any(|e| e.starts_with(&format!("group:{proj_gid}:r"))),
            "{server}: the group's ACE is a POSIX ACL entry: {entries:?}\n{}",
            rig.log_tail()
        );
        assert!(
            kernel_lets_read(rig, "RSAD\\rscarol", &file),
            "{server}: the kernel lets rscarol (in rsproj) read: {entries:?}"
        );
        assert!(
            !kernel_lets_read(rig, "RSAD\\rsbob", &file),
            "{server}: the kernel denies rsbob: {entries:?}"
        );
        let carol = rig.smbclient("rscarol", host, "get autorid.txt /dev/stdout");
        assert!(
            carol.contains("for rsproj only"),
            "{server}: rscarol reads: {carol}"
        );
        let bob = rig.smbclient("rsbob", host, "get autorid.txt /dev/stdout");
        assert!(
            bob.contains("NT_STATUS_ACCESS_DENIED") && !bob.contains("for rsproj only"),
            "{server}: rsbob is denied: {bob}"
        );
        // Over NTLM (by address; no PAC): the token's domain SIDs come from winbind too.
        let ip = if server == "samba" {
            "127.0.0.3"
        } else {
            "127.0.0.4"
        };
        let carol = ntlm(
            rig,
            ip,
            "rscarol",
            "C4rol!pass",
            "get autorid.txt /dev/stdout",
        );
        assert!(
            carol.contains("for rsproj only"),
            "{server}: rscarol over NTLM reads: {carol}\n{}",
            rig.log_tail()
        );
        let bob = ntlm(rig, ip, "rsbob", "B0b!pass", "get autorid.txt /dev/stdout");
        assert!(
            bob.contains("NT_STATUS_ACCESS_DENIED"),
            "{server}: rsbob over NTLM is denied: {bob}"
        );
        let get =
            format!("smbcacls //{host}/share autorid.txt --use-kerberos=required --numeric 2>&1");
        shown.push(text(&rig.member(Some("rsalice"), &get)));
        acls.push(entries);
    }
    // The entries of the group's id, and what everyone else gets, are the same on both (Samba
    // leaves out a named entry for the owner's own id; ringshare's mapping keeps it).
    let of_group = |entries: &[String]| of_id(entries, proj_gid);
    assert_eq!(
        of_group(&acls[0]),
        of_group(&acls[1]),
        "both servers wrote the group's POSIX ACL entries alike: {acls:?}"
    );
    assert!(shown[1].contains(&proj), "the ACE reads back: {}", shown[1]);
    assert_eq!(shown[0], shown[1], "both servers show the descriptor alike");
}

/// The sssd members' two servers: Samba's smbd (winbindd with idmap_sss) and ringshare (its id
/// source sssd itself), by host name and shared directory.
const SSSD_SERVERS: [(&str, &str, &str); 2] = [
    ("samba", "rssmbsss.ad.rs.test", "sssd-samba-share"),
    ("ringshare", "rssssd.ad.rs.test", "sssd-share"),
];

/// The sssd member (rig.sh sssd: no idmap config; ringshare's id source is sssd's NSS
/// responder; Samba's smbd beside it takes sssd's ids through winbindd's idmap_sss): the same
/// questions as the autorid step, answered with sssd's ids, alike on both.
fn an_sssd_member_gives_domain_sids_in_acls_the_ids_sssd_gives(rig: &Rig) {
    let alice = rig.sssd_uid_gid("RSAD\\rsalice");
    let group = text(&rig.sssd_member("getent group 'RSAD\\rsproj'"));
    let proj_gid: u32 = group
        .split(':')
        .nth(2)
        .and_then(|g| g.parse().ok())
        .unwrap_or_else(|| panic!("getent group RSAD\\rsproj beside sssd: {group}"));
    // sssd's ldap_id_mapping slices, not winbind's ranges: nothing ringshare could compute.
    assert!(
        alice.0 >= 200_000 && proj_gid >= 200_000 && alice.0 != rig.uid_gid("RSAD\\rsalice").0,
        "sssd's ids: RSAD\\rsalice {alice:?}, RSAD\\rsproj {proj_gid}"
    );
    let ringshare_log = || {
        let log = std::fs::read_to_string(rig.path("ringshare-sssd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    };
    let dom = rig.domain_sid();
    let (proj, alice_sid) = (rig.sid_of("RSAD\\rsproj"), rig.sid_of("RSAD\\rsalice"));
    assert!(
        proj.starts_with(&dom) && alice_sid.starts_with(&dom),
        "{proj} {alice_sid}"
    );
    let (mut acls, mut shown) = (Vec::new(), Vec::new());
    for (server, host, share) in SSSD_SERVERS {
        let share = rig.path(share);
        let out = rig.smbclient("rsalice", host, "put /etc/hostname owned.txt");
        assert!(
            out.contains("putting file"),
            "{server}: {out}\n{}",
            ringshare_log()
        );
        assert_eq!(
            owner_of(&share.join("owned.txt")),
            alice,
            "{server}: the file belongs to sssd's uid and primary gid of RSAD\\rsalice"
        );
        let out = put_with_group_ace(rig, host, "sssd.txt", &alice_sid, &proj);
        assert!(
            out.status.success(),
            "{server}: {}\n{}",
            text(&out),
            ringshare_log()
        );
        let file = share.join("sssd.txt");
        let entries = posix_entries(&file);
        assert!(
            entries
                .iter()
                .any(|e| e.starts_with(&format!("group:{proj_gid}:r"))),
            "{server}: the group's ACE is a POSIX ACL entry for sssd's gid {proj_gid}: \
             {entries:?}\n{}",
            ringshare_log()
        );
        for (user, reads) in [("RSAD\\rscarol", true), ("RSAD\\rsbob", false)] {
            let (uid, gid) = rig.sssd_uid_gid(user);
            assert_eq!(
                rig.sssd_member(&read_as(uid, gid, &file)).status.success(),
                reads,
                "{server}: the kernel alone lets {user} read: {reads} ({entries:?})"
            );
        }
        let carol = rig.smbclient("rscarol", host, "get sssd.txt /dev/stdout");
        assert!(
            carol.contains("for rsproj only"),
            "{server}: rscarol reads: {carol}"
        );
        let bob = rig.smbclient("rsbob", host, "get sssd.txt /dev/stdout");
        assert!(
            bob.contains("NT_STATUS_ACCESS_DENIED") && !bob.contains("for rsproj only"),
            "{server}: rsbob is denied: {bob}"
        );
        let get =
            format!("smbcacls //{host}/share sssd.txt --use-kerberos=required --numeric 2>&1");
        shown.push(text(&rig.member(Some("rsalice"), &get)));
        acls.push(entries);
    }
    assert!(
        shown[1].contains(&format!("ACL:{proj}:0/0x0/0x001200a9"))
            && shown[1].contains(&format!("OWNER:{alice_sid}")),
        "the ACE and the owner read back as SIDs: {}",
        shown[1]
    );
    assert_eq!(shown[0], shown[1], "both servers show the descriptor alike");
    let of_group = |entries: &[String]| of_id(entries, proj_gid);
    assert_eq!(
        of_group(&acls[0]),
        of_group(&acls[1]),
        "both servers wrote the group's POSIX ACL entries alike: {acls:?}"
    );
}
