//! The accounts Windows' object picker lists: `rpcclient` asks the `samr` pipe (enumdomusers,
//! enumdomgroups, queryuser, querydispinfo, samlookupnames, samlookuprids, queryusergroups) and
//! `lsarpc` (lookupnames, lookupsids) of ringshare and of a private `smbd` 4.22 whose passdb is
//! an smbpasswd file (Samba's algorithmic RIDs: uid × 2 + 1000, as ringshare's) for the same
//! Unix accounts in the same run. Then a security descriptor set with the S-1-5-21-…-RID SID of
//! an account gives that account access: the kernel decides, as the account opens the file.
//! Root only (accounts and network namespaces: the tools reach only port 445).

mod common;
mod twin;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::TempDir;
use twin::{make, uid, Accounts, Net, Running};

const A: &str = "rs_samr_a";
const B: &str = "rs_samr_b";
/// A Unix account that is in neither server's user database.
const X: &str = "rs_samr_x";
const GROUP: &str = "rs_samr_g";
/// A Unix account made the `guest account` of both servers (its GECOS as chfn writes it).
const GUEST: &str = "rs_samr_guest";
/// The account the guest test logs on as (its full name in its GECOS field).
const C: &str = "rs_samr_c";

fn rpcclient(srv: &Running, cmds: &str) -> String {
    rpcclient_as(srv, A, cmds)
}

fn rpcclient_as(srv: &Running, user: &str, cmds: &str) -> String {
    let out = srv
        .command("rpcclient")
        .args(["--use-kerberos=off", "-U"])
        .arg(format!("{user}%{}", twin::PASS))
        .args(["ncacn_np:127.0.0.1", "-c", cmds])
        .output()
        .expect("run rpcclient");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The account domain's SID, from `lookupdomain`.
fn domain_sid(srv: &Running) -> String {
    domain_sid_as(srv, A)
}

fn domain_sid_as(srv: &Running, user: &str) -> String {
    let out = rpcclient_as(srv, user, "lookupdomain RSTWIN");
    out.split_whitespace()
        .find(|w| w.starts_with("S-1-5-21-"))
        .unwrap_or_else(|| panic!("{}: no domain SID in {out}", srv.name))
        .to_string()
}

/// What both servers must answer alike, the domain SID written `DOMSID`.
fn answers(srv: &Running, rid_a: u32, rid_b: u32) -> Vec<(String, String)> {
    let dom = domain_sid(srv);
    let cmds = [
        "enumdomusers".to_string(),
        "enumdomgroups".to_string(),
        "enumalsgroups domain".to_string(),
        "querydispinfo".to_string(),
        format!("samlookupnames domain {A} {B} None"),
        format!("samlookupnames domain {A} {X}"),
        format!("samlookuprids domain {rid_a} {rid_b} 513 {}", rid_b + 2),
        format!("queryusergroups {rid_b:#x}"),
        format!("lookupnames {A} RSTWIN\\\\{B}"),
        format!("lookupsids {dom}-{rid_a} {dom}-513 {dom}"),
        // Every class rpcclient decodes (it shows 7, 9 and 16; the others decode or fail).
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 20]
            .map(|l| format!("queryuser {rid_a:#x} {l}"))
            .join("; "),
        // QuerySecurity: Samba's default descriptors of the server, the domain and a user.
        "samquerysecobj".to_string(),
        "samquerysecobj -d".to_string(),
        format!("samquerysecobj {rid_a:#x}"),
        // Groups and aliases: None alone, without members; no alias opens.
        [1, 2, 3, 4, 5, 6]
            .map(|l| format!("querygroup 513 {l}"))
            .join("; "),
        "querygroupmem 513; querygroup 512; querygroupmem 514".to_string(),
        "queryaliasmem builtin 544; queryaliasmem domain 513".to_string(),
        // Access masks: a handle opened without the right a call needs, an open asking for
        // more than Everyone may, and an account created (refused) by an ordinary user.
        format!("queryuser {rid_a:#x} 16 0x1; queryuser {rid_a:#x} 16 0x10"),
        format!("queryuser {rid_b:#x} 21 0xf07ff; queryusergroups {rid_b:#x} 0x10"),
        "querygroup 513 1 0x10; querygroupmem 513 0x1; querygroupmem 513 0x10".to_string(),
        "createdomuser rs_samr_new".to_string(),
    ];
    let mut out: Vec<(String, String)> = cmds
        .iter()
        .map(|c| (c.clone(), rpcclient(srv, c).replace(&dom, "DOMSID")))
        .collect();
    // queryuser: the lines that do not hold times of the account's password.
    let user = rpcclient(srv, &format!("queryuser {rid_a:#x}"));
    let keep = [
        "User Name",
        "Full Name",
        "Home Drive",
        "Profile Path",
        "user_rid",
        "group_rid",
        "acb_info",
        "fields_present",
        "logon_divs",
    ];
    let kept: Vec<&str> = user
        .lines()
        .filter(|l| keep.iter().any(|k| l.trim_start().starts_with(k)))
        .collect();
    out.push(("queryuser".into(), kept.join("\n")));
    out
}

