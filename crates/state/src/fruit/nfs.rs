//! Apple's NFS ACEs (AAPL's kAAPL_SUPPORTS_NFS_ACE, `fruit:nfs_aces`):
//! after AAPL, a file's security descriptor carries its Unix mode, owner
//! and group as three ACCESS_DENIED ACEs with no rights, for the SIDs
//! S-1-5-88-3-<mode>, S-1-5-88-1-<uid> and S-1-5-88-2-<gid>; macOS sets the
//! mode by sending the first back changed (as Samba's vfs_fruit).

use ringshare_vfs::FileAttr;
use ringshare_wire::consts::AccessMask;
use ringshare_wire::security::{Ace, AceBody, AceType, SecurityDescriptor, Sid};

/// The NT authority (5) and the NFS sub-authority (88).
const NT_AUTHORITY: u64 = 5;
const NFS: u32 = 88;
const USERS: u32 = 1;
const GROUPS: u32 = 2;
const MODE: u32 = 3;

fn nfs_sid(kind: u32, value: u32) -> Option<Sid> {
    Sid::from_parts(NT_AUTHORITY, &[NFS, kind, value])
}

/// The (kind, value) of an S-1-5-88-* SID.
fn nfs_of(sid: &Sid) -> Option<(u32, u32)> {
    let five = sid.authority == [0, 0, 0, 0, 0, NT_AUTHORITY as u8];
    match sid.sub_authorities.as_slice() {
        [NFS, kind, value] if five => Some((*kind, *value)),
        _ => None,
    }
}

fn is_nfs(ace: &Ace) -> bool {
    matches!(&ace.body, AceBody::MaskSid { sid, .. } if nfs_of(sid).is_some())
}

fn deny_nothing(sid: Sid) -> Ace {
    Ace {
        ace_type: AceType::ACCESS_DENIED,
        flags: 0,
        body: AceBody::MaskSid {
            mask: AccessMask(0),
            sid,
            trailer: Vec::new(),
        },
    }
}

/// The descriptor a client of an AAPL connection reads: its DACL without
/// stored NFS ACEs, with the file's mode (type bits included), owner and
/// group appended.
pub fn add(sd: &mut SecurityDescriptor, attr: &FileAttr) {
    let Some(dacl) = sd.dacl.as_mut() else {
        return;
    };
    let kind_bits = match attr.kind {
        ringshare_vfs::FileKind::Directory => 0o040000,
        ringshare_vfs::FileKind::Symlink => 0o120000,
        _ => 0o100000,
    };
    dacl.aces.retain(|a| !is_nfs(a));
    for (kind, value) in [
        (MODE, (attr.mode & 0o7777) | kind_bits),
        (USERS, attr.uid),
        (GROUPS, attr.gid),
    ] {
        if let Some(sid) = nfs_sid(kind, value) {
            dacl.aces.push(deny_nothing(sid));
        }
    }
}

/// A descriptor a client of an AAPL connection sets: its NFS ACEs are
/// taken out; returns the mode the first mode ACE asks for (permission bits
/// only) and whether the DACL held nothing else (then it is not set).
pub fn take(sd: &mut SecurityDescriptor) -> (Option<u32>, bool) {
    let Some(dacl) = sd.dacl.as_mut() else {
        return (None, false);
    };
    let mode = dacl.aces.iter().find_map(|a| match &a.body {
        AceBody::MaskSid { sid, .. } => match nfs_of(sid) {
            Some((MODE, m)) => Some(m & 0o777),
            _ => None,
        },
        _ => None,
    });
    let had_nfs = dacl.aces.iter().any(is_nfs);
    dacl.aces.retain(|a| !is_nfs(a));
    (mode, had_nfs && dacl.aces.is_empty())
}

/// The mode a POSIX open's SET_INFO asks for by a DACL of exactly one ACE for
/// S-1-5-88-3-MODE (SMB3 POSIX chmod, as smbclient and Linux's cifs client send it and
/// Samba 4.22 takes it; permission bits only); `None` for any other descriptor.
pub fn posix_chmod(sd: &SecurityDescriptor) -> Option<u32> {
    match sd.dacl.as_ref().map(|d| d.aces.as_slice()) {
        Some([ace]) => match &ace.body {
            AceBody::MaskSid { sid, .. } => match nfs_of(sid) {
                Some((MODE, m)) => Some(m & 0o777),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringshare_wire::security::Acl;

    fn sd_with(aces: Vec<Ace>) -> SecurityDescriptor {
        SecurityDescriptor {
            dacl: Some(Acl::new(aces)),
            ..Default::default()
        }
    }

    #[test]
    fn a_posix_chmod_is_a_dacl_of_one_mode_ace_and_nothing_else() {
        let mode = |m| deny_nothing(nfs_sid(MODE, m).unwrap());
        assert_eq!(posix_chmod(&sd_with(vec![mode(0o4750)])), Some(0o750));
        assert_eq!(posix_chmod(&sd_with(vec![mode(0o600), mode(0o600)])), None);
        assert_eq!(
            posix_chmod(&sd_with(vec![deny_nothing(nfs_sid(USERS, 0o600).unwrap())])),
            None
        );
        assert_eq!(posix_chmod(&sd_with(Vec::new())), None);
        assert_eq!(posix_chmod(&SecurityDescriptor::default()), None);
    }

    #[test]
    fn exactly_one_mode_uid_and_gid_ace_is_shown() {
        let extra = deny_nothing(nfs_sid(USERS, 27).unwrap());
        let mut sd = sd_with(vec![extra.clone(), extra]);
        let attr = FileAttr {
            mode: 0o644,
            uid: 1000,
            gid: 100,
            ..Default::default()
        };
        add(&mut sd, &attr);
        let sids: Vec<(u32, u32)> = sd
            .dacl
            .unwrap()
            .aces
            .iter()
            .filter_map(|a| match &a.body {
                AceBody::MaskSid { sid, .. } => nfs_of(sid),
                _ => None,
            })
            .collect();
        assert_eq!(sids, [(MODE, 0o100644), (USERS, 1000), (GROUPS, 100)]);
    }

    #[test]
    fn a_mode_ace_sent_back_is_a_chmod_and_nfs_aces_are_never_stored() {
        let mut sd = sd_with(vec![
            deny_nothing(nfs_sid(MODE, 0o100600).unwrap()),
            deny_nothing(nfs_sid(USERS, 5).unwrap()),
        ]);
        assert_eq!(take(&mut sd), (Some(0o600), true));
        assert!(sd.dacl.unwrap().aces.is_empty());
    }
}
