//! Three etcd members on loopback for tests (Debian's etcd-server 3.4):
//! started on free ports with their data in a temp dir, killed and removed
//! on drop. Shared by the coordination tests and the server's cluster tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::collections::BTreeMap;

use ringshare_cluster::etcd::Etcd;
use ringshare_cluster::preferred_owner;

pub fn etcd_available(test: &str) -> bool {
    let ok = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("etcd is not installed (scripts/install-deps.sh --test installs etcd-server)");
        }
        eprintln!("\n!!!!!!!! SKIPPED {test}: etcd is not installed (apt-get install etcd-server) !!!!!!!!\n");
    }
    ok
}

/// The address the members listen on: loopback, or the host's side of the
/// nodes' network namespaces (`RINGSHARE_CLUSTER_HOST`, set by
/// scripts/cluster-ceph.sh).
pub fn etcd_host() -> String {
    std::env::var("RINGSHARE_CLUSTER_HOST").unwrap_or_else(|_| "127.0.0.1".into())
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind((etcd_host().as_str(), 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three etcd members on free ports of [`etcd_host`], data in a temp dir; all killed and removed on drop.
pub struct EtcdCluster {
    dir: PathBuf,
    members: Vec<Option<Child>>,
    pub urls: Vec<String>,
}

impl EtcdCluster {
    /// Member `i`'s log (its stdout and stderr), while the cluster runs.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{i}.log"))
    }

    /// Start three members; again on other ports when one of them could
    /// not start (a port taken meanwhile by another test), at most 3 times.
    pub fn start(name: &str) -> EtcdCluster {
        let mut attempt = 1;
        loop {
            match EtcdCluster::try_start(name) {
                Ok(c) => return c,
                Err(e) if attempt < 3 => {
                    eprintln!("[{name}] etcd did not start ({e}); again on other ports");
                    attempt += 1;
                }
                Err(e) => panic!("[{name}] etcd did not start: {e}"),
            }
        }
    }

    fn try_start(name: &str) -> Result<EtcdCluster, String> {
        let dir =
            std::env::temp_dir().join(format!("ringshare-cluster-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let host = etcd_host();
        let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("n{i}=http://{host}:{peer}"))
            .collect();
        let mut c = EtcdCluster {
            dir: dir.clone(),
            members: Vec::new(),
            urls: Vec::new(),
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let url = format!("http://{host}:{client}");
            let log = std::fs::File::create(dir.join(format!("n{i}.log"))).unwrap();
            let child = Command::new("etcd")
                .args(["--name", &format!("n{i}"), "--data-dir"])
                .arg(dir.join(format!("n{i}")))
                .args([
                    "--listen-client-urls",
                    &url,
                    "--advertise-client-urls",
                    &url,
                ])
                .args(["--listen-peer-urls", &format!("http://{host}:{peer}")])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://{host}:{peer}"),
                ])
                .args([
                    "--initial-cluster",
                    &initial.join(","),
                    "--initial-cluster-state",
                    "new",
                ])
                .args(["--initial-cluster-token", name])
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start etcd");
            c.members.push(Some(child));
            c.urls.push(url);
        }
        // Each member answers a write (a busy machine may take a while to
        // start them: connections are refused until each listens).
        let t = Instant::now();
        let deadline = t + Duration::from_secs(30);
        for (i, url) in c.urls.clone().iter().enumerate() {
            let mut e = Etcd::new(std::slice::from_ref(url), Duration::from_secs(1)).unwrap();
            while let Err(err) = e.put(b"/health", b"ok", Instant::now() + Duration::from_secs(2)) {
                let exited = c
                    .members
                    .iter_mut()
                    .flatten()
                    .any(|m| m.try_wait().ok().flatten().is_some());
                if exited || Instant::now() > deadline {
                    let log =
                        std::fs::read_to_string(dir.join(format!("n{i}.log"))).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(5).collect();
                    return Err(format!(
                        "{url}: {err}{}; its log ends: {tail:?}",
                        if exited { " (a member exited)" } else { "" }
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        eprintln!("[{name}] 3 etcd members healthy in {:?}", t.elapsed());
        Ok(c)
    }

    pub fn client(&self) -> Etcd {
        Etcd::new(&self.urls, Duration::from_secs(1)).unwrap()
    }

    pub fn leader(&self) -> usize {
        let mut ids = Vec::new();
        let mut leader = 0;
        for url in &self.urls {
            let mut e = Etcd::new(std::slice::from_ref(url), Duration::from_secs(1)).unwrap();
            let (me, l) = e.status(Instant::now() + Duration::from_secs(5)).unwrap();
            ids.push(me);
            leader = l;
        }
        ids.iter()
            .position(|i| *i == leader)
            .expect("a leader among the members")
    }

    /// The process id of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members[i].as_ref().map(std::process::Child::id)
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Owner and fencing token of every owned partition of `cluster`, as etcd has them.
pub fn owners(etcd: &mut Etcd, cluster: &str) -> BTreeMap<u32, (String, i64)> {
    let prefix = format!("/ringshare/{cluster}/parts/");
    let (_, kvs) = etcd
        .range_prefix(prefix.as_bytes(), Instant::now() + Duration::from_secs(5))
        .unwrap();
    kvs.into_iter()
        .map(|kv| {
            let p = std::str::from_utf8(&kv.key)
                .unwrap()
                .strip_prefix(&prefix)
                .unwrap()
                .parse()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&kv.value).unwrap();
            (
                p,
                (v["owner"].as_str().unwrap().to_string(), kv.mod_revision),
            )
        })
        .collect()
}

/// Waits until every partition is owned by its preferred owner among `live`; returns the owners.
pub fn wait_placed(
    etcd: &mut Etcd,
    cluster: &str,
    live: &[&str],
    timeout: Duration,
) -> BTreeMap<u32, (String, i64)> {
    let end = Instant::now() + timeout;
    loop {
        let o = owners(etcd, cluster);
        let placed = (0..256u32).all(|p| {
            o.get(&p).map(|(n, _)| n.as_str()) == preferred_owner(live.iter().copied(), p)
        });
        if placed {
            return o;
        }
        assert!(
            Instant::now() < end,
            "partitions not placed on {live:?} within {timeout:?}: {o:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
