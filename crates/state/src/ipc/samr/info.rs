//! The information classes of samr's query calls: QueryInformationDomain(2)
//! (samr_DomainInfo), QueryInformationUser(2) (samr_UserInfo) and the password policy of
//! GetUserPwInfo / GetDomPwInfo, with the values a standalone Samba 4.22 answers for an
//! account of its `smbpasswd` passdb (no policies set: no expiry, no lockout, a minimum
//! password length of 5).

use ringshare_wire::NtStatus;

use super::super::lsa;
use super::super::ndr::{NdrReader, NdrWriter};
use super::access::{
    DOMAIN_LOOKUP_INFO_1, DOMAIN_LOOKUP_INFO_2, USER_GET_ATTRIBUTES, USER_GET_LOCALE,
    USER_GET_LOGONINFO, USER_GET_NAME_ETC,
};
use super::{domain_of, handle_id, user_of, zeroed, Call, Domain, Local, Reply, State, RID_NONE};
use crate::ipc::ServerFacts;

/// NTTIME "never" as Samba writes it for times that do not apply (0x7fff...: year 30828).
const NEVER: u64 = 0x7fff_ffff_ffff_ffff;
/// A relative time of "never" (a policy of -1: unix_to_nt_time_abs gives 0x8000...).
const NEVER_RELATIVE: u64 = 0x8000_0000_0000_0000;
/// Samba's default `min password length`.
const MIN_PASSWORD_LENGTH: u16 = 5;
/// samr_Role: Samba answers ROLE_DOMAIN_PDC (3) for its own SAM.
const ROLE: u32 = 3;
/// DOMAIN_SERVER_ENABLED.
const SERVER_ENABLED: u32 = 1;
/// The domain's modification count: ringshare's user database keeps none.
const SEQUENCE: u64 = 1;
/// SAMR_FIELD_* bits Samba sets in UserAllInformation (account name to code page).
const FIELDS_PRESENT: u32 = 0x00ff_ffff;
/// Logon hours: 168 units a week, all allowed.
const UNITS_PER_WEEK: u16 = 168;

/// One member of an info structure, as NDR lays it out.
#[derive(Clone, Copy)]
pub(super) enum Field<'a> {
    /// An lsa_String (its buffer deferred).
    Str(&'a str),
    /// An lsa_BinaryString with nothing in it.
    NoBinary,
    /// A NULL lsa_String (no buffer, as a value Samba never set).
    NoStr,
    U8(u8),
    U16(u16),
    U32(u32),
    /// An NTTIME, dlong or udlong: 8 bytes, 4-aligned (OLD_LARGE_INTEGER, two longs).
    Time(u64),
    /// A hyper: 8 bytes, 8-aligned (the structure then is too).
    Hyper(u64),
    /// samr_LogonHours (its bits deferred).
    Hours,
}

