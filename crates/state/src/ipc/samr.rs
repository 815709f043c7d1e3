//! The `samr` pipe ([MS-SAMR]): the read-only view of the server's accounts that Windows'
//! object picker ("Select Users or Groups" in the Security tab, "Locations" = the server),
//! `rpcclient` (`enumdomusers`, `queryuser`, `samlookupnames`, ...) and smbtorture rpc.samr
//! ask for.
//!
//! Two domains, as a standalone Samba has them: the server's account domain (named by its
//! NetBIOS name, SID [`crate::localsam::account_domain_sid`]) holding the accounts of the
//! user database (the smbpasswd file, [`super::ServerFacts::users`]) with Samba's algorithmic
//! RIDs (uid × 2 + 1000, [`crate::localsam`]) and the group `None` (513) every user is in, and
//! `Builtin` (S-1-5-32) with its aliases. The uids come from NSS, as logons do: a call that
//! needs them parks until the driver's lookup threads answer ([`super::Progress::Needs`]).
//!
//! Everything that would change an account, a group, a domain or a password is refused with
//! STATUS_ACCESS_DENIED (with its out parameters zeroed); calls not served get a DCE/RPC
//! fault.

mod info;

use ringshare_wire::security::Sid;
use ringshare_wire::{NtStatus, WireError};

use super::local::{locals, Local, Needs, Resolver};
use super::lsa;
use super::ndr::{NdrReader, NdrWriter};
use super::ServerFacts;
use crate::localsam;

/// Handles one pipe may hold open.
const HANDLES_MAX: usize = 256;
/// Entries one enumeration returns at most (Samba's MAX_SAM_ENTRIES_W2K).
const ENUM_MAX: usize = 1024;
/// Names or RIDs one lookup takes at most ([MS-SAMR] 3.1.5.11.2: 1000).
const LOOKUP_MAX: u32 = 1000;
/// The group every account is in: `None` (DOMAIN_GROUP_RID_USERS).
pub(super) use lsa::RID_NONE;
/// SE_GROUP_MANDATORY | SE_GROUP_ENABLED_BY_DEFAULT | SE_GROUP_ENABLED.
const GROUP_ATTRS: u32 = 7;
/// ACB_NORMAL and ACB_DISABLED.
const ACB_NORMAL: u32 = 0x10;
const ACB_DISABLED: u32 = 0x01;

/// STATUS_MORE_ENTRIES and STATUS_SOME_NOT_MAPPED.
const MORE_ENTRIES: NtStatus = NtStatus(0x0000_0105);
const SOME_NOT_MAPPED: NtStatus = NtStatus(0x0000_0107);
const NO_SUCH_DOMAIN: NtStatus = NtStatus(0xC000_00DF);
const NO_SUCH_USER: NtStatus = NtStatus(0xC000_0064);
const NO_SUCH_GROUP: NtStatus = NtStatus(0xC000_0066);

/// The domains a domain handle opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Domain {
    Account,
    Builtin,
}

/// What a handle is a handle of.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Handle {
    Connect,
    Domain(Domain),
    User(Local),
    Group(u32),
}

impl Local {
    fn acb(&self) -> u32 {
        ACB_NORMAL | if self.disabled { ACB_DISABLED } else { 0 }
    }
}

/// The pipe's handles.
#[derive(Default)]
pub struct State {
    handles: Vec<([u8; 16], Handle)>,
    next: u32,
}

impl State {
    fn open(&mut self, h: Handle) -> Option<[u8; 16]> {
        if self.handles.len() >= HANDLES_MAX {
            return None;
        }
        self.next = self.next.wrapping_add(1);
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&self.next.to_le_bytes());
        id[4..8].copy_from_slice(b"SAMR");
        id[8..16].copy_from_slice(&(0x5249_4e47_5341_4d52u64 ^ u64::from(self.next)).to_le_bytes());
        self.handles.push((id, h));
        Some(id)
    }

    fn get(&self, id: &[u8; 16]) -> Option<&Handle> {
        self.handles.iter().find(|(h, _)| h == id).map(|(_, h)| h)
    }
}

