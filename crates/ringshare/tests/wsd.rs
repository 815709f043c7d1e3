//! WS-Discovery seen by an independent client: Debian's `wsdd` in discovery mode (`wsdd -D`,
//! the program Samba sites run beside smbd) in one network namespace, ringshare in another,
//! joined by a veth pair (IPv4 and IPv6 link-local). wsdd must find the server's name and
//! workgroup through Probe, Resolve and the HTTP metadata exchange, see Bye at SIGTERM and
//! Hello at the next start, list the same fields for ringshare as for a `wsdd` announcing the
//! same name, and still find the server after hostile datagrams and HTTP requests
//! (tests/py/wsd_hostile.py). Root only.

mod common;
mod twin;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{ringshare_bin, TempDir};
use twin::{must, root_and_tools_or_skip};

const NAME: &str = "RSWSDTEST";
const WORKGROUP: &str = "LABGROUP";
const SERVER_IP: &str = "10.237.0.1";

/// Two network namespaces joined by a veth pair; removed on drop.
struct Nets {
    server: String,
    client: String,
    server_if: String,
    client_if: String,
}

impl Nets {
    fn new() -> Nets {
        let id = std::process::id() % 100_000;
        let n = Nets {
            server: format!("rswsd-s-{id}"),
            client: format!("rswsd-c-{id}"),
            server_if: format!("rsws{id}"),
            client_if: format!("rswc{id}"),
        };
        must("ip", &["netns", "add", &n.server]);
        must("ip", &["netns", "add", &n.client]);
        must(
            "ip",
            &[
                "link",
                "add",
                &n.server_if,
                "netns",
                &n.server,
                "type",
                "veth",
                "peer",
                "name",
                &n.client_if,
                "netns",
                &n.client,
            ],
        );
        for (ns, dev, ip) in [
            (&n.server, &n.server_if, "10.237.0.1/24"),
            (&n.client, &n.client_if, "10.237.0.2/24"),
        ] {
            // No duplicate address detection: the link-local address is usable at once.
            let dad = format!("net.ipv6.conf.{dev}.accept_dad=0");
            must("ip", &["netns", "exec", ns, "sysctl", "-qw", &dad]);
            must("ip", &["-n", ns, "addr", "add", ip, "dev", dev]);
            must("ip", &["-n", ns, "link", "set", dev, "up"]);
            must("ip", &["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }

    fn exec(&self, ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }
}

impl Drop for Nets {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.server])
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.client])
            .status();
    }
}

/// A child process ended (SIGTERM, then SIGKILL) on drop.
struct Proc(Child);

impl Proc {
    fn terminate(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate();
    }
}

fn spawn(mut c: Command, log: &Path) -> Proc {
    let out = fs::File::create(log).unwrap();
    Proc(
        c.stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .expect("spawn"),
    )
}

/// Wait until `check` holds; the panic shows the logs in `logs`.
fn wait_for(what: &str, logs: &[&Path], timeout: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let shown: Vec<String> = logs
        .iter()
        .map(|p| {
            format!(
                "{}:\n{}",
                p.display(),
                fs::read_to_string(p).unwrap_or_default()
            )
        })
        .collect();
    panic!("timed out waiting for {what}\n{}", shown.join("\n"));
}

