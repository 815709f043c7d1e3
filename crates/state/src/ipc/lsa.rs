//! The `lsarpc` pipe: [MS-LSAD] LsarOpenPolicy (opnum 6) / LsarOpenPolicy2 (44), LsarClose
//! (0), LsarQueryInformationPolicy (7) / 2 (46) for the account, primary and DNS domain
//! classes, and [MS-LSAT] LsarLookupSids (15) / 2 (57) / 3 (76) and LsarLookupNames (14) / 2
//! (58) / 3 (68) / 4 (77): what ACL editors (Windows' Security tab, `smbcacls`, `rpcclient`)
//! ask to show owners and ACEs by name.
//!
//! Names come from the same places the ACL mapping takes its SIDs from ([`crate::ntsd`]):
//! S-1-22-1-uid is `Unix User\name` and S-1-22-2-gid `Unix Group\name` (NSS), and the
//! well-known SIDs (Everyone, CREATOR OWNER, NT AUTHORITY\..., BUILTIN\...) by Samba's
//! names; on an AD member, the domain's SIDs and names ([`member`]). NSS and the id source
//! are never asked here: a call that needs it says which ids and names
//! ([`NameQuery`]); the request parks while the driver's lookup threads ask
//! ([`crate::lookup::Lookup::Names`]), and the call runs again with the answers.

use ringshare_wire::security::Sid;
use ringshare_wire::{NtStatus, WireError};

pub use super::local::Needs;
use super::local::{self, Resolver};
use super::ndr::{NdrReader, NdrWriter};
use super::ServerFacts;
use crate::localsam;
use crate::lookup::NameAnswers;

/// SID_NAME_USE ([MS-LSAT] 2.2.13).
pub(super) const USE_USER: u16 = 1;
pub(super) const USE_GROUP: u16 = 2;
const USE_DOMAIN: u16 = 3;
pub(super) const USE_ALIAS: u16 = 4;
const USE_WELL_KNOWN: u16 = 5;
pub(super) const USE_UNKNOWN: u16 = 8;

/// STATUS_SOME_NOT_MAPPED: some names (or SIDs) were translated, not all.
const SOME_NOT_MAPPED: NtStatus = NtStatus(0x0000_0107);
/// More SIDs or names than [MS-LSAT] 3.1.4.8 lets one call translate.
const LOOKUP_MAX: u32 = 20480;
/// Policy handles one pipe may hold open.
const HANDLES_MAX: usize = 64;
/// Samba's LSA_REF_DOMAIN_LIST_MULTIPLIER: the MaxEntries of a referenced domain list.
const REF_DOMAINS_MAX: u32 = 32;

/// The pipe's policy handles.
#[derive(Default)]
pub struct State {
    handles: Vec<[u8; 16]>,
    next: u32,
}

/// One lsarpc call: the NDR reply stub, or the DCE/RPC fault to answer (an opnum not
/// served, a Close of a handle the pipe does not have), or what NSS must be asked first. `answers` holds what was asked for this call; `last` says
/// it was (so what it lacks is not found).
pub fn call(
    opnum: u16,
    stub: &[u8],
    facts: &ServerFacts,
    state: &mut State,
    (answers, last): (&NameAnswers, bool),
) -> Result<Result<Vec<u8>, u32>, Needs> {
    let mut names = Resolver::new((answers, last));
    let out = match opnum {
        0 => match close(stub, state) {
            Some(out) => out,
            None => return Ok(Err(super::FAULT_CONTEXT_MISMATCH)),
        },
        6 | 44 => open_policy(state),
        7 | 46 => query_info(stub, facts, state),
        15 | 57 | 76 => lookup_sids(opnum, stub, facts, state, &mut names),
        14 | 58 | 68 | 77 => lookup_names(opnum, stub, facts, state, &mut names),
        _ => return Ok(Err(super::FAULT_OP_RANGE)),
    };
    names.finish()?;
    Ok(Ok(out))
}

fn sid(s: &str) -> Sid {
    s.parse().unwrap_or_else(|_| Sid::null())
}

/// A name, the domain it belongs to (name, SID) and what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Named {
    domain: String,
    domain_sid: Sid,
    name: String,
    kind: u16,
}

