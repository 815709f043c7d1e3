//! Active Directory member mode (`security = ads`): who a domain user acts as, and how domain
//! SIDs and Unix ids meet.
//!
//! - **Name.** A Kerberos logon's PAC names the user `DOMAIN\name`. The Unix account is found
//!   through NSS, where winbind (or sssd) answers for the domain: first as winbind spells
//!   domain accounts (`DOMAIN\name`, with `winbind separator`; the bare name with `winbind use
//!   default domain`), then, for the server's own workgroup, the bare name (Samba's order, which
//!   also finds sssd's short names). ringshare keeps no id mapping of its own.
//! - **Token.** The PAC's SIDs (user, groups, extra SIDs, resource groups) join the Unix SIDs in
//!   the token stored NT ACLs are checked against, so an ACE a Windows admin sets for
//!   `DOMAIN\Sales` decides access as on a Samba member.
//! - **Ids.** Where `idmap config DOMAIN : backend = rid` says how the domain's RIDs become Unix
//!   ids (id = range low + RID − base_rid, the same arithmetic winbind's rid backend does), a
//!   domain SID in an ACL a client sets becomes the POSIX ACL entries of its id, and a file's ids
//!   read back as the domain's SIDs. The domain's SID is learnt from the PACs of its users (each
//!   logon states it); until a user of the domain has logged on, its ids read as Unix SIDs.
//!
//! This module knows nothing of connections, sessions or the lookups that ask the domain
//! ([`crate::lookup`], above it): it is configuration and mappings.

use std::collections::HashMap;
use std::sync::RwLock;

use ringshare_auth::DomainNtlm;

use ringshare_wire::security::{Ace, AceBody, SecurityDescriptor, Sid};

use crate::sidcache::{is_domain_sid, sids_in, IdAnswers, IdCache, Xid};

/// What a domain member asks its domain; the server binary answers through winbind.
pub trait DomainLogons: Send + Sync {
    /// Check a domain user's NTLMv2 response: the NTLMv2 session base key when the domain
    /// accepts it, or why not (as the domain said it).
    fn ntlm(&self, request: &DomainNtlm<'_>) -> Result<[u8; 16], String>;
}

/// `idmap config DOMAIN : backend = rid` with its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RidRange {
    /// The domain's NetBIOS name, upper case.
    pub domain: String,
    /// `range = low - high`.
    pub low: u32,
    pub high: u32,
    /// `base_rid` (0 by default).
    pub base_rid: u32,
}

impl RidRange {
    /// The Unix id of RID `rid`, if it falls in the range.
    pub(crate) fn id_of(&self, rid: u32) -> Option<u32> {
        let id = u64::from(self.low) + u64::from(rid.checked_sub(self.base_rid)?);
        (id <= u64::from(self.high)).then_some(id as u32)
    }

    /// The RID of Unix id `id`, if it falls in the range.
    pub(crate) fn rid_of(&self, id: u32) -> Option<u32> {
        if id < self.low || id > self.high {
            return None;
        }
        (id - self.low).checked_add(self.base_rid)
    }
}

/// The member-server rules from smb.conf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainMember {
    /// `workgroup`: the domain's NetBIOS name, upper case.
    pub workgroup: String,
    /// `winbind separator` (`\` by default).
    pub separator: char,
    /// `winbind use default domain`: winbind names the workgroup's accounts without a domain.
    pub default_domain: bool,
    /// Domains whose ids the rid backend computes.
    pub rid_ranges: Vec<RidRange>,
    /// The ranges of the other `idmap config` backends (`*`, `ad`, `autorid`, …): a file's ids
    /// in them are asked of the id source when an ACL is read ([`crate::sidcache`]).
    pub id_ranges: Vec<(u32, u32)>,
}

impl DomainMember {
    /// The NSS names to try, in order, for the account `name` of domain `domain`.
    pub fn account_names(&self, domain: &str, name: &str) -> Vec<String> {
        let own = domain.eq_ignore_ascii_case(&self.workgroup);
        let qualified = format!("{}{}{}", domain.to_ascii_uppercase(), self.separator, name);
        if own && self.default_domain {
            vec![name.to_string(), qualified]
        } else if own {
            vec![qualified, name.to_string()]
        } else {
            vec![qualified]
        }
    }
}