/// One samr call: the NDR reply stub, or the DCE/RPC fault to answer, or what NSS must be
/// asked first (as [`lsa::call`]).
pub fn call(
    opnum: u16,
    stub: &[u8],
    facts: &ServerFacts,
    state: &mut State,
    answers: (&crate::lookup::NameAnswers, bool),
) -> Result<Result<Vec<u8>, u32>, Needs> {
    let mut names = Resolver::new(answers);
    let mut call = Call {
        facts,
        names: &mut names,
    };
    let out = match opnum {
        // Connect, Connect2, Connect3, Connect4, Connect5.
        0 | 57 | 61 | 62 | 64 => connect(opnum, stub, state),
        1 => close(stub, state),
        5 => lookup_domain(stub, facts, state),
        6 => enum_domains(stub, facts, state),
        7 => open_domain(stub, facts, state),
        8 | 46 => info::query_domain(stub, &mut call, state),
        11 | 15 => enum_empty(stub, state),
        13 => call.enum_users(stub, state),
        16 => alias_membership(stub, state),
        17 => call.lookup_names(stub, state),
        18 => call.lookup_rids(stub, state),
        19 => open_group(stub, state),
        34 => call.open_user(stub, state),
        36 | 47 => info::query_user(stub, facts, state),
        39 => groups_for_user(stub, state),
        40 | 48 | 51 => call.display_info(stub, state),
        41 | 49 => call.display_index(stub, state),
        45 => remove_from_foreign(stub, state),
        44 => info::pw_info(stub, state, true),
        56 => info::pw_info(stub, state, false),
        65 => rid_to_sid(stub, facts, state),
        _ => match refused(opnum) {
            Some(out) => out,
            None => return Ok(Err(super::FAULT_OP_RANGE)),
        },
    };
    let out = match out {
        Ok(out) => out,
        Err(fault) => return Ok(Err(fault)),
    };
    names.finish()?;
    Ok(Ok(out))
}

/// A reply stub, or a DCE/RPC fault.
type Reply = Result<Vec<u8>, u32>;

/// A call that may need NSS.
pub(super) struct Call<'a, 'b> {
    pub facts: &'a ServerFacts,
    pub names: &'a mut Resolver<'b>,
}

/// `zeros` bytes of zeroed out parameters, then `status`: how a call that failed (or has
/// nothing to give back) answers.
fn zeroed(zeros: usize, status: NtStatus) -> Reply {
    let mut out = vec![0u8; zeros];
    out.extend_from_slice(&status.0.to_le_bytes());
    Ok(out)
}

/// The calls that change something, refused with their out parameters zeroed; None for
/// opnums that are no such call.
fn refused(opnum: u16) -> Option<Reply> {
    let zeros = match opnum {
        // SetSecurity, SetDomainInfo, SetGroupInfo, AddGroupMember, DeleteGroupMember,
        // SetMemberAttributesOfGroup, SetAliasInfo, AddAliasMember, DeleteAliasMember,
        // SetUserInfo, ChangePasswordUser, AddMultipleMembersToAlias, RemoveMultipleMembersFromAlias, OemChangePasswordUser2,
        // ChangePasswordUser2, SetUserInfo2, SetDsrmPassword.
        2 | 9 | 21 | 22 | 24 | 26 | 29 | 31 | 32 | 37 | 38 | 52 | 53 | 54 | 55 | 58 | 66 => 0,
        // CreateDomainGroup, CreateUser, CreateDomAlias: a handle and a RID.
        10 | 12 | 14 => 24,
        // DeleteDomainGroup, DeleteDomAlias, DeleteUser: the handle back.
        23 | 30 | 35 => 20,
        // CreateUser2: a handle, the access granted and a RID.
        50 => 28,
        // ChangePasswordUser3: two NULL pointers (domain policy, reject reason).
        63 => 8,
        _ => return None,
    };
    Some(zeroed(zeros, NtStatus::ACCESS_DENIED))
}

