//! Security descriptors, [MS-DTYP] 2.4: SIDs (2.4.2), ACEs (2.4.4), ACLs
//! (2.4.5) and self-relative SECURITY_DESCRIPTORs (2.4.6), as carried by
//! QUERY_INFO / SET_INFO with InfoType SMB2_0_INFO_SECURITY and the SMB2
//! CREATE `SecD` context.
//!
//! Decoding is bounded by the buffer: every offset is checked against it,
//! every count against the bytes that could hold it, every ACE against its
//! ACL. Encoding emits only the parts a [`SecurityInformation`] selects.
//! (What a client sees of a file's POSIX permissions is mapped in the
//! ringshare-acl crate.)

use core::fmt;
use core::str::FromStr;

use crate::codec::{to_u16, to_u32, Reader, WriteExt};
use crate::consts::{AccessMask, SecurityInformation};
use crate::WireError;

/// A SID has at most this many sub-authorities ([MS-DTYP] 2.4.2.2).
pub const SID_MAX_SUB_AUTHORITIES: usize = 15;

/// A security identifier ([MS-DTYP] 2.4.2.2). Binary form: Revision (1),
/// SubAuthorityCount, IdentifierAuthority (6 bytes, big-endian), then
/// SubAuthorityCount little-endian u32s.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sid {
    /// Always 1 in a valid SID.
    pub revision: u8,
    /// The 48-bit identifier authority, big-endian.
    pub authority: [u8; 6],
    /// At most [`SID_MAX_SUB_AUTHORITIES`]; [`Sid::encode`] writes only the
    /// first 15 if there are more.
    pub sub_authorities: Vec<u32>,
}

impl Sid {
    pub const REVISION: u8 = 1;

    /// A SID from a 48-bit authority and sub-authorities, or `None` if the
    /// authority does not fit in 48 bits or there are more than 15
    /// sub-authorities.
    pub fn from_parts(authority: u64, sub_authorities: &[u32]) -> Option<Sid> {
        if authority >> 48 != 0 || sub_authorities.len() > SID_MAX_SUB_AUTHORITIES {
            return None;
        }
        let b = authority.to_be_bytes();
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[2..]);
        Some(Sid {
            revision: Self::REVISION,
            authority: a,
            sub_authorities: sub_authorities.to_vec(),
        })
    }

    /// Well-known SIDs are built from constants that always fit.
    fn well_known(authority: u8, subs: &[u32]) -> Sid {
        Sid {
            revision: Self::REVISION,
            authority: [0, 0, 0, 0, 0, authority],
            sub_authorities: subs.to_vec(),
        }
    }

    /// S-1-0-0, the NULL SID.
    pub fn null() -> Sid {
        Self::well_known(0, &[0])
    }
    /// S-1-1-0, Everyone (World).
    pub fn everyone() -> Sid {
        Self::well_known(1, &[0])
    }
    /// S-1-3-0, CREATOR OWNER (placeholder in inheritable ACEs).
    pub fn creator_owner() -> Sid {
        Self::well_known(3, &[0])
    }
    /// S-1-3-1, CREATOR GROUP.
    pub fn creator_group() -> Sid {
        Self::well_known(3, &[1])
    }
    /// S-1-5-7, NT AUTHORITY\ANONYMOUS LOGON.
    pub fn anonymous() -> Sid {
        Self::well_known(5, &[7])
    }
    /// S-1-5-11, NT AUTHORITY\Authenticated Users.
    pub fn authenticated_users() -> Sid {
        Self::well_known(5, &[11])
    }
    /// S-1-5-18, NT AUTHORITY\SYSTEM.
    pub fn local_system() -> Sid {
        Self::well_known(5, &[18])
    }
    /// S-1-5-32-544, BUILTIN\Administrators.
    pub fn builtin_administrators() -> Sid {
        Self::well_known(5, &[32, 544])
    }
    /// S-1-5-32-545, BUILTIN\Users.
    pub fn builtin_users() -> Sid {
        Self::well_known(5, &[32, 545])
    }
    /// S-1-22-1-`uid`: a Unix user, as Samba maps unmapped uids.
    pub fn unix_user(uid: u32) -> Sid {
        Self::well_known(22, &[1, uid])
    }
    /// S-1-22-2-`gid`: a Unix group, as Samba maps unmapped gids.
    pub fn unix_group(gid: u32) -> Sid {
        Self::well_known(22, &[2, gid])
    }

    /// The uid if this is an S-1-22-1-uid SID.
    pub fn unix_uid(&self) -> Option<u32> {
        match (self.authority_value(), self.sub_authorities.as_slice()) {
            (22, [1, uid]) => Some(*uid),
            _ => None,
        }
    }

    /// The gid if this is an S-1-22-2-gid SID.
    pub fn unix_gid(&self) -> Option<u32> {
        match (self.authority_value(), self.sub_authorities.as_slice()) {
            (22, [2, gid]) => Some(*gid),
            _ => None,
        }
    }

    /// The identifier authority as a number.
    pub fn authority_value(&self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.authority);
        u64::from_be_bytes(b)
    }

    /// The last sub-authority (the RID of a domain account), if any.
    pub fn rid(&self) -> Option<u32> {
        self.sub_authorities.last().copied()
    }

    fn encoded_count(&self) -> usize {
        self.sub_authorities.len().min(SID_MAX_SUB_AUTHORITIES)
    }

    /// Bytes [`Sid::encode`] writes: 8 + 4 per sub-authority.
    pub fn encoded_len(&self) -> usize {
        8 + 4 * self.encoded_count()
    }

    pub fn encode(&self, out: &mut Vec<u8>) {
        let n = self.encoded_count();
        out.put_u8(self.revision);
        out.put_u8(n as u8);
        out.put_bytes(&self.authority);
        for s in &self.sub_authorities[..n] {
            out.put_u32(*s);
        }
    }

    /// Read a SID; Revision must be 1 and SubAuthorityCount at most 15.
    pub fn read(r: &mut Reader<'_>) -> Result<Sid, WireError> {
        let revision = r.u8()?;
        if revision != Self::REVISION {
            return Err(WireError::Invalid("SID Revision"));
        }
        let count = usize::from(r.u8()?);
        if count > SID_MAX_SUB_AUTHORITIES {
            return Err(WireError::Invalid("SID SubAuthorityCount"));
        }
        let authority = r.array()?;
        let mut sub_authorities = Vec::with_capacity(count);
        for _ in 0..count {
            sub_authorities.push(r.u32()?);
        }
        Ok(Sid {
            revision,
            authority,
            sub_authorities,
        })
    }

    /// Decode a SID at the start of `buf` (trailing bytes ignored).
    pub fn decode(buf: &[u8]) -> Result<Sid, WireError> {
        Self::read(&mut Reader::new(buf))
    }
}

