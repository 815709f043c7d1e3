//! Who a domain user is, from the PAC of an Active Directory ticket: the logon information
//! ([MS-PAC] 2.5) gives the account name, the domain and every SID of the user's token; the
//! UPN and DNS information ([MS-PAC] 2.10) gives the user principal name and the domain's DNS
//! name, and, when the KDC adds them (the S flag), the account name and SID again, which must
//! agree with the logon information.
//!
//! The caller has already checked that the PAC came with a ticket encrypted in the server's key
//! and that its server signature and client information verify (the acceptor does both).

use ringshare_wire::security::Sid;

use super::logon_info::LogonInfo;
use super::pac::{buffer, Pac};
use crate::AuthError;

/// UPN_DNS_INFO flags: the UPN was built from the account name, not set by an admin (U).
pub const UPN_FLAG_CONSTRUCTED: u32 = 1;
/// UPN_DNS_INFO flags: the account name and SID follow (S).
pub const UPN_FLAG_SAM_NAME_AND_SID: u32 = 2;

/// A domain user as the PAC describes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainLogon {
    /// The domain's NetBIOS name (LogonDomainName), e.g. `RSAD`.
    pub domain: String,
    /// The account name (EffectiveName, sAMAccountName), e.g. `alice`.
    pub name: String,
    /// The domain's DNS name from UPN_DNS_INFO, when the PAC has one.
    pub dns_domain: Option<String>,
    /// The user principal name from UPN_DNS_INFO, when the PAC has one.
    pub upn: Option<String>,
    /// The domain's SID (LogonDomainId).
    pub domain_sid: Sid,
    /// Every SID of the user's token: the user first, then the primary group, the groups, the
    /// extra SIDs and the resource groups ([`LogonInfo::sids`]).
    pub sids: Vec<Sid>,
}

/// UPN_DNS_INFO decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpnDnsInfo {
    /// The user principal name.
    pub upn: String,
    /// The domain's DNS name.
    pub dns_domain: String,
    /// Flags (U, S).
    pub flags: u32,
    /// With the S flag: the account name and the user's SID.
    pub sam_name_and_sid: Option<(String, Sid)>,
}

fn bad(what: &'static str) -> AuthError {
    AuthError::Malformed(what)
}

fn refused(why: String) -> AuthError {
    AuthError::Kerberos(why)
}

fn u16_at(b: &[u8], at: usize) -> Result<usize, AuthError> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]) as usize)
        .ok_or(bad("PAC UPN and DNS info truncated"))
}

/// A field given by its length and offset from the start of the buffer.
fn field(b: &[u8], len: usize, off: usize) -> Result<&[u8], AuthError> {
    off.checked_add(len)
        .and_then(|end| b.get(off..end))
        .ok_or(bad("PAC UPN and DNS info field past its end"))
}

fn utf16(b: &[u8]) -> Result<String, AuthError> {
    if !b.len().is_multiple_of(2) {
        return Err(bad("PAC UPN and DNS info string of odd length"));
    }
    let units: Vec<u16> = b
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    String::from_utf16(&units).map_err(|_| bad("PAC UPN and DNS info string"))
}

impl UpnDnsInfo {
    /// Decode a UPN_DNS_INFO buffer ([MS-PAC] 2.10).
    pub fn decode(b: &[u8]) -> Result<UpnDnsInfo, AuthError> {
        let upn = utf16(field(b, u16_at(b, 0)?, u16_at(b, 2)?)?)?;
        let dns_domain = utf16(field(b, u16_at(b, 4)?, u16_at(b, 6)?)?)?;
        let flags = b
            .get(8..12)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
            .ok_or(bad("PAC UPN and DNS info truncated"))?;
        let sam_name_and_sid = if flags & UPN_FLAG_SAM_NAME_AND_SID != 0 {
            let name = utf16(field(b, u16_at(b, 12)?, u16_at(b, 14)?)?)?;
            let sid = Sid::decode(field(b, u16_at(b, 16)?, u16_at(b, 18)?)?)
                .map_err(|_| bad("PAC UPN and DNS info SID"))?;
            Some((name, sid))
        } else {
            None
        };
        Ok(UpnDnsInfo {
            upn,
            dns_domain,
            flags,
            sam_name_and_sid,
        })
    }
}