#[test]
fn rpcclient_lists_the_same_accounts_and_rids_from_ringshare_as_from_samba_and_a_picked_sid_grants_access(
) {
    if !twin::root_and_tools_or_skip(
        "rpcclient_lists_the_same_accounts_and_rids_from_ringshare_as_from_samba",
        &[
            "rpcclient",
            "smbcacls",
            "smbclient",
            "smbd",
            "smbpasswd",
            "unshare",
            "nsenter",
        ],
    ) {
        return;
    }
    let tmp = TempDir::new("samr");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let shares = |root: &Path| {
        format!(
            "[share]\n\tpath = {}/share\n\tread only = no\n",
            root.display()
        )
    };
    let _accounts = Accounts::create(&[GROUP], &[(A, &[GROUP]), (B, &[]), (X, &[])], None);
    let (rid_a, rid_b) = (uid(A) * 2 + 1000, uid(B) * 2 + 1000);
    let mut results = Vec::new();
    for kind in ["samba", "ringshare"] {
        let root = twin::server_root(tmp.path(), kind);
        let s = root.join("share");
        make(&s, "root", "root", 0o777, true);
        // rwx: the owner's full control includes WRITE_DAC (Samba's mapping).
        make(&s.join("f"), A, A, 0o700, false);
        let base = tmp.path().join(format!("{kind}-state"));
        let srv = if kind == "samba" {
            let global = format!(
                "\tpassdb backend = smbpasswd:{}/private/smbpasswd\n",
                base.display()
            );
            twin::start_samba(&base, Net::Own, &global, &shares(&root), &[A, B])
        } else {
            let global = "\tnetbios name = RSTWIN\n";
            twin::start_ringshare(&base, Net::Own, global, &shares(&root), &[A, B])
        };
        let got = answers(&srv, rid_a, rid_b);
        // The S-1-5-21-…-RID SID of B in A's file's DACL: B may read it, as the kernel decides.
        let conf = twin::client_conf(&tmp.path().join(format!("{kind}-client")));
        let before = srv.smbclient(B, "share", "get f /dev/null", &conf);
        let sid_b = format!("{}-{rid_b}", domain_sid(&srv));
        let set = srv.smbcacls(
            A,
            "share",
            "f",
            &["-a", &format!("ACL:{sid_b}:ALLOWED/0x0/R")],
        );
        let after = srv.smbclient(B, "share", "get f /dev/null", &conf);
        let acl = twin::getfacl(&s.join("f"));
        results.push((
            got,
            before,
            twin::status_of(&set),
            after,
            acl.contains(&format!("user:{}:r", uid(B))),
        ));
    }
    let (samba, ours) = (&results[0], &results[1]);
    assert!(
        samba.0[0]
            .1
            .contains(&format!("user:[{A}] rid:[{rid_a:#x}]")),
        "samba: {:?}",
        samba.0[0]
    );
    for ((cmd, s), (_, o)) in samba.0.iter().zip(&ours.0) {
        assert_eq!(s, o, "{cmd}");
    }
    let access = |r: &(Vec<(String, String)>, String, String, String, bool)| {
        (r.1.clone(), r.2.clone(), r.3.clone(), r.4)
    };
    assert_eq!(
        access(samba),
        (
            "NT_STATUS_ACCESS_DENIED".to_string(),
            "OK".to_string(),
            "OK".to_string(),
            true
        ),
        "samba"
    );
    assert_eq!(access(ours), access(samba), "ringshare");
}

