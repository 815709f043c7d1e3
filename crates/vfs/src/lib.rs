//! Filesystem backends for ringshare.
//!
//! **Invariant:** this crate knows nothing about SMB messages, sessions or connections: it
//! is paths, nodes and the user's credentials in, file data and attributes out.
//!
//! The server core knows shares only through the [`Share`] trait and open files
//! only through [`Node`]. Two implementations:
//! - [`posix::PosixShare`]: a directory on a local filesystem. Every lookup is
//!   resolved with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` relative to
//!   the share root, so `..`, absolute paths and symlinks that lead outside the
//!   share reach nothing outside it.
//! - [`memory::MemShare`]: an in-memory tree for tests and fuzzing, with fault
//!   injection.
//!
//! Paths are given as a [`RelPath`]: already-validated components (no empty
//! component, no `.` or `..`, no `/` or NUL inside a component). The backend
//! does not know SMB; status mapping lives in the core.
//!
//! **Who**: every operation runs as someone. [`Share`] methods take the
//! credentials to act as ([`Who`]); a [`Node`] keeps those it was opened
//! with and runs every operation on it as them. The POSIX backend switches
//! the calling thread to them ([`ringshare_engine::creds`]) so the kernel
//! decides every access; its own metadata (DOS attributes it may write for a
//! user the file grants it to, the NT ACL xattr) is written as the server.
#![forbid(unsafe_code)]

use std::fmt;
use std::os::fd::BorrowedFd;
use std::sync::Arc;

pub use ringshare_engine::creds::{self, Creds};
pub use ringshare_engine::sys::OfdLock;

/// The credentials an operation runs as (shared: sessions of one user hold
/// one `Arc`, see [`ringshare_engine::creds::intern`]).
pub type Who = Arc<Creds>;

/// The server process's own credentials, shared
/// ([`ringshare_engine::creds::server`]).
pub fn server_who() -> Who {
    ringshare_engine::creds::server()
}

pub mod dosattrib;
pub mod memory;
pub mod posix;

/// Errors a backend reports. The core maps each to one NTSTATUS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsError {
    /// The last component is missing; every directory before it is there as named (the
    /// core relies on this: a CREATE then looks for the name in its directory alone).
    NotFound,
    /// A component before the last one is missing or not a directory.
    PathNotFound,
    Exists,
    NotADirectory,
    IsADirectory,
    NotEmpty,
    AccessDenied,
    /// The path tried to leave the share (symlink to outside, magic link).
    Escapes,
    NoSpace,
    ReadOnly,
    NameTooLong,
    InvalidName,
    Busy,
    /// A local program holds a kernel lease on the file (`F_SETLEASE`) that this open breaks:
    /// the non-blocking open fails with `EWOULDBLOCK` and the kernel tells the holder, who has
    /// `/proc/sys/fs/lease-break-time` to give it up. Opened again later, it goes through.
    LeaseHeld,
    CrossDevice,
    TooManyLinks,
    /// Past a size the storage can hold (a stream over [`STREAM_SIZE_MAX`],
    /// an xattr value the kernel refuses with E2BIG).
    TooBig,
    Io,
    /// Any other errno, kept for logging.
    Other(i32),
}

impl FsError {
    /// Map an errno value to an `FsError`.
    pub fn from_errno(errno: i32) -> FsError {
        const ENOENT: i32 = 2;
        const EIO: i32 = 5;
        const EACCES: i32 = 13;
        const EPERM: i32 = 1;
        const E2BIG: i32 = 7;
        const EAGAIN: i32 = 11;
        const EBUSY: i32 = 16;
        const EEXIST: i32 = 17;
        const EXDEV: i32 = 18;
        const ENOTDIR: i32 = 20;
        const EISDIR: i32 = 21;
        const EINVAL: i32 = 22;
        const ENOSPC: i32 = 28;
        const EROFS: i32 = 30;
        const EMLINK: i32 = 31;
        const ENAMETOOLONG: i32 = 36;
        const ENOTEMPTY: i32 = 39;
        const ELOOP: i32 = 40;
        const EDQUOT: i32 = 122;
        const EXDEV_RESOLVE: i32 = EXDEV;
        match errno {
            ENOENT => FsError::NotFound,
            EIO => FsError::Io,
            E2BIG => FsError::TooBig,
            EACCES | EPERM => FsError::AccessDenied,
            EBUSY => FsError::Busy,
            EAGAIN => FsError::LeaseHeld,
            EEXIST => FsError::Exists,
            EXDEV_RESOLVE => FsError::Escapes,
            ENOTDIR => FsError::NotADirectory,
            EISDIR => FsError::IsADirectory,
            EINVAL => FsError::InvalidName,
            ENOSPC | EDQUOT => FsError::NoSpace,
            EROFS => FsError::ReadOnly,
            EMLINK => FsError::TooManyLinks,
            ENAMETOOLONG => FsError::NameTooLong,
            ENOTEMPTY => FsError::NotEmpty,
            ELOOP => FsError::Escapes,
            e => FsError::Other(e),
        }
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for FsError {}

pub type FsResult<T> = Result<T, FsError>;

/// A validated path relative to the share root. Empty = the root itself.
///
/// The components are shared: a clone (the file table keeps the path of every open file, a
/// close hands it back, the admission records it) costs a reference count, not a copy of each
/// name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RelPath {
    components: Arc<[String]>,
}

impl Default for RelPath {
    /// The share root; every root shares one (empty) list, so that an entry made empty
    /// (the file table's, before its first open names the file) allocates nothing for it.
    fn default() -> Self {
        static ROOT: std::sync::OnceLock<Arc<[String]>> = std::sync::OnceLock::new();
        RelPath {
            components: Arc::clone(ROOT.get_or_init(|| Arc::from(Vec::new()))),
        }
    }
}

/// One component of a [`RelPath`]: not empty, not `.` or `..`, no `/` or NUL
/// (`InvalidName`), at most 255 bytes (`NameTooLong`).
fn check_component(p: &str) -> FsResult<()> {
    if p.is_empty() || p == "." || p == ".." || p.contains(['/', '\0']) {
        return Err(FsError::InvalidName);
    }
    if p.len() > 255 {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

impl RelPath {
    /// The share root.
    pub fn root() -> RelPath {
        RelPath::default()
    }

    /// Build from components; each must be non-empty, not `.`/`..`, and free of
    /// `/` and NUL. Returns `FsError::InvalidName` otherwise.
    pub fn from_components<I, S>(parts: I) -> FsResult<RelPath>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        // A `Vec<String>` is collected in place (no second vector).
        let components: Vec<String> = parts.into_iter().map(Into::into).collect();
        for p in &components {
            check_component(p)?;
        }
        Ok(RelPath {
            components: Arc::from(components),
        })
    }

    /// [`RelPath::from_components`] from borrowed names: checked as they are, then
    /// copied once into the path's own list (no vector of owned names first; every
    /// CREATE makes one).
    pub fn from_strs(parts: &[&str]) -> FsResult<RelPath> {
        for p in parts {
            check_component(p)?;
        }
        Ok(RelPath {
            components: parts.iter().map(|p| (*p).to_owned()).collect(),
        })
    }

    pub fn components(&self) -> &[String] {
        &self.components
    }

    pub fn is_root(&self) -> bool {
        self.components.is_empty()
    }

    /// The last component, or `None` for the root.
    pub fn file_name(&self) -> Option<&str> {
        self.components.last().map(|s| s.as_str())
    }

    /// The parent path, or `None` for the root.
    pub fn parent(&self) -> Option<RelPath> {
        if self.components.is_empty() {
            None
        } else {
            Some(RelPath {
                components: Arc::from(&self.components[..self.components.len() - 1]),
            })
        }
    }

    /// `self` joined with one more validated component.
    pub fn join(&self, name: &str) -> FsResult<RelPath> {
        let mut c = self.components.to_vec();
        c.push(name.to_string());
        RelPath::from_components(c)
    }

    /// `a/b/c` form, for logs and for the POSIX backend.
    pub fn to_slash_path(&self) -> String {
        self.components.join("/")
    }

    /// `f` of the `a/b/c` form (`.` for the root), built on the stack when it is short: the
    /// POSIX backend's path for a system call, without an allocation per call.
    pub fn with_slash_path<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        const STACK: usize = 512;
        match &self.components[..] {
            [] => f("."),
            [one] => f(one),
            parts => {
                let len = parts.iter().map(|p| p.len() + 1).sum::<usize>() - 1;
                if len > STACK {
                    return f(&self.to_slash_path());
                }
                let mut buf = [0u8; STACK];
                let mut at = 0;
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        buf[at] = b'/';
                        at += 1;
                    }
                    buf[at..at + p.len()].copy_from_slice(p.as_bytes());
                    at += p.len();
                }
                // Whole UTF-8 components joined by '/': valid UTF-8.
                match std::str::from_utf8(&buf[..at]) {
                    Ok(joined) => f(joined),
                    Err(_) => f(&self.to_slash_path()),
                }
            }
        }
    }
}

