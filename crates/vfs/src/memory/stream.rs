//! Named data streams ([`Node::open_stream`]) of a [`MemShare`]'s files and
//! directories, with the POSIX backend's rules: names as
//! [`stream_name_is_valid`] allows, kept as created, at most
//! [`STREAM_SIZE_MAX`] bytes each (`TooBig` past it, before anything
//! changes), counted against the share's capacity like file data. A stream
//! node holds its file open, so its stream lives on after the file is
//! unlinked, as a file's node does.

use super::*;
use crate::{
    data_writable, share_writable, stream_name_is_valid, stream_names_match, Access, StreamInfo,
    STREAM_SIZE_MAX,
};

/// The DOS attribute a directory's stored attributes may carry and its
/// streams do not show.
const ATTR_DIRECTORY: u32 = 0x10;

impl Inode {
    /// Where stream `name` (exactly as stored) is in `streams`.
    fn stream_at(&self, name: &str) -> Option<usize> {
        self.streams.iter().position(|(n, _)| n == name)
    }
}

impl State {
    /// Resize the data of stream `at` of inode `ino` to `len` (zeros after
    /// the old end), keeping within the capacity.
    fn resize_stream(&mut self, ino: u64, at: usize, len: usize) -> FsResult<()> {
        let old = self
            .inode(ino)?
            .streams
            .get(at)
            .map(|(_, d)| d.len())
            .ok_or(FsError::NotFound)?;
        if len > old {
            let growth = (len - old) as u64;
            if self.used_bytes.saturating_add(growth) > self.capacity_bytes {
                return Err(FsError::NoSpace);
            }
        }
        let data = &mut self
            .inode_mut(ino)?
            .streams
            .get_mut(at)
            .ok_or(FsError::NotFound)?
            .1;
        data.resize(len, 0);
        self.used_bytes = self.used_bytes - old as u64 + len as u64;
        Ok(())
    }

    /// Remove stream `at` of inode `ino`, giving back its bytes.
    fn drop_stream(&mut self, ino: u64, at: usize) -> FsResult<()> {
        let i = self.inode_mut(ino)?;
        if at >= i.streams.len() {
            return Err(FsError::NotFound);
        }
        let (_, data) = i.streams.remove(at);
        self.used_bytes = self.used_bytes.saturating_sub(data.len() as u64);
        Ok(())
    }

    /// The inode's change time moves (a stream made, emptied, renamed,
    /// removed or written, as the POSIX backend's xattr calls move it).
    fn touch_ctime(&mut self, ino: u64) -> FsResult<()> {
        let now = self.now();
        self.inode_mut(ino)?.ctime = now;
        Ok(())
    }
}

/// [`Node::list_streams`] of a file or directory, in the order created.
pub(super) fn list(node: &MemNode) -> FsResult<Vec<StreamInfo>> {
    let st = lock(&node.state);
    Ok(st
        .inode(node.ino)?
        .streams
        .iter()
        .map(|(name, data)| StreamInfo {
            name: name.clone(),
            size: data.len() as u64,
        })
        .collect())
}

/// [`Node::open_stream`] of a file or directory.
pub(super) fn open(node: &MemNode, name: &str, mode: OpenMode, write: bool) -> FsResult<Opened> {
    let mut st = lock(&node.state);
    st.take_fault(FaultOp::OpenStream, &[&node.path])?;
    if !stream_name_is_valid(name) {
        return Err(FsError::InvalidName);
    }
    if !matches!(node.kind, FileKind::File | FileKind::Directory) {
        return Err(FsError::AccessDenied);
    }
    let changes = matches!(
        mode,
        OpenMode::CreateNew | OpenMode::Truncate | OpenMode::TruncateOrCreate
    );
    if write || changes {
        share_writable(node.read_only)?;
    }
    let ino = node.ino;
    let at = st.inode(ino)?.stream_at(name);
    let create = |st: &mut State| -> FsResult<()> {
        share_writable(node.read_only)?;
        st.inode_mut(ino)?
            .streams
            .push((name.to_string(), Vec::new()));
        st.touch_ctime(ino)
    };
    let (created, truncated) = match (mode, at) {
        (OpenMode::Existing | OpenMode::OpenOrCreate, Some(_)) => (false, false),
        (OpenMode::Existing | OpenMode::Truncate, None) => return Err(FsError::NotFound),
        (OpenMode::CreateNew, Some(_)) => return Err(FsError::Exists),
        (OpenMode::CreateNew | OpenMode::OpenOrCreate | OpenMode::TruncateOrCreate, None) => {
            create(&mut st)?;
            (true, false)
        }
        (OpenMode::Truncate | OpenMode::TruncateOrCreate, Some(k)) => {
            st.resize_stream(ino, k, 0)?;
            st.touch_ctime(ino)?;
            (false, true)
        }
    };
    st.inode_mut(ino)?.opens += 1;
    let stream = MemStreamNode {
        base: MemNode {
            state: Arc::clone(&node.state),
            ino,
            path: node.path.clone(),
            kind: node.kind,
            readable: false,
            writable: false,
            read_only: node.read_only,
        },
        name: std::sync::RwLock::new(name.to_string()),
        write,
    };
    Ok(Opened {
        node: Arc::new(stream),
        created,
        truncated,
        attr: None,
        read: true,
        write,
    })
}

