//! A snapshot of who uses the server, for `ringshare status` (Samba's
//! `smbstatus`): connections, sessions, tree connects, open files with their
//! oplocks, leases and durability, byte-range locks and breaks in progress.
//!
//! Taken from the server-wide tables one lock at a time (the session table,
//! then each session, then each open's state; the file table, then each
//! file's entry), never two sessions at once, so it neither waits long nor
//! deadlocks against requests; it is a consistent view of each object, not
//! of the whole server at one instant.

use std::sync::Arc;

use crate::files::oplock::{LEVEL_BATCH, LEVEL_EXCLUSIVE, LEVEL_II, LEVEL_LEASE, LEVEL_NONE};
use crate::server::{lock, ServerState};
use crate::state::TreeKind;

/// What a status request shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub connections: Vec<ConnStatus>,
    pub sessions: Vec<SessionStatus>,
    pub trees: Vec<TreeStatus>,
    pub opens: Vec<OpenStatus>,
    pub locks: Vec<LockStatus>,
    /// Durable opens whose connection went, kept for a reconnect.
    pub disconnected_durable_opens: usize,
}

pub use crate::server::ConnStatus;

/// One session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionStatus {
    pub id: u64,
    /// The name the user logged on with (empty while setting up).
    pub user: String,
    /// The Unix account it acts as.
    pub uid: Option<u32>,
    pub guest: bool,
    pub anonymous: bool,
    pub dialect: u16,
    /// Ids of the connections it is bound to (several with multichannel).
    pub channels: Vec<u64>,
    /// Every message is signed.
    pub signing_required: bool,
    /// The session has encryption keys; `encryption_required`: every
    /// request must be encrypted.
    pub encryption: bool,
    pub encryption_required: bool,
    /// Authentication has not completed yet.
    pub in_progress: bool,
}

/// One tree connect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeStatus {
    pub session_id: u64,
    pub tree_id: u32,
    pub share: String,
    pub read_only: bool,
    /// After a re-authentication or a reload its share does not admit the
    /// user: its requests are refused.
    pub refused: bool,
}

/// One open file or directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenStatus {
    pub session_id: u64,
    pub tree_id: u32,
    /// FileId (persistent, volatile).
    pub file_id: (u64, u64),
    pub share: String,
    /// Path in the share, `/`-separated; a stream's as `path:name`.
    pub path: String,
    pub is_dir: bool,
    pub uid: u32,
    /// Access mask and share access granted at CREATE.
    pub access: u32,
    pub share_access: u32,
    /// `none`, `II`, `exclusive`, `batch` or `lease`.
    pub oplock: &'static str,
    pub lease: Option<LeaseStatus>,
    /// An oplock break was sent and not acknowledged: the level it breaks to.
    pub oplock_breaking_to: Option<&'static str>,
    /// `durable` (DHnQ), `durable-v2` (DH2Q) or `resilient`; None when not.
    pub durable: Option<&'static str>,
    pub delete_on_close: bool,
}

/// The lease an open holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseStatus {
    /// The lease key, 32 hex digits.
    pub key: String,
    /// `R`, `H` and `W` as held.
    pub state: String,
    /// A lease break was sent and not acknowledged: the state it breaks to.
    pub breaking_to: Option<String>,
    pub epoch: u16,
    pub v2: bool,
}

/// One byte-range lock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockStatus {
    pub share: String,
    pub path: String,
    /// The volatile FileId of the open holding it.
    pub open_id: u64,
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
}

/// How many of each thing the server holds now (metrics' gauges), and
/// the breaks sent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gauges {
    pub connections: u64,
    pub sessions: u64,
    pub opens: u64,
    pub leases: u64,
    pub disconnected_durable_opens: u64,
    pub breaks_posted: u64,
}

/// A lease state ([MS-SMB2] 2.2.13.2.8) as letters in the usual order
/// (`RWH`, as Windows and Samba's smbstatus write it).
pub(crate) fn lease_letters(state: u32) -> String {
    let mut s = String::new();
    for (bit, c) in [(1, 'R'), (4, 'W'), (2, 'H')] {
        if state & bit != 0 {
            s.push(c);
        }
    }
    if s.is_empty() {
        s.push('-');
    }
    s
}

/// Whether an access mask reads data, writes data and may delete, as the
/// server decides it ([`crate::files::access`]), as `RWD` letters.
pub fn access_letters(access: u32) -> String {
    [
        (crate::files::access::can_read(access), 'R'),
        (crate::files::access::can_write(access), 'W'),
        (access & crate::files::access::DELETE != 0, 'D'),
    ]
    .iter()
    .map(|&(on, c)| if on { c } else { '-' })
    .collect()
}

