//! The SMB3 POSIX extensions (`smb3 unix extensions`, Samba's option; the wire
//! forms are [`ringshare_wire::posix`]'s): what a POSIX open is and what it is
//! told about a file.
//!
//! A CREATE makes a POSIX open when its connection negotiated the extensions
//! (NEGOTIATE, under the `[global]` value) and the share has the option on and
//! the request carries the POSIX create context, as Samba decides. The context
//! gives the mode a new file is made with (under `create mask` / `directory
//! mask` and the force modes, as Samba applies them); the answer carries the
//! file's [`PosixCc`]. FILE_POSIX_INFORMATION (QUERY_INFO) and the POSIX
//! listing class (QUERY_DIRECTORY) are answered on a POSIX open only, else
//! INVALID_LEVEL (Samba's answer).
//!
//! Owner and group are SIDs: a domain's where a rid range holds the id, else
//! the Unix SIDs S-1-22-1-uid and S-1-22-2-gid (as ringshare shows owners in
//! security descriptors; Samba shows its own passdb users by their S-1-5-21
//! SIDs).

use ringshare_vfs::{FileAttr, FileKind, Special};
use ringshare_wire::consts::FileAttributes;
use ringshare_wire::fscc::dir_info::PosixEntry;
use ringshare_wire::posix::{self, FilePosixInfo, PosixCc};
use ringshare_wire::security::Sid;

use crate::cmd::reparse;
use crate::fileinfo;
use crate::identity::ShareRules;
use crate::server::ServerState;

/// The wire type of a file of kind `k`.
fn wire_type(k: FileKind) -> u32 {
    match k {
        FileKind::File => posix::TYPE_FILE,
        FileKind::Directory => posix::TYPE_DIR,
        FileKind::Symlink => posix::TYPE_SYMLINK,
        FileKind::Other(Special::Fifo) => posix::TYPE_FIFO,
        FileKind::Other(Special::CharDevice) => posix::TYPE_CHARDEV,
        FileKind::Other(Special::BlockDevice) => posix::TYPE_BLKDEV,
        FileKind::Other(Special::Socket) => posix::TYPE_SOCKET,
        FileKind::Other(Special::Unknown) => posix::TYPE_UNKNOWN,
    }
}

/// The reparse tag a POSIX client sees a file of kind `k` with: a symlink's, or
/// the NFS one for FIFOs, sockets and devices (Samba 4.22); none for others.
pub(crate) fn reparse_tag(k: FileKind) -> Option<u32> {
    match k {
        FileKind::Symlink => Some(posix::IO_REPARSE_TAG_SYMLINK),
        FileKind::Other(_) => Some(posix::IO_REPARSE_TAG_NFS),
        FileKind::File | FileKind::Directory => None,
    }
}

/// The attributes a POSIX client sees: a file with a reparse tag is
/// REPARSE_POINT alone (Samba 4.22), others as any client sees them.
fn attributes(attr: &FileAttr) -> u32 {
    match reparse_tag(attr.kind) {
        Some(_) => FileAttributes::REPARSE_POINT.0,
        None => fileinfo::attributes(attr),
    }
}

/// The SID of uid (`group` false) or gid `id`.
fn sid_of(server: &ServerState, group: bool, id: u32) -> Sid {
    match server.logons.sid_map.sid_of(id) {
        Some(s) => s,
        None if group => Sid::unix_group(id),
        None => Sid::unix_user(id),
    }
}

/// The POSIX part of a CREATE's answer (and of the information classes); `stored`: the
/// reparse data buffer a client stored with the file ([`crate::cmd::reparse::stored`]), whose
/// tag and type it then shows (Samba 4.22).
pub(crate) fn cc(server: &ServerState, attr: &FileAttr, stored: Option<&[u8]>) -> PosixCc {
    let kind = reparse_tag(attr.kind);
    let (tag, wire) = match stored.filter(|_| kind.is_none()) {
        Some(b) => (reparse::tag(b), reparse::posix_type(b)),
        None => (kind.unwrap_or(0), wire_type(attr.kind)),
    };
    PosixCc {
        nlinks: u32::try_from(attr.nlink).unwrap_or(u32::MAX),
        reparse_tag: tag,
        mode: posix::mode_to_wire(wire, attr.mode),
        owner: sid_of(server, false, attr.uid),
        group: sid_of(server, true, attr.gid),
    }
}

