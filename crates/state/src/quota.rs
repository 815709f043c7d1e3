//! Disk quotas as Samba 4.22 shows them to clients: where they come from ([`QuotaSource`], the
//! binary's `get quota command` / `set quota command`), and the free space a user sees under
//! them (Samba's `disk_quotas` and `sys_disk_free`, source3/smbd/quotas.c and dfree.c).
//!
//! A source may run a program or wait on a file system, so it is asked on the driver's lookup
//! threads ([`crate::lookup::Lookup::Quota`]), never on an I/O thread.
//!
//! Samba's quota types, as it passes them to its commands (its enum, which its manual page
//! numbers differently; measured with Samba 4.22.6: a user's own quota is type 2, the file
//! system's defaults type 1 with id -1): [`QuotaType`].

use std::fmt;
use std::sync::Arc;

use ringshare_vfs::{FsStat, Who};
use ringshare_wire::fscc::FileQuotaInformation;

/// Samba's SMB_QUOTA_TYPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaType {
    /// The file system's user quota state and default limits (id -1).
    UserFs = 1,
    /// One user's quota.
    User = 2,
    /// The file system's group quota state and default limits (id -1).
    GroupFs = 3,
    /// One group's quota.
    Group = 4,
}

/// Quota flag: limits are enforced (Samba's QUOTAS_DENY_DISK, [MS-FSCC]
/// FILE_VC_QUOTA_ENFORCE).
pub const QUOTAS_DENY_DISK: u32 = 0x0002;

/// One quota as a source gives it (Samba's SMB_DISK_QUOTA): counts of `bsize`-byte blocks
/// and of inodes; a limit of 0 is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskQuota {
    pub flags: u32,
    pub cur_blocks: u64,
    pub soft: u64,
    pub hard: u64,
    pub cur_inodes: u64,
    pub isoft: u64,
    pub ihard: u64,
    pub bsize: u64,
}

impl DiskQuota {
    /// A `get quota command`'s first output line, as Samba 4.22 reads it: flags, used blocks,
    /// soft and hard block limits, used inodes, soft and hard inode limits, separated by
    /// white space, then optionally the block size (default 1024). None when one of the
    /// seven is missing or not a number.
    pub fn parse(line: &str) -> Option<DiskQuota> {
        let mut n = line.split_whitespace().map(|w| w.parse::<u64>().ok());
        let mut next = || n.next().flatten();
        let flags = u32::try_from(next()?).ok()?;
        let q = DiskQuota {
            flags,
            cur_blocks: next()?,
            soft: next()?,
            hard: next()?,
            cur_inodes: next()?,
            isoft: next()?,
            ihard: next()?,
            bsize: 1024,
        };
        Some(DiskQuota {
            bsize: next().filter(|&b| b > 0).unwrap_or(1024),
            ..q
        })
    }

    /// The block or inode use has reached a limit.
    fn exceeded(&self) -> bool {
        let over = |used: u64, limit: u64| limit != 0 && used >= limit;
        over(self.cur_blocks, self.soft)
            || over(self.cur_blocks, self.hard)
            || over(self.cur_inodes, self.isoft)
            || over(self.cur_inodes, self.ihard)
    }

    /// What this quota leaves: (block size, free blocks, total blocks), None without block
    /// limits. The soft limit counts (the hard one when there is none); a quota reached
    /// leaves nothing, its total then being what is used.
    fn space(&self) -> Option<(u64, u64, u64)> {
        if self.exceeded() {
            return Some((self.bsize, 0, self.cur_blocks));
        }
        if self.soft == 0 && self.hard == 0 {
            return None;
        }
        let limit = if self.soft == 0 { self.hard } else { self.soft };
        Some((self.bsize, limit.saturating_sub(self.cur_blocks), limit))
    }
}

