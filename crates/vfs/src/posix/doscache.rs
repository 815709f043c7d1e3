//! The `user.DOSATTRIB` values read lately, by file, reused while the file's
//! change time stays the same: a listing of a directory whose entries have not
//! changed then costs one `statx` per entry instead of a `statx` and a
//! `getxattrat` (the attribute's lookup was as dear as the stat: issue 34).
//! The same is kept of one more xattr every open asks for and almost no file
//! has: older ringshare's security descriptor (`user.ringshare.ntacl`), whose
//! absence is kept so that an open of an unchanged file does not ask again
//! (one system call of six per CREATE+QUERY_INFO+CLOSE).
//!
//! Why the change time says enough: on the file systems this is used on
//! ([`keeps_ctime`]: tmpfs, ext2/3/4, XFS, Btrfs), setting or removing an xattr
//! sets the inode's change time, whoever does it (ringshare, Samba, `setfattr`),
//! and nothing can set it back. A value is kept with the change time the file
//! had when it was stat'ed before the read, so a value can only be newer than
//! its change time says, never older. Two changes can share a change time while
//! the kernel's timestamp clock has not moved on (one tick, at most 10 ms) or,
//! on a file system that keeps whole seconds (ext4 with 128-byte inodes), within
//! the second; so a file changed lately is always read afresh and never kept:
//! for [`SETTLED_NANOS`] when its change time is a whole second, for
//! [`SETTLED_FINE_NANOS`] when it has a fraction (its file system keeps finer
//! times than seconds, so only the tick is left). After that, any further
//! change gets a later time. (A file made and opened at once, as an Explorer
//! copy or a build does, is then read afresh for 50 ms, not 2 s: issue 34's
//! metadata row read the attribute of every file it had made in its first 2 s.) Files are keyed by device and inode and
//! also checked by birth time, so an inode number reused by a new file is not
//! taken for the old one.
//!
//! The value is the file's, not the user's: it is read as the user and, when
//! the kernel refuses the user, as the server (`read_dos_with`), so whoever
//! asks gets the same answer. Only definite answers are kept (a value, or
//! none there); a read that failed otherwise is tried again next time. The
//! `statx` that precedes every use still runs as the user, so what a user may
//! see of a directory is decided by the kernel as before.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::dosattrib::DosInfo;
use crate::UnixNanos;

/// How long ago a file whose change time is a whole second must have last
/// changed for its value to be kept: its file system may keep only seconds.
pub(super) const SETTLED_NANOS: UnixNanos = 2_000_000_000;

/// The same for a change time with a fraction of a second: five ticks of the
/// slowest kernel clock (HZ=100).
pub(super) const SETTLED_FINE_NANOS: UnixNanos = 50_000_000;

/// Whether a file last changed at `ctime` may have its value kept at `now`.
fn settled(ctime: UnixNanos, now: UnixNanos) -> bool {
    let wait = if ctime % 1_000_000_000 == 0 {
        SETTLED_NANOS
    } else {
        SETTLED_FINE_NANOS
    };
    ctime <= now - wait
}

/// Files kept per thread; a full cache is emptied (65,536 files, about 6 MiB
/// with the table's room).
const FILES_MAX: usize = 1 << 16;

/// Whether the file system of type `f_type` (`statfs`) sets a file's change
/// time on every xattr change made through the kernel: those whose files only
/// this kernel changes. Network and FUSE file systems are left out (another
/// machine may change a file without this kernel knowing when). The same test
/// tells the shares whose calls may wait on a network ([`crate::Share::may_wait_on_network`]).
pub(super) fn keeps_ctime(f_type: u64) -> bool {
    use super::TMPFS_MAGIC;
    const EXT4_SUPER_MAGIC: u64 = 0xEF53;
    const XFS_SUPER_MAGIC: u64 = 0x5846_5342;
    const BTRFS_SUPER_MAGIC: u64 = 0x9123_683E;
    matches!(
        f_type,
        TMPFS_MAGIC | EXT4_SUPER_MAGIC | XFS_SUPER_MAGIC | BTRFS_SUPER_MAGIC
    )
}

/// A file as `statx` described it: what a kept value is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub ctime: UnixNanos,
    pub btime: Option<UnixNanos>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Key {
    dev: u64,
    ino: u64,
}

/// The bucket is picked by the inode number itself: files made one after the
/// other have consecutive numbers and are mostly listed in that order, so
/// their entries are read one after the other in memory (a scattering hash
/// made each lookup a cache miss: 7 % of a listing's samples). The top 7 bits,
/// which hashbrown compares first, mix the device and the whole number.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        const TOP: u64 = 0xFE00_0000_0000_0000;
        let mixed = (self.dev ^ self.ino).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        state.write_u64((self.ino & !TOP) | (mixed & TOP));
    }
}

