//! One bench thread: one io_uring, several client connections.
//!
//! Per loop iteration: every connection issues what its free slots and its
//! credits allow, hands its output to one send (two send buffers swap, so
//! nothing is allocated), then one `io_uring_enter` submits and waits.
//! Received bytes accumulate in a per-connection buffer; whole frames are
//! handed to the client connection in place (decrypted there when sealed) and
//! read data is checked where it landed.
//!
//! Multichannel (`--channels N`): connection 0 sets the session up and opens
//! the file; connections 1.. wait (`Unbound`, nothing sent) until it is ready,
//! then bind to its session and work on its open.

use std::net::TcpStream;
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringshare_client::{ClientConn, ClientError, ClientOptions, Event, Gap, Reply, READ_HEAD_LEN};
use ringshare_engine::{net, Ring, RingConfig, SharedFd};
use ringshare_wire::consts::{CompressionAlgorithm, CreateDisposition, InfoType};
use ringshare_wire::{framing, FileId, NtStatus};

use super::hist::Histogram;
use super::quic::QuicPipe;
use super::{pattern, report, Shared, ThreadResult, Workload};

const KIND_RECV: u64 = 1;
const KIND_SEND: u64 = 2;
/// `--transport quic`: a connection's UDP socket is readable.
const KIND_UDP: u64 = 3;

const TAG_OPEN: u64 = 1 << 40;
const TAG_FILL: u64 = 2 << 40;
const TAG_SLOT: u64 = 3 << 40;
/// Read-only workloads drop the read-write handle they filled through and
/// reopen for reading only, as `smbclient get` or Explorer read a file.
const TAG_CLOSE_RW: u64 = 4 << 40;
const TAG_OPEN_RO: u64 = 5 << 40;
/// A lease break's acknowledgment (`list --dir-lease`).
const TAG_LEASE_ACK: u64 = 6 << 40;
const TAG_KIND_MASK: u64 = 0xFF << 40;

const GENERIC_READ_WRITE: u32 = 0xC000_0000;
const GENERIC_READ: u32 = 0x8000_0000;
/// FILE_LIST_DIRECTORY | FILE_READ_ATTRIBUTES | SYNCHRONIZE.
const DIR_LIST_ACCESS: u32 = 0x0010_0081;
const NON_DIRECTORY_FILE: u32 = 0x40;
const DIRECTORY_FILE: u32 = 0x1;
/// FileStandardInformation ([MS-FSCC] 2.4.47).
const FILE_STANDARD_INFORMATION: u8 = 0x05;
/// FileIdBothDirectoryInformation ([MS-FSCC] 2.4.17).
const FILE_ID_BOTH_DIRECTORY_INFORMATION: u8 = 0x25;
/// Small files the metadata storm cycles through per connection.
const METADATA_FILES: u64 = 1000;
/// Largest frame accepted from a server.
const FRAME_LEN_MAX: usize = 16 << 20;
/// Receive room kept free for the next recv.
const RECV_ROOM_MIN: usize = 64 * 1024;
/// Frames from this size on may be taken in pieces (READ data streamed).
const STREAM_MIN: usize = 64 * 1024;
/// Receive buffer when READ data is streamed (no signing, no sealing): the
/// data passes through it in pieces, so it need not hold a frame.
const STREAM_RECV_BUF: usize = 1 << 20;
/// The most a receive waits to be queued while a large frame comes in (`SO_RCVLOWAT`; see
/// `Conn::set_low_water`). 256 KiB to 2 MiB measured alike on seq-read 1m and 4m.
const LOW_WATER_MAX: usize = 512 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// A channel waiting for the first connection's session to bind to.
    Unbound,
    Handshake,
    Opening,
    Filling,
    Reopening,
    Waiting,
    Running,
    Draining,
    Done,
}

/// A READ response whose data is taken from the stream in pieces as it
/// arrives (checked and counted there) instead of in one frame buffer.
struct Streamed {
    /// Bytes of the frame (after the direct-TCP header) taken so far.
    pos: usize,
    /// Bytes of the frame.
    len: usize,
    /// Where the data lies in the frame.
    data: Range<usize>,
    /// File offset of the data, to check it against the `--verify` pattern.
    file_offset: Option<u64>,
    /// The first file offset whose byte differed from the pattern.
    mismatch: Option<u64>,
    /// The response's event, handled once the whole frame is taken.
    event: Event,
}

impl Streamed {
    /// Take the frame's next bytes from `bytes` (what follows is the next
    /// frame's), checking data against the pattern of `seed` if given.
    /// Returns how many bytes were taken.
    fn take(&mut self, bytes: &[u8], seed: Option<u64>) -> usize {
        let n = bytes.len().min(self.len - self.pos);
        let (from, to) = (
            self.pos.max(self.data.start),
            (self.pos + n).min(self.data.end),
        );
        if let (Some(seed), Some(file_offset), None) = (seed, self.file_offset, self.mismatch) {
            if from < to {
                let piece = &bytes[from - self.pos..to - self.pos];
                let at = file_offset + (from - self.data.start) as u64;
                self.mismatch = pattern::first_mismatch(seed, at, piece);
            }
        }
        self.pos += n;
        n
    }
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    busy: bool,
    start: Instant,
    offset: u64,
    stage: u8,
    file: FileId,
    /// `list --dir-lease`: the open holds a read lease on the directory.
    leased: bool,
    /// `list --dir-lease`: listed under the lease; nothing is sent until the
    /// lease breaks.
    cached: bool,
    /// `list --dir-lease`: the lease broke while the slot was listing; what
    /// it lists now may be stale.
    broken: bool,
}