/// The domain user of a PAC with logon information; None when the PAC has none (an MIT KDC's
/// minimal PAC). A PAC whose UPN and DNS information names another account or SID than its
/// logon information is refused.
pub fn domain_logon(pac: &Pac) -> Result<Option<DomainLogon>, AuthError> {
    let Some(raw) = pac.buffer(buffer::LOGON_INFO) else {
        return Ok(None);
    };
    let info = LogonInfo::decode(raw)?;
    let sids = info.sids()?;
    let domain_sid = info
        .logon_domain_id
        .clone()
        .ok_or(bad("PAC logon info without the logon domain's SID"))?;
    if info.effective_name.is_empty() || info.logon_domain_name.is_empty() {
        return Err(bad("PAC logon info without an account or domain name"));
    }
    let upn = match pac.buffer(buffer::UPN_DNS_INFO) {
        Some(b) => Some(UpnDnsInfo::decode(b)?),
        None => None,
    };
    if let Some((name, sid)) = upn.as_ref().and_then(|u| u.sam_name_and_sid.as_ref()) {
        if !name.eq_ignore_ascii_case(&info.effective_name) || sid != &sids[0] {
            return Err(refused(format!(
                "PAC logon info names {}\\{} ({}), its UPN and DNS info {name} ({sid})",
                info.logon_domain_name, info.effective_name, sids[0]
            )));
        }
    }
    Ok(Some(DomainLogon {
        domain: info.logon_domain_name,
        name: info.effective_name,
        dns_domain: upn.as_ref().map(|u| u.dns_domain.clone()),
        upn: upn.map(|u| u.upn),
        domain_sid,
        sids,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16le(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(|u| u.to_le_bytes()).collect()
    }

    /// A UPN_DNS_INFO buffer laid out as Active Directory lays it out: the fixed part, then the
    /// strings and the SID, each 8-aligned.
    fn upn_dns(upn: &str, dns: &str, sam: Option<(&str, &Sid)>) -> Vec<u8> {
        let fixed = if sam.is_some() { 24 } else { 16 };
        let mut tail = Vec::new();
        let mut place = |bytes: Vec<u8>| {
            while (fixed + tail.len()) % 8 != 0 {
                tail.push(0);
            }
            let at = fixed + tail.len();
            tail.extend_from_slice(&bytes);
            (bytes.len() as u16, at as u16)
        };
        let (ul, uo) = place(utf16le(upn));
        let (dl, d_o) = place(utf16le(dns));
        let mut head = Vec::new();
        for v in [ul, uo, dl, d_o] {
            head.extend_from_slice(&v.to_le_bytes());
        }
        let flags = if sam.is_some() {
            UPN_FLAG_SAM_NAME_AND_SID
        } else {
            0
        };
        head.extend_from_slice(&flags.to_le_bytes());
        if let Some((name, sid)) = sam {
            let mut s = Vec::new();
            sid.encode(&mut s);
            let (nl, no) = place(utf16le(name));
            let (sl, so) = place(s);
            for v in [nl, no, sl, so] {
                head.extend_from_slice(&v.to_le_bytes());
            }
        }
        head.resize(fixed, 0);
        head.extend_from_slice(&tail);
        head
    }

    /// A PAC container of `buffers` (no signatures: [`domain_logon`] does not check them).
    fn pac_of(buffers: &[(u32, Vec<u8>)]) -> Pac {
        let mut dir = Vec::new();
        let mut data = Vec::new();
        let base = 8 + 16 * buffers.len();
        for (ty, b) in buffers {
            dir.extend_from_slice(&ty.to_le_bytes());
            dir.extend_from_slice(&(b.len() as u32).to_le_bytes());
            dir.extend_from_slice(&((base + data.len()) as u64).to_le_bytes());
            data.extend_from_slice(b);
            data.resize(data.len().div_ceil(8) * 8, 0);
        }
        let mut raw = (buffers.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(&[0; 4]);
        raw.extend_from_slice(&dir);
        raw.extend_from_slice(&data);
        Pac::parse(&raw).unwrap()
    }

    fn samba_logon_info() -> Vec<u8> {
        let hex = include_str!("testdata/samba-logon-info-pac.hex");
        let pac = Pac::parse(&crate::unhex(hex.trim())).unwrap();
        pac.buffer(buffer::LOGON_INFO).unwrap().to_vec()
    }

    #[test]
    fn a_pac_with_logon_info_names_the_domain_user_and_their_token() {
        let user: Sid = "S-1-5-21-1111111111-2222222222-3333333333-1102"
            .parse()
            .unwrap();
        let pac = pac_of(&[
            (buffer::LOGON_INFO, samba_logon_info()),
            (
                buffer::UPN_DNS_INFO,
                upn_dns("rsalice@ad.rs.test", "AD.RS.TEST", Some(("rsalice", &user))),
            ),
        ]);
        let d = domain_logon(&pac).unwrap().unwrap();
        assert_eq!((d.domain.as_str(), d.name.as_str()), ("RSAD", "rsalice"));
        assert_eq!(d.upn.as_deref(), Some("rsalice@ad.rs.test"));
        assert_eq!(d.dns_domain.as_deref(), Some("AD.RS.TEST"));
        assert_eq!(d.sids[0], user);
        assert_eq!(d.sids.len(), 5);
        assert_eq!(
            d.domain_sid.to_string(),
            "S-1-5-21-1111111111-2222222222-3333333333"
        );
        // An MIT KDC's PAC has no logon info: no domain user.
        assert_eq!(
            domain_logon(&pac_of(&[(buffer::CLIENT_INFO, vec![0; 10])])).unwrap(),
            None
        );
    }

    #[test]
    fn a_pac_whose_upn_info_names_another_account_or_sid_is_refused() {
        let other: Sid = "S-1-5-21-1111111111-2222222222-3333333333-500"
            .parse()
            .unwrap();
        let user: Sid = "S-1-5-21-1111111111-2222222222-3333333333-1102"
            .parse()
            .unwrap();
        for (name, sid) in [("rsalice", &other), ("administrator", &user)] {
            let pac = pac_of(&[
                (buffer::LOGON_INFO, samba_logon_info()),
                (
                    buffer::UPN_DNS_INFO,
                    upn_dns("x@ad.rs.test", "AD.RS.TEST", Some((name, sid))),
                ),
            ]);
            let e = domain_logon(&pac).unwrap_err();
            assert!(matches!(e, AuthError::Kerberos(_)), "{e:?}");
        }
    }

    #[test]
    fn upn_and_dns_info_with_the_account_name_and_sid_decodes() {
        let sid: Sid = Sid::from_parts(5, &[21, 1, 2, 3, 1102]).unwrap();
        let b = upn_dns("rsalice@ad.rs.test", "AD.RS.TEST", Some(("rsalice", &sid)));
        let u = UpnDnsInfo::decode(&b).unwrap();
        assert_eq!(u.upn, "rsalice@ad.rs.test");
        assert_eq!(u.dns_domain, "AD.RS.TEST");
        assert_eq!(u.sam_name_and_sid, Some(("rsalice".to_string(), sid)));
        let plain = UpnDnsInfo::decode(&upn_dns("bob@x.test", "X.TEST", None)).unwrap();
        assert_eq!(plain.sam_name_and_sid, None);
        assert_eq!(plain.upn, "bob@x.test");
    }

    #[test]
    fn upn_and_dns_info_cut_short_or_pointing_outside_is_an_error_not_a_panic() {
        let sid: Sid = Sid::from_parts(5, &[21, 1, 2, 3, 1102]).unwrap();
        let b = upn_dns("rsalice@ad.rs.test", "AD.RS.TEST", Some(("rsalice", &sid)));
        for n in 0..b.len() {
            assert!(UpnDnsInfo::decode(&b[..n]).is_err(), "cut at {n}");
        }
        let mut far = b.clone();
        far[2..4].copy_from_slice(&0xfff0u16.to_le_bytes());
        assert!(UpnDnsInfo::decode(&far).is_err());
        let mut odd = b;
        odd[0] = 3;
        assert!(UpnDnsInfo::decode(&odd).is_err());
    }
}
