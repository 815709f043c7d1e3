//! `metrics listen = ADDR:PORT`: Prometheus scrapes `/metrics` here, in its
//! text exposition format (version 0.0.4).
//!
//! The counters are the rings' own ([`ringshare_core::metrics::Metrics`],
//! written without locks by each I/O thread) and the server's gauges
//! (connections, sessions, opens, leases), read when scraped. The listener
//! is a plain thread of its own serving one scrape at a time: it is not on
//! the data path, and a peer that sends nothing is dropped after a timeout.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringshare_core::metrics::{Metrics, Snapshot, BUCKETS_US};
use ringshare_core::ServerState;
use ringshare_wire::consts::Command;

/// Longest request head read.
const REQUEST_LEN_MAX: usize = 8 * 1024;
/// How long a scraper may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What `/metrics` reads.
pub struct Source {
    pub server: Arc<ServerState>,
    pub rings: Arc<Mutex<Vec<Arc<Metrics>>>>,
}

/// Listen on `addr` and answer scrapes on a thread of its own.
pub fn start(addr: SocketAddr, source: Source) -> Result<(), String> {
    let listener = TcpListener::bind(addr)
        .map_err(|e| format!("metrics listen = {addr}: cannot listen: {e}"))?;
    std::thread::Builder::new()
        .name("ringshare-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(c) => serve_one(c, &source),
                    Err(e) => {
                        tracing::debug!("metrics: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })
        .map_err(|e| format!("cannot start the metrics thread: {e}"))?;
    Ok(())
}

fn serve_one(mut conn: TcpStream, source: &Source) {
    let _ = conn.set_read_timeout(Some(REQUEST_TIMEOUT));
    let _ = conn.set_write_timeout(Some(REQUEST_TIMEOUT));
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > REQUEST_LEN_MAX {
            let _ = conn.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
            return;
        }
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, body) = match (method, path) {
        (b"GET", b"/metrics") => ("200 OK", render(source)),
        (b"GET", b"/") => ("200 OK", "ringshare metrics: see /metrics\n".to_string()),
        (b"GET", _) => ("404 Not Found", "not found\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET\n".to_string()),
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A command's name as [MS-SMB2] writes it.
fn command_name(c: u16) -> String {
    Command(c)
        .name()
        .map_or_else(|| format!("{c:#06x}"), str::to_string)
}

/// Prometheus's way of writing a float.
fn seconds(us: u64) -> String {
    format!("{}", us as f64 / 1e6)
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The rings' counters added up (per ring for the io_uring ones).
fn total(rings: &[Snapshot]) -> Snapshot {
    let mut t = Snapshot::default();
    for r in rings {
        for &(c, s, n) in &r.requests {
            match t.requests.iter_mut().find(|e| e.0 == c && e.1 == s) {
                Some(e) => e.2 += n,
                None => t.requests.push((c, s, n)),
            }
        }
        for (c, counts, sum) in &r.latency {
            match t.latency.iter_mut().find(|e| e.0 == *c) {
                Some(e) => {
                    for (a, b) in e.1.iter_mut().zip(counts) {
                        *a += b;
                    }
                    e.2 += sum;
                }
                None => t.latency.push((*c, counts.clone(), *sum)),
            }
        }
        t.read_bytes += r.read_bytes;
        t.written_bytes += r.written_bytes;
        t.reads_spliced += r.reads_spliced;
        t.reads_copied += r.reads_copied;
        t.closed_by_server += r.closed_by_server;
    }
    t.requests.sort_by_key(|e| (e.0, e.1.map(|s| s.0)));
    t.latency.sort_by_key(|e| e.0);
    t
}

/// The text Prometheus reads.
pub fn render(source: &Source) -> String {
    let rings: Vec<Snapshot> = crate::lock(&source.rings)
        .iter()
        .map(|m| m.snapshot())
        .collect();
    let t = total(&rings);
    let g = source.server.gauges();
    let mut o = String::new();
    header(
        &mut o,
        "ringshare_requests_total",
        "counter",
        "SMB2 requests answered, by command and final status (interim STATUS_PENDING not counted).",
    );
    for (c, s, n) in &t.requests {
        let status = s.map_or_else(
            || "other".to_string(),
            |s| {
                s.name()
                    .map_or_else(|| format!("{:#010x}", s.0), |n| format!("STATUS_{n}"))
            },
        );
        let _ = writeln!(
            o,
            "ringshare_requests_total{{command=\"{}\",status=\"{status}\"}} {n}",
            command_name(*c)
        );
    }
    header(
        &mut o,
        "ringshare_request_duration_seconds",
        "histogram",
        "Time from a request's arrival until its final reply is ready to send (a spliced READ's data goes out after), by command.",
    );
    for (c, counts, sum) in &t.latency {
        let name = command_name(*c);
        let mut cum = 0;
        for (i, n) in counts.iter().enumerate() {
            cum += n;
            let le = BUCKETS_US
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |us| seconds(*us));
            let _ = writeln!(
                o,
                "ringshare_request_duration_seconds_bucket{{command=\"{name}\",le=\"{le}\"}} {cum}"
            );
        }
        let _ = writeln!(
            o,
            "ringshare_request_duration_seconds_sum{{command=\"{name}\"}} {}",
            seconds(*sum)
        );
        let _ = writeln!(
            o,
            "ringshare_request_duration_seconds_count{{command=\"{name}\"}} {cum}"
        );
    }
    let counters = [
        (
            "ringshare_read_bytes_total",
            "File bytes sent in READ replies.",
            t.read_bytes,
        ),
        (
            "ringshare_written_bytes_total",
            "File bytes written by WRITE requests.",
            t.written_bytes,
        ),
        (
            "ringshare_breaks_total",
            "Oplock and lease break notifications sent.",
            g.breaks_posted,
        ),
        (
            "ringshare_connections_closed_by_server_total",
            "Connections the server closed (bad input, timeouts).",
            t.closed_by_server,
        ),
    ];
    for (name, help, v) in counters {
        header(&mut o, name, "counter", help);
        let _ = writeln!(o, "{name} {v}");
    }
    header(
        &mut o,
        "ringshare_reads_total",
        "counter",
        "READ replies by how their data went out: spliced from the file or copied from memory.",
    );
    let _ = writeln!(
        o,
        "ringshare_reads_total{{path=\"splice\"}} {}",
        t.reads_spliced
    );
    let _ = writeln!(
        o,
        "ringshare_reads_total{{path=\"copy\"}} {}",
        t.reads_copied
    );
    let gauges = [
        (
            "ringshare_connections",
            "Open TCP connections.",
            g.connections,
        ),
        ("ringshare_sessions", "Sessions.", g.sessions),
        (
            "ringshare_open_files",
            "Open files and directories.",
            g.opens,
        ),
        ("ringshare_leases", "Leases held.", g.leases),
        (
            "ringshare_disconnected_durable_opens",
            "Durable opens waiting for their client to reconnect.",
            g.disconnected_durable_opens,
        ),
    ];
    // On a cluster node: its protocol level and the cluster's (docs/cluster.md).
    let levels = source.server.node.link().map(|link| {
        let l = crate::status::Levels::of(link.as_ref());
        [
            (
                "ringshare_cluster_node_level",
                "The protocol level this cluster node speaks.",
                u64::from(l.own),
            ),
            (
                "ringshare_cluster_level",
                "The cluster's level as this node sees it: the lowest of its live members'.",
                u64::from(l.cluster),
            ),
        ]
    });
    for (name, help, v) in gauges.into_iter().chain(levels.into_iter().flatten()) {
        header(&mut o, name, "gauge", help);
        let _ = writeln!(o, "{name} {v}");
    }
    let per_ring = [
        (
            "ringshare_ring_enters_total",
            "io_uring_enter calls, per I/O ring.",
        ),
        (
            "ringshare_ring_submissions_total",
            "Submission queue entries pushed, per I/O ring.",
        ),
        (
            "ringshare_ring_completions_total",
            "Completion queue entries reaped, per I/O ring.",
        ),
    ];
    for (k, (name, help)) in per_ring.iter().enumerate() {
        header(&mut o, name, "counter", help);
        for (i, r) in rings.iter().enumerate() {
            let v = [r.ring_submits, r.ring_sqes, r.ring_cqes][k];
            let _ = writeln!(o, "{name}{{ring=\"{i}\"}} {v}");
        }
    }
    header(
        &mut o,
        "ringshare_build_info",
        "gauge",
        "The running version.",
    );
    let _ = writeln!(
        o,
        "ringshare_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    o
}
