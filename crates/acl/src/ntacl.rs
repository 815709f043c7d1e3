//! Samba's `security.NTACL` xattr (`vfs objects = acl_xattr`): the NT
//! security descriptor Samba stores for a file, so a share moved from Samba
//! keeps its ACLs and Samba shows the ACLs ringshare writes.
//!
//! # Format
//!
//! The value is `struct xattr_NTACL` of Samba's librpc/idl/xattr.idl pushed
//! as NDR32 (little-endian, zero padding to each scalar's alignment):
//!
//! ```text
//! 0  u16 version (1..=4)   2  u16 union switch (= version)
//! 4  u32 unique pointer referent (0x00020000)
//! v1: the security descriptor follows at 8
//! v2: u32 sd pointer (0x00020004), hash[16]; descriptor at 28
//! v3: u32 sd pointer, u16 hash_type, hash[64]; 2 pad bytes; descriptor at 80
//! v4: u32 sd pointer, u16 hash_type, hash[64], description (UTF-8, NUL
//!     terminated), pad to 4, u64 NTTIME time, sys_acl_hash[64], pad to 4,
//!     descriptor
//! ```
//!
//! The descriptor is Samba's NDR `security_descriptor`: the self-relative
//! layout of [MS-DTYP] 2.4.6 (revision, a padding byte where Sbz1 would be,
//! control, four offsets, then owner, group, SACL, DACL) except that the
//! offsets count from the start of the whole xattr value, not from the
//! descriptor (the IDL has `[relative]` pointers and no relative base).
//! Samba ignores the "present" control bits when reading: a part is there
//! when its offset is not 0.
//!
//! # Hashes (Samba 4.17, source3/modules/vfs_acl_common.c)
//!
//! Hashes are 64-byte fields holding a SHA-256 in the first 32 bytes, hash
//! type 1 (`XATTR_SD_HASH_TYPE_SHA256`); Samba compares all 64 bytes.
//!
//! - `hash` is not a hash of the stored descriptor. When Samba sets an ACL
//!   it applies it to the POSIX ACL first, reads back the descriptor its
//!   POSIX mapping gives for the file (owner, group, DACL, SACL), and stores
//!   SHA-256 of the NDR `xattr_NTACL` version 3 blob holding *that*
//!   descriptor with hash type 1 and an all-zero hash: [`sd_hash`].
//! - `sys_acl_hash` (v4) is SHA-256 of the NDR `smb_acl_wrapper` of the
//!   file's POSIX ACLs, uid, gid and mode, given here as a [`PosixView`]:
//!   [`sys_acl_hash`], description `"posix_acl"`.
//!
//! On read ([`check`]) Samba returns the stored descriptor for v1 and v2
//! unconditionally; for v3 and v4 only when the hash type is SHA-256 and, for
//! v4, the current `sys_acl_hash` matches, or else the current POSIX-mapped
//! descriptor hashes to `hash`. Otherwise it ignores the blob and shows the
//! descriptor mapped from the POSIX ACL. With `acl_xattr:ignore system acls
//! = yes` it trusts v3 and v4 as they are (and itself writes v3 blobs with a
//! zero hash).
//!
//! [`encode_v4`] writes what Samba 4.17 writes after a client sets an ACL;
//! given the file's [`PosixView`] (full `st_mode`, the ACLs as read from its
//! xattrs) its `sys_acl_hash` is exactly Samba's,
//! so Samba shows the stored descriptor. The evidence (captured blobs, and
//! the manual check against a running smbd) is in
//! crates/acl/tests/ntacl_samba.rs.

use core::fmt;

use ringshare_wire::security::{
    Acl, SecurityDescriptor, Sid, SE_DACL_PRESENT, SE_SACL_PRESENT, SE_SELF_RELATIVE,
};
use ringshare_wire::WireError;

use crate::posix::PosixView;

mod sysacl;

pub use sysacl::{sys_acl_blob, sys_acl_hash};

/// The xattr name.
pub const XATTR_NAME: &str = "security.NTACL";
/// `XATTR_SD_HASH_TYPE_NONE`.
pub const HASH_TYPE_NONE: u16 = 0;
/// `XATTR_SD_HASH_TYPE_SHA256`, the only hash type Samba verifies.
pub const HASH_TYPE_SHA256: u16 = 1;
/// `XATTR_SD_HASH_SIZE`: the size of the v3/v4 hash fields.
pub const HASH_SIZE: usize = 64;
/// The description Samba's POSIX ACL backend stores in v4 blobs.
pub const POSIX_ACL_DESCRIPTION: &str = "posix_acl";
/// Samba's NDR limit on ACEs per ACL (`[range(0,2000)] num_aces`): a blob
/// with more fails to parse, and Samba then fails every open of the file
/// (it does not fall back to the POSIX ACL for a blob it cannot parse).
pub const MAX_ACES: usize = 2000;

/// NDR referent ids of the first and second unique pointers pushed.
const PTR_FIRST: u32 = 0x0002_0000;
const PTR_SECOND: u32 = 0x0002_0004;

