//! `AFP_Resource` in an AppleDouble `._name` file beside the file
//! (`fruit:resource = file`, Samba's default; layout as Samba 4.17 writes
//! it, read and measured, not copied): a 26-byte header (magic 0x00051607,
//! version 2, 16 filler bytes, 2 entries), the entries (id, offset, length;
//! big-endian): Finder info (id 9) at 50, 32 bytes, and the resource fork
//! (id 2) at 82, then the fork's bytes. Files macOS writes may list the
//! entries the other way round and carry a longer Finder info; both are
//! read. The fork's length is the entry's, clipped to the file.

use std::sync::Arc;

use ringshare_vfs::{
    Access, FileAttr, FileKind, FsError, FsResult, Node, OpenMode, OpenOptions, Opened, RelPath,
    Share, Who,
};

/// Where the fork starts in a `._` file Samba (or ringshare) writes.
const FORK_OFFSET: u64 = 82;
const MAGIC: u32 = 0x0005_1607;
const VERSION: u32 = 0x0002_0000;
const ID_FORK: u32 = 2;
const ID_FINDER: u32 = 9;
/// Header bytes read to find the entries (macOS packs xattrs into a long
/// Finder info entry after them; those are not read).
const HEADER_READ_MAX: usize = 26 + 12 * 16;

/// The `._` file of the file at `path` (a regular file's, in its directory).
pub fn sidecar(path: &RelPath) -> Option<RelPath> {
    let name = path.file_name()?;
    path.parent()?.join(&format!("._{name}")).ok()
}

/// A fresh header: no fork, zero Finder info.
pub fn header() -> [u8; FORK_OFFSET as usize] {
    let mut b = [0u8; FORK_OFFSET as usize];
    b[0..4].copy_from_slice(&MAGIC.to_be_bytes());
    b[4..8].copy_from_slice(&VERSION.to_be_bytes());
    b[8..24].copy_from_slice(b"Netatalk        ");
    b[24..26].copy_from_slice(&2u16.to_be_bytes());
    b[26..30].copy_from_slice(&ID_FORK.to_be_bytes());
    b[30..34].copy_from_slice(&(FORK_OFFSET as u32).to_be_bytes());
    b[38..42].copy_from_slice(&ID_FINDER.to_be_bytes());
    b[42..46].copy_from_slice(&50u32.to_be_bytes());
    b[46..50].copy_from_slice(&32u32.to_be_bytes());
    b
}

