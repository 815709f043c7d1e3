//! The object model: session → tree connect → open, and the channels that
//! carry a session.
//!
//! ```text
//! ServerState.sessions (GlobalSessionTable: SessionId -> Arc<Mutex<Session>>)
//!   └─ Session (InProgress while the first SESSION_SETUP runs, then Valid)
//!        ├─ TreeConnect (by TreeId; a disk share or IPC$)
//!        ├─ Open (by FileId; belongs to one tree of the session)
//!        └─ channels: the connections bound to it ([MS-SMB2] Session.ChannelList)
//! Connection (one TCP connection, owned by one ring)
//!   └─ Channel (by SessionId): the connection's own view of a session: its
//!        signing key, its SESSION_SETUP exchange and preauth hash
//! ```
//! A session lives in the server-wide table so that any connection can bind
//! to it (multichannel, [MS-SMB2] 3.3.5.5.2); a connection reaches its
//! sessions through its channel table without touching the server-wide lock.
//! Opens are kept in their session, so any channel of the session can carry
//! any open's I/O; an open's tree must match the request's tree. Server-wide
//! facts about a file (share modes, locks, delete-on-close) live in
//! [`crate::server::FileEntry`], found through the open's `key`.
//!
//! Locks: a `Session` mutex is held for a lookup or an update, never across
//! I/O or while another session's mutex is taken; an `Open`'s `state` mutex
//! may be taken while holding its session's mutex, never the other way round.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringshare_auth::gss::ServerAuth;
use ringshare_crypto::encrypt::CipherKey;
use ringshare_crypto::preauth::PreauthHash;
use ringshare_crypto::sign::SigningKey;
use ringshare_vfs::{FileAttr, Node, RelPath};

use crate::config::ShareDef;
use crate::files::{FileEntry, FileKey};
use crate::idmap::IdMap;

/// A session as every connection shares it.
pub type SessionRef = Arc<Mutex<Session>>;

pub struct Session {
    pub id: u64,
    /// Authentication has completed at least once ([MS-SMB2] Session.State Valid).
    pub valid: bool,
    /// Logged off (or its last channel went): every channel sees it gone.
    pub closed: bool,
    /// The dialect of the connection that set the session up
    /// (Session.Connection.Dialect, checked when binding).
    pub dialect: u16,
    /// Ids of the connections bound to the session ([MS-SMB2] Session.ChannelList).
    pub channels: Vec<u64>,
    pub user: String,
    /// The Unix account the session acts as (the guest account for guest
    /// and anonymous logons); `None` until authentication completed.
    pub account: Option<crate::identity::Account>,
    pub is_guest: bool,
    pub is_anonymous: bool,
    /// Session.ExpirationTime as a FILETIME: a Kerberos session ends with its ticket
    /// ([MS-SMB2] 3.3.5.5.3); `None` for NTLM, whose sessions do not expire.
    pub expires_filetime: Option<u64>,
    /// Session.SigningKey (the first channel's key; binding requests are
    /// verified with it).
    pub signing_key: Option<SigningKey>,
    /// Every request must be signed and every response is signed.
    pub signing_required: bool,
    /// SMB 3.x encryption keys: server-to-client and client-to-server.
    /// Shared so a channel can encrypt or decrypt without holding the session's lock.
    pub encrypt_key: Option<Arc<CipherKey>>,
    pub decrypt_key: Option<Arc<CipherKey>>,
    /// Nonces of `encrypt_key` are this counter, incremented per message.
    pub nonce_counter: u64,
    /// Unencrypted requests on this session are refused (`server smb encrypt = required`).
    pub encrypt_required: bool,
    pub trees: IdMap<u32, Tree>,
    pub next_tree_id: u32,
    pub opens: IdMap<u64, Arc<Open>>,
    /// Named pipes open on IPC$ (by FileId.Volatile).
    pub pipes: HashMap<u64, Arc<Mutex<PipeOpen>>>,
}

impl Session {
    /// A new session set up on connection `conn_id`, InProgress.
    pub fn new(id: u64, dialect: u16, conn_id: u64) -> Session {
        Session {
            id,
            valid: false,
            closed: false,
            dialect,
            channels: vec![conn_id],
            user: String::new(),
            account: None,
            is_guest: false,
            is_anonymous: false,
            expires_filetime: None,
            signing_key: None,
            signing_required: false,
            encrypt_key: None,
            decrypt_key: None,
            nonce_counter: 0,
            encrypt_required: false,
            trees: IdMap::default(),
            next_tree_id: 1,
            opens: IdMap::default(),
            pipes: HashMap::new(),
        }
    }
}