/// The string form of [MS-DTYP] 2.4.2.1: `S-1-5-21-...`; an authority of
/// 2^32 or more is written as 12 hex digits (`S-1-0x123456789ABC-...`).
impl fmt::Display for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "S-{}-", self.revision)?;
        let a = self.authority_value();
        if a >> 32 == 0 {
            write!(f, "{a}")?;
        } else {
            write!(f, "0x{a:012X}")?;
        }
        for s in &self.sub_authorities {
            write!(f, "-{s}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Sid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Parse `S-1-<authority>-<sub>...` (case-insensitive `S`, decimal or `0x`
/// hex authority, at most 15 decimal u32 sub-authorities, revision 1).
impl FromStr for Sid {
    type Err = WireError;

    fn from_str(s: &str) -> Result<Sid, WireError> {
        const BAD: WireError = WireError::Invalid("SID string");
        let mut parts = s.split('-');
        if !matches!(parts.next(), Some("S" | "s")) || parts.next() != Some("1") {
            return Err(BAD);
        }
        let auth = parts.next().ok_or(BAD)?;
        let authority = match auth.strip_prefix("0x").or_else(|| auth.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| BAD)?,
            None => auth.parse::<u64>().map_err(|_| BAD)?,
        };
        let mut subs = Vec::new();
        for p in parts {
            if subs.len() == SID_MAX_SUB_AUTHORITIES
                || p.is_empty()
                || !p.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(BAD);
            }
            subs.push(p.parse::<u32>().map_err(|_| BAD)?);
        }
        Sid::from_parts(authority, &subs).ok_or(BAD)
    }
}

/// ACE type ([MS-DTYP] 2.4.4.1). Unknown values round-trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct AceType(pub u8);

impl AceType {
    pub const ACCESS_ALLOWED: AceType = AceType(0x00);
    pub const ACCESS_DENIED: AceType = AceType(0x01);
    pub const SYSTEM_AUDIT: AceType = AceType(0x02);
    pub const SYSTEM_ALARM: AceType = AceType(0x03);
    pub const ACCESS_ALLOWED_COMPOUND: AceType = AceType(0x04);
    pub const ACCESS_ALLOWED_OBJECT: AceType = AceType(0x05);
    pub const ACCESS_DENIED_OBJECT: AceType = AceType(0x06);
    pub const SYSTEM_AUDIT_OBJECT: AceType = AceType(0x07);
    pub const SYSTEM_ALARM_OBJECT: AceType = AceType(0x08);
    pub const ACCESS_ALLOWED_CALLBACK: AceType = AceType(0x09);
    pub const ACCESS_DENIED_CALLBACK: AceType = AceType(0x0A);
    pub const ACCESS_ALLOWED_CALLBACK_OBJECT: AceType = AceType(0x0B);
    pub const ACCESS_DENIED_CALLBACK_OBJECT: AceType = AceType(0x0C);
    pub const SYSTEM_AUDIT_CALLBACK: AceType = AceType(0x0D);
    pub const SYSTEM_ALARM_CALLBACK: AceType = AceType(0x0E);
    pub const SYSTEM_AUDIT_CALLBACK_OBJECT: AceType = AceType(0x0F);
    pub const SYSTEM_ALARM_CALLBACK_OBJECT: AceType = AceType(0x10);
    pub const SYSTEM_MANDATORY_LABEL: AceType = AceType(0x11);
    pub const SYSTEM_RESOURCE_ATTRIBUTE: AceType = AceType(0x12);
    pub const SYSTEM_SCOPED_POLICY_ID: AceType = AceType(0x13);

    /// Types whose body is Mask, Sid, then optional application data.
    pub fn has_mask_and_sid(self) -> bool {
        matches!(self.0, 0x00..=0x03 | 0x09 | 0x0A | 0x0D | 0x0E | 0x11..=0x13)
    }
}

impl fmt::Debug for AceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = match *self {
            AceType::ACCESS_ALLOWED => "ACCESS_ALLOWED",
            AceType::ACCESS_DENIED => "ACCESS_DENIED",
            AceType::SYSTEM_AUDIT => "SYSTEM_AUDIT",
            AceType::SYSTEM_MANDATORY_LABEL => "SYSTEM_MANDATORY_LABEL",
            _ => return write!(f, "AceType({:#x})", self.0),
        };
        f.write_str(n)
    }
}

