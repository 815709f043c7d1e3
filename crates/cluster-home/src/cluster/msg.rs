//! The messages nodes exchange about files homed on one of them: a call
//! (one of the [`crate::arbiter`] decisions, asked of the file's home) and
//! its answer, or a notice for a connection on another node (a break, a
//! "try again"), and the records they carry (an open handed over, a node's
//! opens of a file, a persistent open's record). Data and their encoding
//! ([`codec`]) only: what a node does with a message is the cluster layer's
//! (crate::cluster's other modules, crate::arbiter); this module imports none of it.

use ringshare_vfs::{RelPath, Who};
use ringshare_wire::create::Lease;
use ringshare_wire::{FileId, NtStatus, WireError};

use crate::files::locks::ByteRangeLock;
use crate::files::oplock::Break;
use crate::files::oplock::{self, Grant, LeaseId, Route, Wish};
use crate::files::{FileKey, ShareEntry};
pub use crate::link::Closed;

mod codec;
pub use codec::{decode_ca, encode_ca, record_len};

/// The largest message a node accepts (a CREATE's path is the largest part).
pub const MESSAGE_MAX: usize = 64 * 1024;

/// The protocol level this build speaks (docs/cluster.md, "Upgrading a cluster"): a node
/// sends another only what the other's level reads ([`Message::level`]). Level 1 is what
/// every node reads, a node that advertises no level included (the builds before levels);
/// level 2 adds [`Message::DirChanged`]; level 3 carries a POSIX open's flag to its file's
/// home ([`Ask::posix`], sent as its own call kind); level 4 (no new message) lets a node
/// that takes a dead node's persistent open over give it an id of its own
/// (`crate::cluster::ca`): every node then finds a persistent open by its FileId's
/// persistent part, and moves it from the id its record names; level 5 adds [`Call::Adopt`]
/// (a keeper named by a persistent open's record that no node holds any more has the file's
/// home enter it again, `crate::cluster::takeback`).
pub const LEVEL: u16 = 5;
/// The level of a node that advertises none.
pub const BASE_LEVEL: u16 = 1;

/// [`Message::decode`]'s error for a message (or a call, answer or notice in it) of a kind
/// this build does not know: a newer node's. It is answered, never a reason to close the
/// connection ([`crate::cluster::ClusterNode::cluster_receive`]).
pub const UNKNOWN_KIND: WireError =
    WireError::Invalid("a cluster message of a kind this node does not know");

/// An open asked of a file's home ([`crate::arbiter::OpenAsk`], owned).
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    pub owner: u64,
    pub persistent_id: u64,
    pub route: Route,
    pub wish: Wish,
    pub requested: u8,
    pub lease_req: Option<Lease>,
    pub share: String,
    pub path: RelPath,
    pub is_dir: bool,
    pub conn_id: u64,
    pub now_ms: u64,
    /// The open's user (`None` when it has more groups than a message
    /// carries, [`WHO_GROUPS_MAX`]).
    pub who: Option<ringshare_vfs::Who>,
    /// A POSIX open ([`crate::files::ShareEntry::posix`]): sent only to a home of level 3 or
    /// more (a call kind of its own); an older home gets the call without it
    /// ([`Message::lowered`]) and counts the open as a Windows one.
    pub posix: bool,
}

impl Ask {
    /// `ask`, owned, to travel to the file's home.
    pub fn of(ask: &crate::decide::OpenAsk<'_>) -> Ask {
        Ask {
            owner: ask.owner,
            persistent_id: ask.persistent_id,
            route: ask.route,
            wish: ask.wish.clone(),
            requested: ask.requested,
            lease_req: ask.lease_req.cloned(),
            share: ask.share.to_string(),
            path: ask.path.clone(),
            is_dir: ask.is_dir,
            conn_id: ask.conn_id,
            now_ms: ask.now_ms,
            who: ask.who.cloned(),
            posix: ask.posix,
        }
    }

