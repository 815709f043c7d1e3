//! Multichannel against the real binary: `ringshare bench --channels 2` binds
//! two connections to one SMB 3 session, reads verified data over both, and
//! the two channels are served by two different worker threads (the
//! driver's "connection accepted worker=N" debug line; CPU ticks of the
//! `ringshare-ring-N` threads from /proc are printed alongside).

use crate::common;

use std::collections::HashMap;

use common::{bench, Server, ServerConfig};

/// CPU clock ticks (user + system) of every `ringshare-ring-N` thread, by
/// thread id (comm is cut to 15 bytes, so every ring reads `ringshare-ring-`).
fn ring_ticks(pid: u32) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if !name.trim().starts_with("ringshare-ring") {
            continue;
        }
        let tid = t.file_name().to_string_lossy().to_string();
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // Fields after the ")" that closes comm: state is field 3, utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        out.insert(tid, ticks);
    }
    out
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

/// The worker index of every "connection accepted" line (the driver logs the
/// ring that took each connection).
fn accepted_workers(log: &str) -> std::collections::BTreeSet<u32> {
    log.lines()
        .filter(|l| l.contains("connection accepted"))
        .filter_map(|l| {
            let w = l.split("worker=").nth(1)?;
            w.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

fn channel_bytes(out: &str, idx: usize) -> Option<u64> {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("channel {idx}:")))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[test]
fn two_channels_of_one_session_move_verified_data_and_run_on_two_ring_threads() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let pid = server.pid().expect("the server's pid");
    let rings = ring_ticks(pid).len();
    // SO_REUSEPORT spreads connections over the rings by a hash of their
    // ports: a run whose two channels land on one ring is tried again.
    let mut spread = false;
    for attempt in 0..10 {
        let before = ring_ticks(pid);
        let log_start = strip_ansi(&server.log()).len();
        let (ok, out) = bench(
            &server,
            &[
                "seq-read",
                "--channels",
                "2",
                "--dialect",
                "3.1.1",
                "--io-size",
                "256k",
                "--file-size",
                "8m",
                "--duration",
                "800ms",
                "--verify",
            ],
        );
        assert!(ok, "attempt {attempt}: {out}");
        let (Some(b0), Some(b1)) = (channel_bytes(&out, 0), channel_bytes(&out, 1)) else {
            panic!("per-channel bytes missing: {out}");
        };
        assert!(b0 > 0 && b1 > 0, "both channels moved data: {out}");
        if rings < 2 {
            eprintln!("one ring thread only: the thread spread is not checked");
            return;
        }
        let log = strip_ansi(&server.log());
        let run_log = log.get(log_start..).unwrap_or("");
        let workers = accepted_workers(run_log);
        assert!(run_log.contains("channel bound"), "{run_log}");
        let after = ring_ticks(pid);
        let busy: Vec<(&String, u64)> = after
            .iter()
            .map(|(n, t)| (n, t.saturating_sub(*before.get(n).unwrap_or(&0))))
            .filter(|(_, d)| *d >= 2)
            .collect();
        eprintln!("attempt {attempt}: workers {workers:?}, ring CPU ticks {busy:?}");
        if workers.len() >= 2 {
            spread = true;
            break;
        }
    }
    assert!(
        spread,
        "the two channels never ran on two ring threads in 10 runs"
    );
}

#[test]
fn channels_are_refused_below_smb3() {
    let server = Server::start(&ServerConfig::default(), |_| {});
    let (ok, out) = bench(
        &server,
        &[
            "seq-read",
            "--channels",
            "2",
            "--dialect",
            "2.1",
            "--file-size",
            "1m",
        ],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("SMB 3"), "{out}");
}
