//! [MS-SMB2] 3.3.5.22 Receiving an SMB2 OPLOCK_BREAK Acknowledgment: of an
//! oplock break (3.3.5.22.1) or a lease break (3.3.5.22.2). The rules of
//! what may be acknowledged live in [`crate::files::oplock`].

use ringshare_wire::consts::{LeaseState, OplockLevel};
use ringshare_wire::misc::OplockBreak;
use ringshare_wire::NtStatus;

use crate::arbiter::{self, Decision};
use crate::cmd::ids::ASK_IDS;
use crate::exchange::handles;
use crate::exchange::{ConnCore, Reply, Req};
use crate::files::oplock::LeaseId;
use crate::lookup::{DomainAnswer, Lookup};

/// The home's answer when this request asked it and runs again ([`crate::cmd::ids::parked`]).
fn home_answer(core: &mut ConnCore) -> Option<Result<Vec<u8>, NtStatus>> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Home(answer)) => Some(answer),
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// An acknowledgment decided here, or Err([`ASK_IDS`]) with its call to the file's home (a
/// file homed on another node) in [`ConnCore::ids_wanted`]: the request parks and runs again
/// with the answer, away from the I/O thread. It changed nothing before it asked.
fn made<T>(core: &mut ConnCore, d: Decision<Result<T, NtStatus>, ()>) -> Result<T, NtStatus> {
    match d {
        Decision::Made(r) => r,
        Decision::Ask(ask, ()) => {
            core.ids_wanted = Some(Lookup::Home(ask));
            Err(ASK_IDS)
        }
    }
}

pub(crate) fn handle(core: &mut ConnCore, req: &Req<'_>) -> Result<Reply, NtStatus> {
    let mut body = Vec::with_capacity(36);
    match OplockBreak::decode(req.msg).map_err(|e| e.status())? {
        OplockBreak::Oplock {
            oplock_level,
            file_id,
        } => {
            let open = handles::find(core, req, file_id)?;
            let level = match home_answer(core) {
                Some(a) => arbiter::ack_oplock_answered(&open.entry, open.id, a)?,
                None => {
                    let (key, entry, id) = (open.key, &open.entry, open.id);
                    let d =
                        arbiter::ack_oplock_or_ask(&core.server, key, entry, id, oplock_level.0);
                    made(core, d)?
                }
            };
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
            let state = match home_answer(core) {
                Some(a) => arbiter::ack_lease_answered(&core.server.files, file, id, a)?,
                None => {
                    let now_ms = core.now.mono_ms;
                    let d =
                        arbiter::ack_lease_or_ask(&core.server, file, id, lease_state.0, now_ms);
                    made(core, d)?
                }
            };
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