/// Samba's names of the NT AUTHORITY (S-1-5-rid) SIDs.
const NT_AUTHORITY: &[(u32, &str)] = &[
    (1, "Dialup"),
    (2, "Network"),
    (3, "Batch"),
    (4, "Interactive"),
    (6, "Service"),
    (7, "Anonymous Logon"),
    (8, "Proxy"),
    (9, "Enterprise Domain Controllers"),
    (10, "Self"),
    (11, "Authenticated Users"),
    (12, "Restricted"),
    (13, "Terminal Server User"),
    (14, "Remote Interactive Logon"),
    (15, "This Organization"),
    (18, "SYSTEM"),
    (19, "Local Service"),
    (20, "Network Service"),
];

/// The BUILTIN (S-1-5-32-rid) aliases.
const BUILTIN: &[(u32, &str)] = &[
    (544, "Administrators"),
    (545, "Users"),
    (546, "Guests"),
    (547, "Power Users"),
    (548, "Account Operators"),
    (549, "Server Operators"),
    (550, "Print Operators"),
    (551, "Backup Operators"),
    (552, "Replicator"),
    (554, "Pre-Windows 2000 Compatible Access"),
    (555, "Remote Desktop Users"),
    (556, "Network Configuration Operators"),
    (558, "Performance Monitor Users"),
    (559, "Performance Log Users"),
    (562, "Distributed COM Users"),
];

/// SIDs of authorities 1 (World) and 3 (Creator), whose domain has no name.
const WORLD_AND_CREATOR: &[(&str, &str)] = &[
    ("S-1-1-0", "Everyone"),
    ("S-1-3-0", "Creator Owner"),
    ("S-1-3-1", "Creator Group"),
    ("S-1-3-2", "Creator Owner Server"),
    ("S-1-3-3", "Creator Group Server"),
    ("S-1-3-4", "Owner Rights"),
];

const UNIX_USERS: &str = "Unix User";
const UNIX_GROUPS: &str = "Unix Group";

/// The RID of a BUILTIN alias.
pub(super) fn builtin_rid(name: &str) -> Option<u32> {
    BUILTIN
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(name))
        .map(|(r, _)| *r)
}

/// The name of a BUILTIN alias.
pub(super) fn builtin_name(rid: u32) -> Option<&'static str> {
    BUILTIN.iter().find(|(r, _)| *r == rid).map(|(_, n)| *n)
}

/// The group every account of the user database is in (`SERVER\None`).
pub(super) const RID_NONE: u32 = 513;

/// A SID of the account domain (`SERVER\name`, as the samr pipe names the user database's
/// accounts and the guest account, or `SERVER\None`): `Ok(None)` for one that names nothing, `Err` for a SID
/// of another domain.
fn local_name(s: &Sid, facts: &ServerFacts, names: &mut Resolver<'_>) -> Result<Option<Named>, ()> {
    let account = localsam::account_domain_sid(&facts.netbios_name);
    let Some(rid) = localsam::rid_in(&account, s) else {
        return Err(());
    };
    let named = |name: String, kind| Named {
        domain: facts.netbios_name.clone(),
        domain_sid: account.clone(),
        name,
        kind,
    };
    if rid == RID_NONE {
        return Ok(Some(named("None".into(), USE_GROUP)));
    }
    if rid == local::RID_GUEST {
        // Samba's passdb names RID 501 by its guest account.
        let guest = local::guest(facts, names).flatten();
        return Ok(guest.map(|g| named(g.name, USE_USER)));
    }
    let Some(all) = local::locals(facts, names) else {
        return Ok(None);
    };
    Ok(all
        .into_iter()
        .find(|l| l.rid == rid)
        .map(|l| named(l.name, USE_USER)))
}

/// The SID of `name` when it is an account of the user database or `None`, as the samr
/// pipe gives it.
fn local_sid(name: &str, facts: &ServerFacts, names: &mut Resolver<'_>) -> Option<(Sid, Named)> {
    let listed = name.eq_ignore_ascii_case("None")
        || facts
            .users
            .iter()
            .any(|u| u.name.eq_ignore_ascii_case(name));
    if !listed {
        return None;
    }
    let account = localsam::account_domain_sid(&facts.netbios_name);
    let (rid, name, kind) = if name.eq_ignore_ascii_case("None") {
        (RID_NONE, "None".to_string(), USE_GROUP)
    } else {
        let all = local::locals(facts, names)?;
        let l = all
            .into_iter()
            .find(|l| l.name.eq_ignore_ascii_case(name))?;
        (l.rid, l.name, USE_USER)
    };
    let mut s = account.clone();
    s.sub_authorities.push(rid);
    let named = Named {
        domain: facts.netbios_name.clone(),
        domain_sid: account,
        name,
        kind,
    };
    Some((s, named))
}