/// [`Node::remove_stream`] of a file or directory.
pub(super) fn remove(node: &MemNode, name: &str) -> FsResult<()> {
    share_writable(node.read_only)?;
    if !stream_name_is_valid(name) {
        return Err(FsError::InvalidName);
    }
    let mut st = lock(&node.state);
    let at = st
        .inode(node.ino)?
        .stream_at(name)
        .ok_or(FsError::NotFound)?;
    st.drop_stream(node.ino, at)?;
    st.touch_ctime(node.ino)
}

/// [`Node::rename_stream`] of a file or directory.
pub(super) fn rename(node: &MemNode, from: &str, to: &str, replace: bool) -> FsResult<()> {
    share_writable(node.read_only)?;
    if !stream_name_is_valid(from) || !stream_name_is_valid(to) {
        return Err(FsError::InvalidName);
    }
    let mut st = lock(&node.state);
    let ino = node.ino;
    let i = st.inode(ino)?;
    let at = i.stream_at(from).ok_or(FsError::NotFound)?;
    if from == to {
        return Ok(());
    }
    let targets = i
        .streams
        .iter()
        .enumerate()
        .filter(|(k, (n, _))| *k != at && stream_names_match(n, to))
        .count();
    if targets > 0 && !replace {
        return Err(FsError::Exists);
    }
    // The renamed stream keeps its place; the replaced ones go, whatever
    // their spelling.
    let i = st.inode_mut(ino)?;
    let (_, data) = i.streams.remove(at);
    let mut freed = 0usize;
    i.streams.retain(|(n, d)| {
        let replaced = stream_names_match(n, to);
        if replaced {
            freed += d.len();
        }
        !replaced
    });
    let at = at.min(i.streams.len());
    i.streams.insert(at, (to.to_string(), data));
    st.used_bytes = st.used_bytes.saturating_sub(freed as u64);
    st.touch_ctime(ino)
}

/// An open named stream of a [`MemShare`]'s file or directory
/// ([`Node::open_stream`]): it holds the file open and reads and writes the
/// stream's data; everything else is the file's.
pub struct MemStreamNode {
    /// The file, held open (its `Drop` closes it): metadata goes to it.
    base: MemNode,
    /// The stream's name as stored (a rename through the node changes it).
    name: std::sync::RwLock<String>,
    /// The open may change the stream's data.
    write: bool,
}

impl fmt::Debug for MemStreamNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemStreamNode")
            .field("ino", &self.base.ino)
            .field("path", &self.base.path)
            .field("name", &self.name())
            .finish()
    }
}

impl MemStreamNode {
    /// The stream's name now.
    fn name(&self) -> String {
        self.name.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn check_data_write(&self) -> FsResult<()> {
        data_writable(self.base.read_only, FileKind::File, self.write)
    }

    /// Where the stream is in its inode's list; `NotFound` once removed.
    fn at(&self, st: &State) -> FsResult<usize> {
        st.inode(self.base.ino)?
            .stream_at(&self.name())
            .ok_or(FsError::NotFound)
    }
}

impl Node for MemStreamNode {
    crate::forward_file_metadata!(base);

