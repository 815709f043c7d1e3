//! What the server's peer limits (crate::loglimit, crate::backoff) offer the
//! driver and the connections.

use std::net::IpAddr;

use crate::exchange::ConnCore;
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

impl ConnCore {
    /// Whether a line of `kind` about this connection's peer may be logged now.
    pub(crate) fn log_ok(&self, kind: LogKind) -> bool {
        self.server.log_admit(self.peer_ip, kind, self.now.mono_ms)
    }
}

impl ConnCore {
    /// A logon exchange on this connection ended, `failed` or not: when its
    /// peer's address is backed off, the answer waits
    /// ([`ConnCore::hold_reply_until_ms`]).
    pub(crate) fn logon_ended(&mut self, failed: bool) {
        let now = self.now.mono_ms;
        let backoff = &self.server.logons.backoff;
        let delay = backoff.delay_ms(self.peer_ip, now);
        if failed {
            backoff.failed(self.peer_ip, now);
        }
        if delay > 0 {
            // The clock counts whole milliseconds (truncated): one more
            // makes the answer wait at least `delay`, never a little less.
            self.hold_reply_until_ms = Some(now + delay + 1);
        }
    }
}