/// The name of `s`, if it has one.
fn name_of(s: &Sid, facts: &ServerFacts, names: &mut Resolver<'_>) -> Option<Named> {
    if let Ok(local) = local_name(s, facts, names) {
        return local;
    }
    let subs = s.sub_authorities.as_slice();
    let in_domain = |domain: &str, dsid: &str, name: String, kind| Named {
        domain: domain.to_string(),
        domain_sid: sid(dsid),
        name,
        kind,
    };
    match (s.authority_value(), subs) {
        (22, [1, uid]) => {
            let n = names.user_name(*uid).unwrap_or_else(|| uid.to_string());
            Some(in_domain(UNIX_USERS, "S-1-22-1", n, USE_USER))
        }
        (22, [2, gid]) => {
            let n = names.group_name(*gid).unwrap_or_else(|| gid.to_string());
            Some(in_domain(UNIX_GROUPS, "S-1-22-2", n, USE_GROUP))
        }
        (5, [32]) => Some(in_domain(
            "BUILTIN",
            "S-1-5-32",
            "BUILTIN".into(),
            USE_DOMAIN,
        )),
        (5, [32, rid]) => BUILTIN
            .iter()
            .find(|(r, _)| r == rid)
            .map(|(_, n)| in_domain("BUILTIN", "S-1-5-32", n.to_string(), USE_ALIAS)),
        (5, [rid]) => NT_AUTHORITY
            .iter()
            .find(|(r, _)| r == rid)
            .map(|(_, n)| in_domain("NT Authority", "S-1-5", n.to_string(), USE_WELL_KNOWN)),
        (1 | 3, _) => {
            let text = s.to_string();
            let (_, n) = WORLD_AND_CREATOR.iter().find(|(t, _)| *t == text)?;
            let mut dsid = s.clone();
            dsid.sub_authorities.pop();
            Some(Named {
                domain: String::new(),
                domain_sid: dsid,
                name: n.to_string(),
                kind: USE_WELL_KNOWN,
            })
        }
        _ if *s == localsam::account_domain_sid(&facts.netbios_name) => Some(Named {
            domain: facts.netbios_name.clone(),
            domain_sid: s.clone(),
            name: facts.netbios_name.clone(),
            kind: USE_DOMAIN,
        }),
        _ => member::name_of(s, facts.member.as_ref()?, names),
    }
}

