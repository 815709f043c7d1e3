//! Joins a cluster and prints what happens, one line per event, so the coordination layer can be
//! watched (and killed, stopped, continued) as a real process:
//! ```text
//! ringshare-cluster-node CLUSTER NODE_ID NODE_ADDR ENDPOINT[,ENDPOINT...] [TTL_SECS]
//! ```
//! Prints `joined <incarnation>`, `gained <p> <token>`, `lost <p>`, `fenced owned=<n>` (then
//! exits 3).
//! Reads commands on stdin: `stats` prints `stats fenced=<bool> owned=<n> max_renew_gap_ms=<ms>`;
//! `leave` (or end of input) leaves gracefully, prints `left` and exits.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::Duration;

use ringshare_cluster::{ClusterConfig, Coordinator, Event};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!(
            "usage: {} CLUSTER NODE_ID NODE_ADDR ENDPOINT[,ENDPOINT...] [TTL_SECS]",
            args[0]
        );
        std::process::exit(2);
    }
    let Ok(addr) = args[3].parse() else {
        eprintln!("bad NODE_ADDR {}", args[3]);
        std::process::exit(2);
    };
    let mut cfg = ClusterConfig::new(
        &args[1],
        &args[2],
        addr,
        args[4].split(',').map(String::from).collect(),
    );
    if let Some(t) = args.get(5) {
        match t.parse() {
            Ok(t) => cfg.ttl = Duration::from_secs(t),
            Err(_) => {
                eprintln!("bad TTL_SECS {t}");
                std::process::exit(2);
            }
        }
    }
    let mut c = match Coordinator::join(cfg) {
        Ok(c) => c,
        Err(e) => {
            println!("error {e}");
            std::process::exit(1);
        }
    };
    let Some(events) = c.take_events() else {
        std::process::exit(1)
    };
    say(&format!("joined {}", c.incarnation()));
    let (cmd_tx, cmd_rx) = mpsc::sync_channel::<String>(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if cmd_tx.send(line).is_err() {
                return;
            }
        }
        let _ = cmd_tx.send("leave".into());
    });
    loop {
        report(Some(&c), &events);
        match cmd_rx.recv_timeout(Duration::from_millis(20)) {
            Ok(cmd) if cmd.trim() == "stats" => say(&format!(
                "stats fenced={} owned={} max_renew_gap_ms={}",
                c.is_fenced(),
                c.owned().len(),
                c.max_renew_gap().as_millis()
            )),
            Ok(cmd) if cmd.trim() == "leave" => {
                let r = c.leave(true);
                // Every event in order, those queued before the leave too (a partition gained
                // just before it was said only after it: the loss lines after it were dropped,
                // and the test saw the node still believing it owned that partition).
                report(None, &events);
                say(&format!("left {r:?}"));
                return;
            }
            _ => {}
        }
    }
}

/// Says each event waiting in `events`, in order; exits on a fence (what `c`, before it left,
/// believes it owns then: must be nothing).
fn report(c: Option<&Coordinator>, events: &mpsc::Receiver<Event>) {
    while let Ok(e) = events.try_recv() {
        match e {
            Event::PartitionGained { p, token } => say(&format!("gained {p} {token}")),
            Event::PartitionLost { p } => say(&format!("lost {p}")),
            Event::Fenced => {
                // What the API believes it owns once fenced (must be nothing).
                say(&format!(
                    "fenced owned={}",
                    c.map_or(0, |c| c.owned().len())
                ));
                std::process::exit(3);
            }
        }
    }
}

fn say(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}
