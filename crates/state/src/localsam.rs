//! The server's own account domain: the SID it answers with for its accounts (`SERVER\name`)
//! and how the accounts' RIDs meet Unix ids.
//!
//! ringshare keeps no SAM database. Its users live in an smbpasswd file, and Samba's
//! `passdb backend = smbpasswd` gives those accounts *algorithmic* RIDs (`algorithmic rid
//! base` 1000): user RID = uid × 2 + 1000, group RID = gid × 2 + 1001 (measured with Samba
//! 4.22.6: uid 1012 is RID 3024). ringshare does the same arithmetic, in both directions and
//! for every id, so a SID the Windows object picker returns (S-1-5-21-<server>-RID, from the
//! `samr` pipe) names the same uid or gid in a security descriptor as S-1-22-1-uid /
//! S-1-22-2-gid do ([`crate::domain::SidMap`] turns it into the Unix SID before the POSIX
//! mapping). RIDs below the base are Windows' well-known ones (513, `None`) and map to no id.
//! (Samba's default `tdbsam` hands out RIDs from a counter instead: 1000, 1001, ...)

use ringshare_wire::security::Sid;

use crate::sidcache::Xid;

/// Samba's `algorithmic rid base` default.
pub const RID_BASE: u32 = 1000;

/// The SID this server's account domain answers with: derived from the NetBIOS name
/// (S-1-5-21-a-b-c), the same on every start.
pub fn account_domain_sid(netbios_name: &str) -> Sid {
    // FNV-1a over the upper-case name, three rounds with different seeds.
    let mut parts = [0u32; 3];
    for (i, p) in parts.iter_mut().enumerate() {
        let mut h: u32 = 0x811c_9dc5 ^ (i as u32).wrapping_mul(0x0100_0193);
        for b in netbios_name.to_uppercase().bytes() {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        *p = h;
    }
    let subs = [21, parts[0], parts[1], parts[2]];
    Sid::from_parts(5, &subs).unwrap_or_else(Sid::null)
}

/// The RID of uid `uid`, if it has one (uids up to 2^31 − 501).
pub fn user_rid(uid: u32) -> Option<u32> {
    uid.checked_mul(2)?.checked_add(RID_BASE)
}

/// The RID of gid `gid`, if it has one.
pub fn group_rid(gid: u32) -> Option<u32> {
    gid.checked_mul(2)?.checked_add(RID_BASE + 1)
}

/// The Unix id a RID of the account domain stands for: even RIDs from the base are users,
/// odd ones groups; the well-known RIDs below the base none.
pub fn id_of_rid(rid: u32) -> Option<Xid> {
    let off = rid.checked_sub(RID_BASE)?;
    Some(if off % 2 == 0 {
        Xid::Uid(off / 2)
    } else {
        Xid::Gid(off / 2)
    })
}

/// The RID of `sid` when it is a SID of an account in domain `domain`.
pub fn rid_in(domain: &Sid, sid: &Sid) -> Option<u32> {
    let (rid, rest) = sid.sub_authorities.split_last()?;
    let same = sid.revision == domain.revision
        && sid.authority == domain.authority
        && rest == domain.sub_authorities.as_slice();
    same.then_some(*rid)
}

/// The Unix id `sid` stands for when it is a SID of the account domain `domain`.
pub fn id_of(domain: &Sid, sid: &Sid) -> Option<Xid> {
    id_of_rid(rid_in(domain, sid)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rids_are_samba_algorithmic_ones_and_map_back_to_the_same_ids() {
        assert_eq!(user_rid(1012), Some(3024));
        assert_eq!(group_rid(1002), Some(3005));
        assert_eq!(id_of_rid(3024), Some(Xid::Uid(1012)));
        assert_eq!(id_of_rid(3005), Some(Xid::Gid(1002)));
        assert_eq!(id_of_rid(513), None);
        assert_eq!(user_rid(u32::MAX / 2 + 1), None);
        let d = account_domain_sid("RS");
        let mut s = d.clone();
        s.sub_authorities.push(3024);
        assert_eq!(id_of(&d, &s), Some(Xid::Uid(1012)));
        assert_eq!(id_of(&d, &d), None, "the domain itself is no account");
        let other = account_domain_sid("OTHER");
        assert_eq!(id_of(&other, &s), None);
    }
}
