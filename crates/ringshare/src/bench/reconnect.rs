//! `ringshare bench ... reconnect`: durable handles under dropped
//! connections. Each connection opens its own file with DH2Q and a
//! read-write-handle lease, fills it, then keeps `--queue-depth` random
//! writes and verified reads in flight; at random times (on average every
//! `--drop-every`) it drops its TCP connection with requests in flight,
//! connects again, takes its open back with DH2C, sends again the writes
//! that were not acknowledged, and goes on. At the end every block of the
//! file is read back and compared with what was last written there.
//!
//! Its figures are about correctness, not speed: blocking sockets, one
//! thread per connection. It counts drops, reconnects and how long they
//! took, reads that returned other data than written (mismatches), blocks
//! whose last acknowledged write is not in the file at the end (lost
//! writes), and, with `--server-pid`, the server's resident memory at the
//! start and the end.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringshare_client::durable::Durable;
use ringshare_client::{ClientConn, ClientOptions, Event, Reply, SmbError};
use ringshare_wire::consts::CreateDisposition;
use ringshare_wire::{framing, FileId, NtStatus};

use super::{pattern, Shared};

/// The most a connection's file may be in this mode: blocks are small
/// enough that drops often land on writes in flight.
const FILE_MAX: u64 = 64 << 20;
/// How long a reconnect may keep finding nothing (the server has not yet
/// seen the old connection go) before the run fails.
const RECONNECT_GIVE_UP: Duration = Duration::from_secs(10);
/// A reply slower than this is an error (the server hung).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

const GENERIC_READ_WRITE: u32 = 0xC000_0000;

/// One connection's totals.
#[derive(Default, Debug, Clone)]
pub(crate) struct Tally {
    pub ops: u64,
    pub bytes: u64,
    pub drops: u64,
    pub reconnects: u64,
    pub reconnect_ms_max: u64,
    pub reconnect_ms_sum: u64,
    /// Reads whose data was not what was written.
    pub mismatches: u64,
    /// Blocks whose last acknowledged write was not in the file at the end.
    pub lost: u64,
    pub errors: Vec<String>,
}

/// A TCP connection with its SMB client.
pub(crate) struct Link {
    pub(crate) sock: TcpStream,
    pub(crate) smb: ClientConn,
    out: Vec<u8>,
    frame: Vec<u8>,
}

impl Link {
    /// Connect, negotiate, log on and connect the tree.
    pub(crate) fn open(sh: &Shared, opts: &ClientOptions) -> Result<Link, String> {
        let sock = TcpStream::connect(sh.addr)
            .map_err(|e| format!("cannot connect to {}: {e}", sh.addr))?;
        let _ = sock.set_nodelay(true);
        sock.set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(|e| format!("SO_RCVTIMEO: {e}"))?;
        let mut l = Link {
            sock,
            smb: ClientConn::new(opts.clone()),
            out: Vec::new(),
            frame: Vec::new(),
        };
        let mut events = Vec::new();
        while !l.smb.is_ready() {
            l.flush()?;
            l.receive(&mut events)?;
        }
        Ok(l)
    }

    /// The last frame received (replies' ranges point into it).
    pub(crate) fn frame(&self) -> &[u8] {
        &self.frame
    }

    pub(crate) fn flush(&mut self) -> Result<(), String> {
        if self.smb.take_output(&mut self.out) && !self.out.is_empty() {
            self.sock
                .write_all(&self.out)
                .map_err(|e| format!("send: {e}"))?;
        }
        Ok(())
    }

    /// Read one frame and hand it to the client.
    pub(crate) fn receive(&mut self, events: &mut Vec<Event>) -> Result<(), String> {
        let mut hdr = [0u8; 4];
        self.sock
            .read_exact(&mut hdr)
            .map_err(|e| format!("receive: {e}"))?;
        let len = framing::frame_len(hdr).map_err(|e| format!("framing: {e}"))?;
        self.frame.resize(len, 0);
        self.sock
            .read_exact(&mut self.frame)
            .map_err(|e| format!("receive: {e}"))?;
        self.smb
            .receive(&mut self.frame, events)
            .map_err(|e| format!("{e}"))
    }

