//! `ringshare bench`: an SMB2/3 load generator on io_uring.
//!
//! Each thread owns one ring and drives its share of the connections; each
//! connection is its own session ([`ringshare_client::ClientConn`]) and keeps
//! up to `--queue-depth` requests in flight within the credits granted.
//! Payloads are written from one reused buffer per connection and read
//! responses are checked (with `--verify`) where they landed in the receive
//! buffer: no payload is allocated per request.
//!
//! With `--channels N` the bench opens N connections bound to ONE session
//! (SMB 3 multichannel): the first sets the session up and opens the file,
//! the others bind to the session and work on that same open; the report
//! gives each channel's bytes.

pub mod dircache;
pub mod hist;
mod logon;
pub mod pattern;
pub(crate) mod quic;
mod reconnect;
pub mod report;
pub mod watch;
mod worker;

use std::io::{self, IsTerminal, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use ringshare_wire::consts::{CompressionAlgorithm, Dialect};

use hist::Histogram;
use report::{CpuSample, Summary};

/// What to measure.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    SeqRead,
    SeqWrite,
    RandRead,
    RandWrite,
    /// 70 % random reads, 30 % random writes.
    Mixed,
    /// Every connection reads the same file sequentially.
    SameFile,
    /// CREATE (open-if) / QUERY_INFO / CLOSE storm on small files.
    Metadata,
    /// Open `--dir` and list it to the end, again and again.
    List,
    /// ECHO round trips (the floor of request latency).
    Echo,
    /// Durable handles under dropped connections: verified random writes
    /// and reads on a DH2Q open, the connection dropped every
    /// `--drop-every` on average and the open taken back with DH2C; every
    /// block checked at the end. Correctness, not speed.
    Reconnect,
    /// Connect, NEGOTIATE, SESSION_SETUP, TREE_CONNECT, close, again and again: logons per
    /// second and CPU per logon (NTLMv2, or Kerberos with `--kerberos`).
    Logon,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::SeqRead => "seq-read",
            Workload::SeqWrite => "seq-write",
            Workload::RandRead => "rand-read",
            Workload::RandWrite => "rand-write",
            Workload::Mixed => "mixed",
            Workload::SameFile => "same-file",
            Workload::Metadata => "metadata",
            Workload::List => "list",
            Workload::Echo => "echo",
            Workload::Reconnect => "reconnect",
            Workload::Logon => "logon",
        }
    }

    /// Reads file data that must exist first.
    fn reads_file(self) -> bool {
        matches!(
            self,
            Workload::SeqRead | Workload::RandRead | Workload::Mixed | Workload::SameFile
        )
    }

    /// Reads and never writes once the file is filled.
    fn only_reads(self) -> bool {
        matches!(
            self,
            Workload::SeqRead | Workload::RandRead | Workload::SameFile
        )
    }

    fn uses_file(self) -> bool {
        self.reads_file() || matches!(self, Workload::SeqWrite | Workload::RandWrite)
    }
}

/// How the bench reaches the server.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchTransport {
    /// Direct TCP (port 445 by default).
    Tcp,
    /// SMB over QUIC ([MS-SMB2] 2.1; UDP, port 443 by default): TLS 1.3,
    /// ALPN `smb`, the server's certificate trusted as `--server-cert`
    /// says; SMB2_TRANSPORT_CAPABILITIES offered, as Windows does.
    Quic,
}