/// Where the fork's entry is: (offset of its length field in the file,
/// fork offset, fork length as written). `None` for a file that is not a
/// valid AppleDouble with a Finder info and a fork entry.
fn fork_entry(h: &[u8]) -> Option<(u64, u64, u64)> {
    let be32 = |at: usize| {
        h.get(at..at + 4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    if be32(0)? != MAGIC || be32(4)? != VERSION {
        return None;
    }
    let count = u16::from_be_bytes([*h.get(24)?, *h.get(25)?]) as usize;
    let (mut fork, mut finder) = (None, false);
    for i in 0..count {
        let at = 26 + 12 * i;
        let (id, off, len) = (be32(at)?, be32(at + 4)?, be32(at + 8)?);
        match id {
            ID_FINDER if off == 50 && len >= 32 => finder = true,
            ID_FORK if off >= 82 => fork = Some((at as u64 + 8, u64::from(off), u64::from(len))),
            _ => {}
        }
    }
    fork.filter(|_| finder)
}

/// The fork of a `._` file open as `ad`: (length field offset, fork offset,
/// fork length clipped to the file).
fn fork_of(ad: &dyn Node) -> FsResult<Option<(u64, u64, u64)>> {
    let mut h = [0u8; HEADER_READ_MAX];
    let n = ad.read_at(&mut h, 0)?;
    let Some((field, off, len)) = fork_entry(&h[..n]) else {
        return Ok(None);
    };
    let size = ad.size()?;
    Ok(Some((field, off, len.min(size.saturating_sub(off)))))
}

/// The resource fork's length of the file at `path` (0 when there is no
/// valid `._` file).
pub fn fork_len(share: &dyn Share, who: &Who, path: &RelPath) -> u64 {
    let Some(ad) = sidecar(path) else {
        return 0;
    };
    share
        .open(who, &ad, &OpenOptions::read_existing())
        .ok()
        .and_then(|o| fork_of(o.node.as_ref()).ok().flatten())
        .map_or(0, |(_, _, len)| len)
}

/// Open the resource fork of the file at `path` (open as `file`) for a
/// CREATE: `exists` says whether a valid `._` file was there; `create`
/// makes one when it was not; `write`: the node may change the fork.
pub fn open(
    share: &dyn Share,
    who: &Who,
    path: &RelPath,
    file: &Arc<dyn Node>,
    create: bool,
    write: bool,
) -> FsResult<(Arc<dyn Node>, bool)> {
    let ad_path = sidecar(path).ok_or(FsError::NotFound)?;
    let mode = file.stat_without_dos()?.mode & 0o666;
    let mut opts = OpenOptions::read_existing();
    opts.write = write || create;
    opts.non_directory = true;
    let existing = match share.open(who, &ad_path, &opts) {
        Ok(o) => Some(o.node),
        Err(FsError::NotFound) => None,
        Err(e) => return Err(e),
    };
    let valid = match &existing {
        Some(n) => fork_of(n.as_ref())?.is_some(),
        None => false,
    };
    let ad = match (existing, create) {
        (Some(n), _) if valid => n,
        (_, false) => return Err(FsError::NotFound),
        (existing, true) => {
            let n = match existing {
                Some(n) => n,
                None => {
                    opts.mode = OpenMode::CreateNew;
                    opts.create_mode = mode | 0o600;
                    share.open(who, &ad_path, &opts)?.node
                }
            };
            n.set_len(0)?;
            n.write_at(&header(), 0)?;
            n
        }
    };
    Ok((
        Arc::new(ForkNode {
            ad,
            file: Arc::clone(file),
        }),
        valid,
    ))
}

/// `AFP_Resource` read and written in a `._` file; the file's metadata.
#[derive(Debug)]
pub(crate) struct ForkNode {
    ad: Arc<dyn Node>,
    file: Arc<dyn Node>,
}

impl ForkNode {
    fn fork(&self) -> FsResult<(u64, u64, u64)> {
        fork_of(self.ad.as_ref())?.ok_or(FsError::NotFound)
    }

    fn set_fork_len(&self, field: u64, len: u64) -> FsResult<()> {
        let len = u32::try_from(len).map_err(|_| FsError::TooBig)?;
        self.ad.write_at(&len.to_be_bytes(), field).map(|_| ())
    }

    fn as_fork(&self, mut a: FileAttr) -> FsResult<FileAttr> {
        let (_, _, len) = self.fork()?;
        a.kind = FileKind::File;
        a.size = len;
        a.alloc_size = len;
        a.dos_attributes = a.dos_attributes.map(|d| d & !0x10);
        Ok(a)
    }
}

impl Node for ForkNode {
    ringshare_vfs::forward_file_metadata!(file);

    fn stat(&self) -> FsResult<FileAttr> {
        self.as_fork(self.file.stat()?)
    }
    fn stat_without_dos(&self) -> FsResult<FileAttr> {
        self.as_fork(self.file.stat_without_dos()?)
    }
    fn size(&self) -> FsResult<u64> {
        Ok(self.fork()?.2)
    }
    fn who(&self) -> Option<&Who> {
        self.file.who()
    }
    fn access(&self) -> FsResult<Access> {
        self.file.access()
    }
    fn fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> FsResult<usize> {
        let (_, off, len) = self.fork()?;
        if offset >= len {
            return Ok(0);
        }
        let n = buf.len().min((len - offset) as usize);
        self.ad.read_at(&mut buf[..n], off + offset)
    }
    fn write_at(&self, data: &[u8], offset: u64) -> FsResult<usize> {
        let (field, off, len) = self.fork()?;
        let n = self.ad.write_at(data, off + offset)?;
        let end = offset + n as u64;
        if end > len {
            self.set_fork_len(field, end)?;
        }
        Ok(n)
    }
    fn sync(&self) -> FsResult<()> {
        self.ad.sync()
    }
    fn set_len(&self, len: u64) -> FsResult<()> {
        let (field, off, _) = self.fork()?;
        self.ad.set_len(off + len)?;
        self.set_fork_len(field, len)
    }
    fn set_allocation(&self, _size: u64) -> FsResult<()> {
        Ok(())
    }
    fn set_dos_attributes(&self, attrs: u32) -> FsResult<()> {
        self.file.set_dos_attributes(attrs)
    }
    ringshare_vfs::not_a_directory!();
    fn open_stream(&self, _name: &str, _mode: OpenMode, _write: bool) -> FsResult<Opened> {
        Err(FsError::InvalidName)
    }
}

/// Bytes of a `._` file read for its packed xattrs (Samba reads as many).
const XATTR_AREA_MAX: usize = 65_536;
/// "ATTR": macOS's packed-xattr header, after the first 32 bytes (and 2 of
/// padding) of a long Finder info entry.
const ATTR_MAGIC: u32 = 0x4154_5452;
const ATTR_HEADER_LEN: usize = 36;
const ATTR_ENTRIES_MAX: usize = 1024;

/// The characters Windows forbids in names, as macOS sends them (the
/// private-use range U+F001-U+F027): an xattr name becomes a stream name.
fn to_windows_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            '\u{1}'..='\u{1f}' => char::from_u32(0xF000 + c as u32).unwrap_or(c),
            '"' => '\u{F020}',
            '*' => '\u{F021}',
            ':' => '\u{F022}',
            '<' => '\u{F023}',
            '>' => '\u{F024}',
            '?' => '\u{F025}',
            '\\' => '\u{F026}',
            '|' => '\u{F027}',
            c => c,
        })
        .collect()
}