    /// Send `tag`'s request and wait for its reply.
    pub(crate) fn call(&mut self, tag: u64) -> Result<Result<Reply, NtStatus>, String> {
        self.flush()?;
        let mut events = Vec::new();
        loop {
            self.receive(&mut events)?;
            for e in events.drain(..) {
                if let Event::Done { tag: t, result, .. } = e {
                    if t == tag {
                        return Ok(result.map_err(|e| e.status));
                    }
                }
            }
        }
    }
}

/// What a request in flight was.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// A write of block `block` with generation `generation`.
    Write {
        block: u64,
        generation: u64,
    },
    Read {
        block: u64,
    },
}

struct Worker<'a> {
    sh: &'a Shared,
    idx: usize,
    opts: ClientOptions,
    name: String,
    durable: Durable,
    file_id: FileId,
    block: u64,
    blocks: u64,
    /// The generation last written to each block (its data is the pattern
    /// seeded by it); written when the WRITE is sent.
    generation: Vec<u64>,
    next_generation: u64,
    in_flight: HashMap<u64, Op>,
    busy: HashSet<u64>,
    next_tag: u64,
    rng: u64,
    buf: Vec<u8>,
    tally: Tally,
}

fn seed_of(base: u64, generation: u64) -> u64 {
    base ^ generation.wrapping_mul(0xD6E8_FEB8_6659_FD93)
}

