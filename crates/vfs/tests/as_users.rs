//! The POSIX backend runs every call as the `Who` it is given, and the kernel decides: open,
//! stat, name lookup, listing, rename, delete, mkdir, create, EAs, mode, owner, POSIX ACLs and
//! named streams, each done by a user the file's mode refuses and by one it allows. (Times and DOS attributes
//! fall back to the server when the kernel refuses the user: the core calls them only for
//! opens granted FILE_WRITE_ATTRIBUTES; crates/ringshare/tests/identity.rs checks that against
//! Samba.)
//!
//! Root only (CI runs as root): the thread switches to two users that need no passwd entry
//! (uids 59301 and 59302).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ringshare_vfs::posix::PosixShare;
use ringshare_vfs::{
    creds, Creds, DefaultAcl, FsError, Node, OpenMode, OpenOptions, RelPath, Share, Who,
};

const ALICE: u32 = 59301;
const BOB: u32 = 59302;

fn root_or_skip(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        creds::enable().expect("root can switch credentials");
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} switches thread credentials and needs root (CI runs as root)"
    );
    eprintln!("\n!!!!!!!! SKIPPED {test}: needs root !!!!!!!!\n");
    false
}

fn alice() -> Who {
    creds::intern(Creds::new(ALICE, ALICE, vec![ALICE]))
}

fn bob() -> Who {
    creds::intern(Creds::new(BOB, BOB, vec![BOB]))
}

fn p(path: &str) -> RelPath {
    RelPath::from_components(path.split('/').filter(|c| !c.is_empty())).unwrap()
}

/// A share root (0755, root's) holding `alice/` (0755, alice's) with `mine` (0644) and
/// `secret` (0600), and `open/` (0777) for anyone; removed on drop.
struct Tree(PathBuf);

