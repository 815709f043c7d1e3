//! The kill loop (issue 33, item 1): while clients of every node hold persistent opens (a
//! continuously available share) of files homed on every node, with data written and bytes
//! 0..10 locked, and keep writing a counter and locking and unlocking bytes 100..110, one node
//! chosen at random is killed (`kill -9`) at a random moment. Its client reconnects each open
//! (DH2C) through a survivor chosen at random, every 50–150 ms, from the instant of the kill,
//! recording every answer. A run passes when every open is back (the same persistent FileId),
//! with every acknowledged byte and lock, the survivors' clients' opens too, and no answer on
//! the way was anything but SUCCESS or FILE_NOT_AVAILABLE (try again). The node is then
//! started again and the next run begins. `RINGSHARE_KILL_LOOP_RUNS` runs (the test's default
//! otherwise), `RINGSHARE_KILL_LOOP_SEED` to repeat a sequence; scripts/cluster-kill-loop.sh.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use super::*;

/// Where the counter each holder keeps writing lies in its files (past the data).
const COUNTER_AT: u64 = 256;
/// The range each holder keeps locking and unlocking.
const TOGGLED: (u64, u64) = (100, 10);
/// LOCK flags: exclusive, fail at once; unlock.
const EXCLUSIVE_NOW: u32 = 0x12;
const UNLOCK: u32 = 0x04;

/// splitmix64: enough randomness for the moments, victims and ways back, and a seed to repeat.
struct Dice(u64);

impl Dice {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// One persistent open a holder keeps during a run, with what was acknowledged on it.
struct Held {
    file: String,
    guid: u8,
    fid: FileId,
    data: String,
    home: u16,
    /// The counter's last acknowledged value.
    counter: u64,
    /// Whether TOGGLED is locked by the last acknowledged LOCK/UNLOCK.
    locked: bool,
    /// A request whose answer never came (the node died under it): either outcome is right.
    unsure: Option<Op>,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Write(u64),
    Toggle,
}

/// A client of one node and its persistent opens (one of a file homed on each node).
struct Holder {
    node: u16,
    client: Raw,
    held: Vec<Held>,
    /// Answers to its requests during the run other than SUCCESS (by name), counted.
    refused: BTreeMap<String, usize>,
}

/// What the whole loop saw.
#[derive(Default)]
struct Figures {
    runs: usize,
    reconnects: usize,
    back: usize,
    statuses: BTreeMap<String, usize>,
    back_after: Vec<Duration>,
    failures: Vec<String>,
}

/// Whether an answer (by name) is one a request may hear while a node's files move: done, or
/// try again.
fn right(name: &str) -> bool {
    [NtStatus::SUCCESS, NtStatus::FILE_NOT_AVAILABLE]
        .iter()
        .any(|s| format!("{s:?}") == name)
}

fn name_of(o: &Outcome) -> String {
    match o {
        Outcome::Reply(h, _) => format!("{:?}", h.status),
        Outcome::Closed => "connection closed".into(),
        Outcome::Silent => "no answer".into(),
    }
}

/// `runs` kills of a random node of a fresh continuously available cluster (see the module
/// notes); panics with every failed run's story when a run failed.
pub fn run(name: &str, runs: usize) {
    let Some(mut cl) = ca_cluster(name) else {
        return;
    };
    let seed = std::env::var("RINGSHARE_KILL_LOOP_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("[{name}] {runs} runs, RINGSHARE_KILL_LOOP_SEED={seed}");
    let mut dice = Dice(seed);
    let mut fig = Figures::default();
    let started = Instant::now();
    for r in 1..=runs {
        fig.runs += 1;
        let victim = 1 + dice.below(u64::from(NODES)) as u16;
        let takeovers = cl.takeovers_for(victim);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            one_run(&mut cl, name, r, victim, &mut dice, &mut fig)
        }));
        if let Err(e) = outcome {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            fig.failures
                .push(format!("run {r} (node {victim} killed): {why}"));
        }
        // Start the killed node again (the same number: a new incarnation) and wait until
        // every partition is back on its preferred node.
        let rig = &mut cl.nodes[usize::from(victim) - 1];
        if !rig.is_running() {
            let _ = rig.signal_and_wait(libc::SIGKILL, Duration::from_secs(5));
            cl.start_again_after_death(victim, takeovers);
        }
        let mut e = cl.etcd.client();
        wait_placed(&mut e, name, &["1", "2", "3"], Duration::from_secs(30));
        thread::sleep(Duration::from_millis(1_200));
    }
    let mut t = fig.back_after.clone();
    t.sort();
    let at = |q: usize| {
        t.get(q)
            .map_or("-".into(), |d| format!("{:.2} s", d.as_secs_f64()))
    };
    eprintln!(
        "[{name}] SUMMARY: {} runs in {:.0} s, {} reconnects, {} handles back; statuses seen: {:?}; \
         handle back after the kill: min {}, median {}, max {}; failed runs: {}",
        fig.runs,
        started.elapsed().as_secs_f64(),
        fig.reconnects,
        fig.back,
        fig.statuses,
        at(0),
        at(t.len() / 2),
        at(t.len().saturating_sub(1)),
        fig.failures.len()
    );
    assert!(
        fig.failures.is_empty(),
        "failed runs:\n{}",
        fig.failures.join("\n")
    );
    // Every survivor ran its takeover command for every kill, as root: a survivor that took a
    // dead node's persistent open over acted as its user after (the command then ran as that
    // user and failed: on CephFS no eviction).
    for (i, rig) in cl.nodes.iter().enumerate() {
        let log = rig.log();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("ERROR") && l.contains("takeover command"))
            .collect();
        assert!(bad.is_empty(), "node {}: {bad:#?}", i + 1);
    }
}

