//! Delivering the breaks a per-file decision made ([`crate::files::oplock::Breaks`]): to a
//! holder on another cluster node through the cluster layer (its hooks: this module does not name
//! the cluster), else to the holder's connection, or,
//! when that connection is gone, to another channel of its session.

use crate::server::{lock, Notice, ServerState};

impl ServerState {
    /// Send the breaks a per-file decision made to the holders' connections; when a
    /// holder's connection is gone, to another channel of its session.
    pub fn send_breaks(&self, breaks: crate::files::oplock::Breaks) {
        for (route, b) in breaks {
            if let Some(h) = self.node.hooks() {
                if h.forward_break(&self.node, route, &b) {
                    continue;
                }
            }
            let notice = Notice::from(b);
            if self.mail.post(route.conn_id, notice.clone()) || notice == Notice::Retry {
                continue;
            }
            let channels = self
                .sessions
                .find(route.session_id)
                .map(|s| lock(&s).channels.clone())
                .unwrap_or_default();
            let delivered = channels
                .into_iter()
                .any(|c| self.mail.post(c, notice.clone()));
            if !delivered {
                tracing::debug!(session = route.session_id, "no connection left for a break");
            }
        }
    }
}
