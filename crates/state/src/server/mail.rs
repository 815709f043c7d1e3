//! The mail between connections: each live connection's mailbox of notices
//! from the others (break notifications, retries, ended sessions, …), what
//! `status` shows of each connection, and the waker that tells the drivers'
//! threads to look. It knows nothing of files, sessions or the cluster: it
//! carries [`Notice`]s from whoever posts them to the connection they name.
//!
//! Lock order: the mailbox map is taken after a `FileEntry` mutex, never
//! before one, and before a mailbox's own mutexes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use crate::sync::{lock, replace, snapshot};

/// What carries a connection's SMB2 messages ([MS-SMB2] 2.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transport {
    /// Direct TCP (a 4-byte header per message).
    #[default]
    Tcp,
    /// One QUIC stream carrying the same bytes as direct TCP: dialect 3.1.1 only.
    Quic,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Quic => "quic",
        }
    }
}

/// One connection, as `status` shows it ([`crate::status`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnStatus {
    pub id: u64,
    /// The client's address (`ip:port`).
    pub peer: String,
    pub transport: Transport,
    /// The negotiated dialect (0x0202 … 0x0311); 0 before NEGOTIATE.
    pub dialect: u16,
    /// Signing algorithm (`HMAC-SHA256`, `AES-128-CMAC`, `AES-128-GMAC`).
    pub signing: &'static str,
    /// Cipher sessions encrypt with, when the client can encrypt.
    pub cipher: Option<&'static str>,
    /// When it was accepted (FILETIME).
    pub since: u64,
}

/// What one connection asks another to send: a break notification for an
/// open or lease the other connection's client holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// [MS-SMB2] 2.2.23.1 to the client of `session_id`.
    OplockBreak {
        session_id: u64,
        file_id: ringshare_wire::FileId,
        level: u8,
    },
    /// [MS-SMB2] 2.2.23.2 to the client of `session_id`.
    LeaseBreak {
        session_id: u64,
        notification: ringshare_wire::misc::LeaseBreakNotification,
    },
    /// A break this connection's requests wait for may have ended: try them again.
    Retry,
    /// Session `session_id` was ended from another connection (a new
    /// session named it as PreviousSessionId): its waiting requests end.
    SessionEnded { session_id: u64 },
    /// A CHANGE_NOTIFY of this connection, waiting with this async id, may
    /// have an answer now ([`crate::notify`]).
    Notify { async_id: u64 },
    /// The server's shares were replaced (a reload): look at every tree.
    SharesChanged,
    /// Close the connection (a fenced cluster node drops its clients).
    Drop,
}

impl From<crate::files::oplock::Break> for Notice {
    fn from(b: crate::files::oplock::Break) -> Notice {
        use crate::files::oplock::Break;
        match b {
            Break::Oplock {
                session_id,
                file_id,
                level,
            } => Notice::OplockBreak {
                session_id,
                file_id,
                level,
            },
            Break::Lease {
                session_id,
                notification,
            } => Notice::LeaseBreak {
                session_id,
                notification,
            },
            Break::Retry => Notice::Retry,
        }
    }
}

/// What tells the thread running one connection that its mailbox has mail
/// ([`Mailbox::set_bell`]).
pub type Bell = Box<dyn Fn() + Send + Sync>;

/// A connection's inbox of notices from other connections (they may run on
/// other threads), and what `status` shows of it.
#[derive(Default)]
pub struct Mailbox {
    pending: AtomicBool,
    notices: Mutex<Vec<Notice>>,
    facts: Mutex<ConnStatus>,
    /// Rung when the box turns from empty to not; without one, a post wakes
    /// every driver thread and they look at all their connections.
    bell: OnceLock<Bell>,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox")
            .field("pending", &self.pending)
            .field("bell", &self.bell.get().is_some())
            .finish_non_exhaustive()
    }
}

