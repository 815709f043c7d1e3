//! The delete pending a request reads (issue 33): a QUERY_INFO's FileStandardInformation or
//! FileAllInformation shows it, a CHANGE_NOTIFY on a directory checks it. It is the file's
//! home's: for a file homed on another node the request parks while the home is asked, away
//! from the I/O thread ([`crate::lookup::Lookup::Home`], carried by the driver's home-call
//! threads), and runs again with the answer at hand, as a request that asks the id source does
//! ([`crate::cmd::ids::parked`]): it changed nothing before it asked.
//!
//! Asked, not known locally: a node holding opens of a file homed elsewhere hears of a delete
//! pending only when its own client set it (the shadow entry follows the home's answers); the
//! home posts no change of it to the other holders, so a flag kept here would answer "not
//! pending" after another node's client set it, which a client that set it there and reads it
//! here (or a second client told to look) would see.

use ringshare_wire::NtStatus;

use crate::arbiter::{self, Decision};
use crate::cmd::ids::ASK_IDS;
use crate::exchange::ConnCore;
use crate::lookup::{DomainAnswer, Lookup};
use crate::state::Open;

/// Whether `open`'s file is delete-pending: decided here for a file homed here, else the home's
/// answer when this request asked and runs again; else Err([`ASK_IDS`]) with the question to the
/// home in [`ConnCore::ids_wanted`] (the request parks and runs again when it is answered).
pub(crate) fn delete_pending(core: &mut ConnCore, open: &Open) -> Result<bool, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Home(answer)) => {
            return arbiter::delete_pending_answered(&open.entry, answer).map(|(p, _)| p)
        }
        other => core.domain_answer = other,
    }
    match arbiter::delete_pending_or_ask(&core.server.node, open.key, &open.entry, None) {
        Decision::Made(pending) => pending.map(|(p, _)| p),
        Decision::Ask(ask, ()) => {
            core.ids_wanted = Some(Lookup::Home(ask));
            Err(ASK_IDS)
        }
    }
}
