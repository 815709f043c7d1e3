//! Apple's SMB2 extensions as Samba's `vfs_fruit` serves them (macOS
//! Finder and Time Machine): the AAPL create context, file ids of zero,
//! and a Time Machine share's size. [MS-SMB2] has no AAPL; the layouts
//! and rules follow Samba 4.17's behaviour (read, not copied) so an
//! admin's `fruit:` options mean the same here.
//!
//! AAPL is negotiated per connection by the first CREATE carrying the
//! context on a share with `fruit` in its `vfs objects`; what it turns
//! on afterwards is the connection's ([`Aapl`]).

use ringshare_wire::NtStatus;

pub mod adouble;
pub mod afp;
pub mod netatalk;
pub mod nfs;

pub use crate::config::{Fruit, Metadata, Resource};

/// What AAPL turned on for a connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Aapl {
    /// The client negotiated AAPL.
    pub negotiated: bool,
    /// Directory listings carry Apple's attributes in place of EaSize and
    /// the short name (kAAPL_SUPPORTS_READ_DIR_ATTR).
    pub readdir_attr: bool,
    /// A server-side copy of no chunks copies the whole file with its
    /// streams (kAAPL_SUPPORTS_OSX_COPYFILE, `fruit:copyfile`).
    pub copyfile: bool,
}

/// File ids shown as 0: the connection negotiated AAPL on a share with
/// `fruit:zero_file_id` (as Samba; macOS then keeps its own ids).
pub fn zero_ids(aapl: &Aapl, share: &crate::config::ShareDef) -> bool {
    aapl.negotiated && share.fruit.as_ref().is_some_and(|f| f.zero_file_id)
}

/// AAPL command codes and bits (Apple's names).
pub mod aapl {
    pub(crate) const SERVER_QUERY: u32 = 1;
    /// Request bitmap: server caps, volume caps, model string.
    pub(crate) const SERVER_CAPS: u64 = 0x01;
    pub(crate) const VOLUME_CAPS: u64 = 0x02;
    pub(crate) const MODEL_INFO: u64 = 0x04;
    /// Server caps.
    pub(crate) const SUPPORTS_READ_DIR_ATTR: u64 = 0x01;
    pub(crate) const SUPPORTS_OSX_COPYFILE: u64 = 0x02;
    pub(crate) const UNIX_BASED: u64 = 0x04;
    pub(crate) const SUPPORTS_NFS_ACE: u64 = 0x08;
    /// Volume caps.
    pub const SUPPORTS_RESOLVE_ID: u64 = 0x01;
    pub const CASE_SENSITIVE: u64 = 0x02;
    pub(crate) const FULL_SYNC: u64 = 0x04;
}

/// The AAPL context's answer to a kAAPL_SERVER_QUERY `request` (24 bytes:
/// command, reserved, request bitmap, client caps), and what it turns on.
/// `named_streams`: the share has streams (readdir attributes need them).
/// Any other length or command: INVALID_PARAMETER (as Samba).
pub fn server_query(
    fruit: &Fruit,
    request: &[u8],
    named_streams: bool,
) -> Result<(Vec<u8>, Aapl), NtStatus> {
    if request.len() != 24 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let u32_at = |o: usize| {
        request
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        request
            .get(o..o + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
    };
    if u32_at(0) != Some(aapl::SERVER_QUERY) {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    let wanted = u64_at(8).unwrap_or(0);
    let client_caps = u64_at(16).unwrap_or(0);
    let mut on = Aapl {
        negotiated: true,
        ..Aapl::default()
    };
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&aapl::SERVER_QUERY.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&wanted.to_le_bytes());
    if wanted & aapl::SERVER_CAPS != 0 {
        let mut caps = aapl::UNIX_BASED;
        if client_caps & aapl::SUPPORTS_READ_DIR_ATTR != 0 && named_streams {
            caps |= aapl::SUPPORTS_READ_DIR_ATTR;
            on.readdir_attr = true;
        }
        if fruit.copyfile {
            caps |= aapl::SUPPORTS_OSX_COPYFILE;
            on.copyfile = true;
        }
        if fruit.nfs_aces {
            caps |= aapl::SUPPORTS_NFS_ACE;
        }
        out.extend_from_slice(&caps.to_le_bytes());
    }
    if wanted & aapl::VOLUME_CAPS != 0 {
        // Names are matched ignoring case: not CASE_SENSITIVE.
        let caps = if fruit.time_machine {
            aapl::FULL_SYNC
        } else {
            0
        };
        out.extend_from_slice(&caps.to_le_bytes());
    }
    if wanted & aapl::MODEL_INFO != 0 {
        let model: Vec<u8> = fruit
            .model
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&u32::try_from(model.len()).unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&model);
    }
    Ok((out, on))
}

