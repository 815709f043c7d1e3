//! Domain SIDs whose Unix ids only the id source knows: a domain member whose `idmap config`
//! backend is not `rid` (`ad`, `autorid`, `tdb`, …) has no arithmetic from a SID to its id, so
//! winbind is asked, as Samba's smbd asks it ([`IdSource`]; the binary speaks winbind's socket).
//!
//! Asking may wait on winbindd and a domain controller, so it is never done on an I/O thread: a
//! SET_INFO security or a CREATE with a descriptor that holds a domain SID the server does not
//! know parks for a lookup ([`crate::lookup`]), the answer goes into [`IdCache`], and the request
//! runs again and finds it there. Reading an ACL back asks the same way for the ids in the
//! configured idmap ranges that the cache does not know. ringshare stores no mapping of its own:
//! the cache holds winbind's answers for as long as winbind's own cache would
//! ([`POSITIVE_MS`], [`NEGATIVE_MS`]), at most [`CACHE_MAX`] of each kind, and is emptied on
//! reload. Time comes in as an argument (monotonic milliseconds).

use std::collections::HashMap;

use ringshare_wire::security::{SecurityDescriptor, Sid};

/// A Unix id as the id source gives it ([MS-DTYP] has no such thing; winbind's `struct unixid`
/// has the same three kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Xid {
    Uid(u32),
    Gid(u32),
    /// One id that serves as both (winbind's rid and autorid backends give every SID this).
    Both(u32),
}

impl Xid {
    /// The uid it serves as, if any.
    pub fn uid(self) -> Option<u32> {
        match self {
            Xid::Uid(u) | Xid::Both(u) => Some(u),
            Xid::Gid(_) => None,
        }
    }

    /// The gid it serves as, if any.
    pub fn gid(self) -> Option<u32> {
        match self {
            Xid::Gid(g) | Xid::Both(g) => Some(g),
            Xid::Uid(_) => None,
        }
    }
}

/// Who maps domain SIDs to Unix ids and back: the same source winbind's NSS module and Samba's
/// smbd use. Called from the lookup threads only (it may wait).
pub trait IdSource: Send + Sync {
    /// The ids of `sids`, one answer each in order (None: the source maps it to nothing), or
    /// why the source could not answer at all.
    fn ids_of(&self, sids: &[Sid]) -> Result<Vec<Option<Xid>>, String>;
    /// The SIDs of `ids` (each a [`Xid::Uid`] or [`Xid::Gid`]), one answer each in order.
    fn sids_of(&self, ids: &[Xid]) -> Result<Vec<Option<Sid>>, String>;
    /// The names of domain SIDs as the source's own lookups give them (winbind asks the
    /// domain, as Samba's smbd does through it), one answer each in order; None when the source
    /// names no SIDs (then the names are asked of NSS by the SIDs' ids).
    fn names_of(&self, sids: &[Sid]) -> Option<Result<Vec<Option<SidName>>, String>> {
        let _ = sids;
        None
    }
    /// The SIDs of account names (`DOMAIN\\user`, `user@realm`), one answer each in order;
    /// None when the source looks up no names (then NSS gives their ids).
    fn sids_of_names(&self, names: &[String]) -> Option<Result<Vec<Option<NamedSid>>, String>> {
        let _ = names;
        None
    }
}

/// A name's SID and the account it is ([`IdSource::sids_of_names`]).
pub type NamedSid = (Sid, SidName);

/// A domain account as the domain names it: its domain's NetBIOS name, its own name (empty
/// for a domain itself) and its SID_NAME_USE ([MS-LSAT] 2.2.13).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SidName {
    pub domain: String,
    pub name: String,
    pub kind: u16,
}

/// What the id source answered for one lookup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdAnswers {
    pub sids: Vec<(Sid, Option<Xid>)>,
    pub ids: Vec<(Xid, Option<Sid>)>,
}

/// A positive answer is kept this long: winbind's `idmap cache time` default (7 days), so the
/// cache never holds a mapping longer than winbind itself would.
pub const POSITIVE_MS: u64 = 604_800_000;
/// "No id" is kept this long: winbind's `idmap negative cache time` default (120 s).
pub const NEGATIVE_MS: u64 = 120_000;
/// The most SIDs (and, apart, ids) kept; past it the expired go, then the oldest half.
pub(crate) const CACHE_MAX: usize = 16_384;

struct Entry<T> {
    value: Option<T>,
    expires_ms: u64,
    added_ms: u64,
}

/// The id source's answers, by SID and by id.
#[derive(Default)]
pub(crate) struct IdCache {
    by_sid: HashMap<Sid, Entry<Xid>>,
    /// (is a gid, id) → its SID.
    by_id: HashMap<(bool, u32), Entry<Sid>>,
}

fn put<K: std::hash::Hash + Eq + Clone, T>(
    map: &mut HashMap<K, Entry<T>>,
    key: K,
    value: Option<T>,
    now_ms: u64,
) {
    if map.len() >= CACHE_MAX && !map.contains_key(&key) {
        map.retain(|_, e| e.expires_ms > now_ms);
        if map.len() >= CACHE_MAX {
            let mut ages: Vec<u64> = map.values().map(|e| e.added_ms).collect();
            ages.sort_unstable();
            let cut = ages[ages.len() / 2];
            map.retain(|_, e| e.added_ms > cut);
        }
    }
    let life = if value.is_some() {
        POSITIVE_MS
    } else {
        NEGATIVE_MS
    };
    map.insert(
        key,
        Entry {
            value,
            expires_ms: now_ms.saturating_add(life),
            added_ms: now_ms,
        },
    );
}

