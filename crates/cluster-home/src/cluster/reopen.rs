//! An open carried from one node to another as its state ([`HandOver`]): what a node sends of
//! a disconnected open it gives up ([`state_of`]), and how the node that takes it (a reconnect
//! through another node, [`super::handover`]; a dead node's persistent open, [`super::ca`])
//! opens the file again ([`reopen`]) and rebuilds the open ([`open_from`]).

use std::sync::{Arc, Mutex};

use ringshare_vfs::{OpenMode, OpenOptions, Who};
use ringshare_wire::NtStatus;

use super::msg::HandOver;
use crate::durable::{Durability, Kind, Owner};
use crate::server::{NodeState, ShareDef};
use crate::state::{Open, OpenState};

fn kind_code(k: Kind) -> u8 {
    match k {
        Kind::V1 => 1,
        Kind::V2 => 2,
        Kind::Resilient => 3,
    }
}

pub fn kind_of(code: u8) -> Result<Kind, NtStatus> {
    match code {
        1 => Ok(Kind::V1),
        2 => Ok(Kind::V2),
        3 => Ok(Kind::Resilient),
        _ => Err(NtStatus::INVALID_PARAMETER),
    }
}

/// Open the file of open `h` again as `who` on `share`: the same file (its
/// key), or OBJECT_NAME_NOT_FOUND (renamed over or replaced meanwhile).
pub fn reopen(
    here: &NodeState,
    share: &ShareDef,
    who: &Who,
    h: &HandOver,
) -> Result<Arc<dyn ringshare_vfs::Node>, NtStatus> {
    let opts = OpenOptions {
        mode: OpenMode::Existing,
        read: crate::files::access::can_read(h.access),
        write: crate::files::access::can_write(h.access),
        directory: h.is_dir,
        non_directory: !h.is_dir,
        create_mode: 0,
        best_effort: false,
        no_follow: false,
    };
    let o = share
        .backend
        .open(who, &h.path, &opts)
        .map_err(crate::fsmap::status_of)?;
    let node: Arc<dyn ringshare_vfs::Node> = o.node;
    let attr = node.stat_without_dos().map_err(crate::fsmap::status_of)?;
    if here.file_key(&attr) != h.key {
        return Err(NtStatus::OBJECT_NAME_NOT_FOUND);
    }
    Ok(node)
}

/// Where an open rebuilt from a [`HandOver`] lives now.
pub struct Place {
    pub id: u64,
    pub persistent_id: u64,
    pub tree_id: u32,
    pub channel_sequence: u16,
    pub replay_eligible: bool,
}

/// The durability open `h` carries, its owner `owner`.
pub(super) fn durability_of(h: &HandOver, owner: &Owner) -> Result<Durability, NtStatus> {
    Ok(Durability {
        kind: kind_of(h.kind)?,
        timeout_ms: h.timeout_ms,
        create_guid: h.durable_create_guid,
        client_guid: h.durable_client_guid,
        owner: owner.clone(),
        persistent: h.persistent,
    })
}

/// The open `h` describes, at `place`, on file `node` (entry `entry`).
pub(crate) fn open_from(
    h: HandOver,
    place: Place,
    who: Who,
    node: Arc<dyn ringshare_vfs::Node>,
    entry: Arc<Mutex<crate::server::FileEntry>>,
    share: Arc<ShareDef>,
    durability: Durability,
) -> Open {
    Open {
        id: place.id,
        who,
        persistent_id: place.persistent_id,
        tree_id: place.tree_id,
        node,
        key: h.key,
        entry,
        is_dir: h.is_dir,
        access: h.access,
        share_access: h.share_access,
        create_options: h.create_options,
        share,
        state: Mutex::new(OpenState {
            path: h.path,
            delete_on_close: false,
            position: h.position,
            mode: h.mode,
            channel_sequence: place.channel_sequence,
            durable: Some(durability),
            create_guid: h.create_guid,
            create_action: h.create_action,
            replay_eligible: place.replay_eligible,
            lock_sequences: h.lock_sequences.map(Box::new),
            // (a descriptor opened here holds no POSIX locks: docs/cluster.md)
            posix_locks: Vec::new(),
            watch: None,
            notify_on_close: h.notify_on_close,
            kernel_marked_ms: 0,
            compress_skip: 0,
            compress_misses: 0,
            posix_rename: h.posix_rename,
        }),
        dir_cursor: Mutex::new(None),
        stream: None,
        posix: h.posix,
    }
}

/// What another node needs to carry on open `open` (state `st`, durability `d`).
pub(crate) fn state_of(open: &Open, st: &OpenState, d: &Durability) -> HandOver {
    HandOver {
        key: open.key,
        path: st.path.clone(),
        is_dir: open.is_dir,
        access: open.access,
        share_access: open.share_access,
        create_options: open.create_options,
        position: st.position,
        mode: st.mode,
        kind: kind_code(d.kind),
        timeout_ms: d.timeout_ms,
        durable_create_guid: d.create_guid,
        durable_client_guid: d.client_guid,
        persistent: d.persistent,
        create_guid: st.create_guid,
        create_action: st.create_action,
        lock_sequences: st.lock_sequences.as_deref().copied(),
        notify_on_close: st.notify_on_close,
        posix_rename: st.posix_rename,
        posix: open.posix,
    }
}
