//! The rolling upgrade (issue 33, "Also"; docs/cluster.md "Upgrading a cluster"): three nodes
//! of the previous release's binary (`RINGSHARE_OLD_BIN`, e9524d6: the last build before
//! levels) on a continuously available share, clients writing throughout — persistent handles
//! (DH2Q) of files homed on every node, and plain opens (open, write, close) — and each node in
//! turn stopped cleanly (SIGTERM: it hands its files over) and started again as this build on
//! the same addresses, the cluster let settle between nodes. Each step prints the cluster's
//! level as `ringshare cluster nodes` computes it, the answers the clients got other than
//! SUCCESS, and the longest a client waited for a write. It fails when a client got any answer
//! but SUCCESS or FILE_NOT_AVAILABLE (try again), or lost its connection to a node that was not
//! the one stopping, or an open did not come back, or any acknowledged byte is not in its file
//! at the end, or the level is not 1 while an old node serves and this build's (`msg::LEVEL`) once
//! all are new.
//! scripts/cluster-upgrade.sh builds or takes the old binary and runs it.

use std::collections::BTreeMap;
use std::panic::catch_unwind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use super::*;
use ringshare_wire::consts::Dialect;

/// Bytes per write; every file is a run of chunks of [`pattern`].
const CHUNK: usize = 4096;
/// How long clients write between steps (on the old cluster, after each node's upgrade).
pub const BETWEEN: Duration = Duration::from_secs(3);

/// Issue 33 (item 1's class), short: node 1 stopped (SIGTERM) and started again while clients of
/// every node hold persistent handles of files homed on every node and write. The handles that
/// reconnected through a survivor go on once node 1 has taken its partitions back (a dead
/// node's open taken over has its keeper's id: under node 1's it was taken for the new node
/// 1's, its writes got FILE_CLOSED and later reconnects OBJECT_NAME_NOT_FOUND); nothing
/// acknowledged is lost, and no answer is anything but SUCCESS or FILE_NOT_AVAILABLE. The
/// control run's first step (all three nodes: `OLD_BIN=this scripts/cluster-upgrade.sh`).
#[test]
fn a_node_stopped_and_started_again_while_persistent_handles_reconnect_loses_none() {
    run("restart", None, 1, Duration::from_millis(1_500));
}