/// The xattrs macOS packed into a long Finder info entry starting at
/// `finder_off` of `area` (the file's first bytes): (name, value) pairs,
/// or `None` for an area Samba would not read.
fn packed_xattrs(area: &[u8], finder_off: usize) -> Option<Vec<(String, Vec<u8>)>> {
    let be32 = |at: usize| {
        area.get(at..at + 4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]) as usize)
    };
    let h = finder_off + 32 + 2;
    if be32(h)? != ATTR_MAGIC as usize {
        return None;
    }
    let (total, data_start, data_len) = (be32(h + 8)?, be32(h + 12)?, be32(h + 16)?);
    let count = u16::from_be_bytes([*area.get(h + 34)?, *area.get(h + 35)?]) as usize;
    if total > XATTR_AREA_MAX
        || total > area.len()
        || data_start < h + ATTR_HEADER_LEN
        || data_start.checked_add(data_len)? > total
        || count > ATTR_ENTRIES_MAX
    {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    let mut at = h + ATTR_HEADER_LEN;
    for _ in 0..count {
        at = (at + 3) & !3;
        let (off, len) = (be32(at)?, be32(at + 4)?);
        let name_len = *area.get(at + 10)? as usize;
        if name_len == 0 || off.checked_add(len)? > total || at + 11 + name_len > data_start {
            return None;
        }
        let raw = area.get(at + 11..at + 11 + name_len)?;
        let raw = raw.split(|b| *b == 0).next().unwrap_or_default();
        let name = std::str::from_utf8(raw).ok()?;
        out.push((to_windows_name(name), area.get(off..off + len)?.to_vec()));
        at += 11 + name_len;
    }
    Some(out)
}

