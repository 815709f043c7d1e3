//! The PAC's logon information ([MS-PAC] 2.5 KERB_VALIDATION_INFO): who the user is in the
//! domain and which groups they are in, NDR-decoded ([MS-RPCE] 2.2.6 type serialization version
//! 1: a 16-byte header, then a top-level pointer to the structure, whose strings, arrays and SIDs
//! follow as deferred pointers in the order of their fields).
//!
//! Every count and length is checked against what is left of the buffer before anything is
//! allocated, and the number of groups and SIDs is capped: a forged or broken PAC is an error,
//! never a panic or a large allocation.

use ringshare_wire::security::Sid;

use crate::AuthError;

/// The most group RIDs, extra SIDs or resource groups taken from one PAC (Active Directory caps
/// a token at 1015 groups).
pub const GROUPS_MAX: usize = 4096;
/// UserFlags: ExtraSids holds SIDs ([MS-PAC] 2.5: D bit, 0x20).
pub const USER_FLAG_EXTRA_SIDS: u32 = 0x20;
/// UserFlags: ResourceGroupIds holds resource groups (H bit, 0x200).
pub const USER_FLAG_RESOURCE_GROUPS: u32 = 0x200;

/// What ringshare takes from a KERB_VALIDATION_INFO.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogonInfo {
    /// EffectiveName: the account name (sAMAccountName).
    pub effective_name: String,
    /// FullName.
    pub full_name: String,
    /// LogonServer (the DC's NetBIOS name).
    pub logon_server: String,
    /// LogonDomainName (the domain's NetBIOS name).
    pub logon_domain_name: String,
    /// UserId: the user's RID in LogonDomainId.
    pub user_id: u32,
    /// PrimaryGroupId: a RID in LogonDomainId.
    pub primary_group_id: u32,
    /// GroupIds: (RID in LogonDomainId, attributes).
    pub groups: Vec<(u32, u32)>,
    /// UserFlags.
    pub user_flags: u32,
    /// LogonDomainId.
    pub logon_domain_id: Option<Sid>,
    /// UserAccountControl.
    pub user_account_control: u32,
    /// ExtraSids: (SID, attributes).
    pub extra_sids: Vec<(Sid, u32)>,
    /// ResourceGroupDomainSid.
    pub resource_group_domain_sid: Option<Sid>,
    /// ResourceGroupIds: (RID in ResourceGroupDomainSid, attributes).
    pub resource_groups: Vec<(u32, u32)>,
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

