//! A share's quotas from the kernel (`quotactl_fd(2)` on the share's directory), what Samba
//! 4.22's smbd uses when no `get quota command` is set (source3/lib/sysquotas_linux.c,
//! read for its behaviour): the generic VFS quota calls, which ext4 and xfs (and any file
//! system with quota operations) answer.
//!
//! As Samba answers:
//! - a user's or group's quota (types 2 and 4): that id's quota, limits in 1024-byte blocks,
//!   the space used in whole 1024-byte blocks; an error (quotas off: `ESRCH`; another's quota
//!   without being root: `EPERM`) is no quota;
//! - the file system's state (types 1 and 3, id -1): the asker's own quota (their uid, or
//!   their primary gid), with the "enforced" flag when the kernel gave one, no flag and no
//!   limits when it did not (never an error);
//! - setting a user's or group's limits: Q_SETQUOTA of the block and inode limits (as the
//!   server, for an administrator); setting the file system's state only succeeds when it
//!   asks for the state the kernel already has (quotas are turned on and off with quotaon).
//!
//! The quota asked is that of the share directory's file system: a file on another file system
//! mounted inside the share is shown the share's (Samba asks the file's own device).

use std::fs::File;
use std::os::fd::AsFd as _;
use std::path::Path;

use ringshare_core::quota::{DiskQuota, QuotaSource, QuotaType, QUOTAS_DENY_DISK};
use ringshare_engine::creds;
use ringshare_engine::sys::{quota_get, quota_set_limits, Dqblk, QuotaOf};
use ringshare_vfs::Who;

/// The kernel's quota block (QUOTABLOCK_SIZE).
const BLOCK: u64 = 1024;

/// The quotas of a share's file system, asked of the kernel.
#[derive(Debug)]
pub struct KernelQuotas {
    /// The share's directory, open for the life of the share.
    dir: File,
}

impl KernelQuotas {
    /// Quotas of the file system that holds `dir`.
    pub fn open(dir: &Path) -> std::io::Result<KernelQuotas> {
        Ok(KernelQuotas {
            dir: File::open(dir)?,
        })
    }

    /// `of`'s quota for `id`, asked with the calling thread's credentials.
    fn ask(&self, of: QuotaOf, id: u32) -> Result<DiskQuota, String> {
        let d = quota_get(self.dir.as_fd(), of, id).map_err(|e| format!("quotactl: {e}"))?;
        Ok(disk_quota(&d))
    }
}

/// Samba's SMB_DISK_QUOTA of the kernel's quota: 1024-byte blocks, no flags.
fn disk_quota(d: &Dqblk) -> DiskQuota {
    DiskQuota {
        flags: 0,
        cur_blocks: d.curspace / BLOCK,
        soft: d.bsoftlimit,
        hard: d.bhardlimit,
        cur_inodes: d.curinodes,
        isoft: d.isoftlimit,
        ihard: d.ihardlimit,
        bsize: BLOCK,
    }
}

/// The file system's state as Samba shows it from the asker's own quota: enforced, with that
/// quota's limits, when there is one; nothing otherwise.
fn fs_state(own: Result<DiskQuota, String>) -> DiskQuota {
    match own {
        Ok(q) => DiskQuota {
            flags: QUOTAS_DENY_DISK,
            ..q
        },
        Err(_) => DiskQuota {
            bsize: BLOCK,
            ..DiskQuota::default()
        },
    }
}

/// A quota id as the kernel takes it (-1, "the file system's", is no id).
fn id_of(id: i64) -> Result<u32, String> {
    u32::try_from(id).map_err(|_| format!("no quota of id {id}"))
}

/// Runs `f` acting as `who` on this (lookup) thread, then as the server again.
fn acting_as<T>(who: &Who, f: impl FnOnce() -> T) -> Result<T, String> {
    creds::act_as(who).map_err(|e| format!("cannot act as uid {}: {e}", who.uid()))?;
    let out = f();
    if let Err(e) = creds::act_as_server() {
        tracing::error!("quota lookup: cannot act as the server again: {e}");
    }
    Ok(out)
}

impl QuotaSource for KernelQuotas {
    fn get(&self, who: &Who, _path: &str, kind: QuotaType, id: i64) -> Result<DiskQuota, String> {
        acting_as(who, || match kind {
            QuotaType::User => self.ask(QuotaOf::User, id_of(id)?),
            QuotaType::Group => self.ask(QuotaOf::Group, id_of(id)?),
            QuotaType::UserFs => Ok(fs_state(self.ask(QuotaOf::User, who.uid()))),
            QuotaType::GroupFs => Ok(fs_state(self.ask(QuotaOf::Group, who.gid()))),
        })?
    }