/// A point in time as nanoseconds since the Unix epoch (may be negative).
pub type UnixNanos = i128;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileKind {
    #[default]
    File,
    Directory,
    Symlink,
    /// A FIFO, socket or device (never opened for I/O), which.
    Other(Special),
}

/// What a [`FileKind::Other`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    Unknown,
}

/// Metadata of one file or directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileAttr {
    pub kind: FileKind,
    pub size: u64,
    /// Bytes actually allocated (st_blocks * 512).
    pub alloc_size: u64,
    /// Permission bits (st_mode & 0o7777).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    pub ino: u64,
    pub dev: u64,
    pub atime: UnixNanos,
    pub mtime: UnixNanos,
    pub ctime: UnixNanos,
    /// Birth time when the filesystem reports one.
    pub btime: Option<UnixNanos>,
    /// DOS attributes stored by the backend (Samba's `user.DOSATTRIB`), if any.
    pub dos_attributes: Option<u32>,
    /// The creation time stored with them (a client may set it; POSIX
    /// cannot set a birth time), if any; read with the DOS attributes.
    pub create_time: Option<UnixNanos>,
    /// The file system compresses the file's data (btrfs's `chattr +c`: statx's
    /// `STATX_ATTR_COMPRESSED`), shown as FILE_ATTRIBUTE_COMPRESSED.
    pub compressed: bool,
}

impl FileAttr {
    pub fn is_dir(&self) -> bool {
        self.kind == FileKind::Directory
    }

    /// These attributes (an open's, read without DOS attributes) with the DOS attributes and
    /// creation time a look-up of the same file read (`looked_up`).
    pub fn with_dos_of(self, looked_up: &FileAttr) -> FileAttr {
        FileAttr {
            dos_attributes: looked_up.dos_attributes,
            create_time: looked_up.create_time,
            ..self
        }
    }
}

/// How to open: the core has already turned the SMB create disposition into this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing file or directory; fail with NotFound.
    Existing,
    /// Create a new one; fail with Exists.
    CreateNew,
    /// Open if it exists, else create.
    OpenOrCreate,
    /// Open an existing one and truncate it to zero; fail with NotFound.
    Truncate,
    /// Truncate if it exists, else create.
    TruncateOrCreate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenOptions {
    pub mode: OpenMode,
    pub read: bool,
    pub write: bool,
    /// Must be a directory (FILE_DIRECTORY_FILE). With a create mode, creates a directory.
    pub directory: bool,
    /// Must not be a directory (FILE_NON_DIRECTORY_FILE).
    pub non_directory: bool,
    /// Permission bits for a new file or directory.
    pub create_mode: u32,
    /// An existing file the kernel refuses to open with `read`/`write` is
    /// opened with less (read only, write only, or for its metadata only)
    /// instead of failing; [`Opened::read`] and [`Opened::write`] say what
    /// was had. For MAXIMUM_ALLOWED opens.
    pub best_effort: bool,
    /// The last component is never followed: a symlink, FIFO, socket or device there is
    /// opened itself, for its metadata only (an SMB3 POSIX open, as Samba opens them).
    pub no_follow: bool,
}

impl OpenOptions {
    pub fn read_existing() -> OpenOptions {
        OpenOptions {
            mode: OpenMode::Existing,
            read: true,
            write: false,
            directory: false,
            non_directory: false,
            create_mode: 0o644,
            best_effort: false,
            no_follow: false,
        }
    }
}

/// What `Share::open` returns.
pub struct Opened {
    pub node: Arc<dyn Node>,
    /// True when this open created the file or directory.
    pub created: bool,
    /// True when an existing file was truncated.
    pub truncated: bool,
    /// The node's metadata as the open found it, without DOS attributes
    /// (`dos_attributes` is `None`), when the backend read it anyway (the
    /// POSIX backend stats every descriptor it opens): saves the caller a
    /// [`Node::stat_without_dos`].
    pub attr: Option<FileAttr>,
    /// The node may read the file's data (list a directory), as the kernel
    /// granted when it opened it.
    pub read: bool,
    /// The node may write the file's data.
    pub write: bool,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened")
            .field("created", &self.created)
            .field("truncated", &self.truncated)
            .finish()
    }
}

/// One directory entry as returned by [`Node::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub attr: FileAttr,
}

/// What [`Node::read_map`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadMap {
    /// The file's size.
    pub size: u64,
    /// The ranges `(offset, length)` holding data; `None`: all of it.
    pub data: Option<Vec<(u64, u64)>>,
}