/// Why a blob does not decode or a descriptor does not encode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NtAclError {
    /// The blob ended: `needed` bytes were wanted at `at`.
    Truncated { at: usize, needed: usize },
    /// A version Samba does not know (it knows 1 to 4).
    UnknownVersion(u16),
    /// The union switch does not repeat the version.
    SwitchMismatch { version: u16, switch: u16 },
    /// A NULL pointer where Samba needs the structure.
    NullPointer(&'static str),
    /// A descriptor part's offset lies past the end of the blob.
    BadOffset(&'static str),
    /// A SID or ACL of the descriptor does not decode.
    Descriptor(WireError),
    /// An ACL has more ACEs than Samba reads ([`MAX_ACES`]).
    TooManyAces(usize),
    /// The v4 description has no NUL terminator, is not UTF-8, or (when
    /// encoding) contains a NUL.
    BadDescription,
    /// The descriptor does not encode (an ACL or ACE too large).
    Encode(WireError),
}

impl fmt::Display for NtAclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NtAclError::Truncated { at, needed } => {
                write!(f, "NTACL blob truncated: {needed} bytes needed at {at}")
            }
            NtAclError::UnknownVersion(v) => write!(f, "unknown NTACL version {v}"),
            NtAclError::SwitchMismatch { version, switch } => {
                write!(
                    f,
                    "NTACL union switch {switch} differs from version {version}"
                )
            }
            NtAclError::NullPointer(what) => write!(f, "NTACL blob has a NULL {what}"),
            NtAclError::BadOffset(what) => write!(f, "NTACL descriptor {what} out of range"),
            NtAclError::Descriptor(e) => write!(f, "NTACL descriptor does not decode: {e:?}"),
            NtAclError::TooManyAces(n) => {
                write!(f, "ACL with {n} ACEs (Samba reads at most {MAX_ACES})")
            }
            NtAclError::BadDescription => write!(f, "bad NTACL v4 description string"),
            NtAclError::Encode(e) => write!(f, "descriptor does not encode: {e:?}"),
        }
    }
}

impl std::error::Error for NtAclError {}

/// The version-specific fields of a blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NtAclHashes {
    /// Version 1: the descriptor alone (Samba's NTVFS server, `samba-tool
    /// ntacl set --use-ntvfs`).
    V1,
    /// Version 2: a 16-byte field Samba never checks.
    V2 {
        /// Unused by Samba.
        hash: [u8; 16],
    },
    /// Version 3: written by Samba 3.6 to 4.x when the POSIX ACL blob is not
    /// available, and with `ignore system acls` (zero hash).
    V3 {
        /// [`HASH_TYPE_SHA256`] when Samba wrote it.
        hash_type: u16,
        /// [`sd_hash`] of the POSIX-mapped descriptor (zero with `ignore
        /// system acls`).
        hash: [u8; HASH_SIZE],
    },
    /// Version 4: what Samba 4 writes over POSIX ACLs.
    V4 {
        /// [`HASH_TYPE_SHA256`] when Samba wrote it.
        hash_type: u16,
        /// [`sd_hash`] of the POSIX-mapped descriptor.
        hash: [u8; HASH_SIZE],
        /// `"posix_acl"` for the POSIX backend.
        description: String,
        /// When it was written (NTTIME: 100 ns units since 1601).
        time: u64,
        /// [`sys_acl_hash`] of the file's POSIX ACL state.
        sys_acl_hash: [u8; HASH_SIZE],
    },
}

/// A decoded `security.NTACL` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredNtAcl {
    /// The stored descriptor, as Samba hands it out: `control` has
    /// SE_SELF_RELATIVE set, and SE_DACL_PRESENT / SE_SACL_PRESENT for each
    /// ACL stored (an offset of 0 with the bit set is a NULL DACL/SACL).
    /// Samba keeps neither the descriptor revision (it answers 1) nor the
    /// Sbz1 byte (NDR padding), so `rm_control` is 0.
    pub sd: SecurityDescriptor,
    /// The version and its hash fields.
    pub hashes: NtAclHashes,
}

impl StoredNtAcl {
    /// The xattr_NTACL version (1 to 4).
    pub fn version(&self) -> u16 {
        match self.hashes {
            NtAclHashes::V1 => 1,
            NtAclHashes::V2 { .. } => 2,
            NtAclHashes::V3 { .. } => 3,
            NtAclHashes::V4 { .. } => 4,
        }
    }

    /// The hash type as Samba reads it: [`HASH_TYPE_NONE`] for v1 and v2.
    pub fn hash_type(&self) -> u16 {
        match &self.hashes {
            NtAclHashes::V1 | NtAclHashes::V2 { .. } => HASH_TYPE_NONE,
            NtAclHashes::V3 { hash_type, .. } | NtAclHashes::V4 { hash_type, .. } => *hash_type,
        }
    }

