//! Byte-range locks ([MS-FSA] 2.1.4.10, 2.1.5.8, 2.1.5.9; [MS-SMB2] 3.3.5.14).
//!
//! Locks belong to a file (a stream, keyed by device and inode) and are owned by
//! an open. SMB2 sends no lock key, so the owner is the open alone. The table is
//! shared by every connection on every ring; callers hold the file's mutex.
//!
//! Conflict rules, for a range that overlaps an existing lock:
//! - an exclusive lock held by another open conflicts with everything;
//! - an exclusive lock held by the same open conflicts with a new exclusive lock
//!   (a shared lock may be stacked on it, as Windows allows);
//! - a shared lock conflicts with a new exclusive lock (whoever holds it) and with
//!   writes (even the owner's own);
//! - the range {offset 0, length 0} overlaps nothing.

use ringshare_vfs::OfdLock;

/// Identifies an open across the whole server.
pub type OwnerId = u64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRangeLock {
    pub offset: u64,
    pub length: u64,
    pub exclusive: bool,
    pub owner: OwnerId,
}

/// Why a range access was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// A lock request (shared or exclusive).
    Lock { exclusive: bool },
    /// A read of the range.
    Read,
    /// A write of the range.
    Write,
}

/// An invalid range: offset + length - 1 overflows 64 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidRange;

/// Checks that `offset .. offset+length` fits in 64 bits ([MS-FSA] 2.1.5.8).
pub fn check_range(offset: u64, length: u64) -> Result<(), InvalidRange> {
    if length != 0 && offset.checked_add(length - 1).is_none() {
        Err(InvalidRange)
    } else {
        Ok(())
    }
}

fn overlaps(a_off: u64, a_len: u64, b_off: u64, b_len: u64) -> bool {
    if (a_off == 0 && a_len == 0) || (b_off == 0 && b_len == 0) {
        return false;
    }
    // [MS-FSA] 2.1.4.10 literally: last = offset + length - 1, which for a
    // zero length is offset - 1. Wide arithmetic keeps that exact.
    let a_last = a_off as i128 + a_len as i128 - 1;
    let b_last = b_off as i128 + b_len as i128 - 1;
    (a_off as i128) <= b_last && a_last >= b_off as i128
}

/// The locks of one file.
#[derive(Debug, Default, Clone)]
pub struct LockList {
    locks: Vec<ByteRangeLock>,
}

impl LockList {
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// True when an access of `intent` by `owner` on the range conflicts.
    pub fn conflicts(&self, offset: u64, length: u64, intent: Intent, owner: OwnerId) -> bool {
        self.locks.iter().any(|l| {
            if !overlaps(offset, length, l.offset, l.length) {
                return false;
            }
            match intent {
                Intent::Lock { exclusive } => {
                    if l.exclusive {
                        l.owner != owner || exclusive
                    } else {
                        exclusive
                    }
                }
                Intent::Read => l.exclusive && l.owner != owner,
                Intent::Write => !l.exclusive || l.owner != owner,
            }
        })
    }

    /// Try to take a lock; `false` when it conflicts.
    pub fn try_lock(&mut self, lock: ByteRangeLock) -> bool {
        if self.conflicts(
            lock.offset,
            lock.length,
            Intent::Lock {
                exclusive: lock.exclusive,
            },
            lock.owner,
        ) {
            return false;
        }
        self.locks.push(lock);
        true
    }

    /// Remove the lock matching offset, length and owner exactly, preferring an
    /// exclusive one ([MS-FSA] 2.1.5.9). `false` when there is none.
    pub fn unlock(&mut self, offset: u64, length: u64, owner: OwnerId) -> bool {
        let mut found = None;
        for (i, l) in self.locks.iter().enumerate() {
            if l.offset == offset && l.length == length && l.owner == owner {
                found = Some(i);
                if l.exclusive {
                    break;
                }
            }
        }
        match found {
            Some(i) => {
                self.locks.remove(i);
                true
            }
            None => false,
        }
    }

    /// True when open `owner` holds a lock.
    pub(crate) fn held_by(&self, owner: OwnerId) -> bool {
        self.locks.iter().any(|l| l.owner == owner)
    }

    /// Drop every lock of an open (on close). Returns how many were removed.
    pub fn release_owner(&mut self, owner: OwnerId) -> usize {
        let before = self.locks.len();
        self.locks.retain(|l| l.owner != owner);
        before - self.locks.len()
    }