/// Chunk `i` of the file `seed` names: the bytes its writer writes there, and the only ones.
fn pattern(seed: u64, i: u64) -> Vec<u8> {
    (0..CHUNK as u64)
        .map(|b| {
            let x = (seed ^ (i * CHUNK as u64 + b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            (x >> 56) as u8
        })
        .collect()
}

/// What the clients and the step loop share.
struct Shared {
    /// Bit n-1: node n serves (cleared before its SIGTERM, set once it is placed again).
    up: AtomicU8,
    stop: AtomicBool,
    /// The step under way: 0 the old cluster, n the upgrade of node n.
    step: AtomicUsize,
    /// Each node's SMB address.
    addrs: Vec<(String, u16)>,
    /// Per step: answers other than SUCCESS as "what (fine|WRONG)", counted.
    seen: Mutex<BTreeMap<(usize, String), usize>>,
    /// Per step: the longest a client waited for a write's acknowledgment (or a reconnect).
    stall: Mutex<BTreeMap<usize, Duration>>,
}

impl Shared {
    fn note(&self, what: String, fine: bool) {
        let step = self.step.load(Ordering::Acquire);
        let key = format!("{what} ({})", if fine { "fine" } else { "WRONG" });
        *self.seen.lock().unwrap().entry((step, key)).or_default() += 1;
    }

    /// Now, and the step under way (where a wait that starts now is counted).
    fn since(&self) -> (Instant, usize) {
        (Instant::now(), self.step.load(Ordering::Acquire))
    }

    /// A client waited from `since` (its time and step) until now for `what`: counted in the step
    /// it began in (a reconnect that spans steps is not a stall of the step it ends in), and
    /// said when it is long (which client, from which step to which).
    fn waited(&self, (t, began): (Instant, usize), what: &str) {
        let d = t.elapsed();
        let step = self.step.load(Ordering::Acquire);
        if d >= Duration::from_secs(3) {
            eprintln!(
                "[upgrade] {what} waited {:.2} s, from step {began} to step {step}",
                d.as_secs_f64()
            );
        }
        let mut s = self.stall.lock().unwrap();
        let m = s.entry(began).or_default();
        *m = (*m).max(d);
    }

    fn serves(&self, n: u16) -> bool {
        self.up.load(Ordering::Acquire) & (1 << (n - 1)) != 0
    }

    /// A logged-on client of the first serving node from `from` on (round the nodes).
    fn login(&self, from: u16) -> (u16, Raw) {
        let t = Instant::now();
        loop {
            for k in 0..NODES {
                let n = 1 + (from - 1 + k) % NODES;
                if !self.serves(n) {
                    continue;
                }
                let (host, port) = &self.addrs[usize::from(n) - 1];
                if let Ok(c) =
                    catch_unwind(|| Raw::login_at(host, *port, USER_A, Dialect::SMB3_1_1))
                {
                    return (n, c);
                }
                self.note(format!("logon refused by node {n}"), !self.serves(n));
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "no node took a logon for 30 s"
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Count a status that was not SUCCESS: FILE_NOT_AVAILABLE (try again) by itself, any
    /// other with its file and node.
    fn answered(&self, node: u16, what: &str, file: &str, s: NtStatus) {
        if s == NtStatus::FILE_NOT_AVAILABLE {
            self.note(format!("{what}: {s:?}"), true);
        } else {
            self.note(
                format!("{what} of {file} through node {node}: {s:?}"),
                false,
            );
        }
    }

    /// Classify an answer that was not SUCCESS (to a request about `file`); true: the
    /// connection is gone.
    fn failed(&self, node: u16, what: &str, file: &str, o: &Outcome) -> bool {
        match o {
            Outcome::Reply(h, _) => {
                self.answered(node, what, file, h.status);
                false
            }
            Outcome::Closed => {
                // Only the node that is stopping may drop its clients.
                self.note(
                    format!("{what}: connection closed by node {node}"),
                    !self.serves(node),
                );
                true
            }
            Outcome::Silent => {
                self.note(
                    format!("{what}: no answer from node {node} for 10 s"),
                    false,
                );
                true
            }
        }
    }
}

/// A writer's file: its name, its pattern's seed and how many chunks were acknowledged.
struct Written {
    name: String,
    seed: u64,
    acked: u64,
}

/// Writes chunk after chunk to persistent opens of `files` (one homed on each node); a lost
/// connection is followed by a DH2C of every open through a serving node.
fn persistent_writer(sh: &Shared, w: u16, files: Vec<String>) -> Vec<Written> {
    let (mut node, mut c) = sh.login(w);
    let mut held: Vec<(Written, u8, FileId)> = Vec::new();
    for (i, f) in files.into_iter().enumerate() {
        let guid = 100 + (w as u8) * 10 + i as u8;
        let (fid, _) = when_available(&f, || {
            opened(c.call(Command::CREATE, &durable_create_as(&f, guid, None, true)))
        });
        let seed = u64::from(w) * 1000 + i as u64;
        held.push((
            Written {
                name: f,
                seed,
                acked: 0,
            },
            guid,
            fid,
        ));
    }
    let mut last = sh.since();
    let mut k = 0usize;
    while !sh.stop.load(Ordering::Acquire) {
        let (file, _, fid) = &mut held[k % 3];
        let data = pattern(file.seed, file.acked);
        match c.write(*fid, file.acked * CHUNK as u64, &data) {
            Ok(_) => {
                file.acked += 1;
                sh.waited(last, &format!("a write of {}", file.name));
                last = sh.since();
                k += 1;
                thread::sleep(Duration::from_millis(20));
            }
            Err(o) => {
                if sh.failed(node, "persistent write", &file.name, &o) {
                    (node, c) = sh.login(node % NODES + 1);
                    let mut k = 0;
                    while k < held.len() {
                        let (file, guid, fid) = &mut held[k];
                        match reconnect(sh, &mut c, node, &file.name, *guid, *fid) {
                            Some(back) => {
                                *fid = back;
                                k += 1;
                            }
                            // That node went too: all of them again through the next.
                            None => {
                                (node, c) = sh.login(node % NODES + 1);
                                k = 0;
                            }
                        }
                    }
                    sh.waited(last, &format!("the reconnects through node {node}"));
                    last = sh.since();
                } else {
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
    for (_, _, fid) in &held {
        let _ = c.close(*fid);
    }
    held.into_iter().map(|(w, _, _)| w).collect()
}

/// DH2C of a persistent open through `node` until it is back (FILE_NOT_AVAILABLE: again);
/// `None` when the connection went (a node stopping).
fn reconnect(
    sh: &Shared,
    c: &mut Raw,
    node: u16,
    f: &str,
    guid: u8,
    fid: FileId,
) -> Option<FileId> {
    let t = Instant::now();
    loop {
        let o = c.call(
            Command::CREATE,
            &durable_create_as(f, guid, Some(fid), true),
        );
        if !matches!(o, Outcome::Reply(..)) {
            sh.failed(node, "DH2C", f, &o);
            return None;
        }
        match opened(o) {
            Ok((back, _)) => {
                assert_eq!(
                    back.persistent, fid.persistent,
                    "{f}: another open came back"
                );
                return Some(back);
            }
            Err(s) => sh.answered(node, "DH2C", f, s),
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{f}: not back through node {node} in 20 s"
        );
        thread::sleep(Duration::from_millis(200));
    }
}

/// Opens, writes a chunk to and closes `files` in turn, moving to the next serving node every
/// 20 rounds (so it is a client of old and new nodes alike).
fn plain_writer(sh: &Shared, w: u16, files: Vec<String>) -> Vec<Written> {
    let mut written: Vec<Written> = files
        .into_iter()
        .enumerate()
        .map(|(i, name)| Written {
            name,
            seed: u64::from(w) * 1000 + i as u64,
            acked: 0,
        })
        .collect();
    let (mut node, mut c) = sh.login(w);
    let mut last = sh.since();
    let mut k = 0usize;
    while !sh.stop.load(Ordering::Acquire) {
        if k % 60 == 59 {
            (node, c) = sh.login(node % NODES + 1);
        }
        let file = &mut written[k % 3];
        let done = c
            .create(&file.name, GENERIC_READ | GENERIC_WRITE, FILE_OPEN_IF, 0)
            .map_err(|o| ("plain create", o))
            .and_then(|fid| {
                let data = pattern(file.seed, file.acked);
                let wrote = c.write(fid, file.acked * CHUNK as u64, &data);
                let closed = c.close(fid);
                wrote.map_err(|o| ("plain write", o))?;
                closed.map_err(|o| ("plain close", o))
            });
        match done {
            Ok(()) => {
                file.acked += 1;
                sh.waited(last, &format!("a write of {}", file.name));
                last = sh.since();
                k += 1;
                thread::sleep(Duration::from_millis(20));
            }
            Err((what, o)) => {
                if sh.failed(node, what, &file.name, &o) {
                    (node, c) = sh.login(node % NODES + 1);
                } else {
                    thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }
    written
}

/// `ringshare cluster nodes` (this build's) against `conf`: its text, the cluster's level and
/// each node's.
fn levels(conf: &Path) -> (String, u16, BTreeMap<u16, u16>) {
    let text = cli(&["cluster", "nodes"], conf);
    let word_after = |line: &str, w: &str| -> Option<u16> {
        let mut it = line.split_whitespace();
        it.find(|x| x.trim_end_matches(':') == w)?;
        it.next()?.parse().ok()
    };
    let cluster = text
        .lines()
        .next()
        .and_then(|l| word_after(l, "level"))
        .unwrap_or_else(|| panic!("no cluster level in: {text}"));
    let nodes = text
        .lines()
        .filter(|l| l.starts_with("node "))
        .filter_map(|l| Some((word_after(l, "node")?, word_after(l, "level")?)))
        .collect();
    (text, cluster, nodes)
}

/// What `ringshare ARGS --config conf` (this build's) prints; panics when it fails.
fn cli(args: &[&str], conf: &Path) -> String {
    let out = std::process::Command::new(common::ringshare_bin())
        .args(args)
        .arg("--config")
        .arg(conf)
        .output()
        .expect("run ringshare");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "ringshare {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Node `n` (stopped) runs this build from now on, with the Witness ports the old build's
/// configuration could not name, and its control socket (`ringshare status`).
fn runs_this_build(cl: &mut Cluster, n: u16) {
    let i = usize::from(n) - 1;
    let (wport, eport) = cl.witness_ports[i];
    let rig = &mut cl.nodes[i];
    let control = rig.dir().join("control");
    let conf = std::fs::read_to_string(rig.conf()).unwrap();
    let witness = if conf.contains("cluster witness port") {
        String::new()
    } else {
        witness_lines(wport, eport)
    };
    let conf = conf
        .replacen(
            "\tcontrol socket = no\n",
            &format!("\tcontrol socket = {}\n", control.display()),
            1,
        )
        .replacen(
            &format!("\n[{SHARE}]\n"),
            &format!("\n{}[{SHARE}]\n", witness),
            1,
        );
    std::fs::write(rig.conf(), conf).unwrap();
    rig.bin = None;
    rig.spawn();
}

/// See the module notes.
/// `old`: `None` for a control run, this build replaced by itself; nodes 1..=`steps` are
/// stopped and started again in turn, clients writing for `between` before and after each.
pub fn run(name: &str, old: Option<&Path>, steps: u16, between: Duration) {
    if !etcd_available(name) {
        return;
    }
    let mut cl = Cluster::start_on(name, "\tcontinuous availability = yes\n", None, old, 1);
    let conf = cl.nodes[0].conf().to_path_buf();
    // The old build's level: 1 (every build before levels), or RINGSHARE_OLD_LEVEL (a build
    // since, e.g. the last release's); this build's in a control run.
    let new_level = ringshare_core::cluster::msg::LEVEL;
    let old_level = match old {
        None => new_level,
        Some(_) => std::env::var("RINGSHARE_OLD_LEVEL")
            .ok()
            .map(|v| v.parse().expect("RINGSHARE_OLD_LEVEL: a number"))
            .unwrap_or(1),
    };
    let (text, level, _) = levels(&conf);
    let of = old.map_or("this build (a control run)".into(), |p| {
        p.display().to_string()
    });
    eprintln!("[{name}] step 0: three nodes of {of}\n{text}");
    assert_eq!(
        level, old_level,
        "a cluster of the old build is at its level"
    );
    let sh = Arc::new(Shared {
        up: AtomicU8::new(0b111),
        stop: AtomicBool::new(false),
        step: AtomicUsize::new(0),
        addrs: cl.nodes.iter().map(|r| (r.host.clone(), r.port)).collect(),
        seen: Mutex::default(),
        stall: Mutex::default(),
    });
    let mut writers = Vec::new();
    for w in 1..=NODES {
        let files = cl.files_homed_on_each(&format!("upca{w}"));
        let s = sh.clone();
        writers.push(thread::spawn(move || persistent_writer(&s, w, files)));
        let files = cl.files_homed_on_each(&format!("upplain{w}"));
        let s = sh.clone();
        writers.push(thread::spawn(move || plain_writer(&s, w, files)));
    }
    thread::sleep(between);
    let mut report = Vec::new();
    for n in 1..=steps {
        sh.step.store(usize::from(n), Ordering::Release);
        let t = Instant::now();
        sh.up.fetch_and(!(1 << (n - 1)), Ordering::AcqRel);
        let takeovers = cl.takeovers_for(n);
        let exit =
            cl.nodes[usize::from(n) - 1].signal_and_wait(libc::SIGTERM, Duration::from_secs(15));
        let stopped = t.elapsed();
        assert!(
            exit.is_some_and(|e| e.success()),
            "node {n} stops cleanly: {exit:?}"
        );
        // A build before 'left/' marks no clean stop: the others take it for a death and cut
        // it off (on CephFS: its mount evicted, made again here). This build's stop is clean.
        if old.is_some() {
            cl.remount_once_cut_off(n, takeovers);
        }
        runs_this_build(&mut cl, n);
        let mut e = cl.etcd.client();
        wait_placed(&mut e, name, &["1", "2", "3"], Duration::from_secs(30));
        thread::sleep(Duration::from_millis(1_200));
        sh.up.fetch_or(1 << (n - 1), Ordering::AcqRel);
        let settled = t.elapsed();
        thread::sleep(between);
        let (text, level, each) = levels(&conf);
        let stall = sh
            .stall
            .lock()
            .unwrap()
            .get(&usize::from(n))
            .copied()
            .unwrap_or_default();
        let line = format!(
            "step {n}: node {n} stopped in {:.1} s, new build placed and settled {:.1} s after \
             the SIGTERM; longest client wait {:.2} s; cluster level {level}, nodes {each:?}",
            stopped.as_secs_f64(),
            settled.as_secs_f64(),
            stall.as_secs_f64()
        );
        eprintln!("[{name}] {line}\n{text}");
        report.push(line);
        let want = if n == NODES { new_level } else { old_level };
        assert_eq!(level, want, "the cluster's level after step {n}: {text}");
        // The node just upgraded says the same of itself: its level, and the cluster's as it
        // sees it (1 while a peer is old: it sends them only what level 1 reads).
        let status = cli(&["status"], cl.nodes[usize::from(n) - 1].conf());
        let status = status.lines().next().unwrap_or_default();
        eprintln!("[{name}] ringshare status of node {n}: {status}");
        assert!(
            status.starts_with(&format!(
                "cluster node {n}: level {new_level}; cluster level {want} "
            )),
            "{status}"
        );
        for m in 1..=NODES {
            let want = if m <= n { new_level } else { old_level };
            assert_eq!(each.get(&m), Some(&want), "node {m}'s level: {text}");
        }
    }
    sh.stop.store(true, Ordering::Release);
    let mut files = Vec::new();
    let mut broken = Vec::new();
    for h in writers {
        match h.join() {
            Ok(w) => files.extend(w),
            Err(e) => broken.push(
                e.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default(),
            ),
        }
    }
    let seen = sh.seen.lock().unwrap().clone();
    for ((step, what), count) in &seen {
        eprintln!("[{name}] step {step}: {count} × {what}");
    }
    let stall0 = sh
        .stall
        .lock()
        .unwrap()
        .get(&0)
        .copied()
        .unwrap_or_default();
    eprintln!(
        "[{name}] step 0 (old cluster): longest client wait {:.2} s",
        stall0.as_secs_f64()
    );
    let mut bytes = 0u64;
    let mut lost = Vec::new();
    for f in &files {
        let got = std::fs::read(cl.share.join(&f.name)).unwrap_or_default();
        for i in 0..f.acked {
            let at = i as usize * CHUNK;
            if got.get(at..at + CHUNK) != Some(&pattern(f.seed, i)[..]) {
                lost.push(format!("{} chunk {i}", f.name));
            }
        }
        bytes += f.acked * CHUNK as u64;
    }
    eprintln!(
        "[{name}] SUMMARY: {} files, {bytes} acknowledged bytes checked, {} chunks wrong; {}",
        files.len(),
        lost.len(),
        report.join("; ")
    );
    assert!(broken.is_empty(), "clients gave up: {broken:?}");
    let wrong: Vec<_> = seen
        .keys()
        .filter(|(_, w)| w.ends_with("(WRONG)"))
        .collect();
    assert!(wrong.is_empty(), "answers a client may not get: {wrong:?}");
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    assert!(bytes > 0, "nothing was written");
}