/// A node killed (or cut off) and started again: on CephFS its mount was evicted.
impl Cluster {
    /// How many takeover commands for node `n` the other nodes have run (done, failed or
    /// killed), as their logs say.
    pub(crate) fn takeovers_for(&self, n: u16) -> usize {
        let done = format!("for node {n} done");
        let other = [
            format!("for node {n} failed"),
            format!("for node {n} killed"),
            format!("for node {n}: "),
        ];
        (1..=NODES)
            .filter(|m| *m != n)
            .map(|m| {
                let log = self.nodes[usize::from(m) - 1].log();
                log.lines()
                    .filter(|l| l.contains("takeover command"))
                    .filter(|l| l.contains(&done) || other.iter().any(|o| l.contains(o)))
                    .count()
            })
            .sum()
    }

    /// Start node `n` again after its kill (or cut), [`Cluster::remount_once_cut_off`] first.
    /// When it was started.
    pub(crate) fn start_again_after_death(&mut self, n: u16, before: usize) -> Instant {
        self.remount_once_cut_off(n, before);
        let t = Instant::now();
        self.nodes[usize::from(n) - 1].spawn();
        t
    }

    /// On CephFS (scripts/cluster-ceph.sh) the survivors' takeover commands evict a dead node's
    /// mount, as a real site's would: once each survivor has run its command for node `n` (more
    /// than `before` in all, [`Cluster::takeovers_for`]; a mount made sooner would be evicted by
    /// the later one) its mount is made again (`RINGSHARE_CLUSTER_REMOUNT n`), as an
    /// administrator does before starting such a node again. On one host: nothing.
    pub(crate) fn remount_once_cut_off(&mut self, n: u16, before: usize) {
        if let Ok(remount) = std::env::var("RINGSHARE_CLUSTER_REMOUNT") {
            let survivors = usize::from(NODES) - 1;
            let ran = within(Duration::from_secs(30), || {
                (self.takeovers_for(n) >= before + survivors).then_some(())
            });
            assert!(
                ran.is_some(),
                "the survivors' takeover commands for node {n}"
            );
            let ok = std::process::Command::new(&remount)
                .arg(n.to_string())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "{remount} {n}");
        }
    }
}