/// Takes the one `u64` [`Key`] hashes to as the hash.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// A kept value with the change and birth time it holds for, as `i64`
/// nanoseconds (years 1678 to 2262; a file with a time outside is not kept),
/// `i64::MIN` for none. For the DOS attributes 32 bytes.
#[derive(Debug, Clone, Copy)]
struct Kept<V> {
    ctime: i64,
    btime: i64,
    value: V,
}

const NONE: i64 = i64::MIN;

fn narrow(t: Option<UnixNanos>) -> Option<i64> {
    match t {
        None => Some(NONE),
        Some(t) => i64::try_from(t).ok().filter(|&t| t != NONE),
    }
}

fn widen(t: i64) -> Option<UnixNanos> {
    (t != NONE).then_some(UnixNanos::from(t))
}

/// Values by file, each kept while the file's change and birth times stay
/// what they were when it was stat'ed before the value was read. Each I/O
/// thread has its own (no lock on the way of a listing or an open).
pub(super) struct StampMap<V> {
    map: HashMap<Key, Kept<V>, BuildHasherDefault<KeyHasher>>,
}

impl<V> Default for StampMap<V> {
    fn default() -> Self {
        StampMap {
            map: HashMap::default(),
        }
    }
}

impl<V: Copy> StampMap<V> {
    /// The value kept for the file `s` describes, if it has not changed
    /// since (`None`: not kept, read it).
    pub(super) fn get(&self, s: &Stamp) -> Option<V> {
        let k = self.map.get(&Key {
            dev: s.dev,
            ino: s.ino,
        })?;
        if Some(k.ctime) != narrow(Some(s.ctime)) || Some(k.btime) != narrow(s.btime) {
            return None;
        }
        Some(k.value)
    }

    /// Keeps `value` (`None`: one that cannot be kept), read after the file
    /// was stat'ed as `s`, unless the file changed too lately before `now`
    /// ([`settled`]); whatever was kept for the file goes when the new value
    /// is not kept.
    pub(super) fn put(&mut self, s: &Stamp, value: Option<V>, now: UnixNanos) {
        let key = Key {
            dev: s.dev,
            ino: s.ino,
        };
        let kept = (|| {
            if !settled(s.ctime, now) {
                return None;
            }
            Some(Kept {
                ctime: narrow(Some(s.ctime))?,
                btime: narrow(s.btime)?,
                value: value?,
            })
        })();
        let Some(kept) = kept else {
            self.map.remove(&key);
            return;
        };
        if self.map.len() >= FILES_MAX && !self.map.contains_key(&key) {
            self.map.clear();
        }
        self.map.insert(key, kept);
    }
}

/// A file's DOS attributes as kept: the creation time narrowed as the
/// stamp's times are, and whether there was a value at all.
#[derive(Debug, Clone, Copy)]
pub(super) struct DosKept {
    create_time: i64,
    attributes: u32,
    some: bool,
}

/// The `user.DOSATTRIB` values read lately.
pub(super) type DosCache = StampMap<DosKept>;

impl DosKept {
    fn of(dos: Option<DosInfo>) -> Option<DosKept> {
        Some(DosKept {
            create_time: narrow(dos.and_then(|d| d.create_time))?,
            attributes: dos.map_or(0, |d| d.attributes),
            some: dos.is_some(),
        })
    }

    fn info(self) -> Option<DosInfo> {
        self.some.then(|| DosInfo {
            attributes: self.attributes,
            create_time: widen(self.create_time),
        })
    }
}

thread_local! {
    static CACHE: RefCell<DosCache> = RefCell::new(DosCache::default());
    static NO_LEGACY_SD: RefCell<StampMap<()>> = RefCell::new(StampMap::default());
}

/// The DOS attributes kept for the file `s` describes, on this thread.
pub(super) fn get(s: &Stamp) -> Option<Option<DosInfo>> {
    CACHE.with(|c| c.borrow().get(s).map(DosKept::info))
}

/// Keeps `dos`, read after the file was stat'ed as `s`, on this thread.
pub(super) fn put(s: &Stamp, dos: Option<DosInfo>, now: UnixNanos) {
    CACHE.with(|c| c.borrow_mut().put(s, DosKept::of(dos), now));
}

/// Whether a read on this thread found no legacy descriptor
/// (`user.ringshare.ntacl`) on the file `s` describes, and it has not changed
/// since: most files never had one, and an open asks.
pub(super) fn known_without_legacy_sd(s: &Stamp) -> bool {
    NO_LEGACY_SD.with(|c| c.borrow().get(s).is_some())
}

/// Records what a read of the legacy descriptor, after the file was stat'ed
/// as `s`, found (`found`: one was there, which is never kept).
pub(super) fn put_legacy_sd_read(s: &Stamp, found: bool, now: UnixNanos) {
    NO_LEGACY_SD.with(|c| c.borrow_mut().put(s, (!found).then_some(()), now));
}