/// A `._` file macOS wrote (its Finder info entry longer than 32 bytes with
/// packed xattrs, or its filler "Mac OS X"), turned into what ringshare and
/// Samba keep (as Samba's vfs_fruit does when such a file is met): each
/// packed xattr becomes a named stream of the file, the Finder info becomes
/// its `AFP_AfpInfo`, and the `._` file is rewritten with Samba's header and
/// the fork alone. Nothing happens for a `._` file Samba's way already
/// (it is only read); a `._` file that cannot be read is left alone.
/// Returns the resource fork's length (0 without a valid `._` file), so a
/// listing needs no second look at it.
pub fn convert(
    share: &dyn Share,
    who: &Who,
    path: &RelPath,
    file: &Arc<dyn Node>,
    fruit: &super::Fruit,
) -> FsResult<u64> {
    let Some(ad_path) = sidecar(path) else {
        return Ok(0);
    };
    let mut opts = OpenOptions::read_existing();
    opts.non_directory = true;
    let ad = match share.open(who, &ad_path, &opts) {
        Ok(o) => o.node,
        Err(_) => return Ok(0),
    };
    let size = ad.size()? as usize;
    let mut area = vec![0u8; size.min(XATTR_AREA_MAX)];
    let n = ad.read_at(&mut area, 0)?;
    area.truncate(n);
    let Some((_, fork_off, fork_len)) = fork_entry(&area) else {
        return Ok(0);
    };
    let fork_len = fork_len.min((size as u64).saturating_sub(fork_off));
    let finder_len = finder_entry_len(&area).unwrap_or(32);
    let from_macos = area.get(8..24) == Some(b"Mac OS X        ".as_slice());
    if finder_len <= 32 && !from_macos {
        return Ok(fork_len);
    }
    // Converting rewrites it: opened again for writing.
    opts.write = true;
    let ad = share.open(who, &ad_path, &opts)?.node;
    if finder_len > 32 {
        for (name, value) in packed_xattrs(&area, 50).unwrap_or_default() {
            if !ringshare_vfs::stream_name_is_valid(&name) {
                continue;
            }
            let s = file
                .open_stream(&name, OpenMode::TruncateOrCreate, true)?
                .node;
            s.write_at(&value, 0)?;
        }
    }
    if from_macos {
        let mut finder = [0u8; 32];
        finder.copy_from_slice(area.get(50..82).unwrap_or(&[0; 32]));
        let node: Box<dyn Node> = match fruit.metadata {
            super::Metadata::Netatalk => Box::new(super::afp::InfoNode::netatalk(Arc::clone(file))),
            super::Metadata::Stream => Box::new(super::afp::InfoNode::new(
                file.open_stream(super::AFPINFO_STREAM, OpenMode::OpenOrCreate, true)?
                    .node,
            )),
        };
        let mut blob = super::afp::default_info();
        blob[16..48].copy_from_slice(&finder);
        node.write_at(&blob, 0)?;
    }
    // Samba's layout: the header, 32 bytes of Finder info, the fork at 82,
    // moved down in pieces (never the whole fork in memory: it may be
    // large; each piece is read before it is written, and the fork only
    // moves towards the start).
    let moved = ad.copy_range(ad.as_ref(), fork_off, FORK_OFFSET, fork_len)?;
    let mut head = header();
    head[50..82].copy_from_slice(area.get(50..82).unwrap_or(&[0; 32]));
    let len = u32::try_from(moved).map_err(|_| FsError::TooBig)?;
    head[34..38].copy_from_slice(&len.to_be_bytes());
    ad.write_at(&head, 0)?;
    ad.set_len(FORK_OFFSET + moved)?;
    Ok(moved)
}

