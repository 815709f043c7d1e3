//! `security.NTACL` blobs written by Debian's Samba 4.17.12 (smbd with
//! `vfs objects = acl_xattr` on ext4, ACLs set with `smbcacls`), decoded,
//! re-encoded byte for byte, and their hashes recomputed from the POSIX state
//! recorded with them (`stat`, and the `system.posix_acl_*` xattrs as
//! (tag, perm) in xattr order), given as a [`PosixView`].
//!
//! # How the vectors were captured
//!
//! A private smbd (config as `lib_samba_start` in scripts/lib/servers.sh, on
//! 127.0.0.1:445 because `smbcacls` has no port option), share `ntacl` at
//! /tmp/rsntacl/share with `vfs objects = acl_xattr`, Unix user rsntacl1
//! (uid 1004, gid 1006; passdb SID S-1-5-21-984395495-3918677088-2256491571-1000)
//! and a second user rsntacl2 (uid 1005) and group rsntaclg (gid 1008) known
//! only by their S-1-22 SIDs:
//!
//! ```text
//! smbclient //127.0.0.1/ntacl -U rsntacl1%... -c 'put /etc/hostname f1.txt; mkdir d1'
//! smbcacls //127.0.0.1/ntacl f2.txt -U ... --add "ACL:S-1-22-1-1005:ALLOWED/0x0/FULL"
//! smbcacls //127.0.0.1/ntacl f2.txt -U ... --add "ACL:S-1-22-1-1005:ALLOWED/0x0/READ"
//! smbcacls //127.0.0.1/ntacl file_explicit.txt -U ... --set "REVISION:1,OWNER:$O,
//!     GROUP:S-1-22-2-1008,ACL:$O:ALLOWED/0x0/FULL,ACL:S-1-22-2-1008:DENIED/0x0/0x00000116,
//!     ACL:S-1-22-1-1005:ALLOWED/0x0/READ,ACL:S-1-1-0:ALLOWED/0x0/0x001200a0"
//! smbcacls //127.0.0.1/ntacl dir_inherit -U ... --set "REVISION:1,OWNER:$O,GROUP:S-1-22-2-1006,
//!     ACL:$O:ALLOWED/0x3/FULL,ACL:S-1-3-0:ALLOWED/0xb/FULL,ACL:S-1-22-1-1005:ALLOWED/0x3/CHANGE,
//!     ACL:S-1-22-2-1008:ALLOWED/0x2/READ,ACL:S-1-1-0:ALLOWED/0x1/READ"
//! smbclient ... -c 'cd dir_inherit; put /etc/hostname child.txt; mkdir subdir'
//! smbcacls //127.0.0.1/ntacl dir_ai --sddl -U ... --set "O:${O}G:S-1-22-2-1008D:PAI(A;OICI;
//!     0x001f01ff;;;$O)(A;OICIIO;0x001f01ff;;;S-1-3-0)(D;OICI;0x00000116;;;S-1-22-1-1005)
//!     (A;OICI;0x001200a9;;;S-1-22-2-1008)(A;CI;0x001200a9;;;S-1-1-0)"  (stored P, no AI; child.txt, subdir)
//! smbcacls //127.0.0.1/ntacl dir_logged --sddl -U ... --set "O:${O}G:S-1-22-2-1006D:P(A;OICI;
//!     0x001f01ff;;;$O)(A;OICIIO;0x001f01ff;;;S-1-3-0)(A;OICI;0x001200a9;;;S-1-22-1-1005)
//!     (D;CI;0x00000116;;;S-1-22-2-1008)(A;OI;0x001200a9;;;S-1-1-0)"   (with log level = 10)
//! getfattr -n security.NTACL -e hex FILE; stat; getfattr -n system.posix_acl_access -e hex FILE
//! ```
//!
//! The v3 vector comes from a second share with `acl_xattr:ignore system acls
//! = yes` (`smbcacls --set` on v3file.txt); the v1 vectors from Samba's own
//! `samba.ntacls.setntacl(..., use_ntvfs=True)` (the `samba-tool ntacl set
//! --use-ntvfs` code path); the v2 vector from Samba's Python NDR bindings
//! (`xattr.NTACL(version=2)`), since no current Samba writes v2. Samba's
//! Python `ndr_pack(ndr_unpack(blob))` gives every blob back unchanged.
//!
//! The descriptors Samba's POSIX layer produced when storing (the input of
//! the `hash` field) were read from smbd's level-10 log ("storing hash in
//! xattr sd based on system ACL and:" followed by the NDR print of
//! `pdesc_next`): [`f2_posix_mapped_sd`] and [`dir_logged_posix_mapped_sd`].
//!
//! # What Samba does with blobs ringshare writes (manual check)
//!
//! Same smbd and share, 2026-11-25. Files created over SMB by rsntacl1
//! (`smbclient -c 'put /etc/hostname m_v4.txt; ...; mkdir m_v4dir'`), then for
//! each file its POSIX facts fed to [`print_blobs_for_the_manual_samba_check`]
//! and one of the printed blobs written over Samba's own:
//!
//! ```text
//! export NTACL_UID=$(stat -c %u F) NTACL_GID=$(stat -c %g F)
//! export NTACL_MODE=$(printf %o 0x$(stat -c %f F)) NTACL_OWNER=$O
//! export NTACL_ACCESS=<getfattr -n system.posix_acl_access -e hex F, without 0x>
//! export NTACL_DEFAULT=<same for system.posix_acl_default, empty on files>
//! cargo test -p ringshare-acl --test ntacl_samba print_blobs_for_the_manual_samba_check \
//!     -- --ignored --nocapture                     # prints v4=..., v4-stale=..., ...
//! setfattr -n security.NTACL -v 0x<hex> F
//! smbcacls -s client.conf -U rsntacl1%... //127.0.0.1/ntacl F --sddl
//! ```
//!
//! The descriptor written ([`manual_sd`]) is one Samba's POSIX mapping never
//! gives: group BUILTIN\Users (BU), protected, a deny ACE for S-1-22-1-1005.
//! What `smbcacls --sddl` then showed ($O = rsntacl1's SID):
//!
//! ```text
//! before, Samba's own blob on m_v4.txt:
//!   O:$O G:S-1-5-21-...-513 D:(A;;0x001f01ff;;;$O)(A;;0x001200a9;;;S-1-5-21-...-513)(A;;0x001200a9;;;WD)
//! m_v4.txt  v4, facts as they are:          O:$O G:BU D:P(D;;RPCRDCLC;;;S-1-22-1-1005)(A;;0x001200a9;;;BU)(A;;0x001f01ff;;;$O)
//! m_v4dir   v4, directory with default ACL: O:$O G:BU D:P(D;OICI;RPCRDCLC;;;S-1-22-1-1005)(A;OICI;0x001200a9;;;BU)
//!                                               (A;OICI;0x001f01ff;;;$O)(A;OICIIO;0x001f01ff;;;CO)
//! m_v1.txt  v1:                             O:$O G:BU D:P(D;;RPCRDCLC;;;S-1-22-1-1005)(A;;0x001200a9;;;BU)(A;;0x001f01ff;;;$O)
//! m_stale.txt  v4 hashed with mode ^ 0o001: O:$O G:S-1-22-2-1006 D:(A;;0x001f01ff;;;$O)(A;;0x001200a9;;;S-1-22-2-1006)
//!                                               (A;;0x001200a9;;;S-1-22-2-1006)(A;;0x001f01ff;;;$O)(A;;0x001200a9;;;WD)
//! m_none.txt   v3 with hash type NONE:      (the same POSIX-mapped descriptor as m_stale.txt)
//! m_chmod.txt  v4, then `chmod o-x` on the server: the POSIX-mapped descriptor (WD now 0x00120089)
//! ```
//!
//! So Samba shows a v4 blob from [`encode_v4`] (and a v1 blob) as stored,
//! and falls back to its POSIX mapping for a stale sys ACL hash, for hash
//! type NONE, and after a local chmod, as `vfs_acl_common.c` says. It also
//! enforces and inherits the stored ACL:
//!
//! ```text
//! m_noread.txt  v4-owner-no-read (owner gets only RC|WD|WO; POSIX still rwx for the owner):
//!   smbclient -c 'get m_noread.txt /dev/null'   ->  NT_STATUS_ACCESS_DENIED opening remote file
//!   smbclient -c 'get m_v4.txt /dev/null'       ->  getting file \m_v4.txt of size 3
//! smbclient -c 'cd m_v4dir; put /etc/hostname kid.txt'; smbcacls m_v4dir/kid.txt:
//!   O:$O G:S-1-5-21-...-513 D:(D;;RPCRDCLC;;;S-1-22-1-1005)(A;;0x001200a9;;;BU)(A;;0x001f01ff;;;$O)
//! smbcacls m_v4.txt --add "ACL:S-1-22-1-1005:ALLOWED/0x0/READ"  (Samba rewrites the blob, keeping ours):
//!   O:$O G:BU D:P(D;;RPCRDCLC;;;S-1-22-1-1005)(A;;0x001200a9;;;BU)(A;;0x001200a9;;;S-1-22-1-1005)(A;;0x001f01ff;;;$O)
//! ```
//!
//! A blob Samba cannot parse is not skipped but fails the file: after
//! `setfattr -n security.NTACL -v 0x0500050000000200 m_bad.txt` (version 5),
//! `smbclient -c 'get m_bad.txt /dev/null'` gives `NT_STATUS_REVISION_MISMATCH
//! opening remote file` and `smbcacls` `NT_STATUS_INVALID_PARAMETER`. Hence
//! [`encode_v4`] refuses what Samba could not read (more than 2000 ACEs).