impl Mailbox {
    pub fn has_mail(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// From now on a post that finds the box empty rings `bell` (from the
    /// posting thread), and only the thread it tells looks at this box. Set
    /// once (later calls are ignored); mail already waiting rings it at once.
    pub fn set_bell(&self, bell: Bell) {
        if self.bell.set(bell).is_err() {
            return;
        }
        // Against a post that did not see the bell yet: one of the two sees the other's write
        // (the post's `pending`, or this bell) and rings.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.has_mail() {
            if let Some(b) = self.bell.get() {
                b();
            }
        }
    }

    pub fn take(&self) -> Vec<Notice> {
        let mut n = lock(&self.notices);
        self.pending.store(false, Ordering::Release);
        std::mem::take(&mut *n)
    }
}

/// Every live connection's mailbox, by connection id, and the counts and
/// waker around them ([`crate::server::ServerState::mail`]).
#[derive(Default)]
pub struct Mail {
    /// Each live connection's mailbox, by connection id.
    mailboxes: Mutex<HashMap<u64, Arc<Mailbox>>>,
    /// Counts the notices posted to mailboxes without a bell (drivers compare
    /// it to see whether to look at all their connections).
    posted: AtomicU64,
    /// Wakes the drivers' threads after a notice was posted to a mailbox
    /// without a bell.
    waker: RwLock<Option<Arc<dyn Fn() + Send + Sync>>>,
    /// Oplock and lease break notifications posted, for metrics.
    breaks_posted: AtomicU64,
}

impl Mail {
    /// Called (from any thread) after a notice was posted to a connection, so
    /// that the thread running it looks at its mail ([`Mail::posted`]).
    pub fn set_waker(&self, wake: Arc<dyn Fn() + Send + Sync>) {
        replace(&self.waker, Some(wake));
    }

    /// How many notices were ever posted to mailboxes without a bell: when it
    /// changed, some connection may have mail (`crate::Connection::has_mail`
    /// (crates/core)).
    pub fn posted(&self) -> u64 {
        self.posted.load(Ordering::Acquire)
    }

    /// How many oplock and lease break notifications were posted.
    pub fn breaks_posted(&self) -> u64 {
        self.breaks_posted.load(Ordering::Relaxed)
    }

    pub fn open_mailbox(&self, conn_id: u64, peer: &str) -> Arc<Mailbox> {
        let m = Arc::new(Mailbox::default());
        *lock(&m.facts) = ConnStatus {
            id: conn_id,
            peer: peer.to_string(),
            ..Default::default()
        };
        lock(&self.mailboxes).insert(conn_id, Arc::clone(&m));
        m
    }

    /// Record when connection `conn_id` was accepted (FILETIME), for `status`.
    pub fn note_accepted(&self, conn_id: u64, filetime: u64) {
        if let Some(m) = lock(&self.mailboxes).get(&conn_id) {
            lock(&m.facts).since = filetime;
        }
    }

    /// Record what carries connection `conn_id`, for `status`.
    pub fn note_transport(&self, conn_id: u64, transport: Transport) {
        if let Some(m) = lock(&self.mailboxes).get(&conn_id) {
            lock(&m.facts).transport = transport;
        }
    }

    /// Record what connection `conn_id` negotiated, for `status`.
    pub fn note_negotiated(
        &self,
        conn_id: u64,
        dialect: u16,
        signing: &'static str,
        cipher: Option<&'static str>,
    ) {
        if let Some(m) = lock(&self.mailboxes).get(&conn_id) {
            let mut f = lock(&m.facts);
            (f.dialect, f.signing, f.cipher) = (dialect, signing, cipher);
        }
    }

    /// Every live connection, for `status`.
    pub(crate) fn connection_facts(&self) -> Vec<ConnStatus> {
        let boxes: Vec<Arc<Mailbox>> = lock(&self.mailboxes).values().cloned().collect();
        let mut v: Vec<_> = boxes.iter().map(|m| lock(&m.facts).clone()).collect();
        v.sort_by_key(|c| c.id);
        v
    }

    /// The ids of every live connection.
    pub fn connections(&self) -> Vec<u64> {
        lock(&self.mailboxes).keys().copied().collect()
    }

    /// How many connections are live.
    pub(crate) fn connection_count(&self) -> usize {
        lock(&self.mailboxes).len()
    }

