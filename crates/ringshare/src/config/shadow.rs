//! Samba's `shadow:` options (vfs_shadow_copy2), read with its names and
//! defaults into [`ringshare_core::shadow::ShadowCopy`]. What ringshare does
//! not do yet is refused, so that a share never starts showing other
//! snapshots than the administrator configured (docs/limits.md).
//!
//! Where the snapshots are, in Samba's words: `shadow:snapdir` (relative to
//! the mount point of the share's file system, or absolute) holds one
//! directory per snapshot; each is an image of `shadow:basedir` (default: the
//! mount point), so the share's root is found in it at the share's path below
//! the base directory, or at `shadow:snapsharepath`. `shadow:mountpoint`
//! names the mount point instead of finding it.

use std::path::{Path, PathBuf};

use ringshare_core::shadow::{LocalZone, ShadowCopy, SnapBase, SnapFormat, SnapPrefix, SnapSort};
use ringshare_vfs::RelPath;

use super::parse::parse_bool;

/// A share's `shadow:` options: the settings kept, and where the snapshots
/// are until [`resolve`] has placed them.
#[derive(Debug, Default)]
pub(super) struct ShadowConf {
    pub(super) copy: ShadowCopy,
    /// An absolute `shadow:snapdir`.
    snapdir_abs: Option<PathBuf>,
    /// `shadow:mountpoint`.
    mountpoint: Option<PathBuf>,
    /// `shadow:basedir`.
    basedir: Option<PathBuf>,
    /// `shadow:snapsharepath`.
    snapsharepath: Option<RelPath>,
}

impl ShadowConf {
    /// Whether an option places the snapshots other than in the share's root.
    fn places(&self) -> bool {
        self.snapdir_abs.is_some()
            || self.mountpoint.is_some()
            || self.basedir.is_some()
            || self.snapsharepath.is_some()
    }
}

/// Apply `shadow:<name> = value` (the key normalized: lower case, `_` as a
/// space) to `c`. `Ok(Some(warning))` for an option Samba does not know
/// either, `Err` for a value refused, with the reason.
pub(super) fn apply(c: &mut ShadowConf, key: &str, value: &str) -> Result<Option<String>, String> {
    let name = key.strip_prefix("shadow:").unwrap_or(key);
    let flag =
        |v: &str| parse_bool(v).ok_or_else(|| format!("'{key}' expects yes or no, got '{v}'"));
    let not_yet = |what: &str| {
        Err(format!(
            "'{key} = {value}' is not supported by ringshare yet: {what} (docs/limits.md)"
        ))
    };
    let s = &mut c.copy;
    match name {
        "snapdir" if value.starts_with('/') => {
            c.snapdir_abs = Some(absolute(key, value)?);
        }
        "snapdir" => {
            s.snapdir = relative(key, value)?;
            c.snapdir_abs = None;
        }
        "mountpoint" => c.mountpoint = Some(absolute(key, value)?),
        "basedir" => c.basedir = Some(absolute(key, value)?),
        "snapsharepath" => {
            c.snapsharepath = Some(if value.trim_matches('/').is_empty() {
                RelPath::root()
            } else {
                relative(key, value)?
            })
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
            s.localtime = if flag(value)? {
                // The server's zone (TZ, else /etc/localtime), read once, as smbd's mktime
                // reads it.
                let zone = jiff::tz::TimeZone::try_system()
                    .map_err(|e| format!("'{key}': the server's time zone: {e}"))?;
                Some(LocalZone(zone))
            } else {
                None
            }
        }
        "snapprefix" => {
            s.prefix = Some(SnapPrefix::parse(value).map_err(|e| format!("'{key}' {e}"))?);
        }
        "delimiter" => {
            if value.is_empty() {
                return Err(format!("'{key}' expects some text"));
            }
            s.delimiter = value.to_string();
        }
        "crossmountpoints" => s.crossmountpoints = flag(value)?,
        "sscanf" | "fixinodes" => {
            if flag(value)? {
                return not_yet("snapshot names are read with shadow:format");
            }
        }
        _ => return Ok(Some(format!("unknown option '{key}' ignored"))),
    }
    Ok(None)
}

/// A path option that must be absolute.
fn absolute(key: &str, value: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(value.trim_end_matches('/'));
    if !p.is_absolute() || p.components().any(|c| c.as_os_str() == "..") {
        return Err(format!("'{key}' expects an absolute path, got '{value}'"));
    }
    Ok(if p.as_os_str().is_empty() {
        PathBuf::from("/")
    } else {
        p
    })
}

