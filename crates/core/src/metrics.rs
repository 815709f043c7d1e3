//! Request counters for Prometheus (`metrics listen`): requests by command
//! and status, latency histograms by command, bytes read and written, READs
//! spliced or copied, connections the server closed.
//!
//! One [`Metrics`] per I/O ring, shared by the connections of that ring and
//! written only from its thread: each update is a relaxed atomic add on a
//! cache line no other core writes (no lock, no contention); the metrics
//! thread reads them all when scraped. The core reads no clock itself: the
//! driver gives [`Metrics`] its monotonic microsecond clock, and a
//! connection without metrics pays nothing.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use ringshare_wire::NtStatus;

/// SMB2 commands 0x00 (NEGOTIATE) to 0x12 (OPLOCK_BREAK).
pub const COMMANDS: usize = 0x13;

/// The statuses counted apart; any other is counted as `other`.
pub const STATUSES: [NtStatus; 40] = [
    NtStatus::SUCCESS,
    NtStatus::MORE_PROCESSING_REQUIRED,
    NtStatus::NO_MORE_FILES,
    NtStatus::END_OF_FILE,
    NtStatus::BUFFER_OVERFLOW,
    NtStatus::OBJECT_NAME_NOT_FOUND,
    NtStatus::OBJECT_PATH_NOT_FOUND,
    NtStatus::OBJECT_NAME_COLLISION,
    NtStatus::OBJECT_NAME_INVALID,
    NtStatus::NO_SUCH_FILE,
    NtStatus::ACCESS_DENIED,
    NtStatus::SHARING_VIOLATION,
    NtStatus::DELETE_PENDING,
    NtStatus::DIRECTORY_NOT_EMPTY,
    NtStatus::FILE_IS_A_DIRECTORY,
    NtStatus::NOT_A_DIRECTORY,
    NtStatus::LOGON_FAILURE,
    NtStatus::USER_SESSION_DELETED,
    NtStatus::NETWORK_SESSION_EXPIRED,
    NtStatus::NETWORK_NAME_DELETED,
    NtStatus::BAD_NETWORK_NAME,
    NtStatus::FILE_CLOSED,
    NtStatus::INVALID_HANDLE,
    NtStatus::INVALID_PARAMETER,
    NtStatus::INVALID_DEVICE_REQUEST,
    NtStatus::INVALID_INFO_CLASS,
    NtStatus::INFO_LENGTH_MISMATCH,
    NtStatus::NOT_SUPPORTED,
    NtStatus::NOT_IMPLEMENTED,
    NtStatus::LOCK_NOT_GRANTED,
    NtStatus::FILE_LOCK_CONFLICT,
    NtStatus::RANGE_NOT_LOCKED,
    NtStatus::CANCELLED,
    NtStatus::NOTIFY_CLEANUP,
    NtStatus::NOTIFY_ENUM_DIR,
    NtStatus::INSUFFICIENT_RESOURCES,
    NtStatus::DISK_FULL,
    NtStatus::STOPPED_ON_SYMLINK,
    NtStatus::OBJECT_NAME_EXISTS,
    NtStatus::FILE_NOT_AVAILABLE,
];

/// Slots per command: the statuses above and `other`.
const SLOTS: usize = STATUSES.len() + 1;

/// Upper bounds of the latency buckets, in microseconds (then +Inf).
pub const BUCKETS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// One command's latencies: a count per bucket (not cumulative; the last is
/// +Inf), their sum and how many.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    sum_us: AtomicU64,
}

/// The counters of one ring.
pub struct Metrics {
    /// Monotonic microseconds (the driver's clock).
    clock: fn() -> u64,
    requests: [[AtomicU64; SLOTS]; COMMANDS],
    latency: [Histogram; COMMANDS],
    read_bytes: AtomicU64,
    written_bytes: AtomicU64,
    reads_spliced: AtomicU64,
    reads_copied: AtomicU64,
    /// Connections the server closed (bad input, timeouts).
    closed_by_server: AtomicU64,
    /// The ring's io_uring counters, published by its driver.
    ring_submits: AtomicU64,
    ring_sqes: AtomicU64,
    ring_cqes: AtomicU64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// What a scrape reads of one ring's (or all rings') counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// (command, status or `None` for other, count), counts above zero only.
    pub requests: Vec<(u16, Option<NtStatus>, u64)>,
    /// Per command that was seen: (command, counts per bucket incl. +Inf,
    /// not cumulative; sum of microseconds).
    pub latency: Vec<(u16, Vec<u64>, u64)>,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub reads_spliced: u64,
    pub reads_copied: u64,
    pub closed_by_server: u64,
    pub ring_submits: u64,
    pub ring_sqes: u64,
    pub ring_cqes: u64,
}

