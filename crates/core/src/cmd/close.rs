//! (in progress)
use ringshare_wire::NtStatus;

use crate::conn::{ConnCore, Reply, Req};
use crate::server::ServerState;
use crate::state::Session;

pub(crate) fn handle(_core: &mut ConnCore, _req: &Req<'_>) -> Result<Reply, NtStatus> {
    Err(NtStatus::NOT_SUPPORTED)
}

/// Close every open of a session (logoff, connection loss).
pub(crate) fn close_all_opens(_server: &ServerState, session: &mut Session) {
    session.opens.clear();
}

/// Close every open of one tree (tree disconnect).
pub(crate) fn close_opens_of_tree(_server: &ServerState, session: &mut Session, tree_id: u32) {
    session.opens.retain(|_, o| o.tree_id != tree_id);
}