/// `AFP_AfpInfo`: Apple's 60-byte metadata stream (signature "AFP\0",
/// version, backup time, 32 bytes of FinderInfo at 16, ProDOS info).
pub const AFPINFO_STREAM: &str = "AFP_AfpInfo";
/// `AFP_Resource`: the resource fork.
pub const AFPRESOURCE_STREAM: &str = "AFP_Resource";
/// Seconds from the Unix epoch to 2000-01-01 UTC, Apple's date origin.
const AD_DATE_DELTA: i64 = 946_684_800;
/// An Apple date meaning "never" or "unknown".
const AD_DATE_START: u32 = 0x8000_0000;

/// Apple's attributes of directory entry `name` of `dir` (the readdir
/// attributes of AAPL, as Samba sends them): the maximal access the user
/// would get, and the resource fork's length, the compressed FinderInfo
/// (type and creator for files, Finder flags, extended flags, the date
/// added, big-endian seconds since 2000) and the Unix mode. Metadata comes
/// from the `AFP_AfpInfo` and `AFP_Resource` streams (`fruit:metadata =
/// stream`, `fruit:resource = stream`); an entry that cannot be opened
/// shows none.
pub fn dir_attr(
    f: &Fruit,
    share: &crate::config::ShareDef,
    who: &ringshare_vfs::Who,
    dir: &ringshare_vfs::RelPath,
    name: &str,
    attr: &ringshare_vfs::FileAttr,
) -> (u32, ringshare_wire::fscc::AppleDirAttr) {
    use ringshare_vfs::{FileKind, OpenMode, OpenOptions};
    // Resource fork length (8 bytes LE), then the compressed FinderInfo:
    // type, creator, Finder flags, extended flags, date added (BE).
    let mut short = [0u8; 24];
    short[20..24].copy_from_slice(&AD_DATE_START.to_be_bytes());
    let mode_type = match attr.kind {
        FileKind::Directory => 0o040000,
        FileKind::Symlink => 0o120000,
        _ => 0o100000,
    };
    let unix_mode = if f.nfs_aces {
        ((attr.mode & 0o7777) | mode_type) as u16
    } else {
        0
    };
    let mut max_access = crate::files::access::FILE_READ_ATTRIBUTES;
    let path = dir.join(name).ok();
    let mut opts = OpenOptions::read_existing();
    opts.read = false;
    let node = path
        .as_ref()
        .and_then(|p| share.backend.open(who, p, &opts).ok())
        .map(|o| o.node);
    if let (Some(node), Some(path)) = (node, path) {
        if let Ok(access) = node.access() {
            let may_delete = share.backend.may_delete(who, &path).unwrap_or(false);
            max_access = crate::files::access::rights_of(access, attr.is_dir(), may_delete);
        }
        let fork = match f.resource {
            Resource::Stream => node
                .find_stream(AFPRESOURCE_STREAM)
                .ok()
                .flatten()
                .map_or(0, |s| s.size),
            // A `._` file macOS wrote is taken in first (as Samba does in
            // listings); that look also gives the fork's length.
            Resource::File if attr.kind == FileKind::File => {
                let backend = share.backend.as_ref();
                adouble::convert(backend, who, &path, &node, f)
                    .unwrap_or_else(|_| adouble::fork_len(backend, who, &path))
            }
            _ => 0,
        };
        short[0..8].copy_from_slice(&fork.to_le_bytes());
        let finder: Option<[u8; 32]> = match f.metadata {
            Metadata::Stream => node
                .open_stream(AFPINFO_STREAM, OpenMode::Existing, false)
                .ok()
                .and_then(|s| {
                    let mut b = [0u8; 60];
                    (s.node.read_at(&mut b, 0).ok()? == 60).then_some(b)
                })
                .and_then(|b| b[16..48].try_into().ok()),
            Metadata::Netatalk => node
                .netatalk_metadata()
                .ok()
                .flatten()
                .and_then(|m| netatalk::finder_info(&m)),
        };
        if let Some(finder) = finder {
            if attr.kind == FileKind::File {
                short[8..16].copy_from_slice(&finder[0..8]);
            }
            short[16..18].copy_from_slice(&finder[8..10]);
            short[18..20].copy_from_slice(&finder[24..26]);
            let born = attr.btime.unwrap_or(attr.mtime.min(attr.ctime)) / 1_000_000_000;
            let added = u32::try_from(born as i64 - AD_DATE_DELTA).unwrap_or(0);
            short[20..24].copy_from_slice(&added.to_be_bytes());
        }
    }
    (
        max_access,
        ringshare_wire::fscc::AppleDirAttr {
            short_name: short,
            unix_mode,
        },
    )
}