use ringshare_acl::ntacl::{
    check, decode, encode_v4, sd_hash, sys_acl_hash, FileSystemBecause, NtAclHashes, StoredBecause,
    StoredNtAcl, Trust, HASH_SIZE, HASH_TYPE_NONE, HASH_TYPE_SHA256, POSIX_ACL_DESCRIPTION,
};
use ringshare_acl::posix::{sd_from_posix, AclEntry, AclTag, PosixAcl, PosixView};
use ringshare_wire::consts::AccessMask;
use ringshare_wire::security::{
    Ace, AceType, Acl, SecurityDescriptor, Sid, CONTAINER_INHERIT_ACE, INHERIT_ONLY_ACE,
    OBJECT_INHERIT_ACE, SE_DACL_AUTO_INHERITED, SE_DACL_PRESENT, SE_DACL_PROTECTED,
    SE_SELF_RELATIVE,
};
use AclTag::{Group, GroupObj, Mask, Other, User, UserObj};

/// `S_IFMT` and `S_IFDIR` from `<sys/stat.h>`.
const S_IFMT: u32 = 0o170_000;
const S_IFDIR: u32 = 0o040_000;
/// rsntacl1 in the private passdb.
const OWNER: &str = "S-1-5-21-984395495-3918677088-2256491571-1000";
/// rsntacl1's primary group in the private passdb ("None").
const OWNER_GROUP: &str = "S-1-5-21-984395495-3918677088-2256491571-513";

/// A captured blob and the POSIX state of its file at capture time.
struct Vector {
    blob: &'static str,
    uid: u32,
    gid: u32,
    /// `st_mode`.
    mode: u32,
    /// `system.posix_acl_access` (tag, perm) in xattr order; empty: none.
    access: &'static [(AclTag, u8)],
    /// `system.posix_acl_default`, the same way.
    default: &'static [(AclTag, u8)],
}

impl Vector {
    fn bytes(&self) -> Vec<u8> {
        hex::decode(self.blob).unwrap()
    }

