//! One module per SMB2 command, each opening with the [MS-SMB2] section it
//! implements. A module exposes `handle(core, req)`; commands that need file
//! I/O also expose a continuation type and `finish`. What a command returns
//! ([`Handled`]) and how a parked one goes on ([`Cont`], [`LookupCont`],
//! [`AsyncWork`]) are here.
//!
//! The commands know nothing of the connection driver ([`crate::conn`]): they work on
//! [`crate::exchange`] (the request, its reply, the connection's state), and the driver
//! dispatches to them.

use std::sync::Arc;

use ringshare_auth::krb5::iakerb::KdcRequest;
use ringshare_auth::DomainNtlmRequest;
use ringshare_vfs::Node;
use ringshare_wire::NtStatus;

use crate::exchange::{ConnCore, Reply};
use crate::io::IoOp;

pub(crate) mod close;
pub(crate) mod create;
pub(crate) mod echo;
pub(crate) mod flush;
pub(crate) mod home_asks;
pub(crate) mod ids;
pub(crate) mod io_check;
pub(crate) mod ioctl;
pub(crate) mod lock;
pub(crate) mod logon_user;
pub(crate) mod negotiate;
pub(crate) mod notify;
pub(crate) mod oplock_break;
pub(crate) mod pending;
pub(crate) mod pipe;
pub(crate) mod posix;
pub(crate) mod query_directory;
pub(crate) mod query_info;
pub(crate) mod quota;
pub(crate) mod read;
pub(crate) mod reparse;
pub(crate) mod resolve;
pub(crate) mod session_setup;
pub(crate) mod set_info;
pub(crate) mod stream;
pub(crate) mod tree;
pub(crate) mod write;

/// The continuation of a command waiting for file I/O.
pub(crate) enum Cont {
    Read(read::ReadCont),
    Write(write::WriteCont),
    Flush(flush::FlushCont),
}

/// What a command module returns.
pub(crate) enum Handled {
    Reply(Reply),
    Io {
        node: Arc<dyn Node>,
        op: IoOp,
        cont: Cont,
    },
    /// Go async: send STATUS_PENDING now, finish later (boxed, as `Lookup` is:
    /// a `Handled` is moved up through every layer of a command, and these are
    /// the large, rare ones).
    Async(Box<AsyncWork>),
    /// Ask something away from the I/O thread ([`crate::lookup`]), then go on.
    Lookup(Box<Parked>),
    /// A CREATE waits for other clients to acknowledge oplock or lease
    /// breaks: the connection parks its job and asks again.
    WaitForBreaks,
}

impl Handled {
    /// Ask `ask` away from the I/O thread, then go on as `cont` says.
    pub(crate) fn lookup(ask: crate::lookup::Lookup, cont: LookupCont) -> Handled {
        Handled::Lookup(Box::new(Parked { ask, cont }))
    }
}

/// A request that asks something away from the I/O thread, and how it goes on.
pub(crate) struct Parked {
    pub ask: crate::lookup::Lookup,
    pub cont: LookupCont,
}

/// How a parked request goes on once its answer is in.
pub(crate) enum LookupCont {
    /// The member runs again with the answer at hand ([`crate::lookup::DomainAnswer`]): it asked before it
    /// changed anything.
    Again(Asked),
    /// A logon whose exchange ended goes on with the account it acts as.
    Logon(Box<session_setup::Finishing>),
    /// A CREATE of a file homed on another node goes on once the home answered whether the
    /// open may join the file's entry.
    Admit(Box<create::AtHome>),
    /// A CREATE that overwrites an existing file on a share whose calls may wait on a network
    /// goes on once its file system job truncated it ([`create::changed`]).
    Changed(Box<create::Changing>),
    /// A CLOSE of an open of a file homed on another node is answered once the home took it.
    Close(Box<close::AtHome>),
    /// A LOCK or UNLOCK of a file homed on another node goes on once the home decided it.
    Lock(Box<lock::AtHome>),
    /// A SET_INFO of a delete pending of a file homed on another node is answered once the
    /// home set it.
    Disposition(Box<set_info::AtHome>),
    /// A SET_INFO whose change a file system job makes (a share whose calls may wait on a
    /// network) goes on once it is made ([`set_info::changed`]).
    SetInfo(Box<set_info::Changing>),
    /// A CREATE whose persistent open's record is being stored is answered once it is.
    Create(Box<create::Installing>),
    /// A durable reconnect of an open kept by another node (or a persistent open taken over
    /// from a dead one) is answered once the takeover, carried away from the I/O thread, is
    /// done.
    Takeover(Box<create::durable::TakingOver>),
    /// A durable reconnect (or a replayed CREATE) on a share whose calls may wait on a
    /// network is answered once its open's attributes are read in a file system job.
    Stat(Box<create::durable::Statting>),
    /// A CREATE refused at admission on a share whose calls may wait on a network is answered
    /// its refusal once a file system job removed the file or stream it made.
    Undo(create::Undoing),
    /// A request that waits for the cluster's store (a persistent open's record removed at its
    /// CLOSE, `closed`; stored again at a LOCK) is answered `reply` once it did (an error
    /// there is logged where it is asked).
    Answer {
        reply: crate::exchange::Reply,
        closed: Option<(u64, u64)>,
    },
}