/// A connection's view of one session ([MS-SMB2] 3.3.1.14 Channel, plus the
/// per-connection parts of a SESSION_SETUP exchange).
pub struct Channel {
    pub session: SessionRef,
    /// Channel.SigningKey: requests on this connection are verified with it
    /// and responses signed with it.
    pub signing_key: Option<SigningKey>,
    /// A SESSION_SETUP exchange in progress on this connection (first setup,
    /// re-authentication or binding).
    pub auth: Option<Box<ServerAuth>>,
    /// 3.1.1: the preauth integrity hash of that exchange.
    pub preauth: Option<PreauthHash>,
    /// The channel is being bound and is not usable until the binding ends.
    pub binding: bool,
    /// The client sent an encrypted request on this channel: notifications
    /// for the session go out encrypted too.
    pub client_encrypts: bool,
}

/// A named pipe open on an IPC$ tree.
pub struct PipeOpen {
    pub pipe: crate::ipc::Pipe,
    pub persistent_id: u64,
    pub tree_id: u32,
}

impl Session {
    pub fn is_valid(&self) -> bool {
        self.valid && !self.closed
    }

    /// The session may be asked to encrypt (a share's or the server's
    /// `smb encrypt`): it has keys and acts for a user. An anonymous session's
    /// keys serve only what its client chooses to sign or encrypt.
    pub fn can_encrypt(&self) -> bool {
        self.encrypt_key.is_some() && !self.is_anonymous
    }
}

pub enum TreeKind {
    Disk(Arc<ShareDef>),
    Ipc,
}

pub struct Tree {
    pub kind: TreeKind,
    /// The configured share (or `[homes]`) the tree was made from; a reload
    /// that replaces it makes the tree again (`crate::cmd::tree::follow_new_shares` (crates/core)).
    pub source: Option<Arc<ShareDef>>,
    /// Who operations on the tree run as (after `force user`, `admin users`…).
    pub who: ringshare_vfs::Who,
    /// Acts as root or `admin users`: stored NT ACLs do not apply.
    pub admin: bool,
    /// The session user's domain SIDs while the tree acts as them ([`crate::identity::TreeIdentity`]).
    pub sids: Arc<[ringshare_wire::security::Sid]>,
    /// The share is read-only for this session.
    pub read_only: bool,
    /// Access granted on the share (MaximalAccess in TREE_CONNECT's reply).
    pub maximal_access: u32,
    /// Unencrypted requests on this tree are refused (the share's `smb encrypt = required`).
    pub encrypt_required: bool,
    /// The session re-authenticated as a user the share does not admit:
    /// every request on the tree but TREE_DISCONNECT is refused (ACCESS_DENIED).
    pub refused: bool,
}

/// A name a directory scan found, with its attributes when the scan described it.
pub type Listed = (String, Option<Box<FileAttr>>);

/// A directory listing in progress (QUERY_DIRECTORY keeps its place here).
pub struct DirCursor {
    /// The matching names, `.` and `..` first; only those two are described
    /// at the scan (boxed: an entry is then 32 bytes, not some 240, for the
    /// thousands the others are), the others when they are returned.
    pub entries: Vec<Listed>,
    pub next: usize,
}

pub struct Open {
    /// FileId.Volatile; also the server-wide owner id for locks and share modes.
    pub id: u64,
    /// Who opened it: operations by name on its behalf (rename, delete on
    /// close) run as them, as operations on its node do.
    pub who: ringshare_vfs::Who,
    pub persistent_id: u64,
    pub tree_id: u32,
    pub node: Arc<dyn Node>,
    pub key: FileKey,
    pub entry: Arc<Mutex<FileEntry>>,
    pub is_dir: bool,
    pub access: u32,
    pub share_access: u32,
    pub create_options: u32,
    /// The share the open lives on (the tree may go before the open is closed).
    pub share: Arc<ShareDef>,
    /// What requests on the open change (any channel may carry them).
    pub state: Mutex<OpenState>,
    /// A QUERY_DIRECTORY's place, under its own lock: a listing holds that across the
    /// entries' file system calls (in a file system job on an offloaded share), never the
    /// state's lock, which a LOGOFF, a TREE_DISCONNECT or a connection's end takes on the I/O
    /// thread. (A field of the open, not an `Arc` in its state: no allocation per CREATE.)
    pub dir_cursor: Mutex<Option<DirCursor>>,
    /// Set for an open of a named stream: `node`, `key` and `entry` are the
    /// stream's.
    pub stream: Option<Box<StreamOf>>,
    /// A POSIX open (the SMB3 POSIX extensions): its names are matched
    /// case-sensitively and it may ask for FILE_POSIX_INFORMATION.
    pub posix: bool,
}

