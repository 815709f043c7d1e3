//! [MS-SMB2] 3.3.5.7 Receiving an SMB2 TREE_CONNECT Request and
//! 3.3.5.8 Receiving an SMB2 TREE_DISCONNECT Request.

use ringshare_wire::consts::{AccessMask, ShareCapabilities, ShareFlags, ShareType};
use ringshare_wire::tree::{TreeConnectRequest, TreeConnectResponse, TreeDisconnectRequest};
use ringshare_wire::{NtStatus, WriteExt};

use std::sync::Arc;

use ringshare_vfs::{OpenOptions, RelPath};

use crate::exchange::{ConnCore, Reply, Req};
use crate::identity::{self, TreeIdentity};
use crate::identity::{Account, Accounts};
use crate::limits;
use crate::loglimit::LogKind;
use crate::server::{lock, EncryptPolicy};
use crate::server::{ServerState, ShareDef};
use crate::state::{Session, SessionRef, Tree, TreeKind};

/// Everything a file share grants ([MS-SMB2] 2.2.13.1.1 FILE_ALL_ACCESS).
pub(crate) const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
/// Read, execute and attribute access for read-only shares.
pub(crate) const FILE_READ_ONLY_ACCESS: u32 = 0x0012_00A9;

pub(crate) fn connect(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let tc = TreeConnectRequest::decode(req.msg).map_err(|e| e.status())?;
    let name = tc.share_name().to_string();
    let server = core.server.clone();
    let sref = core.session_or_deleted(req.session_id)?;
    // What the tree needs from the session, taken under its lock; the share
    // is looked at (a file system call) without it.
    let (can_encrypt, account, user, unauthenticated) = {
        let session = lock(&sref);
        if session.trees.len() >= limits::TREES_PER_SESSION_MAX {
            return Err(NtStatus::INSUFFICIENT_RESOURCES);
        }
        let (account, user, unauthenticated) =
            acting_user(&session).ok_or(NtStatus::USER_SESSION_DELETED)?;
        (session.can_encrypt(), account, user, unauthenticated)
    };
    let (kind, source, ident, share_type, encrypt) = if name.eq_ignore_ascii_case("IPC$") {
        let ident = TreeIdentity {
            who: account.who.clone(),
            read_only: true,
            admin: false,
            sids: Default::default(),
        };
        (
            TreeKind::Ipc,
            None,
            ident,
            ShareType::PIPE,
            EncryptPolicy::IfRequired,
        )
    } else {
        let (share, home_of) = find_share(&server, &name)?;
        if unauthenticated && !share.guest_ok {
            if core.log_ok(LogKind::RefusedTree) {
                tracing::info!(share = %share.name, peer = %core.peer, "tree connect refused: guest access, and the share is not guest ok");
            }
            return Err(NtStatus::ACCESS_DENIED);
        }
        let ident = identity::for_tree(
            server.logons.accounts.as_ref(),
            &name,
            &user,
            &account,
            &share.rules,
            share.read_only,
        )
        .inspect_err(|_| {
            if core.log_ok(LogKind::RefusedTree) {
                tracing::info!(share = %name, user = %user, peer = %core.peer, "tree connect refused: the share's user lists do not admit the user");
            }
        })?;
        // [MS-SMB2] 3.3.5.7: a share that requires encryption refuses a session
        // that cannot encrypt.
        if core.encrypt_policy(share.encrypt) == EncryptPolicy::Required && !can_encrypt {
            if core.log_ok(LogKind::RefusedTree) {
                tracing::info!(share = %share.name, peer = %core.peer, "tree connect refused: the share requires encryption and this session cannot encrypt");
            }
            return Err(NtStatus::ACCESS_DENIED);
        }
        let source = Arc::clone(&share);
        let share = made_for(
            server.logons.accounts.as_ref(),
            share,
            &name,
            &user,
            &account,
            home_of.as_ref(),
        )?;
        // The user must be able to enter the share's directory (Samba
        // changes into it as the user and answers BAD_NETWORK_NAME when it
        // cannot).
        let mut opts = OpenOptions::read_existing();
        (opts.read, opts.directory) = (false, true);
        if let Err(e) = share.backend.open(&ident.who, &RelPath::root(), &opts) {
            if core.log_ok(LogKind::RefusedTree) {
                tracing::info!(share = %name, user = %user, peer = %core.peer, "tree connect refused: the share's directory cannot be entered as this user ({e})");
            }
            return Err(NtStatus::BAD_NETWORK_NAME);
        }
        let encrypt = share.encrypt;
        (
            TreeKind::Disk(share),
            Some(source),
            ident,
            ShareType::DISK,
            encrypt,
        )
    };
    let read_only = ident.read_only;
    let ca = matches!(&kind, TreeKind::Disk(s) if s.continuous_availability);
    // [MS-SMB2] 2.2.10: the share asks for compressed data, on a connection
    // that can compress.
    let compress_data = matches!(&kind, TreeKind::Disk(s) if s.compress_data)
        && crate::exchange::compress::agreed(core).is_some();
    let mut session = lock(&sref);
    if session.closed {
        return Err(NtStatus::USER_SESSION_DELETED);
    }
    if session.trees.len() >= limits::TREES_PER_SESSION_MAX {
        return Err(NtStatus::INSUFFICIENT_RESOURCES);
    }
    let encrypt_data = can_encrypt
        && matches!(
            core.encrypt_policy(encrypt),
            EncryptPolicy::Desired | EncryptPolicy::Required
        );
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
            source,
            who: ident.who,
            admin: ident.admin,
            sids: ident.sids,
            read_only,
            maximal_access,
            encrypt_required: encrypt == EncryptPolicy::Required,
            refused: false,
        },
    );
    let resp = TreeConnectResponse {
        share_type,
        share_flags: if encrypt_data {
            ShareFlags::ENCRYPT_DATA
        } else {
            ShareFlags::MANUAL_CACHING
        } | if compress_data {
            ShareFlags::COMPRESS_DATA
        } else {
            ShareFlags::empty()
        },
        capabilities: share_caps(core, ca, share_type),
        maximal_access: AccessMask(maximal_access),
    };
    let mut body = Vec::with_capacity(16);
    resp.encode(&mut body);
    let mut r = Reply::ok(body);
    r.rare().tree_id = Some(id);
    Ok(r)
}

