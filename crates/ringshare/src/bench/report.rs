//! CPU accounting and the final report (table or JSON).

use std::fmt::Write as _;
use std::time::Duration;

use ringshare_wire::consts::Dialect;

use super::hist::Histogram;
use super::BenchArgs;

/// Clock ticks per second of /proc's utime/stime (USER_HZ: 100 in the Linux ABI).
const USER_HZ: f64 = 100.0;
const GIB: f64 = (1u64 << 30) as f64;

/// utime + stime in seconds from a /proc/.../stat line (all threads of the process).
pub fn cpu_seconds_from_stat(stat: &str) -> Option<f64> {
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    // rest starts at field 3 (state); utime is field 14, stime 15.
    let utime: f64 = f.nth(11)?.parse().ok()?;
    let stime: f64 = f.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

fn cpu_of(path: &str) -> Option<f64> {
    cpu_seconds_from_stat(&std::fs::read_to_string(path).ok()?)
}

/// (ppid, utime + stime + cutime + cstime in seconds) from a stat line.
fn ppid_and_tree_cpu(stat: &str) -> Option<(u32, f64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ppid = f.get(1)?.parse().ok()?;
    let mut t = 0.0;
    for i in 11..15 {
        t += f.get(i)?.parse::<f64>().ok()?;
    }
    Some((ppid, t / USER_HZ))
}

/// CPU of a server and of every process it forked (Samba serves each
/// connection in a child): live descendants plus the children already reaped.
fn server_cpu(pid: u32) -> Option<f64> {
    let own = ppid_and_tree_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?.1;
    let mut procs = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((ppid, t)) = std::fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|s| ppid_and_tree_cpu(&s))
        {
            procs.push((p, ppid, t));
        }
    }
    let mut tree = vec![pid];
    let mut total = own;
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        for &(p, ppid, t) in &procs {
            if ppid == parent && !tree.contains(&p) {
                tree.push(p);
                total += t;
            }
        }
        i += 1;
    }
    Some(total)
}

/// CPU seconds used so far by this process and by the server.
#[derive(Debug, Clone, Copy)]
pub struct CpuSample {
    pub client_s: f64,
    pub server_s: Option<f64>,
}

impl CpuSample {
    pub fn take(server_pid: Option<u32>) -> CpuSample {
        CpuSample {
            client_s: cpu_of("/proc/self/stat").unwrap_or(0.0),
            server_s: server_pid.and_then(server_cpu),
        }
    }
}

/// What the first connection settled with the server.
#[derive(Clone, Copy, Debug)]
pub struct Negotiated {
    pub dialect: Dialect,
    pub signing: bool,
    pub encryption: bool,
    /// The I/O size used: `--io-size`, or less when the server's MaxReadSize
    /// or MaxWriteSize is smaller.
    pub io_size: u64,
}

/// Everything the report shows.
pub struct Summary<'a> {
    pub args: &'a BenchArgs,
    pub negotiated: Option<Negotiated>,
    pub elapsed: Duration,
    pub bytes: u64,
    pub ops: u64,
    pub hist: &'a Histogram,
    pub client_cpu_s: f64,
    pub server_cpu_s: Option<f64>,
    pub errors: u64,
    pub error_log: &'a [String],
    /// What `--watchers` saw.
    pub notify: Option<super::watch::Seen>,
    /// `list`: listings, directory changes and lease breaks.
    pub dir: Option<super::dircache::Seen>,
    /// Bytes received and sent on the wire while measuring (frames whole).
    pub wire: (u64, u64),
}

fn dialect_name(d: Dialect) -> &'static str {
    d.version().unwrap_or("?")
}

fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v < 1.0 {
        format!("{:.0} us", v * 1000.0)
    } else {
        format!("{v:.2} ms")
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

impl Summary<'_> {
    fn secs(&self) -> f64 {
        self.elapsed.as_secs_f64().max(1e-9)
    }
    pub fn gb_per_s(&self) -> f64 {
        self.bytes as f64 / self.secs() / 1e9
    }
    pub fn iops(&self) -> f64 {
        self.ops as f64 / self.secs()
    }
    fn per_gib(&self, cpu: f64) -> Option<f64> {
        (self.bytes > 0).then(|| cpu / (self.bytes as f64 / GIB))
    }

    /// Wire bytes in the direction the data went (received for reads, sent
    /// for writes; both for a mixed workload) per byte of data.
    pub fn wire_ratio(&self) -> Option<f64> {
        use super::Workload as W;
        let wire = match self.args.workload {
            W::SeqRead | W::RandRead | W::SameFile => self.wire.0,
            W::SeqWrite | W::RandWrite => self.wire.1,
            _ => self.wire.0 + self.wire.1,
        };
        (self.bytes > 0 && wire > 0).then(|| wire as f64 / self.bytes as f64)
    }

    /// The I/O size the run used (see [`Negotiated::io_size`]).
    fn io_size(&self) -> u64 {
        self.negotiated.map_or(self.args.io_size, |n| n.io_size)
    }

    pub fn table(&self) -> String {
        let a = self.args;
        let mut o = String::new();
        let (d, s, e) = self.negotiated.map_or(("?", false, false), |n| {
            (dialect_name(n.dialect), n.signing, n.encryption)
        });
        let io = self.io_size();
        let asked = if io == a.io_size {
            String::new()
        } else {
            format!(" (asked {} B: the server allows no more)", a.io_size)
        };
        let _ = writeln!(
            o,
            "ringshare bench {} {}: io {io} B{asked}, queue depth {}, {} connection(s), {} thread(s), dialect {d}, signing {}, encryption {}",
            a.target,
            a.workload.name(),
            a.queue_depth,
            a.connections,
            a.threads,
            if s { "on" } else { "off" },
            if e { "on" } else { "off" },
        );
        let _ = writeln!(o, "  elapsed         {:.2} s", self.secs());
        let _ = writeln!(
            o,
            "  throughput      {:.3} GB/s  ({:.1} MiB/s, {} bytes)",
            self.gb_per_s(),
            self.bytes as f64 / self.secs() / (1 << 20) as f64,
            self.bytes
        );
        let _ = writeln!(
            o,
            "  IOPS            {:.0}  ({} requests)",
            self.iops(),
            self.ops
        );
        let _ = writeln!(
            o,
            "  latency         p50 {}  p99 {}  p99.9 {}  max {}",
            ms(self.hist.quantile(0.5)),
            ms(self.hist.quantile(0.99)),
            ms(self.hist.quantile(0.999)),
            ms(self.hist.max())
        );
        match self.per_gib(self.client_cpu_s) {
            Some(v) => {
                let _ = writeln!(
                    o,
                    "  client CPU      {v:.3} s/GiB  ({:.2} s)",
                    self.client_cpu_s
                );
            }
            None => {
                let _ = writeln!(o, "  client CPU      {:.2} s", self.client_cpu_s);
            }
        }
        if let Some(sc) = self.server_cpu_s {
            match self.per_gib(sc) {
                Some(v) => {
                    let _ = writeln!(o, "  server CPU      {v:.3} s/GiB  ({sc:.2} s)");
                }
                None => {
                    let _ = writeln!(o, "  server CPU      {sc:.2} s");
                }
            }
        }
        if let Some(r) = self.wire_ratio() {
            let c = a
                .compress
                .map_or("off", crate::config::compression_algorithm_name);
            let _ = writeln!(
                o,
                "  wire            {:.3} bytes per data byte ({:.0} MiB per GiB; compression {c}, data {:?})",
                r,
                r * 1024.0,
                a.data
            );
        }
        if let Some(n) = self.notify {
            let _ = writeln!(
                o,
                "  notify          {} changes to {} watcher(s) ({:.0}/s), {} NOTIFY_ENUM_DIR",
                n.changes,
                n.watchers,
                n.changes as f64 / self.secs().max(1e-9),
                n.enum_dirs
            );
        }
        if let Some(d) = self.dir {
            let _ = writeln!(
                o,
                "  listings        {} ({:.1}/s); {} directory changes, {} lease breaks{}",
                d.listings,
                d.listings as f64 / self.secs(),
                d.changes,
                d.breaks,
                if d.breaks > 0 && d.break_after_ns.0 > 0 {
                    format!(
                        ", a break p50 {} p99 {} after its change was sent",
                        ms(d.break_after_ns.0),
                        ms(d.break_after_ns.1)
                    )
                } else {
                    String::new()
                }
            );
        }
        if self.errors == 0 {
            let _ = writeln!(o, "  errors          0");
        } else {
            let _ = writeln!(o, "  errors          {} — THE RUN SAW ERRORS:", self.errors);
            for e in self.error_log {
                let _ = writeln!(o, "    {e}");
            }
        }
        o
    }

    pub fn json(&self) -> String {
        let a = self.args;
        let (d, s, e) = self.negotiated.map_or(("?", false, false), |n| {
            (dialect_name(n.dialect), n.signing, n.encryption)
        });
        let opt = |v: Option<f64>| v.map_or("null".to_string(), |x| format!("{x:.6}"));
        let errors: Vec<String> = self.error_log.iter().map(|e| json_str(e)).collect();
        format!(
            "{{\"target\":{},\"workload\":\"{}\",\"io_size\":{},\"queue_depth\":{},\"connections\":{},\"threads\":{},\"dialect\":\"{d}\",\"signing\":{s},\"encryption\":{e},\"elapsed_s\":{:.6},\"bytes\":{},\"requests\":{},\"gb_per_s\":{:.6},\"iops\":{:.3},\"latency_us\":{{\"p50\":{:.1},\"p99\":{:.1},\"p999\":{:.1},\"max\":{:.1}}},\"client_cpu_s\":{:.3},\"client_cpu_s_per_gib\":{},\"server_cpu_s\":{},\"server_cpu_s_per_gib\":{},\"wire_per_data_byte\":{},\"errors\":{},\"error_log\":[{}]{}{}}}\n",
            json_str(&a.target),
            a.workload.name(),
            self.io_size(),
            a.queue_depth,
            a.connections,
            a.threads,
            self.secs(),
            self.bytes,
            self.ops,
            self.gb_per_s(),
            self.iops(),
            self.hist.quantile(0.5) as f64 / 1e3,
            self.hist.quantile(0.99) as f64 / 1e3,
            self.hist.quantile(0.999) as f64 / 1e3,
            self.hist.max() as f64 / 1e3,
            self.client_cpu_s,
            opt(self.per_gib(self.client_cpu_s)),
            opt(self.server_cpu_s),
            opt(self.server_cpu_s.and_then(|c| self.per_gib(c))),
            opt(self.wire_ratio()),
            self.errors,
            errors.join(","),
            self.notify.map_or(String::new(), |n| format!(
                ",\"watchers\":{},\"notify_changes\":{},\"notify_changes_per_s\":{:.3},\"notify_enum_dir\":{}",
                n.watchers,
                n.changes,
                n.changes as f64 / self.secs().max(1e-9),
                n.enum_dirs
            )),
            self.dir.map_or(String::new(), |d| format!(
                ",\"listings\":{},\"listings_per_s\":{:.3},\"dir_changes\":{},\"dir_breaks\":{},\"break_after_us\":{{\"p50\":{:.1},\"p99\":{:.1}}}",
                d.listings,
                d.listings as f64 / self.secs(),
                d.changes,
                d.breaks,
                d.break_after_ns.0 as f64 / 1e3,
                d.break_after_ns.1 as f64 / 1e3
            )),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_utime_and_stime_even_with_spaces_in_the_name() {
        let stat = "1234 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 250 150 0 0 20 0 4 0";
        assert_eq!(cpu_seconds_from_stat(stat), Some(4.0));
        assert_eq!(cpu_seconds_from_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_a_cpu_figure() {
        assert!(CpuSample::take(Some(std::process::id())).server_s.is_some());
    }
}
