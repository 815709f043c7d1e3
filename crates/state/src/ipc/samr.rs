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
//! fault. Each handle holds the rights its open granted, and a call its handle's rights do
//! not cover is STATUS_ACCESS_DENIED ([`access`]), as Samba answers an ordinary user.

mod access;
mod groups;
mod info;

pub use access::Caller;
use access::Object;

use ringshare_wire::security::Sid;
use ringshare_wire::{NtStatus, WireError};

use super::local::{self, locals, Local, Needs, Resolver};
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

impl Handle {
    /// The handle type the first four bytes of a policy handle hold (Samba's `samr_handle`:
    /// a handle given back with another type is no handle of the pipe).
    fn wire_type(&self) -> u32 {
        match self {
            Handle::Connect => 0,
            Handle::Domain(_) => 1,
            Handle::User(_) => 2,
            Handle::Group(_) => 3,
        }
    }
}

/// A policy handle as a client sends it: its type, then the 16 bytes of its id.
type HandleId = (u32, [u8; 16]);

/// What a call on a handle the pipe does not have answers: no status but the fault
/// nca_s_fault_context_mismatch (Samba's), which [`zeroed`] turns this status into.
const CONTEXT_MISMATCH: NtStatus = NtStatus(0xC003_0005);

impl Local {
    fn acb(&self) -> u32 {
        ACB_NORMAL | if self.disabled { ACB_DISABLED } else { 0 }
    }
}

/// An open handle: what it is a handle of, and the rights its open granted.
struct Open {
    id: [u8; 16],
    what: Handle,
    granted: u32,
}

/// The pipe's handles, and who opened the pipe.
#[derive(Default)]
pub struct State {
    handles: Vec<Open>,
    next: u32,
    /// Who calls (root is never held to a handle's rights).
    pub caller: Caller,
}

impl State {
    fn open(&mut self, what: Handle, granted: u32) -> Option<[u8; 16]> {
        if self.handles.len() >= HANDLES_MAX {
            return None;
        }
        self.next = self.next.wrapping_add(1);
        let mut id = [0u8; 16];
        id[..4].copy_from_slice(&self.next.to_le_bytes());
        id[4..8].copy_from_slice(b"SAMR");
        id[8..16].copy_from_slice(&(0x5249_4e47_5341_4d52u64 ^ u64::from(self.next)).to_le_bytes());
        self.handles.push(Open { id, what, granted });
        Some(id)
    }

    /// The open handle `id` names: same id and type, and not all zeros.
    fn get(&self, id: &HandleId) -> Option<&Open> {
        self.position(id).map(|i| &self.handles[i])
    }