/// What an open of a named stream knows of its file.
pub struct StreamOf {
    /// The stream's name as stored and its key now (a rename changes both;
    /// `Open::key` is the key it was opened with).
    pub now: Mutex<(String, FileKey)>,
    /// The file's share-mode entry, which holds an invisible open (access
    /// 0, sharing everything) for each open of one of its streams.
    pub file_entry: Arc<Mutex<FileEntry>>,
    /// What the stream is to fruit (`AFP_AfpInfo`, `AFP_Resource`).
    pub afp: crate::fruit::afp::Afp,
}

impl StreamOf {
    pub fn name(&self) -> String {
        self.now
            .lock()
            .map_or_else(|p| p.into_inner().0.clone(), |g| g.0.clone())
    }
}

/// The mutable part of an open.
pub struct OpenState {
    pub path: RelPath,
    /// FILE_DELETE_ON_CLOSE was asked at create.
    pub delete_on_close: bool,
    /// FilePositionInformation (kept for clients that set and read it).
    pub position: u64,
    pub mode: u32,
    /// Open.ChannelSequence and Open.OutstandingRequestCount ([MS-SMB2]
    /// 3.3.5.2.10): the highest channel sequence seen on the open.
    pub channel_sequence: u16,
    /// Set when the open is durable or resilient: it outlives its
    /// connection ([`crate::durable`]).
    pub durable: Option<crate::files::parked::Durability>,
    /// The ClientGuid of the client that made it and the CreateGuid of its
    /// DH2Q, and what the CREATE did (CreateAction): a replay of that
    /// CREATE answers from these ([MS-SMB2] 3.3.5.9.10).
    pub create_guid: Option<([u8; 16], [u8; 16])>,
    pub create_action: u32,
    /// Open.IsReplayEligible: no request has used the open since it was
    /// made, so a replay of its CREATE finds it.
    pub replay_eligible: bool,
    /// Open.LockSequenceArray ([MS-SMB2] 3.3.5.14): the last
    /// LockSequenceNumber of each of the 64 buckets, [`NO_LOCK_SEQUENCE`]
    /// when not valid; made at the first LOCK that uses one.
    pub lock_sequences: Option<Box<[u8; 64]>>,
    /// The byte-range locks this open holds that are mirrored as POSIX locks on its
    /// descriptor (`posix locking`, crates/core/src/cmd/lock/posix.rs): what the
    /// descriptor's POSIX locks are set from after each LOCK and UNLOCK.
    pub posix_locks: Vec<crate::files::locks::ByteRangeLock>,
    /// The directory's change-notify watch, made by its first CHANGE_NOTIFY.
    pub watch: Option<Arc<crate::watch::Watcher>>,
    /// CompletionFilter bits of the MODIFIED its close reports (it was
    /// written or renamed; Windows reports those when the handle closes).
    pub notify_on_close: u32,
    /// A directory handle opened after AAPL on a share with
    /// `fruit:posix_rename`: it renames its directory even with files open
    /// below (as macOS expects; Samba's vfs_fruit).
    pub posix_rename: bool,
    /// When this open last marked its writes for the kernel's echo of them
    /// ([`crate::notify::wrote`]), in monotonic ms.
    pub kernel_marked_ms: u64,
    /// READs asking for compression that go plain before one tries again, and
    /// how many tries in a row did not pay (random or already compressed
    /// data): `crate::exchange::compress::skips` (crates/core).
    pub compress_skip: u32,
    pub compress_misses: u32,
}

/// A bucket of [`OpenState::lock_sequences`] that holds no valid number
/// (numbers are 4 bits).
pub const NO_LOCK_SEQUENCE: u8 = 0xFF;

/// Fixed tail of every resume key (the first 16 bytes are the FileId).
const RESUME_KEY_TAG: [u8; 8] = *b"RSresume";

impl Open {
    /// The SRV_REQUEST_RESUME_KEY that names this open as the source of a
    /// server-side copy ([MS-SMB2] 3.3.5.15.5): its FileId (persistent then
    /// volatile, little endian) and a fixed tag. The key is derived, not
    /// stored, so it is the same for every request and dies with the open;
    /// it grants nothing by itself: a copy also needs an open of the same
    /// user on the same connection (see `cmd::ioctl`).
    pub fn resume_key(&self) -> [u8; 24] {
        let mut k = [0u8; 24];
        k[..8].copy_from_slice(&self.persistent_id.to_le_bytes());
        k[8..16].copy_from_slice(&self.id.to_le_bytes());
        k[16..].copy_from_slice(&RESUME_KEY_TAG);
        k
    }
}
