//! What the server's peer limits (crate::loglimit, crate::backoff) offer the
//! connections; what they offer the driver is `ServerState`'s (server/log_limits.rs in
//! crates/state).

use crate::exchange::ConnCore;
use crate::loglimit::LogKind;

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
