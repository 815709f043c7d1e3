//! The per-connection object model: session → tree connect → open.
//!
//! ```text
//! Connection (one TCP connection, owned by one ring)
//!   └─ Session (by SessionId; InProgress while SESSION_SETUP runs, then Valid)
//!        ├─ TreeConnect (by TreeId; a disk share or IPC$)
//!        └─ Open (by FileId; belongs to one tree of the session)
//! ```
//! Opens are kept in their session; an open's tree must match the request's
//! tree. Server-wide facts about a file (share modes, locks, delete-on-close)
//! live in [`crate::server::FileEntry`], found through the open's `key`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringshare_auth::gss::ServerAuth;
use ringshare_crypto::encrypt::CipherKey;
use ringshare_crypto::preauth::PreauthHash;
use ringshare_crypto::sign::SigningKey;
use ringshare_vfs::{DirEntry, Node, RelPath};

use crate::server::{FileEntry, FileKey, ShareDef};

pub(crate) struct Session {
    pub id: u64,
    /// Authentication has completed at least once ([MS-SMB2] Session.State Valid).
    pub valid: bool,
    /// A SESSION_SETUP exchange in progress (first setup or re-authentication).
    pub auth: Option<Box<ServerAuth>>,
    pub user: String,
    /// The user's Unix uid from the user database (for the access token).
    pub uid: Option<u32>,
    pub is_guest: bool,
    pub is_anonymous: bool,
    pub signing_key: Option<SigningKey>,
    /// Every request must be signed and every response is signed.
    pub signing_required: bool,
    /// 3.1.1: the session's preauth integrity hash while setup runs.
    pub preauth: Option<PreauthHash>,
    /// SMB 3.x encryption keys: server-to-client and client-to-server.
    pub encrypt_key: Option<CipherKey>,
    pub decrypt_key: Option<CipherKey>,
    /// Nonces of `encrypt_key` are this counter, incremented per message.
    pub nonce_counter: u64,
    /// Unencrypted requests on this session are refused (`server smb encrypt = required`).
    pub encrypt_required: bool,
    pub trees: HashMap<u32, Tree>,
    pub next_tree_id: u32,
    pub opens: HashMap<u64, Open>,
    /// Named pipes open on IPC$ (by FileId.Volatile).
    pub pipes: HashMap<u64, PipeOpen>,
}

/// A named pipe open on an IPC$ tree.
pub(crate) struct PipeOpen {
    pub pipe: crate::ipc::Pipe,
    pub persistent_id: u64,
    pub tree_id: u32,
}

impl Session {
    pub fn is_valid(&self) -> bool {
        self.valid
    }
}

pub(crate) enum TreeKind {
    Disk(Arc<ShareDef>),
    Ipc,
}

pub(crate) struct Tree {
    pub kind: TreeKind,
    /// The share is read-only for this session.
    pub read_only: bool,
    /// Access granted on the share (MaximalAccess in TREE_CONNECT's reply).
    pub maximal_access: u32,
    /// Unencrypted requests on this tree are refused (the share's `smb encrypt = required`).
    pub encrypt_required: bool,
}

/// A directory listing in progress (QUERY_DIRECTORY keeps its place here).
pub(crate) struct DirCursor {
    /// The matching entries, `.` and `..` first, each stat'ed once.
    pub entries: Vec<DirEntry>,
    pub next: usize,
}

pub(crate) struct Open {
    /// FileId.Volatile; also the server-wide owner id for locks and share modes.
    pub id: u64,
    pub persistent_id: u64,
    pub tree_id: u32,
    pub node: Arc<dyn Node>,
    pub path: RelPath,
    pub key: FileKey,
    pub entry: Arc<Mutex<FileEntry>>,
    pub is_dir: bool,
    pub access: u32,
    pub share_access: u32,
    pub create_options: u32,
    /// FILE_DELETE_ON_CLOSE was asked at create.
    pub delete_on_close: bool,
    pub dir_cursor: Option<DirCursor>,
    /// FilePositionInformation (kept for clients that set and read it).
    pub position: u64,
    pub mode: u32,
    /// The share the open lives on (the tree may go before the open is closed).
    pub share: Arc<ShareDef>,
}

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