/// The share a TREE_CONNECT names: a configured one, else the `[homes]`
/// share of the Unix account of that name (with that account).
/// After a re-authentication as someone else, the session's trees act as the
/// new user, under the share's user rules (`valid users`, `force user`,
/// `read list`… which Samba checks again at the next request; `guest ok`
/// is, as there, only a tree connect's concern). A tree whose share does not
/// admit the new user refuses every request but TREE_DISCONNECT. Opens keep
/// acting as the user who opened them.
pub(crate) fn follow_new_user(accounts: &dyn Accounts, session: &mut crate::state::Session) {
    let Some((account, user, _)) = acting_user(session) else {
        return;
    };
    for tree in session.trees.values_mut() {
        let ident = match &tree.kind {
            TreeKind::Ipc => Ok(TreeIdentity {
                who: account.who.clone(),
                read_only: true,
                admin: false,
                sids: Default::default(),
            }),
            TreeKind::Disk(share) => identity::for_tree(
                accounts,
                &share.name,
                &user,
                &account,
                &share.rules,
                share.read_only,
            ),
        };
        if ident.is_err() {
            tracing::info!(user = %user, "after re-authentication a tree's share does not admit the new user: its requests are refused");
        }
        take_identity(tree, ident.ok());
    }
}

/// The tree acts as `ident` from now on; without one (its share does not
/// admit the user) every request on it but TREE_DISCONNECT is refused.
fn take_identity(tree: &mut Tree, ident: Option<TreeIdentity>) {
    match ident {
        Some(ident) => {
            tree.who = ident.who;
            tree.admin = ident.admin;
            tree.sids = ident.sids;
            tree.read_only = ident.read_only;
            tree.refused = false;
        }
        None => tree.refused = true,
    }
}

/// The account a session acts as, the user name share rules see (the
/// account's for guest and anonymous sessions) and whether it is such an
/// unauthenticated session; `None` before authentication completed.
fn acting_user(session: &Session) -> Option<(Account, String, bool)> {
    let account = session.account.clone()?;
    let unauthenticated = session.is_guest || session.is_anonymous;
    let user = if unauthenticated {
        account.name.clone()
    } else {
        session.user.clone()
    };
    Some((account, user, unauthenticated))
}

/// After a reload ([`ServerState::replace_shares`]): the ids of the session's
/// trees whose share is gone are returned (the caller ends their waiting
/// requests, then [`drop_tree`]s them); a tree whose
/// share changed is made again from the new definition and takes its
/// settings and user rules for what it does next (opens made before keep
/// theirs). A tree whose share did not change is left alone.
pub(crate) fn follow_new_shares(server: &ServerState, sref: &SessionRef) -> Vec<u32> {
    let (trees, account, user, unauthenticated, can_encrypt) = {
        let session = lock(sref);
        let Some((account, user, unauthenticated)) = acting_user(&session) else {
            return Vec::new();
        };
        let trees: Vec<(u32, String, Arc<ShareDef>)> = session
            .trees
            .iter()
            .filter_map(|(id, t)| match (&t.kind, &t.source) {
                (TreeKind::Disk(made), Some(src)) => {
                    Some((*id, made.name.clone(), Arc::clone(src)))
                }
                _ => None,
            })
            .collect();
        let can_encrypt = session.can_encrypt();
        (trees, account, user, unauthenticated, can_encrypt)
    };
    let mut removed = Vec::new();
    for (id, name, old) in trees {
        // The share as configured now, made for this user (a file system
        // call: without the session's lock).
        let made = find_share(server, &name).and_then(|(src, home_of)| {
            if Arc::ptr_eq(&src, &old) {
                return Ok(None);
            }
            let made = made_for(
                server.logons.accounts.as_ref(),
                Arc::clone(&src),
                &name,
                &user,
                &account,
                home_of.as_ref(),
            )?;
            Ok(Some((src, made)))
        });
        let mut session = lock(sref);
        if !session
            .trees
            .get(&id)
            .is_some_and(|t| t.source.as_ref().is_some_and(|s| Arc::ptr_eq(s, &old)))
        {
            continue;
        }
        match made {
            Ok(None) => {}
            Ok(Some((src, made))) => {
                let ident = identity::for_tree(
                    server.logons.accounts.as_ref(),
                    &name,
                    &user,
                    &account,
                    &made.rules,
                    made.read_only,
                );
                let admitted = (!unauthenticated || made.guest_ok)
                    && (made.encrypt != EncryptPolicy::Required || can_encrypt);
                let Some(tree) = session.trees.get_mut(&id) else {
                    continue;
                };
                let ident = ident.ok().filter(|_| admitted);
                if ident.is_none() {
                    tracing::info!(share = %name, user = %user, "after a reload the share does not admit this user: the tree's requests are refused");
                }
                take_identity(tree, ident);
                tree.encrypt_required = made.encrypt == EncryptPolicy::Required;
                tree.kind = TreeKind::Disk(made);
                tree.source = Some(src);
            }
            Err(_) => {
                tracing::info!(share = %name, user = %user, "the share is gone after a reload: its tree connect is disconnected");
                removed.push(id);
            }
        }
    }
    removed
}