/// `AFP_Resource` is refused (NOT_SUPPORTED) with `fruit:resource = xattr`
/// (Netatalk's resource fork xattr, reached through Solaris' attropen();
/// Samba fails every such open on Linux too).
pub fn check_afp_stream(f: &Fruit, name: &str) -> Result<(), NtStatus> {
    if name.eq_ignore_ascii_case(AFPRESOURCE_STREAM) && f.resource == Resource::Xattr {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    Ok(())
}

/// The share keeps resource forks in AppleDouble `._` files, which follow
/// their files' deletes and renames.
pub fn keeps_appledouble(share: &crate::config::ShareDef) -> bool {
    share
        .fruit
        .as_ref()
        .is_some_and(|f| f.resource == Resource::File)
}

/// `._` files are hidden from clients (`fruit:veto_appledouble`): a name
/// this is true for is not listed and not found.
pub fn vetoed(share: &crate::config::ShareDef, name: &str) -> bool {
    name.starts_with("._")
        && share
            .fruit
            .as_ref()
            .is_some_and(|f| f.resource == Resource::File && f.veto_appledouble)
}

/// One end of a [`copyfile`]: an open file, its share, its user and its path now.
pub struct CopyEnd<'a> {
    pub node: &'a std::sync::Arc<dyn ringshare_vfs::Node>,
    pub share: &'a crate::config::ShareDef,
    pub who: &'a ringshare_vfs::Who,
    pub path: ringshare_vfs::RelPath,
}

/// macOS's copyfile (a server-side copy of no chunks after AAPL with
/// `fruit:copyfile`, as Samba): the whole file, every named stream, and
/// the Finder info and resource fork where fruit keeps them (Netatalk
/// metadata, an AppleDouble `._` file); returns the file's bytes copied.
pub fn copyfile(src: CopyEnd<'_>, dst: CopyEnd<'_>) -> Result<u64, NtStatus> {
    use crate::fsmap::status_of;
    use ringshare_vfs::OpenMode;
    let (s, d) = (src.node.as_ref(), dst.node.as_ref());
    let size = s.size().map_err(status_of)?;
    d.set_len(0).map_err(status_of)?;
    let n = d.copy_range(s, 0, 0, size).map_err(status_of)?;
    for st in s.list_streams().map_err(status_of)? {
        let from = s
            .open_stream(&st.name, OpenMode::Existing, false)
            .map_err(status_of)?
            .node;
        let to = d
            .open_stream(&st.name, OpenMode::TruncateOrCreate, true)
            .map_err(status_of)?
            .node;
        to.copy_range(from.as_ref(), 0, 0, st.size)
            .map_err(status_of)?;
    }
    if let Some(meta) = s.netatalk_metadata().map_err(status_of)? {
        d.set_netatalk_metadata(Some(&meta)).map_err(status_of)?;
    }
    if keeps_appledouble(src.share) && keeps_appledouble(dst.share) {
        let (sp, dp) = (src.path, dst.path);
        let backend = src.share.backend.as_ref();
        if let Ok((from, _)) = adouble::open(backend, src.who, &sp, src.node, false, false) {
            let len = from.size().map_err(status_of)?;
            if len > 0 {
                let dbackend = dst.share.backend.as_ref();
                let (to, _) = adouble::open(dbackend, dst.who, &dp, dst.node, true, true)
                    .map_err(status_of)?;
                to.set_len(0).map_err(status_of)?;
                to.copy_range(from.as_ref(), 0, 0, len).map_err(status_of)?;
            }
        }
    }
    Ok(n)
}