fn oplock_name(level: u8) -> &'static str {
    match level {
        LEVEL_NONE => "none",
        LEVEL_II => "II",
        LEVEL_EXCLUSIVE => "exclusive",
        LEVEL_BATCH => "batch",
        LEVEL_LEASE => "lease",
        _ => "unknown",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ServerState {
    /// How many connections, sessions, opens and leases the server holds.
    pub fn gauges(&self) -> Gauges {
        let sessions: Vec<_> = self.sessions.all();
        let opens = sessions.iter().map(|s| lock(s).opens.len() as u64).sum();
        Gauges {
            connections: self.mail.connection_count() as u64,
            sessions: sessions.len() as u64,
            opens,
            leases: self.files.lease_count() as u64,
            disconnected_durable_opens: lock(&self.files.durables).len() as u64,
            breaks_posted: self.mail.breaks_posted(),
        }
    }

    /// Who uses the server now ([`crate::status`]).
    pub fn status(&self) -> Status {
        let mut st = Status {
            connections: self.mail.connection_facts(),
            ..Status::default()
        };
        let sessions: Vec<_> = self.sessions.all();
        for sref in sessions {
            let (opens, sid) = {
                let s = lock(&sref);
                st.sessions.push(SessionStatus {
                    id: s.id,
                    user: s.user.clone(),
                    uid: s.account.as_ref().map(|a| a.who.uid()),
                    guest: s.is_guest,
                    anonymous: s.is_anonymous,
                    dialect: s.dialect,
                    channels: s.channels.clone(),
                    signing_required: s.signing_required,
                    encryption: s.encrypt_key.is_some(),
                    encryption_required: s.encrypt_required,
                    in_progress: !s.valid,
                });
                for (id, t) in s.trees.iter() {
                    st.trees.push(TreeStatus {
                        session_id: s.id,
                        tree_id: *id,
                        share: match &t.kind {
                            TreeKind::Disk(d) => d.name.clone(),
                            TreeKind::Ipc => "IPC$".to_string(),
                        },
                        read_only: t.read_only,
                        refused: t.refused,
                    });
                }
                let opens: Vec<_> = s.opens.values().cloned().collect();
                (opens, s.id)
            };
            for o in opens {
                st.opens.push(open_status(sid, &o));
            }
        }
        let files = self.files.all();
        for e in files {
            let e = lock(&e);
            for l in e.locks.iter() {
                st.locks.push(LockStatus {
                    share: e.share.clone(),
                    path: e.path.to_slash_path(),
                    open_id: l.owner,
                    offset: l.offset,
                    length: l.length,
                    exclusive: l.exclusive,
                });
            }
        }
        st.disconnected_durable_opens = lock(&self.files.durables).len();
        st.sessions.sort_by_key(|s| s.id);
        st.trees.sort_by_key(|t| (t.session_id, t.tree_id));
        st.opens.sort_by_key(|o| (o.session_id, o.file_id.1));
        st.locks
            .sort_by(|a, b| (&a.share, &a.path, a.offset).cmp(&(&b.share, &b.path, b.offset)));
        st
    }
}

/// One open as shown, its caching read from its file's entry.
fn open_status(session_id: u64, o: &Arc<crate::state::Open>) -> OpenStatus {
    let (path, delete_on_close, durable) = {
        let s = lock(&o.state);
        let durable = s.durable.as_ref().map(|d| match d.kind {
            crate::durable::Kind::V1 => "durable",
            crate::durable::Kind::V2 => "durable-v2",
            crate::durable::Kind::Resilient => "resilient",
        });
        (s.path.to_slash_path(), s.delete_on_close, durable)
    };
    let path = match &o.stream {
        Some(st) => format!("{path}:{}", st.name()),
        None => path,
    };
    let mut out = OpenStatus {
        session_id,
        tree_id: o.tree_id,
        file_id: (o.persistent_id, o.id),
        share: o.share.name.clone(),
        path,
        is_dir: o.is_dir,
        uid: o.who.uid(),
        access: o.access,
        share_access: o.share_access,
        oplock: "none",
        lease: None,
        oplock_breaking_to: None,
        durable,
        delete_on_close,
    };
    let e = lock(&o.entry);
    if let Some(c) = e.opens.iter().find(|s| s.owner == o.id).map(|s| s.caching) {
        out.oplock = oplock_name(c.level);
        out.oplock_breaking_to = c.breaking_to.map(oplock_name);
        if let Some(id) = c.lease {
            out.lease = e.leases.iter().find(|l| l.id == id).map(|l| LeaseStatus {
                key: hex(&l.id.key),
                state: lease_letters(l.state),
                breaking_to: l.breaking_to.map(lease_letters),
                epoch: l.epoch,
                v2: l.v2,
            });
        }
    }
    out
}
