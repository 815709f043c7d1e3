//! `shadow:snapdirseverywhere = yes`: a snapshot's view of a share whose
//! directories may each hold a snapshot directory of their own (a btrfs
//! subvolume with snapper's `.snapshots` inside the share, a data set mounted
//! below another), as Samba's shadow_copy2 finds them: a path is looked for
//! in the snapshot of its nearest directory that has one, from the path itself
//! up to the share's root (`a/b/f` in `a/b/.snapshots/S/f`, then
//! `a/.snapshots/S/b/f`, then `.snapshots/S/a/b/f`), the first where it exists
//! winning; then in the snapshot directories above the share's root the server
//! found at start ([`ShadowCopy::outer`], nearest first). Each directory's snapshot is a read-only view of its own
//! ([`Share::read_only_view`], found beneath the share as the user), so
//! nothing outside that one snapshot is reachable through it; every change
//! fails with [`FsError::ReadOnly`]. Names stay the client's (`a\b\f`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringshare_vfs::{
    FileAttr, FsError, FsResult, FsStat, OpenOptions, Opened, RelPath, Share, Who,
};
use ringshare_wire::snapshot::GmtToken;

use super::ShadowCopy;

/// The snapshot of one time across the share's snapshot directories.
pub struct NearestSnapshot {
    live: Arc<dyn Share>,
    who: Who,
    shadow: ShadowCopy,
    token: GmtToken,
    /// Each directory's view of the snapshot (None: it has none), by its path.
    views: Mutex<HashMap<RelPath, Option<Arc<dyn Share>>>>,
    /// Each outer snapshot directory's view of it, by its place in [`ShadowCopy::outer`].
    outer_views: Mutex<HashMap<usize, Option<Arc<dyn Share>>>>,
}

impl std::fmt::Debug for NearestSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NearestSnapshot")
            .field("token", &self.token)
            .finish()
    }
}

/// The first error of a lookup that does not end the search: the path is not in that
/// directory's snapshot, so the next one up is tried (Samba: ENOENT, ENOTDIR).
fn not_here(e: &FsError) -> bool {
    matches!(
        e,
        FsError::NotFound | FsError::PathNotFound | FsError::NotADirectory
    )
}

impl NearestSnapshot {
    /// The snapshot `token` of `live` (a share with `shadow:snapdirseverywhere`), as `who`
    /// sees it.
    pub fn new(live: Arc<dyn Share>, who: Who, shadow: ShadowCopy, token: GmtToken) -> Self {
        NearestSnapshot {
            live,
            who,
            shadow,
            token,
            views: Mutex::new(HashMap::new()),
            outer_views: Mutex::new(HashMap::new()),
        }
    }

    /// The view of this snapshot in the `k`th outer snapshot directory: the share's place in
    /// it (`name/within`), if it has the snapshot.
    fn outer_view(&self, k: usize) -> FsResult<Option<Arc<dyn Share>>> {
        if let Some(v) = crate::sync::lock(&self.outer_views).get(&k) {
            return Ok(v.clone());
        }
        let Some(dir) = self.shadow.outer.get(k).and_then(|b| b.opened.clone()) else {
            return Ok(None);
        };
        let names = || list_dir(&*dir, &self.who, &RelPath::root()).ok();
        let view = match self.shadow.name_of(self.token, names) {
            None => None,
            Some(name) => {
                let within = &self.shadow.outer[k].within;
                let at =
                    RelPath::from_components(std::iter::once(&name).chain(within.components()))?;
                match dir.read_only_view(&self.who, &at) {
                    Ok(v) => Some(v),
                    Err(e) if not_here(&e) => None,
                    Err(e) => return Err(e),
                }
            }
        };
        crate::sync::lock(&self.outer_views).insert(k, view.clone());
        Ok(view)
    }

    /// The view of this snapshot in directory `dir`'s snapshot directory, if it has one.
    fn view_at(&self, dir: &RelPath) -> FsResult<Option<Arc<dyn Share>>> {
        if let Some(v) = crate::sync::lock(&self.views).get(dir) {
            return Ok(v.clone());
        }
        let snapdir = join_all(dir, &self.shadow.snapdir)?;
        let names = || list_dir(&*self.live, &self.who, &snapdir).ok();
        let view = match self.shadow.name_of(self.token, names) {
            None => None,
            Some(name) => match self.live.read_only_view(&self.who, &snapdir.join(&name)?) {
                Ok(v) => Some(v),
                Err(e) if not_here(&e) => None,
                Err(e) => return Err(e),
            },
        };
        crate::sync::lock(&self.views).insert(dir.clone(), view.clone());
        Ok(view)
    }