    /// The open asked, decided at `now_ms` (the home's clock).
    pub fn open_ask(&self, now_ms: u64) -> crate::decide::OpenAsk<'_> {
        crate::decide::OpenAsk {
            owner: self.owner,
            persistent_id: self.persistent_id,
            route: self.route,
            wish: &self.wish,
            requested: self.requested,
            lease_req: self.lease_req.as_ref(),
            share: &self.share,
            path: &self.path,
            is_dir: self.is_dir,
            conn_id: self.conn_id,
            now_ms,
            who: self.who.as_ref(),
            posix: self.posix,
        }
    }
}

/// The most supplementary groups a user sent between nodes has: a user
/// with more is sent as unknown (its home then leaves a delete-pending
/// file that a dead node's open of it was the last of, and says so).
pub(crate) const WHO_GROUPS_MAX: usize = 1024;

/// A decision asked of a file's home.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Admit(FileKey, Box<Ask>),
    Close {
        key: FileKey,
        owner: u64,
        delete_on_close: bool,
    },
    Lock {
        key: FileKey,
        owner: u64,
        /// Each range: the lock, or the status its range earned; may it wait.
        asks: Vec<(Result<ByteRangeLock, NtStatus>, bool)>,
        max: u32,
        now_ms: u64,
    },
    RetryLock(FileKey, ByteRangeLock),
    Unlock {
        key: FileKey,
        owner: u64,
        ranges: Vec<Result<(u64, u64), NtStatus>>,
    },
    /// A READ (`write` false) or WRITE of a range by `owner`.
    Io {
        key: FileKey,
        owner: u64,
        offset: u64,
        length: u64,
        write: bool,
        /// It changes the file (other opens' read caching breaks).
        change: bool,
        now_ms: u64,
    },
    /// A change other than a WRITE (a size change) by `owner`.
    Changed {
        key: FileKey,
        owner: u64,
        now_ms: u64,
    },
    /// Set (or clear) the file's delete-pending; `None`: only ask it.
    DeletePending(FileKey, Option<bool>),
    /// `owner` renames the file to `to`: may it, or must it wait (its
    /// connection `conn_id` is woken).
    Rename {
        key: FileKey,
        owner: u64,
        conn_id: u64,
        now_ms: u64,
    },
    /// The file was renamed to `to`.
    Moved(FileKey, RelPath),
    AckOplock {
        key: FileKey,
        owner: u64,
        level: u8,
    },
    AckLease {
        key: FileKey,
        id: LeaseId,
        state: u32,
        now_ms: u64,
    },
    /// The file's home takes back parts of this node's I/O grant
    /// ([`super::grant`]).
    Revoke {
        key: FileKey,
        clear: u8,
    },
    /// A new home asks for the asked node's own opens
    /// of files in these partitions, after key `after` ([`super::reclaim`]).
    Reclaim {
        parts: Vec<u32>,
        after: Option<FileKey>,
        /// The asker reads records that carry their opens' POSIX flags (level 3; call
        /// kind RECLAIM_POSIX): without it they come as Windows opens.
        posix: bool,
    },
    /// Asked of the node keeping a disconnected durable open: give it up
    /// to the asking node ([`super::handover`]).
    GiveUp(Box<GiveUpAsk>),
    /// At the file's home: an open moves to a new id on another node.
    Transfer(FileKey, Box<Moved>),
    /// Asked of a node by a file's home: close these disconnected durable
    /// opens (FileIds) of yours; a new open would have to break them.
    CloseParked(Vec<(u64, u64)>),
    /// Node `from` armed its first CHANGE_NOTIFY watcher or was granted its
    /// first directory lease: send it your changes (answered once noted,
    /// before the watcher's interim or the lease's CREATE answer).
    Interest {
        from: u16,
    },
    /// At the file's home (level 5): persistent open `record` (its key in its state, the id it
    /// is to go by in its FileId, its locks owned by that id) enters the file's entry, routed
    /// nowhere, unless the entry holds an open of its persistent id already. Answered
    /// `Flag(true)` when it entered, `Flag(false)` when an open of that persistent id is there
    /// (a node holds it: `crate::cluster::takeback`).
    Adopt(Box<CaRecord>),
}