/// The SID of `full` (`name`, `DOMAIN\name`), with its domain, if it has one.
fn sid_of(full: &str, facts: &ServerFacts, names: &mut Resolver<'_>) -> Option<(Sid, Named)> {
    let (domain, name) = match full.split_once('\\') {
        Some((d, n)) => (Some(d), n),
        None => (None, full),
    };
    let is = |d: &str| domain.is_none_or(|x| x.eq_ignore_ascii_case(d));
    let named = |dom: &str, dsid: &str, n: &str, kind, s: Sid| {
        Some((
            s,
            Named {
                domain: dom.to_string(),
                domain_sid: sid(dsid),
                name: n.to_string(),
                kind,
            },
        ))
    };
    if domain.is_none() || domain == Some("") {
        for (text, n) in WORLD_AND_CREATOR {
            if n.eq_ignore_ascii_case(name) {
                let s = sid(text);
                let mut dsid = s.clone();
                dsid.sub_authorities.pop();
                let named = Named {
                    domain: String::new(),
                    domain_sid: dsid,
                    name: n.to_string(),
                    kind: USE_WELL_KNOWN,
                };
                return Some((s, named));
            }
        }
    }
    // `BUILTIN`, `BUILTIN\` and a NULL or empty name are the BUILTIN domain (Windows
    // Server 2003 and later; smbtorture rpc.lsa.lookupnames).
    let builtin_domain = is("BUILTIN")
        && (name.eq_ignore_ascii_case("BUILTIN") || (domain.is_some() && name.is_empty()));
    if full.is_empty() || builtin_domain {
        return named(
            "BUILTIN",
            "S-1-5-32",
            "BUILTIN",
            USE_DOMAIN,
            sid("S-1-5-32"),
        );
    }
    if is("BUILTIN") {
        if let Some((rid, n)) = BUILTIN.iter().find(|(_, n)| n.eq_ignore_ascii_case(name)) {
            let s = sid(&format!("S-1-5-32-{rid}"));
            return named("BUILTIN", "S-1-5-32", n, USE_ALIAS, s);
        }
    }
    if is("NT Authority") {
        if let Some((rid, n)) = NT_AUTHORITY
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
        {
            let s = sid(&format!("S-1-5-{rid}"));
            return named("NT Authority", "S-1-5", n, USE_WELL_KNOWN, s);
        }
    }
    if name.is_empty() {
        return None;
    }
    let own_name = domain.is_none_or(|d| d.eq_ignore_ascii_case(&facts.netbios_name));
    if own_name {
        if let Some(found) = local_sid(name, facts, names) {
            return Some(found);
        }
    }
    // On a domain member, the domain's accounts come before Unix accounts of the same name
    // (Samba 4.22: a bare `rsalice` is RSAD\rsalice), not under this server's name.
    let special = [UNIX_USERS, UNIX_GROUPS, "BUILTIN", "NT Authority"];
    let domain_may_know = domain.is_none_or(|d| {
        !d.eq_ignore_ascii_case(&facts.netbios_name)
            && !special.iter().any(|x| x.eq_ignore_ascii_case(d))
    });
    if let (Some(m), true) = (&facts.member, domain_may_know) {
        if let Some(found) = member::sid_of(domain, name, m, names) {
            return Some(found);
        }
    }
    // A Unix account outside the user database is found bare or as `Unix User\name`, not as
    // `SERVER\name` or `WORKGROUP\name` (Samba 4.22: UNKNOWN).
    if is(UNIX_USERS) {
        if let Some(uid) = names.user(name) {
            return named(UNIX_USERS, "S-1-22-1", name, USE_USER, Sid::unix_user(uid));
        }
    }
    // A Unix group, bare or as `Unix Group\name`, is a domain group as LookupSids names it
    // (Samba 4.22's lookup_name: SID_NAME_DOM_GRP for a group no group mapping names; the
    // user database maps none here, so every Unix group is one).
    if is(UNIX_GROUPS) {
        if let Some(gid) = names.group(name) {
            return named(
                UNIX_GROUPS,
                "S-1-22-2",
                name,
                USE_GROUP,
                Sid::unix_group(gid),
            );
        }
    }
    None
}

/// The referenced domain list being built: (name, SID), each once.
#[derive(Default)]
struct Domains(Vec<(String, Sid)>);

impl Domains {
    fn index(&mut self, name: &str, s: &Sid) -> i32 {
        if let Some(i) = self.0.iter().position(|(_, d)| d == s) {
            return i as i32;
        }
        self.0.push((name.to_string(), s.clone()));
        (self.0.len() - 1) as i32
    }

    /// LSAPR_REFERENCED_DOMAIN_LIST behind a unique pointer.
    fn encode(&self, w: &mut NdrWriter) {
        w.ptr();
        w.u32(self.0.len() as u32);
        w.opt_ptr(!self.0.is_empty());
        w.u32(REF_DOMAINS_MAX);
        if self.0.is_empty() {
            return;
        }
        w.u32(self.0.len() as u32);
        for (name, _) in &self.0 {
            unicode_head(w, name);
            w.ptr();
        }
        for (name, s) in &self.0 {
            w.counted_chars(name, 0);
            put_sid(w, s);
        }
    }
}

/// The fixed part of an RPC_UNICODE_STRING: lengths in bytes and a pointer to its buffer.
pub(super) fn unicode_head(w: &mut NdrWriter, s: &str) {
    // The structure holds a pointer: 4-byte aligned.
    w.align4();
    let bytes = (s.encode_utf16().count() * 2) as u16;
    w.u16(bytes);
    w.u16(bytes);
    w.ptr();
}

/// An RPC_SID (the deferred part of a PRPC_SID): conformance, then the SID.
pub(super) fn put_sid(w: &mut NdrWriter, s: &Sid) {
    w.u32(s.sub_authorities.len() as u32);
    w.buf.push(s.revision);
    w.buf.push(s.sub_authorities.len() as u8);
    w.buf.extend_from_slice(&s.authority);
    for a in &s.sub_authorities {
        w.u32(*a);
    }
}