impl Tree {
    fn new(name: &str) -> Tree {
        let root =
            std::env::temp_dir().join(format!("ringshare-as-users-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let t = Tree(root);
        t.dir("alice", ALICE, 0o755);
        t.file("alice/mine", ALICE, 0o644);
        t.file("alice/secret", ALICE, 0o600);
        t.dir("open", 0, 0o777);
        t
    }

    fn dir(&self, rel: &str, uid: u32, mode: u32) {
        let path = self.0.join(rel);
        fs::create_dir(&path).unwrap();
        std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn file(&self, rel: &str, uid: u32, mode: u32) {
        let path = self.0.join(rel);
        fs::write(&path, b"some data").unwrap();
        std::os::unix::fs::chown(&path, Some(uid), Some(uid)).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    fn share(&self) -> PosixShare {
        PosixShare::new(&self.0).unwrap()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = creds::act_as_server();
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn open(
    share: &PosixShare,
    who: &Who,
    path: &str,
    read: bool,
    write: bool,
) -> std::sync::Arc<dyn Node> {
    let mut o = OpenOptions::read_existing();
    (o.read, o.write) = (read, write);
    share.open(who, &p(path), &o).unwrap().node
}

fn denied<T: std::fmt::Debug>(r: Result<T, FsError>, what: &str) {
    match r {
        Err(FsError::AccessDenied) => {}
        other => panic!("{what}: want AccessDenied, got {other:?}"),
    }
}

fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

#[test]
fn opening_stat_and_listing_run_as_the_caller() {
    if !root_or_skip("opening_stat_and_listing_run_as_the_caller") {
        return;
    }
    let t = Tree::new("open");
    t.dir("alice/private", ALICE, 0o700);
    t.file("alice/private/inner", ALICE, 0o644);
    let s = t.share();
    denied(
        s.open(&bob(), &p("alice/secret"), &OpenOptions::read_existing()),
        "bob reads alice's 0600 file",
    );
    assert!(s
        .open(&alice(), &p("alice/secret"), &OpenOptions::read_existing())
        .is_ok());
    denied(
        s.stat(&bob(), &p("alice/private/inner")),
        "bob stats through alice's 0700 directory",
    );
    assert!(s.stat(&alice(), &p("alice/private/inner")).is_ok());
    denied(
        s.find_name_case_insensitive(&bob(), &p("alice/private"), "INNER"),
        "bob looks up a name in alice's 0700 directory",
    );
    let mut dir = OpenOptions::read_existing();
    dir.directory = true;
    // A directory opens for its attributes; listing it is what the mode refuses.
    let by_bob = s.open(&bob(), &p("alice/private"), &dir).unwrap().node;
    denied(by_bob.list_names(), "bob lists alice's 0700 directory");
    let node = s.open(&alice(), &p("alice/private"), &dir).unwrap().node;
    assert_eq!(node.list_names().unwrap(), vec!["inner".to_string()]);
    // Bob may open alice's 0644 file for reading but not for writing.
    let mut w = OpenOptions::read_existing();
    w.write = true;
    denied(
        s.open(&bob(), &p("alice/mine"), &w),
        "bob writes alice's 0644 file",
    );
    let mine = open(&s, &bob(), "alice/mine", true, false);
    let mut buf = [0u8; 9];
    assert_eq!(mine.read_at(&mut buf, 0).unwrap(), 9);
}

#[test]
fn changing_names_runs_as_the_caller() {
    if !root_or_skip("changing_names_runs_as_the_caller") {
        return;
    }
    let t = Tree::new("names");
    let s = t.share();
    denied(
        s.rename(&bob(), &p("alice/mine"), &p("alice/moved"), false),
        "bob renames in alice's directory",
    );
    denied(
        s.rename(&bob(), &p("alice/mine"), &p("open/taken"), false),
        "bob moves alice's file out of her directory",
    );
    denied(
        s.unlink(&bob(), &p("alice/mine")),
        "bob deletes in alice's directory",
    );
    assert!(!s.may_delete(&bob(), &p("alice/mine")).unwrap());
    let mut mkdir = OpenOptions::read_existing();
    (mkdir.mode, mkdir.directory, mkdir.read, mkdir.create_mode) =
        (OpenMode::CreateNew, true, false, 0o755);
    denied(
        s.open(&bob(), &p("alice/bobs"), &mkdir),
        "bob makes a directory in alice's",
    );
    let mut create = OpenOptions::read_existing();
    (create.mode, create.write) = (OpenMode::CreateNew, true);
    denied(
        s.open(&bob(), &p("alice/bobs.txt"), &create),
        "bob creates a file in alice's directory",
    );
    assert!(exists(&t.path("alice/mine")) && !exists(&t.path("alice/bobs")));
    // Alice may do all of it, and what each makes is theirs.
    s.rename(&alice(), &p("alice/mine"), &p("alice/moved"), false)
        .unwrap();
    assert!(s.may_delete(&alice(), &p("alice/moved")).unwrap());
    s.unlink(&alice(), &p("alice/moved")).unwrap();
    s.open(&alice(), &p("alice/hers"), &mkdir).unwrap();
    s.open(&bob(), &p("open/bobs.txt"), &create).unwrap();
    assert_eq!(fs::metadata(t.path("alice/hers")).unwrap().uid(), ALICE);
    assert_eq!(fs::metadata(t.path("open/bobs.txt")).unwrap().uid(), BOB);
}

#[test]
fn changing_metadata_runs_as_the_caller() {
    if !root_or_skip("changing_metadata_runs_as_the_caller") {
        return;
    }
    let t = Tree::new("meta");
    let s = t.share();
    let by_bob = open(&s, &bob(), "alice/mine", true, false);
    denied(
        by_bob.set_ea("Note", Some(b"bob")),
        "bob sets an EA on alice's file",
    );
    denied(
        by_bob.set_mode(0o666),
        "bob changes the mode of alice's file",
    );
    denied(
        by_bob.chown(Some(BOB), None, false),
        "bob takes alice's file",
    );
    let acl = by_bob.posix_acls().unwrap();
    let access = acl.access.unwrap_or_else(|| {
        ringshare_vfs::PosixAcl::from_mode(fs::metadata(t.path("alice/mine")).unwrap().mode())
    });
    denied(
        by_bob.set_posix_acls(&access, DefaultAcl::Keep, false),
        "bob sets the POSIX ACL of alice's file",
    );
    let by_alice = open(&s, &alice(), "alice/mine", true, false);
    by_alice.set_ea("Note", Some(b"alice")).unwrap();
    by_alice.set_mode(0o640).unwrap();
    assert_eq!(
        fs::metadata(t.path("alice/mine")).unwrap().mode() & 0o7777,
        0o640
    );
    denied(
        by_alice.chown(Some(BOB), None, false),
        "alice gives her file away (only root may)",
    );
    assert_eq!(
        by_alice.list_eas().unwrap(),
        vec![("NOTE".to_string(), b"alice".to_vec())]
    );
}

fn read_stream(node: &dyn Node) -> Result<Vec<u8>, FsError> {
    let mut buf = [0u8; 64];
    let n = node.read_at(&mut buf, 0)?;
    Ok(buf[..n].to_vec())
}

#[test]
fn streams_are_read_and_changed_as_the_caller() {
    if !root_or_skip("streams_are_read_and_changed_as_the_caller") {
        return;
    }
    let t = Tree::new("streams");
    t.dir("sticky", ALICE, 0o1777);
    let s = t.share();
    if !s.streams_supported() {
        eprintln!("skipped: no user xattrs in {}", t.0.display());
        return;
    }
    // Alice's stream of her 0644 file; her open of the file itself reads
    // only: writing the stream is the file's mode's to allow, not the open's.
    let by_alice = open(&s, &alice(), "alice/mine", true, false);
    let note = by_alice
        .open_stream("note", OpenMode::CreateNew, true)
        .unwrap()
        .node;
    note.write_at(b"alice's", 0).unwrap();
    // Bob may read it (the mode lets him read the file) ...
    let by_bob = open(&s, &bob(), "alice/mine", true, false);
    let read = by_bob
        .open_stream("note", OpenMode::Existing, false)
        .unwrap()
        .node;
    assert_eq!(read_stream(read.as_ref()).unwrap(), b"alice's");
    assert_eq!(by_bob.list_streams().unwrap().len(), 1);
    // ... and change nothing.
    for (name, mode, write) in [
        ("bobs", OpenMode::CreateNew, false),
        ("bobs", OpenMode::OpenOrCreate, false),
        ("bobs", OpenMode::TruncateOrCreate, false),
        ("note", OpenMode::Truncate, false),
        ("note", OpenMode::Existing, true),
    ] {
        denied(
            by_bob.open_stream(name, mode, write),
            &format!("bob opens {name} {mode:?} write {write}"),
        );
    }
    denied(read.write_at(b"bob", 0), "bob writes through a read open");
    denied(by_bob.remove_stream("note"), "bob removes alice's stream");
    denied(
        by_bob.rename_stream("note", "bobs", false),
        "bob renames alice's stream",
    );
    let mut raw = [0u8; 16];
    let n = rustix::fs::getxattr(
        t.path("alice/mine"),
        "user.DosStream.note:$DATA",
        &mut raw[..],
    )
    .unwrap();
    assert_eq!(&raw[..n], b"alice's\0");
    assert_eq!(by_alice.list_streams().unwrap().len(), 1);

    // Alice's 0600 file: bob (opening it for its attributes only) sees
    // that the stream is there and its size, never its data.
    let secret = open(&s, &alice(), "alice/secret", true, false);
    let hidden = secret
        .open_stream("hidden", OpenMode::CreateNew, true)
        .unwrap()
        .node;
    hidden.write_at(b"xyz", 0).unwrap();
    let bob_meta = open(&s, &bob(), "alice/secret", false, false);
    let listed = bob_meta.list_streams().unwrap();
    assert_eq!(
        (listed[0].name.as_str(), listed[0].size, listed.len()),
        ("hidden", 3, 1)
    );
    let bobs_view = bob_meta
        .open_stream("hidden", OpenMode::Existing, false)
        .unwrap()
        .node;
    assert_eq!(bobs_view.size().unwrap(), 3);
    denied(
        read_stream(bobs_view.as_ref()),
        "bob reads a 0600 file's stream",
    );

    // A sticky directory anyone may write: only its owner adds streams.
    let mut dir = OpenOptions::read_existing();
    dir.directory = true;
    let by_bob = s.open(&bob(), &p("sticky"), &dir).unwrap().node;
    denied(
        by_bob.open_stream("bobs", OpenMode::CreateNew, false),
        "bob adds a stream to alice's sticky directory",
    );
    let by_alice = s.open(&alice(), &p("sticky"), &dir).unwrap().node;
    by_alice
        .open_stream("hers", OpenMode::CreateNew, false)
        .unwrap();
}