/// Most bytes of a sparse bundle's `Info.plist` read for its band size.
const INFO_PLIST_BYTES_MAX: usize = 64 * 1024;

/// A Time Machine share with `fruit:time machine max size` reports that
/// size, less what its sparse bundles hold (each `*.sparsebundle`
/// directory at the share's top: its `bands` entries times the
/// `band-size` of its `Info.plist`), in 1 KiB units, as Samba does. A
/// bundle being made (no readable Info.plist or bands yet) counts 0.
pub fn time_machine_size(
    f: &Fruit,
    share: &dyn ringshare_vfs::Share,
    who: &ringshare_vfs::Who,
    st: &mut ringshare_vfs::FsStat,
) {
    if !f.time_machine || f.time_machine_max_size == 0 {
        return;
    }
    let used = sparse_bundles_size(share, who);
    let unit = 1024;
    st.block_size = unit;
    st.total_blocks = f.time_machine_max_size / unit;
    let free = f.time_machine_max_size.saturating_sub(used) / unit;
    st.free_blocks = free;
    st.avail_blocks = free;
}

fn sparse_bundles_size(share: &dyn ringshare_vfs::Share, who: &ringshare_vfs::Who) -> u64 {
    use ringshare_vfs::{OpenOptions, RelPath};
    let open_dir = |p: &RelPath| {
        let mut o = OpenOptions::read_existing();
        o.directory = true;
        share.open(who, p, &o).ok().map(|d| d.node)
    };
    let Some(root) = open_dir(&RelPath::root()) else {
        return 0;
    };
    let mut total = 0u64;
    for name in root.list_names().unwrap_or_default() {
        if !name.ends_with("sparsebundle") {
            continue;
        }
        let Ok(bundle) = RelPath::root().join(&name) else {
            continue;
        };
        let Some(band_size) = bundle
            .join("Info.plist")
            .ok()
            .and_then(|p| share.open(who, &p, &OpenOptions::read_existing()).ok())
            .and_then(|f| {
                let mut buf = vec![0u8; INFO_PLIST_BYTES_MAX];
                let n = f.node.read_at(&mut buf, 0).ok()?;
                band_size(&String::from_utf8_lossy(&buf[..n]))
            })
        else {
            continue;
        };
        let Some(bands) = bundle.join("bands").ok().and_then(|p| open_dir(&p)) else {
            continue;
        };
        let n = bands.list_names().map_or(0, |v| v.len() as u64);
        total = total.saturating_add(n.saturating_mul(band_size));
    }
    total
}