pub(super) fn get_sid(r: &mut NdrReader<'_>) -> Result<Sid, WireError> {
    let count = r.u32()?;
    let revision = r.u8()?;
    let n = r.u8()?;
    if u32::from(n) != count || usize::from(n) > ringshare_wire::security::SID_MAX_SUB_AUTHORITIES {
        return Err(WireError::Invalid("RPC_SID"));
    }
    let authority: [u8; 6] = r
        .bytes(6)?
        .try_into()
        .map_err(|_| WireError::Invalid("SID authority"))?;
    let mut subs = Vec::with_capacity(usize::from(n));
    for _ in 0..n {
        subs.push(r.u32()?);
    }
    Ok(Sid {
        revision,
        authority,
        sub_authorities: subs,
    })
}

pub(super) fn get_handle(r: &mut NdrReader<'_>) -> Result<[u8; 16], WireError> {
    let _attributes = r.u32()?;
    r.bytes(16)?
        .try_into()
        .map_err(|_| WireError::Invalid("policy handle"))
}

fn status_only(w: &mut NdrWriter, status: NtStatus) -> Vec<u8> {
    w.u32(status.0);
    std::mem::take(&mut w.buf)
}

fn open_policy(state: &mut State) -> Vec<u8> {
    let mut w = NdrWriter::new();
    if state.handles.len() >= HANDLES_MAX {
        w.buf.extend_from_slice(&[0; 20]);
        return status_only(&mut w, NtStatus::INSUFFICIENT_RESOURCES);
    }
    state.next = state.next.wrapping_add(1);
    let mut h = [0u8; 16];
    h[..4].copy_from_slice(&state.next.to_le_bytes());
    h[4..8].copy_from_slice(b"LSA\0");
    h[8..16].copy_from_slice(&(0x5249_4e47_5348_4152u64 ^ u64::from(state.next)).to_le_bytes());
    state.handles.push(h);
    w.u32(0);
    w.buf.extend_from_slice(&h);
    status_only(&mut w, NtStatus::SUCCESS)
}

/// LsarClose; `None` for a handle the pipe does not have (closed already, or never
/// opened): the RPC runtime's fault nca_s_fault_context_mismatch, as Windows and Samba
/// answer it (smbtorture rpc.lsa.lookupnames closes a handle twice).
fn close(stub: &[u8], state: &mut State) -> Option<Vec<u8>> {
    let h = get_handle(&mut NdrReader::new(stub)).ok()?;
    let i = state.handles.iter().position(|x| *x == h)?;
    state.handles.remove(i);
    let mut w = NdrWriter::new();
    w.buf.extend_from_slice(&[0; 20]);
    Some(status_only(&mut w, NtStatus::SUCCESS))
}

/// The policy handle a call starts with is one this pipe opened.
fn check_handle(r: &mut NdrReader<'_>, state: &State) -> Result<(), NtStatus> {
    let h = get_handle(r).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    if state.handles.contains(&h) {
        Ok(())
    } else {
        Err(NtStatus::INVALID_HANDLE)
    }
}

fn query_info(stub: &[u8], facts: &ServerFacts, state: &State) -> Vec<u8> {
    let mut w = NdrWriter::new();
    let mut r = NdrReader::new(stub);
    if let Err(st) = check_handle(&mut r, state) {
        w.u32(0);
        return status_only(&mut w, st);
    }
    let Ok(class) = r.u16() else {
        w.u32(0);
        return status_only(&mut w, NtStatus::INVALID_PARAMETER);
    };
    // (name, SID): the account domain is this server's; a standalone server's primary
    // domain is its workgroup, with no SID.
    let account = localsam::account_domain_sid(&facts.netbios_name);
    let (name, domain_sid) = match class {
        5 => (facts.netbios_name.as_str(), Some(&account)),
        3 | 12 => (facts.workgroup.as_str(), None),
        _ => {
            w.u32(0);
            return status_only(&mut w, NtStatus::INVALID_INFO_CLASS);
        }
    };
    w.ptr();
    w.u16(class);
    if class == 12 {
        // LSAPR_POLICY_DNS_DOMAIN_INFO: Name, DnsDomainName, DnsForestName, DomainGuid, Sid.
        large_head(&mut w, name);
        large_head(&mut w, "");
        large_head(&mut w, "");
        w.align4();
        w.buf.extend_from_slice(&[0; 16]);
        w.u32(0);
        w.counted_chars(name, 1);
        w.counted_chars("", 1);
        w.counted_chars("", 1);
    } else {
        large_head(&mut w, name);
        w.opt_ptr(domain_sid.is_some());
        w.counted_chars(name, 1);
        if let Some(s) = domain_sid {
            put_sid(&mut w, s);
        }
    }
    status_only(&mut w, NtStatus::SUCCESS)
}