/// Disconnect a tree as TREE_DISCONNECT does: its opens and pipes are
/// closed. False when the session has no such tree.
pub(crate) fn drop_tree(core: &mut ConnCore, sref: &SessionRef, tree_id: u32) -> bool {
    let opens = {
        let mut session = lock(sref);
        if session.trees.remove(&tree_id).is_none() {
            return false;
        }
        session.pipes.retain(|_, p| lock(p).tree_id != tree_id);
        crate::opens::take_where(&mut session, |o| o.tree_id == tree_id)
    };
    let asks = crate::opens::close_all(&core.server, opens);
    core.post_closes(asks);
    true
}

fn find_share(
    server: &ServerState,
    name: &str,
) -> Result<(Arc<ShareDef>, Option<Account>), NtStatus> {
    let set = server.shares();
    if let Some(s) = set.share(name) {
        return Ok((Arc::clone(s), None));
    }
    let Some(homes) = &set.homes else {
        return Err(NtStatus::BAD_NETWORK_NAME);
    };
    match server.logons.accounts.user(name) {
        Ok(a) if !a.home.is_empty() => Ok((Arc::clone(homes), Some(a))),
        _ => Err(NtStatus::BAD_NETWORK_NAME),
    }
}

/// A share whose directory depends on who connects, made for this tree:
/// its path with the substitutions made (`%H` of a `[homes]` share is the
/// home of the account it is named after) and opened; a fixed share as it is.
fn made_for(
    accounts: &dyn Accounts,
    share: Arc<ShareDef>,
    name: &str,
    user: &str,
    account: &Account,
    home_of: Option<&Account>,
) -> Result<Arc<ShareDef>, NtStatus> {
    let Some(template) = &share.template else {
        return Ok(share);
    };
    let group = accounts
        .group_name(account.who.gid())
        .unwrap_or_else(|| account.who.gid().to_string());
    let subst = identity::Subst {
        share: name,
        user,
        account: &account.name,
        group: &group,
        home: home_of.map_or(account.home.as_str(), |a| a.home.as_str()),
    };
    let path = subst.apply(&template.path);
    let backend = (template.open)(&path).map_err(|e| {
        tracing::info!(share = %name, user = %user, "refusing a tree connect: {path}: {e}");
        NtStatus::BAD_NETWORK_NAME
    })?;
    Ok(Arc::new(share.with_backend(name, backend)))
}

pub(crate) fn disconnect(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    TreeDisconnectRequest::decode(req.msg).map_err(|e| e.status())?;
    let sref = core.session_or_deleted(req.session_id)?;
    if !drop_tree(core, &sref, req.tree_id) {
        return Err(NtStatus::NETWORK_NAME_DELETED);
    }
    let mut b = Vec::with_capacity(4);
    b.put_u16(4);
    b.put_u16(0);
    Ok(Reply::ok(b))
}

/// A share's capabilities in TREE_CONNECT's answer: every node of a cluster
/// serves it at once (SCALEOUT, as Samba marks its clustered shares); a
/// continuously available share says so from SMB 3.0 on; CLUSTER when the
/// node serves Witness (`cluster witness`, docs/cluster.md).
fn share_caps(core: &ConnCore, ca: bool, share_type: ShareType) -> ShareCapabilities {
    let mut c = ShareCapabilities::empty();
    if share_type != ShareType::DISK {
        return c;
    }
    if let Some(link) = core.server.node.link() {
        c |= ShareCapabilities::SCALEOUT;
        if link.witness() {
            c |= ShareCapabilities::CLUSTER;
        }
    }
    if ca && core.dialect().is_some_and(|d| d.0 >= 0x0300) {
        c |= ShareCapabilities::CONTINUOUS_AVAILABILITY;
    }
    c
}