/// A policy handle (attributes, then the 16 bytes we gave).
pub(super) fn get_handle(r: &mut NdrReader<'_>) -> Result<[u8; 16], WireError> {
    lsa::get_handle(r)
}

/// The handle a call starts with, if this pipe has it.
fn handle<'s>(r: &mut NdrReader<'_>, state: &'s State) -> Result<&'s Handle, NtStatus> {
    let id = get_handle(r).map_err(|_| NtStatus::INVALID_PARAMETER)?;
    state.get(&id).ok_or(NtStatus::INVALID_HANDLE)
}

/// The domain handle a call starts with.
fn domain(r: &mut NdrReader<'_>, state: &State) -> Result<Domain, NtStatus> {
    match handle(r, state)? {
        Handle::Domain(d) => Ok(*d),
        _ => Err(NtStatus::INVALID_HANDLE),
    }
}

/// A call on a domain handle: the reader after the handle and the domain, or the reply of a
/// call whose handle is not one (`zeros` bytes of out parameters, then the status).
fn domain_call<'a>(
    stub: &'a [u8],
    state: &State,
    zeros: usize,
) -> Result<(NdrReader<'a>, Domain), Reply> {
    let mut r = NdrReader::new(stub);
    match domain(&mut r, state) {
        Ok(d) => Ok((r, d)),
        Err(st) => Err(zeroed(zeros, st)),
    }
}

/// The user handle a call starts with.
pub(super) fn user<'s>(r: &mut NdrReader<'_>, state: &'s State) -> Result<&'s Local, NtStatus> {
    match handle(r, state)? {
        Handle::User(u) => Ok(u),
        _ => Err(NtStatus::INVALID_HANDLE),
    }
}

/// A reply of a new handle (or of none, with `status`).
fn handle_reply(state: &mut State, h: Result<Handle, NtStatus>) -> Reply {
    let h = match h {
        Ok(h) => h,
        Err(st) => return zeroed(20, st),
    };
    match state.open(h) {
        Some(id) => {
            let mut out = vec![0u8; 4];
            out.extend_from_slice(&id);
            out.extend_from_slice(&0u32.to_le_bytes());
            Ok(out)
        }
        None => zeroed(20, NtStatus::INSUFFICIENT_RESOURCES),
    }
}

/// The SID of a domain.
fn domain_sid(d: Domain, facts: &ServerFacts) -> Sid {
    match d {
        Domain::Account => localsam::account_domain_sid(&facts.netbios_name),
        Domain::Builtin => Sid::from_parts(5, &[32]).unwrap_or_else(Sid::null),
    }
}

/// Connect (0), Connect2 (57), Connect3 (61), Connect4 (62), Connect5 (64): a server handle.
/// Connect5 also answers ConnectInfo level 1 (SAMR_CONNECT_AFTER_W2K, no features), as Samba.
fn connect(opnum: u16, stub: &[u8], state: &mut State) -> Reply {
    let mut r = NdrReader::new(stub);
    let parsed = (|| -> Result<(), WireError> {
        match r.u32()? {
            0 => {}
            // Connect's system name is a pointer to one character; the others' a string.
            _ if opnum == 0 => {
                r.u16()?;
            }
            _ => {
                r.string()?;
            }
        }
        if opnum == 61 || opnum == 62 {
            r.u32()?; // unknown / client version
        }
        r.u32()?; // access mask
        if opnum == 64 {
            let level = r.u32()?;
            if level != 1 || r.u32()? != 1 {
                return Err(WireError::Invalid("ConnectInfo level"));
            }
            r.u32()?;
            r.u32()?;
        }
        Ok(())
    })();
    if parsed.is_err() {
        return Err(super::FAULT_NDR);
    }
    let reply = handle_reply(state, Ok(Handle::Connect))?;
    if opnum != 64 {
        return Ok(reply);
    }
    let mut out = Vec::with_capacity(16 + reply.len());
    for v in [1u32, 1, 3, 0] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&reply);
    Ok(out)
}

