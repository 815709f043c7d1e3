//! Finding an open from a request's FileId, and closing one ([MS-SMB2]
//! 3.3.5.10 and the close steps of logoff, tree disconnect and connection loss).
//!
//! Closing removes the open's share-mode entry and byte-range locks from its
//! [`FileEntry`]; when the last open of a file whose delete is pending goes,
//! the file is removed at the path the entry holds now (renames keep it current).

use std::sync::Arc;

use ringshare_vfs::FileAttr;
use ringshare_wire::consts::Dialect;
use ringshare_wire::{FileId, NtStatus};

use crate::conn::{ConnCore, Req};
use crate::notify;
use crate::server::{lock, IoSizes, ServerState};
use crate::state::{Open, Session, TreeKind};

/// The volatile id a request names: its own FileId, or the related compound's
/// when the FileId is all ones.
pub(crate) fn resolve(req: &Req<'_>, fid: FileId) -> Result<(u64, u64), NtStatus> {
    if fid.is_any() {
        return req.related_file_id.ok_or(NtStatus::FILE_CLOSED);
    }
    Ok((fid.persistent, fid.volatile))
}

/// The open a request names, checked against the request's tree. The open
/// is the session's, so any channel of the session finds it; the session's
/// lock is held only for the lookup.
pub(crate) fn find(core: &mut ConnCore, req: &Req<'_>, fid: FileId) -> Result<Arc<Open>, NtStatus> {
    let (persistent, volatile) = resolve(req, fid)?;
    let sref = core.session_or_deleted(req.session_id)?;
    let open = {
        let session = lock(&sref);
        let open = session.opens.get(&volatile).ok_or(NtStatus::FILE_CLOSED)?;
        if open.persistent_id != persistent || open.tree_id != req.tree_id {
            return Err(NtStatus::FILE_CLOSED);
        }
        Arc::clone(open)
    };
    if core.dialect().is_some_and(|d| d.0 >= Dialect::SMB3_0.0) {
        note_use(&core.server, &open, req);
    }
    Ok(open)
}

/// A 3.x request used the open ([MS-SMB2] 3.3.5.2.10): a newer
/// ChannelSequence becomes the open's (WRITE, SET_INFO and IOCTL were
/// checked and counted before, by the connection), and a replay of the
/// CREATE that made it no longer finds it (Open.IsReplayEligible), unless
/// the open is persistent (it stays eligible: 3.3.5.9.10, 3.3.5.21).
fn note_use(server: &ServerState, open: &Open, req: &Req<'_>) {
    use ringshare_wire::consts::Command;
    let forget = {
        let mut st = lock(&open.state);
        if !matches!(
            req.hdr.command,
            Command::WRITE | Command::SET_INFO | Command::IOCTL
        ) {
            let seq = req.hdr.channel_sequence();
            if seq.wrapping_sub(st.channel_sequence) as i16 > 0 {
                st.channel_sequence = seq;
            }
        }
        let persistent = st.durable.as_ref().is_some_and(|d| d.persistent);
        if st.replay_eligible && !persistent && !matches!(req.hdr.command, Command::CREATE) {
            st.replay_eligible = false;
            st.create_guid
        } else {
            None
        }
    };
    if let Some(g) = forget {
        lock(&server.durables).forget(g, open.id);
    }
}

/// An open of a session by volatile id (async work finds its open this way).
pub(crate) fn by_id(core: &ConnCore, session_id: u64, open_id: u64) -> Option<Arc<Open>> {
    let sref = core.session(session_id)?;
    let session = lock(&sref);
    session.opens.get(&open_id).cloned()
}

/// Move an open's FilePositionInformation after a read or write ended at `end`
/// (the open may have been closed while the I/O ran: then nothing happens).
/// A write also has the handle's close report the file MODIFIED.
pub(crate) fn set_position(
    core: &mut ConnCore,
    session_id: u64,
    open_id: u64,
    end: u64,
    wrote: bool,
) {
    if let Some(open) = by_id(core, session_id, open_id) {
        let mut st = lock(&open.state);
        st.position = end;
        if wrote {
            st.notify_on_close |= notify::filter::LAST_WRITE | notify::filter::SIZE;
            notify::wrote(&core.server, &open, &mut st, core.now.mono_ms);
        }
    }
}