// AceFlags ([MS-DTYP] 2.4.4.1).
/// Inherited by non-container child objects.
pub const OBJECT_INHERIT_ACE: u8 = 0x01;
/// Inherited by container (directory) children.
pub const CONTAINER_INHERIT_ACE: u8 = 0x02;
/// Inheritance stops at the immediate children.
pub const NO_PROPAGATE_INHERIT_ACE: u8 = 0x04;
/// Applies only to children, not to this object.
pub const INHERIT_ONLY_ACE: u8 = 0x08;
/// The ACE was inherited.
pub const INHERITED_ACE: u8 = 0x10;
/// Audit successful access (SACL).
pub const SUCCESSFUL_ACCESS_ACE_FLAG: u8 = 0x40;
/// Audit failed access (SACL).
pub const FAILED_ACCESS_ACE_FLAG: u8 = 0x80;

/// [MS-DTYP] 2.4.3 / [MS-SMB2] 2.2.13.1.1: generic read for files:
/// READ_CONTROL | SYNCHRONIZE | FILE_READ_DATA | FILE_READ_ATTRIBUTES | FILE_READ_EA.
pub const FILE_GENERIC_READ: AccessMask = AccessMask(0x0012_0089);
/// READ_CONTROL | SYNCHRONIZE | FILE_WRITE_DATA | FILE_APPEND_DATA |
/// FILE_WRITE_ATTRIBUTES | FILE_WRITE_EA.
pub const FILE_GENERIC_WRITE: AccessMask = AccessMask(0x0012_0116);
/// READ_CONTROL | SYNCHRONIZE | FILE_EXECUTE | FILE_READ_ATTRIBUTES.
pub const FILE_GENERIC_EXECUTE: AccessMask = AccessMask(0x0012_00A0);

/// The body of an ACE.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AceBody {
    /// Types laid out as Mask, Sid (allowed, denied, audit, alarm, their
    /// callback forms, mandatory label, resource attribute, scoped policy).
    /// `trailer` holds whatever follows the SID inside AceSize (callback
    /// application data, attribute data or padding), kept as is.
    MaskSid {
        mask: AccessMask,
        sid: Sid,
        trailer: Vec<u8>,
    },
    /// Any other type (object ACEs, compound): the bytes after the header.
    Raw(Vec<u8>),
}

/// An access control entry ([MS-DTYP] 2.4.4): header (AceType, AceFlags,
/// AceSize) then the body.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ace {
    pub ace_type: AceType,
    /// `*_ACE` flags (OBJECT_INHERIT_ACE ...).
    pub flags: u8,
    pub body: AceBody,
}

impl Ace {
    /// Largest AceSize a u16 can hold that is a multiple of 4.
    const SIZE_MAX: usize = 0xFFFC;

    /// An ACCESS_ALLOWED ACE.
    pub fn allow(sid: Sid, mask: AccessMask, flags: u8) -> Ace {
        Ace {
            ace_type: AceType::ACCESS_ALLOWED,
            flags,
            body: AceBody::MaskSid {
                mask,
                sid,
                trailer: Vec::new(),
            },
        }
    }

    /// An ACCESS_DENIED ACE.
    pub fn deny(sid: Sid, mask: AccessMask, flags: u8) -> Ace {
        Ace {
            ace_type: AceType::ACCESS_DENIED,
            ..Ace::allow(sid, mask, flags)
        }
    }

    /// The access mask, for mask+SID types.
    pub fn mask(&self) -> Option<AccessMask> {
        match &self.body {
            AceBody::MaskSid { mask, .. } => Some(*mask),
            AceBody::Raw(_) => None,
        }
    }

    /// The trustee SID, for mask+SID types.
    pub fn sid(&self) -> Option<&Sid> {
        match &self.body {
            AceBody::MaskSid { sid, .. } => Some(sid),
            AceBody::Raw(_) => None,
        }
    }

    fn body_len(&self) -> usize {
        match &self.body {
            AceBody::MaskSid { sid, trailer, .. } => 4 + sid.encoded_len() + trailer.len(),
            AceBody::Raw(b) => b.len(),
        }
    }

    /// AceSize: header + body, rounded up to a multiple of 4.
    pub fn encoded_len(&self) -> usize {
        (4 + self.body_len()).div_ceil(4) * 4
    }

    /// Append the ACE. Fails if it would be larger than AceSize can say.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        let size = self.encoded_len();
        if size > Self::SIZE_MAX {
            return Err(WireError::Invalid("AceSize"));
        }
        let start = out.len();
        out.put_u8(self.ace_type.0);
        out.put_u8(self.flags);
        out.put_u16(size as u16);
        match &self.body {
            AceBody::MaskSid { mask, sid, trailer } => {
                out.put_u32(mask.0);
                sid.encode(out);
                out.put_bytes(trailer);
            }
            AceBody::Raw(b) => out.put_bytes(b),
        }
        out.pad_to(4, start);
        Ok(())
    }

    /// Read one ACE. AceSize must be at least the 4-byte header, a multiple
    /// of 4, and inside `r`; a mask+SID body must fit inside AceSize.
    pub fn read(r: &mut Reader<'_>) -> Result<Ace, WireError> {
        let ace_type = AceType(r.u8()?);
        let flags = r.u8()?;
        let size = usize::from(r.u16()?);
        if size < 4 || size % 4 != 0 {
            return Err(WireError::Invalid("AceSize"));
        }
        let mut body = r.sub(size - 4)?;
        let body = if ace_type.has_mask_and_sid() {
            let mask = AccessMask(body.u32()?);
            let sid = Sid::read(&mut body)?;
            AceBody::MaskSid {
                mask,
                sid,
                trailer: body.rest().to_vec(),
            }
        } else {
            AceBody::Raw(body.rest().to_vec())
        };
        Ok(Ace {
            ace_type,
            flags,
            body,
        })
    }
}