/// Write a structure: its scalars, then what its pointers point to.
fn put(w: &mut NdrWriter, fields: &[Field<'_>]) {
    if fields.iter().any(|f| matches!(f, Field::Hyper(_))) {
        w.align8();
    }
    for f in fields {
        match f {
            Field::Str(s) => lsa::unicode_head(w, s),
            Field::NoBinary | Field::NoStr => {
                w.u32(0);
                w.u32(0);
            }
            Field::U8(v) => w.buf.push(*v),
            Field::U16(v) => w.u16(*v),
            Field::U32(v) => w.u32(*v),
            Field::Time(v) => {
                w.align4();
                w.buf.extend_from_slice(&v.to_le_bytes());
            }
            Field::Hyper(v) => {
                w.align8();
                w.buf.extend_from_slice(&v.to_le_bytes());
            }
            Field::Hours => {
                w.align4();
                w.u16(UNITS_PER_WEEK);
                w.ptr();
            }
        }
    }
    for f in fields {
        match f {
            Field::Str(s) => w.counted_chars(s, 0),
            Field::Hours => {
                let n = u32::from(UNITS_PER_WEEK / 8);
                w.u32(1260);
                w.u32(0);
                w.u32(n);
                w.buf.extend(std::iter::repeat_n(0xFF, n as usize));
            }
            _ => {}
        }
    }
}

/// QueryInformationDomain (8) / 2 (46).
/// The answer of a query of information `level`: a pointer to the union (its level, then
/// `fields`), and STATUS_SUCCESS.
pub(super) fn info_reply(level: u16, fields: &[Field<'_>]) -> Vec<u8> {
    let mut w = NdrWriter::new();
    w.ptr();
    w.u16(level);
    put(&mut w, fields);
    w.u32(0);
    w.buf
}

pub(super) fn query_domain(stub: &[u8], call: &mut Call<'_, '_>, state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    let Ok((id, level)) = handle_id(&mut r).map(|id| (id, r.u16())) else {
        return zeroed(4, NtStatus::INVALID_PARAMETER);
    };
    let Ok(level) = level else {
        return Err(super::super::FAULT_NDR);
    };
    // The rights each class needs (Samba's): an unknown class is refused before the handle
    // is looked at.
    let needed = match level {
        1 | 12 => DOMAIN_LOOKUP_INFO_1,
        11 => DOMAIN_LOOKUP_INFO_1 | DOMAIN_LOOKUP_INFO_2,
        2..=10 | 13 => DOMAIN_LOOKUP_INFO_2,
        _ => return zeroed(4, NtStatus::INVALID_INFO_CLASS),
    };
    let d = match domain_of(&id, state, needed) {
        Ok(d) => d,
        Err(st) => return zeroed(4, st),
    };
    let facts = call.facts;
    let users = match (d, level) {
        (Domain::Account, 2 | 11) => match call.locals() {
            Some(l) => l.iter().filter(|l| !l.disabled).count() as u32,
            None => return Ok(Vec::new()),
        },
        _ => 0,
    };
    let general = [
        Field::Time(NEVER_RELATIVE), // force_logoff_time
        Field::Str(&facts.comment),  // oem_information
        Field::Str(&facts.workgroup),
        Field::Str(&facts.netbios_name), // primary
        Field::Time(SEQUENCE),
        Field::U32(SERVER_ENABLED),
        Field::U32(ROLE),
        Field::U32(1), // unknown3
        Field::U32(users),
        Field::U32(0), // groups
        Field::U32(0), // aliases
    ];
    let lockout = [
        Field::Hyper(NEVER_RELATIVE),
        Field::Hyper(NEVER_RELATIVE),
        Field::U16(0),
    ];
    let fields: Vec<Field<'_>> = match level {
        1 => vec![
            Field::U16(MIN_PASSWORD_LENGTH),
            Field::U16(0),
            Field::U32(0),
            Field::Time(NEVER_RELATIVE),
            Field::Time(0),
        ],
        2 => general.into_iter().collect(),
        3 => vec![Field::Time(NEVER_RELATIVE)],
        4 => vec![Field::Str(&facts.comment)],
        5 | 6 => vec![Field::Str(&facts.netbios_name)],
        7 => vec![Field::U32(ROLE)],
        8 => vec![Field::Hyper(SEQUENCE), Field::Time(0)],
        9 => vec![Field::U32(SERVER_ENABLED)],
        // The general part's strings follow the whole structure: one list.
        11 => general.into_iter().chain(lockout).collect(),
        12 => lockout.into_iter().collect(),
        13 => vec![Field::Hyper(SEQUENCE), Field::Time(0), Field::Hyper(0)],
        _ => return zeroed(4, NtStatus::INVALID_INFO_CLASS),
    };
    Ok(info_reply(level, &fields))
}

/// The strings of an account that Samba fills from its defaults (`logon home`, `logon
/// path`).
struct UserText {
    home: String,
    profile: String,
    /// The home drive: empty, or NULL for the guest account (Samba sets `logon drive` only
    /// for its passdb's accounts).
    drive: Field<'static>,
}

/// QueryInformationUser (36) / 2 (47): the classes that show an account (not its password
/// hashes, level 18, nor the write-only ones).
pub(super) fn query_user(stub: &[u8], facts: &ServerFacts, state: &State) -> Reply {
    let mut r = NdrReader::new(stub);
    let Ok((id, level)) = handle_id(&mut r).map(|id| (id, r.u16())) else {
        return zeroed(4, NtStatus::INVALID_PARAMETER);
    };
    let Ok(level) = level else {
        return Err(super::super::FAULT_NDR);
    };
    let Some(needed) = user_rights(level) else {
        return zeroed(4, NtStatus::INVALID_INFO_CLASS);
    };
    let u: &Local = match user_of(&id, state, needed) {
        Ok(u) => u,
        Err(st) => return zeroed(4, st),
    };
    // Samba fills `logon home` and `logon path` for its passdb's accounts, not for the guest.
    let text = if u.guest {
        UserText {
            home: String::new(),
            profile: String::new(),
            drive: Field::NoStr,
        }
    } else {
        UserText {
            home: format!("\\\\{}\\{}", facts.netbios_name, u.name),
            profile: format!("\\\\{}\\{}\\profile", facts.netbios_name, u.name),
            drive: Field::Str(""),
        }
    };
    let Some(fields) = user_fields(level, u, &text) else {
        let st = if level == 18 {
            NtStatus::ACCESS_DENIED
        } else {
            NtStatus::INVALID_INFO_CLASS
        };
        return zeroed(4, st);
    };
    Ok(info_reply(level, &fields))
}

/// The rights QueryInformationUser class `level` needs of its handle (Samba's); None for a
/// class it refuses before looking at the handle.
fn user_rights(level: u16) -> Option<u32> {
    let all = USER_GET_NAME_ETC | USER_GET_LOCALE | USER_GET_LOGONINFO | USER_GET_ATTRIBUTES;
    Some(match level {
        1 | 6..=9 | 13 => USER_GET_NAME_ETC,
        2 => USER_GET_LOCALE | USER_GET_NAME_ETC,
        3 | 5 => all,
        4 | 10..=12 | 14 => USER_GET_LOGONINFO,
        16..=18 | 20 | 21 => USER_GET_ATTRIBUTES,
        _ => return None,
    })
}

/// What UserLogonInformation (3) and UserAccountInformation (5) start with: names, RIDs,
/// home, logon script and profile.
fn logon_head<'a>(u: &'a Local, t: &'a UserText) -> [Field<'a>; 8] {
    use Field::*;
    [
        Str(&u.name),
        Str(&u.full_name),
        U32(u.rid),
        U32(RID_NONE),
        Str(&t.home),
        t.drive,
        Str(""), // logon script
        Str(&t.profile),
    ]
}

