#![forbid(unsafe_code)]

//! Per-file state: what the server knows of each open file, whatever
//! connection, session or cluster node its opens came from — share modes
//! ([`access`]), oplocks and leases with their break rules ([`oplock`]),
//! byte-range locks ([`locks`]), delete-pending, the write time clients see
//! ([`writetime`]), a cluster node's I/O grants ([`grant`]) and the durable
//! opens that wait for their client to reconnect ([`parked`]).
//!
//! Its decisions are functions of plain inputs that return a decision and the
//! effects to carry out (breaks to send to a [`oplock::Route`], waiters to
//! wake); it names no connection, session, command, clock or cluster type.
//! A crate of its own (issue 30): it knows nothing of the protocol core above
//! it, and the compiler keeps it so.

pub mod access;
pub mod grant;
pub mod locks;
pub mod oplock;
pub mod parked;
pub mod writetime;

use ringshare_vfs::RelPath;

use locks::LockList;

/// Where a cluster node's number sits in the connection and open ids it makes
/// (an open's `owner`).
pub const NODE_SHIFT: u32 = 48;

/// The node that made connection or open id `id` (0 on a server outside a cluster).
pub fn owner_node(id: u64) -> u16 {
    (id >> NODE_SHIFT) as u16
}

/// Identity of a file across the server: (device, inode), and for a named
/// stream, which one (share modes, oplocks, leases, locks and delete-on-close
/// are per stream, [MS-FSA] 2.1.1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub dev: u64,
    pub ino: u64,
    /// 0 for the file itself (its default stream), else a keyed hash of the
    /// stream's name ignoring case ([`FileKey::stream`]).
    pub stream: u64,
}

impl FileKey {
    /// The file (or directory) `attr` describes.
    pub fn of(attr: &ringshare_vfs::FileAttr) -> FileKey {
        FileKey {
            dev: attr.dev,
            ino: attr.ino,
            stream: 0,
        }
    }

    /// Named stream `name` of this file. The hash is keyed with a secret
    /// made at start, so no client can make two names collide on purpose.
    pub fn stream(self, name: &str) -> FileKey {
        use std::hash::BuildHasher;
        static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> =
            std::sync::OnceLock::new();
        let h = KEY
            .get_or_init(Default::default)
            .hash_one(name.to_uppercase());
        FileKey {
            stream: h | 1,
            ..self
        }
    }

    /// The file this key is (a stream of).
    pub fn base(self) -> FileKey {
        FileKey { stream: 0, ..self }
    }
}

/// One open's entry in a file's share-mode table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareEntry {
    pub owner: u64,
    pub access: u32,
    pub share_access: u32,
    /// The open's oplock or lease and where its breaks go.
    pub caching: oplock::Caching,
    /// The open's user. A file's home uses it when an open of a node that
    /// died was the last of a delete-pending file: the file is removed as
    /// that user, as when a client's last open ends on a single server.
    /// `None` for pipes' and streams' base-file holds (and for opens whose
    /// user had too many groups to send between nodes).
    pub who: Option<ringshare_vfs::Who>,
    /// A POSIX open (SMB3 POSIX extensions): it does not keep a
    /// delete-pending file from going ([`FileEntry::removable`]).
    pub posix: bool,
}