/// An access control list ([MS-DTYP] 2.4.5): AclRevision, Sbz1, AclSize,
/// AceCount, Sbz2, then the ACEs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Acl {
    /// AclRevision: [`Acl::REVISION`] (2), 3 (`ACL_REVISION3`, what
    /// `smbcacls` sends) or [`Acl::REVISION_DS`] (4, object ACEs), as
    /// Windows (`RtlValidAcl`) and Samba accept; encoded as given.
    pub revision: u8,
    pub aces: Vec<Ace>,
}

impl Default for Acl {
    fn default() -> Self {
        Acl {
            revision: Self::REVISION,
            aces: Vec::new(),
        }
    }
}

impl Acl {
    pub const REVISION: u8 = 2;
    pub const REVISION_DS: u8 = 4;
    /// The ACL header.
    pub const HEADER_LEN: usize = 8;

    /// A revision-2 ACL with these ACEs.
    pub fn new(aces: Vec<Ace>) -> Acl {
        Acl {
            revision: Self::REVISION,
            aces,
        }
    }

    /// AclSize.
    pub fn encoded_len(&self) -> usize {
        Self::HEADER_LEN + self.aces.iter().map(Ace::encoded_len).sum::<usize>()
    }

    /// Append the ACL. Fails if AclSize or AceCount would not fit in 16 bits.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        let size = self.encoded_len();
        if size > usize::from(u16::MAX) {
            return Err(WireError::Invalid("AclSize"));
        }
        out.put_u8(self.revision);
        out.put_u8(0);
        out.put_u16(to_u16(size));
        out.put_u16(to_u16(self.aces.len()));
        out.put_u16(0);
        for a in &self.aces {
            a.encode(out)?;
        }
        Ok(())
    }

    /// Decode an ACL at the start of `buf`. AclRevision must be 2 to 4
    /// (kept in [`Acl::revision`]); AclSize must cover the header and lie
    /// inside `buf`; AceCount may not exceed what AclSize can hold (4 bytes
    /// per ACE at least); every ACE must lie inside AclSize.
    pub fn decode(buf: &[u8]) -> Result<Acl, WireError> {
        let mut r = Reader::new(buf);
        let revision = r.u8()?;
        if !(Self::REVISION..=Self::REVISION_DS).contains(&revision) {
            return Err(WireError::Invalid("AclRevision"));
        }
        r.skip(1)?;
        let size = usize::from(r.u16()?);
        let count = usize::from(r.u16()?);
        r.skip(2)?;
        if size < Self::HEADER_LEN {
            return Err(WireError::Invalid("AclSize"));
        }
        let mut body = r
            .sub(size - Self::HEADER_LEN)
            .map_err(|_| WireError::BadOffset("AclSize"))?;
        if count > body.remaining() / 4 {
            return Err(WireError::Invalid("AceCount"));
        }
        let mut aces = Vec::with_capacity(count);
        for _ in 0..count {
            aces.push(Ace::read(&mut body)?);
        }
        Ok(Acl { revision, aces })
    }
}

// SECURITY_DESCRIPTOR Control bits ([MS-DTYP] 2.4.6).
pub const SE_OWNER_DEFAULTED: u16 = 0x0001;
pub const SE_GROUP_DEFAULTED: u16 = 0x0002;
pub const SE_DACL_PRESENT: u16 = 0x0004;
pub const SE_DACL_DEFAULTED: u16 = 0x0008;
pub const SE_SACL_PRESENT: u16 = 0x0010;
pub const SE_SACL_DEFAULTED: u16 = 0x0020;
pub const SE_DACL_TRUSTED: u16 = 0x0040;
pub const SE_SERVER_SECURITY: u16 = 0x0080;
pub const SE_DACL_AUTO_INHERIT_REQ: u16 = 0x0100;
pub const SE_SACL_AUTO_INHERIT_REQ: u16 = 0x0200;
pub const SE_DACL_AUTO_INHERITED: u16 = 0x0400;
pub const SE_SACL_AUTO_INHERITED: u16 = 0x0800;
pub const SE_DACL_PROTECTED: u16 = 0x1000;
pub const SE_SACL_PROTECTED: u16 = 0x2000;
pub const SE_RM_CONTROL_VALID: u16 = 0x4000;
pub const SE_SELF_RELATIVE: u16 = 0x8000;

const DACL_BITS: u16 = SE_DACL_PRESENT
    | SE_DACL_DEFAULTED
    | SE_DACL_AUTO_INHERIT_REQ
    | SE_DACL_AUTO_INHERITED
    | SE_DACL_PROTECTED;
const SACL_BITS: u16 = SE_SACL_PRESENT
    | SE_SACL_DEFAULTED
    | SE_SACL_AUTO_INHERIT_REQ
    | SE_SACL_AUTO_INHERITED
    | SE_SACL_PROTECTED;

/// A security descriptor ([MS-DTYP] 2.4.6), encoded in self-relative form:
/// Revision (1), Sbz1, Control, OffsetOwner, OffsetGroup, OffsetSacl,
/// OffsetDacl (offsets from the descriptor start, 0 = absent), then the
/// parts.
///
/// `dacl == None` with `SE_DACL_PRESENT` in `control` is a NULL DACL (grants
/// everyone everything); without the bit, there is no DACL. Likewise for the
/// SACL.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecurityDescriptor {
    /// `SE_*` control bits. [`Self::encode`] always sets SE_SELF_RELATIVE and
    /// sets SE_DACL_PRESENT / SE_SACL_PRESENT when the ACL is `Some`.
    pub control: u16,
    /// Sbz1 (resource manager control bits when SE_RM_CONTROL_VALID).
    pub rm_control: u8,
    pub owner: Option<Sid>,
    pub group: Option<Sid>,
    pub sacl: Option<Acl>,
    pub dacl: Option<Acl>,
}