/// CloseHandle (1): the handle back zeroed; one this pipe does not have is
/// STATUS_INVALID_HANDLE (Samba's answer).
fn close(stub: &[u8], state: &mut State) -> Reply {
    let Ok(id) = get_handle(&mut NdrReader::new(stub)) else {
        return Err(super::FAULT_NDR);
    };
    match state.handles.iter().position(|(h, _)| *h == id) {
        Some(i) => {
            state.handles.remove(i);
            zeroed(20, NtStatus::SUCCESS)
        }
        None => zeroed(20, NtStatus::INVALID_HANDLE),
    }
}

/// An lsa_String passed by reference: its fixed part, then its buffer; None when it has none.
fn read_lsa_string(r: &mut NdrReader<'_>) -> Result<Option<String>, WireError> {
    // The structure holds a pointer: 4-byte aligned.
    r.align4()?;
    let len = r.u16()?;
    let size = r.u16()?;
    let p = r.u32()?;
    if len > size || len % 2 != 0 {
        return Err(WireError::Invalid("lsa_String"));
    }
    if p == 0 {
        return Ok(None);
    }
    r.counted_chars(len).map(Some)
}

/// LookupDomainInSamServer (5): the SID of the account domain (the NetBIOS name) or
/// `Builtin`.
fn lookup_domain(stub: &[u8], facts: &ServerFacts, state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = handle(&mut r, state) {
        return zeroed(4, st);
    }
    let name = match read_lsa_string(&mut r) {
        Ok(Some(name)) => name,
        // A name without a buffer (smbtorture rpc.samr, as Samba answers it).
        Ok(None) => return zeroed(4, NtStatus::INVALID_PARAMETER),
        Err(_) => return Err(super::FAULT_NDR),
    };
    let d = if name.eq_ignore_ascii_case(&facts.netbios_name) {
        Domain::Account
    } else if name.eq_ignore_ascii_case("Builtin") {
        Domain::Builtin
    } else {
        return zeroed(4, NO_SUCH_DOMAIN);
    };
    let mut w = NdrWriter::new();
    w.ptr();
    lsa::put_sid(&mut w, &domain_sid(d, facts));
    w.u32(0);
    Ok(w.buf)
}

/// A samr_SamArray of (idx, name) behind its pointer, the entry count, then `status`.
fn sam_array(w: &mut NdrWriter, entries: &[(u32, &str)], status: NtStatus) {
    w.ptr();
    w.u32(entries.len() as u32);
    w.opt_ptr(!entries.is_empty());
    if !entries.is_empty() {
        w.u32(entries.len() as u32);
        for (idx, name) in entries {
            w.u32(*idx);
            lsa::unicode_head(w, name);
        }
        for (_, name) in entries {
            w.counted_chars(name, 0);
        }
    }
    w.u32(entries.len() as u32);
    w.u32(status.0);
}

/// The resume handle and the fixed arguments of an enumeration.
fn resume(r: &mut NdrReader<'_>) -> Result<u32, NtStatus> {
    r.u32().map_err(|_| NtStatus::INVALID_PARAMETER)
}

/// EnumerateDomainsInSamServer (6): the account domain and `Builtin`.
fn enum_domains(stub: &[u8], facts: &ServerFacts, state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = handle(&mut r, state) {
        return zeroed(16, st);
    }
    let Ok(from) = resume(&mut r) else {
        return Err(super::FAULT_NDR);
    };
    let all = [(0, facts.netbios_name.as_str()), (1, "Builtin")];
    let entries = all.get(from as usize..).unwrap_or(&[]);
    let mut w = NdrWriter::new();
    w.u32(from + entries.len() as u32);
    sam_array(&mut w, entries, NtStatus::SUCCESS);
    Ok(w.buf)
}