/// True when the request's tree is read-only for this session.
pub(crate) fn tree_read_only(core: &ConnCore, req: &Req<'_>) -> bool {
    core.session(req.session_id).is_none_or(|s| {
        lock(&s)
            .trees
            .get(&req.tree_id)
            .is_none_or(|t| t.read_only || matches!(t.kind, TreeKind::Ipc))
    })
}

/// Close one open (already removed from its session). Returns the file's
/// attributes as they were just before the close, when `want_attr`.
pub(crate) fn close_open(
    server: &ServerState,
    open: Arc<Open>,
    want_attr: bool,
) -> Option<FileAttr> {
    tracing::trace!(
        id = open.id,
        access = open.access,
        share_access = open.share_access,
        "close"
    );
    let attr = if want_attr {
        open.node.stat().ok()
    } else {
        None
    };
    crate::cluster::ca::forget(server, &open);
    let (create_guid, on_close, watch) = {
        let mut st = lock(&open.state);
        (st.create_guid, st.notify_on_close, st.watch.take())
    };
    if let Some(w) = watch {
        notify::end(server, &w, ringshare_wire::NtStatus::NOTIFY_CLEANUP);
    }
    if let Some(g) = create_guid {
        lock(&server.durables).forget(g, open.id);
    }
    let delete_on_close = lock(&open.state).delete_on_close;
    let crate::arbiter::Closed {
        remove,
        last_open,
        path,
        is_dir,
        newly_pending,
    } = crate::arbiter::close(
        server,
        open.key,
        &open.entry,
        open.id,
        delete_on_close,
        &open.who,
    );
    if newly_pending && is_dir {
        notify::dir_delete_pending(server, &open.share, &path, open.key);
    }
    let share = Arc::clone(&open.share);
    let who = Arc::clone(&open.who);
    let mut key = open.key;
    let stream = open.stream.as_ref().map(|s| {
        let (name, now) = lock(&s.now).clone();
        key = now;
        (name, Arc::clone(&s.file_entry), s.afp)
    });
    // fruit: an AfpInfo placeholder nothing was stored in goes at its last
    // close; a resource fork that holds data is not deleted (macOS).
    let removal = stream.as_ref().and_then(|(name, _, afp)| {
        let fruit = open.share.fruit.as_deref();
        crate::fruit::afp::at_close(fruit, open.node.as_ref(), name, *afp, remove, last_open)
    });
    let id = open.id;
    // Let the backend close the file before it is removed (a request on
    // another channel may still hold the open for a moment; its I/O finishes
    // on the node it holds).
    drop(open);
    if let Some((name, file_entry, _)) = stream {
        let path = lock(&file_entry).path.clone();
        let change = if let Some(how) = removal {
            remove_stream(&share, &who, &path, &name, how)
                .then_some((notify::REMOVED_STREAM, notify::filter::STREAM_NAME))
        } else {
            // Written: one MODIFIED_STREAM at the close, as files.
            let f = notify::filter::STREAM_SIZE | notify::filter::STREAM_WRITE;
            (on_close != 0).then_some((notify::MODIFIED_STREAM, f))
        };
        if let Some((action, filter)) = change {
            notify::stream_changed(server, &share, &path, &name, action, filter);
        }
        // The stream's invisible open of its file goes with it; the file
        // goes too when its delete was pending on this alone.
        let mut wakes = Vec::new();
        let (remove, path, is_dir) = {
            let mut e = lock(&file_entry);
            e.opens.retain(|s| s.owner != id);
            e.streams.retain(|(o, _)| *o != id);
            crate::files::oplock::wake_waiters(&mut e, &mut wakes);
            (
                e.delete_pending && e.opens.is_empty(),
                e.path.clone(),
                e.is_dir,
            )
        };
        server.send_breaks(wakes);
        if remove {
            remove_file(server, &share, &who, &path, is_dir);
        }
        server.drop_file_entry_if_unused(key);
        server.drop_file_entry_if_unused(key.base());
        return attr;
    }
    if remove {
        remove_file(server, &share, &who, &path, is_dir);
    } else if on_close != 0 {
        notify::report(
            server,
            &share,
            &[notify::Change {
                action: notify::MODIFIED,
                filter: on_close,
                path: &path,
                stream: None,
            }],
        );
    }
    server.drop_file_entry_if_unused(key);
    attr
}