    pub fn close_mailbox(&self, conn_id: u64) {
        lock(&self.mailboxes).remove(&conn_id);
    }

    /// Leave a notice for connection `conn_id`; false when it is gone.
    pub fn post(&self, conn_id: u64, notice: Notice) -> bool {
        let Some(m) = lock(&self.mailboxes).get(&conn_id).cloned() else {
            return false;
        };
        if matches!(
            notice,
            Notice::OplockBreak { .. } | Notice::LeaseBreak { .. }
        ) {
            self.breaks_posted.fetch_add(1, Ordering::Relaxed);
        }
        lock(&m.notices).push(notice);
        let was_pending = m.pending.swap(true, Ordering::AcqRel);
        // Pairs with the fence in `Mailbox::set_bell`.
        std::sync::atomic::fence(Ordering::SeqCst);
        match m.bell.get() {
            // Rung once until the connection takes its mail (`Mailbox::take` empties the box
            // before it clears `pending`, so a notice left after that rings again).
            Some(bell) => {
                if !was_pending {
                    bell();
                }
            }
            None => {
                self.posted.fetch_add(1, Ordering::AcqRel);
                self.wake_drivers();
            }
        }
        true
    }

    /// Wake the drivers' threads, so that they look at their mail and their
    /// timers again (a disconnected durable open's timeout is one).
    pub fn wake_drivers(&self) {
        if let Some(w) = snapshot(&self.waker) {
            w();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn counting_bell(m: &Mailbox) -> Arc<AtomicUsize> {
        let rings = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&rings);
        m.set_bell(Box::new(move || {
            r.fetch_add(1, Ordering::SeqCst);
        }));
        rings
    }

    /// Mail whose drivers' waker counts its calls.
    fn mail_counting_wakes() -> (Mail, Arc<AtomicUsize>) {
        let mail = Mail::default();
        let woken = Arc::new(AtomicUsize::new(0));
        let w = Arc::clone(&woken);
        mail.set_waker(Arc::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        }));
        (mail, woken)
    }

    #[test]
    fn a_mailbox_with_a_bell_rings_it_once_until_its_mail_is_taken_and_wakes_no_driver() {
        let (mail, woken) = mail_counting_wakes();
        let m = mail.open_mailbox(7, "10.0.0.1:5000");
        let rings = counting_bell(&m);
        assert!(mail.post(7, Notice::Retry));
        assert!(mail.post(7, Notice::SharesChanged));
        assert_eq!(rings.load(Ordering::SeqCst), 1, "rung once for two notices");
        assert_eq!(m.take(), vec![Notice::Retry, Notice::SharesChanged]);
        assert!(mail.post(7, Notice::Retry));
        assert_eq!(rings.load(Ordering::SeqCst), 2, "rung again after the take");
        assert_eq!(woken.load(Ordering::SeqCst), 0, "no driver woken");
        assert_eq!(
            mail.posted(),
            0,
            "no driver has to look at all its connections"
        );
    }

    #[test]
    fn a_mailbox_without_a_bell_wakes_every_driver() {
        let (mail, woken) = mail_counting_wakes();
        let m = mail.open_mailbox(3, "10.0.0.1:5000");
        assert!(mail.post(3, Notice::Retry));
        assert_eq!(woken.load(Ordering::SeqCst), 1);
        assert_eq!(mail.posted(), 1);
        assert!(m.has_mail());
        assert!(!mail.post(4, Notice::Retry), "no such connection");
    }

    #[test]
    fn a_bell_set_on_a_mailbox_that_already_has_mail_rings_at_once() {
        let mail = Mail::default();
        let m = mail.open_mailbox(9, "10.0.0.1:5000");
        assert!(mail.post(9, Notice::Drop));
        let rings = counting_bell(&m);
        assert_eq!(rings.load(Ordering::SeqCst), 1);
        let later = Arc::new(AtomicUsize::new(0));
        let l = Arc::clone(&later);
        m.set_bell(Box::new(move || {
            l.fetch_add(1, Ordering::SeqCst);
        }));
        assert_eq!(later.load(Ordering::SeqCst), 0, "the first bell stays");
    }
}
