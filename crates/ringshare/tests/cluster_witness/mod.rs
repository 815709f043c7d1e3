//! The Witness service (issue 33, item 4; [MS-SWN]): a python client
//! (tests/py/witness_client.py, hand-built NDR; Witness calls through python
//! impacket's DCE/RPC over TCP, NTLMSSP at packet privacy) finds node 1's
//! Witness port through its (anonymous) endpoint mapper, lists the cluster's
//! interfaces, registers for node 3's address and holds an AsyncNotify,
//! which is answered when node 3 is killed (its etcd lease lapses) and when
//! it is back; a second registration, for node 2's address, is told to move
//! (CLIENT_MOVE) when `ringshare cluster drain 2` runs. Each node on its own
//! loopback address, as clients tell nodes apart by address (or, by
//! scripts/cluster-ceph.sh, each in its own network namespace at its own address:
//! the test takes the addresses the nodes listen on from the cluster).

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use super::*;
use common::kdc::{where_fs_rs_test_resolves, Kdc, REALM};

/// The nodes' addresses on loopback (scripts/cluster-ceph.sh's RINGSHARE_CLUSTER_ADDRESSES
/// replace them).
const HOSTS: [&str; 3] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];

/// The client's output lines as they arrive, with their time.
struct Client {
    child: std::process::Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl Client {
    /// A client of `host`'s Witness, as `user` (`NAME%PASSWORD`, sealed) or anonymous.
    fn start(host: &str, epm_port: u16, user: Option<&str>, register: &[&str]) -> Client {
        let opts: Vec<&str> = user.map(|u| ["--user", u]).into_iter().flatten().collect();
        Client::start_with(
            Command::new("/usr/bin/python3"),
            &opts,
            host,
            epm_port,
            register,
        )
    }

    /// A client of `host`'s Witness that binds with Kerberos (in SPNEGO, sealed) with the
    /// ticket for host/fs.rs.test in `kdc`'s cache.
    fn kerberos(kdc: &Kdc, host: &str, epm_port: u16, register: &[&str]) -> Client {
        let mut c = Command::new("/usr/bin/python3");
        // impacket takes the cache's path, without MIT's "FILE:".
        kdc.env(&mut c)
            .env("KRB5CCNAME", kdc.dir.path().join("ccache"));
        Client::start_with(c, &["--krb", "fs.rs.test"], host, epm_port, register)
    }

    /// `python` (Debian's, with python3-impacket) running the client with `opts`.
    fn start_with(
        mut python: Command,
        opts: &[&str],
        host: &str,
        epm_port: u16,
        register: &[&str],
    ) -> Client {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/witness_client.py");
        let mut child = python
            .arg(script)
            .args(opts)
            .args([host, &epm_port.to_string(), "WITNESSLAB"])
            .args(register)
            .stdout(Stdio::piped())
            .spawn()
            .expect("/usr/bin/python3");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(out).lines() {
                let Ok(l) = l else { return };
                if tx.send((Instant::now(), l)).is_err() {
                    return;
                }
            }
        });
        Client { child, lines }
    }

    /// The next line starting with `prefix` within `limit` (others are collected in `seen`).
    fn expect(&self, prefix: &str, limit: Duration, seen: &mut Vec<String>) -> (Instant, String) {
        let end = Instant::now() + limit;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((t, l)) if l.starts_with(prefix) => return (t, l),
                Ok((_, l)) => seen.push(l),
                Err(_) => panic!("no '{prefix}' line within {limit:?}; saw {seen:?}"),
            }
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// When node `n`'s record leaves etcd (its lease lapsed), polled every 20 ms from another thread.
fn lapse_watch(cl: &Cluster, n: u16) -> mpsc::Receiver<Instant> {
    let mut e = cl.etcd.client();
    let key = format!("/ringshare/{}/nodes/{n}", cl.name).into_bytes();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            let deadline = Instant::now() + Duration::from_secs(1);
            if let Ok(None) = e.get(&key, deadline) {
                let _ = tx.send(Instant::now());
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    rx
}

/// `ringshare cluster drain|undrain 2` with node 1's configuration; when it returned.
fn drain(cl: &Cluster, verb: &str) -> Instant {
    let out = Command::new(common::ringshare_bin())
        .args(["cluster", verb, "2", "--config"])
        .arg(cl.nodes[0].conf())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Instant::now()
}

/// The share capabilities TREE_CONNECT answers.
fn share_caps(c: &mut Raw) -> u32 {
    let req = ringshare_wire::tree::TreeConnectRequest {
        flags: ringshare_wire::consts::TreeConnectFlags::empty(),
        path: "\\\\server\\share".into(),
        extension: None,
    };
    let mut body = Vec::new();
    req.encode(&mut body);
    match c.call(ringshare_wire::consts::Command::TREE_CONNECT, &body) {
        Outcome::Reply(_, m) => {
            u32::from_le_bytes(m[HEADER_LEN + 8..HEADER_LEN + 12].try_into().unwrap())
        }
        o => panic!("TREE_CONNECT: {o:?}"),
    }
}

/// smbtorture's rpc.witness tests that need no MS-CMRP (clusapi) against node 1's Witness port,
/// as a user (SPNEGO with NTLMSSP, smbtorture's default) with the binding's `sign` (packet
/// integrity) and `seal` (privacy);
/// srvsvc, which they also ask, over SMB on node 1's port. Panics with the output of those
/// that do not report success. Without smbtorture: a SKIPPED line. AsyncNotify and
/// AsyncNotify_timeouts are left out: they toggle a cluster resource through clusapi (a Windows
/// failover cluster's; smbtorture 4.22 crashes in AsyncNotify when its bind fails, and
/// AsyncNotify_timeouts then waits on a registration whose timeout 0 means no limit).
fn smbtorture_witness(cl: &Cluster, kdc: Option<&Kdc>) {
    let Ok(_) = Command::new("smbtorture").arg("--version").output() else {
        eprintln!("!!!!!!!! SKIPPED smbtorture rpc.witness: no smbtorture !!!!!!!!");
        return;
    };
    let t = Instant::now();
    let tests = ["GetInterfaceList", "Register", "UnRegister", "RegisterEx"];
    let user = format!("{}%{}", USER_A.0, USER_A.1);
    let mut failed = Vec::new();
    // With a KDC, each also over Kerberos (krb5: auth type 16; in SPNEGO: 9), named
    // fs.rs.test (node 1's address in a private mount namespace, for the ticket's name).
    let mut runs: Vec<(&str, &str)> = Vec::new();
    for t in &tests {
        runs.extend([(*t, "sign"), (*t, "seal")]);
        if kdc.is_some() {
            runs.extend([(*t, "krb5,sign"), (*t, "krb5,seal"), (*t, "spnego,seal")]);
        }
    }
    let node1 = cl.nodes[0].host.as_str();
    let hosts = kdc.map(|k| k.hosts_file_for(node1));
    for (test, protection) in runs {
        let krb = protection.contains("krb5") || protection.contains("spnego");
        let host = if krb { "fs.rs.test" } else { node1 };
        let binding = format!(
            "ncacn_ip_tcp:{host}[{},{protection}]",
            cl.witness_ports[0].0
        );
        let name = format!("rpc.witness.witness.{test}");
        let full = format!("rpc.witness.witness.witness.{test}");
        let mut c = match (krb, kdc, &hosts) {
            (true, Some(kdc), Some(hosts)) => {
                let mut c = where_fs_rs_test_resolves(kdc, hosts, "timeout");
                c.args(["60", "smbtorture", &binding, "--use-kerberos=required"])
                    .arg(format!("-U{}%{}", common::USER, common::PASSWORD));
                c
            }
            _ => {
                let mut c = Command::new("timeout");
                c.args(["60", "smbtorture", &binding, "-U", &user]);
                c
            }
        };
        let out = c
            .arg("--option=torture:net_name=WITNESSLAB")
            .arg(format!("--option=smb ports={}", cl.nodes[0].port))
            .args(["--fullname", &name])
            .stdin(Stdio::null())
            .output()
            .expect("smbtorture");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        if !text.lines().any(|l| l.trim() == format!("success: {full}")) {
            failed.push(format!("--- {name} [{protection}] ---\n{text}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    eprintln!(
        "[witness] smbtorture rpc.witness {tests:?}, each signed and sealed (with Kerberos too: \
         {}), passed in {:?}",
        kdc.is_some(),
        t.elapsed()
    );
}

#[test]
fn a_witness_client_hears_that_a_killed_node_went_and_came_back_and_a_drained_one_says_move() {
    let name = "witness";
    if !etcd_available(name) {
        return;
    }
    // Kerberos: every node takes tickets for host/fs.rs.test from an MIT KDC (RS.TEST).
    let kdc = kerberos_kdc(name);
    let mut global = "\tnetbios name = WITNESSLAB\n".to_string();
    if let Some(k) = &kdc {
        global += &format!(
            "\trealm = {REALM}\n\tkerberos method = dedicated keytab\n\
             \tdedicated keytab file = {}\n",
            k.keytab().display()
        );
    }
    let hosts = HOSTS.iter().map(|h| h.to_string()).collect();
    let mut cl = Cluster::start_on(name, &global, Some(hosts), None, 1);
    // Where each node listens (HOSTS, or the namespaces' addresses on CephFS).
    let [a1, a2, a3] = [0, 1, 2].map(|i| cl.nodes[i].host.clone());
    // A share of a node that serves Witness says SCALEOUT and CLUSTER.
    assert_eq!(share_caps(&mut cl.client(1)), 0x20 | 0x40);
    // Witness wants packet integrity: an anonymous client and a wrong password are refused.
    let epm = cl.witness_ports[0].1;
    let t = Instant::now();
    let bad = format!("{}%not-the-password", USER_A.0);
    for user in [None, Some(bad.as_str())] {
        let refused = Client::start(&a1, epm, user, &[]);
        let (_, why) = refused.expect("REFUSED ", Duration::from_secs(10), &mut Vec::new());
        eprintln!("[{name}] {user:?}: {why}");
        // nca_s_fault_access_denied: impacket names it, the hand-built client gives the number.
        assert!(
            why.contains("rpc_s_access_denied") || why.contains("fault 0x00000005"),
            "{why}"
        );
    }
    eprintln!("[{name}] both refusals took {:?}", t.elapsed());
    let user = format!("{}%{}", USER_A.0, USER_A.1);
    let client = Client::start(&a1, epm, Some(&user), &[&a3, &a2]);
    let mut seen = Vec::new();
    let (_, port) = client.expect("PORT ", Duration::from_secs(10), &mut seen);
    assert_eq!(
        port,
        format!("PORT {}", cl.witness_ports[0].0),
        "the endpoint mapper's answer"
    );
    // Both registrations, in either order (one thread each).
    let mut registered: Vec<String> = (0..2)
        .map(|_| {
            client
                .expect("REGISTERED ", Duration::from_secs(10), &mut seen)
                .1
        })
        .collect();
    registered.sort();
    let mut want = [format!("REGISTERED {a2}"), format!("REGISTERED {a3}")];
    want.sort();
    assert_eq!(registered, want);
    // Every node's address, available; node 1's own not offered as a witness (flags: IPv4
    // valid 1, witness interface 4).
    let mut list: Vec<&String> = seen.iter().filter(|l| l.starts_with("LIST ")).collect();
    list.sort();
    let mut want = [
        format!("LIST {a1} 1 1"),
        format!("LIST {a2} 1 5"),
        format!("LIST {a3} 1 5"),
    ];
    want.sort();
    assert_eq!(list, want.iter().collect::<Vec<_>>(), "{seen:?}");

    // A client that binds with Kerberos (impacket: in SPNEGO, DCE style, sealed) registers too.
    let krb_client = kdc.as_ref().map(|kdc| {
        kdc.run("kvno", &["host/fs.rs.test"]);
        let c = Client::kerberos(kdc, &a1, epm, &[&a3]);
        let (_, reg) = c.expect("REGISTERED ", Duration::from_secs(10), &mut Vec::new());
        assert_eq!(reg, format!("REGISTERED {a3}"));
        c
    });

    smbtorture_witness(&cl, kdc.as_ref());

    let lapsed = lapse_watch(&cl, 3);
    let takeovers = cl.takeovers_for(3);
    let killed = Instant::now();
    cl.nodes[2]
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(5))
        .expect("node 3 died");
    let ev3 = format!("EVENT {a3}");
    let (t_down, down) = client.expect(&ev3, Duration::from_secs(20), &mut seen);
    assert_eq!(down, format!("EVENT {a3} RESOURCE_CHANGE 255 {a3}"));
    if let Some(c) = &krb_client {
        let (_, down) = c.expect(&ev3, Duration::from_secs(5), &mut Vec::new());
        assert_eq!(
            down,
            format!("EVENT {a3} RESOURCE_CHANGE 255 {a3}"),
            "over Kerberos"
        );
    }
    let lapse = lapsed
        .recv_timeout(Duration::from_secs(5))
        .expect("node 3's record lapsed");
    let after_lapse = t_down.saturating_duration_since(lapse);

    let restarted = cl.start_again_after_death(3, takeovers);
    let (t_up, up) = client.expect(&ev3, Duration::from_secs(20), &mut seen);
    assert_eq!(up, format!("EVENT {a3} RESOURCE_CHANGE 1 {a3}"));
    eprintln!(
        "[{name}] RESOURCE_CHANGE UNAVAILABLE {:?} after node 3's kill -9, {after_lapse:?} after \
         its etcd record lapsed (lease TTL 6 s); AVAILABLE {:?} after its restart",
        t_down - killed,
        t_up - restarted
    );
    assert!(
        after_lapse <= Duration::from_secs(2),
        "{after_lapse:?} after the lapse"
    );

    // Drained: its registered client is told to go to node 1; undrained, nothing more.
    let mut kept = cl.client(2);
    let drained = drain(&cl, "drain");
    let (t_move, mv) = client.expect(&format!("EVENT {a2}"), Duration::from_secs(10), &mut seen);
    assert_eq!(mv, format!("EVENT {a2} CLIENT_MOVE {a1}"));
    let after_drain = t_move.saturating_duration_since(drained);
    drain(&cl, "undrain");
    eprintln!("[{name}] CLIENT_MOVE {after_drain:?} after `ringshare cluster drain 2` returned");
    assert!(
        after_drain <= Duration::from_secs(2),
        "{after_drain:?} after the drain"
    );
    // The drained node kept serving the client it had (node 3's partitions may still be
    // moving back to it: FILE_NOT_AVAILABLE is "try again").
    let f = when_available("an open through the drained node", || {
        open(&mut kept, "after-drain.txt", ALL, 7)
    });
    kept.write(f, 0, b"kept")
        .expect("write through the drained node");
    assert_eq!(kept.read(f, 0, 4).expect("read"), b"kept");
    // A ticket made with a key the nodes' keytab lacks (the service's key changed at the KDC):
    // the bind is refused (bind_nak) and the node says why.
    if let Some(kdc) = &kdc {
        kdc.admin("cpw -randkey host/fs.rs.test");
        kdc.kinit();
        kdc.run("kvno", &["host/fs.rs.test"]);
        let refused = Client::kerberos(kdc, &a1, epm, &[]);
        let (_, why) = refused.expect("REFUSED ", Duration::from_secs(10), &mut Vec::new());
        eprintln!("[{name}] a ticket of a key the keytab lacks: {why}");
        let log = cl.nodes[0].log();
        assert!(
            log.contains("rpc: a bind refused: the BIND's Kerberos ticket")
                && log.contains("no key in the keytab for host/fs.rs.test"),
            "{log}"
        );
    }
}

/// An MIT KDC for RS.TEST whose host/fs.rs.test keys are in its keytab, the user's TGT in its
/// cache; None (the Kerberos part skipped) without the KDC's tools.
fn kerberos_kdc(test: &str) -> Option<Kdc> {
    let tools = [
        ("krb5kdc", "krb5-kdc"),
        ("kadmin.local", "krb5-admin-server"),
        ("kvno", "krb5-user"),
    ];
    if !common::root_and_commands_or_skip(test, &tools) {
        return None;
    }
    // The KDC's user logs on to SMB as the Unix account of its name (smbtorture's srvsvc).
    common::ensure_unix_account(common::USER);
    let kdc = Kdc::start();
    // impacket asks for host/NAME; smbtorture for Witness's cifs/ service, its name in capitals
    // (principal names are case-sensitive at the KDC; the keytab's keys are tried whatever the
    // ticket's name).
    for p in ["host/fs.rs.test", "cifs/FS.RS.TEST"] {
        kdc.admin(&format!("addprinc -randkey {p}"));
        kdc.admin(&format!("ktadd -k {} {p}", kdc.keytab().display()));
    }
    kdc.kinit();
    Some(kdc)
}