/// Now, as nanoseconds since the Unix epoch (the file system's clock for
/// change times).
pub(super) fn now() -> UnixNanos {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as UnixNanos,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: UnixNanos = 3_600_000_000_000;

    fn stamp(ino: u64, ctime: UnixNanos) -> Stamp {
        Stamp {
            dev: 7,
            ino,
            ctime,
            btime: Some(1),
        }
    }

    fn info(attributes: u32) -> Option<DosInfo> {
        Some(DosInfo {
            attributes,
            create_time: None,
        })
    }

    /// What the map keeps for `dos` (or does not: `None`).
    fn kept(dos: Option<DosInfo>) -> Option<DosKept> {
        DosKept::of(dos)
    }

    /// The DOS attributes kept for `s`.
    fn got(c: &DosCache, s: &Stamp) -> Option<Option<DosInfo>> {
        c.get(s).map(DosKept::info)
    }

    #[test]
    fn a_value_is_reused_while_the_files_change_time_stays_the_same() {
        let mut c = DosCache::default();
        let s = stamp(1, 10);
        assert_eq!(got(&c, &s), None);
        c.put(&s, kept(info(0x22)), HOUR);
        assert_eq!(got(&c, &s), Some(info(0x22)));
        c.put(&stamp(2, 10), kept(None), HOUR);
        assert_eq!(got(&c, &stamp(2, 10)), Some(None), "no value is kept too");
    }

    #[test]
    fn a_file_whose_change_time_or_birth_time_moved_is_read_again() {
        let mut c = DosCache::default();
        c.put(&stamp(1, 10), kept(info(0x20)), HOUR);
        assert_eq!(got(&c, &stamp(1, 11)), None);
        let reborn = Stamp {
            btime: Some(2),
            ..stamp(1, 10)
        };
        assert_eq!(
            got(&c, &reborn),
            None,
            "a new file with the old inode number"
        );
        let other_device = Stamp {
            dev: 8,
            ..stamp(1, 10)
        };
        assert_eq!(got(&c, &other_device), None);
    }

    #[test]
    fn a_file_changed_in_the_last_50_ms_is_not_kept_and_drops_what_was() {
        let mut c = DosCache::default();
        let now = HOUR + 500_000_000;
        let recent = now - SETTLED_FINE_NANOS + 1;
        c.put(&stamp(1, recent), kept(info(0x20)), now);
        assert_eq!(got(&c, &stamp(1, recent)), None);
        let settled = now - SETTLED_FINE_NANOS - 1;
        c.put(&stamp(1, settled), kept(info(0x20)), now);
        assert_eq!(got(&c, &stamp(1, settled)), Some(info(0x20)));
        c.put(&stamp(2, 10), kept(info(0x20)), now);
        // The same change time seen again while it is recent: the kept
        // value cannot be told apart from a newer one, so it goes.
        c.put(&stamp(2, 10), kept(info(0x21)), 10 + SETTLED_FINE_NANOS / 2);
        assert_eq!(got(&c, &stamp(2, 10)), None);
    }

    #[test]
    fn a_file_whose_change_time_is_a_whole_second_waits_two_seconds() {
        // Its file system may keep only seconds: a change later in the same
        // second would get the same time.
        let mut c = DosCache::default();
        let whole = HOUR;
        c.put(
            &stamp(1, whole),
            kept(info(0x20)),
            whole + SETTLED_NANOS / 2,
        );
        assert_eq!(got(&c, &stamp(1, whole)), None);
        c.put(&stamp(1, whole), kept(info(0x20)), whole + SETTLED_NANOS);
        assert_eq!(got(&c, &stamp(1, whole)), Some(info(0x20)));
    }

    #[test]
    fn a_full_cache_is_emptied_and_takes_the_new_file() {
        let mut c = DosCache::default();
        let n = FILES_MAX as u64;
        for ino in 0..n {
            c.put(&stamp(ino, 10), kept(info(0x20)), HOUR);
        }
        assert_eq!(got(&c, &stamp(0, 10)), Some(info(0x20)));
        c.put(&stamp(1, 10), kept(info(0x21)), HOUR);
        assert_eq!(
            got(&c, &stamp(1, 10)),
            Some(info(0x21)),
            "a kept file is replaced"
        );
        assert_eq!(got(&c, &stamp(0, 10)), Some(info(0x20)));
        c.put(&stamp(n, 10), kept(info(0x22)), HOUR);
        assert_eq!(got(&c, &stamp(n, 10)), Some(info(0x22)));
        assert_eq!(got(&c, &stamp(0, 10)), None, "the rest went");
    }

    #[test]
    fn a_creation_time_is_kept_as_read_and_times_past_2262_are_not_kept() {
        let mut c = DosCache::default();
        let dos = Some(DosInfo {
            attributes: 0x20,
            create_time: Some(-5),
        });
        c.put(&stamp(1, 10), kept(dos), HOUR);
        assert_eq!(got(&c, &stamp(1, 10)), Some(dos));
        let far = Some(DosInfo {
            attributes: 0x20,
            create_time: Some(UnixNanos::from(i64::MAX) + 1),
        });
        c.put(&stamp(1, 10), kept(far), HOUR);
        assert_eq!(got(&c, &stamp(1, 10)), None);
    }
}