/// How many lines of `log` contain `what`.
fn count(log: &Path, what: &str) -> usize {
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

/// `wsdd -D` (discovery only, no host of its own) on the client's side, logging every message
/// it gets and what it learnt (`-v -v`). Its API socket (`-l`) is not used: wsdd 0.7.0 passes
/// asyncio a `loop` argument Python 3.10 and later refuse, so that socket never opens.
fn start_wsdd_client(nets: &Nets, log: &Path) -> Proc {
    let mut c = nets.exec(&nets.client, "wsdd");
    c.args(["-D", "-o", "-v", "-v", "-s", "-i", &nets.client_if]);
    spawn(c, log)
}

/// Python's uuid5 of the name (the independent reckoning of the endpoint).
fn python_uuid5(name: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, uuid; print(uuid.uuid5(uuid.NAMESPACE_DNS, sys.argv[1]))",
            name,
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn start_ringshare(nets: &Nets, conf: &Path, log: &Path) -> Proc {
    let mut c = nets.exec(&nets.server, ringshare_bin());
    c.args(["serve", "--config"]).arg(conf);
    let p = spawn(c, log);
    wait_for(
        "ringshare's WS-Discovery",
        &[log],
        Duration::from_secs(20),
        || fs::read_to_string(log).is_ok_and(|t| t.contains("WS-Discovery: announcing")),
    );
    p
}

fn py_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py")
}

#[test]
fn wsdd_finds_the_server_by_probe_resolve_and_hello_and_sees_its_bye() {
    if !root_and_tools_or_skip(
        "wsdd_finds_the_server_by_probe_resolve_and_hello_and_sees_its_bye",
        &["ip", "wsdd", "python3", "sysctl"],
    ) {
        return;
    }
    let tmp = TempDir::new("wsd");
    let nets = Nets::new();
    let share = tmp.path().join("share");
    fs::create_dir_all(&share).unwrap();
    let conf = tmp.path().join("ringshare.conf");
    fs::write(
        &conf,
        format!(
            "[global]\n\tlisten = 0.0.0.0:445\n\tnetbios name = {NAME}\n\tworkgroup = {WORKGROUP}\n\
             \tsmb passwd file = {}/smbpasswd\n\tlog level = 2\n[share]\n\tpath = {}\n",
            tmp.path().display(),
            share.display()
        ),
    )
    .unwrap();
    let uuid = python_uuid5(&NAME.to_lowercase());
    let rs_log = tmp.path().join("serve.log");
    let mut server = start_ringshare(&nets, &conf, &rs_log);

    // wsdd starts after the server's Hello: it finds the server by Probe, Resolve and Get.
    // wsdd reads `pub:Computer` as NAME/BELONGS_TO: "discovered NAME in Workgroup:WORKGROUP".
    let wsdd_log = tmp.path().join("wsdd.log");
    let mut wsdd = start_wsdd_client(&nets, &wsdd_log);
    let found_v4 = format!("discovered {NAME} in Workgroup:{WORKGROUP} on {SERVER_IP}%");
    let found_v6 = format!("discovered {NAME} in Workgroup:{WORKGROUP} on [fe80::");
    let logs = [rs_log.as_path(), wsdd_log.as_path()];
    wait_for(
        "wsdd to find the server",
        &logs,
        Duration::from_secs(30),
        || count(&wsdd_log, &found_v4) == 1 && count(&wsdd_log, &found_v6) == 1,
    );
    let text = fs::read_to_string(&wsdd_log).unwrap();
    for what in ["\"ProbeMatches urn:uuid:", "\"ResolveMatches urn:uuid:"] {
        assert!(
            text.contains(&format!("{SERVER_IP}:3702(")) && text.contains(what),
            "{what} missing:\n{text}"
        );
    }
    let props = format!(
        "'types': ['pub:Computer'], 'DisplayName': '{NAME}', 'BelongsTo': 'Workgroup:{WORKGROUP}'"
    );
    assert!(text.contains(&props), "{text}");

    // SIGTERM: Bye, naming the endpoint; wsdd forgets the server, so that the Hello of the
    // next start makes it fetch the metadata and report the server anew.
    server.terminate();
    let bye = "/Bye</wsa:Action>";
    let ours = format!("<wsa:Address>urn:uuid:{uuid}</wsa:Address>");
    wait_for(
        "wsdd to get the Bye",
        &logs,
        Duration::from_secs(15),
        || {
            fs::read_to_string(&wsdd_log)
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains(bye) && l.contains(&ours))
        },
    );
    let mut server = start_ringshare(&nets, &conf, &rs_log);
    wait_for(
        "wsdd to see the Hello",
        &logs,
        Duration::from_secs(15),
        || {
            count(
                &wsdd_log,
                &format!("Hello from urn:uuid:{uuid} on http://{SERVER_IP}:5357/{uuid}"),
            ) == 1
                && count(&wsdd_log, &found_v4) == 2
        },
    );

    // Hostile datagrams and HTTP requests; the server still answers (a new wsdd finds it).
    let out = nets
        .exec(&nets.client, "python3")
        .arg(py_dir().join("wsd_hostile.py"))
        .args([SERVER_IP, &uuid])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "wsd_hostile.py: {said}");
    assert!(said.contains("udp ok"), "{said}");
    assert!(said.contains("http 404 400 400 400 400 400 200"), "{said}");
    assert!(server.0.try_wait().unwrap().is_none(), "ringshare died");
    wsdd.terminate();
    let again = tmp.path().join("wsdd-again.log");
    let mut wsdd = start_wsdd_client(&nets, &again);
    wait_for(
        "a new wsdd to find the server",
        &[&rs_log, &again],
        Duration::from_secs(30),
        || count(&again, &found_v4) == 1,
    );
    let rs = fs::read_to_string(&rs_log).unwrap();
    assert!(rs.contains("WS-Discovery: dropped a datagram"), "{rs}");
    server.terminate();
    wsdd.terminate();

    // wsdd announcing the same name, workgroup and UUID: the client learns the same fields.
    let mut c = nets.exec(&nets.server, "wsdd");
    c.args([
        "-i",
        &nets.server_if,
        "-n",
        NAME,
        "-w",
        WORKGROUP,
        "-U",
        &uuid,
    ]);
    let host_log = tmp.path().join("wsdd-host.log");
    let _host = spawn(c, &host_log);
    let from_wsdd = tmp.path().join("wsdd-of-wsdd.log");
    let _wsdd = start_wsdd_client(&nets, &from_wsdd);
    wait_for(
        "wsdd to find wsdd's host",
        &[&host_log, &from_wsdd],
        Duration::from_secs(30),
        || count(&from_wsdd, &found_v4) == 1,
    );
    let text = fs::read_to_string(&from_wsdd).unwrap();
    assert!(text.contains(&props), "{text}");
}