    /// The v3/v4 `hash` field (see [`sd_hash`] for what it covers).
    pub fn hash(&self) -> Option<&[u8; HASH_SIZE]> {
        match &self.hashes {
            NtAclHashes::V3 { hash, .. } | NtAclHashes::V4 { hash, .. } => Some(hash),
            _ => None,
        }
    }

    /// The v4 `sys_acl_hash` field.
    pub fn sys_acl_hash(&self) -> Option<&[u8; HASH_SIZE]> {
        match &self.hashes {
            NtAclHashes::V4 { sys_acl_hash, .. } => Some(sys_acl_hash),
            _ => None,
        }
    }

    /// The v4 description.
    pub fn description(&self) -> Option<&str> {
        match &self.hashes {
            NtAclHashes::V4 { description, .. } => Some(description),
            _ => None,
        }
    }

    /// The v4 time (NTTIME).
    pub fn time(&self) -> Option<u64> {
        match &self.hashes {
            NtAclHashes::V4 { time, .. } => Some(*time),
            _ => None,
        }
    }

    /// The descriptor in standalone self-relative form (offsets from its own
    /// start), as an SMB2 QUERY_INFO answer carries it.
    pub fn descriptor_bytes(&self) -> Result<Vec<u8>, NtAclError> {
        self.sd
            .to_bytes(SecurityDescriptor::all_parts())
            .map_err(NtAclError::Encode)
    }

    /// The blob, laid out as Samba's NDR push lays it out: decoding a blob
    /// Samba wrote and encoding it again gives the same bytes.
    pub fn encode(&self) -> Result<Vec<u8>, NtAclError> {
        encode_parts(&self.sd, &self.hashes)
    }
}

/// A bounds-checked NDR reader; scalars are aligned to their size (8-byte
/// values to 4, as Samba's NTTIME), as Samba's pull does.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn align(&mut self, n: usize) {
        self.pos = self.pos.div_ceil(n).saturating_mul(n);
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NtAclError> {
        let bytes = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
            .ok_or(NtAclError::Truncated {
                at: self.pos,
                needed: n,
            })?;
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], NtAclError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, NtAclError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, NtAclError> {
        self.align(2);
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, NtAclError> {
        self.align(4);
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64_align4(&mut self) -> Result<u64, NtAclError> {
        self.align(4);
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A NUL-terminated UTF-8 string (the NUL is consumed, not returned).
    fn c_string(&mut self) -> Result<String, NtAclError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(NtAclError::BadDescription)?;
        let s = core::str::from_utf8(&rest[..len]).map_err(|_| NtAclError::BadDescription)?;
        self.pos += len + 1;
        Ok(s.to_owned())
    }
}

/// Decode a `security.NTACL` value of any version Samba reads (1 to 4).
///
/// Follows Samba's NDR pull: the union switch must repeat the version,
/// pointers Samba dereferences must not be NULL, descriptor offsets count
/// from the start of `blob`, trailing bytes are ignored. Never panics;
/// allocations are bounded by the blob's length.
pub fn decode(blob: &[u8]) -> Result<StoredNtAcl, NtAclError> {
    let mut c = Cursor { buf: blob, pos: 0 };
    let version = c.u16()?;
    let switch = c.u16()?;
    if !(1..=4).contains(&version) {
        return Err(NtAclError::UnknownVersion(version));
    }
    if switch != version {
        return Err(NtAclError::SwitchMismatch { version, switch });
    }
    if c.u32()? == 0 {
        return Err(NtAclError::NullPointer("info"));
    }
    let hashes = if version == 1 {
        NtAclHashes::V1
    } else {
        if c.u32()? == 0 {
            return Err(NtAclError::NullPointer("sd"));
        }
        match version {
            2 => NtAclHashes::V2 { hash: c.array()? },
            3 => NtAclHashes::V3 {
                hash_type: c.u16()?,
                hash: c.array()?,
            },
            _ => {
                let hash_type = c.u16()?;
                let hash = c.array()?;
                let description = c.c_string()?;
                let time = c.u64_align4()?;
                let sys_acl_hash = c.array()?;
                NtAclHashes::V4 {
                    hash_type,
                    hash,
                    description,
                    time,
                    sys_acl_hash,
                }
            }
        }
    };
    c.align(4);
    let sd = read_descriptor(&mut c)?;
    Ok(StoredNtAcl { sd, hashes })
}

/// Read Samba's NDR `security_descriptor` at the cursor; its offsets count
/// from the start of the cursor's buffer.
fn read_descriptor(c: &mut Cursor<'_>) -> Result<SecurityDescriptor, NtAclError> {
    let _revision = c.u8()?; // Samba answers with revision 1 whatever is stored
    let control = c.u16()?; // skips the Sbz1 byte: NDR padding to Samba
    let offsets = [c.u32()?, c.u32()?, c.u32()?, c.u32()?];
    let blob = c.buf;
    let part = |i: usize, name: &'static str| -> Result<Option<&[u8]>, NtAclError> {
        match usize::try_from(offsets[i]) {
            Ok(0) => Ok(None),
            Ok(off) if off <= blob.len() => Ok(Some(&blob[off..])),
            _ => Err(NtAclError::BadOffset(name)),
        }
    };
    let sid = |b: &[u8]| Sid::decode(b).map_err(NtAclError::Descriptor);
    let acl = |b: &[u8]| {
        let acl = decode_acl_any_revision(b)?;
        if acl.aces.len() > MAX_ACES {
            return Err(NtAclError::TooManyAces(acl.aces.len()));
        }
        Ok(acl)
    };
    let owner = part(0, "owner offset")?.map(sid).transpose()?;
    let group = part(1, "group offset")?.map(sid).transpose()?;
    let sacl = part(2, "SACL offset")?.map(acl).transpose()?;
    let dacl = part(3, "DACL offset")?.map(acl).transpose()?;
    let mut control = control | SE_SELF_RELATIVE;
    if sacl.is_some() {
        control |= SE_SACL_PRESENT;
    }
    if dacl.is_some() {
        control |= SE_DACL_PRESENT;
    }
    Ok(SecurityDescriptor {
        control,
        rm_control: 0,
        owner,
        group,
        sacl,
        dacl,
    })
}