/// The Finder info entry's length in a `._` header.
fn finder_entry_len(h: &[u8]) -> Option<u64> {
    let be32 = |at: usize| {
        h.get(at..at + 4)
            .map(|x| u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
    };
    let count = u16::from_be_bytes([*h.get(24)?, *h.get(25)?]) as usize;
    (0..count).find_map(|i| {
        let at = 26 + 12 * i;
        (be32(at)? == ID_FINDER).then(|| be32(at + 8).map(u64::from))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_vfs::memory::MemShare;

    #[test]
    fn a_fork_is_written_after_an_82_byte_header_that_keeps_its_length() {
        let m = MemShare::new();
        let who = ringshare_vfs::server_who();
        let p = RelPath::from_components(["d.txt"]).unwrap();
        let mut o = OpenOptions::read_existing();
        (o.mode, o.write) = (OpenMode::CreateNew, true);
        let file: Arc<dyn Node> = m.open(&who, &p, &o).unwrap().node;
        assert_eq!(
            open(&m, &who, &p, &file, false, true).err(),
            Some(FsError::NotFound)
        );
        let (fork, existed) = open(&m, &who, &p, &file, true, true).unwrap();
        assert!(!existed);
        assert_eq!(fork.size().unwrap(), 0);
        fork.write_at(b"0123456789", 10).unwrap();
        assert_eq!(fork.size().unwrap(), 20);
        let mut b = [0u8; 30];
        assert_eq!(fork.read_at(&mut b, 0).unwrap(), 20);
        assert_eq!(&b[10..20], b"0123456789");
        // On disk: the header Samba writes, the fork at 82.
        let ad = m
            .open(&who, &sidecar(&p).unwrap(), &OpenOptions::read_existing())
            .unwrap()
            .node;
        let mut raw = [0u8; 102];
        assert_eq!(ad.read_at(&mut raw, 0).unwrap(), 102);
        assert_eq!(&raw[0..8], &[0, 5, 0x16, 7, 0, 2, 0, 0]);
        assert_eq!(&raw[8..24], b"Netatalk        ");
        assert_eq!(&raw[26..38], &[0, 0, 0, 2, 0, 0, 0, 0x52, 0, 0, 0, 0x14]);
        assert_eq!(&raw[38..50], &[0, 0, 0, 9, 0, 0, 0, 0x32, 0, 0, 0, 0x20]);
        assert_eq!(&raw[92..102], b"0123456789");
        fork.set_len(1).unwrap();
        assert_eq!(fork_len(&m, &who, &p), 1);
        let (again, existed) = open(&m, &who, &p, &file, false, false).unwrap();
        assert!(existed);
        assert_eq!(again.size().unwrap(), 1);
    }

    /// A `._` file as macOS writes it: filler "Mac OS X", Finder info
    /// "TESTSLOW" with one packed xattr `foo:bar` = "baz", then the fork.
    fn macos_appledouble(fork: &[u8]) -> Vec<u8> {
        let mut xa = Vec::new(); // from offset 84: ATTR header, one entry, data
        let entry_at = 84 + 36;
        let name = b"foo:bar\0";
        let data_start = (entry_at + 11 + name.len() + 3) & !3;
        let total = data_start + 3;
        xa.extend_from_slice(&0x4154_5452u32.to_be_bytes());
        xa.extend_from_slice(&0u32.to_be_bytes());
        xa.extend_from_slice(&(total as u32).to_be_bytes());
        xa.extend_from_slice(&(data_start as u32).to_be_bytes());
        xa.extend_from_slice(&3u32.to_be_bytes());
        xa.extend_from_slice(&[0u8; 12]);
        xa.extend_from_slice(&0u16.to_be_bytes());
        xa.extend_from_slice(&1u16.to_be_bytes());
        xa.extend_from_slice(&(data_start as u32).to_be_bytes());
        xa.extend_from_slice(&3u32.to_be_bytes());
        xa.extend_from_slice(&0u16.to_be_bytes());
        xa.push(name.len() as u8);
        xa.extend_from_slice(name);
        let mut b = vec![0u8; 84];
        b[0..8].copy_from_slice(&[0, 5, 0x16, 7, 0, 2, 0, 0]);
        b[8..24].copy_from_slice(b"Mac OS X        ");
        b[24..26].copy_from_slice(&2u16.to_be_bytes());
        let finder_len = (total - 50) as u32;
        b[26..38].copy_from_slice(&[0, 0, 0, 9, 0, 0, 0, 50, 0, 0, 0, 0]);
        b[34..38].copy_from_slice(&finder_len.to_be_bytes());
        b[38..42].copy_from_slice(&2u32.to_be_bytes());
        b[42..46].copy_from_slice(&(total as u32).to_be_bytes());
        b[46..50].copy_from_slice(&(fork.len() as u32).to_be_bytes());
        b[50..58].copy_from_slice(b"TESTSLOW");
        b.extend_from_slice(&xa);
        b.resize(data_start, 0);
        b.extend_from_slice(b"baz");
        b.extend_from_slice(fork);
        b
    }

    #[test]
    fn a_macos_appledouble_file_becomes_streams_afpinfo_and_a_plain_fork() {
        let m = MemShare::new();
        let who = ringshare_vfs::server_who();
        let p = RelPath::from_components(["t"]).unwrap();
        let mut o = OpenOptions::read_existing();
        (o.mode, o.write) = (OpenMode::CreateNew, true);
        let file: Arc<dyn Node> = m.open(&who, &p, &o).unwrap().node;
        let ad = m.open(&who, &sidecar(&p).unwrap(), &o).unwrap().node;
        ad.write_at(&macos_appledouble(b"fork bytes"), 0).unwrap();
        let fork = convert(&m, &who, &p, &file, &super::super::Fruit::default()).unwrap();
        assert_eq!(fork, 10, "the fork's length after");
        let s = file
            .open_stream("foo\u{F022}bar", OpenMode::Existing, false)
            .unwrap();
        let mut b = [0u8; 8];
        assert_eq!(s.node.read_at(&mut b, 0).unwrap(), 3);
        assert_eq!(&b[..3], b"baz");
        let meta = file.netatalk_metadata().unwrap().expect("Finder info kept");
        assert_eq!(
            &super::super::netatalk::finder_info(&meta).unwrap()[..8],
            b"TESTSLOW"
        );
        let (fork, existed) = open(&m, &who, &p, &file, false, false).unwrap();
        assert!(existed);
        let mut f = [0u8; 20];
        assert_eq!(fork.read_at(&mut f, 0).unwrap(), 10);
        assert_eq!(&f[..10], b"fork bytes");
        assert_eq!(ad.size().unwrap(), 92, "82-byte header and the fork");
        let mut filler = [0u8; 16];
        ad.read_at(&mut filler, 8).unwrap();
        assert_eq!(&filler, b"Netatalk        ", "converted once");
    }
}