/// The POSIX fields a listing entry of the POSIX class carries.
pub(crate) fn entry(server: &ServerState, attr: &FileAttr, stored: Option<&[u8]>) -> PosixEntry {
    PosixEntry {
        // Samba sends st_dev cut to 32 bits.
        device: attr.dev as u32,
        cc: cc(server, attr, stored),
    }
}

/// FILE_POSIX_INFORMATION of a file; `file_id`: the id shown for it.
pub(crate) fn info(
    server: &ServerState,
    attr: &FileAttr,
    stored: Option<&[u8]>,
    file_id: u64,
) -> FilePosixInfo {
    let [c, la, lw, ch] = fileinfo::times(attr);
    let (eof, alloc) = fileinfo::sizes(attr);
    let e = entry(server, attr, stored);
    FilePosixInfo {
        creation_time: c.0,
        last_access_time: la.0,
        last_write_time: lw.0,
        change_time: ch.0,
        end_of_file: eof,
        allocation_size: alloc,
        file_attributes: attributes(attr),
        inode: file_id,
        device: e.device,
        cc: e.cc,
    }
}

/// FSCC_FS_POSIX_INFORMATION of the share's file system, as Samba fills it
/// from statvfs(3) (the fragment size as BlockSize, f_bsize as the optimal
/// transfer size).
pub(crate) fn fs_info(st: &ringshare_vfs::FsStat) -> posix::FsPosixInfo {
    posix::FsPosixInfo {
        optimal_transfer_size: u32::try_from(st.io_size).unwrap_or(u32::MAX),
        block_size: u32::try_from(st.block_size).unwrap_or(u32::MAX),
        total_blocks: st.total_blocks,
        blocks_available: st.free_blocks,
        user_blocks_available: st.avail_blocks,
        total_file_nodes: st.total_files,
        free_file_nodes: st.free_files,
        fs_identifier: st.fs_id,
    }
}

/// The permission bits a POSIX create makes a file or directory with: the
/// context's, under the share's mask and force mode (Samba's
/// `apply_conf_file_mask` / `apply_conf_dir_mask`).
pub(crate) fn create_mode(rules: &ShareRules, is_dir: bool, wire_mode: u32) -> u32 {
    let perms = posix::wire_perms(wire_mode);
    if is_dir {
        (perms & rules.directory_mask) | rules.force_directory_mode
    } else {
        (perms & rules.create_mask) | rules.force_create_mode
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_posix_create_s_mode_passes_the_share_s_masks_and_force_modes() {
        let rules = ShareRules {
            create_mask: 0o744,
            force_create_mode: 0o004,
            directory_mask: 0o755,
            force_directory_mode: 0o1000,
            ..ShareRules::default()
        };
        assert_eq!(create_mode(&rules, false, 0o662), 0o644);
        assert_eq!(create_mode(&rules, true, 0o777), 0o1755);
        // The type bits a client may send are dropped.
        assert_eq!(create_mode(&rules, false, 0o10600), 0o604);
    }

    #[test]
    fn symlinks_and_special_files_are_reparse_points_with_their_type_in_the_mode() {
        let kinds = [
            (
                FileKind::Symlink,
                posix::IO_REPARSE_TAG_SYMLINK,
                posix::TYPE_SYMLINK,
            ),
            (
                FileKind::Other(Special::Fifo),
                posix::IO_REPARSE_TAG_NFS,
                posix::TYPE_FIFO,
            ),
            (
                FileKind::Other(Special::CharDevice),
                posix::IO_REPARSE_TAG_NFS,
                posix::TYPE_CHARDEV,
            ),
            (
                FileKind::Other(Special::BlockDevice),
                posix::IO_REPARSE_TAG_NFS,
                posix::TYPE_BLKDEV,
            ),
            (
                FileKind::Other(Special::Socket),
                posix::IO_REPARSE_TAG_NFS,
                posix::TYPE_SOCKET,
            ),
        ];
        for (kind, tag, wire) in kinds {
            let attr = FileAttr {
                kind,
                ..FileAttr::default()
            };
            assert_eq!(reparse_tag(kind), Some(tag), "{kind:?}");
            assert_eq!(wire_type(kind), wire, "{kind:?}");
            assert_eq!(
                attributes(&attr),
                FileAttributes::REPARSE_POINT.0,
                "{kind:?}"
            );
        }
        let file = FileAttr::default();
        assert_eq!(reparse_tag(file.kind), None);
        assert_eq!(attributes(&file), fileinfo::attributes(&file));
    }
}