    /// Give every lock of open `from` to open `to` (an open handed over to
    /// another node under a new id). Returns how many moved.
    pub fn rekey_owner(&mut self, from: OwnerId, to: OwnerId) -> usize {
        let mut n = 0;
        for l in self.locks.iter_mut().filter(|l| l.owner == from) {
            l.owner = to;
            n += 1;
        }
        n
    }

    /// Every lock held, in the order they were taken.
    pub fn iter(&self) -> impl Iterator<Item = &ByteRangeLock> {
        self.locks.iter()
    }

    /// The locks `owner` holds.
    pub fn owned_by(&self, owner: OwnerId) -> Vec<ByteRangeLock> {
        self.locks
            .iter()
            .filter(|l| l.owner == owner)
            .copied()
            .collect()
    }

    pub fn count_owned_by(&self, owner: OwnerId) -> usize {
        self.locks.iter().filter(|l| l.owner == owner).count()
    }
}

/// An SMB range as a POSIX one (`start`, `len`, both > 0 as `off_t`), as Samba's posix.c
/// maps them (`posix_lock_in_range`): a zero length (a Windows point probe; to POSIX, "to
/// the end of the file") is not mirrored, nor a range starting past `off_t`'s largest
/// value; a range reaching past it is cut to end there.
pub fn posix_range(offset: u64, length: u64) -> Option<(i64, i64)> {
    const MAX: u64 = i64::MAX as u64;
    if length == 0 || offset > MAX {
        return None;
    }
    let count = length.min(MAX).min(MAX - offset);
    (count > 0).then_some((offset as i64, count as i64))
}

