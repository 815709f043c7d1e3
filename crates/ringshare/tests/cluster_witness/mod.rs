//! The Witness service (issue 33, item 4; [MS-SWN]): a python client
//! (tests/py/witness_client.py, DCE/RPC over TCP with hand-built NDR) finds
//! node 1's Witness port through its endpoint mapper, lists the cluster's
//! interfaces, registers for node 3's address and holds an AsyncNotify,
//! which is answered when node 3 is killed (its etcd lease lapses) and when
//! it is back. Each node on its own loopback address, as clients tell nodes
//! apart by address.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;

use super::*;

const HOSTS: [&str; 3] = ["127.0.0.2", "127.0.0.3", "127.0.0.4"];

/// The client's output lines as they arrive, with their time.
struct Client {
    child: std::process::Child,
    lines: mpsc::Receiver<(Instant, String)>,
}

impl Client {
    fn start(host: &str, epm_port: u16, register: &[&str]) -> Client {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/witness_client.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([host, &epm_port.to_string(), "WITNESSLAB"])
            .args(register)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3");
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

#[test]
fn a_witness_client_hears_that_a_killed_node_went_and_came_back_within_two_seconds() {
    let name = "witness";
    if !etcd_available(name) {
        return;
    }
    let hosts = HOSTS.iter().map(|h| h.to_string()).collect();
    let mut cl = Cluster::start_on(name, "\tnetbios name = WITNESSLAB\n", Some(hosts));
    let client = Client::start(HOSTS[0], cl.witness_ports[0].1, &[HOSTS[2]]);
    let mut seen = Vec::new();
    let (_, port) = client.expect("PORT ", Duration::from_secs(10), &mut seen);
    assert_eq!(
        port,
        format!("PORT {}", cl.witness_ports[0].0),
        "the endpoint mapper's answer"
    );
    client.expect("REGISTERED 127.0.0.4", Duration::from_secs(10), &mut seen);
    // Every node's address, available; node 1's own not offered as a witness (flags: IPv4
    // valid 1, witness interface 4).
    let mut list: Vec<&String> = seen.iter().filter(|l| l.starts_with("LIST ")).collect();
    list.sort();
    assert_eq!(
        list,
        [
            "LIST 127.0.0.2 1 1",
            "LIST 127.0.0.3 1 5",
            "LIST 127.0.0.4 1 5"
        ],
        "{seen:?}"
    );

    let lapsed = lapse_watch(&cl, 3);
    let killed = Instant::now();
    cl.nodes[2]
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(5))
        .expect("node 3 died");
    let (t_down, down) = client.expect("EVENT 127.0.0.4", Duration::from_secs(20), &mut seen);
    assert_eq!(down, "EVENT 127.0.0.4 RESOURCE_CHANGE 255 127.0.0.4");
    let lapse = lapsed
        .recv_timeout(Duration::from_secs(5))
        .expect("node 3's record lapsed");
    let after_lapse = t_down.saturating_duration_since(lapse);

    let restarted = Instant::now();
    cl.nodes[2].spawn();
    let (t_up, up) = client.expect("EVENT 127.0.0.4", Duration::from_secs(20), &mut seen);
    assert_eq!(up, "EVENT 127.0.0.4 RESOURCE_CHANGE 1 127.0.0.4");
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
}