/// Where quotas come from.
pub trait QuotaSource: Send + Sync + fmt::Debug {
    /// The quota of `kind` for `id` (a uid or gid; -1 for the file system's) on the file
    /// system of `path` (relative to the share's directory, `.` for it), asked as `who`.
    fn get(&self, who: &Who, path: &str, kind: QuotaType, id: i64) -> Result<DiskQuota, String>;
    /// Set it (as the server, for an administrator).
    fn set(&self, path: &str, kind: QuotaType, id: i64, q: &DiskQuota) -> Result<(), String>;
    /// The uids whose quotas a full listing shows (Samba walks the password database).
    fn users(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// A limit in bytes as a quota command takes it, in `bsize` blocks (Samba's `limit_nt2unix`):
/// no limit (`u64::MAX`, or `u64::MAX - 1`, "no entry") is 0, and 0 ("no space") is 1 block,
/// as is any limit below a block.
pub fn limit_in_blocks(bytes: u64, bsize: u64) -> u64 {
    match bytes {
        u64::MAX | 0xFFFF_FFFF_FFFF_FFFE => 0,
        0 => 1,
        b => (b / bsize.max(1)).max(1),
    }
}

/// A user's quota as FILE_QUOTA_INFORMATION shows it, in bytes.
pub fn entry_of(uid: u32, q: &DiskQuota) -> FileQuotaInformation {
    FileQuotaInformation {
        change_time: ringshare_wire::fscc::FileTime(0),
        quota_used: q.cur_blocks.saturating_mul(q.bsize),
        quota_threshold: q.soft.saturating_mul(q.bsize),
        quota_limit: q.hard.saturating_mul(q.bsize),
        sid: ringshare_wire::security::Sid::unix_user(uid),
    }
}

/// The quota handles of a connection (opens of `$Extend\$Quota:$Q:$INDEX_ALLOCATION`, by
/// volatile FileId) with the entries a listing has yet to return. At most
/// [`QUOTA_HANDLES_MAX`]: the oldest is forgotten (it then answers INVALID_HANDLE).
#[derive(Debug, Default)]
pub struct QuotaHandles {
    handles: std::collections::VecDeque<(u64, Vec<FileQuotaInformation>)>,
}

/// Quota handles one connection keeps.
pub const QUOTA_HANDLES_MAX: usize = 16;

impl QuotaHandles {
    /// Open `id` is a quota handle.
    pub fn add(&mut self, id: u64) {
        if self.handles.len() >= QUOTA_HANDLES_MAX {
            self.handles.pop_front();
        }
        self.handles.push_back((id, Vec::new()));
    }

    /// What is left of handle `id`'s listing; None: not a quota handle.
    pub fn scan(&mut self, id: u64) -> Option<&mut Vec<FileQuotaInformation>> {
        self.handles
            .iter_mut()
            .find(|(h, _)| *h == id)
            .map(|(_, left)| left)
    }
}

/// What a quota leaves `who` at `path`, as Samba's `disk_quotas` decides: the user's quota when
/// the file system enforces user quotas (or does not say), else the group's when it enforces
/// group quotas; None when neither limits. The ids are the user's own (Samba also asks for the
/// owner of the directory under `inherit owner`, and for a setgid directory's group: not here).
pub fn user_space(source: &dyn QuotaSource, who: &Who, path: &str) -> Option<(u64, u64, u64)> {
    let enforced = |kind| match source.get(who, path, kind, -1) {
        Ok(fs) => fs.flags & QUOTAS_DENY_DISK != 0,
        Err(_) => false,
    };
    if enforced(QuotaType::UserFs) {
        let own = source.get(who, path, QuotaType::User, i64::from(who.uid()));
        if let Some(space) = own.ok().and_then(|q| q.space()) {
            return Some(space);
        }
    }
    if enforced(QuotaType::GroupFs) {
        let own = source.get(who, path, QuotaType::Group, i64::from(who.gid()));
        return own.ok().and_then(|q| q.space());
    }
    None
}

/// The allocation units a client is shown, as Samba shows them: 1024-byte units (its default
/// `block size`) of 2 sectors of 512 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shown {
    pub total: u64,
    pub available: u64,
    pub sectors_per_unit: u32,
    pub bytes_per_sector: u32,
}

/// Samba's unit (`block size` = 1024) and sector.
const UNIT: u64 = 1024;
const SECTOR: u32 = 512;

/// The file system's space limited by a quota's (`sys_disk_free`): both in the smaller
/// block size, each the lesser, then in 1024-byte units.
pub fn shown(fs: &FsStat, quota: (u64, u64, u64)) -> Shown {
    let (qb, qfree, qsize) = quota;
    let fb = fs.block_size.max(1);
    let b = fb.min(qb).max(1);
    let scale = |n: u64, from: u64| u128::from(n) * u128::from(from) / u128::from(b);
    let mut dfree = scale(fs.avail_blocks, fb).min(scale(qfree, qb));
    let mut dsize = scale(fs.total_blocks, fb).min(scale(qsize, qb));
    let mut b = u128::from(b);
    if b < 256 {
        b = 512;
    }
    if dsize < 1 {
        dsize = 20 * 1024 * 1024 / b;
        dfree = dfree.max(1);
    }
    let unit = u128::from(UNIT);
    let (total, available) = if b < unit {
        (dsize / (unit / b), dfree / (unit / b))
    } else {
        (dsize * (b / unit), dfree * (b / unit))
    };
    let cap = |n: u128| u64::try_from(n).unwrap_or(u64::MAX);
    Shown {
        total: cap(total),
        available: cap(available),
        sectors_per_unit: (UNIT / u64::from(SECTOR)) as u32,
        bytes_per_sector: SECTOR,
    }
}

/// A question to a quota source ([`crate::lookup::Lookup::Quota`]).
#[derive(Debug, Clone)]
pub enum QuotaAsk {
    /// What a quota leaves this user at this path ([`user_space`]).
    Space { who: Who, path: String },
    /// One quota ([`QuotaSource::get`]).
    Get {
        who: Who,
        path: String,
        kind: QuotaType,
        id: i64,
    },
    /// Users' quotas, asked as `who`: those of `uids`, or (None) every user's that has a
    /// limit (Samba's listing).
    Users { who: Who, uids: Option<Vec<u32>> },
    /// Set a quota ([`QuotaSource::set`]).
    Set {
        kind: QuotaType,
        id: i64,
        quota: DiskQuota,
    },
}

/// The source's answer to a [`QuotaAsk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaDone {
    /// (block size, free blocks, total blocks) a quota leaves; None: no quota limits.
    Space(Option<(u64, u64, u64)>),
    /// The quota asked, or why there is none.
    Got(Result<DiskQuota, String>),
    /// The users' quotas found, by uid (those the source could not give are left out).
    Users(Vec<(u32, DiskQuota)>),
    /// Whether the quota was set.
    Set(Result<(), String>),
}