/// An NDR reader: little-endian, alignment relative to the start of the serialized data.
struct Ndr<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Ndr<'a> {
    fn align(&mut self, n: usize) -> Result<(), AuthError> {
        let pad = (n - self.pos % n) % n;
        self.take(pad).map(|_| ())
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], AuthError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(bad("PAC logon info truncated"))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(bad("PAC logon info truncated"))?;
        self.pos = end;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16, AuthError> {
        self.align(2)?;
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, AuthError> {
        self.align(4)?;
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn skip(&mut self, n: usize) -> Result<(), AuthError> {
        self.take(n).map(|_| ())
    }
    /// A count that must fit in what is left at `each` bytes apiece, and under the cap.
    fn count(&mut self, each: usize) -> Result<usize, AuthError> {
        let n = self.u32()? as usize;
        if n > GROUPS_MAX || n.saturating_mul(each) > self.buf.len().saturating_sub(self.pos) {
            return Err(bad("PAC logon info count too large"));
        }
        Ok(n)
    }
    /// A conformant varying UTF-16 string (the deferred part of an RPC_UNICODE_STRING).
    fn string(&mut self, length_bytes: u16) -> Result<String, AuthError> {
        let _max = self.u32()?;
        let offset = self.u32()?;
        let actual = self.count(2)?;
        if offset != 0 || actual * 2 != length_bytes as usize {
            return Err(bad("PAC logon info string lengths disagree"));
        }
        let raw = self.take(actual * 2)?;
        let units: Vec<u16> = raw
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16(&units).map_err(|_| bad("PAC logon info string is not UTF-16"))
    }
    /// A conformant SID (the deferred part of a PISID).
    fn sid(&mut self) -> Result<Sid, AuthError> {
        let count = self.count(4)?;
        let revision = self.take(1)?[0];
        let sub_count = self.take(1)?[0] as usize;
        if revision != 1 || sub_count != count || sub_count > 15 {
            return Err(bad("PAC logon info SID malformed"));
        }
        let auth = self.take(6)?;
        let authority = auth.iter().fold(0u64, |a, b| (a << 8) | *b as u64);
        let mut subs = Vec::with_capacity(sub_count);
        for _ in 0..sub_count {
            subs.push(self.u32()?);
        }
        Sid::from_parts(authority, &subs).ok_or(bad("PAC logon info SID malformed"))
    }
    /// A conformant array of (RID, attributes).
    fn rids(&mut self, count: u32) -> Result<Vec<(u32, u32)>, AuthError> {
        let n = self.count(8)?;
        if n != count as usize {
            return Err(bad("PAC logon info group count disagrees"));
        }
        (0..n).map(|_| Ok((self.u32()?, self.u32()?))).collect()
    }
}

/// An RPC_UNICODE_STRING's fixed part: (length in bytes, pointer present).
fn string_header(r: &mut Ndr<'_>) -> Result<(u16, bool), AuthError> {
    let len = r.u16()?;
    let max = r.u16()?;
    let ptr = r.u32()?;
    if len > max || len % 2 != 0 {
        return Err(bad("PAC logon info string header"));
    }
    Ok((len, ptr != 0))
}

fn deferred_string(r: &mut Ndr<'_>, h: (u16, bool)) -> Result<String, AuthError> {
    match h {
        (len, true) => r.string(len),
        (0, false) => Ok(String::new()),
        _ => Err(bad("PAC logon info string without its buffer")),
    }
}

impl LogonInfo {
    /// Decode the PAC_LOGON_INFO buffer (type 1).
    pub fn decode(buf: &[u8]) -> Result<LogonInfo, AuthError> {
        // Common header: version 1, little-endian, 8 bytes, filler; private header: length.
        if buf.len() < 20 || buf[0] != 1 || buf[1] != 0x10 || buf[2..4] != [8, 0] {
            return Err(bad("PAC logon info without its NDR header"));
        }
        let len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
        let body = buf
            .get(16..16usize.saturating_add(len))
            .ok_or(bad("PAC logon info length past its buffer"))?;
        let mut r = Ndr { buf: body, pos: 0 };
        if r.u32()? == 0 {
            return Err(bad("PAC logon info is a null pointer"));
        }
        Self::fixed_and_deferred(&mut r)
    }

    fn fixed_and_deferred(r: &mut Ndr<'_>) -> Result<LogonInfo, AuthError> {
        let mut out = LogonInfo::default();
        r.align(4)?;
        r.skip(6 * 8)?; // LogonTime .. PasswordMustChange
        let mut names = Vec::with_capacity(6);
        for _ in 0..6 {
            names.push(string_header(r)?); // EffectiveName .. HomeDirectoryDrive
        }
        r.u16()?; // LogonCount
        r.u16()?; // BadPasswordCount
        out.user_id = r.u32()?;
        out.primary_group_id = r.u32()?;
        let group_count = r.u32()?;
        let groups_ptr = r.u32()? != 0;
        out.user_flags = r.u32()?;
        r.skip(16)?; // UserSessionKey
        let server = string_header(r)?;
        let domain = string_header(r)?;
        let domain_sid_ptr = r.u32()? != 0;
        r.skip(8)?; // Reserved1
        out.user_account_control = r.u32()?;
        r.u32()?; // SubAuthStatus
        r.skip(16)?; // LastSuccessfulILogon, LastFailedILogon
        r.u32()?; // FailedILogonCount
        r.u32()?; // Reserved3
        let sid_count = r.u32()?;
        let sids_ptr = r.u32()? != 0;
        let resource_sid_ptr = r.u32()? != 0;
        let resource_count = r.u32()?;
        let resource_ptr = r.u32()? != 0;
        // The deferred parts, in field order.
        let mut texts = Vec::with_capacity(6);
        for h in names {
            texts.push(deferred_string(r, h)?);
        }
        out.effective_name = std::mem::take(&mut texts[0]);
        out.full_name = std::mem::take(&mut texts[1]);
        if groups_ptr {
            out.groups = r.rids(group_count)?;
        } else if group_count != 0 {
            return Err(bad("PAC logon info groups without their array"));
        }
        out.logon_server = deferred_string(r, server)?;
        out.logon_domain_name = deferred_string(r, domain)?;
        if domain_sid_ptr {
            out.logon_domain_id = Some(r.sid()?);
        }
        if sids_ptr {
            let n = r.count(8)?;
            if n != sid_count as usize {
                return Err(bad("PAC logon info SID count disagrees"));
            }
            let mut heads = Vec::with_capacity(n);
            for _ in 0..n {
                heads.push((r.u32()? != 0, r.u32()?));
            }
            for (present, attrs) in heads {
                if !present {
                    return Err(bad("PAC logon info extra SID is a null pointer"));
                }
                out.extra_sids.push((r.sid()?, attrs));
            }
        } else if sid_count != 0 {
            return Err(bad("PAC logon info SIDs without their array"));
        }
        if resource_sid_ptr {
            out.resource_group_domain_sid = Some(r.sid()?);
        }
        if resource_ptr {
            out.resource_groups = r.rids(resource_count)?;
        } else if resource_count != 0 {
            return Err(bad("PAC logon info resource groups without their array"));
        }
        Ok(out)
    }

    /// The SIDs of the user's token ([MS-PAC] 3.3.1.2 / [MS-KILE] 3.4.5.3): the user, the primary
    /// group and every group RID in the logon domain, the extra SIDs when UserFlags says so, and
    /// the resource groups in their domain when UserFlags says so. The first is the user's SID.
    pub fn sids(&self) -> Result<Vec<Sid>, AuthError> {
        let domain = self
            .logon_domain_id
            .as_ref()
            .ok_or(bad("PAC logon info without the logon domain's SID"))?;
        let in_domain = |d: &Sid, rid: u32| {
            let mut subs = d.sub_authorities.clone();
            subs.push(rid);
            Sid {
                revision: d.revision,
                authority: d.authority,
                sub_authorities: subs,
            }
        };
        let mut out = vec![
            in_domain(domain, self.user_id),
            in_domain(domain, self.primary_group_id),
        ];
        let mut push = |s: Sid| {
            if !out.contains(&s) {
                out.push(s);
            }
        };
        for (rid, _) in &self.groups {
            push(in_domain(domain, *rid));
        }
        if self.user_flags & USER_FLAG_EXTRA_SIDS != 0 {
            for (sid, _) in &self.extra_sids {
                push(sid.clone());
            }
        }
        if self.user_flags & USER_FLAG_RESOURCE_GROUPS != 0 {
            if let Some(rd) = &self.resource_group_domain_sid {
                for (rid, _) in &self.resource_groups {
                    push(in_domain(rd, *rid));
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::krb5::pac::{buffer, Pac};

    /// A PAC_DATA with one logon-info buffer, made by Samba 4.17's own NDR encoder
    /// (python3-samba `ndr_pack(krb5pac.PAC_DATA)`): user rsalice (RID 1102, primary group 513,
    /// groups 513 and 1103) of RSAD (S-1-5-21-1111111111-2222222222-3333333333), extra SID
    /// S-1-18-1, resource group 2001 of S-1-5-21-4444-5555-6666, UserFlags 0x220.
    const SAMBA_PAC: &str = include_str!("testdata/samba-logon-info-pac.hex");

    fn sample() -> Vec<u8> {
        crate::unhex(SAMBA_PAC.trim())
    }

    #[test]
    fn samba_encoded_logon_info_decodes_to_its_user_groups_and_sids() {
        let pac = Pac::parse(&sample()).unwrap();
        let info = LogonInfo::decode(pac.buffer(buffer::LOGON_INFO).unwrap()).unwrap();
        assert_eq!(info.effective_name, "rsalice");
        assert_eq!(info.full_name, "Alice Example");
        assert_eq!(info.logon_domain_name, "RSAD");
        assert_eq!(info.logon_server, "DC1");
        assert_eq!(info.user_id, 1102);
        assert_eq!(info.primary_group_id, 513);
        assert_eq!(info.groups, vec![(513, 7), (1103, 7)]);
        assert_eq!(info.user_flags, 0x220);
        assert_eq!(info.user_account_control, 0x10);
        let sids: Vec<String> = info.sids().unwrap().iter().map(|s| s.to_string()).collect();
        assert_eq!(
            sids,
            [
                "S-1-5-21-1111111111-2222222222-3333333333-1102",
                "S-1-5-21-1111111111-2222222222-3333333333-513",
                "S-1-5-21-1111111111-2222222222-3333333333-1103",
                "S-1-18-1",
                "S-1-5-21-4444-5555-6666-2001",
            ]
        );
    }

    #[test]
    fn extra_and_resource_sids_count_only_when_user_flags_say_so() {
        let pac = Pac::parse(&sample()).unwrap();
        let mut info = LogonInfo::decode(pac.buffer(buffer::LOGON_INFO).unwrap()).unwrap();
        info.user_flags = 0;
        assert_eq!(info.sids().unwrap().len(), 3);
    }

    #[test]
    fn truncated_or_corrupted_logon_info_is_refused_without_panicking() {
        let pac = Pac::parse(&sample()).unwrap();
        let b = pac.buffer(buffer::LOGON_INFO).unwrap().to_vec();
        for n in 0..b.len() {
            assert!(LogonInfo::decode(&b[..n]).is_err(), "prefix {n}");
        }
        for i in 0..b.len() {
            for x in [0u8, 0x7f, 0xff] {
                let mut m = b.clone();
                m[i] = x;
                let _ = LogonInfo::decode(&m);
            }
        }
    }
}
