//! Names in ACL editors: `rpcclient` (lookupsids, lookupnames over ncacn_np) and `smbcacls`
//! without `--numeric` ask the `lsarpc` pipe, and ringshare answers as a private `smbd` 4.22
//! does for the same Unix accounts in the same run. Root only (accounts and network
//! namespaces: both tools reach only port 445).
//!
//! Compared: accounts without an SMB password on either server (Samba names those by their
//! Unix SIDs, as ringshare names every account) and the well-known SIDs.

mod common;
mod twin;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::TempDir;
use twin::{gid, make, uid, Accounts, Net, Running, PASS};

const ALICE: &str = "rs_lsa_alice";
/// An account with no SMB password on either server.
const XAVIER: &str = "rs_lsa_x";
const GROUP: &str = "rs_lsa_g";

fn rpcclient(srv: &Running, cmds: &str) -> String {
    let out = srv
        .command("rpcclient")
        .args(["--use-kerberos=off", "-U"])
        .arg(format!("{ALICE}%{PASS}"))
        .args(["ncacn_np:127.0.0.1", "-c", cmds])
        .output()
        .expect("run rpcclient");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn smbcacls_names(srv: &Running, file: &str) -> String {
    let out = srv
        .command("smbcacls")
        .arg("//127.0.0.1/share")
        .arg(file)
        .args(["--use-kerberos=off", "-U"])
        .arg(format!("{ALICE}%{PASS}"))
        .output()
        .expect("run smbcacls");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn rpcclient_and_smbcacls_show_the_same_names_from_ringshare_as_from_samba() {
    if !twin::root_and_tools_or_skip(
        "rpcclient_and_smbcacls_show_the_same_names_from_ringshare_as_from_samba",
        &[
            "rpcclient",
            "smbcacls",
            "smbd",
            "smbpasswd",
            "pdbedit",
            "unshare",
            "nsenter",
        ],
    ) {
        return;
    }
    let tmp = TempDir::new("lsarpc");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let shares = |root: &Path| format!("[share]\n\tpath = {}/share\n", root.display());
    let _accounts = Accounts::create(&[GROUP], &[(ALICE, &[GROUP]), (XAVIER, &[GROUP])], None);
    let (x, g) = (uid(XAVIER), gid(GROUP));
    let sids = format!(
        "lookupsids S-1-22-1-{x} S-1-22-2-{g} S-1-1-0 S-1-3-0 S-1-5-18 S-1-5-32-544 S-1-5-11"
    );
    let names = format!(
        "lookupnames Everyone BUILTIN\\\\Administrators \"Unix User\\{XAVIER}\" \"Unix Group\\{GROUP}\" {XAVIER} {GROUP}"
    );
    let mut results = Vec::new();
    for kind in ["samba", "ringshare"] {
        let root = twin::server_root(tmp.path(), kind);
        let s = root.join("share");
        make(&s, "root", "root", 0o777, true);
        make(&s.join("xfile"), XAVIER, GROUP, 0o644, false);
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = if kind == "samba" {
            twin::start_samba(&base, Net::Own, "", &shares(&root), &[ALICE])
        } else {
            twin::start_ringshare(&base, Net::Own, "", &shares(&root), &[ALICE])
        };
        results.push((
            rpcclient(&srv, &sids),
            rpcclient(&srv, &names),
            smbcacls_names(&srv, "xfile"),
        ));
    }
    let (samba, ours) = (&results[0], &results[1]);
    assert!(
        samba.0.contains(&format!("Unix User\\{XAVIER} (1)")),
        "samba: {}",
        samba.0
    );
    assert_eq!(samba.0, ours.0, "lookupsids");
    // rpcclient's -c splits as popt does: outside quotes a backslash escapes the next
    // character, inside quotes it stays (a doubled one stays two: a name neither server
    // knows, as this test once asked). A Unix group, bare or qualified, is a domain group (SID_NAME_DOM_GRP) on
    // Samba 4.22; a Unix user is a user either way.
    let group = format!("S-1-22-2-{g} (Domain Group: 2)");
    assert_eq!(samba.1.matches(&group).count(), 2, "samba: {}", samba.1);
    let user = format!("S-1-22-1-{x} (User: 1)");
    assert_eq!(samba.1.matches(&user).count(), 2, "samba: {}", samba.1);
    assert_eq!(samba.1, ours.1, "lookupnames");
    assert!(
        ours.2.contains(&format!("OWNER:Unix User\\{XAVIER}")),
        "{}",
        ours.2
    );
    assert_eq!(samba.2, ours.2, "smbcacls");
}
