//! SET_INFO's file system part as a file system job (issue 33, step 6; docs/cluster-internals.md,
//! "File system calls off the I/O thread"): on a share whose calls may wait on a network
//! ([`crate::config::ShareDef::offloaded`]: FUSE, CephFS, NFS) the change is decided on the I/O
//! thread (access, the request's checks, the breaks of other clients' caching), its calls
//! (times, DOS attributes, size, allocation, EAs, the security descriptor, and the write time
//! a written handle shows now) are made by one [`FsJob::change`] on the pool, acting as the
//! open's user, and the request parks meanwhile ([`LookupCont::SetInfo`]). The job is of the
//! open's order, so the open's later requests wait for it (crates/core/src/conn/behind.rs).
//! Once it answers, the I/O thread books the write time and tells watchers and directory
//! leases ([`changed`]) of what the job changed only: a job that failed tells nothing.

use std::sync::Arc;

use ringshare_vfs::{Node, SetTimes, UnixNanos};
use ringshare_wire::consts::SecurityInformation;
use ringshare_wire::security::SecurityDescriptor;
use ringshare_wire::NtStatus;

use crate::cmd::{Handled, LookupCont};
use crate::exchange::{ConnCore, Reply};
use crate::fsjob::{keep_write_time, Carried, FsDone, FsJob};
use crate::fsmap::status_of;
use crate::io::Now;
use crate::lookup::DomainAnswer;
use crate::notify;
use crate::server::ServerState;
use crate::sidcache::Xid;
use crate::state::Open;
use crate::writetime;

/// A SET_INFO parked while its file system job makes the change ([`changed`] goes on).
pub(crate) struct Changing {
    open: Arc<Open>,
    now: Now,
    after: After,
    /// What runs when the request is let go before it went on with the job's answer (its
    /// connection went): a rename's word to the file's home ([`super::moves`]).
    abandoned: Option<Abandoned>,
}

/// What runs when a SET_INFO parked on its job is let go ([`Changing::abandoned`]).
pub(super) type Abandoned = Box<dyn FnOnce(&mut ConnCore, &Arc<Open>) + Send>;

/// A SET_INFO parked on its job will not go on (its connection went): the job makes its change
/// all the same, and what the request was to do after it that must be done anyway is done.
pub(crate) fn abandon(core: &mut ConnCore, fin: Changing) {
    if let Some(a) = fin.abandoned {
        a(core, &fin.open);
    }
}

/// What the I/O thread does once the job answered, by class.
enum After {
    /// FileBasicInformation: the write time a client set (it sticks), if any.
    Basic { mtime: Option<UnixNanos> },
    /// FileEndOfFileInformation.
    Size,
    /// FileAllocationInformation (the write time is booked whether or not the rest worked, as
    /// on the I/O thread, where it is written first).
    Allocation,
    /// FileFullEaInformation or a security descriptor: watchers hear of what changed.
    Told,
    /// A rename or hard link (cmd/set_info/moves.rs): what the I/O thread does with how its
    /// job ended.
    Then(Then),
}

/// What the I/O thread does once a rename's or link's job answered, with how it ended.
pub(super) type Then = Box<
    dyn FnOnce(&mut ConnCore, &Arc<Open>, Now, Result<(), NtStatus>) -> Result<Handled, NtStatus>
        + Send,
>;

/// The job and how the request goes on after it.
fn asked(open: &Arc<Open>, now: Now, after: After, job: FsJob) -> Handled {
    asked_or_abandoned(open, now, (after, None), job)
}

/// [`asked`], with what runs if the request is let go first.
fn asked_or_abandoned(
    open: &Arc<Open>,
    now: Now,
    (after, abandoned): (After, Option<Abandoned>),
    job: FsJob,
) -> Handled {
    Handled::lookup(
        crate::lookup::Lookup::Fs(job),
        LookupCont::SetInfo(Box::new(Changing {
            open: Arc::clone(open),
            now,
            after,
            abandoned,
        })),
    )
}

/// A rename's or link's job: the request parks until it answers, then `then` goes on; if it is
/// let go first, `abandoned` runs.
pub(super) fn moved(
    open: &Arc<Open>,
    now: Now,
    (then, abandoned): (Then, Option<Abandoned>),
    job: FsJob,
) -> Handled {
    asked_or_abandoned(open, now, (After::Then(then), abandoned), job)
}

/// A job of `open`'s order about its share, acting as its user.
fn job_of(
    open: &Open,
    what: &'static str,
    calls: impl FnOnce() -> (u32, Result<(), NtStatus>) + Send + 'static,
) -> FsJob {
    let (who, order, share) = crate::cmd::job_of_open(open);
    FsJob::change(who, order, share, what, calls)
}

/// What changed (`made`) when the calls worked; nothing when they failed.
fn all_or_nothing(r: Result<u32, NtStatus>) -> (u32, Result<(), NtStatus>) {
    match r {
        Ok(made) => (made, Ok(())),
        Err(s) => (0, Err(s)),
    }
}