/// What both servers answer for the guest account (RID 501, 0x1f5), the domain SID written
/// `DOMSID`: named by RID and by SID, not found by name in the domain, listed nowhere, opened
/// and shown (the queryuser lines without times), its groups and descriptor; the Guests
/// alias and group are none.
fn guest_answers(srv: &Running, guest: &str) -> Vec<(String, String)> {
    let dom = domain_sid_as(srv, C);
    let cmds = [
        "samlookuprids domain 501 500".to_string(),
        format!("samlookupnames domain {guest} Guest"),
        format!("lookupsids {dom}-501"),
        format!("lookupnames {guest} RSTWIN\\\\{guest}"),
        "enumdomusers; querydispinfo".to_string(),
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 20]
            .map(|l| format!("queryuser 0x1f5 {l}"))
            .join("; "),
        "queryusergroups 0x1f5".to_string(),
        "samquerysecobj 0x1f5".to_string(),
        "queryuser 0x1f5 16 0x1; queryuser 0x1f5 16 0x10".to_string(),
        "queryaliasmem builtin 546; querygroup 514; querygroupmem 514".to_string(),
    ];
    let mut out: Vec<(String, String)> = cmds
        .iter()
        .map(|c| (c.clone(), rpcclient_as(srv, C, c).replace(&dom, "DOMSID")))
        .collect();
    // The guest and C (its full name, the GECOS field): the lines without times.
    for rid in [501, uid(C) * 2 + 1000] {
        let cmd = format!("queryuser {rid:#x}");
        let user = rpcclient_as(srv, C, &cmd);
        let kept: Vec<&str> = user.lines().filter(|l| !l.contains("Time")).collect();
        out.push((cmd, kept.join("\n")));
    }
    out
}

#[test]
fn rid_501_is_the_guest_account_on_ringshare_as_on_samba_by_default_and_when_configured() {
    if !twin::root_and_tools_or_skip(
        "rid_501_is_the_guest_account_on_ringshare_as_on_samba",
        &[
            "rpcclient",
            "smbd",
            "smbpasswd",
            "unshare",
            "nsenter",
            "usermod",
        ],
    ) {
        return;
    }
    let tmp = TempDir::new("samr-guest");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let _accounts = Accounts::create(&[], &[(C, &[]), (GUEST, &[])], None);
    twin::must("usermod", &["-c", "Guest Person,room 2,,", GUEST]);
    twin::must("usermod", &["-c", "Carol Tester", C]);
    // Samba's default `guest account` is nobody; ringshare's too.
    for guest in ["nobody", GUEST] {
        let mut results = Vec::new();
        for kind in ["samba", "ringshare"] {
            let root = twin::server_root(tmp.path(), &format!("{kind}-{guest}"));
            make(&root.join("share"), "root", "root", 0o777, true);
            let shares = format!("[share]\n\tpath = {}/share\n", root.display());
            let base = tmp.path().join(format!("{kind}-{guest}-state"));
            let mut global = String::new();
            if guest != "nobody" {
                global = format!("\tguest account = {guest}\n");
            }
            let srv = if kind == "samba" {
                global += &format!(
                    "\tpassdb backend = smbpasswd:{}/private/smbpasswd\n",
                    base.display()
                );
                twin::start_samba(&base, Net::Own, &global, &shares, &[C])
            } else {
                global += "\tnetbios name = RSTWIN\n";
                twin::start_ringshare(&base, Net::Own, &global, &shares, &[C])
            };
            results.push(guest_answers(&srv, guest));
        }
        let (samba, ours) = (&results[0], &results[1]);
        assert!(
            samba[0].1.contains(&format!("rid 0x1f5: {guest} (1)")),
            "samba names RID 501 by its guest account: {:?}",
            samba[0]
        );
        let [.., guest_user, c_user] = samba.as_slice() else {
            unreachable!()
        };
        if guest == GUEST {
            assert!(
                guest_user.1.contains("Full Name   :\tGuest Person\n"),
                "{guest_user:?}"
            );
        }
        assert!(
            c_user.1.contains("Full Name   :\tCarol Tester\n"),
            "{c_user:?}"
        );
        for ((cmd, s), (_, o)) in samba.iter().zip(ours) {
            assert_eq!(s, o, "{guest}: {cmd}");
        }
    }
}