    fn decoded(&self) -> StoredNtAcl {
        decode(&self.bytes()).unwrap()
    }

    fn facts(&self) -> PosixView {
        let acl = |l: &[(AclTag, u8)]| {
            (!l.is_empty()).then(|| {
                PosixAcl::new(
                    l.iter()
                        .map(|&(tag, perm)| AclEntry::new(tag, perm))
                        .collect(),
                )
            })
        };
        PosixView {
            uid: self.uid,
            gid: self.gid,
            mode: self.mode,
            is_dir: self.mode & S_IFMT == S_IFDIR,
            access_acl: acl(self.access),
            default_acl: acl(self.default),
        }
    }
}

/// `share/f1.txt`
const F1_FILE_CREATED: Vector = Vector {
    blob: concat!(
        "0400040000000200040002000100a02889dfe197ad4f5f12c7e961b4a8e94c06eab90789b6d59abb139cce7a",
        "75870000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "d29bc059027ddd010cbab11172f112f1816403aaff1d1accac193e2dda420303bb3b243da182f77b00000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f8601020000020064000300000000002400ff011f00010500000000000515000000",
        "e7aeac3a604492e933547f86e803000000002400a9001200010500000000000515000000e7aeac3a604492e9",
        "33547f860102000000001400a9001200010100000000000100000000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[],
};

/// `share/d1`
const D1_DIR_CREATED: Vector = Vector {
    blob: concat!(
        "040004000000020004000200010009bcae58212737f8fea05f0f8b5f0415b012b487075559b18f6ac1c62030",
        "c16e0000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "d263c159027ddd01dab4e066c8c5920e7d63fb48a9f3b2835e41b1956863752dc46f165c5fea709800000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f860102000002008c000500000000002400ff011f00010500000000000515000000",
        "e7aeac3a604492e933547f86e8030000000b1400ff011f0001010000000000030000000000002400a9001200",
        "010500000000000515000000e7aeac3a604492e933547f8601020000000b1400a90012000101000000000003",
        "0100000000031400a9001200010100000000000100000000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
};

/// `share/f2.txt`
const F2_FILE_ADDED_ACE: Vector = Vector {
    blob: concat!(
        "0400040000000200040002000100572baef72b43b3f73b01a289a52f3a7ca2998a6995cacc674f11b8031f74",
        "44ad0000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "f8cbc2d3027ddd01122c3ce59ffb836e617fe4e095ed9bff9e83dda22adbfd57bc4d4c5bf6ec353200000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f8601020000020094000500000000001400a9001200010100000000000100000000",
        "00001800a9001200010200000000001601000000ed03000000001800ff011f00010200000000001601000000",
        "ed03000000002400a9001200010500000000000515000000e7aeac3a604492e933547f860102000000002400",
        "ff011f00010500000000000515000000e7aeac3a604492e933547f86e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[],
};

/// `share/file_explicit.txt`
const FILE_EXPLICIT: Vector = Vector {
    blob: concat!(
        "0400040000000200040002000100453b2866ef1068e044c67ff03e90ead7d0218ebfa5417c40a13925ca7111",
        "62c40000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "34a70c27037ddd01ed23bd0615ed479fc01e94d96f7c4175c6fab78826542f02b075d48878c1300100000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "e0000000010500000000000515000000e7aeac3a604492e933547f86e8030000010200000000001602000000",
        "f003000003007000040000000100180016010000010200000000001602000000f003000000001400a0001200",
        "01010000000000010000000000001800a9001200010200000000001601000000ed03000000002400ff011f00",
        "010500000000000515000000e7aeac3a604492e933547f86e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_771,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 5),
        (GroupObj, 1),
        (Group(1006), 1),
        (Group(1008), 1),
        (Mask, 7),
        (Other, 1),
    ],
    default: &[],
};

/// `share/dir_inherit`
const DIR_INHERIT: Vector = Vector {
    blob: concat!(
        "0400040000000200040002000100f586b0b9858b823d2ae44a5c01e07f82b11a3aa402e7ed50f4367e2178f5",
        "038b0000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "48f52227037ddd019a347d781447460c1540bc6a840ca4e473f6a1dfb0eae872f495ba109f12486f00000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "e0000000010500000000000515000000e7aeac3a604492e933547f86e8030000010200000000001602000000",
        "ee030000030084000500000000011400a9001200010100000000000100000000000b1400ff011f0001010000",
        "000000030000000000031800ff011300010200000000001601000000ed03000000021800a900120001020000",
        "0000001602000000f003000000032400ff011f00010500000000000515000000e7aeac3a604492e933547f86",
        "e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 7),
        (GroupObj, 0),
        (Group(1006), 0),
        (Mask, 7),
        (Other, 0),
    ],
};

/// `share/dir_inherit/child.txt`
const DIR_INHERIT_CHILD_FILE: Vector = Vector {
    blob: concat!(
        "0400040000000200040002000100572baef72b43b3f73b01a289a52f3a7ca2998a6995cacc674f11b8031f74",
        "44ad0000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "98e93327037ddd01122c3ce59ffb836e617fe4e095ed9bff9e83dda22adbfd57bc4d4c5bf6ec353200000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f8601020000020058000300000000001400a9001200010100000000000100000000",
        "00002400ff011f00010500000000000515000000e7aeac3a604492e933547f86e803000000001800ff011300",
        "010200000000001601000000ed030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[],
};

/// `share/dir_inherit/subdir`
const DIR_INHERIT_SUBDIR: Vector = Vector {
    blob: concat!(
        "040004000000020004000200010004ab08ea372ce490ce01be67d856d72aad5b8ac9a30d1868b1b9bb33bc28",
        "e9e80000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "ca483427037ddd015b420e9498ae8b7b239d74c875c816f1f4c2e581fa99829b46abe7e442c2a1dc00000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f86010200000200a8000600000000091400a9001200010100000000000100000000",
        "00002400ff011f00010500000000000515000000e7aeac3a604492e933547f86e8030000000b1400ff011f00",
        "01010000000000030000000000031800ff011300010200000000001601000000ed03000000021800a9001200",
        "010200000000001602000000f003000000032400ff011f00010500000000000515000000e7aeac3a604492e9",
        "33547f86e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_770,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 7),
        (GroupObj, 0),
        (Group(1006), 0),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 0),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 7),
        (GroupObj, 0),
        (Group(1006), 0),
        (Mask, 7),
        (Other, 0),
    ],
};

/// `share/dir_ai`
const DIR_PROTECTED: Vector = Vector {
    blob: concat!(
        "04000400000002000400020001004e80158d298b656f89b5f0a15558ccf38129ab5db1d7aeb6074b02d88b2a",
        "3bd40000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "c2059c2d037ddd01fa2006b8926ad768b500b9e862db8a55ab788ea69e2e67d58c93e2427ad6bdbe00000000",
        "0000000000000000000000000000000000000000000000000000000001000490b4000000d000000000000000",
        "e0000000010500000000000515000000e7aeac3a604492e933547f86e8030000010200000000001602000000",
        "f003000004008400050000000103180016010000010200000000001601000000ed03000000021400a9001200",
        "010100000000000100000000000b1400ff011f0001010000000000030000000000031800a900120001020000",
        "0000001602000000f003000000032400ff011f00010500000000000515000000e7aeac3a604492e933547f86",
        "e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 5),
        (GroupObj, 5),
        (Group(1006), 5),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 0),
        (GroupObj, 0),
        (Group(1006), 0),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 0),
    ],
};