/// The POSIX locks one open's descriptor must hold on the parts of `within` (a POSIX
/// range, [`posix_range`]) for `locks`, that open's SMB locks: `Write` where an exclusive
/// one covers a byte, else `Read` where a shared one does, else `Unlock`; in order, each
/// part `(start, len, kind)`. The locks of one open file description merge and split by
/// range, so setting every part of a changed range from the whole list keeps one open's
/// overlapping or stacked locks from releasing each other's ranges (Samba counts
/// references per range to the same end).
pub fn posix_plan(locks: &[ByteRangeLock], within: (i64, i64)) -> Vec<(i64, i64, OfdLock)> {
    let (lo, hi) = (within.0, within.0 + within.1);
    let ranges: Vec<(i64, i64, bool)> = locks
        .iter()
        .filter_map(|l| posix_range(l.offset, l.length).map(|(s, n)| (s, s + n, l.exclusive)))
        .filter(|&(s, e, _)| s < hi && e > lo)
        .collect();
    let mut cuts = vec![lo, hi];
    for &(s, e, _) in &ranges {
        cuts.extend([s.max(lo), e.min(hi)]);
    }
    cuts.sort_unstable();
    cuts.dedup();
    let mut plan: Vec<(i64, i64, OfdLock)> = Vec::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let covering = ranges.iter().filter(|&&(s, e, _)| s <= a && e >= b);
        let kind = covering.fold(OfdLock::Unlock, |k, &(_, _, x)| match (k, x) {
            (_, true) | (OfdLock::Write, _) => OfdLock::Write,
            _ => OfdLock::Read,
        });
        match plan.last_mut() {
            Some(last) if last.2 == kind && last.0 + last.1 == a => last.1 += b - a,
            _ => plan.push((a, b - a, kind)),
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posix_ranges_are_mapped_as_samba_maps_them() {
        assert_eq!(posix_range(0, 1), Some((0, 1)));
        assert_eq!(posix_range(5, 0), None, "a zero length is not mirrored");
        assert_eq!(posix_range(1 << 63, 1), None, "past off_t's largest value");
        assert_eq!(posix_range(u64::MAX, 1), None);
        assert_eq!(
            posix_range(10, u64::MAX - 10),
            Some((10, i64::MAX - 10)),
            "cut to end at off_t's largest value"
        );
        assert_eq!(
            posix_range(i64::MAX as u64, 1),
            None,
            "nothing left once cut"
        );
    }

    #[test]
    fn an_unlock_of_one_of_two_overlapping_locks_keeps_the_others_range() {
        // One open: exclusive 0..10 and shared 5..20; the exclusive one is unlocked.
        let left = [lk(5, 15, false, 1)];
        assert_eq!(
            posix_plan(&left, (0, 10)),
            vec![(0, 5, OfdLock::Unlock), (5, 5, OfdLock::Read)]
        );
        // Both held: the exclusive range is written, the rest of the shared one read.
        let both = [lk(0, 10, true, 1), lk(5, 15, false, 1)];
        assert_eq!(
            posix_plan(&both, (0, 20)),
            vec![(0, 10, OfdLock::Write), (10, 10, OfdLock::Read)]
        );
        // Two stacked shared locks on one range: unlocking one keeps it read-locked.
        let stacked = [lk(0, 4, false, 1)];
        assert_eq!(posix_plan(&stacked, (0, 4)), vec![(0, 4, OfdLock::Read)]);
        assert_eq!(posix_plan(&[], (0, 4)), vec![(0, 4, OfdLock::Unlock)]);
    }

    fn lk(offset: u64, length: u64, exclusive: bool, owner: OwnerId) -> ByteRangeLock {
        ByteRangeLock {
            offset,
            length,
            exclusive,
            owner,
        }
    }

    #[test]
    fn exclusive_lock_of_another_open_blocks_reads_writes_and_locks() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(10, 10, true, 1)));
        assert!(l.conflicts(15, 1, Intent::Read, 2));
        assert!(l.conflicts(15, 1, Intent::Write, 2));
        assert!(!l.try_lock(lk(0, 11, false, 2)));
        assert!(!l.conflicts(15, 1, Intent::Read, 1));
        assert!(!l.conflicts(15, 1, Intent::Write, 1));
    }

    #[test]
    fn shared_locks_stack_but_block_writes_even_by_their_owner() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(0, 100, false, 1)));
        assert!(l.try_lock(lk(0, 100, false, 2)));
        assert!(!l.conflicts(50, 1, Intent::Read, 3));
        assert!(l.conflicts(50, 1, Intent::Write, 1));
        assert!(!l.try_lock(lk(50, 1, true, 1)));
    }

    #[test]
    fn an_open_may_stack_a_shared_lock_on_its_own_exclusive_lock_but_not_another_exclusive() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(0, 10, true, 1)));
        assert!(l.try_lock(lk(0, 10, false, 1)));
        assert!(!l.try_lock(lk(0, 10, true, 1)));
    }

    #[test]
    fn adjacent_ranges_do_not_conflict() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(0, 10, true, 1)));
        assert!(l.try_lock(lk(10, 10, true, 2)));
    }

    #[test]
    fn the_zero_zero_range_conflicts_with_nothing() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(0, 0, true, 1)));
        assert!(l.try_lock(lk(0, 0, true, 2)));
        assert!(l.try_lock(lk(0, 5, true, 3)));
        assert!(!l.conflicts(0, 0, Intent::Write, 4));
    }

    #[test]
    fn unlock_needs_exact_range_and_owner_and_prefers_the_exclusive_lock() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(0, 10, true, 1)));
        assert!(l.try_lock(lk(0, 10, false, 1)));
        assert!(!l.unlock(0, 9, 1));
        assert!(!l.unlock(0, 10, 2));
        assert!(l.unlock(0, 10, 1));
        // The shared one is left: other opens may read but not write.
        assert_eq!(l.len(), 1);
        assert!(!l.conflicts(0, 1, Intent::Read, 2));
        assert!(l.conflicts(0, 1, Intent::Write, 2));
    }

    #[test]
    fn ranges_reaching_past_u64_max_are_invalid_but_the_last_byte_is_lockable() {
        assert_eq!(check_range(u64::MAX, 2), Err(InvalidRange));
        assert_eq!(check_range(u64::MAX, 1), Ok(()));
        assert_eq!(check_range(u64::MAX, 0), Ok(()));
        let mut l = LockList::default();
        assert!(l.try_lock(lk(u64::MAX, 1, true, 1)));
        assert!(!l.try_lock(lk(u64::MAX - 1, 2, true, 2)));
    }

    #[test]
    fn release_owner_drops_only_that_opens_locks() {
        let mut l = LockList::default();
        assert!(l.try_lock(lk(0, 10, false, 1)));
        assert!(l.try_lock(lk(20, 10, true, 2)));
        assert_eq!(l.release_owner(1), 1);
        assert_eq!(l.len(), 1);
        assert_eq!(l.count_owned_by(2), 1);
    }
}