/// OpenDomain (7): a handle of the account domain or of `Builtin`, by SID.
fn open_domain(stub: &[u8], facts: &ServerFacts, state: &mut State) -> Reply {
    let mut r = NdrReader::new(stub);
    match handle(&mut r, state) {
        Ok(Handle::Connect) => {}
        Ok(_) => return zeroed(20, NtStatus::INVALID_HANDLE),
        Err(st) => return zeroed(20, st),
    }
    let sid = (|| {
        r.u32()?; // access mask
        lsa::get_sid(&mut r)
    })();
    let Ok(sid) = sid else {
        return Err(super::FAULT_NDR);
    };
    let d = [Domain::Account, Domain::Builtin]
        .into_iter()
        .find(|d| domain_sid(*d, facts) == sid)
        .ok_or(NO_SUCH_DOMAIN);
    handle_reply(state, d.map(Handle::Domain))
}

/// EnumerateGroupsInDomain (11) and EnumerateAliasesInDomain (15): none, as a standalone
/// Samba without group mappings lists.
fn enum_empty(stub: &[u8], state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = domain(&mut r, state) {
        return zeroed(16, st);
    }
    let Ok(from) = resume(&mut r) else {
        return Err(super::FAULT_NDR);
    };
    let mut w = NdrWriter::new();
    w.u32(from);
    sam_array(&mut w, &[], NtStatus::SUCCESS);
    Ok(w.buf)
}

/// A samr_Ids (count, then the array behind a pointer).
fn ids(w: &mut NdrWriter, ids: &[u32]) {
    w.u32(ids.len() as u32);
    w.opt_ptr(!ids.is_empty());
    if !ids.is_empty() {
        w.u32(ids.len() as u32);
        for i in ids {
            w.u32(*i);
        }
    }
}

/// GetAliasMembership (16): no account is in an alias (Samba without group mappings).
fn alias_membership(stub: &[u8], state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = domain(&mut r, state) {
        return zeroed(8, st);
    }
    if lsa::read_sids(&mut r).is_err() {
        return Err(super::FAULT_NDR);
    }
    let mut w = NdrWriter::new();
    ids(&mut w, &[]);
    w.u32(0);
    Ok(w.buf)
}

/// OpenGroup (19): `None` (513) in the account domain.
fn open_group(stub: &[u8], state: &mut State) -> Reply {
    let (mut r, d) = match domain_call(stub, state, 20) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let Ok((_access, rid)) = (|| Ok::<_, WireError>((r.u32()?, r.u32()?)))() else {
        return Err(super::FAULT_NDR);
    };
    let found = d == Domain::Account && rid == RID_NONE;
    let h = found.then_some(Handle::Group(rid)).ok_or(NO_SUCH_GROUP);
    handle_reply(state, h)
}

/// RemoveMemberFromForeignDomain (45): no alias has members, so there is nothing to remove
/// (success, as Samba answers it; smbtorture rpc.samr).
fn remove_from_foreign(stub: &[u8], state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = domain(&mut r, state) {
        return zeroed(0, st);
    }
    if lsa::get_sid(&mut r).is_err() {
        return Err(super::FAULT_NDR);
    }
    zeroed(0, NtStatus::SUCCESS)
}

/// GetGroupsForUser (39): `None`, the group every account is in.
fn groups_for_user(stub: &[u8], state: &State) -> Reply {
    if let Err(st) = user(&mut NdrReader::new(stub), state) {
        return zeroed(4, st);
    }
    let mut w = NdrWriter::new();
    w.ptr();
    w.u32(1);
    w.ptr();
    w.u32(1);
    w.u32(RID_NONE);
    w.u32(GROUP_ATTRS);
    w.u32(0);
    Ok(w.buf)
}