    /// Where `path` is: the view of the nearest directory whose snapshot has it, and the
    /// path below that directory. When none has it, the outermost view there is (whose
    /// answer then says what is missing); when no directory has the snapshot (Samba: ENOENT),
    /// `NotFound` for a name in the root, `PathNotFound` for one below it.
    fn find(&self, path: &RelPath) -> FsResult<(Arc<dyn Share>, RelPath)> {
        let inner = (0..=path.components().len()).rev().map(Place::Inner);
        let outer = (0..self.shadow.outer.len()).map(Place::Outer);
        let mut outermost = None;
        for place in inner.chain(outer) {
            let (view, rest) = match place {
                Place::Inner(i) => (
                    self.view_at(&prefix(path, i))?,
                    RelPath::from_components(&path.components()[i..])?,
                ),
                Place::Outer(k) => (self.outer_view(k)?, path.clone()),
            };
            let Some(view) = view else {
                continue;
            };
            match view.stat(&self.who, &rest) {
                Ok(_) => return Ok((view, rest)),
                Err(e) if not_here(&e) => outermost = Some((view, rest)),
                Err(e) => return Err(e),
            }
        }
        // No directory has the snapshot: only a name in the share's root is "not there"
        // (`FsError::NotFound` says the directories on the way are).
        outermost.ok_or(match path.components().len() {
            0 | 1 => FsError::NotFound,
            _ => FsError::PathNotFound,
        })
    }
}

/// Where a path is looked for: in the snapshot of the share's directory of its first `n`
/// components, or of the `k`th snapshot directory above the share's root.
enum Place {
    Inner(usize),
    Outer(usize),
}

/// The names in directory `dir` of `share`, as `who` lists them (a snapshot directory's
/// entries).
pub fn list_dir(share: &dyn Share, who: &Who, dir: &RelPath) -> FsResult<Vec<String>> {
    let opts = OpenOptions {
        directory: true,
        ..OpenOptions::read_existing()
    };
    share.open(who, dir, &opts)?.node.list_names()
}

/// The first `n` components of `path`.
fn prefix(path: &RelPath, n: usize) -> RelPath {
    RelPath::from_components(&path.components()[..n]).unwrap_or_default()
}

/// `dir` joined with every component of `rel`.
fn join_all(dir: &RelPath, rel: &RelPath) -> FsResult<RelPath> {
    RelPath::from_components(dir.components().iter().chain(rel.components()))
}

impl Share for NearestSnapshot {
    fn open(&self, who: &Who, path: &RelPath, opts: &OpenOptions) -> FsResult<Opened> {
        let (view, rest) = self.find(path)?;
        view.open(who, &rest, opts)
    }

    fn stat(&self, who: &Who, path: &RelPath) -> FsResult<FileAttr> {
        let (view, rest) = self.find(path)?;
        view.stat(who, &rest)
    }

    fn unlink(&self, _who: &Who, _path: &RelPath) -> FsResult<()> {
        Err(FsError::ReadOnly)
    }

    fn rmdir(&self, _who: &Who, _path: &RelPath) -> FsResult<()> {
        Err(FsError::ReadOnly)
    }

    fn rename(&self, _who: &Who, _from: &RelPath, _to: &RelPath, _replace: bool) -> FsResult<()> {
        Err(FsError::ReadOnly)
    }

    fn link(&self, _who: &Who, _from: &RelPath, _to: &RelPath) -> FsResult<()> {
        Err(FsError::ReadOnly)
    }

    fn statfs(&self) -> FsResult<FsStat> {
        self.live.statfs()
    }

    fn find_name_case_insensitive(&self, who: &Who, dir: &RelPath, name: &str) -> FsResult<String> {
        let (view, rest) = self.find(dir)?;
        view.find_name_case_insensitive(who, &rest, name)
    }

    fn find_name_matching(
        &self,
        who: &Who,
        dir: &RelPath,
        matches: &dyn Fn(&str) -> bool,
    ) -> FsResult<String> {
        let (view, rest) = self.find(dir)?;
        view.find_name_matching(who, &rest, matches)
    }

    fn may_delete(&self, who: &Who, path: &RelPath) -> FsResult<bool> {
        // As the snapshot's own view answers (a delete is refused when tried).
        let (view, rest) = self.find(path)?;
        view.may_delete(who, &rest)
    }

    fn streams_supported(&self) -> bool {
        self.live.streams_supported()
    }

    /// As the live share's: a snapshot's files are on its file system, and their calls are
    /// made away from the I/O thread when its are (`fs calls off io thread`).
    fn may_wait_on_network(&self) -> bool {
        self.live.may_wait_on_network()
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}