/// FileBasicInformation's `plan` ([`super::Basic`]), decided: the times and attributes set,
/// then the write time a written handle shows now (when the client did not set it).
pub(super) fn basic(open: &Arc<Open>, now: Now, plan: super::Basic) -> Handled {
    let mtime = plan.times.mtime;
    let t = match mtime {
        None => writetime::immediate_time(open, now),
        Some(_) => None,
    };
    if plan.changed == 0 && plan.attrs.is_none() && t.is_none() {
        // Nothing to set and no write time to show: answered here, as the job's answer would
        // be (the review of session 46, finding 8's rest).
        let _ = writetime::immediate_booked(open, now);
        return Handled::Reply(Reply::ok(super::ok_body()));
    }
    let node = Arc::clone(&open.node);
    let job = job_of(open, "a SET_INFO's times and attributes", move || {
        let mut times_set = false;
        let (made, r) = all_or_nothing(basic_calls(node.as_ref(), &plan, t, &mut times_set));
        (made | if times_set { TIMES_SET } else { 0 }, r)
    });
    asked(open, now, After::Basic { mtime }, job)
}

/// Beside the notify bits a FileBasicInformation's job answers: its times were set, so a write
/// time the client set is kept fixed even when its attributes were then refused (as on the
/// I/O thread: the review of session 46, finding 8). Not a completion filter bit.
const TIMES_SET: u32 = 1 << 31;

/// `times_set`: the times were set (before the attributes, which may fail).
fn basic_calls(
    node: &dyn Node,
    plan: &super::Basic,
    t: Option<UnixNanos>,
    times_set: &mut bool,
) -> Result<u32, NtStatus> {
    let mut made = plan.changed;
    if made != 0 {
        node.set_times(&plan.times).map_err(status_of)?;
        *times_set = true;
    }
    if let Some(a) = plan.attrs {
        node.set_dos_attributes(a).map_err(status_of)?;
        made |= notify::filter::ATTRIBUTES;
    }
    keep_write_time(node, t);
    Ok(made)
}

/// FileEndOfFileInformation: the file's size set, then the write time a written handle shows
/// now.
pub(super) fn end_of_file(open: &Arc<Open>, now: Now, len: u64) -> Handled {
    let t = writetime::immediate_time(open, now);
    let node = Arc::clone(&open.node);
    let job = job_of(open, "a SET_INFO's end of file", move || {
        all_or_nothing(node.set_len(len).map_err(status_of).map(|()| {
            keep_write_time(node.as_ref(), t);
            notify::filter::SIZE
        }))
    });
    asked(open, now, After::Size, job)
}

/// FileAllocationInformation: the write time a written handle shows now, the file's size read,
/// the file cut when the allocation is smaller ([MS-FSA] 2.1.5.14.1), the allocation set.
pub(super) fn allocation(open: &Arc<Open>, now: Now, size: u64) -> Handled {
    let t = writetime::immediate_time(open, now);
    let node = Arc::clone(&open.node);
    let job = job_of(open, "a SET_INFO's allocation", move || {
        keep_write_time(node.as_ref(), t);
        let old = match node.stat() {
            Ok(a) => a.size,
            Err(e) => return (0, Err(status_of(e))),
        };
        let mut made = 0;
        if size < old {
            if let Err(e) = node.set_len(size) {
                return (0, Err(status_of(e)));
            }
            made = notify::filter::SIZE;
        }
        (made, node.set_allocation(size).map_err(status_of))
    });
    asked(open, now, After::Allocation, job)
}

/// FileFullEaInformation: the EAs parsed on the I/O thread (`eas`), stored.
pub(super) fn eas(open: &Arc<Open>, now: Now, eas: Vec<(String, Vec<u8>)>) -> Handled {
    let node = Arc::clone(&open.node);
    let job = job_of(open, "a SET_INFO's EAs", move || {
        let r = crate::cmd::query_info::apply_eas(node.as_ref(), &eas);
        all_or_nothing(r.map(|()| notify::filter::EA))
    });
    asked(open, now, After::Told, job)
}

/// A security descriptor's parts decided on the I/O thread: `given`'s parts `info` merged into
/// the file's descriptor and stored ([`crate::ntsd::set`], when `info` is not empty), then the
/// mode set (`mode`: a POSIX open's chmod, or macOS's NFS ACE).
pub(super) fn security(
    core: &ConnCore,
    open: &Arc<Open>,
    (given, info): (SecurityDescriptor, SecurityInformation),
    mode: Option<u32>,
) -> Handled {
    let server = Arc::clone(&core.server);
    let (o, now) = (Arc::clone(open), core.now);
    let job = job_of(open, "a SET_INFO's security descriptor", move || {
        let set = || -> Result<u32, NtStatus> {
            if !info.is_empty() {
                let ids = server.logons.ids(now.mono_ms);
                let from = crate::ntsd::From::Client;
                let node = o.node.as_ref();
                crate::ntsd::set(node, &o.share, &given, info, from, &ids, now.filetime)?;
            }
            if let Some(m) = mode {
                o.node.set_mode(m).map_err(status_of)?;
            }
            Ok(notify::filter::SECURITY)
        };
        all_or_nothing(set())
    });
    asked(open, core.now, After::Told, job)
}