/// RidToSid (65): the SID of a RID of the domain.
fn rid_to_sid(stub: &[u8], facts: &ServerFacts, state: &State) -> Reply {
    let (mut r, d) = match domain_call(stub, state, 4) {
        Ok(call) => call,
        Err(reply) => return reply,
    };
    let Ok(rid) = r.u32() else {
        return Err(super::FAULT_NDR);
    };
    let mut sid = domain_sid(d, facts);
    sid.sub_authorities.push(rid);
    let mut w = NdrWriter::new();
    w.ptr();
    lsa::put_sid(&mut w, &sid);
    w.u32(0);
    Ok(w.buf)
}

/// The status of a lookup that mapped `mapped` of `total`.
fn mapped_status(mapped: usize, total: usize) -> NtStatus {
    if mapped == total {
        NtStatus::SUCCESS
    } else if mapped == 0 {
        NtStatus::NONE_MAPPED
    } else {
        SOME_NOT_MAPPED
    }
}

/// The conformant varying array of a LookupNames / LookupRids request: `count`, then the
/// array's max, offset and length.
fn lookup_count(r: &mut NdrReader<'_>) -> Result<u32, WireError> {
    let n = r.u32()?;
    let max = r.u32()?;
    let offset = r.u32()?;
    let len = r.u32()?;
    if n > LOOKUP_MAX || max > LOOKUP_MAX || offset != 0 || len != n || len > max {
        return Err(WireError::Invalid("lookup count"));
    }
    Ok(n)
}

impl Call<'_, '_> {
    /// The accounts of the user database ([`locals`]).
    pub(super) fn locals(&mut self) -> Option<Vec<Local>> {
        locals(self.facts, self.names)
    }