/// Decode an ACL whatever its AclRevision byte, as Samba does (its NDR
/// does not check the value). [`Acl::decode`] takes 2 to 4, as Windows
/// does (`smbcacls` sends 3, and Samba stores it as is); an ACL with any
/// other revision is decoded from a copy with the byte set to 2, then given
/// back its own revision.
fn decode_acl_any_revision(b: &[u8]) -> Result<Acl, NtAclError> {
    match b.first() {
        None | Some(Acl::REVISION..=Acl::REVISION_DS) => {
            Acl::decode(b).map_err(NtAclError::Descriptor)
        }
        Some(&revision) => {
            // AclSize is 16 bits: nothing past 64 KiB belongs to the ACL.
            let mut copy = b[..b.len().min(usize::from(u16::MAX))].to_vec();
            copy[0] = Acl::REVISION;
            let mut acl = Acl::decode(&copy).map_err(NtAclError::Descriptor)?;
            acl.revision = revision;
            Ok(acl)
        }
    }
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// Append Samba's NDR `security_descriptor` (offsets from the start of
/// `out`). Parts in owner, group, SACL, DACL order, the byte after the
/// revision 0, as Samba pushes them.
fn put_descriptor(out: &mut Vec<u8>, sd: &SecurityDescriptor) -> Result<(), NtAclError> {
    for acl in [&sd.sacl, &sd.dacl].into_iter().flatten() {
        if acl.aces.len() > MAX_ACES {
            return Err(NtAclError::TooManyAces(acl.aces.len()));
        }
    }
    let mut bytes = sd
        .to_bytes(SecurityDescriptor::all_parts())
        .map_err(NtAclError::Encode)?;
    bytes[1] = 0;
    let base =
        u32::try_from(out.len()).map_err(|_| NtAclError::Encode(WireError::Invalid("size")))?;
    for field in 0..4 {
        let at = 4 + 4 * field;
        let mut off = [0u8; 4];
        off.copy_from_slice(&bytes[at..at + 4]);
        let off = u32::from_le_bytes(off);
        if off != 0 {
            let moved = off
                .checked_add(base)
                .ok_or(NtAclError::Encode(WireError::Invalid("size")))?;
            bytes[at..at + 4].copy_from_slice(&moved.to_le_bytes());
        }
    }
    out.extend_from_slice(&bytes);
    Ok(())
}

fn encode_parts(sd: &SecurityDescriptor, hashes: &NtAclHashes) -> Result<Vec<u8>, NtAclError> {
    let version: u16 = match hashes {
        NtAclHashes::V1 => 1,
        NtAclHashes::V2 { .. } => 2,
        NtAclHashes::V3 { .. } => 3,
        NtAclHashes::V4 { .. } => 4,
    };
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&PTR_FIRST.to_le_bytes());
    match hashes {
        NtAclHashes::V1 => {}
        NtAclHashes::V2 { hash } => {
            out.extend_from_slice(&PTR_SECOND.to_le_bytes());
            out.extend_from_slice(hash);
        }
        NtAclHashes::V3 { hash_type, hash } => {
            out.extend_from_slice(&PTR_SECOND.to_le_bytes());
            out.extend_from_slice(&hash_type.to_le_bytes());
            out.extend_from_slice(hash);
        }
        NtAclHashes::V4 {
            hash_type,
            hash,
            description,
            time,
            sys_acl_hash,
        } => {
            if description.contains('\0') {
                return Err(NtAclError::BadDescription);
            }
            out.extend_from_slice(&PTR_SECOND.to_le_bytes());
            out.extend_from_slice(&hash_type.to_le_bytes());
            out.extend_from_slice(hash);
            out.extend_from_slice(description.as_bytes());
            out.push(0);
            pad4(&mut out);
            out.extend_from_slice(&time.to_le_bytes());
            out.extend_from_slice(sys_acl_hash);
        }
    }
    pad4(&mut out);
    put_descriptor(&mut out, sd)?;
    Ok(out)
}

