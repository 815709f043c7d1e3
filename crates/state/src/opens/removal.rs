//! A close's file system calls as a job (issue 33; docs/cluster-internals.md, "File system
//! calls off the I/O thread", "Closes that remove"): on a share whose calls may wait on a
//! network ([`crate::config::ShareDef::offloaded`]: FUSE, CephFS), a close that removes its
//! file (its delete was pending on its last open) or is a named stream's makes its calls on
//! the pool: the descriptor's last close (the node let go), `fruit`'s look at the stream
//! ([`crate::fruit::afp::at_close`]), the unlink or rmdir and the AppleDouble file, the
//! stream's removal. Everything decided about the server's state stays where it was, before
//! the job: the close taken by the file's entry, the stream's invisible open of its file let
//! go (its waiters woken) and whether the file goes with it.
//!
//! As a rename's job ([`crate::fsjob`]; crates/core's cmd/set_info/moves.rs `told`), the job
//! tells watchers and directory leases itself once a removal worked (not when it failed: the
//! failure is logged, as on the I/O thread), so they hear of it also when nobody waits for
//! the job (a connection's end, LOGOFF, TREE_DISCONNECT).
//!
//! While the job is out the entry of the file it removes stays in the file table, its delete
//! pending ([`crate::server::FileEntry::removing`]): an open of the name meanwhile is answered
//! DELETE_PENDING (as any open of a file whose delete is pending) and never joins a new entry
//! of the file about to vanish. A CLOSE is answered after its job, so a client that waits for
//! its CLOSE finds the name gone, as on a local share.

use std::sync::{Arc, Mutex};

use ringshare_vfs::FileAttr;

use super::{file_closed, left_the_file, stream_closed, Closing};
use crate::fsjob::FsJob;
use crate::notify;
use crate::server::{lock, FileEntry, FileKey, ServerState};

/// [`super::closed_open`] on a share whose calls are made away from the I/O thread, for a close
/// that removes its file or is a stream's: what is decided about the server's state happens
/// now, the calls (and what they tell) are the job returned. The file's attributes from
/// before, when asked.
pub fn closed_open_in_job(
    server: &Arc<ServerState>,
    c: Closing,
    closed: crate::decide::Closed,
) -> (Option<FileAttr>, FsJob) {
    let Closing {
        open,
        attr,
        except,
        on_close,
        ..
    } = c;
    let crate::decide::Closed {
        remove,
        last_open,
        path,
        is_dir,
        newly_pending,
    } = closed;
    if newly_pending && is_dir {
        notify::dir_delete_pending(server, &open.share, &path, open.key);
    }
    let mut marks = Marks {
        server: Arc::clone(server),
        entries: Vec::new(),
    };
    // A stream's name and key now (a stream's rename changes them).
    let now = open.stream.as_ref().map(|s| lock(&s.now).clone());
    let key = now.as_ref().map_or(open.key, |(_, k)| *k);
    // The entry the close took: its file (or stream) goes in the job when `remove`.
    if remove {
        lock(&open.entry).removing = true;
    }
    marks.entries.push((key, Arc::clone(&open.entry), remove));
    let stream = open.stream.as_ref().zip(now).map(|(s, (name, _))| {
        let file = Arc::clone(&s.file_entry);
        let (gone, file_path, file_is_dir) = left_the_file(server, &file, open.id, true);
        marks.entries.push((key.base(), Arc::clone(&file), gone));
        (name, s.afp, file, gone.then_some((file_path, file_is_dir)))
    });
    let who = open.node.who().cloned();
    let (order, share) = (
        crate::fsjob::order_of(open.id),
        crate::fsjob::share_key(&open.share.name),
    );
    let what = match (&stream, remove) {
        (None, _) => "the removal at a close",
        (Some(_), true) => "a stream's removal at its close",
        (Some(_), false) => "a stream's close",
    };
    let server = Arc::clone(server);
    let job = FsJob::telling(who, order, share, what, move || {
        let (share, who) = (Arc::clone(&open.share), Arc::clone(&open.who));
        match stream {
            Some((name, afp, file, file_goes)) => {
                let fruit = share.fruit.as_deref();
                let removal = crate::fruit::afp::at_close(
                    fruit,
                    open.node.as_ref(),
                    &name,
                    afp,
                    remove,
                    last_open,
                );
                // The backend closes the stream before it is removed.
                drop(open);
                let path = lock(&file).path.clone();
                stream_closed(&server, (&share, &who), (&path, &name), removal, on_close);
                if let Some((path, is_dir)) = file_goes {
                    super::remove_file(&server, &share, &who, &path, is_dir, None);
                }
            }
            None => {
                let file = open.key;
                // The backend closes the file before it is removed.
                drop(open);
                let remove = remove && still_named(&server.node, (&share, &who), &path, file);
                let at = (&path, is_dir);
                file_closed(&server, (&share, &who), at, (remove, except), on_close);
            }
        }
        drop(marks);
    });
    (attr, job)
}

/// Whether `path` still names the file `key` a close's job is to remove: a rename's job may have
/// replaced it meanwhile (its decision saw no open of the file; on a local share the removal is
/// made before any later request runs). Another file there is left, and no removal told. A
/// name the stat cannot read is left to the removal, which says why it failed.
fn still_named(
    node: &crate::server::NodeState,
    (share, who): (&crate::server::ShareDef, &ringshare_vfs::Who),
    path: &ringshare_vfs::RelPath,
    key: FileKey,
) -> bool {
    match share.backend.stat(who, path) {
        Ok(a) if node.file_key(&a) != key => {
            tracing::debug!(path = %path.to_slash_path(), "not removed at its close: another file holds the name now");
            false
        }
        _ => true,
    }
}

/// The entries a close's job is about: each marked as being removed while the job is out (the
/// flag), and forgotten when unused once the job's calls ended, or once the job was dropped
/// without running (its user could not be acted as): the file is then left, as a failed
/// removal is.
struct Marks {
    server: Arc<ServerState>,
    entries: Vec<(FileKey, Arc<Mutex<FileEntry>>, bool)>,
}

impl Drop for Marks {
    fn drop(&mut self) {
        for (key, entry, marked) in &self.entries {
            if *marked {
                lock(entry).removing = false;
            }
            self.server.files.drop_if_unused(*key);
        }
    }
}
