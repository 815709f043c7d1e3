//! `AFP_AfpInfo` and `AFP_Resource` kept as streams (`fruit:metadata =
//! stream`, `fruit:resource = stream`), with the rules Samba's vfs_fruit
//! gives them (macOS behaviour; read, not copied):
//!
//! - `AFP_AfpInfo` is a 60-byte blob (signature "AFP\0", version 1.0,
//!   backup time, 32 bytes of FinderInfo at 16). It exists only when 60
//!   bytes are stored; a create makes a placeholder (nothing valid stored,
//!   reads give the default blob, it is not listed and other plain opens do
//!   not find it). Reads ignore their offset (below 61); a write must start
//!   with "AFP", be at offset 0 or at least 60 bytes long, and only one of
//!   more than 16 bytes is stored; all-zero FinderInfo deletes it at close.
//!   Its size is always 60; an end of file past 60 is ALLOTTED_SPACE_EXCEEDED.
//! - `AFP_Resource` is listed only when it holds data, and a delete of one
//!   that holds data is ignored (as macOS does).

use std::sync::Arc;

use ringshare_vfs::{Access, DirEntry, FileAttr, FsError, FsResult, Node, OpenMode, Opened, Who};
use ringshare_wire::NtStatus;

use super::{Fruit, Metadata, Resource, AFPINFO_STREAM, AFPRESOURCE_STREAM};

/// What a named stream is to fruit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Afp {
    /// An ordinary stream.
    #[default]
    None,
    /// `AFP_AfpInfo` kept as a stream.
    Info,
    /// `AFP_Resource` kept as a stream.
    Resource,
}

/// Bytes of an AfpInfo.
pub const AFP_INFO_SIZE: usize = 60;

/// What stream `name` is on a share with `fruit` (none without).
pub fn kind(fruit: Option<&Fruit>, name: &str) -> Afp {
    match fruit {
        Some(_) if name.eq_ignore_ascii_case(AFPINFO_STREAM) => Afp::Info,
        Some(f)
            if f.resource != Resource::Xattr && name.eq_ignore_ascii_case(AFPRESOURCE_STREAM) =>
        {
            Afp::Resource
        }
        _ => Afp::None,
    }
}

/// The AfpInfo a file without metadata shows: signature, version, backup
/// time "never", nothing else.
pub(crate) fn default_info() -> [u8; AFP_INFO_SIZE] {
    let mut b = [0u8; AFP_INFO_SIZE];
    b[0..4].copy_from_slice(b"AFP\0");
    b[4..8].copy_from_slice(&[0, 0, 1, 0]);
    b[12..16].copy_from_slice(&0x8000_0000u32.to_be_bytes());
    b
}

/// Whether a stored stream of `size` bytes is an AfpInfo (anything else is
/// a placeholder or left by another program: not one).
pub fn is_stored_info(size: u64) -> bool {
    size == AFP_INFO_SIZE as u64
}

/// The FinderInfo of a stored AfpInfo is all zero: it is to go.
pub fn empty_finder_info(blob: &[u8; AFP_INFO_SIZE]) -> bool {
    blob[16..48].iter().all(|b| *b == 0)
}

