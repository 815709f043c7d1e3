//! [MS-SMB2] 3.3.5.7 Receiving an SMB2 TREE_CONNECT Request and
//! 3.3.5.8 Receiving an SMB2 TREE_DISCONNECT Request.

use ringshare_wire::consts::{AccessMask, ShareCapabilities, ShareFlags, ShareType};
use ringshare_wire::tree::{TreeConnectRequest, TreeConnectResponse, TreeDisconnectRequest};
use ringshare_wire::{NtStatus, WriteExt};

use crate::cmd::close::close_opens_of_tree;
use crate::conn::{ConnCore, Reply, Req};
use crate::limits;
use crate::server::{lock, EncryptPolicy};
use crate::state::{Tree, TreeKind};

/// Everything a file share grants ([MS-SMB2] 2.2.13.1.1 FILE_ALL_ACCESS).
pub(crate) const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
/// Read, execute and attribute access for read-only shares.
pub(crate) const FILE_READ_ONLY_ACCESS: u32 = 0x0012_00A9;

pub(crate) fn connect(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let tc = TreeConnectRequest::decode(req.msg).map_err(|e| e.status())?;
    let name = tc.share_name().to_string();
    let server = core.server.clone();
    let sref = core.session_or_deleted(req.session_id)?;
    let mut session = lock(&sref);
    if session.trees.len() >= limits::TREES_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let can_encrypt = session.encrypt_key.is_some();
    let (kind, read_only, share_type, encrypt) = if name.eq_ignore_ascii_case("IPC$") {
        (
            TreeKind::Ipc,
            true,
            ShareType::PIPE,
            EncryptPolicy::IfRequired,
        )
    } else {
        let share = server
            .config
            .share(&name)
            .ok_or(NtStatus::BAD_NETWORK_NAME)?
            .clone();
        let unauthenticated = session.is_guest || session.is_anonymous;
        if unauthenticated && !share.guest_ok {
            tracing::info!(share = %share.name, "guest access refused: the share is not guest ok");
            return Err(NtStatus::ACCESS_DENIED);
        }
        if !unauthenticated
            && !share.valid_users.is_empty()
            && !share
                .valid_users
                .iter()
                .any(|u| u.eq_ignore_ascii_case(&session.user))
        {
            tracing::info!(share = %share.name, user = %session.user, "user not in valid users");
            return Err(NtStatus::ACCESS_DENIED);
        }
        // [MS-SMB2] 3.3.5.7: a share that requires encryption refuses a session
        // that cannot encrypt.
        if share.encrypt == EncryptPolicy::Required && !can_encrypt {
            tracing::info!(share = %share.name, "refusing a tree connect: the share requires encryption and this session cannot encrypt");
            return Err(NtStatus::ACCESS_DENIED);
        }
        let ro = share.read_only;
        let encrypt = share.encrypt;
        (TreeKind::Disk(share), ro, ShareType::DISK, encrypt)
    };
    let encrypt_data =
        can_encrypt && matches!(encrypt, EncryptPolicy::Desired | EncryptPolicy::Required);
    let id = session.next_tree_id;
    session.next_tree_id = session.next_tree_id.wrapping_add(1).max(1);
    let maximal_access = if read_only {
        FILE_READ_ONLY_ACCESS
    } else {
        FILE_ALL_ACCESS
    };
    session.trees.insert(
        id,
        Tree {
            kind,
            read_only,
            maximal_access,
            encrypt_required: encrypt == EncryptPolicy::Required,
        },
    );
    let resp = TreeConnectResponse {
        share_type,
        share_flags: if encrypt_data {
            ShareFlags::ENCRYPT_DATA
        } else {
            ShareFlags::MANUAL_CACHING
        },
        capabilities: ShareCapabilities::empty(),
        maximal_access: AccessMask(maximal_access),
    };
    let mut body = Vec::with_capacity(16);
    resp.encode(&mut body);
    let mut r = Reply::ok(body);
    r.tree_id = Some(id);
    Ok(r)
}

pub(crate) fn disconnect(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    TreeDisconnectRequest::decode(req.msg).map_err(|e| e.status())?;
    let server = core.server.clone();
    let sref = core.session_or_deleted(req.session_id)?;
    let mut session = lock(&sref);
    session
        .trees
        .remove(&req.tree_id)
        .ok_or(NtStatus::NETWORK_NAME_DELETED)?;
    close_opens_of_tree(&server, &mut session, req.tree_id);
    session.pipes.retain(|_, p| lock(p).tree_id != req.tree_id);
    let mut b = Vec::with_capacity(4);
    b.put_u16(4);
    b.put_u16(0);
    Ok(Reply::ok(b))
}