    fn position(&self, id: &HandleId) -> Option<usize> {
        if *id == (0, [0; 16]) {
            return None;
        }
        self.handles
            .iter()
            .position(|o| o.id == id.1 && o.what.wire_type() == id.0)
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
        3 => query_security(stub, facts, state),
        5 => lookup_domain(stub, facts, state),
        6 => enum_domains(stub, facts, state),
        7 => open_domain(stub, facts, state),
        8 | 46 => info::query_domain(stub, &mut call, state),
        11 | 15 => enum_empty(stub, state),
        13 => call.enum_users(stub, state),
        16 => alias_membership(stub, state),
        17 => call.lookup_names(stub, state),
        18 => call.lookup_rids(stub, state),
        19 => groups::open_group(stub, state),
        20 => groups::query_group(stub, state),
        25 => groups::group_members(stub, state),
        27 => groups::open_alias(stub, state),
        28 => groups::query_alias(stub, state),
        33 => groups::alias_members(stub, state),
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
/// nothing to give back) answers; [`CONTEXT_MISMATCH`] is the fault instead.
fn zeroed(zeros: usize, status: NtStatus) -> Reply {
    if status == CONTEXT_MISMATCH {
        return Err(super::FAULT_CONTEXT_MISMATCH);
    }
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

/// A policy handle (its type, then the 16 bytes we gave).
fn get_handle(r: &mut NdrReader<'_>) -> Result<HandleId, WireError> {
    let kind = r.u32()?;
    let id = r.bytes(16)?;
    Ok((
        kind,
        id.try_into()
            .map_err(|_| WireError::Invalid("policy handle"))?,
    ))
}

/// The handle a call starts with.
fn handle_id(r: &mut NdrReader<'_>) -> Result<HandleId, NtStatus> {
    get_handle(r).map_err(|_| NtStatus::INVALID_PARAMETER)
}

/// The handle `id` of this pipe (else the fault [`CONTEXT_MISMATCH`]), if `pick` takes its
/// kind (else STATUS_INVALID_HANDLE) and
/// its rights cover `needed` (else STATUS_ACCESS_DENIED), as Samba checks them in this order.
fn find<'s, T>(
    id: &HandleId,
    state: &'s State,
    needed: u32,
    pick: impl FnOnce(&'s Handle) -> Option<T>,
) -> Result<T, NtStatus> {
    let open = state.get(id).ok_or(CONTEXT_MISMATCH)?;
    let found = pick(&open.what).ok_or(NtStatus::INVALID_HANDLE)?;
    access::check(state.caller, open.granted, needed)?;
    Ok(found)
}

/// The server handle a call starts with.
fn server(r: &mut NdrReader<'_>, state: &State, needed: u32) -> Result<(), NtStatus> {
    find(&handle_id(r)?, state, needed, |h| {
        matches!(h, Handle::Connect).then_some(())
    })
}

/// Domain handle `id`.
fn domain_of(id: &HandleId, state: &State, needed: u32) -> Result<Domain, NtStatus> {
    find(id, state, needed, |h| match h {
        Handle::Domain(d) => Some(*d),
        _ => None,
    })
}

/// The domain handle a call starts with.
fn domain(r: &mut NdrReader<'_>, state: &State, needed: u32) -> Result<Domain, NtStatus> {
    domain_of(&handle_id(r)?, state, needed)
}

/// A call on a domain handle that needs `needed` of it: the reader after the handle and the
/// domain, or the reply of a call whose handle is not one or lacks the rights (`zeros` bytes
/// of out parameters, then the status).
fn domain_call<'a>(
    stub: &'a [u8],
    state: &State,
    needed: u32,
    zeros: usize,
) -> Result<(NdrReader<'a>, Domain), Reply> {
    let mut r = NdrReader::new(stub);
    match domain(&mut r, state, needed) {
        Ok(d) => Ok((r, d)),
        Err(st) => Err(zeroed(zeros, st)),
    }
}

/// User handle `id`.
pub(super) fn user_of<'s>(
    id: &HandleId,
    state: &'s State,
    needed: u32,
) -> Result<&'s Local, NtStatus> {
    find(id, state, needed, |h| match h {
        Handle::User(u) => Some(u),
        _ => None,
    })
}

/// The user handle a call starts with.
pub(super) fn user<'s>(
    r: &mut NdrReader<'_>,
    state: &'s State,
    needed: u32,
) -> Result<&'s Local, NtStatus> {
    user_of(&handle_id(r)?, state, needed)
}