/// `ringshare bench //HOST[:PORT]/SHARE -U USER%PASS [WORKLOAD] [options]`
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct BenchArgs {
    /// The share: //HOST[:PORT]/SHARE (port 445 by default; 443 with
    /// `--transport quic`).
    #[arg(value_name = "//HOST[:PORT]/SHARE")]
    pub target: String,

    /// tcp, or quic (SMB over QUIC).
    #[arg(long, value_enum, default_value = "tcp")]
    pub transport: BenchTransport,

    /// `--transport quic`: trust the server's certificate as this file (PEM
    /// or DER; the server's self-signed certificate, or its CA; the name
    /// is checked) or as `sha256:HEX` (the certificate's SHA-256, as the
    /// server logs it at start).
    #[arg(long, value_name = "FILE|sha256:HEX")]
    pub server_cert: Option<String>,

    /// Credentials: [DOMAIN\]USER%PASSWORD.
    #[arg(short = 'U', long = "user", value_name = "USER%PASS")]
    pub user: String,

    /// What to measure.
    #[arg(value_enum, default_value = "seq-read")]
    pub workload: Workload,

    /// Bytes per READ/WRITE (4k..8m).
    #[arg(long, value_name = "SIZE", default_value = "1m", value_parser = parse_io_size)]
    pub io_size: u64,

    /// Requests in flight per connection.
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub queue_depth: u32,

    /// Connections (each its own session).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub connections: u32,

    /// Channels of one session (SMB 3 multichannel): N connections bound to
    /// one session, all doing I/O on its one open. Uses one thread.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub channels: u32,

    /// Threads (one io_uring each); connections are spread over them.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,

    /// Size of the file each connection works on (or of the shared file).
    #[arg(long, value_name = "SIZE", default_value = "1g", value_parser = parse_size)]
    pub file_size: u64,

    /// How long to run, e.g. 10s, 500ms, 1m.
    #[arg(long, value_name = "TIME", default_value = "10s", value_parser = parse_duration_ms)]
    pub duration: u64,

    /// Stop after this many bytes instead (or whichever comes first).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub bytes: Option<u64>,

    /// Offer only this dialect: 2.0.2, 2.1, 3.0, 3.0.2 or 3.1.1 (default: all).
    #[arg(long, value_name = "DIALECT", value_parser = parse_dialect)]
    pub dialect: Option<u16>,

    /// Require signing.
    #[arg(long)]
    pub sign: bool,

    /// Log on with Kerberos: the service ticket for cifs/HOST from the credential cache
    /// KRB5CCNAME (`kinit`, then `kvno cifs/HOST`) instead of NTLM.
    #[arg(long)]
    pub kerberos: bool,

    /// Encrypt (SMB 3.x).
    #[arg(long)]
    pub encrypt: bool,

    /// SMB 3.1.1 compression: offer ALG (lz4, lz77, lz77+huffman, lznt1) and
    /// Pattern_V1, chained; WRITEs go compressed when it pays and READs ask
    /// for compressed responses. The report adds the bytes on the wire.
    #[arg(long, value_name = "ALG", value_parser = parse_compression)]
    pub compress: Option<CompressionAlgorithm>,

    /// What the file holds (written, and checked with --verify): random
    /// (incompressible), text (English-like words) or zeros.
    #[arg(long, value_enum, default_value = "random")]
    pub data: pattern::Data,

    /// Write a seeded pattern first and check every byte read back.
    #[arg(long)]
    pub verify: bool,

    /// Seed of the --verify pattern.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,

    /// Use this existing file (all connections) instead of rsbench-N.dat; with
    /// `metadata`, open and close this one file again and again. A comma-separated
    /// list gives each connection its own: connection i takes the i-th (modulo its length).
    #[arg(long, value_name = "NAME")]
    pub file: Option<String>,

    /// The directory the `list` workload lists, and the one `metadata` opens (and first
    /// makes) its files in (default: the share's root).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub dir: String,

    /// `list`: open `--dir` asking for an RH directory lease (a lease key per
    /// connection) and trust it: list again only when the server breaks it
    /// (then on a new open), as a client caching the listing does.
    #[arg(long)]
    pub dir_lease: bool,

    /// `list`: one more connection creates a new file in `--dir` this many
    /// times a second (removed afterwards), so that directory leases break.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub dir_changes: u32,

    /// `metadata`: open each file with DELETE_ON_CLOSE, so that every pass
    /// creates and deletes it (changes for watchers to report).
    #[arg(long)]
    pub delete_on_close: bool,

    /// Also keep a CHANGE_NOTIFY waiting on `--watch-dir` from this many
    /// more connections, and report the changes they were told of.
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub watchers: u32,

    /// The directory the watchers watch (default: the share's root).
    #[arg(long, value_name = "NAME", default_value = "")]
    pub watch_dir: String,

    /// Credits each connection asks the server for.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub credits: u16,

    /// Report server CPU seconds per GiB from /proc/PID/stat (all threads).
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,

    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,

    /// `reconnect`: drop each connection after this long on average
    /// (uniformly between half and one and a half times it).
    #[arg(long, value_name = "TIME", default_value = "500ms", value_parser = parse_duration_ms)]
    pub drop_every: u64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches("ib").trim_end_matches('b');
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4k, 1m, 2g)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("{s:?} is too large"))
}

fn parse_io_size(s: &str) -> Result<u64, String> {
    let n = parse_size(s)?;
    if !(4096..=8 << 20).contains(&n) {
        return Err(format!("I/O size {s} is outside 4k..8m"));
    }
    Ok(n)
}

fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("{s:?} is not a duration (e.g. 10s, 500ms, 2m)");
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else {
        (t, 1000.0)
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    if v.is_nan() || v <= 0.0 {
        return Err(bad());
    }
    Ok((v * mult) as u64)
}

fn parse_compression(s: &str) -> Result<CompressionAlgorithm, String> {
    match crate::config::compression_algorithm(s) {
        Some(a) if a != CompressionAlgorithm::PATTERN_V1 => Ok(a),
        _ => Err(format!(
            "unknown compression algorithm {s:?} (lz4, lz77, lz77+huffman, lznt1)"
        )),
    }
}

fn parse_dialect(s: &str) -> Result<u16, String> {
    Ok(match s {
        "2.0.2" | "2.02" | "0x0202" => 0x0202,
        "2.1" | "2.10" | "0x0210" => 0x0210,
        "3.0" | "3" | "0x0300" => 0x0300,
        "3.0.2" | "3.02" | "0x0302" => 0x0302,
        "3.1.1" | "3.11" | "0x0311" => 0x0311,
        _ => {
            return Err(format!(
                "unknown dialect {s:?} (2.0.2, 2.1, 3.0, 3.0.2, 3.1.1)"
            ))
        }
    })
}

/// Split `//HOST[:PORT]/SHARE` into (host, port, share): port 445 when
/// none is given.
pub fn parse_target(t: &str) -> Result<(String, u16, String), String> {
    parse_target_or(t, 445)
}

/// [`parse_target`] with another default port.
fn parse_target_or(t: &str, default_port: u16) -> Result<(String, u16, String), String> {
    let bad = || format!("{t:?} is not //HOST[:PORT]/SHARE");
    let rest = t
        .strip_prefix("//")
        .or_else(|| t.strip_prefix("\\\\"))
        .ok_or_else(bad)?;
    let (hostport, share) = rest.split_once(['/', '\\']).ok_or_else(bad)?;
    let share = share.trim_end_matches(['/', '\\']);
    if share.is_empty() || share.contains(['/', '\\']) || hostport.is_empty() {
        return Err(bad());
    }
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => (
            h.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse::<u16>().map_err(|_| bad())?,
        ),
        _ => (hostport.to_string(), default_port),
    };
    Ok((host, port, share.to_string()))
}

/// Split `[DOMAIN\]USER%PASS` into (domain, user, password).
pub fn parse_user(u: &str) -> (String, String, String) {
    let (who, pass) = u.split_once('%').unwrap_or((u, ""));
    let (domain, user) = who.split_once(['\\', '/']).unwrap_or(("", who));
    (domain.to_string(), user.to_string(), pass.to_string())
}

/// Everything the workers share.
pub(crate) struct Shared {
    pub args: BenchArgs,
    pub addr: SocketAddr,
    pub host: String,
    pub share: String,
    pub domain: String,
    pub user: String,
    pub password: String,
    pub dialects: Vec<Dialect>,
    /// `--transport quic`: how the server's certificate is trusted.
    pub trust: Option<ringshare_quic::client::Trust>,
    /// Threads done with setup (connected, files opened and filled).
    pub ready: AtomicUsize,
    /// A thread failed during setup.
    pub failed: AtomicBool,
    /// Measurement running (set by the main thread once all are ready).
    pub go: AtomicBool,
    /// Stop issuing requests.
    pub stop: AtomicBool,
    pub bytes: AtomicU64,
    pub ops: AtomicU64,
    pub errors: AtomicU64,
    /// The first error messages (NTSTATUS name and request).
    pub error_log: Mutex<Vec<String>>,
    /// The dialect, signing and encryption the first connection got.
    pub negotiated: Mutex<Option<report::Negotiated>>,
    /// `list`: listings, directory changes and lease breaks.
    pub dir: dircache::Counters,
}

impl Shared {
    /// Connections to open: the channels of one session, or independent ones.
    pub fn conn_count(&self) -> usize {
        if self.args.channels > 1 {
            self.args.channels as usize
        } else {
            self.args.connections as usize
        }
    }
}

impl Shared {
    pub fn error(&self, msg: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut log = crate::lock(&self.error_log);
        if log.len() < 20 {
            log.push(msg);
        }
    }
}