/// Server-wide state of one open file.
#[derive(Debug, Default)]
pub struct FileEntry {
    pub opens: Vec<ShareEntry>,
    pub locks: LockList,
    /// Set by delete-on-close or a disposition SET_INFO; the file goes when the
    /// last open closes.
    pub delete_pending: bool,
    /// The file's name was removed while POSIX opens of it remained
    /// ([`FileEntry::removable`]): nothing removes by its old name again.
    pub unlinked: bool,
    /// The ParentLeaseKey of the open that made the delete pending, if its
    /// lease named one: at the removal, the parent directory's lease of that
    /// key is not broken when the last closer named it too (Samba 4.22;
    /// smbtorture smb2.dirlease.unlink_*).
    pub delete_parent_key: Option<[u8; 16]>,
    /// The share (by name) and path where the file lives now (renames update it).
    pub share: String,
    pub path: RelPath,
    pub is_dir: bool,
    /// Leases held on the file, one per (ClientGuid, LeaseKey).
    pub leases: Vec<oplock::Lease>,
    /// A rename of the file is being made by a file system job (a share whose calls may wait on
    /// a network: crates/core's cmd/set_info/moves.rs): another rename of it waits until the
    /// job made it and the entry's path follows.
    pub renaming: bool,
    /// The file (or stream) is being removed by a file system job (its delete was due at the
    /// close of its last open, on a share whose calls may wait on a network: crates/state's
    /// opens/removal.rs): the entry, delete-pending, stays in the file table until the job
    /// made the removal, so that an open of the name meanwhile finds the delete pending, not a
    /// new entry of a file about to vanish.
    pub removing: bool,
    /// A rename of one of the file's named streams is being made by a file system job (a share
    /// whose calls may wait on a network: crates/core's cmd/set_info/stream_move.rs): the
    /// stream's key and its new one. A CREATE of either stream waits until the job ended, and
    /// so does another rename of a stream of the file.
    pub stream_moving: Option<(FileKey, FileKey)>,
    /// Connections with a request waiting for a break on this file to end:
    /// told to try again when a holder acknowledges or closes.
    pub waiters: Vec<u64>,
    /// The write time clients see while the file is open ([`writetime`]).
    pub write_time: writetime::WriteTime,
    /// Opens of the file's named streams (open id, stream key): each also
    /// holds an entry in `opens`.
    pub streams: Vec<(u64, FileKey)>,
    /// On a cluster node: the I/O grants given (at the file's home) or held
    /// (elsewhere) ([`grant`]).
    pub grants: grant::Grants,
}

impl FileEntry {
    /// Whether the file goes now: its delete is pending, it was not removed
    /// already, and no open but POSIX ones remains (Samba 4.22 removes it at
    /// the close that leaves only POSIX opens; they keep their handles to the
    /// nameless file). Marks it removed when so.
    pub fn removable(&mut self) -> bool {
        let remove = self.delete_pending && !self.unlinked && self.opens.iter().all(|o| o.posix);
        self.unlinked |= remove;
        remove
    }

    /// Whether the entry's vectors are small enough to serve another file
    /// again (one that held many opens or locks gives its room back).
    pub fn worth_keeping(&self) -> bool {
        const ROOM_MAX: usize = 16;
        self.opens.capacity() <= ROOM_MAX
            && self.leases.capacity() <= ROOM_MAX
            && self.waiters.capacity() <= ROOM_MAX
            && self.streams.capacity() <= ROOM_MAX
            && self.share.capacity() <= 256
    }

    /// Empty, as a new entry is, but keeping the room its vectors and share
    /// name have: the file table serves the next file opened with it (no
    /// allocation for the entry, its first open or its share's name).
    /// Names an entry no open holds yet: the share (by name) and path the file is opened
    /// at, and its kind. An entry in use keeps its name (renames update it). The share's
    /// name is copied into the string [`FileEntry::reset`] kept.
    pub fn name_if_unused(&mut self, share: &str, path: &RelPath, is_dir: bool) {
        if self.opens.is_empty() {
            self.share.clear();
            self.share.push_str(share);
            self.path = path.clone();
            self.is_dir = is_dir;
        }
    }

    pub fn reset(&mut self) {
        fn keep<T>(v: &mut Vec<T>) -> Vec<T> {
            let mut v = std::mem::take(v);
            v.clear();
            v
        }
        let opens = keep(&mut self.opens);
        let leases = keep(&mut self.leases);
        let waiters = keep(&mut self.waiters);
        let streams = keep(&mut self.streams);
        let mut share = std::mem::take(&mut self.share);
        share.clear();
        *self = FileEntry {
            opens,
            share,
            leases,
            waiters,
            streams,
            ..FileEntry::default()
        };
    }
}