    /// EnumerateUsersInDomain (13): the accounts (whose flags share a bit with the asked
    /// ones, when asked), RID as index, from the resume handle on.
    fn enum_users(&mut self, stub: &[u8], state: &State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, 16) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let Ok((from, flags)) = (|| Ok::<_, WireError>((r.u32()?, r.u32()?)))() else {
            return Err(super::FAULT_NDR);
        };
        let all = match d {
            Domain::Builtin => Vec::new(),
            Domain::Account => match self.locals() {
                Some(l) => l,
                None => return Ok(Vec::new()),
            },
        };
        let listed: Vec<&Local> = all
            .iter()
            .filter(|l| flags == 0 || l.acb() & flags != 0)
            .collect();
        let rest = listed.get(from as usize..).unwrap_or(&[]);
        let n = rest.len().min(ENUM_MAX);
        let entries: Vec<(u32, &str)> =
            rest[..n].iter().map(|l| (l.rid, l.name.as_str())).collect();
        let status = if n < rest.len() {
            MORE_ENTRIES
        } else {
            NtStatus::SUCCESS
        };
        let mut w = NdrWriter::new();
        w.u32(from + n as u32);
        sam_array(&mut w, &entries, status);
        Ok(w.buf)
    }

    /// LookupNamesInDomain (17): RIDs and SID_NAME_USE of names of the domain.
    fn lookup_names(&mut self, stub: &[u8], state: &State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, 16) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let asked = lookup_count(&mut r).and_then(|n| lsa::read_unicode_array(&mut r, n));
        let Ok(asked) = asked else {
            return Err(super::FAULT_NDR);
        };
        let locals = match d {
            Domain::Builtin => Vec::new(),
            Domain::Account if asked.is_empty() => Vec::new(),
            Domain::Account => match self.locals() {
                Some(l) => l,
                None => return Ok(Vec::new()),
            },
        };
        let found: Vec<Option<(u32, u32)>> = asked
            .iter()
            .map(|name| named_rid(d, name, &locals))
            .collect();
        let rids: Vec<u32> = found.iter().map(|f| f.map_or(0, |(r, _)| r)).collect();
        let types: Vec<u32> = found
            .iter()
            .map(|f| f.map_or(u32::from(lsa::USE_UNKNOWN), |(_, t)| t))
            .collect();
        let mapped = found.iter().filter(|f| f.is_some()).count();
        let mut w = NdrWriter::new();
        ids(&mut w, &rids);
        ids(&mut w, &types);
        w.u32(mapped_status(mapped, found.len()).0);
        Ok(w.buf)
    }

    /// LookupIdsInDomain (18): names and SID_NAME_USE of RIDs of the domain.
    fn lookup_rids(&mut self, stub: &[u8], state: &State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, 16) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let asked = (|| {
            let n = lookup_count(&mut r)?;
            (0..n).map(|_| r.u32()).collect::<Result<Vec<u32>, _>>()
        })();
        let Ok(asked) = asked else {
            return Err(super::FAULT_NDR);
        };
        let locals = match d {
            Domain::Account if asked.iter().any(|r| *r >= localsam::RID_BASE) => {
                match self.locals() {
                    Some(l) => l,
                    None => return Ok(Vec::new()),
                }
            }
            _ => Vec::new(),
        };
        let found: Vec<Option<(String, u32)>> =
            asked.iter().map(|rid| rid_name(d, *rid, &locals)).collect();
        let mapped = found.iter().filter(|f| f.is_some()).count();
        let mut w = NdrWriter::new();
        w.u32(found.len() as u32);
        w.opt_ptr(!found.is_empty());
        if !found.is_empty() {
            w.u32(found.len() as u32);
            for f in &found {
                match f {
                    Some((name, _)) => lsa::unicode_head(&mut w, name),
                    None => {
                        w.u32(0);
                        w.u32(0);
                    }
                }
            }
            for (name, _) in found.iter().flatten() {
                w.counted_chars(name, 0);
            }
        }
        let types: Vec<u32> = found
            .iter()
            .map(|f| f.as_ref().map_or(u32::from(lsa::USE_UNKNOWN), |(_, t)| *t))
            .collect();
        ids(&mut w, &types);
        w.u32(mapped_status(mapped, found.len()).0);
        Ok(w.buf)
    }

    /// OpenUser (34): a handle of an account of the account domain, by RID.
    fn open_user(&mut self, stub: &[u8], state: &mut State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, 20) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let Ok((_access, rid)) = (|| Ok::<_, WireError>((r.u32()?, r.u32()?)))() else {
            return Err(super::FAULT_NDR);
        };
        if d != Domain::Account || rid < localsam::RID_BASE {
            return zeroed(20, NO_SUCH_USER);
        }
        let Some(locals) = self.locals() else {
            return Ok(Vec::new());
        };
        let found = locals.into_iter().find(|l| l.rid == rid);
        handle_reply(state, found.map(Handle::User).ok_or(NO_SUCH_USER))
    }

    /// What QueryDisplayInformation level `level` lists in domain `d`: the users for levels
    /// 1 (general) and 4 (ASCII names); none for 2 (machines), 3 and 5 (groups), as a
    /// standalone Samba without trust accounts or group mappings. None while NSS is asked.
    fn display_list(&mut self, d: Domain, level: u16) -> Option<Vec<Local>> {
        match (d, level) {
            (Domain::Account, 1 | 4) => self.locals(),
            _ => Some(Vec::new()),
        }
    }

    /// QueryDisplayInformation (40), 2 (48) and 3 (51): the accounts of [`Self::display_list`]
    /// from `start_idx`.
    fn display_info(&mut self, stub: &[u8], state: &State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, 16) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let args = (|| Ok::<_, WireError>((r.u16()?, r.u32()?, r.u32()?, r.u32()?)))();
        let Ok((level, start, max_entries, _buf_size)) = args else {
            return Err(super::FAULT_NDR);
        };
        if !(1..=5).contains(&level) {
            // No samr_DispInfo arm to answer with.
            return Err(super::FAULT_NDR);
        }
        let Some(all) = self.display_list(d, level) else {
            return Ok(Vec::new());
        };
        let (rest, status) = match all.get(start as usize..) {
            Some(rest) => {
                let n = rest.len().min(max_entries as usize).min(ENUM_MAX);
                let st = if n < rest.len() {
                    MORE_ENTRIES
                } else {
                    NtStatus::SUCCESS
                };
                (&rest[..n], st)
            }
            None => (&[][..], NtStatus::NO_MORE_ENTRIES),
        };
        let mut w = NdrWriter::new();
        let size = (rest.len() * 40) as u32;
        w.u32(size); // total_size
        w.u32(size); // returned_size
        w.u16(level);
        w.u32(rest.len() as u32);
        w.opt_ptr(!rest.is_empty());
        if !rest.is_empty() {
            w.u32(rest.len() as u32);
            for (i, l) in rest.iter().enumerate() {
                w.u32(start + i as u32 + 1);
                if level == 4 {
                    // lsa_AsciiStringLarge: length, size with the NUL, pointer.
                    let len = l.name.len() as u16;
                    w.u16(len);
                    w.u16(len + 1);
                    w.ptr();
                    continue;
                }
                w.u32(l.rid);
                w.u32(l.acb());
                lsa::unicode_head(&mut w, &l.name);
                lsa::unicode_head(&mut w, ""); // description
                lsa::unicode_head(&mut w, ""); // full name
            }
            for l in rest {
                if level == 4 {
                    w.u32(l.name.len() as u32 + 1);
                    w.u32(0);
                    w.u32(l.name.len() as u32);
                    w.buf.extend_from_slice(l.name.as_bytes());
                    continue;
                }
                w.counted_chars(&l.name, 0);
                w.counted_chars("", 0);
                w.counted_chars("", 0);
            }
        }
        w.u32(status.0);
        Ok(w.buf)
    }

    /// GetDisplayEnumerationIndex (41) and 2 (49): where an account stands in what
    /// QueryDisplayInformation lists; STATUS_NO_MORE_ENTRIES for a name it does not list.
    fn display_index(&mut self, stub: &[u8], state: &State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, 4) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let args = (|| Ok::<_, WireError>((r.u16()?, read_lsa_string(&mut r)?)))();
        let Ok((level, name)) = args else {
            return Err(super::FAULT_NDR);
        };
        if !(1..=5).contains(&level) {
            return zeroed(4, NtStatus::INVALID_INFO_CLASS);
        }
        let Some(all) = self.display_list(d, level) else {
            return Ok(Vec::new());
        };
        let name = name.unwrap_or_default();
        match all.iter().position(|l| l.name.eq_ignore_ascii_case(&name)) {
            Some(i) => {
                let mut w = NdrWriter::new();
                w.u32(i as u32);
                w.u32(0);
                Ok(w.buf)
            }
            None => zeroed(4, NtStatus::NO_MORE_ENTRIES),
        }
    }
}

