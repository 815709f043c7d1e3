//! Samba's `shadow:` options (vfs_shadow_copy2), read with its names and
//! defaults into [`ringshare_core::shadow::ShadowCopy`]. What ringshare does
//! not do yet is refused, so that a share never starts showing other
//! snapshots than the administrator configured (docs/limits.md).

use std::path::Path;

use ringshare_core::shadow::{ShadowCopy, SnapFormat, SnapSort};
use ringshare_vfs::RelPath;

use super::parse::parse_bool;

/// Apply `shadow:<name> = value` (the key normalized: lower case, `_` as a
/// space) to `s`. `Ok(Some(warning))` for an option Samba does not know
/// either, `Err` for a value refused, with the reason.
pub(super) fn apply(s: &mut ShadowCopy, key: &str, value: &str) -> Result<Option<String>, String> {
    let name = key.strip_prefix("shadow:").unwrap_or(key);
    let flag =
        |v: &str| parse_bool(v).ok_or_else(|| format!("'{key}' expects yes or no, got '{v}'"));
    let not_yet = |what: &str| {
        Err(format!(
            "'{key} = {value}' is not supported by ringshare yet: {what} (docs/limits.md)"
        ))
    };
    match name {
        "snapdir" => {
            if value.starts_with('/') {
                return not_yet("snapshots are looked for in a directory of the share");
            }
            let parts = value
                .trim_end_matches('/')
                .split('/')
                .filter(|p| !p.is_empty());
            s.snapdir = RelPath::from_components(parts)
                .ok()
                .filter(|p| !p.is_root())
                .ok_or_else(|| {
                    format!("'{key}' expects a directory of the share, got '{value}'")
                })?;
        }
        "format" => {
            s.format = SnapFormat::parse(value).map_err(|e| format!("'{key}' {e}"))?;
        }
        "sort" => {
            s.sort = match value.to_ascii_lowercase().as_str() {
                "desc" => SnapSort::Desc,
                "asc" => SnapSort::Asc,
                _ => SnapSort::Unsorted,
            }
        }
        "snapdirseverywhere" => s.everywhere = flag(value)?,
        "localtime" => {
            if flag(value)? {
                return not_yet("snapshot names are read as UTC");
            }
        }
        "crossmountpoints" => {
            if flag(value)? {
                return not_yet("the snapshot directory is looked for at the share's root only");
            }
        }
        "basedir" | "mountpoint" | "snapsharepath" => {
            return not_yet("the snapshot directory is a directory of the share, whose snapshots are of the share's root");
        }
        "sscanf" | "fixinodes" => {
            if flag(value)? {
                return not_yet("snapshot names are read with shadow:format");
            }
        }
        "snapprefix" | "delimiter" => {
            return not_yet("snapshot names are read with shadow:format alone");
        }
        _ => return Ok(Some(format!("unknown option '{key}' ignored"))),
    }
    Ok(None)
}

/// Where a relative `shadow:snapdir` is on Samba: at the mount point of the
/// share's file system (a btrfs subvolume counts: its device differs from
/// its parent's), or, with `shadow:snapdirseverywhere`, in any directory up
/// to it. ringshare looks at the share's root: `Err` when Samba would look
/// elsewhere, with what to change.
pub(super) fn check_root(s: &ShadowCopy, share: &str, path: &Path) -> Result<(), String> {
    if s.everywhere || is_mount_point(path) {
        return Ok(());
    }
    Err(format!(
        "share [{share}]: shadow:snapdir '{}' is taken relative to the mount point of the file \
         system above '{}' (as Samba does), and ringshare looks for it at the share's root only: \
         make the share's path the mount point (or a btrfs subvolume), or set \
         shadow:snapdirseverywhere = yes with the snapshot directory in the share's root",
        s.snapdir.to_slash_path(),
        path.display()
    ))
}

/// `path` is the root of its file system (or of a btrfs subvolume): its
/// device is not its parent's, or it is `/`.
fn is_mount_point(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(here), Ok(up)) = (std::fs::metadata(path), std::fs::metadata(path.join(".."))) else {
        return false;
    };
    here.dev() != up.dev() || here.ino() == up.ino()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_options_set_their_fields_and_refuse_what_is_not_done_yet() {
        let mut s = ShadowCopy::default();
        assert_eq!(apply(&mut s, "shadow:snapdir", "snaps/daily/"), Ok(None));
        assert_eq!(s.snapdir.to_slash_path(), "snaps/daily");
        assert_eq!(apply(&mut s, "shadow:sort", "asc"), Ok(None));
        assert_eq!(s.sort, SnapSort::Asc);
        assert_eq!(apply(&mut s, "shadow:sort", "none"), Ok(None));
        assert_eq!(s.sort, SnapSort::Unsorted);
        assert_eq!(
            apply(&mut s, "shadow:format", "snap_%Y%m%d_%H%M%S"),
            Ok(None)
        );
        assert_eq!(s.format.as_str(), "snap_%Y%m%d_%H%M%S");
        assert_eq!(apply(&mut s, "shadow:snapdirseverywhere", "yes"), Ok(None));
        assert!(s.everywhere);
        assert_eq!(apply(&mut s, "shadow:localtime", "no"), Ok(None));
        assert_eq!(apply(&mut s, "shadow:crossmountpoints", "no"), Ok(None));
        for (k, v) in [
            ("shadow:snapdir", "/srv/snapshots"),
            ("shadow:snapdir", "../elsewhere"),
            ("shadow:snapdir", "/"),
            ("shadow:format", "%Y.%m.%d"),
            ("shadow:localtime", "yes"),
            ("shadow:crossmountpoints", "yes"),
            ("shadow:basedir", "/srv"),
            ("shadow:mountpoint", "/srv"),
            ("shadow:snapsharepath", "a/b"),
            ("shadow:sscanf", "yes"),
            ("shadow:snapprefix", "^daily"),
            ("shadow:snapdirseverywhere", "maybe"),
        ] {
            assert!(apply(&mut s, k, v).is_err(), "{k} = {v}");
        }
        assert!(apply(&mut s, "shadow:colour", "blue").unwrap().is_some());
    }

    #[test]
    fn a_snapdir_is_found_at_a_mount_point_or_everywhere_but_not_above_the_share() {
        let dir = std::env::temp_dir();
        let s = ShadowCopy::default();
        assert!(check_root(&s, "s", Path::new("/")).is_ok());
        let in_fs = dir.join(format!("shadow-root-{}", std::process::id()));
        std::fs::create_dir_all(&in_fs).unwrap();
        let refused = check_root(&s, "s", &in_fs);
        let everywhere = ShadowCopy {
            everywhere: true,
            ..ShadowCopy::default()
        };
        let accepted = check_root(&everywhere, "s", &in_fs);
        std::fs::remove_dir(&in_fs).unwrap();
        assert!(refused.unwrap_err().contains("snapdirseverywhere"));
        assert!(accepted.is_ok());
    }
}
