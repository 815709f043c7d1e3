//! Rate limits on the log lines remote peers cause (issue 19): a client that
//! repeats a failure (a wrong password, a share it may not use, a connection
//! that never logs on) must not be able to fill the disk with log lines.
//!
//! Per address and kind of line ([`LogKind`]), at most [`LINES_PER_WINDOW`]
//! lines are logged per [`WINDOW_MS`]; the rest are counted, and when the
//! window ends one line says how many were left out:
//!
//! ```text
//! authentication failed from 192.0.2.7: 9990 similar messages suppressed in the last 60 s
//! ```
//!
//! (The summary comes when the server's timer sweeps the ended windows,
//! at most about a second late, or before the next line of that kind from
//! that address, whichever is first; and when the server stops.) The
//! addresses tracked are bounded ([`TRACKED_MAX`]; past it the least
//! recently seen half is forgotten, its counts logged first), and the state is one map behind a mutex held for a
//! lookup: nothing here waits on I/O. Time comes in as milliseconds of the
//! driver's monotonic clock, as everywhere in the core.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::peers::{PeerIp, Table};
use crate::sync::lock;

/// Lines of one kind logged per address per window.
pub(crate) const LINES_PER_WINDOW: u32 = 10;
/// The window (milliseconds).
pub(crate) const WINDOW_MS: u64 = 60_000;
/// (address, kind) pairs tracked at most.
pub(crate) const TRACKED_MAX: usize = 4096;
/// Ended windows are swept at most this often (milliseconds).
const SWEEP_EVERY_MS: u64 = 1_000;

/// A kind of line a peer can cause again and again: each has its own budget
/// per address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogKind {
    /// A logon whose authentication failed (a wrong password, an unknown
    /// user, a bad token): the line fail2ban matches.
    FailedLogon,
    /// A logon that authenticated but is refused (no Unix account, signing
    /// or encryption the session cannot do, a binding by another user).
    RefusedLogon,
    /// A TREE_CONNECT refused.
    RefusedTree,
    /// A connection closed for not logging on in time.
    HandshakeTimeout,
    /// A connection refused at accept (`max connections`).
    RefusedConnection,
    /// A connection closed for breaking the protocol.
    ClosedConnection,
    /// A connection to the cluster address refused or closed (not a
    /// member, no proof of the cluster secret, a bad frame).
    ClusterPeer,
    /// A message from another node of a kind this build does not know (a newer node's that
    /// should not have been sent at this node's level): answered "not supported" or dropped.
    ClusterUnknown,
}

impl LogKind {
    /// How the lines of this kind begin; the summary begins so too.
    pub fn what(self) -> &'static str {
        match self {
            LogKind::FailedLogon => "authentication failed",
            LogKind::RefusedLogon => "logon refused",
            LogKind::RefusedTree => "tree connect refused",
            LogKind::HandshakeTimeout => "closing a connection that did not log on in time",
            LogKind::RefusedConnection => "refusing a connection",
            LogKind::ClosedConnection => "closing a connection",
            LogKind::ClusterPeer => "cluster: closing a connection from",
            LogKind::ClusterUnknown => "cluster: a message of a kind this node does not know",
        }
    }

    /// Its lines are warnings (the others are at info level).
    fn is_warning(self) -> bool {
        matches!(
            self,
            LogKind::FailedLogon
                | LogKind::RefusedConnection
                | LogKind::ClusterPeer
                | LogKind::ClusterUnknown
        )
    }
}

/// Lines of one kind from one address left out in a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub peer: PeerIp,
    pub kind: LogKind,
    pub suppressed: u64,
    /// Seconds from the window's first line to the summary (at least 1).
    pub secs: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} from {}: {} similar message{} suppressed in the last {} s",
            self.kind.what(),
            self.peer,
            self.suppressed,
            if self.suppressed == 1 { "" } else { "s" },
            self.secs
        )
    }
}

/// Characters of a user name a failed-logon line shows at most.
pub(crate) const USER_CHARS_SHOWN: usize = 64;