struct Conn {
    idx: usize,
    fd: SharedFd,
    smb: ClientConn,
    phase: Phase,
    rbuf: Option<Vec<u8>>,
    rstart: usize,
    /// The READ response being taken in pieces, if any.
    streamed: Option<Streamed>,
    /// The socket's `SO_RCVLOWAT` as last set.
    low_water: usize,
    spare: Option<Vec<u8>>,
    sending: bool,
    file: FileId,
    fill_next: u64,
    fill_inflight: u32,
    slots: Vec<Slot>,
    cursor: u64,
    rng: u64,
    meta_k: u64,
    /// The data of WRITEs copied into the output (signed or sealed), and the
    /// template of `pool`'s buffers.
    wbuf: Vec<u8>,
    /// Buffers for WRITE data sent apart from the requests, most recently
    /// returned last: the few in use cycle and stay in the CPU cache.
    pool: Vec<Vec<u8>>,
    /// The data of the WRITEs queued apart and not yet handed to a send,
    /// in the order of the client connection's gaps.
    staged: Vec<Vec<u8>>,
    gaps: Vec<Gap>,
    /// For each buffer of the send in flight: 0 the output (back to `spare`),
    /// 1 a WRITE's data (back to `pool`), 2 a further piece of the output.
    send_parts: Vec<u8>,
    events: Vec<Event>,
    opts: ClientOptions,
    /// A further channel of connection 0's session.
    bound: bool,
    /// Payload bytes this connection moved.
    bytes: u64,
    /// Wire bytes (in, out) when the measurement started.
    wire_at_go: Option<(u64, u64)>,
    /// `--transport quic`: the QUIC connection carrying the SMB bytes (`fd`
    /// is its UDP socket).
    quic: Option<Box<QuicPipe>>,
}

/// The directory lease key of connection `idx` (`list --dir-lease`).
fn dir_lease_key(idx: usize) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&(idx as u64 + 1).to_le_bytes());
    key
}

fn token(kind: u64, idx: usize) -> u64 {
    (kind << 32) | idx as u64
}

/// How connection `idx` connects (its seed, and so its ClientGuid, its own).
pub(crate) fn client_options(sh: &Shared, idx: usize) -> ClientOptions {
    let seed = now_filetime() ^ ((idx as u64 + 1) << 48) ^ u64::from(std::process::id());
    ClientOptions {
        user: sh.user.clone(),
        domain: sh.domain.clone(),
        password: sh.password.clone(),
        share_unc: format!("\\\\{}\\{}", sh.host, sh.share),
        dialects: sh.dialects.clone(),
        sign: sh.args.sign,
        encrypt: sh.args.encrypt,
        credits_target: sh.args.credits,
        seed,
        now_filetime: now_filetime(),
        kerberos: None,
        relay: None,
        compression: sh
            .args
            .compress
            .map(|a| vec![a, CompressionAlgorithm::PATTERN_V1])
            .unwrap_or_default(),
        transport_security: sh.trust.is_some(),
    }
}

fn now_filetime() -> u64 {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    116_444_736_000_000_000 + d.as_nanos() as u64 / 100
}

impl Conn {
    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn shared_file(sh: &Shared) -> bool {
        sh.args.workload == Workload::SameFile
            || sh.args.file.as_deref().is_some_and(|f| !f.contains(','))
    }