/// One kill of node `victim`: holders on every node, the kill at a random moment of their
/// writes and locks, its client's reconnects through a survivor, and the checks.
fn one_run(
    cl: &mut Cluster,
    name: &str,
    r: usize,
    victim: u16,
    dice: &mut Dice,
    fig: &mut Figures,
) {
    let survivors: Vec<u16> = (1..=NODES).filter(|n| *n != victim).collect();
    let via = survivors[dice.below(survivors.len() as u64) as usize];
    let prober = survivors[dice.below(survivors.len() as u64) as usize];
    let mut holders: Vec<Holder> = (1..=NODES)
        .map(|n| {
            let homed = cl.files_homed_on_each(&format!("kl{r}n{n}"));
            let mut client = cl.client(n);
            // CreateGuids unique in the loop (a byte: 9 per run, wrapping after 28 runs,
            // long after those opens closed).
            let guid = ((r * 9 + usize::from(n) * 3) % 250) as u8;
            let held = hold_persistent(&mut client, &homed, guid, "died")
                .into_iter()
                .zip(1..)
                .map(|((file, guid, fid, data), home)| Held {
                    file,
                    guid,
                    fid,
                    data,
                    home,
                    counter: 0,
                    locked: false,
                    unsure: None,
                })
                .collect();
            Holder {
                node: n,
                client,
                held,
                refused: BTreeMap::new(),
            }
        })
        .collect();

    // Every holder writes and locks until told to stop (or its node dies under it).
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = holders
        .drain(..)
        .map(|h| {
            let stop = stop.clone();
            thread::spawn(move || keep_busy(h, &stop))
        })
        .collect();
    let moment = Duration::from_millis(dice.below(1_500));
    thread::sleep(moment);
    let killed = Instant::now();
    cl.nodes[usize::from(victim) - 1]
        .signal_and_wait(libc::SIGKILL, Duration::from_secs(5))
        .expect("the node died");
    stop.store(true, Ordering::SeqCst);
    let mut holders: Vec<Holder> = busy.into_iter().map(|t| t.join().unwrap()).collect();
    let gone = holders.remove(usize::from(victim) - 1);

    // Its client comes back through `via`, every 50–150 ms from the kill, until every open
    // is back (at most 30 s): every answer recorded.
    let mut back_client = cl.client(via);
    let mut pending: Vec<&Held> = gone.held.iter().collect();
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); pending.len()];
    let mut back: Vec<Option<(FileId, Duration)>> = vec![None; pending.len()];
    while !pending.is_empty() && killed.elapsed() < Duration::from_secs(30) {
        pending.retain(|h| {
            let i = gone.held.iter().position(|x| x.fid == h.fid).unwrap();
            let body = durable_create_as(&h.file, h.guid, Some(h.fid), true);
            let o = back_client.call(Command::CREATE, &body);
            seen[i].push(name_of(&o));
            match o {
                Outcome::Reply(..) => match opened(o) {
                    Ok((f, _)) => {
                        back[i] = Some((f, killed.elapsed()));
                        false
                    }
                    Err(_) => true,
                },
                _ => true,
            }
        });
        thread::sleep(Duration::from_millis(50 + dice.below(100)));
    }

    // Every answer, by open.
    let mut story = format!(
        "run {r}: node {victim} killed {:.2} s into the writes; its client through node {via}:",
        moment.as_secs_f64()
    );
    let mut wrong = Vec::new();
    for (i, h) in gone.held.iter().enumerate() {
        fig.reconnects += 1;
        let mut runs: Vec<(String, usize)> = Vec::new();
        for s in &seen[i] {
            *fig.statuses.entry(s.clone()).or_default() += 1;
            match runs.last_mut() {
                Some((last, n)) if last == s => *n += 1,
                _ => runs.push((s.clone(), 1)),
            }
            if !right(s) {
                wrong.push(format!("{} (home {}): {s}", h.file, h.home));
            }
        }
        let said: Vec<String> = runs
            .iter()
            .map(|(s, n)| {
                if *n > 1 {
                    format!("{s} x{n}")
                } else {
                    s.clone()
                }
            })
            .collect();
        let when = back[i].map_or("NOT BACK".into(), |(_, t)| {
            fig.back += 1;
            fig.back_after.push(t);
            format!("back at {:.2} s", t.as_secs_f64())
        });
        story += &format!(" [{} home {}: {}; {when}]", h.file, h.home, said.join(", "));
    }
    for s in holders.iter().chain([&gone]) {
        if !s.refused.is_empty() {
            story += &format!(" [node {}'s client heard {:?}]", s.node, s.refused);
            for what in s.refused.keys() {
                if !right(what) {
                    wrong.push(format!("node {}'s client: {what}", s.node));
                }
            }
        }
    }
    eprintln!("[{name}] {story}");
    assert!(
        wrong.is_empty(),
        "answers other than SUCCESS or FILE_NOT_AVAILABLE: {wrong:?}"
    );
    assert!(
        back.iter().all(Option::is_some),
        "not every open came back within 30 s: {story}\nnode {via}'s log:\n{}",
        cl.nodes[usize::from(via) - 1].log()
    );

    // Its opens are back with every acknowledged byte and lock; so are the survivors' own.
    let mut probe = cl.client(prober);
    for (h, b) in gone.held.iter().zip(&back) {
        let (f, _) = b.unwrap();
        assert_eq!(f.persistent, h.fid.persistent, "{}: the same open", h.file);
        kept(&mut back_client, f, h, &mut probe);
    }
    for s in &mut holders {
        for h in &s.held {
            kept(&mut s.client, h.fid, h, &mut probe);
        }
    }
}