/// The fixed part of a string with room for its NUL (Samba's lsa_StringLarge).
fn large_head(w: &mut NdrWriter, s: &str) {
    w.align4();
    let bytes = (s.encode_utf16().count() * 2) as u16;
    w.u16(bytes);
    w.u16(bytes + 2);
    w.ptr();
}

/// The out parameters of a lookup that failed as a whole.
fn lookup_failed(st: NtStatus) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.u32(0); // ReferencedDomains
    w.u32(0); // TranslatedNames / TranslatedSids: Entries
    w.u32(0); // and their array
    w.u32(0); // MappedCount
    status_only(&mut w, st)
}

fn mapped_status(mapped: u32, total: u32) -> NtStatus {
    if total == 0 || mapped == total {
        NtStatus::SUCCESS
    } else if mapped == 0 {
        NtStatus::NONE_MAPPED
    } else {
        SOME_NOT_MAPPED
    }
}

/// The SIDs of an LSAPR_SID_ENUM_BUFFER.
pub(super) fn read_sids(r: &mut NdrReader<'_>) -> Result<Vec<Sid>, WireError> {
    let n = r.u32()?;
    let p = r.u32()?;
    if n > LOOKUP_MAX || (n > 0 && p == 0) {
        return Err(WireError::Invalid("SID count"));
    }
    if p == 0 {
        return Ok(Vec::new());
    }
    let count = r.u32()?;
    if count != n || count as usize * 4 > r.remaining() {
        return Err(WireError::Invalid("SID array"));
    }
    let mut present = Vec::with_capacity(n as usize);
    for _ in 0..n {
        present.push(r.u32()? != 0);
    }
    let mut sids = Vec::with_capacity(n as usize);
    for p in present {
        if !p {
            return Err(WireError::Invalid("null SID"));
        }
        sids.push(get_sid(r)?);
    }
    Ok(sids)
}

/// What a lookup translated: each item's (SID_NAME_USE, result, index in the referenced
/// domain list), the referenced domains, and how many items were mapped.
struct Translated<U> {
    domains: Domains,
    found: Vec<(u16, U, i32)>,
    mapped: u32,
}

impl<U> Translated<U> {
    /// Translate `items` with `map`; an item it does not map is `unknown(item)`,
    /// SID_NAME_UNKNOWN with no domain.
    fn of<T>(
        items: &[T],
        mut map: impl FnMut(&T) -> Option<(U, Named)>,
        unknown: impl Fn(&T) -> U,
    ) -> Translated<U> {
        let mut t = Translated {
            domains: Domains::default(),
            found: Vec::with_capacity(items.len()),
            mapped: 0,
        };
        for item in items {
            match map(item) {
                Some((u, n)) => {
                    t.mapped += 1;
                    let i = t.domains.index(&n.domain, &n.domain_sid);
                    t.found.push((n.kind, u, i));
                }
                None => t.found.push((USE_UNKNOWN, unknown(item), -1)),
            }
        }
        t
    }

    /// The referenced domains, then the translations' count and, when there are any,
    /// the conformant array of them: `entry` writes each fixed part, `deferred` what
    /// follows the array. Then MappedCount and the status.
    fn encode(
        &self,
        mut entry: impl FnMut(&mut NdrWriter, &(u16, U, i32)),
        mut deferred: impl FnMut(&mut NdrWriter, &(u16, U, i32)),
    ) -> Vec<u8> {
        let mut w = NdrWriter::new();
        self.domains.encode(&mut w);
        w.u32(self.found.len() as u32);
        w.opt_ptr(!self.found.is_empty());
        if !self.found.is_empty() {
            w.u32(self.found.len() as u32);
            for f in &self.found {
                entry(&mut w, f);
            }
            for f in &self.found {
                deferred(&mut w, f);
            }
        }
        w.u32(self.mapped);
        status_only(&mut w, mapped_status(self.mapped, self.found.len() as u32))
    }
}

