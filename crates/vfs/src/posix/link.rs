//! A symlink opened itself (an SMB3 POSIX open, `OpenOptions::no_follow`): its metadata and
//! its target, and nothing else. Its descriptor is `O_PATH | O_NOFOLLOW`, and every way the
//! other nodes reach an `O_PATH` file's xattrs, times or mode (through `/proc/self/fd/N`)
//! would follow the link, possibly out of the share: so none of them is offered here. What
//! a client asks of it beyond its metadata and target is refused (ACCESS_DENIED); DOS
//! attributes set on it are ignored, as Samba ignores them on symlinks.

use super::*;

#[derive(Debug)]
pub(super) struct LinkNode(pub(super) PosixNode);

impl Node for LinkNode {
    fn stat(&self) -> FsResult<FileAttr> {
        self.0.act()?;
        let st = statx_fd(self.0.fd.as_fd()).map_err(fd_errno_to_fs)?;
        Ok(attr_from_statx(&st, None))
    }

    fn who(&self) -> Option<&Who> {
        Some(&self.0.who)
    }

    fn fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    fn link_target(&self) -> FsResult<Vec<u8>> {
        self.0.link_target()
    }

    fn read_at(&self, _: &mut [u8], _: u64) -> FsResult<usize> {
        Err(FsError::AccessDenied)
    }

    fn write_at(&self, _: &[u8], _: u64) -> FsResult<usize> {
        Err(FsError::AccessDenied)
    }

    fn sync(&self) -> FsResult<()> {
        Ok(())
    }

    fn set_len(&self, _: u64) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }

    fn set_allocation(&self, _: u64) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }

    fn set_times(&self, _: &SetTimes) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }

    fn set_dos_attributes(&self, _: u32) -> FsResult<()> {
        Ok(())
    }

    fn set_mode(&self, _: u32) -> FsResult<()> {
        Err(FsError::AccessDenied)
    }

    fn list_names(&self) -> FsResult<Vec<String>> {
        Err(FsError::NotADirectory)
    }

    fn stat_entry(&self, _: &str) -> FsResult<FileAttr> {
        Err(FsError::NotADirectory)
    }
}