/// A reply of a new handle with the rights granted (or of none, with `status`).
fn handle_reply(state: &mut State, h: Result<(Handle, u32), NtStatus>) -> Reply {
    let (h, granted) = match h {
        Ok(h) => h,
        Err(st) => return zeroed(20, st),
    };
    let kind = h.wire_type();
    match state.open(h, granted) {
        Some(id) => {
            let mut out = kind.to_le_bytes().to_vec();
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
    let parsed = (|| -> Result<u32, WireError> {
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
        let access = r.u32()?;
        if opnum == 64 {
            let level = r.u32()?;
            if level != 1 || r.u32()? != 1 {
                return Err(WireError::Invalid("ConnectInfo level"));
            }
            r.u32()?;
            r.u32()?;
        }
        Ok(access)
    })();
    let Ok(desired) = parsed else {
        return Err(super::FAULT_NDR);
    };
    let granted = if opnum == 0 {
        Ok(access::connect0(state.caller, desired))
    } else {
        access::grant(&access::SAM, state.caller, desired, 0)
    };
    let reply = handle_reply(state, granted.map(|g| (Handle::Connect, g)))?;
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

/// CloseHandle (1): the handle back zeroed; one this pipe does not have is the fault
/// nca_s_fault_context_mismatch (Samba's answer).
fn close(stub: &[u8], state: &mut State) -> Reply {
    let Ok(id) = get_handle(&mut NdrReader::new(stub)) else {
        return Err(super::FAULT_NDR);
    };
    match state.position(&id) {
        Some(i) => {
            state.handles.remove(i);
            zeroed(20, NtStatus::SUCCESS)
        }
        None => Err(super::FAULT_CONTEXT_MISMATCH),
    }
}

/// QuerySecurity (3): the security descriptor of the object a handle is of (Samba's default
/// descriptors, [`access::descriptor`]; `sec_info` is not looked at, as there), behind a
/// sec_desc_buf pointer; a handle opened without READ_CONTROL is STATUS_ACCESS_DENIED.
fn query_security(stub: &[u8], facts: &ServerFacts, state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    let object = handle_id(&mut r).and_then(|id| {
        find(&id, state, access::READ_CONTROL, |h| {
            Some(match h {
                Handle::Connect => Object::Server,
                Handle::Domain(_) => Object::Domain,
                Handle::User(u) => Object::User(account_sid(facts, u.rid)),
                Handle::Group(rid) => Object::Group(account_sid(facts, *rid)),
            })
        })
    });
    let object = match object {
        Ok(o) => o,
        Err(st) => return zeroed(4, st),
    };
    if r.u32().is_err() {
        return Err(super::FAULT_NDR);
    }
    let sd = access::descriptor(&object);
    let mut w = NdrWriter::new();
    w.ptr();
    w.u32(sd.len() as u32);
    w.ptr();
    w.u32(sd.len() as u32);
    w.buf.extend_from_slice(&sd);
    w.align4();
    w.u32(0);
    Ok(w.buf)
}

/// The SID of RID `rid` of the account domain.
fn account_sid(facts: &ServerFacts, rid: u32) -> Sid {
    let mut sid = domain_sid(Domain::Account, facts);
    sid.sub_authorities.push(rid);
    sid
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
    if let Err(st) = server(&mut r, state, access::SAM_LOOKUP_DOMAIN) {
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
    if let Err(st) = server(&mut r, state, access::SAM_ENUM_DOMAINS) {
        return zeroed(12, st);
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
    if let Err(st) = server(&mut r, state, 0) {
        return zeroed(20, st);
    }
    let args = (|| Ok::<_, WireError>((r.u32()?, lsa::get_sid(&mut r)?)))();
    let Ok((desired, sid)) = args else {
        return Err(super::FAULT_NDR);
    };
    // The rights first, then the domain (Samba's order).
    let d = access::grant(&access::DOMAIN, state.caller, desired, 0).and_then(|granted| {
        [Domain::Account, Domain::Builtin]
            .into_iter()
            .find(|d| domain_sid(*d, facts) == sid)
            .map(|d| (Handle::Domain(d), granted))
            .ok_or(NO_SUCH_DOMAIN)
    });
    handle_reply(state, d)
}

/// EnumerateGroupsInDomain (11) and EnumerateAliasesInDomain (15): none, as a standalone
/// Samba without group mappings lists.
fn enum_empty(stub: &[u8], state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = domain(&mut r, state, access::DOMAIN_ENUM_ACCOUNTS) {
        return zeroed(12, st);
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
    if let Err(st) = domain(&mut r, state, access::DOMAIN_LOOKUP_ALIAS) {
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

/// RemoveMemberFromForeignDomain (45): no alias has members, so there is nothing to remove
/// (success, as Samba answers it; smbtorture rpc.samr).
fn remove_from_foreign(stub: &[u8], state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    if let Err(st) = domain(&mut r, state, access::DOMAIN_OPEN_ACCOUNT) {
        return zeroed(0, st);
    }
    if lsa::get_sid(&mut r).is_err() {
        return Err(super::FAULT_NDR);
    }
    zeroed(0, NtStatus::SUCCESS)
}

/// GetGroupsForUser (39): `None`, the group every account is in.
fn groups_for_user(stub: &[u8], state: &State) -> Reply {
    if let Err(st) = user(&mut NdrReader::new(stub), state, access::USER_GET_GROUPS) {
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
    let (mut r, d) = match domain_call(stub, state, 0, 4) {
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

    /// [`Self::locals`] with their full names, from NSS as Samba's passdb has them (asked
    /// with the uids: the pipe asks NSS once).
    fn named_locals(&mut self) -> Option<Vec<Local>> {
        let full: Vec<Option<(String, String)>> = (self.facts.users.iter())
            .map(|u| self.names.passwd(&u.name))
            .collect();
        let mut all = self.locals()?;
        for l in &mut all {
            let at = self.facts.users.iter().position(|u| u.name == l.name);
            if let Some((_, f)) = at.and_then(|i| full[i].clone()) {
                l.full_name = f;
            }
        }
        Some(all)
    }

    /// EnumerateUsersInDomain (13): the accounts (whose flags share a bit with the asked
    /// ones, when asked), RID as index, from the resume handle on.
    fn enum_users(&mut self, stub: &[u8], state: &State) -> Reply {
        // The resume handle, the array's pointer and the entry count, zeroed on a refusal.
        let (mut r, d) = match domain_call(stub, state, access::DOMAIN_ENUM_ACCOUNTS, 12) {
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
        let (mut r, d) = match domain_call(stub, state, 0, 16) {
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
        let (mut r, d) = match domain_call(stub, state, 0, 16) {
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
        let mut locals = match d {
            Domain::Account if asked.iter().any(|r| *r >= localsam::RID_BASE) => {
                match self.locals() {
                    Some(l) => l,
                    None => return Ok(Vec::new()),
                }
            }
            _ => Vec::new(),
        };
        if d == Domain::Account && asked.contains(&local::RID_GUEST) {
            match local::guest(self.facts, self.names) {
                Some(guest) => locals.extend(guest),
                None => return Ok(Vec::new()),
            }
        }
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
        let (mut r, d) = match domain_call(stub, state, access::DOMAIN_OPEN_ACCOUNT, 20) {
            Ok(call) => call,
            Err(reply) => return reply,
        };
        let Ok((desired, rid)) = (|| Ok::<_, WireError>((r.u32()?, r.u32()?)))() else {
            return Err(super::FAULT_NDR);
        };
        // The account's own SID may do a little more to its object.
        let own = if state.caller.rid == Some(rid) && d == Domain::Account {
            access::USER_SELF
        } else {
            0
        };
        let granted = match access::grant(&access::USER, state.caller, desired, own) {
            Ok(g) => g,
            Err(st) => return zeroed(20, st),
        };
        if d != Domain::Account || (rid < localsam::RID_BASE && rid != local::RID_GUEST) {
            return zeroed(20, NO_SUCH_USER);
        }
        let found = if rid == local::RID_GUEST {
            local::guest(self.facts, self.names)
        } else {
            self.named_locals()
                .map(|l| l.into_iter().find(|l| l.rid == rid))
        };
        let Some(found) = found else {
            return Ok(Vec::new());
        };
        handle_reply(
            state,
            found
                .map(|u| (Handle::User(u), granted))
                .ok_or(NO_SUCH_USER),
        )
    }

    /// What QueryDisplayInformation level `level` lists in domain `d`: the users for levels
    /// 1 (general) and 4 (ASCII names); none for 2 (machines), 3 and 5 (groups), as a
    /// standalone Samba without trust accounts or group mappings. None while NSS is asked.
    fn display_list(&mut self, d: Domain, level: u16) -> Option<Vec<Local>> {
        match (d, level) {
            (Domain::Account, 1) => self.named_locals(),
            (Domain::Account, 4) => self.locals(),
            _ => Some(Vec::new()),
        }
    }

    /// QueryDisplayInformation (40), 2 (48) and 3 (51): the accounts of [`Self::display_list`]
    /// from `start_idx`.
    fn display_info(&mut self, stub: &[u8], state: &State) -> Reply {
        let mut r = NdrReader::new(stub);
        let id = match handle_id(&mut r) {
            Ok(id) => id,
            Err(st) => return zeroed(16, st),
        };
        let args = (|| Ok::<_, WireError>((r.u16()?, r.u32()?, r.u32()?, r.u32()?)))();
        let Ok((level, start, max_entries, _buf_size)) = args else {
            return Err(super::FAULT_NDR);
        };
        if !(1..=5).contains(&level) {
            // No samr_DispInfo arm to answer with.
            return Err(super::FAULT_NDR);
        }
        let d = match domain_of(&id, state, access::DOMAIN_ENUM_ACCOUNTS) {
            Ok(d) => d,
            Err(st) => {
                // Both sizes 0, then the union of the asked level with no entries.
                let mut w = NdrWriter::new();
                w.u32(0);
                w.u32(0);
                w.u16(level);
                w.u32(0);
                w.u32(0);
                w.u32(st.0);
                return Ok(w.buf);
            }
        };
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
                lsa::unicode_head(&mut w, &l.full_name);
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
                w.counted_chars(&l.full_name, 0);
            }
        }
        w.u32(status.0);
        Ok(w.buf)
    }

    /// GetDisplayEnumerationIndex (41) and 2 (49): where an account stands in what
    /// QueryDisplayInformation lists; STATUS_NO_MORE_ENTRIES for a name it does not list.
    fn display_index(&mut self, stub: &[u8], state: &State) -> Reply {
        let (mut r, d) = match domain_call(stub, state, access::DOMAIN_ENUM_ACCOUNTS, 4) {
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