/// A relative path option (no `..`, not empty).
fn relative(key: &str, value: &str) -> Result<RelPath, String> {
    let parts = value
        .trim_end_matches('/')
        .split('/')
        .filter(|p| !p.is_empty());
    RelPath::from_components(parts)
        .ok()
        .filter(|p| !p.is_root())
        .ok_or_else(|| format!("'{key}' expects a relative directory, got '{value}'"))
}

/// Places the snapshots of share `share` (root `path`) as Samba does: in the
/// share's root (`snapdir` a directory of the share whose root is the mount
/// point, or `shadow:snapdirseverywhere`), or outside it
/// ([`ShadowCopy::base`]; the server opens that directory). `Err` says what
/// to change.
pub(super) fn resolve(c: &mut ShadowConf, share: &str, path: &Path) -> Result<(), String> {
    let s = &mut c.copy;
    // Samba: an absolute snapdir disables snapdirseverywhere, which disables basedir and
    // snapsharepath.
    if s.everywhere && c.snapdir_abs.is_none() {
        s.base = None;
        // A share whose directory is not there yet has none above it either (its set-up says
        // what is wrong with it).
        s.outer = match std::fs::canonicalize(path) {
            Ok(root) => {
                let mount = c
                    .mountpoint
                    .clone()
                    .unwrap_or_else(|| mount_point_of(&root));
                outer_snapdirs(&root, &mount, s.crossmountpoints, &s.snapdir)
            }
            Err(_) => Vec::new(),
        };
        return Ok(());
    }
    let root = std::fs::canonicalize(path)
        .map_err(|e| format!("share [{share}]: path '{}': {e}", path.display()))?;
    let mount = match &c.mountpoint {
        Some(m) => m.clone(),
        None => mount_point_of(&root),
    };
    let snapshots = match &c.snapdir_abs {
        Some(abs) => abs.clone(),
        None => mount.join(s.snapdir.to_slash_path()),
    };
    let within = match &c.snapsharepath {
        Some(p) => p.clone(),
        None => {
            let base = c.basedir.as_ref().unwrap_or(&mount);
            let below = root.strip_prefix(base).map_err(|_| {
                format!(
                    "share [{share}]: its path '{}' is not below the snapshots' base directory \
                     '{}' (shadow:basedir, or the mount point)",
                    root.display(),
                    base.display()
                )
            })?;
            RelPath::from_components(below.iter().map(|c| c.to_string_lossy().into_owned()))
                .map_err(|_| format!("share [{share}]: path '{}'", root.display()))?
        }
    };
    s.base = if within.is_root() && snapshots == root.join(s.snapdir.to_slash_path()) {
        // The share's root is the base: its snapdir is a directory of the share.
        None
    } else {
        Some(SnapBase {
            dir: snapshots,
            within,
            opened: None,
        })
    };
    Ok(())
}

/// `shadow:snapdirseverywhere`: the snapshot directories (`snapdir` in each) of the directories
/// above the share's root `root`, nearest first, up to the mount point `mount` (with
/// `shadow:crossmountpoints`, up to `/`), as Samba looks for them; those that exist now.
fn outer_snapdirs(root: &Path, mount: &Path, cross: bool, snapdir: &RelPath) -> Vec<SnapBase> {
    let mut found = Vec::new();
    let mut here = root;
    while let Some(up) = here.parent() {
        if !cross && !up.starts_with(mount) {
            break;
        }
        let dir = up.join(snapdir.to_slash_path());
        let below = root.strip_prefix(up).ok().and_then(|b| {
            RelPath::from_components(b.iter().map(|c| c.to_string_lossy().into_owned())).ok()
        });
        if let (true, Some(within)) = (dir.is_dir(), below) {
            found.push(SnapBase {
                dir,
                within,
                opened: None,
            });
        }
        here = up;
    }
    found
}

/// Whether `c` can be used by a share whose path is made per user (`%U`):
/// only with the snapshots in each share's root.
pub(super) fn check_templated(c: &ShadowConf, share: &str) -> Result<(), String> {
    if c.places() {
        return Err(format!(
            "share [{share}]: shadow:snapdir (absolute), shadow:mountpoint, shadow:basedir and \
             shadow:snapsharepath are not supported on a share whose path is made per user"
        ));
    }
    Ok(())
}

/// The mount point of the file system holding `path` (a btrfs subvolume counts: its device
/// differs from its parent's): `path` or the highest directory above it on the same device.
fn mount_point_of(path: &Path) -> PathBuf {
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    let mut here = path.to_path_buf();
    let Some(d) = dev(&here) else {
        return here;
    };
    while let Some(up) = here.parent() {
        if dev(up) != Some(d) {
            break;
        }
        here = up.to_path_buf();
    }
    here
}

#[cfg(test)]
mod tests;