    /// `--file`'s name for this connection: of a comma-separated list, the one at its index
    /// (modulo the list's length).
    fn given_file<'a>(&self, sh: &'a Shared) -> Option<&'a str> {
        let list = sh.args.file.as_deref()?;
        let n = list.split(',').count();
        list.split(',').nth(self.idx % n)
    }

    fn file_name(&self, sh: &Shared) -> String {
        match (self.given_file(sh), sh.args.workload) {
            (Some(f), _) => f.to_string(),
            (None, Workload::SameFile) => "rsbench-shared.dat".to_string(),
            (None, _) => format!("rsbench-{}.dat", self.idx),
        }
    }

    fn io_len(&self, sh: &Shared) -> usize {
        let max = self.smb.max_read_size().min(self.smb.max_write_size()) as usize;
        (sh.args.io_size as usize).min(max)
    }

    /// Offsets span whole I/Os inside the file.
    fn span(&self, sh: &Shared) -> u64 {
        let io = self.io_len(sh) as u64;
        (sh.args.file_size / io).max(1) * io
    }

    /// The file holds its data: workloads that only read go on through a
    /// read-only handle (servers may serve those reads without a copy).
    fn filled(&mut self, sh: &Shared) -> Result<(), String> {
        if sh.args.workload.only_reads() {
            self.smb
                .close(TAG_CLOSE_RW, self.file)
                .map_err(|e| e.to_string())?;
            self.phase = Phase::Reopening;
        } else {
            self.phase = Phase::Waiting;
        }
        Ok(())
    }

    /// Issue what the phase, the free slots and the credits allow.
    fn drive(&mut self, sh: &Shared) -> Result<(), String> {
        let qd = sh.args.queue_depth;
        match self.phase {
            Phase::Filling => {
                let io = self.io_len(sh).min(1 << 20);
                while self.fill_next < sh.args.file_size
                    && self.fill_inflight < qd
                    && self.smb.can_send(io)
                {
                    let len = io.min((sh.args.file_size - self.fill_next) as usize);
                    self.write(sh, TAG_FILL, self.fill_next, len)
                        .map_err(|e| e.to_string())?;
                    self.fill_next += len as u64;
                    self.fill_inflight += 1;
                }
            }
            Phase::Running => {
                let io = self.io_len(sh);
                for i in 0..self.slots.len() {
                    if self.slots[i].busy || self.slots[i].cached {
                        continue;
                    }
                    if !self.smb.can_send(io) {
                        break;
                    }
                    self.issue(sh, i, io).map_err(|e| e.to_string())?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// WRITE `len` bytes at `offset` (the `--verify` pattern, or whatever the
    /// buffer holds). Unsigned, unsealed WRITEs send their data from a buffer
    /// of `pool` as a piece of its own: no copy into the output, which holds
    /// only headers and stays small. Signed or sealed ones are copied (the
    /// signature or cipher covers the data).
    fn write(&mut self, sh: &Shared, tag: u64, offset: u64, len: usize) -> Result<(), ClientError> {
        // Over QUIC every byte is copied into the stream anyway.
        if !self.smb.can_write_apart() || self.quic.is_some() {
            if self.wbuf.len() < len {
                self.wbuf.resize(len, 0);
            }
            if sh.args.verify {
                pattern::fill(sh.args.seed, offset, &mut self.wbuf[..len]);
            }
            return self
                .smb
                .write(tag, self.file, offset, &self.wbuf[..len])
                .map(drop);
        }
        let mut buf = self.pool.pop().unwrap_or_else(|| self.wbuf.clone());
        buf.resize(len, 0);
        if sh.args.verify {
            pattern::fill(sh.args.seed, offset, &mut buf);
        }
        match self.smb.write_apart(tag, self.file, offset, len) {
            Ok(_) => {
                self.staged.push(buf);
                Ok(())
            }
            Err(e) => {
                self.pool.push(buf);
                Err(e)
            }
        }
    }

    /// Hand the queued output to one send: a plain send, or with WRITE data
    /// sent apart, the output's pieces and the data buffers in stream order.
    fn start_send(&mut self, ring: &mut Ring, token: u64) -> Result<(), String> {
        let mut buf = self.spare.take().unwrap_or_default();
        self.smb.take_output_with_gaps(&mut buf, &mut self.gaps);
        self.sending = true;
        if let Some(q) = self.quic.as_mut() {
            // No WRITE goes apart over QUIC (`write`): the output is whole.
            q.queue(buf);
            return Ok(());
        }
        if self.gaps.is_empty() {
            ring.send(&self.fd, buf, 0, token);
            return Ok(());
        }
        if self.gaps.len() != self.staged.len() {
            return Err(format!(
                "{} WRITEs queued apart, {} data buffers",
                self.gaps.len(),
                self.staged.len()
            ));
        }
        let mut parts = Vec::with_capacity(2 * self.gaps.len() + 1);
        self.send_parts.clear();
        // The first piece is `buf` itself, cut short once the rest is copied out.
        parts.push(Vec::new());
        self.send_parts.push(0);
        let mut staged = self.staged.drain(..);
        for (k, g) in self.gaps.iter().enumerate() {
            let data = staged.next().unwrap_or_default();
            if data.len() != g.len {
                return Err(format!(
                    "WRITE data of {} bytes for a gap of {}",
                    data.len(),
                    g.len
                ));
            }
            if k > 0 {
                let from = self.gaps[k - 1].at;
                parts.push(buf[from..g.at].to_vec());
                self.send_parts.push(2);
            }
            parts.push(data);
            self.send_parts.push(1);
        }
        drop(staged);
        let last = self.gaps[self.gaps.len() - 1].at;
        if last < buf.len() {
            parts.push(buf[last..].to_vec());
            self.send_parts.push(2);
        }
        buf.truncate(self.gaps[0].at);
        parts[0] = buf;
        ring.send_vectored(&self.fd, parts, token);
        Ok(())
    }

    /// A send completed: its buffers go back where they came from.
    fn sent(&mut self, comp: &mut ringshare_engine::Completion) {
        self.sending = false;
        if let Some(buf) = comp.take_buf() {
            self.spare = Some(buf);
            return;
        }
        for (b, kind) in comp
            .bufs
            .take()
            .unwrap_or_default()
            .into_iter()
            .zip(&self.send_parts)
        {
            match kind {
                0 => self.spare = Some(b),
                1 => self.pool.push(b),
                _ => {}
            }
        }
    }

    /// Start the next request of slot `i`.
    fn issue(&mut self, sh: &Shared, i: usize, io: usize) -> Result<(), ClientError> {
        let tag = TAG_SLOT | i as u64;
        let span = self.span(sh);
        let blocks = span / io as u64;
        let mut slot = self.slots[i];
        slot.busy = true;
        slot.start = Instant::now();
        match sh.args.workload {
            Workload::SeqRead | Workload::SameFile => {
                slot.offset = self.cursor;
                self.cursor = (self.cursor + io as u64) % span;
                self.smb.read(tag, self.file, slot.offset, io as u32)?;
            }
            Workload::RandRead => {
                slot.offset = self.rand() % blocks * io as u64;
                self.smb.read(tag, self.file, slot.offset, io as u32)?;
            }
            Workload::SeqWrite | Workload::RandWrite | Workload::Mixed => {
                let read = sh.args.workload == Workload::Mixed && self.rand() % 100 < 70;
                slot.offset = if sh.args.workload == Workload::SeqWrite {
                    let o = self.cursor;
                    self.cursor = (self.cursor + io as u64) % span;
                    o
                } else {
                    self.rand() % blocks * io as u64
                };
                if read {
                    self.smb.read(tag, self.file, slot.offset, io as u32)?;
                } else {
                    self.write(sh, tag, slot.offset, io)?;
                }
            }
            // Run by `reconnect.rs`, never here: an ECHO if it were.
            Workload::Echo | Workload::Reconnect | Workload::Logon => {
                self.smb.echo(tag)?;
            }
            Workload::Metadata => match slot.stage {
                0 => {
                    let k = self.meta_k % METADATA_FILES;
                    self.meta_k += 1;
                    // `--file`: that one file again and again (a cluster's
                    // cost of a file homed on a chosen node).
                    let name = match self.given_file(sh) {
                        Some(f) => f.to_string(),
                        None if sh.args.dir.is_empty() => format!("rsmeta-{}-{k}", self.idx),
                        None => format!(
                            "{}\\rsmeta-{}-{k}",
                            sh.args.dir.trim_end_matches(['\\', '/']),
                            self.idx
                        ),
                    };
                    // DELETE and FILE_DELETE_ON_CLOSE.
                    let (access, options) = if sh.args.delete_on_close {
                        (0x0001_0000, 0x1000)
                    } else {
                        (0, 0)
                    };
                    self.smb.create(
                        tag,
                        &name,
                        GENERIC_READ_WRITE | access,
                        CreateDisposition::OPEN_IF,
                        NON_DIRECTORY_FILE | options,
                    )?;
                }
                1 => {
                    self.smb.query_info(
                        tag,
                        slot.file,
                        InfoType::FILE,
                        FILE_STANDARD_INFORMATION,
                        4096,
                    )?;
                }
                _ => {
                    self.smb.close(tag, slot.file)?;
                }
            },
            Workload::List => match slot.stage {
                0 if sh.args.dir_lease => {
                    self.smb.create_leased(
                        tag,
                        &sh.args.dir,
                        DIR_LIST_ACCESS,
                        CreateDisposition::OPEN,
                        DIRECTORY_FILE,
                        (dir_lease_key(self.idx), 3), // R | H
                    )?;
                }
                0 => {
                    self.smb.create(
                        tag,
                        &sh.args.dir,
                        DIR_LIST_ACCESS,
                        CreateDisposition::OPEN,
                        DIRECTORY_FILE,
                    )?;
                }
                1 | 2 => {
                    self.smb.query_directory(
                        tag,
                        slot.file,
                        FILE_ID_BOTH_DIRECTORY_INFORMATION,
                        "*",
                        slot.stage == 1,
                        65536,
                    )?;
                }
                _ => {
                    self.smb.close(tag, slot.file)?;
                }
            },
        }
        self.slots[i] = slot;
        Ok(())
    }

    /// One event from the client connection; `frame` is what its ranges
    /// index, or for READ data taken in pieces, `streamed` says how many
    /// bytes came and the first that differed from the pattern.
    fn on_event(
        &mut self,
        sh: &Shared,
        ev: Event,
        frame: &[u8],
        streamed: Option<(u64, Option<u64>)>,
        stats: &mut ThreadResult,
    ) -> Result<(), String> {
        let (tag, command, result) = match ev {
            Event::Ready if self.bound => {
                // The open is the session's: a channel uses it as it is.
                self.phase = Phase::Waiting;
                return Ok(());
            }
            Event::Ready => {
                let mut n = crate::lock(&sh.negotiated);
                if n.is_none() {
                    if let Some(dialect) = self.smb.dialect() {
                        *n = Some(report::Negotiated {
                            dialect,
                            signing: self.smb.is_signing(),
                            encryption: self.smb.is_encrypting(),
                            io_size: self.io_len(sh) as u64,
                        });
                    }
                }
                drop(n);
                if sh.args.workload.uses_file() {
                    let name = self.file_name(sh);
                    self.smb
                        .create(
                            TAG_OPEN,
                            &name,
                            GENERIC_READ_WRITE,
                            CreateDisposition::OPEN_IF,
                            NON_DIRECTORY_FILE,
                        )
                        .map_err(|e| e.to_string())?;
                    self.phase = Phase::Opening;
                } else {
                    self.phase = Phase::Waiting;
                }
                return Ok(());
            }
            Event::Done {
                tag,
                command,
                result,
            } => (tag, command, result),
            Event::LeaseBreak {
                lease_key,
                new_state,
                ack_required,
            } => return self.lease_broken(sh, lease_key, new_state, ack_required),
        };
        match tag & TAG_KIND_MASK {
            TAG_OPEN => {
                let Reply::Create {
                    file_id,
                    end_of_file,
                    ..
                } = result.map_err(|e| format!("opening {}: {e}", self.file_name(sh)))?
                else {
                    return Err("unexpected reply to CREATE".into());
                };
                self.file = file_id;
                let owner = !Self::shared_file(sh) || self.idx == 0;
                let need = sh.args.workload.reads_file()
                    && owner
                    && (sh.args.verify || end_of_file < sh.args.file_size);
                if need {
                    self.phase = Phase::Filling;
                } else {
                    self.filled(sh)?;
                }
            }
            TAG_FILL => {
                result.map_err(|e| format!("filling {}: {e}", self.file_name(sh)))?;
                self.fill_inflight -= 1;
                if self.fill_next >= sh.args.file_size && self.fill_inflight == 0 {
                    self.filled(sh)?;
                }
            }
            TAG_CLOSE_RW => {
                result.map_err(|e| format!("closing {}: {e}", self.file_name(sh)))?;
                let name = self.file_name(sh);
                self.smb
                    .create(
                        TAG_OPEN_RO,
                        &name,
                        GENERIC_READ,
                        CreateDisposition::OPEN,
                        NON_DIRECTORY_FILE,
                    )
                    .map_err(|e| e.to_string())?;
            }
            TAG_LEASE_ACK => {
                if let Err(e) = result {
                    sh.error(format!("lease break acknowledgment: {e}"));
                }
            }
            TAG_OPEN_RO => {
                let Reply::Create { file_id, .. } = result
                    .map_err(|e| format!("reopening {} read-only: {e}", self.file_name(sh)))?
                else {
                    return Err("unexpected reply to CREATE".into());
                };
                self.file = file_id;
                self.phase = Phase::Waiting;
            }
            TAG_SLOT => {
                let i = (tag & 0xFFFF_FFFF) as usize;
                let Some(mut slot) = self.slots.get(i).copied() else {
                    return Err("reply for an unknown slot".into());
                };
                let ns = slot.start.elapsed().as_nanos() as u64;
                stats.hist.record(ns);
                stats.ops += 1;
                sh.ops.fetch_add(1, Ordering::Relaxed);
                let mut bytes = 0u64;
                let mut chain_next = None;
                match (&result, sh.args.workload) {
                    (Ok(Reply::Read { data }), _) => {
                        let mismatch = match streamed {
                            Some((len, mismatch)) => {
                                bytes = len;
                                mismatch
                            }
                            None => {
                                let d = frame.get(data.clone()).unwrap_or(&[]);
                                bytes = d.len() as u64;
                                sh.args
                                    .verify
                                    .then(|| pattern::first_mismatch(sh.args.seed, slot.offset, d))
                                    .flatten()
                            }
                        };
                        if let Some(at) = mismatch {
                            sh.error(format!(
                                "verify: data read at offset {at} differs from what was written"
                            ));
                        }
                    }
                    (Ok(Reply::Write { count }), _) => bytes = u64::from(*count),
                    (Ok(Reply::Create { file_id, lease, .. }), _) => {
                        slot.file = *file_id;
                        slot.leased = lease.is_some_and(|l| l & 1 != 0);
                        chain_next = Some(1);
                    }
                    (Ok(Reply::QueryInfo { .. }), _) => chain_next = Some(2),
                    (Ok(Reply::QueryDirectory { buffer }), _) => {
                        bytes = buffer.len() as u64;
                        chain_next = Some(2);
                    }
                    (Err(e), Workload::List) if e.status == NtStatus::NO_MORE_FILES => {
                        sh.dir.listed();
                        chain_next = Some(self.listed(sh, &mut slot));
                    }
                    (Ok(_), _) => chain_next = Some(0),
                    (Err(e), _) => {
                        sh.error(e.to_string());
                        // A failed step of a chain closes what it opened, or starts over.
                        chain_next = Some(if slot.stage == 1 || slot.stage == 2 {
                            3
                        } else {
                            0
                        });
                    }
                }
                if bytes > 0 {
                    self.bytes += bytes;
                    stats.bytes += bytes;
                    sh.bytes.fetch_add(bytes, Ordering::Relaxed);
                }
                let _ = command;
                slot.busy = false;
                slot.stage = match (sh.args.workload, chain_next) {
                    (Workload::Metadata | Workload::List, Some(n)) => n,
                    _ => 0,
                };
                if slot.stage >= 3 && sh.args.workload == Workload::Metadata {
                    slot.stage = 0;
                }
                if slot.stage > 3 {
                    slot.stage = 0;
                }
                self.slots[i] = slot;
            }
            _ => return Err("reply with an unknown tag".into()),
        }
        Ok(())
    }

    /// `list`: slot `slot` listed the directory to its end; its next stage.
    /// Without `--dir-lease`: close (and open again). With it: while the
    /// lease holds, nothing (the listing is cached; the close waits for the
    /// break); after a break that came meanwhile, close and open with a new
    /// lease; with no lease granted, list again at once on the same handle.
    fn listed(&self, sh: &Shared, slot: &mut Slot) -> u8 {
        if !sh.args.dir_lease {
            return 3;
        }
        if slot.broken {
            slot.broken = false;
            return 3;
        }
        if slot.leased {
            slot.cached = true;
            return 3;
        }
        1
    }

    /// The server breaks the lease of `lease_key`: acknowledge if asked; the
    /// slot holding it lists again on a new open (at once if its listing is
    /// cached, after the listing under way otherwise).
    fn lease_broken(
        &mut self,
        sh: &Shared,
        lease_key: [u8; 16],
        new_state: u32,
        ack_required: bool,
    ) -> Result<(), String> {
        if sh.go.load(Ordering::Acquire) {
            sh.dir.broken();
        }
        if ack_required {
            self.smb
                .lease_break_ack(TAG_LEASE_ACK, lease_key, new_state)
                .map_err(|e| e.to_string())?;
        }
        if lease_key != dir_lease_key(self.idx) {
            return Ok(());
        }
        for slot in self.slots.iter_mut() {
            // A break that comes as a slot closes (stage 3) or before it opens
            // again (stage 0, nothing sent) is its old open's.
            if slot.cached {
                slot.cached = false;
            } else if slot.stage == 1 || slot.stage == 2 || (slot.busy && slot.stage == 0) {
                slot.broken = true;
            }
        }
        Ok(())
    }

    /// Bytes arrived: hand whole frames to the client connection.
    fn on_recv(
        &mut self,
        sh: &Shared,
        mut buf: Vec<u8>,
        stats: &mut ThreadResult,
    ) -> Result<(), String> {
        let mut events = std::mem::take(&mut self.events);
        let result = (|| -> Result<(), String> {
            loop {
                if self.streamed.is_some() {
                    if self.take_streamed(sh, &buf, stats)? {
                        continue;
                    }
                    break;
                }
                let avail = buf.len() - self.rstart;
                if avail < 4 {
                    break;
                }
                let h = &buf[self.rstart..self.rstart + 4];
                let len = framing::frame_len([h[0], h[1], h[2], h[3]])
                    .map_err(|e| format!("bad frame from the server: {e}"))?;
                if len > FRAME_LEN_MAX {
                    return Err(format!("frame of {len} bytes from the server"));
                }
                if avail < 4 + len && len >= STREAM_MIN {
                    if avail < 4 + READ_HEAD_LEN {
                        // Wait for the head; the frame itself need not fit.
                        if buf.capacity() - self.rstart < 4 + READ_HEAD_LEN + RECV_ROOM_MIN {
                            buf.copy_within(self.rstart.., 0);
                            buf.truncate(avail);
                            self.rstart = 0;
                        }
                        break;
                    }
                    events.clear();
                    let head = &buf[self.rstart + 4..];
                    if let Some(data) = self.smb.receive_read_head(head, len, &mut events) {
                        let Some(event) = events.pop() else {
                            return Err("a READ head without its event".into());
                        };
                        let file_offset = match &event {
                            Event::Done { tag, .. } if tag & TAG_KIND_MASK == TAG_SLOT => self
                                .slots
                                .get((tag & 0xFFFF_FFFF) as usize)
                                .map(|s| s.offset),
                            _ => None,
                        };
                        self.rstart += 4;
                        self.streamed = Some(Streamed {
                            pos: 0,
                            len,
                            data,
                            file_offset,
                            mismatch: None,
                            event,
                        });
                        continue;
                    }
                }
                if avail < 4 + len {
                    if buf.capacity() - self.rstart < 4 + len + RECV_ROOM_MIN {
                        buf.copy_within(self.rstart.., 0);
                        buf.truncate(avail);
                        self.rstart = 0;
                        buf.reserve(4 + len + RECV_ROOM_MIN);
                    }
                    break;
                }
                let range = self.rstart + 4..self.rstart + 4 + len;
                self.rstart += 4 + len;
                events.clear();
                self.smb
                    .receive(&mut buf[range.clone()], &mut events)
                    .map_err(|e| e.to_string())?;
                // A compressed frame's events index what it held.
                let inflated = self.smb.take_inflated();
                let frame = inflated.as_deref().unwrap_or(&buf[range.clone()]);
                for ev in events.drain(..) {
                    self.on_event(sh, ev, frame, None, stats)?;
                }
            }
            Ok(())
        })();
        self.events = events;
        if self.rstart == buf.len() {
            buf.clear();
            self.rstart = 0;
        } else if buf.capacity() - buf.len() < RECV_ROOM_MIN && self.rstart > 0 {
            let avail = buf.len() - self.rstart;
            buf.copy_within(self.rstart.., 0);
            buf.truncate(avail);
            self.rstart = 0;
        }
        if buf.capacity() - buf.len() < RECV_ROOM_MIN {
            buf.reserve(RECV_ROOM_MIN);
        }
        self.rbuf = Some(buf);
        result
    }

    /// Take what `buf` holds of the READ response being streamed: check its
    /// data against the pattern (`--verify`) and drop it. True once the
    /// frame is complete (its event handled), false when more must arrive.
    fn take_streamed(
        &mut self,
        sh: &Shared,
        buf: &[u8],
        stats: &mut ThreadResult,
    ) -> Result<bool, String> {
        let Some(st) = self.streamed.as_mut() else {
            return Ok(true);
        };
        let seed = sh.args.verify.then_some(sh.args.seed);
        self.rstart += st.take(&buf[self.rstart..], seed);
        if st.pos < st.len {
            return Ok(false);
        }
        let Some(st) = self.streamed.take() else {
            return Ok(true);
        };
        let len = st.data.len() as u64;
        self.on_event(sh, st.event, &[], Some((len, st.mismatch)), stats)?;
        Ok(true)
    }

    /// The bytes still to come of a frame whose start is in: the READ being streamed, or the
    /// frame begun at `rstart` of the receive buffer (0 when none is).
    fn frame_left(&self) -> usize {
        match (self.streamed.as_ref(), self.rbuf.as_ref()) {
            (Some(st), _) => st.len - st.pos,
            (None, Some(buf)) => buf.get(self.rstart..).map_or(0, unread_frame_left),
            (None, None) => 0,
        }
    }

    /// While a large frame comes in (a READ's data, streamed or not), the socket wakes this
    /// thread only once a good part of what is still to come is queued (`SO_RCVLOWAT`), as a
    /// reader in a large blocking receive is woken, instead of once per arriving segment (on
    /// loopback the sender pays for each wake-up). Back to 1 once less than [`STREAM_MIN`] is
    /// to come.
    fn set_low_water(&mut self) {
        let left = self.frame_left();
        let want = if left >= STREAM_MIN {
            left.min(LOW_WATER_MAX)
        } else {
            1
        };
        if want != self.low_water && ringshare_engine::net::set_rcvlowat(&*self.fd, want).is_ok() {
            self.low_water = want;
        }
    }

    /// `--transport quic`: timers, output into the stream, the stream's
    /// bytes through `on_recv`, datagrams out. True when bytes moved.
    fn quic_exchange(&mut self, sh: &Shared, stats: &mut ThreadResult) -> Result<bool, String> {
        let now = Instant::now();
        let mut moved = false;
        loop {
            let Some(q) = self.quic.as_mut() else {
                return Ok(moved);
            };
            let mut buf = self.rbuf.take().unwrap_or_default();
            let (got, all_out) = match q.exchange(now, &mut buf) {
                Ok(r) => r,
                Err(e) => {
                    self.rbuf = Some(buf);
                    return Err(e);
                }
            };
            if all_out && self.sending {
                self.sending = false;
                let mut out = std::mem::take(&mut q.out);
                out.clear();
                self.spare = Some(out);
                moved = true;
            }
            if got == 0 {
                self.rbuf = Some(buf);
                q.transmit(now);
                return Ok(moved);
            }
            moved = true;
            self.on_recv(sh, buf, stats)?;
        }
    }

    fn busy(&self) -> bool {
        self.smb.requests_in_flight() > 0
            || self.sending
            || self.smb.has_output()
            || self.streamed.is_some()
    }
}

/// The bytes still to come of the frame that `unread` starts with (its direct-TCP length
/// prefix first): 0 when the prefix is not all in, or is not a frame's.
fn unread_frame_left(unread: &[u8]) -> usize {
    match unread {
        [a, b, c, d, ..] => framing::frame_len([*a, *b, *c, *d])
            .map_or(0, |len| (4 + len).saturating_sub(unread.len())),
        _ => 0,
    }
}

fn connect(sh: &Shared, idx: usize) -> Result<Conn, String> {
    let (fd, quic) = match &sh.trust {
        Some(trust) => {
            let q = QuicPipe::connect(sh.addr, &sh.host, trust)?;
            (q.udp.clone(), Some(Box::new(q)))
        }
        None => {
            let stream = TcpStream::connect(sh.addr)
                .map_err(|e| format!("cannot connect to {}: {e}", sh.addr))?;
            stream
                .set_nodelay(true)
                .map_err(|e| format!("TCP_NODELAY: {e}"))?;
            let fd: OwnedFd = stream.into();
            let _ = net::set_socket_buffers(&fd, Some(4 << 20), Some(4 << 20));
            (Arc::new(fd), None)
        }
    };
    let opts = client_options(sh, idx);
    let seed = opts.seed;
    let io = sh.args.io_size as usize;
    let slots = if sh.args.workload == Workload::List {
        1
    } else {
        sh.args.queue_depth as usize
    };
    let mut wbuf = vec![0u8; io.min(8 << 20)];
    pattern::fill(sh.args.seed ^ 0xABCD, 0, &mut wbuf);
    let span = (sh.args.file_size / sh.args.io_size).max(1);
    // A further channel starts unbound; its placeholder connection sends nothing.
    let channel = sh.args.channels > 1 && idx > 0;
    Ok(Conn {
        idx,
        fd,
        quic,
        smb: ClientConn::new(opts.clone()),
        phase: if channel {
            Phase::Unbound
        } else {
            Phase::Handshake
        },
        opts,
        bound: channel,
        bytes: 0,
        wire_at_go: None,
        // A small buffer stays in the CPU cache, and the receive copy into it
        // is most of the client's work: 1 MiB reads measured 0.23-0.25 client
        // CPU s/GiB with 2.2 MiB against 0.33-0.38 with 16 MiB
        // (docs/benchmarks/history.md, session 3 changes; RINGSHARE_BENCH_RECV_BUF
        // sets the size in bytes for such A/B runs). Signed or sealed frames
        // are checked whole: room for two, a frame cut by the end of the
        // buffer is moved to its start. Otherwise READ data is taken in pieces
        // (`Streamed`), so at most STREAM_RECV_BUF serves any read size.
        rbuf: Some(Vec::with_capacity(
            std::env::var("RINGSHARE_BENCH_RECV_BUF")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(if sh.args.sign || sh.args.encrypt {
                    2 * (io + 4096) + RECV_ROOM_MIN
                } else {
                    (2 * (io + 4096)).min(STREAM_RECV_BUF) + RECV_ROOM_MIN
                }),
        )),
        rstart: 0,
        streamed: None,
        low_water: 1,
        spare: Some(Vec::with_capacity(io + 4096)),
        sending: false,
        file: FileId::default(),
        fill_next: 0,
        fill_inflight: 0,
        slots: vec![
            Slot {
                busy: false,
                start: Instant::now(),
                offset: 0,
                stage: 0,
                file: FileId::default(),
                leased: false,
                cached: false,
                broken: false,
            };
            slots
        ],
        // Connections start reading the same file at different places.
        cursor: (idx as u64 * 7919 % span) * sh.args.io_size,
        rng: seed | 1,
        meta_k: 0,
        wbuf,
        pool: Vec::new(),
        staged: Vec::new(),
        gaps: Vec::new(),
        send_parts: Vec::new(),
        events: Vec::new(),
    })
}

/// Once connection 0 has its session and its open ready, the unbound
/// channels bind to that session and share the open.
fn bind_channels(conns: &mut [Conn]) -> Result<(), String> {
    let Some((first, rest)) = conns.split_first_mut() else {
        return Ok(());
    };
    if !rest.iter().any(|c| c.phase == Phase::Unbound)
        || !matches!(first.phase, Phase::Waiting | Phase::Running)
    {
        return Ok(());
    }
    for c in rest.iter_mut().filter(|c| c.phase == Phase::Unbound) {
        let b = first.smb.channel_binding().ok_or_else(|| {
            "--channels: the session cannot be bound (SMB 3 and a signing session are needed)"
                .to_string()
        })?;
        c.smb = ClientConn::bind(c.opts.clone(), b);
        c.file = first.file;
        c.phase = Phase::Handshake;
    }
    Ok(())
}

/// The QUIC connections' exchanges (`Conn::quic_exchange`); how long the
/// ring may then wait: not at all when bytes moved (the loop has work),
/// else until the nearest QUIC timer, at most 50 ms.
fn quic_exchange_all(
    sh: &Shared,
    conns: &mut [Conn],
    stats: &mut ThreadResult,
) -> Result<Duration, String> {
    let mut wait = Duration::from_millis(50);
    let now = Instant::now();
    for c in conns.iter_mut().filter(|c| c.quic.is_some()) {
        if c.phase == Phase::Unbound {
            continue;
        }
        match c.quic_exchange(sh, stats) {
            Ok(true) => wait = Duration::ZERO,
            Ok(false) => {}
            Err(e) if matches!(c.phase, Phase::Running | Phase::Draining) => {
                sh.error(format!("connection {}: {e}", c.idx));
                c.phase = Phase::Done;
            }
            Err(e) => return Err(format!("connection {} ({:?}): {e}", c.idx, c.phase)),
        }
        if let Some(d) = c.quic.as_mut().and_then(|q| q.deadline()) {
            wait = wait.min(d.saturating_duration_since(now));
        }
    }
    Ok(wait)
}

/// Run this thread's connections until the main thread says stop.
pub(crate) fn run(sh: Arc<Shared>, idxs: Vec<usize>) -> Result<ThreadResult, String> {
    let out = run_inner(&sh, idxs);
    if out.is_err() {
        sh.failed.store(true, Ordering::Release);
    }
    out
}

fn run_inner(sh: &Shared, idxs: Vec<usize>) -> Result<ThreadResult, String> {
    let entries = (idxs.len() * 4).next_power_of_two().clamp(64, 4096) as u32;
    let mut ring = Ring::new(RingConfig {
        entries,
        ..RingConfig::default()
    })
    .map_err(|e| format!("io_uring is not available: {e}"))?;
    let mut conns = Vec::new();
    for idx in idxs {
        conns.push(connect(sh, idx)?);
    }
    for (i, c) in conns.iter_mut().enumerate() {
        if c.quic.is_some() {
            ring.poll_readable(&c.fd, token(KIND_UDP, i));
        } else if let Some(b) = c.rbuf.take() {
            ring.recv(&c.fd, b, token(KIND_RECV, i));
        }
    }
    let mut stats = ThreadResult {
        hist: Histogram::new(),
        bytes: 0,
        ops: 0,
        per_conn: Vec::new(),
        wire: (0, 0),
    };
    let mut counted_ready = false;
    loop {
        let go = sh.go.load(Ordering::Acquire);
        let stop = sh.stop.load(Ordering::Acquire);
        if sh.failed.load(Ordering::Acquire) && !go {
            return Err("another bench thread failed".into());
        }
        for c in conns.iter_mut() {
            if c.phase == Phase::Waiting && go {
                c.phase = Phase::Running;
                c.wire_at_go = Some(c.smb.wire_bytes());
            }
            if stop && c.phase == Phase::Unbound {
                c.phase = Phase::Done;
            }
            if stop && c.phase == Phase::Running {
                c.phase = Phase::Draining;
            }
            if c.phase == Phase::Draining && !c.busy() {
                c.phase = Phase::Done;
            }
            c.drive(sh)?;
        }
        if !counted_ready
            && conns
                .iter()
                .all(|c| matches!(c.phase, Phase::Waiting | Phase::Running))
        {
            counted_ready = true;
            sh.ready.fetch_add(1, Ordering::AcqRel);
        }
        bind_channels(&mut conns)?;
        if conns.iter().all(|c| c.phase == Phase::Done) {
            for c in conns.iter_mut() {
                if let Some(q) = c.quic.as_mut() {
                    q.close(Instant::now());
                }
            }
            stats.per_conn = conns.iter().map(|c| (c.idx, c.bytes)).collect();
            for c in &conns {
                let ((i0, o0), (i1, o1)) = (c.wire_at_go.unwrap_or_default(), c.smb.wire_bytes());
                stats.wire = (stats.wire.0 + i1 - i0, stats.wire.1 + o1 - o0);
            }
            return Ok(stats);
        }
        for (i, c) in conns.iter_mut().enumerate() {
            if c.phase == Phase::Unbound {
                continue;
            }
            if !c.sending && c.smb.has_output() {
                c.start_send(&mut ring, token(KIND_SEND, i))?;
            }
        }
        let wait = quic_exchange_all(sh, &mut conns, &mut stats)?;
        ring.submit_and_wait(usize::from(!wait.is_zero()), Some(wait))
            .map_err(|e| format!("io_uring: {e}"))?;
        while let Some(mut comp) = ring.next_completion() {
            let kind = comp.user_data >> 32;
            let i = (comp.user_data & 0xFFFF_FFFF) as usize;
            let Some(c) = conns.get_mut(i) else { continue };
            match kind {
                KIND_RECV => {
                    let buf = comp.take_buf().unwrap_or_default();
                    match comp.result {
                        Ok(0) => {
                            return Err(format!(
                                "connection {} closed by the server ({:?})",
                                c.idx, c.phase
                            ))
                        }
                        Ok(_) => {}
                        Err(e) => return Err(format!("receive on connection {}: {e}", c.idx)),
                    }
                    if let Err(e) = c.on_recv(sh, buf, &mut stats) {
                        if matches!(c.phase, Phase::Running | Phase::Draining) {
                            sh.error(format!("connection {}: {e}", c.idx));
                            c.phase = Phase::Done;
                            continue;
                        }
                        return Err(format!("connection {}: {e}", c.idx));
                    }
                    if c.phase != Phase::Done {
                        c.set_low_water();
                        if let Some(b) = c.rbuf.take() {
                            ring.recv(&c.fd, b, token(KIND_RECV, i));
                        }
                    }
                }
                KIND_SEND => {
                    c.sent(&mut comp);
                    if let Err(e) = comp.result {
                        return Err(format!("send on connection {}: {e}", c.idx));
                    }
                }
                KIND_UDP => {
                    if let Some(q) = c.quic.as_mut() {
                        q.on_readable(Instant::now());
                        if c.phase != Phase::Done {
                            ring.poll_readable(&c.fd, token(KIND_UDP, i));
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A READ response frame of `data_len` pattern bytes read at `file_offset`
    /// behind an 80-byte head, and its `Streamed` state.
    fn streamed(seed: u64, file_offset: u64, data_len: usize) -> (Vec<u8>, Streamed) {
        let mut frame = vec![0xEE; READ_HEAD_LEN + data_len];
        pattern::fill(seed, file_offset, &mut frame[READ_HEAD_LEN..]);
        let st = Streamed {
            pos: 0,
            len: frame.len(),
            data: READ_HEAD_LEN..frame.len(),
            file_offset: Some(file_offset),
            mismatch: None,
            event: Event::Ready,
        };
        (frame, st)
    }

    /// Feed `stream` (the frame, then bytes of a next frame) in pieces of
    /// the given sizes, as recvs would return them; returns bytes taken.
    fn feed(st: &mut Streamed, stream: &[u8], pieces: &[usize], seed: Option<u64>) -> usize {
        let mut at = 0;
        for &p in pieces.iter().cycle() {
            if at == stream.len() || st.pos == st.len {
                break;
            }
            let end = (at + p).min(stream.len());
            at += st.take(&stream[at..end], seed);
            if end > at {
                break; // the rest belongs to the next frame
            }
        }
        at
    }

    #[test]
    fn the_rest_of_a_frame_is_counted_from_its_length_prefix() {
        let mut f = vec![0, 0x10, 0, 0];
        f.extend_from_slice(&[0xFE, b'S', b'M', b'B']);
        assert_eq!(
            unread_frame_left(&f),
            4 + 0x10_0000 - 8,
            "a 1 MiB frame, 8 bytes in"
        );
        f.resize(4 + 0x10_0000 + 3, 0);
        assert_eq!(unread_frame_left(&f), 0, "all in, and the next one begun");
        assert_eq!(unread_frame_left(&[0, 0x10, 0]), 0, "the prefix not all in");
        assert_eq!(unread_frame_left(&[]), 0);
        assert_eq!(
            unread_frame_left(&[0xFF, 0, 0, 1]),
            0,
            "not a direct-TCP prefix"
        );
    }

    #[test]
    fn streamed_read_data_checks_clean_in_any_pieces_and_stops_at_the_frame_end() {
        for pieces in [&[1usize][..], &[7, 100, 3], &[80], &[4096], &[1 << 20]] {
            let (mut frame, mut st) = streamed(5, 12_345, 10_000);
            let frame_len = frame.len();
            frame.extend_from_slice(b"next frame");
            assert_eq!(feed(&mut st, &frame, pieces, Some(5)), frame_len);
            assert_eq!(st.pos, st.len);
            assert_eq!(st.mismatch, None, "pieces {pieces:?}");
        }
    }

    #[test]
    fn streamed_read_data_reports_the_first_differing_file_offset() {
        for pieces in [&[1usize][..], &[7, 100, 3], &[4096]] {
            let (mut frame, mut st) = streamed(5, 12_345, 10_000);
            frame[READ_HEAD_LEN + 6000] ^= 0x10;
            frame[READ_HEAD_LEN + 9000] ^= 0x10;
            feed(&mut st, &frame, pieces, Some(5));
            assert_eq!(st.mismatch, Some(12_345 + 6000), "pieces {pieces:?}");
        }
    }

    #[test]
    fn streamed_read_head_bytes_are_not_checked_and_without_verify_nothing_is() {
        let (mut frame, mut st) = streamed(5, 0, 1000);
        frame[3] ^= 1; // in the head: not data
        feed(&mut st, &frame, &[50], Some(5));
        assert_eq!(st.mismatch, None);
        let (mut frame, mut st) = streamed(5, 0, 1000);
        frame[READ_HEAD_LEN] ^= 1;
        feed(&mut st, &frame, &[50], None);
        assert_eq!((st.mismatch, st.pos), (None, st.len));
    }
}