/// A home's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The open joined the file; the caching it got; the I/O grant its
    /// node holds now.
    Admitted(Grant, u8),
    Wait,
    Refused(NtStatus),
    Done,
    /// What the close left ([`crate::arbiter::Closed`]); the lease that
    /// left the file with it.
    Closed(Closed, Option<LeaseId>),
    /// A yes or no (a retried lock is held; an I/O conflicts; delete is
    /// pending; a rename waits).
    Flag(bool),
    /// An I/O's answer: whether it conflicts with a lock, whether another
    /// open may write.
    Io {
        conflict: bool,
        writers: bool,
        /// The I/O grant the asking node holds now.
        grant: u8,
    },
    /// An acknowledged level or lease state.
    Level(u32),
    /// Whether the file's delete was pending before the call, and is now.
    Pending {
        was: bool,
        now: bool,
    },
    /// A page of a node's opens ([`Call::Reclaim`]); `next`: ask again after it.
    Records {
        records: Vec<Record>,
        next: Option<FileKey>,
    },
    /// A disconnected open given up ([`Call::GiveUp`]).
    GivenUp(Box<HandOver>),
    /// An open moved ([`Call::Transfer`]).
    Transferred(Box<Transferred>),
}

impl Answer {
    /// A [`Answer::Flag`]'s value.
    pub fn flag(&self) -> Option<bool> {
        match self {
            Answer::Flag(v) => Some(*v),
            _ => None,
        }
    }

    /// A [`Answer::Level`]'s value.
    pub fn level(&self) -> Option<u32> {
        match self {
            Answer::Level(v) => Some(*v),
            _ => None,
        }
    }
}

/// A break for a connection of the node that receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub route: Route,
    pub notice: Break,
}

/// A change made through a node, for the watchers of the others.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub action: u32,
    pub filter: u32,
    pub path: RelPath,
    pub stream: Option<String>,
}

/// Any message between nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Call(Call),
    Answer(Answer),
    Post(Post),
    /// Changes made through the sending node on share `share`.
    Changes {
        share: String,
        changes: Vec<Change>,
    },
    /// Node `from` wants the other nodes' changes (it has CHANGE_NOTIFY
    /// watchers or is the home of leased directories), or no longer does.
    Interest {
        from: u16,
        watching: bool,
    },
    /// Something inside directory `dir` of share `share` changed through the
    /// sending node: the receiving node breaks the leases on it it is the
    /// home of, except the lease of key `except` (the changing open's
    /// ParentLeaseKey).
    DirChanged {
        share: String,
        dir: RelPath,
        except: Option<[u8; 16]>,
    },
}

impl Message {
    /// The lowest protocol level that reads this message.
    pub fn level(&self) -> u16 {
        match self {
            Message::DirChanged { .. } => 2,
            Message::Call(Call::Admit(_, a)) if a.posix => 3,
            Message::Call(Call::GiveUp(a)) if a.posix => 3,
            Message::Call(Call::Reclaim { posix: true, .. }) => 3,
            Message::Answer(Answer::GivenUp(h)) if h.posix => 3,
            Message::Answer(Answer::Records { records, .. }) if any_posix(records) => 3,
            Message::Call(Call::Adopt(_)) => 5,
            _ => BASE_LEVEL,
        }
    }

    /// The message as a node of protocol level `level` reads it: below level 3 a POSIX
    /// open's admission, hand-over or record without its flag, and a call that asks for
    /// them without asking (the bytes such a node has always read). A message that has no
    /// lower form ([`Message::DirChanged`]) is unchanged: its sender skips nodes below
    /// [`Message::level`].
    pub fn lowered(self, level: u16) -> Message {
        match self {
            Message::Call(c) => Message::Call(c.lowered(level)),
            Message::Answer(a) => Message::Answer(a.lowered(level)),
            m => m,
        }
    }
}

impl Call {
    /// The call as a node of `level` reads it ([`Message::lowered`]).
    pub fn lowered(mut self, level: u16) -> Call {
        let posix = level >= 3;
        match &mut self {
            Call::Admit(_, a) => a.posix &= posix,
            Call::GiveUp(a) => a.posix &= posix,
            Call::Reclaim { posix: p, .. } => *p &= posix,
            _ => {}
        }
        self
    }
}

