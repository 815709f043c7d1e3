use super::*;

fn conf(opts: &[(&str, &str)]) -> ShadowConf {
    let mut c = ShadowConf::default();
    for (k, v) in opts {
        assert_eq!(apply(&mut c, k, v), Ok(None), "{k} = {v}");
    }
    c
}

#[test]
fn shadow_options_set_their_fields_and_refuse_what_is_not_done_yet() {
    let mut c = conf(&[
        ("shadow:snapdir", "snaps/daily/"),
        ("shadow:sort", "asc"),
        ("shadow:format", "snap_%Y%m%d_%H%M%S"),
        ("shadow:snapdirseverywhere", "yes"),
        ("shadow:localtime", "no"),
        ("shadow:crossmountpoints", "no"),
        ("shadow:snapprefix", r"^zfs-auto-snap_\(hourly\)\{0,1\}"),
        ("shadow:delimiter", "-20"),
        ("shadow:format", "-%Y-%m-%d-%H%M"),
        ("shadow:localtime", "yes"),
    ]);
    let s = &c.copy;
    assert_eq!(s.snapdir.to_slash_path(), "snaps/daily");
    assert_eq!(s.sort, SnapSort::Asc);
    assert!(s.everywhere);
    assert_eq!(s.format.as_str(), "-%Y-%m-%d-%H%M");
    assert_eq!(
        s.prefix.as_ref().map(|p| p.as_str()),
        Some(r"^zfs-auto-snap_\(hourly\)\{0,1\}")
    );
    assert_eq!(s.delimiter, "-20");
    assert!(s.localtime.is_some());
    assert_eq!(apply(&mut c, "shadow:sort", "none"), Ok(None));
    assert_eq!(c.copy.sort, SnapSort::Unsorted);
    for (k, v) in [
        ("shadow:snapdir", "../elsewhere"),
        ("shadow:snapdir", "/srv/../etc"),
        ("shadow:basedir", "relative"),
        ("shadow:mountpoint", "relative"),
        ("shadow:snapsharepath", "a/../b"),
        ("shadow:format", "%H.%M.%S"),
        ("shadow:sscanf", "yes"),
        ("shadow:snapprefix", r"\(a\)\1"),
        ("shadow:delimiter", ""),
        ("shadow:snapdirseverywhere", "maybe"),
    ] {
        assert!(apply(&mut c, k, v).is_err(), "{k} = {v}");
    }
    assert!(apply(&mut c, "shadow:colour", "blue").unwrap().is_some());
    assert_eq!(apply(&mut c, "shadow:crossmountpoints", "yes"), Ok(None));
    assert!(c.copy.crossmountpoints);
}

/// A directory tree for a layout: `<tmp>/fs/{.snapshots,data/share}`, with `fs` named as the
/// mount point.
struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str) -> Tree {
        let t = std::env::temp_dir().join(format!("shadow-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(t.join("fs/data/share")).unwrap();
        Tree(std::fs::canonicalize(t).unwrap())
    }
    fn fs(&self) -> String {
        self.0.join("fs").display().to_string()
    }
    fn share(&self) -> PathBuf {
        self.0.join("fs/data/share")
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn base_of(c: &ShadowConf) -> Option<(String, String)> {
    c.copy
        .base
        .as_ref()
        .map(|b| (b.dir.display().to_string(), b.within.to_slash_path()))
}

#[test]
fn a_share_below_its_mount_point_finds_its_snapshots_at_the_mount_point() {
    let t = Tree::new("below");
    let mut c = conf(&[("shadow:mountpoint", &t.fs())]);
    resolve(&mut c, "s", &t.share()).unwrap();
    let snaps = format!("{}/.snapshots", t.fs());
    assert_eq!(base_of(&c), Some((snaps.clone(), "data/share".into())));
    // Snapshots of a base directory between them hold the share below it.
    let basedir = format!("{}/data", t.fs());
    let mut c = conf(&[("shadow:mountpoint", &t.fs()), ("shadow:basedir", &basedir)]);
    resolve(&mut c, "s", &t.share()).unwrap();
    assert_eq!(base_of(&c), Some((snaps, "share".into())));
}

#[test]
fn an_absolute_snapdir_and_a_snapsharepath_are_taken_as_written() {
    let t = Tree::new("abs");
    let mut c = conf(&[
        ("shadow:snapdir", "/backups/snaps/"),
        ("shadow:snapsharepath", "shares/one"),
    ]);
    resolve(&mut c, "s", &t.share()).unwrap();
    assert_eq!(
        base_of(&c),
        Some(("/backups/snaps".into(), "shares/one".into()))
    );
}

#[test]
fn a_share_at_its_mount_point_or_with_snapdirs_everywhere_keeps_them_in_its_root() {
    let t = Tree::new("root");
    let mut c = conf(&[("shadow:mountpoint", &t.share().display().to_string())]);
    resolve(&mut c, "s", &t.share()).unwrap();
    assert_eq!(base_of(&c), None);
    let mut c = conf(&[("shadow:snapdirseverywhere", "yes")]);
    resolve(&mut c, "s", &t.share()).unwrap();
    assert_eq!(base_of(&c), None);
}

#[test]
fn a_share_outside_the_base_directory_or_made_per_user_with_a_layout_is_refused() {
    let t = Tree::new("outside");
    let mut c = conf(&[
        ("shadow:mountpoint", &t.fs()),
        ("shadow:basedir", "/somewhere/else"),
    ]);
    let e = resolve(&mut c, "s", &t.share()).unwrap_err();
    assert!(e.contains("not below"), "{e}");
    assert!(check_templated(&c, "homes").is_err());
    assert!(check_templated(&conf(&[("shadow:snapdir", "snaps")]), "homes").is_ok());
}

#[test]
fn the_mount_point_of_a_directory_is_found_by_its_device() {
    // /proc is a file system of its own below /.
    assert_eq!(
        mount_point_of(Path::new("/proc/self")),
        PathBuf::from("/proc")
    );
    assert_eq!(mount_point_of(Path::new("/")), PathBuf::from("/"));
}

#[test]
fn with_snapdirseverywhere_the_snapshot_directories_above_the_share_are_found_nearest_first_up_to_the_mount_point(
) {
    let t = Tree::new("outer");
    for d in ["fs/.snapshots", "fs/data/.snapshots", ".snapshots"] {
        std::fs::create_dir_all(t.0.join(d)).unwrap();
    }
    let found = |cross: &str| {
        let mut c = conf(&[
            ("shadow:snapdirseverywhere", "yes"),
            ("shadow:mountpoint", &t.fs()),
            ("shadow:crossmountpoints", cross),
        ]);
        resolve(&mut c, "s", &t.share()).unwrap();
        assert!(c.copy.base.is_none());
        c.copy
            .outer
            .iter()
            .map(|o| {
                let dir = o.dir.strip_prefix(&t.0).unwrap().display().to_string();
                (dir, o.within.to_slash_path())
            })
            .collect::<Vec<_>>()
    };
    let near = [
        ("fs/data/.snapshots".to_string(), "share".to_string()),
        ("fs/.snapshots".to_string(), "data/share".to_string()),
    ];
    assert_eq!(found("no"), near);
    // Past the mount point: the temporary directory's own `.snapshots` too.
    let far = found("yes");
    assert_eq!(far[..2], near);
    assert_eq!(
        far[2],
        (".snapshots".to_string(), "fs/data/share".to_string())
    );
}