/// The line a failed logon leaves, in one format for fail2ban
/// (packaging/fail2ban/filter.d/ringshare.conf, docs/security.md):
///
/// ```text
/// authentication failed from 192.0.2.7: user "alice" (STATUS_LOGON_FAILURE: wrong password)
/// ```
///
/// The address comes before anything the client chose, and the user name is
/// quoted with Rust's escapes (`\"`, `\\`, `\n`, `\u{..}`; at most
/// [`USER_CHARS_SHOWN`] characters): no name can start a line of its own or
/// put another address where the filter looks.
pub struct FailedLogon<'a> {
    pub peer: PeerIp,
    pub user: &'a str,
    pub status: ringshare_wire::NtStatus,
    /// Why, in words that come from the server (never from the client).
    pub why: &'a str,
}

impl fmt::Display for FailedLogon<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = LogKind::FailedLogon.what();
        let shown: String = self.user.chars().take(USER_CHARS_SHOWN).collect();
        write!(f, "{what} from {}: user {shown:?}", self.peer)?;
        if shown.len() < self.user.len() {
            f.write_str(" (cut)")?;
        }
        write!(f, " ({}: {})", self.status, self.why)
    }
}

struct Window {
    start_ms: u64,
    logged: u32,
    suppressed: u64,
}

impl Window {
    fn summary(&self, key: (PeerIp, LogKind), now_ms: u64) -> Option<Summary> {
        (self.suppressed > 0).then(|| Summary {
            peer: key.0,
            kind: key.1,
            suppressed: self.suppressed,
            secs: now_ms.saturating_sub(self.start_ms).div_ceil(1000).max(1),
        })
    }
}

struct Windows {
    table: Table<(PeerIp, LogKind), Window>,
    last_sweep_ms: u64,
}

/// The server's log rate limiter ([module docs](self)).
pub struct LogLimiter {
    windows: Mutex<Windows>,
    /// When [`LogLimiter::sweep`] has a summary to log (`u64::MAX`: none);
    /// read without the lock by the driver's timer.
    due_ms: AtomicU64,
}

impl Default for LogLimiter {
    fn default() -> Self {
        LogLimiter::new(TRACKED_MAX)
    }
}

impl LogLimiter {
    /// A limiter tracking at most `tracked` (address, kind) pairs.
    pub fn new(tracked: usize) -> Self {
        LogLimiter {
            windows: Mutex::new(Windows {
                table: Table::new(tracked),
                last_sweep_ms: 0,
            }),
            due_ms: AtomicU64::new(u64::MAX),
        }
    }

    /// Whether a line of `kind` about `peer` may be logged at `now_ms`;
    /// summaries due first (a window of this pair that ended, pairs
    /// forgotten to make room) are added to `out`.
    pub fn admit(&self, peer: PeerIp, kind: LogKind, now_ms: u64, out: &mut Vec<Summary>) -> bool {
        let mut w = lock(&self.windows);
        let key = (peer, kind);
        let new = || Window {
            start_ms: now_ms,
            logged: 0,
            suppressed: 0,
        };
        let forgotten = |k, old: Window| out.extend(old.summary(k, now_ms));
        let win = w.table.entry(key, now_ms, new, forgotten);
        if now_ms.saturating_sub(win.start_ms) >= WINDOW_MS {
            out.extend(win.summary(key, now_ms));
            *win = new();
        }
        if win.logged < LINES_PER_WINDOW {
            win.logged += 1;
            return true;
        }
        win.suppressed += 1;
        let end = win.start_ms + WINDOW_MS;
        let due = end.max(w.last_sweep_ms + SWEEP_EVERY_MS);
        self.due_ms.fetch_min(due, Ordering::AcqRel);
        false
    }

    /// When [`LogLimiter::sweep`] should next run.
    pub fn deadline(&self) -> Option<u64> {
        Some(self.due_ms.load(Ordering::Acquire)).filter(|&t| t != u64::MAX)
    }