impl QuotaAsk {
    /// Ask `source`, waiting for it (the lookup threads).
    pub fn run(&self, source: &Arc<dyn QuotaSource>) -> QuotaDone {
        match self {
            QuotaAsk::Space { who, path } => {
                QuotaDone::Space(user_space(source.as_ref(), who, path))
            }
            QuotaAsk::Get {
                who,
                path,
                kind,
                id,
            } => QuotaDone::Got(source.get(who, path, *kind, *id)),
            QuotaAsk::Users { who, uids } => {
                let listing = uids.is_none();
                let uids = uids.clone().unwrap_or_else(|| source.users());
                let mut found = Vec::new();
                for uid in uids {
                    let Ok(q) = source.get(who, ".", QuotaType::User, i64::from(uid)) else {
                        continue;
                    };
                    if listing && q.soft == 0 && q.hard == 0 {
                        continue;
                    }
                    found.push((uid, q));
                }
                QuotaDone::Users(found)
            }
            QuotaAsk::Set { kind, id, quota } => QuotaDone::Set(source.set(".", *kind, *id, quota)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn a_get_quota_commands_line_is_read_as_samba_reads_it() {
        let q = DiskQuota::parse("2 10 100 200 1 0 0 4096").unwrap();
        assert_eq!(
            q,
            DiskQuota {
                flags: 2,
                cur_blocks: 10,
                soft: 100,
                hard: 200,
                cur_inodes: 1,
                isoft: 0,
                ihard: 0,
                bsize: 4096
            }
        );
        assert_eq!(DiskQuota::parse("0 0 0 0 0 0 0").unwrap().bsize, 1024);
        assert_eq!(DiskQuota::parse(" 1\t5 6 7 8 9 10\n").unwrap().ihard, 10);
        assert_eq!(DiskQuota::parse("0 0 0 0 0 0"), None, "six numbers");
        assert_eq!(DiskQuota::parse("0 0 x 0 0 0 0"), None);
        assert_eq!(DiskQuota::parse(""), None);
    }

    /// A source answering from a table, counting what it was asked.
    #[derive(Debug, Default)]
    struct Table {
        answers: HashMap<(u8, i64), DiskQuota>,
        asked: std::sync::Mutex<Vec<(u8, i64)>>,
    }

    impl QuotaSource for Table {
        fn get(&self, _: &Who, _: &str, kind: QuotaType, id: i64) -> Result<DiskQuota, String> {
            self.asked.lock().unwrap().push((kind as u8, id));
            self.answers
                .get(&(kind as u8, id))
                .copied()
                .ok_or_else(|| "no such quota".to_string())
        }
        fn set(&self, _: &str, _: QuotaType, _: i64, _: &DiskQuota) -> Result<(), String> {
            Err("read-only".into())
        }
    }

    fn who() -> Who {
        Arc::new(ringshare_engine::creds::Creds::new(1012, 1013, vec![1013]))
    }

    fn q(flags: u32, used: u64, soft: u64, hard: u64) -> DiskQuota {
        DiskQuota {
            flags,
            cur_blocks: used,
            soft,
            hard,
            bsize: 1024,
            ..Default::default()
        }
    }

    #[test]
    fn an_enforced_user_quota_leaves_its_soft_limit_less_what_is_used() {
        let mut t = Table::default();
        t.answers.insert((1, -1), q(QUOTAS_DENY_DISK, 0, 50, 60));
        t.answers.insert((2, 1012), q(2, 10, 100, 200));
        assert_eq!(user_space(&t, &who(), "."), Some((1024, 90, 100)));
        assert_eq!(*t.asked.lock().unwrap(), [(1, -1), (2, 1012)]);
        // No soft limit: the hard one; a limit reached: nothing left.
        t.answers.insert((2, 1012), q(2, 10, 0, 200));
        assert_eq!(user_space(&t, &who(), "."), Some((1024, 190, 200)));
        t.answers.insert((2, 1012), q(2, 150, 100, 200));
        assert_eq!(user_space(&t, &who(), "."), Some((1024, 0, 150)));
    }

    #[test]
    fn without_enforced_user_quotas_the_groups_decide_or_nothing_does() {
        let mut t = Table::default();
        t.answers.insert((1, -1), q(1, 0, 0, 0));
        t.answers.insert((2, 1012), q(2, 10, 100, 200));
        assert_eq!(user_space(&t, &who(), "."), None, "tracked, not enforced");
        t.answers.insert((3, -1), q(QUOTAS_DENY_DISK, 0, 0, 0));
        t.answers.insert((4, 1013), q(2, 5, 0, 40));
        assert_eq!(user_space(&t, &who(), "."), Some((1024, 35, 40)));
        // An enforced user quota without limits falls to the group's.
        t.answers.insert((1, -1), q(QUOTAS_DENY_DISK, 0, 0, 0));
        t.answers.insert((2, 1012), q(2, 10, 0, 0));
        assert_eq!(user_space(&t, &who(), "."), Some((1024, 35, 40)));
    }

    #[test]
    fn the_space_shown_is_the_lesser_in_1024_byte_units() {
        let fs = FsStat {
            block_size: 4096,
            total_blocks: 66_053_021,
            avail_blocks: 114_966,
            ..Default::default()
        };
        // Samba 4.22.6 with the quota above: "100 blocks of size 1024. 90 blocks available".
        let s = shown(&fs, (1024, 90, 100));
        assert_eq!((s.total, s.available), (100, 90));
        assert_eq!((s.sectors_per_unit, s.bytes_per_sector), (2, 512));
        // A quota larger than the disk: the disk's, in 1024-byte units.
        let s = shown(&fs, (1024, u64::MAX / 2048, u64::MAX / 2048));
        assert_eq!((s.total, s.available), (66_053_021 * 4, 114_966 * 4));
        // Larger quota blocks than the file system's.
        let s = shown(&fs, (1 << 20, 3, 5));
        assert_eq!((s.total, s.available), (5 * 1024, 3 * 1024));
    }
}