/// Filesystem-wide figures (statvfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStat {
    pub block_size: u64,
    /// The preferred I/O size (statvfs's f_bsize).
    pub io_size: u64,
    pub total_blocks: u64,
    pub free_blocks: u64,
    pub avail_blocks: u64,
    pub total_files: u64,
    pub free_files: u64,
    pub name_max: u64,
    pub fs_id: u64,
}

/// Times to set; `None` leaves a time unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SetTimes {
    pub atime: Option<UnixNanos>,
    pub mtime: Option<UnixNanos>,
    /// Best effort: POSIX cannot set ctime; backends may store it.
    pub btime: Option<UnixNanos>,
}

/// A shared directory tree. Every method runs as `who`.
pub trait Share: Send + Sync + fmt::Debug {
    /// Open (and maybe create) a file or directory; the node keeps `who`.
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened>;
    /// Metadata of a path without opening it for I/O (does not follow a final symlink
    /// out of the share: a symlink is reported as `FileKind::Symlink`).
    fn stat(&self, who: &Who, path: &RelPath) -> FsResult<FileAttr>;
    /// Open the existing regular file (or directory, unless `opts.non_directory`) `path`
    /// names exactly, without a look-up of its own first: every component as named and no
    /// symlink on the way or at the end. `opts.mode` is [`OpenMode::Existing`] (and
    /// `opts.directory` unset); the answer's `attr` is complete, DOS attributes included.
    /// An error says that it was not opened this way (missing, named in another case, a
    /// symlink, a directory, refused, ...): the caller then looks the name up
    /// ([`Share::stat`]) and opens it ([`Share::open`]) as it would have, and meets the
    /// reason there, save [`FsError::LeaseHeld`], which an open of the same file with the
    /// same access would meet again (the caller may take it as that open's answer). A
    /// CREATE of an existing file so walks its path once instead of twice. The default:
    /// that look-up and open.
    fn open_exact(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let a = self.stat(who, path)?;
        let kind_opened = match a.kind {
            FileKind::File => true,
            FileKind::Directory => !opts.non_directory,
            _ => false,
        };
        if !kind_opened || opts.mode != OpenMode::Existing || opts.directory {
            return Err(FsError::InvalidName);
        }
        let mut opened = self.open(who, path, opts)?;
        let found = match opened.attr {
            Some(f) => f,
            None => opened.node.stat_without_dos()?,
        };
        // Another file put there between the two: looked at again by the caller.
        if (found.dev, found.ino) != (a.dev, a.ino) {
            return Err(FsError::NotFound);
        }
        opened.attr = Some(found.with_dos_of(&a));
        Ok(opened)
    }
    /// Remove a file (not a directory).
    fn unlink(&self, who: &Who, path: &RelPath) -> FsResult<()>;
    /// Remove an empty directory.
    fn rmdir(&self, who: &Who, path: &RelPath) -> FsResult<()>;
    /// Rename; fails with `Exists` when `to` exists and `replace` is false.
    fn rename(&self, who: &Who, from: &RelPath, to: &RelPath, replace: bool) -> FsResult<()>;
    /// Make `to` a hard link of the file `from`; fails with `Exists` when
    /// `to` exists. The default: not offered (`AccessDenied`).
    fn link(&self, who: &Who, from: &RelPath, to: &RelPath) -> FsResult<()> {
        let _ = (who, from, to);
        Err(FsError::AccessDenied)
    }
    /// Filesystem figures.
    fn statfs(&self) -> FsResult<FsStat>;
    /// Look up `name` in directory `dir` case-insensitively and return the name as stored,
    /// or `NotFound`. Used when an exact lookup misses.
    fn find_name_case_insensitive(&self, who: &Who, dir: &RelPath, name: &str) -> FsResult<String>;
    /// The first name in directory `dir` that `matches` accepts, or `NotFound`: how a file
    /// is found by its 8.3 short name, which is derived from its name and not stored. The
    /// default finds nothing.
    fn find_name_matching(
        &self,
        who: &Who,
        dir: &RelPath,
        matches: &dyn Fn(&str) -> bool,
    ) -> FsResult<String> {
        let _ = (who, dir, matches);
        Err(FsError::NotFound)
    }
    /// Whether `who` may remove the entry `path` (not the root): the kernel's
    /// rule for unlink, asked ahead of doing it (write and search permission on
    /// the parent, and with the parent's sticky bit, owning the entry or the
    /// parent). The removal itself is decided again by the kernel. The
    /// default says yes.
    fn may_delete(&self, who: &Who, path: &RelPath) -> FsResult<bool> {
        let _ = (who, path);
        Ok(true)
    }
    /// The block size [`Node::clone_range`] aligns to when the share's file
    /// system clones blocks (btrfs; xfs with reflink), asked once when the
    /// share is set up; `None` where it does not. The default: `None`.
    fn clone_block_size(&self) -> Option<u64> {
        None
    }
    /// Whether the share's file system compresses files it is asked to
    /// ([`Node::set_compressed`]: btrfs), FILE_FILE_COMPRESSION. The default: no.
    fn compresses(&self) -> bool {
        false
    }
    /// Whether files of this share can have named data streams (the POSIX
    /// backend: the share's filesystem takes `user.` xattrs). The default: no.
    fn streams_supported(&self) -> bool {
        false
    }
    /// A read-only share rooted at the directory `dir` of this one (a
    /// snapshot's directory, for Previous Versions): `dir` is found beneath
    /// this share's root as `who`, and every path of the view is resolved
    /// beneath `dir`, so nothing outside it is reachable through the view;
    /// every change through it fails with [`FsError::ReadOnly`]. The
    /// default: not offered ([`FsError::AccessDenied`]).
    fn read_only_view(&self, who: &Who, dir: &RelPath) -> FsResult<std::sync::Arc<dyn Share>> {
        let _ = (who, dir);
        Err(FsError::AccessDenied)
    }

    /// This share is a snapshot's view ([`Share::read_only_view`]) that opens an existing file
    /// asked for writing as Samba 4.22 opens it in a snapshot: granted, with the rights the
    /// file's permissions give, its descriptor opened for reading only; every change through it
    /// still fails ([`FsError::ReadOnly`]), and the server refuses the rest (a WRITE, SET_INFO,
    /// FSCTLs) before they reach the file. The default: no.
    fn is_snapshot(&self) -> bool {
        false
    }

    /// Whether calls to the share's file system may wait on a network or another process
    /// (FUSE, NFS, CephFS, SMB: any file system not one whose files only this kernel changes),
    /// decided once when the share is set up: the server then makes them away from its I/O
    /// threads (`fs calls off io thread = auto`, docs/cluster-internals.md). The default: no.
    fn may_wait_on_network(&self) -> bool {
        false
    }
}