/// A WRITE to an AfpInfo stream: checked and stored here (not through the
/// engine); the bytes the client is told were written, and whether the
/// stream is to be deleted at close (all-zero FinderInfo).
pub fn write(node: &dyn Node, offset: u64, data: &[u8]) -> Result<(usize, bool), NtStatus> {
    let len = data.len();
    if len < 3 || (offset != 0 && len < AFP_INFO_SIZE) || &data[..3] != b"AFP" {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    if len <= 16 {
        return Ok((len, false));
    }
    let mut blob = [0u8; AFP_INFO_SIZE];
    let n = len.min(AFP_INFO_SIZE);
    blob[..n].copy_from_slice(&data[..n]);
    if blob[0..8] != default_info()[0..8] {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    node.write_at(&blob, 0).map_err(crate::fsmap::status_of)?;
    Ok((len, empty_finder_info(&blob)))
}

/// An `AFP_AfpInfo` node, seen as a 60-byte blob: kept in a stream (the
/// stream's node), or in the file's Netatalk metadata (the file's node).
#[derive(Debug)]
pub struct InfoNode {
    inner: Arc<dyn Node>,
    netatalk: bool,
}

impl InfoNode {
    /// Over the `AFP_AfpInfo` stream's node.
    pub fn new(inner: Arc<dyn Node>) -> InfoNode {
        InfoNode {
            inner,
            netatalk: false,
        }
    }

    /// Over the file's node, kept in its `org.netatalk.Metadata`.
    pub fn netatalk(file: Arc<dyn Node>) -> InfoNode {
        InfoNode {
            inner: file,
            netatalk: true,
        }
    }

    /// The stored blob, or the default one while none is (a placeholder).
    fn blob(&self) -> FsResult<[u8; AFP_INFO_SIZE]> {
        let mut b = default_info();
        if self.netatalk {
            if let Some(f) = self
                .inner
                .netatalk_metadata()?
                .and_then(|m| super::netatalk::finder_info(&m))
            {
                b[16..48].copy_from_slice(&f);
            }
            return Ok(b);
        }
        let mut got = [0u8; AFP_INFO_SIZE];
        if self.inner.read_at(&mut got, 0)? == AFP_INFO_SIZE {
            b = got;
        }
        Ok(b)
    }

    /// Store `blob` (its Finder info alone, for Netatalk metadata).
    fn store(&self, blob: &[u8; AFP_INFO_SIZE]) -> FsResult<()> {
        if !self.netatalk {
            self.inner.write_at(blob, 0)?;
            return Ok(());
        }
        let old = self.inner.netatalk_metadata()?;
        let a = self.inner.stat_without_dos()?;
        let born = a.btime.unwrap_or(a.mtime.min(a.ctime)) / 1_000_000_000;
        let finder: [u8; 32] = blob[16..48].try_into().unwrap_or([0; 32]);
        let new = super::netatalk::with_finder_info(old.as_deref(), &finder, born as i64);
        self.inner.set_netatalk_metadata(Some(&new))
    }

    fn as_info(mut a: FileAttr) -> FileAttr {
        a.kind = ringshare_vfs::FileKind::File;
        a.size = AFP_INFO_SIZE as u64;
        a.alloc_size = AFP_INFO_SIZE as u64;
        a.dos_attributes = a.dos_attributes.map(|d| d & !0x10);
        a
    }
}

/// Whether the file `file` has an AfpInfo in its Netatalk metadata.
pub fn netatalk_exists(file: &dyn Node) -> FsResult<bool> {
    Ok(file
        .netatalk_metadata()?
        .is_some_and(|m| super::netatalk::finder_info(&m).is_some()))
}

impl Node for InfoNode {
    ringshare_vfs::forward_file_metadata!(inner);

    fn stat(&self) -> FsResult<FileAttr> {
        self.inner.stat().map(InfoNode::as_info)
    }
    fn who(&self) -> Option<&Who> {
        self.inner.who()
    }
    fn access(&self) -> FsResult<Access> {
        self.inner.access()
    }
    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        self.inner.stat_without_dos().map(InfoNode::as_info)
    }
    fn size(&self) -> FsResult<u64> {
        self.inner.size().map(|_| AFP_INFO_SIZE as u64)
    }
    fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    fn shared_fd(&self) -> Option<Arc<std::os::fd::OwnedFd>> {
        None
    }
    fn in_memory(&self) -> bool {
        self.inner.in_memory()
    }
    /// macOS reads at odd offsets: below 61 the offset is ignored and the
    /// blob is read from its start (as Samba, for macOS's off-by-one).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        if offset > AFP_INFO_SIZE as u64 {
            return Ok(0);
        }
        let blob = self.blob()?;
        let n = buf.len().min(AFP_INFO_SIZE);
        buf[..n].copy_from_slice(&blob[..n]);
        Ok(n)
    }
    /// Bytes laid over the blob (the caller checked them, [`write`]).
    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        let mut blob = self.blob()?;
        let at = (offset as usize).min(AFP_INFO_SIZE);
        let n = data.len().min(AFP_INFO_SIZE - at);
        blob[at..at + n].copy_from_slice(&data[..n]);
        self.store(&blob)?;
        Ok(data.len())
    }
    fn sync(&self) -> FsResult<()> {
        Ok(())
    }
    /// Truncating to 60 bytes or less changes nothing (the caller refuses more).
    fn set_len(&self, len: u64) -> FsResult<()> {
        if len > AFP_INFO_SIZE as u64 {
            return Err(FsError::TooBig);
        }
        Ok(())
    }
    fn set_allocation(&self, _size: u64) -> FsResult<()> {
        Ok(())
    }
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.inner.set_dos_attributes(attrs)
    }
    fn list_names(&self) -> FsResult<Vec<String>> {
        self.inner.list_names()
    }
    fn stat_entry(&self, name: &str) -> FsResult<FileAttr> {
        self.inner.stat_entry(name)
    }
    fn read_dir(&self) -> FsResult<Vec<DirEntry>> {
        self.inner.read_dir()
    }
    fn open_stream(&self, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
        self.inner.open_stream(name, mode, write)
    }
    fn stream_name(&self) -> Option<String> {
        self.inner.stream_name()
    }
    fn remove_stream(&self, name: &str) -> FsResult<()> {
        self.inner.remove_stream(name)
    }
    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        self.inner.rename_stream(from, to, replace)
    }
    fn remove_all_streams(&self) -> FsResult<()> {
        self.inner.remove_all_streams()
    }
}