/// Domain SIDs learnt from logons and the rid ranges they map through, and the id source's
/// answers for the other backends ([`crate::sidcache`]).
#[derive(Default)]
pub struct SidMap {
    /// Domain NetBIOS name (upper case) → its SID, from PACs.
    domains: RwLock<HashMap<String, Sid>>,
    ranges: RwLock<Vec<RidRange>>,
    /// Ranges of the other idmap backends.
    id_ranges: RwLock<Vec<(u32, u32)>>,
    cache: RwLock<IdCache>,
    /// The server's own account domain ([`crate::localsam`]), whose RIDs are Unix ids by
    /// arithmetic.
    account: RwLock<Option<Sid>>,
}

impl std::fmt::Debug for SidMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SidMap")
            .field("ranges", &self.ranges)
            .field("id_ranges", &self.id_ranges)
            .finish()
    }
}

/// The most domains remembered (a forest with many trusts; one entry per domain).
const DOMAINS_MAX: usize = 1024;

impl SidMap {
    /// Replace the rid ranges (start, reload).
    pub(crate) fn set_ranges(&self, ranges: Vec<RidRange>) {
        *self.ranges.write().unwrap_or_else(|e| e.into_inner()) = ranges;
    }

    /// Replace the other backends' ranges and forget the id source's answers (start, reload:
    /// `net cache flush` then `ringshare reload` makes both ask winbind again).
    pub(crate) fn set_id_ranges(&self, ranges: Vec<(u32, u32)>) {
        *self.id_ranges.write().unwrap_or_else(|e| e.into_inner()) = ranges;
        self.cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The other backends' ranges.
    pub fn id_ranges(&self) -> Vec<(u32, u32)> {
        self.id_ranges
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Keep what the id source answered ([`crate::sidcache`]).
    pub fn remember(&self, answers: &IdAnswers, now_ms: u64) {
        self.cache
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remember(answers, now_ms);
    }

    /// The domain SIDs of `sd` that neither a rid range nor the id source's answers place: the
    /// ones to ask about before the descriptor becomes a POSIX ACL.
    pub fn unknown_sids(&self, sd: &SecurityDescriptor, now_ms: u64) -> Vec<Sid> {
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        sids_in(sd)
            .into_iter()
            .filter(|s| is_domain_sid(s))
            .filter(|s| self.rid_id_of(s).is_none() && cache.id_of(s, now_ms).is_none())
            .cloned()
            .collect()
    }

    /// The Unix ids of `sd` (read from a POSIX ACL, as Unix SIDs) in the other backends' ranges
    /// that the id source was not asked about yet.
    pub fn unknown_ids(&self, sd: &SecurityDescriptor, now_ms: u64) -> Vec<Xid> {
        let ids: Vec<Xid> = sids_in(sd)
            .into_iter()
            .filter_map(|s| match (s.unix_uid(), s.unix_gid()) {
                (Some(u), _) => Some(Xid::Uid(u)),
                (_, Some(g)) => Some(Xid::Gid(g)),
                _ => None,
            })
            .collect();
        self.unknown_of(&ids, now_ms)
    }

    /// Those of `ids` (each a uid or a gid) in the other backends' ranges that the id source
    /// was not asked about yet.
    pub fn unknown_of(&self, ids: &[Xid], now_ms: u64) -> Vec<Xid> {
        let ranges = self.id_ranges.read().unwrap_or_else(|e| e.into_inner());
        if ranges.is_empty() {
            return Vec::new();
        }
        let cache = self.cache.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Xid> = Vec::new();
        for &x in ids {
            let (gid, id) = match x {
                Xid::Uid(u) => (false, u),
                Xid::Gid(g) | Xid::Both(g) => (true, g),
            };
            let in_range = ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&id));
            if in_range && cache.sid_of(gid, id, now_ms).is_none() && !out.contains(&x) {
                out.push(x);
            }
        }
        out
    }