/// The Unix ids of the file's descriptor (as it is stored, or made from its POSIX ACL), which
/// a security change on a server with an id source asks about before it is made
/// ([`crate::cmd::ids::before_set`]): read in a job of the open's order (the request parks and
/// runs again with them: Err([`crate::cmd::ids::ASK_IDS`])). Run again with the id source's
/// answer instead (it asked after this job), none are needed: `before_set` takes that answer.
pub(super) fn current_ids(core: &mut ConnCore, open: &Arc<Open>) -> Result<Vec<Xid>, NtStatus> {
    if let Some(read) = crate::cmd::job_made::<Result<Vec<Xid>, NtStatus>>(core) {
        return read.and_then(|ids| ids);
    }
    match core.domain_answer.take() {
        Some(answered @ DomainAnswer::Ids(_)) => {
            core.domain_answer = Some(answered);
            Ok(Vec::new())
        }
        other => {
            core.domain_answer = other;
            let (server, o) = (Arc::clone(&core.server), Arc::clone(open));
            let now_ms = core.now.mono_ms;
            let (who, order, share) = crate::cmd::job_of_open(open);
            core.ids_wanted = Some(crate::lookup::Lookup::Fs(FsJob::answer_made(
                who,
                order,
                share,
                "a SET_INFO's read of the descriptor",
                move || {
                    let read = || -> Result<Vec<Xid>, NtStatus> {
                        let attr = o.node.stat_without_dos().map_err(status_of)?;
                        let sids = (&server.logons.sid_map, now_ms);
                        let sd = crate::ntsd::descriptor(o.node.as_ref(), &attr, &o.share, sids)?;
                        Ok(crate::cmd::ids::unix_ids(&sd))
                    };
                    Carried::new(read(), false)
                },
            )));
            Err(crate::cmd::ids::ASK_IDS)
        }
    }
}

/// A SET_INFO's job answered (`done`): the write time it wrote is booked, watchers and the
/// leases on the file's directory hear of what it changed, and the SET_INFO is answered with
/// how it ended (the status of the call that failed, as on the I/O thread).
pub(crate) fn changed(
    core: &mut ConnCore,
    fin: Changing,
    done: crate::lookup::LookupDone,
) -> Result<Handled, NtStatus> {
    let Changing {
        open, now, after, ..
    } = fin;
    let after = match after {
        After::Then(then) => {
            let r = crate::cmd::job_result::<()>(done);
            return then(core, &open, now, r);
        }
        after => after,
    };
    let fin = Changing {
        open,
        now,
        after,
        abandoned: None,
    };
    let (made, r) = match done {
        crate::lookup::LookupDone::Fs(FsDone::Changed(made, r)) => (made, r),
        // The job did not run (its user could not be acted as).
        crate::lookup::LookupDone::Fs(FsDone::Done(Err(e))) => return Err(status_of(e)),
        _ => return Err(NtStatus::INTERNAL_ERROR),
    };
    let (server, open, now) = (&core.server, &fin.open, fin.now);
    let (times_set, made) = (made & TIMES_SET != 0, made & !TIMES_SET);
    match fin.after {
        After::Basic { mtime } => {
            if let (Some(t), true) = (mtime, times_set) {
                writetime::set_sticky(&server.files, open, t);
            }
            if r.is_ok() {
                // The time the job wrote (the same `now`), or none once the client set it.
                let _ = writetime::immediate_booked(open, now);
            }
        }
        After::Size if r.is_ok() => {
            let _ = writetime::immediate_booked(open, now);
        }
        After::Allocation => {
            let _ = writetime::immediate_booked(open, now);
        }
        _ => {}
    }
    tell(server, open, &fin.after, made, now.mono_ms);
    r?;
    Ok(Handled::Reply(Reply::ok(super::ok_body())))
}

/// Watchers hear of `made`; a change of the file's times, attributes or size breaks the
/// leases on its directory ([`super::entry_changed`]).
fn tell(server: &ServerState, open: &Open, after: &After, made: u32, now_ms: u64) {
    notify::modified(server, open, made);
    let entry = matches!(after, After::Basic { .. } | After::Size | After::Allocation);
    if entry && made != 0 {
        super::entry_changed(server, open, now_ms);
    }
}

/// The times of a FileBasicInformation, for [`super::Basic`].
pub(super) fn times_bits(times: &SetTimes) -> u32 {
    let mut changed = 0;
    for (t, bit) in [
        (times.atime, notify::filter::LAST_ACCESS),
        (times.mtime, notify::filter::LAST_WRITE),
        (times.btime, notify::filter::CREATION),
    ] {
        if t.is_some() {
            changed |= bit;
        }
    }
    changed
}