/// A lookup's arguments: the policy handle (except for `no_handle`, the opnum of the
/// form without one), then what `read` takes. `Err`: the whole answer of a lookup that
/// failed before translating anything.
fn lookup_args<T>(
    opnum: u16,
    no_handle: u16,
    stub: &[u8],
    state: &State,
    read: fn(&mut NdrReader<'_>) -> Result<Vec<T>, WireError>,
) -> Result<Vec<T>, Vec<u8>> {
    let mut r = NdrReader::new(stub);
    if opnum != no_handle {
        check_handle(&mut r, state).map_err(lookup_failed)?;
    }
    read(&mut r).map_err(|_| lookup_failed(NtStatus::INVALID_PARAMETER))
}

fn lookup_sids(
    opnum: u16,
    stub: &[u8],
    facts: &ServerFacts,
    state: &State,
    names: &mut Resolver<'_>,
) -> Vec<u8> {
    let sids = match lookup_args(opnum, 76, stub, state, read_sids) {
        Ok(sids) => sids,
        Err(failed) => return failed,
    };
    let t = Translated::of(
        &sids,
        |s| name_of(s, facts, names).map(|n| (n.name.clone(), n)),
        Sid::to_string,
    );
    // A domain of the member's forest has no name of its own (a NULL string, as Samba
    // answers its SID).
    let nameless = |kind: u16, name: &str| kind == USE_DOMAIN && name.is_empty();
    t.encode(
        |w, (kind, name, i)| {
            w.u16(*kind);
            if nameless(*kind, name) {
                w.align4();
                w.u16(0);
                w.u16(0);
                w.opt_ptr(false);
            } else {
                unicode_head(w, name);
            }
            w.u32(*i as u32);
            if opnum != 15 {
                w.u32(0); // Flags
            }
        },
        |w, (kind, name, _)| {
            if !nameless(*kind, name) {
                w.counted_chars(name, 0)
            }
        },
    )
}

/// The names of a LookupNames call (Count, then the conformant array of RPC_UNICODE_STRING).
fn read_names(r: &mut NdrReader<'_>) -> Result<Vec<String>, WireError> {
    let n = r.u32()?;
    if n > LOOKUP_MAX {
        return Err(WireError::Invalid("name count"));
    }
    let count = r.u32()?;
    if count != n {
        return Err(WireError::Invalid("name array"));
    }
    read_unicode_array(r, n)
}

/// `n` RPC_UNICODE_STRINGs of a conformant array (after its counts): their fixed parts, then
/// their buffers; a NULL buffer is the empty name.
pub(super) fn read_unicode_array(r: &mut NdrReader<'_>, n: u32) -> Result<Vec<String>, WireError> {
    if n as usize * 8 > r.remaining() {
        return Err(WireError::Invalid("name array"));
    }
    let mut heads = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let len = r.u16()?;
        let max = r.u16()?;
        let p = r.u32()?;
        if len > max || len % 2 != 0 {
            return Err(WireError::Invalid("RPC_UNICODE_STRING"));
        }
        heads.push((len, p != 0));
    }
    let mut out = Vec::with_capacity(heads.len());
    for (len, present) in heads {
        out.push(if present {
            r.counted_chars(len)?
        } else {
            String::new()
        });
    }
    Ok(out)
}

fn lookup_names(
    opnum: u16,
    stub: &[u8],
    facts: &ServerFacts,
    state: &State,
    names: &mut Resolver<'_>,
) -> Vec<u8> {
    let asked = match lookup_args(opnum, 77, stub, state, read_names) {
        Ok(asked) => asked,
        Err(failed) => return failed,
    };
    let t = Translated::of(
        &asked,
        |name| sid_of(name, facts, names).map(|(s, n)| (Some(s), n)),
        |_| None,
    );
    // LookupNames3/4 give whole SIDs (deferred after the array); the older forms a RID.
    let whole_sids = opnum == 68 || opnum == 77;
    t.encode(
        |w, (kind, s, i)| {
            w.u16(*kind);
            if whole_sids {
                w.opt_ptr(s.is_some());
            } else {
                // LSA_TRANSLATED_SID(_EX): the RID; a domain's own SID has none.
                let rid = match s {
                    Some(s) if *kind != USE_DOMAIN => s.sub_authorities.last().copied(),
                    _ => None,
                };
                w.u32(rid.unwrap_or(u32::MAX));
            }
            w.u32(*i as u32);
            if opnum != 14 {
                w.u32(0); // Flags
            }
        },
        |w, (_, s, _)| {
            if let (true, Some(s)) = (whole_sids, s) {
                put_sid(w, s);
            }
        },
    )
}

mod member;
#[cfg(test)]
mod tests;