/// Until `stop` (or its connection is gone): on each of its opens in turn, write the next
/// counter, then lock TOGGLED if it is unlocked or unlock it if it is locked.
fn keep_busy(mut h: Holder, stop: &AtomicBool) -> Holder {
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) {
        let k = i % h.held.len();
        i += 1;
        let fid = h.held[k].fid;
        let next = h.held[k].counter + 1;
        let ops = [
            (
                Op::Write(next),
                Command::WRITE,
                write_body(fid, COUNTER_AT, &next.to_le_bytes()),
            ),
            (Op::Toggle, Command::LOCK, {
                let flags = if h.held[k].locked {
                    UNLOCK
                } else {
                    EXCLUSIVE_NOW
                };
                lock_body(fid, TOGGLED.0, TOGGLED.1, flags)
            }),
        ];
        for (op, cmd, body) in ops {
            match h.client.call(cmd, &body) {
                Outcome::Reply(r, _) if r.status == NtStatus::SUCCESS => match op {
                    Op::Write(n) => h.held[k].counter = n,
                    Op::Toggle => h.held[k].locked = !h.held[k].locked,
                },
                Outcome::Reply(r, _) => {
                    *h.refused.entry(format!("{:?}", r.status)).or_default() += 1;
                }
                // Its node died under the request: it may or may not have been done.
                Outcome::Closed | Outcome::Silent => {
                    h.held[k].unsure = Some(op);
                    return h;
                }
            }
        }
    }
    h
}

/// Open `f` of `h` (on `client`) holds its data and its last acknowledged counter, its lock
/// of bytes 0..10 refuses `probe`, and TOGGLED is as last acknowledged; then it is closed
/// (and its lock goes with it).
fn kept(client: &mut Raw, f: FileId, h: &Held, probe: &mut Raw) {
    let what = &h.file;
    let len = h.data.len() as u32;
    let data = when_available(what, || client.read(f, 0, len).map_err(status));
    assert_eq!(data, h.data.as_bytes(), "{what}: its data");
    // (A file its holder never wrote a counter to ends before it: 0.)
    let c = when_available(what, || {
        match client.read(f, COUNTER_AT, 8).map_err(status) {
            Err(NtStatus::END_OF_FILE) => Ok(vec![0; 8]),
            other => other,
        }
    });
    let c = u64::from_le_bytes(c.try_into().expect("8 bytes of counter"));
    let may = match h.unsure {
        Some(Op::Write(n)) => vec![h.counter, n],
        _ => vec![h.counter],
    };
    assert!(
        may.contains(&c),
        "{what}: counter {c}, acknowledged {:?}",
        may
    );
    let fo = when_available(what, || open(probe, what, READ | WRITE, 7));
    let lock = |probe: &mut Raw, range: (u64, u64)| {
        when_available(what, || {
            match status(probe.call(
                Command::LOCK,
                &lock_body(fo, range.0, range.1, EXCLUSIVE_NOW),
            )) {
                NtStatus::SUCCESS => Ok(true),
                NtStatus::LOCK_NOT_GRANTED => Ok(false),
                s => Err(s),
            }
        })
    };
    // The toggled range: held as last acknowledged (either way when a toggle was unanswered).
    let got = lock(probe, TOGGLED);
    if !matches!(h.unsure, Some(Op::Toggle)) {
        assert_eq!(
            got, !h.locked,
            "{what}: bytes 100..110 locked: {}",
            h.locked
        );
    }
    if got {
        let s = status(probe.call(Command::LOCK, &lock_body(fo, TOGGLED.0, TOGGLED.1, UNLOCK)));
        assert_eq!(s, NtStatus::SUCCESS, "{what}: the probe's unlock");
    }
    assert!(!lock(probe, (0, 10)), "{what}: its lock of bytes 0..10");
    client
        .close(f)
        .unwrap_or_else(|o| panic!("{what}: close: {o:?}"));
    assert!(
        lock(probe, (0, 10)),
        "{what}: bytes 0..10 free after its close"
    );
    probe.close(fo).unwrap();
}