/// `share/dir_ai/child.txt`
const DIR_PROTECTED_CHILD_FILE: Vector = Vector {
    blob: concat!(
        "04000400000002000400020001002cfae4fa28de9db2485f7c3c9dca100fba68cdbccf1be5a568499026c748",
        "a7b10000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "0c5ee52d037ddd0153ae48e65fff153eb266abfdf7aece52b87131ba8b82463f3c8f757712cd80a200000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f860102000002005c00030000000100180016010000010200000000001601000000",
        "ed03000000002400ff011f00010500000000000515000000e7aeac3a604492e933547f86e803000000001800",
        "a9001200010200000000001602000000f0030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_770,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 0),
        (GroupObj, 0),
        (Group(1006), 0),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 0),
    ],
    default: &[],
};

/// `share/dir_ai/subdir`
const DIR_PROTECTED_SUBDIR: Vector = Vector {
    blob: concat!(
        "04000400000002000400020001004e80158d298b656f89b5f0a15558ccf38129ab5db1d7aeb6074b02d88b2a",
        "3bd40000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "a2e0e52d037ddd01fa2006b8926ad768b500b9e862db8a55ab788ea69e2e67d58c93e2427ad6bdbe00000000",
        "0000000000000000000000000000000000000000000000000000000001000480b4000000d000000000000000",
        "ec000000010500000000000515000000e7aeac3a604492e933547f86e8030000010500000000000515000000",
        "e7aeac3a604492e933547f86010200000200a800060000000103180016010000010200000000001601000000",
        "ed03000000021400a900120001010000000000010000000000002400ff011f00010500000000000515000000",
        "e7aeac3a604492e933547f86e8030000000b1400ff011f0001010000000000030000000000031800a9001200",
        "010200000000001602000000f003000000032400ff011f00010500000000000515000000e7aeac3a604492e9",
        "33547f86e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 5),
        (GroupObj, 5),
        (Group(1006), 5),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 0),
        (GroupObj, 0),
        (Group(1006), 0),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 0),
    ],
};

