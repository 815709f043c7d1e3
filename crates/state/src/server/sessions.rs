//! The GlobalSessionTable ([MS-SMB2] 3.3.1.5): every session of the server by
//! SessionId, whichever connection set it up. It is taken only to create,
//! bind or forget a session, never while a `Session` mutex is held and never
//! on the path of an ordinary request (connections reach their sessions
//! through their own channel table).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::state::{Session, SessionRef};
use crate::sync::lock;

/// Every session by SessionId ([`crate::server::ServerState::sessions`]).
#[derive(Default)]
pub struct SessionTable {
    table: Mutex<HashMap<u64, SessionRef>>,
}

impl SessionTable {
    /// Put a new session in the table; `None` when the id is taken.
    pub fn insert(&self, session: Session) -> Option<SessionRef> {
        let mut table = lock(&self.table);
        if table.contains_key(&session.id) {
            return None;
        }
        let id = session.id;
        let r = Arc::new(Mutex::new(session));
        table.insert(id, Arc::clone(&r));
        Some(r)
    }

    /// The session with this id, from any connection.
    pub fn find(&self, id: u64) -> Option<SessionRef> {
        lock(&self.table).get(&id).cloned()
    }

    /// Forget a session (logoff, failed first setup, last channel gone).
    pub fn remove(&self, id: u64) {
        lock(&self.table).remove(&id);
    }

    /// How many sessions the server holds.
    pub fn count(&self) -> usize {
        lock(&self.table).len()
    }

    /// Every session.
    pub fn all(&self) -> Vec<SessionRef> {
        lock(&self.table).values().cloned().collect()
    }
}