/// Most data bytes one named stream holds: the xattr that stores it takes
/// the data plus one NUL byte and a Linux xattr value is at most 64 KiB
/// (Samba's `streams_xattr` has the same limit).
pub const STREAM_SIZE_MAX: u64 = 65535;
/// Longest stream name in UTF-8 bytes: an xattr name is at most 255 bytes,
/// and `user.DosStream.` + name + `:$DATA` must fit.
pub const STREAM_NAME_BYTES_MAX: usize =
    255 - STREAM_XATTR_PREFIX.len() - STREAM_XATTR_SUFFIX.len();
/// Samba `streams_xattr`'s xattr name prefix (its `streams_xattr:prefix` default).
pub const STREAM_XATTR_PREFIX: &str = "user.DosStream.";
/// The type every stream's xattr name ends with (Samba's
/// `streams_xattr:store_stream_type = yes` default).
pub const STREAM_XATTR_SUFFIX: &str = ":$DATA";

/// One named data stream of a file ([MS-FSCC] 2.4.43).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// The name as stored (the spelling it was created with), without the
    /// `:` before it and without its type.
    pub name: String,
    /// Data bytes.
    pub size: u64,
}

/// True for a stream name a backend stores: 1 to [`STREAM_NAME_BYTES_MAX`]
/// bytes, without `\`, `/`, `:` or NUL ([MS-FSCC] 2.1.5.3; other control
/// characters and wildcards are allowed).
pub fn stream_name_is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= STREAM_NAME_BYTES_MAX
        && !name.contains(['\\', '/', ':', '\0'])
}

/// True when two stream names name the same stream: equal ignoring case
/// (compared upper case, as NTFS's upcase table does for the characters it
/// folds). What [`Node::find_stream`] and the backends' renames compare with.
pub fn stream_names_match(a: &str, b: &str) -> bool {
    a == b || a.to_uppercase() == b.to_uppercase()
}

pub use ringshare_acl::posix::PosixAcl;

/// A file's POSIX ACLs as [`Node::posix_acls`] reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PosixAcls {
    /// `system.posix_acl_access`, `None` when the mode bits say everything.
    pub access: Option<PosixAcl>,
    /// `system.posix_acl_default` of a directory.
    pub default: Option<PosixAcl>,
}

/// What [`Node::set_posix_acls`] does to a directory's default ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultAcl<'a> {
    Keep,
    Remove,
    Set(&'a PosixAcl),
}

/// What the kernel lets a node's user do with it, asked with
/// `faccessat2(AT_EACCESS)` under the user's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Access {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
    /// The user owns the file (or acts as root): may change its mode, ACL and times.
    pub owner: bool,
}

impl Access {
    /// Everything (backends that do not check).
    pub const ALL: Access = Access {
        read: true,
        write: true,
        execute: true,
        owner: true,
    };
}

