//! samr's groups and aliases as a standalone Samba 4.22 with `passdb backend = smbpasswd`
//! and no group mappings answers them: the one group is `None` (513, "Ordinary Users"),
//! whose member list is empty (Samba lists no members without a mapping of it to a Unix
//! group); no alias opens (Samba finds the BUILTIN aliases by name, but without winbind has
//! no Unix group for them: STATUS_NO_SUCH_ALIAS), so the calls on an alias handle only ever
//! see handles that are not one.

use ringshare_wire::{NtStatus, WireError};

use super::access::{self, ALIAS_GET_MEMBERS, ALIAS_LOOKUP_INFO, DOMAIN_OPEN_ACCOUNT};
use super::info::{info_reply, Field};
use super::{
    domain_call, find, handle_id, handle_reply, zeroed, Domain, Handle, Reply, State, GROUP_ATTRS,
    NO_SUCH_GROUP, RID_NONE,
};
use crate::ipc::ndr::{NdrReader, NdrWriter};

/// STATUS_NO_SUCH_ALIAS.
const NO_SUCH_ALIAS: NtStatus = NtStatus(0xC000_0151);
/// The name and description Samba gives `None`.
const NONE_NAME: &str = "None";
const NONE_DESCRIPTION: &str = "Ordinary Users";

/// The domain, access mask and RID of an OpenGroup or OpenAlias (its domain handle needs
/// SAMR_DOMAIN_ACCESS_OPEN_ACCOUNT), or the reply of one whose handle does not do.
fn open_args(stub: &[u8], state: &State) -> Result<(Domain, u32, u32), Reply> {
    let (mut r, d) = domain_call(stub, state, DOMAIN_OPEN_ACCOUNT, 20)?;
    let args = (|| Ok::<_, WireError>((r.u32()?, r.u32()?)))();
    let (desired, rid) = args.map_err(|_| Err(super::super::FAULT_NDR))?;
    Ok((d, desired, rid))
}

/// OpenGroup (19): the rights first, then the domain (only the account domain has groups:
/// STATUS_ACCESS_DENIED in `Builtin`, as Samba), then the group (`None` only).
pub(super) fn open_group(stub: &[u8], state: &mut State) -> Reply {
    let (d, desired, rid) = match open_args(stub, state) {
        Ok(args) => args,
        Err(reply) => return reply,
    };
    let h = access::grant(&access::GROUP, state.caller, desired, 0).and_then(|granted| {
        if d != Domain::Account {
            return Err(NtStatus::ACCESS_DENIED);
        }
        if rid != RID_NONE {
            return Err(NO_SUCH_GROUP);
        }
        Ok((Handle::Group(rid), granted))
    });
    handle_reply(state, h)
}

/// The group handle a call starts with, if its rights cover `needed`.
fn group<'a>(stub: &'a [u8], state: &State, needed: u32) -> Result<(NdrReader<'a>, u32), NtStatus> {
    let mut r = NdrReader::new(stub);
    let id = handle_id(&mut r)?;
    let rid = find(&id, state, needed, |h| match h {
        Handle::Group(rid) => Some(*rid),
        _ => None,
    })?;
    Ok((r, rid))
}

/// QueryGroupInfo (20): classes 1-5 of `None` (no members: Samba's count is 0 too).
pub(super) fn query_group(stub: &[u8], state: &State) -> Reply {
    let mut r = match group(stub, state, access::GROUP_LOOKUP_INFO) {
        Ok((r, _)) => r,
        Err(st) => return zeroed(4, st),
    };
    let Ok(level) = r.u16() else {
        return Err(super::super::FAULT_NDR);
    };
    let all = [
        Field::Str(NONE_NAME),
        Field::U32(GROUP_ATTRS),
        Field::U32(0),
        Field::Str(NONE_DESCRIPTION),
    ];
    let fields: &[Field<'_>] = match level {
        1 | 5 => &all,
        2 => &all[..1],
        3 => &all[1..2],
        4 => &all[3..],
        _ => return zeroed(4, NtStatus::INVALID_INFO_CLASS),
    };
    Ok(info_reply(level, fields))
}

/// QueryGroupMember (25): `None` lists no members (a samr_RidAttrArray with none).
pub(super) fn group_members(stub: &[u8], state: &State) -> Reply {
    if let Err(st) = group(stub, state, access::GROUP_GET_MEMBERS) {
        return zeroed(4, st);
    }
    // A pointer to the array: count 0, no RIDs, no attributes.
    let mut w = NdrWriter::new();
    w.ptr();
    for _ in 0..3 {
        w.u32(0);
    }
    w.u32(NtStatus::SUCCESS.0);
    Ok(w.buf)
}

/// OpenAlias (27): the rights are checked, then no alias is found.
pub(super) fn open_alias(stub: &[u8], state: &mut State) -> Reply {
    let desired = match open_args(stub, state) {
        Ok((_, desired, _)) => desired,
        Err(reply) => return reply,
    };
    let h = access::grant(&access::ALIAS, state.caller, desired, 0).and(Err(NO_SUCH_ALIAS));
    handle_reply(state, h)
}

/// A call on an alias handle: none is ever open, so every handle is not one (`zeros` bytes
/// of out parameters, then STATUS_INVALID_HANDLE).
fn alias_call(stub: &[u8], state: &State, needed: u32, zeros: usize) -> Reply {
    let st = handle_id(&mut NdrReader::new(stub))
        .and_then(|id| find(&id, state, needed, |_| None::<()>))
        .err()
        .unwrap_or(NtStatus::INVALID_HANDLE);
    zeroed(zeros, st)
}

/// QueryAliasInfo (28): a NULL info pointer.
pub(super) fn query_alias(stub: &[u8], state: &State) -> Reply {
    alias_call(stub, state, ALIAS_LOOKUP_INFO, 4)
}

/// GetMembersInAlias (33): an empty lsa_SidArray.
pub(super) fn alias_members(stub: &[u8], state: &State) -> Reply {
    alias_call(stub, state, ALIAS_GET_MEMBERS, 8)
}
