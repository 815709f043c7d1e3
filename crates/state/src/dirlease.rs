//! Directory leases ([MS-SMB2] 3.3.1.4, 3.3.4.7, 3.3.5.9.11; Samba 4.22's
//! `smb3 directory leases`): a client caches a directory's listing and its
//! entries' metadata while it holds an R or RH lease on the directory. Any
//! change inside the directory (an entry made, removed, renamed in or out,
//! linked, its attributes, times or size set, a stream added) breaks those
//! leases to nothing, except the lease whose key the changing open sent as
//! its ParentLeaseKey (that client made the change and knows of it). The
//! changing request does not wait for the acknowledgment.
//!
//! The directories that hold leases are listed in the file table
//! (`FileTable::note_dir_lease`); a change with none listed costs one atomic
//! load. A change is matched to its directory by share name and path, as the
//! directory's entry records them (renames keep them current).

use ringshare_vfs::RelPath;

use crate::files::oplock;
use crate::server::{lock, ServerState};
use crate::state::Open;

/// The entry at `path` of share `share` was made, removed or changed: break
/// the leases on its directory but `except`'s. `now_ms`: see
/// [`oplock::break_dir_leases`].
pub fn entry_changed(
    server: &ServerState,
    share: &str,
    path: &RelPath,
    except: Option<[u8; 16]>,
    now_ms: Option<u64>,
) {
    let Some(dir) = path.parent() else {
        return;
    };
    dir_changed(server, share, &dir, except, now_ms);
}

/// Something inside directory `dir` of share `share` changed: break its
/// leases but `except`'s.
pub fn dir_changed(
    server: &ServerState,
    share: &str,
    dir: &RelPath,
    except: Option<[u8; 16]>,
    now_ms: Option<u64>,
) {
    let leased = server.files.leased_dirs();
    if leased.is_empty() {
        return;
    }
    let mut breaks = Vec::new();
    for (_, entry) in leased {
        let mut e = lock(&entry);
        if e.is_dir && e.path == *dir && e.share == share {
            oplock::break_dir_leases(&mut e, except, now_ms, &mut breaks);
        }
    }
    server.send_breaks(breaks);
}

/// The ParentLeaseKey `open`'s lease names, if any: the directory lease a
/// change through it leaves alone.
pub fn parent_key(open: &Open) -> Option<[u8; 16]> {
    let e = lock(&open.entry);
    oplock::parent_key_of(&e, open.id)
}