/// What a SESSION_SETUP leg asked before it runs again.
pub(crate) enum Asked {
    /// The domain's check of an NTLM response.
    Ntlm(DomainNtlmRequest),
    /// A KDC's answer to an IAKerb client's request.
    Kdc(KdcRequest),
    /// The id source's answer about a descriptor's SIDs or ids (SET_INFO, CREATE, QUERY_INFO).
    Ids,
    /// NSS's answers to an lsarpc call (a pipe WRITE or FSCTL_PIPE_TRANSCEIVE).
    Names,
    /// A quota source's answer (QUERY_INFO).
    Quota,
    /// A file's home's answer to a read that changes nothing there (the delete pending a
    /// QUERY_INFO or a CHANGE_NOTIFY shows or checks: [`pending`]).
    Home,
    /// A file's home's answer to one of the questions of a request that may ask more than
    /// one (the tag of this one, and the answers kept from the earlier ones:
    /// [`crate::cmd::io_check::io_check_kept`]).
    Homes(u64, crate::lookup::HomeAnswers),
    /// A file system job's answer ([`crate::fsjob`]: a READ's or WRITE's checks on a share
    /// whose calls may wait on a network), and the answer the request was given before it
    /// asked, kept for it ([`crate::cmd::io_check`]).
    Fs(Option<Box<crate::lookup::DomainAnswer>>),
}

/// Work of a request that went async.
pub(crate) enum AsyncWork {
    /// A blocking byte-range lock, retried until granted, cancelled or closed.
    Lock(lock::PendingLock),
    /// CHANGE_NOTIFY: waits for a change, the end of its watch, or a cancel.
    Notify(notify::PendingNotify),
    /// CREATE waiting for other clients to acknowledge oplock or lease breaks.
    Create(create::PendingCreate),
}

impl AsyncWork {
    /// When to poll next (monotonic ms); `None` = only on cancel/close, or when the answer to
    /// its question is in ([`Polled::Ask`]).
    pub fn deadline_ms(&self) -> Option<u64> {
        match self {
            AsyncWork::Lock(p) => p.deadline_ms(),
            AsyncWork::Notify(_) => None,
            AsyncWork::Create(p) => p.deadline_ms(),
        }
    }

    /// Its question ([`Polled::Ask`]) went out as lookup `id`.
    pub fn asked(&mut self, id: u64) {
        match self {
            AsyncWork::Lock(p) => p.asked(id),
            AsyncWork::Create(p) => p.asked(id),
            AsyncWork::Notify(_) => {}
        }
    }

    /// Whether it waits for the answer to lookup `id`.
    pub fn asks(&self, id: u64) -> bool {
        match self {
            AsyncWork::Lock(p) => p.asks(id),
            AsyncWork::Create(p) => p.asks(id),
            AsyncWork::Notify(_) => false,
        }
    }

    /// A CANCEL came: true when it ends with the answer to its question instead (a lock its
    /// file's home may be granting now; a CREATE whose open's record is being stored), not
    /// at once.
    pub fn cancel_when_answered(&mut self) -> bool {
        match self {
            AsyncWork::Lock(p) => p.cancel_when_answered(),
            AsyncWork::Create(p) => p.cancel_when_answered(),
            AsyncWork::Notify(_) => false,
        }
    }
}