/// The `hash` field Samba stores and compares: SHA-256 of the NDR
/// `xattr_NTACL` version 3 blob holding `fs_sd` with hash type SHA-256 and
/// a zero hash, zero-padded to 64 bytes.
///
/// `fs_sd` is the descriptor Samba's POSIX layer maps the file's owner,
/// group and POSIX ACL to (all four parts), not the NT ACL stored in the
/// blob. It depends on Samba's uid/gid-to-SID mapping (passdb, winbind), so
/// ringshare matches it only where its own mapping gives the same
/// descriptor byte for byte.
pub fn sd_hash(fs_sd: &SecurityDescriptor) -> Result<[u8; HASH_SIZE], NtAclError> {
    let blob = encode_parts(
        fs_sd,
        &NtAclHashes::V3 {
            hash_type: HASH_TYPE_SHA256,
            hash: [0; HASH_SIZE],
        },
    )?;
    Ok(sysacl::sha256_field(&blob))
}

/// The version-4 blob Samba 4.17 writes when a client sets `sd` on a file
/// whose POSIX state afterwards is `posix`: hash type SHA-256, `hash` =
/// [`sd_hash`] of `fs_sd` (all zero when `None`), description `"posix_acl"`,
/// `time` (NTTIME), `sys_acl_hash` = [`sys_acl_hash`] of `posix`.
///
/// `posix` is best read back from the file once the ACL is applied (fstat
/// and the `system.posix_acl_*` xattrs): `mode` must be the whole `st_mode`,
/// set-id and sticky bits included, as the kernel left it.
///
/// Samba shows `sd` as long as the file's POSIX ACL, owner, group and mode
/// stay as `posix` says. When they change it falls back to comparing `hash`
/// with the descriptor its POSIX mapping then gives; an all-zero `hash`
/// never matches, so the stored ACL is then dropped in favour of the POSIX
/// one, which is the point of the check.
///
/// Fails when an ACL has more than [`MAX_ACES`] ACEs (Samba could not read
/// the blob and would fail every open of the file) or does not fit its
/// 16-bit size.
pub fn encode_v4(
    sd: &SecurityDescriptor,
    posix: &PosixView,
    fs_sd: Option<&SecurityDescriptor>,
    time: u64,
) -> Result<Vec<u8>, NtAclError> {
    let hash = match fs_sd {
        Some(fs) => sd_hash(fs)?,
        None => [0; HASH_SIZE],
    };
    encode_parts(
        sd,
        &NtAclHashes::V4 {
            hash_type: HASH_TYPE_SHA256,
            hash,
            description: POSIX_ACL_DESCRIPTION.to_owned(),
            time,
            sys_acl_hash: sys_acl_hash(posix),
        },
    )
}

/// What Samba does with a stored blob when it reads a file's ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// It returns the stored descriptor.
    Stored(StoredBecause),
    /// It ignores the blob and returns the descriptor mapped from the POSIX
    /// ACL.
    FileSystem(FileSystemBecause),
}

impl Trust {
    /// True when the stored descriptor is the file's ACL.
    pub fn uses_stored(self) -> bool {
        matches!(self, Trust::Stored(_))
    }
}

/// Why Samba returns the stored descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredBecause {
    /// Version 1 or 2: never checked.
    Unhashed,
    /// `acl_xattr:ignore system acls = yes`: v3 and v4 are not checked.
    SystemAclsIgnored,
    /// Version 4 and the file's POSIX state hashes to `sys_acl_hash`.
    SysAclHashMatches,
    /// The POSIX-mapped descriptor hashes to `hash`.
    SdHashMatches,
}

/// Why Samba ignores the stored descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSystemBecause {
    /// A v3/v4 hash type other than SHA-256 (NONE included).
    UnknownHashType(u16),
    /// Neither hash matches (or nothing was given to compare with).
    HashMismatch,
}