/// The members of user information class `level` ([MS-SAMR] 2.2.6.29).
fn user_fields<'a>(level: u16, u: &'a Local, t: &'a UserText) -> Option<Vec<Field<'a>>> {
    use Field::*;
    let name = Str(&u.name);
    let acb = U32(u.acb());
    Some(match level {
        1 => vec![name, Str(&u.full_name), U32(RID_NONE), Str(""), Str("")],
        2 => vec![Str(""), Str(""), U16(0), U16(0)],
        // Workstations, then the times.
        3 => logon_head(u, t)
            .into_iter()
            .chain([
                Str(""),
                Time(0),     // last logon
                Time(NEVER), // last logoff
                Time(0),     // last password change
                Time(0),     // allow password change
                Time(NEVER), // force password change
                Hours,
                U16(0),
                U16(0),
                acb,
            ])
            .collect(),
        4 => vec![Hours],
        // Description and workstations, then the times.
        5 => logon_head(u, t)
            .into_iter()
            .chain([
                Str(""),
                Str(""),
                Time(0),
                Time(NEVER),
                Hours,
                U16(0),
                U16(0),
                Time(0),     // last password change
                Time(NEVER), // account expiry
                acb,
            ])
            .collect(),
        6 => vec![name, Str(&u.full_name)],
        7 => vec![name],
        8 => vec![Str(&u.full_name)],
        11 | 13 | 14 => vec![Str("")],
        9 => vec![U32(RID_NONE)],
        10 => vec![Str(&t.home), t.drive],
        12 => vec![Str(&t.profile)],
        16 => vec![acb],
        17 => vec![Time(NEVER)],
        20 => vec![NoBinary],
        21 => vec![
            Time(0),     // last logon
            Time(NEVER), // last logoff
            Time(0),     // last password change
            Time(NEVER), // account expiry
            Time(0),     // allow password change
            Time(NEVER), // force password change
            name,
            Str(&u.full_name),
            Str(&t.home),
            t.drive,
            Str(""), // logon script
            Str(&t.profile),
            Str(""), // description
            Str(""), // workstations
            Str(""), // comment
            NoBinary,
            NoBinary,
            NoBinary,
            Str(""), // private data
            U32(0),  // buf_count
            U32(0),  // buffer
            U32(u.rid),
            U32(RID_NONE),
            acb,
            U32(FIELDS_PRESENT),
            Hours,
            U16(0), // bad password count
            U16(0), // logon count
            U16(0), // country code
            U16(0), // code page
            U8(0),
            U8(0),
            U8(0),
            U8(0),
        ],
        _ => return None,
    })
}

/// GetUserPwInfo (44, `user`) and GetDomPwInfo (56): the minimum password length and the
/// password properties.
pub(super) fn pw_info(stub: &[u8], state: &State, user: bool) -> Reply {
    let mut r = NdrReader::new(stub);
    if user {
        if let Err(st) = super::user(&mut r, state, USER_GET_ATTRIBUTES) {
            return zeroed(8, st);
        }
    }
    let mut w = NdrWriter::new();
    w.u16(MIN_PASSWORD_LENGTH);
    w.u32(0);
    w.u32(0);
    Ok(w.buf)
}