/// What trying an async operation again came to.
pub(crate) enum Polled {
    /// Not yet: it is tried again at its deadline.
    Wait,
    /// Finished (successfully or not): its final reply.
    Done(Result<Reply, NtStatus>),
    /// It asks this away from the I/O thread, and goes on with the answer ([`answered_async`]).
    Ask(crate::lookup::Lookup),
}

impl From<Option<Result<Reply, NtStatus>>> for Polled {
    fn from(done: Option<Result<Reply, NtStatus>>) -> Polled {
        done.map_or(Polled::Wait, Polled::Done)
    }
}

/// Try again.
pub(crate) fn poll_async(core: &mut ConnCore, session_id: u64, work: &mut AsyncWork) -> Polled {
    match work {
        AsyncWork::Lock(p) => lock::poll(core, session_id, p),
        AsyncWork::Notify(p) => notify::poll(core, p).into(),
        AsyncWork::Create(p) => create::poll(core, session_id, p),
    }
}

/// The answer to the question an async operation asked ([`Polled::Ask`]) is in.
pub(crate) fn answered_async(
    core: &mut ConnCore,
    session_id: u64,
    work: &mut AsyncWork,
    done: crate::lookup::LookupDone,
) -> Polled {
    match work {
        AsyncWork::Lock(p) => lock::retried(core, session_id, p, done),
        AsyncWork::Create(p) => create::answered(core, session_id, p, done),
        AsyncWork::Notify(_) => Polled::Wait,
    }
}

/// The operation was cancelled (or its session or connection went): undo what it holds.
pub(crate) fn cancel_async(core: &mut ConnCore, session_id: u64, work: &mut AsyncWork) {
    match work {
        AsyncWork::Lock(p) => lock::cancel(core, session_id, p),
        AsyncWork::Notify(p) => notify::cancel(core, p),
        AsyncWork::Create(p) => create::cancel(core, p),
    }
}

/// The answer a request that parked on `asked` runs again with ([`LookupCont::Again`]).
pub(crate) fn answer_of(
    core: &ConnCore,
    asked: Asked,
    done: crate::lookup::LookupDone,
) -> crate::lookup::DomainAnswer {
    use crate::lookup::{DomainAnswer, LookupDone};
    match (asked, done) {
        (Asked::Ntlm(r), LookupDone::DomainNtlm(a)) => DomainAnswer::Ntlm(r, a),
        (Asked::Ntlm(r), _) => DomainAnswer::Ntlm(r, Err("no answer".into())),
        (Asked::Kdc(r), LookupDone::Kdc(a)) => DomainAnswer::Kdc(r, a),
        (Asked::Kdc(r), _) => DomainAnswer::Kdc(r, Err("no answer".into())),
        (Asked::Ids, LookupDone::Ids(Ok(a))) => {
            core.server.logons.sid_map.remember(&a, core.now.mono_ms);
            DomainAnswer::Ids(Ok(()))
        }
        (Asked::Ids, LookupDone::Ids(Err(why))) => {
            tracing::warn!("the id source (winbind) gave no answer: {why}");
            DomainAnswer::Ids(Err(why))
        }
        (Asked::Ids, _) => DomainAnswer::Ids(Err("no answer".into())),
        (Asked::Names, LookupDone::Names(a)) => DomainAnswer::Names(*a),
        (Asked::Names, _) => DomainAnswer::Names(Default::default()),
        (Asked::Quota, LookupDone::Quota(a)) => DomainAnswer::Quota(Ok(a)),
        (Asked::Quota, _) => DomainAnswer::Quota(Err("no answer".into())),
        (Asked::Home, done) => DomainAnswer::Home(done.home()),
        (Asked::Homes(tag, mut kept), done) => {
            kept.push((tag, done.home()));
            DomainAnswer::Homes(kept)
        }
        (Asked::Fs(kept), LookupDone::Fs(done)) => DomainAnswer::Fs(done, kept),
        (Asked::Fs(kept), _) => DomainAnswer::Fs(
            crate::fsjob::FsDone::Done(Err(ringshare_vfs::FsError::Io)),
            kept,
        ),
    }
}

/// The answer left for a request that ran again and did not take it goes; a CREATE's file
/// system job's open in it is let go on the pool, not here ([`create::let_go_unused`]).
pub(crate) fn drop_answer(core: &mut ConnCore) {
    if let Some(crate::lookup::DomainAnswer::Fs(done, _)) = core.domain_answer.take() {
        create::let_go_unused(core, done);
    }
}