    fn set(&self, _path: &str, kind: QuotaType, id: i64, q: &DiskQuota) -> Result<(), String> {
        let (of, own) = match kind {
            QuotaType::User => (QuotaOf::User, None),
            QuotaType::Group => (QuotaOf::Group, None),
            QuotaType::UserFs => (QuotaOf::User, Some(creds::server().uid())),
            QuotaType::GroupFs => (QuotaOf::Group, Some(creds::server().gid())),
        };
        if let Some(own) = own {
            // The state cannot be changed here: only asking for the one there is succeeds.
            let on = quota_get(self.dir.as_fd(), of, own).is_ok();
            return if on == (q.flags & QUOTAS_DENY_DISK != 0) {
                Ok(())
            } else {
                Err("quotas are turned on and off with quotaon, not over SMB".into())
            };
        }
        quota_set_limits(self.dir.as_fd(), of, id_of(id)?, &limits(q))
            .map_err(|e| format!("quotactl: {e}"))
    }

    fn users(&self) -> Vec<u32> {
        super::passwd_uids()
    }
}

/// A quota's block limits in the kernel's 1024-byte blocks, and its inode limits.
fn limits(q: &DiskQuota) -> Dqblk {
    let blocks = |n: u64| match q.bsize {
        BLOCK => n,
        b => n.saturating_mul(b) / BLOCK,
    };
    Dqblk {
        bsoftlimit: blocks(q.soft),
        bhardlimit: blocks(q.hard),
        isoftlimit: q.isoft,
        ihardlimit: q.ihard,
        ..Dqblk::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_quota_is_shown_in_1024_byte_blocks_as_samba_shows_it() {
        let d = Dqblk {
            bhardlimit: 200,
            bsoftlimit: 100,
            curspace: 10 * 1024 + 1023,
            ihardlimit: 7,
            isoftlimit: 5,
            curinodes: 3,
            ..Dqblk::default()
        };
        let q = disk_quota(&d);
        assert_eq!(
            (
                q.flags,
                q.cur_blocks,
                q.soft,
                q.hard,
                q.cur_inodes,
                q.isoft,
                q.ihard,
                q.bsize
            ),
            (0, 10, 100, 200, 3, 5, 7, 1024)
        );
    }

    #[test]
    fn the_file_systems_state_is_enforced_only_when_the_askers_own_quota_was_given() {
        let own = DiskQuota {
            soft: 50,
            hard: 60,
            bsize: 1024,
            ..DiskQuota::default()
        };
        let on = fs_state(Ok(own));
        assert_eq!((on.flags, on.soft, on.hard), (QUOTAS_DENY_DISK, 50, 60));
        let off = fs_state(Err("quotactl: No such process".into()));
        assert_eq!(
            off,
            DiskQuota {
                bsize: 1024,
                ..DiskQuota::default()
            }
        );
    }

    #[test]
    fn limits_in_other_block_sizes_are_set_in_1024_byte_blocks() {
        let q = DiskQuota {
            soft: 3,
            hard: 4,
            isoft: 9,
            ihard: 10,
            bsize: 4096,
            ..DiskQuota::default()
        };
        let d = limits(&q);
        assert_eq!(
            (d.bsoftlimit, d.bhardlimit, d.isoftlimit, d.ihardlimit),
            (12, 16, 9, 10)
        );
    }

    #[test]
    fn on_a_file_system_without_quotas_a_user_has_none_and_the_state_is_off() {
        // No file system here keeps quotas (docs/limits.md): the kernel says ESRCH.
        let k = KernelQuotas::open(&std::env::temp_dir()).unwrap();
        let root = std::sync::Arc::new(ringshare_engine::creds::Creds::new(0, 0, vec![]));
        let got = k.get(&root, ".", QuotaType::User, 0);
        if let Ok(q) = got {
            eprintln!(
                "SKIPPED: quotas are on in {}: {q:?}",
                std::env::temp_dir().display()
            );
            return;
        }
        assert!(got.unwrap_err().contains("No such process"));
        let fs = k.get(&root, ".", QuotaType::UserFs, -1).unwrap();
        assert_eq!(fs.flags, 0);
        assert!(k.get(&root, ".", QuotaType::User, -1).is_err());
        let limits = DiskQuota {
            soft: 1,
            hard: 2,
            bsize: 1024,
            ..DiskQuota::default()
        };
        assert!(k.set(".", QuotaType::User, 0, &limits).is_err());
        // Asking for the state there is succeeds; asking to turn quotas on does not.
        assert!(k.set(".", QuotaType::UserFs, -1, &fs).is_ok());
        let on = DiskQuota {
            flags: QUOTAS_DENY_DISK,
            ..fs
        };
        assert!(k.set(".", QuotaType::UserFs, -1, &on).is_err());
    }
}