fn get<'a, K: std::hash::Hash + Eq, T>(
    map: &'a HashMap<K, Entry<T>>,
    key: &K,
    now_ms: u64,
) -> Option<&'a Option<T>> {
    map.get(key)
        .filter(|e| e.expires_ms > now_ms)
        .map(|e| &e.value)
}

fn id_key(x: Xid) -> Vec<(bool, u32)> {
    match x {
        Xid::Uid(u) => vec![(false, u)],
        Xid::Gid(g) => vec![(true, g)],
        Xid::Both(i) => vec![(false, i), (true, i)],
    }
}

impl IdCache {
    /// Keep what the source answered at `now_ms`. A SID's id also answers for the id's SID.
    pub fn remember(&mut self, a: &IdAnswers, now_ms: u64) {
        for (sid, xid) in &a.sids {
            put(&mut self.by_sid, sid.clone(), *xid, now_ms);
            for k in xid.map(id_key).unwrap_or_default() {
                put(&mut self.by_id, k, Some(sid.clone()), now_ms);
            }
        }
        for (xid, sid) in &a.ids {
            for k in id_key(*xid) {
                put(&mut self.by_id, k, sid.clone(), now_ms);
            }
        }
    }

    /// What the source said of `sid`: `Some(None)` for "no id", `None` when not asked (or the
    /// answer expired).
    pub(crate) fn id_of(&self, sid: &Sid, now_ms: u64) -> Option<Option<Xid>> {
        get(&self.by_sid, sid, now_ms).copied()
    }

    /// What the source said of the uid (`gid` false) or gid `id`.
    pub fn sid_of(&self, gid: bool, id: u32, now_ms: u64) -> Option<Option<Sid>> {
        get(&self.by_id, &(gid, id), now_ms).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.by_sid.is_empty() && self.by_id.is_empty()
    }

    pub fn clear(&mut self) {
        self.by_sid.clear();
        self.by_id.clear();
    }

    /// How many SIDs and ids are kept (the tests look).
    #[cfg(test)]
    pub fn len(&self) -> (usize, usize) {
        (self.by_sid.len(), self.by_id.len())
    }
}

/// Whether `sid` is a domain account's (S-1-5-21-…, the only SIDs winbind maps that the server
/// cannot place itself): Everyone, creator SIDs, BUILTIN and Unix SIDs are not asked about.
pub(crate) fn is_domain_sid(sid: &Sid) -> bool {
    sid.authority == [0, 0, 0, 0, 0, 5]
        && sid.sub_authorities.first() == Some(&21)
        && sid.sub_authorities.len() >= 5
}

/// The SIDs a descriptor names (owner, group, DACL entries), each once.
pub fn sids_in(sd: &SecurityDescriptor) -> Vec<&Sid> {
    let mut out: Vec<&Sid> = Vec::new();
    let aces = sd.dacl.iter().flat_map(|d| d.aces.iter());
    for s in sd
        .owner
        .iter()
        .chain(sd.group.iter())
        .chain(aces.filter_map(|a| a.sid()))
    {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> Sid {
        s.parse().unwrap()
    }

    #[test]
    fn answers_are_kept_until_they_expire_and_a_sids_id_answers_for_the_id() {
        let mut c = IdCache::default();
        let sales = sid("S-1-5-21-1-2-3-1105");
        let nobody = sid("S-1-5-21-1-2-3-9999");
        c.remember(
            &IdAnswers {
                sids: vec![
                    (sales.clone(), Some(Xid::Gid(70001))),
                    (nobody.clone(), None),
                ],
                ids: vec![],
            },
            1000,
        );
        assert_eq!(c.id_of(&sales, 2000), Some(Some(Xid::Gid(70001))));
        assert_eq!(c.sid_of(true, 70001, 2000), Some(Some(sales.clone())));
        assert_eq!(c.sid_of(false, 70001, 2000), None, "a gid is no uid");
        assert_eq!(c.id_of(&nobody, 2000), Some(None), "no id, remembered");
        assert_eq!(
            c.id_of(&nobody, 1000 + NEGATIVE_MS),
            None,
            "asked again later"
        );
        assert_eq!(
            c.id_of(&sales, 1000 + NEGATIVE_MS),
            Some(Some(Xid::Gid(70001)))
        );
        assert_eq!(c.id_of(&sales, 1000 + POSITIVE_MS), None);
    }

    #[test]
    fn the_cache_never_holds_more_than_its_bound() {
        let mut c = IdCache::default();
        for i in 0..(CACHE_MAX as u32 + 10) {
            let s = sid(&format!("S-1-5-21-1-2-3-{i}"));
            c.remember(
                &IdAnswers {
                    sids: vec![(s, Some(Xid::Both(100_000 + i)))],
                    ids: vec![],
                },
                u64::from(i),
            );
        }
        let (sids, ids) = c.len();
        assert!(sids <= CACHE_MAX && ids <= CACHE_MAX, "{sids} {ids}");
        let newest = sid(&format!("S-1-5-21-1-2-3-{}", CACHE_MAX as u32 + 9));
        assert!(c.id_of(&newest, 0).is_some(), "the newest stays");
    }

    #[test]
    fn only_domain_account_sids_are_asked_about() {
        assert!(is_domain_sid(&sid("S-1-5-21-1-2-3-1105")));
        assert!(
            !is_domain_sid(&sid("S-1-5-21-1-2-3")),
            "a domain, no account"
        );
        assert!(!is_domain_sid(&Sid::everyone()));
        assert!(!is_domain_sid(&sid("S-1-5-32-544")));
        assert!(!is_domain_sid(&Sid::unix_user(1000)));
    }
}