/// A parked request will not go on (its connection or session went, or it was cancelled):
/// what it made goes ([`create::abandon`], [`create::abandon_admission`], [`close::abandon`],
/// [`create::durable::abandon_takeover`]).
pub(crate) fn abandon(core: &mut ConnCore, cont: LookupCont) {
    match cont {
        LookupCont::Create(fin) => create::abandon(core, *fin),
        LookupCont::Admit(fin) => create::abandon_admission(core, *fin),
        LookupCont::Changed(fin) => create::abandon_change(core, *fin),
        LookupCont::Close(fin) => close::abandon(core, *fin),
        // The job makes its change all the same; a rename's home is told (set_info::abandon).
        LookupCont::SetInfo(fin) => set_info::abandon(core, *fin),
        LookupCont::Takeover(fin) => create::durable::abandon_takeover(core, *fin),
        LookupCont::Stat(fin) => fin.abandon(core),
        // A CREATE parked on its undo's job: the job removes what it made all the same, and
        // only then lets a replay of its DH2Q CREATE go on as a fresh CREATE (until then it is
        // told the CREATE is pending; the review of session 50, U1).
        LookupCont::Undo(_) => {}
        _ => {}
    }
}

/// What a file system job whose request goes on in a continuation made: the `Result<T,
/// NtStatus>` its calls answered ([`crate::fsjob::FsJob::answer_made`]), or the status it failed
/// with (a job that could not run: its file system error; anything else: INTERNAL_ERROR).
pub(crate) fn job_result<T: 'static>(done: crate::lookup::LookupDone) -> Result<T, NtStatus> {
    use crate::fsjob::FsDone;
    use crate::lookup::LookupDone;
    match done {
        LookupDone::Fs(FsDone::Made(m)) => m
            .take::<Result<T, NtStatus>>()
            .unwrap_or(Err(NtStatus::INTERNAL_ERROR)),
        LookupDone::Fs(FsDone::Done(Err(e))) => Err(crate::fsmap::status_of(e)),
        _ => Err(NtStatus::INTERNAL_ERROR),
    }
}

/// What the file system job this request asked made ([`crate::fsjob::FsJob::answer_made`]),
/// taken when the request runs again with its answer: the value, or the status the job failed
/// with (a job that could not run: its file system error; a value of another type:
/// INTERNAL_ERROR). `None` when no such answer is here; another answer is left in place for
/// whoever asked it (a READ or WRITE check's, cmd/io_check.rs).
pub(crate) fn job_made<T: 'static>(core: &mut ConnCore) -> Option<Result<T, NtStatus>> {
    use crate::fsjob::FsDone;
    use crate::lookup::DomainAnswer;
    match core.domain_answer.take() {
        Some(DomainAnswer::Fs(FsDone::Made(m), _)) => {
            Some(m.take::<T>().ok_or(NtStatus::INTERNAL_ERROR))
        }
        Some(DomainAnswer::Fs(FsDone::Done(r), _)) => Some(Err(r
            .err()
            .map_or(NtStatus::INTERNAL_ERROR, crate::fsmap::status_of))),
        other => {
            core.domain_answer = other;
            None
        }
    }
}

/// Whom a file system job about open `open` acts as (the credentials its node was opened
/// with), its order (the open's: [`crate::fsjob::order_of`]) and its share
/// ([`crate::fsjob::share_key`]): [`crate::fsjob::FsJob`]'s first three fields.
pub(crate) fn job_of_open(open: &crate::state::Open) -> (Option<ringshare_vfs::Who>, u64, u64) {
    (
        open.node.who().cloned(),
        crate::fsjob::order_of(open.id),
        crate::fsjob::share_key(&open.share.name),
    )
}

#[cfg(test)]
mod tests {
    use super::Handled;
    use crate::exchange::Reply;

    /// Every command's answer is moved up through its layers and into the
    /// connection: the rare, large parts are boxed so that a move stays a few
    /// cache lines (it was 392 bytes, most of them a parked lookup's).
    #[test]
    fn a_commands_answer_stays_within_three_cache_lines() {
        assert!(std::mem::size_of::<Reply>() <= 160);
        assert!(std::mem::size_of::<Result<Handled, ringshare_wire::NtStatus>>() <= 160);
    }
}