impl SecurityDescriptor {
    pub const REVISION: u8 = 1;
    /// The fixed header of a self-relative descriptor.
    pub const HEADER_LEN: usize = 20;

    /// Owner, group, DACL and SACL: everything.
    pub fn all_parts() -> SecurityInformation {
        SecurityInformation::OWNER
            | SecurityInformation::GROUP
            | SecurityInformation::DACL
            | SecurityInformation::SACL
    }

    /// True for a present but NULL DACL.
    pub fn has_null_dacl(&self) -> bool {
        self.control & SE_DACL_PRESENT != 0 && self.dacl.is_none()
    }

    /// Append the self-relative form holding only the parts `info` selects
    /// (OWNER, GROUP, DACL, SACL; other bits are ignored). Control bits of
    /// parts not selected are cleared. Parts are laid out owner, group, SACL,
    /// DACL. Fails only if an ACL is too large for its 16-bit size.
    pub fn encode(&self, info: SecurityInformation, out: &mut Vec<u8>) -> Result<(), WireError> {
        let base = out.len();
        let mut control = self.control | SE_SELF_RELATIVE;
        let want_owner = info.contains(SecurityInformation::OWNER);
        let want_group = info.contains(SecurityInformation::GROUP);
        let want_dacl = info.contains(SecurityInformation::DACL);
        let want_sacl = info.contains(SecurityInformation::SACL);
        if !want_owner {
            control &= !SE_OWNER_DEFAULTED;
        }
        if !want_group {
            control &= !SE_GROUP_DEFAULTED;
        }
        if !want_dacl {
            control &= !DACL_BITS;
        } else if self.dacl.is_some() {
            control |= SE_DACL_PRESENT;
        }
        if !want_sacl {
            control &= !SACL_BITS;
        } else if self.sacl.is_some() {
            control |= SE_SACL_PRESENT;
        }
        out.put_u8(Self::REVISION);
        out.put_u8(self.rm_control);
        out.put_u16(control);
        out.put_zeros(16); // four offsets, patched below
        let patch = |out: &mut Vec<u8>, field: usize| {
            let off = to_u32(out.len() - base);
            out.patch_u32(base + 4 + 4 * field, off);
        };
        if let (true, Some(sid)) = (want_owner, &self.owner) {
            patch(out, 0);
            sid.encode(out);
        }
        if let (true, Some(sid)) = (want_group, &self.group) {
            patch(out, 1);
            sid.encode(out);
        }
        if let (true, Some(acl)) = (want_sacl, &self.sacl) {
            patch(out, 2);
            acl.encode(out)?;
        }
        if let (true, Some(acl)) = (want_dacl, &self.dacl) {
            patch(out, 3);
            acl.encode(out)?;
        }
        Ok(())
    }

    /// The self-relative form of the selected parts as a new buffer (its
    /// length is what a QUERY_INFO caller compares with OutputBufferLength).
    pub fn to_bytes(&self, info: SecurityInformation) -> Result<Vec<u8>, WireError> {
        let mut v = Vec::new();
        self.encode(info, &mut v)?;
        Ok(v)
    }