impl Worker<'_> {
    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn seed(&self, block: u64) -> u64 {
        seed_of(
            self.sh.args.seed ^ self.idx as u64,
            self.generation[block as usize],
        )
    }

    fn tag(&mut self) -> u64 {
        self.next_tag += 1;
        self.next_tag
    }

    /// Queue a write of `block` at its current generation.
    fn send_write(&mut self, link: &mut Link, block: u64) -> Result<(), String> {
        let seed = self.seed(block);
        let off = block * self.block;
        pattern::fill(seed, off, &mut self.buf);
        let tag = self.tag();
        link.smb
            .write(tag, self.file_id, off, &self.buf)
            .map_err(|e| format!("write: {e}"))?;
        self.in_flight.insert(
            tag,
            Op::Write {
                block,
                generation: self.generation[block as usize],
            },
        );
        self.busy.insert(block);
        Ok(())
    }

    fn send_read(&mut self, link: &mut Link, block: u64) -> Result<(), String> {
        let tag = self.tag();
        link.smb
            .read(tag, self.file_id, block * self.block, self.block as u32)
            .map_err(|e| format!("read: {e}"))?;
        self.in_flight.insert(tag, Op::Read { block });
        self.busy.insert(block);
        Ok(())
    }

    /// Fill the queue with random writes (new data) and reads of blocks
    /// nothing in flight touches.
    fn top_up(&mut self, link: &mut Link) -> Result<(), String> {
        let depth = self.sh.args.queue_depth.min(32) as usize;
        let mut tries = 0;
        while self.in_flight.len() < depth && tries < 4 * depth {
            tries += 1;
            let block = self.rand() % self.blocks;
            if self.busy.contains(&block) || !link.smb.can_send(self.block as usize) {
                continue;
            }
            if self.rand().is_multiple_of(2) {
                self.next_generation += 1;
                self.generation[block as usize] = self.next_generation;
                self.send_write(link, block)?;
            } else {
                self.send_read(link, block)?;
            }
        }
        link.flush()
    }

    /// One reply.
    fn done(&mut self, link: &Link, tag: u64, result: Result<Reply, SmbError>) {
        let Some(op) = self.in_flight.remove(&tag) else {
            return;
        };
        match op {
            Op::Write { block, .. } | Op::Read { block } => {
                self.busy.remove(&block);
            }
        }
        self.tally.ops += 1;
        match (op, result) {
            (Op::Write { .. }, Ok(_)) => self.tally.bytes += self.block,
            (Op::Read { block }, Ok(Reply::Read { data })) => {
                self.tally.bytes += self.block;
                let got = &link.frame[data];
                let off = block * self.block;
                if got.len() as u64 != self.block
                    || pattern::first_mismatch(self.seed(block), off, got).is_some()
                {
                    self.tally.mismatches += 1;
                    self.error(format!(
                        "read of block {block} differs from what was written"
                    ));
                }
            }
            (_, r) => self.error(format!("{op:?}: {r:?}")),
        }
    }

    fn error(&mut self, e: String) {
        self.sh.error(format!("connection {}: {e}", self.idx));
        if self.tally.errors.len() < 5 {
            self.tally.errors.push(e);
        }
    }

    /// Drop the connection with requests in flight and take the open back
    /// on a new one; then send again the writes that were not answered.
    fn drop_and_reconnect(&mut self, link: &mut Link) -> Result<(), String> {
        let _ = link.sock.shutdown(Shutdown::Both);
        self.tally.drops += 1;
        let t0 = Instant::now();
        *link = loop {
            let mut l = Link::open(self.sh, &self.opts)?;
            let tag = self.tag();
            l.smb
                .reconnect_durable(tag, &self.name, self.file_id, &self.durable)
                .map_err(|e| format!("DH2C: {e}"))?;
            match l.call(tag)? {
                Ok(Reply::Create { file_id, .. }) if file_id == self.file_id => break l,
                Ok(r) => return Err(format!("DH2C answered {r:?}")),
                // The server has not yet seen the old connection go.
                Err(NtStatus::OBJECT_NAME_NOT_FOUND) if t0.elapsed() < RECONNECT_GIVE_UP => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(s) => return Err(format!("DH2C: {s}")),
            }
        };
        let ms = t0.elapsed().as_millis() as u64;
        self.tally.reconnects += 1;
        self.tally.reconnect_ms_sum += ms;
        self.tally.reconnect_ms_max = self.tally.reconnect_ms_max.max(ms);
        // Reads in flight are forgotten; writes go again, with the data
        // their block holds now (the same: a block in flight is not
        // written again until answered).
        let lost: Vec<Op> = self.in_flight.drain().map(|(_, op)| op).collect();
        self.busy.clear();
        for op in lost {
            if let Op::Write { block, generation } = op {
                debug_assert_eq!(generation, self.generation[block as usize]);
                self.send_write(link, block)?;
            }
        }
        link.flush()
    }

    /// Wait for one reply event (or the time to drop).
    fn pump(&mut self, link: &mut Link) -> Result<(), String> {
        let mut events = Vec::new();
        link.receive(&mut events)?;
        for e in events {
            if let Event::Done { tag, result, .. } = e {
                self.done(link, tag, result);
            }
        }
        Ok(())
    }

    /// Read every block back and compare.
    fn check_all(&mut self, link: &mut Link) -> Result<(), String> {
        while !self.in_flight.is_empty() {
            self.pump(link)?;
        }
        for block in 0..self.blocks {
            let tag = self.tag();
            link.smb
                .read(tag, self.file_id, block * self.block, self.block as u32)
                .map_err(|e| format!("read: {e}"))?;
            link.flush()?;
            let mut events = Vec::new();
            let data = loop {
                link.receive(&mut events)?;
                let found = events.drain(..).find_map(|e| match e {
                    Event::Done { tag: t, result, .. } if t == tag => Some(result),
                    _ => None,
                });
                if let Some(r) = found {
                    break r;
                }
            };
            let ok = match data {
                Ok(Reply::Read { data }) => {
                    let got = &link.frame[data];
                    got.len() as u64 == self.block
                        && pattern::first_mismatch(self.seed(block), block * self.block, got)
                            .is_none()
                }
                _ => false,
            };
            if !ok {
                self.tally.lost += 1;
                self.error(format!(
                    "block {block}: the last acknowledged write is not in the file"
                ));
            }
        }
        Ok(())
    }
}