/// Per-thread results.
pub(crate) struct ThreadResult {
    pub hist: Histogram,
    pub bytes: u64,
    pub ops: u64,
    /// Bytes moved by each connection (by index).
    pub per_conn: Vec<(usize, u64)>,
    /// Bytes received and sent on the wire while measuring (frames whole).
    pub wire: (u64, u64),
}

/// Run the benchmark; the report goes to `out`. Returns whether the run
/// was clean (no errors).
pub fn run(args: BenchArgs, out: &mut dyn Write) -> Result<bool, String> {
    let quic = args.transport == BenchTransport::Quic;
    let (host, port, share) = parse_target_or(&args.target, if quic { 443 } else { 445 })?;
    let trust = match (&args.server_cert, quic) {
        (Some(c), true) => Some(ringshare_quic::client::Trust::parse(c)?),
        (None, true) => {
            return Err("--transport quic needs --server-cert FILE or sha256:HEX".into())
        }
        (Some(_), false) => return Err("--server-cert goes with --transport quic".into()),
        (None, false) => None,
    };
    if quic && (matches!(args.workload, Workload::Reconnect | Workload::Logon) || args.watchers > 0)
    {
        return Err(format!(
            "--transport quic: not with {}{}",
            args.workload.name(),
            if args.watchers > 0 {
                " or --watchers"
            } else {
                ""
            }
        ));
    }
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let (domain, user, password) = parse_user(&args.user);
    pattern::set_data(args.data);
    let dialects = match args.dialect {
        Some(d) => vec![Dialect(d)],
        None => Dialect::ALL.to_vec(),
    };
    if args.channels > 1 && args.dialect.is_some_and(|d| d < 0x0300) {
        return Err("--channels needs SMB 3 (multichannel binds SMB 3 sessions)".into());
    }
    // The channels of one session share one thread (and its ring).
    let threads = if args.channels > 1 {
        1
    } else {
        args.threads.min(args.connections).max(1) as usize
    };
    let shared = Arc::new(Shared {
        addr,
        host,
        share,
        domain,
        user,
        password,
        dialects,
        trust,
        ready: AtomicUsize::new(0),
        failed: AtomicBool::new(false),
        go: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        bytes: AtomicU64::new(0),
        ops: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        error_log: Mutex::new(Vec::new()),
        negotiated: Mutex::new(None),
        dir: dircache::Counters::new(),
        args,
    });
    if shared.args.workload == Workload::Reconnect {
        return reconnect::run_all(shared, out);
    }
    if shared.args.workload == Workload::Logon {
        return logon::run_all(shared, out);
    }
    let mut handles = Vec::new();
    for t in 0..threads {
        let conns: Vec<usize> = (0..shared.conn_count())
            .filter(|c| c % threads == t)
            .collect();
        let sh = Arc::clone(&shared);
        let h = std::thread::Builder::new()
            .name(format!("bench-{t}"))
            .spawn(move || worker::run(sh, conns))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        handles.push(h);
    }
    // Wait for setup.
    while shared.ready.load(Ordering::Acquire) < threads && !shared.failed.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let watchers = if shared.args.watchers > 0 && !shared.failed.load(Ordering::Acquire) {
        match watch::start(&shared, shared.args.watchers) {
            Ok(w) => Some(w),
            Err(e) => {
                shared.failed.store(true, Ordering::Release);
                shared.stop.store(true, Ordering::Release);
                return Err(e);
            }
        }
    } else {
        None
    };
    let changer =
        if shared.args.workload == Workload::List && !shared.failed.load(Ordering::Acquire) {
            dircache::start_changer(&shared).inspect_err(|_| {
                shared.failed.store(true, Ordering::Release);
                shared.stop.store(true, Ordering::Release);
            })?
        } else {
            None
        };
    let cpu0 = CpuSample::take(shared.args.server_pid);
    let start = Instant::now();
    shared.go.store(true, Ordering::Release);
    let tty = io::stderr().is_terminal() && !shared.args.json;
    let deadline = Duration::from_millis(shared.args.duration);
    let mut last_print = Instant::now();
    if !shared.failed.load(Ordering::Acquire) {
        loop {
            std::thread::sleep(Duration::from_millis(20));
            let el = start.elapsed();
            let bytes = shared.bytes.load(Ordering::Relaxed);
            let done_bytes = shared.args.bytes.is_some_and(|b| bytes >= b);
            if el >= deadline || done_bytes || shared.failed.load(Ordering::Acquire) {
                shared.stop.store(true, Ordering::Release);
                break;
            }
            if shared.stop.load(Ordering::Acquire) {
                break;
            }
            if tty && last_print.elapsed() >= Duration::from_millis(500) {
                last_print = Instant::now();
                let s = el.as_secs_f64();
                let ops = shared.ops.load(Ordering::Relaxed);
                let errs = shared.errors.load(Ordering::Relaxed);
                eprint!(
                    "\r{:>6.1}s  {:>8.3} GB/s  {:>10.0} IOPS  errors {errs}   ",
                    s,
                    bytes as f64 / s / 1e9,
                    ops as f64 / s
                );
            }
        }
    } else {
        shared.stop.store(true, Ordering::Release);
    }
    let mut hist = Histogram::new();
    let (mut bytes, mut ops, mut wire) = (0u64, 0u64, (0u64, 0u64));
    let mut per_conn = Vec::new();
    let mut setup_errors = Vec::new();
    for h in handles {
        match h.join() {
            Ok(Ok(r)) => {
                hist.merge(&r.hist);
                bytes += r.bytes;
                ops += r.ops;
                wire = (wire.0 + r.wire.0, wire.1 + r.wire.1);
                per_conn.extend(r.per_conn);
            }
            Ok(Err(e)) => setup_errors.push(e),
            Err(_) => setup_errors.push("a bench thread panicked".to_string()),
        }
    }
    let elapsed = start.elapsed();
    let cpu1 = CpuSample::take(shared.args.server_pid);
    let notify = match watchers {
        Some(w) => Some(watch::finish(w)?),
        None => None,
    };
    if let Some(c) = changer {
        c.join()
            .map_err(|_| "the directory changer panicked".to_string())??;
    }
    if tty {
        eprint!("\r{:60}\r", "");
    }
    if !setup_errors.is_empty() {
        return Err(setup_errors.join("; "));
    }
    let negotiated = *crate::lock(&shared.negotiated);
    let errors = shared.errors.load(Ordering::Relaxed);
    let error_log = crate::lock(&shared.error_log).clone();
    let summary = Summary {
        args: &shared.args,
        negotiated,
        elapsed,
        bytes,
        ops,
        hist: &hist,
        client_cpu_s: cpu1.client_s - cpu0.client_s,
        server_cpu_s: match (cpu0.server_s, cpu1.server_s) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        },
        errors,
        error_log: &error_log,
        notify,
        dir: (shared.args.workload == Workload::List).then(|| shared.dir.seen()),
        wire,
    };
    let mut text = if shared.args.json {
        summary.json()
    } else {
        summary.table()
    };
    if shared.args.channels > 1 && !shared.args.json {
        per_conn.sort();
        for (idx, b) in &per_conn {
            text.push_str(&format!(
                "channel {idx}: {b} bytes ({:.3} GB/s)\n",
                *b as f64 / elapsed.as_secs_f64().max(1e-9) / 1e9
            ));
        }
    }
    out.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the report: {e}"))?;
    Ok(errors == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets_with_and_without_port() {
        assert_eq!(
            parse_target("//127.0.0.1:4450/data").unwrap(),
            ("127.0.0.1".into(), 4450, "data".into())
        );
        assert_eq!(
            parse_target("//server/share/").unwrap(),
            ("server".into(), 445, "share".into())
        );
        assert_eq!(
            parse_target("//[::1]:445/s").unwrap(),
            ("::1".into(), 445, "s".into())
        );
        assert!(parse_target("server/share").is_err());
        assert!(parse_target("//server").is_err());
        assert!(parse_target("//server/a/b").is_err());
    }

    #[test]
    fn parses_sizes_durations_dialects_and_users() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("1MiB").unwrap(), 1 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert!(parse_io_size("2k").is_err());
        assert!(parse_io_size("16m").is_err());
        assert_eq!(parse_duration_ms("500ms").unwrap(), 500);
        assert_eq!(parse_duration_ms("1.5s").unwrap(), 1500);
        assert_eq!(parse_duration_ms("2m").unwrap(), 120_000);
        assert!(parse_duration_ms("0s").is_err());
        assert_eq!(parse_dialect("3.1.1").unwrap(), 0x0311);
        assert!(parse_dialect("4.0").is_err());
        assert_eq!(
            parse_user("DOM\\bob%pw%x"),
            ("DOM".into(), "bob".into(), "pw%x".into())
        );
        assert_eq!(parse_user("bob"), ("".into(), "bob".into(), "".into()));
    }
}