    /// The file's metadata as a file of the stream's size, without the
    /// DIRECTORY attribute a directory may store.
    fn stat(&self) -> FsResult<FileAttr> {
        let mut st = lock(&self.base.state);
        st.take_fault(FaultOp::Stat, &[&self.base.path])?;
        let at = self.at(&st)?;
        let size = st
            .inode(self.base.ino)?
            .streams
            .get(at)
            .map_or(0, |(_, d)| d.len() as u64);
        let attr = st.attr(self.base.ino)?;
        Ok(FileAttr {
            kind: FileKind::File,
            size,
            alloc_size: size,
            dos_attributes: attr.dos_attributes.map(|a| a & !ATTR_DIRECTORY),
            ..attr
        })
    }

    fn access(&self) -> FsResult<Access> {
        self.base.access()
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        let mut st = lock(&self.base.state);
        st.take_fault(FaultOp::Read, &[&self.base.path])?;
        let at = self.at(&st)?;
        let i = st.inode(self.base.ino)?;
        let data = i.streams.get(at).map(|(_, d)| d).ok_or(FsError::NotFound)?;
        Ok(read_from(data, offset, buf))
    }

    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        let mut st = lock(&self.base.state);
        st.take_fault(FaultOp::Write, &[&self.base.path])?;
        self.check_data_write()?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|end| *end <= STREAM_SIZE_MAX)
            .ok_or(FsError::TooBig)?;
        let (start, end) = (offset as usize, end as usize);
        let at = self.at(&st)?;
        let ino = self.base.ino;
        let len = st.inode(ino)?.streams.get(at).map_or(0, |(_, d)| d.len());
        if end > len {
            st.resize_stream(ino, at, end)?;
        }
        let dst = st
            .inode_mut(ino)?
            .streams
            .get_mut(at)
            .and_then(|(_, d)| d.get_mut(start..end))
            .ok_or(FsError::Io)?;
        dst.copy_from_slice(data);
        st.touch_ctime(ino)?;
        Ok(data.len())
    }

    fn sync(&self) -> FsResult<()> {
        let mut st = lock(&self.base.state);
        st.take_fault(FaultOp::Sync, &[&self.base.path])?;
        st.inode(self.base.ino).map(|_| ())
    }

    fn set_len(&self, len: u64) -> FsResult<()> {
        let mut st = lock(&self.base.state);
        st.take_fault(FaultOp::SetLen, &[&self.base.path])?;
        self.check_data_write()?;
        if len > STREAM_SIZE_MAX {
            return Err(FsError::TooBig);
        }
        let at = self.at(&st)?;
        st.resize_stream(self.base.ino, at, len as usize)?;
        st.touch_ctime(self.base.ino)
    }

    /// Nothing to reserve; a size past what a stream holds is `TooBig`.
    fn set_allocation(&self, size: u64) -> FsResult<()> {
        self.check_data_write()?;
        if size > STREAM_SIZE_MAX {
            return Err(FsError::TooBig);
        }
        Ok(())
    }

    /// The file's attributes; a directory's keep their DIRECTORY bit.
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        let attrs = if self.base.kind == FileKind::Directory {
            attrs | ATTR_DIRECTORY
        } else {
            attrs
        };
        self.base.set_dos_attributes(attrs)
    }

    crate::not_a_directory!();

    /// A stream has no streams.
    fn open_stream(&self, _name: &str, _mode: OpenMode, _write: bool) -> FsResult<Opened> {
        Err(FsError::InvalidName)
    }

    fn stream_name(&self) -> Option<String> {
        Some(self.name())
    }

    fn remove_stream(&self, name: &str) -> FsResult<()> {
        self.base.remove_stream(name)
    }

    fn rename_stream(&self, from: &str, to: &str, replace: bool) -> FsResult<()> {
        // (The name's lock is never held around the share's.)
        self.base.rename_stream(from, to, replace)?;
        let mut name = self.name.write().unwrap_or_else(|p| p.into_inner());
        if *name == from {
            *name = to.to_string();
        }
        Ok(())
    }

    fn remove_all_streams(&self) -> FsResult<()> {
        self.base.remove_all_streams()
    }
}
