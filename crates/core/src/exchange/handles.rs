//! What a request's handles and sizes are on this connection: the open a FileId names
//! (its own, or the related compound's), the open's position after I/O, whether the tree is
//! read-only, and the negotiated multi-credit and I/O sizes ([MS-SMB2] 3.3.5.2.5).

use std::sync::Arc;

use ringshare_wire::consts::Dialect;
use ringshare_wire::{FileId, NtStatus};

use crate::exchange::{ConnCore, Req};
use crate::notify;
use crate::server::{lock, FileTable, IoSizes};
use crate::state::{Open, TreeKind};

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
    core.named_file = Some((persistent, volatile));
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
        note_use(&core.server.files, &open, req);
    }
    Ok(open)
}

/// A 3.x request used the open ([MS-SMB2] 3.3.5.2.10): a newer
/// ChannelSequence becomes the open's (WRITE, SET_INFO and IOCTL were
/// checked and counted before, by the connection), and a replay of the
/// CREATE that made it no longer finds it (Open.IsReplayEligible), unless
/// the open is persistent (it stays eligible: 3.3.5.9.10, 3.3.5.21).
fn note_use(files: &FileTable, open: &Open, req: &Req<'_>) {
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
        lock(&files.durables).forget(g, open.id);
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
            notify::wrote(&core.server.notify, &open, &mut st, core.now.mono_ms);
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

/// The open is of a file in a snapshot (Previous Versions): it may have been granted write
/// access, as Samba 4.22 grants it, but nothing changes the file through it
/// ([`ringshare_vfs::Share::is_snapshot`]); what would is MEDIA_WRITE_PROTECTED.
pub(crate) fn in_snapshot(open: &Open) -> bool {
    open.share.backend.is_snapshot()
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