impl Metrics {
    /// Counters read with `clock` (monotonic microseconds).
    pub fn new(clock: fn() -> u64) -> Metrics {
        Metrics {
            clock,
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            latency: std::array::from_fn(|_| Histogram::default()),
            read_bytes: AtomicU64::new(0),
            written_bytes: AtomicU64::new(0),
            reads_spliced: AtomicU64::new(0),
            reads_copied: AtomicU64::new(0),
            closed_by_server: AtomicU64::new(0),
            ring_submits: AtomicU64::new(0),
            ring_sqes: AtomicU64::new(0),
            ring_cqes: AtomicU64::new(0),
        }
    }

    /// Now, in the clock's microseconds.
    pub fn now_us(&self) -> u64 {
        (self.clock)()
    }

    /// A request of `command` was answered with `status`; it arrived at
    /// `arrived_us`. Interim responses (STATUS_PENDING) are not counted.
    pub fn answered(&self, command: u16, status: NtStatus, arrived_us: u64) {
        let c = usize::from(command);
        if c >= COMMANDS || status == NtStatus::PENDING {
            return;
        }
        let slot = STATUSES
            .iter()
            .position(|s| *s == status)
            .unwrap_or(STATUSES.len());
        self.requests[c][slot].fetch_add(1, Relaxed);
        let took = self.now_us().saturating_sub(arrived_us);
        let b = BUCKETS_US
            .iter()
            .position(|&le| took <= le)
            .unwrap_or(BUCKETS_US.len());
        let h = &self.latency[c];
        h.buckets[b].fetch_add(1, Relaxed);
        h.sum_us.fetch_add(took, Relaxed);
    }

    /// A READ's data went out: `spliced` from the file or copied.
    pub fn read(&self, bytes: u64, spliced: bool) {
        self.read_bytes.fetch_add(bytes, Relaxed);
        if spliced {
            self.reads_spliced.fetch_add(1, Relaxed);
        } else {
            self.reads_copied.fetch_add(1, Relaxed);
        }
    }

    pub fn written(&self, bytes: u64) {
        self.written_bytes.fetch_add(bytes, Relaxed);
    }

    /// The server closed a connection (what its peer sent, or a timeout).
    pub fn closed_by_server(&self) {
        self.closed_by_server.fetch_add(1, Relaxed);
    }

    /// The ring's own counters as they are now (its driver calls this).
    pub fn publish_ring(&self, submits: u64, sqes: u64, cqes: u64) {
        self.ring_submits.store(submits, Relaxed);
        self.ring_sqes.store(sqes, Relaxed);
        self.ring_cqes.store(cqes, Relaxed);
    }

    /// Everything counted so far.
    pub fn snapshot(&self) -> Snapshot {
        let mut s = Snapshot::default();
        for (c, slots) in self.requests.iter().enumerate() {
            for (i, n) in slots.iter().enumerate() {
                let n = n.load(Relaxed);
                if n > 0 {
                    s.requests.push((c as u16, STATUSES.get(i).copied(), n));
                }
            }
            let h = &self.latency[c];
            let counts: Vec<u64> = h.buckets.iter().map(|b| b.load(Relaxed)).collect();
            if counts.iter().any(|&n| n > 0) {
                s.latency.push((c as u16, counts, h.sum_us.load(Relaxed)));
            }
        }
        s.read_bytes = self.read_bytes.load(Relaxed);
        s.written_bytes = self.written_bytes.load(Relaxed);
        s.reads_spliced = self.reads_spliced.load(Relaxed);
        s.reads_copied = self.reads_copied.load(Relaxed);
        s.closed_by_server = self.closed_by_server.load(Relaxed);
        s.ring_submits = self.ring_submits.load(Relaxed);
        s.ring_sqes = self.ring_sqes.load(Relaxed);
        s.ring_cqes = self.ring_cqes.load(Relaxed);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64 as Clock;

    static NOW: Clock = Clock::new(0);
    fn clock() -> u64 {
        NOW.load(Relaxed)
    }

    #[test]
    fn a_request_is_counted_by_command_status_and_latency_bucket() {
        let m = Metrics::new(clock);
        NOW.store(1_000, Relaxed);
        m.answered(8, NtStatus::SUCCESS, 900); // READ, 100 µs
        m.answered(8, NtStatus::SUCCESS, 0); // 1 ms
        m.answered(8, NtStatus::PENDING, 0); // interim: not counted
        m.answered(5, NtStatus::OBJECT_NAME_NOT_FOUND, 1_000);
        m.answered(5, NtStatus(0xC000_0001), 1_000); // other
        m.answered(0x99, NtStatus::SUCCESS, 0); // no such command: ignored
        let s = m.snapshot();
        assert_eq!(
            s.requests,
            vec![
                (5, Some(NtStatus::OBJECT_NAME_NOT_FOUND), 1),
                (5, None, 1),
                (8, Some(NtStatus::SUCCESS), 2),
            ]
        );
        let read = s.latency.iter().find(|l| l.0 == 8).unwrap();
        assert_eq!(read.1[1], 1, "100 µs falls in the le=100 bucket");
        assert_eq!(read.1[4], 1, "1 ms falls in the le=1000 bucket");
        assert_eq!(read.2, 1_100);
    }
}