/// The RID and SID_NAME_USE of `name` in domain `d`.
fn named_rid(d: Domain, name: &str, locals: &[Local]) -> Option<(u32, u32)> {
    match d {
        Domain::Builtin => lsa::builtin_rid(name).map(|rid| (rid, u32::from(lsa::USE_ALIAS))),
        Domain::Account => {
            if name.eq_ignore_ascii_case("None") {
                return Some((RID_NONE, u32::from(lsa::USE_GROUP)));
            }
            let l = locals.iter().find(|l| l.name.eq_ignore_ascii_case(name))?;
            Some((l.rid, u32::from(lsa::USE_USER)))
        }
    }
}

/// The name and SID_NAME_USE of RID `rid` in domain `d`.
fn rid_name(d: Domain, rid: u32, locals: &[Local]) -> Option<(String, u32)> {
    match d {
        Domain::Builtin => {
            lsa::builtin_name(rid).map(|n| (n.to_string(), u32::from(lsa::USE_ALIAS)))
        }
        Domain::Account if rid == RID_NONE => Some(("None".into(), u32::from(lsa::USE_GROUP))),
        Domain::Account => {
            let l = locals.iter().find(|l| l.rid == rid)?;
            Some((l.name.clone(), u32::from(lsa::USE_USER)))
        }
    }
}

#[cfg(test)]
mod tests;