    /// Remember that domain `name` has SID `sid` (from a verified PAC).
    pub fn learn(&self, name: &str, sid: &Sid) {
        let name = name.to_ascii_uppercase();
        if self
            .domains
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&name)
            == Some(sid)
        {
            return;
        }
        let mut d = self.domains.write().unwrap_or_else(|e| e.into_inner());
        if d.len() < DOMAINS_MAX || d.contains_key(&name) {
            d.insert(name, sid.clone());
        }
    }

    /// The domains logons stated (NetBIOS name, SID), in no order.
    pub fn domains(&self) -> Vec<(String, Sid)> {
        self.domains
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(n, s)| (n.clone(), s.clone()))
            .collect()
    }

    /// Whether the id source answered anything still kept.
    fn has_answers(&self) -> bool {
        !self
            .cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The server's own account domain from now on ([`crate::localsam`]): its SIDs in a
    /// descriptor a client sets are the Unix users and groups of their RIDs.
    pub fn set_account_domain(&self, sid: Sid) {
        *self.account.write().unwrap_or_else(|e| e.into_inner()) = Some(sid);
    }

    /// The Unix id of a SID of the server's own account domain.
    fn account_id_of(&self, sid: &Sid) -> Option<Xid> {
        let account = self.account.read().unwrap_or_else(|e| e.into_inner());
        crate::localsam::id_of(account.as_ref()?, sid)
    }

    /// The Unix user a SID names, for quotas: S-1-22-1-uid, a SID of the server's own account
    /// domain ([`crate::localsam`], as LookupNames answers for the accounts of the user
    /// database), else a domain SID a rid range or the id source maps.
    pub fn uid_of(&self, sid: &Sid, now_ms: u64) -> Option<u32> {
        sid.unix_uid()
            .or_else(|| self.account_id_of(sid).and_then(Xid::uid))
            .or_else(|| self.id_of(sid, now_ms).and_then(Xid::uid))
    }

    /// Whether any domain maps to Unix ids through rid arithmetic.
    pub(crate) fn is_active(&self) -> bool {
        !self
            .ranges
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
            && !self
                .domains
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    }

    /// The Unix id of a domain SID: by a rid range (one number that serves as both uid and
    /// gid, as winbind's rid backend maps it), else as the id source answered.
    pub(crate) fn id_of(&self, sid: &Sid, now_ms: u64) -> Option<Xid> {
        if let Some(id) = self.rid_id_of(sid) {
            return Some(Xid::Both(id));
        }
        self.cache
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .id_of(sid, now_ms)
            .flatten()
    }

    /// The id a rid range gives a domain SID.
    pub(crate) fn rid_id_of(&self, sid: &Sid) -> Option<u32> {
        let (rid, domain) = split(sid)?;
        let domains = self.domains.read().unwrap_or_else(|e| e.into_inner());
        let name = domains.iter().find(|(_, s)| **s == domain)?.0;
        let ranges = self.ranges.read().unwrap_or_else(|e| e.into_inner());
        ranges.iter().find(|r| &r.domain == name)?.id_of(rid)
    }

    /// The domain SIDs of a Unix user and its groups, where rid ranges or the id source's
    /// answers hold them (a domain user who logged on without a PAC, over NTLM, gets their
    /// token's domain SIDs this way).
    pub fn sids_of(&self, uid: u32, gids: &[u32], now_ms: u64) -> Vec<Sid> {
        if !self.is_active() && !self.has_answers() {
            return Vec::new();
        }
        let ids = std::iter::once((false, uid)).chain(gids.iter().map(|g| (true, *g)));
        let mut out: Vec<Sid> = Vec::new();
        for (gid, id) in ids {
            if let Some(s) = self.sid_of_id(gid, id, now_ms) {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// The domain SID of Unix id `id`, if a rid range holds it and its domain's SID is known.
    pub fn sid_of(&self, id: u32) -> Option<Sid> {
        let ranges = self.ranges.read().unwrap_or_else(|e| e.into_inner());
        let range = ranges.iter().find(|r| r.rid_of(id).is_some())?;
        let domains = self.domains.read().unwrap_or_else(|e| e.into_inner());
        let domain = domains.get(&range.domain)?;
        let mut subs = domain.sub_authorities.clone();
        subs.push(range.rid_of(id)?);
        Some(Sid {
            revision: domain.revision,
            authority: domain.authority,
            sub_authorities: subs,
        })
    }

    /// The domain SID of the uid (`gid` false) or gid `id`: by a rid range, else as the id
    /// source answered.
    pub(crate) fn sid_of_id(&self, gid: bool, id: u32, now_ms: u64) -> Option<Sid> {
        self.sid_of(id).or_else(|| {
            self.cache
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .sid_of(gid, id, now_ms)
                .flatten()
        })
    }
}

impl SidMap {
    /// A descriptor a client set, as the POSIX mapping reads it: a domain SID with an id
    /// becomes the Unix user and the Unix group of that id when the id serves as both (winbind's
    /// rid and autorid backends give each SID one such id, and Samba writes a `user:` and a
    /// `group:` entry for it), else the Unix user or group it is.
    pub(crate) fn to_unix(&self, sd: &SecurityDescriptor, now_ms: u64) -> SecurityDescriptor {
        let mut out = sd.clone();
        let local = self
            .account
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        if !local && !self.is_active() && !self.has_answers() {
            return out;
        }
        let id_of = |s: &Sid| self.account_id_of(s).or_else(|| self.id_of(s, now_ms));
        if let Some(u) = out.owner.as_ref().and_then(id_of).and_then(Xid::uid) {
            out.owner = Some(Sid::unix_user(u));
        }
        if let Some(g) = out.group.as_ref().and_then(id_of).and_then(Xid::gid) {
            out.group = Some(Sid::unix_group(g));
        }
        if let Some(dacl) = out.dacl.as_mut() {
            let mut aces = Vec::with_capacity(dacl.aces.len());
            for ace in dacl.aces.drain(..) {
                match ace.sid().and_then(id_of) {
                    Some(x) => {
                        if let Some(u) = x.uid() {
                            aces.push(with_sid(&ace, Sid::unix_user(u)));
                        }
                        if let Some(g) = x.gid() {
                            aces.push(with_sid(&ace, Sid::unix_group(g)));
                        }
                    }
                    None => aces.push(ace),
                }
            }
            dacl.aces = aces;
        }
        out
    }

    /// A descriptor mapped from a file's POSIX ACL, as a client of a member server sees it:
    /// Unix users and groups whose ids a rid range holds, or whose SIDs the id source gave, are
    /// the domain's SIDs again, and an ACE that then repeats the one before it (the `user:` and
    /// `group:` entries of one id) is shown once.
    pub(crate) fn to_domain(&self, sd: &mut SecurityDescriptor, now_ms: u64) {
        if !self.is_active() && !self.has_answers() {
            return;
        }
        let map = |s: &Sid| match (s.unix_uid(), s.unix_gid()) {
            (Some(u), _) => self.sid_of_id(false, u, now_ms),
            (_, Some(g)) => self.sid_of_id(true, g, now_ms),
            _ => None,
        };
        if let Some(d) = sd.owner.as_ref().and_then(map) {
            sd.owner = Some(d);
        }
        if let Some(d) = sd.group.as_ref().and_then(map) {
            sd.group = Some(d);
        }
        if let Some(dacl) = sd.dacl.as_mut() {
            let mut aces: Vec<Ace> = Vec::with_capacity(dacl.aces.len());
            for ace in dacl.aces.drain(..) {
                let ace = match ace.sid().and_then(map) {
                    Some(d) => with_sid(&ace, d),
                    None => ace,
                };
                if aces.last() != Some(&ace) {
                    aces.push(ace);
                }
            }
            dacl.aces = aces;
        }
    }
}

/// `ace` for another SID.
fn with_sid(ace: &Ace, sid: Sid) -> Ace {
    let mut a = ace.clone();
    if let AceBody::MaskSid { sid: s, .. } = &mut a.body {
        *s = sid;
    }
    a
}

/// A SID's last sub-authority and the SID of its domain.
fn split(sid: &Sid) -> Option<(u32, Sid)> {
    let (rid, rest) = sid.sub_authorities.split_last()?;
    if rest.is_empty() {
        return None;
    }
    Some((
        *rid,
        Sid {
            revision: sid.revision,
            authority: sid.authority,
            sub_authorities: rest.to_vec(),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(default_domain: bool) -> DomainMember {
        DomainMember {
            workgroup: "RSAD".into(),
            separator: '\\',
            default_domain,
            rid_ranges: vec![],
            id_ranges: vec![],
        }
    }

    #[test]
    fn a_domain_user_is_looked_up_as_winbind_names_them_then_by_the_bare_name() {
        assert_eq!(
            member(false).account_names("rsad", "alice"),
            ["RSAD\\alice", "alice"]
        );
        assert_eq!(
            member(true).account_names("RSAD", "alice"),
            ["alice", "RSAD\\alice"]
        );
        // A trusted domain's user is never the local account of the same name.
        assert_eq!(
            member(true).account_names("OTHER", "alice"),
            ["OTHER\\alice"]
        );
    }

    /// RSAD's RIDs at 100000-199999, as `idmap config RSAD : backend = rid` gives them.
    fn rsad_map() -> SidMap {
        let map = SidMap::default();
        map.set_ranges(vec![RidRange {
            domain: "RSAD".into(),
            low: 100_000,
            high: 199_999,
            base_rid: 0,
        }]);
        map
    }

    #[test]
    fn rid_ranges_map_sids_of_a_learnt_domain_to_ids_and_back() {
        let map = rsad_map();
        let dom: Sid = "S-1-5-21-1-2-3".parse().unwrap();
        let alice: Sid = "S-1-5-21-1-2-3-1102".parse().unwrap();
        assert_eq!(map.id_of(&alice, 0), None, "domain SID not learnt yet");
        assert_eq!(map.sid_of(101_102), None);
        assert!(!map.is_active());
        map.learn("rsad", &dom);
        assert!(map.is_active());
        assert_eq!(map.id_of(&alice, 0), Some(Xid::Both(101_102)));
        assert_eq!(map.sid_of(101_102), Some(alice));
        assert_eq!(map.sid_of(99_999), None);
        assert_eq!(map.sid_of(1000), None);
        let other: Sid = "S-1-5-21-9-9-9-1102".parse().unwrap();
        assert_eq!(map.id_of(&other, 0), None);
        // A RID past the range has no id.
        let far: Sid = "S-1-5-21-1-2-3-100000".parse().unwrap();
        assert_eq!(map.id_of(&far, 0), None);
    }

    #[test]
    fn a_domain_sid_in_a_dacl_becomes_its_unix_user_and_group_and_reads_back_once() {
        use ringshare_wire::consts::AccessMask;
        use ringshare_wire::security::Acl;
        let map = rsad_map();
        map.learn("RSAD", &"S-1-5-21-1-2-3".parse().unwrap());
        let proj: Sid = "S-1-5-21-1-2-3-1104".parse().unwrap();
        let alice: Sid = "S-1-5-21-1-2-3-1102".parse().unwrap();
        let sd = SecurityDescriptor {
            control: 0,
            rm_control: 0,
            owner: Some(alice.clone()),
            group: None,
            sacl: None,
            dacl: Some(Acl::new(vec![
                Ace::allow(proj.clone(), AccessMask(0x1200a9), 0),
                Ace::allow(Sid::everyone(), AccessMask(0x1200a9), 0),
            ])),
        };
        let unix = map.to_unix(&sd, 0);
        assert_eq!(unix.owner, Some(Sid::unix_user(101_102)));
        let sids: Vec<Sid> = unix
            .dacl
            .as_ref()
            .unwrap()
            .aces
            .iter()
            .map(|a| a.sid().unwrap().clone())
            .collect();
        assert_eq!(
            sids,
            [
                Sid::unix_user(101_104),
                Sid::unix_group(101_104),
                Sid::everyone()
            ]
        );
        let mut back = unix;
        map.to_domain(&mut back, 0);
        assert_eq!(back, sd);
        // Without a learnt domain nothing changes.
        assert_eq!(SidMap::default().to_unix(&sd, 0), sd);
    }

    #[test]
    fn base_rid_shifts_the_range() {
        let r = RidRange {
            domain: "D".into(),
            low: 5000,
            high: 5999,
            base_rid: 1000,
        };
        assert_eq!(r.id_of(1102), Some(5102));
        assert_eq!(r.id_of(999), None);
        assert_eq!(r.rid_of(5102), Some(1102));
    }
}