    /// Forget every window, adding the summaries of those that left lines
    /// out to `out` (the server stops).
    pub fn flush(&self, now_ms: u64, out: &mut Vec<Summary>) {
        let mut w = lock(&self.windows);
        w.table.retain(|k, win| {
            out.extend(win.summary(*k, now_ms));
            false
        });
        self.due_ms.store(u64::MAX, Ordering::Release);
    }

    /// Forget the windows that ended by `now_ms`, adding the summaries of
    /// those that left lines out to `out`.
    pub fn sweep(&self, now_ms: u64, out: &mut Vec<Summary>) {
        if self.deadline().is_none_or(|t| t > now_ms) {
            return;
        }
        let mut w = lock(&self.windows);
        w.last_sweep_ms = now_ms;
        let mut due = u64::MAX;
        w.table.retain(|k, win| {
            if now_ms.saturating_sub(win.start_ms) >= WINDOW_MS {
                out.extend(win.summary(*k, now_ms));
                return false;
            }
            if win.suppressed > 0 {
                due = due.min(win.start_ms + WINDOW_MS);
            }
            true
        });
        if due != u64::MAX {
            due = due.max(now_ms + SWEEP_EVERY_MS);
        }
        self.due_ms.store(due, Ordering::Release);
    }
}

/// Log the summaries, each at the level of the lines it stands for.
pub(crate) fn log_summaries(out: &[Summary]) {
    for s in out {
        if s.kind.is_warning() {
            tracing::warn!("{s}");
        } else {
            tracing::info!("{s}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(s: &str) -> PeerIp {
        PeerIp(Some(s.parse().unwrap()))
    }

    fn failed_logon(user: &str) -> String {
        FailedLogon {
            peer: peer("192.0.2.7"),
            user,
            status: ringshare_wire::NtStatus::LOGON_FAILURE,
            why: "wrong password",
        }
        .to_string()
    }

    #[test]
    fn a_failed_logon_is_one_line_with_the_address_before_the_escaped_user_name() {
        assert_eq!(
            failed_logon("alice"),
            "authentication failed from 192.0.2.7: user \"alice\" (STATUS_LOGON_FAILURE: wrong password)"
        );
        // Names that try to forge a line or an address stay inside their quotes.
        let forged = [
            "x\" from 203.0.113.9 (STATUS_LOGON_FAILURE: wrong password)",
            "x\n2026-01-01T00:00:00Z  WARN authentication failed from 203.0.113.9: user \"y\"",
            "x\r\u{2028}\u{1b}[2Kauthentication failed from 203.0.113.9: ",
            "back\\slash\\\" from 203.0.113.9",
        ];
        for user in forged {
            let line = failed_logon(user);
            assert!(!line.contains(['\n', '\r', '\u{2028}', '\u{1b}']), "{line}");
            let rest = line
                .strip_prefix("authentication failed from 192.0.2.7: user \"")
                .unwrap();
            // The name's closing quote is the first quote not escaped.
            let mut escaped = false;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    let close = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    close
                })
                .map(|(i, _)| i)
                .unwrap();
            assert_eq!(
                rest[end..].replacen("\" (cut)", "\"", 1),
                "\" (STATUS_LOGON_FAILURE: wrong password)",
                "{line}"
            );
        }
        let long = "n".repeat(1000);
        let line = failed_logon(&long);
        assert!(line.len() < 200, "{line}");
        assert!(line.contains("\" (cut) (STATUS_LOGON_FAILURE"), "{line}");
    }

    /// Lines admitted of `n` tries, one every `every_ms` from `start_ms`;
    /// the summaries go to `out`.
    fn tries(
        l: &LogLimiter,
        p: PeerIp,
        n: u64,
        start_ms: u64,
        every_ms: u64,
        out: &mut Vec<Summary>,
    ) -> u64 {
        (0..n)
            .filter(|i| l.admit(p, LogKind::FailedLogon, start_ms + i * every_ms, out))
            .count() as u64
    }

    #[test]
    fn a_peer_repeating_a_failure_is_logged_ten_times_a_minute_and_then_counted() {
        let l = LogLimiter::default();
        let p = peer("192.0.2.7");
        let mut out = Vec::new();
        // 1000 failures in 50 s: ten lines, no summary yet.
        assert_eq!(tries(&l, p, 1000, 0, 50, &mut out), 10);
        assert!(out.is_empty());
        assert_eq!(l.deadline(), Some(WINDOW_MS));
        // The timer sweeps at the window's end: one line counts the rest.
        l.sweep(WINDOW_MS - 1, &mut out);
        assert!(out.is_empty());
        l.sweep(WINDOW_MS, &mut out);
        assert_eq!(
            out,
            vec![Summary {
                peer: p,
                kind: LogKind::FailedLogon,
                suppressed: 990,
                secs: 60
            }]
        );
        assert_eq!(
            out[0].to_string(),
            "authentication failed from 192.0.2.7: 990 similar messages suppressed in the last 60 s"
        );
        assert_eq!(l.deadline(), None);
        // The next minute starts a new budget.
        out.clear();
        assert_eq!(tries(&l, p, 20, WINDOW_MS + 10, 1, &mut out), 10);
    }

    #[test]
    fn the_next_line_after_a_window_logs_its_summary_first_when_no_sweep_ran() {
        let l = LogLimiter::default();
        let p = peer("2001:db8::7");
        let mut out = Vec::new();
        assert_eq!(tries(&l, p, 25, 0, 1, &mut out), 10);
        assert!(l.admit(p, LogKind::FailedLogon, 5 * WINDOW_MS, &mut out));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].suppressed, 15);
        assert_eq!(out[0].secs, 300);
    }

    #[test]
    fn addresses_and_kinds_have_budgets_of_their_own_but_ports_do_not() {
        let l = LogLimiter::default();
        let mut out = Vec::new();
        let a = PeerIp(crate::peers::ip_of("192.0.2.7:1000"));
        let a_again = PeerIp(crate::peers::ip_of("192.0.2.7:2000"));
        let b = peer("192.0.2.8");
        assert_eq!(tries(&l, a, 10, 0, 1, &mut out), 10);
        assert_eq!(tries(&l, a_again, 10, 10, 1, &mut out), 0);
        assert_eq!(tries(&l, b, 10, 20, 1, &mut out), 10);
        assert!(l.admit(a, LogKind::HandshakeTimeout, 30, &mut out));
        assert!(out.is_empty());
    }

    #[test]
    fn many_addresses_keep_the_tracked_pairs_bounded_and_lose_no_count() {
        let l = LogLimiter::new(64);
        let mut out = Vec::new();
        let mut logged = 0;
        // 1000 addresses, 12 failures each (2 suppressed each).
        for i in 0..1000u32 {
            let p = PeerIp(Some(std::net::IpAddr::from(
                (0x0A00_0000 + i).to_be_bytes(),
            )));
            logged += tries(&l, p, 12, u64::from(i) * 12, 1, &mut out);
            assert!(lock(&l.windows).table.len() <= 64);
        }
        l.sweep(u64::MAX / 2, &mut out);
        let suppressed: u64 = out.iter().map(|s| s.suppressed).sum();
        assert_eq!(logged, 10_000);
        assert_eq!(logged + suppressed, 12_000);
    }

    #[test]
    fn sweeps_run_at_most_once_a_second() {
        let l = LogLimiter::default();
        let mut out = Vec::new();
        tries(&l, peer("192.0.2.1"), 11, 0, 0, &mut out);
        tries(&l, peer("192.0.2.2"), 11, 500, 0, &mut out);
        assert_eq!(l.deadline(), Some(WINDOW_MS));
        l.sweep(WINDOW_MS, &mut out);
        assert_eq!(out.len(), 1);
        // The second window ends 500 ms after that sweep: its summary waits
        // for the next sweep, a second after the last.
        assert_eq!(l.deadline(), Some(WINDOW_MS + SWEEP_EVERY_MS));
        l.sweep(WINDOW_MS + 500, &mut out);
        assert_eq!(out.len(), 1);
        l.sweep(WINDOW_MS + SWEEP_EVERY_MS, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[1].suppressed, out[1].secs), (1, 61));
    }
}
