//! [MS-SMB2] 3.3.5.22 Receiving an SMB2 OPLOCK_BREAK Acknowledgment: of an
//! oplock break (3.3.5.22.1) or a lease break (3.3.5.22.2). The rules of
//! what may be acknowledged live in [`crate::files::oplock`].

use ringshare_wire::consts::{LeaseState, OplockLevel};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::NtStatus;

use crate::arbiter;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::oplock::LeaseId;

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let mut body = Vec::with_capacity(36);
    match OplockBreak::decode(req.msg).map_err(|e| e.status())? {
        OplockBreak::Oplock {
            oplock_level,
            file_id,
        } => {
            let open = handles::find(core, req, file_id)?;
            let level =
                arbiter::ack_oplock(&core.server, open.key, &open.entry, open.id, oplock_level.0)?;
            OplockBreak::Oplock {
                oplock_level: OplockLevel(level),
                file_id,
            }
            .encode(&mut body);
        }
        OplockBreak::LeaseAck {
            lease_key,
            lease_state,
            ..
        } => {
            if core.dialect().is_none_or(|d| d.0 < 0x0210) {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            let id = LeaseId {
                client_guid: core.negotiated.as_ref().map_or([0; 16], |n| n.client_guid),
                key: lease_key,
            };
            let file = core.server.files.lease_file(id);
            tracing::debug!(
                key = ?lease_key,
                file = ?file,
                state = lease_state.0,
                "lease break acknowledgment"
            );
            let file = file.ok_or(NtStatus::OBJECT_NAME_NOT_FOUND)?;
            let state =
                arbiter::ack_lease(&core.server, file, id, lease_state.0, core.now.mono_ms)?;
            OplockBreak::LeaseAck {
                flags: 0,
                lease_key,
                lease_state: LeaseState(state),
                lease_duration: 0,
            }
            .encode(&mut body);
        }
        OplockBreak::LeaseBreakNotification(_) => return Err(NtStatus::INVALID_PARAMETER),
    }
    Ok(Reply::ok(body))
}