/// One connection's whole run.
pub(crate) fn run_one(sh: Arc<Shared>, idx: usize) -> Tally {
    let mut w = match setup(&sh, idx) {
        Ok(w) => w,
        Err(e) => {
            sh.failed.store(true, Ordering::Release);
            return Tally {
                errors: vec![e],
                ..Tally::default()
            };
        }
    };
    if let Err(e) = work(&mut w) {
        w.w.error(e);
    }
    w.w.tally
}

struct Started<'a> {
    w: Worker<'a>,
    link: Link,
}

fn setup(sh: &Shared, idx: usize) -> Result<Started<'_>, String> {
    let opts = super::worker::client_options(sh, idx);
    let seed = opts.seed;
    let mut link = Link::open(sh, &opts)?;
    if link.smb.dialect().is_none_or(|d| d.0 < 0x0300) {
        return Err("the reconnect workload needs SMB 3 (DH2Q)".into());
    }
    let block = sh
        .args
        .io_size
        .min(u64::from(link.smb.max_write_size()))
        .min(u64::from(link.smb.max_read_size()));
    let size = sh.args.file_size.min(FILE_MAX);
    let blocks = (size / block).max(4);
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..].copy_from_slice(&(idx as u64).to_le_bytes());
    let mut create_guid = key;
    create_guid[0] ^= 0xA5;
    let durable = Durable {
        lease_key: key,
        create_guid,
        timeout_ms: 60_000,
    };
    let name = format!("rsbench-reconnect-{idx}.dat");
    link.smb
        .create_durable(
            1,
            &name,
            GENERIC_READ_WRITE,
            CreateDisposition::OVERWRITE_IF,
            &durable,
        )
        .map_err(|e| format!("create: {e}"))?;
    let file_id = match link.call(1)? {
        Ok(Reply::Create {
            file_id,
            durable: true,
            ..
        }) => file_id,
        Ok(Reply::Create { .. }) => {
            return Err(format!(
                "{name}: the server did not make the open durable (durable handles = no?)"
            ))
        }
        other => return Err(format!("opening {name}: {other:?}")),
    };
    let mut w = Worker {
        sh,
        idx,
        opts,
        name,
        durable,
        file_id,
        block,
        blocks,
        generation: vec![0; blocks as usize],
        next_generation: 0,
        in_flight: HashMap::new(),
        busy: HashSet::new(),
        next_tag: 1,
        rng: seed | 1,
        buf: vec![0; block as usize],
        tally: Tally::default(),
    };
    // Fill the file (generation 0 everywhere).
    for b in 0..blocks {
        w.send_write(&mut link, b)?;
        link.flush()?;
        while !w.in_flight.is_empty() {
            w.pump(&mut link)?;
        }
    }
    w.tally = Tally::default();
    Ok(Started { w, link })
}