/// The `band-size` of a sparse bundle's Info.plist: the integer after the
/// `<key>band-size</key>` line.
fn band_size(plist: &str) -> Option<u64> {
    let mut lines = plist
        .lines()
        .skip_while(|l| !l.contains("<key>band-size</key>"));
    lines.next()?;
    let v = lines.next()?.trim();
    v.strip_prefix("<integer>")?
        .strip_suffix("</integer>")?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(bitmap: u64, client_caps: u64) -> Vec<u8> {
        let mut q = Vec::new();
        q.extend_from_slice(&1u32.to_le_bytes());
        q.extend_from_slice(&0u32.to_le_bytes());
        q.extend_from_slice(&bitmap.to_le_bytes());
        q.extend_from_slice(&client_caps.to_le_bytes());
        q
    }

    #[test]
    fn a_server_query_is_answered_with_caps_volume_caps_and_the_model() {
        let f = Fruit {
            time_machine: true,
            ..Fruit::default()
        };
        let (out, on) = server_query(&f, &query(7, aapl::SUPPORTS_READ_DIR_ATTR), true).unwrap();
        assert!(on.negotiated && on.readdir_attr);
        assert_eq!(&out[0..4], &1u32.to_le_bytes());
        assert_eq!(&out[8..16], &7u64.to_le_bytes());
        let caps = u64::from_le_bytes(out[16..24].try_into().unwrap());
        assert_eq!(
            caps,
            aapl::UNIX_BASED | aapl::SUPPORTS_READ_DIR_ATTR | aapl::SUPPORTS_NFS_ACE
        );
        let vol = u64::from_le_bytes(out[24..32].try_into().unwrap());
        assert_eq!(vol, aapl::FULL_SYNC);
        assert_eq!(&out[32..36], &[0; 4]);
        assert_eq!(&out[36..40], &16u32.to_le_bytes());
        let model: Vec<u16> = out[40..]
            .chunks(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect();
        assert_eq!(String::from_utf16(&model).unwrap(), "MacSamba");
    }

    #[test]
    fn only_what_is_asked_is_answered_and_readdir_attributes_need_streams() {
        let (out, on) = server_query(
            &Fruit::default(),
            &query(1, aapl::SUPPORTS_READ_DIR_ATTR),
            false,
        )
        .unwrap();
        assert_eq!(out.len(), 24);
        assert!(!on.readdir_attr);
    }

    #[test]
    fn the_band_size_is_read_from_an_info_plist() {
        let plist =
            "<dict>\n        <key>band-size</key>\n        <integer>8192</integer>\n</dict>\n";
        assert_eq!(band_size(plist), Some(8192));
        assert_eq!(
            band_size("<dict>\n<key>other</key>\n<integer>1</integer>\n"),
            None
        );
    }

    #[test]
    fn a_time_machine_share_reports_its_max_size_less_its_bands() {
        use ringshare_vfs::memory::MemShare;
        use ringshare_vfs::{OpenMode, OpenOptions, RelPath, Share};
        let m = MemShare::new();
        let who = ringshare_vfs::server_who();
        let mk = |p: &str, dir: bool, data: &[u8]| {
            let mut o = OpenOptions::read_existing();
            (o.mode, o.write, o.directory) = (OpenMode::CreateNew, true, dir);
            let path = RelPath::from_components(p.split('/')).unwrap();
            let n = m.open(&who, &path, &o).unwrap().node;
            if !data.is_empty() {
                n.write_at(data, 0).unwrap();
            }
        };
        mk("b.sparsebundle", true, b"");
        mk(
            "b.sparsebundle/Info.plist",
            false,
            b"<key>band-size</key>\n<integer>8192</integer>\n",
        );
        mk("b.sparsebundle/bands", true, b"");
        mk("b.sparsebundle/bands/1", false, b"");
        mk("b.sparsebundle/bands/2", false, b"");
        let f = Fruit {
            time_machine: true,
            time_machine_max_size: 32 * 1024,
            ..Fruit::default()
        };
        let mut st = ringshare_vfs::FsStat::default();
        time_machine_size(&f, &m, &who, &mut st);
        assert_eq!(
            (st.block_size, st.total_blocks, st.avail_blocks),
            (1024, 32, 16)
        );
    }

    #[test]
    fn other_commands_and_lengths_are_invalid() {
        let mut q = query(1, 0);
        q[0] = 2;
        assert_eq!(
            server_query(&Fruit::default(), &q, true),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(
            server_query(&Fruit::default(), &query(1, 0)[..20], true),
            Err(NtStatus::INVALID_PARAMETER)
        );
    }
}
