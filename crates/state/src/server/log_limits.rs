//! What the server's log limiter (crate::loglimit) offers the driver and the connections.

use std::net::IpAddr;

use crate::loglimit::{log_summaries, LogKind};
use crate::peers::PeerIp;
use crate::server::ServerState;

impl ServerState {
    /// Whether a line of `kind` about the peer at `ip` may be logged now
    /// (`now_ms`: the driver's monotonic clock); logs the summaries due.
    pub fn log_admit(&self, ip: Option<IpAddr>, kind: LogKind, now_ms: u64) -> bool {
        let mut out = Vec::new();
        let ok = self.log_limit.admit(PeerIp(ip), kind, now_ms, &mut out);
        log_summaries(&out);
        ok
    }

    /// When [`ServerState::log_limit_tick`] has summaries to log (the
    /// driver's timer wakes then).
    pub fn log_limit_deadline(&self) -> Option<u64> {
        self.log_limit.deadline()
    }

    /// Log the summaries of the windows that ended.
    pub fn log_limit_tick(&self, now_ms: u64) {
        let mut out = Vec::new();
        self.log_limit.sweep(now_ms, &mut out);
        log_summaries(&out);
    }

    /// Log the summaries of every window, ended or not (the server stops).
    pub fn log_limit_flush(&self, now_ms: u64) {
        let mut out = Vec::new();
        self.log_limit.flush(now_ms, &mut out);
        log_summaries(&out);
    }
}