/// How a stream closing with `remove` (its delete pending, its last
/// open gone) is removed on a `fruit` share: `None` to keep it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Removal {
    /// The stream itself.
    Stream,
    /// The file's Netatalk metadata.
    Netatalk,
    /// The file's AppleDouble `._` file.
    AppleDouble,
}

/// What the close of stream `name` (of kind `afp`) removes: an AfpInfo in
/// Netatalk metadata goes when its delete is due; an AfpInfo stream also
/// when the last open leaves no 60 bytes stored (a placeholder); a resource
/// fork only when it is empty.
pub(crate) fn at_close(
    fruit: Option<&Fruit>,
    node: &dyn Node,
    name: &str,
    afp: Afp,
    remove: bool,
    last_open: bool,
) -> Option<Removal> {
    let size = || node.find_stream(name).ok().flatten().map_or(0, |s| s.size);
    let gone = match afp {
        Afp::None => remove,
        Afp::Info if fruit.is_some_and(|f| f.metadata == Metadata::Netatalk) => {
            return remove.then_some(Removal::Netatalk)
        }
        Afp::Info => remove || (last_open && !is_stored_info(size())),
        // A fork is deleted only when empty (macOS ignores the delete of one
        // that holds data).
        Afp::Resource => {
            let empty = remove && node.size().unwrap_or(0) == 0;
            return match fruit.map(|f| f.resource) {
                Some(Resource::File) => empty.then_some(Removal::AppleDouble),
                _ => empty.then_some(Removal::Stream),
            };
        }
    };
    gone.then_some(Removal::Stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_vfs::memory::MemShare;
    use ringshare_vfs::{OpenOptions, RelPath, Share};

    fn info_node() -> InfoNode {
        let m = MemShare::new();
        let who = ringshare_vfs::server_who();
        let mut o = OpenOptions::read_existing();
        (o.mode, o.write) = (OpenMode::CreateNew, true);
        let f = m
            .open(&who, &RelPath::from_components(["f"]).unwrap(), &o)
            .unwrap()
            .node;
        InfoNode::new(
            f.open_stream(AFPINFO_STREAM, OpenMode::CreateNew, true)
                .unwrap()
                .node,
        )
    }

    fn info(finder: &[u8]) -> Vec<u8> {
        let mut b = default_info().to_vec();
        b[16..16 + finder.len()].copy_from_slice(finder);
        b
    }

    #[test]
    fn a_placeholder_reads_as_the_default_blob_whatever_the_offset_below_61() {
        let n = info_node();
        let mut b = [0u8; 8];
        assert_eq!(n.read_at(&mut b, 16).unwrap(), 8);
        assert_eq!(&b, b"AFP\0\0\0\x01\0");
        assert_eq!(n.read_at(&mut b, 61).unwrap(), 0);
        assert_eq!(n.stat().unwrap().size, 60);
    }

    #[test]
    fn writes_follow_the_afp_rules() {
        let n = info_node();
        let bad = |off, d: &[u8]| write(&n, off, d) == Err(NtStatus::INVALID_PARAMETER);
        assert!(bad(0, b"AF"), "shorter than 3");
        assert!(bad(0, &[0u8; 60]), "not starting with AFP");
        assert!(bad(30, b"AFP\0"), "short and not at 0");
        assert_eq!(
            write(&n, 0, b"AFP\0\0\0\x01\0"),
            Ok((8, false)),
            "16 bytes or less: nothing stored"
        );
        assert_eq!(n.inner.size().unwrap(), 0, "nothing stored");
        assert_eq!(write(&n, 0, &info(b"TEXTttxt")), Ok((60, false)));
        assert_eq!(n.inner.size().unwrap(), 60);
        let mut b = [0u8; 60];
        n.read_at(&mut b, 0).unwrap();
        assert_eq!(&b[16..24], b"TEXTttxt");
        let mut long = info(b"SMB,OLE!");
        long.extend_from_slice(&[9u8; 100]);
        assert_eq!(
            write(&n, 10000, &long),
            Ok((160, false)),
            "60 bytes stored from offset 0"
        );
        assert_eq!(n.inner.size().unwrap(), 60);
        assert_eq!(
            write(&n, 0, &info(&[])),
            Ok((60, true)),
            "zero FinderInfo: deleted at close"
        );
    }
}