/// An open file or directory.
pub trait Node: Send + Sync + fmt::Debug {
    fn stat(&self) -> FsResult<FileAttr>;
    /// The credentials the node was opened with and runs as (`None`: the
    /// backend does not act as anyone, like the in-memory one): the driver
    /// gives its io_uring operations the same.
    fn who(&self) -> Option<&Who> {
        None
    }
    /// What the kernel lets the node's user do with the file. The default
    /// allows everything.
    fn access(&self) -> FsResult<Access> {
        Ok(Access::ALL)
    }
    /// [`Node::stat`] without the DOS attributes (`dos_attributes` is
    /// `None`), for answers that do not carry them: the POSIX backend skips
    /// one xattr read.
    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        self.stat().map(|a| FileAttr {
            dos_attributes: None,
            create_time: None,
            ..a
        })
    }
    /// The file's size alone: cheaper than [`Node::stat`] where a backend can
    /// skip the rest (the POSIX backend: one `fstat`, no attribute xattr).
    fn size(&self) -> FsResult<u64> {
        self.stat().map(|a| a.size)
    }
    /// The file descriptor, when the backend has one, so the engine can do the I/O
    /// through io_uring. `None` means: call `read_at`/`write_at`/`sync` instead.
    fn fd(&self) -> Option<BorrowedFd<'_>>;
    /// The file descriptor as a shared handle for I/O in flight: the engine
    /// keeps a clone until the kernel is done with it. `None` when the node has
    /// no fd usable for I/O (in-memory backend, stat-only opens).
    fn shared_fd(&self) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
        None
    }
    /// The descriptor whose last close ends this node's open file, shared to be held (not for
    /// I/O: its status flags are left as they are, so a node that did no I/O pays no fcntl):
    /// a CLOSE's file system job holds it so that the close is made where it lets it go
    /// (crates/state's fsjob). `None` where closing is nothing to wait for (in-memory
    /// backend, stat-only opens, named streams).
    fn fd_to_hold(&self) -> Option<std::sync::Arc<std::os::fd::OwnedFd>> {
        None
    }
    /// Sets this open's POSIX (open-file-description) lock on `start .. start + len` of
    /// the file to `kind`, without waiting: `Ok(false)` when another open file
    /// description (a local program's fcntl lock, or another open's) holds a conflicting
    /// one. A `Write` lock on a node opened without write access is taken as `Read`, as
    /// Samba does, and a `Read` lock on one without read access is not taken. The default, and backends without descriptors (in-memory, named
    /// streams): nothing is locked and every call succeeds.
    fn posix_lock(&self, kind: OfdLock, start: i64, len: i64) -> FsResult<bool> {
        let _ = (kind, start, len);
        Ok(true)
    }
    /// True when another open file description holds a POSIX lock on `start .. start +
    /// len` that conflicts with a `kind` (`Read` or `Write`) lock there. The default: never.
    fn posix_locked(&self, kind: OfdLock, start: i64, len: i64) -> FsResult<bool> {
        let _ = (kind, start, len);
        Ok(false)
    }
    /// True when the file's file system keeps it in memory (tmpfs, ramfs):
    /// reading or writing it never waits for a device, so small I/O may be
    /// done in the calling thread instead of being handed to an io_uring
    /// worker. (A tmpfs page swapped out is the exception: rare, and brief.)
    fn in_memory(&self) -> bool {
        false
    }
    /// An io_uring read of this file must not ask for more than it holds:
    /// on FUSE file systems (ceph-fuse with direct I/O, measured on kernel
    /// 6.18 by scripts/cluster-ceph.sh) an io_uring READ that comes up short
    /// is continued from the wrong offset and returns the data repeated,
    /// where `pread` stops at the end. Callers then read within the size.
    fn reads_within_size(&self) -> bool {
        false
    }
    /// An io_uring READ or WRITE of this file may wait in the thread that submits it: on a
    /// FUSE file system in direct I/O mode the kernel makes the FUSE request there and waits
    /// for its answer (measured: `scripts/fuse-stall-demo.sh --action read --stall-ops read
    /// --direct-io`, session 47), and a network file system's may too. The engine then hands it
    /// to an io_uring worker at once (IOSQE_ASYNC), so the I/O thread does not wait.
    fn ring_io_may_block(&self) -> bool {
        false
    }
    /// Read up to `buf.len()` bytes at `offset`; returns bytes read (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize>;
    /// Write all of `data` at `offset`; returns bytes written.
    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize>;
    /// Flush data and metadata to stable storage (fsync).
    fn sync(&self) -> FsResult<()>;
    /// Set the end of file (truncate or extend).
    fn set_len(&self, len: u64) -> FsResult<()>;
    /// Preallocate or release allocation (fallocate); may be a no-op.
    fn set_allocation(&self, size: u64) -> FsResult<()>;
    fn set_times(&self, times: &SetTimes) -> FsResult<()>;
    /// Store DOS attributes (e.g. in an xattr). Backends without storage return Ok.
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()>;
    /// Change permission bits.
    fn set_mode(&self, mode: u32) -> FsResult<()>;
    /// Whether the file system is asked to compress this file's data (and, for a
    /// directory, the files made in it), as this node's user. The default: never.
    fn compressed(&self) -> FsResult<bool> {
        Ok(false)
    }
    /// Ask the file system to compress this file's data, or not, as this node's user
    /// (its owner may; [`Share::compresses`] says where it does). The default: only
    /// "not compressed" (`Other(EOPNOTSUPP)` for compressed).
    fn set_compressed(&self, on: bool) -> FsResult<()> {
        if on {
            Err(FsError::Other(EOPNOTSUPP))
        } else {
            Ok(())
        }
    }
    /// Give the file to a user (its owner uid). Backends that cannot (or a
    /// server without the privilege) report the error; callers may ignore it.
    fn set_owner(&self, _uid: u32) -> FsResult<()> {
        Ok(())
    }
    /// The names of this directory's entries, excluding `.` and `..`,
    /// sorted, without looking at the entries themselves (no stat per entry).
    /// `NotADirectory` for files.
    fn list_names(&self) -> FsResult<Vec<String>>;

    /// Entry `name` (one component, not `.` or `..`) of this directory as it
    /// is now, a symlink's own metadata and never its target's; `NotFound`
    /// once it is gone. A listing describes each entry with it when it
    /// returns the entry.
    fn stat_entry(&self, name: &str) -> FsResult<FileAttr>;

    /// Whether the node's user may read entry `name` of this directory (its
    /// data, or for a directory its listing), as the kernel says; for
    /// `hide unreadable`. The default says yes.
    fn may_read_entry(&self, name: &str) -> FsResult<bool> {
        let _ = name;
        Ok(true)
    }

    /// All entries of this directory, excluding `.` and `..`, sorted by name,
    /// each described by [`Node::stat_entry`] (one removed meanwhile is left
    /// out). `NotADirectory` for files.
    fn read_dir(&self) -> FsResult<Vec<DirEntry>> {
        let mut out = Vec::new();
        for name in self.list_names()? {
            match self.stat_entry(&name) {
                Ok(attr) => out.push(DirEntry { name, attr }),
                Err(FsError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Copy `len` bytes of `src` at `src_offset` to this file at `dst_offset`
    /// (server-side copy); returns the bytes copied, fewer only when `src`
    /// ends first. `src` may be this very node, with overlapping ranges: the
    /// result is as if each piece of up to [`COPY_BUFFER_SIZE_MAX`] bytes
    /// were read whole before it is written. The default reads and writes
    /// through a buffer of at most that size.
    fn copy_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<u64> {
        copy_through_buffer(self, src, src_offset, dst_offset, len)
    }

    /// Make `len` bytes (`len` > 0) of `src` at `src_offset` appear in this
    /// file at `dst_offset` by sharing their storage (a block clone, Linux's
    /// `FICLONERANGE`), as this node's user; the file grows when the range
    /// ends past its end. All or nothing. `Other(EOPNOTSUPP)` where the
    /// storage cannot share blocks (the default), `InvalidName` (EINVAL) for
    /// ranges not aligned to [`Share::clone_block_size`] (a source range may
    /// end unaligned at the source's end of file), past the source's end, or
    /// overlapping within one file.
    fn clone_range(
        &self,
        src: &dyn Node,
        src_offset: u64,
        dst_offset: u64,
        len: u64,
    ) -> FsResult<()> {
        let _ = (src, src_offset, dst_offset, len);
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// Zero `len` bytes at `offset` and release their storage where the
    /// backend can (a hole); never changes the size, and the part past the
    /// end of file is left alone. The default writes zeros.
    fn punch_hole(&self, offset: u64, len: u64) -> FsResult<()> {
        write_zeros(self, offset, len)
    }

    /// The ranges `(offset, length)` holding data within `offset .. offset+len`
    /// (clipped to it and to the end of file), in order and not touching.
    /// The default says the whole range up to the end of file is data.
    fn allocated_ranges(&self, offset: u64, len: u64) -> FsResult<Vec<(u64, u64)>> {
        let size = self.stat()?.size;
        let end = offset.saturating_add(len).min(size);
        Ok(if end > offset {
            vec![(offset, end - offset)]
        } else {
            Vec::new()
        })
    }

    /// For a READ that sends holes without reading them (a compressed READ:
    /// holes go as Pattern_V1): the file's size now and the parts of
    /// `offset .. offset+len` (clipped to it and to the end of file) that hold
    /// data, in order and not touching; `data: None` when the backend knows
    /// cheaply that the range is all data or cannot tell, and the READ reads
    /// it all. Runs as the node's user. The default: [`Node::size`] and `None`.
    fn read_map(&self, offset: u64, len: u64) -> FsResult<ReadMap> {
        let _ = (offset, len);
        Ok(ReadMap {
            size: self.size()?,
            data: None,
        })
    }

    /// The file's POSIX ACLs (`system.posix_acl_access`, and for a
    /// directory `system.posix_acl_default`), read as the node's user. The
    /// default: none (the mode bits say everything).
    fn posix_acls(&self) -> FsResult<PosixAcls> {
        Ok(PosixAcls::default())
    }

    /// Replace the file's access ACL (which sets the mode's permission bits
    /// too) and change its default ACL, as the node's user: the kernel lets
    /// only the owner. `server_may`: when the kernel refuses the user, do it
    /// as the server (the caller decided the user may, by an NT ACL it
    /// keeps). The default cannot: `Other(EOPNOTSUPP)`.
    fn set_posix_acls(
        &self,
        access: &PosixAcl,
        default: DefaultAcl<'_>,
        server_may: bool,
    ) -> FsResult<()> {
        let _ = (access, default, server_may);
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// Give the file another owner and/or group, as the node's user: the
    /// kernel lets only root change the owner, and the owner change the
    /// group to one of theirs. `server_may`: when the kernel refuses the
    /// user, do it as the server (the caller decided the user may). The
    /// default: like [`Node::set_owner`].
    fn chown(&self, uid: Option<u32>, gid: Option<u32>, server_may: bool) -> FsResult<()> {
        let _ = server_may;
        match (uid, gid) {
            (Some(u), _) => self.set_owner(u),
            _ => Ok(()),
        }
    }

    /// The value of Samba's `security.NTACL` xattr (its `acl_xattr` module's
    /// NT ACL; see `ringshare_acl::ntacl`), if the file has one. The default
    /// stores none.
    fn nt_acl_blob(&self) -> FsResult<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Store (or with `None` remove) the `security.NTACL` value, as the
    /// server (only it may write `security.*`; the core checked WRITE_DAC).
    /// The default cannot store one: `Other(EOPNOTSUPP)`.
    fn set_nt_acl_blob(&self, blob: Option<&[u8]>) -> FsResult<()> {
        let _ = blob;
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// A security descriptor (self-relative bytes) older ringshare stored in
    /// its own `user.ringshare.ntacl` xattr, to be migrated. `seen`: the file
    /// as stat'ed just before, if the caller did (a backend may then answer
    /// from what it read while the file has not changed since). The default:
    /// none.
    fn legacy_security_descriptor(&self, seen: Option<&FileAttr>) -> FsResult<Option<Vec<u8>>> {
        let _ = seen;
        Ok(None)
    }

    /// Forget the descriptor of [`Node::legacy_security_descriptor`] once it
    /// was migrated.
    fn remove_legacy_security_descriptor(&self) -> FsResult<()> {
        Ok(())
    }

    /// The Windows extended attributes ([MS-FSCC] 2.4.15) of this file as
    /// `(NAME, value)` pairs, names upper case, in a stable order. Never
    /// lists the backend's own metadata. The default has none.
    fn list_eas(&self) -> FsResult<Vec<(String, Vec<u8>)>> {
        Ok(Vec::new())
    }

    /// Set extended attribute `name` (matched case-insensitively, stored upper
    /// case) to `value`; `None` or an empty value deletes it (deleting a
    /// missing one is not an error). `InvalidName` unless
    /// [`ea_name_is_valid`], `AccessDenied` for a name the backend keeps for
    /// itself ([`ea_name_is_reserved`]), `NameTooLong` for a value past
    /// [`EA_VALUE_LEN_MAX`]. The default cannot store any:
    /// `Other(EOPNOTSUPP)`.
    fn set_ea(&self, name: &str, value: Option<&[u8]>) -> FsResult<()> {
        let _ = (name, value);
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// The value of Netatalk's `org.netatalk.Metadata` xattr (an AppleDouble
    /// blob holding the Finder info macOS sets; Samba's vfs_fruit keeps
    /// `AFP_AfpInfo` there by default), read as the node's user. `None`
    /// when there is none. The default stores none.
    fn netatalk_metadata(&self) -> FsResult<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Store (or with `None` remove) the `org.netatalk.Metadata` value, as
    /// the node's user. The default cannot: `Other(EOPNOTSUPP)`.
    fn set_netatalk_metadata(&self, value: Option<&[u8]>) -> FsResult<()> {
        let _ = value;
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// The reparse data buffer ([MS-FSCC] 2.1.2.2/2.1.2.3) a client stored on this file with
    /// FSCTL_SET_REPARSE_POINT, as stored (Samba's `user.SmbReparse` xattr), read as the
    /// node's user. `None` when there is none. The default stores none.
    fn reparse_point(&self) -> FsResult<Option<Vec<u8>>> {
        Ok(None)
    }

    /// A symlink node's target, as stored (never followed). The default: none to read,
    /// `Other(EOPNOTSUPP)`.
    fn link_target(&self) -> FsResult<Vec<u8>> {
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// A device node's major and minor numbers. The default: `Other(EOPNOTSUPP)`.
    fn device_numbers(&self) -> FsResult<(u32, u32)> {
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// [`Node::reparse_point`] of entry `name` of this directory (a symlink's own, never its
    /// target's), for listings. The default: none.
    fn entry_reparse_point(&self, name: &str) -> FsResult<Option<Vec<u8>>> {
        let _ = name;
        Ok(None)
    }

    /// Store (or with `None` remove) this file's reparse data buffer, and with it set (clear)
    /// [`ATTR_REPARSE_POINT`] in its stored DOS attributes, as the node's user. The default
    /// cannot: `Other(EOPNOTSUPP)`.
    fn set_reparse_point(&self, value: Option<&[u8]>) -> FsResult<()> {
        let _ = value;
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// This file's (or directory's) named data streams, in a stable order
    /// (the backend's own: the POSIX one lists as the file system lists
    /// xattrs, the in-memory one in the order created); never the default
    /// stream. Names a backend finds on disk that [`stream_name_is_valid`]
    /// refuses are left out. Called on a stream node: its file's streams.
    /// The default: none.
    fn list_streams(&self) -> FsResult<Vec<StreamInfo>> {
        Ok(Vec::new())
    }

    /// The stream called `name`: matched exactly first, else ignoring case
    /// (the stored spelling is returned). `None` when there is none.
    fn find_stream(&self, name: &str) -> FsResult<Option<StreamInfo>> {
        let all = self.list_streams()?;
        if let Some(s) = all.iter().find(|s| s.name == name) {
            return Ok(Some(s.clone()));
        }
        Ok(all.into_iter().find(|s| stream_names_match(&s.name, name)))
    }

    /// Open named stream `name` of this file or directory (`name` exactly as
    /// stored for an existing stream: look it up with [`Node::find_stream`]
    /// first; a new stream keeps this spelling). `mode` as for files:
    /// `CreateNew` fails with `Exists`, `Existing`/`Truncate` with
    /// `NotFound`; a created or truncated stream is empty. `write`: the
    /// stream node may change the data. The node shares the file's
    /// metadata (times, attributes, ids, security, EAs: set through it, they
    /// change the file's) and reports the stream's size; it keeps working
    /// after the file is unlinked, like any open node. The default has no
    /// streams: `Other(EOPNOTSUPP)`.
    ///
    /// What the backends do besides: `InvalidName` unless
    /// [`stream_name_is_valid`] (and on a stream node: a stream has no
    /// streams); `AccessDenied` on what is neither a file nor a directory;
    /// `ReadOnly` on a read-only share for `write` or a mode that creates or
    /// truncates. The POSIX backend decides as the node's user: `write`
    /// needs the kernel to let the user write the file (as opening the file
    /// for writing would), creating or truncating needs it to let the user
    /// set the xattr. The returned [`Opened`] has `read` true, `write` as
    /// asked, no `attr`. The node's [`Node::stat`] is the file's with kind
    /// `File`, `size` and `alloc_size` the stream's and the DIRECTORY bit
    /// (0x10) left out of stored DOS attributes (a directory's stream is a
    /// file; Samba does the same); it has no fd ([`Node::fd`] is `None`:
    /// the engine reads and writes through [`Node::read_at`] and
    /// [`Node::write_at`]); a write or resize ending past
    /// [`STREAM_SIZE_MAX`] is `TooBig` and changes nothing. A stream node
    /// keeps the name it was opened with: once that stream is renamed or
    /// removed (by any node), its data calls and stat answer `NotFound`;
    /// open it again under its new name.
    fn open_stream(&self, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
        let _ = (name, mode, write);
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// For a node [`Node::open_stream`] returned: the stream's stored name.
    fn stream_name(&self) -> Option<String> {
        None
    }

    /// Remove named stream `name` (as stored); `NotFound` when it is not
    /// there, `InvalidName` for a name no stream can have. Called on a
    /// stream node: a stream of its file.
    fn remove_stream(&self, name: &str) -> FsResult<()> {
        let _ = name;
        Err(FsError::NotFound)
    }

    /// Give stream `from` (as stored) the name `to`, keeping its data;
    /// `Exists` when `to` exists (another stream, compared ignoring case)
    /// and `replace` is false. With `replace`, every other stream `to`
    /// names (any spelling) goes and `to`'s spelling stays. `to` differing
    /// from `from` only in case changes the stored spelling; `to == from`
    /// changes nothing. `NotFound` when `from` is not there, `InvalidName`
    /// for either name invalid. Called on a stream node: streams of its
    /// file (the node itself keeps its old name, see [`Node::open_stream`]).
    /// On a stream node, renaming the node's own stream (`from` its name)
    /// makes the node follow it.
    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        let _ = (from, to, replace);
        Err(FsError::Other(EOPNOTSUPP))
    }

    /// Remove every named stream of the file (a base file overwritten).
    fn remove_all_streams(&self) -> FsResult<()> {
        for s in self.list_streams()? {
            match self.remove_stream(&s.name) {
                Ok(()) | Err(FsError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The [`Node`] methods about a file's metadata (times, mode, owner, ACLs,
/// NT ACL, EAs, Netatalk metadata) and its list of streams, forwarded to the
/// file's node `self.$file`: for nodes that show one of a file's data
/// streams (a named stream, macOS's AfpInfo or resource fork), which share
/// everything but their data with the file.
#[macro_export]
macro_rules! forward_file_metadata {
    ($file:ident) => {
        fn set_times(&self, times: &$crate::SetTimes) -> $crate::FsResult<()> {
            self.$file.set_times(times)
        }
        fn set_mode(&self, mode: u32) -> $crate::FsResult<()> {
            self.$file.set_mode(mode)
        }
        fn set_owner(&self, uid: u32) -> $crate::FsResult<()> {
            self.$file.set_owner(uid)
        }
        fn chown(
            &self,
            uid: Option<u32>,
            gid: Option<u32>,
            server_may: bool,
        ) -> $crate::FsResult<()> {
            self.$file.chown(uid, gid, server_may)
        }
        fn posix_acls(&self) -> $crate::FsResult<$crate::PosixAcls> {
            self.$file.posix_acls()
        }
        fn set_posix_acls(
            &self,
            access: &$crate::PosixAcl,
            default: $crate::DefaultAcl<'_>,
            server_may: bool,
        ) -> $crate::FsResult<()> {
            self.$file.set_posix_acls(access, default, server_may)
        }
        fn nt_acl_blob(&self) -> $crate::FsResult<Option<Vec<u8>>> {
            self.$file.nt_acl_blob()
        }
        fn set_nt_acl_blob(&self, blob: Option<&[u8]>) -> $crate::FsResult<()> {
            self.$file.set_nt_acl_blob(blob)
        }
        fn legacy_security_descriptor(
            &self,
            seen: Option<&$crate::FileAttr>,
        ) -> $crate::FsResult<Option<Vec<u8>>> {
            self.$file.legacy_security_descriptor(seen)
        }
        fn remove_legacy_security_descriptor(&self) -> $crate::FsResult<()> {
            self.$file.remove_legacy_security_descriptor()
        }
        fn list_eas(&self) -> $crate::FsResult<Vec<(String, Vec<u8>)>> {
            self.$file.list_eas()
        }
        fn set_ea(&self, name: &str, value: Option<&[u8]>) -> $crate::FsResult<()> {
            self.$file.set_ea(name, value)
        }
        fn netatalk_metadata(&self) -> $crate::FsResult<Option<Vec<u8>>> {
            self.$file.netatalk_metadata()
        }
        fn set_netatalk_metadata(&self, value: Option<&[u8]>) -> $crate::FsResult<()> {
            self.$file.set_netatalk_metadata(value)
        }
        fn reparse_point(&self) -> $crate::FsResult<Option<Vec<u8>>> {
            self.$file.reparse_point()
        }
        fn set_reparse_point(&self, value: Option<&[u8]>) -> $crate::FsResult<()> {
            self.$file.set_reparse_point(value)
        }
        fn list_streams(&self) -> $crate::FsResult<Vec<$crate::StreamInfo>> {
            self.$file.list_streams()
        }
        fn find_stream(&self, name: &str) -> $crate::FsResult<Option<$crate::StreamInfo>> {
            self.$file.find_stream(name)
        }
    };
}

/// The [`Node`] methods of a directory's entries for a node that is no
/// directory (a stream's): each `NotADirectory`.
#[macro_export]
macro_rules! not_a_directory {
    () => {
        fn list_names(&self) -> $crate::FsResult<Vec<String>> {
            Err($crate::FsError::NotADirectory)
        }
        fn stat_entry(&self, _name: &str) -> $crate::FsResult<$crate::FileAttr> {
            Err($crate::FsError::NotADirectory)
        }
        fn may_read_entry(&self, _name: &str) -> $crate::FsResult<bool> {
            Err($crate::FsError::NotADirectory)
        }
    };
}

/// Longest extended attribute name in bytes ([MS-FSCC] 2.4.15: EaNameLength is one byte).
pub const EA_NAME_LEN_MAX: usize = 255;
/// Largest extended attribute value in bytes (EaValueLength is two bytes).
pub const EA_VALUE_LEN_MAX: usize = 65535;
/// Prefix (compared case-insensitively) of the EA names a backend keeps for its own
/// metadata (DOS attributes, NT ACL): a client can neither set nor see them.
pub const EA_RESERVED_PREFIX: &str = "ringshare.";

/// True for a name Windows accepts for an extended attribute ([MS-FSCC]
/// 2.4.15, [MS-FSA] 2.1.5.1.2.1: FileFullEaInformation names): 1 to
/// [`EA_NAME_LEN_MAX`] ASCII bytes without control characters or any of
/// `"*/:<>?\|`.
pub fn ea_name_is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= EA_NAME_LEN_MAX
        && name
            .bytes()
            .all(|b| b.is_ascii() && !b.is_ascii_control() && !b"\"*/:<>?\\|".contains(&b))
}

/// The names (compared case-insensitively) under which Samba keeps its own
/// metadata in `user.` xattrs (DOS attributes and creation time, POSIX ACL
/// inheritance, streams, netatalk's Finder info): hidden from clients and
/// not settable by them, as Samba hides them, so a share Samba served shows
/// the same EAs through ringshare.
pub const SAMBA_PRIVATE_EA_NAMES: [&str; 5] = [
    "DOSATTRIB",
    "SmbReparse",
    "SAMBA_PAI",
    "SAMBA_STREAMS",
    "org.netatalk.Metadata",
];
/// FILE_ATTRIBUTE_REPARSE_POINT ([MS-FSCC] 2.6): kept in the stored DOS attributes of a file
/// with a reparse data buffer ([`Node::set_reparse_point`]); a client cannot set or clear it
/// through its attributes.
pub const ATTR_REPARSE_POINT: u32 = 0x0000_0400;
/// Samba's xattr holding a file's reparse data buffer (`SAMBA_XATTR_REPARSE_ATTRIB`).
pub const REPARSE_XATTR: &str = "user.SmbReparse";

/// Prefix of Samba's `streams_xattr` stream names.
pub const SAMBA_STREAM_EA_PREFIX: &str = "DosStream.";

/// True for a name in the backend's own namespace ([`EA_RESERVED_PREFIX`])
/// or Samba's ([`SAMBA_PRIVATE_EA_NAMES`], [`SAMBA_STREAM_EA_PREFIX`]).
pub fn ea_name_is_reserved(name: &str) -> bool {
    let has_prefix = |prefix: &str| {
        name.get(..prefix.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
    };
    has_prefix(EA_RESERVED_PREFIX)
        || has_prefix(SAMBA_STREAM_EA_PREFIX)
        || SAMBA_PRIVATE_EA_NAMES
            .iter()
            .any(|n| n.eq_ignore_ascii_case(name))
}

/// The checks every backend's [`Node::set_ea`] makes first; returns the name
/// as stored (upper case) and the value, `None` for a delete.
pub fn check_ea<'v>(name: &str, value: Option<&'v [u8]>) -> FsResult<(String, Option<&'v [u8]>)> {
    if !ea_name_is_valid(name) {
        return Err(FsError::InvalidName);
    }
    if ea_name_is_reserved(name) {
        return Err(FsError::AccessDenied);
    }
    let value = value.filter(|v| !v.is_empty());
    if value.is_some_and(|v| v.len() > EA_VALUE_LEN_MAX) {
        return Err(FsError::NameTooLong);
    }
    Ok((name.to_ascii_uppercase(), value))
}

/// errno EOPNOTSUPP: what [`Node::set_security_descriptor`]'s default reports.
pub const EOPNOTSUPP: i32 = 95;

/// The largest buffer [`Node::copy_range`]'s default (and the POSIX fallback)
/// holds at once: 1 MiB, the largest SMB2 copychunk.
pub const COPY_BUFFER_SIZE_MAX: u64 = 1 << 20;

/// [`Node::punch_hole`] by writing zeros (at most [`COPY_BUFFER_SIZE_MAX`] at a
/// time) over the part of `offset .. offset+len` before the end of file.
pub fn write_zeros<N: Node + ?Sized>(node: &N, offset: u64, len: u64) -> FsResult<()> {
    let size = node.stat()?.size;
    let end = offset.saturating_add(len).min(size);
    let zeros = vec![0u8; end.saturating_sub(offset).min(COPY_BUFFER_SIZE_MAX) as usize];
    let mut at = offset;
    while at < end {
        let n = (end - at).min(zeros.len() as u64) as usize;
        let chunk = zeros.get(..n).ok_or(FsError::Io)?;
        node.write_at(chunk, at)?;
        at += n as u64;
    }
    Ok(())
}

/// A node of a read-only share refuses every change (READ_ONLY), whatever the backend.
pub(crate) fn share_writable(read_only: bool) -> FsResult<()> {
    if read_only {
        Err(FsError::ReadOnly)
    } else {
        Ok(())
    }
}

/// What writing data through an open node needs, whatever the backend: a
/// writable share, a file (not a directory), and an open for writing.
pub(crate) fn data_writable(read_only: bool, kind: FileKind, writable: bool) -> FsResult<()> {
    share_writable(read_only)?;
    if kind == FileKind::Directory {
        return Err(FsError::IsADirectory);
    }
    if !writable {
        return Err(FsError::AccessDenied);
    }
    Ok(())
}

/// [`Node::copy_range`] through a bounded buffer: read a piece whole, then write it.
pub fn copy_through_buffer<N: Node + ?Sized>(
    dst: &N,
    src: &dyn Node,
    src_offset: u64,
    dst_offset: u64,
    len: u64,
) -> FsResult<u64> {
    if src_offset.checked_add(len).is_none() || dst_offset.checked_add(len).is_none() {
        return Err(FsError::InvalidName);
    }
    let mut buf = vec![0u8; len.min(COPY_BUFFER_SIZE_MAX) as usize];
    let mut done = 0u64;
    while done < len {
        let want = (len - done).min(buf.len() as u64) as usize;
        let piece = buf.get_mut(..want).ok_or(FsError::Io)?;
        let n = src.read_at(piece, src_offset + done)?;
        if n == 0 {
            break;
        }
        let data = piece.get(..n).ok_or(FsError::Io)?;
        dst.write_at(data, dst_offset + done)?;
        done += n as u64;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::RelPath;

    #[test]
    fn a_path_handed_to_a_system_call_is_its_slash_form_whatever_its_length() {
        let root = RelPath::root();
        assert_eq!(root.with_slash_path(str::to_string), ".");
        let one = RelPath::from_components(["f.txt"]).unwrap();
        assert_eq!(one.with_slash_path(str::to_string), "f.txt");
        let three = RelPath::from_components(["a", "b c", "d\u{e9}.txt"]).unwrap();
        assert_eq!(three.with_slash_path(str::to_string), "a/b c/d\u{e9}.txt");
        // Past the stack buffer: built on the heap, the same form.
        let long = RelPath::from_components(vec!["x".repeat(200); 4]).unwrap();
        assert_eq!(long.with_slash_path(str::to_string), long.to_slash_path());
        assert_eq!(long.to_slash_path().len(), 803);
    }

    #[test]
    fn a_cloned_path_shares_its_components() {
        let p = RelPath::from_components(["a", "b"]).unwrap();
        let q = p.clone();
        assert!(std::ptr::eq(p.components(), q.components()));
        assert_eq!(p.parent().unwrap().components(), ["a"]);
        assert_eq!(p.join("c").unwrap().to_slash_path(), "a/b/c");
    }
}