fn work(st: &mut Started<'_>) -> Result<(), String> {
    let Started { w, link } = st;
    let sh = w.sh;
    sh.ready.fetch_add(1, Ordering::AcqRel);
    while !sh.go.load(Ordering::Acquire) {
        if sh.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let every = sh.args.drop_every.max(1);
    let mut next_drop = Instant::now() + Duration::from_millis(every / 2 + w.rand() % every);
    while !sh.stop.load(Ordering::Acquire) {
        w.top_up(link)?;
        if Instant::now() >= next_drop && !w.in_flight.is_empty() {
            w.drop_and_reconnect(link)?;
            next_drop = Instant::now() + Duration::from_millis(every / 2 + w.rand() % every);
            continue;
        }
        w.pump(link)?;
        sh.ops.fetch_add(1, Ordering::Relaxed);
    }
    w.check_all(link)?;
    let tag = w.tag();
    let _ = link.smb.close(tag, w.file_id);
    let _ = link.call(tag);
    Ok(())
}

/// The server's resident memory (KiB), from /proc.
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Sum of the connections' tallies.
pub(crate) fn total(tallies: &[Tally]) -> Tally {
    let mut t = Tally::default();
    for x in tallies {
        t.ops += x.ops;
        t.bytes += x.bytes;
        t.drops += x.drops;
        t.reconnects += x.reconnects;
        t.reconnect_ms_sum += x.reconnect_ms_sum;
        t.reconnect_ms_max = t.reconnect_ms_max.max(x.reconnect_ms_max);
        t.mismatches += x.mismatches;
        t.lost += x.lost;
        t.errors.extend(x.errors.iter().cloned());
    }
    t
}

/// The whole `reconnect` run: one thread per connection; the report to
/// `out`. Clean when nothing mismatched, nothing was lost and no request
/// failed.
pub(crate) fn run_all(sh: Arc<Shared>, out: &mut dyn Write) -> Result<bool, String> {
    let n = sh.args.connections as usize;
    let mut handles = Vec::new();
    for idx in 0..n {
        let s = Arc::clone(&sh);
        handles.push(
            std::thread::Builder::new()
                .name(format!("reconnect-{idx}"))
                .spawn(move || run_one(s, idx))
                .map_err(|e| format!("cannot start a thread: {e}"))?,
        );
    }
    while sh.ready.load(Ordering::Acquire) < n && !sh.failed.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let rss0 = sh.args.server_pid.and_then(rss_kib);
    let start = Instant::now();
    sh.go.store(true, Ordering::Release);
    let deadline = Duration::from_millis(sh.args.duration);
    while start.elapsed() < deadline && !sh.failed.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(20));
    }
    sh.stop.store(true, Ordering::Release);
    let mut tallies = Vec::new();
    for h in handles {
        tallies.push(
            h.join()
                .map_err(|_| "a reconnect thread panicked".to_string())?,
        );
    }
    let elapsed = start.elapsed();
    let rss1 = sh.args.server_pid.and_then(rss_kib);
    let t = total(&tallies);
    let failed_setup = sh.failed.load(Ordering::Acquire);
    if failed_setup && t.ops == 0 {
        return Err(t.errors.join("; "));
    }
    let mut text = String::new();
    let secs = elapsed.as_secs_f64().max(1e-9);
    text.push_str(&format!(
        "workload reconnect: {n} connection(s), {:.1} s, queue depth {}, drop every ~{} ms\n",
        secs,
        sh.args.queue_depth.min(32),
        sh.args.drop_every
    ));
    text.push_str(&format!(
        "requests {} ({:.0}/s), bytes {} ({:.1} MB/s)\n",
        t.ops,
        t.ops as f64 / secs,
        t.bytes,
        t.bytes as f64 / secs / 1e6
    ));
    let mean = if t.reconnects > 0 {
        t.reconnect_ms_sum as f64 / t.reconnects as f64
    } else {
        0.0
    };
    text.push_str(&format!(
        "drops {}, reconnects {} (DH2C, mean {:.1} ms, max {} ms)\n",
        t.drops, t.reconnects, mean, t.reconnect_ms_max
    ));
    text.push_str(&format!(
        "mismatched reads {}, lost acknowledged writes {} (blocks checked at the end)\n",
        t.mismatches, t.lost
    ));
    if let (Some(a), Some(b)) = (rss0, rss1) {
        text.push_str(&format!(
            "server RSS {a} KiB at the start, {b} KiB at the end ({:+} KiB)\n",
            b as i64 - a as i64
        ));
    }
    let errors = sh.errors.load(Ordering::Relaxed);
    text.push_str(&format!("errors {errors}\n"));
    for e in crate::lock(&sh.error_log).iter() {
        text.push_str(&format!("  {e}\n"));
    }
    let clean = errors == 0 && t.mismatches == 0 && t.lost == 0 && t.drops == t.reconnects;
    text.push_str(if clean {
        "result: clean\n"
    } else {
        "result: FAILED\n"
    });
    out.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write the report: {e}"))?;
    Ok(clean)
}