/// Mirror Samba 4.17's check of a stored blob (`validate_nt_acl_blob`):
///
/// 1. v1, v2: stored descriptor.
/// 2. v3, v4 with `ignore_system_acls`: stored descriptor.
/// 3. Hash type other than SHA-256: POSIX descriptor.
/// 4. v4 and `posix` given (Samba: the POSIX ACL blob could be read; the
///    file's state now, as for [`encode_v4`]) and [`sys_acl_hash`]`(posix)`
///    equals the stored field: stored descriptor.
/// 5. `fs_sd` given (the descriptor Samba's POSIX mapping gives now) and
///    [`sd_hash`]`(fs_sd)` equals the stored `hash`: stored descriptor.
/// 6. Otherwise: POSIX descriptor.
///
/// Without `fs_sd` step 5 counts as a mismatch.
pub fn check(
    stored: &StoredNtAcl,
    posix: Option<&PosixView>,
    fs_sd: Option<&SecurityDescriptor>,
    ignore_system_acls: bool,
) -> Trust {
    let (hash_type, hash) = match &stored.hashes {
        NtAclHashes::V1 | NtAclHashes::V2 { .. } => return Trust::Stored(StoredBecause::Unhashed),
        NtAclHashes::V3 { hash_type, hash }
        | NtAclHashes::V4 {
            hash_type, hash, ..
        } => (*hash_type, hash),
    };
    if ignore_system_acls {
        return Trust::Stored(StoredBecause::SystemAclsIgnored);
    }
    if hash_type != HASH_TYPE_SHA256 {
        return Trust::FileSystem(FileSystemBecause::UnknownHashType(hash_type));
    }
    if let (Some(stored_sys), Some(posix)) = (stored.sys_acl_hash(), posix) {
        if sys_acl_hash(posix) == *stored_sys {
            return Trust::Stored(StoredBecause::SysAclHashMatches);
        }
    }
    match fs_sd.map(sd_hash) {
        Some(Ok(h)) if h == *hash => Trust::Stored(StoredBecause::SdHashMatches),
        _ => Trust::FileSystem(FileSystemBecause::HashMismatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::posix::{sd_from_posix, PosixView};
    use ringshare_wire::consts::AccessMask;
    use ringshare_wire::security::{
        Ace, CONTAINER_INHERIT_ACE, INHERIT_ONLY_ACE, OBJECT_INHERIT_ACE, SE_DACL_PROTECTED,
    };

    fn sample_sd() -> SecurityDescriptor {
        let mut sd = sd_from_posix(&PosixView::new(1000, 100, 0o750, true));
        sd.control |= SE_DACL_PROTECTED;
        if let Some(dacl) = sd.dacl.as_mut() {
            dacl.aces.insert(
                0,
                Ace::deny(
                    Sid::unix_user(1001),
                    AccessMask(0x116),
                    OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE,
                ),
            );
            dacl.aces.push(Ace::allow(
                Sid::creator_owner(),
                AccessMask::FILE_ALL_ACCESS,
                OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE | INHERIT_ONLY_ACE,
            ));
        }
        sd
    }

    fn facts() -> PosixView {
        PosixView::new(1000, 100, 0o040_750, true)
    }

    fn all_versions() -> Vec<NtAclHashes> {
        vec![
            NtAclHashes::V1,
            NtAclHashes::V2 { hash: [7; 16] },
            NtAclHashes::V3 {
                hash_type: HASH_TYPE_SHA256,
                hash: [9; HASH_SIZE],
            },
            NtAclHashes::V4 {
                hash_type: HASH_TYPE_SHA256,
                hash: [1; HASH_SIZE],
                description: POSIX_ACL_DESCRIPTION.to_owned(),
                time: 0x01DD_7D02_59C0_9BD2,
                sys_acl_hash: [2; HASH_SIZE],
            },
        ]
    }

    #[test]
    fn every_version_round_trips_through_encode_and_decode() {
        let sd = sample_sd();
        for hashes in all_versions() {
            let stored = StoredNtAcl {
                sd: sd.clone(),
                hashes,
            };
            let blob = stored.encode().unwrap();
            let back = decode(&blob).unwrap();
            assert_eq!(back.hashes, stored.hashes);
            assert_eq!(back.sd.dacl, sd.dacl);
            assert_eq!(back.sd.owner, sd.owner);
            assert_eq!(back.sd.control, sd.control | SE_SELF_RELATIVE);
            assert_eq!(back.encode().unwrap(), blob);
        }
    }

    #[test]
    fn descriptors_start_where_samba_puts_them_for_each_version() {
        let sd = sample_sd();
        for (hashes, start) in all_versions().into_iter().zip([8usize, 28, 80, 160]) {
            let blob = StoredNtAcl {
                sd: sd.clone(),
                hashes,
            }
            .encode()
            .unwrap();
            // Revision 1, padding 0, then the owner right after the header,
            // its offset counted from the start of the blob.
            assert_eq!(blob[start], 1, "start {start}");
            assert_eq!(blob[start + 1], 0);
            let owner = u32::from_le_bytes(blob[start + 4..start + 8].try_into().unwrap());
            assert_eq!(owner as usize, start + 20);
        }
    }

    #[test]
    fn a_v4_description_of_any_length_keeps_the_time_four_aligned() {
        for len in 0..8 {
            let stored = StoredNtAcl {
                sd: sample_sd(),
                hashes: NtAclHashes::V4 {
                    hash_type: HASH_TYPE_SHA256,
                    hash: [0; HASH_SIZE],
                    description: "x".repeat(len),
                    time: 42,
                    sys_acl_hash: [3; HASH_SIZE],
                },
            };
            let blob = stored.encode().unwrap();
            let time_at = (78 + len + 1).div_ceil(4) * 4;
            assert_eq!(&blob[time_at..time_at + 8], &42u64.to_le_bytes());
            assert_eq!(decode(&blob).unwrap(), stored);
        }
    }

    #[test]
    fn a_description_with_a_nul_does_not_encode() {
        let stored = StoredNtAcl {
            sd: sample_sd(),
            hashes: NtAclHashes::V4 {
                hash_type: HASH_TYPE_SHA256,
                hash: [0; HASH_SIZE],
                description: "a\0b".to_owned(),
                time: 0,
                sys_acl_hash: [0; HASH_SIZE],
            },
        };
        assert_eq!(stored.encode(), Err(NtAclError::BadDescription));
    }

    #[test]
    fn an_acl_of_revision_3_as_smbcacls_sends_decodes_and_keeps_its_revision() {
        let mut sd = sample_sd();
        if let Some(dacl) = sd.dacl.as_mut() {
            dacl.revision = 3;
        }
        let stored = StoredNtAcl {
            sd,
            hashes: NtAclHashes::V1,
        };
        let blob = stored.encode().unwrap();
        let back = decode(&blob).unwrap();
        assert_eq!(back.sd.dacl.as_ref().unwrap().revision, 3);
        assert_eq!(back.encode().unwrap(), blob);
    }

    #[test]
    fn a_null_dacl_survives_as_present_bit_without_offset() {
        let sd = SecurityDescriptor {
            control: SE_SELF_RELATIVE | SE_DACL_PRESENT,
            owner: Some(Sid::everyone()),
            ..Default::default()
        };
        let blob = StoredNtAcl {
            sd: sd.clone(),
            hashes: NtAclHashes::V1,
        }
        .encode()
        .unwrap();
        let back = decode(&blob).unwrap();
        assert!(back.sd.has_null_dacl());
        assert_eq!(back.sd, sd);
    }

    #[test]
    fn parts_are_found_by_offset_whatever_the_present_bits_say() {
        let sd = sample_sd();
        let mut blob = StoredNtAcl {
            sd: sd.clone(),
            hashes: NtAclHashes::V1,
        }
        .encode()
        .unwrap();
        // Clear SE_DACL_PRESENT in the stored control word.
        blob[10] &= !(SE_DACL_PRESENT as u8);
        let back = decode(&blob).unwrap();
        assert_eq!(back.sd.dacl, sd.dacl);
        assert_ne!(back.sd.control & SE_DACL_PRESENT, 0);
    }

    #[test]
    fn malformed_headers_are_refused() {
        let good = StoredNtAcl {
            sd: sample_sd(),
            hashes: NtAclHashes::V1,
        }
        .encode()
        .unwrap();
        let mut b = good.clone();
        b[0] = 5;
        b[2] = 5;
        assert_eq!(decode(&b), Err(NtAclError::UnknownVersion(5)));
        let mut b = good.clone();
        b[2] = 2;
        assert_eq!(
            decode(&b),
            Err(NtAclError::SwitchMismatch {
                version: 1,
                switch: 2
            })
        );
        let mut b = good.clone();
        b[4..8].fill(0);
        assert_eq!(decode(&b), Err(NtAclError::NullPointer("info")));
        let mut b = good.clone();
        b[8 + 16..8 + 20].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        assert_eq!(decode(&b), Err(NtAclError::BadOffset("DACL offset")));
        assert!(matches!(
            decode(&good[..3]),
            Err(NtAclError::Truncated { .. })
        ));
        assert!(matches!(
            decode(b"\x04\x00\x04\x00\x00\x00\x02\x00\x04\x00\x02\x00\x01\x00"),
            Err(NtAclError::Truncated { .. })
        ));
    }

    #[test]
    fn a_v4_description_without_terminator_is_refused() {
        let mut b = vec![4, 0, 4, 0, 0, 0, 2, 0, 4, 0, 2, 0, 1, 0];
        b.extend_from_slice(&[0; HASH_SIZE]);
        b.extend_from_slice(b"posix_acl");
        assert_eq!(decode(&b), Err(NtAclError::BadDescription));
        b.truncate(78);
        b.extend_from_slice(&[0xFF, 0xFE, 0]);
        assert_eq!(decode(&b), Err(NtAclError::BadDescription));
    }

    #[test]
    fn more_than_2000_aces_neither_encode_nor_decode() {
        let aces = vec![Ace::allow(Sid::everyone(), AccessMask(1), 0); MAX_ACES + 1];
        let mut sd = sample_sd();
        sd.dacl = Some(Acl::new(aces));
        let stored = StoredNtAcl {
            sd: sd.clone(),
            hashes: NtAclHashes::V1,
        };
        assert_eq!(stored.encode(), Err(NtAclError::TooManyAces(MAX_ACES + 1)));
        // Build the over-long blob by hand: header, descriptor header, DACL.
        let mut blob = vec![1, 0, 1, 0, 0, 0, 2, 0];
        let dacl = sd.dacl.as_ref().unwrap();
        let mut acl_bytes = Vec::new();
        dacl.encode(&mut acl_bytes).unwrap();
        blob.extend_from_slice(&[1, 0, 0x04, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        blob.extend_from_slice(&28u32.to_le_bytes());
        blob.extend_from_slice(&acl_bytes);
        assert_eq!(decode(&blob), Err(NtAclError::TooManyAces(MAX_ACES + 1)));
    }

    #[test]
    fn decode_does_not_panic_on_mutated_or_truncated_blobs() {
        for hashes in all_versions() {
            let good = StoredNtAcl {
                sd: sample_sd(),
                hashes,
            }
            .encode()
            .unwrap();
            for i in 0..good.len() {
                for v in [0u8, 1, 2, 3, 4, 0x14, 0x7F, 0x80, 0xFF] {
                    let mut m = good.clone();
                    m[i] = v;
                    if let Ok(s) = decode(&m) {
                        let _ = s.encode();
                        let _ = s.descriptor_bytes();
                    }
                }
                let _ = decode(&good[..i]);
            }
        }
    }

    #[test]
    fn encode_v4_stores_posix_acl_description_time_and_both_hashes() {
        let sd = sample_sd();
        let fs = sd_from_posix(&PosixView::new(1000, 100, 0o750, true));
        let blob = encode_v4(&sd, &facts(), Some(&fs), 1234).unwrap();
        let s = decode(&blob).unwrap();
        assert_eq!(s.version(), 4);
        assert_eq!(s.hash_type(), HASH_TYPE_SHA256);
        assert_eq!(s.description(), Some(POSIX_ACL_DESCRIPTION));
        assert_eq!(s.time(), Some(1234));
        assert_eq!(s.hash(), Some(&sd_hash(&fs).unwrap()));
        assert_eq!(s.sys_acl_hash(), Some(&sys_acl_hash(&facts())));
        assert_eq!(s.sd.dacl, sd.dacl);
        // Without a POSIX-mapped descriptor the SD hash field is zero.
        let blob = encode_v4(&sd, &facts(), None, 1234).unwrap();
        assert_eq!(decode(&blob).unwrap().hash(), Some(&[0; HASH_SIZE]));
    }

    #[test]
    fn check_follows_samba_order_of_trust() {
        let sd = sample_sd();
        let fs = sd_from_posix(&PosixView::new(1000, 100, 0o750, true));
        let posix = facts();
        let v4 = decode(&encode_v4(&sd, &posix, Some(&fs), 0).unwrap()).unwrap();
        assert_eq!(
            check(&v4, Some(&posix), None, false),
            Trust::Stored(StoredBecause::SysAclHashMatches)
        );
        let chmodded = PosixView {
            mode: 0o040_700,
            ..posix.clone()
        };
        assert_eq!(
            check(&v4, Some(&chmodded), Some(&fs), false),
            Trust::Stored(StoredBecause::SdHashMatches)
        );
        let other_fs = sd_from_posix(&PosixView::new(1000, 100, 0o700, true));
        assert_eq!(
            check(&v4, Some(&chmodded), Some(&other_fs), false),
            Trust::FileSystem(FileSystemBecause::HashMismatch)
        );
        assert_eq!(
            check(&v4, None, None, false),
            Trust::FileSystem(FileSystemBecause::HashMismatch)
        );
        assert_eq!(
            check(&v4, Some(&chmodded), None, true),
            Trust::Stored(StoredBecause::SystemAclsIgnored)
        );
        let none = StoredNtAcl {
            sd: sd.clone(),
            hashes: NtAclHashes::V3 {
                hash_type: HASH_TYPE_NONE,
                hash: [0; HASH_SIZE],
            },
        };
        assert_eq!(
            check(&none, Some(&posix), Some(&fs), false),
            Trust::FileSystem(FileSystemBecause::UnknownHashType(HASH_TYPE_NONE))
        );
        for hashes in [NtAclHashes::V1, NtAclHashes::V2 { hash: [0; 16] }] {
            let s = StoredNtAcl {
                sd: sd.clone(),
                hashes,
            };
            assert_eq!(s.hash_type(), HASH_TYPE_NONE);
            assert_eq!(
                check(&s, None, None, false),
                Trust::Stored(StoredBecause::Unhashed)
            );
        }
        // A v3 blob has no sys ACL hash: only the SD hash counts.
        let v3 = StoredNtAcl {
            sd,
            hashes: NtAclHashes::V3 {
                hash_type: HASH_TYPE_SHA256,
                hash: sd_hash(&fs).unwrap(),
            },
        };
        assert!(check(&v3, None, Some(&fs), false).uses_stored());
        assert!(!check(&v3, Some(&posix), None, false).uses_stored());
    }

    #[test]
    fn descriptor_bytes_are_standalone_self_relative() {
        let sd = sample_sd();
        let s = decode(
            &StoredNtAcl {
                sd: sd.clone(),
                hashes: NtAclHashes::V1,
            }
            .encode()
            .unwrap(),
        )
        .unwrap();
        let bytes = s.descriptor_bytes().unwrap();
        assert_eq!(SecurityDescriptor::decode(&bytes).unwrap(), s.sd);
        assert_eq!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()), 20);
    }
}