/// Remove the file or directory at `path` (its delete was pending and its
/// last open closed) and tell watchers.
pub(crate) fn remove_file(
    server: &ServerState,
    share: &Arc<crate::server::ShareDef>,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
    is_dir: bool,
) {
    let r = if is_dir {
        share.backend.rmdir(who, path)
    } else {
        share.backend.unlink(who, path)
    };
    // fruit: the file's AppleDouble `._` file (its resource fork) goes with it.
    if r.is_ok() && !is_dir && crate::fruit::keeps_appledouble(share) {
        if let Some(ad) = crate::fruit::adouble::sidecar(path) {
            let _ = share.backend.unlink(who, &ad);
        }
    }
    match r {
        Ok(()) => notify::report(
            server,
            share,
            &[notify::Change {
                action: notify::REMOVED,
                filter: notify::name_filter(is_dir),
                path,
                stream: None,
            }],
        ),
        Err(e) => {
            tracing::debug!(path = %path.to_slash_path(), "delete on close failed: {e}")
        }
    }
}

/// Remove named stream `name` of the file at `path` (its delete was
/// pending and its last open closed); true when it was removed.
fn remove_stream(
    share: &crate::server::ShareDef,
    who: &ringshare_vfs::Who,
    path: &ringshare_vfs::RelPath,
    name: &str,
    how: crate::fruit::afp::Removal,
) -> bool {
    let mut opts = ringshare_vfs::OpenOptions::read_existing();
    opts.read = false;
    let r = share
        .backend
        .open(who, path, &opts)
        .and_then(|f| match how {
            crate::fruit::afp::Removal::Stream => f.node.remove_stream(name),
            crate::fruit::afp::Removal::Netatalk => f.node.set_netatalk_metadata(None),
            crate::fruit::afp::Removal::AppleDouble => match crate::fruit::adouble::sidecar(path) {
                Some(ad) => share.backend.unlink(who, &ad),
                None => Ok(()),
            },
        });
    if let Err(e) = &r {
        tracing::debug!(path = %path.to_slash_path(), stream = name, "delete on close failed: {e}");
    }
    r.is_ok()
}

/// Take every open of a session for which `pick` is true out of it (under
/// the session's lock), to be closed with [`close_all`] after the lock is
/// released: a close may ask a file's home on another node, or etcd.
pub(crate) fn take_where(session: &mut Session, pick: impl Fn(&Open) -> bool) -> Vec<Arc<Open>> {
    let ids: Vec<u64> = session
        .opens
        .iter()
        .filter(|(_, o)| pick(o))
        .map(|(id, _)| *id)
        .collect();
    ids.into_iter()
        .filter_map(|id| session.opens.remove(&id))
        .collect()
}

/// Close opens taken out of their session ([`take_where`]).
pub(crate) fn close_all(server: &ServerState, opens: Vec<Arc<Open>>) {
    for open in opens {
        close_open(server, open, false);
    }
}

/// The connection uses multi-credit requests ([MS-SMB2] 3.3.5.2.5).
pub(crate) fn large_mtu(core: &ConnCore) -> bool {
    core.negotiated
        .as_ref()
        .is_some_and(|n| n.dialect != Dialect::SMB2_0_2 && n.server_capabilities & 0x4 != 0)
}

/// MaxReadSize, MaxWriteSize and MaxTransactSize as negotiated.
pub(crate) fn io_sizes(core: &ConnCore) -> IoSizes {
    io_sizes_for(core, core.dialect())
}

/// MaxReadSize, MaxWriteSize and MaxTransactSize for `dialect`: 64 KiB for
/// SMB 2.0.2 (and before a dialect is chosen), the configured sizes after.
pub(crate) fn io_sizes_for(core: &ConnCore, dialect: Option<Dialect>) -> IoSizes {
    match dialect {
        Some(Dialect::SMB2_0_2) | None => IoSizes::SMB2_0_2,
        Some(_) => core.server.config.io_sizes,
    }
}

/// [MS-SMB2] 3.3.5.2.5: a payload of `len` bytes needs CreditCharge ≥ ceil(len / 64 KiB).
pub(crate) fn check_credit_charge(
    core: &ConnCore,
    req: &Req<'_>,
    len: u64,
) -> Result<(), NtStatus> {
    if !large_mtu(core) {
        return Ok(());
    }
    let needed = len.div_ceil(65536).max(1);
    let charge = u64::from(req.hdr.credit_charge.max(1));
    if charge < needed {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(())
}