/// `share/dir_logged`
const DIR_LOGGED: Vector = Vector {
    blob: concat!(
        "04000400000002000400020001001434104d81c2f2a3ea28c3af014fa90baec29f5fcddd1dd7ab4cbd3e667e",
        "808b0000000000000000000000000000000000000000000000000000000000000000706f7369785f61636c00",
        "5c29dbdf037ddd0139a5afa2b860e36f86536d53c99f8afc258399a71d6c4edce8b550267cf948b600000000",
        "0000000000000000000000000000000000000000000000000000000001000490b4000000d000000000000000",
        "e0000000010500000000000515000000e7aeac3a604492e933547f86e8030000010200000000001602000000",
        "ee03000004008400050000000102180016010000010200000000001602000000f003000000011400a9001200",
        "010100000000000100000000000b1400ff011f0001010000000000030000000000031800a900120001020000",
        "0000001601000000ed03000000032400ff011f00010500000000000515000000e7aeac3a604492e933547f86",
        "e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 5),
        (GroupObj, 5),
        (Group(1006), 5),
        (Group(1008), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (User(1005), 5),
        (GroupObj, 0),
        (Group(1006), 0),
        (Mask, 7),
        (Other, 0),
    ],
};

/// `share_ign/v3file.txt`
const V3_IGNORE_SYSTEM_ACLS: Vector = Vector {
    blob: concat!(
        "0300030000000200040002000100000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000000000000100049064000000",
        "800000000000000090000000010500000000000515000000e7aeac3a604492e933547f86e803000001020000",
        "0000001602000000f00300000400580003000000010014001601000001010000000000010000000000001800",
        "a9001200010200000000001601000000ed03000000002400ff011f00010500000000000515000000e7aeac3a",
        "604492e933547f86e8030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_666,
    access: &[],
    default: &[],
};

/// `share/v1file.txt`
const V1_FILE: Vector = Vector {
    blob: concat!(
        "0100010000000200010004901c000000380000000000000048000000010500000000000515000000e7aeac3a",
        "604492e933547f86e8030000010200000000001602000000f0030000040058000300000000002400ff011f00",
        "010500000000000515000000e7aeac3a604492e933547f86e803000000001800a90012000102000000000016",
        "01000000ed0300000100140016010000010100000000000100000000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[],
};

/// `share/v1dir`
const V1_DIR: Vector = Vector {
    blob: concat!(
        "0100010000000200010004841c000000380000000000000048000000010500000000000515000000e7aeac3a",
        "604492e933547f86e8030000010200000000001602000000ee030000040054000300000000032400ff011f00",
        "010500000000000515000000e7aeac3a604492e933547f86e8030000000b1400ff011f000101000000000003",
        "0000000000131400a9001200010100000000000100000000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o040_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
};

/// `share/v2file.txt`
const V2_FILE: Vector = Vector {
    blob: concat!(
        "020002000000020004000200000102030405060708090a0b0c0d0e0f01000490300000004c00000000000000",
        "5c000000010500000000000515000000e7aeac3a604492e933547f86e8030000010200000000001602000000",
        "f0030000020044000200000000002400ff011f00010500000000000515000000e7aeac3a604492e933547f86",
        "e803000000001800a9001200010200000000001601000000ed030000",
    ),
    uid: 1004,
    gid: 1006,
    mode: 0o100_775,
    access: &[
        (UserObj, 7),
        (User(1004), 7),
        (GroupObj, 5),
        (Group(1006), 5),
        (Mask, 7),
        (Other, 5),
    ],
    default: &[],
};

const V4_VECTORS: &[(&str, &Vector)] = &[
    ("f1.txt", &F1_FILE_CREATED),
    ("d1", &D1_DIR_CREATED),
    ("f2.txt", &F2_FILE_ADDED_ACE),
    ("file_explicit.txt", &FILE_EXPLICIT),
    ("dir_inherit", &DIR_INHERIT),
    ("dir_inherit/child.txt", &DIR_INHERIT_CHILD_FILE),
    ("dir_inherit/subdir", &DIR_INHERIT_SUBDIR),
    ("dir_ai", &DIR_PROTECTED),
    ("dir_ai/child.txt", &DIR_PROTECTED_CHILD_FILE),
    ("dir_ai/subdir", &DIR_PROTECTED_SUBDIR),
    ("dir_logged", &DIR_LOGGED),
];

const OTHER_VECTORS: &[(&str, &Vector)] = &[
    ("v3file.txt", &V3_IGNORE_SYSTEM_ACLS),
    ("v1file.txt", &V1_FILE),
    ("v1dir", &V1_DIR),
    ("v2file.txt", &V2_FILE),
];

fn sid(s: &str) -> Sid {
    s.parse().unwrap()
}

fn ace(allow: bool, flags: u8, mask: u32, trustee: &str) -> Ace {
    if allow {
        Ace::allow(sid(trustee), AccessMask(mask), flags)
    } else {
        Ace::deny(sid(trustee), AccessMask(mask), flags)
    }
}

/// (allowed, flags, mask, trustee) of each DACL entry.
fn dacl_summary(sd: &SecurityDescriptor) -> Vec<(bool, u8, u32, String)> {
    sd.dacl
        .as_ref()
        .unwrap()
        .aces
        .iter()
        .map(|a| {
            assert!(a.ace_type == AceType::ACCESS_ALLOWED || a.ace_type == AceType::ACCESS_DENIED);
            (
                a.ace_type == AceType::ACCESS_ALLOWED,
                a.flags,
                a.mask().unwrap().0,
                a.sid().unwrap().to_string(),
            )
        })
        .collect()
}

fn summary(l: &[(bool, u8, u32, &str)]) -> Vec<(bool, u8, u32, String)> {
    l.iter()
        .map(|&(a, f, m, s)| (a, f, m, s.to_owned()))
        .collect()
}

/// The descriptor Samba's POSIX layer gave for f2.txt right after the last
/// `smbcacls --add`, from smbd's level-10 log (type 0x9004, NT4 ACL revision,
/// no SACL).
fn f2_posix_mapped_sd() -> SecurityDescriptor {
    SecurityDescriptor {
        control: 0x9004,
        rm_control: 0,
        owner: Some(sid(OWNER)),
        group: Some(sid("S-1-22-2-1006")),
        sacl: None,
        dacl: Some(Acl::new(vec![
            ace(true, 0, 0x001f_01ff, OWNER),
            ace(true, 0, 0x0012_00a9, "S-1-22-2-1006"),
            ace(true, 0, 0x0012_00a9, "S-1-22-2-1006"),
            ace(true, 0, 0x001f_01ff, "S-1-22-1-1005"),
            ace(true, 0, 0x001f_01ff, OWNER),
            ace(true, 0, 0x0012_00a9, "S-1-1-0"),
        ])),
    }
}

/// The same for dir_logged (a directory with a default ACL: the
/// inheritable entries come out as OI|CI|IO ACEs, some with no rights).
fn dir_logged_posix_mapped_sd() -> SecurityDescriptor {
    SecurityDescriptor {
        control: 0x9004,
        rm_control: 0,
        owner: Some(sid(OWNER)),
        group: Some(sid("S-1-22-2-1006")),
        sacl: None,
        dacl: Some(Acl::new(vec![
            ace(true, 3, 0x001f_01ff, OWNER),
            ace(true, 3, 0x0012_00a9, "S-1-22-1-1005"),
            ace(true, 0, 0x0012_00a9, "S-1-22-2-1008"),
            ace(true, 0, 0x0012_00a9, "S-1-22-2-1006"),
            ace(true, 0, 0x0012_00a9, "S-1-22-2-1006"),
            ace(true, 0, 0x001f_01ff, OWNER),
            ace(true, 0, 0x0012_00a9, "S-1-1-0"),
            ace(true, 11, 0x001f_01ff, "S-1-3-0"),
            ace(true, 11, 0, "S-1-3-1"),
            ace(true, 11, 0, "S-1-22-2-1006"),
            ace(true, 11, 0, "S-1-1-0"),
        ])),
    }
}

#[test]
fn every_blob_samba_wrote_decodes_and_re_encodes_byte_for_byte() {
    for (name, v) in V4_VECTORS.iter().chain(OTHER_VECTORS) {
        let stored = v.decoded();
        assert_eq!(stored.encode().unwrap(), v.bytes(), "{name}");
        assert!(stored.sd.control & SE_SELF_RELATIVE != 0, "{name}");
        assert!(stored.descriptor_bytes().is_ok(), "{name}");
    }
}

#[test]
fn a_v4_blob_written_by_samba_decodes_to_its_descriptor() {
    let s = FILE_EXPLICIT.decoded();
    assert_eq!(s.version(), 4);
    assert_eq!(s.hash_type(), HASH_TYPE_SHA256);
    assert_eq!(s.description(), Some(POSIX_ACL_DESCRIPTION));
    assert_eq!(s.time(), Some(134_401_016_384_497_460));
    assert_eq!(s.sd.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
    assert_eq!(s.sd.owner, Some(sid(OWNER)));
    assert_eq!(s.sd.group, Some(sid("S-1-22-2-1008")));
    assert_eq!(s.sd.sacl, None);
    // smbcacls builds its ACLs with AclRevision 3 (ACL_REVISION3); Samba
    // stores whatever revision the client sent.
    assert_eq!(s.sd.dacl.as_ref().unwrap().revision, 3);
    // smbcacls sends the ACEs in canonical order (deny first); Samba stores
    // them as sent.
    assert_eq!(
        dacl_summary(&s.sd),
        summary(&[
            (false, 0, 0x0000_0116, "S-1-22-2-1008"),
            (true, 0, 0x0012_00a0, "S-1-1-0"),
            (true, 0, 0x0012_00a9, "S-1-22-1-1005"),
            (true, 0, 0x001f_01ff, OWNER),
        ])
    );
    // The hash fields are 64 bytes: SHA-256 then 32 zero bytes.
    assert_eq!(&s.hash().unwrap()[32..], &[0; 32]);
    assert_eq!(&s.sys_acl_hash().unwrap()[32..], &[0; 32]);
}

#[test]
fn a_directory_blob_keeps_protection_and_inheritance_flags() {
    let s = DIR_PROTECTED.decoded();
    assert_eq!(
        s.sd.control,
        SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_PROTECTED
    );
    let oi_ci = OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE;
    assert_eq!(
        dacl_summary(&s.sd),
        summary(&[
            (false, oi_ci, 0x0000_0116, "S-1-22-1-1005"),
            (true, CONTAINER_INHERIT_ACE, 0x0012_00a9, "S-1-1-0"),
            (true, oi_ci | INHERIT_ONLY_ACE, 0x001f_01ff, "S-1-3-0"),
            (true, oi_ci, 0x0012_00a9, "S-1-22-2-1008"),
            (true, oi_ci, 0x001f_01ff, OWNER),
        ])
    );
    // A subdirectory created over SMB inherits them (Samba does not mark
    // them INHERITED_ACE unless the parent is auto-inherited), plus an
    // explicit ACE for its creator.
    let sub = DIR_PROTECTED_SUBDIR.decoded();
    assert_eq!(sub.sd.control, SE_SELF_RELATIVE | SE_DACL_PRESENT);
    assert_eq!(sub.sd.group, Some(sid(OWNER_GROUP)));
    assert_eq!(sub.sd.dacl.as_ref().unwrap().aces.len(), 6);
    // A file created there keeps only the object-inheritable ACEs, flags
    // cleared.
    let child = DIR_PROTECTED_CHILD_FILE.decoded();
    assert_eq!(
        dacl_summary(&child.sd),
        summary(&[
            (false, 0, 0x0000_0116, "S-1-22-1-1005"),
            (true, 0, 0x001f_01ff, OWNER),
            (true, 0, 0x0012_00a9, "S-1-22-2-1008"),
        ])
    );
    // The v1 directory written by Samba's tooling is auto-inherited, with an
    // inherited ACE, and an ADS-revision ACL.
    let v1 = V1_DIR.decoded();
    assert_eq!(
        v1.sd.control,
        SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_AUTO_INHERITED
    );
    assert_eq!(v1.sd.dacl.as_ref().unwrap().revision, Acl::REVISION_DS);
    assert_eq!(
        dacl_summary(&v1.sd)[2],
        (true, oi_ci | 0x10, 0x0012_00a9, "S-1-1-0".to_owned())
    );
}

#[test]
fn samba_stores_the_sha256_of_the_posix_acl_wrapper_as_sys_acl_hash() {
    for (name, v) in V4_VECTORS {
        let s = v.decoded();
        let facts = v.facts();
        assert_eq!(s.sys_acl_hash(), Some(&sys_acl_hash(&facts)), "{name}");
        assert_eq!(
            check(&s, Some(&facts), None, false),
            Trust::Stored(StoredBecause::SysAclHashMatches),
            "{name}"
        );
    }
}

/// An xattr value holding `acl`'s entries in the order given (what
/// [`PosixAcl::encode`] does not do: it sorts).
fn xattr_in_order(acl: &PosixAcl) -> Vec<u8> {
    let mut out = PosixAcl::VERSION.to_le_bytes().to_vec();
    for e in &acl.entries {
        out.extend_from_slice(&e.tag.code().to_le_bytes());
        out.extend_from_slice(&u16::from(e.perm).to_le_bytes());
        out.extend_from_slice(&e.tag.id().unwrap_or(u32::MAX).to_le_bytes());
    }
    out
}

#[test]
fn the_sys_acl_hash_is_samba_s_whatever_order_the_xattr_holds_the_entries_in() {
    for (name, v) in V4_VECTORS {
        let s = v.decoded();
        let mut posix = v.facts();
        for acl in [&mut posix.access_acl, &mut posix.default_acl]
            .into_iter()
            .flatten()
        {
            acl.entries.reverse();
            // Read back from an xattr written in that order: decode keeps it.
            *acl = PosixAcl::decode(&xattr_in_order(acl)).unwrap();
            assert_eq!(acl.entries[0].tag, Other, "{name}");
        }
        assert_eq!(s.sys_acl_hash(), Some(&sys_acl_hash(&posix)), "{name}");
        assert!(check(&s, Some(&posix), None, false).uses_stored(), "{name}");
    }
}

#[test]
fn samba_sd_hash_covers_the_posix_mapped_descriptor_not_the_stored_one() {
    for (name, v, fs) in [
        ("f2.txt", &F2_FILE_ADDED_ACE, f2_posix_mapped_sd()),
        // Same POSIX state and owner as f2.txt, so the same mapped
        // descriptor, although its stored NT ACL differs.
        (
            "dir_inherit/child.txt",
            &DIR_INHERIT_CHILD_FILE,
            f2_posix_mapped_sd(),
        ),
        ("dir_logged", &DIR_LOGGED, dir_logged_posix_mapped_sd()),
    ] {
        let s = v.decoded();
        assert_eq!(s.hash(), Some(&sd_hash(&fs).unwrap()), "{name}");
        assert_ne!(s.hash(), Some(&sd_hash(&s.sd).unwrap()), "{name}");
        // With the POSIX state changed, the SD hash still vouches for the
        // blob as long as the mapped descriptor is the same.
        let mut changed = v.facts();
        changed.mode ^= 0o001;
        assert_eq!(
            check(&s, Some(&changed), Some(&fs), false),
            Trust::Stored(StoredBecause::SdHashMatches),
            "{name}"
        );
    }
}

#[test]
fn one_posix_view_gives_both_samba_s_mapped_descriptor_and_its_sys_acl_hash() {
    // dir_logged: the descriptor ringshare's POSIX mapping gives for the
    // directory is the one Samba logged, once uid 1004 is shown by Samba's
    // passdb SID instead of S-1-22-1-1004, so both v4 hashes come out of the
    // same PosixView.
    let posix = DIR_LOGGED.facts();
    let mut fs = sd_from_posix(&posix);
    let (unix, passdb) = (Sid::unix_user(1004), sid(OWNER));
    if fs.owner.as_ref() == Some(&unix) {
        fs.owner = Some(passdb.clone());
    }
    for a in fs.dacl.as_mut().unwrap().aces.iter_mut() {
        if a.sid() == Some(&unix) {
            *a = Ace::allow(passdb.clone(), a.mask().unwrap(), a.flags);
        }
    }
    assert_eq!(
        dacl_summary(&fs),
        dacl_summary(&dir_logged_posix_mapped_sd())
    );
    let s = DIR_LOGGED.decoded();
    assert_eq!(s.hash(), Some(&sd_hash(&fs).unwrap()));
    let ours = encode_v4(&s.sd, &posix, Some(&fs), s.time().unwrap()).unwrap();
    assert_eq!(hex::encode(ours), DIR_LOGGED.blob);
}

#[test]
fn encode_v4_reproduces_a_samba_blob_byte_for_byte_given_samba_inputs() {
    for (name, v, fs) in [
        ("f2.txt", &F2_FILE_ADDED_ACE, f2_posix_mapped_sd()),
        (
            "dir_inherit/child.txt",
            &DIR_INHERIT_CHILD_FILE,
            f2_posix_mapped_sd(),
        ),
        ("dir_logged", &DIR_LOGGED, dir_logged_posix_mapped_sd()),
    ] {
        let s = v.decoded();
        let ours = encode_v4(&s.sd, &v.facts(), Some(&fs), s.time().unwrap()).unwrap();
        assert_eq!(hex::encode(ours), v.blob, "{name}");
    }
}

#[test]
fn encode_v4_without_the_mapped_descriptor_differs_from_samba_only_in_the_sd_hash() {
    for (name, v) in V4_VECTORS {
        let s = v.decoded();
        let ours = encode_v4(&s.sd, &v.facts(), None, s.time().unwrap()).unwrap();
        let mut samba = v.bytes();
        samba[14..14 + HASH_SIZE].fill(0);
        assert_eq!(ours, samba, "{name}");
    }
}

#[test]
fn changing_the_posix_state_makes_a_samba_v4_blob_untrusted() {
    let s = F1_FILE_CREATED.decoded();
    let mut facts = F1_FILE_CREATED.facts();
    for change in [
        |f: &mut PosixView| f.mode = 0o100_770,
        |f: &mut PosixView| f.uid = 0,
        |f: &mut PosixView| f.access_acl.as_mut().unwrap().entries[1].perm = 5,
        |f: &mut PosixView| f.access_acl = None,
    ] {
        change(&mut facts);
        assert_eq!(
            check(&s, Some(&facts), None, false),
            Trust::FileSystem(FileSystemBecause::HashMismatch)
        );
        facts = F1_FILE_CREATED.facts();
    }
    // A directory's default ACL is part of the hash.
    let d = D1_DIR_CREATED.decoded();
    let mut facts = D1_DIR_CREATED.facts();
    facts.default_acl = None;
    assert!(!check(&d, Some(&facts), None, false).uses_stored());
}

#[test]
fn a_v3_blob_from_ignore_system_acls_has_a_zero_sha256_hash() {
    let s = V3_IGNORE_SYSTEM_ACLS.decoded();
    assert_eq!(
        s.hashes,
        NtAclHashes::V3 {
            hash_type: HASH_TYPE_SHA256,
            hash: [0; HASH_SIZE],
        }
    );
    assert_eq!(
        dacl_summary(&s.sd),
        summary(&[
            (false, 0, 0x0000_0116, "S-1-1-0"),
            (true, 0, 0x0012_00a9, "S-1-22-1-1005"),
            (true, 0, 0x001f_01ff, OWNER),
        ])
    );
    let facts = V3_IGNORE_SYSTEM_ACLS.facts();
    assert_eq!(
        check(&s, Some(&facts), None, true),
        Trust::Stored(StoredBecause::SystemAclsIgnored)
    );
    assert_eq!(
        check(&s, Some(&facts), None, false),
        Trust::FileSystem(FileSystemBecause::HashMismatch)
    );
}

#[test]
fn v1_and_v2_blobs_decode_and_are_trusted_unconditionally() {
    for (name, v) in &OTHER_VECTORS[1..] {
        let s = v.decoded();
        assert_eq!(s.hash_type(), HASH_TYPE_NONE, "{name}");
        assert_eq!(
            check(&s, Some(&v.facts()), None, false),
            Trust::Stored(StoredBecause::Unhashed),
            "{name}"
        );
    }
    assert_eq!(V1_FILE.decoded().version(), 1);
    let v2 = V2_FILE.decoded();
    assert_eq!(
        v2.hashes,
        NtAclHashes::V2 {
            hash: core::array::from_fn(|i| i as u8)
        }
    );
    assert_eq!(
        dacl_summary(&v2.sd),
        summary(&[
            (true, 0, 0x001f_01ff, OWNER),
            (true, 0, 0x0012_00a9, "S-1-22-1-1005"),
        ])
    );
}

#[test]
fn every_captured_blob_survives_truncation_and_byte_mutation() {
    for (_, v) in V4_VECTORS.iter().chain(OTHER_VECTORS) {
        let good = v.bytes();
        for i in 0..good.len() {
            let _ = decode(&good[..i]);
            for x in [0u8, 0x01, 0x7F, 0x80, 0xFF] {
                let mut m = good.clone();
                m[i] = x;
                if let Ok(s) = decode(&m) {
                    let _ = s.encode();
                    let _ = check(&s, Some(&v.facts()), Some(&s.sd), false);
                }
            }
        }
    }
}

/// Decode a `system.posix_acl_*` value as `getfattr -e hex` prints it
/// (with or without the 0x); `None` for an empty string (no such xattr).
fn xattr_acl(hex_value: &str) -> Option<PosixAcl> {
    let b = hex::decode(hex_value.trim_start_matches("0x")).unwrap();
    (!b.is_empty()).then(|| PosixAcl::decode(&b).unwrap())
}

/// A descriptor Samba's POSIX mapping never produces: protected, a deny ACE
/// with a partial mask, BUILTIN\Users, and (on directories) CREATOR OWNER.
fn manual_sd(owner: &Sid, is_dir: bool, owner_mask: u32) -> SecurityDescriptor {
    let inherit = if is_dir {
        OBJECT_INHERIT_ACE | CONTAINER_INHERIT_ACE
    } else {
        0
    };
    let mut aces = vec![
        ace(false, inherit, 0x0000_0116, "S-1-22-1-1005"),
        ace(true, inherit, 0x0012_00a9, "S-1-5-32-545"),
        Ace::allow(owner.clone(), AccessMask(owner_mask), inherit),
    ];
    if is_dir {
        aces.push(ace(
            true,
            inherit | INHERIT_ONLY_ACE,
            0x001f_01ff,
            "S-1-3-0",
        ));
    }
    SecurityDescriptor {
        control: SE_SELF_RELATIVE | SE_DACL_PRESENT | SE_DACL_PROTECTED,
        rm_control: 0,
        owner: Some(owner.clone()),
        group: Some(sid("S-1-5-32-545")),
        sacl: None,
        dacl: Some(Acl::new(aces)),
    }
}

/// The manual check described in the module docs: prints `name=hex` lines
/// for `setfattr -n security.NTACL -v 0xHEX FILE`. Inputs from the
/// environment: NTACL_UID, NTACL_GID, NTACL_MODE (octal st_mode),
/// NTACL_ACCESS and NTACL_DEFAULT (`getfattr -e hex` values, may be
/// empty), NTACL_OWNER (SID).
#[test]
#[ignore = "manual: prints blobs to put on files of a running smbd share"]
fn print_blobs_for_the_manual_samba_check() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let mode = u32::from_str_radix(&var("NTACL_MODE"), 8).unwrap();
    let facts = PosixView {
        uid: var("NTACL_UID").parse().unwrap(),
        gid: var("NTACL_GID").parse().unwrap(),
        mode,
        is_dir: mode & S_IFMT == S_IFDIR,
        access_acl: xattr_acl(&var("NTACL_ACCESS")),
        default_acl: xattr_acl(&var("NTACL_DEFAULT")),
    };
    let owner = sid(&var("NTACL_OWNER"));
    let sd = manual_sd(&owner, facts.is_dir, 0x001f_01ff);
    // 2026-01-01T00:00:00Z as NTTIME.
    let time = 134_117_568_000_000_000;
    let stale = PosixView {
        mode: facts.mode ^ 0o001,
        ..facts.clone()
    };
    let no_read = manual_sd(&owner, facts.is_dir, 0x000e_0000);
    let blobs = [
        ("v4", encode_v4(&sd, &facts, None, time).unwrap()),
        ("v4-stale", encode_v4(&sd, &stale, None, time).unwrap()),
        (
            "v4-owner-no-read",
            encode_v4(&no_read, &facts, None, time).unwrap(),
        ),
        (
            "v3-hash-none",
            StoredNtAcl {
                sd: sd.clone(),
                hashes: NtAclHashes::V3 {
                    hash_type: HASH_TYPE_NONE,
                    hash: [0; HASH_SIZE],
                },
            }
            .encode()
            .unwrap(),
        ),
        (
            "v1",
            StoredNtAcl {
                sd,
                hashes: NtAclHashes::V1,
            }
            .encode()
            .unwrap(),
        ),
    ];
    for (name, blob) in blobs {
        println!("{name}={}", hex::encode(blob));
    }
}