    /// Decode a self-relative descriptor at the start of `buf`. Revision
    /// must be 1 and SE_SELF_RELATIVE set; every non-zero offset must point
    /// past the header and inside `buf`, and what it points at must decode
    /// within `buf`.
    pub fn decode(buf: &[u8]) -> Result<SecurityDescriptor, WireError> {
        let mut r = Reader::new(buf);
        if r.u8()? != Self::REVISION {
            return Err(WireError::Invalid("SD Revision"));
        }
        let rm_control = r.u8()?;
        let control = r.u16()?;
        if control & SE_SELF_RELATIVE == 0 {
            return Err(WireError::Invalid("SD Control (not self-relative)"));
        }
        let off_owner = r.u32()? as usize;
        let off_group = r.u32()? as usize;
        let off_sacl = r.u32()? as usize;
        let off_dacl = r.u32()? as usize;
        let part = |off: usize, field: &'static str| -> Result<Option<&[u8]>, WireError> {
            if off == 0 {
                return Ok(None);
            }
            if off < Self::HEADER_LEN {
                return Err(WireError::BadOffset(field));
            }
            buf.get(off..)
                .filter(|p| !p.is_empty())
                .map(Some)
                .ok_or(WireError::BadOffset(field))
        };
        let owner = part(off_owner, "OffsetOwner")?
            .map(Sid::decode)
            .transpose()?;
        let group = part(off_group, "OffsetGroup")?
            .map(Sid::decode)
            .transpose()?;
        let sacl = if control & SE_SACL_PRESENT != 0 {
            part(off_sacl, "OffsetSacl")?.map(Acl::decode).transpose()?
        } else {
            None
        };
        let dacl = if control & SE_DACL_PRESENT != 0 {
            part(off_dacl, "OffsetDacl")?.map(Acl::decode).transpose()?
        } else {
            None
        };
        Ok(SecurityDescriptor {
            control,
            rm_control,
            owner,
            group,
            sacl,
            dacl,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(s: &str) -> Sid {
        s.parse().unwrap()
    }

    /// A descriptor to encode and decode: owner S-1-22-1-`uid`, group
    /// S-1-22-2-`gid`, allow ACEs for them and Everyone from the mode bits
    /// (the mapping a client sees lives in ringshare-acl).
    fn sd_from_posix(uid: u32, gid: u32, mode: u32, is_dir: bool) -> SecurityDescriptor {
        let rights = |bits: u32| {
            let mut m = AccessMask(0);
            if bits & 4 != 0 {
                m |= FILE_GENERIC_READ;
            }
            if bits & 2 != 0 {
                m |= FILE_GENERIC_WRITE;
            }
            if bits & 1 != 0 {
                m |= FILE_GENERIC_EXECUTE;
            }
            m
        };
        let inherit = if is_dir {
            OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
        } else {
            0
        };
        let aces = vec![
            Ace::allow(Sid::unix_user(uid), rights((mode >> 6) & 7), inherit),
            Ace::allow(Sid::unix_group(gid), rights((mode >> 3) & 7), inherit),
            Ace::allow(Sid::everyone(), rights(mode & 7), inherit),
        ];
        SecurityDescriptor {
            control: SE_SELF_RELATIVE | SE_DACL_PRESENT,
            rm_control: 0,
            owner: Some(Sid::unix_user(uid)),
            group: Some(Sid::unix_group(gid)),
            sacl: None,
            dacl: Some(Acl::new(aces)),
        }
    }

    #[test]
    fn decoders_do_not_panic_on_mutated_or_truncated_descriptors() {
        let mut sd = sd_from_posix(1000, 100, 0o755, true);
        sd.sacl = Some(Acl::new(vec![Ace {
            ace_type: AceType::SYSTEM_AUDIT,
            flags: FAILED_ACCESS_ACE_FLAG,
            body: AceBody::MaskSid {
                mask: AccessMask(1),
                sid: Sid::everyone(),
                trailer: Vec::new(),
            },
        }]));
        let good = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        assert_eq!(SecurityDescriptor::decode(&good).unwrap().sacl, sd.sacl);
        for i in 0..good.len() {
            for v in [0u8, 1, 2, 4, 0x14, 0x7F, 0x80, 0xFF] {
                let mut m = good.clone();
                m[i] = v;
                let _ = SecurityDescriptor::decode(&m);
                let _ = Acl::decode(&m[i..]);
                let _ = Sid::decode(&m[i..]);
            }
            let _ = SecurityDescriptor::decode(&good[..i]);
        }
    }

    #[test]
    fn well_known_sids_have_their_string_forms() {
        assert_eq!(Sid::everyone().to_string(), "S-1-1-0");
        assert_eq!(Sid::null().to_string(), "S-1-0-0");
        assert_eq!(Sid::creator_owner().to_string(), "S-1-3-0");
        assert_eq!(Sid::creator_group().to_string(), "S-1-3-1");
        assert_eq!(Sid::anonymous().to_string(), "S-1-5-7");
        assert_eq!(Sid::authenticated_users().to_string(), "S-1-5-11");
        assert_eq!(Sid::local_system().to_string(), "S-1-5-18");
        assert_eq!(Sid::builtin_administrators().to_string(), "S-1-5-32-544");
        assert_eq!(Sid::builtin_users().to_string(), "S-1-5-32-545");
        assert_eq!(Sid::unix_user(1000).to_string(), "S-1-22-1-1000");
        assert_eq!(Sid::unix_group(100).to_string(), "S-1-22-2-100");
        assert_eq!(Sid::unix_user(1000).unix_uid(), Some(1000));
        assert_eq!(Sid::unix_user(1000).unix_gid(), None);
        assert_eq!(Sid::unix_group(7).unix_gid(), Some(7));
    }

    #[test]
    fn administrators_sid_has_the_spec_binary_layout() {
        let mut v = Vec::new();
        Sid::builtin_administrators().encode(&mut v);
        assert_eq!(v, [1, 2, 0, 0, 0, 0, 0, 5, 0x20, 0, 0, 0, 0x20, 0x02, 0, 0]);
        assert_eq!(Sid::decode(&v).unwrap(), Sid::builtin_administrators());
        assert_eq!(Sid::builtin_administrators().encoded_len(), 16);
    }

    #[test]
    fn sid_strings_round_trip_including_domain_and_hex_authority() {
        for s in [
            "S-1-5-21-3623811015-3361044348-30300820-1013",
            "S-1-0x123456789ABC-1",
            "S-1-5",
            "S-1-4294967295-4294967295",
        ] {
            assert_eq!(sid(s).to_string(), s);
            let mut v = Vec::new();
            sid(s).encode(&mut v);
            assert_eq!(Sid::decode(&v).unwrap(), sid(s));
        }
        assert_eq!(sid("s-1-0x5-18"), Sid::local_system());
        assert_eq!(sid("S-1-5-21-1-2-3-500").rid(), Some(500));
    }

    #[test]
    fn malformed_sid_strings_are_rejected() {
        for s in [
            "",
            "S",
            "S-1",
            "S-2-5-18",
            "X-1-5-18",
            "S-1-5-",
            "S-1-5--1",
            "S-1-5-+1",
            "S-1-5-x",
            "S-1-5-4294967296",
            "S-1-281474976710656",
            "S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15-16",
        ] {
            assert!(s.parse::<Sid>().is_err(), "{s:?}");
        }
        assert!("S-1-5-1-2-3-4-5-6-7-8-9-10-11-12-13-14-15"
            .parse::<Sid>()
            .is_ok());
    }

    #[test]
    fn binary_sid_with_more_than_15_sub_authorities_is_rejected() {
        let mut v = vec![1, 16, 0, 0, 0, 0, 0, 5];
        v.extend(std::iter::repeat_n(0u8, 64));
        assert_eq!(
            Sid::decode(&v),
            Err(WireError::Invalid("SID SubAuthorityCount"))
        );
        v[1] = 15;
        assert!(Sid::decode(&v).is_ok());
    }

    #[test]
    fn binary_sid_with_wrong_revision_or_truncated_is_rejected() {
        assert_eq!(
            Sid::decode(&[2, 0, 0, 0, 0, 0, 0, 1]),
            Err(WireError::Invalid("SID Revision"))
        );
        assert!(matches!(
            Sid::decode(&[1, 2, 0, 0, 0, 0, 0, 5, 32, 0, 0, 0]),
            Err(WireError::Truncated { .. })
        ));
        assert!(Sid::decode(&[1]).is_err());
    }

    #[test]
    fn oversized_sid_struct_encodes_only_15_sub_authorities() {
        let s = Sid {
            revision: 1,
            authority: [0, 0, 0, 0, 0, 5],
            sub_authorities: vec![7; 20],
        };
        let mut v = Vec::new();
        s.encode(&mut v);
        assert_eq!(v.len(), 8 + 60);
        assert_eq!(v[1], 15);
        assert_eq!(Sid::decode(&v).unwrap().sub_authorities.len(), 15);
    }

    #[test]
    fn allow_ace_has_the_spec_layout() {
        let ace = Ace::allow(Sid::everyone(), FILE_GENERIC_READ, CONTAINER_INHERIT_ACE);
        let mut v = Vec::new();
        ace.encode(&mut v).unwrap();
        assert_eq!(
            v,
            [0, 2, 20, 0, 0x89, 0, 0x12, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        let got = Ace::read(&mut Reader::new(&v)).unwrap();
        assert_eq!(got, ace);
        assert_eq!(got.mask(), Some(FILE_GENERIC_READ));
        assert_eq!(got.sid(), Some(&Sid::everyone()));
    }

    #[test]
    fn ace_size_smaller_than_header_or_unaligned_or_past_end_is_rejected() {
        for size in [0u8, 2, 3] {
            let v = [0, 0, size, 0, 0, 0, 0, 0];
            assert_eq!(
                Ace::read(&mut Reader::new(&v)),
                Err(WireError::Invalid("AceSize"))
            );
        }
        assert_eq!(
            Ace::read(&mut Reader::new(&[0, 0, 6, 0, 0, 0, 0, 0])),
            Err(WireError::Invalid("AceSize"))
        );
        assert!(Ace::read(&mut Reader::new(&[0, 0, 24, 0, 0, 0, 0, 0])).is_err());
    }

    #[test]
    fn ace_size_too_small_for_its_sid_is_rejected() {
        let ace = Ace::allow(Sid::builtin_administrators(), AccessMask(1), 0);
        let mut v = Vec::new();
        ace.encode(&mut v).unwrap();
        v[2] -= 4; // AceSize now cuts the SID's last sub-authority off
        v.extend_from_slice(&[0; 8]);
        assert!(matches!(
            Ace::read(&mut Reader::new(&v)),
            Err(WireError::Truncated { .. })
        ));
    }

    #[test]
    fn object_aces_are_kept_raw_and_callback_data_is_kept() {
        let raw = Ace {
            ace_type: AceType::ACCESS_ALLOWED_OBJECT,
            flags: 0,
            body: AceBody::Raw(vec![1, 2, 3, 4, 5, 6, 7, 8]),
        };
        let cb = Ace {
            ace_type: AceType::ACCESS_ALLOWED_CALLBACK,
            flags: 0,
            body: AceBody::MaskSid {
                mask: AccessMask(1),
                sid: Sid::everyone(),
                trailer: b"artx".to_vec(),
            },
        };
        let acl = Acl {
            revision: Acl::REVISION_DS,
            aces: vec![raw, cb],
        };
        let mut v = Vec::new();
        acl.encode(&mut v).unwrap();
        assert_eq!(v.len(), 8 + 12 + 24);
        assert_eq!(Acl::decode(&v).unwrap(), acl);
    }

    #[test]
    fn acl_counts_and_sizes_are_bounded_by_the_buffer() {
        let acl = Acl::new(vec![Ace::allow(Sid::everyone(), AccessMask(1), 0)]);
        let mut v = Vec::new();
        acl.encode(&mut v).unwrap();
        assert_eq!(&v[..8], &[2, 0, 28, 0, 1, 0, 0, 0]);
        assert_eq!(Acl::decode(&v).unwrap(), acl);
        // AceCount larger than AclSize could hold.
        let mut bad = v.clone();
        bad[4] = 0xFF;
        bad[5] = 0xFF;
        assert_eq!(Acl::decode(&bad), Err(WireError::Invalid("AceCount")));
        // AceCount 2 with room for only one ACE's bytes: second read fails.
        let mut bad = v.clone();
        bad[4] = 2;
        assert!(Acl::decode(&bad).is_err());
        // AclSize past the buffer, and smaller than the header.
        let mut bad = v.clone();
        bad[2] = 200;
        assert_eq!(Acl::decode(&bad), Err(WireError::BadOffset("AclSize")));
        let mut bad = v.clone();
        bad[2] = 4;
        assert_eq!(Acl::decode(&bad), Err(WireError::Invalid("AclSize")));
        // An ACE running past AclSize even though the buffer has the bytes.
        let mut bad = v.clone();
        bad[2] = 24;
        assert!(Acl::decode(&bad).is_err());
        for revision in [0, 1, 5, 0xFF] {
            let mut bad = v.clone();
            bad[0] = revision;
            assert_eq!(Acl::decode(&bad), Err(WireError::Invalid("AclRevision")));
        }
    }

    #[test]
    fn an_acl_of_revision_3_as_smbcacls_sends_decodes_and_keeps_its_revision() {
        let acl = Acl {
            revision: 3,
            aces: vec![
                Ace::deny(Sid::unix_group(1008), AccessMask(0x116), 0),
                Ace::allow(Sid::everyone(), AccessMask(0x0012_00a0), 0),
            ],
        };
        let mut v = Vec::new();
        acl.encode(&mut v).unwrap();
        assert_eq!(v[0], 3);
        let back = Acl::decode(&v).unwrap();
        assert_eq!(back, acl);
        let mut again = Vec::new();
        back.encode(&mut again).unwrap();
        assert_eq!(again, v);
        // Inside a descriptor too.
        let sd = SecurityDescriptor {
            control: SE_SELF_RELATIVE | SE_DACL_PRESENT,
            owner: Some(Sid::unix_user(1004)),
            dacl: Some(acl),
            ..Default::default()
        };
        let bytes = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        let back = SecurityDescriptor::decode(&bytes).unwrap();
        assert_eq!(back.dacl.as_ref().map(|a| a.revision), Some(3));
        assert_eq!(
            back.to_bytes(SecurityDescriptor::all_parts()).unwrap(),
            bytes
        );
    }

    #[test]
    fn oversized_acl_fails_to_encode_instead_of_truncating() {
        let acl = Acl::new(vec![
            Ace::allow(
                Sid::builtin_administrators(),
                AccessMask(1),
                0
            );
            3000
        ]);
        assert_eq!(
            acl.encode(&mut Vec::new()),
            Err(WireError::Invalid("AclSize"))
        );
    }

    #[test]
    fn descriptor_has_the_self_relative_layout_and_round_trips() {
        let sd = sd_from_posix(1000, 100, 0o644, false);
        let v = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        assert_eq!(v[0], 1);
        assert_eq!(
            &v[2..4],
            &(SE_SELF_RELATIVE | SE_DACL_PRESENT).to_le_bytes()
        );
        // Owner right after the header, group after the 16-byte owner SID.
        assert_eq!(&v[4..8], &20u32.to_le_bytes());
        assert_eq!(&v[8..12], &36u32.to_le_bytes());
        assert_eq!(&v[12..16], &0u32.to_le_bytes());
        assert_eq!(&v[16..20], &52u32.to_le_bytes());
        assert_eq!(SecurityDescriptor::decode(&v).unwrap(), sd);
    }

    #[test]
    fn encoder_emits_only_the_requested_parts() {
        let sd = sd_from_posix(1000, 100, 0o644, false);
        let v = sd.to_bytes(SecurityInformation::OWNER).unwrap();
        assert_eq!(v.len(), 20 + 16);
        assert_eq!(&v[2..4], &SE_SELF_RELATIVE.to_le_bytes());
        let got = SecurityDescriptor::decode(&v).unwrap();
        assert_eq!(got.owner, sd.owner);
        assert_eq!(got.group, None);
        assert_eq!(got.dacl, None);
        assert!(!got.has_null_dacl());

        let v = sd.to_bytes(SecurityInformation::DACL).unwrap();
        let got = SecurityDescriptor::decode(&v).unwrap();
        assert_eq!(got.owner, None);
        assert_eq!(got.dacl, sd.dacl);
        assert_eq!(&v[16..20], &20u32.to_le_bytes());
    }

    #[test]
    fn null_dacl_is_preserved() {
        let sd = SecurityDescriptor {
            control: SE_SELF_RELATIVE | SE_DACL_PRESENT,
            owner: Some(Sid::everyone()),
            ..Default::default()
        };
        let v = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        assert_eq!(&v[16..20], &0u32.to_le_bytes());
        let got = SecurityDescriptor::decode(&v).unwrap();
        assert!(got.has_null_dacl());
        assert_eq!(got, sd);
    }

    #[test]
    fn hostile_descriptor_offsets_are_rejected() {
        let sd = sd_from_posix(1, 2, 0o700, true);
        let good = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        let set = |field: usize, val: u32| {
            let mut v = good.clone();
            v[4 + 4 * field..8 + 4 * field].copy_from_slice(&val.to_le_bytes());
            v
        };
        let n = good.len() as u32;
        assert_eq!(
            SecurityDescriptor::decode(&set(0, n)),
            Err(WireError::BadOffset("OffsetOwner"))
        );
        assert_eq!(
            SecurityDescriptor::decode(&set(1, u32::MAX)),
            Err(WireError::BadOffset("OffsetGroup"))
        );
        assert_eq!(
            SecurityDescriptor::decode(&set(3, 4)),
            Err(WireError::BadOffset("OffsetDacl"))
        );
        // An owner SID starting 4 bytes before the end runs off it.
        assert!(SecurityDescriptor::decode(&set(0, n - 4)).is_err());
        // A DACL pointed at the owner SID is not an ACL.
        assert!(SecurityDescriptor::decode(&set(3, 20)).is_err());
        // Truncated header, wrong revision, not self-relative.
        assert!(SecurityDescriptor::decode(&good[..19]).is_err());
        let mut v = good.clone();
        v[0] = 2;
        assert_eq!(
            SecurityDescriptor::decode(&v),
            Err(WireError::Invalid("SD Revision"))
        );
        let mut v = good.clone();
        v[3] &= 0x7F;
        assert!(SecurityDescriptor::decode(&v).is_err());
    }

    #[test]
    fn sacl_offset_is_ignored_without_sacl_present() {
        let sd = sd_from_posix(1, 2, 0o600, false);
        let mut v = sd.to_bytes(SecurityDescriptor::all_parts()).unwrap();
        v[12..16].copy_from_slice(&9999u32.to_le_bytes());
        assert_eq!(SecurityDescriptor::decode(&v).unwrap(), sd);
    }
}
