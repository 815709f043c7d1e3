//! The byte-range lock check of a READ or a WRITE (issue 33): for a file homed on another node
//! when this node holds no I/O grant that decides it, the check is the home's. The request
//! changed nothing before it asked, so it parks while the home is asked, away from the I/O
//! thread ([`crate::lookup::Lookup::Home`], carried by the driver's home-call threads), and
//! runs again with the answer at hand, as a request that asks the id source does
//! ([`crate::cmd::ids::parked`]). The grant the answer brings is kept when it comes in
//! ([`arbiter::io_check_or_ask`]), so the READs and WRITEs after it decide here.
//!
//! A WRITE whose payload the driver received apart (spliced into pipes) parks the same way:
//! the driver keeps the pipes while the WRITE waits ([`crate::Connection::holds_payload`]) and
//! splices them into the file when it runs again, or drops them when it fails or its
//! connection goes. The driver is told to receive a WRITE whole when the check would need the
//! home ([`crate::Connection::detachable_write`]), so only one whose grant was taken back while
//! its payload came in waits so, and a connection holds one such payload at a time.

use ringshare_wire::NtStatus;

use crate::arbiter::{self, Decision, IoAsk};
use crate::cmd::ids::ASK_IDS;
use crate::exchange::ConnCore;
use crate::lookup::{DomainAnswer, Lookup};
use crate::state::Open;

/// May `io` of `open` happen: `Ok(writers)` (whether an open of the file may write it), or
/// FILE_LOCK_CONFLICT; decided here, or the home's answer when this request asked and runs
/// again; else Err([`ASK_IDS`]) with the question to the home in [`ConnCore::ids_wanted`]
/// (the request parks and runs again when it is answered).
pub(crate) fn io_check(core: &mut ConnCore, open: &Open, io: IoAsk) -> Result<bool, NtStatus> {
    match core.domain_answer.take() {
        Some(DomainAnswer::Home(answer)) => return arbiter::io_check_answered(answer),
        other => core.domain_answer = other,
    }
    match arbiter::io_check_or_ask(&core.server, open.key, &open.entry, io) {
        Decision::Made(r) => r,
        Decision::Ask(ask, ()) => {
            core.ids_wanted = Some(Lookup::Home(ask));
            Err(ASK_IDS)
        }
    }
}

/// [`io_check`] for a request that may make several checks, each of which may ask the home
/// (a copychunk's source and destination, chunk after chunk): the answers of the checks that
/// asked are kept, each by its question's tag (the file and the I/O), while the request parks
/// for the next one and runs again ([`crate::cmd::Asked::Homes`]), so that each check asks
/// once. A check whose answer is kept takes it; one decided here (a grant a kept answer
/// brought) asks nothing.
pub(crate) fn io_check_kept(core: &mut ConnCore, open: &Open, io: IoAsk) -> Result<bool, NtStatus> {
    let tag = tag_of(open, &io);
    let kept = match core.domain_answer.take() {
        Some(DomainAnswer::Homes(kept)) => kept,
        other => {
            core.domain_answer = other;
            Vec::new()
        }
    };
    let answer = kept.iter().find(|(t, _)| *t == tag).map(|(_, a)| a.clone());
    if let Some(answer) = answer {
        core.domain_answer = Some(DomainAnswer::Homes(kept));
        return arbiter::io_check_answered(answer);
    }
    match arbiter::io_check_or_ask(&core.server, open.key, &open.entry, io) {
        Decision::Made(r) => {
            if !kept.is_empty() {
                core.domain_answer = Some(DomainAnswer::Homes(kept));
            }
            r
        }
        Decision::Ask(ask, ()) => {
            core.ids_wanted = Some(Lookup::Home(ask));
            core.home_kept = Some((tag, kept));
            Err(ASK_IDS)
        }
    }
}

/// The tag of an I/O check's question: its file, open and range, and whether it writes.
fn tag_of(open: &Open, io: &IoAsk) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        open.key, io.owner, io.offset, io.length, io.write, io.change,
    )
        .hash(&mut h);
    h.finish()
}