impl Answer {
    /// The answer as a node of `level` reads it ([`Message::lowered`]): the asker's call
    /// says whether it reads level 3 (GIVE_UP_POSIX, RECLAIM_POSIX).
    pub fn lowered(mut self, level: u16) -> Answer {
        let posix = level >= 3;
        match &mut self {
            Answer::GivenUp(h) => h.posix &= posix,
            Answer::Records { records, .. } if !posix => {
                for o in records.iter_mut().flat_map(|r| r.opens.iter_mut()) {
                    o.posix = false;
                }
            }
            _ => {}
        }
        self
    }
}

/// Whether one of `records`' opens is a POSIX one.
pub(crate) fn any_posix(records: &[Record]) -> bool {
    records.iter().flat_map(|r| &r.opens).any(|o| o.posix)
}

/// What node B asks of the node keeping a disconnected open.
#[derive(Debug, Clone, PartialEq)]
pub struct GiveUpAsk {
    pub file_id: FileId,
    /// DH2C's CreateGuid (`None` for DHnC).
    pub create_guid: Option<[u8; 16]>,
    pub lease_key: Option<[u8; 16]>,
    pub client_guid: [u8; 16],
    /// The name the reconnect gave, the share of its tree, its user.
    pub name: String,
    pub share: String,
    pub uid: u32,
    pub user: String,
    /// The asker reads a POSIX open's hand-over (level 3; call kind GIVE_UP_POSIX): without
    /// it a POSIX open is handed over as a Windows one.
    pub posix: bool,
}

/// A disconnected open's state, handed to the node its client came back to.
#[derive(Debug, Clone, PartialEq)]
pub struct HandOver {
    pub key: FileKey,
    pub path: RelPath,
    pub is_dir: bool,
    pub access: u32,
    pub share_access: u32,
    pub create_options: u32,
    pub position: u64,
    pub mode: u32,
    /// [`crate::files::parked::Durability`]: kind (1 DHnQ, 2 DH2Q, 3 resilient), timeout,
    /// CreateGuid and ClientGuid (the owner is the asking session's user,
    /// checked to be the same).
    pub kind: u8,
    pub timeout_ms: u64,
    pub durable_create_guid: [u8; 16],
    pub durable_client_guid: [u8; 16],
    pub persistent: bool,
    /// (ClientGuid, CreateGuid) for replays, and what the CREATE did.
    pub create_guid: Option<([u8; 16], [u8; 16])>,
    pub create_action: u32,
    pub lock_sequences: Option<[u8; 64]>,
    pub notify_on_close: u32,
    pub posix_rename: bool,
    /// A POSIX open (`Open::posix`): sent only to an asker that reads it (answer kind
    /// GIVEN_UP_POSIX) and stored only at a cluster level of 3 or more (CA record version 2).
    pub posix: bool,
}

/// What the file's home holds for an open it moved to its new id.
#[derive(Debug, Clone, PartialEq)]
pub struct Transferred {
    pub open: ShareEntry,
    pub lease: Option<oplock::Lease>,
    pub locks: Vec<ByteRangeLock>,
    pub delete_pending: bool,
    /// The I/O grant of the open's new node ([`super::grant::IoGrant`]).
    pub grant: u8,
}

/// An open's move at its file's home ([`Call::Transfer`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Moved {
    pub from: u64,
    pub to: u64,
    pub route: Route,
    pub who: Option<ringshare_vfs::Who>,
}

/// One file's state as one node holds it: that node's opens of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub key: FileKey,
    pub share: String,
    pub path: RelPath,
    pub is_dir: bool,
    pub delete_pending: bool,
    pub opens: Vec<ShareEntry>,
    pub locks: Vec<ByteRangeLock>,
    pub leases: Vec<oplock::Lease>,
}

/// A persistent open's record.
#[derive(Debug, Clone, PartialEq)]
pub struct CaRecord {
    /// The node keeping the open (where a reconnect is handed it from).
    pub keeper: u16,
    pub file_id: FileId,
    pub share: String,
    /// Open.DurableOwner: the account's uid and the user's name.
    pub uid: u32,
    pub user: String,
    /// The credentials it acts as (the file is opened again as them).
    pub who: Option<Who>,
    pub state: HandOver,
    pub lease: Option<oplock::Lease>,
    pub locks: Vec<ByteRangeLock>,
}

#[cfg(test)]
#[path = "msg_tests.rs"]
mod tests;
