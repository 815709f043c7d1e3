//! Helpers shared by the vfs test binaries.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use ringshare_vfs::{FsResult, Node, OpenMode, OpenOptions, Opened, RelPath, Share};

/// A directory under `std::env::temp_dir()` with a unique name, removed on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        TempDir::new_in(&std::env::temp_dir(), tag)
    }

    /// A directory with a unique name under `parent` (which must exist).
    pub fn new_in(parent: &Path, tag: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = parent.join(format!(
            "ringshare-vfs-{tag}-{}-{n}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir(&path).expect("create temp dir");
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `"a/b"` → RelPath; `""` → root.
pub fn p(s: &str) -> RelPath {
    if s.is_empty() {
        RelPath::root()
    } else {
        RelPath::from_components(s.split('/')).expect("valid test path")
    }
}

/// Read-write file options with the given mode.
pub fn file_opts(mode: OpenMode) -> OpenOptions {
    OpenOptions {
        mode,
        read: true,
        write: true,
        directory: false,
        non_directory: false,
        create_mode: 0o644,
        best_effort: false,
        no_follow: false,
    }
}

/// Directory options with the given mode.
pub fn dir_opts(mode: OpenMode) -> OpenOptions {
    OpenOptions {
        mode,
        read: false,
        write: false,
        directory: true,
        non_directory: false,
        create_mode: 0o755,
        best_effort: false,
        no_follow: false,
    }
}

pub fn open(share: &dyn Share, path: &str, opts: OpenOptions) -> FsResult<Opened> {
    share.open(&ringshare_vfs::server_who(), &p(path), &opts)
}

pub fn open_err(share: &dyn Share, path: &str, opts: OpenOptions) -> ringshare_vfs::FsError {
    match share.open(&ringshare_vfs::server_who(), &p(path), &opts) {
        Ok(o) => panic!("open {path:?} with {opts:?} succeeded: {o:?}"),
        Err(e) => e,
    }
}

pub fn mkdir(share: &dyn Share, path: &str) {
    let o = open(share, path, dir_opts(OpenMode::CreateNew)).expect("mkdir");
    assert!(o.created);
}

pub fn write_file(share: &dyn Share, path: &str, data: &[u8]) -> std::sync::Arc<dyn Node> {
    let o = open(share, path, file_opts(OpenMode::TruncateOrCreate)).expect("create file");
    assert_eq!(o.node.write_at(data, 0).expect("write"), data.len());
    o.node
}

pub fn read_all(node: &dyn Node) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 7];
    loop {
        let n = node.read_at(&mut buf, out.len() as u64).expect("read");
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

pub fn read_file(share: &dyn Share, path: &str) -> Vec<u8> {
    let o = open(share, path, OpenOptions::read_existing()).expect("open for read");
    read_all(o.node.as_ref())
}
